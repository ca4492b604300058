/*
 * test_memlayer.c - Diff snapshots' memory: dirty bitmaps to file runs (regions, word boundaries, the union of
 * KVM's and brisk's bits), layers merged onto a base (zeros in a layer win, holes keep the base, every refusal),
 * the memory file's record with its samples, and brisk's own dirty bitmap in guest RAM.
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
#include "brisk/mem.h"
#include "brisk/memlayer.h"
#include "brisk/snap_memfile.h"
#include "brisk/snapshot.h"
#include "snap_test.h"

#define PG MEMLAYER_PAGE

/* ---- dirty runs ------------------------------------------------------------------------------------------ */

struct got {
	unsigned n;
	uint64_t off[64], len[64];
	int fail_at; /* the callback returns -EIO on this call (1-based); 0: never */
};

static int record(uint64_t off, uint64_t len, void *arg)
{
	struct got *g = arg;

	assert_true(g->n < 64);
	g->off[g->n] = off;
	g->len[g->n] = len;
	g->n++;
	return g->fail_at && (int)g->n == g->fail_at ? -EIO : 0;
}

static void set(uint64_t *bm, uint64_t bit)
{
	bm[bit / 64] |= 1ull << (bit % 64);
}

static void test_runs_kvm_only(void **state)
{
	uint64_t kvm[2] = {0};
	struct memlayer_region r = {.off = 0, .pages = 100, .kvm = kvm};
	struct got g = {0};
	uint64_t pages = 0;

	(void)state;
	set(kvm, 0), set(kvm, 1), set(kvm, 2), set(kvm, 5), set(kvm, 63), set(kvm, 64), set(kvm, 99);
	kvm[1] |= 1ull << 40; /* page 104: past the region's 100 pages, must be ignored */
	assert_int_equal(memlayer_dirty_runs(&r, 1, NULL, 0, record, &g, &pages), 0);
	assert_int_equal(pages, 7);
	assert_int_equal(g.n, 4);
	assert_int_equal(g.off[0], 0), assert_int_equal(g.len[0], 3 * PG);
	assert_int_equal(g.off[1], 5 * PG), assert_int_equal(g.len[1], PG);
	assert_int_equal(g.off[2], 63 * PG), assert_int_equal(g.len[2], 2 * PG); /* across a word of the bitmap */
	assert_int_equal(g.off[3], 99 * PG), assert_int_equal(g.len[3], PG);	 /* the last page */
}

/* Two regions; brisk's bitmap indexed by file page, the second region starting mid-word (page 100). */
static void test_runs_union_and_regions(void **state)
{
	uint64_t kvm0[2] = {0}, kvm1[2] = {0}, vmm[3] = {0};
	struct memlayer_region r[2] = {{.off = 0, .pages = 100, .kvm = kvm0},
				       {.off = 100 * PG, .pages = 70, .kvm = kvm1}};
	struct got g = {0};
	uint64_t pages = 0;

	(void)state;
	set(vmm, 10);  /* region 0 page 10 */
	set(kvm0, 11); /* adjacent: one run 10..11 */
	set(kvm0, 99); /* region 0's last page ... */
	set(kvm1, 0);  /* ... and region 1's first: one run across the regions (they touch in the file) */
	set(vmm, 127); /* file page 127 = region 1 page 27: a word boundary of vmm at file page 128 */
	set(vmm, 128); /* region 1 page 28 */
	set(kvm1, 69); /* region 1's last page */
	set(vmm, 170); /* past both regions: ignored */
	assert_int_equal(memlayer_dirty_runs(r, 2, vmm, 3, record, &g, &pages), 0);
	assert_int_equal(g.n, 4);
	assert_int_equal(g.off[0], 10 * PG), assert_int_equal(g.len[0], 2 * PG);
	assert_int_equal(g.off[1], 99 * PG), assert_int_equal(g.len[1], 2 * PG);
	assert_int_equal(g.off[2], 127 * PG), assert_int_equal(g.len[2], 2 * PG);
	assert_int_equal(g.off[3], 169 * PG), assert_int_equal(g.len[3], PG);
	assert_int_equal(pages, 7);
}

