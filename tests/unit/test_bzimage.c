/* test_bzimage.c - bzImage setup header validation (each rejection names its field), placement, loading, zero page. */
#include <asm/bootparam.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../src/arch/x86/x86_boot.h"
#include "../fuzz/bzimage_builder.h"
#include "brisk/boot.h"
#include "brisk/kernel.h"
#include "brisk/layout.h"
#include "brisk/mem.h"

#define MiB (1ULL << 20)

static uint8_t img[BB_SIZE + 0x10000];
static char err[BOOT_ERR_MAX];
static struct bzimage_info bz;

/* bzimage_parse(img, size) must fail with `want` and an err that mentions `field`. */
static void expect_fail(size_t size, int want, const char *field)
{
	err[0] = 0;
	int ret = bzimage_parse(img, size, &bz, err, sizeof(err));
	if (ret != want || !strstr(err, field))
		print_error("ret %d (want %d), err \"%s\" (want \"%s\")\n", ret, want, err, field);
	assert_int_equal(ret, want);
	assert_non_null(strstr(err, field));
}

static void test_valid(void **state)
{
	(void)state;
	bb_build(img);
	assert_int_equal(bzimage_parse(img, BB_SIZE, &bz, err, sizeof(err)), 0);
	assert_int_equal(bz.version, BB_VERSION);
	assert_int_equal(bz.hdr_len, BB_HDR_END - 0x1f1);
	assert_int_equal(bz.setup_size, BB_SETUP_SIZE);
	assert_int_equal(bz.pm_size, BB_PM_SIZE);
	assert_int_equal(bz.init_size, BB_INIT_SIZE);
	assert_int_equal(bz.load_addr, BB_PREF);
	assert_int_equal(bz.window, BB_INIT_SIZE);
	assert_int_equal(bz.cmdline_size, BB_CMDLINE_MAX);
	assert_int_equal(bz.initrd_addr_max, BB_INITRD_MAX);
	assert_true(bz.relocatable);
}

static void test_not_bzimage(void **state)
{
	(void)state;
	bb_build(img);
	memcpy(img + 0x202, "HdrT", 4);
	expect_fail(BB_SIZE, -ENOEXEC, "HdrS");
	bb_build(img);
	expect_fail(0x205, -ENOEXEC, "too short");
	assert_int_equal(bzimage_parse(NULL, 0, &bz, NULL, 0), -ENOEXEC); /* err is optional */
}

static void test_bad_ident(void **state)
{
	(void)state;
	bb_build(img);
	bb_hdr(img)->boot_flag = 0x55aa;
	expect_fail(BB_SIZE, -EINVAL, "boot_flag 0x55aa");
	bb_build(img);
	bb_hdr(img)->version = 0x020b;
	expect_fail(BB_SIZE, -EINVAL, "version 0x020b (boot protocol 2.11)");
	bb_build(img);
	img[0x201] = 0xff; /* header would end at 0x301, past its slot in boot_params */
	expect_fail(BB_SIZE, -EINVAL, "end at 0x301");
	img[0x201] = 0x10;
	expect_fail(BB_SIZE, -EINVAL, "end at 0x212");
	bb_build(img);
	img[0x200] = 0xe9;
	expect_fail(BB_SIZE, -EINVAL, "jump 0xe9");
	bb_build(img);
	expect_fail(0x260, -EINVAL, "setup header ends at 0x26c");
}

static void test_bad_flags(void **state)
{
	(void)state;
	bb_build(img);
	bb_hdr(img)->xloadflags = XLF_CAN_BE_LOADED_ABOVE_4G;
	expect_fail(BB_SIZE, -EINVAL, "XLF_KERNEL_64");
	bb_build(img);
	bb_hdr(img)->loadflags = 0;
	expect_fail(BB_SIZE, -EINVAL, "LOADED_HIGH");
}

