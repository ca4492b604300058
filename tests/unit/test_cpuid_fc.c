/*
 * test_cpuid_fc.c - Firecracker's CPU templates on brisk's engine: the static templates' bits against
 * Firecracker v1.7.0's .rs values, each applied to recorded KVM tables (tests/unit/fixtures/), the vendor
 * and model checks, the custom template parser's refusals with Firecracker's messages, and the API's
 * machine-config cpu_template and PUT /cpu-config (docs/cpuid.md, docs/security.md cases 64-67).
 */
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
#include "brisk/fc_config.h"

#include "cpuid_test.h"

#define VENDOR_MISMATCH "Failed to get CPU template: CPU vendor mismatched between actual CPU and CPU template."

/* ---- a synthetic KVM table: every register 0 or ~0, to read a template's filter and value back ---------------- */

static const uint32_t fc_leaves[][2] = {{1, 0}, {7, 0}, {0xd, 0}, {0xd, 1}, {0x80000001, 0}, {0x80000008, 0}};
#define NR_FC_LEAVES (sizeof(fc_leaves) / sizeof(fc_leaves[0]))

static uint32_t synth_msrs[] = {0x10a, 0x1a0};

/* A table of leaf 0 (`vendor`'s signature, leaf 1 EAX `eax1` kept when fill is 0) and fc_leaves, filled with `fill`. */
static struct kvm_cpuid2 *synth_table(bool intel, uint32_t fill, uint32_t eax1)
{
	struct kvm_cpuid2 *t = cpuid_table_alloc(1 + NR_FC_LEAVES);
	struct kvm_cpuid_entry2 *e;

	assert_non_null(t);
	t->entries[0] = (struct kvm_cpuid_entry2){.function = 0, .eax = 0xd};
	e = &t->entries[0];
	if (intel)
		e->ebx = 0x756e6547, e->edx = 0x49656e69, e->ecx = 0x6c65746e;
	else
		e->ebx = 0x68747541, e->edx = 0x69746e65, e->ecx = 0x444d4163;
	for (unsigned i = 0; i < NR_FC_LEAVES; i++) {
		e = &t->entries[1 + i];
		*e = (struct kvm_cpuid_entry2){.function = fc_leaves[i][0],
					       .index = fc_leaves[i][1],
					       .flags = fc_leaves[i][0] == 0xd ? KVM_CPUID_FLAG_SIGNIFCANT_INDEX : 0,
					       .eax = fill,
					       .ebx = fill,
					       .ecx = fill,
					       .edx = fill};
	}
	if (eax1)
		t->entries[1].eax = eax1;
	return t;
}

/* The template `name` applied to synth_table(intel, fill): its table (free it) and the VM's MSRs in *vm. */
static struct kvm_cpuid2 *synth_apply(const char *name, bool intel, uint32_t fill, struct cpuid_vm *vm)
{
	struct kvm_cpuid2 *sup = synth_table(intel, 0, 0x000606a6), *tab = synth_table(intel, fill, 0);
	struct cpuid_kvm k = {.supported = sup, .msrs = synth_msrs, .nr_msrs = 2};
	char err[512] = "";

	memset(vm, 0, sizeof(*vm));
	if (cpuid_fc_apply(cpuid_fc_static(name), &k, tab, vm, err, sizeof(err)))
		fail_msg("%s: %s", name, err);
	free(sup);
	return tab;
}

/* Register `reg` of leaf.sub under template `name`: *filter and *value as the template's bitmap says. */
static void bitmap_of(const char *name, bool intel, uint32_t leaf, uint32_t sub, unsigned reg, uint32_t *filter,
		      uint32_t *value)
{
	struct cpuid_vm vm;
	struct kvm_cpuid2 *zeros = synth_apply(name, intel, 0, &vm), *ones = synth_apply(name, intel, ~0u, &vm);
	struct kvm_cpuid_entry2 *z = get(zeros, leaf, sub), *o = get(ones, leaf, sub);
	uint32_t zr[4] = {z->eax, z->ebx, z->ecx, z->edx}, or [4] = {o->eax, o->ebx, o->ecx, o->edx};

	*value = zr[reg];
	*filter = ~ or [reg] | zr[reg];
	free(zeros);
	free(ones);
}

