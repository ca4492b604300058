/*
 * fuzz_fc_template.c - libFuzzer harness: Firecracker's custom CPU template (cpuid_fc.c, PUT /cpu-config's body)
 * on arbitrary bytes, and what an accepted template does to recorded KVM_GET_SUPPORTED_CPUID tables
 * (tests/unit/fixtures/), without KVM.
 *
 * Invariants beyond "no crash, no sanitizer report, no leak":
 *   - a refusal is -EINVAL (or -ENOMEM), leaves no template, and its message starts "cpu-config: " and is one
 *     printable line (it goes into an HTTP reply and a terminal);
 *   - an accepted template serializes (cpuid_fc_to_json) to text that parses back to a template serializing
 *     to the same text (what a snapshot keeps is what the VM had);
 *   - applied to each fixture: refused with a message, or the table keeps its entries' keys and count, the
 *     MSRs stay within CPUID_MAX_MSRS, distinct and in KVM's list, and applying it again changes nothing
 *     (each bitmap is an assignment);
 *   - the whole recipe (cpuid_vm_init with the template) runs on one fixture.
 */
#include <errno.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/cpuid.h"
#include "brisk/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const fixture_paths[] = {
    "tests/unit/fixtures/host-amd-epyc.txt",
    "tests/unit/fixtures/nested-kvm-amd-qemu64.txt",
    "tests/unit/fixtures/synthetic-intel-icx.txt",
};
#define NR_FIXTURES (sizeof(fixture_paths) / sizeof(fixture_paths[0]))

static struct cpuid_kvm fixtures[NR_FIXTURES];
static int ready;

static struct kvm_cpuid2 *table_copy(const struct kvm_cpuid2 *t)
{
	struct kvm_cpuid2 *c = cpuid_table_alloc(t->nent);

	if (!c)
		abort();
	memcpy(c->entries, t->entries, t->nent * sizeof(t->entries[0]));
	return c;
}

static void setup(void)
{
	char err[512];

	log_set_level(LOG_ERROR);
	for (size_t i = 0; i < NR_FIXTURES; i++) {
		const struct cpuid_kvm *k;
		uint32_t *msrs;

		if (cpuid_kvm_load(fixture_paths[i], err, sizeof(err)) != 0) {
			fprintf(stderr, "fuzz_fc_template: %s (run from the repository root)\n", err);
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
	ready = 1;
}

static void check_message(int ret, const char *err)
{
	if ((ret != -EINVAL && ret != -ENOMEM) || !err[0])
		abort();
	for (const char *p = err; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			abort();
}

static void check_round_trip(const struct cpuid_fc_template *t)
{
	struct cpuid_fc_template *back = NULL;
	char *a = cpuid_fc_to_json(t), *b;
	char err[512];

	if (!a || cpuid_fc_parse("cpu-config", a, strlen(a), &back, err, sizeof(err)) != 0)
		abort();
	b = cpuid_fc_to_json(back);
	if (!b || strcmp(a, b) != 0)
		abort();
	free(a);
	free(b);
	cpuid_fc_free(back);
}

static void apply_to(const struct cpuid_fc_template *t, const struct cpuid_kvm *k)
{
	struct kvm_cpuid2 *out = table_copy(k->supported), *again;
	struct cpuid_vm vm = {0}, vm2 = {0};
	char err[512] = "";
	int ret = cpuid_fc_apply(t, k, out, &vm, err, sizeof(err));

	if (ret) {
		check_message(ret, err);
		free(out);
		return;
	}
	if (out->nent != k->supported->nent || vm.nr_msrs > CPUID_MAX_MSRS)
		abort();
	for (unsigned i = 0; i < out->nent; i++)
		if (out->entries[i].function != k->supported->entries[i].function ||
		    out->entries[i].index != k->supported->entries[i].index)
			abort();
	for (unsigned i = 0; i < vm.nr_msrs; i++) {
		if (!cpuid_kvm_has_msr(k, vm.msrs[i].index))
			abort();
		for (unsigned j = 0; j < i; j++)
			if (vm.msrs[j].index == vm.msrs[i].index)
				abort();
	}
	again = table_copy(out);
	vm2 = vm;
	if (cpuid_fc_apply(t, k, again, &vm2, err, sizeof(err)) != 0 ||
	    memcmp(again->entries, out->entries, out->nent * sizeof(out->entries[0])) != 0 ||
	    vm2.nr_msrs != vm.nr_msrs || memcmp(vm2.msrs, vm.msrs, vm.nr_msrs * sizeof(vm.msrs[0])) != 0)
		abort();
	free(again);
	free(out);
}

static void vm_recipe(const struct cpuid_fc_template *t, const struct cpuid_kvm *k, unsigned cpus)
{
	struct cpuid_params p = {.cpus = cpus, .fc_template = t};
	struct cpuid_vm vm;
	char err[512] = "";
	int ret = cpuid_vm_init(&vm, k, &p, err, sizeof(err));

	if (ret) {
		check_message(ret, err);
		if (vm.tmpl)
			abort();
		return;
	}
	if (!vm.tmpl || vm.tmpl->nent < k->supported->nent || vm.nr_msrs > CPUID_MAX_MSRS)
		abort();
	cpuid_vm_destroy(&vm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cpuid_fc_template *t = NULL;
	char err[512] = "";
	int ret;

	if (!ready)
		setup();
	ret = cpuid_fc_parse("cpu-config", (const char *)data, size, &t, err, sizeof(err));
	if (ret) {
		if (t)
			abort();
		check_message(ret, err);
		if (strncmp(err, "cpu-config: ", 12) != 0)
			abort();
		return 0;
	}
	check_round_trip(t);
	for (size_t i = 0; i < NR_FIXTURES; i++)
		apply_to(t, &fixtures[i]);
	vm_recipe(t, &fixtures[size % NR_FIXTURES], 1 + (unsigned)(size % 4));
	cpuid_fc_free(t);
	return 0;
}
