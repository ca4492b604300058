/*
 * fcj_run.c - brisk-jailer's Env::run, in Firecracker v1.7.0's order (src/jailer/src/env.rs run, chroot.rs,
 * cgroup.rs write_value/attach_pid, resource_limits.rs install): nothing here is undone on failure, as there.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/fc_jailer.h"

/* Rust's io::Error display, for messages in the jailer's words. */
#define OSERR	  "%s (os error %d)"
#define OSARG(e)  strerror(e), (e)
#define FAIL(...) err_set(err, errlen, -errno, __VA_ARGS__)

/* The jail's folders (env.rs FOLDER_HIERARCHY), made 0700 and owned by the VMM's user. */
static const char *const folders[] = {"/", "/dev", "/dev/net", "/run"};

static uint64_t cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* mkdir -p path (each missing component 0755 under the umask, as create_dir_all). Returns 0 or -errno. */
static int mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *s = buf + 1;; s++) {
		if (*s == '/' || !*s) {
			char c = *s;

			*s = '\0';
			if (mkdir(buf, 0755) && errno != EEXIST)
				return -errno;
			*s = c;
			if (!c)
				break;
		}
	}
	return 0;
}

/*
 * fs::copy of the exec file to <chroot>/<name>: a copy, not a link (Firecracker's threat model: no two VMMs
 * share the binary's pages), with the source's mode; an existing file there is replaced in place. brisk: a
 * symlink at the target is refused (O_NOFOLLOW), so a pre-created chroot cannot redirect root's write.
 */
static int copy_exec(const struct fcj_env *e, char *err, size_t errlen)
{
	char dst[PATH_MAX + NAME_MAX + 2];
	struct stat st;
	int in, out, ret = 0;
	ssize_t n;

	snprintf(dst, sizeof(dst), "%s/%s", e->chroot_dir, e->exec_name);
	in = open(e->exec_path, O_RDONLY | O_CLOEXEC);
	if (in < 0 || fstat(in, &st)) {
		ret = FAIL("Failed to copy %s to %s: " OSERR, e->exec_path, dst, OSARG(errno));
		goto out;
	}
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, st.st_mode & 07777);
	if (out < 0) {
		ret = FAIL("Failed to copy %s to %s: " OSERR, e->exec_path, dst, OSARG(errno));
		goto out;
	}
	while ((n = sendfile(out, in, NULL, 1 << 30)) > 0)
		;
	if (n < 0 || fchmod(out, st.st_mode & 07777))
		ret = FAIL("Failed to copy %s to %s: " OSERR, e->exec_path, dst, OSARG(errno));
	if (close(out) && !ret)
		ret = FAIL("Failed to copy %s to %s: " OSERR, e->exec_path, dst, OSARG(errno));
out:
	if (in >= 0)
		close(in);
	return ret;
}

static int join_netns(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return FAIL("Failed to open file %s: " OSERR, path, OSARG(errno));
	if (setns(fd, CLONE_NEWNET))
		ret = FAIL("Failed to join network namespace: netns: " OSERR, OSARG(errno));
	close(fd);
	return ret;
}

static int set_limit(int resource, uint64_t v, const char *what, char *err, size_t errlen)
{
	struct rlimit rl = {.rlim_cur = v, .rlim_max = v};

	return setrlimit(resource, &rl) ? FAIL("Failed to set limit for resource: %s", what) : 0;
}

/* writeln_special: VALUE and a newline in one write. Returns 0 or -errno. */
static int write_line(const char *path, const char *value)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "%s\n", value), fd, e = 0;

	if (n >= (int)sizeof(buf))
		return -E2BIG;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)n) != n)
		e = errno ? errno : EIO;
	if (close(fd) && !e)
		e = errno;
	return -e;
}

/* readln_special: the file's text without its last character (the newline). Returns 0 or -errno. */
static int read_line(const char *path, char *out, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, out, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	out[n > 0 ? n - 1 : 0] = '\0';
	return 0;
}

