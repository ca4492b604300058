/* cpuid_json.c - JSON CPU templates (json-c): per leaf/subleaf/register a mask and value, and MSR values, validated. */
#include <errno.h>
#include <json-c/json.h>
#include <linux/kvm.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/cpuid.h"
#include "cpuid_internal.h"

/* A template is a few KiB; refuse anything absurd before parsing it. */
#define TEMPLATE_MAX_BYTES (1u << 20)
#define TEMPLATE_MAX_ITEMS 1024

struct jctx {
	const char *path;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 2, 3))) static int fail(const struct jctx *c, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(c->err, c->errlen, "--cpu-template %s: %s", c->path, msg);
	return -EINVAL;
}

static char *read_file(const struct jctx *c, int *ret)
{
	FILE *f = fopen(c->path, "re");
	char *buf;
	size_t n;

	if (!f) {
		*ret = fail(c, "%s", strerror(errno));
		return NULL;
	}
	buf = malloc(TEMPLATE_MAX_BYTES + 1);
	n = buf ? fread(buf, 1, TEMPLATE_MAX_BYTES + 1, f) : 0;
	fclose(f);
	if (!buf || n > TEMPLATE_MAX_BYTES) {
		free(buf);
		*ret = buf ? fail(c, "larger than %u bytes", TEMPLATE_MAX_BYTES) : -ENOMEM;
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/* The parsed document, or NULL with json-c's own error text and the byte offset. */
static json_object *parse(const struct jctx *c, int *ret)
{
	char *text = read_file(c, ret);
	json_tokener *tok;
	json_object *root = NULL;

	if (!text)
		return NULL;
	tok = json_tokener_new();
	if (tok) {
		size_t len = strlen(text);

		root = json_tokener_parse_ex(tok, text, (int)len);
		if (!root || json_tokener_get_error(tok) != json_tokener_success) {
			enum json_tokener_error je = json_tokener_get_error(tok);

			*ret = fail(c, "bad JSON at byte %zu: %s", json_tokener_get_parse_end(tok),
				    json_tokener_error_desc(je == json_tokener_success ? json_tokener_continue : je));
			json_object_put(root);
			root = NULL;
		} else if (json_tokener_get_parse_end(tok) + strspn(text + json_tokener_get_parse_end(tok), " \t\r\n") <
			   len) {
			*ret = fail(c, "bad JSON at byte %zu: trailing data after the top-level value",
				    json_tokener_get_parse_end(tok));
			json_object_put(root);
			root = NULL;
		}
		json_tokener_free(tok);
	} else {
		*ret = -ENOMEM;
	}
	free(text);
	return root;
}

/* A number given as a JSON integer or a string ("0x1f", "31"), at most `max`. */
static int get_u64(const struct jctx *c, json_object *o, const char *what, uint64_t max, uint64_t *out)
{
	const char *s;
	char *end;

	if (json_object_is_type(o, json_type_int)) {
		int64_t v = json_object_get_int64(o);

		if (v < 0 || (uint64_t)v > max)
			return fail(c, "%s %lld is out of range (0..0x%llx)", what, (long long)v,
				    (unsigned long long)max);
		*out = (uint64_t)v;
		return 0;
	}
	if (!json_object_is_type(o, json_type_string))
		return fail(c, "%s must be a number or a string like \"0x1f\"", what);
	s = json_object_get_string(o);
	errno = 0;
	*out = strtoull(s, &end, 0);
	if (!*s || *s == '-' || *end || errno || *out > max)
		return fail(c, "%s \"%s\" is not a number in 0..0x%llx", what, s, (unsigned long long)max);
	return 0;
}

static int get_reg(const struct jctx *c, json_object *o, unsigned *reg)
{
	const char *s = json_object_is_type(o, json_type_string) ? json_object_get_string(o) : "";

	for (unsigned r = 0; r < 4; r++) {
		if (strcmp(s, cpuid_reg_names[r]) == 0) {
			*reg = r;
			return 0;
		}
	}
	return fail(c, "register must be \"eax\", \"ebx\", \"ecx\" or \"edx\", not %s", json_object_to_json_string(o));
}

/* Every key of `o` is one of `keys`; the required ones (the first `nreq`) are there. */
static int check_keys(const struct jctx *c, json_object *o, const char *where, const char *const *keys, size_t nkeys,
		      size_t nreq)
{
	if (!json_object_is_type(o, json_type_object))
		return fail(c, "%s must be an object", where);
	json_object_object_foreach(o, key, val)
	{
		size_t i;

		(void)val;
		for (i = 0; i < nkeys && strcmp(key, keys[i]); i++)
			;
		if (i == nkeys)
			return fail(c, "%s: unknown key \"%s\"", where, key);
	}
	for (size_t i = 0; i < nreq; i++)
		if (!json_object_object_get_ex(o, keys[i], NULL))
			return fail(c, "%s: missing key \"%s\"", where, keys[i]);
	return 0;
}

struct jcpuid {
	uint64_t leaf, subleaf, mask, value;
	unsigned reg;
};

static int parse_cpuid_item(const struct jctx *c, json_object *o, size_t i, struct jcpuid *it)
{
	static const char *const keys[] = {"leaf", "register", "mask", "value", "subleaf"};
	char where[32];
	json_object *v;
	int ret;

	snprintf(where, sizeof(where), "cpuid[%zu]", i);
	ret = check_keys(c, o, where, keys, 5, 4);
	if (ret)
		return ret;
	it->subleaf = 0;
	json_object_object_get_ex(o, "leaf", &v);
	if ((ret = get_u64(c, v, "leaf", UINT32_MAX, &it->leaf)))
		return ret;
	if (json_object_object_get_ex(o, "subleaf", &v) && (ret = get_u64(c, v, "subleaf", UINT32_MAX, &it->subleaf)))
		return ret;
	json_object_object_get_ex(o, "register", &v);
	if ((ret = get_reg(c, v, &it->reg)))
		return ret;
	json_object_object_get_ex(o, "mask", &v);
	if ((ret = get_u64(c, v, "mask", UINT32_MAX, &it->mask)))
		return ret;
	json_object_object_get_ex(o, "value", &v);
	if ((ret = get_u64(c, v, "value", UINT32_MAX, &it->value)))
		return ret;
	if (it->value & ~it->mask)
		return fail(c, "%s: value 0x%llx sets bits outside mask 0x%llx", where, (unsigned long long)it->value,
			    (unsigned long long)it->mask);
	return 0;
}

/* The lowest set bit of `bits` (non-zero). */
static unsigned low_bit(uint32_t bits)
{
	return (unsigned)__builtin_ctz(bits);
}

static int apply_cpuid_item(const struct jctx *c, const struct jcpuid *it, const struct cpuid_kvm *k,
			    struct kvm_cpuid2 *t)
{
	struct kvm_cpuid_entry2 *sup = cpuid_find(k->supported, (uint32_t)it->leaf, (uint32_t)it->subleaf);
	struct kvm_cpuid_entry2 *e = cpuid_find(t, (uint32_t)it->leaf, (uint32_t)it->subleaf);
	uint32_t *r, extra;

	if (!sup || !e)
		return fail(c, "leaf 0x%llx subleaf %llu is not in KVM's supported CPUID table on this host",
			    (unsigned long long)it->leaf, (unsigned long long)it->subleaf);
	r = cpuid_reg(e, it->reg);
	/* A feature bit may be set only where KVM (or brisk, e.g. the hypervisor bit) offers it. */
	extra = (uint32_t)it->value & ~(*cpuid_reg(sup, it->reg) | *r);
	if (extra && cpuid_is_feature_register((uint32_t)it->leaf, (uint32_t)it->subleaf, it->reg))
		return fail(c, "leaf 0x%llx subleaf %llu %s bit %u is not supported by this host/KVM",
			    (unsigned long long)it->leaf, (unsigned long long)it->subleaf, cpuid_reg_names[it->reg],
			    low_bit(extra));
	*r = (*r & ~(uint32_t)it->mask) | (uint32_t)it->value;
	return 0;
}

static int apply_msr_item(const struct jctx *c, json_object *o, size_t i, const struct cpuid_kvm *k,
			  struct cpuid_vm *vm)
{
	static const char *const keys[] = {"index", "value"};
	char where[32];
	uint64_t index, value;
	json_object *v;
	int ret;

	snprintf(where, sizeof(where), "msrs[%zu]", i);
	if ((ret = check_keys(c, o, where, keys, 2, 2)))
		return ret;
	json_object_object_get_ex(o, "index", &v);
	if ((ret = get_u64(c, v, "index", UINT32_MAX, &index)))
		return ret;
	json_object_object_get_ex(o, "value", &v);
	if ((ret = get_u64(c, v, "value", UINT64_MAX, &value)))
		return ret;
	if (!cpuid_kvm_has_msr(k, (uint32_t)index))
		return fail(c, "%s: MSR 0x%llx is not in KVM's MSR index list on this host", where,
			    (unsigned long long)index);
	if (cpuid_msr_set(vm, (uint32_t)index, value))
		return fail(c, "%s: more than %d MSRs", where, CPUID_MAX_MSRS);
	return 0;
}

static json_object *get_array(const struct jctx *c, json_object *root, const char *key, int *ret)
{
	json_object *a = NULL;

	*ret = 0;
	if (!json_object_object_get_ex(root, key, &a))
		return NULL;
	if (!json_object_is_type(a, json_type_array))
		*ret = fail(c, "\"%s\" must be an array", key);
	else if (json_object_array_length(a) > TEMPLATE_MAX_ITEMS)
		*ret = fail(c, "\"%s\" has more than %d items", key, TEMPLATE_MAX_ITEMS);
	return *ret ? NULL : a;
}

static int apply_root(const struct jctx *c, json_object *root, const struct cpuid_kvm *k, struct kvm_cpuid2 *t,
		      struct cpuid_vm *vm)
{
	static const char *const keys[] = {"cpuid", "msrs", "description"};
	json_object *cpuid, *msrs;
	int ret = check_keys(c, root, "the top level", keys, 3, 0);

	if (ret)
		return ret;
	cpuid = get_array(c, root, "cpuid", &ret);
	if (ret)
		return ret;
	msrs = get_array(c, root, "msrs", &ret);
	if (ret)
		return ret;
	for (size_t i = 0; cpuid && i < json_object_array_length(cpuid); i++) {
		struct jcpuid it;

		if ((ret = parse_cpuid_item(c, json_object_array_get_idx(cpuid, i), i, &it)) ||
		    (ret = apply_cpuid_item(c, &it, k, t)))
			return ret;
	}
	for (size_t i = 0; msrs && i < json_object_array_length(msrs); i++)
		if ((ret = apply_msr_item(c, json_object_array_get_idx(msrs, i), i, k, vm)))
			return ret;
	return 0;
}

int cpuid_json_apply(const char *path, const struct cpuid_kvm *k, struct kvm_cpuid2 *t, struct cpuid_vm *vm, char *err,
		     size_t errlen)
{
	struct jctx c = {.path = path, .err = err, .errlen = errlen};
	int ret = 0;
	json_object *root = parse(&c, &ret);

	if (!root)
		return ret ? ret : -EINVAL;
	ret = apply_root(&c, root, k, t, vm);
	json_object_put(root);
	return ret;
}
