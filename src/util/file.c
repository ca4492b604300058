/* file.c - opening user-named files without blocking on FIFOs or destroying inputs (include/brisk/file.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/file.h"

const char *file_open_reason(int e)
{
	switch (e) {
	case ENOENT:
		return "no such file";
	case EACCES:
	case EPERM:
		return "permission denied";
	case ENOTDIR:
		return "a path component is not a directory";
	case EISDIR:
		return "is a directory";
	case EMFILE:
	case ENFILE:
		return "too many open files (raise the limit: ulimit -n)";
	case ENXIO:
		return "a FIFO with no reader";
	case ELOOP:
		return "too many symbolic links";
	default:
		return strerror(e);
	}
}

/* "WHAT PATH", or "WHATPATH" when WHAT ends in ':' ("--serial file:/x"). */
static const char *sep(const char *what)
{
	size_t n = strlen(what);

	return n && what[n - 1] == ':' ? "" : " ";
}

static const char *kind_name(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	return "not a regular file";
}

/* Clears O_NONBLOCK again, so later reads and writes behave as on any file. */
static int set_blocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int file_open_input(const char *path, const char *what, struct stat *st_out, char *err, size_t errlen)
{
	struct stat st;
	int fd, ret;

	/* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, unkillably. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		return err_set(err, errlen, ret, "%s%s%s: %s", what, sep(what), path, file_open_reason(-ret));
	}
	if (fstat(fd, &st) != 0) {
		ret = -errno;
		close(fd);
		return err_set(err, errlen, ret, "%s%s%s: fstat: %s", what, sep(what), path, strerror(-ret));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return err_set(err, errlen, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL, "%s%s%s: %s, not a regular file",
			       what, sep(what), path, kind_name(st.st_mode));
	}
	ret = set_blocking(fd);
	if (ret) {
		close(fd);
		return err_set(err, errlen, ret, "%s%s%s: fcntl: %s", what, sep(what), path, strerror(-ret));
	}
	if (st_out)
		*st_out = st;
	return fd;
}

static bool same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* ---- the guard ------------------------------------------------------------------------------------------ */

#define GUARD_MAX      128
#define GUARD_WHAT_MAX 64

static struct {
	pthread_mutex_t lock;
	unsigned n;
	struct {
		dev_t dev;
		ino_t ino;
		enum file_guard_kind kind;
		char what[GUARD_WHAT_MAX];
	} e[GUARD_MAX];
} guard = {.lock = PTHREAD_MUTEX_INITIALIZER};

void file_guard_add(const struct stat *st, enum file_guard_kind kind, const char *what)
{
	pthread_mutex_lock(&guard.lock);
	for (unsigned i = 0; i < guard.n; i++)
		if (guard.e[i].dev == st->st_dev && guard.e[i].ino == st->st_ino) {
			/* The strictest kind wins: a file that is both a snapshot and a disk stays a disk. */
			if (kind < guard.e[i].kind)
				guard.e[i].kind = kind;
			goto out;
		}
	/* Entries come from the configuration (at most ~25 files); a full table keeps the first GUARD_MAX. */
	if (guard.n < GUARD_MAX) {
		guard.e[guard.n].dev = st->st_dev;
		guard.e[guard.n].ino = st->st_ino;
		guard.e[guard.n].kind = kind;
		snprintf(guard.e[guard.n].what, GUARD_WHAT_MAX, "%s", what);
		guard.n++;
	}
out:
	pthread_mutex_unlock(&guard.lock);
}

void file_guard_add_path(const char *path, enum file_guard_kind kind, const char *what)
{
	struct stat st;

	if (path && *path && stat(path, &st) == 0)
		file_guard_add(&st, kind, what);
}

void file_guard_clear(void)
{
	pthread_mutex_lock(&guard.lock);
	guard.n = 0;
	pthread_mutex_unlock(&guard.lock);
}

/* -EBUSY with `err` when `st` is in the guard and not replaceable under `allow_snapshot`; else 0. */
static int check_guard(const struct stat *st, bool allow_snapshot, const char *path, const char *what, char *err,
		       size_t errlen)
{
	char name[GUARD_WHAT_MAX] = "";

	pthread_mutex_lock(&guard.lock);
	for (unsigned i = 0; i < guard.n && !name[0]; i++)
		if (guard.e[i].dev == st->st_dev && guard.e[i].ino == st->st_ino &&
		    !(allow_snapshot && guard.e[i].kind == FILE_GUARD_SNAPSHOT))
			memcpy(name, guard.e[i].what, sizeof(name));
	pthread_mutex_unlock(&guard.lock);
	if (!name[0])
		return 0;
	return err_set(err, errlen, -EBUSY, "%s%s%s: is %s; refusing to overwrite it", what, sep(what), path, name);
}

/*
 * Whether an open file other than `fd`'s holds a lock over [start, start+len) of it (len 0: to the end):
 * another VM's disk (brisk's OFD lock, QEMU's POSIX lock), or a memory file a VM maps (FILE_MAPPED_LOCK_OFF).
 * A file system without locks reports none.
 */
static bool locked_elsewhere(int fd, off_t start, off_t len)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = start, .l_len = len};

	return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

