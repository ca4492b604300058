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

/*
 * The memory file as the create wrote it: the temporary file's device, inode and name (a rename keeps
 * the device and inode), its size, and its change time (ns since the epoch, the file system's clock): a
 * file found at mem_file_path that was last changed before that is older than this snapshot.
 */
struct snap_memfile {
	uint64_t dev, ino, size;
	int64_t ctime_ns;
	char tmp[NAME_MAX + 1]; /* the temporary file's name in mem_file_path's directory */
};

/* Writes the SNAP_TAG_MEMFILE section. 0 or -errno. */
int snap_memfile_save(struct snap_writer *w, const struct snap_memfile *m);
/*
 * Reads it: 0 with *present (false for a state file written before this section existed), -EINVAL
 * when it is malformed (a name with '/', empty or over NAME_MAX), or -EPROTONOSUPPORT when the section
 * is a version (snap_version) this brisk does not read.
 */
int snap_memfile_load(struct snap_reader *r, struct snap_memfile *m, bool *present);

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
