/* cpuid.c - `brisk cpuid`: the CPUID table a vCPU would see, without booting; raw KVM/host dumps; the diff from the
 * host. */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/cli.h"
#include "brisk/config.h"
#include "brisk/cpuid.h"
#include "brisk/exitcode.h"
#include "brisk/kvm.h"
#include "brisk/log.h"
#include "brisk/opts.h"

enum { OPT_TOPOLOGY = 256, OPT_VCPU, OPT_TEMPLATE, OPT_JSON, OPT_DIFF, OPT_SUPPORTED, OPT_FROM, OPT_HOST };

static const struct option options[] = {
    {"cpus", required_argument, NULL, 'p'},
    {"topology", required_argument, NULL, OPT_TOPOLOGY},
    {"vcpu", required_argument, NULL, OPT_VCPU},
    {"cpu-template", required_argument, NULL, OPT_TEMPLATE},
    {"json", no_argument, NULL, OPT_JSON},
    {"diff-host", no_argument, NULL, OPT_DIFF},
    {"supported", no_argument, NULL, OPT_SUPPORTED},
    {"supported-from", required_argument, NULL, OPT_FROM},
    {"host", no_argument, NULL, OPT_HOST},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct cpuid_opts {
	struct vm_config cfg; /* cpus, topology, cpu_template */
	unsigned vcpu;
	bool json, diff, supported, host;
	const char *from;
};

static int bad_value(const char *opt, const char *value, const char *expected)
{
	fprintf(stderr, "brisk cpuid: invalid %s '%s': expected %s\n", opt, value, expected);
	return EXIT_USAGE;
}

/* One option; 0, EXIT_USAGE, or -1 for --help. */
static int apply_option(int c, const char *arg, struct cpuid_opts *o)
{
	unsigned long n;

	switch (c) {
	case 'p':
		if (config_parse_uint(arg, 1, CONFIG_MAX_CPUS, &n))
			return bad_value("--cpus", arg, "a number of vCPUs from 1 to 254");
		o->cfg.cpus = (unsigned)n;
		return 0;
	case OPT_TOPOLOGY:
		return config_parse_topology(arg, &o->cfg) ? bad_value("--topology", arg, "sockets=S,cores=C,threads=T")
							   : 0;
	case OPT_VCPU:
		if (config_parse_uint(arg, 0, CONFIG_MAX_CPUS - 1, &n))
			return bad_value("--vcpu", arg, "a vCPU index from 0 to --cpus - 1");
		o->vcpu = (unsigned)n;
		return 0;
	case OPT_TEMPLATE:
		o->cfg.cpu_template = arg;
		return 0;
	case OPT_JSON:
		o->json = true;
		return 0;
	case OPT_DIFF:
		o->diff = true;
		return 0;
	case OPT_SUPPORTED:
		o->supported = true;
		return 0;
	case OPT_FROM:
		o->from = arg;
		return 0;
	case OPT_HOST:
		o->host = true;
		return 0;
	case 'h':
		return -1;
	default:
		fprintf(stderr, "Try 'brisk help cpuid'.\n");
		return EXIT_USAGE;
	}
}

static int parse_args(int argc, char **argv, struct cpuid_opts *o)
{
	char err[512];
	int c, ret;

	memset(o, 0, sizeof(*o));
	config_defaults(&o->cfg);
	if (opts_check_exact(argc - 1, argv + 1, "p:h", options, err, sizeof(err))) {
		fprintf(stderr, "brisk cpuid: %s; try 'brisk help cpuid'\n", err);
		return EXIT_USAGE;
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, "p:h", options, NULL)) != -1) {
		ret = apply_option(c, optarg, o);
		if (ret < 0) {
			cli_usage(stdout, "cpuid");
			return -1;
		}
		if (ret)
			return ret;
	}
	if (optind < argc) {
		fprintf(stderr, "brisk cpuid: unexpected argument '%s'; try 'brisk help cpuid'\n", argv[optind]);
		return EXIT_USAGE;
	}
	if (config_validate(&o->cfg, CONFIG_MAX_CPUS, 0, err, sizeof(err))) {
		fprintf(stderr, "brisk cpuid: %s\n", err);
		return EXIT_USAGE;
	}
	if (o->vcpu >= o->cfg.cpus) {
		fprintf(stderr, "brisk cpuid: --vcpu %u is out of range: --cpus is %u (vCPUs 0..%u)\n", o->vcpu,
			o->cfg.cpus, o->cfg.cpus - 1);
		return EXIT_USAGE;
	}
	return 0;
}

