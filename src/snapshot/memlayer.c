/* memlayer.c - Diff snapshots' memory files: dirty bitmaps to file runs, and layers merged onto a base. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/file.h"
#include "brisk/memlayer.h"

/*
 * 64 bits of the `words`-word bitmap `bm` from bit `at` on (bit `at` in bit 0; bits past its end read 0), for a
 * region whose first page need not start a word of it.
 */
static uint64_t bits_at(const uint64_t *bm, uint64_t words, uint64_t at)
{
	uint64_t w = at / 64, s = at % 64, lo, hi;

	if (!bm || w >= words)
		return 0;
	lo = bm[w] >> s;
	hi = s && w + 1 < words ? bm[w + 1] << (64 - s) : 0;
	return lo | hi;
}

struct runs {
	int (*fn)(uint64_t off, uint64_t len, void *arg);
	void *arg;
	uint64_t start, len; /* the run being built; len 0: none */
	uint64_t pages;
};

/* One more dirty page at file offset `off`: extends the open run or ends it and opens another. */
static int add_page(struct runs *r, uint64_t off)
{
	int ret = 0;

	if (r->len && r->start + r->len == off) {
		r->len += MEMLAYER_PAGE;
	} else {
		if (r->len)
			ret = r->fn(r->start, r->len, r->arg);
		r->start = off;
		r->len = MEMLAYER_PAGE;
	}
	r->pages++;
	return ret;
}

/*
 * The region's dirty pages, 64 at a time: its KVM bitmap's word or'ed with the `vmm` bits of the same pages
 * (that bitmap is indexed by file page, so its bits past the region's last page are the next region's: masked).
 */
static int region_runs(struct runs *r, const struct memlayer_region *g, const uint64_t *vmm, uint64_t vmm_words)
{
	uint64_t first = g->off / MEMLAYER_PAGE;

	for (uint64_t p = 0; p < g->pages; p += 64) {
		uint64_t n = g->pages - p < 64 ? g->pages - p : 64;
		uint64_t mask = n == 64 ? ~0ull : (1ull << n) - 1;
		uint64_t v = (g->kvm ? g->kvm[p / 64] : 0) | bits_at(vmm, vmm_words, first + p);

		for (v &= mask; v; v &= v - 1) {
			int ret = add_page(r, g->off + (p + (uint64_t)__builtin_ctzll(v)) * MEMLAYER_PAGE);

			if (ret)
				return ret;
		}
	}
	return 0;
}

int memlayer_dirty_runs(const struct memlayer_region *regions, unsigned nr, const uint64_t *vmm, uint64_t vmm_words,
			int (*fn)(uint64_t off, uint64_t len, void *arg), void *arg, uint64_t *pages)
{
	struct runs r = {.fn = fn, .arg = arg};
	int ret = 0;

	for (unsigned i = 0; i < nr && !ret; i++)
		ret = region_runs(&r, &regions[i], vmm, vmm_words);
	if (!ret && r.len)
		ret = fn(r.start, r.len, arg);
	if (pages)
		*pages = r.pages;
	return ret;
}

/* ---- merging ---------------------------------------------------------------------------------------------- */

static int pwrite_all(int fd, const uint8_t *p, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/*
 * [off, end) of src to dst by read and pwrite: where copy_file_range does not copy (two file systems before
 * Linux 5.19, a file system without it). lseek + read, not pread: the main thread's seccomp list has both.
 */
static int copy_by_read(int dst, int src, uint64_t off, uint64_t end)
{
	const size_t cap = 1 << 16;
	uint8_t *buf = malloc(cap);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	if (lseek(src, (off_t)off, SEEK_SET) < 0)
		ret = -errno;
	while (!ret && off < end) {
		ssize_t n = read(src, buf, end - off < cap ? (size_t)(end - off) : cap);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			ret = n < 0 ? -errno : -EIO; /* EOF inside a data extent: the file shrank */
		else if (!(ret = pwrite_all(dst, buf, (size_t)n, off)))
			off += (uint64_t)n;
	}
	free(buf);
	return ret;
}

static int copy_range(int dst, int src, uint64_t off, uint64_t end)
{
	while (off < end) {
		loff_t in = (loff_t)off, out = (loff_t)off;
		ssize_t n =
		    copy_file_range(src, &in, dst, &out, (size_t)(end - off < (1u << 30) ? end - off : 1u << 30), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS))
			return copy_by_read(dst, src, off, end);
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		off += (uint64_t)n;
	}
	return 0;
}

