/* test_kallsyms.c - kallsyms found and decoded in guest memory (6.1 layouts), hostile tables refused; the page walk. */
#include <elf.h>
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

#include "../fuzz/kallsyms_builder.h"
#include "brisk/guestmem.h"
#include "brisk/kallsyms.h"
#include "brisk/procmem.h"

/* Debian's kernel as tests/linux/fetch-kernel.sh leaves it (an ELF vmlinux); that test is skipped without it. */
#define DEBIAN_VMLINUX "build/linux/vmlinux"

static char err[512];

static const struct kb_sym syms[] = {
    {0x0, "Afixed_percpu_data"},
    {0x4000, "Acpu_debug_store"},
    {0xffffffff81000000ull, "T_text"},
    {0xffffffff81000000ull, "Tstartup_64"},
    {0xffffffff81000850ull, "tpvh_start_xen"},
    {0xffffffff8107e590ull, "tnative_cpuid"},
    {0xffffffff8107e7c0ull, "tnative_read_msr"},
    {0xffffffff8107e910ull, "tnative_write_msr"},
    {0xffffffff81080000ull, "Tkvm_init__hyper"},
    {0xffffffff81e01d32ull, "T_etext"},
    {0xffffffff82000000ull, "Rsome_rodata"},
    {0xffffffff82a00000ull, "Dsome_data"},
};
#define NSYMS (sizeof(syms) / sizeof(syms[0]))

/* Places the tables at `gpa` in a 1 MiB space of noise; returns the space's buffer (caller frees). */
static uint8_t *space_with(const struct kb_opts *o, uint64_t gpa, struct gspace *g, struct gspace_buf *gb, size_t *tlen)
{
	size_t len;
	uint8_t *tables = kb_build(syms, NSYMS, o, &len), *mem = malloc(1 << 20);

	assert_non_null(tables);
	assert_non_null(mem);
	for (size_t i = 0; i < (1 << 20); i++)
		mem[i] = (uint8_t)(i * 31 + 7);
	assert_true(gpa + len <= (1 << 20));
	memcpy(mem + gpa, tables, len);
	free(tables);
	*gb = (struct gspace_buf){.p = mem, .len = 1 << 20, .base = 0};
	gspace_of_buf(g, gb);
	if (tlen)
		*tlen = len;
	return mem;
}

static int named(const struct symtab *t, uint64_t addr, const char *want)
{
	char out[256];

	return symtab_lookup(t, addr, out, sizeof(out)) && strcmp(out, want) == 0;
}

static void check_decoded(const struct symtab *t, const struct ksyms_info *info, int apc, int seqs)
{
	assert_int_equal(info->num_syms, NSYMS);
	assert_int_equal(info->absolute_percpu, apc);
	assert_int_equal(info->seqs_of_names, seqs);
	assert_int_equal(info->relative_base, 0xffffffff81000000ull);
	assert_int_equal(info->etext, 0xffffffff81e01d32ull);
	assert_true(named(t, 0xffffffff8107e5a1ull, "native_cpuid+0x11"));
	assert_true(named(t, 0xffffffff8107e914ull, "native_write_msr+0x4"));
	assert_true(named(t, 0xffffffff81080010ull, "kvm_init__hyper+0x10"));
	assert_true(named(t, 0xffffffff81000851ull, "pvh_start_xen+0x1"));
	/* sized up to the next symbol: native_cpuid ends where native_read_msr starts */
	assert_false(named(t, 0xffffffff8107e7c0ull, "native_cpuid+0x230"));
	assert_true(named(t, 0xffffffff8107e7c0ull, "native_read_msr+0x0"));
	/* data and per-CPU symbols are not kept */
	for (size_t i = 0; i < t->n; i++)
		assert_true(strcmp(t->s[i].name, "some_data") && strcmp(t->s[i].name, "fixed_percpu_data"));
}

static void layouts(void **state)
{
	(void)state;
	for (int apc = 0; apc < 2; apc++)
		for (int seqs = 0; seqs < 2; seqs++) {
			struct kb_opts o = {.absolute_percpu = apc, .seqs = seqs, .lead = 64, .tail = 40};
			struct gspace g;
			struct gspace_buf gb;
			struct symtab t;
			struct ksyms_info info;
			uint8_t *mem = space_with(&o, 0x40000, &g, &gb, NULL);

			assert_int_equal(ksyms_load(&g, 0, &t, &info, err, sizeof(err)), 0);
			check_decoded(&t, &info, apc, seqs);
			assert_int_equal(info.token_table >= 0x40000, 1);
			symtab_free(&t);
			free(mem);
		}
}

