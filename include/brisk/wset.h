/*
 * wset.h - a restored VM's working set: which pages of its memory file the guest touched soon after a restore
 * (recorded once, `brisk restore --working-set record=MS`), kept in a small file beside the memory file, and
 * fetched in bulk by later restores of the same snapshot while the vCPUs start and run (or, `--working-set wait`,
 * before they run; docs/performance.md "Working set"), the rest loading lazily as before.
 *
 * The file (MEM.ws for memory file MEM; little-endian):
 *   header  "BRSKWSET" (8), u32 version (WSET_VERSION), u32 page size (4096), u64 the state file's CRC-64
 *           (snap_reader_checksum: which snapshot the list belongs to), u64 guest RAM bytes, u32 number of
 *           ranges, u32 zero
 *   ranges  per range u64 first page, u64 pages (offsets into the memory file, in 4 KiB pages), sorted,
 *           disjoint, none empty, all inside guest RAM
 *   trailer u64 CRC-64 (snap_crc64) of header and ranges
 * The file is untrusted input (docs/security.md case 84): wset_parse checks every field and refuses the whole
 * file on any error; a refused or stale file (another snapshot's, another RAM size) means a lazy restore and a
 * warning, never a failed one.
 */
#ifndef BRISK_WSET_H
#define BRISK_WSET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/mem.h"

#define WSET_MAGIC	 "BRSKWSET"
#define WSET_VERSION	 1u
#define WSET_PAGE	 4096u
#define WSET_HEADER_SIZE 40u
#define WSET_MAX_FILE	 (64u << 20) /* a larger file is refused unread */
#define WSET_SUFFIX	 ".ws"
/*
 * The prefetch's reads: listed ranges less than this many pages apart are one MADV_WILLNEED (128 KiB, the
 * kernel's default readahead window: a lazy fault would read that much around the page anyway); a
 * recording of scattered pages is thousands of ranges, and each call costs.
 */
#define WSET_ADVISE_GAP 32u

struct wset_range {
	uint64_t first; /* page index into the memory file */
	uint64_t count; /* pages, > 0 */
};

struct wset {
	uint64_t snapshot_crc; /* the state file's CRC-64 */
	uint64_t mem_size;     /* guest RAM bytes */
	uint32_t nr;
	struct wset_range *range; /* malloc'd, nr entries */
	uint64_t pages;		  /* the ranges' pages, summed */
};

/*
 * Checks and decodes a working-set file held in `buf` for a snapshot whose state file has CRC-64 `crc` and
 * whose guest has `mem_size` bytes of RAM. Returns 0 with *out filled (wset_free it), -EINVAL (malformed:
 * framing, version, page size, order, bounds, checksum) or -ESTALE (well-formed but another snapshot's or
 * another RAM size), with `err` saying which field; -ENOMEM.
 */
__attribute__((warn_unused_result)) int wset_parse(const void *buf, size_t len, uint64_t crc, uint64_t mem_size,
						   struct wset *out, char *err, size_t errlen);
/* Encodes `w` (its ranges as wset_parse accepts them) into a malloc'd buffer. 0 or -ENOMEM / -EINVAL. */
__attribute__((warn_unused_result)) int wset_encode(const struct wset *w, uint8_t **buf, size_t *len);
/*
 * Ranges from a residency vector (`present[i]` bit 0: page i touched), adjacent pages merged. 0 or -ENOMEM;
 * w->snapshot_crc and w->mem_size are the caller's.
 */
__attribute__((warn_unused_result)) int wset_from_present(const uint8_t *present, uint64_t npages, struct wset *w);
void wset_free(struct wset *w);

/* "MEM.ws" for memory file MEM into `out`. 0 or -ENAMETOOLONG. */
int wset_path(const char *mem_path, char *out, size_t outlen);
/* Reads and checks `path` (wset_parse); -ENOENT when there is none. `err` names the file and the reason. */
__attribute__((warn_unused_result)) int wset_load(const char *path, uint64_t crc, uint64_t mem_size, struct wset *out,
						  char *err, size_t errlen);
/* Writes `w` to `path`, replacing it whole (file.h file_replace_*). 0 or -errno with `err`. */
__attribute__((warn_unused_result)) int wset_save(const char *path, const struct wset *w, char *err, size_t errlen);

/*
 * Which pages of guest RAM this process has touched: /proc/self/pagemap's present and swapped bits through
 * `pagemap_fd` (opened before the seccomp filter), else mincore (which also counts pages another process
 * brought into the page cache). `present` has one byte per 4 KiB page of m. 0 or -errno.
 */
__attribute__((warn_unused_result)) int wset_residency(const struct gmem *m, int pagemap_fd, uint8_t *present);

/* The prefetch's outcome, for the log and the profile. */
struct wset_prefetch_stats {
	uint64_t pages;	      /* pages listed */
	uint64_t ranges;      /* madvise calls made by the last phase */
	uint64_t ns_advise;   /* MADV_WILLNEED over every range: the reads started */
	uint64_t ns_populate; /* MADV_POPULATE_READ over every range: mapped, waiting for the reads */
	uint64_t mapped;      /* pages the populate pass covered (all of them unless cancelled or failed) */
	bool cancelled;	      /* the populate pass was stopped (the VM ended first) */
	int error;	      /* the first madvise's -errno, 0 */
};

/*
 * Starts reading every listed page of a file-backed RAM mapping (MADV_WILLNEED: asynchronous readahead, one call
 * per run of ranges less than WSET_ADVISE_GAP pages apart), so that the I/O overlaps the rest of the restore.
 * Ranges past RAM are skipped.
 */
void wset_prefetch_begin(const struct gmem *m, const struct wset *w, struct wset_prefetch_stats *st);
/*
 * Maps every listed page into this process (MADV_POPULATE_READ, Linux 5.14+: waits for the reads begun), so that
 * the guest's first touch of one is no fault at all. Best effort: an error stops it (st->error) and the rest stays
 * lazy. `cancel` (may be NULL), read before each range: once true, the rest stays lazy (st->cancelled). Safe while
 * vCPUs run: it only reads, and a page the guest reached first is found mapped.
 */
void wset_prefetch_end(const struct gmem *m, const struct wset *w, struct wset_prefetch_stats *st,
		       const atomic_bool *cancel);

#endif
