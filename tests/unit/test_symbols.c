/* test_symbols.c - guest symbols: System.map and ELF symtab lookup (function+offset), garbage input refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

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
	    "ELF\x01\x01\x01", /* 32-bit ELF */
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
