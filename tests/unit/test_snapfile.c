/* test_snapfile.c - the snapshot state file: round trips, every malformed header and framing refused cleanly. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/config.h"
#include "brisk/cpuid.h"
#include "brisk/snap_config.h"
#include "brisk/snapshot.h"
#include "snap_test.h"

#define HDR 24 /* magic, version, flags, payload length */

/* A file with three sections exercising every put width; returns its bytes (caller frees). */
static uint8_t *build(size_t *len)
{
	struct snap_writer *w = snap_writer_new();

	assert_non_null(w);
	assert_int_equal(snap_section_begin(w, SNAP_TAG_VM, 0, "kvm"), 0);
	assert_int_equal(snap_put_u8(w, 0xab), 0);
	assert_int_equal(snap_put_u16(w, 0xbeef), 0);
	assert_int_equal(snap_put_u32(w, 0xdeadbeef), 0);
	assert_int_equal(snap_put_u64(w, 0x0123456789abcdefull), 0);
	assert_int_equal(snap_put(w, "blob", 4), 0);
	assert_int_equal(snap_section_end(w), 0);
	assert_int_equal(snap_section_begin(w, SNAP_TAG_VCPU, 1, "vcpu"), 0);
	assert_int_equal(snap_put_u32(w, 1), 0);
	assert_int_equal(snap_section_end(w), 0);
	assert_int_equal(snap_section_begin(w, SNAP_TAG_VCPU, 0, NULL), 0); /* no name, empty body */
	assert_int_equal(snap_section_end(w), 0);
	return snap_test_bytes(w, len);
}

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Recomputes the trailer after a test changed the bytes before it. */
static void reseal(uint8_t *b, size_t len)
{
	put_le(b + len - 8, snap_crc64(0, b, len - 8), 8);
}

static int open_err(const uint8_t *b, size_t len, char *err, size_t errlen)
{
	struct snap_reader *r = (struct snap_reader *)1;
	int ret = snap_reader_open_mem(b, len, &r, err, errlen);

	if (ret == 0)
		snap_reader_free(r);
	else
		assert_null(r);
	return ret;
}

static void test_crc_vectors(void **state)
{
	static const uint8_t five[] = {1, 2, 3, 4, 5};
	uint8_t sixteen[16];

	(void)state;
	memset(sixteen, 123, sizeof(sixteen));
	assert_true(snap_crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9caull);
	/* Firecracker's src/vmm/src/snapshot/crc.rs test vectors. */
	assert_true(snap_crc64(0, five, sizeof(five)) == 0xfb0460de06383654ull);
	assert_true(snap_crc64(0, sixteen, sizeof(sixteen)) == 0x29d5357216326566ull);
	/* Chaining equals one pass. */
	assert_true(snap_crc64(snap_crc64(0, "1234", 4), "56789", 5) == 0xe9c6d914c4b8d9caull);
}

static void test_round_trip(void **state)
{
	struct snap_reader *r, *s;
	size_t len;
	uint8_t *b = build(&len);
	char err[256], blob[4];
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	(void)state;
	assert_int_equal(snap_reader_open_mem(b, len, &r, err, sizeof(err)), 0);
	assert_int_equal(snap_count(r, SNAP_TAG_VCPU), 2);
	assert_int_equal(snap_count(r, SNAP_TAG_VM), 1);
	assert_int_equal(snap_count(r, SNAP_TAG_DEVICE), 0);
	assert_string_equal(snap_section_name(r, SNAP_TAG_VM, 0), "kvm");
	assert_string_equal(snap_section_name(r, SNAP_TAG_VCPU, 0), "");
	assert_null(snap_section_name(r, SNAP_TAG_VCPU, 2));
	assert_int_equal(snap_section(r, SNAP_TAG_VCPU, 2, NULL, &s), -ENOENT);
	assert_int_equal(snap_section(r, SNAP_TAG_VM, 0, "other", &s), -EINVAL);
	assert_int_equal(snap_section(r, SNAP_TAG_VM, 0, "kvm", &s), 0);
	assert_int_equal(snap_remaining(s), 1 + 2 + 4 + 8 + 4);
	assert_int_equal(snap_get_u8(s, &u8), 0);
	assert_int_equal(snap_get_u16(s, &u16), 0);
	assert_int_equal(snap_get_u32(s, &u32), 0);
	assert_int_equal(snap_get_u64(s, &u64), 0);
	assert_int_equal(snap_get(s, blob, 4), 0);
	assert_int_equal(u8, 0xab);
	assert_int_equal(u16, 0xbeef);
	assert_int_equal(u32, 0xdeadbeef);
	assert_true(u64 == 0x0123456789abcdefull);
	assert_memory_equal(blob, "blob", 4);
	assert_int_equal(snap_remaining(s), 0);
	assert_false(snap_reader_error(s));
	assert_int_equal(snap_section(r, SNAP_TAG_VCPU, 1, NULL, &s), 0);
	assert_int_equal(snap_get_u32(s, &u32), 0);
	assert_int_equal(u32, 1);
	assert_int_equal(snap_section(r, SNAP_TAG_VCPU, 0, NULL, &s), 0);
	assert_int_equal(snap_remaining(s), 0);
	snap_reader_free(r);
	/* The layout the header documents: magic, version 1, flags 0, payload length. */
	assert_memory_equal(b, "BRISKSNP", 8);
	assert_int_equal(b[8], 1);
	assert_int_equal(b[12], 0);
	free(b);
}

