/* image.c - kernel image files: mapped read-only, with errors that name the file and the reason. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/boot.h"
#include "x86_boot.h"

int boot_fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

static const char *open_reason(int e)
{
	switch (e) {
	case ENOENT:
		return "no such file";
	case EACCES:
	case EPERM:
		return "permission denied";
	case ENOTDIR:
		return "a path component is not a directory";
	default:
		return strerror(e);
	}
}

/* The file must be a regular file of 1 byte .. BOOT_IMAGE_MAX. */
static int check_stat(const struct stat *st, const char *path, char *err, size_t errlen)
{
	if (S_ISDIR(st->st_mode))
		return boot_fail(err, errlen, -EISDIR, "kernel image %s: is a directory", path);
	if (!S_ISREG(st->st_mode))
		return boot_fail(err, errlen, -EINVAL, "kernel image %s: not a regular file", path);
	if (st->st_size == 0)
		return boot_fail(err, errlen, -EINVAL, "kernel image %s: empty file", path);
	if ((unsigned long long)st->st_size > BOOT_IMAGE_MAX)
		return boot_fail(err, errlen, -EFBIG, "kernel image %s: too big (%lld bytes; the limit is %llu)", path,
				 (long long)st->st_size, (unsigned long long)BOOT_IMAGE_MAX);
	return 0;
}

int image_open(struct image *img, const char *path, char *err, size_t errlen)
{
	struct stat st;
	int fd, ret;
	void *p;

	memset(img, 0, sizeof(*img));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		return boot_fail(err, errlen, ret, "kernel image %s: %s", path, open_reason(-ret));
	}
	if (fstat(fd, &st) != 0) {
		ret = -errno;
		close(fd);
		return boot_fail(err, errlen, ret, "kernel image %s: fstat: %s", path, strerror(-ret));
	}
	ret = check_stat(&st, path, err, errlen);
	if (ret) {
		close(fd);
		return ret;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	ret = p == MAP_FAILED ? -errno : 0;
	close(fd); /* the mapping keeps the file referenced */
	if (ret)
		return boot_fail(err, errlen, ret, "kernel image %s: mmap of %lld bytes: %s", path,
				 (long long)st.st_size, strerror(-ret));
	img->data = p;
	img->size = (size_t)st.st_size;
	img->mapped = 1;
	return 0;
}

void image_close(struct image *img)
{
	if (img->mapped && img->data)
		munmap((void *)img->data, img->size);
	memset(img, 0, sizeof(*img));
}