/* A "big" symbol (two-byte ULEB128 length) and a name longer than KSYM_NAME_LEN (cut, not overflowed). */
static void big_symbol(void **state)
{
	char *name = malloc(1000);
	struct kb_sym s[3] = {
	    {0xffffffff81000000ull, "T_text"}, {0xffffffff81000100ull, NULL}, {0xffffffff81000200ull, "Tafter"}};
	struct kb_opts o = {.absolute_percpu = 1, .seqs = 1};
	struct gspace_buf gb;
	struct gspace g;
	struct symtab t;
	struct ksyms_info info;
	size_t len;
	uint8_t *b;
	const struct sym *f;

	(void)state;
	name[0] = 't';
	memset(name + 1, 'x', 998);
	name[999] = '\0';
	s[1].typed_name = name;
	b = kb_build(s, 3, &o, &len);
	gb = (struct gspace_buf){.p = b, .len = len, .base = 0x100000};
	gspace_of_buf(&g, &gb);
	assert_int_equal(ksyms_load(&g, 0, &t, &info, err, sizeof(err)), 0);
	f = symtab_find(&t, 0xffffffff81000101ull);
	assert_non_null(f);
	assert_int_equal(strlen(f->name), KSYMS_NAME_MAX - 1); /* the type character took one of the 512 */
	assert_true(named(&t, 0xffffffff81000201ull, "after+0x1"));
	symtab_free(&t);
	free(b);
	free(name);
}

/* Each table corrupted in turn: nothing is found, nothing is read out of bounds (ASan build). */
static void hostile(void **state)
{
	struct kb_opts o = {.absolute_percpu = 1, .seqs = 1, .lead = 32, .tail = 16};
	size_t len;
	uint8_t *clean = kb_build(syms, NSYMS, &o, &len);
	/* offsets of: num_syms, a name length, a marker, a token-index entry, the token table's digits */
	size_t num_at = 32 + kb_align8(4 * NSYMS) + 8, names = num_at + 8;

	(void)state;
	for (int k = 0; k < 6; k++) {
		uint8_t *b = malloc(len);
		struct gspace_buf gb = {.p = b, .len = len, .base = 0};
		struct gspace g;
		struct symtab t;
		struct ksyms_info info;
		uint8_t *tok = NULL;

		memcpy(b, clean, len);
		for (size_t i = 0; i + 20 <= len && !tok; i++)
			if (memcmp(b + i,
				   "0\0"
				   "1\0"
				   "2\0"
				   "3\0"
				   "4\0"
				   "5\0"
				   "6\0"
				   "7\0"
				   "8\0"
				   "9",
				   20) == 0)
				tok = b + i;
		assert_non_null(tok);
		switch (k) {
		case 0: /* num_syms one more than there are names */
			b[num_at]++;
			break;
		case 1: /* a name length that runs into the markers */
			b[names] = 0x7f;
			break;
		case 2: /* the length of the last name 0 */
			b[names] = 0;
			break;
		case 3: /* the token index disagrees with the strings */
			b[len - 16 - 512 + 2 * 0x30] ^= 1;
			break;
		case 4: /* the marker of name 0 not 0 */
			memset(tok - kb_align8(3 * NSYMS) - kb_align8(4), 0xff, 4);
			break;
		case 5:				      /* addresses out of order */
			memset(b + 32 + 4 * 3, 0, 4); /* pvh_start_xen's offset: absolute 0 after _text */
			break;
		}
		gspace_of_buf(&g, &gb);
		assert_int_equal(ksyms_load(&g, 0, &t, &info, err, sizeof(err)), -ENOENT);
		assert_non_null(strstr(err, "no kernel symbol table"));
		assert_int_equal(t.n, 0);
		free(b);
	}
	free(clean);
}

/* With two tables, the one whose text covers `want` is chosen. */
static void two_candidates(void **state)
{
	struct kb_opts o = {.absolute_percpu = 1, .seqs = 1};
	struct kb_sym other[] = {{0xffffffffa0000000ull, "T_text"}, {0xffffffffa0001000ull, "Tother_fn"}};
	size_t l1, l2;
	uint8_t *a = kb_build(other, 2, &o, &l1), *b = kb_build(syms, NSYMS, &o, &l2), *mem = calloc(1, 1 << 20);
	struct gspace_buf gb = {.p = mem, .len = 1 << 20};
	struct gspace g;
	struct symtab t;
	struct ksyms_info info;

	(void)state;
	memcpy(mem + 0x1000, a, l1);
	memcpy(mem + 0x80000, b, l2);
	gspace_of_buf(&g, &gb);
	assert_int_equal(ksyms_load(&g, 0xffffffff8107e5a1ull, &t, &info, err, sizeof(err)), 0);
	assert_true(named(&t, 0xffffffff8107e5a1ull, "native_cpuid+0x11"));
	symtab_free(&t);
	assert_int_equal(ksyms_load(&g, 0, &t, &info, err, sizeof(err)), 0); /* no preference: the first */
	assert_true(named(&t, 0xffffffffa0001001ull, "other_fn+0x1"));
	symtab_free(&t);
	free(a);
	free(b);
	free(mem);
}

