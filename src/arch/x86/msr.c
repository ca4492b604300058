/* msr.c - the boot MSR set and the per-vCPU configuration: one KVM_SET_CPUID2 and one KVM_SET_MSRS per vCPU. */
#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/cpuid.h"
#include "brisk/errmsg.h"
#include "brisk/log.h"
#include "cpuid_internal.h"

#define CPUID_IOCTL(fd, req, arg) cpuid_ioctl((fd), (req), #req, (void *)(uintptr_t)(arg))

/* MSR numbers: SDM vol. 4, table 2-2 (architectural MSRs). */
#define MSR_IA32_SYSENTER_CS  0x174
#define MSR_IA32_SYSENTER_ESP 0x175
#define MSR_IA32_SYSENTER_EIP 0x176
#define MSR_IA32_MISC_ENABLE  0x1a0
#define MSR_IA32_CR_PAT	      0x277
#define MSR_MTRR_DEF_TYPE     0x2ff
#define MSR_STAR	      0xc0000081
#define MSR_LSTAR	      0xc0000082
#define MSR_CSTAR	      0xc0000083
#define MSR_SYSCALL_MASK      0xc0000084
#define MSR_KERNEL_GS_BASE    0xc0000102

#define MISC_ENABLE_FAST_STRING (1ull << 0)
/* PAT power-on value: WB, WT, UC-, UC in entries 0-3 and again in 4-7 (SDM vol. 3A 11.12.4). */
#define PAT_RESET 0x0007040600070406ull
/* MTRRs enabled (bit 11), default type write-back (6): SDM vol. 3A 11.11.2.1. */
#define MTRR_DEF_TYPE_WB (1ull << 11 | 6)

/*
 * brisk's boot MSRs, the set Firecracker writes (its arch/x86_64/msr.rs):
 * the syscall/sysenter MSRs and KERNEL_GS_BASE zeroed, fast strings on in
 * IA32_MISC_ENABLE (Linux checks it for rep movs/stos), PAT at its power-on
 * value, MTRRs on with write-back default (not every KVM lists that MSR:
 * 6.1 does not; without non-coherent DMA KVM maps RAM write-back anyway).
 * IA32_TSC is not written: KVM keeps the vCPUs' TSCs in step when userspace
 * leaves them alone, and writing each vCPU from its own thread at a
 * different moment would desynchronise them. Only MSRs in
 * KVM_GET_MSR_INDEX_LIST are written.
 */
static const struct cpuid_msr boot_msrs[] = {
    {MSR_IA32_SYSENTER_CS, 0},
    {MSR_IA32_SYSENTER_ESP, 0},
    {MSR_IA32_SYSENTER_EIP, 0},
    {MSR_STAR, 0},
    {MSR_CSTAR, 0},
    {MSR_KERNEL_GS_BASE, 0},
    {MSR_SYSCALL_MASK, 0},
    {MSR_LSTAR, 0},
    {MSR_IA32_MISC_ENABLE, MISC_ENABLE_FAST_STRING},
    {MSR_IA32_CR_PAT, PAT_RESET},
    {MSR_MTRR_DEF_TYPE, MTRR_DEF_TYPE_WB},
};

bool cpuid_kvm_has_msr(const struct cpuid_kvm *k, uint32_t index)
{
	for (unsigned i = 0; i < k->nr_msrs; i++)
		if (k->msrs[i] == index)
			return true;
	return false;
}

int cpuid_msr_set(struct cpuid_vm *vm, uint32_t index, uint64_t value)
{
	for (unsigned i = 0; i < vm->nr_msrs; i++) {
		if (vm->msrs[i].index == index) {
			vm->msrs[i].value = value;
			return 0;
		}
	}
	if (vm->nr_msrs == CPUID_MAX_MSRS)
		return -ENOSPC;
	vm->msrs[vm->nr_msrs++] = (struct cpuid_msr){.index = index, .value = value};
	return 0;
}

