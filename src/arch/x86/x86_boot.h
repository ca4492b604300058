/* x86_boot.h - internal helpers shared by the x86 boot paths (PVH now, bzImage later). */
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

#endif
