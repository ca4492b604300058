/* conf.c - the conformance guests' shared checks and their "NAME: CHECK what: PASS|FAIL (values)" report. */
#include "guest.h"

#define MMIO_HOLE     0xc0000000ULL /* layout.h LAYOUT_MMIO_HOLE */
#define MMIO_HOLE_END 0x100000000ULL

/* Set at run time, not initialised: conf-bzimage's payload has no relocations to fix up a pointer. */
static const char *conf_name;
static unsigned int conf_checks, conf_failures;

void conf_begin(const char *name)
{
	conf_name = name;
	conf_checks = conf_failures = 0;
}

void conf_check(int ok, const char *what, const char *fmt, ...)
{
	va_list ap;

	conf_checks++;
	if (!ok)
		conf_failures++;
	gprintf("%s: CHECK %s: %s (", conf_name, what, ok ? "PASS" : "FAIL");
	va_start(ap, fmt);
	gvprintf(fmt, ap);
	va_end(ap);
	serial_puts(")\n");
}

unsigned int conf_summary(void)
{
	gprintf("%s: %u checks, %u failed\n", conf_name, conf_checks, conf_failures);
	return conf_failures;
}

void conf_end(void)
{
	if (conf_summary())
		guest_fail(conf_name, "see the CHECK lines above");
	guest_pass(conf_name);
}

uint32_t fnv1a32(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t h = 0x811c9dc5;

	while (n--)
		h = (h ^ *b++) * 0x01000193;
	return h;
}

void conf_check_memmap(const struct memmap_view *e, unsigned int n, uint64_t expected_ram)
{
	uint64_t ram = 0, prev_end = 0;
	int sorted = 1, in_hole = 0;

	for (unsigned int i = 0; i < n; i++) {
		gprintf("%s: memmap[%u] 0x%llx-0x%llx type %u\n", conf_name, i, (unsigned long long)e[i].addr,
			(unsigned long long)(e[i].addr + e[i].size), e[i].type);
		if (e[i].addr < prev_end || e[i].addr + e[i].size < e[i].addr)
			sorted = 0;
		prev_end = e[i].addr + e[i].size;
		if (e[i].type == 1) {
			ram += e[i].size;
			if (e[i].addr < MMIO_HOLE_END && e[i].addr + e[i].size > MMIO_HOLE)
				in_hole = 1;
		}
	}
	conf_check(n > 0, "memmap_entries", "%u", n);
	conf_check(sorted, "memmap_sorted_disjoint", "%s", sorted ? "yes" : "no");
	conf_check(!in_hole, "memmap_no_ram_in_mmio_hole", "%s", in_hole ? "RAM in hole" : "none");
	conf_check(ram == expected_ram, "memmap_ram_total", "0x%llx, expected 0x%llx", (unsigned long long)ram,
		   (unsigned long long)expected_ram);
}

void conf_check_mptable(unsigned int cpus)
{
	struct mp_info mp;
	const char *why = "";
	int ok = mp_parse(&mp, &why) == 0;
	int ids = 1, pins = 1;

	conf_check(ok, "mptable_checksums_and_entries", "fps 0x%llx rev %u, table 0x%llx len %u entries %u%s%s",
		   (unsigned long long)mp.fps_addr, mp.fps_rev, (unsigned long long)mp.config_addr, mp.config_len,
		   mp.entries, ok ? "" : ": ", ok ? "" : why);
	if (!ok)
		return;
	for (unsigned int i = 0; i < mp.ncpus; i++)
		ids &= mp.apic_id[i] == i;
	conf_check(mp.entries == mp.walked, "mptable_entry_count", "%u, %u in the table", mp.entries, mp.walked);
	conf_check(mp.ncpus == cpus, "mptable_cpus", "%u, expected %u", mp.ncpus, cpus);
	conf_check(ids, "mptable_apic_ids", "%s", ids ? "0..n-1" : "not 0..n-1");
	conf_check(mp.nbsp == 1 && mp.bsp_id == 0, "mptable_bsp", "%u flagged, id %u", mp.nbsp, mp.bsp_id);
	conf_check(mp.lapic_addr == BRISK_LAPIC_BASE, "mptable_lapic_addr", "0x%x", mp.lapic_addr);
	conf_check(mp.nioapic == 1 && mp.ioapic_addr == BRISK_IOAPIC_BASE, "mptable_ioapic",
		   "%u, id %u ver 0x%x at 0x%x", mp.nioapic, mp.ioapic_id, mp.ioapic_ver, mp.ioapic_addr);
	conf_check(mp.isa_bus >= 0 && mp.isa_irqs == 0xffff, "mptable_isa_irqs", "bus %d, irqs 0x%x", mp.isa_bus,
		   mp.isa_irqs);
	/* KVM's default routing: ISA IRQ n is IOAPIC pin n (mptable.c) */
	for (unsigned int i = 0; i < 16; i++)
		pins &= !(mp.isa_irqs & (1u << i)) || mp.isa_pin[i] == i;
	conf_check(pins, "mptable_irq_n_to_pin_n", "%s", pins ? "yes" : "no");
}

