/* pvh_input.h - the input format of fuzz_pvh, shared by the harness and its seed generator (gen_pvh_seeds.c). */
#ifndef BRISK_TESTS_PVH_INPUT_H
#define BRISK_TESTS_PVH_INPUT_H

#include <stdint.h>

/*
 * An input is, in order (little-endian; missing bytes read as zero):
 *   1 byte   PF_* flags
 *   8 bytes  guest RAM size, modulo PF_RAM_MAX + 1 (0: no VM, the input is skipped)
 *   8 bytes  segment 0's paddr (the code, PF_X, holding the PVH entry), low 32 bits
 *   4 bytes  segment 0's memsz - 1, modulo PF_SEG_MAX
 *   8 bytes  segment 1's paddr (with PF_SEG1: a second PT_LOAD, data), modulo 2^33 (ELF32: low 32 bits)
 *   4 bytes  segment 1's memsz - 1, modulo PF_SEG_MAX
 *   4 bytes  the PVH entry: an offset into segment 0 (modulo its memsz), or with PF_RAW_ENTRY the address
 *   4 bytes  the initrd size - 1, modulo PF_INITRD_MAX; with PF_INITRD_HUGE, bytes beyond low RAM instead
 *   4 bytes  the command line's length, modulo LAYOUT_CMDLINE_MAX + 2 (unless PF_DEFAULT_CMDLINE)
 *   the rest the command line's bytes (repeated to its length; NUL read as a space), and the initrd's first bytes
 * The ELF is elf_builder.h's with these fields patched; each segment's file part is the builder's code bytes
 * (at most its memsz).
 */
#define PF_ELF32	   0x01u /* else ELF64 */
#define PF_NOTE_DESC8	   0x02u /* ELF64: Linux's 8-byte PHYS32_ENTRY descriptor in an 8-aligned note */
#define PF_SEG1		   0x04u
#define PF_INITRD	   0x08u
#define PF_INITRD_HUGE	   0x10u /* with PF_INITRD: at least the whole of low RAM, which can never fit */
#define PF_RSDP		   0x20u /* an ACPI RSDP at LAYOUT_ACPI, as vm_build sets before kernel_load */
#define PF_DEFAULT_CMDLINE 0x40u /* cmdline NULL: kernel_default_cmdline */
#define PF_RAW_ENTRY	   0x80u

#define PF_RAM_MAX    ((5ULL << 30)) /* 3 GiB below the MMIO hole, 2 GiB above 4 GiB */
#define PF_SEG_MAX    (1u << 20)
#define PF_INITRD_MAX (2u << 20)
#define PF_HDR	      45u

/* The header fields, in input order. */
struct pvh_input {
	uint8_t flags;
	uint64_t ram, paddr0;
	uint32_t memsz0;
	uint64_t paddr1;
	uint32_t memsz1, entry, initrd, cmdline_len;
};

/* Writes `in` as the first PF_HDR bytes of `out`. */
static inline void pvh_input_put(uint8_t *out, const struct pvh_input *in)
{
	const uint64_t v[] = {in->flags,  in->ram,   in->paddr0, in->memsz0,	 in->paddr1,
			      in->memsz1, in->entry, in->initrd, in->cmdline_len};
	const unsigned w[] = {1, 8, 8, 4, 8, 4, 4, 4, 4};

	for (unsigned i = 0, at = 0; i < 9; at += w[i++])
		for (unsigned b = 0; b < w[i]; b++)
			out[at + b] = (uint8_t)(v[i] >> (8 * b));
}

#endif
