/* test_symbols.c - guest symbols: System.map and ELF32/ELF64 symtab lookup (function+offset), hostile input refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../fuzz/symtab_builder.h"
#include "brisk/profile.h"

/* The cpuid-storm test guest, built by `make guests` (an ELF with a symtab); skipped when absent. */
#define STORM_ELF "build/guests/cpuid-storm.elf"

static char err[512];

static const char map[] = "ffffffff81000000 T _text\n"
			  "ffffffff81000000 T startup_64\n"
			  "ffffffff81001000 t jailhouse_cpuid_base\n"
			  "ffffffff81001200 D some_data\n"
			  "ffffffff81002000 W weak_fn\n"
			  "\n"
			  "ffffffff82000000 T _etext\n";

static int lookup(const struct symtab *t, uint64_t addr, const char *want)
{
	char out[128];

	if (!symtab_lookup(t, addr, out, sizeof(out)))
		return want == NULL;
	return want && strcmp(out, want) == 0;
}

static void system_map(void **state)
{
	struct symtab t;

	(void)state;
	assert_int_equal(symtab_load_mem(&t, (const uint8_t *)map, sizeof(map) - 1, "System.map", err, sizeof(err)), 0);
	assert_int_equal(t.n, 4); /* _text/startup_64 share an address; data is not kept */
	assert_true(lookup(&t, 0xffffffff81000000ull, "_text+0x0") ||
		    lookup(&t, 0xffffffff81000000ull, "startup_64+0x0"));
	assert_true(lookup(&t, 0xffffffff81001033ull, "jailhouse_cpuid_base+0x33"));
	assert_true(lookup(&t, 0xffffffff81001fffull, "jailhouse_cpuid_base+0xfff"));
	assert_true(lookup(&t, 0xffffffff81002010ull, "weak_fn+0x10"));
	assert_true(lookup(&t, 0xffffffff80ffffffull, NULL));			   /* before the first symbol */
	assert_true(lookup(&t, 0xffffffff82000000ull + SYMTAB_MAX_GAP + 1, NULL)); /* far past an unsized one */
	symtab_free(&t);
}

static void garbage_refused(void **state)
{
	static const char *const bad[] = {
	    "this is not a symbol file\n",
	    "ffffffff81000000 T\n",
	    "ffffffff81000000 TT name\n",
	    "ffffffff81000000 D only_data\n", /* parses, but has no text symbols */
	    "\x7f"
	    "ELF\x01\x01\x01", /* 32-bit ELF, no section headers */
	    "\x7f"
	    "ELF\x02\x01\x01", /* truncated 64-bit ELF */
	};
	struct symtab t;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t buf[128] = {0}; /* the ELF cases: a zero-filled header after the magic */
		size_t len = strlen(bad[i]);

		memcpy(buf, bad[i], len);
		err[0] = '\0';
		assert_int_not_equal(symtab_load_mem(&t, buf, i >= 4 ? sizeof(buf) : len, "junk", err, sizeof(err)), 0);
		assert_non_null(strstr(err, "junk"));
		assert_null(t.s);
	}
	assert_int_not_equal(symtab_load(&t, "/nonexistent/System.map", err, sizeof(err)), 0);
	assert_non_null(strstr(err, "/nonexistent/System.map"));
}

/* A real ELF: the test guest's own symtab resolves the probe's RIPs, with sizes bounding the function. */
static void elf_symtab(void **state)
{
	struct symtab t;
	char out[128];
	uint64_t base = 0;
	FILE *f = fopen(STORM_ELF, "rb");

	(void)state;
	if (!f) {
		print_message("skipped: %s missing (make guests)\n", STORM_ELF);
		skip();
	}
	fclose(f);
	assert_int_equal(symtab_load(&t, STORM_ELF, err, sizeof(err)), 0);
	for (size_t i = 0; i < t.n; i++)
		if (strcmp(t.s[i].name, "probe_hypervisor") == 0)
			base = t.s[i].addr;
	assert_int_not_equal(base, 0);
	assert_int_equal(symtab_lookup(&t, base + 0x33, out, sizeof(out)), 1);
	assert_string_equal(out, "probe_hypervisor+0x33");
	symtab_free(&t);
}

