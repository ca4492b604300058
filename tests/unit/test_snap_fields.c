/*
 * test_snap_fields.c - the field tables (snap_fields.h) and per-section versions (snapshot.h): a record
 * encodes and decodes as its table says, bounds refuse what a guest cannot produce, a field added in a
 * later version is absent from an older section, a version nobody reads is refused naming the section;
 * and the version-1 snapshot committed in tests/fixtures/snapshot-v1/ decodes and re-encodes, section by
 * section and as a whole file, to the same bytes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/bus.h"
#include "brisk/config.h"
#include "brisk/devices.h"
#include "brisk/devmgr.h"
#include "brisk/log.h"
#include "brisk/mem.h"
#include "brisk/snap_config.h"
#include "brisk/snap_fields.h"
#include "brisk/snap_memfile.h"
#include "brisk/snapshot.h"
#include "fake_vm.h"
#include "snap_test.h"

#define FIXTURE "tests/fixtures/snapshot-v1/counter.state"

/* ---- helpers ----------------------------------------------------------------------------------------- */

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f)
		fail_msg("%s: not found (run the test from the repository root)", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	buf = malloc((size_t)n);
	assert_non_null(buf);
	fseek(f, 0, SEEK_SET);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- one record, every kind of field ------------------------------------------------------------------ */

struct rec {
	uint8_t a;
	bool f;
	uint16_t b;
	uint32_t c;
	uint64_t d;
	int lvl;
	uint8_t bytes[4];
	uint16_t added; /* since version 2 */
};

static const struct snap_field rec_fields[] = {
    SNAP_UINT_MASK(struct rec, a, 1, 0x0f),
    SNAP_FLAG(struct rec, f),
    SNAP_UINT(struct rec, b, 2),
    SNAP_UINT_MAX(struct rec, c, 4, 1000),
    SNAP_UINT(struct rec, d, 8),
    SNAP_UINT_MAX(struct rec, lvl, 1, 1),
    SNAP_BYTES(struct rec, bytes),
    SNAP_FIELD(struct rec, added, 2, UINT64_MAX, UINT64_MAX, 2),
};
static const struct snap_record rec_record = SNAP_RECORD("test-rec", rec_fields);

static const char *rec_check(const void *obj)
{
	const struct rec *r = obj;

	return r->f && !r->a ? "f without a" : NULL;
}

static const struct snap_layout rec_layout = {.version = 2, .record = &rec_record, .check = rec_check};

static const struct rec sample = {
    .a = 9, .f = true, .b = 0xbeef, .c = 999, .d = 0x0102030405060708ull, .lvl = 1, .bytes = {1, 2, 3, 4}, .added = 7};

/* A file with one device section holding `body`, at `version` (1: not set). */
static struct snap_reader *one_section(const void *body, size_t len, uint32_t version, const char *name)
{
	struct snap_writer *w = snap_writer_new();
	struct snap_reader *r;
	char err[256];
	size_t flen;
	uint8_t *file;

	assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, 0, name), 0);
	if (version != 1)
		assert_int_equal(snap_set_version(w, version), 0);
	assert_int_equal(snap_put(w, body, len), 0);
	assert_int_equal(snap_section_end(w), 0);
	file = snap_test_bytes(w, &flen);
	assert_int_equal(snap_reader_open_mem(file, flen, &r, err, sizeof(err)), 0);
	free(file);
	return r;
}

/* The section body a layout's save writes for obj. */
static uint8_t *saved_body(const struct snap_layout *l, const void *obj, size_t *len, uint32_t *version)
{
	struct snap_writer *w = snap_writer_new();
	struct snap_reader *r, *s;
	char err[256];
	size_t flen;
	uint8_t *file, *body;

	assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, 0, "x"), 0);
	assert_int_equal(snap_layout_save(w, l, obj), 0);
	assert_int_equal(snap_section_end(w), 0);
	file = snap_test_bytes(w, &flen);
	assert_int_equal(snap_reader_open_mem(file, flen, &r, err, sizeof(err)), 0);
	assert_int_equal(snap_section(r, SNAP_TAG_DEVICE, 0, "x", &s), 0);
	*len = snap_remaining(s);
	*version = snap_version(s);
	body = malloc(*len ? *len : 1);
	assert_int_equal(snap_get(s, body, *len), 0);
	snap_reader_free(r);
	free(file);
	return body;
}

