/* bzimage_builder.h - a minimal valid 64-bit bzImage in memory, for the unit tests and the fuzz corpus seeds. */
#ifndef BRISK_TESTS_BZIMAGE_BUILDER_H
#define BRISK_TESTS_BZIMAGE_BUILDER_H

#include <asm/bootparam.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * Layout of a built image (BB_SIZE bytes), as boot.rst's "The Real-Mode
 * Kernel Header" describes a bzImage:
 *   0x000  boot sector; the setup header at 0x1f1, ending at BB_HDR_END
 *   0x200  setup code (BB_SETUP_SECTS sectors after the boot sector)
 *   0x400  the protected-mode part: BB_PM_SIZE bytes of a recognisable pattern
 */
#define BB_SETUP_SECTS 1u
#define BB_SETUP_SIZE  ((BB_SETUP_SECTS + 1) * 512u)
#define BB_PM_SIZE     0x1000u
#define BB_SIZE	       (BB_SETUP_SIZE + BB_PM_SIZE)
#define BB_HDR_END     0x26cu /* 0x202 + 0x6a, as Linux 5.5+ (protocol 2.15) */
#define BB_VERSION     0x020fu
#define BB_INIT_SIZE   0x200000u
#define BB_ALIGN       0x200000u
#define BB_PREF	       0x1000000ULL
#define BB_CMDLINE_MAX 2047u
#define BB_INITRD_MAX  0x7fffffffu

static inline struct setup_header *bb_hdr(uint8_t *buf)
{
	return (struct setup_header *)(buf + 0x1f1);
}

/* Builds a valid bzImage into `buf` (BB_SIZE bytes); returns BB_SIZE. */
static inline size_t bb_build(uint8_t *buf)
{
	struct setup_header h;

	memset(buf, 0, BB_SIZE);
	memset(&h, 0, sizeof(h));
	h.setup_sects = BB_SETUP_SECTS;
	h.syssize = BB_PM_SIZE / 16;
	h.boot_flag = 0xaa55;
	h.jump = (uint16_t)(0xeb | ((BB_HDR_END - 0x202) << 8));
	h.header = 0x53726448; /* "HdrS" */
	h.version = BB_VERSION;
	h.loadflags = LOADED_HIGH;
	h.kernel_alignment = BB_ALIGN;
	h.relocatable_kernel = 1;
	h.min_alignment = 21;
	h.xloadflags = XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G;
	h.cmdline_size = BB_CMDLINE_MAX;
	h.initrd_addr_max = BB_INITRD_MAX;
	h.pref_address = BB_PREF;
	h.init_size = BB_INIT_SIZE;
	memcpy(buf + 0x1f1, &h, BB_HDR_END - 0x1f1);
	for (unsigned i = 0; i < BB_PM_SIZE; i++)
		buf[BB_SETUP_SIZE + i] = (uint8_t)(i * 7 + 3);
	return BB_SIZE;
}

#endif
