/* cpuid_topology.c - sockets/cores/threads in the CPUID leaves (1, 4, 0xB, 0x1F, AMD 0x80000001/8/1E) and the per-vCPU
 * patch. */
#include <errno.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <string.h>

#include "brisk/cpuid.h"
#include "cpuid_internal.h"

/* ceil(log2(n)) for n >= 1: the width of an APIC ID field that counts n things. */
static unsigned field_bits(unsigned n)
{
	unsigned b = 0;

	while ((1u << b) < n)
		b++;
	return b;
}

int cpuid_topology_init(struct cpuid_topology *t, unsigned cpus, unsigned sockets, unsigned cores, unsigned threads,
			char *err, size_t errlen)
{
	if (sockets == 0) {
		sockets = 1;
		cores = cpus;
		threads = 1;
	}
	if (cpus == 0 || cores == 0 || threads == 0 || (unsigned long)sockets * cores * threads != cpus) {
		snprintf(err, errlen, "topology sockets=%u,cores=%u,threads=%u does not make %u vCPUs", sockets, cores,
			 threads, cpus);
		return -EINVAL;
	}
	*t = (struct cpuid_topology){.sockets = sockets, .cores = cores, .threads = threads};
	t->thread_bits = field_bits(threads);
	t->core_bits = field_bits(cores);
	if (cpuid_apic_id(t, cpus - 1) > CPUID_MAX_APIC_ID) {
		snprintf(err, errlen,
			 "topology sockets=%u,cores=%u,threads=%u needs APIC ID %u (%u+%u bits per socket); "
			 "xAPIC IDs end at %u",
			 sockets, cores, threads, cpuid_apic_id(t, cpus - 1), t->core_bits, t->thread_bits,
			 CPUID_MAX_APIC_ID);
		return -EINVAL;
	}
	return 0;
}

uint32_t cpuid_apic_id(const struct cpuid_topology *t, unsigned index)
{
	unsigned thread = index % t->threads;
	unsigned core = (index / t->threads) % t->cores;
	unsigned socket = index / (t->threads * t->cores);

	return (socket << (t->core_bits + t->thread_bits)) | (core << t->thread_bits) | thread;
}

static unsigned pkg_shift(const struct cpuid_topology *t)
{
	return t->core_bits + t->thread_bits;
}

/* Leaf 1 EBX[23:16] (addressable logical processors per package) and EDX[28] HTT (SDM vol. 2A, table 3-8). */
static void topo_leaf1(struct kvm_cpuid_entry2 *e, const struct cpuid_topology *t)
{
	unsigned n = 1u << pkg_shift(t);

	if (n > 255)
		n = 255;
	e->ebx = (e->ebx & ~0x00ff0000u) | (n << 16);
	if (t->cores * t->threads > 1)
		e->edx |= CPUID_1_EDX_HTT;
	else
		e->edx &= ~CPUID_1_EDX_HTT;
}

/*
 * Leaf 4 (Intel deterministic cache parameters): EAX[31:26] addressable core
 * IDs per package - 1, EAX[25:14] addressable IDs sharing this cache - 1.
 * L1/L2 are per core (shared by its threads), L3 and beyond per package.
 */
static void topo_leaf4(struct kvm_cpuid_entry2 *e, const struct cpuid_topology *t)
{
	unsigned level = (e->eax >> 5) & 7;
	unsigned sharing = level >= 3 ? (1u << pkg_shift(t)) : (1u << t->thread_bits);

	if ((e->eax & 0x1f) == 0)
		return; /* no more caches: leave the terminator as KVM reported it */
	e->eax &= 0x00003fffu;
	e->eax |= (((1u << t->core_bits) - 1) & 0x3f) << 26;
	e->eax |= ((sharing - 1) & 0xfff) << 14;
}

/*
 * Leaves 0xB and 0x1F (SDM vol. 2A, V2 extended topology): subleaf 0 is the
 * SMT level, 1 the core level, 2 the invalid terminator. EAX = shift to the
 * next level's ID, EBX = logical processors at this level, ECX[15:8] = level
 * type (1 SMT, 2 core), ECX[7:0] = subleaf. EDX (x2APIC ID) is per vCPU.
 */
static void topo_ext_level(struct kvm_cpuid_entry2 *e, const struct cpuid_topology *t)
{
	switch (e->index) {
	case 0:
		e->eax = t->thread_bits;
		e->ebx = t->threads;
		e->ecx = (1u << 8) | 0;
		break;
	case 1:
		e->eax = pkg_shift(t);
		e->ebx = t->threads * t->cores;
		e->ecx = (2u << 8) | 1;
		break;
	default:
		e->eax = 0;
		e->ebx = 0;
		e->ecx = e->index & 0xff;
		break;
	}
	e->edx = 0;
}

/* AMD APM vol. 3 E.4.1: CmpLegacy (ECX[1]) when a package holds more than one logical processor. */
static void topo_amd_ext1(struct kvm_cpuid_entry2 *e, const struct cpuid_topology *t)
{
	if (t->cores * t->threads > 1)
		e->ecx |= CPUID_80000001_ECX_CMP_LEGACY;
	else
		e->ecx &= ~CPUID_80000001_ECX_CMP_LEGACY;
}

