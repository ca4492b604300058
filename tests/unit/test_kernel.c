/* test_kernel.c - kernel_open detection by content, the ELF boot paths, initrd files and placement, PVH module 0. */
#include <asm/bootparam.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../src/arch/x86/pvh_abi.h"
#include "../../src/arch/x86/x86_boot.h"
#include "../fuzz/bzimage_builder.h"
#include "../fuzz/elf_builder.h"
#include "brisk/boot.h"
#include "brisk/kernel.h"
#include "brisk/layout.h"
#include "brisk/mem.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

static uint8_t img[0x2000] __attribute__((aligned(8)));
static uint8_t initrd[0x2345];
static char err[BOOT_ERR_MAX];
static struct kernel k;
static struct gmem mem;
static struct boot_entry entry;

static uint32_t *note_words(void)
{
	return (uint32_t *)(img + EB_NOTE_OFF); /* namesz, descsz, type, name, desc */
}

/* Appends a "Linux" note (LINUX_ELFNOTE_BUILD_SALT-like) after the Xen note; 4-byte alignment. */
static void add_linux_note(void)
{
	const uint32_t hdr[3] = {6, 4, 0x100};

	memcpy(img + EB_NOTE_OFF + EB_NOTE_SIZE, hdr, sizeof(hdr));
	memcpy(img + EB_NOTE_OFF + EB_NOTE_SIZE + 12, "Linux\0\0\0", 8);
	memcpy(img + EB_NOTE_OFF + EB_NOTE_SIZE + 20, "salt", 4);
	((Elf64_Phdr *)(img + sizeof(Elf64_Ehdr)))[1].p_filesz = EB_NOTE_SIZE + 24;
}

static int open_mem(size_t size, const uint8_t *rd, size_t rdsize)
{
	const struct kernel_files f = {.kernel_data = img,
				       .kernel_size = size,
				       .kernel_name = "test image",
				       .initrd_data = rd,
				       .initrd_size = rdsize};

	kernel_close(&k);
	err[0] = 0;
	return kernel_open(&k, &f, err, sizeof(err));
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
	return 0;
}

static void expect_open_fail(size_t size, int want, const char *field)
{
	int ret = open_mem(size, NULL, 0);

	if (ret != want || !strstr(err, field))
		print_error("ret %d (want %d), err \"%s\" (want \"%s\")\n", ret, want, err, field);
	assert_int_equal(ret, want);
	assert_non_null(strstr(err, field));
	assert_int_equal(k.image.size, 0); /* nothing stays open */
}

/* ---- detection ----------------------------------------------------------- */

static void test_detect_formats(void **state)
{
	(void)state;
	bb_build(img);
	assert_int_equal(open_mem(BB_SIZE, NULL, 0), 0);
	assert_int_equal(k.format, KERNEL_BZIMAGE);
	assert_true(k.is_linux);
	assert_string_equal(kernel_format_name(k.format), "bzImage");
	eb_elf64(img);
	assert_int_equal(open_mem(EB_SIZE, NULL, 0), 0);
	assert_int_equal(k.format, KERNEL_PVH);
	assert_false(k.is_linux);
	assert_string_equal(kernel_default_cmdline(&k), KERNEL_OTHER_CMDLINE);
	add_linux_note();
	assert_int_equal(open_mem(EB_SIZE, NULL, 0), 0);
	assert_int_equal(k.format, KERNEL_PVH);
	assert_true(k.is_linux);
	assert_string_equal(kernel_default_cmdline(&k), KERNEL_LINUX_CMDLINE);
	eb_elf64(img);
	note_words()[2] = 1; /* not XEN_ELFNOTE_PHYS32_ENTRY: a plain ELF */
	assert_int_equal(open_mem(EB_SIZE, NULL, 0), 0);
	assert_int_equal(k.format, KERNEL_ELF64);
	assert_int_equal(k.entry64, EB_ENTRY);
	kernel_close(&k);
	kernel_close(&k); /* idempotent */
}

static void test_detect_rejects(void **state)
{
	(void)state;
	memset(img, 0x41, sizeof(img));
	expect_open_fail(sizeof(img), -ENOEXEC, "test image: not a kernel brisk can boot: neither ELF");
	expect_open_fail(3, -ENOEXEC, "HdrS");
	expect_open_fail(0, -EINVAL, "test image: empty image");
	bb_build(img);
	bb_hdr(img)->version = 0x0200;
	expect_open_fail(BB_SIZE, -EINVAL, "test image: bzImage setup header: version 0x0200");
	eb_elf64(img);
	((Elf64_Ehdr *)img)->e_machine = EM_386;
	expect_open_fail(EB_SIZE, -EINVAL, "test image: ELF header: e_machine");
}

