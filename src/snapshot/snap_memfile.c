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

#define SNAP_MEMFILE_VERSION 1u /* the section's (snapshot.h); a change to its layout bumps it */

int snap_memfile_save(struct snap_writer *w, const struct snap_memfile *m)
{
	size_t len = strlen(m->tmp);
	int ret = snap_section_begin(w, SNAP_TAG_MEMFILE, 0, "memfile") ?: snap_set_version(w, SNAP_MEMFILE_VERSION);

	if (ret)
		return ret;
	if (snap_put_u64(w, m->dev) || snap_put_u64(w, m->ino) || snap_put_u64(w, m->size) ||
	    snap_put_u64(w, (uint64_t)m->ctime_ns) || snap_put_u32(w, (uint32_t)len) || snap_put(w, m->tmp, len))
		return -ENOMEM;
	return snap_section_end(w);
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
	if (!ret && snap_version(sec) != SNAP_MEMFILE_VERSION)
		return -EPROTONOSUPPORT;
	if (ret || snap_get_u64(sec, &m->dev) || snap_get_u64(sec, &m->ino) || snap_get_u64(sec, &m->size) ||
	    snap_get_u64(sec, &ctime) || snap_get_u32(sec, &len) || len == 0 || len > NAME_MAX ||
	    snap_get(sec, m->tmp, len) || snap_remaining(sec))
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