/* A heap copy of exactly len bytes, so that ASan reports any read past the end. */
static uint8_t *exact_copy(const void *src, size_t len)
{
	uint8_t *b = malloc(len ? len : 1);

	assert_non_null(b);
	memcpy(b, src, len);
	return b;
}

/*
 * A System.map filling whole pages, its last line without a newline:
 * the parser must stop at the end of the buffer. The page
 * after the buffer is PROT_NONE, so any read past it faults in every build.
 */
static void map_page_multiple_no_newline(void **state)
{
	static const char line[] = "ffffffff81000000 T f\n";
	long pg = sysconf(_SC_PAGESIZE);
	size_t len = (size_t)pg * 2, body = (len - 300) / (sizeof(line) - 1) * (sizeof(line) - 1);
	uint8_t *m = mmap(NULL, len + (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct symtab t;
	char out[512];

	(void)state;
	assert_true(m != MAP_FAILED);
	assert_int_equal(mprotect(m + len, (size_t)pg, PROT_NONE), 0);
	for (size_t i = 0; i < body; i += sizeof(line) - 1)
		memcpy(m + i, line, sizeof(line) - 1);
	memcpy(m + body, "ffffffff81000100 T ", 19);
	memset(m + body + 19, 'Z', len - body - 19);
	assert_int_equal(symtab_load_mem(&t, m, len, "page.map", err, sizeof(err)), 0);
	assert_int_equal(t.n, 2);
	assert_int_equal(symtab_lookup(&t, 0xffffffff81000108ull, out, sizeof(out)), 1);
	assert_int_equal(strspn(out, "Z"), len - body - 19);
	assert_string_equal(out + len - body - 19, "+0x8");
	symtab_free(&t);
	munmap(m, len + (size_t)pg);
}

/* The same from a file whose size is a page multiple (the mmap path) and one of 2 MiB (the plain build's crash). */
static void map_file_page_multiple(void **state)
{
	static const char line[] = "ffffffff81000000 T f\n";
	const size_t sizes[] = {4096, 8192, 65536, 2097152};
	char path[] = "/tmp/brisk-test-map-XXXXXX";
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k], body = (n - 400) / (sizeof(line) - 1) * (sizeof(line) - 1);
		uint8_t *b = malloc(n);
		struct symtab t;

		assert_non_null(b);
		for (size_t i = 0; i < body; i += sizeof(line) - 1)
			memcpy(b + i, line, sizeof(line) - 1);
		memcpy(b + body, "ffffffff81000100 T ", 19);
		memset(b + body + 19, 'Z', n - body - 19);
		assert_int_equal(ftruncate(fd, 0), 0);
		assert_int_equal(pwrite(fd, b, n, 0), (ssize_t)n);
		assert_int_equal(symtab_load_mem(&t, b, n, "heap.map", err, sizeof(err)), 0); /* exact heap copy */
		assert_int_equal(t.n, 2);
		symtab_free(&t);
		assert_int_equal(symtab_load(&t, path, err, sizeof(err)), 0);
		assert_int_equal(t.n, 2);
		symtab_free(&t);
		free(b);
	}
	close(fd);
	unlink(path);
}

