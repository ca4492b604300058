/* symtab_builder.h - small ELF32/ELF64 files with a .symtab, built in memory for the symbol tests and fuzz seeds. */
#ifndef BRISK_TESTS_SYMTAB_BUILDER_H
#define BRISK_TESTS_SYMTAB_BUILDER_H

#include <elf.h>
#include <stdint.h>
#include <string.h>

/*
 * Layout of a built file (SB_SIZE bytes, either class, little-endian):
 *   0x000 ELF header
 *   0x100 .text (section 1): SB_TEXT_SIZE bytes at address SB_TEXT_ADDR
 *   0x200 .symtab (section 2): SB_NSYMS entries, sh_link = 3
 *   0x400 .strtab (section 3)
 *   0x600 section header table: NULL, .text, .symtab, .strtab
 * The symbols mirror the cpuid-storm guest: a sized function probe_hypervisor
 * (kept), an untyped label _start (kept), an object, an undefined and an
 * absolute symbol (all three skipped), and a sized function after_probe.
 */
#define SB_SIZE	       0x700u
#define SB_TEXT_OFF    0x100u
#define SB_TEXT_SIZE   0x10u
#define SB_TEXT_ADDR   0x100000u
#define SB_SYMTAB_OFF  0x200u
#define SB_STRTAB_OFF  0x400u
#define SB_SHOFF       0x600u
#define SB_SHNUM       4u
#define SB_NSYMS       7u
#define SB_PROBE_ADDR  0x1000d0u
#define SB_PROBE_SIZE  0x87u
#define SB_AFTER_ADDR  0x100200u
#define SB_SYMTAB_IDX  2u
#define SB_STRTAB_IDX  3u
#define SB_STRTAB_SIZE 0x60u

struct sb_sym {
	const char *name;
	uint64_t value, size;
	unsigned char type;
	uint16_t shndx;
};

static const struct sb_sym sb_syms[SB_NSYMS] = {
    {"", 0, 0, STT_NOTYPE, SHN_UNDEF},
    {"_start", SB_TEXT_ADDR, 0, STT_NOTYPE, 1},
    {"probe_hypervisor", SB_PROBE_ADDR, SB_PROBE_SIZE, STT_FUNC, 1},
    {"a_data_object", 0x102000, 8, STT_OBJECT, 1},
    {"undefined_fn", 0, 0, STT_FUNC, SHN_UNDEF},
    {"abs_sym", 0x1000, 0, STT_NOTYPE, SHN_ABS},
    {"after_probe", SB_AFTER_ADDR, 0x10, STT_FUNC, 1},
};

/* The section header fields the tests change, by name. */
enum sb_shfield { SB_SH_TYPE, SB_SH_OFFSET, SB_SH_SIZE, SB_SH_LINK, SB_SH_ENTSIZE };

/* Writes one section header of class `cls` (32 or 64) at index i. */
static inline void sb_put_shdr(uint8_t *buf, int cls, unsigned i, uint32_t type, uint64_t off, uint64_t size,
			       uint32_t link, uint64_t entsize)
{
	if (cls == 64) {
		Elf64_Shdr sh = {.sh_type = type,
				 .sh_offset = off,
				 .sh_size = size,
				 .sh_link = link,
				 .sh_entsize = entsize,
				 .sh_addralign = 1};
		memcpy(buf + SB_SHOFF + i * sizeof(sh), &sh, sizeof(sh));
	} else {
		Elf32_Shdr sh = {.sh_type = type,
				 .sh_offset = (uint32_t)off,
				 .sh_size = (uint32_t)size,
				 .sh_link = link,
				 .sh_entsize = (uint32_t)entsize,
				 .sh_addralign = 1};
		memcpy(buf + SB_SHOFF + i * sizeof(sh), &sh, sizeof(sh));
	}
}

/* Sets one field of section header i (values are truncated to 32 bits in an ELF32 file). */
static inline void sb_set_shdr(uint8_t *buf, int cls, unsigned i, enum sb_shfield f, uint64_t v)
{
	if (cls == 64) {
		Elf64_Shdr sh;

		memcpy(&sh, buf + SB_SHOFF + i * sizeof(sh), sizeof(sh));
		if (f == SB_SH_TYPE)
			sh.sh_type = (uint32_t)v;
		else if (f == SB_SH_OFFSET)
			sh.sh_offset = v;
		else if (f == SB_SH_SIZE)
			sh.sh_size = v;
		else if (f == SB_SH_LINK)
			sh.sh_link = (uint32_t)v;
		else
			sh.sh_entsize = v;
		memcpy(buf + SB_SHOFF + i * sizeof(sh), &sh, sizeof(sh));
	} else {
		Elf32_Shdr sh;

		memcpy(&sh, buf + SB_SHOFF + i * sizeof(sh), sizeof(sh));
		if (f == SB_SH_TYPE)
			sh.sh_type = (uint32_t)v;
		else if (f == SB_SH_OFFSET)
			sh.sh_offset = (uint32_t)v;
		else if (f == SB_SH_SIZE)
			sh.sh_size = (uint32_t)v;
		else if (f == SB_SH_LINK)
			sh.sh_link = (uint32_t)v;
		else
			sh.sh_entsize = (uint32_t)v;
		memcpy(buf + SB_SHOFF + i * sizeof(sh), &sh, sizeof(sh));
	}
}

