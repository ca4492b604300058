/* elf_builder.h - minimal valid PVH ELF images in memory, for the unit tests and the fuzz corpus seeds. */
#ifndef BRISK_TESTS_ELF_BUILDER_H
#define BRISK_TESTS_ELF_BUILDER_H

#include <elf.h>
#include <stdint.h>
#include <string.h>

/*
 * Layout of a built image (EB_SIZE bytes):
 *   0x000  ELF header
 *   0x040  program headers: [0] PT_LOAD R+X, [1] PT_NOTE   (ELF32: at 0x034)
 *   0x200  the note segment: one Xen XEN_ELFNOTE_PHYS32_ENTRY note, 4-byte desc
 *   0x400  free (tests put larger program header tables here)
 *   0x1000 EB_CODE_SIZE bytes of "code" loaded at EB_PADDR; memsz EB_MEMSZ (bss after)
 */
#define EB_SIZE		    0x1100u
#define EB_NOTE_OFF	    0x200u
#define EB_NOTE_SIZE	    20u /* 12-byte header + "Xen\0" + 4-byte descriptor */
#define EB_FREE_OFF	    0x400u
#define EB_CODE_OFF	    0x1000u
#define EB_CODE_SIZE	    0x100u
#define EB_PADDR	    0x100000u
#define EB_MEMSZ	    0x2000u
#define EB_ENTRY	    (EB_PADDR + 0x10u)
#define EB_XEN_PHYS32_ENTRY 18u

static inline void eb_note(uint8_t *buf, uint32_t entry)
{
	const uint32_t hdr[3] = {4, 4, EB_XEN_PHYS32_ENTRY};

	memcpy(buf + EB_NOTE_OFF, hdr, sizeof(hdr));
	memcpy(buf + EB_NOTE_OFF + 12, "Xen", 4);
	memcpy(buf + EB_NOTE_OFF + 16, &entry, 4);
}

static inline void eb_code(uint8_t *buf)
{
	for (unsigned i = 0; i < EB_CODE_SIZE; i++)
		buf[EB_CODE_OFF + i] = (uint8_t)(0x90 + i); /* a recognisable pattern */
}

/* Builds a valid ELF64 x86-64 PVH image into `buf` (EB_SIZE bytes); returns EB_SIZE. */
static inline size_t eb_elf64(uint8_t *buf)
{
	Elf64_Ehdr eh = {
	    .e_ident = {ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64, ELFDATA2LSB, EV_CURRENT},
	    .e_type = ET_EXEC,
	    .e_machine = EM_X86_64,
	    .e_version = EV_CURRENT,
	    .e_entry = EB_ENTRY,
	    .e_phoff = sizeof(Elf64_Ehdr),
	    .e_ehsize = sizeof(Elf64_Ehdr),
	    .e_phentsize = sizeof(Elf64_Phdr),
	    .e_phnum = 2,
	};
	Elf64_Phdr ph[2] = {
	    {PT_LOAD, PF_R | PF_X, EB_CODE_OFF, EB_PADDR, EB_PADDR, EB_CODE_SIZE, EB_MEMSZ, 0x1000},
	    {PT_NOTE, PF_R, EB_NOTE_OFF, 0, 0, EB_NOTE_SIZE, EB_NOTE_SIZE, 4},
	};

	memset(buf, 0, EB_SIZE);
	memcpy(buf, &eh, sizeof(eh));
	memcpy(buf + eh.e_phoff, ph, sizeof(ph));
	eb_note(buf, EB_ENTRY);
	eb_code(buf);
	return EB_SIZE;
}

/* Builds a valid ELF32 i386 PVH image into `buf` (EB_SIZE bytes); returns EB_SIZE. */
static inline size_t eb_elf32(uint8_t *buf)
{
	Elf32_Ehdr eh = {
	    .e_ident = {ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS32, ELFDATA2LSB, EV_CURRENT},
	    .e_type = ET_EXEC,
	    .e_machine = EM_386,
	    .e_version = EV_CURRENT,
	    .e_entry = EB_ENTRY,
	    .e_phoff = sizeof(Elf32_Ehdr),
	    .e_ehsize = sizeof(Elf32_Ehdr),
	    .e_phentsize = sizeof(Elf32_Phdr),
	    .e_phnum = 2,
	};
	Elf32_Phdr ph[2] = {
	    {PT_LOAD, EB_CODE_OFF, EB_PADDR, EB_PADDR, EB_CODE_SIZE, EB_MEMSZ, PF_R | PF_X, 0x1000},
	    {PT_NOTE, EB_NOTE_OFF, 0, 0, EB_NOTE_SIZE, EB_NOTE_SIZE, PF_R, 4},
	};

	memset(buf, 0, EB_SIZE);
	memcpy(buf, &eh, sizeof(eh));
	memcpy(buf + eh.e_phoff, ph, sizeof(ph));
	eb_note(buf, EB_ENTRY);
	eb_code(buf);
	return EB_SIZE;
}

#endif