/* Saved at version 2: every field, little-endian, in table order; decoded back to the same values. */
static void test_record_round_trip(void **state)
{
	const uint8_t want[] = {9, 1, 0xef, 0xbe, 0xe7, 3, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1, 1, 1, 2, 3, 4, 7, 0};
	struct snap_reader *r, *s;
	struct rec back = {0};
	uint32_t version;
	size_t len;
	char why[160];
	uint8_t *body = saved_body(&rec_layout, &sample, &len, &version);

	(void)state;
	assert_int_equal(version, 2);
	assert_int_equal(len, sizeof(want));
	assert_memory_equal(body, want, sizeof(want));
	r = one_section(body, len, 2, "x");
	assert_int_equal(snap_section(r, SNAP_TAG_DEVICE, 0, NULL, &s), 0);
	assert_int_equal(snap_layout_load(s, &rec_layout, &back, why, sizeof(why)), 0);
	assert_int_equal(snap_remaining(s), 0);
	assert_memory_equal(&back, &sample, sizeof(back));
	snap_reader_free(r);
	free(body);
}

/* A version-1 section has no `added`: it decodes, leaving the field as the caller set it. */
static void test_record_older_version(void **state)
{
	const uint8_t v1[] = {9, 1, 0xef, 0xbe, 0xe7, 3, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1, 1, 1, 2, 3, 4};
	struct snap_reader *r = one_section(v1, sizeof(v1), 1, "x"), *s;
	struct rec back = {.added = 0x5555};
	char why[160];

	(void)state;
	assert_int_equal(snap_section(r, SNAP_TAG_DEVICE, 0, NULL, &s), 0);
	assert_int_equal(snap_version(s), 1);
	assert_int_equal(snap_layout_load(s, &rec_layout, &back, why, sizeof(why)), 0);
	assert_int_equal(snap_remaining(s), 0);
	assert_int_equal(back.added, 0x5555);
	assert_int_equal(back.d, sample.d);
	snap_reader_free(r);
}

/* A version newer than the layout's is refused before any field is read, naming part and version. */
static void test_version_refused(void **state)
{
	const uint8_t body[32] = {0};
	struct snap_reader *r = one_section(body, sizeof(body), 3, "x"), *s;
	struct rec back = {0};
	char why[160];

	(void)state;
	assert_int_equal(snap_section(r, SNAP_TAG_DEVICE, 0, NULL, &s), 0);
	assert_int_equal(snap_layout_load(s, &rec_layout, &back, why, sizeof(why)), -EPROTONOSUPPORT);
	assert_string_equal(why, "section test-rec is version 3; this brisk reads versions 1 to 2");
	assert_int_equal(snap_remaining(s), sizeof(body));
	snap_reader_free(r);
}

/* Decodes `body` (version 2) into a fresh record: the return value and the reason. */
static int load_body(const uint8_t *body, size_t len, char *why, size_t whylen)
{
	struct snap_reader *r = one_section(body, len, 2, "x"), *s;
	struct rec back = {0};
	int ret;

	assert_int_equal(snap_section(r, SNAP_TAG_DEVICE, 0, NULL, &s), 0);
	ret = snap_layout_load(s, &rec_layout, &back, why, whylen);
	snap_reader_free(r);
	return ret;
}

