/* tracefs.c - a private tracefs instance for the kvm events of chosen threads, read by a thread while the guest runs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/profile.h"
#include "brisk/thread.h"

/*
 * Documentation/trace/ftrace.rst: "instances" (a private buffer with its own
 * events, filters and clock), set_event_pid (+ options/event-fork to follow
 * children), trace_pipe (consuming read; "CPU:N [LOST M EVENTS]" markers when
 * the ring overwrote data), per_cpu/cpuN/stats (overrun, dropped events).
 * trace_clock "mono" makes timestamps CLOCK_MONOTONIC, the timeline's clock.
 */
#define TRACEFS_MAGIC_NR 0x74726163 /* "trac", include/uapi/linux/magic.h */
#define DEBUGFS_MAGIC_NR 0x64626720 /* "dbg ": debugfs (kernels before 4.1 kept tracing there) */
#define TRACEFS_DIR	 "/sys/kernel/tracing"
#define DEBUGFS_DIR	 "/sys/kernel/debug"
#define READ_CHUNK	 65536
#define LINE_MAX_LEN	 4096
#define POLL_MS		 50

static const char *const wanted[] = {"kvm_exit", "kvm_emulate_insn", "kvm_cpuid",    "kvm_msr",
				     "kvm_pio",	 "kvm_mmio",	     "kvm_hypercall"};

static int tracefs_write(const char *dir, const char *name, const char *val)
{
	char path[512];
	int fd, ret = 0;
	size_t len = strlen(val);

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, len) != (ssize_t)len)
		ret = -errno ? -errno : -EIO;
	close(fd);
	return ret;
}

/* 1 when `path` is on a file system of type `magic`. */
static int is_fs(const char *path, long magic)
{
	struct statfs st;

	return statfs(path, &st) == 0 && st.f_type == magic;
}

/*
 * The tracefs mount this process sees: /sys/kernel/tracing, or tracefs
 * already mounted on debugfs's "tracing" directory. That directory is an
 * automount point (kernel/trace/trace.c, tracefs under debugfs for old
 * tools): a statfs() on it would mount tracefs in the host's namespace, so
 * it is looked at without triggering it (AT_NO_AUTOMOUNT) and only used when
 * something is mounted there already. Returns 0 or -ENOENT.
 */
static int host_root(struct trace_session *s)
{
	struct stat dbg, trc;

	if (is_fs(TRACEFS_DIR, TRACEFS_MAGIC_NR)) {
		snprintf(s->root, sizeof(s->root), "%s", TRACEFS_DIR);
		return 0;
	}
	if (fstatat(AT_FDCWD, DEBUGFS_DIR, &dbg, AT_NO_AUTOMOUNT) == 0 &&
	    fstatat(AT_FDCWD, DEBUGFS_DIR "/tracing", &trc, AT_NO_AUTOMOUNT) == 0 && trc.st_dev != dbg.st_dev &&
	    is_fs(DEBUGFS_DIR "/tracing", TRACEFS_MAGIC_NR)) {
		snprintf(s->root, sizeof(s->root), "%s", DEBUGFS_DIR "/tracing");
		return 0;
	}
	return -ENOENT;
}

/*
 * Inside brisk's private namespace: the same, letting debugfs mount tracefs
 * on its "tracing" directory, and accepting that directory on debugfs itself
 * (kernels before 4.1 had no tracefs).
 */
static int private_root(struct trace_session *s)
{
	if (is_fs(TRACEFS_DIR, TRACEFS_MAGIC_NR))
		snprintf(s->root, sizeof(s->root), "%s", TRACEFS_DIR);
	else if (is_fs(DEBUGFS_DIR "/tracing", TRACEFS_MAGIC_NR) || is_fs(DEBUGFS_DIR "/tracing", DEBUGFS_MAGIC_NR))
		snprintf(s->root, sizeof(s->root), "%s", DEBUGFS_DIR "/tracing");
	else
		return -ENOENT;
	return 0;
}

/* What a failed step's errno means to the user. */
static const char *mount_hint(int e)
{
	switch (e) {
	case EPERM:
	case EACCES:
		return " (needs root)";
	case ENODEV:
		return " (the kernel has no tracefs: CONFIG_TRACING is off)";
	case ENOENT:
		return " (no " TRACEFS_DIR " directory: is sysfs mounted?)";
	default:
		return "";
	}
}

static int mount_failed(struct trace_session *s, int e, const char *step)
{
	/* unshare(CLONE_NEWNS) is EINVAL in a process with threads (unshare(2)): a caller broke the contract. */
	int threads = e == EINVAL && strncmp(step, "unshare", 7) == 0;

	snprintf(s->why, sizeof(s->why), "tracefs is not mounted at %s and mounting it failed: %s: %s%s", TRACEFS_DIR,
		 step, strerror(e), threads ? " (brisk already runs threads: a bug)" : mount_hint(e));
	return -e;
}

