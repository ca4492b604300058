/*
 * fuzz_cpu_template.c - libFuzzer harness: the --cpu-template JSON file (cpuid_json.c) on arbitrary bytes, and what an
 * accepted template does to recorded KVM_GET_SUPPORTED_CPUID tables (tests/unit/fixtures/), without KVM.
 */
#include <errno.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../src/arch/x86/cpuid_internal.h"
#include "brisk/cpuid.h"
#include "brisk/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * What KVM reports, from the unit tests' dumps (paths from the repository
 * root, where run.sh runs the target, as the unit tests do): a real kvm_pvm
 * dump (AMD), a real nested kvm_amd dump (96 MSRs) and the synthetic Ice Lake
 * (Intel, leaf 0x1F, the PMU leaf).
 */
static const char *const fixture_paths[] = {
    "tests/unit/fixtures/kvm-pvm-amd-epyc.txt",
    "tests/unit/fixtures/nested-kvm-amd-qemu64.txt",
    "tests/unit/fixtures/synthetic-intel-icx.txt",
};
#define NR_FIXTURES (sizeof(fixture_paths) / sizeof(fixture_paths[0]))

static struct cpuid_kvm fixtures[NR_FIXTURES];
static char path[64]; /* /proc/self/fd/N of a memfd holding the input: a regular file to file_open_input */
static int memfd = -1;

static struct kvm_cpuid2 *table_copy(const struct kvm_cpuid2 *t)
{
	struct kvm_cpuid2 *c = cpuid_table_alloc(t->nent);

	if (!c)
		abort();
	memcpy(c->entries, t->entries, t->nent * sizeof(t->entries[0]));
	return c;
}

/* Loads each dump with cpuid_kvm_load and keeps a copy: the process cache holds one at a time. */
static void setup(void)
{
	char err[512];

	log_set_level(LOG_ERROR);
	for (size_t i = 0; i < NR_FIXTURES; i++) {
		const struct cpuid_kvm *k;
		uint32_t *msrs;

		if (cpuid_kvm_load(fixture_paths[i], err, sizeof(err)) != 0) {
			fprintf(stderr, "fuzz_cpu_template: %s (run from the repository root)\n", err);
			abort();
		}
		k = cpuid_kvm_get(-1);
		msrs = k ? malloc(k->nr_msrs * sizeof(*msrs) + 1) : NULL;
		if (!msrs)
			abort();
		memcpy(msrs, k->msrs, k->nr_msrs * sizeof(*msrs));
		fixtures[i] = (struct cpuid_kvm){.supported = table_copy(k->supported),
						 .msrs = msrs,
						 .nr_msrs = k->nr_msrs,
						 .tsc_deadline = k->tsc_deadline};
	}
	cpuid_kvm_reset();
	memfd = memfd_create("cpu-template.json", MFD_CLOEXEC);
	if (memfd < 0)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
}

