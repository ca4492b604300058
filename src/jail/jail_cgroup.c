/* jail_cgroup.c - the jailed VM's cgroup v2: <cgroup2 mount>/brisk/<ID>, its --cgroup values, the child moved in. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/exitcode.h"
#include "brisk/jail.h"

#define FAIL(status, ...) (err_set(err, errlen, 0, __VA_ARGS__), (status))

/* Writes s to path. Returns 0 or -errno. */
static int cgroup_write(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;
	int e;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	e = n < 0 ? errno : 0;
	if (close(fd) && !e)
		e = errno;
	return n == (ssize_t)strlen(s) ? -e : -(e ? e : EIO);
}

/* The cgroup v2 mount: /sys/fs/cgroup when it is one, else the first cgroup2 in /proc/self/mounts (hybrid hosts). */
static int find_mount(char *out, size_t len)
{
	char line[1024], dev[256], dir[PATH_MAX], type[64];
	FILE *f = fopen("/proc/self/mounts", "re");
	int ret = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%255s %4095s %63s", dev, dir, type) != 3 || strcmp(type, "cgroup2") != 0 ||
		    strchr(dir, '\\'))
			continue;
		if (ret == 0 && strcmp(dir, "/sys/fs/cgroup") != 0)
			continue;
		snprintf(out, len, "%s", dir);
		ret = 0;
	}
	fclose(f);
	return ret;
}

/* Whether word w is in the space-separated list of file path (cgroup.controllers). */
static bool listed(const char *path, const char *w)
{
	char buf[512], *tok, *save;
	FILE *f = fopen(path, "re");
	bool found = false;

	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f))
		for (tok = strtok_r(buf, " \n", &save); tok && !found; tok = strtok_r(NULL, " \n", &save))
			found = strcmp(tok, w) == 0;
	fclose(f);
	return found;
}

/* Enables the controller of key (its prefix before '.') for <mnt>/brisk's children. */
static int enable_controller(const char *mnt, const char *key, char *err, size_t errlen)
{
	char ctl[32], path[PATH_MAX + 64], plus[40];
	size_t n = strcspn(key, ".");
	int ret;

	if (n >= sizeof(ctl) || strncmp(key, "cgroup", n) == 0)
		return 0;
	snprintf(ctl, sizeof(ctl), "%.*s", (int)n, key);
	snprintf(path, sizeof(path), "%s/cgroup.controllers", mnt);
	if (!listed(path, ctl))
		return FAIL(EXIT_HOST, "--cgroup %s: the %s controller is not available in %s (see %s)", key, ctl, mnt,
			    path);
	snprintf(plus, sizeof(plus), "+%s", ctl);
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", mnt);
	if (!listed(path, ctl) && (ret = cgroup_write(path, plus)))
		return FAIL(EXIT_HOST, "write %s to %s: %s", plus, path, strerror(-ret));
	snprintf(path, sizeof(path), "%s/%s/cgroup.subtree_control", mnt, JAIL_CGROUP_PARENT);
	if (!listed(path, ctl) && (ret = cgroup_write(path, plus)))
		return FAIL(EXIT_HOST, "write %s to %s: %s", plus, path, strerror(-ret));
	return 0;
}

static int write_values(const struct jail_config *cfg, const struct jail_cgroup *cg, char *err, size_t errlen)
{
	char path[PATH_MAX + 64];
	int ret;

	for (unsigned i = 0; i < cfg->nr_cg; i++) {
		snprintf(path, sizeof(path), "%s/%s", cg->dir, cfg->cg[i].key);
		ret = cgroup_write(path, cfg->cg[i].value);
		if (ret == -ENOENT)
			return FAIL(EXIT_USAGE, "--cgroup %s=%s: %s: no such cgroup file", cfg->cg[i].key,
				    cfg->cg[i].value, path);
		if (ret == -EINVAL || ret == -ERANGE)
			return FAIL(EXIT_USAGE, "--cgroup %s=%s: the kernel refused the value (%s)", cfg->cg[i].key,
				    cfg->cg[i].value, strerror(-ret));
		if (ret)
			return FAIL(EXIT_HOST, "write %s to %s: %s", cfg->cg[i].value, path, strerror(-ret));
	}
	return 0;
}

/*
 * cg->dir exists although this jail holds the ID (its jail directory was new: jail_build ran first). A
 * cgroup with no process and no child cgroup is what an earlier jail of this ID left when it could not
 * remove it (killed, and its reaper too): removed and made again. rmdir(2) itself refuses (EBUSY) one
 * that is in use. Returns 0 with the cgroup made, or EXIT_USAGE / EXIT_HOST with err.
 */
static int reuse_stale(const struct jail_config *cfg, const struct jail_cgroup *cg, char *err, size_t errlen)
{
	int e;

	if (rmdir(cg->dir) == 0 && mkdir(cg->dir, 0755) == 0) {
		fprintf(stderr,
			"brisk jail: note: %s was left behind by an earlier jail with this ID (empty): removed "
			"and made again\n",
			cg->dir);
		return 0;
	}
	e = errno;
	if (e == EBUSY || e == ENOTEMPTY)
		return FAIL(EXIT_USAGE,
			    "--id %s: the cgroup %s is in use (it holds processes or child cgroups: a VM with "
			    "this ID runs)",
			    cfg->id, cg->dir);
	return FAIL(EXIT_HOST, "--id %s: the cgroup %s exists and cannot be replaced: %s", cfg->id, cg->dir,
		    strerror(e));
}