/*
 * cgroup.rs inherit_from_parent_aux: dir/file gets the first line of the parent's file; an empty one there is
 * first filled from its own parent, up to `depth` levels (cpuset.cpus and cpuset.mems start empty in a new v1
 * cpuset cgroup, and a task cannot join one with either empty).
 */
static int inherit(char *dir, const char *file, unsigned depth, char *err, size_t errlen)
{
	char parent_file[PATH_MAX + NAME_MAX + 2], line[4096], *slash = strrchr(dir, '/');
	int ret;

	if (!slash)
		return err_set(err, errlen, -EINVAL, "File %s doesn't have a parent", dir);
	snprintf(parent_file, sizeof(parent_file), "%.*s/%s", (int)(slash - dir), dir, file);
	if ((ret = read_line(parent_file, line, sizeof(line))))
		return err_set(err, errlen, ret, "Failed to read file %s into a string: " OSERR, parent_file,
			       OSARG(-ret));
	if (!line[0] && depth > 0) {
		*slash = '\0';
		inherit(dir, file, depth - 1, err, errlen); /* a racing jailer may fill it first: re-read decides */
		*slash = '/';
		if ((ret = read_line(parent_file, line, sizeof(line))))
			return err_set(err, errlen, ret, "Failed to read file %s into a string: " OSERR, parent_file,
				       OSARG(-ret));
	}
	if (!line[0])
		return err_set(err, errlen, -EINVAL, "Failed to inherit cgroups configurations from file %s in path %s",
			       file, dir);
	snprintf(parent_file, sizeof(parent_file), "%s/%s", dir, file);
	if ((ret = write_line(parent_file, line)))
		return err_set(err, errlen, ret, "Failed to write to %s: " OSERR, parent_file, OSARG(-ret));
	return 0;
}

/* v2: "+controller" into cgroup.subtree_control of dir and every parent that has one, top down. */
static int subtree_control(const char *dir, const char *controller, char *err, size_t errlen)
{
	char path[PATH_MAX + 32], plus[NAME_MAX + 2], up[PATH_MAX];
	const char *slash = strrchr(dir, '/');
	int ret;

	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
	if (access(path, F_OK))
		return 0;
	if (slash && slash != dir) {
		snprintf(up, sizeof(up), "%.*s", (int)(slash - dir), dir);
		if ((ret = subtree_control(up, controller, err, errlen)))
			return ret;
	}
	snprintf(plus, sizeof(plus), "+%s", controller);
	if ((ret = write_line(path, plus)))
		return err_set(err, errlen, ret, "Failed to write to %s: " OSERR, path, OSARG(-ret));
	return 0;
}

/* Cgroup::write_value: the cgroup's directory made, the value inherited (v1) or enabled (v2), then written. */
static int cgroup_write(const struct fcj_env *e, const struct fcj_cgroup *cg, char *err, size_t errlen)
{
	char dir[PATH_MAX], path[PATH_MAX + NAME_MAX + 2], controller[NAME_MAX + 1];
	int ret;

	if ((ret = mkdir_p(cg->dir)))
		return err_set(err, errlen, ret, "Failed to create directory %s: " OSERR, cg->dir, OSARG(-ret));
	snprintf(dir, sizeof(dir), "%s", cg->dir);
	if (e->cgroup_version == 1) {
		if ((ret = inherit(dir, cg->file, cg->parent_depth, err, errlen)))
			return ret;
	} else {
		snprintf(controller, sizeof(controller), "%.*s", (int)strcspn(cg->file, "."), cg->file);
		*strrchr(dir, '/') = '\0';
		if ((ret = subtree_control(dir, controller, err, errlen)))
			return ret;
	}
	snprintf(path, sizeof(path), "%s/%s", cg->dir, cg->file);
	if ((ret = write_line(path, cg->value)))
		return err_set(err, errlen, ret, "Failed to write to %s: " OSERR, path, OSARG(-ret));
	return 0;
}

