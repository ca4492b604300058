/* test_elf.c - kernel image files, ELF validation (every rejection names its field) and loading into guest RAM. */
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

#include "../fuzz/elf_builder.h"
#include "brisk/boot.h"
#include "brisk/layout.h"
#include "brisk/mem.h"

static uint8_t img[EB_SIZE] __attribute__((aligned(8)));
static char err[BOOT_ERR_MAX];
static struct elf_info info;

static Elf64_Ehdr *eh64(void)
{
	return (Elf64_Ehdr *)img;
}

static Elf64_Phdr *ph64(unsigned i)
{
	return (Elf64_Phdr *)(img + sizeof(Elf64_Ehdr)) + i;
}

static uint32_t *note_words(void)
{
	return (uint32_t *)(img + EB_NOTE_OFF); /* namesz, descsz, type, name, desc */
}

/* elf_parse(img, size) must fail with `want` and an err that mentions `field`. */
static void expect_fail(size_t size, int want, const char *field)
{
	err[0] = 0;
	int ret = elf_parse(img, size, &info, err, sizeof(err));
	if (ret != want || !strstr(err, field))
		print_error("ret %d (want %d), err \"%s\" (want \"%s\")\n", ret, want, err, field);
	assert_int_equal(ret, want);
	assert_non_null(strstr(err, field));
}

static void assert_valid(int cls)
{
	assert_int_equal(elf_parse(img, EB_SIZE, &info, err, sizeof(err)), 0);
	assert_int_equal(info.elf_class, cls);
	assert_int_equal(info.entry, EB_ENTRY);
	assert_true(info.has_pvh);
	assert_int_equal(info.pvh_entry, EB_ENTRY);
	assert_int_equal(info.nr_segments, 1);
	assert_int_equal(info.seg[0].paddr, EB_PADDR);
	assert_int_equal(info.seg[0].offset, EB_CODE_OFF);
	assert_int_equal(info.seg[0].filesz, EB_CODE_SIZE);
	assert_int_equal(info.seg[0].memsz, EB_MEMSZ);
	assert_int_equal(info.lowest, EB_PADDR);
	assert_int_equal(info.highest, EB_PADDR + EB_MEMSZ);
}

static void test_valid_elf64(void **state)
{
	(void)state;
	eb_elf64(img);
	assert_valid(64);
}

static void test_valid_elf32(void **state)
{
	(void)state;
	eb_elf32(img);
	assert_valid(32);
}

/* Linux's head.S emits the entry with _ASM_PTR: 8 bytes on x86-64, 8-byte aligned notes are also legal. */
static void test_pvh_note_desc8(void **state)
{
	uint64_t entry = EB_ENTRY + 4;

	(void)state;
	eb_elf64(img);
	note_words()[1] = 8;
	memcpy(img + EB_NOTE_OFF + 16, &entry, 8);
	ph64(1)->p_filesz = 24;
	assert_int_equal(elf_parse(img, EB_SIZE, &info, err, sizeof(err)), 0);
	assert_int_equal(info.pvh_entry, EB_ENTRY + 4);
	ph64(1)->p_align = 8; /* desc at align8(12 + 4) = 16: same bytes */
	assert_int_equal(elf_parse(img, EB_SIZE, &info, err, sizeof(err)), 0);
	assert_int_equal(info.pvh_entry, EB_ENTRY + 4);
}

static void test_no_note_is_not_pvh(void **state)
{
	(void)state;
	eb_elf64(img);
	ph64(1)->p_type = PT_NULL;
	assert_int_equal(elf_parse(img, EB_SIZE, &info, err, sizeof(err)), 0);
	assert_false(info.has_pvh);
	note_words()[2] = 17; /* another Xen note type */
	ph64(1)->p_type = PT_NOTE;
	assert_int_equal(elf_parse(img, EB_SIZE, &info, err, sizeof(err)), 0);
	assert_false(info.has_pvh);
}

static void test_not_elf(void **state)
{
	(void)state;
	eb_elf64(img);
	expect_fail(0, -ENOEXEC, "empty");
	assert_int_equal(elf_parse(NULL, 0, &info, err, sizeof(err)), -ENOEXEC);
	expect_fail(3, -ENOEXEC, "magic");
	img[1] = 'e';
	expect_fail(EB_SIZE, -ENOEXEC, "magic");
	memcpy(img, "MZ\x90\x00", 4); /* a bzImage starts with the PE stub */
	expect_fail(EB_SIZE, -ENOEXEC, "magic");
}