static void test_bad_sizes(void **state)
{
	(void)state;
	bb_build(img);
	bb_hdr(img)->setup_sects = 64; /* 65 * 512 > 32 KiB */
	expect_fail(sizeof(img), -EINVAL, "setup_sects 64");
	bb_hdr(img)->setup_sects = 255;
	expect_fail(sizeof(img), -EINVAL, "setup_sects 255");
	bb_build(img);
	expect_fail(BB_SETUP_SIZE, -EINVAL, "truncated bzImage: setup_sects 1");
	bb_build(img);
	bb_hdr(img)->syssize = 0;
	expect_fail(BB_SIZE, -EINVAL, "syssize 0x0");
	bb_build(img);
	expect_fail(BB_SIZE - 16, -EINVAL, "syssize 0x100 (0x1000 bytes)"); /* truncated payload */
	bb_build(img);
	bb_hdr(img)->syssize = 0xffffffff; /* * 16 must not wrap */
	expect_fail(BB_SIZE, -EINVAL, "syssize 0xffffffff");
	bb_build(img);
	bb_hdr(img)->init_size = BB_PM_SIZE - 1;
	expect_fail(BB_SIZE, -EINVAL, "init_size 0xfff");
}

/* setup_sects 0 means 4 (boot.rst note 1). */
static void test_setup_sects_zero(void **state)
{
	(void)state;
	memset(img, 0, sizeof(img));
	bb_build(img);
	memmove(img + 5 * 512, img + BB_SETUP_SIZE, BB_PM_SIZE);
	bb_hdr(img)->setup_sects = 0;
	assert_int_equal(bzimage_parse(img, 5 * 512 + BB_PM_SIZE, &bz, err, sizeof(err)), 0);
	assert_int_equal(bz.setup_size, 5 * 512);
	assert_int_equal(bz.pm_size, BB_PM_SIZE);
}

static void test_bad_placement(void **state)
{
	(void)state;
	bb_build(img);
	bb_hdr(img)->kernel_alignment = 0x300000;
	expect_fail(BB_SIZE, -EINVAL, "kernel_alignment 0x300000");
	bb_hdr(img)->kernel_alignment = 0;
	expect_fail(BB_SIZE, -EINVAL, "kernel_alignment 0x0");
	bb_hdr(img)->kernel_alignment = 0x80000000u;
	expect_fail(BB_SIZE, -EINVAL, "kernel_alignment 0x80000000");
	bb_build(img);
	bb_hdr(img)->pref_address = 0x1000;
	expect_fail(BB_SIZE, -EINVAL, "pref_address 0x1000");
	bb_hdr(img)->pref_address = 0xd0000000;
	expect_fail(BB_SIZE, -EINVAL, "pref_address 0xd0000000");
	bb_hdr(img)->pref_address = UINT64_MAX;
	expect_fail(BB_SIZE, -EINVAL, "pref_address 0xffffffffffffffff");
	bb_build(img);
	bb_hdr(img)->pref_address = LAYOUT_MMIO_HOLE - 0x100000;
	expect_fail(BB_SIZE, -EINVAL, "past the MMIO hole");
	bb_build(img);
	bb_hdr(img)->relocatable_kernel = 0; /* a fixed kernel runs at pref_address, which must be page-aligned */
	bb_hdr(img)->pref_address = 0x1000800;
	expect_fail(BB_SIZE, -EINVAL, "load address 0x1000800 (pref_address) + init_size 0x200000 is unaligned");
}

/* Relocatable: pref_address rounded up to kernel_alignment; pref 0 means 1 MiB. Fixed: pref_address as is. */
static void test_load_address(void **state)
{
	(void)state;
	bb_build(img);
	bb_hdr(img)->pref_address = 0x1100000;
	assert_int_equal(bzimage_parse(img, BB_SIZE, &bz, err, sizeof(err)), 0);
	assert_int_equal(bz.load_addr, 0x1200000);
	bb_hdr(img)->pref_address = 0;
	assert_int_equal(bzimage_parse(img, BB_SIZE, &bz, err, sizeof(err)), 0);
	assert_int_equal(bz.load_addr, 0x200000);
	bb_hdr(img)->relocatable_kernel = 0;
	assert_int_equal(bzimage_parse(img, BB_SIZE, &bz, err, sizeof(err)), 0);
	assert_int_equal(bz.load_addr, 0x100000);
	bb_hdr(img)->pref_address = 0x1100000;
	assert_int_equal(bzimage_parse(img, BB_SIZE, &bz, err, sizeof(err)), 0);
	assert_int_equal(bz.load_addr, 0x1100000);
}

/* ---- loading ------------------------------------------------------------- */