static int check_locks(int fd, bool snapshot, const char *path, const char *what, char *err, size_t errlen)
{
	/* A snapshot may replace a memory file another VM maps (it keeps the old inode); never a disk. */
	if (snapshot ? !locked_elsewhere(fd, 0, FILE_MAPPED_LOCK_OFF) : !locked_elsewhere(fd, 0, 0))
		return 0;
	return err_set(err, errlen, -EBUSY, "%s%s%s: is in use by another VM (locked); refusing to overwrite it", what,
		       sep(what), path);
}

int file_lock_mapped(int fd)
{
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = FILE_MAPPED_LOCK_OFF, .l_len = 1};

	return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
}

/* ---- streamed outputs ----------------------------------------------------------------------------------- */

int file_open_output(const char *path, const char *what, enum file_out_mode mode, bool nonblock, char *err,
		     size_t errlen)
{
	struct stat st;
	int fd, ret;
	/*
	 * A log's FIFO (logger, metrics) is opened read-write, as Firecracker v1.7.0 opens its logger and metrics
	 * paths (O_RDWR|O_NONBLOCK, src/vmm/src/logger/logging.rs): it needs no reader yet (firecracker-containerd
	 * creates them with mkfifo and reads them later), and a reader that goes away leaves the pipe open.
	 */
	int acc = mode == FILE_OUT_APPEND && stat(path, &st) == 0 && S_ISFIFO(st.st_mode) ? O_RDWR : O_WRONLY;

	/*
	 * No O_TRUNC here: the file is checked first. O_NONBLOCK: a FIFO with
	 * no reader fails with ENXIO instead of blocking the open.
	 */
	fd = open(path, acc | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (mode == FILE_OUT_APPEND ? O_APPEND : 0),
		  0644);
	if (fd < 0) {
		ret = -errno;
		return err_set(err, errlen, ret, "%s%s%s: %s", what, sep(what), path, file_open_reason(-ret));
	}
	if (fstat(fd, &st) != 0) {
		ret = -errno;
		goto fail_errno;
	}
	if (S_ISREG(st.st_mode)) {
		ret = check_guard(&st, false, path, what, err, errlen);
		if (!ret)
			ret = check_locks(fd, false, path, what, err, errlen);
		if (ret) {
			close(fd);
			return ret;
		}
		if (mode == FILE_OUT_TRUNCATE && ftruncate(fd, 0) != 0) {
			ret = -errno;
			goto fail_errno;
		}
	} else if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
		close(fd);
		return err_set(err, errlen, -EINVAL, "%s%s%s: %s, not a file, FIFO or terminal", what, sep(what), path,
			       kind_name(st.st_mode));
	}
	if (!nonblock && (ret = set_blocking(fd)) != 0)
		goto fail_errno;
	return fd;
fail_errno:
	close(fd);
	return err_set(err, errlen, ret, "%s%s%s: %s", what, sep(what), path, strerror(-ret));
}

/* ---- replacing a file whole ----------------------------------------------------------------------------- */

