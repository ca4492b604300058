/* jail.h - `brisk jail`: brisk run confined to a chroot, new namespaces, cgroup v2, rlimits, no capabilities. */
#ifndef BRISK_JAIL_H
#define BRISK_JAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define JAIL_ID_MAX	   64		 /* as Firecracker's validate_instance_id */
#define JAIL_DEFAULT_BASE  "/srv/jailer" /* as Firecracker's --chroot-base-dir default */
#define JAIL_MAX_CGROUPS   16
#define JAIL_MAX_FILES	   24 /* kernel, initrd, cpu template, disks */
#define JAIL_MAX_OUT	   16 /* in-jail paths brisk creates: sockets, logs, reports */
#define JAIL_MAX_OWNED	   (4 * JAIL_MAX_FILES + JAIL_MAX_OUT)
#define JAIL_EXEC_NAME	   "brisk"     /* the copied binary: /brisk inside the jail */
#define JAIL_PID_FILE	   "brisk.pid" /* <base>/brisk/<ID>/brisk.pid: the jailed brisk's host pid */
#define JAIL_CGROUP_PARENT "brisk"     /* <cgroup2 mount>/brisk/<ID> */

/* One --cgroup KEY=VALUE: the file KEY of the VM's cgroup gets VALUE. */
struct jail_cgroup_kv {
	const char *key;
	const char *value;
};

/* A host file brisk jail places into the chroot (a hard link, or a bind mount across file systems). */
struct jail_file {
	const char *host; /* the path RUN-ARGS named, on the host */
	char name[24];	  /* its name in the jail's root directory: "kernel", "disk0", ... */
	bool ro;	  /* bind mounts only: read-only (kernel, initrd, template, ",ro" disks) */
	bool bind;	  /* set while building: link() said EXDEV, so the child bind-mounts it */
};

struct jail_config {
	const char *id;
	uid_t uid;
	gid_t gid;
	const char *chroot_base; /* as given; JAIL_DEFAULT_BASE when absent */
	const char *netns;	 /* --netns PATH or NULL */
	bool daemonize;
	struct jail_cgroup_kv cg[JAIL_MAX_CGROUPS];
	unsigned nr_cg;
	bool has_nofile, has_fsize;
	uint64_t nofile, fsize;
	/* RUN-ARGS with the placed files' paths rewritten; strings it allocated are in owned[]. */
	int run_argc;
	char **run_argv;
	struct jail_file files[JAIL_MAX_FILES];
	unsigned nr_files;
	const char *out[JAIL_MAX_OUT]; /* in-jail paths of files brisk creates: their directories are made */
	unsigned nr_out;
	char *owned[JAIL_MAX_OWNED];
	unsigned nr_owned;
};

/* ID rules (Firecracker's): 1..64 characters of [A-Za-z0-9-]. Returns true when `id` is valid. */
bool jail_id_valid(const char *id);

/*
 * One --cgroup argument "KEY=VALUE" into kv (pointers into arg, which must
 * outlive kv). KEY: a cgroup interface file name ("cpu.max"): [A-Za-z0-9_.-],
 * a '.', no '/', not "." or "..", not cgroup.procs/threads/subtree_control
 * (the jail itself manages membership); VALUE: non-empty, no newline.
 * Returns 0 or -EINVAL with err naming the argument.
 */
int jail_parse_cgroup(char *arg, struct jail_cgroup_kv *kv, char *err, size_t errlen);

/*
 * One --resource-limit argument "no-file=N" or "fsize=N" (N a decimal number,
 * 0..2^63) into cfg. Returns 0 or -EINVAL with err naming the argument.
 */
int jail_parse_rlimit(const char *arg, struct jail_config *cfg, char *err, size_t errlen);

/*
 * The in-jail path of a file brisk creates (socket, log, report) checked: not
 * empty, no ".." component, at most PATH_MAX. Returns 0 or -EINVAL with err.
 */
