/*
 * snap_memfile.h - which memory file a state file belongs to (SNAP_TAG_MEMFILE), so that a snapshot
 * create interrupted between its two renames is completed at the next load instead of pairing the new
 * state with the old memory (docs/api.md "Snapshots": crash consistency).
 */
#ifndef BRISK_SNAP_MEMFILE_H
#define BRISK_SNAP_MEMFILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct snap_writer;
struct snap_reader;

/* What the memory file holds (section version 2; a version-1 section is a Full snapshot's). */
enum snap_mem_kind {
	SNAP_MEM_FULL = 0,   /* all of guest RAM */
	SNAP_MEM_DIFF = 1,   /* a Diff layer: the pages written since the previous snapshot, holes elsewhere */
	SNAP_MEM_MERGED = 2, /* a Diff merged at its create onto a copy of the memory file that was at the path */
};

#define SNAP_MEMFILE_SAMPLES 8u

/*
 * A page of guest memory a Diff left out (not written since the previous snapshot): where it is in the memory
 * file and the CRC-64 (snap_crc64) of its 4 KiB as they were when the Diff was taken. The file a load maps must
 * hold the same bytes there: a Diff layer loaded without its base reads holes (zeros) instead.
 */
struct snap_mem_sample {
	uint64_t off, crc;
};

/*
 * The memory file as the create wrote it: the temporary file's device, inode and name (a rename keeps
 * the device and inode), its size, and its change time (ns since the epoch, the file system's clock): a
 * file found at mem_file_path that was last changed before that is older than this snapshot. For a Diff, its
 * kind and samples of the pages it left to its base.
 */
struct snap_memfile {
	uint64_t dev, ino, size;
	int64_t ctime_ns;
	char tmp[NAME_MAX + 1]; /* the temporary file's name in mem_file_path's directory */
	enum snap_mem_kind kind;
	unsigned nr_samples; /* at most SNAP_MEMFILE_SAMPLES */
	struct snap_mem_sample sample[SNAP_MEMFILE_SAMPLES];
};

/*
 * Writes the SNAP_TAG_MEMFILE section: version 1 for a Full snapshot (the bytes brisk wrote before Diffs
 * existed), version 2 (with the kind and the samples) for a Diff. 0 or -errno.
 */
int snap_memfile_save(struct snap_writer *w, const struct snap_memfile *m);
/*
 * Reads it: 0 with *present (false for a state file written before this section existed), -EINVAL
 * when it is malformed (a name with '/', empty or over NAME_MAX; an unknown kind, more than
 * SNAP_MEMFILE_SAMPLES samples, a sample not page-aligned or past `size`), or -EPROTONOSUPPORT when the
 * section is a version (snap_version) this brisk does not read.
 */
int snap_memfile_load(struct snap_reader *r, struct snap_memfile *m, bool *present);
/*
 * The Diff's samples against the memory file a load maps (`fd`, its offset moved): 0 when every sampled page
 * holds what it held at the create (or there are none), else -EINVAL with `err` naming `path` and the page's
 * offset, and saying whether it read as zeros (a layer without its base) or other bytes (another base, or a
 * layer missing from the merge). -errno when the file cannot be read.
 */
int snap_memfile_check_samples(const struct snap_memfile *m, int fd, const char *path, char *err, size_t errlen);

/*
 * Opens the memory file for a restore (read-only, a regular file, never blocking). `m` NULL (an older
 * state file): the file at `path`, unchecked. Otherwise, when the file at `path` is not the one the
 * create wrote:
 *   - the create's temporary file is still beside it (the create was stopped after the state file was
 *     renamed into place, before the memory file was): the create is completed, the temporary file
 *     renamed to `path` (logged), and that file is returned;
 *   - the file at `path` was last changed before the create began: it is the previous snapshot's
 *     memory, -ESTALE with `err` saying so (loading it would pair this state with other memory);
 *   - else it is a copy (another directory, host or file system): returned.
 * Returns the fd and its stat in *st, or -errno with `err` naming the file.
 */
int snap_memfile_open(const struct snap_memfile *m, const char *path, struct stat *st, char *err, size_t errlen);

#endif