/* Regions apart in the file (a gap: not contiguous) never merge into one run; the vmm bitmap may be short. */
static void test_runs_gap_short_bitmap_and_errors(void **state)
{
	uint64_t kvm0[1] = {0}, kvm1[1] = {0}, vmm[1] = {0};
	struct memlayer_region r[2] = {{.off = 0, .pages = 8, .kvm = kvm0}, {.off = 16 * PG, .pages = 8, .kvm = kvm1}};
	struct got g = {0};

	(void)state;
	set(kvm0, 7), set(kvm1, 0), set(vmm, 3);
	assert_int_equal(memlayer_dirty_runs(r, 2, vmm, 1, record, &g, NULL), 0);
	assert_int_equal(g.n, 3);
	assert_int_equal(g.off[0], 3 * PG);
	assert_int_equal(g.off[1], 7 * PG), assert_int_equal(g.len[1], PG);
	assert_int_equal(g.off[2], 16 * PG), assert_int_equal(g.len[2], PG);
	/* vmm_words 0: brisk's bits read as none; a region without a KVM log has only brisk's bits */
	memset(&g, 0, sizeof(g));
	r[0].kvm = r[1].kvm = NULL;
	assert_int_equal(memlayer_dirty_runs(r, 2, vmm, 0, record, &g, NULL), 0);
	assert_int_equal(g.n, 0);
	/* the callback's error stops the walk and is returned */
	memset(&g, 0, sizeof(g));
	r[0].kvm = kvm0, r[1].kvm = kvm1;
	g.fail_at = 1;
	assert_int_equal(memlayer_dirty_runs(r, 2, vmm, 1, record, &g, NULL), -EIO);
	assert_int_equal(g.n, 1);
}

/* ---- merging --------------------------------------------------------------------------------------------- */

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/brisk-memlayer-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *path(const char *name)
{
	static char p[4][128];
	static unsigned i;

	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

/* A file of `pages` pages: page k filled with byte fill[k] (0 and not `data[k]`: a hole). */
static void make_file(const char *p, unsigned pages, const uint8_t *fill, const bool *data)
{
	uint8_t page[PG];
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)pages * PG), 0);
	for (unsigned k = 0; k < pages; k++) {
		if (!data[k])
			continue;
		memset(page, fill[k], sizeof(page));
		assert_int_equal(pwrite(fd, page, PG, (off_t)k * PG), PG);
	}
	close(fd);
}

/* Page k of file p: every byte `want`. */
static void expect_page(const char *p, unsigned k, uint8_t want)
{
	uint8_t page[PG];
	int fd = open(p, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, page, PG, (off_t)k * PG), PG);
	for (unsigned i = 0; i < PG; i++)
		if (page[i] != want)
			fail_msg("page %u byte %u: 0x%02x, expected 0x%02x", k, i, page[i], want);
	close(fd);
}

static void test_rebase_layer_onto_base(void **state)
{
	uint8_t bfill[16], lfill[16] = {0};
	bool bdata[16], ldata[16] = {0};
	char err[512];
	uint64_t copied = 0;

	(void)state;
	for (unsigned k = 0; k < 16; k++)
		bfill[k] = (uint8_t)(0xa0 + k), bdata[k] = k != 14; /* page 14 a hole of the base */
	lfill[3] = 0xb3, ldata[3] = true;
	lfill[9] = 0xb9, ldata[9] = true;
	ldata[12] = true; /* a dirty page that became zero: written as zeros, must win over the base's 0xac */
	lfill[14] = 0xbe, ldata[14] = true;
	make_file(path("base"), 16, bfill, bdata);
	make_file(path("layer"), 16, lfill, ldata);
	assert_int_equal(memlayer_rebase(path("base"), path("layer"), &copied, err, sizeof(err)), 0);
	assert_int_equal(copied, 4 * PG);
	for (unsigned k = 0; k < 16; k++) {
		uint8_t want = ldata[k] ? lfill[k] : bdata[k] ? bfill[k] : 0;

		expect_page(path("base"), k, want);
	}
	/* run again (a merge stopped half way is simply repeated): the same bytes */
	assert_int_equal(memlayer_rebase(path("base"), path("layer"), NULL, err, sizeof(err)), 0);
	expect_page(path("base"), 12, 0);
	expect_page(path("base"), 13, 0xad);
	expect_page(path("layer"), 13, 0); /* the layer is only read */
}

