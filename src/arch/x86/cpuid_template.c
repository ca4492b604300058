/* cpuid_template.c - the per-VM CPUID template: brisk's rules, the built-in CPU templates, derived leaves (XSAVE,
 * topology). */
#include <asm/kvm_para.h>
#include <errno.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/cpuid.h"
#include "cpuid_internal.h"

/* Room for entries brisk adds: 0xB/0x1F levels (3 each) and the two KVM leaves. */
#define TEMPLATE_EXTRA_ENTRIES 8

const char *const cpuid_reg_names[4] = {"eax", "ebx", "ecx", "edx"};

uint32_t *cpuid_reg(struct kvm_cpuid_entry2 *e, unsigned reg)
{
	switch (reg) {
	case REG_EAX:
		return &e->eax;
	case REG_EBX:
		return &e->ebx;
	case REG_ECX:
		return &e->ecx;
	default:
		return &e->edx;
	}
}

enum cpuid_vendor cpuid_vendor(const struct kvm_cpuid2 *t)
{
	const struct kvm_cpuid_entry2 *e = cpuid_find(t, 0, 0);

	if (!e)
		return CPUID_VENDOR_OTHER;
	/* "GenuineIntel" / "AuthenticAMD" in EBX, EDX, ECX order. */
	if (e->ebx == 0x756e6547 && e->edx == 0x49656e69 && e->ecx == 0x6c65746e)
		return CPUID_VENDOR_INTEL;
	if (e->ebx == 0x68747541 && e->edx == 0x69746e65 && e->ecx == 0x444d4163)
		return CPUID_VENDOR_AMD;
	return CPUID_VENDOR_OTHER;
}

static struct kvm_cpuid_entry2 *append(struct kvm_cpuid2 *t, uint32_t leaf, uint32_t sub, uint32_t flags)
{
	struct kvm_cpuid_entry2 *e = &t->entries[t->nent++];

	*e = (struct kvm_cpuid_entry2){.function = leaf, .index = sub, .flags = flags};
	return e;
}

static void zero_leaf(struct kvm_cpuid2 *t, uint32_t leaf)
{
	for (unsigned i = 0; i < t->nent; i++)
		if (t->entries[i].function == leaf)
			t->entries[i].eax = t->entries[i].ebx = t->entries[i].ecx = t->entries[i].edx = 0;
}

static void clear_bits(struct kvm_cpuid2 *t, uint32_t leaf, uint32_t sub, unsigned reg, uint32_t bits)
{
	struct kvm_cpuid_entry2 *e = cpuid_find(t, leaf, sub);

	if (e)
		*cpuid_reg(e, reg) &= ~bits;
}

/*
 * KVM paravirt features brisk passes on, when KVM offers them
 * (Documentation/virt/kvm/x86/cpuid.rst). Each works entirely inside KVM
 * with an in-kernel irqchip and needs nothing from the VMM:
 *   CLOCKSOURCE, CLOCKSOURCE2  kvmclock (the guest's stable clock)
 *   NOP_IO_DELAY               no port-0x80 delays (fewer exits at boot)
 *   STEAL_TIME                 steal-time accounting
 *   PV_EOI                     EOI without an exit (in-kernel LAPIC)
 *   PV_UNHALT, PV_SEND_IPI     paravirt spinlock kick, IPIs by hypercall
 *   PV_TLB_FLUSH, PV_SCHED_YIELD
 *   CLOCKSOURCE_STABLE_BIT     kvmclock is stable across vCPUs
 * Not passed on: ASYNC_PF* (needs the VMM to handle async page faults for
 * its memory), POLL_CONTROL, MSI_EXT_DEST_ID (brisk's APIC IDs end at 254),
 * HC_MAP_GPA_RANGE and MIGRATION_CONTROL (exits to the VMM brisk does not
 * handle). EDX hints (KVM_HINTS_REALTIME) stay 0: vCPUs are not pinned.
 */