/* Debian's 6.1 vmlinux, its PT_LOAD segments placed at their physical addresses as a loader does. */
static void debian_vmlinux(void **state)
{
	FILE *f = fopen(DEBIAN_VMLINUX, "rb");
	uint8_t *file, *mem;
	long n;
	Elf64_Ehdr eh;
	uint64_t top = 0;
	struct gspace_buf gb;
	struct gspace g;
	struct symtab t;
	struct ksyms_info info;

	(void)state;
	if (!f)
		skip();
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	file = malloc((size_t)n);
	assert_int_equal(fread(file, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	memcpy(&eh, file, sizeof(eh));
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		memcpy(&ph, file + eh.e_phoff + (size_t)i * sizeof(ph), sizeof(ph));
		if (ph.p_type == PT_LOAD && ph.p_paddr + ph.p_memsz > top)
			top = ph.p_paddr + ph.p_memsz;
	}
	mem = calloc(1, top);
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		memcpy(&ph, file + eh.e_phoff + (size_t)i * sizeof(ph), sizeof(ph));
		if (ph.p_type == PT_LOAD)
			memcpy(mem + ph.p_paddr, file + ph.p_offset, ph.p_filesz);
	}
	free(file);
	gb = (struct gspace_buf){.p = mem, .len = top};
	gspace_of_buf(&g, &gb);
	assert_int_equal(ksyms_load(&g, 0, &t, &info, err, sizeof(err)), 0);
	print_message("%s: %u symbols, %u text, relative base 0x%llx, _etext 0x%llx\n", t.source, info.num_syms,
		      info.text_syms, (unsigned long long)info.relative_base, (unsigned long long)info.etext);
	assert_true(info.num_syms > 50000);
	assert_true(info.absolute_percpu && info.seqs_of_names);
	assert_int_equal(info.relative_base, 0xffffffff81000000ull); /* nokaslr: _text where the ELF put it */
	assert_non_null(symtab_find(&t, info.etext - 1));
	for (const char *const *w = (const char *const[]){"native_cpuid", "native_write_msr", "pvh_start_xen", NULL};
	     *w; w++) {
		size_t i = 0;

		while (i < t.n && strcmp(t.s[i].name, *w))
			i++;
		assert_true(i < t.n);
	}
	symtab_free(&t);
	free(mem);
}

/* brisk trace's way in: this process's own memory through /proc/self/mem, tables in a large mapping. */
static void proc_mem(void **state)
{
	struct kb_opts o = {.absolute_percpu = 1, .seqs = 1};
	size_t len;
	uint8_t *tables = kb_build(syms, NSYMS, &o, &len), *ram = malloc(PROCMEM_MIN_RAM * 2);
	struct procmem pm;
	struct gspace g;
	struct symtab t;
	struct ksyms_info info;

	(void)state;
	assert_non_null(ram);
	memset(ram, 0x5a, PROCMEM_MIN_RAM * 2); /* touched: a large writable mapping of its own */
	memcpy(ram + PROCMEM_MIN_RAM, tables, len);
	assert_int_equal(procmem_open(&pm, &g, getpid(), err, sizeof(err)), 0);
	assert_int_equal(ksyms_load(&g, 0xffffffff8107e5a1ull, &t, &info, err, sizeof(err)), 0);
	assert_true(named(&t, 0xffffffff8107e5a1ull, "native_cpuid+0x11"));
	assert_int_equal(g.read(g.ctx, 0, ram, 8), -EFAULT); /* page 0 of this process is not mapped */
	symtab_free(&t);
	procmem_close(&pm);
	assert_int_equal(procmem_open(&pm, &g, 0x7ffffff0, err, sizeof(err)), -ENOENT); /* no such process */
	assert_non_null(strstr(err, "/proc/2147483632/maps"));
	procmem_close(&pm);
	free(ram);
	free(tables);
}

/* ---- the page walk ---------------------------------------------------------------- */

#define PT_P  1ull
#define PT_W  2ull
#define PT_PS 0x80ull
#define PT_NX (1ull << 63)

