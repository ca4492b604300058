/* file.h - opening the files a user names: never blocking, never the wrong kind, errors that name the file. */
#ifndef BRISK_FILE_H
#define BRISK_FILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/*
 * Opens `path` read-only for input that must be a regular file (kernel,
 * initrd, CPU template, System.map, ...). The open never blocks: a FIFO,
 * socket, device or directory is refused after O_NONBLOCK|O_NOFOLLOW-free
 * opening and fstat (docs/security.md case 18). On success returns the fd
 * (O_CLOEXEC, blocking mode restored) and, if `st` is not NULL, its stat. On
 * failure returns -errno with `err` = "WHAT PATH: reason".
 */
int file_open_input(const char *path, const char *what, struct stat *st, char *err, size_t errlen);

/*
 * Whether fd is open on the null device (character device 1:3, devices.txt): a read of it only ever returns
 * end-of-file, so a console need not start a thread to read it (stdin under systemd, an orchestrator, a bench).
 */
bool file_is_dev_null(int fd);

/*
 * The guard: the files this process boots from, serves to a guest or was
 * restored from, which no output it opens may overwrite, truncate or
 * replace (docs/security.md "Output paths"). Kinds differ only in what a
 * snapshot create may replace: its own earlier snapshot files, by rename.
 */
enum file_guard_kind {
	FILE_GUARD_INPUT,    /* kernel, initrd, CPU template, config file: never an output */
	FILE_GUARD_DISK,     /* a disk image: never an output */
	FILE_GUARD_SNAPSHOT, /* a state or memory file this VM was restored from: replaceable by a new snapshot */
};

/* Adds the file `st` describes (its device and inode), named `what` in messages ("the kernel image (--kernel)"). */
void file_guard_add(const struct stat *st, enum file_guard_kind kind, const char *what);
/* The same by path, for outputs checked before the inputs are opened; a path that does not exist adds nothing. */
void file_guard_add_path(const char *path, enum file_guard_kind kind, const char *what);
/* Forgets every entry (unit tests; a process that builds a second VM). */
void file_guard_clear(void);

/*
 * OFD lock byte a VM restored from a memory file holds (read lock) for as
 * long as it maps the file: outputs of any brisk see the file in use, while
 * a disk's lock (the whole file, from byte 0) stays distinguishable.
 */
#define FILE_MAPPED_LOCK_OFF (1ll << 62)
/* Takes that lock on `fd` (kept open while mapped). 0, or -errno where the file system has no locks (ignored). */
int file_lock_mapped(int fd);

/* How a streamed output treats a regular file that exists. */
enum file_out_mode {
	FILE_OUT_TRUNCATE, /* written from the start (serial log, --report-json, ACPI dumps): truncated once checked */
	FILE_OUT_APPEND,   /* a log (logger, metrics): appended to, never truncated */
};

/*
 * Opens `path` for streamed output. Never blocks and never loses data it
 * must not: a regular file is created (0644) and, in FILE_OUT_TRUNCATE
 * mode, truncated only after the checks; a character device or a FIFO with
 * a reader is accepted as is; in FILE_OUT_APPEND mode any FIFO is, opened
 * read-write (a reader may come later); a FIFO without a reader in
 * FILE_OUT_TRUNCATE mode, a directory or a socket is refused. Refused too (-EBUSY, nothing touched): a file in the
 * guard, or one another open file holds a lock on (a disk of another VM, a
 * memory file a VM maps). Returns the fd (O_CLOEXEC; O_APPEND in append
 * mode; blocking mode restored unless `nonblock`) or -errno with `err`
 * naming the file.
 */
int file_open_output(const char *path, const char *what, enum file_out_mode mode, bool nonblock, char *err,
		     size_t errlen);

/*
 * Replacing a file whole: the new content goes to a temporary file beside
 * the target (".NAME.XXXXXX", mode of the file it replaces, else 0644) and
 * is renamed over the target only once complete (and synced), so a failure
 * or a crash leaves the previous file as it was. A symbolic link is
 * followed (the file it names is replaced). A FIFO or character device
 * target (--json /dev/stdout) is written directly unless the flags say
 * FILE_REPLACE_REGULAR.
 */
struct file_replace {
	int fd;			 /* write here: the temporary file, or the FIFO/terminal itself */
	int dirfd;		 /* the target's directory; -1 when written directly */
	char name[NAME_MAX + 1]; /* the target's name in dirfd */
	char tmp[NAME_MAX + 1];	 /* the temporary file's name in dirfd */
	struct stat st;		 /* the temporary file's (its device and inode survive the rename) */
	struct stat dir_st;	 /* the directory's */
	struct stat target_st;	 /* the file replaced, when target_exists */
	bool target_exists;
};

#define FILE_REPLACE_REGULAR  1u /* the target must be (or become) a regular file: snapshot files */
#define FILE_REPLACE_SNAPSHOT 2u /* may replace a guarded snapshot file or a memory file a VM maps */

/*
 * Checks the target as file_open_output does (the guard; a lock another
 * open file holds: any for reports, one from byte 0 for snapshot files)
 * and creates the temporary file. Returns 0, or -errno with `err` naming
 * the file; nothing is created on failure.
 */
int file_replace_open(struct file_replace *r, const char *path, const char *what, unsigned flags, char *err,
		      size_t errlen);
/* fsync of the temporary file. 0 or -errno. */
int file_replace_sync(struct file_replace *r);
/*
 * The temporary file becomes the target: optionally synced, renamed over
 * it, the directory synced (the rename survives a crash). Returns 0 with
 * `r` closed; or -errno with `err` and `r` still open, for the caller to
 * remove the temporary file (file_replace_abort) or keep it
 * (file_replace_keep). After the rename only the directory's fsync can
 * fail: `r` is closed then too (tmp empty), the new file in place.
 */
int file_replace_commit(struct file_replace *r, bool sync, char *err, size_t errlen);
/* Removes the temporary file (if not renamed yet) and closes `r`: the target is untouched. */
void file_replace_abort(struct file_replace *r);
/* Closes `r`, leaving whatever file is there (a temporary file a snapshot's state names). */
void file_replace_keep(struct file_replace *r);
/* Whether two replacements name the same target (same directory, same name, or the same existing file). */
bool file_replace_same_target(const struct file_replace *a, const struct file_replace *b);

/*
 * The file `path` names, a symbolic link followed (the file it points at, not the link), split into its
 * directory (dir[PATH_MAX]) and last component (name[NAME_MAX + 1]). Returns 0 or -errno with `err`.
 */
int file_split_target(const char *path, const char *what, char *dir, char *name, char *err, size_t errlen);

/* Short reason for an open() errno, as users read it ("no such file", "permission denied"). */
const char *file_open_reason(int err);

#endif