/* Every bound: mask, flag, max, what the memory holds (lvl is an int read from one byte), the check, length. */
static void test_bounds(void **state)
{
	uint8_t good[] = {9, 1, 0xef, 0xbe, 0xe7, 3, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1, 1, 1, 2, 3, 4, 7, 0};
	static const struct {
		size_t at;
		uint8_t v;
		const char *why;
	} bad[] = {
	    {0, 0x19, "field a 0x19 has bits outside 0xf"},
	    {1, 2, "field f 2, above 1"},
	    {5, 4, "field c 1255, above 1000"},
	    {16, 2, "field lvl 2, above 1"},
	    {0, 0, "f without a"},
	};
	char why[160];

	(void)state;
	assert_int_equal(load_body(good, sizeof(good), why, sizeof(why)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t b[sizeof(good)];

		memcpy(b, good, sizeof(b));
		b[bad[i].at] = bad[i].v;
		assert_int_equal(load_body(b, sizeof(b), why, sizeof(why)), -EINVAL);
		assert_string_equal(why, bad[i].why);
	}
	for (size_t n = 0; n < sizeof(good); n++) {
		assert_int_equal(load_body(good, n, why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "truncated at field "));
	}
}

/* A field whose file width exceeds its memory: a value that does not fit is refused, not truncated. */
struct narrow {
	uint8_t n;
};
static const struct snap_field narrow_fields[] = {SNAP_UINT(struct narrow, n, 2)};
static const struct snap_record narrow_record = SNAP_RECORD("narrow", narrow_fields);

static void test_memory_width(void **state)
{
	const uint8_t body[] = {0x2c, 0x01}; /* 300 */
	struct snap_reader *r = one_section(body, sizeof(body), 1, "x"), *s;
	struct narrow n = {0};
	char why[160];

	(void)state;
	assert_int_equal(snap_section(r, SNAP_TAG_DEVICE, 0, NULL, &s), 0);
	assert_int_equal(snap_record_get(s, &narrow_record, &n, 1, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "field n 300, above 255");
	snap_reader_free(r);
}

/* snap_record_copy moves exactly the table's fields. */
static void test_record_copy(void **state)
{
	struct {
		struct rec r;
		uint32_t untouched;
	} dst;

	(void)state;
	memset(&dst, 0xaa, sizeof(dst));
	snap_record_copy(&rec_record, &dst.r, &sample);
	assert_int_equal(dst.r.a, sample.a);
	assert_int_equal(dst.r.d, sample.d);
	assert_int_equal(dst.r.lvl, sample.lvl);
	assert_memory_equal(dst.r.bytes, sample.bytes, sizeof(sample.bytes));
	assert_int_equal(dst.r.added, sample.added);
	assert_int_equal(dst.untouched, 0xaaaaaaaau);
}

/* ---- section versions in the file ---------------------------------------------------------------------- */

/* Two sections, the second at `v2` (1: not set); the file's bytes. */
static uint8_t *two_sections(uint32_t v2, size_t *len)
{
	struct snap_writer *w = snap_writer_new();
	uint8_t *file;

	assert_int_equal(snap_section_begin(w, SNAP_TAG_CONFIG, 0, "config"), 0);
	assert_int_equal(snap_put_u32(w, 0x11223344), 0);
	assert_int_equal(snap_section_end(w), 0);
	assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, 3, "dev"), 0);
	if (v2 != 1)
		assert_int_equal(snap_set_version(w, v2), 0);
	assert_int_equal(snap_put_u8(w, 0x55), 0);
	assert_int_equal(snap_section_end(w), 0);
	file = snap_test_bytes(w, len);
	return file;
}

/*
 * Every section at version 1: no flag, no version words (the version-1 layout, byte for byte, whether or
 * not snap_set_version(1) was called). One section at 2: the flag, a version word in every frame.
 */
