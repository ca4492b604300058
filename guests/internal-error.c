/* internal-error.c - executes from MMIO: KVM cannot fetch the instruction and exits KVM_EXIT_INTERNAL_ERROR. */
#include "guest.h"

/*
 * docs/security.md case 16: a guest that jumps to an address where no RAM is
 * (the MMIO hole, virtio slot 255, which brisk never fills) makes KVM try to
 * emulate an instruction it cannot fetch (arch/x86/kvm/x86.c
 * handle_emulation_failure): KVM_EXIT_INTERNAL_ERROR, suberror 1
 * (KVM_INTERNAL_ERROR_EMULATION). brisk must end the VM with status 10
 * (EXIT_INTERNAL_ERROR) and a register dump, never retry forever.
 */
#define NOBODY_MMIO 0xd0100000UL

void guest_main(struct hvm_start_info *si)
{
	void (*nowhere)(void) = (void (*)(void))NOBODY_MMIO;

	(void)si;
	serial_init();
	serial_puts("internal-error: jumping to MMIO\n");
	nowhere();
	guest_fail("internal-error", "returned from a jump into MMIO");
}