/* Cgroup::attach_pid: this process into the cgroup (v1 "tasks", v2 "cgroup.procs"). */
static int cgroup_attach(const struct fcj_env *e, const struct fcj_cgroup *cg, char *err, size_t errlen)
{
	char path[PATH_MAX + 16], pid[24];
	int ret;

	snprintf(path, sizeof(path), "%s/%s", cg->dir, e->cgroup_version == 1 ? "tasks" : "cgroup.procs");
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if ((ret = write_line(path, pid)))
		return err_set(err, errlen, ret, "Failed to write to %s: " OSERR, path, OSARG(-ret));
	return 0;
}

/*
 * chroot.rs: a new mount namespace whose mounts are slaves of the host's (a file the orchestrator bind-mounts
 * into the chroot later, as Kata does for hot-plugged drives, still appears inside), the chroot bound onto
 * itself, pivot_root into it with the old root at old_root, detached and removed.
 */
static int enter_chroot(const char *dir, char *err, size_t errlen)
{
	if (unshare(CLONE_NEWNS))
		return FAIL("Failed to unshare into new mount namespace: " OSERR, OSARG(errno));
	if (mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL))
		return FAIL("Failed to change the propagation type to slave: " OSERR, OSARG(errno));
	if (mount(dir, dir, NULL, MS_BIND | MS_REC, NULL))
		return FAIL("Failed to bind mount the jail root directory: " OSERR, OSARG(errno));
	if (chdir(dir))
		return FAIL("Failed to change current directory: " OSERR, OSARG(errno));
	if (mkdir("old_root", 0600))
		return FAIL("Failed to create the jail root directory before pivoting root: " OSERR, OSARG(errno));
	if (syscall(SYS_pivot_root, ".", "old_root"))
		return FAIL("Failed to pivot root: " OSERR, OSARG(errno));
	if (chdir("/"))
		return FAIL("Failed to chdir into chroot directory: " OSERR, OSARG(errno));
	if (umount2("old_root", MNT_DETACH))
		return FAIL("Failed to unmount the old jail root: " OSERR, OSARG(errno));
	if (rmdir("old_root"))
		return FAIL("Failed to remove old jail root directory: " OSERR, OSARG(errno));
	return 0;
}

static int setup_folders(const struct fcj_env *e, char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(folders) / sizeof(folders[0]); i++) {
		int ret = mkdir_p(folders[i]);

		if (ret)
			return err_set(err, errlen, ret, "Failed to create directory %s: " OSERR, folders[i],
				       OSARG(-ret));
		if (chmod(folders[i], 0700))
			return FAIL("Failed to change permissions on %s: " OSERR, folders[i], OSARG(errno));
		if (chown(folders[i], e->uid, e->gid))
			return FAIL("Failed to change owner for %s: " OSERR, folders[i], OSARG(errno));
	}
	return 0;
}

/* mknod_and_own_dev: a 0600 character device owned by the VMM's user (an existing node is an error). */
static int make_dev(const struct fcj_env *e, const char *path, unsigned major, unsigned minor, char *err, size_t errlen)
{
	if (mknod(path, S_IFCHR | S_IRUSR | S_IWUSR, makedev(major, minor)))
		return FAIL("Failed to create %s via mknod inside the jail: " OSERR, path, OSARG(errno));
	if (chown(path, e->uid, e->gid))
		return FAIL("Failed to change owner for %s: " OSERR, path, OSARG(errno));
	return 0;
}