/*
 * Mounts tracefs where only this process sees it: a new mount namespace
 * (mount_namespaces(7)) whose mounts are all made private first, so that
 * nothing propagates back to the host's namespace, which is left exactly as
 * it was. The mount goes away with the namespace when brisk exits. Where the
 * kernel provides tracefs only through debugfs, debugfs is mounted instead
 * (it mounts tracefs on its "tracing" directory when that is looked up).
 */
static int mount_private(struct trace_session *s)
{
	int e;

	if (unshare(CLONE_NEWNS))
		return mount_failed(s, errno, "unshare(CLONE_NEWNS)");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return mount_failed(s, errno, "making / private (MS_REC|MS_PRIVATE)");
	if (mount("nodev", TRACEFS_DIR, "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		e = errno;
	else if (private_root(s) == 0)
		return 0;
	else
		e = ENODEV;
	if (!is_fs(DEBUGFS_DIR, DEBUGFS_MAGIC_NR))
		mount("nodev", DEBUGFS_DIR, "debugfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	if (private_root(s) == 0)
		return 0;
	return mount_failed(s, e, "mount -t tracefs nodev " TRACEFS_DIR);
}

int trace_prepare(struct trace_session *s)
{
	s->why[0] = '\0';
	s->private_mount = 0;
	if (host_root(s) == 0)
		return 0;
	if (mount_private(s))
		return -ENOENT;
	s->private_mount = 1;
	return 0;
}

/* Enables each wanted event the kernel has; returns how many. */
static int enable_events(struct trace_session *s)
{
	char name[320];
	int n = 0;

	for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
		snprintf(name, sizeof(name), "events/kvm/%s/enable", wanted[i]);
		if (tracefs_write(s->dir, name, "1") == 0)
			n++;
	}
	return n;
}

static int set_pids(struct trace_session *s, const pid_t *tids, unsigned n, int follow_forks)
{
	size_t cap = (size_t)n * 12 + 2, len = 0;
	char *buf = malloc(cap);
	int ret;

	if (!buf)
		return -ENOMEM;
	buf[0] = '\0';
	for (unsigned i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%d ", (int)tids[i]);
	ret = tracefs_write(s->dir, "set_event_pid", buf);
	free(buf);
	if (!ret && follow_forks)
		ret = tracefs_write(s->dir, "options/event-fork", "1");
	return ret;
}

static void feed(struct trace_session *s, char *buf, size_t *len)
{
	char *start = buf, *nl;

	pthread_mutex_lock(&s->lock);
	while ((nl = memchr(start, '\n', (size_t)(buf + *len - start))) != NULL) {
		*nl = '\0';
		trace_agg_line(&s->agg, start);
		start = nl + 1;
	}
	pthread_mutex_unlock(&s->lock);
	*len = (size_t)(buf + *len - start);
	memmove(buf, start, *len);
	if (*len >= LINE_MAX_LEN) { /* a line longer than any kvm event: drop it */
		s->agg.malformed++;
		*len = 0;
	}
}

/* Reads until told to stop, then drains what is left (non-blocking reads until EAGAIN). */
static void *reader(void *arg)
{
	struct trace_session *s = arg;
	char *buf = malloc(READ_CHUNK + LINE_MAX_LEN);
	size_t len = 0;

	if (!buf)
		return NULL;
	for (;;) {
		struct pollfd p = {.fd = s->pipe_fd, .events = POLLIN};
		int stopping = atomic_load(&s->stop);
		ssize_t n;

		if (!stopping && poll(&p, 1, POLL_MS) <= 0)
			continue;
		n = read(s->pipe_fd, buf + len, READ_CHUNK);
		if (n > 0) {
			len += (size_t)n;
			feed(s, buf, &len);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (stopping) /* empty (EAGAIN) or closed: everything was read */
			break;
	}
	free(buf);
	return NULL;
}

static int open_pipe(struct trace_session *s)
{
	char path[320];

	snprintf(path, sizeof(path), "%s/trace_pipe", s->dir);
	s->pipe_fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	return s->pipe_fd < 0 ? -errno : 0;
}

static int configure(struct trace_session *s, const pid_t *tids, unsigned ntids, int follow_forks, unsigned kb,
		     char *err, size_t errlen)
{
	char val[32];
	int ret;

	snprintf(val, sizeof(val), "%u", kb);
	if ((ret = tracefs_write(s->dir, "tracing_on", "0")) || (ret = tracefs_write(s->dir, "trace_clock", "mono")))
		return err_set(err, errlen, ret, "tracefs instance %s: cannot configure it: %s", s->dir,
			       strerror(-ret));
	if ((ret = tracefs_write(s->dir, "buffer_size_kb", val)))
		return err_set(err, errlen, ret, "tracefs instance %s: cannot size the buffer: %s", s->dir,
			       strerror(-ret));
	if ((ret = set_pids(s, tids, ntids, follow_forks)))
		return err_set(err, errlen, ret, "tracefs instance %s: set_event_pid: %s", s->dir, strerror(-ret));
	if (enable_events(s) == 0) {
		snprintf(err, errlen, "tracefs at %s has no kvm events (is the kvm module loaded?)", s->root);
		return -ENOENT;
	}
	if ((ret = open_pipe(s)))
		return err_set(err, errlen, ret, "tracefs instance %s: cannot open trace_pipe: %s", s->dir,
			       strerror(-ret));
	return 0;
}

int trace_start(struct trace_session *s, const pid_t *tids, unsigned ntids, int follow_forks, unsigned buffer_kb,
		char *err, size_t errlen)
{
	char events[300];
	int ret;

	s->pipe_fd = -1;
	s->dir[0] = '\0';
	atomic_store(&s->stop, 0);
	pthread_mutex_init(&s->lock, NULL);
	if (!s->root[0] && host_root(s))
		return err_set(err, errlen, -ENOENT, "%s",
			       s->why[0] ? s->why
					 : "tracefs is not mounted at " TRACEFS_DIR
					   " (mount -t tracefs nodev " TRACEFS_DIR ")");
	snprintf(events, sizeof(events), "%s/events/kvm", s->root);
	if (access(events, F_OK)) {
		ret = -errno;
		if (ret == -ENOENT)
			return err_set(err, errlen, ret, "%s is missing: is the kvm module loaded?", events);
		return err_set(err, errlen, ret, "cannot read %s: %s%s", events, strerror(-ret), mount_hint(-ret));
	}
	snprintf(s->dir, sizeof(s->dir), "%s/instances/brisk-%d", s->root, (int)getpid());
	if (mkdir(s->dir, 0700) && errno != EEXIST) {
		ret = -errno;
		s->dir[0] = '\0';
		return err_set(err, errlen, ret, "cannot create a tracefs instance under %s: %s%s", s->root,
			       strerror(-ret), ret == -EACCES || ret == -EPERM ? " (needs root)" : "");
	}
	ret = configure(s, tids, ntids, follow_forks, buffer_kb, err, errlen);
	if (!ret && (ret = tracefs_write(s->dir, "tracing_on", "1")))
		err_set(err, errlen, ret, "tracefs instance %s: tracing_on: %s", s->dir, strerror(-ret));
	if (!ret && (ret = -bthread_create(&s->reader, reader, s)))
		err_set(err, errlen, ret, "tracefs: cannot start the reader thread: %s", strerror(-ret));
	if (ret) {
		trace_cleanup(s);
		return ret;
	}
	s->reader_started = 1;
	return 0;
}

/* Sums "KEY: N" over the per_cpu/cpuN/stats files. */
static uint64_t sum_stat(const struct trace_session *s, const char *key)
{
	char path[1024], line[128];
	uint64_t total = 0;
	size_t klen = strlen(key);
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "%s/per_cpu", s->dir);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL) {
		FILE *f;

		if (strncmp(e->d_name, "cpu", 3) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/per_cpu/%s/stats", s->dir, e->d_name);
		f = fopen(path, "re");
		while (f && fgets(line, sizeof(line), f))
			if (strncmp(line, key, klen) == 0 && line[klen] == ':')
				total += strtoull(line + klen + 1, NULL, 10);
		if (f)
			fclose(f);
	}
	closedir(d);
	return total;
}

void trace_stop(struct trace_session *s)
{
	if (!s->dir[0])
		return;
	tracefs_write(s->dir, "tracing_on", "0");
	atomic_store(&s->stop, 1);
	if (s->reader_started)
		bthread_join(s->reader, NULL);
	s->reader_started = 0;
	s->overrun = sum_stat(s, "overrun");
	s->dropped = sum_stat(s, "dropped events");
	trace_cleanup(s);
}

void trace_cleanup(struct trace_session *s)
{
	if (s->reader_started) {
		atomic_store(&s->stop, 1);
		bthread_join(s->reader, NULL);
		s->reader_started = 0;
	}
	if (s->pipe_fd >= 0)
		close(s->pipe_fd);
	s->pipe_fd = -1;
	if (!s->dir[0])
		return;
	/* Events off first: an instance with enabled events cannot be removed (EBUSY). */
	tracefs_write(s->dir, "events/enable", "0");
	tracefs_write(s->dir, "set_event_pid", "");
	if (rmdir(s->dir))
		fprintf(stderr, "brisk: cannot remove tracefs instance %s: %s\n", s->dir, strerror(errno));
	s->dir[0] = '\0';
}