/* KVM's facts: from a dump (--supported-from), else from /dev/kvm. */
static const struct cpuid_kvm *get_kvm(const struct cpuid_opts *o, struct kvm *kvm, int *status)
{
	char err[512];
	const struct cpuid_kvm *k;

	if (o->from) {
		if (cpuid_kvm_load(o->from, err, sizeof(err))) {
			fprintf(stderr, "brisk cpuid: %s\n", err);
			*status = EXIT_USAGE;
			return NULL;
		}
		return cpuid_kvm_get(-1);
	}
	if (kvm_open(kvm, "/dev/kvm")) {
		fprintf(stderr, "brisk cpuid: KVM_GET_SUPPORTED_CPUID needs /dev/kvm; on a host without it, "
				"pass --supported-from FILE (a recorded 'brisk cpuid --supported' dump)\n");
		*status = EXIT_HOST;
		return NULL;
	}
	k = cpuid_kvm_get(kvm->fd);
	if (!k)
		*status = EXIT_HOST;
	return k;
}

static const char *vendor_name(enum cpuid_vendor v)
{
	return v == CPUID_VENDOR_INTEL ? "Intel" : v == CPUID_VENDOR_AMD ? "AMD" : "other";
}

static json_object *hex(uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)v);
	return json_object_new_string(buf);
}

static json_object *entries_json(const struct kvm_cpuid2 *t)
{
	json_object *a = json_object_new_array();

	for (unsigned i = 0; i < t->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &t->entries[i];
		json_object *o = json_object_new_object();

		json_object_object_add(o, "leaf", hex(e->function));
		json_object_object_add(o, "subleaf", json_object_new_int64(e->index));
		json_object_object_add(o, "flags", json_object_new_int64(e->flags));
		json_object_object_add(o, "eax", hex(e->eax));
		json_object_object_add(o, "ebx", hex(e->ebx));
		json_object_object_add(o, "ecx", hex(e->ecx));
		json_object_object_add(o, "edx", hex(e->edx));
		json_object_array_add(a, o);
	}
	return a;
}

static void print_json(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
	json_object_put(o);
}

static void print_table_text(const struct kvm_cpuid2 *t)
{
	printf("%-10s %-4s %-10s %-10s %-10s %-10s\n", "leaf", "sub", "eax", "ebx", "ecx", "edx");
	for (unsigned i = 0; i < t->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &t->entries[i];

		printf("0x%08x %-4u 0x%08x 0x%08x 0x%08x 0x%08x\n", e->function, e->index, e->eax, e->ebx, e->ecx,
		       e->edx);
	}
}

/* --supported: KVM's raw facts, as a dump (the --supported-from format) or JSON. */
static int show_supported(const struct cpuid_kvm *k, bool json)
{
	json_object *o, *msrs;

	if (!json) {
		cpuid_dump_write(stdout, k);
		return 0;
	}
	o = json_object_new_object();
	msrs = json_object_new_array();
	for (unsigned i = 0; i < k->nr_msrs; i++)
		json_object_array_add(msrs, hex(k->msrs[i]));
	json_object_object_add(o, "tsc_deadline", json_object_new_boolean(k->tsc_deadline));
	json_object_object_add(o, "cpuid", entries_json(k->supported));
	json_object_object_add(o, "msrs", msrs);
	print_json(o);
	return 0;
}

