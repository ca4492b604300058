/* smpboot.c - SMP bring-up as Linux does it without ACPI: MP table, then INIT-SIPI-SIPI to every AP. */
#include "guest.h"

/*
 * The BSP finds the CPUs in the MP table (MP spec 1.4), starts each AP
 * through its xAPIC ICR, and waits, bounded, for it to report from long
 * mode. Output: one "smpboot: cpu I apic id N online" line per CPU, then
 * PASS or FAIL with the values. cpus=N on the command line cross-checks the
 * table's processor count; isa_irqs=MASK overrides the ISA IRQs the table
 * must route (default 0xffff as brisk does; QEMU's qboot omits IRQ 2, the
 * PIC cascade: 0xfffb).
 */
/* Start every AP the table lists; returns how many reported from long mode. */
static unsigned int start_aps(const struct mp_info *mp, unsigned int bsp)
{
	unsigned int slot = 0, good = 0;
	struct ap_arrival a;

	for (unsigned int i = 0; i < mp->ncpus && slot < GUEST_AP_MAX; i++) {
		if (mp->apic_id[i] == bsp)
			continue;
		if (smp_bring_up_ap(mp->apic_id[i], slot, &a)) {
			gprintf("smpboot: FAIL: apic id %u did not arrive\n", mp->apic_id[i]);
			return good;
		}
		gprintf("smpboot: cpu %u apic id %u online (efer 0x%llx cr0 0x%llx)\n", i, a.apic_id,
			(unsigned long long)a.efer, (unsigned long long)a.cr0);
		if (a.apic_id == mp->apic_id[i] && a.long_mode)
			good++;
		slot++;
	}
	return good;
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	struct mp_info mp;
	const char *why = "";
	uint64_t cpus = 0, irqs = 0xffff;
	unsigned int bsp, good;

	serial_init();
	if (mp_parse(&mp, &why))
		guest_fail("smpboot", why);
	gprintf("smpboot: MP table at 0x%llx: %u cpus, ioapic id %u at 0x%x, isa irqs 0x%x\n",
		(unsigned long long)mp.config_addr, mp.ncpus, mp.ioapic_id, mp.ioapic_addr, mp.isa_irqs);
	if (cmdline_get_u64(cmdline, "cpus", &cpus) == 0 && cpus != mp.ncpus) {
		gprintf("smpboot: FAIL: MP table lists %u cpus, cpus=%llu\n", mp.ncpus, (unsigned long long)cpus);
		guest_fail("smpboot", "cpu count");
	}
	cmdline_get_u64(cmdline, "isa_irqs", &irqs);
	if (mp.nioapic != 1 || (mp.isa_irqs & irqs) != irqs)
		guest_fail("smpboot", "MP table I/O APIC or ISA IRQ entries");
	lapic_enable();
	bsp = lapic_id();
	gprintf("smpboot: cpu 0 apic id %u online (bsp)\n", bsp);
	if (mp.nbsp != 1 || mp.bsp_id != bsp)
		guest_fail("smpboot", "BSP flag does not name this CPU");
	good = start_aps(&mp, bsp);
	gprintf("smpboot: %u of %u APs reached long mode\n", good, mp.ncpus - 1);
	if (good != mp.ncpus - 1)
		guest_fail("smpboot", "not every AP arrived");
	guest_pass("smpboot");
}
