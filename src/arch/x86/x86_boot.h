/* x86_boot.h - internal helpers shared by the x86 boot paths: PVH, bzImage, plain ELF, zero page, initrd. */
#ifndef BRISK_X86_BOOT_H
#define BRISK_X86_BOOT_H

#include <stddef.h>
#include <stdint.h>

#include "brisk/boot.h"

struct gmem;

/*
 * Boot GDT selectors (LAYOUT_GDT, 4 entries). Code and data sit at the
 * selectors Linux's boot protocol names (Documentation/arch/x86/boot.rst,
 * "32-bit/64-bit boot protocol": __BOOT_CS 0x10, __BOOT_DS 0x18); the TSS
 * takes the otherwise unused entry 1 because VMX entry needs a usable TR
 * (Intel SDM Vol. 3C, "Checks on Guest Segment Registers") and the PVH ABI
 * asks for a 32-bit TSS.
 */
#define X86_SEL_TSS	0x08
#define X86_SEL_CS	0x10
#define X86_SEL_DS	0x18
#define X86_GDT_ENTRIES 4
#define X86_TSS_LIMIT	0x67 /* minimal 32-bit TSS, 104 bytes (SDM Vol. 3A, "Task-State Segment") */

/*
 * The boot GDT descriptor at `index` for `mode` (0 for an out-of-range
 * index). entry.c turns the same values into the hidden segment state, so
 * the table in guest memory and the registers never disagree.
 */
uint64_t x86_gdt_entry(enum boot_mode mode, unsigned index);

/*
 * Writes the boot GDT for `mode` at LAYOUT_GDT and a zeroed IDT at
 * LAYOUT_IDT. Returns 0 or -EFAULT (guest RAM does not cover them).
 */
__attribute__((warn_unused_result)) int x86_write_gdt(const struct gmem *mem, enum boot_mode mode);

/*
 * Copies `cmdline` (NULL = empty) with its NUL to LAYOUT_CMDLINE. Returns 0,
 * -E2BIG when it needs more than LAYOUT_CMDLINE_MAX bytes, or -EFAULT;
 * `err` names the lengths.
 */
__attribute__((warn_unused_result)) int x86_write_cmdline(const struct gmem *mem, const char *cmdline, char *err,
							  size_t errlen);

/*
 * Formats into `err` (when non-NULL and errlen > 0) and returns `ret`: the
 * one way the boot code reports a failure.
 */
