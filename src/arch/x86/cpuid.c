/* cpuid.c - KVM's CPUID/MSR facts fetched once per process (or loaded from a dump), table helpers, the host's own
 * CPUID. */
#include <cpuid.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/cpuid.h"
#include "brisk/file.h"
#include "brisk/kvm.h"
#include "brisk/log.h"

/* Enough for every host seen so far (75 entries on the CI machines); doubled on E2BIG. */
#define CPUID_INITIAL_ENTRIES 128
#define CPUID_MAX_ENTRIES     4096
/* KVM reports ~50-200 MSRs; KVM_GET_MSR_INDEX_LIST says how many on E2BIG. */
#define MSR_INITIAL_ENTRIES 256
#define MSR_MAX_ENTRIES	    16384

int (*cpuid_ioctl)(int fd, unsigned long req, const char *name, void *arg) = kvm_ioctl;
#define CPUID_IOCTL(fd, req, arg) cpuid_ioctl((fd), (req), #req, (void *)(uintptr_t)(arg))

static struct cpuid_kvm cache;
static bool cached;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

struct kvm_cpuid2 *cpuid_table_alloc(unsigned nent)
{
	struct kvm_cpuid2 *t = calloc(1, sizeof(*t) + (size_t)nent * sizeof(t->entries[0]));

	if (t)
		t->nent = nent;
	return t;
}

uint64_t cpuid_table_size(const struct kvm_cpuid2 *t)
{
	return sizeof(*t) + (uint64_t)t->nent * sizeof(t->entries[0]);
}

struct kvm_cpuid_entry2 *cpuid_find(const struct kvm_cpuid2 *t, uint32_t leaf, uint32_t subleaf)
{
	for (unsigned i = 0; i < t->nent; i++) {
		struct kvm_cpuid_entry2 *e = (struct kvm_cpuid_entry2 *)&t->entries[i];

		if (e->function == leaf && (!(e->flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX) || e->index == subleaf))
			return e;
	}
	return NULL;
}

/* KVM_GET_SUPPORTED_CPUID (api.rst 4.46): E2BIG means "more entries", anything else is final. */
static struct kvm_cpuid2 *fetch_supported(int kvm_fd)
{
	for (unsigned nent = CPUID_INITIAL_ENTRIES; nent <= CPUID_MAX_ENTRIES; nent *= 2) {
		struct kvm_cpuid2 *t = cpuid_table_alloc(nent);

		if (!t) {
			log_error("out of memory for the CPUID table");
			return NULL;
		}
		if (CPUID_IOCTL(kvm_fd, KVM_GET_SUPPORTED_CPUID, t) == 0)
			return t;
		free(t);
		if (errno != E2BIG) {
			log_error("KVM_GET_SUPPORTED_CPUID failed: %s", strerror(errno));
			return NULL;
		}
	}
	log_error("KVM_GET_SUPPORTED_CPUID wants more than %d entries", CPUID_MAX_ENTRIES);
	return NULL;
}

/* KVM_GET_MSR_INDEX_LIST (api.rst 4.3): on E2BIG KVM writes the needed count into nmsrs. */
static struct kvm_msr_list *fetch_msr_list(int kvm_fd)
{
	uint32_t n = MSR_INITIAL_ENTRIES;

	for (int tries = 0; tries < 4 && n <= MSR_MAX_ENTRIES; tries++) {
		struct kvm_msr_list *l = calloc(1, sizeof(*l) + n * sizeof(uint32_t));

		if (!l) {
			log_error("out of memory for the MSR index list");
			return NULL;
		}
		l->nmsrs = n;
		if (CPUID_IOCTL(kvm_fd, KVM_GET_MSR_INDEX_LIST, l) == 0)
			return l;
		n = l->nmsrs > n ? l->nmsrs : n * 2;
		free(l);
		if (errno != E2BIG) {
			log_error("KVM_GET_MSR_INDEX_LIST failed: %s", strerror(errno));
			return NULL;
		}
	}
	log_error("KVM_GET_MSR_INDEX_LIST wants more than %d entries", MSR_MAX_ENTRIES);
	return NULL;
}

static int fetch_all(int kvm_fd)
{
	struct kvm_cpuid2 *sup = fetch_supported(kvm_fd);
	struct kvm_msr_list *msrs = sup ? fetch_msr_list(kvm_fd) : NULL;

	if (!msrs) {
		free(sup);
		return -1;
	}
	cache.supported = sup;
	/* The list header is one u32: keep the whole block, point past it. */
	cache.msrs = msrs->indices;
	cache.nr_msrs = msrs->nmsrs;
	cache.tsc_deadline = CPUID_IOCTL(kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_DEADLINE_TIMER) > 0;
	return 0;
}

