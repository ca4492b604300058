/* kallsyms.h - a running Linux kernel's own symbol table (kallsyms), found and decoded in guest memory. */
#ifndef BRISK_KALLSYMS_H
#define BRISK_KALLSYMS_H

#include <stddef.h>
#include <stdint.h>

#include "brisk/guestmem.h"
#include "brisk/profile.h"

/* Bounds on what is accepted (all guest-controlled). */
#define KSYMS_MAX_SYMS	 (1u << 22)    /* Debian's 6.1 has 94,266; 4M is 40x that */
#define KSYMS_MAX_SPAN	 (16ull << 20) /* kallsyms_offsets .. kallsyms_token_index: 1.8 MiB in Debian's 6.1 */
#define KSYMS_NAME_MAX	 512	       /* KSYM_NAME_LEN (scripts/kallsyms.c, 6.1): longer names are cut */
#define KSYMS_MAX_TRIES	 64	       /* token-table candidates tried per search */
#define KSYMS_SCAN_CHUNK (1u << 20)    /* bytes read per step while scanning for the token table */

/* What was found, for the report and for the probes (kernel text range). */
struct ksyms_info {
	uint64_t token_table;	/* guest-physical address of kallsyms_token_table */
	uint64_t relative_base; /* kallsyms_relative_base: the kernel's _text as relocated (KASLR included) */
	uint32_t num_syms;	/* kallsyms_num_syms */
	uint32_t text_syms;	/* text symbols kept (t T w W) */
	int absolute_percpu;	/* CONFIG_KALLSYMS_ABSOLUTE_PERCPU encoding (x86-64 SMP) */
	int seqs_of_names;	/* kallsyms_seqs_of_names present (6.1.y stable, 6.2+) */
	uint64_t text_start;	/* lowest text symbol */
	uint64_t etext;		/* _etext, or 0 when absent */
};

/*
 * Searches the ranges of `g` for the tables scripts/kallsyms.c (Linux 6.1,
 * CONFIG_KALLSYMS_BASE_RELATIVE) emits into .rodata: kallsyms_offsets,
 * kallsyms_relative_base, kallsyms_num_syms, kallsyms_names, kallsyms_markers,
 * [kallsyms_seqs_of_names,] kallsyms_token_table, kallsyms_token_index, each
 * 8-aligned, in that order. The token table is found by its digits ("0\0"
 * .. "9\0", tokens 0x30..0x39), then every other table is located from it and
 * cross-checked (token index = string offsets, every name inside the names
 * table, markers = offsets of every 256th name, the layout closing exactly on
 * the token table, text addresses in order). The tables are copied before
 * they are parsed. Fills `t` with the text symbols (t T w W; each sized up to
 * the next symbol) and *info. With several valid candidates, one whose text
 * covers `want` (when non-zero) wins. Returns 0, -ENOENT (none found, err
 * says what was seen) or -ENOMEM.
 */
int ksyms_load(const struct gspace *g, uint64_t want, struct symtab *t, struct ksyms_info *info, char *err,
	       size_t errlen);

#endif
