/* memmap.c - the guest memory map (PVH memmap / E820) and the command line, both shared by every boot path. */
#include <errno.h>
#include <string.h>

#include "brisk/boot.h"
#include "brisk/layout.h"
#include "brisk/mem.h"
#include "x86_boot.h"

/* Appends [start, end) clipped to [start, limit) when non-empty and there is room. */
static unsigned add(struct memmap_entry *out, unsigned n, unsigned max, uint64_t start, uint64_t end, uint64_t limit,
		    uint32_t type)
{
	if (end > limit)
		end = limit;
	if (n >= max || start >= end)
		return n;
	out[n] = (struct memmap_entry){.addr = start, .size = end - start, .type = type};
	return n + 1;
}

/*
 * The map a PC BIOS would report (ACPI 6.2 section 15, "System Address Map
 * Interfaces"), minus what a microVM lacks:
 *   [0, EBDA)              RAM  (real-mode IVT, BDA, boot structures)
 *   [EBDA, 1 MiB)          reserved (MP table, VGA/ROM/BIOS window)
 *   [1 MiB, low RAM end)   RAM  (kernel, initrd, the rest)
 *   [4 GiB, 4 GiB + rest)  RAM when --memory exceeds LAYOUT_MMIO_HOLE
 * The 32-bit MMIO hole (devices, LAPIC/IOAPIC, KVM's TSS and identity-map
 * pages) is simply absent: no entry claims it, so the guest never uses it
 * as RAM. Entries are emitted in address order and never overlap.
 */
unsigned memmap_build(const struct gmem *mem, struct memmap_entry *out, unsigned max)
{
	uint64_t low = gmem_low_size(mem);
	unsigned n = 0;

	n = add(out, n, max, 0, LAYOUT_EBDA, low, MEMMAP_RAM);
	n = add(out, n, max, LAYOUT_EBDA, LAYOUT_LEGACY_END, low, MEMMAP_RESERVED);
	n = add(out, n, max, LAYOUT_HIGH_RAM, low, low, MEMMAP_RAM);
	if (mem->nr > 1)
		n = add(out, n, max, mem->region[1].gpa, mem->region[1].gpa + mem->region[1].size, UINT64_MAX,
			MEMMAP_RAM);
	return n;
}

int x86_write_cmdline(const struct gmem *mem, const char *cmdline, char *err, size_t errlen)
{
	size_t len;

	if (!cmdline)
		cmdline = "";
	len = strlen(cmdline);
	if (len >= LAYOUT_CMDLINE_MAX)
		return boot_fail(err, errlen, -E2BIG,
				 "kernel command line is %zu bytes; the limit is %lu bytes (%lu with its NUL)", len,
				 LAYOUT_CMDLINE_MAX - 1, LAYOUT_CMDLINE_MAX);
	if (gmem_write(mem, LAYOUT_CMDLINE, cmdline, len + 1))
		return boot_fail(err, errlen, -EFAULT, "guest RAM does not cover the command line at 0x%lx",
				 LAYOUT_CMDLINE);
	return 0;
}
