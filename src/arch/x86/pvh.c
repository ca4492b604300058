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
_Static_assert(sizeof(struct hvm_modlist_entry) <= LAYOUT_MODLIST_SIZE, "module 0 fits its slot");
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

/* Version 1 start info: the map, the command line, the ACPI RSDP (0: none), and 0 or 1 module. */
static int write_start_info(const struct gmem *mem, unsigned memmap_entries, unsigned nr_modules, uint64_t rsdp)
{
	struct hvm_start_info si = {
	    .magic = XEN_HVM_START_MAGIC_VALUE,
	    .version = XEN_HVM_START_VERSION,
	    .nr_modules = nr_modules,
	    .modlist_paddr = nr_modules ? LAYOUT_MODLIST : 0,
	    .cmdline_paddr = LAYOUT_CMDLINE,
	    .rsdp_paddr = rsdp,
	    .memmap_paddr = LAYOUT_MEMMAP,
	    .memmap_entries = memmap_entries,
	};

	return gmem_write(mem, LAYOUT_START_INFO, &si, sizeof(si));
}

/* Module 0 = the initrd; cmdline_paddr 0 means "no module command line" (start_info.h). */
static int write_modlist(const struct gmem *mem, uint64_t addr, uint64_t size)
{
	struct hvm_modlist_entry m = {.paddr = addr, .size = size, .cmdline_paddr = 0, .reserved = 0};

	return gmem_write(mem, LAYOUT_MODLIST, &m, sizeof(m));
}

int pvh_setup_initrd(const struct gmem *mem, const struct elf_info *info, const char *cmdline, uint64_t initrd_addr,
		     uint64_t initrd_size, uint64_t rsdp, struct boot_entry *entry, char *err, size_t errlen)
{
	unsigned nr_modules = initrd_size ? 1 : 0;
	int ret, n;

	if (!info->has_pvh)
		return boot_fail(err, errlen, -EINVAL, "no XEN_ELFNOTE_PHYS32_ENTRY note: not a PVH kernel");
	ret = x86_write_cmdline(mem, cmdline, err, errlen);
	if (ret == -E2BIG)
		return ret;
	n = ret ? ret : write_memmap(mem);
	if (n >= 0 && nr_modules && write_modlist(mem, initrd_addr, initrd_size))
		n = -EFAULT;
	if (n < 0 || write_start_info(mem, (unsigned)n, nr_modules, rsdp) || x86_write_gdt(mem, BOOT_PVH32))
		return boot_fail(err, errlen, -EINVAL,
				 "guest RAM (%llu bytes) does not cover the boot structures below 1 MiB",
				 (unsigned long long)mem->size);
	*entry = (struct boot_entry){.mode = BOOT_PVH32, .rip = info->pvh_entry, .boot_info = LAYOUT_START_INFO};
	return 0;
}

int pvh_setup(const struct gmem *mem, const struct elf_info *info, const char *cmdline, struct boot_entry *entry,
	      char *err, size_t errlen)
{
	return pvh_setup_initrd(mem, info, cmdline, 0, 0, 0, entry, err, errlen);
}
