/* kallsyms.c - finds a Linux kernel's kallsyms tables in guest memory and decodes them into a symtab. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/errmsg.h"
#include "brisk/kallsyms.h"

/*
 * The format is scripts/kallsyms.c's write_src() and kernel/kallsyms.c of
 * Linux 6.1 (Debian 12's kernel, 6.1.y stable with kallsyms_seqs_of_names):
 *
 *   kallsyms_offsets[num]      int32: with --absolute-percpu (x86-64 SMP) a
 *                              value >= 0 is an absolute address (per-CPU
 *                              symbols), else relative_base - 1 - value;
 *                              without it relative_base + (u32)value
 *   kallsyms_relative_base     u64, the lowest text address (relocated: KASLR)
 *   kallsyms_num_syms          u32
 *   kallsyms_names             per symbol: a length (one byte, or two with
 *                              bit 7 set: ULEB128) and that many token
 *                              indices; the first character expanded is the
 *                              nm type (t, T, d, ...)
 *   kallsyms_markers           u32 per 256 symbols: offset of that name
 *   kallsyms_seqs_of_names     3 bytes per symbol (absent before 6.1.y/6.2)
 *   kallsyms_token_table       256 NUL-terminated token strings
 *   kallsyms_token_index       256 u16 offsets into the token table
 *
 * Each label is 8-aligned (".balign 8"). Every character that occurs in a
 * symbol name keeps itself as a one-character token at its own index, so
 * tokens 0x30..0x39 are "0".."9": the 20 bytes "0\0" .. "9\0" find the token
 * table; the rest is located backwards from it and checked.
 */

#define ANCHOR_LEN  20
#define TOKEN_BACK  4096u /* token table bytes before the "0" token: 48 tokens */
#define TOKEN_AHEAD 8192u /* from the "0" token to the end of the token index */
#define INDEX_BYTES 512u  /* 256 u16 */

static const char anchor[ANCHOR_LEN + 1] = "0\0"
					   "1\0"
					   "2\0"
					   "3\0"
					   "4\0"
					   "5\0"
					   "6\0"
					   "7\0"
					   "8\0"
					   "9";