static void test_read_past_end(void **state)
{
	struct snap_reader *r, *s;
	size_t len;
	uint8_t *b = build(&len);
	char err[256];
	uint64_t v = 7;
	uint32_t u = 7;

	(void)state;
	assert_int_equal(snap_reader_open_mem(b, len, &r, err, sizeof(err)), 0);
	assert_int_equal(snap_section(r, SNAP_TAG_VCPU, 1, NULL, &s), 0);
	assert_int_equal(snap_get_u64(s, &v), -EINVAL); /* 4 bytes left */
	assert_true(v == 0);
	assert_true(snap_reader_error(s));
	assert_int_equal(snap_remaining(s), 4); /* a failed get consumes nothing */
	assert_int_equal(snap_get_u32(s, &u), 0);
	assert_int_equal(snap_get_u8(s, (uint8_t *)&u), -EINVAL);
	/* A fresh section reader starts without the error. */
	assert_int_equal(snap_section(r, SNAP_TAG_VCPU, 1, NULL, &s), 0);
	assert_false(snap_reader_error(s));
	snap_reader_free(r);
	free(b);
}

static void test_truncated_everywhere(void **state)
{
	size_t len;
	uint8_t *b = build(&len);
	char err[256];

	(void)state;
	for (size_t n = 0; n < len; n++) {
		err[0] = '\0';
		assert_int_equal(open_err(b, n, err, sizeof(err)), -EINVAL);
		assert_true(strstr(err, "truncated") != NULL);
	}
	free(b);
}

