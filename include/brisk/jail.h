/* jail.h - `brisk jail`: brisk run confined to a chroot, new namespaces, cgroup v2, rlimits, no capabilities. */
#ifndef BRISK_JAIL_H
#define BRISK_JAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define JAIL_ID_MAX	     64		   /* as Firecracker's validate_instance_id */
#define JAIL_DEFAULT_BASE    "/srv/jailer" /* as Firecracker's --chroot-base-dir default */
#define JAIL_MAX_CGROUPS     16
#define JAIL_MAX_FILES	     24 /* kernel, initrd, cpu template, disks */
#define JAIL_MAX_OUT	     16 /* in-jail paths brisk creates: sockets, logs, reports */
#define JAIL_MAX_OWNED	     (4 * JAIL_MAX_FILES + JAIL_MAX_OUT)
#define JAIL_EXEC_NAME	     "brisk"	 /* the copied binary: /brisk inside the jail */
#define JAIL_PID_FILE	     "brisk.pid" /* <base>/brisk/<ID>/brisk.pid: the jailed brisk's host pid */
#define JAIL_CGROUP_PARENT   "brisk"	 /* <cgroup2 mount>/brisk/<ID> */
#define JAIL_MAX_LIBS	     64		 /* shared objects one helper may need, its interpreter included */
#define JAIL_LD_OUT_MAX	     (64 << 10)	 /* bytes of `INTERP --list HELPER` output read at most */
#define JAIL_LD_LINE_MAX     8192	 /* bytes of one line of that output at most */
#define JAIL_CGROUP_DRAIN_MS 2000	 /* a busy cgroup (brisk's helpers still exiting) is retried so long */

/* One --cgroup KEY=VALUE: the file KEY of the VM's cgroup gets VALUE. */
struct jail_cgroup_kv {
	const char *key;
	const char *value;
};