/* Sets e_shoff, e_shnum and e_shentsize of the ELF header. */
static inline void sb_set_shtab(uint8_t *buf, int cls, uint64_t shoff, uint16_t shnum, uint16_t shentsize)
{
	if (cls == 64) {
		Elf64_Ehdr eh;

		memcpy(&eh, buf, sizeof(eh));
		eh.e_shoff = shoff;
		eh.e_shnum = shnum;
		eh.e_shentsize = shentsize;
		memcpy(buf, &eh, sizeof(eh));
	} else {
		Elf32_Ehdr eh;

		memcpy(&eh, buf, sizeof(eh));
		eh.e_shoff = (uint32_t)shoff;
		eh.e_shnum = shnum;
		eh.e_shentsize = shentsize;
		memcpy(buf, &eh, sizeof(eh));
	}
}

/* Symbol i's st_name (an offset into .strtab). */
static inline void sb_set_sym_name(uint8_t *buf, int cls, unsigned i, uint32_t st_name)
{
	size_t entsize = cls == 64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);

	memcpy(buf + SB_SYMTAB_OFF + i * entsize, &st_name, 4); /* st_name is the first word in both classes */
}

static inline void sb_put_sym(uint8_t *buf, int cls, unsigned i, uint32_t name_off, const struct sb_sym *s)
{
	unsigned char info = (unsigned char)(STB_GLOBAL << 4 | s->type);

	if (cls == 64) {
		Elf64_Sym y = {.st_name = name_off,
			       .st_info = info,
			       .st_shndx = s->shndx,
			       .st_value = s->value,
			       .st_size = s->size};
		memcpy(buf + SB_SYMTAB_OFF + i * sizeof(y), &y, sizeof(y));
	} else {
		Elf32_Sym y = {.st_name = name_off,
			       .st_value = (uint32_t)s->value,
			       .st_size = (uint32_t)s->size,
			       .st_info = info,
			       .st_shndx = s->shndx};
		memcpy(buf + SB_SYMTAB_OFF + i * sizeof(y), &y, sizeof(y));
	}
}

/* Builds the file of class `cls` (32: ELFCLASS32/EM_386, 64: ELFCLASS64/EM_X86_64) into buf; returns SB_SIZE. */
static inline size_t sb_build(uint8_t *buf, int cls)
{
	size_t entsize = cls == 64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym), shentsize;
	uint32_t str = 1;

	memset(buf, 0, SB_SIZE);
	memcpy(buf, ELFMAG, SELFMAG);
	buf[EI_CLASS] = cls == 64 ? ELFCLASS64 : ELFCLASS32;
	buf[EI_DATA] = ELFDATA2LSB;
	buf[EI_VERSION] = EV_CURRENT;
	if (cls == 64) {
		Elf64_Ehdr eh;

		memcpy(&eh, buf, sizeof(eh));
		eh.e_type = ET_EXEC;
		eh.e_machine = EM_X86_64;
		eh.e_version = EV_CURRENT;
		eh.e_entry = SB_TEXT_ADDR;
		eh.e_ehsize = sizeof(eh);
		memcpy(buf, &eh, sizeof(eh));
		shentsize = sizeof(Elf64_Shdr);
	} else {
		Elf32_Ehdr eh;

		memcpy(&eh, buf, sizeof(eh));
		eh.e_type = ET_EXEC;
		eh.e_machine = EM_386;
		eh.e_version = EV_CURRENT;
		eh.e_entry = SB_TEXT_ADDR;
		eh.e_ehsize = sizeof(eh);
		memcpy(buf, &eh, sizeof(eh));
		shentsize = sizeof(Elf32_Shdr);
	}
	sb_set_shtab(buf, cls, SB_SHOFF, SB_SHNUM, (uint16_t)shentsize);
	memset(buf + SB_TEXT_OFF, 0x90, SB_TEXT_SIZE);
	for (unsigned i = 0; i < SB_NSYMS; i++) {
		size_t n = strlen(sb_syms[i].name);

		sb_put_sym(buf, cls, i, n ? str : 0, &sb_syms[i]);
		if (n) {
			memcpy(buf + SB_STRTAB_OFF + str, sb_syms[i].name, n + 1);
			str += (uint32_t)n + 1;
		}
	}
	sb_put_shdr(buf, cls, 0, SHT_NULL, 0, 0, 0, 0);
	sb_put_shdr(buf, cls, 1, SHT_PROGBITS, SB_TEXT_OFF, SB_TEXT_SIZE, 0, 0);
	sb_put_shdr(buf, cls, SB_SYMTAB_IDX, SHT_SYMTAB, SB_SYMTAB_OFF, SB_NSYMS * entsize, SB_STRTAB_IDX, entsize);
	sb_put_shdr(buf, cls, SB_STRTAB_IDX, SHT_STRTAB, SB_STRTAB_OFF, SB_STRTAB_SIZE, 0, 0);
	return SB_SIZE;
}

#endif
