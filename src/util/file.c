/* file.c - opening user-named files without blocking on FIFOs or destroying inputs (include/brisk/file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
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

static int same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* A regular output file must not be one of the inputs being booted. */
static int check_avoid(const struct stat *st, const char *path, const char *what, const struct file_avoid *avoid,
		       size_t nr_avoid, char *err, size_t errlen)
{
	for (size_t i = 0; i < nr_avoid; i++)
		if (avoid[i].st && same_inode(st, avoid[i].st))
			return err_set(err, errlen, -EINVAL, "%s%s%s: is %s; refusing to overwrite it", what, sep(what),
				       path, avoid[i].name);
	return 0;
}

int file_open_output(const char *path, const char *what, const struct file_avoid *avoid, size_t nr_avoid, int nonblock,
		     char *err, size_t errlen)
{
	struct stat st;
	int fd, ret;

	/*
	 * No O_TRUNC here: the file is checked first. O_NONBLOCK: a FIFO with
	 * no reader fails with ENXIO instead of blocking the open.
	 */
	fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		return err_set(err, errlen, ret, "%s%s%s: %s", what, sep(what), path, file_open_reason(-ret));
	}
	if (fstat(fd, &st) != 0) {
		ret = -errno;
		goto fail_errno;
	}
	if (S_ISREG(st.st_mode)) {
		ret = check_avoid(&st, path, what, avoid, nr_avoid, err, errlen);
		if (ret) {
			close(fd);
			return ret;
		}
		if (ftruncate(fd, 0) != 0) {
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
