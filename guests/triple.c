/* triple.c - triple fault: #UD with an empty IDT escalates to shutdown (KVM_EXIT_SHUTDOWN). */
#include "guest.h"

void guest_main(struct hvm_start_info *si)
{
	(void)si;
	serial_init();
	serial_puts("triple: faulting\n");
	idt_load_empty();
	__asm__ volatile("ud2");
	guest_fail("triple", "still running after ud2 with an empty IDT");
}