int jail_cgroup_create(const struct jail_config *cfg, struct jail_cgroup *cg, char *err, size_t errlen)
{
	char mnt[PATH_MAX], parent[PATH_MAX + 16];
	int ret;

	cg->dir[0] = '\0';
	if (find_mount(mnt, sizeof(mnt))) {
		if (cfg->nr_cg)
			return FAIL(EXIT_HOST, "--cgroup: no cgroup v2 file system is mounted (/proc/self/mounts)");
		fprintf(stderr, "brisk jail: note: no cgroup v2 mounted: the VM gets no cgroup of its own\n");
		return 0;
	}
	snprintf(parent, sizeof(parent), "%s/%s", mnt, JAIL_CGROUP_PARENT);
	if (mkdir(parent, 0755) && errno != EEXIST) {
		if (cfg->nr_cg)
			return FAIL(EXIT_HOST, "--cgroup: mkdir %s: %s", parent, strerror(errno));
		fprintf(stderr, "brisk jail: note: mkdir %s: %s: the VM gets no cgroup of its own\n", parent,
			strerror(errno));
		return 0;
	}
	for (unsigned i = 0; i < cfg->nr_cg; i++)
		if ((ret = enable_controller(mnt, cfg->cg[i].key, err, errlen)))
			return ret;
	if ((size_t)snprintf(cg->dir, sizeof(cg->dir), "%s/%s", parent, cfg->id) >= sizeof(cg->dir))
		return FAIL(EXIT_HOST, "cgroup path %s/%s is too long", parent, cfg->id);
	if (mkdir(cg->dir, 0755)) {
		int e = errno;

		ret = e == EEXIST ? reuse_stale(cfg, cg, err, errlen)
				  : FAIL(EXIT_HOST, "mkdir %s: %s", cg->dir, strerror(e));
		if (ret) {
			cg->dir[0] = '\0'; /* not ours: never removed by this jail */
			return ret;
		}
	}
	return write_values(cfg, cg, err, errlen);
}

int jail_cgroup_enter(const struct jail_cgroup *cg, pid_t pid, char *err, size_t errlen)
{
	char path[PATH_MAX + 16], num[24];
	int ret;

	if (!cg->dir[0])
		return 0;
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg->dir);
	snprintf(num, sizeof(num), "%d", (int)pid);
	if ((ret = cgroup_write(path, num)))
		return FAIL(EXIT_HOST, "write %s to %s: %s", num, path, strerror(-ret));
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* rmdir(dir), waiting up to `wait_ms` while it is busy (brisk's helpers still exiting after brisk). */
static int remove_dir(const char *dir, long wait_ms)
{
	for (long waited = 0;; waited += 20) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY || waited >= wait_ms)
			return -errno;
		sleep_ms(20);
	}
}

void jail_cgroup_remove(struct jail_cgroup *cg)
{
	int ret = cg->dir[0] ? remove_dir(cg->dir, JAIL_CGROUP_DRAIN_MS) : 0;

	if (ret)
		fprintf(stderr, "brisk jail: warning: rmdir %s: %s\n", cg->dir, strerror(-ret));
	cg->dir[0] = '\0';
}

/* ---- the reaper ---------------------------------------------------------------------------------- */

/* 1 when the cgroup whose cgroup.events is open as fd holds processes, 0 when not, -errno (gone: -ENODEV). */
static int populated(int fd)
{
	char buf[256];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	const char *p;

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	p = strstr(buf, "populated ");
	return p ? p[10] == '1' : -EINVAL;
}

/*
 * The reaper's body: stdio on /dev/null, its own session (a terminal's signals and hangup are not for
 * it), no other fd. It waits for the go byte (or EOF: the jail ended first), then until the cgroup has
 * no process (cgroup.events "populated 0": it notifies with POLLPRI; re-read every second anyway), and
 * removes it, unless the directory is no longer the one it watched. Never returns.
 */
_Noreturn static void reap(const char *dir, int go_fd)
{
	char path[PATH_MAX + 32];
	struct stat watched, now;
	unsigned char go;
	int fd, null, ret;

	snprintf(path, sizeof(path), "%s/cgroup.events", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0 || stat(dir, &watched) || null < 0)
		_exit(1);
	setsid();
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	prctl(PR_SET_NAME, "brisk-jail-reap", 0, 0, 0);
	dup2(null, 0), dup2(null, 1), dup2(null, 2);
	/* to 3 and 4 by way of fds above both, so that neither move overwrites the other */
	go_fd = fcntl(go_fd, F_DUPFD, 10);
	fd = fcntl(fd, F_DUPFD, 10);
	if (go_fd < 0 || fd < 0 || dup2(go_fd, 3) < 0 || dup2(fd, 4) < 0)
		_exit(1);
	syscall(SYS_close_range, 5U, ~0U, 0U);
	while (read(3, &go, 1) < 0 && errno == EINTR)
		;
	close(3);
	while ((ret = populated(4)) == 1) {
		struct pollfd pfd = {.fd = 4, .events = POLLPRI};

		poll(&pfd, 1, 1000);
	}
	if (ret == 0 && stat(dir, &now) == 0 && now.st_ino == watched.st_ino && now.st_dev == watched.st_dev)
		remove_dir(dir, JAIL_CGROUP_DRAIN_MS);
	_exit(0);
}

pid_t jail_cgroup_reaper(const struct jail_cgroup *cg, int *go_fd)
{
	int fds[2];
	pid_t pid;

	*go_fd = -1;
	if (!cg->dir[0])
		return 0;
	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(fds[1]);
		reap(cg->dir, fds[0]);
	}
	close(fds[0]);
	if (pid < 0) {
		int e = errno;

		close(fds[1]);
		return -e;
	}
	*go_fd = fds[1];
	return pid;
}
