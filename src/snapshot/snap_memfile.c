/* snap_memfile.c - the state file's record of its memory file, and the restore's open of it (snap_memfile.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/file.h"
#include "brisk/log.h"
#include "brisk/snap_memfile.h"
#include "brisk/snapshot.h"

/*
 * The section's versions (snapshot.h): 1, the file's identity; 2 adds, after it, the kind (u8) and the samples
 * (u32 count, then each u64 offset, u64 CRC-64). A Full snapshot still writes version 1.
 */
#define SNAP_MEMFILE_VERSION 2u

static int put_diff(struct snap_writer *w, const struct snap_memfile *m)
{
	int ret = snap_put_u8(w, (uint8_t)m->kind) || snap_put_u32(w, m->nr_samples);

	for (unsigned i = 0; !ret && i < m->nr_samples && i < SNAP_MEMFILE_SAMPLES; i++)
		ret = snap_put_u64(w, m->sample[i].off) || snap_put_u64(w, m->sample[i].crc);
	return ret ? -ENOMEM : 0;
}

int snap_memfile_save(struct snap_writer *w, const struct snap_memfile *m)
{
	size_t len = strlen(m->tmp);
	uint32_t version = m->kind == SNAP_MEM_FULL ? 1u : 2u;
	int ret = snap_section_begin(w, SNAP_TAG_MEMFILE, 0, "memfile") ?: snap_set_version(w, version);

	if (ret)
		return ret;
	if (snap_put_u64(w, m->dev) || snap_put_u64(w, m->ino) || snap_put_u64(w, m->size) ||
	    snap_put_u64(w, (uint64_t)m->ctime_ns) || snap_put_u32(w, (uint32_t)len) || snap_put(w, m->tmp, len))
		return -ENOMEM;
	if (version >= 2 && (ret = put_diff(w, m)))
		return ret;
	return snap_section_end(w);
}

/* Version 2's fields: the kind, and samples that lie on whole pages inside the file. */
static int get_diff(struct snap_reader *sec, struct snap_memfile *m)
{
	uint8_t kind;
	uint32_t n;

	if (snap_get_u8(sec, &kind) || kind > SNAP_MEM_MERGED || snap_get_u32(sec, &n) || n > SNAP_MEMFILE_SAMPLES)
		return -EINVAL;
	m->kind = (enum snap_mem_kind)kind;
	m->nr_samples = n;
	for (unsigned i = 0; i < n; i++) {
		struct snap_mem_sample *s = &m->sample[i];

		if (snap_get_u64(sec, &s->off) || snap_get_u64(sec, &s->crc) || s->off % 4096 || m->size < 4096 ||
		    s->off > m->size - 4096)
			return -EINVAL;
	}
	return 0;
}

int snap_memfile_load(struct snap_reader *r, struct snap_memfile *m, bool *present)
{
	struct snap_reader *sec = NULL;
	uint64_t ctime;
	uint32_t len;
	int ret;

	memset(m, 0, sizeof(*m));
	*present = false;
	ret = snap_section(r, SNAP_TAG_MEMFILE, 0, "memfile", &sec);
	if (ret == -ENOENT)
		return 0;
	if (!ret && (snap_version(sec) < 1 || snap_version(sec) > SNAP_MEMFILE_VERSION))
		return -EPROTONOSUPPORT;
	if (ret || snap_get_u64(sec, &m->dev) || snap_get_u64(sec, &m->ino) || snap_get_u64(sec, &m->size) ||
	    snap_get_u64(sec, &ctime) || snap_get_u32(sec, &len) || len == 0 || len > NAME_MAX ||
	    snap_get(sec, m->tmp, len) || (snap_version(sec) >= 2 && get_diff(sec, m)) || snap_remaining(sec))
		return -EINVAL;
	m->tmp[len] = 0;
	/* A name in the memory file's directory, nothing else: no path, no NUL, not "." or "..". */
	if (strlen(m->tmp) != len || strchr(m->tmp, '/') || strcmp(m->tmp, ".") == 0 || strcmp(m->tmp, "..") == 0)
		return -EINVAL;
	m->ctime_ns = (int64_t)ctime;
	*present = true;
	return 0;
}

static bool is_file(const struct snap_memfile *m, const struct stat *st)
{
	return (uint64_t)st->st_dev == m->dev && (uint64_t)st->st_ino == m->ino;
}