int file_split_target(const char *path, const char *what, char *dir, char *name, char *err, size_t errlen)
{
	char resolved[PATH_MAX];
	const char *p = path, *slash;
	struct stat st;
	size_t dlen;

	if (!*path)
		return err_set(err, errlen, -EINVAL, "%s: an empty path", what);
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		if (!realpath(path, resolved))
			return err_set(err, errlen, -errno, "%s%s%s: a symbolic link to %s", what, sep(what), path,
				       errno == ENOENT ? "a missing file" : strerror(errno));
		p = resolved;
	}
	slash = strrchr(p, '/');
	dlen = slash ? (size_t)(slash - p) : 1;
	if (!slash)
		memcpy(dir, ".", 2);
	else if (dlen == 0)
		memcpy(dir, "/", 2);
	else if (dlen < PATH_MAX)
		memcpy(dir, p, dlen), dir[dlen] = 0;
	else
		return err_set(err, errlen, -ENAMETOOLONG, "%s%s%s: the path is too long", what, sep(what), path);
	p = slash ? slash + 1 : p;
	if (!*p || strcmp(p, ".") == 0 || strcmp(p, "..") == 0)
		return err_set(err, errlen, -EISDIR, "%s%s%s: names a directory, not a file", what, sep(what), path);
	if (strlen(p) > NAME_MAX)
		return err_set(err, errlen, -ENAMETOOLONG, "%s%s%s: the file name is too long", what, sep(what), path);
	strcpy(name, p);
	return 0;
}

/* ".NAME.XXXXXX" (NAME cut to fit NAME_MAX) with six random characters. */
static void temp_name(const char *name, char *tmp)
{
	static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	unsigned char rnd[6];
	int keep = (int)strnlen(name, NAME_MAX - 8);

	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		for (unsigned i = 0; i < sizeof(rnd); i++)
			rnd[i] = (unsigned char)((unsigned long)ts.tv_nsec >> (5 * i)) ^ (unsigned char)getpid();
	}
	snprintf(tmp, NAME_MAX + 1, ".%.*s.%c%c%c%c%c%c", keep, name, chars[rnd[0] % 62], chars[rnd[1] % 62],
		 chars[rnd[2] % 62], chars[rnd[3] % 62], chars[rnd[4] % 62], chars[rnd[5] % 62]);
}

