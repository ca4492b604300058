/* mem.h - guest RAM: one anonymous mapping, its KVM slots, and the one checked accessor. */
#ifndef BRISK_MEM_H
#define BRISK_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GMEM_HUGEPAGES 0x1u /* madvise(MADV_HUGEPAGE) on all of RAM, its first 2 MiB too (--hugepages) */
#define GMEM_PREFAULT  0x2u /* populate every page before boot */
#define GMEM_HUGETLBFS 0x4u /* 2 MiB hugetlbfs pages (huge_pages "2M", --hugetlbfs): a memfd, reserved at the map */
#define GMEM_HUGE_PAGE (2ull << 20) /* a hugetlbfs page: RAM's size must be a multiple of it */
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
	bool hugetlbfs;	  /* GMEM_HUGETLBFS: a shared mapping of a hugetlbfs memfd, never swapped */
	/*
	 * Dirty tracking (gmem_dirty_enable; NULL: off): the pages brisk itself wrote (devices, the loader, the
	 * balloon), one bit per 4 KiB page by offset from `base`, which KVM's dirty log of the vCPUs' writes does
	 * not see. Set with atomic or from any thread (gmem_mark_dirty), taken by a Diff snapshot.
	 */
	uint64_t *dirty;
	uint64_t dirty_words;
};

/*
 * Maps `size` bytes (MAP_NORESERVE) at a gmem_align(size)-aligned host address, transparent huge pages requested
 * (MADV_HUGEPAGE) for all of it but its first 2 MiB, which are kept from them (MADV_NOHUGEPAGE); all of it with
 * GMEM_HUGEPAGES. GMEM_HUGETLBFS: a memfd of 2 MiB hugetlbfs pages instead (memfd_create MFD_HUGETLB |
 * MFD_HUGE_2MB, as Firecracker's memfd_backed; size sealed), mapped shared and reserved whole at the map (no
 * MAP_NORESERVE: a pool too small is -ENOMEM now, not a SIGBUS at the guest's first touch of a page the pool
 * cannot give); `size` a multiple of GMEM_HUGE_PAGE, else -EINVAL; no transparent huge pages asked. Returns 0 or
 * -errno.
 */
__attribute__((warn_unused_result)) int gmem_init(struct gmem *m, uint64_t size, unsigned flags);
/*
 * Guest RAM from a snapshot's memory file (regular, exactly `size` bytes: else -EINVAL / -ERANGE),
 * mapped MAP_PRIVATE at a gmem_align(size)-aligned host address: each page is read from the file when first
 * touched, the guest's writes stay in this process. Returns 0 or -errno.
 */
__attribute__((warn_unused_result)) int gmem_init_file(struct gmem *m, int fd, uint64_t size);
/*
 * Transparent huge pages asked for all of an existing mapping (madvise MADV_HUGEPAGE, as GMEM_HUGEPAGES does at
 * gmem_init): a restored VM's RAM with huge_pages "Transparent", as Firecracker's snapshot_file and anonymous
 * memory get it. Nothing for hugetlbfs RAM; best effort (a warning when the kernel refuses).
 */
void gmem_request_thp(const struct gmem *m);
/*
 * Writes all of guest RAM to `fd` from offset 0 (file size = RAM size; zero pages left as holes). `src_fd`
 * is the memory file RAM was restored from (gmem_init_file), or -1: pages in its holes that were never
 * touched are zero and are not read (reading would allocate them in the file). 0 or -errno.
 */
__attribute__((warn_unused_result)) int gmem_save(const struct gmem *m, int fd, int src_fd);
void gmem_destroy(struct gmem *m);
/*
 * Fills RAM from a memory file (`fd`, exactly m->size bytes: else -ERANGE): every data extent read into place,
 * holes left untouched (zero). For RAM a file cannot be mapped privately onto (hugetlbfs): the restore copies.
 * Returns 0 or -errno.
 */
__attribute__((warn_unused_result)) int gmem_load_file(const struct gmem *m, int fd);

/* ---- dirty tracking, for Diff snapshots (docs/architecture.md "Diff snapshots") ---- */

/* Starts recording brisk's own writes (the bitmap, all clear). Idempotent. 0 or -ENOMEM. */
__attribute__((warn_unused_result)) int gmem_dirty_enable(struct gmem *m);
/*
 * Marks the pages of guest range [gpa, gpa+len) dirty (nothing when tracking is off, len is 0 or the range is
 * not RAM). Any thread. gmem_write, gmem_discard and the virtqueues' writes call it.
 */
void gmem_mark_dirty(const struct gmem *m, uint64_t gpa, uint64_t len);
/* The same for host memory [p, p+len) inside the mapping (a virtqueue segment's pointer). */
void gmem_mark_dirty_host(const struct gmem *m, const void *p, uint64_t len);
/*
 * Moves the bitmap into out[0 .. m->dirty_words) (each word exchanged with 0: a write marked meanwhile lands in
 * one or the other, never lost). The Diff's view of brisk's writes; -EINVAL when tracking is off.
 */
int gmem_dirty_take(const struct gmem *m, uint64_t *out);
/* Ors `bits` (m->dirty_words words) back into the bitmap: a snapshot that failed forgets nothing. */
void gmem_dirty_restore(const struct gmem *m, const uint64_t *bits);

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