static void test_short_header(void **state)
{
	(void)state;
	eb_elf64(img);
	expect_fail(10, -EINVAL, "e_ident");
	expect_fail(sizeof(Elf64_Ehdr) - 1, -EINVAL, "truncated ELF header");
	eb_elf32(img);
	expect_fail(sizeof(Elf32_Ehdr) - 1, -EINVAL, "truncated ELF header");
}

static void test_bad_ident(void **state)
{
	(void)state;
	eb_elf64(img);
	img[EI_CLASS] = 3;
	expect_fail(EB_SIZE, -EINVAL, "EI_CLASS");
	eb_elf64(img);
	img[EI_DATA] = ELFDATA2MSB;
	expect_fail(EB_SIZE, -EINVAL, "EI_DATA");
	eb_elf64(img);
	img[EI_VERSION] = 0;
	expect_fail(EB_SIZE, -EINVAL, "EI_VERSION");
	eb_elf64(img);
	eh64()->e_machine = EM_386;
	expect_fail(EB_SIZE, -EINVAL, "e_machine");
	eb_elf32(img);
	((Elf32_Ehdr *)img)->e_machine = EM_X86_64;
	expect_fail(EB_SIZE, -EINVAL, "e_machine");
	eb_elf64(img);
	eh64()->e_type = ET_DYN;
	expect_fail(EB_SIZE, -EINVAL, "e_type");
}

static void test_bad_phdr_table(void **state)
{
	(void)state;
	eb_elf64(img);
	eh64()->e_ehsize = 52;
	expect_fail(EB_SIZE, -EINVAL, "e_ehsize");
	eb_elf64(img);
	eh64()->e_phentsize = 32;
	expect_fail(EB_SIZE, -EINVAL, "e_phentsize");
	eb_elf64(img);
	eh64()->e_phnum = 0;
	expect_fail(EB_SIZE, -EINVAL, "e_phnum");
	eh64()->e_phnum = 0xffff; /* PN_XNUM */
	expect_fail(EB_SIZE, -EINVAL, "e_phnum");
	eb_elf64(img);
	eh64()->e_phoff = EB_SIZE;
	expect_fail(EB_SIZE, -EINVAL, "e_phoff");
	eh64()->e_phoff = EB_SIZE - sizeof(Elf64_Phdr); /* first fits, second does not */
	expect_fail(EB_SIZE, -EINVAL, "e_phoff");
	eh64()->e_phoff = UINT64_MAX - 8; /* e_phoff + table wraps */
	expect_fail(EB_SIZE, -EINVAL, "e_phoff");
	eb_elf64(img);
	expect_fail(sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr), -EINVAL, "e_phoff"); /* truncated table */
}

static void test_bad_load_segment(void **state)
{
	(void)state;
	eb_elf64(img);
	ph64(0)->p_filesz = EB_MEMSZ + 1;
	expect_fail(EB_SIZE, -EINVAL, "filesz 0x2001 > memsz 0x2000");
	eb_elf64(img);
	ph64(0)->p_offset = EB_SIZE - 0x10;
	expect_fail(EB_SIZE, -EINVAL, "program header 0: segment offset 0x10f0 + filesz 0x100 beyond file size 0x1100");
	ph64(0)->p_offset = UINT64_MAX - 0x10; /* offset + filesz wraps */
	expect_fail(EB_SIZE, -EINVAL, "offset");
	eb_elf64(img);
	expect_fail(EB_SIZE - 1, -EINVAL, "beyond file size"); /* truncated file */
	eb_elf64(img);
	ph64(0)->p_paddr = UINT64_MAX - 0x10;
	expect_fail(EB_SIZE, -EINVAL, "paddr");
	ph64(0)->p_paddr = (1ULL << 52) - 0x1000; /* fits 64 bits, not 52 */
	expect_fail(EB_SIZE, -EINVAL, "paddr");
}

static void add_load(unsigned i, uint64_t paddr, uint64_t memsz)
{
	*ph64(i) = (Elf64_Phdr){PT_LOAD, PF_R | PF_W, EB_CODE_OFF, paddr, paddr, 0, memsz, 0x1000};
}

