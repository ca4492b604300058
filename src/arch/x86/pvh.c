/* pvh.c - PVH boot: hvm_start_info, its memory map and command line, the boot GDT, and the entry point. */
#include <errno.h>
#include <string.h>

#include "brisk/boot.h"
#include "brisk/layout.h"
#include "brisk/mem.h"
#include "pvh_abi.h"
#include "x86_boot.h"

/*
 * The PVH boot ABI (Xen docs/misc/pvh.pandoc; Linux arch/x86/platform/pvh/
 * head.S is its consumer): the kernel is entered at the
 * XEN_ELFNOTE_PHYS32_ENTRY address in 32-bit flat protected mode with EBX
 * holding the physical address of a struct hvm_start_info. Everything the
 * start info points to lives below 1 MiB at the addresses in layout.h.
 */
_Static_assert(sizeof(struct hvm_start_info) <= LAYOUT_START_INFO_SIZE, "start_info fits its slot");
_Static_assert(MEMMAP_MAX * sizeof(struct hvm_memmap_table_entry) <= LAYOUT_MEMMAP_SIZE, "memmap fits its slot");
_Static_assert(BRISK_PVH_START_MAGIC == XEN_HVM_START_MAGIC_VALUE, "abi.h and start_info.h agree");

/* Writes the memory map at LAYOUT_MEMMAP; returns the entry count or -EFAULT. */
static int write_memmap(const struct gmem *mem)
{
	struct hvm_memmap_table_entry tab[MEMMAP_MAX];
	struct memmap_entry map[MEMMAP_MAX];
	unsigned n = memmap_build(mem, map, MEMMAP_MAX);

	memset(tab, 0, sizeof(tab));
	for (unsigned i = 0; i < n; i++)
		tab[i] = (struct hvm_memmap_table_entry){.addr = map[i].addr, .size = map[i].size, .type = map[i].type};
	if (gmem_write(mem, LAYOUT_MEMMAP, tab, n * sizeof(tab[0])))
		return -EFAULT;
	return (int)n;
}

/* Version 1 start info: no modules, no ACPI tables (rsdp 0), the map and command line. */
static int write_start_info(const struct gmem *mem, unsigned memmap_entries)
{
	struct hvm_start_info si = {
	    .magic = XEN_HVM_START_MAGIC_VALUE,
	    .version = XEN_HVM_START_VERSION,
	    .nr_modules = 0,
	    .modlist_paddr = 0,
	    .cmdline_paddr = LAYOUT_CMDLINE,
	    .rsdp_paddr = 0,
	    .memmap_paddr = LAYOUT_MEMMAP,
	    .memmap_entries = memmap_entries,
	};

	return gmem_write(mem, LAYOUT_START_INFO, &si, sizeof(si));
}

int pvh_setup(const struct gmem *mem, const struct elf_info *info, const char *cmdline, struct boot_entry *entry,
	      char *err, size_t errlen)
{
	int ret, n;

	if (!info->has_pvh)
		return boot_fail(err, errlen, -EINVAL, "no XEN_ELFNOTE_PHYS32_ENTRY note: not a PVH kernel");
	ret = x86_write_cmdline(mem, cmdline, err, errlen);
	if (ret == -E2BIG)
		return ret;
	n = ret ? ret : write_memmap(mem);
	if (n < 0 || write_start_info(mem, (unsigned)n) || x86_write_gdt(mem, BOOT_PVH32))
		return boot_fail(err, errlen, -EINVAL,
				 "guest RAM (%llu bytes) does not cover the boot structures below 1 MiB",
				 (unsigned long long)mem->size);
	*entry = (struct boot_entry){.mode = BOOT_PVH32, .rip = info->pvh_entry, .boot_info = LAYOUT_START_INFO};
	return 0;
}