const struct cpuid_kvm *cpuid_kvm_get(int kvm_fd)
{
	const struct cpuid_kvm *k = NULL;

	pthread_mutex_lock(&cache_lock);
	if (cached || fetch_all(kvm_fd) == 0) {
		cached = true;
		k = &cache;
	}
	pthread_mutex_unlock(&cache_lock);
	return k;
}

void cpuid_kvm_reset(void)
{
	pthread_mutex_lock(&cache_lock);
	free((void *)cache.supported);
	if (cache.msrs)
		free((uint8_t *)cache.msrs - offsetof(struct kvm_msr_list, indices));
	memset(&cache, 0, sizeof(cache));
	cached = false;
	pthread_mutex_unlock(&cache_lock);
}

/* ---- dumps ---------------------------------------------------------------------------- */

void cpuid_dump_write(FILE *f, const struct cpuid_kvm *k)
{
	fprintf(f, "# brisk cpuid dump v1: %u CPUID entries, %u MSRs\n", k->supported->nent, k->nr_msrs);
	fprintf(f, "# cpuid LEAF SUBLEAF FLAGS EAX EBX ECX EDX\n");
	for (unsigned i = 0; i < k->supported->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &k->supported->entries[i];

		fprintf(f, "cpuid 0x%08x 0x%x 0x%x 0x%08x 0x%08x 0x%08x 0x%08x\n", e->function, e->index, e->flags,
			e->eax, e->ebx, e->ecx, e->edx);
	}
	for (unsigned i = 0; i < k->nr_msrs; i++)
		fprintf(f, "msr 0x%08x\n", k->msrs[i]);
	fprintf(f, "cap tsc_deadline %d\n", k->tsc_deadline ? 1 : 0);
}

struct dump {
	struct kvm_cpuid2 *cpuid;
	struct kvm_msr_list *msrs;
	unsigned cap_cpuid, cap_msrs;
	bool tsc_deadline;
};

static int dump_grow(struct dump *d)
{
	if (d->cpuid->nent == d->cap_cpuid) {
		struct kvm_cpuid2 *t = cpuid_table_alloc(d->cap_cpuid * 2);

		if (!t)
			return -ENOMEM;
		memcpy(t->entries, d->cpuid->entries, d->cpuid->nent * sizeof(t->entries[0]));
		t->nent = d->cpuid->nent;
		free(d->cpuid);
		d->cpuid = t;
		d->cap_cpuid *= 2;
	}
	if (d->msrs->nmsrs == d->cap_msrs) {
		struct kvm_msr_list *l = realloc(d->msrs, sizeof(*l) + 2 * d->cap_msrs * sizeof(uint32_t));

		if (!l)
			return -ENOMEM;
		d->msrs = l;
		d->cap_msrs *= 2;
	}
	return 0;
}

/* Why a dump line was refused, for the message. */
enum dump_error { DUMP_OK = 0, DUMP_SYNTAX, DUMP_TOO_MANY_CPUID, DUMP_TOO_MANY_MSRS };

/* One line of a dump into `d`. The limits are fetch_supported's and fetch_msr_list's: no KVM reports more. */
static enum dump_error dump_line(struct dump *d, const char *line)
{
	struct kvm_cpuid_entry2 e = {0};
	uint32_t msr;
	int v, n = -1;

	if (sscanf(line,
		   " cpuid %" SCNx32 " %" SCNx32 " %" SCNx32 " %" SCNx32 " %" SCNx32 " %" SCNx32 " %" SCNx32 " %n",
		   &e.function, &e.index, &e.flags, &e.eax, &e.ebx, &e.ecx, &e.edx, &n) == 7 &&
	    line[n] == '\0') {
		if (d->cpuid->nent >= CPUID_MAX_ENTRIES)
			return DUMP_TOO_MANY_CPUID;
		d->cpuid->entries[d->cpuid->nent++] = e;
		return DUMP_OK;
	}
	if (sscanf(line, " msr %" SCNx32 " %n", &msr, &n) == 1 && line[n] == '\0') {
		if (d->msrs->nmsrs >= MSR_MAX_ENTRIES)
			return DUMP_TOO_MANY_MSRS;
		d->msrs->indices[d->msrs->nmsrs++] = msr;
		return DUMP_OK;
	}
	if (sscanf(line, " cap tsc_deadline %d %n", &v, &n) == 1 && line[n] == '\0' && (v == 0 || v == 1)) {
		d->tsc_deadline = v;
		return DUMP_OK;
	}
	return DUMP_SYNTAX;
}

