/*
 * test_wset.c - the working-set file (wset.h) as untrusted input: round trip, every refusal, the ranges built from
 * a residency vector, the prefetch (its calls: near ranges read as one, mapped one by one; residency after it);
 * and the GuestRegionUffdMapping JSON brisk sends a page-fault handler (mem_uffd.h), byte for byte Firecracker's
 * serde output.
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
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/mem_uffd.h"
#include "brisk/snapshot.h"
#include "brisk/wset.h"

#define CRC    0x1122334455667788ull
#define MEM    (64ull << 20)
#define NPAGES (MEM / 4096)

static char err[512];

static uint8_t *encode(const struct wset_range *r, uint32_t nr, uint64_t crc, uint64_t mem, size_t *len)
{
	struct wset w = {.snapshot_crc = crc, .mem_size = mem, .nr = nr, .range = (struct wset_range *)r};
	uint8_t *buf;

	assert_int_equal(wset_encode(&w, &buf, len), 0);
	return buf;
}

static void reseal(uint8_t *b, size_t len)
{
	uint64_t c = snap_crc64(0, b, len - 8);

	for (int i = 0; i < 8; i++, c >>= 8)
		b[len - 8 + (size_t)i] = (uint8_t)c;
}

static void test_round_trip(void **state)
{
	static const struct wset_range r[] = {{0, 1}, {2, 10}, {100, 1}, {NPAGES - 5, 5}};
	struct wset w;
	size_t len;
	uint8_t *b = encode(r, 4, CRC, MEM, &len);

	(void)state;
	assert_int_equal(len, WSET_HEADER_SIZE + 4 * 16 + 8);
	assert_memory_equal(b, WSET_MAGIC, 8);
	assert_int_equal(wset_parse(b, len, CRC, MEM, &w, err, sizeof(err)), 0);
	assert_int_equal(w.nr, 4);
	assert_int_equal(w.pages, 17);
	assert_memory_equal(w.range, r, sizeof(r));
	wset_free(&w);
	/* An empty list is a valid one. */
	free(b);
	b = encode(NULL, 0, CRC, MEM, &len);
	assert_int_equal(wset_parse(b, len, CRC, MEM, &w, err, sizeof(err)), 0);
	assert_int_equal(w.nr, 0);
	wset_free(&w);
	free(b);
}

/* Another snapshot's list, or another RAM size: -ESTALE, a lazy restore. */
static void test_stale(void **state)
{
	static const struct wset_range r[] = {{0, 1}};
	struct wset w;
	size_t len;
	uint8_t *b = encode(r, 1, CRC, MEM, &len);

	(void)state;
	assert_int_equal(wset_parse(b, len, CRC + 1, MEM, &w, err, sizeof(err)), -ESTALE);
	assert_non_null(strstr(err, "another snapshot"));
	assert_int_equal(wset_parse(b, len, CRC, MEM * 2, &w, err, sizeof(err)), -ESTALE);
	free(b);
}

/* Ranges empty, overlapping, out of order, past RAM, wrapping: the whole file refused. */
static void test_bad_ranges(void **state)
{
	static const struct wset_range bad[][2] = {
	    {{0, 0}, {5, 1}},	       /* empty */
	    {{0, 4}, {3, 1}},	       /* overlap */
	    {{10, 1}, {5, 1}},	       /* out of order */
	    {{0, 1}, {NPAGES, 1}},     /* starts past RAM */
	    {{0, 1}, {NPAGES - 1, 2}}, /* ends past RAM */
	    {{0, 1}, {5, UINT64_MAX}}, /* wraps */
	    {{UINT64_MAX, 1}, {0, 1}}, /* far past */
	};
	struct wset w;
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t *b = encode(bad[i], 2, CRC, MEM, &len);

		assert_int_equal(wset_parse(b, len, CRC, MEM, &w, err, sizeof(err)), -EINVAL);
		assert_null(w.range);
		assert_non_null(strstr(err, "range"));
		free(b);
	}
}