void conf_check_rsdp(const char *cmdline, uint64_t handed)
{
	uint64_t off = 0, found = acpi_find_rsdp();

	if (cmdline_get_u64(cmdline, "acpi_off", &off) == 0 && off) {
		conf_check(handed == 0 && found == 0, "rsdp_absent_without_acpi", "handed 0x%llx, scan found 0x%llx",
			   (unsigned long long)handed, (unsigned long long)found);
		return;
	}
	conf_check(handed != 0, "rsdp_handed", "0x%llx", (unsigned long long)handed);
	conf_check(found != 0 && found == handed, "rsdp_scan_equals_handed", "scan 0x%llx, handed 0x%llx",
		   (unsigned long long)found, (unsigned long long)handed);
}

void conf_check_initrd(const char *cmdline, uint64_t addr, uint64_t size)
{
	uint64_t want_size, want_sum;
	uint32_t sum;

	if (cmdline_get_u64(cmdline, "initrd_size", &want_size) || cmdline_get_u64(cmdline, "initrd_sum", &want_sum)) {
		conf_check(0, "initrd_params", "initrd_size= or initrd_sum= missing from the command line");
		return;
	}
	conf_check(addr != 0 && (addr & 0xfff) == 0, "initrd_addr_page_aligned", "0x%llx", (unsigned long long)addr);
	conf_check(size == want_size, "initrd_size", "%llu, expected %llu", (unsigned long long)size,
		   (unsigned long long)want_size);
	/* The guests' identity maps end at 4 GiB; so does brisk's 64-bit boot map. */
	conf_check(addr + size <= MMIO_HOLE_END, "initrd_below_4g", "ends at 0x%llx",
		   (unsigned long long)(addr + size));
	if (!addr || size != want_size || addr + size > MMIO_HOLE_END)
		return;
	sum = fnv1a32((const void *)(uintptr_t)addr, size);
	conf_check(sum == want_sum, "initrd_fnv1a32", "0x%x, expected 0x%llx", sum, (unsigned long long)want_sum);
}

/* ---- entry state ---------------------------------------------------------------------- */

static uint64_t gdtr_base(const struct guest_entry_state *es)
{
	uint64_t b = 0;

	for (int i = 9; i >= 2; i--)
		b = b << 8 | es->gdtr[i];
	return es->mode == 32 ? (uint32_t)b : b;
}

static unsigned int gdtr_limit(const struct guest_entry_state *es)
{
	return (unsigned int)(es->gdtr[0] | es->gdtr[1] << 8);
}

/*
 * Check the descriptor selector `sel` names in the entry GDT (SDM Vol 3A
 * 3.4.5, figure 3-8): present, S=1, base 0, limit 4 GiB, and code32 (D=1,
 * L=0, execute/read), code64 (L=1, D=0) or data (writable, B=1).
 */
void conf_check_segment(const struct guest_entry_state *es, const char *what, uint16_t sel, enum conf_seg kind)
{
	uint64_t d = 0, base, limit;
	unsigned int type;
	int ok;

	if ((sel & ~7u) == 0 || (sel & ~7u) + 7 > gdtr_limit(es) || (sel & 4)) {
		conf_check(0, what, "selector 0x%x outside GDT limit 0x%x", sel, gdtr_limit(es));
		return;
	}
	d = *(const volatile uint64_t *)(uintptr_t)(gdtr_base(es) + (sel & ~7u));
	base = ((d >> 16) & 0xffffff) | ((d >> 56) << 24);
	limit = (d & 0xffff) | ((d >> 32) & 0xf0000);
	if (d & (1ULL << 55))
		limit = limit << 12 | 0xfff;
	type = (unsigned int)(d >> 40) & 0xf;
	ok = (d & (1ULL << 47)) && (d & (1ULL << 44));
	if (kind == CONF_SEG_CODE64)
		ok = ok && (type & 8) && (d & (1ULL << 53)) && !(d & (1ULL << 54));
	else
		ok = ok && base == 0 && limit == 0xffffffff && (d & (1ULL << 54)) && !(d & (1ULL << 53)) &&
		     (kind == CONF_SEG_CODE32 ? (type & 0xa) == 0xa : (type & 0xa) == 0x2);
	conf_check(ok, what, "selector 0x%x descriptor 0x%016llx base 0x%llx limit 0x%llx type 0x%x", sel,
		   (unsigned long long)d, (unsigned long long)base, (unsigned long long)limit, type);
}
