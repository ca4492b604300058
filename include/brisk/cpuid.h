/* cpuid.h - the guest CPUID table: KVM's supported table fetched once per process, a per-VM template, a per-vCPU patch.
 */
#ifndef BRISK_CPUID_H
#define BRISK_CPUID_H

#include <stdint.h>

struct kvm_cpuid2;

/*
 * KVM_GET_SUPPORTED_CPUID, called at most once per process (seed 003:
 * QEMU once called it 5,922 times for one guest). The buffer starts large
 * enough for every known host and grows only on E2BIG. The returned table
 * is owned by this module. Returns NULL on failure (logged).
 */
const struct kvm_cpuid2 *cpuid_supported(int kvm_fd);

/*
 * The per-VM template derived from the supported table: hypervisor bit set,
 * everything that does not depend on the vCPU filled in. Caller frees.
 */
struct kvm_cpuid2 *cpuid_vm_template(const struct kvm_cpuid2 *supported, unsigned cpus);

/*
 * Per vCPU: copies the template into `scratch` (same capacity), patches the
 * APIC IDs for `vcpu_index`, and sets it with one KVM_SET_CPUID2.
 * Returns 0 or -errno (logged).
 */
__attribute__((warn_unused_result)) int cpuid_vcpu_set(int vcpu_fd, const struct kvm_cpuid2 *tmpl,
						       struct kvm_cpuid2 *scratch, unsigned vcpu_index);

/* Bytes needed for a copy of `t`. */
uint64_t cpuid_table_size(const struct kvm_cpuid2 *t);

#endif