int jail_check_inner_path(const char *what, const char *path, char *err, size_t errlen);

/*
 * RUN-ARGS (argv[0] = "run" or "--api-sock"...) into cfg->run_argv: --kernel,
 * --initrd, --disk and a --cpu-template file become /kernel, /initrd, /diskN,
 * /cpu-template.json (cfg->files records where they come from); --api-sock,
 * --serial file:, --report-json and --vsock uds= paths are in-jail paths,
 * recorded in cfg->out. --config-file, --snapshot, --mem and the restore
 * command are refused (their files name other files the jail cannot see).
 * Allocates; jail_config_free releases. Returns 0 or -EINVAL/-ENOMEM with err.
 */
int jail_rewrite_run_args(int argc, char **argv, struct jail_config *cfg, char *err, size_t errlen);

/*
 * The jail's own options (argv[0] = "jail") into cfg, then RUN-ARGS through
 * jail_rewrite_run_args. Returns 0, -1 after --help, or EXIT_USAGE with err.
 */
int jail_parse_args(int argc, char **argv, struct jail_config *cfg, char *err, size_t errlen);

void jail_config_free(struct jail_config *cfg);

/*
 * The jail's directory tree on the host (src/jail/jail_fs.c). Functions
 * below return 0 or an exit status (EXIT_USAGE: a missing or unsafe input;
 * EXIT_HOST: a host call failed) with err naming the input or the call and
 * the path.
 */
struct jail_tree {
	char base[4096];	       /* the chroot base, resolved */
	char id_dir[4096];	       /* <base>/brisk/<ID>: created by this jail, removed again if the jail fails */
	char root[4096];	       /* <id_dir>/root: the jail's "/" */
	int root_fd;		       /* O_PATH|O_DIRECTORY of root, or -1 */
	bool created;		       /* id_dir is ours to remove on failure */
	bool api_helper, slirp_helper; /* /brisk-api, /brisk-slirp were placed */
};

/* Every host input checked before anything is created: the chroot base, each placed file, /dev/kvm. */
int jail_check_inputs(const struct jail_config *cfg, struct jail_tree *t, char *err, size_t errlen);
/* Creates <base>/brisk/<ID>/root with brisk, its helpers, the placed files, device nodes and directories. */
int jail_build(struct jail_config *cfg, struct jail_tree *t, char *err, size_t errlen);
/* Removes what jail_build created (after a failure before brisk ran). */
void jail_remove(struct jail_tree *t);

/* cgroup v2 (src/jail/jail_cgroup.c): <cgroup2 mount>/brisk/<ID>. */
struct jail_cgroup {
	char dir[4096]; /* empty: no cgroup */
};
/*
 * Creates the VM's cgroup and writes every --cgroup KEY=VALUE. Without
 * --cgroup a missing or read-only cgroup v2 is reported on stderr and
 * skipped (cg->dir stays empty); with it, it is an error.
 */
int jail_cgroup_create(const struct jail_config *cfg, struct jail_cgroup *cg, char *err, size_t errlen);
/* Moves process pid into the cgroup (nothing when there is none). */
int jail_cgroup_enter(const struct jail_cgroup *cg, pid_t pid, char *err, size_t errlen);
/* Removes the (empty) cgroup; best effort. */
void jail_cgroup_remove(struct jail_cgroup *cg);

/*
 * The jailed child (src/jail/jail_exec.c), PID 1 of a new PID namespace:
 * waits for one byte on sync_fd (the parent has moved it into the cgroup),
 * enters a new mount namespace, pivots into t->root, applies the rlimits,
 * closes every fd above 2 at exec, drops every capability and the
 * supplementary groups, switches to uid:gid, sets no_new_privs and execs
 * /brisk RUN-ARGS. On failure it prints one line naming the call and path,
 * writes the status byte to status_fd and exits with it. Never returns.
 */
_Noreturn void jail_child(const struct jail_config *cfg, const struct jail_tree *t, int sync_fd, int status_fd);

#endif