int boot_fail(char *err, size_t errlen, int ret, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ---- PVH (pvh.c) ---------------------------------------------------------- */

/*
 * pvh_setup plus an initrd already copied to guest [initrd_addr,
 * initrd_addr + initrd_size): when initrd_size > 0 it becomes module 0
 * (struct hvm_modlist_entry at LAYOUT_MODLIST, nr_modules 1, no module
 * command line), which is where Linux's PVH entry looks for its ramdisk
 * (arch/x86/platform/pvh/enlighten.c). Returns as pvh_setup.
 */
__attribute__((warn_unused_result)) int pvh_setup_initrd(const struct gmem *mem, const struct elf_info *info,
							 const char *cmdline, uint64_t initrd_addr,
							 uint64_t initrd_size, uint64_t rsdp, struct boot_entry *entry,
							 char *err, size_t errlen);

/* ---- bzImage (bzimage.c) -------------------------------------------------- */

struct bzimage_info;
struct kernel;

/* Setup header offsets (boot.rst, "The Real-Mode Kernel Header"). */
#define BZ_HDR_OFF   0x1f1u /* first byte of the setup header (setup_sects) */
#define BZ_BOOT_FLAG 0x1feu /* 0xAA55 */
#define BZ_JUMP	     0x200u /* 0xEB, then the header's length - 2 */
#define BZ_MAGIC_OFF 0x202u /* "HdrS" */
#define BZ_HDR_MAGIC 0x53726448u

/*
 * Validates a bzImage's setup header and sizes against the file (boot.rst
 * "The Real-Mode Kernel Header", "Loading the Rest of the Kernel", "64-bit
 * Boot Protocol") without guest memory, and chooses the load address.
 * Returns 0; -ENOEXEC when there is no "HdrS" at 0x202 (not a bzImage at
 * all); -EINVAL with `err` naming the field and its value otherwise.
 */
__attribute__((warn_unused_result)) int bzimage_parse(const uint8_t *img, size_t size, struct bzimage_info *out,
						      char *err, size_t errlen);

/*
 * Loads a parsed bzImage (k->bz) and k->initrd: checks the init_size window
 * and the initrd fit in RAM and the command line fits cmdline_size, then
 * copies, builds boot_params and the 64-bit entry state. Returns 0 or
 * -EINVAL/-E2BIG/-ENOMEM with `err` filled; nothing is written on failure.
 */
__attribute__((warn_unused_result)) int bzimage_load(struct kernel *k, const struct gmem *mem, const char *cmdline,
						     struct boot_entry *entry, char *err, size_t errlen);

/* ---- The zero page (zeropage.c) -------------------------------------------- */

/* What the zero page says beyond the memory map. */
struct zeropage {
	const uint8_t *setup_hdr; /* bzImage: the image's setup header (from offset 0x1f1); NULL: synthesise one */
	size_t setup_hdr_len;	  /* bytes at setup_hdr, at most the header's slot in boot_params */
	uint64_t code32_start;	  /* bzImage: load address of the protected-mode part */
	uint32_t cmdline_len;	  /* ELF only: written to cmdline_size, as Firecracker does */
	uint64_t initrd_addr, initrd_size;
	uint64_t rsdp_addr; /* the ACPI RSDP, or 0: boot_params.acpi_rsdp_addr (protocol 2.14) */
};

/*
 * Builds struct boot_params (Documentation/arch/x86/zero-page.rst) in a
 * zeroed buffer: the image's setup header (or, for a plain ELF vmlinux, the
 * few header fields Firecracker fills), the loader fields boot.rst marks
 * obligatory, the command line at LAYOUT_CMDLINE, the initrd and the E820
 * table from memmap_build; writes it at LAYOUT_ZERO_PAGE. Returns 0 or
 * -EFAULT.
 */
__attribute__((warn_unused_result)) int zeropage_write(const struct gmem *mem, const struct zeropage *zp);

/*
 * Everything a 64-bit boot protocol entry needs besides the kernel bytes:
 * command line, zero page, boot GDT (__BOOT_CS 0x10 / __BOOT_DS 0x18) and
 * the 0..4 GiB identity map; fills `entry` (BOOT_LONG64 at `rip`, RSI =
 * LAYOUT_ZERO_PAGE). Returns 0, -E2BIG (command line) or -EINVAL.
 */
__attribute__((warn_unused_result)) int boot64_setup(const struct gmem *mem, const struct zeropage *zp,
						     const char *cmdline, uint64_t rip, struct boot_entry *entry,
						     char *err, size_t errlen);

/* ---- initrd (initrd.c) ----------------------------------------------------- */

/* Maps the initrd file read-only (image_open's checks; messages say "initrd"). */
__attribute__((warn_unused_result)) int initrd_open(struct image *img, const char *path, char *err, size_t errlen);

/*
 * Chooses k->initrd_addr for k->initrd (size > 0): the highest page-aligned
 * address whose range ends at or below min(`limit`, end of RAM below the
 * MMIO hole), lies at or above LAYOUT_HIGH_RAM and misses the kernel's
 * [k->kernel_start, k->kernel_end); above the kernel when it fits there,
 * else below it. Sets 0 when there is no initrd. Returns 0 or -ENOMEM with
 * `err` naming the sizes.
 */
__attribute__((warn_unused_result)) int initrd_place(struct kernel *k, const struct gmem *mem, uint64_t limit,
						     char *err, size_t errlen);

/* Copies k->initrd to k->initrd_addr (after initrd_place) through image_copy. Returns 0 or its -errno. */
__attribute__((warn_unused_result)) int initrd_copy(const struct kernel *k, const struct gmem *mem);

#endif
