// SPDX-License-Identifier: MIT
// kvm-smoke: minimal /dev/kvm self-test used to validate scripts/nested-kvm.sh.
//
// Runs three tiny guests and checks the exits they produce:
//   real      : real mode, no in-kernel irqchip
//   long      : 64-bit long mode (identity-mapped 2 MiB page), int3 through IDT
//   irqchip   : real mode after KVM_CREATE_IRQCHIP + KVM_CREATE_PIT2
// Each guest does: mov $0x42,%al; out %al,$0xf4; int3; mov $0x44,%al;
// out %al,$0xf4; hlt -- and the #BP handler does mov $0x43,%al; out %al,$0xf4;
// iret. So the expected exit sequence is IO(0x42) IO(0x43) IO(0x44) HLT, which
// proves that int3 at CPL 0 is delivered through the guest's IVT/IDT.
// Prints one PASS/FAIL line per test; exit status 0 iff all pass.
// Build: gcc -O2 -Wall -o build/kvm-smoke scripts/kvm-smoke.c
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define MEM_SIZE 0x200000
#define CODE	 0x1000
#define HANDLER	 0x1100

static int kvm;

static int fail(const char *test, const char *what)
{
	printf("FAIL %s: %s%s%s\n", test, what, errno ? ": " : "", errno ? strerror(errno) : "");
	return 1;
}

static int run_test(const char *name, int lm, int irqchip)
{
	static const uint8_t code[] = {0xb0, 0x42, 0xe6, 0xf4, 0xcc, 0xb0, 0x44, 0xe6, 0xf4, 0xf4};
	static const uint8_t h16[] = {0xb0, 0x43, 0xe6, 0xf4, 0xcf};	   // iret
	static const uint8_t h64[] = {0xb0, 0x43, 0xe6, 0xf4, 0x48, 0xcf}; // iretq
	const int want[] = {0x42, 0x43, 0x44, -1 /* HLT */};
	int nwant = irqchip ? 3 : 4; // with an in-kernel LAPIC, HLT never exits
	errno = 0;
	int vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		return fail(name, "KVM_CREATE_VM");
	ioctl(vm, KVM_SET_TSS_ADDR, 0xfffbd000UL); // needed on VMX only
	if (irqchip) {
		struct kvm_pit_config pit = {.flags = 0};
		if (ioctl(vm, KVM_CREATE_IRQCHIP, 0) < 0)
			return fail(name, "KVM_CREATE_IRQCHIP");
		if (ioctl(vm, KVM_CREATE_PIT2, &pit) < 0)
			return fail(name, "KVM_CREATE_PIT2");
	}
	uint8_t *mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return fail(name, "mmap");
	struct kvm_userspace_memory_region reg = {
	    .slot = 0, .guest_phys_addr = 0, .memory_size = MEM_SIZE, .userspace_addr = (uintptr_t)mem};
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &reg) < 0)
		return fail(name, "KVM_SET_USER_MEMORY_REGION");
	memcpy(mem + CODE, code, sizeof(code));
	int vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	if (vcpu < 0)
		return fail(name, "KVM_CREATE_VCPU");
	int sz = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	struct kvm_run *run = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED)
		return fail(name, "mmap kvm_run");
	struct kvm_sregs s;
	if (ioctl(vcpu, KVM_GET_SREGS, &s) < 0)
		return fail(name, "KVM_GET_SREGS");
	if (!lm) {
		memcpy(mem + HANDLER, h16, sizeof(h16));
		uint16_t ivt3[2] = {HANDLER, 0}; // offset, segment
		memcpy(mem + 3 * 4, ivt3, sizeof(ivt3));
		s.cs.base = 0, s.cs.selector = 0;
		s.ds = s.es = s.ss = s.cs;
		s.ds.type = s.es.type = s.ss.type = 3;
	} else {
		memcpy(mem + HANDLER, h64, sizeof(h64));
		uint64_t gdt[3] = {0, 0x00af9a000000ffffULL, 0x00cf92000000ffffULL};
		memcpy(mem + 0x500, gdt, sizeof(gdt));
		uint64_t gate[2] = {(HANDLER & 0xffff) | (0x08ULL << 16) | (0x8eULL << 40), 0};
		memcpy(mem + 0x600 + 3 * 16, gate, sizeof(gate));
		uint64_t *pml4 = (uint64_t *)(mem + 0x2000), *pdpt = (uint64_t *)(mem + 0x3000),
			 *pd = (uint64_t *)(mem + 0x4000);
		pml4[0] = 0x3003, pdpt[0] = 0x4003, pd[0] = 0x83; // 2 MiB identity page
		struct kvm_segment cseg = {.base = 0,
					   .limit = 0xffffffff,
					   .selector = 0x08,
					   .type = 11,
					   .present = 1,
					   .dpl = 0,
					   .db = 0,
					   .s = 1,
					   .l = 1,
					   .g = 1};
		struct kvm_segment dseg = {.base = 0,
					   .limit = 0xffffffff,
					   .selector = 0x10,
					   .type = 3,
					   .present = 1,
					   .dpl = 0,
					   .db = 1,
					   .s = 1,
					   .l = 0,
					   .g = 1};
		s.cs = cseg, s.ds = s.es = s.fs = s.gs = s.ss = dseg;
		s.gdt.base = 0x500, s.gdt.limit = sizeof(gdt) - 1;
		s.idt.base = 0x600, s.idt.limit = 16 * 32 - 1;
		s.cr3 = 0x2000, s.cr4 = 0x20 /* PAE */, s.cr0 = 0x80000011 /* PG|ET|PE */;
		s.efer = 0x500; // LME|LMA
	}
	if (ioctl(vcpu, KVM_SET_SREGS, &s) < 0)
		return fail(name, "KVM_SET_SREGS");
	struct kvm_regs r = {.rip = CODE, .rsp = 0x8000, .rflags = 2};
	if (ioctl(vcpu, KVM_SET_REGS, &r) < 0)
		return fail(name, "KVM_SET_REGS");
	for (int i = 0; i < nwant; i++) {
		errno = 0;
		if (ioctl(vcpu, KVM_RUN, 0) < 0)
			return fail(name, "KVM_RUN");
		char buf[128];
		if (want[i] < 0 && run->exit_reason == KVM_EXIT_HLT)
			continue;
		if (want[i] >= 0 && run->exit_reason == KVM_EXIT_IO && run->io.direction == KVM_EXIT_IO_OUT &&
		    run->io.port == 0xf4 && run->io.size == 1 && *((uint8_t *)run + run->io.data_offset) == want[i])
			continue;
		snprintf(buf, sizeof(buf), "step %d: want %s 0x%x, got exit_reason %u (io port 0x%x)", i,
			 want[i] < 0 ? "HLT" : "IO", want[i] < 0 ? 0 : want[i], run->exit_reason,
			 run->exit_reason == KVM_EXIT_IO ? run->io.port : 0);
		return fail(name, buf);
	}
	printf("PASS %s\n", name);
	munmap(run, sz), close(vcpu), close(vm), munmap(mem, MEM_SIZE);
	return 0;
}

int main(void)
{
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return fail("open", "/dev/kvm");
	int api = ioctl(kvm, KVM_GET_API_VERSION, 0);
	if (api != KVM_API_VERSION)
		return fail("api", "KVM_GET_API_VERSION mismatch");
	int bad = run_test("real-mode-io+int3", 0, 0);
	bad += run_test("long-mode-io+int3", 1, 0);
	bad += run_test("irqchip+pit2", 0, 1);
	printf("%s\n", bad ? "FAIL" : "PASS");
	return bad ? 1 : 0;
}
