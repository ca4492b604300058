/* symbols.c - guest symbols from an ELF symtab or a System.map: a sorted array searched by address. */
#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/file.h"
#include "brisk/profile.h"

/*
 * ELF: gABI chapter 4 (section header table, SHT_SYMTAB with sh_link naming
 * its string table, Elf32_Sym/Elf64_Sym), both classes: 32-bit PVH kernels
 * and unikernels ship as ELF32. Every offset, size and index is checked
 * against the file before use; the file is host input but may be anything
 * the user passed. System.map: nm(1) output, "ADDRESS TYPE NAME" per line,
 * parsed within the bytes of each line (the mapping has no terminating NUL).
 */
#define SYMTAB_MAX_SYMS (1u << 24) /* vmlinux has ~150k */
#define SYMTAB_MAX_LINE 512

static int in_buf(uint64_t off, uint64_t len, size_t size)
{
	return off <= size && len <= size - off;
}

int symtab_add(struct symtab *t, size_t *cap, uint64_t addr, uint64_t size, const char *name, size_t nlen)
{
	if (t->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 1024;
		struct sym *s;

		if (ncap > SYMTAB_MAX_SYMS)
			return -E2BIG;
		s = realloc(t->s, ncap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		t->s = s;
		*cap = ncap;
	}
	t->s[t->n].name = strndup(name, nlen);
	if (!t->s[t->n].name)
		return -ENOMEM;
	t->s[t->n].addr = addr;
	t->s[t->n].size = size;
	t->n++;
	return 0;
}

/* Sized symbols first at equal addresses, so that lookup prefers a function with known extent. */
static int cmp_sym(const void *pa, const void *pb)
{
	const struct sym *a = pa, *b = pb;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return (b->size != 0) - (a->size != 0);
}

void symtab_sort(struct symtab *t)
{
	size_t w = 0;

	qsort(t->s, t->n, sizeof(*t->s), cmp_sym);
	for (size_t r = 0; r < t->n; r++) {
		if (w && t->s[w - 1].addr == t->s[r].addr) {
			free(t->s[r].name);
			continue;
		}
		t->s[w++] = t->s[r];
	}
	t->n = w;
}

/* The section header fields brisk uses, from either ELF class. */
struct shdr {
	uint32_t type, link;
	uint64_t offset, size, entsize;
};

/* The symbol fields brisk uses, from either ELF class. */
struct esym {
	uint32_t name;
	uint64_t value, size;
	unsigned char info;
	uint16_t shndx;
};

/* An ELF file's class and its section header table, located and checked against the file. */
struct elf_file {
	const uint8_t *buf;
	size_t len;
	int is64;
	uint64_t shoff;
	uint32_t shnum;
	size_t shentsize, symentsize;
	const char *source;
};

/* Section header i; the table was checked to lie in the file (elf_open), and i < shnum. */
static void read_shdr(const struct elf_file *f, uint32_t i, struct shdr *out)
{
	const uint8_t *p = f->buf + f->shoff + (uint64_t)i * f->shentsize;

	if (f->is64) {
		Elf64_Shdr sh;

		memcpy(&sh, p, sizeof(sh));
		*out = (struct shdr){sh.sh_type, sh.sh_link, sh.sh_offset, sh.sh_size, sh.sh_entsize};
	} else {
		Elf32_Shdr sh;

		memcpy(&sh, p, sizeof(sh));
		*out = (struct shdr){sh.sh_type, sh.sh_link, sh.sh_offset, sh.sh_size, sh.sh_entsize};
	}
}

/* Symbol at file offset off; the caller checked [off, off + symentsize) lies in the file. */
static void read_sym(const struct elf_file *f, uint64_t off, struct esym *out)
{
	if (f->is64) {
		Elf64_Sym s;

		memcpy(&s, f->buf + off, sizeof(s));
		*out = (struct esym){s.st_name, s.st_value, s.st_size, s.st_info, s.st_shndx};
	} else {
		Elf32_Sym s;

		memcpy(&s, f->buf + off, sizeof(s));
		*out = (struct esym){s.st_name, s.st_value, s.st_size, s.st_info, s.st_shndx};
	}
}

/*
 * The ELF header (gABI 4, "ELF Header"): class, byte order and the section
 * header table, which must lie entirely in the file. e_shnum == 0 with a
 * table present means the count is in section 0's sh_size ("Sections":
 * extended section numbering).
 */
static int elf_open(struct elf_file *f, const uint8_t *buf, size_t len, const char *source, char *err, size_t errlen)
{
	uint16_t shnum, shentsize;

	*f = (struct elf_file){.buf = buf, .len = len, .source = source};
	if (len < EI_NIDENT || (buf[EI_CLASS] != ELFCLASS32 && buf[EI_CLASS] != ELFCLASS64))
		return err_set(err, errlen, -EINVAL, "%s: ELF class %u is neither ELFCLASS32 nor ELFCLASS64", source,
			       len < EI_NIDENT ? 0 : buf[EI_CLASS]);
	if (buf[EI_DATA] != ELFDATA2LSB)
		return err_set(err, errlen, -EINVAL, "%s: not a little-endian ELF file (EI_DATA %u)", source,
			       buf[EI_DATA]);
	f->is64 = buf[EI_CLASS] == ELFCLASS64;
	if (f->is64) {
		Elf64_Ehdr eh;

		if (len < sizeof(eh))
			return err_set(err, errlen, -EINVAL, "%s: truncated ELF64 header (%zu bytes)", source, len);
		memcpy(&eh, buf, sizeof(eh));
		f->shoff = eh.e_shoff;
		shnum = eh.e_shnum;
		shentsize = eh.e_shentsize;
		f->shentsize = sizeof(Elf64_Shdr);
		f->symentsize = sizeof(Elf64_Sym);
	} else {
		Elf32_Ehdr eh;

		if (len < sizeof(eh))
			return err_set(err, errlen, -EINVAL, "%s: truncated ELF32 header (%zu bytes)", source, len);
		memcpy(&eh, buf, sizeof(eh));
		f->shoff = eh.e_shoff;
		shnum = eh.e_shnum;
		shentsize = eh.e_shentsize;
		f->shentsize = sizeof(Elf32_Shdr);
		f->symentsize = sizeof(Elf32_Sym);
	}
	if (f->shoff == 0)
		return err_set(err, errlen, -ENOENT, "%s: ELF file without section headers (stripped?)", source);
	if (shentsize != f->shentsize)
		return err_set(err, errlen, -EINVAL, "%s: e_shentsize %u, expected %zu", source, shentsize,
			       f->shentsize);
	f->shnum = shnum;
	if (shnum == 0) {
		struct shdr s0;

		if (!in_buf(f->shoff, f->shentsize, len))
			return err_set(err, errlen, -EINVAL, "%s: section header table out of the file", source);
		f->shnum = 1;
		read_shdr(f, 0, &s0);
		f->shnum = s0.size > UINT32_MAX ? UINT32_MAX : (uint32_t)s0.size;
	}
	if (!in_buf(f->shoff, (uint64_t)f->shnum * f->shentsize, len))
		return err_set(err, errlen, -EINVAL, "%s: section header table (%u entries at %#llx) out of the file",
			       source, f->shnum, (unsigned long long)f->shoff);
	return 0;
}

/* Keeps functions and untyped labels (assembly entry points) that are defined in a section. */
static int wanted_sym(const struct esym *s)
{
	unsigned type = ELF64_ST_TYPE(s->info); /* the same bits as ELF32_ST_TYPE */

	return s->name && s->shndx != SHN_UNDEF && s->shndx < SHN_LORESERVE && (type == STT_FUNC || type == STT_NOTYPE);
}

/* The symbols of symtab section `sh` whose strings are in section `str`; both checked to lie in the file. */
static int elf_syms(struct symtab *t, const struct elf_file *f, const struct shdr *sh, const struct shdr *str,
		    char *err, size_t errlen)
{
	const char *strtab = (const char *)f->buf + str->offset;
	size_t cap = 0;

	for (uint64_t i = 0; i < sh->size / f->symentsize; i++) {
		struct esym s;
		size_t nlen;
		int ret;

		read_sym(f, sh->offset + i * f->symentsize, &s);
		if (!wanted_sym(&s) || s.name >= str->size)
			continue;
		nlen = strnlen(strtab + s.name, (size_t)(str->size - s.name));
		if (nlen == str->size - s.name || nlen == 0)
			continue; /* not terminated inside the string table */
		ret = symtab_add(t, &cap, s.value, s.size, strtab + s.name, nlen);
		if (ret)
			return err_set(err, errlen, ret, "%s: %s", t->source, strerror(-ret));
	}
	return 0;
}

/* The first SHT_SYMTAB section and its string table (gABI 4, "Symbol Table"), each checked against the file. */
static int load_elf(struct symtab *t, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
	struct elf_file f;
	int ret = elf_open(&f, buf, len, t->source, err, errlen);

	if (ret)
		return ret;
	for (uint32_t i = 0; i < f.shnum; i++) {
		struct shdr sh, str;

		read_shdr(&f, i, &sh);
		if (sh.type != SHT_SYMTAB)
			continue;
		if (sh.entsize != f.symentsize || !in_buf(sh.offset, sh.size, len))
			return err_set(
			    err, errlen, -EINVAL,
			    "%s: symbol table (section %u: %#llx bytes at %#llx, entry size %llu) out of the "
			    "file or malformed",
			    t->source, i, (unsigned long long)sh.size, (unsigned long long)sh.offset,
			    (unsigned long long)sh.entsize);
		if (sh.link >= f.shnum || sh.link == 0)
			return err_set(err, errlen, -EINVAL,
				       "%s: symbol table's string table index %u out of range (%u sections)", t->source,
				       sh.link, f.shnum);
		read_shdr(&f, sh.link, &str);
		if (str.type != SHT_STRTAB || str.size == 0 || !in_buf(str.offset, str.size, len))
			return err_set(
			    err, errlen, -EINVAL,
			    "%s: string table (section %u: type %u, %#llx bytes at %#llx) empty, of the wrong "
			    "type or out of the file",
			    t->source, sh.link, str.type, (unsigned long long)str.size, (unsigned long long)str.offset);
		return elf_syms(t, &f, &sh, &str, err, errlen);
	}
	return err_set(err, errlen, -ENOENT, "%s: ELF file without a symbol table (stripped?)", t->source);
}

/*
 * One System.map line "ADDR TYPE NAME" of n bytes (no newline; nothing
 * after line[n-1] may be read): 1 kept, 0 skipped (blank, not text), -1
 * malformed. A trailing CR and anything after the name (" [module]" in
 * /proc/kallsyms) are ignored.
 */
static int map_line(const char *line, size_t n, uint64_t *addr, const char **name, size_t *nlen)
{
	size_t i = 0;
	char type;

	if (n && line[n - 1] == '\r')
		n--;
	if (n == 0)
		return 0;
	if (n >= SYMTAB_MAX_LINE)
		return -1;
	for (*addr = 0; i < n && isxdigit((unsigned char)line[i]); i++) {
		if (i == 16)
			return -1; /* more than 64 bits */
		*addr = *addr << 4 |
			(uint64_t)(isdigit((unsigned char)line[i]) ? line[i] - '0'
								   : (tolower((unsigned char)line[i]) - 'a' + 10));
	}
	if (i == 0 || n - i < 4 || line[i] != ' ' || !isalpha((unsigned char)line[i + 1]) || line[i + 2] != ' ' ||
	    isspace((unsigned char)line[i + 3]))
		return -1;
	type = line[i + 1];
	*name = line + i + 3;
	for (*nlen = 0; i + 3 + *nlen < n && (*name)[*nlen] && !isspace((unsigned char)(*name)[*nlen]); (*nlen)++)
		;
	if (*nlen == 0)
		return -1; /* a NUL where the name should start */
	return type == 'T' || type == 't' || type == 'W' || type == 'w';
}

static int load_map(struct symtab *t, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
	const char *p = (const char *)buf, *endp = p + len;
	size_t cap = 0, lineno = 0;

	while (p < endp) {
		const char *nl = memchr(p, '\n', (size_t)(endp - p)), *name;
		size_t n = (size_t)((nl ? nl : endp) - p), nlen;
		uint64_t addr;
		int r = map_line(p, n, &addr, &name, &nlen), ret;

		lineno++;
		if (r < 0)
			return err_set(err, errlen, -EINVAL,
				       "%s: line %zu is not \"ADDRESS TYPE NAME\": not a System.map or ELF file",
				       t->source, lineno);
		if (r > 0 && (ret = symtab_add(t, &cap, addr, 0, name, nlen)))
			return err_set(err, errlen, ret, "%s: %s", t->source, strerror(-ret));
		p = nl ? nl + 1 : endp;
	}
	if (t->n == 0)
		return err_set(err, errlen, -EINVAL, "%s: no text symbols (T/t/W/w) found", t->source);
	return 0;
}

int symtab_is_elf(const uint8_t *buf, size_t len)
{
	return len >= SELFMAG && memcmp(buf, ELFMAG, SELFMAG) == 0;
}

int symtab_load_mem(struct symtab *t, const uint8_t *buf, size_t len, const char *name, char *err, size_t errlen)
{
	int ret;

	memset(t, 0, sizeof(*t));
	snprintf(t->source, sizeof(t->source), "%s", name);
	ret = symtab_is_elf(buf, len) ? load_elf(t, buf, len, err, errlen) : load_map(t, buf, len, err, errlen);
	if (!ret && t->n == 0)
		ret = err_set(err, errlen, -ENOENT, "%s: no function symbols", name);
	if (ret) {
		symtab_free(t);
		return ret;
	}
	symtab_sort(t);
	return 0;
}

int symtab_load(struct symtab *t, const char *path, char *err, size_t errlen)
{
	struct stat st;
	int fd, ret;
	void *m;

	memset(t, 0, sizeof(*t));
	fd = file_open_input(path, "symbols file", &st, err, errlen); /* never blocks on a FIFO */
	if (fd < 0)
		return fd;
	if (st.st_size == 0) {
		close(fd);
		return err_set(err, errlen, -EINVAL, "symbols file %s: empty", path);
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return err_set(err, errlen, -errno, "symbols file %s: mmap: %s", path, strerror(errno));
	ret = symtab_load_mem(t, m, (size_t)st.st_size, path, err, errlen);
	munmap(m, (size_t)st.st_size);
	return ret;
}

const struct sym *symtab_find(const struct symtab *t, uint64_t addr)
{
	size_t lo = 0, hi = t ? t->n : 0;
	const struct sym *s;

	/* The last symbol at or below addr. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->s[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	s = &t->s[lo - 1];
	if (s->size ? addr - s->addr >= s->size : addr - s->addr > SYMTAB_MAX_GAP)
		return NULL;
	return s;
}

int symtab_lookup(const struct symtab *t, uint64_t addr, char *out, size_t outlen)
{
	const struct sym *s = symtab_find(t, addr);

	if (!s)
		return 0;
	snprintf(out, outlen, "%s+0x%llx", s->name, (unsigned long long)(addr - s->addr));
	return 1;
}

void symtab_free(struct symtab *t)
{
	for (size_t i = 0; t->s && i < t->n; i++)
		free(t->s[i].name);
	free(t->s);
	t->s = NULL;
	t->n = 0;
}
