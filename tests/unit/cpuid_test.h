/*
 * cpuid_test.h - what test_cpuid.c and test_cpuid_fixtures.c share: the recorded KVM tables
 * (tests/unit/fixtures/), CPUID bit names, and helpers that load a table, build a VM template and
 * one vCPU's table. Include after <cmocka.h> and "brisk/cpuid.h".
 */
#ifndef BRISK_TEST_CPUID_H
#define BRISK_TEST_CPUID_H

/* Fixtures live beside the tests; tests run from the repository root (scripts/check.sh). */
#define FIXTURES  "tests/unit/fixtures/"
#define INTEL	  FIXTURES "synthetic-intel-icx.txt"
#define AMD_HOST  FIXTURES "host-amd-epyc.txt"
#define AMD_ZEN	  FIXTURES "synthetic-amd-zen.txt"
#define NESTED	  FIXTURES "nested-kvm-amd-qemu64.txt"
#define PVM	  FIXTURES "kvm-pvm-amd-epyc.txt"
#define PVM_INTEL FIXTURES "kvm-pvm-intel-xeon.txt"
#define HV	  (1u << 31)
#define VMX	  (1u << 5)
#define SVM	  (1u << 2)
#define PDCM	  (1u << 15)
#define TSCDL	  (1u << 24)
#define X2APIC	  (1u << 21)
#define AVX	  (1u << 28)
#define AVX2	  (1u << 5)
#define AVX512F	  (1u << 16)
#define SSE42	  (1u << 20)
#define HTT	  (1u << 28)
#define CMPLEGACY (1u << 1)

/* Loads a recorded KVM_GET_SUPPORTED_CPUID dump as the process's KVM table. */
static inline const struct cpuid_kvm *load(const char *path)
{
	char err[512] = "";

	if (cpuid_kvm_load(path, err, sizeof(err)))
		fail_msg("%s", err);
	return cpuid_kvm_get(-1);
}

/* The entry for leaf.sub; fails the test when it is missing. */
static inline struct kvm_cpuid_entry2 *get(const struct kvm_cpuid2 *t, uint32_t leaf, uint32_t sub)
{
	struct kvm_cpuid_entry2 *e = cpuid_find(t, leaf, sub);

	if (!e)
		fail_msg("leaf 0x%x.%u missing", leaf, sub);
	return e;
}

/* Builds the VM template for S/C/T (sockets 0 = plain --cpus) and a template name (NULL = host). */
static inline void build_tmpl(struct cpuid_vm *vm, const struct cpuid_kvm *k, unsigned cpus, unsigned s, unsigned c,
			      unsigned t, const char *tmpl)
{
	struct cpuid_params p = {.cpus = cpus, .sockets = s, .cores = c, .threads = t, .cpu_template = tmpl};
	char err[512] = "";

	if (cpuid_vm_init(vm, k, &p, err, sizeof(err)))
		fail_msg("cpuid_vm_init: %s", err);
}

/* vCPU `index`'s table (free it). */
static inline struct kvm_cpuid2 *vcpu_table(const struct cpuid_vm *vm, unsigned index)
{
	struct kvm_cpuid2 *t = cpuid_table_alloc(vm->tmpl->nent);

	assert_non_null(t);
	cpuid_vcpu_table(vm, index, t);
	return t;
}

/* cmocka teardown: forget the loaded table. */
static inline int teardown(void **state)
{
	(void)state;
	cpuid_kvm_reset();
	return 0;
}

#endif