static void test_file_versions(void **state)
{
	struct snap_writer *w = snap_writer_new();
	struct snap_reader *r, *s;
	size_t len1, len2, len1b;
	char err[256];
	uint8_t *f1 = two_sections(1, &len1), *f2 = two_sections(2, &len2), *f1b;

	(void)state;
	assert_int_equal(snap_section_begin(w, SNAP_TAG_CONFIG, 0, "config"), 0);
	assert_int_equal(snap_set_version(w, 1), 0);
	assert_int_equal(snap_put_u32(w, 0x11223344), 0);
	assert_int_equal(snap_section_end(w), 0);
	assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, 3, "dev"), 0);
	assert_int_equal(snap_set_version(w, 0), -EINVAL);
	snap_writer_free(w);
	w = snap_writer_new();
	assert_int_equal(snap_set_version(w, 2), -EINVAL); /* no open section */
	snap_writer_free(w);

	assert_int_equal(le32(f1 + 12), 0);
	assert_int_equal(le32(f2 + 12), SNAP_FLAG_SECTION_VERSIONS);
	assert_int_equal(len2, len1 + 8);
	/* The first frame: tag, index, version 1, name length. */
	assert_int_equal(le32(f2 + 24), SNAP_TAG_CONFIG);
	assert_int_equal(le32(f2 + 32), 1);
	assert_int_equal(le32(f2 + 36), 6);
	assert_int_equal(snap_reader_open_mem(f2, len2, &r, err, sizeof(err)), 0);
	assert_int_equal(snap_section_version(r, SNAP_TAG_CONFIG, 0), 1);
	assert_int_equal(snap_section_version(r, SNAP_TAG_DEVICE, 3), 2);
	assert_int_equal(snap_section_version(r, SNAP_TAG_DEVICE, 4), 0);
	assert_int_equal(snap_section(r, SNAP_TAG_DEVICE, 3, "dev", &s), 0);
	assert_int_equal(snap_version(s), 2);
	assert_int_equal(snap_remaining(s), 1);
	snap_reader_free(r);
	assert_int_equal(snap_reader_open_mem(f1, len1, &r, err, sizeof(err)), 0);
	assert_int_equal(snap_section_version(r, SNAP_TAG_DEVICE, 3), 1);
	snap_reader_free(r);

	/* snap_set_version(1) changes nothing. */
	w = snap_writer_new();
	assert_int_equal(snap_section_begin(w, SNAP_TAG_CONFIG, 0, "config"), 0);
	assert_int_equal(snap_set_version(w, 1), 0);
	assert_int_equal(snap_put_u32(w, 0x11223344), 0);
	assert_int_equal(snap_section_end(w), 0);
	assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, 3, "dev"), 0);
	assert_int_equal(snap_set_version(w, 1), 0);
	assert_int_equal(snap_put_u8(w, 0x55), 0);
	assert_int_equal(snap_section_end(w), 0);
	f1b = snap_test_bytes(w, &len1b);
	assert_int_equal(len1b, len1);
	assert_memory_equal(f1b, f1, len1);
	free(f1b);
	free(f1);
	free(f2);
}

/* Rewrites the CRC-64 trailer of a file edited in place. */
static void fix_crc(uint8_t *f, size_t len)
{
	uint64_t crc = snap_crc64(0, f, len - 8);

	for (unsigned i = 0; i < 8; i++)
		f[len - 8 + i] = (uint8_t)(crc >> (8 * i));
}

/* A version word of 0, and a versioned frame cut short, are refused by the reader. */
static void test_file_version_framing(void **state)
{
	struct snap_reader *r;
	size_t len;
	char err[256];
	uint8_t *f = two_sections(2, &len);

	(void)state;
	f[32] = 0; /* the first section's version */
	fix_crc(f, len);
	assert_int_equal(snap_reader_open_mem(f, len, &r, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "version 0"));
	free(f);
	f = two_sections(2, &len);
	f[12] = 3; /* an unknown flag beside the known one */
	fix_crc(f, len);
	assert_int_equal(snap_reader_open_mem(f, len, &r, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "flags 0x3"));
	free(f);
	/* The unversioned file read as versioned: its frames do not parse. */
	f = two_sections(1, &len);
	f[12] = 1;
	fix_crc(f, len);
	assert_int_equal(snap_reader_open_mem(f, len, &r, err, sizeof(err)), -EINVAL);
	free(f);
}

/* ---- the devices of the fixture's VM, as vm_build.c creates them ---------------------------------------- */

struct vmfx {
	struct gmem mem;
	struct devctx ctx;
	struct bus bus;
	struct devmgr mgr;
};

static void make_devices(struct vmfx *v)
{
	const struct serial_opts o = {.out_fd = -1, .in_fd = -1};
	const struct devctx *ctx = &v->ctx;

	memset(v, 0, sizeof(*v));
	assert_int_equal(gmem_init(&v->mem, 16 << 20, 0), 0);
	v->ctx = (struct devctx){.mem = &v->mem, .ops = &fake_ops};
	loop = evloop_create();
	assert_non_null(loop);
	bus_init(&v->bus);
	assert_int_equal(serial8250_create(ctx, &v->bus, &o, NULL), 0);
	assert_int_equal(i8042_create(ctx, &v->bus), 0);
	assert_int_equal(debugexit_create(ctx, &v->bus), 0);
	assert_int_equal(bootmark_create(&v->bus, NULL), 0);
	assert_int_equal(cmos_create(&v->bus), 0);
	assert_int_equal(acpi_pm_create(ctx, &v->bus), 0);
	assert_int_equal(virtio_rng_create(ctx, &v->bus, devmgr_alloc(&v->mgr, "virtio-rng"), 1 << 20), 0);
}

static void free_devices(struct vmfx *v)
{
	bus_destroy(&v->bus);
	evloop_destroy(loop);
	loop = NULL;
	gmem_destroy(&v->mem);
}