static uint64_t align8(uint64_t v)
{
	return (v + 7) & ~7ull;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* A copy of guest bytes [base, base+len) being parsed; every access is checked against len. */
struct kbuf {
	uint8_t *b;
	size_t len;
	uint64_t base;
};

/* The token table of one candidate: offsets into the kbuf. */
struct tokens {
	size_t table, index; /* kbuf offsets of kallsyms_token_table and kallsyms_token_index */
	uint16_t off[256];
	uint16_t len[256];
};

/* Walks back 48 strings from the "0" token at `zero` and forward 256, then checks the index. 0 or -1. */
static int find_tokens(const struct kbuf *k, size_t zero, struct tokens *tk)
{
	size_t p = zero, q;

	for (int i = 0; i < '0'; i++) { /* the start of each earlier string */
		if (p == 0)
			return -1;
		q = p - 1; /* the NUL that ends the previous string */
		while (q > 0 && k->b[q - 1] != 0 && p - q < TOKEN_BACK)
			q--;
		if (q == 0 || p - q >= TOKEN_BACK)
			return -1;
		p = q;
	}
	tk->table = p;
	for (int i = 0; i < 256; i++) {
		const uint8_t *nul = p < k->len ? memchr(k->b + p, 0, k->len - p) : NULL;

		if (!nul || p - tk->table > UINT16_MAX)
			return -1;
		tk->off[i] = (uint16_t)(p - tk->table);
		tk->len[i] = (uint16_t)((size_t)(nul - k->b) - p);
		p = (size_t)(nul - k->b) + 1;
	}
	tk->index = (size_t)(align8(k->base + p) - k->base);
	if (tk->index > k->len || k->len - tk->index < INDEX_BYTES)
		return -1;
	for (int i = 0; i < 256; i++)
		if (((uint16_t)k->b[tk->index + 2 * i] | (uint16_t)k->b[tk->index + 2 * i + 1] << 8) != tk->off[i])
			return -1;
	return 0;
}

/* One name record at *off in [.., end): its data offset and length; advances *off. 0 or -1. */
static int name_at(const struct kbuf *k, size_t *off, size_t end, size_t *data, size_t *len)
{
	size_t o = *off, n;

	if (o >= end)
		return -1;
	n = k->b[o++];
	if (n & 0x80) { /* a "big" symbol: ULEB128 in two bytes */
		if (o >= end)
			return -1;
		n = (n & 0x7f) | (size_t)k->b[o++] << 7;
	}
	if (n == 0 || n > end - o)
		return -1;
	*data = o;
	*len = n;
	*off = o + n;
	return 0;
}

/* The layout of one candidate, all as kbuf offsets. */
struct layout {
	size_t offsets, names, markers, token_table;
	uint64_t relative_base;
	uint32_t num;
	int seqs;
};

/*
 * Whether (relative_base, num) at kbuf offset `hdr` starts a layout that
 * closes exactly on the token table: names, markers (each the offset of
 * every 256th name), optional seqs_of_names. Fills *l. 0 or -1.
 */
static int check_layout(const struct kbuf *k, size_t hdr, size_t token_table, struct layout *l)
{
	uint64_t num = rd64(k->b + hdr + 8), nm, markers_end, span4;
	size_t off, data, len;

	*l = (struct layout){.relative_base = rd64(k->b + hdr), .num = (uint32_t)num, .names = hdr + 16};
	span4 = align8(4 * num);
	if (hdr < span4)
		return -1;
	l->offsets = hdr - (size_t)span4;
	off = l->names;
	for (uint64_t i = 0; i < num; i++)
		if (name_at(k, &off, token_table, &data, &len))
			return -1;
	l->markers = (size_t)(align8(k->base + off) - k->base);
	nm = (num + 255) / 256;
	markers_end = align8(k->base + l->markers + 4 * nm) - k->base;
	if (markers_end == token_table)
		l->seqs = 0;
	else if (align8(k->base + markers_end + 3 * num) - k->base == token_table)
		l->seqs = 1;
	else
		return -1;
	/* The markers: offsets of names 0, 256, 512, ... from the start of kallsyms_names. */
	off = l->names;
	for (uint64_t i = 0; i < num; i++) {
		if ((i & 0xff) == 0 && rd32(k->b + l->markers + 4 * (i >> 8)) != off - l->names)
			return -1;
		(void)name_at(k, &off, token_table, &data, &len);
	}
	l->token_table = token_table;
	return 0;
}

/* Searches back from the token table for kallsyms_relative_base + kallsyms_num_syms. 0 or -1. */
static int find_layout(const struct kbuf *k, const struct tokens *tk, struct layout *l)
{
	/* A kbuf offset whose guest address is 8-aligned (every table is). */
	size_t hdr = (size_t)(((k->base + tk->table) & ~7ull) - k->base);

	while (hdr >= 16) {
		uint64_t rb, num;

		hdr -= 8;
		rb = rd64(k->b + hdr);
		num = rd64(k->b + hdr + 8);
		/* x86-64: the kernel text mapping, __START_KERNEL_map = 0xffffffff80000000 and up */
		if (rb < 0xffffffff80000000ull || num == 0 || num > KSYMS_MAX_SYMS)
			continue;
		if (check_layout(k, hdr, tk->table, l) == 0)
			return 0;
	}
	return -1;
}

/* The name of symbol data[0..len) expanded through the token table into out (type char first). */
static size_t expand(const struct kbuf *k, const struct tokens *tk, size_t data, size_t len, char *out)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		uint8_t c = k->b[data + i];
		size_t tl = tk->len[c];

		if (tl > KSYMS_NAME_MAX - n)
			tl = KSYMS_NAME_MAX - n;
		memcpy(out + n, k->b + tk->table + tk->off[c], tl);
		n += tl;
	}
	out[n] = '\0';
	return n;
}