static struct gmem mem;
static struct kernel k;
static struct boot_entry entry;
static uint8_t initrd[0x3456];

static void open_buf(size_t size, const uint8_t *rd, size_t rdsize)
{
	const struct kernel_files f = {.kernel_data = img,
				       .kernel_size = size,
				       .kernel_name = "test bzImage",
				       .initrd_data = rd,
				       .initrd_size = rdsize};

	if (kernel_open(&k, &f, err, sizeof(err)))
		print_error("kernel_open: %s\n", err);
	assert_int_equal(k.format, KERNEL_BZIMAGE);
}

static int load(uint64_t memsize, const char *cmdline)
{
	gmem_destroy(&mem);
	assert_int_equal(gmem_init(&mem, memsize, 0), 0);
	err[0] = 0;
	return kernel_load(&k, &mem, cmdline, &entry, err, sizeof(err));
}

static int teardown(void **state)
{
	(void)state;
	kernel_close(&k);
	gmem_destroy(&mem);
	memset(&mem, 0, sizeof(mem));
	return 0;
}

static void read_bp(struct boot_params *bp)
{
	assert_int_equal(gmem_read(&mem, LAYOUT_ZERO_PAGE, bp, sizeof(*bp)), 0);
}

/* E820: sorted, non-overlapping, RAM totalling memory minus the legacy hole. */
static void check_e820(const struct boot_params *bp, uint64_t memsize)
{
	uint64_t ram = 0, end = 0;

	assert_in_range(bp->e820_entries, 3, 4);
	for (unsigned i = 0; i < bp->e820_entries; i++) {
		const struct boot_e820_entry *e = &bp->e820_table[i];

		assert_true(e->addr >= end && e->size > 0);
		end = e->addr + e->size;
		if (e->type == 1)
			ram += e->size;
	}
	assert_int_equal(ram, memsize - (LAYOUT_LEGACY_END - LAYOUT_EBDA));
}

static void test_load_zero_page(void **state)
{
	static const char cmd[] = "console=ttyS0 root=/dev/vda";
	struct boot_params bp;
	char line[64];
	uint8_t want_hdr[BB_HDR_END - 0x1f1];

	(void)state;
	bb_build(img);
	memcpy(want_hdr, img + 0x1f1, sizeof(want_hdr));
	open_buf(BB_SIZE, NULL, 0);
	assert_int_equal(load(64 * MiB, cmd), 0);
	assert_int_equal(entry.mode, BOOT_LONG64);
	assert_int_equal(entry.rip, BB_PREF + 0x200);
	assert_int_equal(entry.boot_info, LAYOUT_ZERO_PAGE);
	assert_memory_equal(gmem_ptr(&mem, BB_PREF, BB_PM_SIZE), img + BB_SETUP_SIZE, BB_PM_SIZE);
	read_bp(&bp);
	assert_int_equal(bp.hdr.type_of_loader, 0xff);
	assert_int_equal(bp.hdr.vid_mode, 0xffff);
	assert_int_equal(bp.hdr.loadflags, LOADED_HIGH | CAN_USE_HEAP);
	assert_int_equal(bp.hdr.heap_end_ptr, 0xe000 - 0x200);
	assert_int_equal(bp.hdr.code32_start, BB_PREF);
	assert_int_equal(bp.hdr.cmd_line_ptr, LAYOUT_CMDLINE);
	assert_int_equal(bp.ext_cmd_line_ptr, 0);
	assert_int_equal(bp.hdr.ramdisk_image, 0);
	assert_int_equal(bp.hdr.ramdisk_size, 0);
	assert_int_equal(bp.sentinel, 0);
	assert_int_equal(bp.hdr.hardware_subarch, 0);
	/* the rest of the header is the image's own */
	assert_int_equal(bp.hdr.header, 0x53726448);
	assert_int_equal(bp.hdr.init_size, BB_INIT_SIZE);
	assert_int_equal(bp.hdr.pref_address, BB_PREF);
	assert_memory_equal((uint8_t *)&bp + 0x1f1, want_hdr, 0x1fa - 0x1f1); /* through ram_size */
	assert_memory_equal((uint8_t *)&bp + 0x1fc, want_hdr + 0x1fc - 0x1f1,
			    0x210 - 0x1fc); /* root_dev..kernel_version */
	assert_memory_equal((uint8_t *)&bp + 0x22c, want_hdr + 0x22c - 0x1f1,
			    0x23c - 0x22c); /* initrd_addr_max..cmdline_size */
	check_e820(&bp, 64 * MiB);
	assert_int_equal(gmem_read(&mem, LAYOUT_CMDLINE, line, sizeof(cmd)), 0);
	assert_string_equal(line, cmd);
	assert_int_equal(x86_gdt_entry(BOOT_LONG64, 2), 0x00af9b000000ffffULL);
	assert_int_equal(*(uint64_t *)gmem_ptr(&mem, LAYOUT_GDT + 16, 8), 0x00af9b000000ffffULL);
	assert_int_equal(*(uint64_t *)gmem_ptr(&mem, LAYOUT_PML4, 8) & ~0xfffULL, LAYOUT_PDPT);
}

