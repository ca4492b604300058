/* test_cpuid_fixtures.c - every recorded KVM table (tests/unit/fixtures/) through every topology shape: the
 * topology-derived CPUID fields and APIC IDs of every vCPU, the boot MSRs, the baseline verdict. No KVM needed. */
#include <errno.h>
#include <linux/kvm.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "brisk/cpuid.h"

#include "cpuid_test.h"

/* ---- every recorded KVM table x every shape: the topology-derived fields -------------------------------- */

/*
 * Each fixture is what one kind of KVM host reports (tests/unit/fixtures/):
 * the topology fields in it are the host's (PVM: 2 logical processors,
 * x2APIC ID 1, L3 shared by 2), never the VM's. `baseline_missing` is the
 * leaf 1 ECX bits a --cpu-template baseline refusal names there (0: accepted).
 */
static const struct fixture {
	const char *path;
	uint32_t baseline_missing;
} fixtures[] = {
    {INTEL, 0}, {AMD_HOST, 0}, {AMD_ZEN, 0}, {NESTED, 0}, {PVM, 0x00980201}, {PVM_INTEL, 0x00980201},
};

/* --cpus N [--topology sockets=S,cores=C,threads=T]; s = 0: no --topology (1 socket, N cores, 1 thread). */
static const struct shape {
	unsigned cpus, s, c, t;
} shapes[] = {
    {1, 0, 0, 0}, {2, 0, 0, 0}, {3, 0, 0, 0},  {4, 0, 0, 0},  {16, 0, 0, 0}, {2, 1, 1, 2},
    {4, 2, 1, 2}, {8, 2, 2, 2}, {12, 2, 3, 2}, {15, 1, 5, 3}, {16, 4, 4, 1}, {6, 3, 1, 2},
};

/* The expected layout, computed here from the SDM's rules, not with brisk's helpers. */
struct layout {
	unsigned s, c, t, tb, cb;
};

static unsigned width(unsigned n)
{
	unsigned b = 0;

	while ((1u << b) < n)
		b++;
	return b;
}

static struct layout layout_of(const struct shape *sh)
{
	struct layout l = sh->s ? (struct layout){sh->s, sh->c, sh->t, 0, 0} : (struct layout){1, sh->cpus, 1, 0, 0};

	l.tb = width(l.t);
	l.cb = width(l.c);
	return l;
}

static uint32_t want_apic_id(const struct layout *l, unsigned i)
{
	return ((i / (l->t * l->c)) << (l->cb + l->tb)) | (((i / l->t) % l->c) << l->tb) | (i % l->t);
}

/* Logical processors sharing a cache - 1, in addressable form: per core for L1/L2, per package beyond. */
static uint32_t want_sharing(const struct layout *l, uint32_t cache_eax)
{
	return ((cache_eax >> 5) & 7) >= 3 ? (1u << (l->cb + l->tb)) - 1 : (1u << l->tb) - 1;
}

static void check_leaf1(const struct kvm_cpuid2 *t, const struct cpuid_kvm *k, const struct layout *l, uint32_t id)
{
	const struct kvm_cpuid_entry2 *e = get(t, 1, 0);
	uint32_t per_pkg = 1u << (l->cb + l->tb);

	assert_int_equal(e->ebx >> 24, id);
	assert_int_equal((e->ebx >> 16) & 0xff, per_pkg > 255 ? 255 : per_pkg);
	assert_int_equal(e->ebx & 0xffff, get(k->supported, 1, 0)->ebx & 0xffff); /* brand index, CLFLUSH size */
	/* HTT (SDM vol. 2A table 3-11): EBX[23:16] is valid, set only for more than one logical processor. */
	assert_int_equal(!!(e->edx & HTT), l->c * l->t > 1);
}

static void check_leaf4(const struct kvm_cpuid2 *t, const struct layout *l)
{
	for (unsigned i = 0; i < t->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &t->entries[i];

		if (e->function != 4 || (e->eax & 0x1f) == 0)
			continue;
		assert_int_equal(e->eax >> 26, (1u << l->cb) - 1);
		assert_int_equal((e->eax >> 14) & 0xfff, want_sharing(l, e->eax));
	}
}

static void check_ext_topology(const struct kvm_cpuid2 *t, uint32_t leaf, const struct layout *l, uint32_t id)
{
	const struct kvm_cpuid_entry2 *e;

	if (!cpuid_find(t, leaf, 0))
		return;
	e = get(t, leaf, 0);
	assert_int_equal(e->index, 0);
	assert_int_equal(e->eax, l->tb);
	assert_int_equal(e->ebx, l->t);
	assert_int_equal(e->ecx, 0x100);
	assert_int_equal(e->edx, id);
	e = get(t, leaf, 1);
	assert_int_equal(e->index, 1);
	assert_int_equal(e->eax, l->cb + l->tb);
	assert_int_equal(e->ebx, l->c * l->t);
	assert_int_equal(e->ecx, 0x201);
	assert_int_equal(e->edx, id);
	e = get(t, leaf, 2);
	assert_int_equal(e->index, 2);
	assert_int_equal(e->eax | e->ebx, 0);
	assert_int_equal(e->ecx, 2);
	for (unsigned i = 0; i < t->nent; i++)
		if (t->entries[i].function == leaf && t->entries[i].index > 2)
			assert_int_equal(t->entries[i].ecx & 0xff00, 0); /* nothing valid after the terminator */
}

