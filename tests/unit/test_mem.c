/* test_mem.c - the checked guest-memory accessor at its boundaries (0, last byte, len 0, wrap-around, hole). */
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

#include "brisk/layout.h"
#include "brisk/mem.h"

#define MiB (1ULL << 20)

static void test_small(void **state)
{
	struct gmem m;
	uint8_t b = 0xab, r = 0;

	(void)state;
	assert_int_equal(gmem_init(&m, 16 * MiB, 0), 0);
	assert_int_equal(m.nr, 1);
	assert_ptr_equal(gmem_ptr(&m, 0, 1), m.base);
	assert_ptr_equal(gmem_ptr(&m, 16 * MiB - 1, 1), m.base + 16 * MiB - 1);
	assert_null(gmem_ptr(&m, 16 * MiB, 1));
	assert_null(gmem_ptr(&m, 16 * MiB - 1, 2));
	assert_null(gmem_ptr(&m, 0, 16 * MiB + 1));
	assert_non_null(gmem_ptr(&m, 0, 16 * MiB));
	/* zero length: valid anywhere in [start, end] */
	assert_non_null(gmem_ptr(&m, 0, 0));
	assert_non_null(gmem_ptr(&m, 16 * MiB, 0));
	assert_null(gmem_ptr(&m, 16 * MiB + 1, 0));
	/* wrap-around */
	assert_null(gmem_ptr(&m, UINT64_MAX, 2));
	assert_null(gmem_ptr(&m, 8, UINT64_MAX));
	assert_null(gmem_ptr(&m, UINT64_MAX - 4, 8));
	assert_int_equal(gmem_write(&m, 16 * MiB - 1, &b, 1), 0);
	assert_int_equal(gmem_read(&m, 16 * MiB - 1, &r, 1), 0);
	assert_int_equal(r, 0xab);
	assert_int_equal(gmem_write(&m, 16 * MiB, &b, 1), -EFAULT);
	assert_int_equal(gmem_read(&m, UINT64_MAX, &r, 1), -EFAULT);
	assert_int_equal(gmem_low_size(&m), 16 * MiB);
	gmem_destroy(&m);
}

static void test_hole(void **state)
{
	struct gmem m;
	uint64_t size = LAYOUT_MMIO_HOLE + 64 * MiB;

	(void)state;
	/* MAP_NORESERVE: 3 GiB + 64 MiB costs nothing until touched */
	assert_int_equal(gmem_init(&m, size, 0), 0);
	assert_int_equal(m.nr, 2);
	assert_int_equal(gmem_low_size(&m), LAYOUT_MMIO_HOLE);
	assert_int_equal(m.region[1].gpa, LAYOUT_RAM_ABOVE_4G);
	assert_int_equal(m.region[1].size, 64 * MiB);
	assert_non_null(gmem_ptr(&m, LAYOUT_MMIO_HOLE - 1, 1));
	assert_null(gmem_ptr(&m, LAYOUT_MMIO_HOLE - 1, 2)); /* never crosses the hole */
	assert_null(gmem_ptr(&m, LAYOUT_MMIO_HOLE, 1));
	assert_null(gmem_ptr(&m, BRISK_LAPIC_BASE, 4));
	assert_ptr_equal(gmem_ptr(&m, LAYOUT_RAM_ABOVE_4G, 1), m.base + LAYOUT_MMIO_HOLE);
	assert_non_null(gmem_ptr(&m, LAYOUT_RAM_ABOVE_4G + 64 * MiB - 1, 1));
	assert_null(gmem_ptr(&m, LAYOUT_RAM_ABOVE_4G + 64 * MiB, 1));
	gmem_destroy(&m);
}

static void test_flags_and_errors(void **state)
{
	struct gmem m;

	(void)state;
	assert_int_equal(gmem_init(&m, 0, 0), -EINVAL);
	assert_int_equal(gmem_init(&m, 16 * MiB, GMEM_HUGEPAGES | GMEM_PREFAULT), 0);
	*(volatile uint8_t *)gmem_ptr(&m, 0, 1) = 1;
	gmem_destroy(&m);
	assert_null(m.base);
}

