/* jail_exec.c - the jailed child: mount namespace and pivot_root, rlimits, fds, capabilities, ids, then exec brisk. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "brisk/exitcode.h"
#include "brisk/jail.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static int status_pipe = -1;

/* One line naming the call and the path, the status byte to the parent, and the end of this process. */
_Noreturn __attribute__((format(printf, 1, 2))) static void die(const char *fmt, ...)
{
	unsigned char status = EXIT_HOST;
	int e = errno;
	va_list ap;

	fputs("brisk jail: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", strerror(e));
	if (status_pipe >= 0 && write(status_pipe, &status, 1) < 0)
		_exit(EXIT_HOST);
	_exit(EXIT_HOST);
}

/* Files across file systems: bound onto their placeholders, read-only (and nosuid, nodev, noexec) when ro. */
static void bind_files(const struct jail_config *cfg, const struct jail_tree *t)
{
	char dst[sizeof(t->root) + 32];

	for (unsigned i = 0; i < cfg->nr_files; i++) {
		const struct jail_file *f = &cfg->files[i];
		unsigned long flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC;

		if (!f->bind)
			continue;
		snprintf(dst, sizeof(dst), "%s/%s", t->root, f->name);
		if (mount(f->real, dst, NULL, MS_BIND, NULL))
			die("mount --bind %s %s", f->real, dst);
		if (mount(NULL, dst, NULL, flags | (f->ro ? MS_RDONLY : 0), NULL))
			die("mount -o remount,bind%s %s", f->ro ? ",ro" : "", dst);
	}
}

/*
 * A new mount namespace whose "/" is the jail (Firecracker's chroot.rs):
 * nothing propagates back to the host, the root is bound onto itself so that
 * pivot_root accepts it, and the old root is detached, not just hidden, so
 * no path leads out of the jail.
 */
static void enter_root(const struct jail_config *cfg, const struct jail_tree *t)
{
	if (unshare(CLONE_NEWNS))
		die("unshare(CLONE_NEWNS)");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		die("mount --make-rprivate /");
	bind_files(cfg, t);
	if (mount(t->root, t->root, NULL, MS_BIND | MS_REC, NULL))
		die("mount --rbind %s %s", t->root, t->root);
	if (chdir(t->root))
		die("chdir %s", t->root);
	/* pivot_root(".", "."): the old root ends up stacked under the new one, then detached (pivot_root(2)). */
	if (syscall(SYS_pivot_root, ".", "."))
		die("pivot_root %s", t->root);
	if (umount2(".", MNT_DETACH))
		die("umount2 old root of %s", t->root);
	if (chdir("/"))
		die("chdir / in %s", t->root);
}

static void set_limits(const struct jail_config *cfg)
{
	struct rlimit rl;

	if (cfg->has_nofile) {
		rl = (struct rlimit){.rlim_cur = cfg->nofile, .rlim_max = cfg->nofile};
		if (setrlimit(RLIMIT_NOFILE, &rl))
			die("setrlimit(RLIMIT_NOFILE, %llu)", (unsigned long long)cfg->nofile);
	}
	if (cfg->has_fsize) {
		rl = (struct rlimit){.rlim_cur = cfg->fsize, .rlim_max = cfg->fsize};
		if (setrlimit(RLIMIT_FSIZE, &rl))
			die("setrlimit(RLIMIT_FSIZE, %llu)", (unsigned long long)cfg->fsize);
	}
}

/*
 * Every capability gone for good: the bounding set emptied (so no exec can
 * regain one), the ambient set cleared, the groups dropped, the ids switched
 * (which empties the permitted and effective sets), the inheritable set
 * cleared, and no_new_privs so that no set-user-ID file can raise them.
 */
static void drop_privileges(const struct jail_config *cfg)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2] = {0};

	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) && errno != EINVAL)
			die("prctl(PR_CAPBSET_DROP, %d)", cap);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		die("prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
	if (setgroups(0, NULL))
		die("setgroups(0)");
	if (setresgid(cfg->gid, cfg->gid, cfg->gid))
		die("setresgid(%u)", (unsigned)cfg->gid);
	if (setresuid(cfg->uid, cfg->uid, cfg->uid))
		die("setresuid(%u)", (unsigned)cfg->uid);
	if (syscall(SYS_capset, &hdr, data))
		die("capset(0)");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		die("prctl(PR_SET_NO_NEW_PRIVS)");
}

/* Every fd above 2 closes at exec (the status pipe too: its closing tells the parent the exec worked). */
static void cloexec_all(void)
{
	long max;

	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
	/* Kernels before 5.11: one fcntl per possible fd. */
	max = sysconf(_SC_OPEN_MAX);
	for (long fd = 3; fd < (max > 0 && max < 1L << 20 ? max : 1L << 20); fd++)
		fcntl((int)fd, F_SETFD, FD_CLOEXEC);
}

static void daemonize(void)
{
	int fd;

	if (setsid() < 0)
		die("setsid");
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die("open /dev/null in the jail");
	if (dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
		die("dup2 /dev/null");
	close(fd);
}

_Noreturn void jail_child(const struct jail_config *cfg, const struct jail_tree *t, int sync_fd, int status_fd)
{
	char *argv[cfg->run_argc + 2];
	char *envp[3];
	int nenv = 0;
	unsigned char go;

	status_pipe = status_fd;
	if (read(sync_fd, &go, 1) != 1)
		_exit(EXIT_HOST); /* the parent failed (and said why) before letting this child go */
	close(sync_fd);
	enter_root(cfg, t);
	if (cfg->daemonize)
		daemonize();
	set_limits(cfg);
	drop_privileges(cfg);
	/* Killing a waiting jail stops brisk too (set after the id change, which would clear it). */
	if (!cfg->daemonize && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0))
		die("prctl(PR_SET_PDEATHSIG)");
	cloexec_all();
	argv[0] = "/" JAIL_EXEC_NAME;
	for (int i = 0; i < cfg->run_argc; i++)
		argv[i + 1] = cfg->run_argv[i];
	argv[cfg->run_argc + 1] = NULL;
	/* A clean environment (as Firecracker's jailer); /proc is not mounted, so helpers are named here. */
	if (t->slirp_helper)
		envp[nenv++] = "BRISK_SLIRP_HELPER=/brisk-slirp";
	envp[nenv] = NULL;
	execve(argv[0], argv, envp);
	die("execve %s/%s", t->root, JAIL_EXEC_NAME);
}