static void test_plain_elf_entry(void **state)
{
	(void)state;
	eb_elf64(img);
	note_words()[2] = 1;
	((Elf64_Ehdr *)img)->e_entry = 0xffffffff80000000ULL + EB_ENTRY; /* the virtual alias */
	assert_int_equal(open_mem(EB_SIZE, NULL, 0), 0);
	assert_int_equal(k.entry64, EB_ENTRY);
	((Elf64_Ehdr *)img)->e_entry = EB_PADDR + EB_MEMSZ;
	expect_open_fail(EB_SIZE, -EINVAL, "e_entry 0x102000 is not inside any PT_LOAD");
	eb_elf32(img);
	note_words()[2] = 1;
	expect_open_fail(EB_SIZE, -EINVAL, "ELF32 without a XEN_ELFNOTE_PHYS32_ENTRY");
}

/* ---- files ---------------------------------------------------------------- */

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void test_files(void **state)
{
	char kpath[] = "/tmp/brisk-test-kernel-XXXXXX", rpath[] = "/tmp/brisk-test-initrd-XXXXXX";
	struct kernel_files f = {.kernel = kpath, .initrd = rpath};

	(void)state;
	close(mkstemp(kpath));
	close(mkstemp(rpath));
	bb_build(img);
	write_file(kpath, img, BB_SIZE);
	write_file(rpath, initrd, sizeof(initrd));
	assert_int_equal(kernel_open(&k, &f, err, sizeof(err)), 0);
	assert_int_equal(k.format, KERNEL_BZIMAGE);
	assert_int_equal(k.initrd.size, sizeof(initrd));
	assert_string_equal(k.name, kpath);
	kernel_close(&k);
	write_file(rpath, "", 0);
	assert_int_equal(kernel_open(&k, &f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "initrd "));
	assert_non_null(strstr(err, "empty file"));
	assert_null(strstr(err, "kernel image"));
	assert_int_equal(k.image.size, 0);
	unlink(rpath);
	assert_int_equal(kernel_open(&k, &f, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no such file"));
	assert_non_null(strstr(err, "initrd /tmp/brisk-test-initrd-"));
	unlink(kpath);
	assert_int_equal(kernel_open(&k, &f, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "kernel image /tmp/brisk-test-kernel-"));
	f.initrd = NULL;
	f.initrd_data = initrd; /* in memory, but empty */
	f.kernel = NULL;
	f.kernel_data = img;
	f.kernel_size = BB_SIZE;
	assert_int_equal(kernel_open(&k, &f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "initrd (in memory): empty"));
}

/* ---- loading the ELF formats ---------------------------------------------- */

static void test_pvh_initrd_module(void **state)
{
	struct hvm_start_info si;
	struct hvm_modlist_entry m;

	(void)state;
	for (unsigned i = 0; i < sizeof(initrd); i++)
		initrd[i] = (uint8_t)(i * 13);
	eb_elf64(img);
	assert_int_equal(open_mem(EB_SIZE, initrd, sizeof(initrd)), 0);
	assert_int_equal(load(32 * MiB, NULL), 0);
	assert_int_equal(entry.mode, BOOT_PVH32);
	assert_int_equal(entry.rip, EB_ENTRY);
	assert_int_equal(k.initrd_addr, (32 * MiB - sizeof(initrd)) & ~0xfffULL);
	assert_memory_equal(gmem_ptr(&mem, k.initrd_addr, sizeof(initrd)), initrd, sizeof(initrd));
	assert_int_equal(gmem_read(&mem, LAYOUT_START_INFO, &si, sizeof(si)), 0);
	assert_int_equal(si.magic, XEN_HVM_START_MAGIC_VALUE);
	assert_int_equal(si.nr_modules, 1);
	assert_int_equal(si.modlist_paddr, LAYOUT_MODLIST);
	assert_int_equal(gmem_read(&mem, LAYOUT_MODLIST, &m, sizeof(m)), 0);
	assert_int_equal(m.paddr, k.initrd_addr);
	assert_int_equal(m.size, sizeof(initrd));
	assert_int_equal(m.cmdline_paddr, 0);
	assert_int_equal(m.reserved, 0);
	assert_string_equal((char *)gmem_ptr(&mem, LAYOUT_CMDLINE, 1), KERNEL_OTHER_CMDLINE);
}

static void test_pvh_no_initrd(void **state)
{
	struct hvm_start_info si;

	(void)state;
	eb_elf64(img);
	assert_int_equal(open_mem(EB_SIZE, NULL, 0), 0);
	assert_int_equal(load(16 * MiB, "x"), 0);
	assert_int_equal(k.initrd_addr, 0);
	assert_int_equal(gmem_read(&mem, LAYOUT_START_INFO, &si, sizeof(si)), 0);
	assert_int_equal(si.nr_modules, 0);
	assert_int_equal(si.modlist_paddr, 0);
}

static void test_plain_elf_zero_page(void **state)
{
	struct boot_params bp;
	uint64_t memsize = 3 * GiB + 16 * MiB, ram = 0;

	(void)state;
	eb_elf64(img);
	note_words()[2] = 1;
	assert_int_equal(open_mem(EB_SIZE, initrd, sizeof(initrd)), 0);
	assert_int_equal(load(memsize, "console=ttyS0 quiet"), 0);
	assert_int_equal(entry.mode, BOOT_LONG64);
	assert_int_equal(entry.rip, EB_ENTRY);
	assert_int_equal(entry.boot_info, LAYOUT_ZERO_PAGE);
	assert_int_equal(gmem_read(&mem, LAYOUT_ZERO_PAGE, &bp, sizeof(bp)), 0);
	assert_int_equal(bp.hdr.boot_flag, 0xaa55);
	assert_int_equal(bp.hdr.header, 0x53726448);
	assert_int_equal(bp.hdr.type_of_loader, 0xff);
	assert_int_equal(bp.hdr.kernel_alignment, 0x1000000);
	assert_int_equal(bp.hdr.cmd_line_ptr, LAYOUT_CMDLINE);
	assert_int_equal(bp.hdr.cmdline_size, strlen("console=ttyS0 quiet"));
	assert_int_equal(bp.hdr.vid_mode, 0xffff);
	/* initrd at the top of RAM below the MMIO hole */
	assert_int_equal(k.initrd_addr, (LAYOUT_MMIO_HOLE - sizeof(initrd)) & ~0xfffULL);
	assert_int_equal(bp.hdr.ramdisk_image, k.initrd_addr);
	assert_int_equal(bp.hdr.ramdisk_size, sizeof(initrd));
	assert_int_equal(bp.e820_entries, 4);
	for (unsigned i = 0; i < bp.e820_entries; i++) {
		if (i)
			assert_true(bp.e820_table[i].addr >= bp.e820_table[i - 1].addr + bp.e820_table[i - 1].size);
		if (bp.e820_table[i].type == 1)
			ram += bp.e820_table[i].size;
	}
	assert_int_equal(ram, memsize - (LAYOUT_LEGACY_END - LAYOUT_EBDA));
	assert_int_equal(bp.e820_table[3].addr, LAYOUT_RAM_ABOVE_4G);
}

static void test_elf_cmdline_limit(void **state)
{
	char *line = malloc(LAYOUT_CMDLINE_MAX + 1);

	(void)state;
	memset(line, 'b', LAYOUT_CMDLINE_MAX);
	line[LAYOUT_CMDLINE_MAX] = 0;
	eb_elf64(img);
	assert_int_equal(open_mem(EB_SIZE, NULL, 0), 0);
	assert_int_equal(load(16 * MiB, line), -E2BIG);
	assert_non_null(strstr(err, "65536 bytes"));
	free(line);
}

/* initrd_place directly: the algorithm's edges. */
static void test_initrd_place(void **state)
{
	(void)state;
	gmem_destroy(&mem);
	assert_int_equal(gmem_init(&mem, 64 * MiB, 0), 0);
	memset(&k, 0, sizeof(k));
	snprintf(k.initrd_name, sizeof(k.initrd_name), "rd");
	k.kernel_start = 16 * MiB;
	k.kernel_end = 32 * MiB + 1; /* not page-aligned: the initrd starts past it anyway */
	k.initrd.size = 32 * MiB - 0x1000;
	assert_int_equal(initrd_place(&k, &mem, UINT64_MAX, err, sizeof(err)), 0);
	assert_int_equal(k.initrd_addr, 32 * MiB + 0x1000);
	k.initrd.size = 32 * MiB; /* does not fit above, nor in the 15 MiB below */
	assert_int_equal(initrd_place(&k, &mem, UINT64_MAX, err, sizeof(err)), -ENOMEM);
	assert_non_null(strstr(err, "initrd rd is 33554432 bytes (32 MiB)"));
	k.initrd.size = 15 * MiB; /* fits only below the kernel, from 1 MiB */
	assert_int_equal(initrd_place(&k, &mem, 20 * MiB, err, sizeof(err)), 0);
	assert_int_equal(k.initrd_addr, 1 * MiB);
	k.initrd.size = 15 * MiB + 1;
	assert_int_equal(initrd_place(&k, &mem, 20 * MiB, err, sizeof(err)), -ENOMEM);
	assert_non_null(strstr(err, "initrd_addr_max"));
	k.initrd.size = 0;
	assert_int_equal(initrd_place(&k, &mem, UINT64_MAX, err, sizeof(err)), 0);
	assert_int_equal(k.initrd_addr, 0);
	memset(&k, 0, sizeof(k));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_detect_formats, teardown),
	    cmocka_unit_test_teardown(test_detect_rejects, teardown),
	    cmocka_unit_test_teardown(test_plain_elf_entry, teardown),
	    cmocka_unit_test_teardown(test_files, teardown),
	    cmocka_unit_test_teardown(test_pvh_initrd_module, teardown),
	    cmocka_unit_test_teardown(test_pvh_no_initrd, teardown),
	    cmocka_unit_test_teardown(test_plain_elf_zero_page, teardown),
	    cmocka_unit_test_teardown(test_elf_cmdline_limit, teardown),
	    cmocka_unit_test_teardown(test_initrd_place, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