#define BRISK_KVM_FEATURES                                                                                             \
	((1u << KVM_FEATURE_CLOCKSOURCE) | (1u << KVM_FEATURE_NOP_IO_DELAY) | (1u << KVM_FEATURE_CLOCKSOURCE2) |       \
	 (1u << KVM_FEATURE_STEAL_TIME) | (1u << KVM_FEATURE_PV_EOI) | (1u << KVM_FEATURE_PV_UNHALT) |                 \
	 (1u << KVM_FEATURE_PV_TLB_FLUSH) | (1u << KVM_FEATURE_PV_SEND_IPI) | (1u << KVM_FEATURE_PV_SCHED_YIELD) |     \
	 (1u << KVM_FEATURE_CLOCKSOURCE_STABLE_BIT))

/* Leaves 0x40000000 ("KVMKVMKVM\0\0\0", max leaf) and 0x40000001 (features): Documentation/virt/kvm/x86/cpuid.rst. */
static void kvm_leaves(struct kvm_cpuid2 *t)
{
	struct kvm_cpuid_entry2 *sig = cpuid_find(t, KVM_CPUID_SIGNATURE, 0);
	struct kvm_cpuid_entry2 *feat = cpuid_find(t, KVM_CPUID_FEATURES, 0);

	if (!sig)
		sig = append(t, KVM_CPUID_SIGNATURE, 0, 0);
	if (!feat)
		feat = append(t, KVM_CPUID_FEATURES, 0, 0); /* KVM offered none: advertise none */
	sig->eax = KVM_CPUID_FEATURES;
	sig->ebx = 0x4b4d564b; /* "KVMK" */
	sig->ecx = 0x564b4d56; /* "VMKV" */
	sig->edx = 0x0000004d; /* "M\0\0\0" */
	feat->eax &= BRISK_KVM_FEATURES;
	feat->ebx = feat->ecx = feat->edx = 0;
	/* Leaves between 0x40000002 and 0x400000ff describe nothing brisk offers. */
	for (unsigned i = 0; i < t->nent; i++)
		if (t->entries[i].function > KVM_CPUID_FEATURES && t->entries[i].function < 0x40000100)
			t->entries[i].eax = t->entries[i].ebx = t->entries[i].ecx = t->entries[i].edx = 0;
}

/*
 * brisk's rules for every VM, before any CPU template:
 * - hypervisor bit, leaf 1 ECX[31] (SDM vol. 2A table 3-10: reserved for
 *   hypervisor use; Linux keys its paravirt detection on it);
 * - TSC-deadline, leaf 1 ECX[24]: KVM emulates it in its in-kernel LAPIC,
 *   which brisk always creates, but does not list it in the supported table
 *   (api.rst 4.46); advertising it spares Linux calibrating the LAPIC timer
 *   against the PIT (a Firecracker issue: AMD boots of 350 ms against a 150 ms limit, docs/cpuid.md);
 * - nested virtualization hidden: VMX (1 ECX[5]), SVM (0x80000001 ECX[2])
 *   and the SVM leaf 0x8000000A;
 * - the PMU hidden unless asked: leaf 0xA zero, PDCM (1 ECX[15], the
 *   IA32_PERF_CAPABILITIES MSR), AMD PerfCtrExtCore (0x80000001 ECX[23]) and
 *   PerfMonV2 (0x80000022);
 * - the KVM leaves (kvm_leaves above).
 */
static void brisk_rules(struct kvm_cpuid2 *t, const struct cpuid_kvm *k, bool pmu)
{
	struct kvm_cpuid_entry2 *e1 = cpuid_find(t, 1, 0);

	if (e1) {
		e1->ecx |= CPUID_1_ECX_HYPERVISOR;
		if (k->tsc_deadline)
			e1->ecx |= CPUID_1_ECX_TSC_DEADLINE;
		e1->ecx &= ~CPUID_1_ECX_VMX;
		if (!pmu)
			e1->ecx &= ~CPUID_1_ECX_PDCM;
	}
	clear_bits(t, 0x80000001, 0, REG_ECX, CPUID_80000001_ECX_SVM | (pmu ? 0 : 1u << 23));
	zero_leaf(t, 0x8000000a);
	if (!pmu) {
		zero_leaf(t, 0xa);
		zero_leaf(t, 0x80000022);
	}
	kvm_leaves(t);
}