/* A refusal names the file, says why on one printable line (it goes to a terminal), and leaves nothing behind. */
static void check_refusal(int ret, const char *err)
{
	char prefix[96];

	snprintf(prefix, sizeof(prefix), "--cpu-template %s: ", path);
	if ((ret != -EINVAL && ret != -ENOMEM) || strncmp(err, prefix, strlen(prefix)) != 0 || !err[strlen(prefix)])
		abort();
	for (const char *p = err; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			abort();
}

/*
 * Applied to a table that is exactly KVM's: the entries keep their keys,
 * no feature register gains a bit KVM lacks, the MSRs are distinct and all
 * in KVM's list, and applying the same template to the result changes
 * nothing (each item is an assignment of the bits in its mask).
 */
static void check_applied(const struct cpuid_template *t, const struct cpuid_kvm *k, const struct kvm_cpuid2 *out,
			  const struct cpuid_vm *vm)
{
	const struct kvm_cpuid2 *sup = k->supported;
	struct kvm_cpuid2 *again = table_copy(out);
	struct cpuid_vm vm2 = {0};
	char err[512];

	if (out->nent != sup->nent || vm->nr_msrs > CPUID_MAX_MSRS)
		abort();
	for (unsigned i = 0; i < sup->nent; i++) {
		struct kvm_cpuid_entry2 s = sup->entries[i], o = out->entries[i];

		if (s.function != o.function || s.index != o.index || s.flags != o.flags)
			abort();
		for (unsigned r = 0; r < 4; r++)
			if (cpuid_is_feature_register(s.function, s.index, r) &&
			    (*cpuid_reg(&o, r) & ~*cpuid_reg(&s, r)))
				abort();
	}
	for (unsigned i = 0; i < vm->nr_msrs; i++) {
		if (!cpuid_kvm_has_msr(k, vm->msrs[i].index))
			abort();
		for (unsigned j = 0; j < i; j++)
			if (vm->msrs[j].index == vm->msrs[i].index)
				abort();
	}
	if (cpuid_template_apply(path, t, k, again, &vm2, err, sizeof(err)) != 0 ||
	    memcmp(again->entries, out->entries, out->nent * sizeof(out->entries[0])) != 0 ||
	    vm2.nr_msrs != vm->nr_msrs || memcmp(vm2.msrs, vm->msrs, vm->nr_msrs * sizeof(vm->msrs[0])) != 0)
		abort();
	free(again);
}

/* cpuid_template_apply on a copy of fixture `k`'s table, with no boot MSRs yet. */
static void apply_to(const struct cpuid_template *t, const struct cpuid_kvm *k)
{
	struct kvm_cpuid2 *out = table_copy(k->supported);
	struct cpuid_vm vm = {0};
	char err[512];
	int ret;

	err[0] = '\0';
	ret = cpuid_template_apply(path, t, k, out, &vm, err, sizeof(err));
	if (ret == 0)
		check_applied(t, k, out, &vm);
	else
		check_refusal(ret, err);
	free(out);
}

/* The whole recipe `brisk run --cpu-template FILE` follows (the file read again), then every vCPU's table. */
static void vm_recipe(const struct cpuid_kvm *k, unsigned cpus)
{
	struct cpuid_params p = {.cpus = cpus, .cpu_template = path};
	struct kvm_cpuid2 *scratch;
	struct cpuid_vm vm;
	char err[512];
	int ret;

	err[0] = '\0';
	ret = cpuid_vm_init(&vm, k, &p, err, sizeof(err));
	if (ret != 0) {
		check_refusal(ret, err);
		if (vm.tmpl)
			abort();
		return;
	}
	if (!vm.tmpl || vm.tmpl->nent < k->supported->nent || vm.nr_msrs > CPUID_MAX_MSRS)
		abort();
	scratch = cpuid_table_alloc(vm.tmpl->nent);
	if (!scratch)
		abort();
	for (unsigned i = 0; i < cpus; i++) {
		cpuid_vcpu_table(&vm, i, scratch);
		if (scratch->nent != vm.tmpl->nent)
			abort();
	}
	free(scratch);
	cpuid_vm_destroy(&vm);
}

/*
 * The input is the template file's bytes, in a memfd read through its
 * /proc/self/fd path, so the real reader runs (size limit, NUL bytes, empty
 * file). Invariants beyond "no crash, no sanitizer report": a refusal fills
 * err as check_refusal says; an accepted template is applied to every
 * fixture (check_applied), and the VM recipe runs on one of them, with 1 to
 * 4 vCPUs, chosen by the input's length.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cpuid_template *t = NULL;
	char err[512];
	int ret;

	if (memfd < 0)
		setup();
	if (ftruncate(memfd, 0) != 0 || (size && pwrite(memfd, data, size, 0) != (ssize_t)size))
		abort();
	err[0] = '\0';
	ret = cpuid_template_load(path, &t, err, sizeof(err));
	if (ret != 0) {
		if (t)
			abort();
		check_refusal(ret, err);
		return 0;
	}
	if (!t)
		abort();
	for (size_t i = 0; i < NR_FIXTURES; i++)
		apply_to(t, &fixtures[i]);
	cpuid_template_free(t);
	vm_recipe(&fixtures[size % NR_FIXTURES], 1 + (unsigned)(size / NR_FIXTURES % 4));
	return 0;
}