static void assert_bitmap(const char *name, bool intel, uint32_t leaf, uint32_t sub, unsigned reg, uint32_t filter,
			  uint32_t value)
{
	uint32_t f, v;

	bitmap_of(name, intel, leaf, sub, reg, &f, &v);
	if (f != filter || v != value)
		fail_msg("%s leaf 0x%x.%u reg %u: filter 0x%08x value 0x%08x, want 0x%08x 0x%08x", name, leaf, sub, reg,
			 f, v, filter, value);
}

/* Values transcribed from Firecracker v1.7.0's src/vmm/src/cpu_config/x86_64/static_cpu_templates/ (t2a.rs, t2.rs,
 * c3.rs, t2s.rs, t2cl.rs). */
static void test_static_values_match_rs(void **state)
{
	struct cpuid_vm vm;
	struct kvm_cpuid2 *t;

	(void)state;
	/* t2a.rs leaf 0x1: EAX 0b0000_11111111_1111_00_11_1111_1111_1111 / ..._0011_00_00_0110_1111_0010 */
	assert_bitmap("T2A", false, 1, 0, 0, 0x0fff3fff, 0x000306f2);
	assert_bitmap("T2A", false, 1, 0, 2, 0x0004cdfc, 0);
	assert_bitmap("T2A", false, 1, 0, 3, 0xe8641080, 0x00001080);
	/* t2a.rs leaf 0x80000008 EBX */
	assert_bitmap("T2A", false, 0x80000008, 0, 1, 0x001c0205, 0x001c0004);
	/* t2.rs leaf 0x7 */
	assert_bitmap("T2", true, 7, 0, 1, 0xffefda14, 0x00000200);
	assert_bitmap("T2", true, 7, 0, 2, 0x40415f5e, 0);
	assert_bitmap("T2", true, 7, 0, 3, 0x0000011c, 0);
	/* c3.rs leaf 0x1 EAX: family 6 model 0x3e stepping 4 */
	assert_bitmap("C3", true, 1, 0, 0, 0x0fff3fff, 0x000306e4);
	/* t2s.rs msr_modifiers: IA32_ARCH_CAPABILITIES, every bit given */
	t = synth_apply("T2S", true, 0, &vm);
	assert_int_equal(vm.nr_msrs, 1);
	assert_int_equal(vm.msrs[0].index, 0x10a);
	assert_int_equal(vm.msrs[0].value, 0x0000000004080c4cull);
	free(t);
	/* t2cl.rs: ARCH_CAPABILITIES bits it does not give start from brisk's value (0 here) */
	t = synth_apply("T2CL", true, 0, &vm);
	assert_int_equal(vm.nr_msrs, 1);
	assert_int_equal(vm.msrs[0].value, 0);
	free(t);
	/* The template's flags replace KVM's (T2A's leaf 7.0 has flags 1: KVM_CPUID_FLAG_SIGNIFCANT_INDEX). */
	t = synth_apply("T2A", false, 0, &vm);
	assert_int_equal(get(t, 7, 0)->flags, 1);
	assert_int_equal(get(t, 1, 0)->flags, 0);
	free(t);
}

/* Every bit a template gives, in the table a VM gets from a recorded KVM dump through brisk's engine. */
static void check_on_fixture(const char *fixture, const char *name, bool intel)
{
	const struct cpuid_kvm *k = load(fixture);
	struct cpuid_vm vm;

	build_tmpl(&vm, k, 2, 0, 0, 0, name);
	for (unsigned i = 0; i < NR_FC_LEAVES; i++) {
		struct kvm_cpuid_entry2 *e = cpuid_find(vm.tmpl, fc_leaves[i][0], fc_leaves[i][1]);

		if (!e)
			continue;
		for (unsigned r = 0; r < 4; r++) {
			uint32_t f, v, got = *(&e->eax + r);

			bitmap_of(name, intel, fc_leaves[i][0], fc_leaves[i][1], r, &f, &v);
			if ((got & f) != v)
				fail_msg("%s on %s: leaf 0x%x.%u reg %u = 0x%08x, template wants 0x%08x under 0x%08x",
					 name, fixture, fc_leaves[i][0], fc_leaves[i][1], r, got, v, f);
		}
	}
	cpuid_vm_destroy(&vm);
	cpuid_kvm_reset();
}

