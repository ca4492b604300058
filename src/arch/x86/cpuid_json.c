/* cpuid_json.c - JSON CPU templates (json-c): loaded and checked without KVM, then applied against KVM's facts. */
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <linux/kvm.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "brisk/cpuid.h"
#include "brisk/file.h"
#include "brisk/json_strict.h"
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
	/* Keys and strings quoted from the file reach a terminal: one line, no control characters (JSON "\n", ESC). */
	for (char *p = msg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	snprintf(c->err, c->errlen, "--cpu-template %s: %s", c->path, msg);
	return -EINVAL;
}

/* What a template file looks like, for messages about files that are not one. */
#define TEMPLATE_SHAPE "a JSON object like {\"cpuid\": [...], \"msrs\": [...]}"

/* Terminates `buf` (room for n + 1 bytes) and refuses what cannot be a template's text. */
static int check_text(const struct jctx *c, char *buf, size_t n)
{
	const char *nul;

	if (n > TEMPLATE_MAX_BYTES)
		return fail(c, "larger than the %u bytes a template may have", TEMPLATE_MAX_BYTES);
	buf[n] = '\0';
	nul = memchr(buf, '\0', n);
	if (nul)
		return fail(c, "NUL byte at offset %zu: not a JSON text file", (size_t)(nul - buf));
	if (buf[strspn(buf, " \t\r\n")] == '\0')
		return fail(c, "the file is %s; a template is %s", n ? "only white space" : "empty", TEMPLATE_SHAPE);
	return 0;
}

/*
 * The file's text, NUL-terminated. Opened with file_open_input: a FIFO,
 * directory or device is refused without blocking (docs/security.md case 18
 * item 6.3). Empty files and NUL bytes are refused here with their own
 * words rather than as json-c's "unexpected end of data".
 */
static char *read_file(const struct jctx *c, int *ret)
{
	struct stat st;
	char *buf;
	ssize_t n = 0, got;
	int fd = file_open_input(c->path, "--cpu-template", &st, c->err, c->errlen);

	*ret = 0;
	if (fd < 0) {
		/* A file that cannot be used is a usage error (exit 2); running out of memory or fds is the host's. */
		*ret = fd == -ENOMEM || fd == -EMFILE || fd == -ENFILE ? fd : -EINVAL;
		if (fd == -ENOENT && !strchr(c->path, '/') && strlen(c->err) < c->errlen)
			snprintf(c->err + strlen(c->err), c->errlen - strlen(c->err),
				 " (the built-in templates are \"host\", \"baseline\" and Firecracker's C3, T2, T2S, "
				 "T2CL, T2A)");
		return NULL;
	}
	if (st.st_size > TEMPLATE_MAX_BYTES) {
		close(fd);
		*ret = fail(c, "%lld bytes: larger than the %u a template may have", (long long)st.st_size,
			    TEMPLATE_MAX_BYTES);
		return NULL;
	}
	buf = malloc(TEMPLATE_MAX_BYTES + 1);
	/* Read to EOF or one byte past the limit: the file may have grown since fstat. */
	while (buf && n <= TEMPLATE_MAX_BYTES && (got = read(fd, buf + n, TEMPLATE_MAX_BYTES + 1 - (size_t)n)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			*ret = fail(c, "read: %s", strerror(errno));
			break;
		}
		n += got;
	}
	close(fd);
	if (!buf)
		*ret = -ENOMEM;
	else if (*ret == 0)
		*ret = check_text(c, buf, (size_t)n);
	if (*ret) {
		free(buf);
		return NULL;
	}
	return buf;
}

/*
 * The parsed document, or NULL with the reason: the strict reader API bodies
 * and config files use (json_strict.h: duplicate keys, raw control
 * characters, single quotes and trailing data refused, depth bounded).
 */
static json_object *parse(const struct jctx *c, int *ret)
{
	char what[PATH_MAX + 32];
	struct fcj fc = {.what = what, .err = c->err, .errlen = c->errlen};
	char *text = read_file(c, ret);
	json_object *root = NULL;

	if (!text)
		return NULL;
	snprintf(what, sizeof(what), "--cpu-template %s", c->path);
	*ret = fcj_parse(&fc, text, strlen(text), &root);
	free(text);
	return *ret ? NULL : root;
}