static uint64_t address_of(const struct layout *l, int32_t v, int absolute_percpu)
{
	if (!absolute_percpu)
		return l->relative_base + (uint32_t)v;
	if (v >= 0)
		return (uint64_t)v;
	return l->relative_base - 1 - (uint64_t)(int64_t)v;
}

static int is_text(char type)
{
	return type == 't' || type == 'T' || type == 'w' || type == 'W';
}

/* Decodes every symbol; keeps the text ones. 0, -1 (addresses out of order) or -ENOMEM. */
static int decode(const struct kbuf *k, const struct tokens *tk, const struct layout *l, struct symtab *t,
		  struct ksyms_info *info)
{
	char name[KSYMS_NAME_MAX + 1];
	size_t off = l->names, cap = 0, data, len, negative = 0;
	uint64_t prev = 0;
	int apc;

	for (uint32_t i = 0; i < l->num; i++)
		negative += (int32_t)rd32(k->b + l->offsets + 4 * (size_t)i) < 0;
	apc = negative > l->num / 2; /* text symbols are negative in the --absolute-percpu encoding */
	*info = (struct ksyms_info){.relative_base = l->relative_base,
				    .num_syms = l->num,
				    .absolute_percpu = apc,
				    .seqs_of_names = l->seqs,
				    .token_table = k->base + l->token_table};
	for (uint32_t i = 0; i < l->num; i++) {
		uint64_t a = address_of(l, (int32_t)rd32(k->b + l->offsets + 4 * (size_t)i), apc);
		size_t n;

		(void)name_at(k, &off, l->token_table, &data, &len); /* checked by check_layout */
		n = expand(k, tk, data, len, name);
		if (a < prev)
			return -1; /* scripts/kallsyms.c sorts by address: this is not its table */
		prev = a;
		if (n < 2 || !is_text(name[0]))
			continue;
		if (symtab_add(t, &cap, a, 0, name + 1, n - 1))
			return -ENOMEM;
		if (!info->text_start)
			info->text_start = a;
		if (strcmp(name + 1, "_etext") == 0)
			info->etext = a;
	}
	info->text_syms = (uint32_t)t->n;
	return t->n ? 0 : -1;
}

/* Sizes each symbol up to the next one (kallsyms has no sizes; the next symbol ends a function). */
static void size_symbols(struct symtab *t)
{
	for (size_t i = 0; i + 1 < t->n; i++)
		t->s[i].size = t->s[i + 1].addr - t->s[i].addr;
}

static int covers(const struct symtab *t, uint64_t want)
{
	return want && symtab_find(t, want) != NULL;
}

/* Copies [lo, hi) of range r (clipped) into k. 0 or -errno. */
static int copy_in(const struct gspace *g, int r, uint64_t lo, uint64_t hi, struct kbuf *k)
{
	uint64_t rs = g->range[r].start, re = rs + g->range[r].size;

	lo = lo < rs ? rs : lo & ~7ull;
	hi = hi > re ? re : hi;
	if (hi <= lo)
		return -EFAULT;
	k->len = (size_t)(hi - lo);
	k->base = lo;
	k->b = malloc(k->len);
	if (!k->b)
		return -ENOMEM;
	if (g->read(g->ctx, lo, k->b, k->len)) {
		free(k->b);
		k->b = NULL;
		return -EFAULT;
	}
	return 0;
}

