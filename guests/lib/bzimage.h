/* bzimage.h - the setup header values of the conf-bzimage test image (bzsetup.S writes them, conf64.c checks the copy).
 */
#ifndef BRISK_GUEST_BZIMAGE_H
#define BRISK_GUEST_BZIMAGE_H

/* Linux Documentation/arch/x86/boot.rst, "The Real-Mode Kernel Header". */
#define BZ_SETUP_SECTS	    1	   /* boot sector + 1 sector of setup: payload at file offset 0x400 */
#define BZ_VERSION	    0x020f /* boot protocol 2.15 */
#define BZ_LOADFLAGS	    0x01   /* LOADED_HIGH */
#define BZ_XLOADFLAGS	    0x0001 /* XLF_KERNEL_64: 64-bit entry at payload + 0x200 */
#define BZ_KERNEL_ALIGNMENT 0x200000
#define BZ_MIN_ALIGNMENT    21 /* log2 */
#define BZ_PREF_ADDRESS	    0x1000000
#define BZ_CMDLINE_SIZE	    2047 /* as Linux: COMMAND_LINE_SIZE - 1, NUL excluded */
#define BZ_INITRD_ADDR_MAX  0x7fffffff
#define BZ_VID_MODE	    0xffff /* NORMAL_VGA */
#define BZ_ENTRY64_OFFSET   0x200

#endif
