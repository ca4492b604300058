/* cpuid_fc_internal.h - Firecracker's CPU template, as cpuid_fc.c and the generated cpuid_fc_static.c share it. */
#ifndef BRISK_CPUID_FC_INTERNAL_H
#define BRISK_CPUID_FC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "cpuid_internal.h"

/* One CpuidRegisterModifier: in `reg`, the bits in `filter` take `value` (Firecracker's RegisterValueFilter). */
struct cpuid_fc_reg {
	unsigned reg; /* REG_EAX..REG_EDX */
	uint32_t filter, value;
};

/* One CpuidLeafModifier: the entry (leaf, subleaf) gets `flags` and regs[first .. first+count-1]. */
struct cpuid_fc_leaf {
	uint32_t leaf, subleaf, flags;
	unsigned first, count;
};

/* One RegisterModifier (msr_modifiers): MSR `addr`, bits in `filter` take `value`. */
struct cpuid_fc_msr {
	uint32_t addr;
	uint64_t filter, value;
};

/* One kvm_capabilities item: "N" adds KVM capability N to those checked, "!N" removes it. */
struct cpuid_fc_cap {
	uint32_t cap;
	bool remove;
};

/*
 * Firecracker's CustomCpuTemplate (x86_64/custom_cpu_template.rs). A static template has a name and
 * the vendor (and for T2CL, the Cascade Lake minimum) Firecracker requires of the host; a custom one
 * (PUT /cpu-config) has neither and owns its arrays.
 */
struct cpuid_fc_template {
	const char *name; /* "C3", "T2", "T2S", "T2CL", "T2A"; NULL: custom */
	enum cpuid_vendor vendor;
	bool cascade_lake;
	unsigned nr_leaves, nr_regs, nr_msrs, nr_caps;
	const struct cpuid_fc_leaf *leaves;
	const struct cpuid_fc_reg *regs;
	const struct cpuid_fc_msr *msrs;
	const struct cpuid_fc_cap *caps;
};

/* The static templates, NULL-terminated (cpuid_fc_static.c, generated). */
extern const struct cpuid_fc_template *const cpuid_fc_statics[];

#endif