/* A number given as a JSON integer or a string ("0x1f", "31"), at most `max`; `where` names the item. */
static int get_u64(const struct jctx *c, json_object *o, const char *where, const char *what, uint64_t max,
		   uint64_t *out)
{
	const char *s;
	char *end;

	if (json_object_is_type(o, json_type_int)) {
		int64_t v = json_object_get_int64(o);

		if (v < 0 || (uint64_t)v > max)
			return fail(c, "%s: %s %lld is out of range (0..0x%llx)", where, what, (long long)v,
				    (unsigned long long)max);
		*out = (uint64_t)v;
		return 0;
	}
	if (!json_object_is_type(o, json_type_string))
		return fail(c, "%s: %s must be a number or a string like \"0x1f\"", where, what);
	s = json_object_get_string(o);
	errno = 0;
	*out = strtoull(s, &end, 0);
	if (!*s || *s == '-' || *end || errno || *out > max || strlen(s) != (size_t)json_object_get_string_len(o))
		return fail(c, "%s: %s \"%s\" is not a number in 0..0x%llx", where, what, s, (unsigned long long)max);
	return 0;
}

/* Member `key` of object `o` (present: check_keys ran) as a number. */
static int member_u64(const struct jctx *c, json_object *o, const char *where, const char *key, uint64_t max,
		      uint64_t *out)
{
	json_object *v = NULL;

	json_object_object_get_ex(o, key, &v);
	return get_u64(c, v, where, key, max, out);
}

