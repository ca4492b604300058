/* mem.c - guest RAM: one anonymous mapping split around the 32-bit MMIO hole, and the checked accessor. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/layout.h"
#include "brisk/log.h"
#include "brisk/mem.h"

static void split_regions(struct gmem *m)
{
	uint64_t low = m->size < LAYOUT_MMIO_HOLE ? m->size : LAYOUT_MMIO_HOLE;

	m->region[0] = (struct gmem_region){.gpa = 0, .size = low, .host = m->base};
	m->nr = 1;
	if (m->size > low) {
		m->region[1] = (struct gmem_region){
		    .gpa = LAYOUT_RAM_ABOVE_4G,
		    .size = m->size - low,
		    .host = m->base + low,
		};
		m->nr = 2;
	}
}

static int apply_flags(struct gmem *m, unsigned flags)
{
	/* Best effort: THP may be off ("never") on the host; say so and go on. */
	if ((flags & GMEM_HUGEPAGES) && madvise(m->base, m->size, MADV_HUGEPAGE) != 0)
		log_warn("madvise(MADV_HUGEPAGE) on guest RAM failed: %s", strerror(errno));
	if (flags & GMEM_PREFAULT) {
		if (madvise(m->base, m->size, MADV_POPULATE_WRITE) != 0)
			return -errno; /* the caller says what failed */
	}
	return 0;
}

int gmem_init(struct gmem *m, uint64_t size, unsigned flags)
{
	int ret;

	memset(m, 0, sizeof(*m));
	if (size == 0 || size > SIZE_MAX)
		return -EINVAL;
	/* MAP_NORESERVE: pages are committed when the guest touches them. */
	m->base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m->base == MAP_FAILED) {
		ret = -errno;
		m->base = NULL;
		return ret;
	}
	m->size = size;
	split_regions(m);
	ret = apply_flags(m, flags);
	if (ret)
		gmem_destroy(m);
	return ret;
}

int gmem_init_file(struct gmem *m, int fd, uint64_t size)
{
	struct stat st;
	int ret;

	memset(m, 0, sizeof(*m));
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if ((uint64_t)st.st_size != size || size == 0 || size > SIZE_MAX)
		return -ERANGE;
	/* Private: the guest's writes never reach the file; pages are read on first touch, nothing is copied now. */
	m->base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
	if (m->base == MAP_FAILED) {
		ret = -errno;
		m->base = NULL;
		return ret;
	}
	m->size = size;
	split_regions(m);
	return 0;
}

/* Whether the page at `p` holds only zero bytes (the common case for RAM the guest never touched). */
static int page_is_zero(const uint8_t *p, size_t len)
{
	const uint64_t *w = (const uint64_t *)p;

	for (size_t i = 0; i < len / sizeof(*w); i++)
		if (w[i])
			return 0;
	return 1;
}

int gmem_save(const struct gmem *m, int fd)
{
	const size_t chunk = 4096;
	uint64_t off = 0;

	if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)m->size) < 0)
		return -errno;
	/* Zero pages stay holes: a sparse file, as small on disk as the memory the guest used. */
	while (off < m->size) {
		size_t len = m->size - off < chunk ? (size_t)(m->size - off) : chunk;
		uint64_t run = off;

		if (page_is_zero(m->base + off, len)) {
			off += len;
			continue;
		}
		/* Coalesce consecutive non-zero pages into one write. */
		while (off < m->size && !page_is_zero(m->base + off, len)) {
			off += len;
			len = m->size - off < chunk ? (size_t)(m->size - off) : chunk;
		}
		for (uint64_t done = run; done < off;) {
			ssize_t n = pwrite(fd, m->base + done, (size_t)(off - done), (off_t)done);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return n < 0 ? -errno : -EIO;
			done += (uint64_t)n;
		}
	}
	return 0;
}

void gmem_destroy(struct gmem *m)
{
	if (m->base)
		munmap(m->base, (size_t)m->size);
	memset(m, 0, sizeof(*m));
}

void *gmem_ptr(const struct gmem *m, uint64_t gpa, uint64_t len)
{
	for (unsigned i = 0; i < m->nr; i++) {
		const struct gmem_region *r = &m->region[i];

		/* Overflow-safe containment of [gpa, gpa+len) in [r->gpa, r->gpa+r->size). */
		if (gpa < r->gpa)
			continue;
		uint64_t off = gpa - r->gpa;
		if (off > r->size || len > r->size - off)
			continue;
		return r->host + off;
	}
	return NULL;
}

int gmem_write(const struct gmem *m, uint64_t gpa, const void *src, uint64_t len)
{
	void *p = gmem_ptr(m, gpa, len);

	if (!p)
		return -EFAULT;
	memcpy(p, src, (size_t)len);
	return 0;
}

int gmem_read(const struct gmem *m, uint64_t gpa, void *dst, uint64_t len)
{
	const void *p = gmem_ptr(m, gpa, len);

	if (!p)
		return -EFAULT;
	memcpy(dst, p, (size_t)len);
	return 0;
}

uint64_t gmem_low_size(const struct gmem *m)
{
	return m->nr ? m->region[0].size : 0;
}
