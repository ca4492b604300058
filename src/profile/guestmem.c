/* guestmem.c - guest memory as a byte space (gmem or a buffer) and the long-mode page walk over it. */
#include <errno.h>
#include <string.h>

#include "brisk/guestmem.h"
#include "brisk/mem.h"

#define CR0_PG	  (1ull << 31)
#define CR4_LA57  (1ull << 12)
#define EFER_LMA  (1ull << 10)
#define EFER_NXE  (1ull << 11)
#define PTE_P	  (1ull << 0)
#define PTE_PS	  (1ull << 7)
#define PTE_NX	  (1ull << 63)
#define PTE_ADDR  0x000ffffffffff000ull /* bits 51:12 (MAXPHYADDR 52 at most) */
#define LEVELS_4  4
#define LEVELS_5  5
#define VA_SHIFT0 12 /* the page offset; each level adds 9 bits */

static int gmem_space_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return gmem_read(ctx, addr, buf, len) ? -EFAULT : 0;
}

static const void *gmem_space_view(void *ctx, uint64_t addr, size_t len)
{
	return gmem_ptr(ctx, addr, len);
}

void gspace_of_gmem(struct gspace *g, const struct gmem *m)
{
	*g = (struct gspace){.read = gmem_space_read, .view = gmem_space_view, .ctx = (void *)m};
	for (unsigned i = 0; i < m->nr && i < GSPACE_MAX_RANGES; i++) {
		g->range[i].start = m->region[i].gpa;
		g->range[i].size = m->region[i].size;
		g->nr++;
	}
}

static int buf_space_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct gspace_buf *b = ctx;

	/* Overflow-safe test of [addr, addr+len) against [base, base+b->len). */
	if (addr < b->base || addr - b->base > b->len || len > b->len - (addr - b->base))
		return -EFAULT;
	memcpy(buf, b->p + (addr - b->base), len);
	return 0;
}

static const void *buf_space_view(void *ctx, uint64_t addr, size_t len)
{
	const struct gspace_buf *b = ctx;

	if (addr < b->base || addr - b->base > b->len || len > b->len - (addr - b->base))
		return NULL;
	return b->p + (addr - b->base);
}

void gspace_prefer(struct gspace *g, uint64_t start, uint64_t end)
{
	for (unsigned i = 0; i < g->nr && g->nr < GSPACE_MAX_RANGES; i++) {
		uint64_t rs = g->range[i].start, re = rs + g->range[i].size;

		if (start < rs)
			start = rs;
		if (end > re)
			end = re;
		if (start >= end || start >= re || end <= rs)
			continue;
		memmove(&g->range[1], &g->range[0], g->nr * sizeof(g->range[0]));
		g->range[0].start = start;
		g->range[0].size = end - start;
		g->nr++;
		return;
	}
}

void gspace_of_buf(struct gspace *g, struct gspace_buf *b)
{
	*g = (struct gspace){.read = buf_space_read, .view = buf_space_view, .ctx = b, .nr = 1};
	g->range[0].start = b->base;
	g->range[0].size = b->len;
}

/* Whether va is canonical for a `bits`-bit linear address space (bits 63..bits-1 all equal). */
static int canonical(uint64_t va, unsigned bits)
{
	uint64_t top = va >> (bits - 1);

	return top == 0 || top == (~0ull >> (bits - 1));
}

int gwalk(const struct gspace *phys, const struct gpaging *pg, uint64_t va, uint64_t *pa, int *nx)
{
	unsigned levels = pg->cr4 & CR4_LA57 ? LEVELS_5 : LEVELS_4;
	uint64_t table = pg->cr3 & PTE_ADDR;

	*nx = 0;
	if (!(pg->cr0 & CR0_PG)) {
		*pa = va;
		return 0;
	}
	if (!(pg->efer & EFER_LMA))
		return -ENOTSUP;
	if (!canonical(va, VA_SHIFT0 + 9 * levels))
		return -EFAULT;
	for (unsigned level = levels; level >= 1; level--) {
		unsigned shift = VA_SHIFT0 + 9 * (level - 1);
		uint64_t e, index = (va >> shift) & 0x1ff;

		if (phys->read(phys->ctx, table + index * sizeof(e), &e, sizeof(e)) || !(e & PTE_P))
			return -EFAULT;
		if ((pg->efer & EFER_NXE) && (e & PTE_NX))
			*nx = 1;
		if (level == 1 || ((level == 2 || level == 3) && (e & PTE_PS))) {
			uint64_t size = 1ull << shift; /* 4 KiB, 2 MiB or 1 GiB */

			*pa = (e & PTE_ADDR & ~(size - 1)) | (va & (size - 1));
			return 0;
		}
		if (e & PTE_PS)
			return -EFAULT; /* PS in a PML4E/PML5E is reserved */
		table = e & PTE_ADDR;
	}
	return -EFAULT; /* not reached: level 1 always returns */
}