void cpuid_msrs_default(struct cpuid_vm *vm, const struct cpuid_kvm *k)
{
	for (size_t i = 0; i < sizeof(boot_msrs) / sizeof(boot_msrs[0]); i++)
		if (cpuid_kvm_has_msr(k, boot_msrs[i].index) &&
		    cpuid_msr_set(vm, boot_msrs[i].index, boot_msrs[i].value))
			log_warn("boot MSR 0x%x dropped: more than %d MSRs", boot_msrs[i].index, CPUID_MAX_MSRS);
}

/*
 * KVM_SET_CPUID2 says EINVAL/E2BIG/ENOMEM without naming an entry; the
 * likely culprit is an entry a template changed, so log the fields KVM checks
 * and the whole table at debug level. The failure itself goes to `err`.
 */
static int explain_cpuid_failure(const struct kvm_cpuid2 *t, unsigned index, int err, char *msg, size_t msglen)
{
	const struct kvm_cpuid_entry2 *e8 = cpuid_find(t, 0x80000008, 0), *d0 = cpuid_find(t, 0xd, 0);

	err_set(msg, msglen, -err, "KVM_SET_CPUID2 for vCPU %u failed: %s (%u entries%s)", index, strerror(err),
		t->nent, err == E2BIG ? ", more than KVM accepts" : "");
	/* The checks kvm_check_cpuid() makes (arch/x86/kvm/cpuid.c). */
	if (e8 && (e8->eax & 0xff) < 32)
		log_error("  leaf 0x80000008 eax[7:0]: MAXPHYADDR %u is below the 32 KVM requires", e8->eax & 0xff);
	if (d0)
		log_error("  leaf 0xd.0 eax/edx: XCR0 0x%llx must be a subset of what KVM supports",
			  (unsigned long long)d0->edx << 32 | d0->eax);
	for (unsigned i = 0; i < t->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &t->entries[i];

		log_debug("  leaf 0x%08x.%u eax=0x%08x ebx=0x%08x ecx=0x%08x edx=0x%08x", e->function, e->index, e->eax,
			  e->ebx, e->ecx, e->edx);
	}
	return -err;
}

static int set_msrs(int vcpu_fd, const struct cpuid_vm *vm, unsigned index, char *err, size_t errlen)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[CPUID_MAX_MSRS];
	} m;
	int n;

	if (vm->nr_msrs == 0)
		return 0;
	memset(&m, 0, sizeof(m));
	m.hdr.nmsrs = vm->nr_msrs;
	for (unsigned i = 0; i < vm->nr_msrs; i++)
		m.e[i] = (struct kvm_msr_entry){.index = vm->msrs[i].index, .data = vm->msrs[i].value};
	/* KVM_SET_MSRS returns how many it set, stopping at the first it refuses (api.rst 4.19). */
	n = CPUID_IOCTL(vcpu_fd, KVM_SET_MSRS, &m);
	if (n < 0)
		return err_set(err, errlen, -errno, "KVM_SET_MSRS for vCPU %u failed: %s", index, strerror(errno));
	if ((unsigned)n < vm->nr_msrs)
		return err_set(err, errlen, -EINVAL,
			       "KVM_SET_MSRS for vCPU %u: KVM refused MSR 0x%x = 0x%llx (%d of %u set)", index,
			       vm->msrs[n].index, (unsigned long long)vm->msrs[n].value, n, vm->nr_msrs);
	return 0;
}

int cpuid_vcpu_configure(int vcpu_fd, const struct cpuid_vm *vm, unsigned index, struct kvm_cpuid2 *scratch, char *err,
			 size_t errlen)
{
	cpuid_vcpu_table(vm, index, scratch);
	if (CPUID_IOCTL(vcpu_fd, KVM_SET_CPUID2, scratch) != 0)
		return explain_cpuid_failure(scratch, index, errno, err, errlen);
	return set_msrs(vcpu_fd, vm, index, err, errlen);
}
