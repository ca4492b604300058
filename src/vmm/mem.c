/* mem.c - guest RAM: one anonymous mapping split around the 32-bit MMIO hole, and the checked accessor. */
#include <errno.h>
#include <fcntl.h>
#include <linux/memfd.h> /* MFD_HUGE_2MB: glibc's sys/mman.h has MFD_HUGETLB only */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
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

/*
 * Transparent huge pages for guest RAM, as QEMU asks for them: with the host's THP in its usual "madvise" mode,
 * nothing else gives KVM 2 MiB pages to map a guest with, and a Linux guest on 4 KiB host pages takes a nested
 * page fault per 4 KiB it touches (docs/performance.md "Guest memory and huge pages"). Asked for, they are also
 * allocated when the page is first touched, with compaction if need be (the default "defrag" mode), rather than
 * collapsed later by khugepaged under the running guest (each collapse invalidates KVM's mappings of the range).
 * Not the first 2 MiB unless asked (GMEM_HUGEPAGES, --hugepages): that frame holds the legacy area, the boot
 * structures brisk writes and a small guest's whole image, and a huge page there would be a 2 MiB page zeroed
 * on the start path for a guest that touches a few 4 KiB pages of it; MADV_NOHUGEPAGE keeps it 4 KiB on a host
 * whose THP mode is "always" too, and out of khugepaged's scans. Best effort: a kernel without THP refuses
 * (EINVAL); said only when asked for.
 */
static void request_thp(const struct gmem *m, unsigned flags)
{
	if (m->hugetlbfs)
		return; /* hugetlbfs pages are 2 MiB already */
	uint64_t skip = (flags & GMEM_HUGEPAGES) ? 0 : m->size < GMEM_ALIGN ? m->size : GMEM_ALIGN;

	if (skip)
		(void)madvise(m->base, skip, MADV_NOHUGEPAGE);
	if (m->size > skip && madvise(m->base + skip, m->size - skip, MADV_HUGEPAGE) != 0 && (flags & GMEM_HUGEPAGES))
		log_warn("madvise(MADV_HUGEPAGE) on guest RAM failed: %s", strerror(errno));
}

void gmem_request_thp(const struct gmem *m)
{
	request_thp(m, GMEM_HUGEPAGES);
}

static int apply_flags(struct gmem *m, unsigned flags)
{
	request_thp(m, flags);
	if (flags & GMEM_PREFAULT) {
		if (madvise(m->base, m->size, MADV_POPULATE_WRITE) != 0)
			return -errno; /* the caller says what failed */
	}
	return 0;
}

uint64_t gmem_align(uint64_t size)
{
	return size >= GMEM_ALIGN_1G ? GMEM_ALIGN_1G : GMEM_ALIGN;
}

/*
 * `size` bytes at a gmem_align(size)-aligned address: a PROT_NONE reservation that much larger, the mapping
 * placed over its aligned part (MAP_FIXED), the slack either side returned but for one guard page next to
 * each end. The host address and the guest address of RAM then agree modulo 2 MiB, which KVM needs before
 * it maps a guest page with a huge page (arch/x86/kvm/mmu: the host's huge page must cover the same 2 MiB
 * frame the guest's does); mmap alone gives 4 KiB alignment. The guards keep RAM a mapping of its own: a
 * thread stack mapped next to it is the same kind of mapping (private, anonymous, MAP_NORESERVE, no huge
 * pages like RAM's first 2 MiB) and the kernel merged the two into one (/proc/PID/maps and smaps then
 * showed no mapping of RAM's size), and a host access just past either end of RAM faults instead of landing
 * in a neighbour. `fd` -1: anonymous memory. `shared`: a shared mapping of `fd`, reserved (a hugetlbfs
 * memfd: its pages are set aside at the map, hugetlb_reserve_pages). Returns the address or MAP_FAILED with
 * errno; gmem_destroy unmaps RAM with its guards.
 */
#define RAM_GUARD 4096ul
static uint8_t *map_aligned(size_t size, int fd, bool shared)
{
	size_t align = (size_t)gmem_align(size), span = size + align + 2 * RAM_GUARD, head, tail;
	uint8_t *res = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0), *at, *p;
	int flags =
	    shared ? MAP_SHARED | MAP_FIXED : MAP_PRIVATE | MAP_NORESERVE | MAP_FIXED | (fd < 0 ? MAP_ANONYMOUS : 0);

	if (res == MAP_FAILED)
		return res;
	at = (uint8_t *)(((uintptr_t)res + RAM_GUARD + align - 1) & ~(uintptr_t)(align - 1));
	p = mmap(at, size, PROT_READ | PROT_WRITE, flags, fd, 0);
	if (p == MAP_FAILED) {
		int e = errno;

		munmap(res, span);
		errno = e;
		return MAP_FAILED;
	}
	head = (size_t)(at - RAM_GUARD - res);
	tail = span - head - size - 2 * RAM_GUARD;
	if (head)
		munmap(res, head);
	if (tail)
		munmap(at + size + RAM_GUARD, tail);
	return at;
}

