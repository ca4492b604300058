/* jail_fs.c - the jail's tree on the host: the chroot base checked, <base>/brisk/<ID>/root built and populated. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/exitcode.h"
#include "brisk/helper.h"
#include "brisk/jail.h"

static bool is_dynamic(const char *path);
static int find_helpers(struct jail_tree *t, char *err, size_t errlen);

/* err_set for the exit-status convention of this file. */
#define FAIL(status, ...) (err_set(err, errlen, 0, __VA_ARGS__), (status))

/*
 * A directory any user could rename entries in (world-writable, not sticky)
 * or that belongs to someone other than root lets that someone swap the jail
 * under the jailer's feet: the base and every directory above it must be
 * safe.
 */
static int check_dir_safe(const char *base, const char *dir, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(dir, &st))
		return FAIL(EXIT_USAGE, "--chroot-base %s: %s: %s", base, dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return FAIL(EXIT_USAGE, "--chroot-base %s: %s is not a directory", base, dir);
	if (st.st_uid != 0)
		return FAIL(EXIT_USAGE, "--chroot-base %s: %s is owned by uid %u, not root", base, dir,
			    (unsigned)st.st_uid);
	if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
		return FAIL(EXIT_USAGE, "--chroot-base %s: %s is world-writable without the sticky bit", base, dir);
	return 0;
}

static int check_base(const char *base, struct jail_tree *t, char *err, size_t errlen)
{
	struct statvfs vfs;
	char path[PATH_MAX];
	int ret;

	/* The default base is created on first use, as a fresh host has no /srv/jailer. */
	if (strcmp(base, JAIL_DEFAULT_BASE) == 0 && mkdir(base, 0755) && errno != EEXIST)
		return FAIL(EXIT_HOST, "mkdir %s: %s", base, strerror(errno));
	if (!realpath(base, t->base))
		return FAIL(EXIT_USAGE, "--chroot-base %s: %s", base, strerror(errno));
	if ((ret = check_dir_safe(base, "/", err, errlen)))
		return ret;
	for (char *s = strchr(t->base + 1, '/');; s = strchr(s + 1, '/')) {
		snprintf(path, sizeof(path), "%.*s", s ? (int)(s - t->base) : (int)strlen(t->base), t->base);
		if ((ret = check_dir_safe(base, path, err, errlen)))
			return ret;
		if (!s)
			break;
	}
	if (statvfs(t->base, &vfs))
		return FAIL(EXIT_HOST, "statvfs %s: %s", t->base, strerror(errno));
	if (vfs.f_flag & (ST_NODEV | ST_NOEXEC | ST_RDONLY))
		return FAIL(EXIT_USAGE,
			    "--chroot-base %s: its file system is mounted %s: the jail needs device nodes, "
			    "an executable brisk and writes",
			    base,
			    vfs.f_flag & ST_RDONLY  ? "read-only"
			    : vfs.f_flag & ST_NODEV ? "nodev"
						    : "noexec");
	return 0;
}

/*
 * A file RUN-ARGS names: resolved (every symlink followed: what is placed is
 * the file itself, never a link that would point outside the jail) and a
 * regular file.
 */
static int check_file(struct jail_file *f, char *err, size_t errlen)
{
	struct stat st;

	free(f->real);
	f->real = realpath(f->host, NULL);
	if (!f->real || stat(f->real, &st))
		return FAIL(EXIT_USAGE, "%s %s: %s", f->opt, f->host,
			    errno == ENOENT ? "no such file" : strerror(errno));
	if (!S_ISREG(st.st_mode))
		return FAIL(EXIT_USAGE, "%s %s: not a regular file", f->opt, f->host);
	return 0;
}