/* ---- built-in CPU templates ---------------------------------------------------------------- */

struct keep_mask {
	uint32_t leaf, subleaf;
	unsigned reg;
	uint32_t keep;
};

/*
 * "baseline": an x86-64-v2 class CPU (SSE3, SSSE3, SSE4.1, SSE4.2, POPCNT,
 * CMPXCHG16B, LAHF/SAHF) for fleets of mixed hosts, plus what every guest of
 * brisk relies on (x2APIC, TSC-deadline, XSAVE of x87/SSE state only,
 * RDTSCP, invariant TSC, the hypervisor bit) and the speculation-control
 * bits that tell the guest which mitigations it can use. Every bit not
 * listed here is cleared: AVX, AVX2, AVX-512, FMA, F16C, AES, PCLMULQDQ,
 * MOVBE, RDRAND, RDSEED, BMI1/2, ADX, SHA, FSGSBASE, ERMS, SMEP/SMAP, PKU,
 * 1 GiB pages, LZCNT, PREFETCHW, SSE4A, XOP, FMA4 and the rest. docs/cpuid.md
 * lists the bits by name.
 */
static const struct keep_mask baseline[] = {
    {0x1, 0, REG_ECX, 0x8db82201},	  /* SSE3 SSSE3 CX16 SSE4.1 SSE4.2 x2APIC POPCNT TSCDL XSAVE OSXSAVE HV */
    {0x1, 0, REG_EDX, 0x1f8bfbff},	  /* FPU..APIC SEP..PSE36 CLFSH MMX FXSR SSE SSE2 SS HTT */
    {0x6, 0, REG_EAX, 0x00000004},	  /* ARAT */
    {0x7, 0, REG_EBX, 0},		  /* no structured extended features */
    {0x7, 0, REG_ECX, 0},		  /* */
    {0x7, 0, REG_EDX, 0x9c000400},	  /* MD_CLEAR IBRS/IBPB STIBP L1D_FLUSH SSBD */
    {0x7, 1, REG_EAX, 0},		  /* */
    {0x7, 1, REG_EBX, 0},		  /* */
    {0x7, 1, REG_ECX, 0},		  /* */
    {0x7, 1, REG_EDX, 0},		  /* */
    {0x7, 2, REG_EDX, 0},		  /* */
    {0xd, 0, REG_EAX, 0x00000003},	  /* XCR0: x87 and SSE state */
    {0xd, 0, REG_EDX, 0},		  /* */
    {0xd, 1, REG_EAX, 0},		  /* no XSAVEOPT/XSAVEC/XGETBV1/XSAVES */
    {0xd, 1, REG_ECX, 0},		  /* no supervisor states (IA32_XSS) */
    {0xd, 1, REG_EDX, 0},		  /* */
    {0x80000001, 0, REG_ECX, 0x00400003}, /* LAHF/SAHF, CmpLegacy, TopologyExtensions */
    {0x80000001, 0, REG_EDX, 0x2993fbff}, /* leaf-1 mirrors (AMD), SYSCALL NX RDTSCP LM */
    {0x80000007, 0, REG_EDX, 0x00000100}, /* invariant TSC */
    {0x80000008, 0, REG_EBX, 0x0300d000}, /* IBPB IBRS STIBP SSBD VIRT_SSBD */
};

