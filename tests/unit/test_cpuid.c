/* test_cpuid.c - guest CPUID from recorded KVM_GET_SUPPORTED_CPUID dumps: fetch-once, template, topology, templates,
 * per-vCPU set. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/cpuid.h"

#include "cpuid_test.h"

/* ---- a fake KVM: counts calls, serves a table, grows only on E2BIG --------------------------- */

static struct kvm_cpuid2 *fake_table;
static unsigned fake_get_cpuid, fake_get_msrs, fake_check, fake_set_cpuid, fake_set_msrs, fake_msrs_accept;
static int fake_set_cpuid_errno;
static struct kvm_cpuid2 *last_set_cpuid;
static struct kvm_msrs last_msrs;
static struct kvm_msr_entry last_msr_entries[CPUID_MAX_MSRS];
static const uint32_t fake_msr_list[] = {0x174, 0x175, 0x176, 0x1a0, 0x277, 0xc0000081, 0xc0000082};

static int fake_get_supported(struct kvm_cpuid2 *t)
{
	fake_get_cpuid++;
	if (t->nent < fake_table->nent) {
		errno = E2BIG;
		return -1;
	}
	memcpy(t->entries, fake_table->entries, fake_table->nent * sizeof(t->entries[0]));
	t->nent = fake_table->nent;
	return 0;
}

static int fake_get_msr_list(struct kvm_msr_list *l)
{
	unsigned n = sizeof(fake_msr_list) / sizeof(fake_msr_list[0]);

	fake_get_msrs++;
	if (l->nmsrs < n) {
		l->nmsrs = n;
		errno = E2BIG;
		return -1;
	}
	memcpy(l->indices, fake_msr_list, sizeof(fake_msr_list));
	l->nmsrs = n;
	return 0;
}

static int fake_ioctl(int fd, unsigned long req, const char *name, void *arg)
{
	(void)fd;
	(void)name;
	switch (req) {
	case KVM_GET_SUPPORTED_CPUID:
		return fake_get_supported(arg);
	case KVM_GET_MSR_INDEX_LIST:
		return fake_get_msr_list(arg);
	case KVM_CHECK_EXTENSION:
		fake_check++;
		return (uintptr_t)arg == KVM_CAP_TSC_DEADLINE_TIMER;
	case KVM_SET_CPUID2:
		fake_set_cpuid++;
		if (fake_set_cpuid_errno) {
			errno = fake_set_cpuid_errno;
			return -1;
		}
		free(last_set_cpuid);
		last_set_cpuid = cpuid_table_alloc(((struct kvm_cpuid2 *)arg)->nent);
		memcpy(last_set_cpuid, arg, (size_t)cpuid_table_size(arg));
		return 0;
	case KVM_SET_MSRS:
		fake_set_msrs++;
		memcpy(&last_msrs, arg, sizeof(last_msrs));
		memcpy(last_msr_entries, ((struct kvm_msrs *)arg)->entries,
		       last_msrs.nmsrs * sizeof(last_msr_entries[0]));
		return (int)(fake_msrs_accept < last_msrs.nmsrs ? fake_msrs_accept : last_msrs.nmsrs);
	default:
		errno = ENOTTY;
		return -1;
	}
}

static int (*saved_ioctl)(int, unsigned long, const char *, void *);

/* Loads `path`, keeps its table as what the fake KVM serves (padded to `nent` entries), forgets the cache. */
static void fake_setup(const char *path, unsigned nent)
{
	const struct cpuid_kvm *k = load(path);

	fake_table = cpuid_table_alloc(nent > k->supported->nent ? nent : k->supported->nent);
	memcpy(fake_table->entries, k->supported->entries, k->supported->nent * sizeof(fake_table->entries[0]));
	cpuid_kvm_reset();
	fake_get_cpuid = fake_get_msrs = fake_check = fake_set_cpuid = fake_set_msrs = 0;
	fake_msrs_accept = 1000;
	fake_set_cpuid_errno = 0;
	saved_ioctl = cpuid_ioctl;
	cpuid_ioctl = fake_ioctl;
}

static void fake_teardown(void)
{
	cpuid_ioctl = saved_ioctl;
	free(fake_table);
	fake_table = NULL;
	free(last_set_cpuid);
	last_set_cpuid = NULL;
	cpuid_kvm_reset();
}

static void test_fetched_once(void **state)
{
	const struct cpuid_kvm *k;

	(void)state;
	fake_setup(INTEL, 0);
	k = cpuid_kvm_get(3);
	assert_non_null(k);
	for (int i = 0; i < 5; i++)
		assert_ptr_equal(cpuid_kvm_get(3), k);
	/* 128 entries are enough for this table: one call each, no retry. */
	assert_int_equal(fake_get_cpuid, 1);
	assert_int_equal(fake_get_msrs, 1);
	assert_int_equal(fake_check, 1);
	assert_true(k->tsc_deadline);
	assert_int_equal(k->nr_msrs, 7);
	assert_int_equal(k->supported->nent, fake_table->nent);
	fake_teardown();
}

