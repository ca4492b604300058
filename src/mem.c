/* mem.c - guest RAM: one anonymous mapping split around the 32-bit MMIO hole, and the checked accessor. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

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
