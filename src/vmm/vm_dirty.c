/*
 * vm_dirty.c - dirty page tracking for Diff snapshots (docs/architecture.md "Diff snapshots"): KVM's dirty log
 * of each memory slot (the vCPUs' writes, KVM_MEM_LOG_DIRTY_PAGES) and brisk's own writes (gmem_mark_dirty)
 * taken together by a snapshot, written as a Diff's memory file, sampled for the load's check, and given back
 * when the snapshot fails, so that the next one still sees them.
 *
 * KVM_GET_DIRTY_LOG rather than the dirty ring (KVM_CAP_DIRTY_LOG_RING): a snapshot wants the set of pages
 * written since the previous one, once, with the vCPUs paused, which is what the log gives in one call per
 * slot (a 32 KiB bitmap for 1 GiB); the ring serves a migration that harvests while the guest runs, at the
 * cost of per-vCPU rings to map and reap and a KVM_EXIT_DIRTY_RING_FULL exit to handle in every vCPU loop.
 * Firecracker uses the log too (Vm::get_dirty_bitmap).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "brisk/memlayer.h"
#include "brisk/snap_memfile.h"
#include "brisk/snapshot.h"
#include "vm_impl.h"

void vm_dirty_free(struct vm_dirty *d)
{
	for (unsigned i = 0; i < 2; i++)
		free(d->kvm[i]);
	free(d->vmm);
	memset(d, 0, sizeof(*d));
}

/* The file regions of RAM (memlayer.h), with the slots' logs `d` took. */
static unsigned regions(const struct vm *vm, const struct vm_dirty *d, struct memlayer_region *r)
{
	for (unsigned i = 0; i < vm->mem.nr; i++)
		r[i] = (struct memlayer_region){
		    .off = (uint64_t)(vm->mem.region[i].host - vm->mem.base),
		    .pages = vm->mem.region[i].size / MEMLAYER_PAGE,
		    .kvm = d ? d->kvm[i] : NULL,
		};
	return vm->mem.nr;
}

int vm_dirty_take(struct vm *vm, struct vm_dirty *d, char *err, size_t errlen)
{
	memset(d, 0, sizeof(*d));
	d->vmm = calloc(vm->mem.dirty_words ? vm->mem.dirty_words : 1, sizeof(*d->vmm));
	if (!d->vmm)
		return snprintf(err, errlen, "out of memory for the dirty bitmap"), -ENOMEM;
	for (unsigned i = 0; i < vm->mem.nr; i++) {
		uint64_t words = memlayer_words(vm->mem.region[i].size / MEMLAYER_PAGE);
		struct kvm_dirty_log log = {.slot = i};

		d->kvm[i] = calloc(words, sizeof(uint64_t));
		if (!d->kvm[i]) {
			vm_dirty_giveback(vm, d);
			vm_dirty_free(d);
			return snprintf(err, errlen, "out of memory for the dirty bitmap"), -ENOMEM;
		}
		log.dirty_bitmap = d->kvm[i];
		/* returns the slot's log and clears it (no KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2): taken, owned here */
		if (KVM_IOCTL(vm->fd, KVM_GET_DIRTY_LOG, &log) < 0) {
			int e = errno;

			vm_dirty_giveback(vm, d);
			vm_dirty_free(d);
			snprintf(err, errlen, "KVM_GET_DIRTY_LOG of slot %u failed: %s", i, strerror(e));
			return -e;
		}
	}
	/* after KVM's: a device cannot write meanwhile (the I/O loop is stopped, the vCPUs parked) */
	gmem_dirty_take(&vm->mem, d->vmm);
	d->taken = true;
	return 0;
}

static int mark_run(uint64_t off, uint64_t len, void *arg)
{
	const struct gmem *m = arg;

	gmem_mark_dirty_host(m, m->base + off, len);
	return 0;
}

void vm_dirty_giveback(struct vm *vm, const struct vm_dirty *d)
{
	struct memlayer_region r[2];

	if (d->vmm)
		gmem_dirty_restore(&vm->mem, d->vmm);
	/* KVM's log was cleared by the take: its pages go into brisk's bitmap, which the next take reads */
	memlayer_dirty_runs(r, regions(vm, d, r), NULL, 0, mark_run, &vm->mem, NULL);
}

struct writer {
	const struct gmem *m;
	int fd;
};