static void put64(uint8_t *m, uint64_t at, uint64_t v)
{
	memcpy(m + at, &v, 8);
}

static void page_walk(void **state)
{
	uint8_t *m = calloc(1, 1 << 20);
	struct gspace_buf gb = {.p = m, .len = 1 << 20};
	struct gspace g;
	struct gpaging pg = {.cr0 = 1ull << 31, .cr3 = 0x1000, .cr4 = 0x20, .efer = (1 << 10) | (1 << 11)};
	uint64_t pa, kva = 0xffffffff81000000ull;
	int nx;

	(void)state;
	gspace_of_buf(&g, &gb);
	/* kernel text: PML4[511] -> PDPT[510] -> PD[8] a 2 MiB page at 0x200000 (0xffffffff81000000 = 510 GiB + 16 MiB)
	 */
	put64(m, 0x1000 + 511 * 8, 0x2000 | PT_P | PT_W);
	put64(m, 0x2000 + 510 * 8, 0x3000 | PT_P | PT_W);
	put64(m, 0x3000 + 8 * 8, 0x200000 | PT_P | PT_PS);
	/* a 4 KiB page, NX, at PD[9] -> PT[1] -> 0x5000 */
	put64(m, 0x3000 + 9 * 8, 0x4000 | PT_P | PT_W);
	put64(m, 0x4000 + 1 * 8, 0x5000 | PT_P | PT_NX);
	/* a 1 GiB page at PML4[0] -> PDPT[1] */
	put64(m, 0x1000, 0x6000 | PT_P);
	put64(m, 0x6000 + 8, 0x40000000 | PT_P | PT_PS);
	assert_int_equal(gwalk(&g, &pg, kva + 0x1234, &pa, &nx), 0);
	assert_int_equal(pa, 0x201234);
	assert_int_equal(nx, 0);
	assert_int_equal(gwalk(&g, &pg, kva + 0x201008, &pa, &nx), 0);
	assert_int_equal(pa, 0x5008);
	assert_int_equal(nx, 1);
	assert_int_equal(gwalk(&g, &pg, 0x40000000ull + 0x12345678, &pa, &nx), 0);
	assert_int_equal(pa, 0x52345678);
	assert_int_equal(gwalk(&g, &pg, kva + 0x400000, &pa, &nx), -EFAULT);	    /* PD[10] not present */
	assert_int_equal(gwalk(&g, &pg, 0x0000800000000000ull, &pa, &nx), -EFAULT); /* non-canonical */
	pg.cr3 = 0xff000;							    /* tables out of the space */
	put64(m, 0xff000 + 511 * 8, 0xfffff000ull | PT_P);
	assert_int_equal(gwalk(&g, &pg, kva, &pa, &nx), -EFAULT);
	pg.cr3 = 0x1000;
	put64(m, 0x1000 + 511 * 8, 0x2000 | PT_P | PT_PS); /* PS in a PML4E: reserved */
	assert_int_equal(gwalk(&g, &pg, kva, &pa, &nx), -EFAULT);
	pg.efer = 0; /* legacy paging is not walked */
	assert_int_equal(gwalk(&g, &pg, kva, &pa, &nx), -ENOTSUP);
	pg.cr0 = 0; /* paging off: the identity */
	assert_int_equal(gwalk(&g, &pg, 0x1234, &pa, &nx), 0);
	assert_int_equal(pa, 0x1234);
	free(m);
}

/* The buffer space's bounds: last byte, one past, wrap-around, zero length. */
static void buf_space_bounds(void **state)
{
	uint8_t m[16] = {0}, out[16];
	struct gspace_buf gb = {.p = m, .len = sizeof(m), .base = 0x1000};
	struct gspace g;

	(void)state;
	gspace_of_buf(&g, &gb);
	assert_int_equal(g.read(g.ctx, 0x100f, out, 1), 0);
	assert_int_equal(g.read(g.ctx, 0x100f, out, 2), -EFAULT);
	assert_int_equal(g.read(g.ctx, 0xfff, out, 1), -EFAULT);
	assert_int_equal(g.read(g.ctx, 0x1010, out, 0), 0);
	assert_int_equal(g.read(g.ctx, UINT64_MAX, out, 2), -EFAULT);
	assert_int_equal(g.read(g.ctx, 0x1001, out, SIZE_MAX), -EFAULT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(layouts),		cmocka_unit_test(big_symbol),	  cmocka_unit_test(hostile),
	    cmocka_unit_test(two_candidates),	cmocka_unit_test(debian_vmlinux), cmocka_unit_test(page_walk),
	    cmocka_unit_test(buf_space_bounds), cmocka_unit_test(proc_mem),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