/*
 * Guest RAM starts 2 MiB-aligned in brisk's address space (anonymous or from a memory file), whatever its
 * size, so KVM can map guest 2 MiB frames with host huge pages; 1 GiB-aligned from 1 GiB up.
 */
static void test_aligned(void **state)
{
	static const uint64_t sizes[] = {4096,	    1 * MiB + 4096, 2 * MiB,	127 * MiB + 12288,
					 128 * MiB, 1023 * MiB,	    1024 * MiB, 1024 * MiB + 4096};
	char path[] = "/tmp/test_mem.XXXXXX";
	int fd = mkstemp(path);
	struct gmem m;

	(void)state;
	assert_true(fd >= 0);
	unlink(path);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		assert_int_equal(gmem_align(sizes[i]), sizes[i] >= 1024 * MiB ? GMEM_ALIGN_1G : GMEM_ALIGN);
		assert_int_equal(gmem_init(&m, sizes[i], 0), 0);
		assert_int_equal((uintptr_t)m.base % gmem_align(sizes[i]), 0);
		*(volatile uint8_t *)(m.base + sizes[i] - 1) = 1;
		gmem_destroy(&m);
		assert_int_equal(ftruncate(fd, (off_t)sizes[i]), 0);
		assert_int_equal(gmem_init_file(&m, fd, sizes[i]), 0);
		assert_int_equal((uintptr_t)m.base % gmem_align(sizes[i]), 0);
		assert_int_equal(*(volatile uint8_t *)(m.base + sizes[i] - 1), 0);
		gmem_destroy(&m);
	}
	close(fd);
}

/* The permissions ("rw-p", "---p") of the mapping of this process that holds `at`, and its bounds; "" if none. */
static const char *mapping_of(const void *at, uintptr_t *lo, uintptr_t *hi)
{
	static char perms[5];
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	assert_non_null(f);
	perms[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %4s", lo, hi, perms) == 3 && *lo <= (uintptr_t)at && (uintptr_t)at < *hi)
			break;
		perms[0] = 0;
	}
	fclose(f);
	return perms;
}

/*
 * Guest RAM is a mapping of its own between two PROT_NONE guard pages (a thread stack mapped next to it, the
 * same kind of mapping, was merged with it by the kernel), and gmem_destroy takes the guards with it.
 */
static void test_guarded(void **state)
{
	struct gmem m;
	uintptr_t lo, hi;
	uint8_t *base;

	(void)state;
	assert_int_equal(gmem_init(&m, 4 * MiB, 0), 0);
	base = m.base;
	assert_string_equal(mapping_of(base - 1, &lo, &hi), "---p");
	assert_int_equal(hi, (uintptr_t)base);
	assert_int_equal(hi - lo, 4096);
	assert_string_equal(mapping_of(base + 4 * MiB, &lo, &hi), "---p");
	assert_int_equal(lo, (uintptr_t)base + 4 * MiB);
	assert_int_equal(hi - lo, 4096);
	assert_string_equal(mapping_of(base, &lo, &hi), "rw-p");
	assert_int_equal(lo, (uintptr_t)base);
	gmem_destroy(&m);
	assert_string_equal(mapping_of(base - 1, &lo, &hi), "");
	assert_string_equal(mapping_of(base + 4 * MiB, &lo, &hi), "");
}

/*
 * The THP flag of the mapping that starts at `at` (its smaps VmFlags): 1 VM_HUGEPAGE ("hg"), 2 VM_NOHUGEPAGE ("nh"),
 * 0 neither; -1: no mapping starts there.
 */
static int vma_hugepage(const void *at)
{
	char line[512];
	FILE *f = fopen("/proc/self/smaps", "r");
	int found = -1;
	unsigned long start;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-", &start) == 1 && strchr(line, '-') && strchr(line, ' ') > strchr(line, '-'))
			found = start == (uintptr_t)at ? 0 : -1;
		else if (found == 0 && strncmp(line, "VmFlags:", 8) == 0) {
			found = strstr(line, " hg") ? 1 : strstr(line, " nh") ? 2 : 0;
			break;
		}
	}
	fclose(f);
	return found;
}

