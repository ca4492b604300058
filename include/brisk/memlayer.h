/*
 * memlayer.h - the memory file of a Diff snapshot: dirty bitmaps turned into the file's runs, and a layer
 * merged onto its base (docs/api.md "Diff snapshots").
 *
 * A memory file holds guest RAM region after region, each at the file offset where the previous one ended
 * (Firecracker's GuestMemoryState: `offset` += region size; brisk's one host mapping has the same layout, so a
 * page's file offset is its offset in that mapping). A Full snapshot's file is all of RAM (zero pages may be
 * holes); a Diff's has the guest's size too, with the pages dirtied since the previous snapshot written at
 * their offsets and holes everywhere else, as Firecracker writes it (vstate/memory.rs dump_dirty), so its
 * snapshot-editor `edit-memory rebase` and brisk's merge read each other's files: merging copies every data
 * extent (SEEK_DATA/SEEK_HOLE) of the layer onto the base at the same offset.
 */
#ifndef BRISK_MEMLAYER_H
#define BRISK_MEMLAYER_H

#include <stddef.h>
#include <stdint.h>

#define MEMLAYER_PAGE 4096u /* KVM's dirty log and Firecracker's diffs count 4 KiB pages, huge pages or not */

/* One guest RAM region as the memory file holds it, with KVM's dirty log of its memory slot. */
struct memlayer_region {
	uint64_t off;	     /* file offset of its first byte (a multiple of MEMLAYER_PAGE) */
	uint64_t pages;	     /* its size in pages */
	const uint64_t *kvm; /* KVM_GET_DIRTY_LOG's bitmap: bit i (word i/64, bit i%64) = page i; NULL: none */
};

/* Words of a bitmap of `pages` bits, as KVM sizes a slot's dirty log (a whole number of 64-bit words). */
static inline uint64_t memlayer_words(uint64_t pages)
{
	return (pages + 63) / 64;
}

/*
 * Calls fn(off, len, arg) for each maximal run of dirty pages, in file order, len > 0 and a multiple of
 * MEMLAYER_PAGE: a page is dirty when its bit is set in its region's KVM bitmap or in `vmm` (may be NULL; of
 * `vmm_words` words, bits past them read 0), the pages brisk itself wrote, indexed by file page (bit p = the
 * page at file offset p * MEMLAYER_PAGE). Runs in
 * adjacent regions that touch in the file are one run. `regions` in file order, not overlapping. Stops at the
 * first non-zero fn result and returns it; else 0. *pages (may be NULL) gets the dirty pages counted.
 */
int memlayer_dirty_runs(const struct memlayer_region *regions, unsigned nr, const uint64_t *vmm, uint64_t vmm_words,
			int (*fn)(uint64_t off, uint64_t len, void *arg), void *arg, uint64_t *pages);

/*
 * Copies every data extent of `src` (SEEK_DATA/SEEK_HOLE: a file system without them is all data) onto `dst`
 * at the same offsets, both files `size` bytes (the caller checked); holes of `src` leave `dst` as it is.
 * copy_file_range where the kernel copies (a reflink on XFS or btrfs), else read and pwrite. *copied (may be
 * NULL) gets the bytes copied. Returns 0, or -errno with `err` naming the call and the offset.
 */
int memlayer_apply(int dst, int src, uint64_t size, uint64_t *copied, char *err, size_t errlen);

/*
 * `brisk snapshot-editor edit-memory rebase --memory-path BASE --diff-path LAYER` (Firecracker's command):
 * LAYER's data extents written into BASE in place. Refused, BASE untouched: either file missing or not a
 * regular file, LAYER and BASE one file, sizes that differ (a layer of another guest, or no memory file),
 * BASE mapped by a running brisk VM (the lock file.h's FILE_MAPPED_LOCK_OFF: writing into it would change
 * what that guest reads). A merge stopped half way can be run again: the result is the same. Returns 0 or
 * -errno with `err` (one line naming the file and the values).
 */
int memlayer_rebase(const char *base, const char *layer, uint64_t *copied, char *err, size_t errlen);

#endif
