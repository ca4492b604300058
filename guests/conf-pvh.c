/* conf-pvh.c - conformance guest for the PVH boot path: what Linux's pvh_start_xen relies on, checked from inside. */
#include "guest.h"

/*
 * The PVH ABI (Xen docs/misc/pvh.pandoc, "x86/HVM direct boot ABI";
 * xen/include/public/arch-x86/hvm/start_info.h): entry in 32-bit flat
 * protected mode, paging off, interrupts off, EBX = hvm_start_info.
 * entry.S recorded the state before changing it. The pytest passes on the
 * command line what only the host knows:
 *   cpus=N          vCPUs (--cpus): the MP table must list N processors
 *   mem_mib=M       --memory in MiB: RAM in the map = M MiB minus the
 *                   reserved legacy window [0x9fc00, 1 MiB) (layout.h)
 *   initrd_size=S   bytes of the --initrd file, module 0
 *   initrd_sum=H    its FNV-1a 32
 *   acpi_off=1      brisk runs with --acpi off: no RSDP (start_info.rsdp_paddr
 *                   0, none in the legacy scan); else both name the same one
 * and compares the printed command line with what it passed.
 */
#define NAME	    "conf-pvh"
#define CR0_PE	    (1ULL << 0)
#define CR0_PG	    (1ULL << 31)
#define RFLAGS_IF   (1ULL << 9)
#define LEGACY_HOLE (0x100000ULL - 0x9fc00ULL)
#define MAX_MEMMAP  32

struct hvm_modlist_entry {
	uint64_t paddr, size, cmdline_paddr, reserved;
};

static void check_registers(const struct guest_entry_state *es)
{
	conf_check(es->mode == 32, "entry_mode", "%llu-bit entry", (unsigned long long)es->mode);
	conf_check((es->cr0 & CR0_PE) && !(es->cr0 & CR0_PG), "cr0_pe_no_pg", "cr0 0x%llx",
		   (unsigned long long)es->cr0);
	conf_check(!(es->rflags & RFLAGS_IF), "eflags_if_clear", "eflags 0x%llx", (unsigned long long)es->rflags);
	conf_check_segment(es, "cs_flat32_code", es->cs, CONF_SEG_CODE32);
	conf_check_segment(es, "ds_flat32_data", es->ds, CONF_SEG_DATA);
	conf_check_segment(es, "es_flat32_data", es->es, CONF_SEG_DATA);
	conf_check_segment(es, "ss_flat32_data", es->ss, CONF_SEG_DATA);
}

static void check_memmap(const struct hvm_start_info *si, const char *cmdline)
{
	const struct hvm_memmap_table_entry *t = (const void *)(uintptr_t)si->memmap_paddr;
	struct memmap_view v[MAX_MEMMAP];
	unsigned int n = si->memmap_entries < MAX_MEMMAP ? si->memmap_entries : MAX_MEMMAP;
	uint64_t mib = 0;

	conf_check(si->memmap_paddr && si->memmap_entries <= MAX_MEMMAP, "memmap_present", "at 0x%llx, %u entries",
		   (unsigned long long)si->memmap_paddr, si->memmap_entries);
	if (!si->memmap_paddr)
		return;
	for (unsigned int i = 0; i < n; i++)
		v[i] = (struct memmap_view){.addr = t[i].addr, .size = t[i].size, .type = t[i].type};
	if (cmdline_get_u64(cmdline, "mem_mib", &mib)) {
		conf_check(0, "memmap_ram_total", "mem_mib= missing from the command line");
		return;
	}
	conf_check_memmap(v, n, (mib << 20) - LEGACY_HOLE);
}

static void check_initrd(const struct hvm_start_info *si, const char *cmdline)
{
	const struct hvm_modlist_entry *m = (const void *)(uintptr_t)si->modlist_paddr;

	conf_check(si->nr_modules >= 1 && si->modlist_paddr, "initrd_module0", "%u modules, list at 0x%llx",
		   si->nr_modules, (unsigned long long)si->modlist_paddr);
	if (si->nr_modules >= 1 && si->modlist_paddr)
		conf_check_initrd(cmdline, m->paddr, m->size);
}

void guest_main(struct hvm_start_info *si)
{
	const struct guest_entry_state *es = &guest_entry_state;
	const char *cmdline;
	uint64_t cpus = 0;

	serial_init();
	conf_begin(NAME);
	check_registers(es);
	conf_check(es->boot_info == (uintptr_t)si && si && si->magic == BRISK_PVH_START_MAGIC, "ebx_start_info",
		   "ebx 0x%llx magic 0x%x", (unsigned long long)es->boot_info, si ? si->magic : 0);
	if (!si || si->magic != BRISK_PVH_START_MAGIC)
		conf_end();
	conf_check(si->version >= 1, "start_info_version", "%u", si->version);
	cmdline = guest_cmdline(si);
	gprintf("%s: cmdline [%s] len %u\n", NAME, cmdline, (unsigned int)strlen(cmdline));
	check_memmap(si, cmdline);
	check_initrd(si, cmdline);
	conf_check_rsdp(cmdline, si->rsdp_paddr);
	if (cmdline_get_u64(cmdline, "cpus", &cpus))
		conf_check(0, "mptable_cpus", "cpus= missing from the command line");
	else
		conf_check_mptable((unsigned int)cpus);
	conf_end();
}
