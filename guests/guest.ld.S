/* guest.ld.S - link map of the test guests (run through cpp): one image at BRISK_GUEST_LOAD_ADDR, PVH-booted. */
#include "brisk/abi.h"

/*
 * Two page-aligned PT_LOAD segments (code+rodata, data+bss) and a PT_NOTE
 * holding the XEN_ELFNOTE_PHYS32_ENTRY note that QEMU and brisk boot by.
 * The note also sits in the first PT_LOAD, as in Linux's vmlinux.
 */
OUTPUT_FORMAT("elf64-x86-64")
OUTPUT_ARCH(i386:x86-64)
ENTRY(pvh_start)

PHDRS
{
	text PT_LOAD FLAGS(5);
	data PT_LOAD FLAGS(6);
	note PT_NOTE FLAGS(4);
}

SECTIONS
{
	. = BRISK_GUEST_LOAD_ADDR;
	.text : {
		KEEP(*(.text.entry))
		*(.text .text.*)
	} :text
	/*
	 * As in Linux: text ends at _etext and the rest of its page is never executed. brisk profile's caller
	 * probes (docs/profiler.md "Callers") put their trampolines there; the page is mapped like the text.
	 */
	_etext = .;
	. = ALIGN(4096);
	.rodata : {
		*(.rodata .rodata.*)
	} :text
	.note : {
		KEEP(*(.note.Xen))
	} :text :note

	. = ALIGN(4096);
	.data : {
		*(.data.pagetables)
		*(.data .data.*)
	} :data
	.bss : {
		*(.bss .bss.*)
		*(COMMON)
	} :data

	/DISCARD/ : {
		*(.comment)
		*(.eh_frame)
		*(.note.GNU-stack)
		*(.note.gnu.*)
	}
}