static int64_t ctime_ns(const struct stat *st)
{
	return (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

/*
 * The create's temporary file beside `path`, when it is the file the state names: renamed to `path`
 * (the create's last step) and returned open, its stat in *st. Else -ENOENT.
 */
static int complete_create(const struct snap_memfile *m, const char *path, struct stat *out)
{
	char dir[PATH_MAX], name[NAME_MAX + 1];
	struct stat tst, *st = &tst;
	int dfd, fd;

	if (file_split_target(path, "mem_file_path", dir, name, NULL, 0))
		return -ENOENT;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -ENOENT;
	fd = openat(dfd, m->tmp, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || !is_file(m, st))) {
		close(fd);
		fd = -1;
	}
	if (fd >= 0) {
		log_warn("mem_file_path %s: the snapshot create that wrote this state file stopped before renaming "
			 "its memory file into place; completing it (%s/%s -> %s)",
			 path, dir, m->tmp, name);
		if (renameat(dfd, m->tmp, dfd, name) != 0 || fsync(dfd) != 0)
			log_warn("mem_file_path %s: renaming %s: %s (the restore uses it where it is)", path, m->tmp,
				 strerror(errno));
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		*out = tst;
	}
	close(dfd);
	return fd >= 0 ? fd : -ENOENT;
}

int snap_memfile_open(const struct snap_memfile *m, const char *path, struct stat *st, char *err, size_t errlen)
{
	char why[512];
	int fd = file_open_input(path, "mem_file_path", st, why, sizeof(why)), tfd;

	if (!m || (fd >= 0 && is_file(m, st)))
		return fd >= 0 ? fd : err_set(err, errlen, fd, "%s", why);
	tfd = complete_create(m, path, st);
	if (tfd >= 0) {
		if (fd >= 0)
			close(fd);
		return tfd;
	}
	if (fd < 0)
		return err_set(err, errlen, fd, "%s", why);
	if (ctime_ns(st) < m->ctime_ns) {
		close(fd);
		return err_set(err, errlen, -ESTALE,
			       "mem_file_path %s: this memory file was last changed before the snapshot its state file "
			       "describes was taken: the create that wrote the state file did not finish (its memory "
			       "is not at this path); restore from a complete snapshot",
			       path);
	}
	return fd;
}

int snap_memfile_check_samples(const struct snap_memfile *m, int fd, const char *path, char *err, size_t errlen)
{
	uint8_t page[4096];

	for (unsigned i = 0; i < m->nr_samples; i++) {
		const struct snap_mem_sample *s = &m->sample[i];
		ssize_t n;
		bool zero = true;

		/* lseek and read, not pread: a create checks its base on the main thread, under its seccomp list */
		if (lseek(fd, (off_t)s->off, SEEK_SET) < 0)
			return err_set(err, errlen, -errno, "mem_file_path %s: seeking to 0x%llx: %s", path,
				       (unsigned long long)s->off, strerror(errno));
		do
			n = read(fd, page, sizeof(page));
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return err_set(err, errlen, -errno, "mem_file_path %s: reading the page at 0x%llx: %s", path,
				       (unsigned long long)s->off, strerror(errno));
		if (n != (ssize_t)sizeof(page))
			return err_set(err, errlen, -EINVAL, "mem_file_path %s: truncated at 0x%llx", path,
				       (unsigned long long)s->off);
		if (snap_crc64(0, page, sizeof(page)) == s->crc)
			continue;
		for (size_t j = 0; j < sizeof(page) && zero; j++)
			zero = page[j] == 0;
		if (zero)
			return err_set(
			    err, errlen, -EINVAL,
			    "mem_file_path %s is a Diff snapshot's memory without its base: the page at "
			    "0x%llx, which the Diff left to the previous snapshot, reads as zeros; merge the "
			    "layer onto the previous snapshot's memory file first (brisk snapshot-editor "
			    "edit-memory rebase --memory-path BASE --diff-path LAYER) and load that",
			    path, (unsigned long long)s->off);
		return err_set(err, errlen, -EINVAL,
			       "mem_file_path %s does not hold this Diff snapshot's memory: the page at 0x%llx, which "
			       "the Diff left to the previous snapshot, differs from it; merge onto the base this "
			       "VM's previous snapshot wrote, every layer in the order they were taken",
			       path, (unsigned long long)s->off);
	}
	return 0;
}
