/* bzsetup.S - boot sector and setup header that make conf-bzimage a bzImage (64-bit boot protocol only). */
#include "bzimage.h"

/*
 * The real-mode part of a bzImage (Documentation/arch/x86/boot.rst, "The
 * Real-Mode Kernel Header", offsets from the start of the file). brisk
 * never runs it: a 64-bit loader reads the header, copies it into
 * boot_params and enters the payload at load address + 0x200. Each .org
 * pins a field at its documented offset (the assembler refuses to move
 * backwards, so a misplaced field does not build). bz_syssize and
 * bz_init_size come from the linker script (guest64.ld.S).
 */
	.section .bzimage.setup, "a"
	.code16
bz_setup:
	.org 0x1f1
	.byte BZ_SETUP_SECTS		/* setup_sects */
	.word 0				/* root_flags */
	.long bz_syssize		/* syssize: payload in 16-byte paragraphs */
	.word 0				/* ram_size (obsolete) */
	.word BZ_VID_MODE		/* vid_mode */
	.word 0				/* root_dev */
	.word 0xaa55			/* boot_flag, 0x1fe */
	.org 0x200
	.byte 0xeb, 0x6a		/* jump: real-mode entry, to 0x26c */
	.ascii "HdrS"			/* header, 0x202 */
	.word BZ_VERSION		/* version, 0x206 */
	.long 0				/* realmode_swtch */
	.word 0x1000			/* start_sys_seg (obsolete) */
	.word 0				/* kernel_version: none */
	.byte 0				/* type_of_loader, 0x210 */
	.byte BZ_LOADFLAGS		/* loadflags, 0x211 */
	.word 0x8000			/* setup_move_size */
	.long 0x100000			/* code32_start, 0x214 */
	.long 0				/* ramdisk_image, 0x218 */
	.long 0				/* ramdisk_size, 0x21c */
	.long 0				/* bootsect_kludge */
	.word 0				/* heap_end_ptr, 0x224 */
	.byte 0				/* ext_loader_ver */
	.byte 0				/* ext_loader_type */
	.long 0				/* cmd_line_ptr, 0x228 */
	.long BZ_INITRD_ADDR_MAX	/* initrd_addr_max, 0x22c */
	.long BZ_KERNEL_ALIGNMENT	/* kernel_alignment, 0x230 */
	.byte 1				/* relocatable_kernel, 0x234 */
	.byte BZ_MIN_ALIGNMENT		/* min_alignment, 0x235 */
	.word BZ_XLOADFLAGS		/* xloadflags, 0x236 */
	.long BZ_CMDLINE_SIZE		/* cmdline_size, 0x238 */
	.long 0				/* hardware_subarch, 0x23c */
	.quad 0				/* hardware_subarch_data, 0x240 */
	.long 0				/* payload_offset, 0x248 */
	.long 0				/* payload_length, 0x24c */
	.quad 0				/* setup_data, 0x250 */
	.org 0x258
	.quad BZ_PREF_ADDRESS		/* pref_address, 0x258 */
	.long bz_init_size		/* init_size, 0x260 */
	.long 0				/* handover_offset, 0x264 */
	.long 0				/* kernel_info_offset, 0x268: none */
	.org 0x26c
1:	cli				/* real-mode entry: not supported, halt */
	hlt
	jmp 1b
	.org (BZ_SETUP_SECTS + 1) * 512

	.section .note.GNU-stack, "", @progbits