static int write_run(uint64_t off, uint64_t len, void *arg)
{
	const struct writer *w = arg;

	for (uint64_t done = 0; done < len;) {
		ssize_t n = pwrite(w->fd, w->m->base + off + done, (size_t)(len - done), (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (uint64_t)n;
	}
	return 0;
}

int vm_dirty_write(struct vm *vm, const struct vm_dirty *d, int fd, uint64_t *pages)
{
	struct memlayer_region r[2];
	struct writer w = {.m = &vm->mem, .fd = fd};

	/* every dirty page is written, zeros included: a page that became zero must be zero over its base's */
	return memlayer_dirty_runs(r, regions(vm, d, r), d->vmm, vm->mem.dirty_words, write_run, &w, pages);
}

/* ---- samples ----------------------------------------------------------------------------------------------- */

/* Whether file page `p` is in the Diff (dirty in its slot's log or in brisk's bitmap). */
static bool page_dirty(const struct vm *vm, const struct vm_dirty *d, uint64_t p)
{
	if (p / 64 < vm->mem.dirty_words && (d->vmm[p / 64] >> (p % 64) & 1))
		return true;
	for (unsigned i = 0; i < vm->mem.nr; i++) {
		uint64_t first = (uint64_t)(vm->mem.region[i].host - vm->mem.base) / MEMLAYER_PAGE;
		uint64_t n = vm->mem.region[i].size / MEMLAYER_PAGE;

		if (p >= first && p - first < n)
			return d->kvm[i] && (d->kvm[i][(p - first) / 64] >> ((p - first) % 64) & 1);
	}
	return false;
}

static bool is_zero(const uint8_t *p)
{
	const uint64_t *w = (const uint64_t *)p;

	for (unsigned i = 0; i < MEMLAYER_PAGE / 8; i++)
		if (w[i])
			return false;
	return true;
}

#define WINDOWS	    64u /* places over RAM a sample is looked for, so they spread */
#define WINDOW_SPAN 64u /* pages looked at in each */

/*
 * One sample from the window of pages at `first`: the first page not in the Diff whose bytes are known without
 * I/O (mincore: resident; or, in hugetlbfs RAM, not resident: never touched, zero), non-zero preferred. Returns 1
 * (non-zero), 0 (zero) or -1 (none) with *s filled.
 */
static int window_sample(const struct vm *vm, const struct vm_dirty *d, uint64_t first, uint64_t npages,
			 struct snap_mem_sample *s)
{
	unsigned char vec[WINDOW_SPAN];
	uint64_t n = npages - first < WINDOW_SPAN ? npages - first : WINDOW_SPAN;
	static const uint8_t zero[MEMLAYER_PAGE];
	int found = -1;

	if (mincore(vm->mem.base + first * MEMLAYER_PAGE, n * MEMLAYER_PAGE, vec) != 0)
		return -1;
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *page = vm->mem.base + (first + i) * MEMLAYER_PAGE;
		bool resident = vec[i] & 1;

		/* not resident: zero only in hugetlbfs RAM (never swapped, not a file); elsewhere it may be in swap
		 * or in the memory file, unknown without I/O */
		if (page_dirty(vm, d, first + i) || (!resident && !vm->mem.hugetlbfs))
			continue;
		if (resident && !is_zero(page)) {
			*s = (struct snap_mem_sample){(first + i) * MEMLAYER_PAGE, snap_crc64(0, page, MEMLAYER_PAGE)};
			return 1;
		}
		if (found < 0) {
			*s = (struct snap_mem_sample){(first + i) * MEMLAYER_PAGE, snap_crc64(0, zero, MEMLAYER_PAGE)};
			found = 0;
		}
	}
	return found;
}

void vm_dirty_samples(const struct vm *vm, const struct vm_dirty *d, struct snap_memfile *m)
{
	struct snap_mem_sample zeros[SNAP_MEMFILE_SAMPLES];
	uint64_t npages = vm->mem.size / MEMLAYER_PAGE;
	unsigned nz = 0;

	m->nr_samples = 0;
	/* windows in an order that spreads what is found: 0, 8, 16, ... 56, then 1, 9, ... */
	for (unsigned k = 0; k < WINDOWS && m->nr_samples < SNAP_MEMFILE_SAMPLES; k++) {
		uint64_t w = (k % 8) * 8 + k / 8, first = npages * w / WINDOWS;
		struct snap_mem_sample s;
		int r = first < npages ? window_sample(vm, d, first, npages, &s) : -1;

		if (r == 1)
			m->sample[m->nr_samples++] = s;
		else if (r == 0 && nz < SNAP_MEMFILE_SAMPLES)
			zeros[nz++] = s;
	}
	/* few non-zero pages outside the Diff (a guest booted with tracking: all it wrote is in it): zero ones */
	for (unsigned i = 0; i < nz && m->nr_samples < SNAP_MEMFILE_SAMPLES; i++)
		m->sample[m->nr_samples++] = zeros[i];
}
