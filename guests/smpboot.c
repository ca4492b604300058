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
#define ARRIVE_POLLS (1u << 22)

struct arrival {
	unsigned int apic_id;
	uint64_t efer, cr0;
};

static volatile unsigned int arrived;
static volatile unsigned int current_slot;
static struct arrival seen[GUEST_AP_MAX];

#define EFER_LMA (1u << 10)
#define CR0_PG	 (1ull << 31)
#define MSR_EFER 0xc0000080

/* Runs on each AP, alone (the BSP starts one at a time), in long mode. */
void ap_main(unsigned int apic_id)
{
	struct arrival *a = &seen[current_slot];

	a->apic_id = apic_id;
	a->efer = rdmsr(MSR_EFER);
	a->cr0 = read_cr0();
	__asm__ volatile("" ::: "memory");
	arrived = arrived + 1;
	for (;;)
		__asm__ volatile("cli; hlt");
}

static int wait_arrival(unsigned int want)
{
	for (unsigned int i = 0; i < ARRIVE_POLLS; i++) {
		if (arrived >= want)
			return 0;
		cpu_relax();
	}
	return -1;
}

/* Start every AP the table lists; returns how many reported from long mode. */
static unsigned int start_aps(const struct mp_info *mp, unsigned int bsp)
{
	unsigned int slot = 0, good = 0;

	for (unsigned int i = 0; i < mp->ncpus && slot < GUEST_AP_MAX; i++) {
		if (mp->apic_id[i] == bsp)
			continue;
		current_slot = slot;
		if (smp_start_ap(mp->apic_id[i], slot) || wait_arrival(slot + 1)) {
			gprintf("smpboot: FAIL: apic id %u did not arrive\n", mp->apic_id[i]);
			return good;
		}
		gprintf("smpboot: cpu %u apic id %u online (efer 0x%llx cr0 0x%llx)\n", i, seen[slot].apic_id,
			(unsigned long long)seen[slot].efer, (unsigned long long)seen[slot].cr0);
		if (seen[slot].apic_id == mp->apic_id[i] && (seen[slot].efer & EFER_LMA) && (seen[slot].cr0 & CR0_PG))
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
