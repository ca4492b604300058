/* cpuid-helper.c - seed 000's pattern hidden behind a shared helper: every CPUID goes through one out-of-line function.
 */
#include "guest.h"

/*
 * As in a paravirtualised Linux kernel (CONFIG_PARAVIRT_XXL: every CPUID
 * goes through pv_ops.cpu.cpuid, an out-of-line native_cpuid), all CPUIDs of
 * this guest execute at one instruction, in native_cpuid(), reached through
 * a function pointer. The repeated work is hypervisor_base()'s scan of the
 * 256 hypervisor bases for a signature brisk does not have, which
 * jailhouse_base() does on every pci_conf_read() (seed 000:
 * jailhouse_cpuid_base() from the PCI config accessors); cpu_features() and
 * tsc_khz() ask other leaves once each. Grouped by the exiting instruction,
 * all of it is one group at native_cpuid; grouped by call site (brisk
 * profile's caller probes) the scan stands out at hypervisor_base, called
 * from jailhouse_base and pci_conf_read. `calls=N` (default 20) sets how
 * many config reads; the guest prints how many CPUIDs went through the
 * helper and from where, for tests/integration/test_profile.py to compare.
 */
#define HV_BASE_FIRST 0x40000000u
#define HV_BASE_STEP  0x100u
#define HV_BASES      256u
#define DEFAULT_CALLS 20u
#define MAX_CALLS     2000u

static uint64_t executed, from_scan;

/* Global (not static): their names are in the ELF symtab the profiler reads. */
void native_cpuid(uint32_t *eax, uint32_t *ebx, uint32_t *ecx, uint32_t *edx);
uint32_t hypervisor_base(const char *sig);
uint32_t jailhouse_base(void);
uint32_t pci_conf_read(uint32_t devfn);
uint32_t cpu_features(void);
uint32_t tsc_khz(void);

__attribute__((noinline)) void native_cpuid(uint32_t *eax, uint32_t *ebx, uint32_t *ecx, uint32_t *edx)
{
	__asm__ volatile("cpuid" : "=a"(*eax), "=b"(*ebx), "=c"(*ecx), "=d"(*edx) : "0"(*eax), "2"(*ecx));
	executed++;
}

/* pv_ops.cpu.cpuid: volatile, so the compiler cannot turn the calls into direct ones or inline the helper. */
static void (*volatile pv_cpuid)(uint32_t *, uint32_t *, uint32_t *, uint32_t *) = native_cpuid;

static void do_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t r[4])
{
	r[0] = leaf;
	r[2] = subleaf;
	pv_cpuid(&r[0], &r[1], &r[2], &r[3]);
}

/* Linux's cpuid_base_hypervisor(): the loop. */
__attribute__((noinline)) uint32_t hypervisor_base(const char *sig)
{
	for (uint32_t i = 0; i < HV_BASES; i++) {
		uint32_t base = HV_BASE_FIRST + i * HV_BASE_STEP, r[4];

		do_cpuid(base, 0, r);
		from_scan++;
		if (memcmp(&r[1], sig, 12) == 0 && r[0] >= base)
			return base;
	}
	return 0;
}

/* jailhouse_cpuid_base() before seed 000's patch: no cache. */
__attribute__((noinline)) uint32_t jailhouse_base(void)
{
	return hypervisor_base("Jailhouse\0\0\0");
}

/* A PCI config access that asks "am I a Jailhouse cell?" every time. */
__attribute__((noinline)) uint32_t pci_conf_read(uint32_t devfn)
{
	return jailhouse_base() ? devfn : 0xffffffffu;
}

__attribute__((noinline)) uint32_t cpu_features(void)
{
	static const uint32_t leaves[] = {0, 1, 7, 0x80000000u, 0x80000001u};
	uint32_t r[4], sum = 0;

	for (unsigned i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++) {
		do_cpuid(leaves[i], 0, r);
		sum ^= r[0] ^ r[1] ^ r[2] ^ r[3];
	}
	return sum;
}

__attribute__((noinline)) uint32_t tsc_khz(void)
{
	uint32_t r[4];

	do_cpuid(0x15, 0, r);
	return r[1];
}

void guest_main(struct hvm_start_info *si)
{
	uint64_t calls = DEFAULT_CALLS;
	uint32_t x;

	serial_init();
	(void)cmdline_get_u64(guest_cmdline(si), "calls", &calls); /* absent: the default */
	if (calls > MAX_CALLS)
		calls = MAX_CALLS;
	x = cpu_features();
	for (uint64_t i = 0; i < calls; i++)
		x ^= pci_conf_read((uint32_t)i);
	x ^= tsc_khz();
	gprintf("cpuid-helper: calls=%llu cpuid=%llu scan=%llu other=%llu (x=0x%x)\n", (unsigned long long)calls,
		(unsigned long long)executed, (unsigned long long)from_scan, (unsigned long long)(executed - from_scan),
		x);
	guest_pass("cpuid-helper");
}
