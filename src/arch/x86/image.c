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
#include "brisk/errmsg.h"
#include "brisk/file.h"
#include "x86_boot.h"

int boot_fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err_vset(err, errlen, ret, fmt, ap);
	va_end(ap);
	return ret;
}

/* The file must be 1 byte .. BOOT_IMAGE_MAX (file_open_input checked it is a regular file). */
static int check_size(const struct stat *st, const char *path, char *err, size_t errlen)
{
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
	/* Never blocks (a FIFO is refused, not waited on); anything but a regular file is refused. */
	fd = file_open_input(path, "kernel image", &st, err, errlen);
	if (fd < 0)
		return fd;
	ret = check_size(&st, path, err, errlen);
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
	img->st = st;
	return 0;
}

void image_close(struct image *img)
{
	if (img->mapped && img->data)
		munmap((void *)img->data, img->size);
	memset(img, 0, sizeof(*img));
}