static int dump_line_error(enum dump_error e, const char *path, unsigned lineno, const char *line, char *err,
			   size_t errlen)
{
	switch (e) {
	case DUMP_TOO_MANY_CPUID:
		snprintf(
		    err, errlen,
		    "--supported-from %s:%u: more than %d CPUID entries (the most brisk accepts from KVM or a dump)",
		    path, lineno, CPUID_MAX_ENTRIES);
		break;
	case DUMP_TOO_MANY_MSRS:
		snprintf(err, errlen,
			 "--supported-from %s:%u: more than %d MSRs (the most brisk accepts from KVM or a dump)", path,
			 lineno, MSR_MAX_ENTRIES);
		break;
	default:
		snprintf(err, errlen,
			 "--supported-from %s:%u: not a dump line (want 'cpuid LEAF SUB FLAGS EAX EBX ECX EDX', "
			 "'msr INDEX' or 'cap tsc_deadline 0|1'): %.60s",
			 path, lineno, line);
	}
	return -EINVAL;
}

/* Longest dump line brisk reads (a cpuid line is 72 characters); longer comments are skipped. */
#define DUMP_MAX_LINE 255

static int dump_read(FILE *f, const char *path, struct dump *d, char *err, size_t errlen)
{
	char line[DUMP_MAX_LINE + 2];
	unsigned lineno = 0;
	enum dump_error e;

	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);

		lineno++;
		if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
			int ch;

			if (line[strspn(line, " \t")] != '#') {
				snprintf(err, errlen, "--supported-from %s:%u: line longer than %d characters", path,
					 lineno, DUMP_MAX_LINE);
				return -EINVAL;
			}
			while ((ch = getc(f)) != EOF && ch != '\n') /* a long comment: skip the rest */
				;
			continue;
		}
		if (len && line[len - 1] == '\n')
			line[--len] = '\0';
		if (len == 0 || line[strspn(line, " \t")] == '#' || line[strspn(line, " \t")] == '\0')
			continue;
		if (dump_grow(d))
			return -ENOMEM;
		e = dump_line(d, line);
		if (e != DUMP_OK)
			return dump_line_error(e, path, lineno, line, err, errlen);
	}
	if (ferror(f)) {
		snprintf(err, errlen, "--supported-from %s: read: %s", path, strerror(errno));
		return -EIO;
	}
	if (d->cpuid->nent == 0) {
		snprintf(err, errlen,
			 "--supported-from %s: no 'cpuid' lines (%s); record one with 'brisk cpuid --supported'", path,
			 lineno ? "only comments or blank lines" : "the file is empty");
		return -EINVAL;
	}
	if (!cpuid_find(d->cpuid, 0, 0)) {
		snprintf(err, errlen, "--supported-from %s: no CPUID leaf 0 in the dump", path);
		return -EINVAL;
	}
	return 0;
}

int cpuid_kvm_load(const char *path, char *err, size_t errlen)
{
	struct dump d = {.cap_cpuid = CPUID_INITIAL_ENTRIES, .cap_msrs = MSR_INITIAL_ENTRIES};
	int fd = file_open_input(path, "--supported-from", NULL, err, errlen);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	int ret;

	if (fd < 0)
		return fd;
	if (!f) {
		ret = -errno;
		close(fd);
		snprintf(err, errlen, "--supported-from %s: %s", path, strerror(-ret));
		return ret;
	}
	d.cpuid = cpuid_table_alloc(d.cap_cpuid);
	d.msrs = calloc(1, sizeof(*d.msrs) + d.cap_msrs * sizeof(uint32_t));
	if (d.cpuid)
		d.cpuid->nent = 0;
	ret = d.cpuid && d.msrs ? dump_read(f, path, &d, err, errlen) : -ENOMEM;
	fclose(f);
	if (ret) {
		if (ret == -ENOMEM)
			snprintf(err, errlen, "--supported-from %s: out of memory", path);
		free(d.cpuid);
		free(d.msrs);
		return ret;
	}
	cpuid_kvm_reset();
	pthread_mutex_lock(&cache_lock);
	cache = (struct cpuid_kvm){
	    .supported = d.cpuid, .msrs = d.msrs->indices, .nr_msrs = d.msrs->nmsrs, .tsc_deadline = d.tsc_deadline};
	cached = true;
	pthread_mutex_unlock(&cache_lock);
	return 0;
}

/* ---- the host's own CPUID ------------------------------------------------------------------ */

