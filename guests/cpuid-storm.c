/* cpuid-storm.c - seed 000's bug class: a hypervisor-signature probe that scans all 256 CPUID bases, called repeatedly.
 */
#include "guest.h"

/*
 * Like Linux's cpuid_base_hypervisor() as jailhouse_cpuid_base() used it
 * (seed 000): try every base 0x40000000 + 0x100*i, i < 256, for a signature
 * this hypervisor does not have, so every call scans all 256 leaves. Each
 * CPUID at CPL 0 exits to KVM. `calls=N` on the command line (default 50)
 * sets how often it is called; the guest prints how many CPUIDs it executed
 * so that tests/integration/test_profile.py can compare with brisk profile.
 */
#define HV_BASE_FIRST 0x40000000u
#define HV_BASE_STEP  0x100u
#define HV_BASES      256u
#define DEFAULT_CALLS 50u
#define MAX_CALLS     10000u

static uint64_t executed;

/* Global (not static) so that the symbol is in the ELF symtab the profiler reads. */
uint32_t probe_hypervisor(const char *sig);

/* The base whose signature is `sig` (12 bytes) and whose max leaf is >= base, or 0. */
__attribute__((noinline)) uint32_t probe_hypervisor(const char *sig)
{
	for (uint32_t i = 0; i < HV_BASES; i++) {
		uint32_t base = HV_BASE_FIRST + i * HV_BASE_STEP, a, b, c, d, s[3];

		cpuid(base, 0, &a, &b, &c, &d);
		executed++;
		s[0] = b;
		s[1] = c;
		s[2] = d;
		if (memcmp(s, sig, sizeof(s)) == 0 && a >= base)
			return base;
	}
	return 0;
}

void guest_main(struct hvm_start_info *si)
{
	uint64_t calls = DEFAULT_CALLS;
	uint32_t found = 0;

	serial_init();
	(void)cmdline_get_u64(guest_cmdline(si), "calls", &calls); /* absent: the default */
	if (calls > MAX_CALLS)
		calls = MAX_CALLS;
	for (uint64_t i = 0; i < calls; i++)
		found |= probe_hypervisor("Jailhouse\0\0\0");
	gprintf("cpuid-storm: calls=%llu cpuid=%llu found=0x%x\n", (unsigned long long)calls,
		(unsigned long long)executed, found);
	guest_pass("cpuid-storm");
}
