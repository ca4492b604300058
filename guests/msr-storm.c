/* msr-storm.c - the MSR form of seed 000's bug class: a probe that re-reads the same harmless MSRs, called repeatedly.
 */
#include "guest.h"

/*
 * probe_msrs() reads IA32_APIC_BASE (0x1b) and IA32_MISC_ENABLE (0x1a0)
 * (SDM Vol 4 table 2-2: architectural, readable at CPL 0, no side effects);
 * KVM intercepts both. `calls=N` (default 200) sets how often it runs; the
 * guest prints how many RDMSRs the probe executed.
 */
#define MSR_IA32_APIC_BASE   0x1bu
#define MSR_IA32_MISC_ENABLE 0x1a0u
#define DEFAULT_CALLS	     200u
#define MAX_CALLS	     100000u

static uint64_t executed;

/* Global (not static) so that the symbol is in the ELF symtab the profiler reads. */
uint64_t probe_msrs(void);

__attribute__((noinline)) uint64_t probe_msrs(void)
{
	uint64_t v = rdmsr(MSR_IA32_APIC_BASE);

	v ^= rdmsr(MSR_IA32_MISC_ENABLE);
	executed += 2;
	return v;
}

void guest_main(struct hvm_start_info *si)
{
	uint64_t calls = DEFAULT_CALLS, x = 0;

	serial_init();
	(void)cmdline_get_u64(guest_cmdline(si), "calls", &calls); /* absent: the default */
	if (calls > MAX_CALLS)
		calls = MAX_CALLS;
	for (uint64_t i = 0; i < calls; i++)
		x ^= probe_msrs();
	gprintf("msr-storm: calls=%llu rdmsr=%llu x=0x%llx\n", (unsigned long long)calls, (unsigned long long)executed,
		(unsigned long long)x);
	guest_pass("msr-storm");
}