/* Line ends and separators nm and /proc/kallsyms produce: CRLF, a tab or " [module]" after the name. */
static void map_line_forms(void **state)
{
	static const char m[] = "ffffffff81000000 T crlf_fn\r\n"
				"ffffffff81001000 t tab_fn\t[kvm]\n"
				"ffffffff81002000 T mod_fn [brisk]";
	struct symtab t;
	uint8_t *b = exact_copy(m, sizeof(m) - 1);

	(void)state;
	assert_int_equal(symtab_load_mem(&t, b, sizeof(m) - 1, "forms.map", err, sizeof(err)), 0);
	assert_true(lookup(&t, 0xffffffff81000004ull, "crlf_fn+0x4"));
	assert_true(lookup(&t, 0xffffffff81001004ull, "tab_fn+0x4"));
	assert_true(lookup(&t, 0xffffffff81002004ull, "mod_fn+0x4"));
	symtab_free(&t);
	free(b);
	/* Found by fuzz_symbols: a NUL where the name starts made an empty name; now a malformed line. */
	b = exact_copy("ffffffff81000000 t \0\0x", 22);
	assert_int_equal(symtab_load_mem(&t, b, 22, "nul.map", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "line 1"));
	free(b);
}

/* A symbols file that is a FIFO is refused at once, naming it (it would block open() forever). */
static void fifo_refused(void **state)
{
	char dir[] = "/tmp/brisk-test-fifo-XXXXXX", path[64];
	struct symtab t;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/System.map", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(10); /* a blocking open would hang the test: fail it instead */
	assert_int_not_equal(symtab_load(&t, path, err, sizeof(err)), 0);
	alarm(0);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "FIFO"));
	unlink(path);
	rmdir(dir);
}

/* ELF32 (a 32-bit PVH guest) and ELF64 symtabs both resolve, with sizes bounding functions. */
static void elf_both_classes(void **state)
{
	static const int classes[] = {32, 64};

	(void)state;
	for (size_t c = 0; c < 2; c++) {
		uint8_t img[SB_SIZE], *b;
		struct symtab t;

		sb_build(img, classes[c]);
		b = exact_copy(img, SB_SIZE);
		assert_int_equal(symtab_load_mem(&t, b, SB_SIZE, "guest.elf", err, sizeof(err)), 0);
		assert_int_equal(t.n, 3); /* _start, probe_hypervisor, after_probe */
		assert_true(lookup(&t, SB_PROBE_ADDR + 0x33, "probe_hypervisor+0x33"));
		assert_true(lookup(&t, SB_TEXT_ADDR + 4, "_start+0x4"));
		assert_true(lookup(&t, SB_AFTER_ADDR + 5, "after_probe+0x5"));
		assert_true(lookup(&t, SB_PROBE_ADDR + SB_PROBE_SIZE, NULL)); /* past the sized function */
		symtab_free(&t);
		free(b);
	}
}