/* The device nodes: Firecracker's fixed numbers (devices.txt), /dev/userfaultfd's from /proc/misc. */
static int make_devices(const struct fcj_env *e, char *err, size_t errlen)
{
	char warn[512];
	int ret;

	if ((ret = make_dev(e, "/dev/net/tun", 10, 200, err, errlen)) ||
	    (ret = make_dev(e, "/dev/kvm", 10, 232, err, errlen)))
		return ret;
	if (make_dev(e, "/dev/urandom", 1, 9, warn, sizeof(warn)))
		printf("Warning! Could not create /dev/urandom device inside jailer: %s.\n"
		       "MMDS version 2 will not be available to use.\n",
		       warn);
	if (e->uffd_minor >= 0)
		return make_dev(e, "/dev/userfaultfd", 10, (unsigned)e->uffd_minor, err, errlen);
	return 0;
}

/*
 * The double fork (setsid between): the jailer's first process and the session leader exit 0, the grandchild
 * goes on with /dev/null as stdio. *cpu accumulates each process's CPU time, as Firecracker's meter does.
 */
static int daemonize(int dev_null, uint64_t *cpu, char *err, size_t errlen)
{
	pid_t pid;

	*cpu = cpu_us();
	fflush(NULL);
	if ((pid = fork()) < 0)
		return FAIL("Failed to daemonize: " OSERR, OSARG(errno));
	if (pid)
		_exit(0);
	if (setsid() < 0)
		return FAIL("Failed to daemonize: setsid: " OSERR, OSARG(errno));
	*cpu += cpu_us();
	if ((pid = fork()) < 0)
		return FAIL("Failed to daemonize: " OSERR, OSARG(errno));
	if (pid)
		_exit(0);
	if (dup2(dev_null, 0) < 0 || dup2(dev_null, 1) < 0 || dup2(dev_null, 2) < 0)
		return FAIL("Failed to duplicate fd: " OSERR, OSARG(errno));
	close(dev_null);
	return 0;
}

/* /<name>.pid, created (it must not exist yet) with the VMM's pid as the jailer's namespace sees it. */
static int save_pid(const struct fcj_env *e, pid_t pid, char *err, size_t errlen)
{
	char path[NAME_MAX + 8], num[24];
	int fd, n = snprintf(num, sizeof(num), "%d", (int)pid), ret = 0;

	snprintf(path, sizeof(path), "/%s%s", e->exec_name, FCJ_PID_FILE_SUFFIX);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
	if (fd < 0)
		return FAIL("Failed to open file %s: " OSERR, path, OSARG(errno));
	if (write(fd, num, (size_t)n) != n)
		ret = FAIL("Failed to write to %s: " OSERR, path, OSARG(errno));
	close(fd);
	return ret;
}

/*
 * The ids switched as Rust's Command::uid/gid do (setgroups(0), gid, uid), plus brisk's hardening: no new
 * privileges at exec and, for a non-root user, no capability left in the bounding or ambient set. uid 0 (Kata
 * runs the VMM so) keeps root's capabilities, as under Firecracker's jailer: its taps need CAP_NET_ADMIN.
 */
static int drop_privileges(const struct fcj_env *e, char *err, size_t errlen)
{
	if (e->uid != 0) {
		for (int cap = 0; cap < 64; cap++)
			if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) && errno != EINVAL)
				return FAIL("Failed to exec into Firecracker: prctl(PR_CAPBSET_DROP): " OSERR,
					    OSARG(errno));
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
			return FAIL("Failed to exec into Firecracker: prctl(PR_CAP_AMBIENT): " OSERR, OSARG(errno));
	}
	if (setgroups(0, NULL) || setresgid(e->gid, e->gid, e->gid) || setresuid(e->uid, e->uid, e->uid) ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return FAIL("Failed to exec into Firecracker: " OSERR, OSARG(errno));
	return 0;
}