/*
 * A memfd of `size` bytes of 2 MiB hugetlbfs pages, its size sealed, as Firecracker's create_memfd
 * (vstate/memory.rs): mapped, it needs no file system mounted and leaves nothing behind. Returns the fd or -errno.
 */
static int hugetlb_memfd(uint64_t size)
{
	int fd = memfd_create("guest_mem", MFD_CLOEXEC | MFD_HUGETLB | MFD_HUGE_2MB | MFD_ALLOW_SEALING), ret;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

/* RAM's mapping: anonymous (MAP_NORESERVE: pages are committed when the guest touches them) or hugetlbfs. */
static uint8_t *map_ram(struct gmem *m, uint64_t size, unsigned flags)
{
	uint8_t *p;
	int fd, e;

	if (!(flags & GMEM_HUGETLBFS))
		return map_aligned((size_t)size, -1, false);
	if (size % GMEM_HUGE_PAGE) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	fd = hugetlb_memfd(size);
	if (fd < 0) {
		errno = -fd;
		return MAP_FAILED;
	}
	p = map_aligned((size_t)size, fd, true);
	e = errno;
	close(fd); /* the mapping holds the file */
	errno = e;
	m->hugetlbfs = p != MAP_FAILED;
	return p;
}

int gmem_init(struct gmem *m, uint64_t size, unsigned flags)
{
	int ret;

	memset(m, 0, sizeof(*m));
	if (size == 0 || size > SIZE_MAX - GMEM_ALIGN_1G - 2 * RAM_GUARD)
		return -EINVAL;
	m->base = map_ram(m, size, flags);
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
	if ((uint64_t)st.st_size != size || size == 0 || size > SIZE_MAX - GMEM_ALIGN_1G - 2 * RAM_GUARD)
		return -ERANGE;
	/* Private: the guest's writes never reach the file; pages are read on first touch, nothing is copied now. */
	m->base = map_aligned((size_t)size, fd, false);
	if (m->base == MAP_FAILED) {
		ret = -errno;
		m->base = NULL;
		return ret;
	}
	m->size = size;
	m->file_backed = 1;
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

/*
 * Which pages of a restored VM's RAM need not be read to be saved: those in a hole of the memory file it
 * maps (src) that are not resident (mincore 0: the guest never touched them, and nothing of the file is
 * cached there), hence zero. Reading them would fault the hole in, which on tmpfs allocates a page in the
 * file (and raises SIGBUS when it is full); saving a mostly idle restored guest would copy its whole size
 * into the page cache. `start`/`end` cache the source's current extent (`hole` says which kind).
 */
struct save_src {
	int fd; /* -1: anonymous RAM, every page is read */
	uint64_t start, end;
	bool hole;
	uint64_t vbase; /* the pages `vec` describes: [vbase, vbase + sizeof(vec) pages) */
	bool vvalid;
	unsigned char vec[512];
};

/* The source extent holding `off`: data or hole (SEEK_DATA/SEEK_HOLE; without them, all data). */
static void src_extent(struct save_src *s, uint64_t off, uint64_t size)
{
	off_t data = lseek(s->fd, (off_t)off, SEEK_DATA), hole;

	s->start = off;
	if (data < 0) { /* ENXIO: only a hole from here on; anything else: no hole information */
		s->hole = errno == ENXIO;
		s->end = size;
		return;
	}
	if ((uint64_t)data > off) {
		s->hole = true;
		s->end = (uint64_t)data;
		return;
	}
	hole = lseek(s->fd, (off_t)off, SEEK_HOLE);
	s->hole = false;
	s->end = hole > data ? (uint64_t)hole : size;
}

static bool skippable(const struct gmem *m, struct save_src *s, uint64_t off)
{
	const uint64_t span = sizeof(s->vec) * 4096;

	/* hugetlbfs RAM is never swapped: a page not present was never touched, and reads as zero */
	if (s->fd < 0 && !m->hugetlbfs)
		return false;
	if (s->fd >= 0 && (off < s->start || off >= s->end))
		src_extent(s, off, m->size);
	if (s->fd >= 0 && !s->hole)
		return false;
	if (!s->vvalid || off < s->vbase || off >= s->vbase + span) {
		s->vbase = off & ~(span - 1);
		s->vvalid = mincore(m->base + s->vbase, (size_t)(m->size - s->vbase < span ? m->size - s->vbase : span),
				    s->vec) == 0;
		if (!s->vvalid)
			return false;
	}
	return !(s->vec[(off - s->vbase) / 4096] & 1);
}

int gmem_save(const struct gmem *m, int fd, int src_fd)
{
	const size_t chunk = 4096;
	struct save_src src = {.fd = src_fd};
	uint64_t off = 0;

	if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)m->size) < 0)
		return -errno;
	/* Zero pages stay holes: a sparse file, as small on disk as the memory the guest used. */
	while (off < m->size) {
		size_t len = m->size - off < chunk ? (size_t)(m->size - off) : chunk;
		uint64_t run = off;

		if (skippable(m, &src, off) || page_is_zero(m->base + off, len)) {
			off += len;
			continue;
		}
		/* Coalesce consecutive non-zero pages into one write. */
		while (off < m->size && !skippable(m, &src, off) && !page_is_zero(m->base + off, len)) {
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
	if (m->uffd_backed)
		close(m->uffd);
	if (m->base)
		munmap(m->base - RAM_GUARD, (size_t)m->size + 2 * RAM_GUARD); /* with its guards (map_aligned) */
	free(m->dirty);
	memset(m, 0, sizeof(*m));
}

/* The data extent of `fd` at or after `off` (SEEK_DATA/SEEK_HOLE; without them, the rest is data). */
static bool data_extent(int fd, uint64_t off, uint64_t size, uint64_t *start, uint64_t *end)
{
	off_t d = lseek(fd, (off_t)off, SEEK_DATA), h;

	if (d < 0) {
		*start = off;
		*end = size;
		return errno != ENXIO && off < size;
	}
	if ((uint64_t)d >= size)
		return false;
	h = lseek(fd, d, SEEK_HOLE);
	*start = (uint64_t)d;
	*end = h < 0 || (uint64_t)h > size ? size : (uint64_t)h;
	return true;
}

int gmem_load_file(const struct gmem *m, int fd)
{
	struct stat st;
	uint64_t off = 0, start, end;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != m->size)
		return -ERANGE;
	while (off < m->size && data_extent(fd, off, m->size, &start, &end)) {
		for (off = start; off < end;) {
			ssize_t n = pread(fd, m->base + off, (size_t)(end - off), (off_t)off);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return n < 0 ? -errno : -EIO;
			off += (uint64_t)n;
		}
	}
	return 0;
}

