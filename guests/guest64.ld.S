/* guest64.ld.S - link map of the 64-bit boot protocol guests (cpp): conf-elf64 (ELF at 1 MiB, no PVH note) or, with BZIMAGE, conf-bzimage. */
#include "brisk/abi.h"
#include "bzimage.h"

/*
 * conf-elf64: a plain ELF64 whose e_entry is the 64-bit entry (entry64),
 * loaded at its physical addresses, as Firecracker boots vmlinux.
 *
 * conf-bzimage (-DBZIMAGE): linked at 0 and turned into a flat file by
 * objcopy -O binary: the setup sectors (bzsetup.S) at file offset 0, the
 * protected-mode payload at (setup_sects + 1) * 512 with the 32-bit entry
 * at its start and the 64-bit entry at +0x200. The payload is compiled
 * -fpie and checked for absolute relocations (guests.mk), so it runs at
 * whatever address the loader picks.
 */
OUTPUT_FORMAT("elf64-x86-64")
OUTPUT_ARCH(i386:x86-64)
ENTRY(entry64)

PHDRS
{
	text PT_LOAD FLAGS(5);
	data PT_LOAD FLAGS(6);
}

SECTIONS
{
#ifdef BZIMAGE
	. = 0;
	.setup : {
		KEEP(*(.bzimage.setup))
	} :text
	. = (BZ_SETUP_SECTS + 1) * 512;
	.text : {
		_payload = .; /* section-relative, so RIP-relative references to it move with the image */
		KEEP(*(.text.head32))
		. = BZ_ENTRY64_OFFSET;
		KEEP(*(.text.entry))
		*(.text .text.*)
	} :text
#else
	. = BRISK_GUEST_LOAD_ADDR;
	.text : {
		KEEP(*(.text.entry))
		*(.text .text.*)
	} :text
#endif
	.rodata : {
		*(.rodata .rodata.*)
	} :text

	. = ALIGN(4096);
	.data : {
		*(.data .data.*)
		. = ALIGN(16); /* the file ends on a paragraph: syssize * 16 == payload bytes */
	} :data
	_edata = .;
	.bss : {
		__bss_start = .;
		*(.bss .bss.*)
		*(COMMON)
		__bss_end = .;
	} :data
	_end = .;
#ifdef BZIMAGE
	bz_syssize = ABSOLUTE((_edata - _payload + 15) / 16);
	bz_init_size = ABSOLUTE(_end - _payload);
#endif

	/DISCARD/ : {
		*(.comment)
		*(.eh_frame)
		*(.note.GNU-stack)
		*(.note.gnu.*)
		*(.note.Xen)
	}
}
