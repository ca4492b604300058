/*
 * fc_jailer.h - brisk-jailer: Firecracker's jailer, its command line, checks, order and files
 * (Firecracker v1.7.0 docs/jailer.md, src/jailer/src/{main.rs,env.rs,cgroup.rs,chroot.rs,resource_limits.rs};
 * brisk's deliberate differences: docs/cli.md "brisk-jailer").
 */
#ifndef BRISK_FC_JAILER_H
#define BRISK_FC_JAILER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FCJ_DEFAULT_BASE    "/srv/jailer" /* --chroot-base-dir's default */
#define FCJ_DEFAULT_NOFILE  2048	  /* resource_limits.rs NO_FILE: RLIMIT_NOFILE without --resource-limit */
#define FCJ_MAX_CGROUPS	    32
#define FCJ_EXIT_ARGS	    1	/* an argument-parsing error: Firecracker's main returns Err (status 1) */
#define FCJ_EXIT_JAILER	    134 /* any later error: Firecracker panics with panic=abort, 128 + SIGABRT */
#define FCJ_PROC_MOUNTS	    "/proc/mounts"
#define FCJ_EXEC_NAME_MUST  "firecracker" /* env.rs validate_exec_file: the exec file's name must contain it */
#define FCJ_PID_FILE_SUFFIX ".pid"

/* The command line as Firecracker's utils::arg_parser splits it: each option's value, or NULL when absent. */
struct fcj_args {
	const char *id, *exec_file, *uid, *gid, *chroot_base, *netns, *cgroup_version, *parent_cgroup;
	bool daemonize, new_pid_ns, help, version;
	const char *cgroup[FCJ_MAX_CGROUPS];
	unsigned nr_cgroup;
	const char *rlimit[FCJ_MAX_CGROUPS];
	unsigned nr_rlimit;
	char **extra; /* the words after the first "--", passed to the VMM untouched */
	int nr_extra;
};

/* One --cgroup FILE=VALUE and the directory it is written in: <hierarchy>/<parent cgroup>/<id>. */
struct fcj_cgroup {
	char file[NAME_MAX + 1];
	char value[256];
	char dir[PATH_MAX];
	unsigned parent_depth; /* components of the parent cgroup: how far up an empty file is inherited from (v1) */
};

/* What Env::new derives from the arguments, every value checked. */
struct fcj_env {
	const char *id;
	char exec_path[PATH_MAX];     /* the exec file, canonical */
	char exec_name[NAME_MAX + 1]; /* its last component: the jail's directory and the in-jail program /NAME */
	char chroot_dir[PATH_MAX];    /* <base>/<exec name>/<id>/root */
	uid_t uid;
	gid_t gid;
	const char *netns;
	bool daemonize, new_pid_ns;
	unsigned cgroup_version;
	struct fcj_cgroup cg[FCJ_MAX_CGROUPS];
	unsigned nr_cg;
	bool has_fsize;
	uint64_t fsize, nofile;
	int uffd_minor; /* /dev/userfaultfd's minor from /proc/misc, or -1: the host has none */
	char **extra;
	int nr_extra;
	uint64_t start_time_us; /* CLOCK_MONOTONIC when the jailer started (passed as --start-time-us) */
};

/*
 * argv (argv[0] the program) into a, as Firecracker's arg_parser: the words
 * before the first "--" are options `--NAME VALUE` or `--NAME` (no "=VALUE"
 * form, no abbreviation; a value may not start with "--"), each at most once
 * except --cgroup and --resource-limit; --help or --version anywhere wins over
 * everything else; then --id, --exec-file, --uid and --gid are required.
 * Returns 0 or -EINVAL with err in arg_parser's words ("Argument 'uid'
 * required, but not found.").
 */
int fcj_parse_args(int argc, char **argv, struct fcj_args *a, char *err, size_t errlen);

/* A --parent-cgroup or a --cgroup FILE: relative, no "." or ".." component. */
bool fcj_relative_path_ok(const char *path);

/*
 * One line of /proc/mounts: the cgroup mount's directory and, for v1, its
 * options (the controllers). Returns 1 (a cgroup v1 line), 2 (cgroup2), 0 (any
 * other line); dir and opts are filled for 1 and 2.
 */
int fcj_mount_line(const char *line, char *dir, size_t dirlen, char *opts, size_t optslen);

/*
 * Env::new: every value in a checked in Firecracker's order (id, exec file,
 * chroot base, uid, gid, parent cgroup, cgroup version, cgroups, resource
 * limits) into e, with the cgroup hierarchies found in mounts_path
 * (FCJ_PROC_MOUNTS). With --cgroup-version 2, no --cgroup and an existing
 * parent cgroup, the calling process moves into it (as Firecracker). Returns 0
 * or -errno with err in the jailer's words.
 */
int fcj_env_new(const struct fcj_args *a, const char *mounts_path, struct fcj_env *e, char *err, size_t errlen);

/*
 * Env::run: the exec file copied into the chroot, the network namespace
 * joined, the rlimits set, each cgroup written then joined, the mount
 * namespace entered and pivoted into the chroot, its folders and device nodes
 * made, daemonized, the pid file written, the privileges dropped, and the exec
 * file executed as /NAME --id ID --start-time-us T --start-time-cpu-us 0
 * --parent-cpu-time-us C EXTRA... with an empty environment. Returns only on
 * failure: -errno with err; the chroot and cgroups made so far stay (the
 * caller's to clean, as Firecracker's).
 */
int fcj_run(struct fcj_env *e, char *err, size_t errlen);

/* `brisk-jailer ARGS` / `brisk jailer ARGS` (src/cli/jailer.c): argv[0] the program name. */
int cmd_jailer(int argc, char **argv);

#endif