/* Framing: short, magic, version, page size, reserved, a count that disagrees with the length, the checksum. */
static void test_bad_framing(void **state)
{
	static const struct wset_range r[] = {{1, 2}, {8, 3}};
	struct wset w;
	size_t len;
	uint8_t *b = encode(r, 2, CRC, MEM, &len), *c = malloc(len + 16);

	(void)state;
	for (size_t n = 0; n < len; n++) /* every truncation */
		assert_int_equal(wset_parse(b, n, CRC, MEM, &w, err, sizeof(err)), -EINVAL);
	static const size_t at[] = {0, 8, 12, 32, 36};
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		memcpy(c, b, len);
		c[at[i]] ^= 0x40;
		reseal(c, len);
		assert_int_equal(wset_parse(c, len, CRC, MEM, &w, err, sizeof(err)), -EINVAL);
	}
	memcpy(c, b, len);
	c[WSET_HEADER_SIZE + 3] ^= 1; /* a range changed, the checksum not */
	assert_int_equal(wset_parse(c, len, CRC, MEM, &w, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "checksum"));
	memcpy(c, b, len);
	memset(c + len, 0, 16); /* bytes past the ranges */
	reseal(c, len + 16);
	assert_int_equal(wset_parse(c, len + 16, CRC, MEM, &w, err, sizeof(err)), -EINVAL);
	free(c);
	free(b);
}

static void test_from_present(void **state)
{
	uint8_t p[64] = {0};
	struct wset w = {0};

	(void)state;
	p[0] = p[1] = p[2] = 1;
	p[5] = 1;
	p[7] = 3; /* bit 0 is what counts */
	p[8] = 2; /* bit 0 clear: untouched */
	p[62] = p[63] = 1;
	assert_int_equal(wset_from_present(p, 64, &w), 0);
	assert_int_equal(w.nr, 4);
	assert_int_equal(w.pages, 7);
	assert_true(w.range[0].first == 0 && w.range[0].count == 3);
	assert_true(w.range[1].first == 5 && w.range[1].count == 1);
	assert_true(w.range[2].first == 7 && w.range[2].count == 1);
	assert_true(w.range[3].first == 62 && w.range[3].count == 2);
	wset_free(&w);
	/* Many ranges: the array grows. */
	{
		uint8_t *q = calloc(1, 100000);

		for (size_t i = 0; i < 100000; i += 2)
			q[i] = 1;
		assert_int_equal(wset_from_present(q, 100000, &w), 0);
		assert_int_equal(w.nr, 50000);
		wset_free(&w);
		free(q);
	}
}

static void test_path(void **state)
{
	char out[16];

	(void)state;
	assert_int_equal(wset_path("a.mem", out, sizeof(out)), 0);
	assert_string_equal(out, "a.mem.ws");
	assert_int_equal(wset_path("0123456789abc", out, sizeof(out)), -ENAMETOOLONG);
}

/* The handshake's message: one object per RAM region, serde's field order and formatting, offsets in the file. */
static void test_uffd_json(void **state)
{
	struct gmem m;
	char want[512], *s;

	(void)state;
	assert_int_equal(gmem_init(&m, 64ull << 20, 0), 0);
	s = gmem_uffd_mappings_json(&m);
	snprintf(want, sizeof(want),
		 "[{\"base_host_virt_addr\":%llu,\"size\":67108864,\"offset\":0,\"page_size_kib\":4}]",
		 (unsigned long long)(uintptr_t)m.base);
	assert_string_equal(s, want);
	free(s);
	gmem_destroy(&m);
	/* Above the 3 GiB hole: two regions, the second at its offset in the mapping (and the file). */
	assert_int_equal(gmem_init(&m, 4ull << 30, 0), 0);
	s = gmem_uffd_mappings_json(&m);
	snprintf(want, sizeof(want),
		 "[{\"base_host_virt_addr\":%llu,\"size\":3221225472,\"offset\":0,\"page_size_kib\":4},"
		 "{\"base_host_virt_addr\":%llu,\"size\":1073741824,\"offset\":3221225472,\"page_size_kib\":4}]",
		 (unsigned long long)(uintptr_t)m.base, (unsigned long long)(uintptr_t)m.base + (3ull << 30));
	assert_string_equal(s, want);
	free(s);
	gmem_destroy(&m);
}

/* gmem_fill_page (and _head) without a userfaultfd is a checked copy of one whole page. */
static void test_fill_page(void **state)
{
	static uint8_t page[4096];
	struct gmem m;

	(void)state;
	memset(page, 0xab, sizeof(page));
	assert_int_equal(gmem_init(&m, 16ull << 20, 0), 0);
	assert_int_equal(gmem_fill_page(&m, 0x5000, page), 0);
	assert_memory_equal(gmem_ptr(&m, 0x5000, 4096), page, 4096);
	assert_int_equal(gmem_fill_page(&m, 0x5001, page), -EINVAL);
	assert_int_equal(gmem_fill_page(&m, (16ull << 20) - 2048, page), -EINVAL);
	assert_int_equal(gmem_fill_page(&m, 16ull << 20, page), -EINVAL);
	/* gmem_fill_page_head: the bytes given, then zeros to the page's end; at most a page */
	assert_int_equal(gmem_fill_page_head(&m, 0x5000, "brisk", 5), 0);
	assert_memory_equal(gmem_ptr(&m, 0x5000, 5), "brisk", 5);
	for (size_t i = 5; i < 4096; i++)
		assert_int_equal(((const uint8_t *)gmem_ptr(&m, 0x5000, 4096))[i], 0);
	assert_int_equal(gmem_fill_page_head(&m, 0x5000, page, 4097), -EINVAL);
	assert_int_equal(gmem_fill_page_head(&m, 0x5001, "x", 1), -EINVAL);
	gmem_destroy(&m);
}