static void test_overlapping_segments(void **state)
{
	(void)state;
	eb_elf64(img);
	eh64()->e_phnum = 3;
	add_load(2, EB_PADDR + EB_MEMSZ - 1, 0x1000);
	expect_fail(EB_SIZE, -EINVAL, "overlaps");
	add_load(2, EB_PADDR - 0x1000, 0x1001);
	expect_fail(EB_SIZE, -EINVAL, "overlaps");
	add_load(2, EB_PADDR + EB_MEMSZ, 0x1000); /* adjacent is fine */
	assert_int_equal(elf_parse(img, EB_SIZE, &info, err, sizeof(err)), 0);
	assert_int_equal(info.nr_segments, 2);
	assert_int_equal(info.highest, EB_PADDR + EB_MEMSZ + 0x1000);
	add_load(2, 0x40000000, 0); /* empty segments are ignored, even when "overlapping" */
	assert_int_equal(elf_parse(img, EB_SIZE, &info, err, sizeof(err)), 0);
	assert_int_equal(info.nr_segments, 1);
}

static void test_too_many_segments(void **state)
{
	Elf64_Phdr *ph = (Elf64_Phdr *)(img + EB_FREE_OFF);

	(void)state;
	eb_elf64(img);
	eh64()->e_phoff = EB_FREE_OFF;
	eh64()->e_phnum = ELF_MAX_SEGMENTS + 1;
	for (unsigned i = 0; i <= ELF_MAX_SEGMENTS; i++)
		ph[i] = (Elf64_Phdr){PT_LOAD, PF_R | PF_X, 0, 0, EB_PADDR + i * 0x1000ULL, 0, 0x1000, 0};
	expect_fail(EB_SIZE, -EINVAL, "more than 16");
	eh64()->e_phnum = ELF_MAX_SEGMENTS;
	assert_int_equal(elf_parse(img, EB_SIZE, &info, err, sizeof(err)), 0);
	assert_int_equal(info.nr_segments, ELF_MAX_SEGMENTS);
}

static void test_bad_notes(void **state)
{
	(void)state;
	eb_elf64(img);
	note_words()[0] = 0xffffffff;
	expect_fail(EB_SIZE, -EINVAL, "namesz 4294967295");
	eb_elf64(img);
	note_words()[1] = 0xfffffff0;
	expect_fail(EB_SIZE, -EINVAL, "descsz 4294967280");
	eb_elf64(img);
	ph64(1)->p_filesz = 8;
	expect_fail(EB_SIZE, -EINVAL, "truncated note");
	ph64(1)->p_filesz = 18; /* header and name, half the descriptor */
	expect_fail(EB_SIZE, -EINVAL, "run past the segment");
	eb_elf64(img);
	ph64(1)->p_offset = EB_SIZE - 4;
	expect_fail(EB_SIZE, -EINVAL, "beyond file size");
	eb_elf64(img);
	note_words()[1] = 2;
	expect_fail(EB_SIZE, -EINVAL, "descsz 2");
}

static void test_bad_pvh_entry(void **state)
{
	uint64_t above = 0x100000000ULL;

	(void)state;
	eb_elf64(img);
	note_words()[4] = EB_PADDR + EB_MEMSZ; /* one past the segment */
	expect_fail(EB_SIZE, -EINVAL, "PHYS32_ENTRY 0x102000");
	eb_elf64(img);
	ph64(0)->p_flags = PF_R | PF_W; /* data, not code */
	expect_fail(EB_SIZE, -EINVAL, "PF_X");
	eb_elf64(img);
	note_words()[1] = 8;
	memcpy(img + EB_NOTE_OFF + 16, &above, 8);
	ph64(1)->p_filesz = 24;
	expect_fail(EB_SIZE, -EINVAL, "above 4 GiB");
}

static void test_no_load_segment(void **state)
{
	(void)state;
	eb_elf64(img);
	ph64(0)->p_type = PT_NULL;
	expect_fail(EB_SIZE, -EINVAL, "no non-empty PT_LOAD");
	eb_elf64(img);
	assert_int_equal(elf_parse(img, 0, &info, NULL, 0), -ENOEXEC); /* err is optional */
}

/* ---- elf_load ------------------------------------------------------------ */