static int get_reg(const struct jctx *c, json_object *o, const char *where, unsigned *reg)
{
	const char *s = json_object_is_type(o, json_type_string) ? json_object_get_string(o) : "";

	for (unsigned r = 0; r < 4; r++) {
		if (strcmp(s, cpuid_reg_names[r]) == 0) {
			*reg = r;
			return 0;
		}
	}
	return fail(c, "%s: register must be \"eax\", \"ebx\", \"ecx\" or \"edx\", not %s", where,
		    json_object_to_json_string(o));
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

/* ---- the template without KVM: syntax, structure, ranges ------------------------------------------------ */

struct cpuid_template_item {
	uint32_t leaf, subleaf, mask, value;
	unsigned reg;
};

struct cpuid_template_msr {
	uint32_t index;
	uint64_t value;
	size_t item; /* msrs[item] in the file, for messages */
};

struct cpuid_template {
	size_t nr_cpuid, nr_msrs;
	struct cpuid_template_item *cpuid;
	struct cpuid_template_msr *msrs; /* distinct indices, at most CPUID_MAX_MSRS */
};

static int parse_cpuid_item(const struct jctx *c, json_object *o, size_t i, struct cpuid_template_item *it)
{
	static const char *const keys[] = {"leaf", "register", "mask", "value", "subleaf"};
	char where[32];
	uint64_t leaf, subleaf = 0, mask, value;
	json_object *v;
	int ret;

	snprintf(where, sizeof(where), "cpuid[%zu]", i);
	if ((ret = check_keys(c, o, where, keys, 5, 4)) || (ret = member_u64(c, o, where, "leaf", UINT32_MAX, &leaf)))
		return ret;
	if (json_object_object_get_ex(o, "subleaf", &v) &&
	    (ret = get_u64(c, v, where, "subleaf", UINT32_MAX, &subleaf)))
		return ret;
	json_object_object_get_ex(o, "register", &v);
	if ((ret = get_reg(c, v, where, &it->reg)) || (ret = member_u64(c, o, where, "mask", UINT32_MAX, &mask)) ||
	    (ret = member_u64(c, o, where, "value", UINT32_MAX, &value)))
		return ret;
	if (value & ~mask)
		return fail(c, "%s: value 0x%llx sets bits outside mask 0x%llx", where, (unsigned long long)value,
			    (unsigned long long)mask);
	it->leaf = (uint32_t)leaf;
	it->subleaf = (uint32_t)subleaf;
	it->mask = (uint32_t)mask;
	it->value = (uint32_t)value;
	return 0;
}

/* One MSR item; an index given twice keeps its last value, as cpuid_msr_set does. */
static int parse_msr_item(const struct jctx *c, json_object *o, size_t i, struct cpuid_template *t)
{
	static const char *const keys[] = {"index", "value"};
	char where[32];
	uint64_t index, value;
	size_t n;
	int ret;

	snprintf(where, sizeof(where), "msrs[%zu]", i);
	if ((ret = check_keys(c, o, where, keys, 2, 2)) ||
	    (ret = member_u64(c, o, where, "index", UINT32_MAX, &index)) ||
	    (ret = member_u64(c, o, where, "value", UINT64_MAX, &value)))
		return ret;
	for (n = 0; n < t->nr_msrs && t->msrs[n].index != index; n++)
		;
	if (n == CPUID_MAX_MSRS)
		return fail(c, "%s: more than %d distinct MSRs (brisk sets at most %d per vCPU)", where, CPUID_MAX_MSRS,
			    CPUID_MAX_MSRS);
	t->msrs[n] = (struct cpuid_template_msr){.index = (uint32_t)index, .value = value, .item = i};
	if (n == t->nr_msrs)
		t->nr_msrs++;
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
		*ret = fail(c, "\"%s\" has %zu items, more than the %d a template may have", key,
			    json_object_array_length(a), TEMPLATE_MAX_ITEMS);
	return *ret ? NULL : a;
}

static int parse_root(const struct jctx *c, json_object *root, struct cpuid_template *t)
{
	static const char *const keys[] = {"cpuid", "msrs", "description"};
	json_object *cpuid, *msrs, *desc;
	int ret = check_keys(c, root, "the top level", keys, 3, 0);

	if (ret)
		return ret;
	if (json_object_object_get_ex(root, "description", &desc) && !json_object_is_type(desc, json_type_string))
		return fail(c, "\"description\" must be a string");
	if (!(cpuid = get_array(c, root, "cpuid", &ret)) && ret)
		return ret;
	if (!(msrs = get_array(c, root, "msrs", &ret)) && ret)
		return ret;
	t->cpuid = calloc(cpuid ? json_object_array_length(cpuid) + 1 : 1, sizeof(*t->cpuid));
	t->msrs = calloc(CPUID_MAX_MSRS, sizeof(*t->msrs));
	if (!t->cpuid || !t->msrs)
		return -ENOMEM;
	for (size_t i = 0; cpuid && i < json_object_array_length(cpuid); i++, t->nr_cpuid++)
		if ((ret = parse_cpuid_item(c, json_object_array_get_idx(cpuid, i), i, &t->cpuid[i])))
			return ret;
	for (size_t i = 0; msrs && i < json_object_array_length(msrs); i++)
		if ((ret = parse_msr_item(c, json_object_array_get_idx(msrs, i), i, t)))
			return ret;
	return 0;
}

void cpuid_template_free(struct cpuid_template *t)
{
	if (!t)
		return;
	free(t->cpuid);
	free(t->msrs);
	free(t);
}

int cpuid_template_load(const char *path, struct cpuid_template **out, char *err, size_t errlen)
{
	struct jctx c = {.path = path, .err = err, .errlen = errlen};
	struct cpuid_template *t;
	json_object *root;
	int ret = 0;

	*out = NULL;
	root = parse(&c, &ret);
	if (!root)
		return ret ? ret : -EINVAL;
	t = calloc(1, sizeof(*t));
	ret = t ? parse_root(&c, root, t) : -ENOMEM;
	json_object_put(root);
	if (ret == -ENOMEM)
		snprintf(err, errlen, "--cpu-template %s: out of memory", path);
	if (ret) {
		cpuid_template_free(t);
		return ret;
	}
	*out = t;
	return 0;
}

bool cpuid_template_builtin(const char *name)
{
	return !name || strcmp(name, "host") == 0 || strcmp(name, "baseline") == 0 || cpuid_fc_static(name);
}

int cpuid_template_check(const char *name, char *err, size_t errlen)
{
	struct cpuid_template *t;
	int ret;

	if (cpuid_template_builtin(name))
		return 0;
	ret = cpuid_template_load(name, &t, err, errlen);
	cpuid_template_free(t);
	return ret;
}

/* ---- applying it: what KVM offers on this host -------------------------------------------------------------- */

/* The lowest set bit of `bits` (non-zero). */
static unsigned low_bit(uint32_t bits)
{
	return (unsigned)__builtin_ctz(bits);
}

static int apply_cpuid_item(const struct jctx *c, const struct cpuid_template_item *it, size_t i,
			    const struct cpuid_kvm *k, struct kvm_cpuid2 *t)
{
	struct kvm_cpuid_entry2 *sup = cpuid_find(k->supported, it->leaf, it->subleaf);
	struct kvm_cpuid_entry2 *e = cpuid_find(t, it->leaf, it->subleaf);
	uint32_t *r, extra;

	if (!sup || !e)
		return fail(c, "cpuid[%zu]: leaf 0x%x subleaf %u is not in KVM's supported CPUID table on this host", i,
			    it->leaf, it->subleaf);
	r = cpuid_reg(e, it->reg);
	/* A feature bit may be set only where KVM (or brisk, e.g. the hypervisor bit) offers it. */
	extra = it->value & ~(*cpuid_reg(sup, it->reg) | *r);
	if (extra && cpuid_is_feature_register(it->leaf, it->subleaf, it->reg))
		return fail(c, "cpuid[%zu]: leaf 0x%x subleaf %u %s bit %u is not supported by this host/KVM", i,
			    it->leaf, it->subleaf, cpuid_reg_names[it->reg], low_bit(extra));
	*r = (*r & ~it->mask) | it->value;
	return 0;
}

int cpuid_template_apply(const char *path, const struct cpuid_template *tmpl, const struct cpuid_kvm *k,
			 struct kvm_cpuid2 *t, struct cpuid_vm *vm, char *err, size_t errlen)
{
	struct jctx c = {.path = path, .err = err, .errlen = errlen};
	int ret;

	for (size_t i = 0; i < tmpl->nr_cpuid; i++)
		if ((ret = apply_cpuid_item(&c, &tmpl->cpuid[i], i, k, t)))
			return ret;
	for (size_t i = 0; i < tmpl->nr_msrs; i++) {
		const struct cpuid_template_msr *m = &tmpl->msrs[i];

		if (!cpuid_kvm_has_msr(k, m->index))
			return fail(&c, "msrs[%zu]: MSR 0x%x is not in KVM's MSR index list on this host", m->item,
				    m->index);
		if (cpuid_msr_set(vm, m->index, m->value))
			return fail(&c, "msrs[%zu]: with brisk's boot MSRs, more than the %d MSRs brisk sets per vCPU",
				    m->item, CPUID_MAX_MSRS);
	}
	return 0;
}

/* FNV-1a 64 of v's `len` low bytes, little-endian, continuing from h. */
static uint64_t fnv(uint64_t h, uint64_t v, unsigned len)
{
	for (unsigned i = 0; i < len; i++) {
		h ^= (uint8_t)(v >> (8 * i));
		h *= 0x100000001b3ull;
	}
	return h;
}

uint64_t cpuid_template_digest(const struct cpuid_template *t)
{
	uint64_t h = fnv(0xcbf29ce484222325ull, CPUID_TEMPLATE_DIGEST_VERSION, 4);

	h = fnv(h, t->nr_cpuid, 4);
	for (size_t i = 0; i < t->nr_cpuid; i++) {
		const struct cpuid_template_item *it = &t->cpuid[i];

		h = fnv(fnv(fnv(fnv(fnv(h, it->leaf, 4), it->subleaf, 4), it->reg, 1), it->mask, 4), it->value, 4);
	}
	h = fnv(h, t->nr_msrs, 4);
	for (size_t i = 0; i < t->nr_msrs; i++)
		h = fnv(fnv(h, t->msrs[i].index, 4), t->msrs[i].value, 8);
	return h ? h : 1; /* 0 means "no template file" */
}

int cpuid_json_apply(const char *path, const struct cpuid_kvm *k, struct kvm_cpuid2 *t, struct cpuid_vm *vm, char *err,
		     size_t errlen)
{
	struct cpuid_template *tmpl;
	int ret = cpuid_template_load(path, &tmpl, err, errlen);

	if (ret)
		return ret;
	vm->template_digest = cpuid_template_digest(tmpl);
	ret = cpuid_template_apply(path, tmpl, k, t, vm, err, errlen);
	cpuid_template_free(tmpl);
	return ret;
}