/*
 * The prefetch on a file-backed mapping (a memfd of 4 MiB): ranges less than WSET_ADVISE_GAP pages apart are one
 * MADV_WILLNEED, the mapping is populated range by range, a range past RAM is skipped; afterwards every listed
 * page is mapped (pagemap), a page far from all of them is not, and the mapping reads the file.
 */
static void test_prefetch(void **state)
{
	const uint64_t size = 4ull << 20;
	struct wset_range r[] = {{0, 1}, {5, 2}, {5 + 2 + WSET_ADVISE_GAP, 1}, {900, 3}, {2000, 1}};
	struct wset w = {.nr = 5, .range = r, .pages = 8};
	struct wset_prefetch_stats st;
	static uint8_t present[1024], buf[1 << 20];
	struct gmem m;
	int fd = memfd_create("wset", MFD_CLOEXEC), pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	(void)state;
	memset(buf, 0x3c, sizeof(buf));
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	assert_int_equal(gmem_init_file(&m, fd, size), 0);
	wset_prefetch_begin(&m, &w, &st);
	assert_int_equal(st.error, 0);
	assert_int_equal(st.pages, 8);
	assert_int_equal(st.ranges, 3); /* [0, 7), [39, 40) (the gap 32: not joined), [900, 903); 2000 is past RAM */
	wset_prefetch_end(&m, &w, &st, NULL);
	assert_int_equal(st.error, 0);
	assert_int_equal(st.ranges, 4); /* each range inside RAM alone */
	assert_int_equal(st.mapped, 7);
	assert_false(st.cancelled);
	if (pm >= 0) {
		assert_int_equal(wset_residency(&m, pm, present), 0);
		assert_int_equal(present[0] & present[5] & present[6] & present[39], 1);
		assert_int_equal(present[900] & present[901] & present[902], 1);
		assert_int_equal(present[500], 0); /* nothing near it listed */
		close(pm);
	}
	assert_int_equal(*(volatile uint8_t *)gmem_ptr(&m, 901 * 4096, 1), 0x3c);
	gmem_destroy(&m);
	close(fd);
}

/* A cancelled populate pass (the VM ended first) stops before its next range: what it did not map stays lazy. */
static void test_prefetch_cancel(void **state)
{
	const uint64_t size = 1ull << 20;
	struct wset_range r[] = {{3, 1}, {100, 2}};
	struct wset w = {.nr = 2, .range = r, .pages = 3};
	struct wset_prefetch_stats st;
	static uint8_t present[256], buf[1 << 20];
	atomic_bool cancel = true;
	struct gmem m;
	int fd = memfd_create("wset", MFD_CLOEXEC), pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	(void)state;
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	assert_int_equal(gmem_init_file(&m, fd, size), 0);
	wset_prefetch_begin(&m, &w, &st);
	wset_prefetch_end(&m, &w, &st, &cancel);
	assert_true(st.cancelled);
	assert_int_equal(st.ranges, 0);
	assert_int_equal(st.mapped, 0);
	if (pm >= 0) {
		assert_int_equal(wset_residency(&m, pm, present), 0);
		assert_int_equal(present[3] | present[100], 0); /* nothing mapped */
		close(pm);
	}
	assert_int_equal(*(volatile uint8_t *)gmem_ptr(&m, 100 * 4096, 1), 0x5a); /* lazily, as ever */
	gmem_destroy(&m);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),	 cmocka_unit_test(test_stale),
	    cmocka_unit_test(test_bad_ranges),	 cmocka_unit_test(test_bad_framing),
	    cmocka_unit_test(test_from_present), cmocka_unit_test(test_path),
	    cmocka_unit_test(test_uffd_json),	 cmocka_unit_test(test_fill_page),
	    cmocka_unit_test(test_prefetch),	 cmocka_unit_test(test_prefetch_cancel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