int jail_check_inputs(struct jail_config *cfg, struct jail_tree *t, char *err, size_t errlen)
{
	struct stat st;
	int ret;

	*t = (struct jail_tree){.root_fd = -1};
	if ((ret = check_base(cfg->chroot_base, t, err, errlen)))
		return ret;
	if ((size_t)snprintf(t->id_dir, sizeof(t->id_dir), "%s/%s/%s", t->base, JAIL_CGROUP_PARENT, cfg->id) >=
		sizeof(t->id_dir) - 8 ||
	    (size_t)snprintf(t->root, sizeof(t->root), "%s/root", t->id_dir) >= sizeof(t->root))
		return FAIL(EXIT_USAGE, "--chroot-base %s: the path is too long", cfg->chroot_base);
	for (unsigned i = 0; i < cfg->nr_files; i++)
		if ((ret = check_file(&cfg->files[i], err, errlen)))
			return ret;
	if (is_dynamic("/proc/self/exe"))
		return FAIL(EXIT_USAGE,
			    "this brisk is dynamically linked (as ASan builds are): the jail places shared "
			    "libraries for the helpers only (and has no /proc for the sanitizer); use a static "
			    "build (make STATIC=1)");
	if (stat("/dev/kvm", &st) || !S_ISCHR(st.st_mode))
		return FAIL(EXIT_HOST, "/dev/kvm: %s on this host: a jail without KVM cannot run a VM",
			    errno == ENOENT ? "no such device node" : "not a character device");
	return find_helpers(t, err, errlen);
}

/* Copies regular file src to dirfd/name, mode 0755, owned by root: brisk's own copy, as Firecracker's jailer. */
static int copy_exec(const char *src, int dirfd, const char *name, const char *root, char *err, size_t errlen)
{
	char shown[PATH_MAX + 64];
	int in, ret;

	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return FAIL(EXIT_HOST, "open %s: %s", src, strerror(errno));
	snprintf(shown, sizeof(shown), "%s/%s", root, name);
	ret = jail_copy(in, src, dirfd, name, 0755, shown, err, errlen);
	close(in);
	return ret;
}

/* Whether ELF file path asks for a program interpreter: a dynamically linked program. */
static bool is_dynamic(const char *path)
{
	char interp[PATH_MAX];

	return jail_elf_interp(path, interp, sizeof(interp)) != 0;
}

/*
 * A helper next to brisk (helper.h), found before anything is created, with
 * the shared objects its loader maps when it is dynamically linked. One not
 * found is not placed: brisk reports "helper not found" if the VM needs it.
 */
static int find_helper(struct jail_helper *h, const char *name, const char *env, char *err, size_t errlen)
{
	char path[PATH_MAX];

	if (helper_find(name, env, path, sizeof(path)))
		return 0;
	if (!realpath(path, h->host))
		return FAIL(EXIT_HOST, "%s %s: %s", name, path, strerror(errno));
	return jail_libs_find(name, h->host, &h->libs, err, errlen);
}

static int find_helpers(struct jail_tree *t, char *err, size_t errlen)
{
	/* the API's HTTP helper is brisk itself, forked (api_link.h): nothing to place for it */
	return find_helper(&t->slirp, "brisk-slirp", "BRISK_SLIRP_HELPER", err, errlen);
}

/* A found helper as /NAME, with its interpreter and libraries at their host paths (jail_libs.c). */
static int place_helper(struct jail_tree *t, const struct jail_helper *h, const char *name, bool *placed, char *err,
			size_t errlen)
{
	int ret;

	if (!h->host[0])
		return 0;
	if ((ret = copy_exec(h->host, t->root_fd, name, t->root, err, errlen)))
		return ret;
	if (h->libs && (ret = jail_libs_place(t, name, h->libs, err, errlen)))
		return ret;
	*placed = true;
	return 0;
}

/* brisk itself and, when found, its helpers (helper.h), into the jail's root. */
static int place_programs(struct jail_tree *t, char *err, size_t errlen)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int ret;

	if (n < 0)
		return FAIL(EXIT_HOST, "readlink /proc/self/exe: %s", strerror(errno));
	exe[n] = '\0';
	if ((ret = copy_exec(exe, t->root_fd, JAIL_EXEC_NAME, t->root, err, errlen)))
		return ret;
	return place_helper(t, &t->slirp, "brisk-slirp", &t->slirp_helper, err, errlen);
}