/*
 * Transparent huge pages are asked for on guest RAM but its first 2 MiB (the mapping splits there), which is kept
 * from them (MADV_NOHUGEPAGE); on all of it with GMEM_HUGEPAGES (--hugepages); RAM of 2 MiB or less has none.
 */
static void test_thp_requested(void **state)
{
	struct gmem m;

	(void)state;
	assert_int_equal(gmem_init(&m, 64 * MiB, 0), 0);
	assert_int_equal(vma_hugepage(m.base), 2);
	assert_int_equal(vma_hugepage(m.base + 2 * MiB), 1);
	gmem_destroy(&m);
	assert_int_equal(gmem_init(&m, 64 * MiB, GMEM_HUGEPAGES), 0);
	assert_int_equal(vma_hugepage(m.base), 1);
	gmem_destroy(&m);
	assert_int_equal(gmem_init(&m, 2 * MiB, 0), 0);
	assert_int_equal(vma_hugepage(m.base), 2);
	gmem_destroy(&m);
}

/* Free 2 MiB hugetlbfs pages on this host (sysfs), -1 when it has no such page size. */
static long free_huge_pages(void)
{
	FILE *f = fopen("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "r");
	long n = -1;

	if (f) {
		if (fscanf(f, "%ld", &n) != 1)
			n = -1;
		fclose(f);
	}
	return n;
}

/*
 * GMEM_HUGETLBFS: a size that is not whole 2 MiB pages is refused; with the pool empty the map is refused at
 * once (-ENOMEM: reserved at the map, never a SIGBUS later); with pages free, RAM is hugetlbfs, aligned, usable.
 * Which of the last two runs depends on the host (the integration tests reserve pages: test_snapshot_diff.py).
 */
static void test_hugetlbfs(void **state)
{
	long avail = free_huge_pages();
	struct gmem m;
	int ret;

	(void)state;
	assert_int_equal(gmem_init(&m, 3 * MiB, GMEM_HUGETLBFS), -EINVAL);
	if (avail < 0)
		skip();
	ret = gmem_init(&m, 4 * MiB, GMEM_HUGETLBFS);
	if (avail < 2) {
		assert_int_equal(ret, -ENOMEM);
		return;
	}
	assert_int_equal(ret, 0);
	assert_true(m.hugetlbfs);
	assert_int_equal((uintptr_t)m.base % GMEM_ALIGN, 0);
	*(volatile uint8_t *)(m.base + 4 * MiB - 1) = 7;
	assert_int_equal(*(volatile uint8_t *)(m.base + 4 * MiB - 1), 7);
	gmem_destroy(&m);
}

/* gmem_load_file: a memory file's data read into RAM, its holes left zero; a file of another size refused. */
static void test_load_file(void **state)
{
	char path[] = "/tmp/test_mem.XXXXXX";
	int fd = mkstemp(path);
	uint8_t page[4096];
	struct gmem m;

	(void)state;
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(ftruncate(fd, 8 * MiB), 0);
	memset(page, 0x5a, sizeof(page));
	assert_int_equal(pwrite(fd, page, sizeof(page), 5 * 4096), 4096);
	assert_int_equal(pwrite(fd, page, sizeof(page), 8 * MiB - 4096), 4096);
	assert_int_equal(gmem_init(&m, 8 * MiB, 0), 0);
	assert_int_equal(gmem_load_file(&m, fd), 0);
	assert_int_equal(m.base[5 * 4096], 0x5a);
	assert_int_equal(m.base[6 * 4096 - 1], 0x5a);
	assert_int_equal(m.base[6 * 4096], 0);
	assert_int_equal(m.base[8 * MiB - 1], 0x5a);
	gmem_destroy(&m);
	assert_int_equal(gmem_init(&m, 4 * MiB, 0), 0);
	assert_int_equal(gmem_load_file(&m, fd), -ERANGE);
	gmem_destroy(&m);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hugetlbfs), cmocka_unit_test(test_load_file),	       cmocka_unit_test(test_small),
	    cmocka_unit_test(test_hole),      cmocka_unit_test(test_flags_and_errors), cmocka_unit_test(test_aligned),
	    cmocka_unit_test(test_guarded),   cmocka_unit_test(test_thp_requested),
	};

	return cmocka_run_group_tests_name("mem", tests, NULL, NULL);
}