/* AMD APM vol. 3 appendix E: Fn8000_0001 CmpLegacy, Fn8000_0008 NC/ApicIdSize, 8000_001D sharing, 8000_001E IDs. */
static void check_amd(const struct kvm_cpuid2 *t, const struct layout *l, unsigned i, uint32_t id)
{
	const struct kvm_cpuid_entry2 *e;

	assert_int_equal(!!(get(t, 0x80000001, 0)->ecx & CMPLEGACY), l->c * l->t > 1);
	e = get(t, 0x80000008, 0);
	assert_int_equal(e->ecx & 0xff, l->c * l->t - 1);
	assert_int_equal((e->ecx >> 12) & 0xf, l->cb + l->tb);
	for (unsigned n = 0; n < t->nent; n++) {
		e = &t->entries[n];
		if (e->function == 0x8000001d && (e->eax & 0x1f) != 0)
			assert_int_equal((e->eax >> 14) & 0xfff, want_sharing(l, e->eax));
		if (e->function == 0x80000026)
			assert_int_equal(e->eax | e->ebx | e->ecx | e->edx, 0);
	}
	e = cpuid_find(t, 0x8000001e, 0);
	if (!e)
		return;
	assert_int_equal(e->eax, id);
	assert_int_equal(e->ebx & 0xff, (i / l->t) % l->c);
	assert_int_equal((e->ebx >> 8) & 0xff, l->t - 1);
	assert_int_equal(e->ecx & 0x7ff, i / (l->t * l->c)); /* node = socket, one node per package */
}

static void check_vm_topology(const struct cpuid_vm *vm, const struct cpuid_kvm *k, const struct shape *sh)
{
	struct layout l = layout_of(sh);
	uint8_t seen[CPUID_MAX_APIC_ID + 1] = {0};

	for (unsigned i = 0; i < sh->cpus; i++) {
		struct kvm_cpuid2 *t = vcpu_table(vm, i);
		uint32_t id = want_apic_id(&l, i);

		assert_int_equal(cpuid_apic_id(&vm->topo, i), id);
		assert_true(id <= CPUID_MAX_APIC_ID);
		assert_false(seen[id]++);
		check_leaf1(t, k, &l, id);
		if (vm->vendor == CPUID_VENDOR_INTEL)
			check_leaf4(t, &l);
		check_ext_topology(t, 0xb, &l, id);
		check_ext_topology(t, 0x1f, &l, id);
		if (vm->vendor == CPUID_VENDOR_AMD)
			check_amd(t, &l, i, id);
		free(t);
	}
}

static void test_every_fixture_topology(void **state)
{
	(void)state;
	for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++) {
		const struct cpuid_kvm *k = load(fixtures[f].path);

		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			struct cpuid_vm vm;

			print_message("%s: --cpus %u topology %u/%u/%u\n", fixtures[f].path, shapes[s].cpus,
				      shapes[s].s, shapes[s].c, shapes[s].t);
			build_tmpl(&vm, k, shapes[s].cpus, shapes[s].s, shapes[s].c, shapes[s].t, NULL);
			check_vm_topology(&vm, k, &shapes[s]);
			cpuid_vm_destroy(&vm);
		}
	}
}

/* Boot MSRs: exactly brisk's set that the fixture's KVM lists (PVM and nested 6.1 lack MTRR_DEF_TYPE). */
static void test_every_fixture_msrs(void **state)
{
	static const uint32_t boot[] = {0x174,	    0x175,	0x176, 0xc0000081, 0xc0000083, 0xc0000102,
					0xc0000084, 0xc0000082, 0x1a0, 0x277,	   0x2ff};

	(void)state;
	for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++) {
		const struct cpuid_kvm *k = load(fixtures[f].path);
		struct cpuid_vm vm;
		unsigned want = 0;

		build_tmpl(&vm, k, 1, 0, 0, 0, NULL);
		for (size_t b = 0; b < sizeof(boot) / sizeof(boot[0]); b++)
			want += cpuid_kvm_has_msr(k, boot[b]);
		assert_int_equal(vm.nr_msrs, want);
		for (unsigned i = 0; i < vm.nr_msrs; i++)
			assert_true(cpuid_kvm_has_msr(k, vm.msrs[i].index));
		cpuid_vm_destroy(&vm);
	}
	assert_false(cpuid_kvm_has_msr(load(PVM), 0x2ff));
}

/* --cpu-template baseline on every fixture: refused exactly where KVM lacks the x86-64-v2 bits, else applied. */
static void test_every_fixture_baseline(void **state)
{
	(void)state;
	for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++) {
		const struct cpuid_kvm *k = load(fixtures[f].path);
		struct cpuid_params p = {.cpus = 2, .cpu_template = "baseline"};
		struct cpuid_vm vm;
		char err[512] = "", want[256];
		int ret = cpuid_vm_init(&vm, k, &p, err, sizeof(err));

		print_message("%s: baseline -> %d %s\n", fixtures[f].path, ret, err);
		if (fixtures[f].baseline_missing) {
			snprintf(want, sizeof(want),
				 "--cpu-template baseline needs SSE3/SSSE3/CX16/SSE4.1/SSE4.2/POPCNT, but leaf 0x1 ecx "
				 "lacks bits 0x%08x on this host/KVM",
				 fixtures[f].baseline_missing);
			assert_int_equal(ret, -EINVAL);
			assert_string_equal(err, want);
			assert_null(vm.tmpl);
			continue;
		}
		assert_int_equal(ret, 0);
		assert_int_equal(get(vm.tmpl, 1, 0)->ecx & 0x00980201, 0x00980201);
		assert_false(get(vm.tmpl, 1, 0)->ecx & AVX);
		assert_false(get(vm.tmpl, 7, 0)->ebx & AVX2);
		check_vm_topology(&vm, k, &shapes[1]);
		cpuid_vm_destroy(&vm);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_every_fixture_topology, teardown),
	    cmocka_unit_test_teardown(test_every_fixture_msrs, teardown),
	    cmocka_unit_test_teardown(test_every_fixture_baseline, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