/* boot.rst setup_data: one SETUP_RNG_SEED entry of 64 fresh host bytes per boot, in its layout.h slot. */
static void rng_seed_of(struct setup_data *h, uint8_t *seed)
{
	struct boot_params bp;

	read_bp(&bp);
	assert_int_equal(bp.hdr.setup_data, LAYOUT_SETUP_DATA);
	assert_int_equal(gmem_read(&mem, LAYOUT_SETUP_DATA, h, sizeof(*h)), 0);
	assert_int_equal(h->type, SETUP_RNG_SEED);
	assert_int_equal(h->len, 64);
	assert_int_equal(h->next, 0);
	assert_int_equal(gmem_read(&mem, LAYOUT_SETUP_DATA + sizeof(*h), seed, 64), 0);
}

static void test_rng_seed(void **state)
{
	struct setup_data h;
	uint8_t a[64], b[64], zero[64] = {0};
	struct boot_params bp;

	(void)state;
	bb_build(img);
	open_buf(BB_SIZE, NULL, 0);
	assert_int_equal(load(64 * MiB, NULL), 0);
	rng_seed_of(&h, a);
	assert_memory_not_equal(a, zero, sizeof(a));
	kernel_close(&k);
	open_buf(BB_SIZE, NULL, 0);
	assert_int_equal(load(64 * MiB, NULL), 0); /* another boot: other bytes */
	rng_seed_of(&h, b);
	assert_memory_not_equal(a, b, sizeof(a));
	read_bp(&bp); /* the seed's slot is RAM in the map Linux gets (it reserves setup_data itself) */
	assert_int_equal(bp.e820_table[0].type, 1);
	assert_true(bp.e820_table[0].addr <= LAYOUT_SETUP_DATA &&
		    LAYOUT_SETUP_DATA + LAYOUT_SETUP_DATA_SIZE <= bp.e820_table[0].addr + bp.e820_table[0].size);
}

static void test_default_cmdline(void **state)
{
	char line[sizeof(KERNEL_LINUX_CMDLINE)];

	(void)state;
	bb_build(img);
	open_buf(BB_SIZE, NULL, 0);
	assert_true(k.is_linux);
	assert_string_equal(kernel_default_cmdline(&k), KERNEL_LINUX_CMDLINE);
	assert_int_equal(load(64 * MiB, NULL), 0);
	assert_int_equal(gmem_read(&mem, LAYOUT_CMDLINE, line, sizeof(line)), 0);
	assert_string_equal(line, KERNEL_LINUX_CMDLINE);
}

static void test_cmdline_too_long(void **state)
{
	char *line = malloc(BB_CMDLINE_MAX + 2);

	(void)state;
	memset(line, 'a', BB_CMDLINE_MAX + 1);
	line[BB_CMDLINE_MAX] = 0;
	bb_build(img);
	open_buf(BB_SIZE, NULL, 0);
	assert_int_equal(load(64 * MiB, line), 0); /* exactly cmdline_size: fine */
	line[BB_CMDLINE_MAX] = 'a';
	line[BB_CMDLINE_MAX + 1] = 0;
	assert_int_equal(load(64 * MiB, line), -E2BIG);
	assert_non_null(strstr(err, "2048 bytes"));
	assert_non_null(strstr(err, "at most 2047"));
	free(line);
}