static int mem_setup(void **state)
{
	static struct gmem mem;

	if (gmem_init(&mem, 16ULL << 20, 0))
		return -1;
	*state = &mem;
	return 0;
}

static int mem_teardown(void **state)
{
	gmem_destroy(*state);
	return 0;
}

static void expect_load_fail(const struct gmem *mem, const char *field)
{
	err[0] = 0;
	int ret = elf_load(&info, &(struct image){.data = img, .size = EB_SIZE}, mem, err, sizeof(err));
	if (ret != -EINVAL || !strstr(err, field))
		print_error("ret %d, err \"%s\" (want \"%s\")\n", ret, err, field);
	assert_int_equal(ret, -EINVAL);
	assert_non_null(strstr(err, field));
}

static void test_load_copies_and_zero_fills(void **state)
{
	const struct gmem *mem = *state;
	uint8_t *ram = gmem_ptr(mem, EB_PADDR, EB_MEMSZ);

	memset(ram, 0xaa, EB_MEMSZ);
	eb_elf64(img);
	assert_int_equal(elf_parse(img, EB_SIZE, &info, err, sizeof(err)), 0);
	assert_int_equal(elf_load(&info, &(struct image){.data = img, .size = EB_SIZE}, mem, err, sizeof(err)), 0);
	assert_memory_equal(ram, img + EB_CODE_OFF, EB_CODE_SIZE);
	for (unsigned i = EB_CODE_SIZE; i < EB_MEMSZ; i++)
		assert_int_equal(ram[i], 0);
}

static void test_load_rejects_low_and_beyond_ram(void **state)
{
	const struct gmem *mem = *state;

	eb_elf64(img);
	assert_int_equal(elf_parse(img, EB_SIZE, &info, err, sizeof(err)), 0);
	info.seg[0].paddr = LAYOUT_HIGH_RAM - 0x1000;
	expect_load_fail(mem, "below 0x100000");
	info.seg[0].paddr = (16ULL << 20) - 0x1000; /* last page fits, bss does not */
	expect_load_fail(mem, "segment 0 [0xfff000, 0x1001000) is not inside guest RAM [0, 0x1000000) (16 MiB)");
	info.seg[0].paddr = (16ULL << 20) - EB_MEMSZ; /* exactly the end of RAM */
	assert_int_equal(elf_load(&info, &(struct image){.data = img, .size = EB_SIZE}, mem, err, sizeof(err)), 0);
	info.seg[0].offset = EB_SIZE; /* a forged elf_info is still checked */
	expect_load_fail(mem, "outside the image");
}

static void test_load_checks_all_before_copying(void **state)
{
	const struct gmem *mem = *state;
	uint8_t *ram = gmem_ptr(mem, EB_PADDR, EB_MEMSZ);

	memset(ram, 0xaa, EB_MEMSZ);
	eb_elf64(img);
	eh64()->e_phnum = 3;
	add_load(2, 64ULL << 20, 0x1000); /* beyond 16 MiB */
	assert_int_equal(elf_parse(img, EB_SIZE, &info, err, sizeof(err)), 0);
	expect_load_fail(mem, "segment 1");
	assert_int_equal(ram[0], 0xaa);
}

static void test_load_across_the_hole(void **state)
{
	struct gmem mem;

	(void)state;
	assert_int_equal(gmem_init(&mem, LAYOUT_MMIO_HOLE + (16ULL << 20), 0), 0);
	eb_elf64(img);
	assert_int_equal(elf_parse(img, EB_SIZE, &info, err, sizeof(err)), 0);
	info.seg[0].paddr = LAYOUT_MMIO_HOLE - 0x1000;
	expect_load_fail(&mem, "and [0x100000000, 0x101000000)");
	info.seg[0].paddr = LAYOUT_RAM_ABOVE_4G; /* RAM above 4 GiB is fine */
	assert_int_equal(elf_load(&info, &(struct image){.data = img, .size = EB_SIZE}, &mem, err, sizeof(err)), 0);
	assert_memory_equal(gmem_ptr(&mem, LAYOUT_RAM_ABOVE_4G, EB_CODE_SIZE), img + EB_CODE_OFF, EB_CODE_SIZE);
	gmem_destroy(&mem);
}

/* ---- image_open ---------------------------------------------------------- */