/* --host: the host's own CPUID (CPL 3), enumerated the way KVM lists leaves: the fixture recorder. */
static int show_host(bool json)
{
	struct kvm_cpuid2 *t = cpuid_host_enumerate();
	struct cpuid_kvm k = {0};

	if (!t) {
		fprintf(stderr, "brisk cpuid: out of memory\n");
		return EXIT_HOST;
	}
	k.supported = t;
	if (json) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, "cpuid", entries_json(t));
		print_json(o);
	} else {
		printf("# the host's own CPUID instruction at CPL 3 (not KVM's table)\n");
		cpuid_dump_write(stdout, &k);
	}
	free(t);
	return 0;
}

static void print_guest(const struct cpuid_opts *o, const struct cpuid_vm *vm, const struct kvm_cpuid2 *t)
{
	const struct cpuid_topology *tp = &vm->topo;
	const char *tmpl = o->cfg.cpu_template ? o->cfg.cpu_template : "host";

	if (o->json) {
		json_object *j = json_object_new_object(), *topo = json_object_new_object(), *msrs;

		json_object_object_add(j, "vcpu", json_object_new_int64(o->vcpu));
		json_object_object_add(j, "cpus", json_object_new_int64(o->cfg.cpus));
		json_object_object_add(j, "apic_id", json_object_new_int64(cpuid_apic_id(tp, o->vcpu)));
		json_object_object_add(topo, "sockets", json_object_new_int64(tp->sockets));
		json_object_object_add(topo, "cores", json_object_new_int64(tp->cores));
		json_object_object_add(topo, "threads", json_object_new_int64(tp->threads));
		json_object_object_add(j, "topology", topo);
		json_object_object_add(j, "template", json_object_new_string(tmpl));
		json_object_object_add(j, "vendor", json_object_new_string(vendor_name(vm->vendor)));
		json_object_object_add(j, "cpuid", entries_json(t));
		msrs = json_object_new_array();
		for (unsigned i = 0; i < vm->nr_msrs; i++) {
			json_object *m = json_object_new_object();

			json_object_object_add(m, "index", hex(vm->msrs[i].index));
			json_object_object_add(m, "value", hex(vm->msrs[i].value));
			json_object_array_add(msrs, m);
		}
		json_object_object_add(j, "msrs", msrs);
		print_json(j);
		return;
	}
	printf("# vCPU %u of %u: APIC ID %u, sockets=%u cores=%u threads=%u, template %s, vendor %s\n", o->vcpu,
	       o->cfg.cpus, cpuid_apic_id(tp, o->vcpu), tp->sockets, tp->cores, tp->threads, tmpl,
	       vendor_name(vm->vendor));
	print_table_text(t);
	printf("\n%-10s %s\n", "msr", "value");
	for (unsigned i = 0; i < vm->nr_msrs; i++)
		printf("0x%08x 0x%016llx\n", vm->msrs[i].index, (unsigned long long)vm->msrs[i].value);
}

/* ---- --diff-host ----------------------------------------------------------------------------- */

/* The stages a register passes through, from the host's CPUID to vCPU K's table. */
enum stage { ST_HOST, ST_KVM, ST_BRISK, ST_TEMPLATE, ST_VCPU, ST__COUNT };
static const char *const stage_why[ST__COUNT] = {
    [ST_KVM] = "as KVM reports",
    [ST_BRISK] = "set/hidden by brisk",
    [ST_TEMPLATE] = "masked by template",
    [ST_VCPU] = "patched per vCPU",
};

static uint32_t reg_of(const struct kvm_cpuid2 *t, uint32_t leaf, uint32_t sub, unsigned r)
{
	const struct kvm_cpuid_entry2 *e = cpuid_find(t, leaf, sub);

	if (!e)
		return 0;
	return r == 0 ? e->eax : r == 1 ? e->ebx : r == 2 ? e->ecx : e->edx;
}

