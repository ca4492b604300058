/*
 * cpuid_fc.c - Firecracker's CPU templates on brisk's engine (docs/cpuid.md, "Firecracker's CPU templates"):
 * the custom template JSON of PUT /cpu-config read as Firecracker v1.7.0 reads it
 * (src/vmm/src/cpu_config/x86_64/custom_cpu_template.rs, templates.rs, templates_serde.rs), with its
 * messages; the static templates' host checks (custom_cpu_template.rs, get_cpu_template); and the
 * template applied to a CPUID table and the boot MSRs as CpuConfiguration::apply_template does
 * (x86_64/mod.rs), once per VM.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "brisk/cpuid.h"
#include "brisk/json_strict.h"
#include "cpuid_fc_internal.h"

/* Bounds brisk puts on a custom template (Firecracker has none but its 50 KiB API body). */
#define FC_MAX_LEAVES 1024 /* cpuid_modifiers items */
#define FC_MAX_REGS   4096 /* register modifiers, all leaves together */
#define FC_MAX_MSRS   1024 /* msr_modifiers items (the distinct MSRs must also fit: CPUID_MAX_MSRS) */
#define FC_MAX_CAPS   256  /* kvm_capabilities items */
#define SHOWN_MAX     64   /* characters of a bad value quoted in a message */

const struct cpuid_fc_template *cpuid_fc_static(const char *name)
{
	for (unsigned i = 0; name && cpuid_fc_statics[i]; i++)
		if (strcmp(name, cpuid_fc_statics[i]->name) == 0)
			return cpuid_fc_statics[i];
	return NULL;
}

const char *cpuid_fc_name(const struct cpuid_fc_template *t)
{
	return t ? t->name : NULL;
}

void cpuid_fc_free(struct cpuid_fc_template *t)
{
	if (!t || t->name)
		return; /* static templates are not the caller's */
	free((void *)t->leaves);
	free((void *)t->regs);
	free((void *)t->msrs);
	free((void *)t->caps);
	free(t);
}

/* ---- the parser: serde's rules and Firecracker's messages --------------------------------------------------- */