/* What "baseline" promises: refused on a host/KVM that lacks any of it. */
static const struct keep_mask baseline_required[] = {
    {0x1, 0, REG_ECX, (1u << 0) | (1u << 9) | (1u << 13) | (1u << 19) | (1u << 20) | (1u << 23)},
    {0x80000001, 0, REG_ECX, 1u << 0},
};

static const char *const baseline_required_names[2] = {"SSE3/SSSE3/CX16/SSE4.1/SSE4.2/POPCNT", "LAHF/SAHF"};

static int apply_baseline(struct kvm_cpuid2 *t, char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(baseline_required) / sizeof(baseline_required[0]); i++) {
		const struct keep_mask *m = &baseline_required[i];
		struct kvm_cpuid_entry2 *e = cpuid_find(t, m->leaf, m->subleaf);
		uint32_t missing = m->keep & ~(e ? *cpuid_reg(e, m->reg) : 0);

		if (missing) {
			snprintf(
			    err, errlen,
			    "--cpu-template baseline needs %s, but leaf 0x%x %s lacks bits 0x%08x on this host/KVM",
			    baseline_required_names[i], m->leaf, cpuid_reg_names[m->reg], missing);
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < sizeof(baseline) / sizeof(baseline[0]); i++)
		clear_bits(t, baseline[i].leaf, baseline[i].subleaf, baseline[i].reg, ~baseline[i].keep);
	return 0;
}

static int apply_cpu_template(struct cpuid_vm *vm, const struct cpuid_kvm *k, const char *name, char *err,
			      size_t errlen)
{
	if (!name || strcmp(name, "host") == 0)
		return 0;
	if (strcmp(name, "baseline") == 0)
		return apply_baseline(vm->tmpl, err, errlen);
	if (cpuid_fc_static(name))
		return cpuid_fc_apply(cpuid_fc_static(name), k, vm->tmpl, vm, err, errlen);
	return cpuid_json_apply(name, k, vm->tmpl, vm, err, errlen);
}

/* ---- derived leaves ---------------------------------------------------------------------------- */

/* A feature bit and the XSAVE components that exist only with it. */
static const struct {
	uint32_t leaf;
	unsigned reg;
	uint32_t bit;
	uint64_t xfeatures;
} xsave_deps[] = {
    {0x1, REG_ECX, CPUID_1_ECX_AVX, XFEATURE_YMM | XFEATURE_AVX512},
    {0x7, REG_EBX, CPUID_7_EBX_MPX, XFEATURE_BNDREGS | XFEATURE_BNDCSR},
    {0x7, REG_EBX, CPUID_7_EBX_AVX512F, XFEATURE_AVX512},
    {0x7, REG_ECX, CPUID_7_ECX_PKU, XFEATURE_PKRU},
    {0x7, REG_EDX, CPUID_7_EDX_AMX_TILE, XFEATURE_AMX},
};

static bool has_bit(const struct kvm_cpuid2 *t, uint32_t leaf, unsigned reg, uint32_t bit)
{
	struct kvm_cpuid_entry2 *e = cpuid_find(t, leaf, 0);

	return e && (*cpuid_reg(e, reg) & bit);
}

/* XCR0 bits the features left in the table can use; AVX goes when its YMM state is gone. */
static uint64_t usable_xcr0(struct kvm_cpuid2 *t, uint64_t xcr0)
{
	for (size_t i = 0; i < sizeof(xsave_deps) / sizeof(xsave_deps[0]); i++)
		if (!has_bit(t, xsave_deps[i].leaf, xsave_deps[i].reg, xsave_deps[i].bit))
			xcr0 &= ~xsave_deps[i].xfeatures;
	if (!(xcr0 & XFEATURE_YMM)) {
		clear_bits(t, 0x1, 0, REG_ECX, CPUID_1_ECX_AVX | (1u << 12) | (1u << 29)); /* AVX FMA F16C */
		clear_bits(t, 0x7, 0, REG_EBX, CPUID_7_EBX_AVX2);
	}
	return xcr0;
}

