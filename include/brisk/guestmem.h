/* guestmem.h - the profiler reading a guest from the outside: its memory as a byte space, its page tables. */
#ifndef BRISK_GUESTMEM_H
#define BRISK_GUESTMEM_H

#include <stddef.h>
#include <stdint.h>

struct gmem;

/*
 * A guest's physical memory as the profiler sees it: a read callback that
 * either copies all of [addr, addr+len) or fails, and the ranges where
 * anything worth finding (kallsyms) can be. Everything read through it is
 * guest-controlled: callers copy what they parse and bound every offset.
 */
#define GSPACE_MAX_RANGES 4
struct gspace {
	/* Copies [addr, addr+len) into buf: 0, or -EFAULT when any byte of it is not readable. */
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	/*
	 * NULL, or a direct read-only view of [addr, addr+len) (NULL when not all readable), for scanning
	 * without a copy: the bytes may change under the caller, who copies whatever it then parses.
	 */
	const void *(*view)(void *ctx, uint64_t addr, size_t len);
	void *ctx;
	unsigned nr;
	struct {
		uint64_t start, size;
	} range[GSPACE_MAX_RANGES];
};

/* Guest RAM through gmem_read/gmem_ptr (the one checked accessor): its regions are the ranges. */
void gspace_of_gmem(struct gspace *g, const struct gmem *m);
/* Makes [start, end) (clipped to the space) the first range searched, e.g. where the kernel was loaded. */
void gspace_prefer(struct gspace *g, uint64_t start, uint64_t end);

/* A buffer as a space at address `base` (unit tests, fuzzing); `b` must outlive `g`. */
struct gspace_buf {
	const uint8_t *p;
	size_t len;
	uint64_t base;
};
void gspace_of_buf(struct gspace *g, struct gspace_buf *b);

/* The registers that decide how a virtual address translates (a vCPU's, at an exit). */
struct gpaging {
	uint64_t cr0, cr3, cr4, efer;
};

/*
 * Walks the guest's page tables (Intel SDM vol. 3A 4.5, AMD APM vol. 2
 * 5.3: 4-level, or 5-level with CR4.LA57; 1 GiB and 2 MiB pages) for `va`.
 * Paging off (CR0.PG clear): the identity. Only long mode (EFER.LMA) is
 * walked; legacy 32-bit paging gives -ENOTSUP. Each entry is read through
 * `phys` (at most 5 reads), so a hostile table can only make the walk fail.
 * Returns 0 with *pa (and *nx: some level forbade execution), -EFAULT (an
 * entry not present or not readable, a reserved-bit or non-canonical
 * address), or -ENOTSUP.
 */
int gwalk(const struct gspace *phys, const struct gpaging *pg, uint64_t va, uint64_t *pa, int *nx);

#endif