/* A device's section at version 2, which no device reads yet: refused, the error naming device and version. */
static void test_device_version_refused(void **state)
{
	static struct vmfx v;
	const uint8_t body[28] = {0};
	struct snap_writer *w = snap_writer_new();
	struct snap_reader *r;
	const char *failed = NULL;
	const char *names[] = {"serial8250", "i8042", "debug-exit", "bootmark", "cmos-rtc", "acpi-pm", "virtio-mmio"};
	char err[256];
	uint8_t *file;
	size_t len;

	(void)state;
	make_devices(&v);
	for (unsigned i = 0; i < 7; i++) {
		assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, i, names[i]), 0);
		if (i == 0)
			assert_int_equal(snap_set_version(w, 2), 0);
		assert_int_equal(snap_put(w, body, i == 0 ? sizeof(body) : 0), 0);
		assert_int_equal(snap_section_end(w), 0);
	}
	file = snap_test_bytes(w, &len);
	assert_int_equal(snap_reader_open_mem(file, len, &r, err, sizeof(err)), 0);
	assert_int_equal(bus_restore(&v.bus, r, &failed, err, sizeof(err)), -EPROTONOSUPPORT);
	assert_string_equal(failed, "serial8250");
	assert_string_equal(err, "device 0 (serial8250): its section is version 2, which this brisk does not read");
	snap_reader_free(r);
	free(file);
	free_devices(&v);
}

/* ---- the committed version-1 snapshot ------------------------------------------------------------------ */

/* Section (tag, index) of r into w unchanged: its name, version and body. */
static void copy_raw(struct snap_reader *r, struct snap_writer *w, enum snap_tag tag, uint32_t index)
{
	const char *name = snap_section_name(r, tag, index);
	struct snap_reader *s;
	uint8_t *body;
	size_t n;

	assert_non_null(name);
	assert_int_equal(snap_section(r, tag, index, name, &s), 0);
	n = snap_remaining(s);
	body = malloc(n ? n : 1);
	assert_int_equal(snap_get(s, body, n), 0);
	assert_int_equal(snap_section_begin(w, tag, index, name), 0);
	assert_int_equal(snap_set_version(w, snap_version(s)), 0);
	assert_int_equal(snap_put(w, body, n), 0);
	assert_int_equal(snap_section_end(w), 0);
	free(body);
}

/* The configuration, decoded (and validated) then encoded. */
static void reencode_config(struct snap_reader *r, struct snap_writer *w)
{
	static struct vm_config cfg;
	static struct snap_config_strings strs;
	char err[256];

	config_defaults(&cfg);
	assert_int_equal(snap_config_load(r, &cfg, &strs, err, sizeof(err)), 0);
	assert_int_equal(cfg.memory, 16u << 20);
	assert_int_equal(cfg.cpus, 1);
	assert_true(strs.has_cpu_template_digest);
	cfg.cpu_template_digest = strs.cpu_template_digest; /* what vm_build.c recomputes from the template */
	assert_int_equal(snap_config_save(&cfg, w), 0);
}

static void reencode_memfile(struct snap_reader *r, struct snap_writer *w)
{
	struct snap_memfile m;
	bool present;

	assert_int_equal(snap_memfile_load(r, &m, &present), 0);
	assert_true(present);
	assert_int_equal(m.size, 16u << 20);
	assert_int_equal(snap_memfile_save(w, &m), 0);
}

/* Every device restored into a fresh bus from the fixture (each section checked), then saved again. */
static void reencode_devices(struct snap_reader *r, struct snap_writer *w)
{
	static struct vmfx v;
	const char *failed = NULL;
	char err[256] = "";

	make_devices(&v);
	assert_int_equal(snap_count(r, SNAP_TAG_DEVICE), v.bus.nr_devices);
	if (bus_restore(&v.bus, r, &failed, err, sizeof(err)))
		fail_msg("restoring %s: %s", failed, err);
	assert_int_equal(bus_save(&v.bus, w, &failed), 0);
	free_devices(&v);
}

/* rate_limiter.c's saved limiter: per bucket on (1 byte) and five u64, then blocked (1 byte). */
#define RL_IMAGE (2 * (1 + 5 * 8) + 1)

/*
 * Each section of b against a's: the same bytes, but for a virtio-mmio section re-encoded at version 2
 * (the limiters of blk, net, rng after the version-1 bytes); the first that differs otherwise fails.
 */