/*
 * Leaf 0xD (SDM vol. 1 13.2, vol. 2A CPUID): computed from the table, never
 * from the host's CPUID (seed 001: KVM recomputing XSAVE sizes with host
 * CPUID cost thousands of cycles per nested transition).
 *  - subleaf 0 EAX/EDX: supported XCR0 bits, limited to the features left;
 *  - subleaf 0 ECX: the largest standard-format area, max(offset + size)
 *    over those bits (at least 576, legacy region + header);
 *  - subleaf 0 EBX and subleaf 1 EBX: the size for the enabled features,
 *    which at reset (XCR0 = x87, IA32_XSS = 0) is 576; KVM updates both
 *    when the guest writes XCR0/XSS;
 *  - subleaves >= 2 of components the guest cannot enable are zeroed.
 * Without XSAVE (leaf 1 ECX[26]) the whole leaf is zero.
 */
static void derive_xsave(struct kvm_cpuid2 *t)
{
	struct kvm_cpuid_entry2 *e1 = cpuid_find(t, 1, 0), *d0 = cpuid_find(t, 0xd, 0), *d1 = cpuid_find(t, 0xd, 1);
	uint64_t xcr0, xss;
	uint32_t size = XSAVE_LEGACY_SIZE;

	if (!d0)
		return;
	if (!e1 || !(e1->ecx & CPUID_1_ECX_XSAVE)) {
		zero_leaf(t, 0xd);
		usable_xcr0(t, 0);
		return;
	}
	xcr0 = usable_xcr0(t, ((uint64_t)d0->edx << 32) | d0->eax);
	xss = d1 ? ((uint64_t)d1->edx << 32) | d1->ecx : 0;
	for (unsigned i = 0; i < t->nent; i++) {
		struct kvm_cpuid_entry2 *e = &t->entries[i];

		if (e->function != 0xd || e->index < 2)
			continue;
		if (e->index >= 64 || !((xcr0 | xss) & (1ull << e->index))) {
			e->eax = e->ebx = e->ecx = e->edx = 0;
			continue;
		}
		if ((xcr0 & (1ull << e->index)) && e->ebx + e->eax > size)
			size = e->ebx + e->eax;
	}
	d0->eax = (uint32_t)xcr0;
	d0->edx = (uint32_t)(xcr0 >> 32);
	d0->ecx = size;
	d0->ebx = XSAVE_LEGACY_SIZE;
	if (d1)
		d1->ebx = XSAVE_LEGACY_SIZE;
}

/* Leaves that only describe a feature: zeroed when the template removed the feature. */
static const struct {
	uint32_t leaf;	    /* the describing leaf */
	uint32_t flag_leaf; /* where the feature bit lives (subleaf 0) */
	unsigned reg;
	uint32_t bit;
} leaf_deps[] = {
    {0x12, 0x7, REG_EBX, 1u << 2},  /* SGX */
    {0x14, 0x7, REG_EBX, 1u << 25}, /* Intel PT */
    {0x19, 0x7, REG_ECX, 1u << 23}, /* Key Locker */
    {0x1d, 0x7, REG_EDX, 1u << 24}, /* AMX tile information */
    {0x1e, 0x7, REG_EDX, 1u << 24}, /* TMUL information */
};

static void derive_feature_leaves(struct kvm_cpuid2 *t)
{
	for (size_t i = 0; i < sizeof(leaf_deps) / sizeof(leaf_deps[0]); i++)
		if (!has_bit(t, leaf_deps[i].flag_leaf, leaf_deps[i].reg, leaf_deps[i].bit))
			zero_leaf(t, leaf_deps[i].leaf);
}

