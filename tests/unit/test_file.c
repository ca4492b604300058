/*
 * test_file.c - outputs that lose nothing (include/brisk/file.h): the guard, append mode, other VMs'
 * locks, whole-file replacement (a failure keeps the old file), and the restore's choice of memory file
 * after an interrupted snapshot create (include/brisk/snap_memfile.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/file.h"
#include "brisk/snap_memfile.h"
#include "brisk/snapshot.h"

static char dir[] = "/tmp/test_file.XXXXXX";
static char err[1024];

static const char *at(const char *name)
{
	static char buf[4][256];
	static unsigned k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
	return buf[k];
}

static void put(const char *name, const char *text)
{
	FILE *f = fopen(at(name), "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char *get(const char *name)
{
	static char buf[4096];
	FILE *f = fopen(at(name), "r");
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* Temporary files (".NAME.XXXXXX") left in dir. */
static unsigned temps(void)
{
	char cmd[512];
	unsigned n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "ls -A %s | grep -c '^\\.'", dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_int_equal(fscanf(p, "%u", &n), 1);
	pclose(p);
	return n;
}

static int setup(void **state)
{
	(void)state;
	file_guard_clear();
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static void write_all(int fd, const char *s)
{
	assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

/* A logger's file is appended to, never truncated; the serial log's is truncated once checked. */
static void test_append_and_truncate(void **state)
{
	int fd;

	(void)state;
	put("log", "old line\n");
	fd = file_open_output(at("log"), "logger: log_path", FILE_OUT_APPEND, true, err, sizeof(err));
	assert_true(fd >= 0);
	write_all(fd, "new line\n");
	close(fd);
	assert_string_equal(get("log"), "old line\nnew line\n");
	fd = file_open_output(at("log"), "--serial file:", FILE_OUT_TRUNCATE, false, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	assert_string_equal(get("log"), "");
}

/* A file in the guard is refused by every output, untouched; a snapshot file only by non-snapshot outputs. */
static void test_guard(void **state)
{
	struct file_replace r;
	struct stat st;

	(void)state;
	put("disk", "disk content");
	put("kernel", "kernel content");
	put("mem", "memory");
	file_guard_add_path(at("disk"), FILE_GUARD_DISK, "a disk image of this VM");
	file_guard_add_path(at("missing"), FILE_GUARD_DISK, "a disk image of this VM"); /* nothing to add */
	assert_int_equal(stat(at("kernel"), &st), 0);
	file_guard_add(&st, FILE_GUARD_INPUT, "the kernel image (--kernel)");
	file_guard_add_path(at("mem"), FILE_GUARD_SNAPSHOT, "the snapshot memory file it was restored from");

	assert_int_equal(file_open_output(at("disk"), "logger: log_path", FILE_OUT_APPEND, true, err, sizeof(err)),
			 -EBUSY);
	assert_non_null(strstr(err, "is a disk image of this VM"));
	assert_int_equal(file_open_output(at("kernel"), "--serial file:", FILE_OUT_TRUNCATE, 0, err, sizeof(err)),
			 -EBUSY);
	assert_non_null(strstr(err, "the kernel image (--kernel)"));
	assert_int_equal(file_open_output(at("mem"), "--serial file:", FILE_OUT_TRUNCATE, 0, err, sizeof(err)), -EBUSY);
	assert_int_equal(file_replace_open(&r, at("disk"), "mem_file_path",
					   FILE_REPLACE_REGULAR | FILE_REPLACE_SNAPSHOT, err, sizeof(err)),
			 -EBUSY);
	assert_int_equal(file_replace_open(&r, at("mem"), "--json", 0, err, sizeof(err)), -EBUSY);
	assert_string_equal(get("disk"), "disk content");
	assert_string_equal(get("kernel"), "kernel content");
	assert_string_equal(get("mem"), "memory");
	/* a snapshot may replace the memory file it was restored from */
	assert_int_equal(file_replace_open(&r, at("mem"), "mem_file_path", FILE_REPLACE_REGULAR | FILE_REPLACE_SNAPSHOT,
					   err, sizeof(err)),
			 0);
	file_replace_abort(&r);
	/* the strictest kind wins: a disk that is also a snapshot file stays a disk */
	file_guard_add_path(at("disk"), FILE_GUARD_SNAPSHOT, "x");
	assert_int_equal(file_replace_open(&r, at("disk"), "mem_file_path",
					   FILE_REPLACE_REGULAR | FILE_REPLACE_SNAPSHOT, err, sizeof(err)),
			 -EBUSY);
	assert_int_equal(temps(), 0);
	file_guard_clear();
}

/* Another open file's lock (another VM's disk; a mapped memory file) keeps every output off the file. */
static void test_locks(void **state)
{
	struct flock disk = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
	struct file_replace r;
	int hold, fd;

	(void)state;
	put("other-disk", "data");
	hold = open(at("other-disk"), O_RDONLY);
	assert_int_equal(fcntl(hold, F_OFD_SETLK, &disk), 0);
	assert_int_equal(file_open_output(at("other-disk"), "logger: log_path", FILE_OUT_APPEND, 1, err, sizeof(err)),
			 -EBUSY);
	assert_non_null(strstr(err, "in use by another VM"));
	assert_int_equal(file_replace_open(&r, at("other-disk"), "snapshot_path",
					   FILE_REPLACE_REGULAR | FILE_REPLACE_SNAPSHOT, err, sizeof(err)),
			 -EBUSY);
	close(hold);
	assert_string_equal(get("other-disk"), "data");

	/* a memory file another VM maps: no stream may write it; a new snapshot may replace it (rename) */
	put("clone.mem", "pages");
	hold = open(at("clone.mem"), O_RDONLY);
	assert_int_equal(file_lock_mapped(hold), 0);
	assert_int_equal(file_open_output(at("clone.mem"), "--serial file:", FILE_OUT_TRUNCATE, 0, err, sizeof(err)),
			 -EBUSY);
	assert_int_equal(file_replace_open(&r, at("clone.mem"), "--svg", 0, err, sizeof(err)), -EBUSY);
	assert_int_equal(file_replace_open(&r, at("clone.mem"), "mem_file_path",
					   FILE_REPLACE_REGULAR | FILE_REPLACE_SNAPSHOT, err, sizeof(err)),
			 0);
	write_all(r.fd, "new pages");
	assert_int_equal(file_replace_commit(&r, true, err, sizeof(err)), 0);
	assert_string_equal(get("clone.mem"), "new pages");
	close(hold);
	fd = file_open_output(at("clone.mem"), "--serial file:", FILE_OUT_TRUNCATE, 0, err, sizeof(err));
	assert_true(fd >= 0); /* nobody maps the new file */
	close(fd);
}

/* Replacement: nothing changes until the commit; an abort leaves the old file and no temporary one. */
static void test_replace(void **state)
{
	struct file_replace r;
	struct stat st;

	(void)state;
	put("state", "old snapshot");
	chmod(at("state"), 0600);
	assert_int_equal(file_replace_open(&r, at("state"), "snapshot_path", FILE_REPLACE_REGULAR, err, sizeof(err)),
			 0);
	write_all(r.fd, "new snap");
	assert_string_equal(get("state"), "old snapshot");
	assert_int_equal(strncmp(r.tmp, ".state.", 7), 0);
	file_replace_abort(&r);
	assert_string_equal(get("state"), "old snapshot");
	assert_int_equal(temps(), 0);

	assert_int_equal(file_replace_open(&r, at("state"), "snapshot_path", FILE_REPLACE_REGULAR, err, sizeof(err)),
			 0);
	write_all(r.fd, "new snapshot");
	assert_int_equal(file_replace_commit(&r, true, err, sizeof(err)), 0);
	assert_string_equal(get("state"), "new snapshot");
	assert_int_equal(stat(at("state"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600); /* the replaced file's permissions */
	assert_int_equal(temps(), 0);

	/* a new file */
	assert_int_equal(file_replace_open(&r, at("fresh"), "--json", 0, err, sizeof(err)), 0);
	write_all(r.fd, "{}");
	assert_int_equal(file_replace_commit(&r, false, err, sizeof(err)), 0);
	assert_string_equal(get("fresh"), "{}");
	unlink(at("fresh"));
}

/* A symbolic link: the file it names is replaced, the link stays; a dangling one is refused. */
static void test_replace_symlink(void **state)
{
	struct file_replace r;
	struct stat st;

	(void)state;
	put("real", "old");
	assert_int_equal(symlink("real", at("link")), 0);
	assert_int_equal(file_replace_open(&r, at("link"), "snapshot_path", FILE_REPLACE_REGULAR, err, sizeof(err)), 0);
	write_all(r.fd, "new");
	assert_int_equal(file_replace_commit(&r, true, err, sizeof(err)), 0);
	assert_int_equal(lstat(at("link"), &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_string_equal(get("real"), "new");
	unlink(at("real"));
	assert_true(file_replace_open(&r, at("link"), "snapshot_path", FILE_REPLACE_REGULAR, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "a symbolic link to a missing file"));
	unlink(at("link"));
}

/* The same target twice: by name, through "..", through a hard link. Kinds: a FIFO is written directly. */
static void test_same_target_and_kinds(void **state)
{
	struct file_replace a, b;
	char path[300];

	(void)state;
	put("s", "x");
	assert_int_equal(file_replace_open(&a, at("s"), "snapshot_path", FILE_REPLACE_REGULAR, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/../%s/s", dir, strrchr(dir, '/') + 1);
	assert_int_equal(file_replace_open(&b, path, "mem_file_path", FILE_REPLACE_REGULAR, err, sizeof(err)), 0);
	assert_true(file_replace_same_target(&a, &b));
	file_replace_abort(&b);
	assert_int_equal(link(at("s"), at("hard")), 0);
	assert_int_equal(file_replace_open(&b, at("hard"), "mem_file_path", FILE_REPLACE_REGULAR, err, sizeof(err)), 0);
	assert_true(file_replace_same_target(&a, &b));
	file_replace_abort(&b);
	assert_int_equal(file_replace_open(&b, at("t"), "mem_file_path", FILE_REPLACE_REGULAR, err, sizeof(err)), 0);
	assert_false(file_replace_same_target(&a, &b));
	file_replace_abort(&b);
	file_replace_abort(&a);
	unlink(at("hard"));
	unlink(at("s"));

	assert_int_equal(mkfifo(at("fifo"), 0600), 0);
	assert_int_equal(file_replace_open(&a, at("fifo"), "snapshot_path", FILE_REPLACE_REGULAR, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(file_replace_open(&a, at("fifo"), "--json", 0, err, sizeof(err)), -ENXIO); /* no reader */
	unlink(at("fifo"));
	assert_int_equal(file_replace_open(&a, dir, "--json", 0, err, sizeof(err)), -EINVAL); /* a directory */
	assert_int_equal(file_replace_open(&a, at("nodir/x"), "--json", 0, err, sizeof(err)), -ENOENT);
	assert_int_equal(temps(), 0);
}

/* A memfile record for the file at `name` as a create would write it. */
static struct snap_memfile record(const char *name, const char *tmp)
{
	struct snap_memfile m = {0};
	struct stat st;

	assert_int_equal(stat(at(name), &st), 0);
	m.dev = st.st_dev;
	m.ino = st.st_ino;
	m.size = (uint64_t)st.st_size;
	m.ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	snprintf(m.tmp, sizeof(m.tmp), "%s", tmp);
	return m;
}

static void read_fd(int fd, char *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len - 1, 0);

	assert_true(n >= 0);
	buf[n] = 0;
}

/*
 * Each moment a create can stop at: before the state's rename (old state, old memory: the record is the
 * old one's), between the renames (new state, old memory, the temporary file beside: completed), after
 * both; and a copy elsewhere (accepted), the old memory without its temporary file (refused).
 */
static void test_memfile_open(void **state)
{
	struct snap_memfile old, neu;
	struct stat st;
	char buf[64];
	int fd;

	(void)state;
	put("m", "old memory");
	old = record("m", ".m.AAAAAA");
	/* older state files have no record: the file is taken as it is */
	fd = snap_memfile_open(NULL, at("m"), &st, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	/* stopped before the state's rename: the old state's record matches the old memory */
	usleep(20000);
	put(".m.BBBBBB", "new memory");
	neu = record(".m.BBBBBB", ".m.BBBBBB");
	fd = snap_memfile_open(&old, at("m"), &st, err, sizeof(err));
	assert_true(fd >= 0);
	read_fd(fd, buf, sizeof(buf));
	assert_string_equal(buf, "old memory");
	close(fd);
	/* stopped between the renames: the new state completes the create */
	fd = snap_memfile_open(&neu, at("m"), &st, err, sizeof(err));
	assert_true(fd >= 0);
	read_fd(fd, buf, sizeof(buf));
	assert_string_equal(buf, "new memory");
	close(fd);
	assert_string_equal(get("m"), "new memory");
	assert_null(get(".m.BBBBBB"));
	/* after both renames: the same file */
	fd = snap_memfile_open(&neu, at("m"), &st, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	/* a copy (another inode, changed after the snapshot): accepted */
	put("copy", "new memory");
	fd = snap_memfile_open(&neu, at("copy"), &st, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	/* the state pairs with memory older than its snapshot, its temporary file gone: refused */
	put("older", "old memory");
	usleep(20000);
	put(".n.CCCCCC", "newer");
	neu = record(".n.CCCCCC", ".n.CCCCCC");
	unlink(at(".n.CCCCCC"));
	assert_int_equal(snap_memfile_open(&neu, at("older"), &st, err, sizeof(err)), -ESTALE);
	assert_non_null(strstr(err, "did not finish"));
	/* missing memory, no temporary file: the open's own error */
	assert_int_equal(snap_memfile_open(&neu, at("none"), &st, err, sizeof(err)), -ENOENT);
	unlink(at("m"));
	unlink(at("copy"));
	unlink(at("older"));
}

/* The record round-trips through a state file section; a crafted name (a path, empty) is refused. */
static void test_memfile_section(void **state)
{
	struct snap_memfile m = {.dev = 1, .ino = 2, .size = 3, .ctime_ns = 4, .tmp = ".mem.XYZabc"}, got;
	const char *bad[] = {"a/b", "", "..", NULL};
	struct snap_writer *w;
	struct snap_reader *r;
	char path[64];
	bool present;
	int fd;

	(void)state;
	for (int k = -1; k < 3; k++) {
		w = snap_writer_new();
		assert_non_null(w);
		if (k >= 0)
			snprintf(m.tmp, sizeof(m.tmp), "%s", bad[k]);
		assert_int_equal(snap_memfile_save(w, &m), 0);
		snprintf(path, sizeof(path), "%s", at("s.state"));
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		assert_int_equal(snap_writer_finish(w, fd, true, err, sizeof(err)), 0);
		snap_writer_free(w);
		lseek(fd, 0, SEEK_SET);
		assert_int_equal(snap_reader_open(fd, &r, err, sizeof(err)), 0);
		close(fd);
		if (k < 0) {
			assert_int_equal(snap_memfile_load(r, &got, &present), 0);
			assert_true(present);
			assert_int_equal(got.ino, 2);
			assert_int_equal(got.ctime_ns, 4);
			assert_string_equal(got.tmp, ".mem.XYZabc");
		} else {
			assert_int_equal(snap_memfile_load(r, &got, &present), -EINVAL);
		}
		snap_reader_free(r);
	}
	unlink(at("s.state"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_append_and_truncate),
	    cmocka_unit_test(test_guard),
	    cmocka_unit_test(test_locks),
	    cmocka_unit_test(test_replace),
	    cmocka_unit_test(test_replace_symlink),
	    cmocka_unit_test(test_same_target_and_kinds),
	    cmocka_unit_test(test_memfile_open),
	    cmocka_unit_test(test_memfile_section),
	};

	return cmocka_run_group_tests_name("file", tests, setup, teardown);
}