static void test_memory_too_small(void **state)
{
	(void)state;
	bb_build(img);
	open_buf(BB_SIZE, NULL, 0);
	assert_int_equal(load(17 * MiB, NULL), -ENOMEM);
	assert_non_null(strstr(err, "needs [0x1000000, 0x1200000)"));
	assert_non_null(strstr(err, "ends at 0x1100000"));
	/* nothing was written: neither the zero page nor the command line */
	assert_null(memchr(gmem_ptr(&mem, LAYOUT_ZERO_PAGE, 0x1000), 0xff, 0x1000));
	assert_int_equal(*(uint8_t *)gmem_ptr(&mem, LAYOUT_CMDLINE, 1), 0);
}

static void test_initrd_highest(void **state)
{
	struct boot_params bp;

	(void)state;
	for (unsigned i = 0; i < sizeof(initrd); i++)
		initrd[i] = (uint8_t)(i ^ 0x5a);
	bb_build(img);
	open_buf(BB_SIZE, initrd, sizeof(initrd));
	assert_int_equal(load(64 * MiB, NULL), 0);
	assert_int_equal(k.initrd_addr, (64 * MiB - sizeof(initrd)) & ~0xfffULL);
	assert_memory_equal(gmem_ptr(&mem, k.initrd_addr, sizeof(initrd)), initrd, sizeof(initrd));
	read_bp(&bp);
	assert_int_equal(bp.hdr.ramdisk_image, k.initrd_addr);
	assert_int_equal(bp.hdr.ramdisk_size, sizeof(initrd));
	assert_int_equal(bp.ext_ramdisk_image, 0);
	assert_int_equal(bp.ext_ramdisk_size, 0);
}

/* initrd_addr_max is the highest byte the initrd may occupy. */
static void test_initrd_addr_max(void **state)
{
	(void)state;
	bb_build(img);
	bb_hdr(img)->initrd_addr_max = 0x1bfffff;
	open_buf(BB_SIZE, initrd, sizeof(initrd));
	assert_int_equal(load(64 * MiB, NULL), 0);
	assert_int_equal(k.initrd_addr, (0x1c00000 - sizeof(initrd)) & ~0xfffULL);
	assert_true(k.initrd_addr + sizeof(initrd) - 1 <= 0x1bfffff);
	assert_true(k.initrd_addr >= BB_PREF + BB_INIT_SIZE);
	/* no room above the kernel's window below the limit: it goes below the kernel */
	kernel_close(&k);
	bb_hdr(img)->initrd_addr_max = 0x1200fff;
	open_buf(BB_SIZE, initrd, sizeof(initrd));
	assert_int_equal(load(64 * MiB, NULL), 0);
	assert_int_equal(k.initrd_addr, (BB_PREF - sizeof(initrd)) & ~0xfffULL);
}

static void test_initrd_too_big(void **state)
{
	static uint8_t big[40 << 20];

	(void)state;
	bb_build(img);
	open_buf(BB_SIZE, big, sizeof(big));
	assert_int_equal(load(48 * MiB, NULL), -ENOMEM);
	assert_non_null(strstr(err, "41943040 bytes (40 MiB)"));
	assert_non_null(strstr(err, "--memory is 48 MiB"));
	assert_int_equal(load(64 * MiB, NULL), 0);
	assert_true(k.initrd_addr >= BB_PREF + BB_INIT_SIZE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_valid),
	    cmocka_unit_test(test_not_bzimage),
	    cmocka_unit_test(test_bad_ident),
	    cmocka_unit_test(test_bad_flags),
	    cmocka_unit_test(test_bad_sizes),
	    cmocka_unit_test(test_setup_sects_zero),
	    cmocka_unit_test(test_bad_placement),
	    cmocka_unit_test(test_load_address),
	    cmocka_unit_test_teardown(test_load_zero_page, teardown),
	    cmocka_unit_test_teardown(test_rng_seed, teardown),
	    cmocka_unit_test_teardown(test_default_cmdline, teardown),
	    cmocka_unit_test_teardown(test_cmdline_too_long, teardown),
	    cmocka_unit_test_teardown(test_memory_too_small, teardown),
	    cmocka_unit_test_teardown(test_initrd_highest, teardown),
	    cmocka_unit_test_teardown(test_initrd_addr_max, teardown),
	    cmocka_unit_test_teardown(test_initrd_too_big, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
