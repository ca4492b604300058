/* int3probe.c - can this host run int3 at CPL 0? Ends in KVM_EXIT_INTERNAL_ERROR where KVM cannot emulate it. */
#include "guest.h"

static volatile int ran;

static GUEST_ISR void breakpoint(struct interrupt_frame *frame)
{
	(void)frame;
	ran = 1;
	serial_puts("int3probe: handler ran\n");
}

void guest_main(struct hvm_start_info *si)
{
	(void)si;
	serial_init();
	idt_set_gate(3, breakpoint);
	idt_load();
	/* #BP is a trap: iretq resumes after the int3 (SDM Vol 3A 6.5). */
	__asm__ volatile("int3" ::: "memory");
	if (!ran)
		guest_fail("int3probe", "handler did not run");
	guest_pass("int3probe");
}