/* The data extent of `fd` at or after `off`: [*start, *end), or false when only holes follow. */
static bool next_extent(int fd, uint64_t off, uint64_t size, uint64_t *start, uint64_t *end)
{
	off_t d = lseek(fd, (off_t)off, SEEK_DATA), h;

	if (d < 0) {
		if (errno == ENXIO)
			return false;
		*start = off; /* no SEEK_DATA here: the rest is data */
		*end = size;
		return off < size;
	}
	if ((uint64_t)d >= size)
		return false;
	h = lseek(fd, d, SEEK_HOLE);
	*start = (uint64_t)d;
	*end = h < 0 || (uint64_t)h > size ? size : (uint64_t)h;
	return true;
}

int memlayer_apply(int dst, int src, uint64_t size, uint64_t *copied, char *err, size_t errlen)
{
	uint64_t off = 0, start, end, total = 0;

	while (off < size && next_extent(src, off, size, &start, &end)) {
		int ret = copy_range(dst, src, start, end);

		if (ret)
			return err_set(err, errlen, ret, "copying bytes 0x%llx..0x%llx: %s", (unsigned long long)start,
				       (unsigned long long)end, strerror(-ret));
		total += end - start;
		off = end;
	}
	if (copied)
		*copied = total;
	return 0;
}

/* A brisk VM maps the file (restored from it): its read lock at FILE_MAPPED_LOCK_OFF (file.h). */
static bool mapped_by_a_vm(int fd)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = FILE_MAPPED_LOCK_OFF, .l_len = 1};

	return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

static int open_regular(const char *path, const char *what, int flags, struct stat *st, char *err, size_t errlen)
{
	int fd = open(path, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0)
		return err_set(err, errlen, -errno, "%s %s: %s", what, path, file_open_reason(errno));
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		return err_set(err, errlen, -EINVAL, "%s %s: not a regular file", what, path);
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

static int check_pair(int bfd, const struct stat *b, const struct stat *l, const char *base, const char *layer,
		      char *err, size_t errlen)
{
	if (b->st_dev == l->st_dev && b->st_ino == l->st_ino)
		return err_set(err, errlen, -EINVAL, "--diff-path %s and --memory-path %s are the same file", layer,
			       base);
	if (b->st_size != l->st_size)
		return err_set(err, errlen, -EINVAL,
			       "--diff-path %s has %lld bytes, --memory-path %s has %lld: a layer merges only onto the "
			       "memory file of the same guest (the same size)",
			       layer, (long long)l->st_size, base, (long long)b->st_size);
	if (mapped_by_a_vm(bfd))
		return err_set(err, errlen, -EBUSY,
			       "--memory-path %s is mapped by a running VM restored from it: merging into it would "
			       "change that guest's memory; merge into a copy",
			       base);
	return 0;
}

int memlayer_rebase(const char *base, const char *layer, uint64_t *copied, char *err, size_t errlen)
{
	struct stat bst, lst;
	char why[256];
	int bfd, lfd, ret;

	if ((bfd = open_regular(base, "--memory-path", O_WRONLY, &bst, err, errlen)) < 0)
		return bfd;
	if ((lfd = open_regular(layer, "--diff-path", O_RDONLY, &lst, err, errlen)) < 0) {
		close(bfd);
		return lfd;
	}
	ret = check_pair(bfd, &bst, &lst, base, layer, err, errlen);
	if (!ret && (ret = memlayer_apply(bfd, lfd, (uint64_t)lst.st_size, copied, why, sizeof(why))))
		err_set(err, errlen, ret, "merging --diff-path %s into --memory-path %s: %s", layer, base, why);
	if (!ret && fsync(bfd) != 0)
		ret = err_set(err, errlen, -errno, "fsync of --memory-path %s: %s", base, strerror(errno));
	close(lfd);
	close(bfd);
	return ret;
}