/* The target exists and is a FIFO or terminal: written directly (nothing to replace). */
static int open_direct(struct file_replace *r, const char *path, const char *what, char *err, size_t errlen)
{
	int fd = openat(r->dirfd, r->name, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	close(r->dirfd);
	r->dirfd = -1;
	if (fd < 0)
		return err_set(err, errlen, -errno, "%s%s%s: %s", what, sep(what), path, file_open_reason(errno));
	r->fd = fd;
	return 0;
}

/* An existing regular target: the guard, its locks, and the mode the new file takes. */
static int check_target(struct file_replace *r, unsigned flags, const char *path, const char *what, char *err,
			size_t errlen)
{
	bool snap = flags & FILE_REPLACE_SNAPSHOT;
	int fd, ret = check_guard(&r->target_st, snap, path, what, err, errlen);

	if (ret)
		return ret;
	fd = openat(r->dirfd, r->name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return err_set(err, errlen, -errno, "%s%s%s: %s", what, sep(what), path, file_open_reason(errno));
	ret = check_locks(fd, snap, path, what, err, errlen);
	close(fd);
	return ret;
}

/* The temporary file beside the target, exclusive (O_EXCL), with the target's permissions. */
static int create_temp(struct file_replace *r, const char *path, const char *what, char *err, size_t errlen)
{
	mode_t mode = r->target_exists ? r->target_st.st_mode & 07777 : 0644;

	for (int tries = 0; tries < 16; tries++) {
		temp_name(r->name, r->tmp);
		r->fd = openat(r->dirfd, r->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (r->fd >= 0 || errno != EEXIST)
			break;
	}
	if (r->fd < 0)
		return err_set(err, errlen, -errno, "%s%s%s: creating a temporary file beside it: %s", what, sep(what),
			       path, file_open_reason(errno));
	if ((r->target_exists && fchmod(r->fd, mode) != 0) || fstat(r->fd, &r->st) != 0) {
		int ret = -errno;

		file_replace_abort(r);
		return err_set(err, errlen, ret, "%s%s%s: the temporary file: %s", what, sep(what), path,
			       strerror(-ret));
	}
	return 0;
}

int file_replace_open(struct file_replace *r, const char *path, const char *what, unsigned flags, char *err,
		      size_t errlen)
{
	char dir[PATH_MAX];
	int ret;

	memset(r, 0, sizeof(*r));
	r->fd = r->dirfd = -1;
	if ((ret = file_split_target(path, what, dir, r->name, err, errlen)))
		return ret;
	r->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->dirfd < 0)
		return err_set(err, errlen, -errno, "%s%s%s: the directory %s: %s", what, sep(what), path, dir,
			       file_open_reason(errno));
	if (fstat(r->dirfd, &r->dir_st) != 0) {
		ret = err_set(err, errlen, -errno, "%s%s%s: fstat: %s", what, sep(what), path, strerror(errno));
		goto fail;
	}
	if (fstatat(r->dirfd, r->name, &r->target_st, AT_SYMLINK_NOFOLLOW) == 0) {
		r->target_exists = true;
		if (!S_ISREG(r->target_st.st_mode)) {
			if (!(flags & FILE_REPLACE_REGULAR) &&
			    (S_ISFIFO(r->target_st.st_mode) || S_ISCHR(r->target_st.st_mode)))
				return open_direct(r, path, what, err, errlen);
			ret = err_set(err, errlen, -EINVAL, "%s%s%s: %s, not a regular file", what, sep(what), path,
				      kind_name(r->target_st.st_mode));
			goto fail;
		}
		if ((ret = check_target(r, flags, path, what, err, errlen)))
			goto fail;
	} else if (errno != ENOENT) {
		ret = err_set(err, errlen, -errno, "%s%s%s: %s", what, sep(what), path, file_open_reason(errno));
		goto fail;
	}
	if ((ret = create_temp(r, path, what, err, errlen)))
		goto fail;
	return 0;
fail:
	if (r->dirfd >= 0)
		close(r->dirfd);
	r->dirfd = -1;
	return ret;
}

int file_replace_sync(struct file_replace *r)
{
	return fsync(r->fd) == 0 ? 0 : -errno;
}

int file_replace_commit(struct file_replace *r, bool sync, char *err, size_t errlen)
{
	int ret = 0;

	if (r->dirfd < 0) { /* written directly */
		if (r->fd >= 0 && close(r->fd) != 0)
			ret = err_set(err, errlen, -errno, "closing %s: %s", r->name, strerror(errno));
		r->fd = -1;
		return ret;
	}
	if (sync && fsync(r->fd) != 0)
		return err_set(err, errlen, -errno, "fsync of %s: %s", r->tmp, strerror(errno));
	if (renameat(r->dirfd, r->tmp, r->dirfd, r->name) != 0)
		return err_set(err, errlen, -errno, "renaming %s to %s: %s", r->tmp, r->name, strerror(errno));
	r->tmp[0] = 0; /* renamed: nothing left to remove */
	/* The directory's entry is what makes the rename durable (rename(2) alone is atomic, not durable). */
	if (sync && fsync(r->dirfd) != 0)
		ret = err_set(err, errlen, -errno, "fsync of the directory of %s: %s", r->name, strerror(errno));
	file_replace_keep(r);
	return ret;
}

void file_replace_keep(struct file_replace *r)
{
	if (r->fd >= 0)
		close(r->fd);
	if (r->dirfd >= 0)
		close(r->dirfd);
	r->fd = r->dirfd = -1;
}

void file_replace_abort(struct file_replace *r)
{
	if (r->dirfd >= 0 && r->tmp[0])
		unlinkat(r->dirfd, r->tmp, 0);
	file_replace_keep(r);
}

bool file_replace_same_target(const struct file_replace *a, const struct file_replace *b)
{
	if (same_inode(&a->dir_st, &b->dir_st) && strcmp(a->name, b->name) == 0)
		return true;
	return a->target_exists && b->target_exists && same_inode(&a->target_st, &b->target_st);
}

bool file_is_dev_null(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3;
}
