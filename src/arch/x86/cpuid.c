/* cpuid.c - guest CPUID: one KVM_GET_SUPPORTED_CPUID per process, a per-VM template, per-vCPU APIC ID patch. */
#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/cpuid.h"
#include "brisk/kvm.h"
#include "brisk/log.h"

/* Enough for every host seen so far (75 entries here); doubled on E2BIG. */
#define CPUID_INITIAL_ENTRIES 128
#define CPUID_MAX_ENTRIES     4096

#define CPUID_1_ECX_HYPERVISOR (1u << 31)

static struct kvm_cpuid2 *supported;

static struct kvm_cpuid2 *alloc_table(unsigned nent)
{
	struct kvm_cpuid2 *t = calloc(1, sizeof(*t) + nent * sizeof(t->entries[0]));

	if (t)
		t->nent = nent;
	return t;
}

uint64_t cpuid_table_size(const struct kvm_cpuid2 *t)
{
	return sizeof(*t) + (uint64_t)t->nent * sizeof(t->entries[0]);
}

const struct kvm_cpuid2 *cpuid_supported(int kvm_fd)
{
	for (unsigned nent = CPUID_INITIAL_ENTRIES; !supported && nent <= CPUID_MAX_ENTRIES; nent *= 2) {
		struct kvm_cpuid2 *t = alloc_table(nent);

		if (!t) {
			log_error("out of memory for the CPUID table");
			return NULL;
		}
		if (KVM_IOCTL(kvm_fd, KVM_GET_SUPPORTED_CPUID, t) == 0) {
			supported = t;
			break;
		}
		free(t);
		if (errno != E2BIG) {
			log_error("KVM_GET_SUPPORTED_CPUID failed: %s", strerror(errno));
			return NULL;
		}
	}
	if (!supported)
		log_error("KVM_GET_SUPPORTED_CPUID wants more than %d entries", CPUID_MAX_ENTRIES);
	return supported;
}

struct kvm_cpuid2 *cpuid_vm_template(const struct kvm_cpuid2 *sup, unsigned cpus)
{
	struct kvm_cpuid2 *t = alloc_table(sup->nent);

	(void)cpus; /* topology leaves: see the CPUID issue */
	if (!t)
		return NULL;
	memcpy(t, sup, cpuid_table_size(sup));
	for (unsigned i = 0; i < t->nent; i++) {
		/* Tell the guest it runs on a hypervisor (SDM vol. 2A, CPUID leaf 1 ECX[31]). */
		if (t->entries[i].function == 1)
			t->entries[i].ecx |= CPUID_1_ECX_HYPERVISOR;
	}
	return t;
}

static void patch_apic_id(struct kvm_cpuid2 *t, unsigned id)
{
	for (unsigned i = 0; i < t->nent; i++) {
		struct kvm_cpuid_entry2 *e = &t->entries[i];

		/* Leaf 1 EBX[31:24]: initial APIC ID; leaves 0xB/0x1F EDX: x2APIC ID. */
		if (e->function == 1)
			e->ebx = (e->ebx & 0x00ffffffu) | (id << 24);
		else if (e->function == 0xb || e->function == 0x1f)
			e->edx = id;
	}
}

int cpuid_vcpu_set(int vcpu_fd, const struct kvm_cpuid2 *tmpl, struct kvm_cpuid2 *scratch, unsigned vcpu_index)
{
	memcpy(scratch, tmpl, cpuid_table_size(tmpl));
	patch_apic_id(scratch, vcpu_index);
	if (KVM_IOCTL(vcpu_fd, KVM_SET_CPUID2, scratch) != 0) {
		int err = errno;

		log_error("KVM_SET_CPUID2 for vCPU %u failed: %s", vcpu_index, strerror(err));
		return -err;
	}
	return 0;
}