/* The text of a value for a message, printable and bounded ("0x1\n" shows as "0x1?"). */
static const char *shown(const char *s, char *buf, size_t n)
{
	size_t i = 0;

	for (; s[i] && i + 1 < n && i < SHOWN_MAX; i++)
		buf[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
	buf[i] = 0;
	return buf;
}

/* serde's Unexpected for a JSON value: "integer `5`", "string \"abc\"", "null", "a sequence"... */
static const char *unexpected(json_object *v, char *buf, size_t n)
{
	char s[SHOWN_MAX + 1];

	switch (json_object_get_type(v)) {
	case json_type_null:
		return "null";
	case json_type_boolean:
		snprintf(buf, n, "boolean `%s`", json_object_get_boolean(v) ? "true" : "false");
		break;
	case json_type_int:
		snprintf(buf, n, "integer `%s`", shown(json_object_to_json_string(v), s, sizeof(s)));
		break;
	case json_type_double:
		snprintf(buf, n, "floating point `%s`", shown(json_object_to_json_string(v), s, sizeof(s)));
		break;
	case json_type_string:
		snprintf(buf, n, "string \"%s\"", shown(json_object_get_string(v), s, sizeof(s)));
		break;
	case json_type_array:
		return "sequence";
	case json_type_object:
		return "map";
	}
	return buf;
}

static int bad_type(const struct fcj *c, const char *where, json_object *v, const char *expected)
{
	char buf[128];

	return fcj_fail(c, "%sinvalid type: %s, expected %s", where, unexpected(v, buf, sizeof(buf)), expected);
}

/* A string member (serde's String): its text, or -EINVAL. */
static int get_string(const struct fcj *c, const char *where, json_object *v, const char **out)
{
	if (!json_object_is_type(v, json_type_string))
		return bad_type(c, where, v, "a string");
	*out = json_object_get_string(v);
	if (strlen(*out) != (size_t)json_object_get_string_len(v))
		return fcj_fail(c, "%sa string with a NUL character", where);
	return 0;
}

/* Rust's ParseIntError kind, as {:?} prints it. */
static const char *parse_kind(const char *digits, int base, uint64_t max)
{
	const char *p = digits;
	uint64_t v = 0;

	if (*p == '+')
		p++; /* from_str_radix takes one leading '+' */
	if (!*p)
		return digits[0] ? "InvalidDigit" : "Empty";
	for (; *p; p++) {
		int d = isdigit((unsigned char)*p)		    ? *p - '0'
			: isxdigit((unsigned char)*p) && base == 16 ? tolower((unsigned char)*p) - 'a' + 10
								    : 99;

		if (d >= base)
			return "InvalidDigit";
		if (v > (max - (uint64_t)d) / (uint64_t)base)
			return "PosOverflow";
		v = v * (uint64_t)base + (uint64_t)d;
	}
	return NULL;
}

/* templates_serde.rs deserialize_from_str: "0x.." hex or "0b.." binary, at most `max`. */
static int get_number(const struct fcj *c, const char *where, json_object *v, uint64_t max, uint64_t *out)
{
	char s[SHOWN_MAX + 1];
	const char *str, *digits, *kind;
	int base;

	if (get_string(c, where, v, &str))
		return -EINVAL;
	if (strncmp(str, "0b", 2) == 0)
		base = 2;
	else if (strncmp(str, "0x", 2) == 0)
		base = 16;
	else
		return fcj_fail(c,
				"%sNo supported number system prefix found in value [%s]. Make sure to prefix the "
				"number with '0x' for hexadecimal numbers or '0b' for binary numbers.",
				where, shown(str, s, sizeof(s)));
	digits = str + 2;
	kind = parse_kind(digits, base, max);
	if (kind)
		return fcj_fail(
		    c, "%sFailed to parse string [%s] as a number for CPU template - ParseIntError { kind: %s }", where,
		    shown(str, s, sizeof(s)), kind);
	*out = strtoull(digits[0] == '+' ? digits + 1 : digits, NULL, base);
	return 0;
}

/* templates.rs RegisterValueFilter: "0b" optional, '_' skipped, 'x' keeps, '0'/'1' set; at most `bits` bits. */
static int get_bitmap(const struct fcj *c, const char *where, json_object *v, unsigned bits, uint64_t *filter,
		      uint64_t *value)
{
	char s[SHOWN_MAX + 1];
	const char *str, *p;
	unsigned i = 0;
	size_t n;

	if (get_string(c, where, v, &str))
		return -EINVAL;
	p = strncmp(str, "0b", 2) == 0 ? str + 2 : str;
	*filter = *value = 0;
	for (n = strlen(p); n > 0; n--) {
		char ch = p[n - 1];

		if (i == bits)
			return fcj_fail(c, "%sFailed to parse string [%s] as a bitmap - string is too long", where,
					shown(str, s, sizeof(s)));
		if (ch == '_')
			continue;
		if (ch != 'x' && ch != '0' && ch != '1')
			return fcj_fail(c, "%sFailed to parse string [%s] as a bitmap - unknown character: %u", where,
					shown(str, s, sizeof(s)), (unsigned)(unsigned char)ch);
		if (ch != 'x')
			*filter |= 1ull << i;
		if (ch == '1')
			*value |= 1ull << i;
		i++;
	}
	return 0;
}

/* A required member of a struct (serde: "missing field `leaf`"). */
static int member(const struct fcj *c, const char *where, json_object *o, const char *key, json_object **out)
{
	if (!json_object_object_get_ex(o, key, out))
		return fcj_fail(c, "%smissing field `%s`", where, key);
	return 0;
}

/* An array member that may be absent (#[serde(default)]): its length, or -EINVAL. */
static int get_array(const struct fcj *c, const char *where, json_object *o, const char *key, size_t max,
		     json_object **out)
{
	size_t n;

	*out = NULL;
	if (!json_object_object_get_ex(o, key, out))
		return 0;
	if (!json_object_is_type(*out, json_type_array))
		return bad_type(c, where, *out, "a sequence");
	n = json_object_array_length(*out);
	if (n > max)
		return fcj_fail(c, "%s%s: %zu items, more than the %zu brisk accepts", where, key, n, max);
	return (int)n;
}

static int get_object(const struct fcj *c, const char *where, json_object *v, const char *type)
{
	char expected[64];

	if (json_object_is_type(v, json_type_object))
		return 0;
	snprintf(expected, sizeof(expected), "struct %s", type);
	return bad_type(c, where, v, expected);
}

/* serde's u32 from a JSON number (flags). */
static int get_u32(const struct fcj *c, const char *where, json_object *v, uint32_t *out)
{
	char s[SHOWN_MAX + 1];
	int64_t n;

	if (!json_object_is_type(v, json_type_int))
		return bad_type(c, where, v, "u32");
	errno = 0;
	n = json_object_get_int64(v);
	if (n < 0 || n > UINT32_MAX || (n == INT64_MAX && json_object_get_uint64(v) > UINT32_MAX))
		return fcj_fail(c, "%sinvalid value: integer `%s`, expected u32", where,
				shown(json_object_to_json_string(v), s, sizeof(s)));
	*out = (uint32_t)n;
	return 0;
}

/* What the parser fills. */
struct fc_build {
	struct cpuid_fc_leaf *leaves;
	struct cpuid_fc_reg *regs;
	struct cpuid_fc_msr *msrs;
	struct cpuid_fc_cap *caps;
	unsigned nr_leaves, nr_regs, nr_msrs, nr_caps;
};

static int parse_register(const struct fcj *c, const char *where, json_object *o, struct cpuid_fc_reg *r)
{
	static const char *const names[] = {"eax", "ebx", "ecx", "edx"};
	json_object *v;
	const char *name;
	uint64_t f, val;

	if (get_object(c, where, o, "CpuidRegisterModifier") || member(c, where, o, "register", &v) ||
	    get_string(c, where, v, &name))
		return -EINVAL;
	for (r->reg = 0; r->reg < 4 && strcmp(name, names[r->reg]) != 0; r->reg++)
		;
	if (r->reg == 4)
		return fcj_fail(c, "%sInvalid CPUID register. Must be one of [eax, ebx, ecx, edx]", where);
	if (member(c, where, o, "bitmap", &v) || get_bitmap(c, where, v, 32, &f, &val))
		return -EINVAL;
	r->filter = (uint32_t)f;
	r->value = (uint32_t)val;
	return 0;
}

static int parse_leaf(const struct fcj *c, size_t i, json_object *o, struct fc_build *b)
{
	char where[96];
	struct cpuid_fc_leaf *l = &b->leaves[b->nr_leaves];
	json_object *v, *mods;
	uint64_t n;
	int count;

	snprintf(where, sizeof(where), "cpuid_modifiers[%zu]: ", i);
	if (get_object(c, where, o, "CpuidLeafModifier") || member(c, where, o, "leaf", &v) ||
	    get_number(c, where, v, UINT32_MAX, &n))
		return -EINVAL;
	l->leaf = (uint32_t)n;
	if (member(c, where, o, "subleaf", &v) || get_number(c, where, v, UINT32_MAX, &n))
		return -EINVAL;
	l->subleaf = (uint32_t)n;
	if (member(c, where, o, "flags", &v) || get_u32(c, where, v, &l->flags) ||
	    member(c, where, o, "modifiers", &mods))
		return -EINVAL;
	if (!json_object_is_type(mods, json_type_array))
		return bad_type(c, where, mods, "a sequence");
	count = (int)json_object_array_length(mods);
	if (b->nr_regs + (unsigned)count > FC_MAX_REGS)
		return fcj_fail(c, "%smore than the %u register modifiers brisk accepts in one template", where,
				FC_MAX_REGS);
	l->first = b->nr_regs;
	l->count = (unsigned)count;
	for (int j = 0; j < count; j++) {
		snprintf(where, sizeof(where), "cpuid_modifiers[%zu].modifiers[%d]: ", i, j);
		if (parse_register(c, where, json_object_array_get_idx(mods, (size_t)j), &b->regs[b->nr_regs]))
			return -EINVAL;
		b->nr_regs++;
	}
	b->nr_leaves++;
	return 0;
}

static int parse_msr(const struct fcj *c, size_t i, json_object *o, struct cpuid_fc_msr *m)
{
	char where[64];
	json_object *v;
	uint64_t n;

	snprintf(where, sizeof(where), "msr_modifiers[%zu]: ", i);
	if (get_object(c, where, o, "RegisterModifier") || member(c, where, o, "addr", &v) ||
	    get_number(c, where, v, UINT32_MAX, &n) || member(c, where, o, "bitmap", &v) ||
	    get_bitmap(c, where, v, 64, &m->filter, &m->value))
		return -EINVAL;
	m->addr = (uint32_t)n;
	return 0;
}

/* templates.rs KvmCapability: "N" or "!N", N a decimal u32 (Rust's parse::<u32>, whose error texts these are). */
static int parse_cap(const struct fcj *c, size_t i, json_object *v, struct cpuid_fc_cap *cap)
{
	char where[64], s[SHOWN_MAX + 1];
	const char *str, *digits, *kind;

	snprintf(where, sizeof(where), "kvm_capabilities[%zu]: ", i);
	if (get_string(c, where, v, &str))
		return -EINVAL;
	cap->remove = str[0] == '!';
	digits = cap->remove ? str + 1 : str;
	kind = parse_kind(digits, 10, UINT32_MAX);
	if (kind)
		return fcj_fail(c, "%sFailed to parse string [%s] as a kvm capability - can not convert to numeric: %s",
				where, shown(str, s, sizeof(s)),
				strcmp(kind, "Empty") == 0	   ? "cannot parse integer from empty string"
				: strcmp(kind, "PosOverflow") == 0 ? "number too large to fit in target type"
								   : "invalid digit found in string");
	cap->cap = (uint32_t)strtoul(digits[0] == '+' ? digits + 1 : digits, NULL, 10);
	return 0;
}

/* CustomCpuTemplate is #[serde(deny_unknown_fields)]; its nested structs ignore unknown fields. */
static int root_keys(const struct fcj *c, json_object *root)
{
	char s[SHOWN_MAX + 1];

	json_object_object_foreach(root, key, val)
	{
		(void)val;
		if (strcmp(key, "kvm_capabilities") != 0 && strcmp(key, "cpuid_modifiers") != 0 &&
		    strcmp(key, "msr_modifiers") != 0)
			return fcj_fail(c,
					"unknown field `%s`, expected one of `kvm_capabilities`, `cpuid_modifiers`, "
					"`msr_modifiers`",
					shown(key, s, sizeof(s)));
	}
	return 0;
}

static int parse_root(const struct fcj *c, json_object *root, struct fc_build *b)
{
	json_object *caps, *leaves, *msrs;
	int nc, nl, nm;

	if (root_keys(c, root) || (nc = get_array(c, "", root, "kvm_capabilities", FC_MAX_CAPS, &caps)) < 0 ||
	    (nl = get_array(c, "", root, "cpuid_modifiers", FC_MAX_LEAVES, &leaves)) < 0 ||
	    (nm = get_array(c, "", root, "msr_modifiers", FC_MAX_MSRS, &msrs)) < 0)
		return -EINVAL;
	b->caps = calloc((size_t)nc + 1, sizeof(*b->caps));
	b->leaves = calloc((size_t)nl + 1, sizeof(*b->leaves));
	b->regs = calloc(FC_MAX_REGS, sizeof(*b->regs));
	b->msrs = calloc((size_t)nm + 1, sizeof(*b->msrs));
	if (!b->caps || !b->leaves || !b->regs || !b->msrs)
		return -ENOMEM;
	for (int i = 0; i < nc; i++, b->nr_caps++)
		if (parse_cap(c, (size_t)i, json_object_array_get_idx(caps, (size_t)i), &b->caps[i]))
			return -EINVAL;
	for (int i = 0; i < nl; i++)
		if (parse_leaf(c, (size_t)i, json_object_array_get_idx(leaves, (size_t)i), b))
			return -EINVAL;
	for (int i = 0; i < nm; i++, b->nr_msrs++)
		if (parse_msr(c, (size_t)i, json_object_array_get_idx(msrs, (size_t)i), &b->msrs[i]))
			return -EINVAL;
	return 0;
}

int cpuid_fc_parse(const char *what, const char *text, size_t len, struct cpuid_fc_template **out, char *err,
		   size_t errlen)
{
	const struct fcj c = {what, err, errlen};
	struct fc_build b = {0};
	struct cpuid_fc_template *t = NULL;
	json_object *root = NULL;
	int ret = fcj_parse(&c, text, len, &root);

	*out = NULL;
	if (!ret)
		ret = parse_root(&c, root, &b);
	json_object_put(root);
	if (!ret && !(t = calloc(1, sizeof(*t))))
		ret = -ENOMEM;
	if (ret) {
		if (ret == -ENOMEM)
			snprintf(err, errlen, "%s: out of memory", what);
		free(b.leaves);
		free(b.regs);
		free(b.msrs);
		free(b.caps);
		return ret;
	}
	*t = (struct cpuid_fc_template){.nr_leaves = b.nr_leaves,
					.nr_regs = b.nr_regs,
					.nr_msrs = b.nr_msrs,
					.nr_caps = b.nr_caps,
					.leaves = b.leaves,
					.regs = b.regs,
					.msrs = b.msrs,
					.caps = b.caps};
	*out = t;
	return 0;
}

/* ---- applying it ------------------------------------------------------------------------------------------------- */

/* CpuModel::is_at_least_cascade_lake: (ext family, ext model, family, model, stepping) >= (0, 5, 6, 5, 7). */
static bool at_least_cascade_lake(const struct kvm_cpuid2 *t)
{
	const struct kvm_cpuid_entry2 *e = cpuid_find(t, 1, 0);
	uint32_t a = e ? e->eax : 0;
	uint32_t have[5] = {(a >> 20) & 0xff, (a >> 16) & 0xf, (a >> 8) & 0xf, (a >> 4) & 0xf, a & 0xf};
	static const uint32_t want[5] = {0, 5, 6, 5, 7};

	for (unsigned i = 0; i < 5; i++)
		if (have[i] != want[i])
			return have[i] > want[i];
	return true;
}

/* custom_cpu_template.rs get_cpu_template: a static template only on the vendor (and model) it was made for. */
static int check_host(const struct cpuid_fc_template *t, const struct kvm_cpuid2 *sup, char *err, size_t errlen)
{
	if (!t->name)
		return 0;
	if (cpuid_vendor(sup) != t->vendor) {
		snprintf(err, errlen,
			 "Failed to get CPU template: CPU vendor mismatched between actual CPU and CPU template.");
		return -EINVAL;
	}
	if (t->cascade_lake && !at_least_cascade_lake(sup)) {
		snprintf(
		    err, errlen,
		    "Failed to get CPU template: The current CPU model is not permitted to apply the CPU template.");
		return -EINVAL;
	}
	return 0;
}

/* Firecracker's CpuidKey: exactly (leaf, subleaf); KVM reports index 0 for leaves without subleaves. */
static struct kvm_cpuid_entry2 *find_exact(struct kvm_cpuid2 *t, uint32_t leaf, uint32_t subleaf)
{
	for (unsigned i = 0; i < t->nent; i++)
		if (t->entries[i].function == leaf && t->entries[i].index == subleaf)
			return &t->entries[i];
	return NULL;
}

/* Where an MSR starts: brisk's boot value, else KVM's (vm->msr_base, as Firecracker reads vCPU 0's), else 0. */
static uint64_t msr_value(const struct cpuid_vm *vm, uint32_t addr)
{
	for (unsigned i = 0; i < vm->nr_msrs; i++)
		if (vm->msrs[i].index == addr)
			return vm->msrs[i].value;
	for (unsigned i = 0; vm->msr_base && i < vm->nr_msr_base; i++)
		if (vm->msr_base[i].index == addr)
			return vm->msr_base[i].value;
	return 0;
}

static int apply_msrs(const struct cpuid_fc_template *t, const struct cpuid_kvm *k, struct cpuid_vm *vm, char *err,
		      size_t errlen)
{
	for (unsigned i = 0; i < t->nr_msrs; i++) {
		const struct cpuid_fc_msr *m = &t->msrs[i];

		if (!cpuid_kvm_has_msr(k, m->addr)) {
			snprintf(err, errlen,
				 "Failed to create guest config: Template changes an MSR entry not supported by KVM: "
				 "Register Address: %x",
				 m->addr);
			return -EINVAL;
		}
		if (cpuid_msr_set(vm, m->addr, (msr_value(vm, m->addr) & ~m->filter) | (m->value & m->filter))) {
			snprintf(err, errlen,
				 "Failed to create guest config: msr_modifiers: MSR 0x%x does not fit: at most %u MSRs "
				 "with brisk's boot MSRs",
				 m->addr, CPUID_MAX_MSRS);
			return -EINVAL;
		}
	}
	return 0;
}

int cpuid_fc_apply(const struct cpuid_fc_template *t, const struct cpuid_kvm *k, struct kvm_cpuid2 *tab,
		   struct cpuid_vm *vm, char *err, size_t errlen)
{
	if (check_host(t, k->supported, err, errlen))
		return -EINVAL;
	for (unsigned i = 0; i < t->nr_leaves; i++) {
		const struct cpuid_fc_leaf *l = &t->leaves[i];
		struct kvm_cpuid_entry2 *e = find_exact(tab, l->leaf, l->subleaf);

		if (!e) {
			snprintf(err, errlen,
				 "Failed to create guest config: Template changes a CPUID entry not supported by KVM: "
				 "Leaf: %x, Subleaf: %x",
				 l->leaf, l->subleaf);
			return -EINVAL;
		}
		e->flags = l->flags;
		for (unsigned j = l->first; j < l->first + l->count; j++) {
			uint32_t *r = cpuid_reg(e, t->regs[j].reg);

			*r = (*r & ~t->regs[j].filter) | (t->regs[j].value & t->regs[j].filter);
		}
	}
	return apply_msrs(t, k, vm, err, errlen);
}

unsigned cpuid_fc_read_base(const struct cpuid_fc_template *t, int kvm_fd, struct cpuid_msr *out, unsigned max)
{
	struct {
		struct kvm_msrs h;
		struct kvm_msr_entry e;
	} one;
	unsigned n = 0;

	for (unsigned i = 0; t && i < t->nr_msrs && n < max; i++) {
		if (t->msrs[i].filter == UINT64_MAX)
			continue; /* every bit given: the starting value does not matter */
		memset(&one, 0, sizeof(one));
		one.h.nmsrs = 1;
		one.e.index = t->msrs[i].addr;
		if (cpuid_ioctl(kvm_fd, KVM_GET_MSRS, "KVM_GET_MSRS", &one) == 1)
			out[n++] = (struct cpuid_msr){.index = t->msrs[i].addr, .value = one.e.data};
	}
	return n;
}

int cpuid_fc_check_caps(const struct cpuid_fc_template *t, int kvm_fd, char *err, size_t errlen)
{
	for (unsigned i = 0; t && i < t->nr_caps; i++) {
		if (t->caps[i].remove)
			continue; /* brisk's own requirements are not Firecracker's list: nothing to remove from */
		if (cpuid_ioctl(kvm_fd, KVM_CHECK_EXTENSION, "KVM_CHECK_EXTENSION",
				(void *)(uintptr_t)t->caps[i].cap) <= 0) {
			snprintf(err, errlen, "Missing KVM capabilities: %x", t->caps[i].cap);
			return -EINVAL;
		}
	}
	return 0;
}

/* ---- the template as text again (snapshots) ------------------------------------------------------------------- */

/* Firecracker's serialize_to_hex_str: "0x1f". */
static json_object *hex_string(uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	return json_object_new_string(buf);
}

/* RegisterValueFilter's Serialize: "0b" and `bits` characters, x where the filter has no bit. */
static json_object *bitmap_string(uint64_t filter, uint64_t value, unsigned bits)
{
	char buf[2 + 64 + 1] = "0b";

	for (unsigned i = 0; i < bits; i++) {
		uint64_t m = 1ull << (bits - 1 - i);

		buf[2 + i] = !(filter & m) ? 'x' : (value & m) ? '1' : '0';
	}
	buf[2 + bits] = 0;
	return json_object_new_string(buf);
}

static json_object *leaf_json(const struct cpuid_fc_template *t, const struct cpuid_fc_leaf *l)
{
	static const char *const names[] = {"eax", "ebx", "ecx", "edx"};
	json_object *o = json_object_new_object(), *mods = json_object_new_array();

	json_object_object_add(o, "leaf", hex_string(l->leaf));
	json_object_object_add(o, "subleaf", hex_string(l->subleaf));
	json_object_object_add(o, "flags", json_object_new_int64(l->flags));
	for (unsigned j = l->first; j < l->first + l->count; j++) {
		json_object *r = json_object_new_object();

		json_object_object_add(r, "register", json_object_new_string(names[t->regs[j].reg & 3]));
		json_object_object_add(r, "bitmap", bitmap_string(t->regs[j].filter, t->regs[j].value, 32));
		json_object_array_add(mods, r);
	}
	json_object_object_add(o, "modifiers", mods);
	return o;
}

char *cpuid_fc_to_json(const struct cpuid_fc_template *t)
{
	json_object *root = json_object_new_object(), *caps = json_object_new_array(),
		    *leaves = json_object_new_array(), *msrs = json_object_new_array();
	char *text;

	for (unsigned i = 0; i < t->nr_caps; i++) {
		char buf[16];

		snprintf(buf, sizeof(buf), "%s%u", t->caps[i].remove ? "!" : "", t->caps[i].cap);
		json_object_array_add(caps, json_object_new_string(buf));
	}
	for (unsigned i = 0; i < t->nr_leaves; i++)
		json_object_array_add(leaves, leaf_json(t, &t->leaves[i]));
	for (unsigned i = 0; i < t->nr_msrs; i++) {
		json_object *m = json_object_new_object();

		json_object_object_add(m, "addr", hex_string(t->msrs[i].addr));
		json_object_object_add(m, "bitmap", bitmap_string(t->msrs[i].filter, t->msrs[i].value, 64));
		json_object_array_add(msrs, m);
	}
	json_object_object_add(root, "kvm_capabilities", caps);
	json_object_object_add(root, "cpuid_modifiers", leaves);
	json_object_object_add(root, "msr_modifiers", msrs);
	text = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
	json_object_put(root);
	return text;
}

int cpuid_fc_dup(const struct cpuid_fc_template *t, struct cpuid_fc_template **out)
{
	char err[256];
	char *text;
	int ret;

	*out = NULL;
	if (!t || t->name) {
		*out = (struct cpuid_fc_template *)t; /* NULL or static: nothing to own */
		return 0;
	}
	text = cpuid_fc_to_json(t);
	if (!text)
		return -ENOMEM;
	ret = cpuid_fc_parse("cpu-config", text, strlen(text), out, err, sizeof(err));
	free(text);
	return ret;
}
