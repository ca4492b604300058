// SPDX-License-Identifier: MIT
// kvm-hold: keeps one idle KVM VM (in-kernel irqchip, one never-run vCPU)
// alive for the life of scripts/nested-kvm.sh's VM, started by its init.
//
// Why: the first VM a kernel creates turns on the static key
// preempt_notifier_key (kvm_create_vm -> preempt_notifier_inc), and the first
// vCPU with an in-kernel LAPIC turns on KVM's apic_sw_disabled key; the last
// VM/vCPU to go turns them off again. Each flip rewrites kernel text with
// text_poke_bp(), i.e. with int3. Under QEMU's multi-threaded TCG a vCPU can
// keep executing a stale translation of that int3 after the patch is done:
// kprobe_int3_handler sees no int3 in memory, rewinds RIP, the stale int3
// traps again, forever, with interrupts off -- both CPUs were caught looping
// at __schedule+0x2ab (the preempt-notifier jump label) that way, the nested VM
// wedged. With this VM held, the count never returns to zero, so running a
// series of short-lived VMs (as the test suites do) patches nothing.
//
// Build (nested-kvm.sh does it, into the initramfs):
//   gcc -O2 -Wall -static -o kvm-hold scripts/kvm-hold.c
// Exit status 1 with a message when a step fails (the init goes on without it);
// otherwise it never exits.
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static int fail(const char *what)
{
	fprintf(stderr, "kvm-hold: %s failed: %s\n", what, strerror(errno));
	return 1;
}

int main(void)
{
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return fail("open /dev/kvm");
	int vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		return fail("KVM_CREATE_VM");
	if (ioctl(vm, KVM_CREATE_IRQCHIP, 0) < 0)
		return fail("KVM_CREATE_IRQCHIP");
	if (ioctl(vm, KVM_CREATE_VCPU, 0) < 0)
		return fail("KVM_CREATE_VCPU");
	for (;;)
		pause();
}