static void host_cpuid(uint32_t leaf, uint32_t sub, struct kvm_cpuid_entry2 *e)
{
	unsigned a, b, c, d;

	__cpuid_count(leaf, sub, a, b, c, d);
	*e = (struct kvm_cpuid_entry2){.function = leaf, .index = sub, .eax = a, .ebx = b, .ecx = c, .edx = d};
}

struct kvm_cpuid2 *cpuid_host_table(const struct kvm_cpuid2 *like)
{
	struct kvm_cpuid2 *t = cpuid_table_alloc(like->nent);

	for (unsigned i = 0; t && i < like->nent; i++) {
		host_cpuid(like->entries[i].function, like->entries[i].index, &t->entries[i]);
		t->entries[i].flags = like->entries[i].flags;
	}
	return t;
}

/* Leaves whose output depends on ECX (SDM vol. 2A CPUID; AMD APM vol. 3 E.3/E.4). */
static bool indexed_leaf(uint32_t leaf)
{
	static const uint32_t leaves[] = {0x4,	0x7,  0xb,  0xd,  0xf,	0x10,	    0x12,	0x14,	   0x17,
					  0x18, 0x1d, 0x1e, 0x1f, 0x24, 0x8000001d, 0x80000020, 0x80000026};

	for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++)
		if (leaves[i] == leaf)
			return true;
	return false;
}

/* Whether subleaf `sub` of `leaf` is one KVM would list, given subleaf 0 (`first`). */
static bool want_subleaf(uint32_t leaf, uint32_t sub, const struct kvm_cpuid_entry2 *first,
			 const struct kvm_cpuid_entry2 *prev)
{
	uint64_t xsave;

	switch (leaf) {
	case 0x4:
	case 0x8000001d:
		return (prev->eax & 0x1f) != 0; /* up to and including the null cache type */
	case 0xb:
	case 0x1f:
		return (prev->ecx & 0xff00) != 0; /* up to and including the invalid level */
	case 0x7:
		return sub <= first->eax;
	case 0xd:
		if (sub == 1)
			return true;
		xsave = ((uint64_t)first->edx << 32) | first->eax;
		return sub < 64 && (xsave & (1ull << sub));
	default:
		return false;
	}
}

static int host_append(struct kvm_cpuid2 **tp, unsigned *cap, uint32_t leaf, uint32_t sub, bool indexed)
{
	struct kvm_cpuid2 *t = *tp;

	if (t->nent == *cap) {
		struct kvm_cpuid2 *n = cpuid_table_alloc(*cap * 2);

		if (!n)
			return -ENOMEM;
		memcpy(n->entries, t->entries, t->nent * sizeof(t->entries[0]));
		n->nent = t->nent;
		free(t);
		*tp = t = n;
		*cap *= 2;
	}
	host_cpuid(leaf, sub, &t->entries[t->nent]);
	t->entries[t->nent].flags = indexed ? KVM_CPUID_FLAG_SIGNIFCANT_INDEX : 0;
	t->nent++;
	return 0;
}

static int host_range(struct kvm_cpuid2 **tp, unsigned *cap, uint32_t base, uint32_t max)
{
	for (uint32_t leaf = base; leaf <= max && leaf - base < 0x100; leaf++) {
		bool idx = indexed_leaf(leaf);
		unsigned first = (*tp)->nent;

		if (host_append(tp, cap, leaf, 0, idx))
			return -ENOMEM;
		for (uint32_t sub = 1; idx && sub < 64; sub++) {
			if (sub != 1 && leaf == 0xd && !want_subleaf(leaf, sub, &(*tp)->entries[first], NULL))
				continue;
			if (leaf != 0xd &&
			    !want_subleaf(leaf, sub, &(*tp)->entries[first], &(*tp)->entries[(*tp)->nent - 1]))
				break;
			if (host_append(tp, cap, leaf, sub, true))
				return -ENOMEM;
		}
	}
	return 0;
}

struct kvm_cpuid2 *cpuid_host_enumerate(void)
{
	unsigned cap = CPUID_INITIAL_ENTRIES, a, b, c, d;
	struct kvm_cpuid2 *t = cpuid_table_alloc(cap);

	if (!t)
		return NULL;
	t->nent = 0;
	__cpuid(0, a, b, c, d);
	if (host_range(&t, &cap, 0, a))
		goto fail;
	__cpuid(0x40000000, a, b, c, d);
	if (a >= 0x40000000 && a < 0x40000100 && host_range(&t, &cap, 0x40000000, a))
		goto fail;
	__cpuid(0x80000000, a, b, c, d);
	if (a >= 0x80000000 && host_range(&t, &cap, 0x80000000, a))
		goto fail;
	return t;
fail:
	free(t);
	return NULL;
}
