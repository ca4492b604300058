/* mem.h - guest RAM: one anonymous mapping, its KVM slots, and the one checked accessor. */
#ifndef BRISK_MEM_H
#define BRISK_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GMEM_HUGEPAGES 0x1u /* madvise(MADV_HUGEPAGE) on all of RAM, its first 2 MiB too (--hugepages) */
#define GMEM_PREFAULT  0x2u /* populate every page before boot */
/*
 * Host alignment of guest RAM: 2 MiB, so KVM can back guest 2 MiB frames with host huge pages; 1 GiB for RAM of
 * 1 GiB or more, so a host 1 GiB page could back a guest 1 GiB frame too (the address space costs nothing).
 */
#define GMEM_ALIGN    (2ull << 20)
#define GMEM_ALIGN_1G (1ull << 30)
/* The alignment gmem_init and gmem_init_file give RAM of `size` bytes. */
uint64_t gmem_align(uint64_t size);

/* One contiguous range of guest-physical RAM backed by host memory. */
struct gmem_region {
	uint64_t gpa;
	uint64_t size;
	uint8_t *host;
};

/*
 * Guest RAM of `size` bytes: [0, min(size, LAYOUT_MMIO_HOLE)) and, for the
 * rest, [4 GiB, ...). Both regions live in one host mapping.
 */
struct gmem {
	uint8_t *base;
	uint64_t size;
	unsigned nr;
	struct gmem_region region[2];
	int file_backed;  /* gmem_init_file: a MAP_PRIVATE mapping of a snapshot's memory file */
	bool uffd_backed; /* gmem_init_uffd (mem_uffd.h): anonymous, missing pages served by a page-fault handler */
	int uffd;	  /* then brisk's copy of the userfaultfd, closed by gmem_destroy */
};

/*
 * Maps `size` bytes (MAP_NORESERVE) at a gmem_align(size)-aligned host address, transparent huge pages requested
 * (MADV_HUGEPAGE) for all of it but its first 2 MiB, which are kept from them (MADV_NOHUGEPAGE); all of it with
 * GMEM_HUGEPAGES. Returns 0 or -errno.
 */
__attribute__((warn_unused_result)) int gmem_init(struct gmem *m, uint64_t size, unsigned flags);
/*
 * Guest RAM from a snapshot's memory file (regular, exactly `size` bytes: else -EINVAL / -ERANGE),
 * mapped MAP_PRIVATE at a gmem_align(size)-aligned host address: each page is read from the file when first
 * touched, the guest's writes stay in this process. Returns 0 or -errno.
 */
__attribute__((warn_unused_result)) int gmem_init_file(struct gmem *m, int fd, uint64_t size);
/*
 * Writes all of guest RAM to `fd` from offset 0 (file size = RAM size; zero pages left as holes). `src_fd`
 * is the memory file RAM was restored from (gmem_init_file), or -1: pages in its holes that were never
 * touched are zero and are not read (reading would allocate them in the file). 0 or -errno.
 */
__attribute__((warn_unused_result)) int gmem_save(const struct gmem *m, int fd, int src_fd);
void gmem_destroy(struct gmem *m);

/*
 * The one checked accessor: host pointer for guest range [gpa, gpa+len),
 * or NULL unless the whole range lies inside one RAM region (overflow-safe;
 * never crosses the MMIO hole). A zero-length range is valid at any gpa in
 * [region start, region end].
 */
void *gmem_ptr(const struct gmem *m, uint64_t gpa, uint64_t len);

/* Copy to/from guest RAM through gmem_ptr. Return 0 or -EFAULT. */
__attribute__((warn_unused_result)) int gmem_write(const struct gmem *m, uint64_t gpa, const void *src, uint64_t len);
__attribute__((warn_unused_result)) int gmem_read(const struct gmem *m, uint64_t gpa, void *dst, uint64_t len);

/*
 * Gives the host back the pages of guest range [gpa, gpa+len) (the balloon's inflate): both page-aligned
 * and the whole range inside one RAM region (gmem_ptr), else -EINVAL and nothing is touched. Anonymous RAM:
 * madvise(MADV_DONTNEED), the pages read back as zero. A file-backed (restored) mapping: a fresh anonymous
 * private mapping is placed over the range first (MAP_FIXED), as MADV_DONTNEED there would only drop the
 * private copy and read the snapshot's page back. 0 or -errno.
 */
__attribute__((warn_unused_result)) int gmem_discard(const struct gmem *m, uint64_t gpa, uint64_t len);

/* Guest RAM bytes below the MMIO hole. */
uint64_t gmem_low_size(const struct gmem *m);

#endif