/* 0xB and 0x1F get exactly the SMT level, the core level and the invalid terminator (subleaves 0, 1, 2). */
static void ensure_topology_leaves(struct kvm_cpuid2 *t)
{
	static const uint32_t leaves[] = {0xb, 0x1f};

	for (size_t i = 0; i < 2; i++) {
		if (!cpuid_find(t, leaves[i], 0))
			continue;
		for (uint32_t sub = 1; sub <= 2; sub++) {
			struct kvm_cpuid_entry2 *e = cpuid_find(t, leaves[i], sub);

			if (!e || e->index != sub)
				append(t, leaves[i], sub, KVM_CPUID_FLAG_SIGNIFCANT_INDEX);
		}
	}
}

/* ---- the recipe ------------------------------------------------------------------------------------ */

static int copy_supported(struct cpuid_vm *vm, const struct cpuid_kvm *k)
{
	const struct kvm_cpuid2 *sup = k->supported;

	vm->tmpl = cpuid_table_alloc(sup->nent + TEMPLATE_EXTRA_ENTRIES);
	if (!vm->tmpl)
		return -ENOMEM;
	memcpy(vm->tmpl->entries, sup->entries, sup->nent * sizeof(sup->entries[0]));
	vm->tmpl->nent = sup->nent;
	vm->vendor = cpuid_vendor(sup);
	return 0;
}

int cpuid_vm_init(struct cpuid_vm *vm, const struct cpuid_kvm *k, const struct cpuid_params *p, char *err,
		  size_t errlen)
{
	int ret;

	memset(vm, 0, sizeof(*vm));
	ret = cpuid_topology_init(&vm->topo, p->cpus, p->sockets, p->cores, p->threads, err, errlen);
	if (ret)
		return ret;
	if (copy_supported(vm, k)) {
		snprintf(err, errlen, "out of memory for the CPUID template");
		return -ENOMEM;
	}
	brisk_rules(vm->tmpl, k, p->pmu);
	cpuid_msrs_default(vm, k);
	vm->msr_base = p->msr_base;
	vm->nr_msr_base = p->nr_msr_base;
	ret = apply_cpu_template(vm, k, p->cpu_template, err, errlen);
	if (!ret && p->fc_template)
		ret = cpuid_fc_apply(p->fc_template, k, vm->tmpl, vm, err, errlen);
	vm->msr_base = NULL;
	vm->nr_msr_base = 0;
	if (ret) {
		cpuid_vm_destroy(vm);
		return ret;
	}
	derive_xsave(vm->tmpl);
	derive_feature_leaves(vm->tmpl);
	ensure_topology_leaves(vm->tmpl);
	cpuid_topology_apply(vm->tmpl, &vm->topo, vm->vendor);
	return 0;
}

void cpuid_vm_destroy(struct cpuid_vm *vm)
{
	free(vm->tmpl);
	vm->tmpl = NULL;
}

/*
 * Feature-flag registers (SDM vol. 2A CPUID; AMD APM vol. 3 E.3/E.4): a bit
 * set means the CPU has something, so a template may not set one KVM lacks.
 * Everything else (family/model, cache and topology fields, sizes) is a
 * value a template may set freely.
 */
bool cpuid_is_feature_register(uint32_t leaf, uint32_t subleaf, unsigned reg)
{
	switch (leaf) {
	case 0x1:
		return reg == REG_ECX || reg == REG_EDX;
	case 0x6:
		return reg == REG_EAX;
	case 0x7:
		return subleaf == 0 ? reg != REG_EAX : true;
	case 0xd:
		return (subleaf == 0 && (reg == REG_EAX || reg == REG_EDX)) || (subleaf == 1 && reg != REG_EBX);
	case 0x14:
		return subleaf == 0 && reg != REG_EAX;
	case 0x40000001:
		return reg == REG_EAX;
	case 0x80000001:
		return reg == REG_ECX || reg == REG_EDX;
	case 0x80000007:
		return reg == REG_EDX;
	case 0x80000008:
		return reg == REG_EBX;
	case 0x8000000a:
		return reg == REG_EDX;
	case 0x80000021:
		return reg == REG_EAX;
	default:
		return false;
	}
}