/* Tries the anchor at guest address a. 0 (t and info filled), -1 (not a kallsyms table) or -ENOMEM. */
static int try_anchor(const struct gspace *g, int r, uint64_t a, struct symtab *t, struct ksyms_info *info)
{
	struct kbuf w = {0}, k = {0};
	struct tokens tk;
	struct layout l;
	uint64_t table;
	int ret = copy_in(g, r, a - (a - g->range[r].start < TOKEN_BACK ? a - g->range[r].start : TOKEN_BACK),
			  a + TOKEN_AHEAD, &w);

	if (ret)
		return ret == -ENOMEM ? ret : -1;
	ret = find_tokens(&w, (size_t)(a - w.base), &tk) ? -1 : 0;
	table = w.base + tk.table;
	free(w.b);
	if (ret)
		return -1;
	/* Again, with everything from KSYMS_MAX_SPAN before the token table to the end of its index. */
	ret = copy_in(g, r, table > KSYMS_MAX_SPAN ? table - KSYMS_MAX_SPAN : 0, a + TOKEN_AHEAD, &k);
	if (ret)
		return ret == -ENOMEM ? ret : -1;
	if (find_tokens(&k, (size_t)(a - k.base), &tk) || find_layout(&k, &tk, &l)) {
		free(k.b);
		return -1;
	}
	memset(t, 0, sizeof(*t));
	ret = decode(&k, &tk, &l, t, info);
	free(k.b);
	if (ret) {
		symtab_free(t);
		return ret;
	}
	symtab_sort(t);
	size_symbols(t);
	return 0;
}

/* Scans range r for anchors, trying each; keeps the first valid table in best (one covering want wins). */
static int scan_range(const struct gspace *g, int r, uint64_t want, struct symtab *best, struct ksyms_info *bi,
		      unsigned *tries)
{
	uint64_t start = g->range[r].start, end = start + g->range[r].size;
	uint8_t *chunk = g->view ? NULL : malloc(KSYMS_SCAN_CHUNK + ANCHOR_LEN); /* a space with views needs none */

	if (!g->view && !chunk)
		return -ENOMEM;
	for (uint64_t pos = start; pos < end && *tries < KSYMS_MAX_TRIES; pos += KSYMS_SCAN_CHUNK) {
		size_t n =
		    end - pos > KSYMS_SCAN_CHUNK + ANCHOR_LEN ? KSYMS_SCAN_CHUNK + ANCHOR_LEN : (size_t)(end - pos);
		/* Scanning only finds candidates (try_anchor copies what it parses): a direct view will do. */
		const uint8_t *base = g->view ? g->view(g->ctx, pos, n) : NULL, *p, *hit;

		if (!base && (!chunk || g->read(g->ctx, pos, chunk, n)))
			continue;
		base = base ? base : chunk;
		for (p = base; (hit = memmem(p, n - (size_t)(p - base), anchor, ANCHOR_LEN)) != NULL;) {
			uint64_t a = pos + (uint64_t)(hit - base);
			struct symtab t;
			struct ksyms_info info;
			int ret;

			p = hit + 1;
			if ((size_t)(hit - base) >= KSYMS_SCAN_CHUNK)
				break; /* in the overlap: the next chunk finds it */
			if (++*tries > KSYMS_MAX_TRIES)
				break;
			ret = try_anchor(g, r, a, &t, &info);
			if (ret == -ENOMEM) {
				free(chunk);
				return ret;
			}
			if (ret)
				continue;
			if (!best->n || (!covers(best, want) && covers(&t, want))) {
				symtab_free(best);
				*best = t;
				*bi = info;
			} else {
				symtab_free(&t);
			}
			if (!want || covers(best, want)) {
				free(chunk);
				return 1;
			}
		}
	}
	free(chunk);
	return 0;
}

int ksyms_load(const struct gspace *g, uint64_t want, struct symtab *t, struct ksyms_info *info, char *err,
	       size_t errlen)
{
	unsigned tries = 0;

	memset(t, 0, sizeof(*t));
	memset(info, 0, sizeof(*info));
	for (unsigned r = 0; r < g->nr; r++) {
		int ret = scan_range(g, (int)r, want, t, info, &tries);

		if (ret < 0) {
			symtab_free(t);
			return err_set(err, errlen, ret, "kallsyms: out of memory");
		}
		if (ret)
			break;
	}
	if (!t->n)
		return err_set(err, errlen, -ENOENT,
			       "kallsyms: no kernel symbol table found in guest memory (%u token-table candidates)",
			       tries);
	snprintf(t->source, sizeof(t->source), "kallsyms at guest-physical 0x%llx",
		 (unsigned long long)info->token_table);
	return 0;
}
