/* cpuid_internal.h - CPUID bit names and the helpers shared by cpuid*.c and msr.c (not for other subsystems). */
#ifndef BRISK_CPUID_INTERNAL_H
#define BRISK_CPUID_INTERNAL_H

#include <stdint.h>

#include "brisk/cpuid.h"

/* Leaf 1 (SDM vol. 2A, CPUID, tables 3-10 and 3-11). */
#define CPUID_1_ECX_VMX		 (1u << 5)
#define CPUID_1_ECX_PDCM	 (1u << 15)
#define CPUID_1_ECX_X2APIC	 (1u << 21)
#define CPUID_1_ECX_TSC_DEADLINE (1u << 24)
#define CPUID_1_ECX_XSAVE	 (1u << 26)
#define CPUID_1_ECX_OSXSAVE	 (1u << 27)
#define CPUID_1_ECX_AVX		 (1u << 28)
#define CPUID_1_ECX_HYPERVISOR	 (1u << 31)
#define CPUID_1_EDX_HTT		 (1u << 28)

/* Leaf 7 subleaf 0. */
#define CPUID_7_EBX_AVX2     (1u << 5)
#define CPUID_7_EBX_MPX	     (1u << 14)
#define CPUID_7_EBX_AVX512F  (1u << 16)
#define CPUID_7_ECX_PKU	     (1u << 3)
#define CPUID_7_EDX_AMX_TILE (1u << 24)

/* AMD APM vol. 3 E.4. */
#define CPUID_80000001_ECX_CMP_LEGACY (1u << 1)
#define CPUID_80000001_ECX_SVM	      (1u << 2)
#define CPUID_80000001_ECX_TOPOEXT    (1u << 22)

/* XSAVE state components (SDM vol. 1, 13.1). */
#define XFEATURE_X87	 (1ull << 0)
#define XFEATURE_SSE	 (1ull << 1)
#define XFEATURE_YMM	 (1ull << 2)
#define XFEATURE_BNDREGS (1ull << 3)
#define XFEATURE_BNDCSR	 (1ull << 4)
#define XFEATURE_AVX512	 (7ull << 5) /* opmask, ZMM_Hi256, Hi16_ZMM */
#define XFEATURE_PKRU	 (1ull << 9)
#define XFEATURE_AMX	 (3ull << 17) /* XTILECFG, XTILEDATA */
/* The legacy region (512) plus the XSAVE header (64): SDM vol. 1, 13.4. */
#define XSAVE_LEGACY_SIZE 576

/* Registers by number, as templates and the --diff-host report name them. */
enum { REG_EAX = 0, REG_EBX, REG_ECX, REG_EDX };
uint32_t *cpuid_reg(struct kvm_cpuid_entry2 *e, unsigned reg);
extern const char *const cpuid_reg_names[4];

/* cpuid_topology.c: the topology fields all vCPUs share, on the template. */
void cpuid_topology_apply(struct kvm_cpuid2 *tmpl, const struct cpuid_topology *t, enum cpuid_vendor vendor);

#endif