/*
 * Each file RUN-ARGS named, resolved (check_file: a symlink's target, never
 * the link), as a hard link (same file system: the jail sees the very inode,
 * no copy of a disk image) or, across file systems, an empty placeholder the
 * child bind-mounts the file onto (jail_exec.c).
 */
static int place_files(struct jail_config *cfg, struct jail_tree *t, char *err, size_t errlen)
{
	for (unsigned i = 0; i < cfg->nr_files; i++) {
		struct jail_file *f = &cfg->files[i];
		int fd;

		if (linkat(AT_FDCWD, f->real, t->root_fd, f->name, AT_SYMLINK_FOLLOW) == 0)
			continue;
		if (errno != EXDEV)
			return FAIL(EXIT_HOST, "link %s to %s/%s: %s", f->real, t->root, f->name, strerror(errno));
		fd = openat(t->root_fd, f->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return FAIL(EXIT_HOST, "create %s/%s: %s", t->root, f->name, strerror(errno));
		close(fd);
		f->bind = true;
	}
	return 0;
}

/* mkdir dirfd/path (0700), owned by the jail's user: directories brisk creates files in. */
static int own_dir(int dirfd, const char *path, const struct jail_config *cfg, const char *root, char *err,
		   size_t errlen)
{
	struct stat st;

	if (mkdirat(dirfd, path, 0700) && errno != EEXIST)
		return FAIL(EXIT_HOST, "mkdir %s/%s: %s", root, path, strerror(errno));
	if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) || !S_ISDIR(st.st_mode))
		return FAIL(EXIT_USAGE, "%s/%s: not a directory", root, path);
	if (fchownat(dirfd, path, cfg->uid, cfg->gid, AT_SYMLINK_NOFOLLOW))
		return FAIL(EXIT_HOST, "chown %s/%s: %s", root, path, strerror(errno));
	return 0;
}

/* The directories above each in-jail output path (API socket, serial log, report, vsock socket). */
static int out_dirs(const struct jail_config *cfg, const struct jail_tree *t, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int ret;

	for (unsigned i = 0; i < cfg->nr_out; i++) {
		const char *p = cfg->out[i] + strspn(cfg->out[i], "/");
		const char *last = strrchr(p, '/');

		for (const char *s = strchr(p, '/'); s && last; s = strchr(s + 1, '/')) {
			snprintf(path, sizeof(path), "%.*s", (int)(s - p), p);
			if (path[0] && path[strlen(path) - 1] != '/' &&
			    (ret = own_dir(t->root_fd, path, cfg, t->root, err, errlen)))
				return ret;
		}
	}
	return 0;
}

/* The device nodes brisk opens, with the host's numbers (Firecracker: 0600, owned by the jail's user). */
static const struct {
	const char *path; /* host path; in the jail the same, relative to root */
	unsigned mode;
	bool required;
	const char *without; /* what does not work when the host has none */
} devices[] = {
    {"/dev/kvm", 0600, true, NULL},
    {"/dev/net/tun", 0600, false, "--net tap"},
    {"/dev/urandom", 0600, false, "nothing brisk needs today"},
    {"/dev/null", 0666, false, "the helpers' stdin"},
};

static int make_devices(const struct jail_config *cfg, const struct jail_tree *t, char *err, size_t errlen)
{
	struct stat st;
	int ret;

	if ((ret = own_dir(t->root_fd, "dev", cfg, t->root, err, errlen)) ||
	    (ret = own_dir(t->root_fd, "dev/net", cfg, t->root, err, errlen)))
		return ret;
	for (size_t i = 0; i < sizeof(devices) / sizeof(devices[0]); i++) {
		const char *rel = devices[i].path + 1;

		if (stat(devices[i].path, &st) || !S_ISCHR(st.st_mode)) {
			if (devices[i].required)
				return FAIL(EXIT_HOST, "%s: no such device node on this host", devices[i].path);
			fprintf(stderr, "brisk jail: warning: the host has no %s; in the jail: no %s\n",
				devices[i].path, devices[i].without);
			continue;
		}
		if (mknodat(t->root_fd, rel, S_IFCHR | 0600, st.st_rdev))
			return FAIL(EXIT_HOST, "mknod %s/%s (%u:%u): %s", t->root, rel, major(st.st_rdev),
				    minor(st.st_rdev), strerror(errno));
		if (fchownat(t->root_fd, rel, cfg->uid, cfg->gid, AT_SYMLINK_NOFOLLOW) ||
		    fchmodat(t->root_fd, rel, devices[i].mode, 0))
			return FAIL(EXIT_HOST, "chown/chmod %s/%s: %s", t->root, rel, strerror(errno));
	}
	return 0;
}