/* exec_command: /NAME --id ID --start-time-us T --start-time-cpu-us 0 --parent-cpu-time-us C EXTRA... */
static int exec_vmm(const struct fcj_env *e, uint64_t cpu, char *err, size_t errlen)
{
	char prog[NAME_MAX + 2], start[24], pcpu[24], *argv[e->nr_extra + 10], *envp[] = {NULL};
	int n = 0, ret;

	snprintf(prog, sizeof(prog), "/%s", e->exec_name);
	snprintf(start, sizeof(start), "%" PRIu64, e->start_time_us);
	snprintf(pcpu, sizeof(pcpu), "%" PRIu64, cpu);
	argv[n++] = prog;
	argv[n++] = "--id";
	argv[n++] = (char *)e->id;
	argv[n++] = "--start-time-us";
	argv[n++] = start;
	argv[n++] = "--start-time-cpu-us";
	argv[n++] = "0";
	argv[n++] = "--parent-cpu-time-us";
	argv[n++] = pcpu;
	for (int i = 0; i < e->nr_extra; i++)
		argv[n++] = e->extra[i];
	argv[n] = NULL;
	if ((ret = drop_privileges(e, err, errlen)))
		return ret;
	execve(prog, argv, envp);
	return FAIL("Failed to exec into Firecracker: " OSERR, OSARG(errno));
}

/* --new-pid-ns: the VMM is PID 1 of a new PID namespace; the jailer writes its pid and exits 0. */
static int exec_new_pid_ns(const struct fcj_env *e, uint64_t cpu, char *err, size_t errlen)
{
	pid_t pid;

	if (unshare(CLONE_NEWPID))
		return FAIL("Failed cloning into a new child process: " OSERR, OSARG(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return FAIL("Failed cloning into a new child process: " OSERR, OSARG(errno));
	if (pid == 0)
		return exec_vmm(e, cpu, err, errlen);
	if (save_pid(e, pid, err, errlen))
		return -EIO;
	_exit(0);
}

static int prepare_host(struct fcj_env *e, char *err, size_t errlen)
{
	int ret;

	if ((ret = mkdir_p(e->chroot_dir)))
		return err_set(err, errlen, ret, "Failed to create directory %s: " OSERR, e->chroot_dir, OSARG(-ret));
	if ((ret = copy_exec(e, err, errlen)) || (e->netns && (ret = join_netns(e->netns, err, errlen))))
		return ret;
	if (e->has_fsize && (ret = set_limit(RLIMIT_FSIZE, e->fsize, "size of file", err, errlen)))
		return ret;
	if ((ret = set_limit(RLIMIT_NOFILE, e->nofile, "number of file descriptors", err, errlen)))
		return ret;
	/* Every value first, then every join: cpuset needs cpus and mems set before a task may enter. */
	for (unsigned i = 0; i < e->nr_cg; i++)
		if ((ret = cgroup_write(e, &e->cg[i], err, errlen)))
			return ret;
	for (unsigned i = 0; i < e->nr_cg; i++)
		if ((ret = cgroup_attach(e, &e->cg[i], err, errlen)))
			return ret;
	return 0;
}

int fcj_run(struct fcj_env *e, char *err, size_t errlen)
{
	uint64_t start_cpu = cpu_us(), cpu = 0;
	int ret, dev_null = -1;

	if ((ret = prepare_host(e, err, errlen)))
		return ret;
	if (e->daemonize && (dev_null = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		return FAIL("Failed to open /dev/null: " OSERR, OSARG(errno));
	if ((ret = enter_chroot(e->chroot_dir, err, errlen)) || (ret = setup_folders(e, err, errlen)) ||
	    (ret = make_devices(e, err, errlen)))
		return ret;
	if (dev_null >= 0 && (ret = daemonize(dev_null, &cpu, err, errlen)))
		return ret;
	cpu += cpu_us() - (e->daemonize ? 0 : start_cpu);
	if (e->new_pid_ns)
		return exec_new_pid_ns(e, cpu, err, errlen);
	if ((ret = save_pid(e, getpid(), err, errlen)))
		return ret;
	return exec_vmm(e, cpu, err, errlen);
}
