/* smp.c - BSP-only check for multi-vCPU VMs: the other vCPUs wait for INIT/SIPI and must not disturb it. */
#include "guest.h"

void guest_main(struct hvm_start_info *si)
{
	uint32_t a, b, c, d;

	(void)si;
	serial_init();
	serial_puts("smp: bsp running\n");
	/* Initial APIC ID, CPUID.01H:EBX[31:24] (SDM Vol 2A, CPUID). */
	cpuid(1, 0, &a, &b, &c, &d);
	gprintf("smp: bsp apic id %u\n", b >> 24);
	guest_pass("smp");
}