/* Prints one differing register: each changed bit is blamed on the last stage that changed it. */
static void diff_reg(const struct kvm_cpuid2 *const st[ST__COUNT], const struct kvm_cpuid_entry2 *e, unsigned r)
{
	static const char *const names[4] = {"eax", "ebx", "ecx", "edx"};
	uint32_t v[ST__COUNT], left;

	for (int s = 0; s < ST__COUNT; s++)
		v[s] = reg_of(st[s], e->function, e->index, r);
	left = v[ST_HOST] ^ v[ST_VCPU];
	if (!left)
		return;
	printf("0x%08x %-4u %s  host 0x%08x  guest 0x%08x :", e->function, e->index, names[r], v[ST_HOST], v[ST_VCPU]);
	for (int s = ST_VCPU; s > ST_HOST && left; s--) {
		uint32_t bits = (v[s] ^ v[s - 1]) & left, gone = bits & v[ST_HOST] & ~v[ST_KVM];

		left &= ~bits;
		if (s == ST_KVM && cpuid_is_feature_register(e->function, e->index, r)) {
			/* Feature bits the host has and KVM's table lacks: KVM cannot offer them. */
			bits &= ~gone;
			if (gone)
				printf(" not supported by KVM [0x%08x]", gone);
		}
		if (bits)
			printf(" %s [0x%08x]", stage_why[s], bits);
	}
	if (left) /* changed and changed back along the way */
		printf(" several stages [0x%08x]", left);
	putchar('\n');
}

static int show_diff(const struct cpuid_opts *o, const struct cpuid_kvm *k, const struct cpuid_vm *vm,
		     const struct kvm_cpuid2 *vcpu)
{
	struct cpuid_params hp = {.cpus = o->cfg.cpus,
				  .sockets = o->cfg.topology.sockets,
				  .cores = o->cfg.topology.cores,
				  .threads = o->cfg.topology.threads};
	struct cpuid_vm plain;
	char err[512];
	struct kvm_cpuid2 *host = cpuid_host_table(vcpu);
	int ret = EXIT_HOST;

	if (host && cpuid_vm_init(&plain, k, &hp, err, sizeof(err)) == 0) {
		const struct kvm_cpuid2 *st[ST__COUNT] = {host, k->supported, plain.tmpl, vm->tmpl, vcpu};

		printf("# vCPU %u's CPUID vs this host's own CPUID instruction (at CPL 3)\n", o->vcpu);
		printf("# leaf      sub  reg  host / guest : why [bits]\n");
		for (unsigned i = 0; i < vcpu->nent; i++)
			for (unsigned r = 0; r < 4; r++)
				diff_reg(st, &vcpu->entries[i], r);
		cpuid_vm_destroy(&plain);
		ret = 0;
	}
	free(host);
	return ret;
}

/* ---- the command ---------------------------------------------------------------------------------- */

static int show_guest(const struct cpuid_opts *o, const struct cpuid_kvm *k)
{
	struct cpuid_params p = {
	    .cpus = o->cfg.cpus,
	    .sockets = o->cfg.topology.sockets,
	    .cores = o->cfg.topology.cores,
	    .threads = o->cfg.topology.threads,
	    .cpu_template = o->cfg.cpu_template,
	};
	struct cpuid_vm vm;
	struct kvm_cpuid2 *t;
	char err[512];
	int ret = cpuid_vm_init(&vm, k, &p, err, sizeof(err));

	if (ret) {
		fprintf(stderr, "brisk cpuid: %s\n", err);
		return ret == -EINVAL ? EXIT_USAGE : EXIT_HOST;
	}
	t = cpuid_table_alloc(vm.tmpl->nent);
	if (!t) {
		cpuid_vm_destroy(&vm);
		return EXIT_HOST;
	}
	cpuid_vcpu_table(&vm, o->vcpu, t);
	ret = o->diff ? show_diff(o, k, &vm, t) : (print_guest(o, &vm, t), 0);
	free(t);
	cpuid_vm_destroy(&vm);
	return ret;
}

int cmd_cpuid(int argc, char **argv)
{
	struct cpuid_opts o;
	struct kvm kvm = {.fd = -1};
	const struct cpuid_kvm *k;
	int ret = parse_args(argc, argv, &o);

	if (ret)
		return ret < 0 ? 0 : ret;
	if (o.host)
		return show_host(o.json);
	k = get_kvm(&o, &kvm, &ret);
	if (k)
		ret = o.supported ? show_supported(k, o.json) : show_guest(&o, k);
	cpuid_kvm_reset();
	if (kvm.fd >= 0)
		kvm_close(&kvm);
	return ret;
}