static void compare_sections(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	static const enum snap_tag tags[] = {SNAP_TAG_CONFIG, SNAP_TAG_VM,	SNAP_TAG_VCPU,
					     SNAP_TAG_DEVICE, SNAP_TAG_MEMFILE, SNAP_TAG_API};
	struct snap_reader *ra, *rb, *sa, *sb;
	char err[256];

	assert_int_equal(snap_reader_open_mem(a, alen, &ra, err, sizeof(err)), 0);
	assert_int_equal(snap_reader_open_mem(b, blen, &rb, err, sizeof(err)), 0);
	for (size_t t = 0; t < sizeof(tags) / sizeof(tags[0]); t++) {
		assert_int_equal(snap_count(ra, tags[t]), snap_count(rb, tags[t]));
		for (uint32_t i = 0; i < snap_count(ra, tags[t]); i++) {
			const char *name = snap_section_name(ra, tags[t], i);
			uint8_t ba[16384], bb[16384];
			size_t na, nb;

			assert_int_equal(snap_section(ra, tags[t], i, name, &sa), 0);
			na = snap_remaining(sa);
			assert_true(na <= sizeof(ba));
			assert_int_equal(snap_get(sa, ba, na), 0);
			assert_int_equal(snap_section(rb, tags[t], i, name, &sb), 0);
			nb = snap_remaining(sb);
			assert_true(nb <= sizeof(bb));
			assert_int_equal(snap_get(sb, bb, nb), 0);
			if (tags[t] == SNAP_TAG_DEVICE && strcmp(name, "virtio-mmio") == 0 && snap_version(sa) == 1 &&
			    snap_version(sb) == 2 && nb > na && (nb - na) % RL_IMAGE == 0 && nb - na <= 2 * RL_IMAGE &&
			    memcmp(ba, bb, na) == 0)
				continue; /* version 2: the same, then the device's rate limiters */
			if (na != nb || memcmp(ba, bb, na))
				fail_msg("section %s (tag %d index %u) re-encodes differently: %zu bytes, was %zu",
					 name, tags[t], i, nb, na);
		}
	}
	snap_reader_free(ra);
	snap_reader_free(rb);
}

/*
 * tests/fixtures/snapshot-v1: the file parses (every section version 1), every section brisk decodes
 * without KVM (configuration, devices, memory file) decodes and re-encodes to the same bytes (the
 * virtio-mmio sections, now version 2, to the same bytes followed by their devices' rate limiters), and
 * the whole file, rebuilt in its order with the KVM sections copied, only grew by those.
 */
static void test_fixture_v1_reencodes(void **state)
{
	struct snap_writer *w = snap_writer_new();
	struct snap_reader *r;
	size_t len, len2;
	char err[256];
	uint8_t *orig = read_all(FIXTURE, &len), *again;

	(void)state;
	assert_int_equal(le32(orig + 8), 1);  /* the framing's version */
	assert_int_equal(le32(orig + 12), 0); /* no section versions in the frames */
	assert_int_equal(snap_reader_open_mem(orig, len, &r, err, sizeof(err)), 0);
	assert_int_equal(snap_count(r, SNAP_TAG_VCPU), 1);
	assert_int_equal(snap_count(r, SNAP_TAG_DEVICE), 7);
	reencode_config(r, w);
	copy_raw(r, w, SNAP_TAG_VM, 0);
	copy_raw(r, w, SNAP_TAG_VCPU, 0);
	reencode_devices(r, w);
	reencode_memfile(r, w);
	copy_raw(r, w, SNAP_TAG_API, 0);
	again = snap_test_bytes(w, &len2);
	compare_sections(orig, len, again, len2);
	assert_true(len2 >= len);
	snap_reader_free(r);
	free(again);
	free(orig);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_record_round_trip),	   cmocka_unit_test(test_record_older_version),
	    cmocka_unit_test(test_version_refused),	   cmocka_unit_test(test_bounds),
	    cmocka_unit_test(test_memory_width),	   cmocka_unit_test(test_record_copy),
	    cmocka_unit_test(test_file_versions),	   cmocka_unit_test(test_file_version_framing),
	    cmocka_unit_test(test_device_version_refused), cmocka_unit_test(test_fixture_v1_reencodes),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