/* ---- dirty tracking ---------------------------------------------------------------------------------------- */

int gmem_dirty_enable(struct gmem *m)
{
	uint64_t words = (m->size / 4096 + 63) / 64;

	if (m->dirty)
		return 0;
	m->dirty = calloc(words ? words : 1, sizeof(*m->dirty));
	if (!m->dirty)
		return -ENOMEM;
	m->dirty_words = words;
	return 0;
}

/* Pages [off, off+len) of the mapping, off + len <= m->size. */
static void mark_range(const struct gmem *m, uint64_t off, uint64_t len)
{
	uint64_t first = off / 4096, last = (off + len - 1) / 4096;

	for (uint64_t p = first; p <= last; p++) {
		_Atomic uint64_t *w = (_Atomic uint64_t *)&m->dirty[p / 64];
		uint64_t bit = 1ull << (p % 64);

		/* most writes land on a page already marked: a plain load first keeps the cache line shared */
		if (!(atomic_load_explicit(w, memory_order_relaxed) & bit))
			atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
	}
}

void gmem_mark_dirty(const struct gmem *m, uint64_t gpa, uint64_t len)
{
	const uint8_t *p;

	if (!m->dirty || !len || !(p = gmem_ptr(m, gpa, len)))
		return;
	mark_range(m, (uint64_t)(p - m->base), len);
}

void gmem_mark_dirty_host(const struct gmem *m, const void *p, uint64_t len)
{
	const uint8_t *b = p;

	if (!m->dirty || !len || b < m->base || (uint64_t)(b - m->base) > m->size ||
	    len > m->size - (uint64_t)(b - m->base))
		return;
	mark_range(m, (uint64_t)(b - m->base), len);
}

int gmem_dirty_take(const struct gmem *m, uint64_t *out)
{
	if (!m->dirty)
		return -EINVAL;
	for (uint64_t i = 0; i < m->dirty_words; i++)
		out[i] = atomic_exchange_explicit((_Atomic uint64_t *)&m->dirty[i], 0, memory_order_relaxed);
	return 0;
}

void gmem_dirty_restore(const struct gmem *m, const uint64_t *bits)
{
	if (!m->dirty)
		return;
	for (uint64_t i = 0; i < m->dirty_words; i++)
		if (bits[i])
			atomic_fetch_or_explicit((_Atomic uint64_t *)&m->dirty[i], bits[i], memory_order_relaxed);
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
	gmem_mark_dirty(m, gpa, len);
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

int gmem_discard(const struct gmem *m, uint64_t gpa, uint64_t len)
{
	uint8_t *p = gmem_ptr(m, gpa, len);

	if (!p || !len || (gpa | len) & 4095)
		return -EINVAL;
	gmem_mark_dirty(m, gpa, len); /* now zero: a Diff must say so over its base's page */
	if (m->file_backed && mmap(p, (size_t)len, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
		return -errno;
	return madvise(p, (size_t)len, MADV_DONTNEED) ? -errno : 0;
}

uint64_t gmem_low_size(const struct gmem *m)
{
	return m->nr ? m->region[0].size : 0;
}