static void test_header_fields(void **state)
{
	size_t len;
	uint8_t *b = build(&len), *c = malloc(len + 1);
	char err[256];

	(void)state;
	memcpy(c, b, len);
	c[0] ^= 1; /* magic */
	assert_int_equal(open_err(c, len, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a brisk snapshot"));

	memcpy(c, b, len);
	put_le(c + 8, 7, 4); /* version: refused even with a valid checksum */
	reseal(c, len);
	assert_int_equal(open_err(c, len, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "version 7, this brisk reads 1");

	memcpy(c, b, len);
	put_le(c + 12, 2, 4); /* flags */
	reseal(c, len);
	assert_int_equal(open_err(c, len, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "flags 0x2"));

	memcpy(c, b, len);
	put_le(c + 16, len, 8); /* payload length too large */
	assert_int_equal(open_err(c, len, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "truncated"));
	put_le(c + 16, UINT64_MAX, 8); /* ... with overflow */
	assert_int_equal(open_err(c, len, err, sizeof(err)), -EINVAL);
	put_le(c + 16, len - HDR - 8 - 1, 8); /* too small */
	assert_int_equal(open_err(c, len, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "trailing"));

	memcpy(c, b, len); /* one byte appended */
	c[len] = 0;
	assert_int_equal(open_err(c, len + 1, err, sizeof(err)), -EINVAL);
	free(c);
	free(b);
}

static void test_checksum(void **state)
{
	size_t len;
	uint8_t *b = build(&len);
	char err[256];

	(void)state;
	for (size_t i = HDR; i < len; i++) {
		b[i] ^= 0x40;
		assert_int_equal(open_err(b, len, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "checksum mismatch"));
		b[i] ^= 0x40;
	}
	assert_int_equal(open_err(b, len, err, sizeof(err)), 0);
	free(b);
}

/* A payload of hand-made sections sealed into a valid envelope. */
static uint8_t *seal(const uint8_t *payload, size_t plen, size_t *len)
{
	uint8_t *b = malloc(HDR + plen + 8);

	memcpy(b, "BRISKSNP", 8);
	put_le(b + 8, SNAP_VERSION, 4);
	put_le(b + 12, 0, 4);
	put_le(b + 16, plen, 8);
	memcpy(b + HDR, payload, plen);
	*len = HDR + plen + 8;
	reseal(b, *len);
	return b;
}

static size_t frame(uint8_t *p, uint32_t tag, uint32_t index, const char *name, uint32_t nlen, uint64_t blen)
{
	put_le(p, tag, 4);
	put_le(p + 4, index, 4);
	put_le(p + 8, nlen, 4);
	memcpy(p + 12, name, strlen(name));
	put_le(p + 12 + strlen(name), blen, 8);
	return 20 + strlen(name);
}

static void expect_framing_error(const uint8_t *payload, size_t plen, const char *what)
{
	char err[256];
	size_t len;
	uint8_t *b = seal(payload, plen, &len);

	assert_int_equal(open_err(b, len, err, sizeof(err)), -EINVAL);
	if (!strstr(err, what))
		fail_msg("expected '%s' in '%s'", what, err);
	free(b);
}

static void test_framing(void **state)
{
	uint8_t p[256];
	size_t n;

	(void)state;
	n = frame(p, SNAP_TAG_VCPU, 0, "a", 1, 0);
	n += frame(p + n, SNAP_TAG_VCPU, 0, "b", 1, 0);
	expect_framing_error(p, n, "two sections with tag 3 index 0");
	n = frame(p, 99, 0, "", 0, 0);
	expect_framing_error(p, n, "unknown tag 99");
	n = frame(p, SNAP_TAG_VM, 0, "x", SNAP_MAX_NAME + 1, 0);
	expect_framing_error(p, n, "name of 65 bytes");
	n = frame(p, SNAP_TAG_VM, 0, "a\n", 2, 0);
	expect_framing_error(p, n, "name of 2 bytes");
	n = frame(p, SNAP_TAG_VM, 0, "", 0, 1); /* body past the end */
	expect_framing_error(p, n, "runs past the end");
	n = frame(p, SNAP_TAG_VM, 0, "", 0, UINT64_MAX);
	expect_framing_error(p, n, "runs past the end");
	n = frame(p, SNAP_TAG_VM, 0, "", 0xffffffffu, 0);
	expect_framing_error(p, n, "name of");
	n = frame(p, SNAP_TAG_VM, 0, "abc", 60, 0); /* name length past the end */
	expect_framing_error(p, n, "runs past the end");
	expect_framing_error(p, 5, "runs past the end"); /* a frame cut short */
}

static void test_too_many_sections(void **state)
{
	size_t plen = (SNAP_MAX_SECTIONS + 1) * 20, len, n = 0;
	uint8_t *p = malloc(plen), *b;
	char err[256];

	(void)state;
	for (uint32_t i = 0; i <= SNAP_MAX_SECTIONS; i++)
		n += frame(p + n, SNAP_TAG_DEVICE, i, "", 0, 0);
	b = seal(p, n, &len);
	assert_int_equal(open_err(b, len, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "more than 4096 sections"));
	/* Exactly the maximum is accepted. */
	free(b);
	b = seal(p, n - 20, &len);
	assert_int_equal(open_err(b, len, err, sizeof(err)), 0);
	free(b);
	free(p);
}

static void test_too_large(void **state)
{
	size_t len = (size_t)SNAP_MAX_FILE + 1;
	uint8_t *b = calloc(1, len);
	char err[256];
	FILE *f = tmpfile();
	struct snap_reader *r;

	(void)state;
	assert_int_equal(open_err(b, len, err, sizeof(err)), -EFBIG);
	assert_non_null(strstr(err, "more than"));
	/* Through a file descriptor, too. */
	assert_int_equal(ftruncate(fileno(f), (off_t)len), 0);
	assert_int_equal(snap_reader_open(fileno(f), &r, err, sizeof(err)), -EFBIG);
	assert_null(r);
	fclose(f);
	free(b);
}

static void test_writer_rules(void **state)
{
	struct snap_writer *w = snap_writer_new();
	char err[256], longname[SNAP_MAX_NAME + 2];
	FILE *f = tmpfile();

	(void)state;
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(snap_put_u32(w, 1), -EINVAL); /* no open section */
	assert_int_equal(snap_section_end(w), -EINVAL);
	assert_int_equal(snap_section_begin(w, SNAP_TAG_VM, 0, longname), -EINVAL);
	assert_int_equal(snap_section_begin(w, SNAP_TAG_VM, 0, "vm"), 0);
	assert_int_equal(snap_section_begin(w, SNAP_TAG_VM, 1, "vm"), -EINVAL); /* nested */
	assert_int_equal(snap_section_end(w), 0);
	assert_int_equal(snap_section_begin(w, SNAP_TAG_VM, 0, "again"), -EEXIST);
	/* After any failed call, finish refuses to write a file with a hole. */
	assert_int_equal(snap_writer_finish(w, fileno(f), true, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "incomplete"));
	snap_writer_free(w);
	fclose(f);
}

static void test_file_round_trip(void **state)
{
	struct snap_writer *w = snap_writer_new();
	struct snap_reader *r, *s;
	char err[256];
	FILE *f = tmpfile();
	uint64_t v;

	(void)state;
	/* A longer file being overwritten loses its tail. */
	assert_int_equal(ftruncate(fileno(f), 1 << 20), 0);
	assert_int_equal(snap_section_begin(w, SNAP_TAG_CONFIG, 0, "config"), 0);
	assert_int_equal(snap_put_u64(w, 42), 0);
	assert_int_equal(snap_section_end(w), 0);
	assert_int_equal(snap_writer_finish(w, fileno(f), false, err, sizeof(err)), 0);
	snap_writer_free(w);
	assert_int_equal(lseek(fileno(f), 0, SEEK_SET), 0);
	assert_int_equal(snap_reader_open(fileno(f), &r, err, sizeof(err)), 0);
	assert_int_equal(snap_section(r, SNAP_TAG_CONFIG, 0, "config", &s), 0);
	assert_int_equal(snap_get_u64(s, &v), 0);
	assert_int_equal(v, 42);
	snap_reader_free(r);
	fclose(f);
}

/* A state file holding only the configuration section of cfg; its bytes (caller frees). */
static uint8_t *config_file(const struct vm_config *cfg, size_t *len)
{
	struct snap_writer *w = snap_writer_new();

	assert_int_equal(snap_config_save(cfg, w), 0);
	return snap_test_bytes(w, len);
}

static int load_config(const uint8_t *b, size_t len, struct vm_config *cfg, struct snap_config_strings *strs)
{
	struct snap_reader *r;
	char err[256];
	int ret;

	assert_int_equal(snap_reader_open_mem(b, len, &r, err, sizeof(err)), 0);
	config_defaults(cfg);
	ret = snap_config_load(r, cfg, strs, err, sizeof(err));
	snap_reader_free(r);
	return ret;
}

/*
 * The configuration section ends with the --cpu-template digest; a file written before that field existed
 * (the same section 8 bytes shorter) still loads, with no digest to compare; a longer one is refused.
 */
static void test_config_template_digest(void **state)
{
	static struct vm_config cfg, back;
	static struct snap_config_strings strs;
	const size_t name_len = strlen("config"), body_len_at = HDR + 12 + name_len;
	size_t len;
	uint8_t *b, *old;
	uint64_t body;

	(void)state;
	config_defaults(&cfg);
	cfg.irqchip = IRQCHIP_KERNEL; /* no tag after the digest: the layout of that time */
	cfg.cpu_template_digest = 0x1122334455667788ull;
	b = config_file(&cfg, &len);
	assert_int_equal(load_config(b, len, &back, &strs), 0);
	assert_true(strs.has_cpu_template_digest);
	assert_true(strs.cpu_template_digest == 0x1122334455667788ull);
	/* the layout before the digest: body and payload 8 bytes shorter, the trailer recomputed */
	old = malloc(len - 8);
	memcpy(old, b, len - 16);
	memcpy(&body, b + body_len_at, 8);
	put_le(old + 16, len - 8 - HDR - 8, 8);
	put_le(old + body_len_at, body - 8, 8);
	reseal(old, len - 8);
	assert_int_equal(load_config(old, len - 8, &back, &strs), 0);
	assert_false(strs.has_cpu_template_digest);
	assert_int_equal(back.cpus, cfg.cpus);
	assert_int_equal(back.irqchip, IRQCHIP_KERNEL);
	free(old);
	free(b);
}

/*
 * Disk paths round-trip (held out of line: each a heap copy the loaded configuration owns); one with a NUL
 * in it is refused, the paths read before it freed (the ASan build's leak check).
 */
static void test_config_disk_paths(void **state)
{
	static struct vm_config cfg, back;
	static struct snap_config_strings strs;
	char err[256];
	size_t len;
	uint8_t *b, *at;

	(void)state;
	config_defaults(&cfg);
	assert_int_equal(config_parse_disk("/d/root.img,ro", &cfg, err, sizeof(err)), 0);
	assert_int_equal(config_parse_disk("/d/data.img,id=data", &cfg, err, sizeof(err)), 0);
	b = config_file(&cfg, &len);
	assert_int_equal(load_config(b, len, &back, &strs), 0);
	assert_int_equal(back.nr_disks, 2);
	assert_string_equal(back.disk[0].path, "/d/root.img");
	assert_true(back.disk[0].ro);
	assert_string_equal(back.disk[1].path, "/d/data.img");
	assert_string_equal(back.disk[1].id, "data");
	assert_ptr_not_equal(back.disk[1].path, cfg.disk[1].path);
	config_release(&back);
	at = memmem(b, len, "data.img", 8);
	assert_non_null(at);
	at[4] = 0; /* "/d/data\0img" */
	reseal(b, len);
	assert_int_equal(load_config(b, len, &back, &strs), -EINVAL);
	config_release(&back);
	config_release(&cfg);
	free(b);
}

/* A balloon's configuration follows the digest, only when there is one; a malformed one is refused. */
static void test_config_balloon(void **state)
{
	static struct vm_config cfg, back;
	static struct snap_config_strings strs;
	size_t len, plain;
	uint8_t *b;

	(void)state;
	config_defaults(&cfg);
	free(config_file(&cfg, &plain));
	cfg.balloon =
	    (struct vm_balloon){.enabled = true, .amount_mib = 77, .deflate_on_oom = true, .stats_interval_s = 9};
	b = config_file(&cfg, &len);
	assert_int_equal(len, plain + 8);
	assert_int_equal(load_config(b, len, &back, &strs), 0);
	assert_true(back.balloon.enabled && back.balloon.deflate_on_oom);
	assert_int_equal(back.balloon.amount_mib, 77);
	assert_int_equal(back.balloon.stats_interval_s, 9);
	free(b);
	cfg.balloon.amount_mib = 0x01000000; /* pages past 32 bits */
	b = config_file(&cfg, &len);
	assert_int_equal(load_config(b, len, &back, &strs), -EINVAL);
	free(b);
}

/*
 * hugetlbfs RAM (huge_pages "2M") is a tag after the digest, one byte; absent: not; a state file that says
 * hugetlbfs and has a balloon is refused (Firecracker's rule, config_validate), as is a repeated tag.
 */
static void test_config_hugetlbfs(void **state)
{
	static struct vm_config cfg, back;
	static struct snap_config_strings strs;
	size_t len, plain;
	uint8_t *b;

	(void)state;
	config_defaults(&cfg);
	free(config_file(&cfg, &plain));
	cfg.hugetlbfs = true;
	b = config_file(&cfg, &len);
	assert_int_equal(len, plain + 1);
	back.hugetlbfs = false;
	assert_int_equal(load_config(b, len, &back, &strs), 0);
	assert_true(back.hugetlbfs);
	free(b);
	cfg.hugetlbfs = false;
	b = config_file(&cfg, &len);
	back.hugetlbfs = true; /* the base's value never survives a file without the tag */
	assert_int_equal(load_config(b, len, &back, &strs), 0);
	assert_false(back.hugetlbfs);
	free(b);
	cfg.hugetlbfs = true;
	cfg.balloon = (struct vm_balloon){.enabled = true, .amount_mib = 8};
	b = config_file(&cfg, &len);
	assert_int_equal(load_config(b, len, &back, &strs), -EINVAL);
	free(b);
}

/*
 * The irqchip: a split one (the default) is a tag after the digest, KVM's in-kernel one no tag (as every file
 * before brisk had its own I/O APIC); a repeated tag or another value is refused.
 */
static void test_config_irqchip(void **state)
{
	static struct vm_config cfg, back;
	static struct snap_config_strings strs;
	size_t len, plain;
	uint8_t *b;

	(void)state;
	config_defaults(&cfg);
	cfg.irqchip = IRQCHIP_KERNEL;
	b = config_file(&cfg, &plain);
	back.irqchip = IRQCHIP_SPLIT;
	assert_int_equal(load_config(b, plain, &back, &strs), 0);
	assert_int_equal(back.irqchip, IRQCHIP_KERNEL);
	free(b);
	cfg.irqchip = IRQCHIP_SPLIT;
	b = config_file(&cfg, &len);
	assert_int_equal(len, plain + 2);
	back.irqchip = IRQCHIP_KERNEL;
	assert_int_equal(load_config(b, len, &back, &strs), 0);
	assert_int_equal(back.irqchip, IRQCHIP_SPLIT);
	free(b);
	cfg.irqchip = (enum irqchip_mode)7; /* a value no brisk writes */
	b = config_file(&cfg, &len);
	assert_int_equal(load_config(b, len, &back, &strs), -EINVAL);
	free(b);
}

/* The digest is of what a template asks for: the same requests written differently match; any change does not. */
static void test_template_digest(void **state)
{
	static const char *const texts[] = {
	    "{\"cpuid\": [{\"leaf\": \"0x7\", \"subleaf\": 0, \"register\": \"ebx\", \"mask\": \"0x20\", \"value\": "
	    "\"0x0\"}]}",
	    "{ \"cpuid\" : [ { \"register\": \"ebx\", \"value\": \"0\", \"mask\": \"32\", \"leaf\": \"7\" } ] }\n",
	    "{\"cpuid\": [{\"leaf\": \"0x7\", \"subleaf\": 0, \"register\": \"ebx\", \"mask\": \"0x40\", \"value\": "
	    "\"0x0\"}]}",
	    "{\"cpuid\": [{\"leaf\": \"0x7\", \"subleaf\": 0, \"register\": \"ebx\", \"mask\": \"0x20\", \"value\": "
	    "\"0x0\"}], \"msrs\": [{\"index\": \"0x1a0\", \"value\": \"0x1\"}]}",
	};
	uint64_t d[4];
	char path[64], err[256];

	(void)state;
	snprintf(path, sizeof(path), "/tmp/test_snapfile.%d.json", (int)getpid());
	for (size_t i = 0; i < 4; i++) {
		struct cpuid_template *t;
		FILE *f = fopen(path, "w");

		assert_non_null(f);
		fputs(texts[i], f);
		fclose(f);
		assert_int_equal(cpuid_template_load(path, &t, err, sizeof(err)), 0);
		d[i] = cpuid_template_digest(t);
		cpuid_template_free(t);
		assert_true(d[i] != 0);
	}
	unlink(path);
	assert_true(d[0] == d[1]); /* spacing, key order, number spelling, the default subleaf */
	assert_true(d[0] != d[2]); /* another bit */
	assert_true(d[0] != d[3]); /* an MSR more */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_crc_vectors),	      cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_read_past_end),     cmocka_unit_test(test_truncated_everywhere),
	    cmocka_unit_test(test_header_fields),     cmocka_unit_test(test_checksum),
	    cmocka_unit_test(test_framing),	      cmocka_unit_test(test_too_many_sections),
	    cmocka_unit_test(test_too_large),	      cmocka_unit_test(test_writer_rules),
	    cmocka_unit_test(test_file_round_trip),   cmocka_unit_test(test_config_template_digest),
	    cmocka_unit_test(test_config_disk_paths), cmocka_unit_test(test_config_balloon),
	    cmocka_unit_test(test_config_hugetlbfs),  cmocka_unit_test(test_template_digest),
	    cmocka_unit_test(test_config_irqchip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