static void expect_open_fail(const char *path, int want, const char *reason)
{
	struct image im;
	int ret = image_open(&im, path, err, sizeof(err));

	if (ret != want || !strstr(err, reason) || !strstr(err, path))
		print_error("ret %d, err \"%s\"\n", ret, err);
	assert_int_equal(ret, want);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, reason));
}

static void test_image_open(void **state)
{
	char dir[] = "/tmp/brisk-test-elf-XXXXXX", path[64];
	struct image im;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/vmlinux", dir);
	expect_open_fail(path, -ENOENT, "no such file");
	expect_open_fail(dir, -EISDIR, "directory");
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	expect_open_fail(path, -EINVAL, "empty");
	assert_int_equal(write(fd, img, EB_SIZE), EB_SIZE);
	close(fd);
	assert_int_equal(image_open(&im, path, err, sizeof(err)), 0);
	assert_int_equal(im.size, EB_SIZE);
	assert_memory_equal(im.data, img, EB_SIZE);
	image_close(&im);
	assert_null(im.data);
	unlink(path);
	rmdir(dir);
}

/* A file image: elf_load reads the segment from the file (pread into guest RAM); a file that shrank since it was
 * opened is -EIO with the segment named, not a SIGBUS; ranges outside the image or RAM are -EFAULT. */
static void test_load_from_file(void **state)
{
	const struct gmem *mem = *state;
	char dir[] = "/tmp/brisk-test-elf-XXXXXX", path[64];
	uint8_t *ram = gmem_ptr(mem, EB_PADDR, EB_MEMSZ);
	struct image im;
	int fd;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/vmlinux", dir);
	eb_elf64(img);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, img, EB_SIZE), EB_SIZE);
	assert_int_equal(image_open(&im, path, err, sizeof(err)), 0);
	assert_int_equal(im.mapped, 1);
	assert_int_equal(elf_parse(im.data, im.size, &info, err, sizeof(err)), 0);
	memset(ram, 0xaa, EB_MEMSZ);
	assert_int_equal(elf_load(&info, &im, mem, err, sizeof(err)), 0);
	assert_memory_equal(ram, img + EB_CODE_OFF, EB_CODE_SIZE);
	for (unsigned i = EB_CODE_SIZE; i < EB_MEMSZ; i++)
		assert_int_equal(ram[i], 0);
	assert_int_equal(image_copy(&im, EB_SIZE, 1, mem, EB_PADDR), -EFAULT);
	assert_int_equal(image_copy(&im, 0, EB_SIZE, mem, (16ULL << 20) - 1), -EFAULT);
	assert_int_equal(image_copy(&im, UINT64_MAX, 2, mem, EB_PADDR), -EFAULT);
	assert_int_equal(ftruncate(fd, EB_CODE_OFF + 1), 0);
	err[0] = 0;
	assert_int_equal(elf_load(&info, &im, mem, err, sizeof(err)), -EIO);
	assert_non_null(strstr(err, "segment 0"));
	close(fd);
	image_close(&im);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_valid_elf64),
	    cmocka_unit_test(test_valid_elf32),
	    cmocka_unit_test(test_pvh_note_desc8),
	    cmocka_unit_test(test_no_note_is_not_pvh),
	    cmocka_unit_test(test_not_elf),
	    cmocka_unit_test(test_short_header),
	    cmocka_unit_test(test_bad_ident),
	    cmocka_unit_test(test_bad_phdr_table),
	    cmocka_unit_test(test_bad_load_segment),
	    cmocka_unit_test(test_overlapping_segments),
	    cmocka_unit_test(test_too_many_segments),
	    cmocka_unit_test(test_bad_notes),
	    cmocka_unit_test(test_bad_pvh_entry),
	    cmocka_unit_test(test_no_load_segment),
	    cmocka_unit_test_setup_teardown(test_load_copies_and_zero_fills, mem_setup, mem_teardown),
	    cmocka_unit_test_setup_teardown(test_load_rejects_low_and_beyond_ram, mem_setup, mem_teardown),
	    cmocka_unit_test_setup_teardown(test_load_checks_all_before_copying, mem_setup, mem_teardown),
	    cmocka_unit_test(test_load_across_the_hole),
	    cmocka_unit_test(test_image_open),
	    cmocka_unit_test_setup_teardown(test_load_from_file, mem_setup, mem_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