static void expect_refused(const char *fixture, const char *name, const char *msg)
{
	const struct cpuid_kvm *k = load(fixture);
	struct cpuid_params p = {.cpus = 1, .cpu_template = name};
	struct cpuid_vm vm;
	char err[512] = "";

	assert_int_equal(cpuid_vm_init(&vm, k, &p, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, msg);
	cpuid_kvm_reset();
}

static void test_static_on_fixtures(void **state)
{
	const struct cpuid_kvm *k;
	struct cpuid_vm vm;
	struct kvm_cpuid_entry2 *e;

	(void)state;
	check_on_fixture(AMD_HOST, "T2A", false);
	check_on_fixture(AMD_ZEN, "T2A", false);
	/* qemu64 under nested KVM has no leaf 0xD subleaf 1: Firecracker refuses T2A there too */
	expect_refused(NESTED, "T2A",
		       "Failed to create guest config: Template changes a CPUID entry not supported by "
		       "KVM: Leaf: d, Subleaf: 1");
	check_on_fixture(INTEL, "T2", true);
	check_on_fixture(INTEL, "T2S", true);
	check_on_fixture(INTEL, "T2CL", true);
	check_on_fixture(INTEL, "C3", true);
	/* T2CL's partial IA32_ARCH_CAPABILITIES starts from KVM's value (Firecracker reads vCPU 0's), given as msr_base
	 */
	{
		static const struct cpuid_msr base = {0x10a, 0x400000000c000069ull};
		struct cpuid_params p = {.cpus = 1, .cpu_template = "T2CL", .msr_base = &base, .nr_msr_base = 1};
		struct cpuid_vm v2;
		char err[512] = "";
		uint32_t f, val;
		uint64_t got = 0, filter;

		k = load(INTEL);
		assert_int_equal(cpuid_vm_init(&v2, k, &p, err, sizeof(err)), 0);
		for (unsigned i = 0; i < v2.nr_msrs; i++)
			if (v2.msrs[i].index == 0x10a)
				got = v2.msrs[i].value;
		assert_null(v2.msr_base);
		/* t2cl.json's 0b0...0x0x0000x0x0xxx0000xxxxxxxxx: filter 0xfffffffffaf51e00, value 0 */
		filter = 0xfffffffffaf51e00ull;
		assert_int_equal(got, 0x0000000004000069ull); /* (KVM's & ~filter): KVM's bits 0-8, 26 kept */
		assert_int_equal(got & ~filter, base.value & ~filter);
		bitmap_of("T2CL", true, 1, 0, 0, &f, &val); /* leaf 1 EAX as T2's */
		assert_int_equal(f, 0x0fff3fff);
		cpuid_vm_destroy(&v2);
		cpuid_kvm_reset();
	}
	/* A handful by name on the CI machine's own table: T2A hides AVX-512 and more, keeps brisk's rules. */
	k = load(AMD_HOST);
	build_tmpl(&vm, k, 1, 0, 0, 0, "T2A");
	e = get(vm.tmpl, 1, 0);
	assert_int_equal(e->eax, 0x000306f2); /* Haswell-like family/model as T2A says */
	assert_true(e->ecx & HV);	      /* brisk's hypervisor bit stays */
	assert_false(e->ecx & (1u << 3));     /* MONITOR */
	e = get(vm.tmpl, 7, 0);
	assert_false(e->ebx & AVX512F);
	assert_false(e->ebx & (1u << 31));			    /* AVX512VL */
	assert_false(e->ecx & (1u << 1));			    /* AVX512_VBMI */
	assert_int_equal(get(vm.tmpl, 0xd, 0)->eax & 0xe0, 0);	    /* no AVX-512 XSAVE state */
	assert_false(get(vm.tmpl, 0x80000001, 0)->ecx & (1u << 2)); /* SVM stays hidden */
	cpuid_vm_destroy(&vm);
}

/* docs/security.md case 65: a static template on the other vendor's host is refused at boot, as Firecracker. */
static void test_vendor_checks(void **state)
{
	static const char *const intel_only[] = {"C3", "T2", "T2S", "T2CL"};
	struct cpuid_vm vm;
	char err[512] = "";

	(void)state;
	for (unsigned i = 0; i < 4; i++) {
		expect_refused(AMD_HOST, intel_only[i], VENDOR_MISMATCH);
		expect_refused(PVM, intel_only[i], VENDOR_MISMATCH);
	}
	expect_refused(INTEL, "T2A", VENDOR_MISMATCH);
	/* T2CL below Cascade Lake (a Haswell's family 6 model 0x3f): Firecracker's InvalidCpuModel. */
	{
		struct kvm_cpuid2 *sup = synth_table(true, 0, 0x000306f2), *tab = synth_table(true, 0, 0);
		struct cpuid_kvm k = {.supported = sup, .msrs = synth_msrs, .nr_msrs = 2};

		memset(&vm, 0, sizeof(vm));
		assert_int_equal(cpuid_fc_apply(cpuid_fc_static("T2CL"), &k, tab, &vm, err, sizeof(err)), -EINVAL);
		assert_string_equal(err, "Failed to get CPU template: The current CPU model is not permitted to apply "
					 "the CPU template.");
		/* Cascade Lake itself (family 6, model 0x55, stepping 7) is enough. */
		sup->entries[1].eax = 0x00050657;
		assert_int_equal(cpuid_fc_apply(cpuid_fc_static("T2CL"), &k, tab, &vm, err, sizeof(err)), 0);
		free(sup);
		free(tab);
	}
	assert_null(cpuid_fc_static("t2a")); /* exact names, as serde's enum */
	assert_null(cpuid_fc_static("None"));
	assert_true(cpuid_template_builtin("T2A"));
	assert_false(cpuid_template_builtin("t2a"));
}

/* ---- the custom template parser ----------------------------------------------------------------------------- */

/* Firecracker's test_utils.rs TEST_TEMPLATE_JSON: 5 CPUID leaves, 4 MSRs (one a "0b" address, short bitmaps). */
static const char fc_test_template[] =
    "{\"cpuid_modifiers\": ["
    "{\"leaf\": \"0x80000001\", \"subleaf\": \"0x0007\", \"flags\": 0, \"modifiers\": ["
    "{\"register\": \"eax\", \"bitmap\": \"0bx00100xxx1xxxxxxxxxxxxxxxxxxxxx1\"}]},"
    "{\"leaf\": \"0x80000002\", \"subleaf\": \"0x0004\", \"flags\": 0, \"modifiers\": ["
    "{\"register\": \"ebx\", \"bitmap\": \"0bxxx1xxxxxxxxxxxxxxxxxxxxx1\"},"
    "{\"register\": \"ecx\", \"bitmap\": \"0bx00100xxx1xxxxxxxxxxx0xxxxx0xxx1\"}]},"
    "{\"leaf\": \"0x80000003\", \"subleaf\": \"0x0004\", \"flags\": 0, \"modifiers\": ["
    "{\"register\": \"edx\", \"bitmap\": \"0bx00100xxx1xxxxxxxxxxx0xxxxx0xxx1\"}]},"
    "{\"leaf\": \"0x80000004\", \"subleaf\": \"0x0004\", \"flags\": 0, \"modifiers\": ["
    "{\"register\": \"edx\", \"bitmap\": \"0b00100xxx1xxxxxx1xxxxxxxxxxxxxx1\"},"
    "{\"register\": \"ecx\", \"bitmap\": \"0bx00100xxx1xxxxxxxxxxxxx111xxxxx1\"}]},"
    "{\"leaf\": \"0x80000005\", \"subleaf\": \"0x0004\", \"flags\": 0, \"modifiers\": ["
    "{\"register\": \"eax\", \"bitmap\": \"0bx00100xxx1xxxxx00xxxxxx000xxxxx1\"},"
    "{\"register\": \"edx\", \"bitmap\": \"0bx10100xxx1xxxxxxxxxxxxx000xxxxx1\"}]}],"
    "\"msr_modifiers\": ["
    "{\"addr\": \"0x0\", \"bitmap\": \"0bx00100xxx1xxxx00xxx1xxxxxxxxxxx1\"},"
    "{\"addr\": \"0x1\", \"bitmap\": \"0bx00111xxx1xxxx111xxxxx101xxxxxx1\"},"
    "{\"addr\": \"0b11\", \"bitmap\": \"0bx00100xxx1xxxxxx0000000xxxxxxxx1\"},"
    "{\"addr\": \"0xbbca\", \"bitmap\": \"0bx00100xxx1xxxxxxxxx1\"}]}";

static struct cpuid_fc_template *parse_ok(const char *text)
{
	struct cpuid_fc_template *t = NULL;
	char err[512] = "";

	if (cpuid_fc_parse("cpu-config", text, strlen(text), &t, err, sizeof(err)))
		fail_msg("%s: %s", text, err);
	assert_non_null(t);
	assert_null(cpuid_fc_name(t));
	return t;
}

static void parse_refused(const char *text, const char *msg)
{
	struct cpuid_fc_template *t = NULL;
	char err[512] = "";

	assert_int_equal(cpuid_fc_parse("cpu-config", text, strlen(text), &t, err, sizeof(err)), -EINVAL);
	assert_null(t);
	if (!strstr(err, msg))
		fail_msg("%s: got \"%s\", want \"%s\"", text, err, msg);
}

static void test_parse_accepts(void **state)
{
	struct kvm_cpuid2 *tab = synth_table(false, 0xffffffff, 0), *sup = synth_table(false, 0, 0);
	struct cpuid_kvm k = {.supported = sup, .msrs = synth_msrs, .nr_msrs = 2};
	struct cpuid_fc_template *t;
	struct cpuid_vm vm = {0};
	char err[512] = "";

	(void)state;
	cpuid_fc_free(parse_ok(fc_test_template));
	cpuid_fc_free(parse_ok("{ }"));
	cpuid_fc_free(parse_ok("{\"kvm_capabilities\": [\"69\", \"!7\"]}"));
	/* Unknown fields of the items are ignored, as serde does without deny_unknown_fields. */
	t = parse_ok(
	    "{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"subleaf\": \"0b0\", \"flags\": 0, \"comment\": 1,"
	    "\"modifiers\": [{\"register\": \"ecx\", \"bitmap\": \"0b0xxx_xxxx_xxxx_xxxx_xxxx_xxxx_xxxx_xx01\"}]}],"
	    "\"msr_modifiers\": [{\"addr\": \"0x1a0\", \"bitmap\": \"0b1x\"}]}");
	memset(&vm, 0, sizeof(vm));
	assert_int_equal(cpuid_msr_set(&vm, 0x1a0, 1), 0);
	assert_int_equal(cpuid_fc_apply(t, &k, tab, &vm, err, sizeof(err)), 0);
	assert_int_equal(get(tab, 1, 0)->ecx, 0x7ffffffd); /* bit 31 and bit 1 cleared, bit 0 set */
	assert_int_equal(vm.msrs[0].value, 3);		   /* bit 1 set, bit 0 brisk's 1 kept */
	cpuid_fc_free(t);
	/* docs/security.md case 66: a leaf KVM does not report, an MSR KVM does not list: Firecracker's errors. */
	t = parse_ok("{\"cpuid_modifiers\": [{\"leaf\": \"0x80000023\", \"subleaf\": \"0x0\", \"flags\": 0, "
		     "\"modifiers\": []}]}");
	assert_int_equal(cpuid_fc_apply(t, &k, tab, &vm, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "Failed to create guest config: Template changes a CPUID entry not supported by KVM: "
				 "Leaf: 80000023, Subleaf: 0");
	cpuid_fc_free(t);
	t = parse_ok(
	    "{\"cpuid_modifiers\": [{\"leaf\": \"0x7\", \"subleaf\": \"0x5\", \"flags\": 1, \"modifiers\": []}]}");
	assert_int_equal(cpuid_fc_apply(t, &k, tab, &vm, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "Leaf: 7, Subleaf: 5"));
	cpuid_fc_free(t);
	t = parse_ok("{\"msr_modifiers\": [{\"addr\": \"0xc0011029\", \"bitmap\": \"0b1\"}]}");
	assert_int_equal(cpuid_fc_apply(t, &k, tab, &vm, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "Failed to create guest config: Template changes an MSR entry not supported by KVM: "
				 "Register Address: c0011029");
	cpuid_fc_free(t);
	/* Firecracker's serialization (snapshots keep a custom template so) reads back to the same text */
	{
		struct cpuid_fc_template *a = parse_ok(fc_test_template), *b;
		char *ja = cpuid_fc_to_json(a), *jb;

		assert_non_null(ja);
		assert_non_null(strstr(ja,
				       "{\"leaf\":\"0x80000001\",\"subleaf\":\"0x7\",\"flags\":0,\"modifiers\":[{"
				       "\"register\":\"eax\",\"bitmap\":\"0bx00100xxx1xxxxxxxxxxxxxxxxxxxxx1\"}]}"));
		assert_non_null(strstr(ja, "{\"addr\":\"0x3\",\"bitmap\":\"0b"
					   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
					   "x00100xxx1xxxxxx0000000xxxxxxxx1\"}"));
		assert_int_equal(cpuid_fc_dup(a, &b), 0);
		jb = cpuid_fc_to_json(b);
		assert_string_equal(ja, jb);
		free(ja);
		free(jb);
		cpuid_fc_free(a);
		cpuid_fc_free(b);
	}
	cpuid_fc_free(NULL);
	cpuid_fc_free((struct cpuid_fc_template *)cpuid_fc_static("T2")); /* a static one is not freed */
	assert_string_equal(cpuid_fc_name(cpuid_fc_static("T2")), "T2");
	free(tab);
	free(sup);
}

/* docs/security.md case 64: every malformed custom template refused with Firecracker's words, no template made. */
static void test_parse_refusals(void **state)
{
	char big[64 + 40 * 1100];
	size_t n;

	(void)state;
	parse_refused("{\"cpuid_modifiers\": [{\"leaf\": \"0x80000001\", \"subleaf\": \"0b000111\", \"flags\": 0, "
		      "\"modifiers\": [{\"register\": \"ekx\", \"bitmap\": \"0bx00100xxx1xxxxxxxxxxxxxxxxxxxxx1\"}]}]}",
		      "cpu-config: cpuid_modifiers[0].modifiers[0]: Invalid CPUID register. Must be one of [eax, ebx, "
		      "ecx, edx]");
	parse_refused("{\"msr_modifiers\": [{\"addr\": \"0jj0\", \"bitmap\": \"0b1\"}]}",
		      "msr_modifiers[0]: No supported number system prefix found in value [0jj0]. Make sure to prefix "
		      "the number with '0x' for hexadecimal numbers or '0b' for binary numbers.");
	parse_refused(
	    "{\"cpuid_modifiers\": [{\"leaf\": \"k\", \"subleaf\": \"0x0\", \"flags\": 0, \"modifiers\": []}]}",
	    "No supported number system prefix found in value [k]");
	parse_refused(
	    "{\"cpuid_modifiers\": [{\"leaf\": \"7\", \"subleaf\": \"0x0\", \"flags\": 0, \"modifiers\": []}]}",
	    "No supported number system prefix found in value [7]");
	parse_refused("{\"cpuid_modifiers\": [{\"leaf\": 7, \"subleaf\": \"0x0\", \"flags\": 0, \"modifiers\": []}]}",
		      "cpuid_modifiers[0]: invalid type: integer `7`, expected a string");
	parse_refused(
	    "{\"cpuid_modifiers\": [{\"leaf\": \"0x1g\", \"subleaf\": \"0x0\", \"flags\": 0, \"modifiers\": []}]}",
	    "Failed to parse string [0x1g] as a number for CPU template - ParseIntError { kind: InvalidDigit }");
	parse_refused(
	    "{\"cpuid_modifiers\": [{\"leaf\": \"0x\", \"subleaf\": \"0x0\", \"flags\": 0, \"modifiers\": []}]}",
	    "Failed to parse string [0x] as a number for CPU template - ParseIntError { kind: Empty }");
	parse_refused("{\"cpuid_modifiers\": [{\"leaf\": \"0x100000000\", \"subleaf\": \"0x0\", \"flags\": 0, "
		      "\"modifiers\": []}]}",
		      "Failed to parse string [0x100000000] as a number for CPU template - ParseIntError { kind: "
		      "PosOverflow }");
	parse_refused(
	    "{\"msr_modifiers\": [{\"addr\": \"0x200\", \"bitmap\": \"0bx0?1_0_0x_?x1xxxx00xxx1xxxxxxxxxxx1\"}]}",
	    "Failed to parse string [0bx0?1_0_0x_?x1xxxx00xxx1xxxxxxxxxxx1] as a bitmap - unknown character: 63");
	parse_refused(
	    "{\"msr_modifiers\": [{\"addr\": \"0x200\", \"bitmap\": \"0bx00100x0x1xxxx05xxx1xxxxxxxxxxx1\"}]}",
	    "Failed to parse string [0bx00100x0x1xxxx05xxx1xxxxxxxxxxx1] as a bitmap - unknown character: 53");
	parse_refused("{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"subleaf\": \"0x0\", \"flags\": 0, \"modifiers\": ["
		      "{\"register\": \"eax\", \"bitmap\": \"0b1xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}]}]}",
		      "as a bitmap - string is too long");
	parse_refused("{\"msr_modifiers\": [{\"addr\": \"0x10a\", \"bitmap\": "
		      "\"0b_1xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}]}",
		      "as a bitmap - string is too long");
	parse_refused("{\"cpuid_modifiers\": [{\"subleaf\": \"0x0\", \"flags\": 0, \"modifiers\": []}]}",
		      "cpuid_modifiers[0]: missing field `leaf`");
	parse_refused("{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"subleaf\": \"0x0\", \"modifiers\": []}]}",
		      "missing field `flags`");
	parse_refused(
	    "{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"subleaf\": \"0x0\", \"flags\": -1, \"modifiers\": []}]}",
	    "invalid value: integer `-1`, expected u32");
	parse_refused("{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"subleaf\": \"0x0\", \"flags\": 4294967296, "
		      "\"modifiers\": []}]}",
		      "invalid value: integer `4294967296`, expected u32");
	parse_refused(
	    "{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"subleaf\": \"0x0\", \"flags\": 1.5, \"modifiers\": []}]}",
	    "invalid type: floating point `1.5`, expected u32");
	parse_refused(
	    "{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"subleaf\": \"0x0\", \"flags\": 0, \"modifiers\": {}}]}",
	    "invalid type: map, expected a sequence");
	parse_refused("{\"cpuid_modifiers\": [5]}", "cpuid_modifiers[0]: invalid type: integer `5`, expected struct "
						    "CpuidLeafModifier");
	parse_refused("{\"cpuid_modifiers\": null}", "invalid type: null, expected a sequence");
	parse_refused("{\"msr_modifiers\": [{\"addr\": \"0x10a\"}]}", "msr_modifiers[0]: missing field `bitmap`");
	parse_refused("{\"msr_modifiers\": [{\"addr\": \"0x10a\", \"bitmap\": 5}]}",
		      "invalid type: integer `5`, expected a string");
	parse_refused("{\"reg_modifiers\": [{\"addr\": \"0x0AAC\", \"bitmap\": \"0b1xx1\"}]}",
		      "unknown field `reg_modifiers`, expected one of `kvm_capabilities`, `cpuid_modifiers`, "
		      "`msr_modifiers`");
	parse_refused("{\"kvm_capabilities\": [\"x1\"]}",
		      "Failed to parse string [x1] as a kvm capability - can not convert to numeric: invalid digit "
		      "found in string");
	parse_refused("{\"kvm_capabilities\": [\"!\"]}", "cannot parse integer from empty string");
	parse_refused("{\"kvm_capabilities\": [\"4294967296\"]}", "number too large to fit in target type");
	parse_refused("<unparseable_payload>", "cpu-config: ");
	parse_refused("[]", "cpu-config: ");
	parse_refused("{\"cpuid_modifiers\": [{\"leaf\": \"0x1\\u0000\", \"subleaf\": \"0x0\", \"flags\": 0, "
		      "\"modifiers\": []}]}",
		      "a string with a NUL character");
	/* a control character in a quoted value is shown as '?', so the message stays one printable line */
	parse_refused("{\"cpuid_modifiers\": [{\"leaf\": \"0x1\\n\", \"subleaf\": \"0x0\", \"flags\": 0, "
		      "\"modifiers\": []}]}",
		      "Failed to parse string [0x1?]");
	/* more than 1024 cpuid_modifiers: brisk's bound */
	n = (size_t)snprintf(big, sizeof(big), "{\"cpuid_modifiers\": [");
	for (unsigned i = 0; i < 1025; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "%s{}", i ? "," : "");
	snprintf(big + n, sizeof(big) - n, "]}");
	parse_refused(big, "cpuid_modifiers: 1025 items, more than the 1024 brisk accepts");
}

/* ---- the API: machine-config's cpu_template, PUT /cpu-config, GET ------------------------------------------- */

static void put(struct fc_vm *f, int (*fn)(struct fc_vm *, const char *, size_t, char *, size_t), const char *body)
{
	char err[512] = "";

	if (fn(f, body, strlen(body), err, sizeof(err)))
		fail_msg("%s: %s", body, err);
}

static void assert_machine_template(const struct fc_vm *f, const char *want)
{
	char *j = fc_machine_config_json(f);
	char needle[64];

	assert_non_null(j);
	if (want) {
		snprintf(needle, sizeof(needle), "\"cpu_template\":\"%s\"", want);
		if (!strstr(j, needle))
			fail_msg("%s: no %s", j, needle);
	} else if (strstr(j, "cpu_template")) {
		fail_msg("%s: has a cpu_template", j);
	}
	free(j);
}

/* docs/security.md case 67: what was set last wins, as Firecracker's VmConfig; refusals change nothing. */
static void test_api_templates(void **state)
{
	struct fc_vm f;
	char err[512] = "";
	static const char bad[] = "{\"vcpu_count\": 1, \"mem_size_mib\": 128, \"cpu_template\": \"T3\"}";
	char *j;

	(void)state;
	fc_vm_init(&f);
	assert_machine_template(&f, NULL);
	put(&f, fc_put_machine_config, "{\"vcpu_count\": 1, \"mem_size_mib\": 128, \"cpu_template\": \"T2A\"}");
	assert_string_equal(f.cfg.cpu_template, "T2A");
	assert_machine_template(&f, "T2A");
	/* PUT without cpu_template keeps it (Firecracker's MachineConfigUpdate: None keeps the template) */
	put(&f, fc_put_machine_config, "{\"vcpu_count\": 2, \"mem_size_mib\": 128}");
	assert_machine_template(&f, "T2A");
	assert_int_equal(fc_put_machine_config(&f, bad, strlen(bad), err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "machine-config: cpu_template: unknown variant `T3`, expected one of `C3`, `T2`, "
				 "`T2S`, `None`, `T2CL`, `T2A`");
	assert_machine_template(&f, "T2A");
	assert_int_equal(fc_patch_machine_config(&f, "{\"cpu_template\": \"t2a\"}", 23, err, sizeof(err)), -EINVAL);
	/* a custom template replaces the static one; GET says "None" for it, as Firecracker */
	put(&f, fc_put_cpu_config, fc_test_template);
	assert_null(f.cfg.cpu_template);
	assert_non_null(f.cfg.fc_template);
	assert_machine_template(&f, "None");
	j = fc_vm_to_json(&f);
	assert_non_null(strstr(j, "\"cpu-config\":null"));
	free(j);
	/* a refused PUT /cpu-config keeps the custom one */
	assert_int_equal(fc_put_cpu_config(&f, "{\"x\": 1}", 8, err, sizeof(err)), -EINVAL);
	assert_non_null(f.cfg.fc_template);
	/* machine-config's static template replaces the custom one; "None" clears both */
	put(&f, fc_patch_machine_config, "{\"cpu_template\": \"T2\"}");
	assert_null(f.cfg.fc_template);
	assert_machine_template(&f, "T2");
	put(&f, fc_put_cpu_config, "{}");
	put(&f, fc_patch_machine_config, "{\"cpu_template\": \"None\"}");
	assert_null(f.cfg.fc_template);
	assert_null(f.cfg.cpu_template);
	assert_machine_template(&f, NULL);
	fc_vm_free(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_static_values_match_rs, teardown),
	    cmocka_unit_test_teardown(test_static_on_fixtures, teardown),
	    cmocka_unit_test_teardown(test_vendor_checks, teardown),
	    cmocka_unit_test(test_parse_accepts),
	    cmocka_unit_test(test_parse_refusals),
	    cmocka_unit_test(test_api_templates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
