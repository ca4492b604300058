/* kallsyms_builder.h - writes kallsyms tables as Linux 6.1's scripts/kallsyms.c lays them out, for tests and seeds. */
#ifndef KALLSYMS_BUILDER_H
#define KALLSYMS_BUILDER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One symbol: its address and "Tname" (nm type first, as kallsyms stores it). */
struct kb_sym {
	uint64_t addr;
	const char *typed_name;
};

struct kb_opts {
	int absolute_percpu; /* offsets as --absolute-percpu (x86-64 SMP) writes them */
	int seqs;	     /* emit kallsyms_seqs_of_names (6.1.y) */
	size_t lead;	     /* bytes of filler before kallsyms_offsets (a multiple of 8) */
	size_t tail;	     /* bytes of filler after kallsyms_token_index */
};

/* Multi-character tokens at indices 0x80.. (the rest are single characters or unused): exercises expansion. */
static const char *const kb_multi[] = {"native_", "cpuid", "_msr", "write", "read", "__", "init", "kvm"};

static void kb_token(int i, char *out)
{
	size_t nm = sizeof(kb_multi) / sizeof(kb_multi[0]);

	if (i >= 0x80 && (size_t)(i - 0x80) < nm)
		strcpy(out, kb_multi[i - 0x80]);
	else if (i >= 0x21 && i < 0x7f)
		snprintf(out, 2, "%c", i);
	else
		snprintf(out, 8, "~%02x~", i); /* never matched by a name below: a filler token */
}

/* Greedy encoding of `s` with the tokens above into out; returns its length. */
static size_t kb_encode(const char *s, uint8_t *out)
{
	size_t n = 0, nm = sizeof(kb_multi) / sizeof(kb_multi[0]);

	while (*s) {
		size_t best = 0;
		int idx = (unsigned char)*s;

		for (size_t m = 0; m < nm; m++) {
			size_t l = strlen(kb_multi[m]);

			if (l > best && strncmp(s, kb_multi[m], l) == 0) {
				best = l;
				idx = 0x80 + (int)m;
			}
		}
		out[n++] = (uint8_t)idx;
		s += best ? best : 1;
	}
	return n;
}

static size_t kb_align8(size_t v)
{
	return (v + 7) & ~(size_t)7;
}

/*
 * The tables for syms[0..n) (sorted by address, the first text symbol's
 * address is kallsyms_relative_base) into a malloc'd buffer of *len bytes;
 * the buffer's offset 0 is meant to sit at an 8-aligned guest address.
 */
static uint8_t *kb_build(const struct kb_sym *syms, size_t n, const struct kb_opts *o, size_t *len)
{
	size_t cap = o->lead + 64 * n + 65536 + o->tail, p = o->lead, names, tok;
	uint8_t *b = calloc(1, cap);
	uint64_t rb = 0;
	uint32_t *markers = calloc(n / 256 + 1, sizeof(*markers));
	uint16_t index[256];

	for (size_t i = 0; i < n && !rb; i++)
		if (syms[i].addr >= 0xffffffff80000000ull)
			rb = syms[i].addr;
	for (size_t i = 0; i < o->lead; i++)
		b[i] = (uint8_t)(i * 7 + 3);
	for (size_t i = 0; i < n; i++) {
		int32_t v;

		if (!o->absolute_percpu)
			v = (int32_t)(uint32_t)(syms[i].addr - rb);
		else if (syms[i].addr < 0x80000000ull)
			v = (int32_t)syms[i].addr; /* a per-CPU symbol: absolute */
		else
			v = (int32_t)(int64_t)(rb - syms[i].addr - 1);
		memcpy(b + p, &v, 4);
		p += 4;
	}
	p = kb_align8(p);
	memcpy(b + p, &rb, 8);
	p += 8;
	memcpy(b + p, &n, 4);
	p = kb_align8(p + 4);
	names = p;
	for (size_t i = 0; i < n; i++) {
		uint8_t enc[1024];
		size_t l = kb_encode(syms[i].typed_name, enc);

		if ((i & 0xff) == 0)
			markers[i >> 8] = (uint32_t)(p - names);
		if (l <= 0x7f) {
			b[p++] = (uint8_t)l;
		} else {
			b[p++] = (uint8_t)((l & 0x7f) | 0x80);
			b[p++] = (uint8_t)(l >> 7);
		}
		memcpy(b + p, enc, l);
		p += l;
	}
	p = kb_align8(p);
	for (size_t i = 0; i < (n + 255) / 256; i++, p += 4)
		memcpy(b + p, &markers[i], 4);
	p = kb_align8(p);
	if (o->seqs) {
		for (size_t i = 0; i < n; i++, p += 3) { /* sequence numbers (the tests do not sort them by name) */
			b[p] = (uint8_t)(i >> 16);
			b[p + 1] = (uint8_t)(i >> 8);
			b[p + 2] = (uint8_t)i;
		}
		p = kb_align8(p);
	}
	tok = p;
	for (int i = 0; i < 256; i++) {
		char t[16];

		kb_token(i, t);
		index[i] = (uint16_t)(p - tok);
		memcpy(b + p, t, strlen(t) + 1);
		p += strlen(t) + 1;
	}
	p = kb_align8(p);
	memcpy(b + p, index, sizeof(index));
	p += sizeof(index);
	for (size_t i = 0; i < o->tail; i++)
		b[p + i] = (uint8_t)(i * 13 + 1);
	*len = p + o->tail;
	free(markers);
	return b;
}

#endif
