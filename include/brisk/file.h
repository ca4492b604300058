/* file.h - opening the files a user names: never blocking, never the wrong kind, errors that name the file. */
#ifndef BRISK_FILE_H
#define BRISK_FILE_H

#include <stddef.h>
#include <sys/stat.h>

/*
 * Opens `path` read-only for input that must be a regular file (kernel,
 * initrd, CPU template, System.map, ...). The open never blocks: a FIFO,
 * socket, device or directory is refused after O_NONBLOCK|O_NOFOLLOW-free
 * opening and fstat (SECURITY.md 18). On success returns the fd (O_CLOEXEC,
 * blocking mode restored) and, if `st` is not NULL, its stat. On failure
 * returns -errno with `err` = "WHAT PATH: reason".
 */
int file_open_input(const char *path, const char *what, struct stat *st, char *err, size_t errlen);

/* Inodes an output file must not be (the kernel and initrd being booted). */
struct file_avoid {
	const struct stat *st; /* NULL entries are skipped */
	const char *name;      /* what it is, for the message ("the kernel image") */
};

/*
 * Opens `path` for writing output (serial log, reports). Never blocks and
 * never loses data it must not: a regular file is created (0644) and
 * truncated only after it was checked not to be one of `avoid` (opening the
 * kernel as the serial log must not destroy the kernel); a character device
 * or a FIFO with a reader is accepted as is; a FIFO without a reader, a
 * directory or a socket is refused. Returns the fd (O_CLOEXEC, blocking
 * mode restored unless `nonblock`) or -errno with `err` naming the file.
 */
int file_open_output(const char *path, const char *what, const struct file_avoid *avoid, size_t nr_avoid, int nonblock,
		     char *err, size_t errlen);

/* Short reason for an open() errno, as users read it ("no such file", "permission denied"). */
const char *file_open_reason(int err);

#endif