static void test_rebase_refusals(void **state)
{
	uint8_t fill[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	bool data[8] = {true, true, true, true, true, true, true, true};
	char err[512];
	struct stat st;
	int fd;

	(void)state;
	make_file(path("b8"), 8, fill, data);
	make_file(path("l4"), 4, fill, data);
	make_file(path("l8"), 8, fill, data);
	/* a chain of the wrong size: another guest's layer */
	assert_int_equal(memlayer_rebase(path("b8"), path("l4"), NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "has 16384 bytes"));
	assert_non_null(strstr(err, "the same size"));
	/* the layer and the base one file, by name or through a hard link */
	assert_int_equal(memlayer_rebase(path("b8"), path("b8"), NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "the same file"));
	assert_int_equal(link(path("b8"), path("b8-link")), 0);
	assert_int_equal(memlayer_rebase(path("b8"), path("b8-link"), NULL, err, sizeof(err)), -EINVAL);
	/* missing files, a directory */
	assert_int_equal(memlayer_rebase(path("nope"), path("l8"), NULL, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "--memory-path"));
	assert_int_equal(memlayer_rebase(path("b8"), path("nope"), NULL, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "--diff-path"));
	assert_int_equal(memlayer_rebase(path("b8"), dir, NULL, err, sizeof(err)), -EINVAL);
	/* a base a running VM maps (its lock, file.h): refused, nothing written */
	fd = open(path("b8"), O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(file_lock_mapped(fd), 0);
	fill[0] = 0x55;
	make_file(path("l8"), 8, fill, data);
	assert_int_equal(memlayer_rebase(path("b8"), path("l8"), NULL, err, sizeof(err)), -EBUSY);
	assert_non_null(strstr(err, "mapped by a running VM"));
	expect_page(path("b8"), 0, 1);
	close(fd);
	assert_int_equal(memlayer_rebase(path("b8"), path("l8"), NULL, err, sizeof(err)), 0);
	expect_page(path("b8"), 0, 0x55);
	assert_int_equal(stat(path("b8"), &st), 0);
	assert_int_equal(st.st_size, 8 * PG);
}

/* memlayer_apply with a layer that is all hole copies nothing; into an empty file it builds the layer's bytes. */
static void test_apply_holes(void **state)
{
	uint8_t fill[4] = {0, 0x11, 0, 0};
	bool none[4] = {0}, one[4] = {false, true, false, false};
	char err[256];
	uint64_t copied = 99;
	int dst, src;

	(void)state;
	make_file(path("hole"), 4, fill, none);
	make_file(path("one"), 4, fill, one);
	make_file(path("dst"), 4, fill, none);
	dst = open(path("dst"), O_WRONLY);
	src = open(path("hole"), O_RDONLY);
	assert_int_equal(memlayer_apply(dst, src, 4 * PG, &copied, err, sizeof(err)), 0);
	assert_int_equal(copied, 0);
	close(src);
	src = open(path("one"), O_RDONLY);
	assert_int_equal(memlayer_apply(dst, src, 4 * PG, &copied, err, sizeof(err)), 0);
	assert_int_equal(copied, PG);
	close(src);
	close(dst);
	expect_page(path("dst"), 0, 0);
	expect_page(path("dst"), 1, 0x11);
	expect_page(path("dst"), 3, 0);
}

/* ---- the memory file's record ------------------------------------------------------------------------------ */

static struct snap_reader *round_trip(const struct snap_memfile *m)
{
	struct snap_writer *w = snap_writer_new();

	assert_non_null(w);
	assert_int_equal(snap_memfile_save(w, m), 0);
	return snap_test_reader(w);
}

static void test_memfile_record(void **state)
{
	struct snap_memfile m = {.dev = 1, .ino = 2, .size = 16 * PG, .ctime_ns = 3, .tmp = ".mem.abcdef"}, got;
	struct snap_reader *r;
	bool present;

	(void)state;
	/* Full: version 1, as before Diffs existed */
	r = round_trip(&m);
	assert_int_equal(snap_section_version(r, SNAP_TAG_MEMFILE, 0), 1);
	assert_int_equal(snap_memfile_load(r, &got, &present), 0);
	assert_true(present);
	assert_int_equal(got.kind, SNAP_MEM_FULL);
	assert_int_equal(got.nr_samples, 0);
	snap_reader_free(r);
	/* Diff: version 2 with its kind and samples */
	m.kind = SNAP_MEM_DIFF;
	m.nr_samples = 2;
	m.sample[0] = (struct snap_mem_sample){0, 0x1234};
	m.sample[1] = (struct snap_mem_sample){15 * PG, 0x5678}; /* the last page */
	r = round_trip(&m);
	assert_int_equal(snap_section_version(r, SNAP_TAG_MEMFILE, 0), 2);
	assert_int_equal(snap_memfile_load(r, &got, &present), 0);
	assert_int_equal(got.kind, SNAP_MEM_DIFF);
	assert_int_equal(got.nr_samples, 2);
	assert_int_equal(got.sample[1].off, 15 * PG);
	assert_int_equal(got.sample[1].crc, 0x5678);
	snap_reader_free(r);
	/* hostile records: each refused as malformed */
	m.sample[1].off = 16 * PG; /* past the file */
	r = round_trip(&m);
	assert_int_equal(snap_memfile_load(r, &got, &present), -EINVAL);
	snap_reader_free(r);
	m.sample[1].off = 100; /* not a page */
	r = round_trip(&m);
	assert_int_equal(snap_memfile_load(r, &got, &present), -EINVAL);
	snap_reader_free(r);
	m.sample[1].off = 0;
	m.kind = (enum snap_mem_kind)3; /* no such kind */
	r = round_trip(&m);
	assert_int_equal(snap_memfile_load(r, &got, &present), -EINVAL);
	snap_reader_free(r);
}

/* A record saying more samples than there may be: the count is checked before any is read. */
static void test_memfile_too_many_samples(void **state)
{
	struct snap_writer *w = snap_writer_new();
	struct snap_reader *r;
	struct snap_memfile got;
	bool present;

	(void)state;
	assert_int_equal(snap_section_begin(w, SNAP_TAG_MEMFILE, 0, "memfile"), 0);
	assert_int_equal(snap_set_version(w, 2), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(snap_put_u64(w, 4096), 0); /* dev, ino, size, ctime */
	assert_int_equal(snap_put_u32(w, 3), 0);
	assert_int_equal(snap_put(w, ".m.", 3), 0);
	assert_int_equal(snap_put_u8(w, SNAP_MEM_DIFF), 0);
	assert_int_equal(snap_put_u32(w, SNAP_MEMFILE_SAMPLES + 1), 0);
	assert_int_equal(snap_section_end(w), 0);
	r = snap_test_reader(w);
	assert_int_equal(snap_memfile_load(r, &got, &present), -EINVAL);
	snap_reader_free(r);
}

static void test_check_samples(void **state)
{
	uint8_t fill[4] = {0x11, 0x22, 0, 0x44}, page[PG];
	bool data[4] = {true, true, false, true};
	struct snap_memfile m = {.size = 4 * PG, .kind = SNAP_MEM_DIFF, .nr_samples = 2};
	char err[1024];
	int fd;

	(void)state;
	memset(page, 0x22, sizeof(page));
	m.sample[0] = (struct snap_mem_sample){PG, snap_crc64(0, page, PG)};
	memset(page, 0x44, sizeof(page));
	m.sample[1] = (struct snap_mem_sample){3 * PG, snap_crc64(0, page, PG)};
	make_file(path("merged"), 4, fill, data);
	fd = open(path("merged"), O_RDONLY);
	assert_int_equal(snap_memfile_check_samples(&m, fd, "M", err, sizeof(err)), 0);
	close(fd);
	/* the layer alone: the sampled pages are holes */
	data[1] = data[3] = false;
	make_file(path("layer-alone"), 4, fill, data);
	fd = open(path("layer-alone"), O_RDONLY);
	assert_int_equal(snap_memfile_check_samples(&m, fd, "L", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "without its base"));
	assert_non_null(strstr(err, "0x1000"));
	close(fd);
	/* another base: different bytes */
	fill[1] = 0x23, data[1] = data[3] = true;
	make_file(path("other"), 4, fill, data);
	fd = open(path("other"), O_RDONLY);
	assert_int_equal(snap_memfile_check_samples(&m, fd, "O", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "does not hold this Diff snapshot's memory"));
	close(fd);
}

/* ---- brisk's own dirty bitmap ------------------------------------------------------------------------------ */

static void test_gmem_dirty(void **state)
{
	struct gmem m;
	uint64_t bits[4], v = 1;

	(void)state;
	assert_int_equal(gmem_init(&m, 1 << 20, 0), 0); /* 256 pages: 4 words */
	/* off: nothing recorded, nothing to take */
	assert_int_equal(gmem_write(&m, 0, &v, sizeof(v)), 0);
	assert_int_equal(gmem_dirty_take(&m, bits), -EINVAL);
	assert_int_equal(gmem_dirty_enable(&m), 0);
	assert_int_equal(gmem_dirty_enable(&m), 0); /* idempotent */
	assert_int_equal(m.dirty_words, 4);
	assert_int_equal(gmem_write(&m, 2 * PG - 4, &v, sizeof(v)), 0); /* straddles pages 1 and 2 */
	gmem_mark_dirty(&m, 255 * PG, 1);				/* the last page */
	gmem_mark_dirty(&m, 256 * PG, 1);				/* past RAM: ignored */
	gmem_mark_dirty(&m, UINT64_MAX, 2);				/* wraps: ignored */
	gmem_mark_dirty_host(&m, m.base + 64 * PG, PG + 1);		/* pages 64, 65 */
	gmem_mark_dirty_host(&m, m.base - 1, 2);			/* before RAM: ignored */
	gmem_mark_dirty_host(&m, m.base + 255 * PG, 2 * PG);		/* runs past the end: ignored */
	gmem_mark_dirty(&m, 7 * PG, 0);					/* length 0: nothing */
	assert_int_equal(gmem_dirty_take(&m, bits), 0);
	assert_int_equal(bits[0], 0x6);
	assert_int_equal(bits[1], 0x3);
	assert_int_equal(bits[2], 0);
	assert_int_equal(bits[3], 1ull << 63);
	/* taken: the bitmap is clear; given back: the same bits again, or'ed with any new one */
	gmem_mark_dirty(&m, 3 * PG, 8);
	gmem_dirty_restore(&m, bits);
	assert_int_equal(gmem_dirty_take(&m, bits), 0);
	assert_int_equal(bits[0], 0xe);
	assert_int_equal(gmem_dirty_take(&m, bits), 0);
	assert_int_equal(bits[0] | bits[1] | bits[2] | bits[3], 0);
	/* a balloon's discard zeroes pages: they are dirty for a Diff */
	assert_int_equal(gmem_discard(&m, 8 * PG, 2 * PG), 0);
	assert_int_equal(gmem_dirty_take(&m, bits), 0);
	assert_int_equal(bits[0], 0x300);
	gmem_destroy(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_runs_kvm_only),
	    cmocka_unit_test(test_runs_union_and_regions),
	    cmocka_unit_test(test_runs_gap_short_bitmap_and_errors),
	    cmocka_unit_test(test_rebase_layer_onto_base),
	    cmocka_unit_test(test_rebase_refusals),
	    cmocka_unit_test(test_apply_holes),
	    cmocka_unit_test(test_memfile_record),
	    cmocka_unit_test(test_memfile_too_many_samples),
	    cmocka_unit_test(test_check_samples),
	    cmocka_unit_test(test_gmem_dirty),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
