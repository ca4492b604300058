/* image.c - kernel image files: mapped read-only for parsing, read into guest RAM; errors name file and reason. */
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
#include "brisk/mem.h"
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
	if (p == MAP_FAILED) {
		ret = -errno;
		close(fd);
		return boot_fail(err, errlen, ret, "kernel image %s: mmap of %lld bytes: %s", path,
				 (long long)st.st_size, strerror(-ret));
	}
	img->data = p;
	img->size = (size_t)st.st_size;
	img->mapped = 1;
	img->fd = fd;
	img->st = st;
	return 0;
}

void image_close(struct image *img)
{
	if (img->mapped) {
		if (img->data)
			munmap((void *)img->data, img->size);
		close(img->fd);
	}
	memset(img, 0, sizeof(*img));
}

/* pread until `len` bytes are in, retrying EINTR; 0 at end of file before that is -EIO. */
static int pread_full(int fd, uint8_t *dst, uint64_t len, uint64_t off)
{
	while (len) {
		size_t chunk = len > (1U << 30) ? (1U << 30) : (size_t)len;
		ssize_t n = pread(fd, dst, chunk, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		dst += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

int image_copy(const struct image *img, uint64_t off, uint64_t len, const struct gmem *mem, uint64_t gpa)
{
	uint8_t *dst;
	int ret = 0;

	if (off > img->size || len > img->size - off)
		return -EFAULT;
	dst = gmem_ptr(mem, gpa, len);
	if (!dst)
		return -EFAULT;
	if (img->mapped)
		ret = pread_full(img->fd, dst, len, off);
	else if (len)
		memcpy(dst, img->data + off, (size_t)len);
	if (!ret)
		gmem_mark_dirty(mem, gpa, len);
	return ret;
}