/* AMD APM vol. 3 E.4.7: ECX[7:0] NC = logical processors per package - 1, ECX[15:12] ApicIdSize. */
static void topo_amd_ext8(struct kvm_cpuid_entry2 *e, const struct cpuid_topology *t)
{
	e->ecx &= ~0x0000f0ffu;
	e->ecx |= ((t->cores * t->threads - 1) & 0xff) | ((pkg_shift(t) & 0xf) << 12);
}

/*
 * AMD APM vol. 3 appendix E, CPUID Fn8000_001D_EAX (cache topology): EAX[25:14]
 * NumSharingCache = logical processors sharing the cache - 1, read as
 * ShareId = APIC ID >> log2(NumSharingCache + 1) rounded up to a power of
 * two. L1/L2 are per core, L3 per package; the addressable counts
 * (2^thread_bits, 2^package shift) make ShareId exactly the core or
 * package part of brisk's APIC IDs, as leaf 4 does for Intel. The host's
 * value (KVM passes it through) describes the host's cores, not the VM's.
 */
static void topo_amd_ext1d(struct kvm_cpuid_entry2 *e, const struct cpuid_topology *t)
{
	unsigned level = (e->eax >> 5) & 7;
	unsigned sharing = level >= 3 ? (1u << pkg_shift(t)) : (1u << t->thread_bits);

	if ((e->eax & 0x1f) == 0)
		return; /* CacheType 0: no more caches */
	e->eax &= ~(0xfffu << 14);
	e->eax |= ((sharing - 1) & 0xfff) << 14;
}

/* AMD APM vol. 3 E.4.15 (0x8000001E): EBX[15:8] threads per compute unit - 1; ECX[10:8] nodes per package - 1. */
static void topo_amd_ext1e(struct kvm_cpuid_entry2 *e, const struct cpuid_topology *t)
{
	e->eax = 0;
	e->ebx = ((t->threads - 1) & 0xff) << 8;
	e->ecx = 0;
	e->edx = 0;
}

/* The topology fields every vCPU shares; called once per VM on the template. */
void cpuid_topology_apply(struct kvm_cpuid2 *tmpl, const struct cpuid_topology *t, enum cpuid_vendor vendor)
{
	for (unsigned i = 0; i < tmpl->nent; i++) {
		struct kvm_cpuid_entry2 *e = &tmpl->entries[i];

		switch (e->function) {
		case 0x1:
			topo_leaf1(e, t);
			break;
		case 0x4:
			topo_leaf4(e, t);
			break;
		case 0xb:
		case 0x1f:
			topo_ext_level(e, t);
			break;
		case 0x80000001:
			if (vendor == CPUID_VENDOR_AMD)
				topo_amd_ext1(e, t);
			break;
		case 0x80000008:
			if (vendor == CPUID_VENDOR_AMD)
				topo_amd_ext8(e, t);
			break;
		case 0x8000001d:
			topo_amd_ext1d(e, t);
			break;
		case 0x8000001e:
			topo_amd_ext1e(e, t);
			break;
		case 0x80000026:
			/*
			 * AMD extended CPU topology (APM vol. 3 appendix E,
			 * Fn8000_0026): not derived by brisk, so never the
			 * host's. All zero reads as level type 0 (invalid):
			 * guests fall back to 0xB.
			 */
			e->eax = e->ebx = e->ecx = e->edx = 0;
			break;
		}
	}
}

/* The fields that differ between vCPUs: APIC IDs, and AMD's core/node IDs in 0x8000001E. */
static void patch_vcpu(struct kvm_cpuid_entry2 *e, const struct cpuid_topology *t, unsigned index)
{
	uint32_t id = cpuid_apic_id(t, index);
	unsigned core = (index / t->threads) % t->cores;
	unsigned socket = index / (t->threads * t->cores);

	switch (e->function) {
	case 0x1: /* EBX[31:24]: initial APIC ID */
		e->ebx = (e->ebx & 0x00ffffffu) | (id << 24);
		break;
	case 0xb:
	case 0x1f: /* EDX: x2APIC ID, in every subleaf */
		e->edx = id;
		break;
	case 0x8000001e: /* EAX extended APIC ID, EBX[7:0] compute unit ID, ECX[7:0] node ID */
		e->eax = id;
		e->ebx = (e->ebx & ~0xffu) | (core & 0xff);
		e->ecx = (e->ecx & ~0xffu) | (socket & 0xff);
		break;
	}
}

void cpuid_vcpu_table(const struct cpuid_vm *vm, unsigned index, struct kvm_cpuid2 *out)
{
	memcpy(out, vm->tmpl, (size_t)cpuid_table_size(vm->tmpl));
	for (unsigned i = 0; i < out->nent; i++)
		patch_vcpu(&out->entries[i], &vm->topo, index);
}
