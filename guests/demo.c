/* demo.c - the default guest embedded in brisk: banner, command line, ACPI RSDP, PVH memory map, two boot markers. */
#include "guest.h"

void guest_main(struct hvm_start_info *si)
{
	const struct hvm_memmap_table_entry *e;
	uint32_t i, n = 0;

	serial_init();
	bootmark(1);
	gprintf("brisk demo guest\n");
	gprintf("cmdline: %s\n", guest_cmdline(si));
	if (si && si->magic == BRISK_PVH_START_MAGIC)
		gprintf("acpi: RSDP at 0x%lx%s\n", si->rsdp_paddr, si->rsdp_paddr ? "" : " (none: --acpi off)");
	/* memmap_paddr exists from start_info version 1 on. */
	if (si && si->magic == BRISK_PVH_START_MAGIC && si->version >= 1)
		n = si->memmap_entries;
	e = (const struct hvm_memmap_table_entry *)(uintptr_t)(n ? si->memmap_paddr : 0);
	gprintf("memory map: %u entries\n", n);
	for (i = 0; i < n && i < 64; i++)
		gprintf("  addr 0x%016lx size 0x%016lx type %u\n", e[i].addr, e[i].size, e[i].type);
	bootmark(2);
	guest_reset();
}