/* mkdir at + open it as a directory, refusing symlinks. Returns the fd or -1 (errno set). */
static int mkdir_open(int dirfd, const char *name, mode_t mode, bool excl)
{
	if (mkdirat(dirfd, name, mode) && (excl || errno != EEXIST))
		return -1;
	return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* <base>/brisk/<ID>/root: the parent shared by every jail must be root's; <ID> must be new. */
static int make_root(const struct jail_config *cfg, struct jail_tree *t, char *err, size_t errlen)
{
	int base, parent, id;
	struct stat st;

	base = open(t->base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (base < 0)
		return FAIL(EXIT_HOST, "open %s: %s", t->base, strerror(errno));
	parent = mkdir_open(base, JAIL_CGROUP_PARENT, 0755, false);
	close(base);
	if (parent < 0)
		return FAIL(EXIT_HOST, "mkdir %s/%s: %s", t->base, JAIL_CGROUP_PARENT, strerror(errno));
	if (fstat(parent, &st) || st.st_uid != 0 || (st.st_mode & S_IWOTH)) {
		close(parent);
		return FAIL(EXIT_USAGE, "--chroot-base %s: %s/%s is not root's or is world-writable", cfg->chroot_base,
			    t->base, JAIL_CGROUP_PARENT);
	}
	id = mkdir_open(parent, cfg->id, 0755, true);
	close(parent);
	if (id < 0 && errno == EEXIST)
		return FAIL(EXIT_USAGE,
			    "--id %s: %s already exists (a jail with this ID runs or was left behind: "
			    "remove it first)",
			    cfg->id, t->id_dir);
	if (id < 0)
		return FAIL(EXIT_HOST, "mkdir %s: %s", t->id_dir, strerror(errno));
	t->created = true;
	t->root_fd = mkdir_open(id, "root", 0700, true);
	close(id);
	if (t->root_fd < 0)
		return FAIL(EXIT_HOST, "mkdir %s: %s", t->root, strerror(errno));
	return 0;
}

int jail_build(struct jail_config *cfg, struct jail_tree *t, char *err, size_t errlen)
{
	int ret;

	if ((ret = make_root(cfg, t, err, errlen)) || (ret = place_programs(t, err, errlen)) ||
	    (ret = place_files(cfg, t, err, errlen)) || (ret = make_devices(cfg, t, err, errlen)) ||
	    (ret = own_dir(t->root_fd, "run", cfg, t->root, err, errlen)) || (ret = out_dirs(cfg, t, err, errlen)))
		return ret;
	/* The jail's "/" is its user's (Firecracker's FOLDER_HIERARCHY): brisk creates sockets and logs there. */
	if (fchown(t->root_fd, cfg->uid, cfg->gid) || fchmod(t->root_fd, 0700))
		return FAIL(EXIT_HOST, "chown %s: %s", t->root, strerror(errno));
	return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	if (remove(path))
		fprintf(stderr, "brisk jail: cleaning up: remove %s: %s\n", path, strerror(errno));
	return 0;
}

void jail_remove(struct jail_tree *t)
{
	free(t->slirp.libs);
	t->slirp.libs = NULL;
	if (t->root_fd >= 0)
		close(t->root_fd);
	t->root_fd = -1;
	if (!t->created)
		return;
	/* Depth first, never following a link or entering another mount: only what jail_build made goes. */
	nftw(t->id_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	t->created = false;
}