static void test_grows_only_on_e2big(void **state)
{
	const struct cpuid_kvm *k;

	(void)state;
	fake_setup(INTEL, 300); /* more than the first buffer of 128, and 256 */
	k = cpuid_kvm_get(3);
	assert_non_null(k);
	assert_int_equal(fake_get_cpuid, 3); /* 128 -> E2BIG, 256 -> E2BIG, 512 -> ok */
	assert_int_equal(k->supported->nent, 300);
	assert_non_null(cpuid_kvm_get(3));
	assert_int_equal(fake_get_cpuid, 3);
	fake_teardown();
}

static void test_load_errors(void **state)
{
	char err[512];
	char path[] = "/tmp/brisk-test-dump-XXXXXX";
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(cpuid_kvm_load("/nonexistent/dump.txt", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/dump.txt"));
	assert_true(write(fd, "cpuid 0x1 0 0 1 2 3\n", 20) == 20);
	close(fd);
	assert_int_equal(cpuid_kvm_load(path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":1: not a dump line"));
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(write(fd, "# only leaf 1\ncpuid 0x1 0 0 1 2 3 4\n", 36) == 36);
	close(fd);
	assert_int_equal(cpuid_kvm_load(path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no CPUID leaf 0"));
	unlink(path);
}

/* Each refusal of a dump says what is wrong, naming the file and line. */
static void test_load_limits(void **state)
{
	char err[512], path[] = "/tmp/brisk-test-dump-XXXXXX", want[600];
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");

	(void)state;
	for (unsigned i = 0; i <= 4096; i++) /* one more than KVM_GET_SUPPORTED_CPUID is ever asked for */
		fprintf(f, "cpuid 0x%x 0x0 0x0 0 0 0 0\n", i);
	fclose(f);
	assert_int_equal(cpuid_kvm_load(path, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "--supported-from %s:4097: more than 4096 CPUID entries", path);
	assert_non_null(strstr(err, want));
	f = fopen(path, "w");
	fprintf(f, "cpuid 0x0 0x0 0x0 1 2 3 4\n");
	for (unsigned i = 0; i <= 16384; i++)
		fprintf(f, "msr 0x%x\n", i);
	fclose(f);
	assert_int_equal(cpuid_kvm_load(path, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "--supported-from %s:16386: more than 16384 MSRs", path);
	assert_non_null(strstr(err, want));
	f = fopen(path, "w");
	fprintf(f, "# %0300d\ncpuid 0x0 0x0 0x0 1 2 3 4 %0300d\n", 0, 0); /* a long comment is fine, a long line not */
	fclose(f);
	assert_int_equal(cpuid_kvm_load(path, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "--supported-from %s:2: line longer than 255 characters", path);
	assert_string_equal(err, want);
	f = fopen(path, "w");
	fclose(f);
	assert_int_equal(cpuid_kvm_load(path, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "--supported-from %s: no 'cpuid' lines (the file is empty)", path);
	assert_non_null(strstr(err, want));
	unlink(path);
	assert_int_equal(cpuid_kvm_load("/tmp", err, sizeof(err)), -EISDIR);
	assert_string_equal(err, "--supported-from /tmp: a directory, not a regular file");
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(10); /* refused without waiting for a writer: a hang fails the test */
	assert_int_equal(cpuid_kvm_load(path, err, sizeof(err)), -EINVAL);
	alarm(0);
	unlink(path);
	assert_non_null(strstr(err, "a FIFO, not a regular file"));
}

/* ---- topology ------------------------------------------------------------------------------------ */

static void test_apic_ids(void **state)
{
	struct cpuid_topology t;
	char err[256];

	(void)state;
	assert_int_equal(cpuid_topology_init(&t, 4, 0, 0, 0, err, sizeof(err)), 0);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(cpuid_apic_id(&t, i), i); /* no --topology: APIC ID = index */
	/* 2 sockets x 3 cores x 2 threads: thread 1 bit, core 2 bits, socket at bit 3. */
	assert_int_equal(cpuid_topology_init(&t, 12, 2, 3, 2, err, sizeof(err)), 0);
	assert_int_equal(t.thread_bits, 1);
	assert_int_equal(t.core_bits, 2);
	assert_int_equal(cpuid_apic_id(&t, 0), 0);
	assert_int_equal(cpuid_apic_id(&t, 1), 1);
	assert_int_equal(cpuid_apic_id(&t, 2), 2);
	assert_int_equal(cpuid_apic_id(&t, 5), 5);
	assert_int_equal(cpuid_apic_id(&t, 6), 8);
	assert_int_equal(cpuid_apic_id(&t, 11), 13);
	assert_int_equal(cpuid_topology_init(&t, 5, 1, 5, 1, err, sizeof(err)), 0);
	assert_int_equal(cpuid_apic_id(&t, 4), 4);
	assert_int_equal(t.core_bits, 3);
	assert_int_equal(cpuid_topology_init(&t, 6, 1, 2, 2, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "does not make 6 vCPUs"));
	/* 3 sockets of 65 cores: socket 2 starts at APIC ID 256. */
	assert_int_equal(cpuid_topology_init(&t, 195, 3, 65, 1, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "xAPIC IDs end at 254"));
}

/* ---- the template, Intel -------------------------------------------------------------------------- */

static void test_intel_template(void **state)
{
	const struct cpuid_kvm *k = load(INTEL);
	struct cpuid_vm vm;
	struct kvm_cpuid_entry2 *e;

	(void)state;
	build_tmpl(&vm, k, 8, 2, 2, 2, NULL);
	assert_int_equal(vm.vendor, CPUID_VENDOR_INTEL);
	e = get(vm.tmpl, 1, 0);
	assert_true(e->ecx & HV);
	assert_true(e->ecx & TSCDL);
	assert_true(e->ecx & X2APIC);
	assert_false(e->ecx & VMX);
	assert_false(e->ecx & PDCM);
	assert_true(e->edx & HTT);
	assert_int_equal((e->ebx >> 16) & 0xff, 4); /* 2 cores x 2 threads addressable per package */
	/* PMU hidden. */
	e = get(vm.tmpl, 0xa, 0);
	assert_int_equal(e->eax | e->ebx | e->ecx | e->edx, 0);
	/* KVM leaves. */
	e = get(vm.tmpl, 0x40000000, 0);
	assert_int_equal(e->eax, 0x40000001);
	assert_memory_equal(&e->ebx, "KVMK", 4);
	assert_memory_equal(&e->ecx, "VMKV", 4);
	assert_memory_equal(&e->edx, "M\0\0\0", 4);
	e = get(vm.tmpl, 0x40000001, 0);
	assert_int_equal(e->eax, 0x01002aeb); /* KVM's 0x0103fefb limited to brisk's list */
	assert_int_equal(e->edx, 0);
	/* Leaf 4: cores per package - 1 = 1; L1/L2 shared by 2 threads, L3 by the package (4). */
	for (uint32_t sub = 0; sub < 4; sub++) {
		e = get(vm.tmpl, 4, sub);
		assert_int_equal(e->eax >> 26, 1);
		assert_int_equal((e->eax >> 14) & 0xfff, sub == 3 ? 3 : 1);
		assert_int_equal(e->eax & 0x3fff, get(k->supported, 4, sub)->eax & 0x3fff);
	}
	/* 0xB and 0x1F: SMT level, core level, terminator. */
	for (uint32_t leaf = 0xb; leaf <= 0x1f; leaf += 0x14) {
		e = get(vm.tmpl, leaf, 0);
		assert_int_equal(e->eax, 1);
		assert_int_equal(e->ebx, 2);
		assert_int_equal(e->ecx, 0x100);
		e = get(vm.tmpl, leaf, 1);
		assert_int_equal(e->eax, 2);
		assert_int_equal(e->ebx, 4);
		assert_int_equal(e->ecx, 0x201);
		e = get(vm.tmpl, leaf, 2);
		assert_int_equal(e->eax | e->ebx, 0);
		assert_int_equal(e->ecx, 2);
	}
	/* XSAVE: XCR0 as KVM reports, largest standard area 0xa88, reset-time size 576. */
	e = get(vm.tmpl, 0xd, 0);
	assert_int_equal(e->eax, 0x2e7);
	assert_int_equal(e->ecx, 0xa88);
	assert_int_equal(e->ebx, 576);
	assert_int_equal(get(vm.tmpl, 0xd, 1)->ebx, 576);
	/* Brand string kept as KVM reports it. */
	assert_memory_equal(get(vm.tmpl, 0x80000002, 0), get(k->supported, 0x80000002, 0),
			    sizeof(struct kvm_cpuid_entry2));
	cpuid_vm_destroy(&vm);
}

static void test_intel_vcpu_ids(void **state)
{
	const struct cpuid_kvm *k = load(INTEL);
	struct cpuid_vm vm;

	(void)state;
	build_tmpl(&vm, k, 8, 2, 2, 2, NULL);
	for (unsigned i = 0; i < 8; i++) {
		struct kvm_cpuid2 *t = vcpu_table(&vm, i);
		uint32_t id = cpuid_apic_id(&vm.topo, i);

		assert_int_equal(id, ((i / 4) << 2) | (((i / 2) % 2) << 1) | (i % 2));
		assert_int_equal(get(t, 1, 0)->ebx >> 24, id);
		for (uint32_t sub = 0; sub < 3; sub++) {
			assert_int_equal(get(t, 0xb, sub)->edx, id);
			assert_int_equal(get(t, 0x1f, sub)->edx, id);
		}
		free(t);
	}
	cpuid_vm_destroy(&vm);
}

/* Two vCPUs' tables differ only in the per-vCPU fields. */
static void check_only_ids_differ(const struct kvm_cpuid2 *a, const struct kvm_cpuid2 *b)
{
	assert_int_equal(a->nent, b->nent);
	for (unsigned i = 0; i < a->nent; i++) {
		struct kvm_cpuid_entry2 x = a->entries[i], y = b->entries[i];

		if (x.function == 1) {
			x.ebx &= 0x00ffffff;
			y.ebx &= 0x00ffffff;
		} else if (x.function == 0xb || x.function == 0x1f) {
			x.edx = y.edx = 0;
		} else if (x.function == 0x8000001e) {
			x.eax = y.eax = 0;
			x.ebx &= ~0xffu;
			y.ebx &= ~0xffu;
			x.ecx &= ~0xffu;
			y.ecx &= ~0xffu;
		}
		assert_memory_equal(&x, &y, sizeof(x));
	}
}

static void test_vcpus_differ_only_in_ids(void **state)
{
	static const char *const paths[] = {INTEL, AMD_HOST, AMD_ZEN, NESTED, PVM};

	(void)state;
	for (size_t f = 0; f < sizeof(paths) / sizeof(paths[0]); f++) {
		const struct cpuid_kvm *k = load(paths[f]);
		struct cpuid_vm vm;
		struct kvm_cpuid2 *t0, *t;

		build_tmpl(&vm, k, 4, 0, 0, 0, NULL);
		t0 = vcpu_table(&vm, 0);
		assert_int_equal(get(t0, 1, 0)->ebx >> 24, 0); /* the BSP has APIC ID 0 */
		for (unsigned i = 1; i < 4; i++) {
			t = vcpu_table(&vm, i);
			check_only_ids_differ(t0, t);
			assert_int_equal(get(t, 1, 0)->ebx >> 24, i);
			free(t);
		}
		free(t0);
		cpuid_vm_destroy(&vm);
	}
}

/* ---- AMD ------------------------------------------------------------------------------------------- */

static void test_amd_template(void **state)
{
	const struct cpuid_kvm *k = load(AMD_ZEN);
	struct cpuid_vm vm;
	struct kvm_cpuid2 *t;
	struct kvm_cpuid_entry2 *e;

	(void)state;
	build_tmpl(&vm, k, 4, 2, 1, 2, NULL);
	assert_int_equal(vm.vendor, CPUID_VENDOR_AMD);
	e = get(vm.tmpl, 0x80000001, 0);
	assert_false(e->ecx & SVM);
	assert_false(e->ecx & (1u << 23)); /* PerfCtrExtCore */
	assert_true(e->ecx & CMPLEGACY);
	assert_true(e->ecx & (1u << 22)); /* TopologyExtensions kept */
	e = get(vm.tmpl, 0x8000000a, 0);
	assert_int_equal(e->eax | e->ebx | e->ecx | e->edx, 0);
	e = get(vm.tmpl, 0x80000022, 0);
	assert_int_equal(e->eax | e->ebx | e->ecx | e->edx, 0);
	/* 0x80000008 ECX: NC = 2 threads per package - 1, ApicIdSize 1. */
	e = get(vm.tmpl, 0x80000008, 0);
	assert_int_equal(e->ecx & 0xff, 1);
	assert_int_equal((e->ecx >> 12) & 0xf, 1);
	/* vCPU 3 = socket 1, core 0, thread 1: APIC ID 3, node 1. */
	t = vcpu_table(&vm, 3);
	e = get(t, 0x8000001e, 0);
	assert_int_equal(e->eax, 3);
	assert_int_equal(e->ebx & 0xff, 0);
	assert_int_equal((e->ebx >> 8) & 0xff, 1); /* threads per core - 1 */
	assert_int_equal(e->ecx & 0xff, 1);
	assert_int_equal(get(t, 0xb, 0)->edx, 3);
	free(t);
	cpuid_vm_destroy(&vm);
}

static void test_amd_host_fixture(void **state)
{
	const struct cpuid_kvm *k = load(AMD_HOST);
	struct cpuid_vm vm;
	struct kvm_cpuid_entry2 *e;

	(void)state;
	build_tmpl(&vm, k, 2, 0, 0, 0, NULL);
	/* The host reports only the 0xB terminator: brisk adds the core level and a terminator. */
	e = get(vm.tmpl, 0xb, 1);
	assert_int_equal(e->index, 1);
	assert_int_equal(e->ebx, 2);
	assert_int_equal(e->ecx, 0x201);
	assert_int_equal(get(vm.tmpl, 0xb, 2)->ecx, 2);
	assert_int_equal(get(vm.tmpl, 0x80000008, 0)->ecx & 0xff, 1);
	assert_true(get(vm.tmpl, 1, 0)->ecx & HV);
	assert_true(get(vm.tmpl, 1, 0)->ecx & TSCDL);
	/* XSAVE: x87 SSE YMM opmask ZMM_Hi256 Hi16_ZMM; largest area 0x580 + 0x400. */
	e = get(vm.tmpl, 0xd, 0);
	assert_int_equal(e->eax, 0xe7);
	assert_int_equal(e->ecx, 0x980);
	assert_true(e->ebx <= e->ecx);
	cpuid_vm_destroy(&vm);
}

static void test_single_vcpu(void **state)
{
	const struct cpuid_kvm *k = load(INTEL);
	struct cpuid_vm vm;

	(void)state;
	build_tmpl(&vm, k, 1, 0, 0, 0, NULL);
	assert_false(get(vm.tmpl, 1, 0)->edx & HTT);
	assert_int_equal((get(vm.tmpl, 1, 0)->ebx >> 16) & 0xff, 1);
	assert_int_equal(get(vm.tmpl, 0xb, 1)->ebx, 1);
	assert_int_equal(get(vm.tmpl, 4, 3)->eax >> 14, 0);
	cpuid_vm_destroy(&vm);
}

static void test_pmu_on_request(void **state)
{
	const struct cpuid_kvm *k = load(INTEL);
	struct cpuid_params p = {.cpus = 1, .pmu = true};
	struct cpuid_vm vm;
	char err[256];

	(void)state;
	assert_int_equal(cpuid_vm_init(&vm, k, &p, err, sizeof(err)), 0);
	assert_int_equal(get(vm.tmpl, 0xa, 0)->eax, 0x08300805);
	assert_true(get(vm.tmpl, 1, 0)->ecx & PDCM);
	cpuid_vm_destroy(&vm);
}

/* A real KVM_GET_SUPPORTED_CPUID dump (nested kvm_amd, qemu64 CPU without XSAVE). */
static void test_real_nested_dump(void **state)
{
	const struct cpuid_kvm *k = load(NESTED);
	struct cpuid_vm vm;
	struct kvm_cpuid_entry2 *e;

	(void)state;
	assert_true(k->tsc_deadline);
	assert_true(k->nr_msrs > 50);
	build_tmpl(&vm, k, 2, 0, 0, 0, "baseline");
	assert_int_equal(vm.vendor, CPUID_VENDOR_AMD);
	e = get(vm.tmpl, 1, 0);
	assert_true(e->ecx & HV);
	assert_true(e->ecx & TSCDL);
	assert_false(e->ecx & (1u << 26)); /* no XSAVE here ... */
	e = get(vm.tmpl, 0xd, 0);
	assert_int_equal(e->eax | e->ebx | e->ecx | e->edx, 0); /* ... so leaf 0xD is zero */
	assert_int_equal(get(vm.tmpl, 0x40000001, 0)->eax, 0x01007efb & 0x01002aeb);
	assert_int_equal(get(vm.tmpl, 0x80000008, 0)->ecx & 0xff, 1);
	/* Every boot MSR but MTRR_DEF_TYPE (0x2ff), which this KVM does not list. */
	assert_int_equal(vm.nr_msrs, 10);
	for (unsigned i = 0; i < vm.nr_msrs; i++)
		assert_int_not_equal(vm.msrs[i].index, 0x2ff);
	cpuid_vm_destroy(&vm);
}

/* ---- built-in templates ------------------------------------------------------------------------------ */

static void test_baseline(void **state)
{
	const struct cpuid_kvm *k = load(INTEL);
	struct cpuid_vm vm;
	struct kvm_cpuid_entry2 *e;

	(void)state;
	build_tmpl(&vm, k, 2, 0, 0, 0, "baseline");
	e = get(vm.tmpl, 1, 0);
	assert_false(e->ecx & AVX);
	assert_false(e->ecx & (1u << 12)); /* FMA */
	assert_false(e->ecx & (1u << 25)); /* AES */
	assert_true(e->ecx & SSE42);
	assert_true(e->ecx & (1u << 23)); /* POPCNT */
	assert_true(e->ecx & (1u << 13)); /* CX16 */
	assert_true(e->ecx & HV);
	assert_true(e->ecx & TSCDL);
	e = get(vm.tmpl, 7, 0);
	assert_false(e->ebx & AVX2);
	assert_false(e->ebx & AVX512F);
	assert_int_equal(e->ecx, 0);
	assert_int_equal(e->edx, 0xbc000400 & 0x9c000400);
	assert_true(get(vm.tmpl, 0x80000001, 0)->ecx & 1);	    /* LAHF */
	assert_false(get(vm.tmpl, 0x80000001, 0)->ecx & (1u << 5)); /* LZCNT */
	e = get(vm.tmpl, 0xd, 0);
	assert_int_equal(e->eax, 3);
	assert_int_equal(e->ecx, 576);
	assert_int_equal(e->ebx, 576);
	assert_int_equal(get(vm.tmpl, 0xd, 1)->eax, 0);
	for (uint32_t sub = 2; sub < 10; sub++) {
		e = cpuid_find(vm.tmpl, 0xd, sub);
		if (e && e->index == sub)
			assert_int_equal(e->eax | e->ebx | e->ecx | e->edx, 0);
	}
	cpuid_vm_destroy(&vm);
}

static void test_baseline_refused_without_sse42(void **state)
{
	const struct cpuid_kvm *k = load(INTEL);
	struct cpuid_kvm weak = *k;
	struct kvm_cpuid2 *t = cpuid_table_alloc(k->supported->nent);
	struct cpuid_params p = {.cpus = 1, .cpu_template = "baseline"};
	struct cpuid_vm vm;
	char err[512];

	(void)state;
	memcpy(t, k->supported, (size_t)cpuid_table_size(k->supported));
	get(t, 1, 0)->ecx &= ~SSE42;
	weak.supported = t;
	assert_int_equal(cpuid_vm_init(&vm, &weak, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "baseline needs"));
	assert_non_null(strstr(err, "leaf 0x1 ecx lacks bits 0x00100000"));
	free(t);
}

/* ---- JSON templates ---------------------------------------------------------------------------------- */

static char json_path[64];

static const char *write_json(const char *text)
{
	FILE *f;

	snprintf(json_path, sizeof(json_path), "/tmp/brisk-test-tmpl-%d.json", (int)getpid());
	f = fopen(json_path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return json_path;
}

static void test_json_template(void **state)
{
	const struct cpuid_kvm *k = load(INTEL);
	struct cpuid_vm vm;
	bool found = false;

	(void)state;
	build_tmpl(
	    &vm, k, 1, 0, 0, 0,
	    write_json(
		"{\"description\": \"no AVX2, no AVX\",\n"
		" \"cpuid\": [{\"leaf\": \"0x7\", \"subleaf\": 0, \"register\": \"ebx\", \"mask\": \"0x20\", "
		"\"value\": \"0x0\"},\n"
		"  {\"leaf\": 1, \"register\": \"ecx\", \"mask\": \"0x10000000\", \"value\": 0},\n"
		"  {\"leaf\": \"0x80000008\", \"register\": \"eax\", \"mask\": \"0xff\", \"value\": \"0x28\"}],\n"
		" \"msrs\": [{\"index\": \"0x1a0\", \"value\": \"0x0\"}]}\n"));
	assert_false(get(vm.tmpl, 7, 0)->ebx & AVX2);
	assert_false(get(vm.tmpl, 1, 0)->ecx & AVX);
	assert_int_equal(get(vm.tmpl, 0x80000008, 0)->eax & 0xff, 0x28);
	/* Without AVX there is no YMM state: XCR0 and the sizes follow. */
	assert_int_equal(get(vm.tmpl, 0xd, 0)->eax & 0x4, 0);
	assert_int_equal(get(vm.tmpl, 0xd, 0)->eax & 0xe0, 0);
	assert_int_equal(get(vm.tmpl, 0xd, 0)->ecx, 0xa88); /* PKRU still at 0xa80 */
	for (unsigned i = 0; i < vm.nr_msrs; i++) {
		if (vm.msrs[i].index == 0x1a0) {
			assert_int_equal(vm.msrs[i].value, 0);
			found = true;
		}
	}
	assert_true(found);
	cpuid_vm_destroy(&vm);
	unlink(json_path);
}

static void test_json_rejections(void **state)
{
	static const struct {
		const char *json, *want;
	} cases[] = {
	    {"{\"cpuid\": [", "bad JSON: the text ends inside an unfinished value"},
	    {"{\"cpuid\": [} ", "bad JSON at byte 11: "},
	    {"", "the file is empty; a template is a JSON object"},
	    {" \n\t", "the file is only white space"},
	    {"{\"cpuid\": []} x", "trailing data"},
	    {"[]", "expected a JSON object, got array"},
	    {"{\"cpus\": []}", "unknown key \"cpus\""},
	    {"{\"cpuid\": {}}", "\"cpuid\" must be an array"},
	    {"{\"cpuid\": [{\"leaf\": 1, \"register\": \"ecx\", \"mask\": 1, \"value\": 0, \"bits\": 1}]}",
	     "cpuid[0]: unknown key \"bits\""},
	    {"{\"cpuid\": [{\"leaf\": 1, \"register\": \"ecx\", \"mask\": 1}]}", "cpuid[0]: missing key \"value\""},
	    {"{\"cpuid\": [{\"leaf\": \"0x1234\", \"register\": \"eax\", \"mask\": 1, \"value\": 1}]}",
	     "leaf 0x1234 subleaf 0 is not in KVM's supported CPUID table"},
	    {"{\"cpuid\": [{\"leaf\": 7, \"subleaf\": 5, \"register\": \"eax\", \"mask\": 1, \"value\": 1}]}",
	     "leaf 0x7 subleaf 5 is not in KVM's supported CPUID table"},
	    {"{\"cpuid\": [{\"leaf\": 7, \"register\": \"ebx\", \"mask\": \"0x2\", \"value\": \"0x2\"}]}",
	     "leaf 0x7 subleaf 0 ebx bit 1 is not supported by this host/KVM"},
	    {"{\"cpuid\": [{\"leaf\": 1, \"register\": \"exx\", \"mask\": 1, \"value\": 1}]}", "register must be"},
	    {"{\"cpuid\": [{\"leaf\": 1, \"register\": \"ecx\", \"mask\": \"0x1\", \"value\": \"0x3\"}]}",
	     "value 0x3 sets bits outside mask 0x1"},
	    {"{\"cpuid\": [{\"leaf\": -1, \"register\": \"ecx\", \"mask\": 1, \"value\": 1}]}",
	     "leaf -1 is out of range"},
	    {"{\"cpuid\": [{\"leaf\": \"0x1zz\", \"register\": \"ecx\", \"mask\": 1, \"value\": 1}]}",
	     "leaf \"0x1zz\" is not a number"},
	    {"{\"msrs\": [{\"index\": \"0x123\", \"value\": 1}]}", "msrs[0]: MSR 0x123 is not in KVM's MSR index list"},
	    /* the strict reader API bodies and config files use (json_strict.h) */
	    {"{\"cpuid\": [], \"cpuid\": []}", "duplicate key 'cpuid'"},
	    {"{\"cpuid\": [{\"leaf\": 1, \"register\": \"ecx\", \"leaf\": 2, \"mask\": 1, \"value\": 1}]}",
	     "duplicate key 'leaf'"},
	    {"{'cpuid': []}", "single-quoted string"},
	    {"{\"cpuid\": [{\"leaf\": \"0x1\\u0000junk\", \"register\": \"ecx\", \"mask\": 1, \"value\": 1}]}",
	     "is not a number"},
	};
	const struct cpuid_kvm *k = load(INTEL);

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cpuid_params p = {.cpus = 1, .cpu_template = write_json(cases[i].json)};
		struct cpuid_vm vm;
		char err[512] = "";

		assert_int_equal(cpuid_vm_init(&vm, k, &p, err, sizeof(err)), -EINVAL);
		if (!strstr(err, cases[i].want) || !strstr(err, json_path))
			fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, cases[i].want);
		assert_null(vm.tmpl);
	}
	unlink(json_path);
}

static void test_missing_template_file(void **state)
{
	const struct cpuid_kvm *k = load(INTEL);
	struct cpuid_params p = {.cpus = 1, .cpu_template = "/nonexistent/t.json"};
	struct cpuid_vm vm;
	char err[512];

	(void)state;
	assert_int_equal(cpuid_vm_init(&vm, k, &p, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--cpu-template /nonexistent/t.json: no such file");
}

/* A template file is loaded and checked with no KVM facts at all. */
static void test_template_load_without_kvm(void **state)
{
	static const struct {
		const char *json, *want;
	} cases[] = {
	    {"", "the file is empty; a template is a JSON object like {\"cpuid\": [...], \"msrs\": [...]}"},
	    {"\n \t\r\n", "the file is only white space"},
	    {"{\"cpuid\": [{\"leaf\": 1,", "bad JSON: the text ends inside an unfinished value"},
	    {"{\"description\": 5}", "\"description\" must be a string"},
	    {"{\"cpuid\": [{\"leaf\": -1, \"register\": \"ecx\", \"mask\": 1, \"value\": 1}]}",
	     "cpuid[0]: leaf -1 is out of range"},
	    {"{\"cpuid\": [{\"leaf\": 1, \"register\": 3, \"mask\": 1, \"value\": 1}]}",
	     "cpuid[0]: register must be \"eax\", \"ebx\", \"ecx\" or \"edx\", not 3"},
	    /* fuzz_cpu_template: what the file quotes reaches the terminal without its control characters */
	    {"{\"cpuid\": [{\"l\\neaf\": 7}]}", "bad JSON at byte 12: a key with an escape sequence"},
	    {"{\"cpuid\": [{\"leaf\": \"1\\u001b[2J\\r\", \"register\": \"eax\", \"mask\": 1, \"value\": 1}]}",
	     "cpuid[0]: leaf \"1?[2J?\" is not a number in 0..0xffffffff"},
	};
	struct cpuid_template *t = NULL;
	char err[512], want[600];
	FILE *f;

	(void)state;
	cpuid_kvm_reset(); /* nothing cached: the loader must not need KVM's tables */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(cpuid_template_load(write_json(cases[i].json), &t, err, sizeof(err)), -EINVAL);
		assert_null(t);
		snprintf(want, sizeof(want), "--cpu-template %s: %s", json_path, cases[i].want);
		if (strncmp(err, want, strlen(want)))
			fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, want);
	}
	/* A NUL byte would end the text json-c sees: "{}" and silently ignored bytes after it. */
	f = fopen(json_path, "w");
	fwrite("{}\0{", 1, 4, f);
	fclose(f);
	assert_int_equal(cpuid_template_load(json_path, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "NUL byte at offset 2"));
	/* Larger than 1 MiB: refused from its size, before reading. */
	assert_int_equal(truncate(json_path, (1 << 20) + 1), 0);
	assert_int_equal(cpuid_template_load(json_path, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "1048577 bytes: larger than the 1048576 a template may have"));
	/* 33 distinct MSRs: more than a vCPU gets, known without KVM. */
	f = fopen(json_path, "w");
	fputs("{\"msrs\": [", f);
	for (unsigned i = 0; i < 33; i++)
		fprintf(f, "%s{\"index\": %u, \"value\": 0}", i ? ", " : "", 0x200 + i);
	fputs("]}", f);
	fclose(f);
	assert_int_equal(cpuid_template_load(json_path, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "msrs[32]: more than 32 distinct MSRs"));
	/* Well-formed: loads without KVM; the host checks come with cpuid_template_apply. */
	assert_int_equal(cpuid_template_load(write_json("{\"cpuid\": [{\"leaf\": \"0x1234\", \"register\": \"eax\", "
							"\"mask\": 1, \"value\": 1}], \"msrs\": []}"),
					     &t, err, sizeof(err)),
			 0);
	assert_non_null(t);
	cpuid_template_free(t);
	assert_int_equal(cpuid_template_check(json_path, err, sizeof(err)), 0);
	assert_int_equal(cpuid_template_check("host", err, sizeof(err)), 0);
	assert_int_equal(cpuid_template_check(NULL, err, sizeof(err)), 0);
	assert_true(cpuid_template_builtin("baseline"));
	assert_false(cpuid_template_builtin("baseline.json"));
	unlink(json_path);
	assert_int_equal(cpuid_template_check("/tmp", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--cpu-template /tmp: a directory, not a regular file");
}

static void test_feature_registers(void **state)
{
	(void)state;
	assert_true(cpuid_is_feature_register(1, 0, 2));
	assert_false(cpuid_is_feature_register(1, 0, 0)); /* family/model/stepping: a value */
	assert_true(cpuid_is_feature_register(7, 0, 1));
	assert_false(cpuid_is_feature_register(7, 0, 0)); /* max subleaf */
	assert_false(cpuid_is_feature_register(4, 0, 0));
	assert_true(cpuid_is_feature_register(0x80000001, 0, 3));
}

/* ---- per-vCPU configuration: one KVM_SET_CPUID2 and one KVM_SET_MSRS ----------------------------------- */

static void test_vcpu_configure(void **state)
{
	const struct cpuid_kvm *k;
	struct cpuid_vm vm;
	struct kvm_cpuid2 *scratch;
	char err[512], want[512];

	(void)state;
	fake_setup(INTEL, 0);
	k = cpuid_kvm_get(3);
	build_tmpl(&vm, k, 2, 0, 0, 0, NULL);
	/* Only MSRs in KVM's (fake) list: 0x174-0x176, 0x1a0, 0x277, STAR, LSTAR. */
	assert_int_equal(vm.nr_msrs, 7);
	scratch = cpuid_table_alloc(vm.tmpl->nent);
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(cpuid_vcpu_configure(10 + (int)i, &vm, i, scratch, err, sizeof(err)), 0);
	assert_int_equal(fake_set_cpuid, 2);
	assert_int_equal(fake_set_msrs, 2);
	assert_int_equal(fake_get_cpuid, 1);
	assert_int_equal(get(last_set_cpuid, 1, 0)->ebx >> 24, 1);
	assert_int_equal(last_msrs.nmsrs, 7);
	for (unsigned i = 0; i < last_msrs.nmsrs; i++) {
		if (last_msr_entries[i].index == 0x1a0)
			assert_int_equal(last_msr_entries[i].data, 1); /* FAST_STRING */
		else if (last_msr_entries[i].index == 0x277)
			assert_int_equal(last_msr_entries[i].data, 0x0007040600070406ull);
		else
			assert_int_equal(last_msr_entries[i].data, 0);
		assert_int_not_equal(last_msr_entries[i].index, 0x10); /* never IA32_TSC */
	}
	/* KVM refusing the 4th MSR, or the table: the message names the call, the vCPU and the values. */
	fake_msrs_accept = 3;
	assert_int_equal(cpuid_vcpu_configure(10, &vm, 0, scratch, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "KVM_SET_MSRS for vCPU 0: KVM refused MSR 0x%x = 0x%llx (3 of 7 set)",
		 last_msr_entries[3].index, (unsigned long long)last_msr_entries[3].data);
	assert_string_equal(err, want);
	fake_set_cpuid_errno = EINVAL;
	assert_int_equal(cpuid_vcpu_configure(10, &vm, 1, scratch, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "KVM_SET_CPUID2 for vCPU 1 failed: Invalid argument ("));
	free(scratch);
	cpuid_vm_destroy(&vm);
	fake_teardown();
}

static void test_dump_roundtrip(void **state)
{
	const struct cpuid_kvm *k = load(INTEL);
	char path[] = "/tmp/brisk-test-rt-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	struct kvm_cpuid2 *copy = cpuid_table_alloc(k->supported->nent);
	unsigned nmsrs = k->nr_msrs;

	(void)state;
	memcpy(copy, k->supported, (size_t)cpuid_table_size(k->supported));
	cpuid_dump_write(f, k);
	fclose(f);
	k = load(path);
	assert_int_equal(k->supported->nent, copy->nent);
	assert_memory_equal(k->supported->entries, copy->entries, copy->nent * sizeof(copy->entries[0]));
	assert_int_equal(k->nr_msrs, nmsrs);
	assert_true(k->tsc_deadline);
	free(copy);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_fetched_once, teardown),
	    cmocka_unit_test_teardown(test_grows_only_on_e2big, teardown),
	    cmocka_unit_test_teardown(test_load_errors, teardown),
	    cmocka_unit_test_teardown(test_load_limits, teardown),
	    cmocka_unit_test(test_apic_ids),
	    cmocka_unit_test_teardown(test_intel_template, teardown),
	    cmocka_unit_test_teardown(test_intel_vcpu_ids, teardown),
	    cmocka_unit_test_teardown(test_vcpus_differ_only_in_ids, teardown),
	    cmocka_unit_test_teardown(test_amd_template, teardown),
	    cmocka_unit_test_teardown(test_amd_host_fixture, teardown),
	    cmocka_unit_test_teardown(test_single_vcpu, teardown),
	    cmocka_unit_test_teardown(test_pmu_on_request, teardown),
	    cmocka_unit_test_teardown(test_real_nested_dump, teardown),
	    cmocka_unit_test_teardown(test_baseline, teardown),
	    cmocka_unit_test_teardown(test_baseline_refused_without_sse42, teardown),
	    cmocka_unit_test_teardown(test_json_template, teardown),
	    cmocka_unit_test_teardown(test_json_rejections, teardown),
	    cmocka_unit_test_teardown(test_missing_template_file, teardown),
	    cmocka_unit_test_teardown(test_template_load_without_kvm, teardown),
	    cmocka_unit_test(test_feature_registers),
	    cmocka_unit_test_teardown(test_vcpu_configure, teardown),
	    cmocka_unit_test_teardown(test_dump_roundtrip, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
