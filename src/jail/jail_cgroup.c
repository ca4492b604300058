/* jail_cgroup.c - the jailed VM's cgroup v2: <cgroup2 mount>/brisk/<ID>, its --cgroup values, the child moved in. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/exitcode.h"
#include "brisk/jail.h"

#define FAIL(status, ...) (err_set(err, errlen, 0, __VA_ARGS__), (status))

/* Writes s to path. Returns 0 or -errno. */
static int write_file(const char *path, const char *s)
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
	if (!listed(path, ctl) && (ret = write_file(path, plus)))
		return FAIL(EXIT_HOST, "write %s to %s: %s", plus, path, strerror(-ret));
	snprintf(path, sizeof(path), "%s/%s/cgroup.subtree_control", mnt, JAIL_CGROUP_PARENT);
	if (!listed(path, ctl) && (ret = write_file(path, plus)))
		return FAIL(EXIT_HOST, "write %s to %s: %s", plus, path, strerror(-ret));
	return 0;
}

static int write_values(const struct jail_config *cfg, const struct jail_cgroup *cg, char *err, size_t errlen)
{
	char path[PATH_MAX + 64];
	int ret;

	for (unsigned i = 0; i < cfg->nr_cg; i++) {
		snprintf(path, sizeof(path), "%s/%s", cg->dir, cfg->cg[i].key);
		ret = write_file(path, cfg->cg[i].value);
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

		snprintf(parent, sizeof(parent), "%s", cg->dir);
		cg->dir[0] = '\0';
		if (e == EEXIST)
			return FAIL(EXIT_USAGE,
				    "--id %s: the cgroup %s already exists (a jail with this ID runs, or "
				    "it was left behind: rmdir it)",
				    cfg->id, parent);
		return FAIL(EXIT_HOST, "mkdir %s: %s", parent, strerror(e));
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
	if ((ret = write_file(path, num)))
		return FAIL(EXIT_HOST, "write %s to %s: %s", num, path, strerror(-ret));
	return 0;
}

void jail_cgroup_remove(struct jail_cgroup *cg)
{
	if (cg->dir[0] && rmdir(cg->dir) && errno != ENOENT)
		fprintf(stderr, "brisk jail: warning: rmdir %s: %s\n", cg->dir, strerror(errno));
	cg->dir[0] = '\0';
}