/* A host file brisk jail places into the chroot (a hard link, or a bind mount across file systems). */
struct jail_file {
	const char *host; /* the path RUN-ARGS named, on the host (for messages) */
	const char *opt;  /* the RUN-ARG that named it: "--kernel", "--disk", "--snapshot", ... (for messages) */
	char *real;	  /* set by jail_check_inputs: host resolved (realpath: no symlink left), what is placed */
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
 * RUN-ARGS (argv[0] = "run", "restore" or "--api-sock"...) into cfg->run_argv:
 * --kernel, --initrd, --disk and a --cpu-template file become /kernel, /initrd,
 * /diskN, /cpu-template.json (cfg->files records where they come from);
 * --api-sock, --serial file:, --report-json, --vsock uds=, --vsock-uds and
 * --clone-server paths are in-jail paths, recorded in cfg->out. With
 * "restore", --snapshot and --mem become /snapshot.state and /snapshot.mem,
 * and each --disk PATH (and a --cpu-template file) is placed as /diskN
 * (/cpu-template.json: where a jailed run names them, so where the state file
 * of a VM snapshotted in a jail names them) and taken out of RUN-ARGS (the
 * snapshot holds the devices). --config-file (its file names other files the
 * jail cannot see), --uffd (the page-fault handler's socket is outside the
 * jail) and, outside "restore", --snapshot and --mem are refused.
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
 * A dynamically linked helper's program interpreter and the shared objects
 * its loader maps (src/jail/jail_libs.c): each is placed into the jail at the
 * path the loader printed, where the jail's loader, with no ld.so.cache,
 * finds it again.
 */
struct jail_libs {
	char interp[4096];		/* PT_INTERP: absolute, a regular file of root's */
	char *path[JAIL_MAX_LIBS];	/* the host paths the loader printed, pointers into text */
	unsigned nr;			/* entries in path[] */
	char text[JAIL_LD_OUT_MAX + 1]; /* the loader's output, cut into paths in place */
};

/* A helper program (helper.h) the jail places as /NAME, found while the inputs are checked. */
struct jail_helper {
	char host[4096];	/* its real path on the host; "" when none was found (then none is placed) */
	struct jail_libs *libs; /* what it needs when dynamically linked (owned, freed by jail_remove); else NULL */
};

/*
 * The program interpreter (PT_INTERP) ELF64 file path asks for, copied to
 * out[0..len). Returns 1 (dynamically linked), 0 (no PT_INTERP, not ELF64
 * or unreadable: nothing to load), or -EINVAL (a PT_INTERP that is empty,
 * not NUL-terminated or longer than len - 1).
 */
int jail_elf_interp(const char *path, char *out, size_t len);

/*
 * The output of glibc's `INTERP --list PROGRAM`, NUL-terminated in text,
 * parsed in place into libs->path[] / libs->nr (pointers into text). Lines
 * are "\tNAME => PATH (0xADDR)" or "\tPATH (0xADDR)"; the vDSO
 * (linux-vdso.so.1, linux-gate.so.1: no file) is skipped, a path printed
 * twice kept once. Every PATH must be absolute, below a directory (the
 * jail's "/" holds brisk's own files), without empty, "." or ".."
 * components, shorter than PATH_MAX. Returns 0; -ENOENT for "NAME => not
 * found"; -E2BIG for more than JAIL_MAX_LIBS objects; -EINVAL for any other
 * line refused (over JAIL_LD_LINE_MAX bytes included); err names the line.
 */
int jail_ld_list_parse(char *text, struct jail_libs *libs, char *err, size_t errlen);

/*
 * Copies the regular file open as in (named src in messages) to a new file
 * dirfd/name (O_EXCL, no symlink followed), owned by the caller (root), mode
 * `mode` whatever the umask; shown is the new file's full path for messages.
 * Returns 0 or EXIT_HOST with err.
 */
int jail_copy(int in, const char *src, int dirfd, const char *name, mode_t mode, const char *shown, char *err,
	      size_t errlen);

/*
 * The jail's directory tree on the host (src/jail/jail_fs.c). Functions
 * below return 0 or an exit status (EXIT_USAGE: a missing or unsafe input;
 * EXIT_HOST: a host call failed) with err naming the input or the call and
 * the path.
 */
struct jail_tree {
	char base[4096];	  /* the chroot base, resolved */
	char id_dir[4096];	  /* <base>/brisk/<ID>: created by this jail, removed again if the jail fails */
	char root[4096];	  /* <id_dir>/root: the jail's "/" */
	int root_fd;		  /* O_PATH|O_DIRECTORY of root, or -1 */
	bool created;		  /* id_dir is ours to remove on failure */
	bool slirp_helper;	  /* /brisk-slirp was placed (--net user; the API is brisk itself) */
	struct jail_helper slirp; /* where it comes from, and the libraries it needs */
};

/*
 * What helper (NAME in messages, at host path `helper`) needs to start in
 * the jail: NULL in *libs when it is statically linked, else a new
 * jail_libs (the caller frees it) filled by running its interpreter (which
 * must be absolute and a regular file of root's, not writable by group or
 * others) as `INTERP --list HELPER` with an empty environment, output
 * bounded to JAIL_LD_OUT_MAX bytes and time to 10 s. Returns 0; EXIT_USAGE
 * (an unsafe interpreter, a library not found or refused by
 * jail_ld_list_parse, the loader failing) or EXIT_HOST (pipe, fork, poll)
 * with err naming the helper.
 */
int jail_libs_find(const char *name, const char *helper, struct jail_libs **libs, char *err, size_t errlen);

/*
 * Places libs->interp (mode 0755) and every libs->path (0644) into t's root
 * at the same path, in directories created root:root 0755: a hard link to
 * the host file when it is on the same file system, root's and not writable
 * by group or others, else a copy of the file a symlink leads to. A path
 * already in the jail (placed for the other helper) is kept. Then checks the
 * jail's loader, chrooted there with no ld.so.cache, loads /NAME with them.
 * Returns 0, EXIT_USAGE (not a regular file; the loader fails in the jail)
 * or EXIT_HOST with err.
 */
int jail_libs_place(const struct jail_tree *t, const char *name, const struct jail_libs *libs, char *err,
		    size_t errlen);

/*
 * Every host input checked before anything is created: the chroot base, each
 * placed file (resolved into its `real` path: a symlink is followed, to a
 * regular file), /dev/kvm, the slirp helper and what it needs (t->slirp).
 */
int jail_check_inputs(struct jail_config *cfg, struct jail_tree *t, char *err, size_t errlen);
/*
 * Creates <base>/brisk/<ID>/root with brisk, its helpers, the placed files
 * (each file's `real` path: a hard link to the file a symlink leads to, or a
 * placeholder for a bind mount), device nodes and directories.
 */
int jail_build(struct jail_config *cfg, struct jail_tree *t, char *err, size_t errlen);
/* Removes what jail_build created (after a failure before brisk ran); frees the helpers' jail_libs always. */
void jail_remove(struct jail_tree *t);

/* cgroup v2 (src/jail/jail_cgroup.c): <cgroup2 mount>/brisk/<ID>. */
struct jail_cgroup {
	char dir[4096]; /* empty: no cgroup */
};
/*
 * Creates the VM's cgroup and writes every --cgroup KEY=VALUE. Called once
 * the jail directory is made (it holds the ID): a cgroup of that ID that
 * exists already but is empty (no process, no child cgroup: left by an
 * earlier jail that was killed) is removed and made again, with a note; one
 * in use is refused (EXIT_USAGE). Without --cgroup a missing or read-only
 * cgroup v2 is reported on stderr and skipped (cg->dir stays empty); with
 * it, it is an error.
 */
int jail_cgroup_create(const struct jail_config *cfg, struct jail_cgroup *cg, char *err, size_t errlen);
/* Moves process pid into the cgroup (nothing when there is none). */
int jail_cgroup_enter(const struct jail_cgroup *cg, pid_t pid, char *err, size_t errlen);
/*
 * Removes the cgroup, waiting up to JAIL_CGROUP_DRAIN_MS while it still
 * holds exiting processes; a warning on stderr if it cannot. Best effort.
 */
void jail_cgroup_remove(struct jail_cgroup *cg);
/*
 * Forks the cgroup's reaper, a process of the host's PID namespace outside
 * the cgroup that outlives the jail: once it reads a byte or EOF on the pipe
 * whose write end is returned in *go_fd (write after the VM's process
 * entered the cgroup), it waits until the cgroup has no process left and
 * removes it; so the cgroup goes when brisk ends even after `kill -9` of
 * the jail or under --daemonize. Call before unshare(CLONE_NEWPID) (a later
 * fork would put it in brisk's namespace, killed with brisk). Returns its
 * pid, 0 without a cgroup, or -errno (no reaper: the jail alone removes it).
 */
pid_t jail_cgroup_reaper(const struct jail_cgroup *cg, int *go_fd);

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
