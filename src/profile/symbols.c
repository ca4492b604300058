/* symbols.c - guest symbols from an ELF symtab or a System.map: a sorted array searched by address. */
#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/profile.h"

/*
 * ELF: gABI chapter 4 (section header table, SHT_SYMTAB with sh_link naming
 * its string table, Elf64_Sym). Every offset and size is checked against the
 * file before use; the file is host input but may be anything the user
 * passed. System.map: nm(1) output, "ADDRESS TYPE NAME" per line.
 */
#define SYMTAB_MAX_SYMS (1u << 24) /* vmlinux has ~150k */
#define SYMTAB_MAX_LINE 512

__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return ret;
}

static int in_buf(uint64_t off, uint64_t len, size_t size)
{
	return off <= size && len <= size - off;
}

static int add(struct symtab *t, size_t *cap, uint64_t addr, uint64_t size, const char *name, size_t nlen)
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

static void sort_dedupe(struct symtab *t)
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

/* Keeps functions and untyped labels (assembly entry points) that are defined. */
static int wanted_sym(const Elf64_Sym *s)
{
	unsigned type = ELF64_ST_TYPE(s->st_info);

	return s->st_name && s->st_shndx != SHN_UNDEF && s->st_shndx < SHN_LORESERVE &&
	       (type == STT_FUNC || type == STT_NOTYPE);
}

/* The symbols of symtab section `sh` whose strings are in section `str`. */
static int elf_syms(struct symtab *t, const uint8_t *buf, size_t len, const Elf64_Shdr *sh, const Elf64_Shdr *str,
		    char *err, size_t errlen)
{
	size_t cap = 0;

	if (sh->sh_entsize != sizeof(Elf64_Sym) || !in_buf(sh->sh_offset, sh->sh_size, len) ||
	    !in_buf(str->sh_offset, str->sh_size, len) || str->sh_size == 0)
		return fail(err, errlen, -EINVAL, "%s: symbol table section out of the file or malformed", t->source);
	for (uint64_t i = 0; i < sh->sh_size / sizeof(Elf64_Sym); i++) {
		Elf64_Sym s;
		const char *name;
		int ret;

		memcpy(&s, buf + sh->sh_offset + i * sizeof(s), sizeof(s));
		if (!wanted_sym(&s) || s.st_name >= str->sh_size)
			continue;
		name = (const char *)buf + str->sh_offset + s.st_name;
		ret = add(t, &cap, s.st_value, s.st_size, name, strnlen(name, str->sh_size - s.st_name));
		if (ret)
			return fail(err, errlen, ret, "%s: %s", t->source, strerror(-ret));
	}
	return 0;
}

static int load_elf(struct symtab *t, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
	Elf64_Ehdr eh;

	if (len < sizeof(eh) || buf[EI_CLASS] != ELFCLASS64)
		return fail(err, errlen, -EINVAL, "%s: only 64-bit ELF symbol tables are supported", t->source);
	memcpy(&eh, buf, sizeof(eh));
	if (eh.e_shentsize != sizeof(Elf64_Shdr) || !in_buf(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), len))
		return fail(err, errlen, -EINVAL, "%s: section header table out of the file", t->source);
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr sh, str;

		memcpy(&sh, buf + eh.e_shoff + i * sizeof(sh), sizeof(sh));
		if (sh.sh_type != SHT_SYMTAB)
			continue;
		if (sh.sh_link >= eh.e_shnum)
			return fail(err, errlen, -EINVAL, "%s: symtab's string table index out of range", t->source);
		memcpy(&str, buf + eh.e_shoff + sh.sh_link * sizeof(str), sizeof(str));
		return elf_syms(t, buf, len, &sh, &str, err, errlen);
	}
	return fail(err, errlen, -ENOENT, "%s: ELF file without a symbol table (stripped?)", t->source);
}

/* One System.map line "ADDR TYPE NAME": 1 kept, 0 skipped (not text), -1 malformed. */
static int map_line(const char *line, size_t n, uint64_t *addr, const char **name, size_t *nlen)
{
	char tmp[SYMTAB_MAX_LINE], type;
	char *end;
	const char *p;

	if (n >= sizeof(tmp) || n == 0)
		return n == 0 ? 0 : -1;
	memcpy(tmp, line, n);
	tmp[n] = '\0';
	if (!isxdigit((unsigned char)tmp[0]))
		return -1;
	*addr = strtoull(tmp, &end, 16);
	if (*end != ' ' || !isalpha((unsigned char)end[1]) || end[2] != ' ' || !end[3] ||
	    isspace((unsigned char)end[3]))
		return -1;
	type = end[1];
	p = line + (end + 3 - tmp);
	*name = p;
	*nlen = strcspn(p, " \t\r\n");
	if (*nlen > n)
		*nlen = n;
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
			return fail(err, errlen, -EINVAL,
				    "%s: line %zu is not \"ADDRESS TYPE NAME\": not a System.map or ELF file",
				    t->source, lineno);
		if (r > 0 && (ret = add(t, &cap, addr, 0, name, nlen)))
			return fail(err, errlen, ret, "%s: %s", t->source, strerror(-ret));
		p = nl ? nl + 1 : endp;
	}
	if (t->n == 0)
		return fail(err, errlen, -EINVAL, "%s: no text symbols (T/t/W/w) found", t->source);
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
		ret = fail(err, errlen, -ENOENT, "%s: no function symbols", name);
	if (ret) {
		symtab_free(t);
		return ret;
	}
	sort_dedupe(t);
	return 0;
}

int symtab_load(struct symtab *t, const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;
	struct stat st;
	void *m;

	memset(t, 0, sizeof(*t));
	if (fd < 0)
		return fail(err, errlen, -errno, "symbols file %s: %s", path, strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size == 0) {
		close(fd);
		return fail(err, errlen, -EINVAL, "symbols file %s: not a regular, non-empty file", path);
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return fail(err, errlen, -errno, "symbols file %s: mmap: %s", path, strerror(errno));
	ret = symtab_load_mem(t, m, (size_t)st.st_size, path, err, errlen);
	munmap(m, (size_t)st.st_size);
	return ret;
}

int symtab_lookup(const struct symtab *t, uint64_t addr, char *out, size_t outlen)
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
		return 0;
	s = &t->s[lo - 1];
	if (s->size ? addr - s->addr >= s->size : addr - s->addr > SYMTAB_MAX_GAP)
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