/* Every ELF field that locates something is bounds-checked; each case is refused with the file named. */
static void elf_malformed(void **state)
{
	static const int classes[] = {32, 64};

	(void)state;
	for (size_t c = 0; c < 2; c++) {
		int cls = classes[c];
		uint16_t shent = cls == 64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
		uint64_t huge = cls == 64 ? UINT64_MAX - 8 : UINT32_MAX - 8;

		for (int k = 0; k < 17; k++) {
			uint8_t img[SB_SIZE], *b;
			size_t len = sb_build(img, cls);
			struct symtab t;

			switch (k) {
			case 0:
				sb_set_shtab(img, cls, SB_SIZE, SB_SHNUM, shent);
				break; /* table at EOF */
			case 1:
				sb_set_shtab(img, cls, SB_SIZE - 10, SB_SHNUM, shent);
				break; /* straddles EOF */
			case 2:
				sb_set_shtab(img, cls, huge, SB_SHNUM, shent);
				break; /* offset wraps */
			case 3:
				sb_set_shtab(img, cls, SB_SHOFF, 200, shent);
				break; /* too many headers */
			case 4:
				sb_set_shtab(img, cls, SB_SHOFF, SB_SHNUM, 10);
				break; /* wrong entry size */
			case 5:
				sb_set_shdr(img, cls, SB_SYMTAB_IDX, SB_SH_LINK, 9);
				break; /* sh_link out of range */
			case 6:
				sb_set_shdr(img, cls, SB_SYMTAB_IDX, SB_SH_LINK, 1);
				break; /* sh_link not a strtab */
			case 7:
				sb_set_shdr(img, cls, SB_SYMTAB_IDX, SB_SH_OFFSET, SB_SIZE);
				break;
			case 8:
				sb_set_shdr(img, cls, SB_SYMTAB_IDX, SB_SH_SIZE, 0x10000);
				break;
			case 9:
				sb_set_shdr(img, cls, SB_SYMTAB_IDX, SB_SH_OFFSET, huge);
				break;
			case 10:
				sb_set_shdr(img, cls, SB_STRTAB_IDX, SB_SH_OFFSET, SB_SIZE - 4);
				break;
			case 11:
				sb_set_shdr(img, cls, SB_STRTAB_IDX, SB_SH_SIZE, 0x10000);
				break;
			case 12:
				sb_set_shdr(img, cls, SB_SYMTAB_IDX, SB_SH_ENTSIZE, 7);
				break;
			case 13:
				img[EI_DATA] = ELFDATA2MSB;
				break;
			case 14:
				len = cls == 64 ? sizeof(Elf64_Ehdr) - 1 : sizeof(Elf32_Ehdr) - 1;
				break;
			case 15:
				sb_set_shdr(img, cls, SB_SYMTAB_IDX, SB_SH_TYPE, SHT_PROGBITS);
				break; /* stripped */
			case 16:
				sb_set_shdr(img, cls, SB_STRTAB_IDX, SB_SH_SIZE, 0);
				break;
			}
			b = exact_copy(img, len);
			err[0] = '\0';
			assert_int_not_equal(symtab_load_mem(&t, b, len, "junk.elf", err, sizeof(err)), 0);
			if (!strstr(err, "junk.elf"))
				fail_msg("ELF%d case %d: message does not name the file: %s", cls, k, err);
			assert_null(t.s);
			free(b);
		}
	}
}

/* A name offset past .strtab, or a name not terminated inside it, skips that symbol only. */
static void elf_bad_names_skipped(void **state)
{
	static const int classes[] = {32, 64};

	(void)state;
	for (size_t c = 0; c < 2; c++) {
		uint8_t img[SB_SIZE], *b;
		struct symtab t;
		char out[128];

		sb_build(img, classes[c]);
		sb_set_sym_name(img, classes[c], 2, SB_STRTAB_SIZE + 5); /* probe_hypervisor: past the strtab */
		/* after_probe is the last name: end the strtab inside it, so that it has no NUL. */
		sb_set_shdr(img, classes[c], SB_STRTAB_IDX, SB_SH_SIZE, 0x48 - 4);
		b = exact_copy(img, SB_SIZE);
		assert_int_equal(symtab_load_mem(&t, b, SB_SIZE, "names.elf", err, sizeof(err)), 0);
		assert_int_equal(t.n, 1);
		assert_int_equal(symtab_lookup(&t, SB_PROBE_ADDR, out, sizeof(out)), 1);
		assert_string_equal(out, "_start+0xd0");
		symtab_free(&t);
		free(b);
	}
}

/* The lookup on an empty table (no symbols loaded) finds nothing and does not crash. */
static void empty_table(void **state)
{
	struct symtab t = {0};
	char out[16];

	(void)state;
	assert_int_equal(symtab_lookup(&t, 0x1000, out, sizeof(out)), 0);
	assert_int_equal(symtab_lookup(NULL, 0x1000, out, sizeof(out)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(system_map),
	    cmocka_unit_test(garbage_refused),
	    cmocka_unit_test(elf_symtab),
	    cmocka_unit_test(empty_table),
	    cmocka_unit_test(map_page_multiple_no_newline),
	    cmocka_unit_test(map_file_page_multiple),
	    cmocka_unit_test(map_line_forms),
	    cmocka_unit_test(fifo_refused),
	    cmocka_unit_test(elf_both_classes),
	    cmocka_unit_test(elf_malformed),
	    cmocka_unit_test(elf_bad_names_skipped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
