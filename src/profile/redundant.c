/* redundant.c - the redundant-work detector: CPUID and MSR reads repeated at one RIP or call site, same results. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/profile.h"

/*
 * Seed 000's bug class: the same code asks the hypervisor the same question
 * over and over and gets the same answer. Entries of the CPUID table are
 * (RIP, leaf, subleaf) and of the MSR table (RIP, index, write); both carry
 * the distinct result hashes seen. A group is one (kind, RIP): it is
 * deterministic when every input in it always gave one result, and then all
 * executions beyond the first of each input could have been cached.
 *
 * Exits a caller probe attributed (probe.h) are in the caller tables, keyed
 * by the return address instead of the RIP. An instruction with several
 * callers (a helper all of them share: Linux's out-of-line native_cpuid) is
 * split into one group per call site, so the site that repeats its questions
 * stands out from those that do not; its exits from before the probe was
 * armed form a group of their own (no caller). An instruction with one
 * caller stays one group (all its exits), naming that caller.
 */

struct group {
	uint64_t rip, caller;
	int64_t callsite;
	uint64_t count, inputs;
	int deterministic;
	uint64_t results[64]; /* distinct result hashes, bounded */
	unsigned nresults;
};

static int cmp_key(const void *a, const void *b)
{
	const struct tt_entry *x = *(const struct tt_entry *const *)a, *y = *(const struct tt_entry *const *)b;

	return x->k[0] < y->k[0] ? -1 : x->k[0] > y->k[0];
}

static void add_result(struct group *g, uint64_t h)
{
	for (unsigned j = 0; j < g->nresults; j++)
		if (g->results[j] == h)
			return;
	if (g->nresults < sizeof(g->results) / sizeof(g->results[0]))
		g->results[g->nresults++] = h;
}

/* The index of the one call site the probes saw for instruction `site`, or -1 (none, or several). */
static int64_t single_caller(const struct trace_agg *a, uint64_t site)
{
	int64_t one = -1;

	for (size_t i = 0; a->callsites && i < CALLSITE_MAX; i++) {
		const struct callsite *c = &a->callsites[i];

		if (!c->used || c->site != site)
			continue;
		if (one >= 0)
			return -1;
		one = (int64_t)i;
	}
	return one;
}

/* Whether table t has an entry keyed k0 (MSR writes aside). */
static int has_key(const struct ttable *t, uint64_t k0, int is_msr)
{
	for (size_t i = 0; i < t->cap; i++)
		if (t->e[i].used && t->e[i].k[0] == k0 && !(is_msr && t->e[i].k[2]))
			return 1;
	return 0;
}

/*
 * The group of entries v[0..m): inputs merged across them ((k1, k2) may come from both tables), each input
 * deterministic when all its executions gave one result. 0 or -ENOMEM.
 */
static int fill_group(struct group *g, const struct tt_entry *const *v, size_t m)
{
	struct ttable in = {0};

	g->deterministic = 1;
	for (size_t i = 0; i < m; i++) {
		struct tt_entry *e = ttable_get(&in, v[i]->k[1], v[i]->k[2], 0);
		uint32_t kept = v[i]->nresults < TT_MAX_RESULTS ? v[i]->nresults : TT_MAX_RESULTS;

		if (!e) {
			ttable_free(&in);
			return -ENOMEM;
		}
		e->count += v[i]->count;
		g->count += v[i]->count;
		for (uint32_t r = 0; r < kept; r++) {
			tt_entry_result(e, v[i]->results[r]);
			add_result(g, v[i]->results[r]);
		}
		if (v[i]->nresults > TT_MAX_RESULTS)
			e->nresults = TT_MAX_RESULTS + 1;
	}
	for (size_t i = 0; i < in.cap; i++)
		if (in.e[i].used) {
			g->inputs++;
			g->deterministic &= in.e[i].nresults == 1;
		}
	ttable_free(&in);
	return 0;
}

struct sink {
	const char *kind;
	double mean_us;
	const char *source;
	struct redundant *out;
	int n;
};

/* Appends the finding for group g if it is cacheable. */
static void emit(const struct group *g, struct sink *s)
{
	uint64_t cacheable = g->deterministic ? g->count - g->inputs : 0;

	if (!cacheable || g->rip == TRACE_NO_RIP)
		return;
	s->out[s->n++] = (struct redundant){
	    .kind = s->kind,
	    .rip = g->rip,
	    .caller = g->caller,
	    .callsite = g->callsite,
	    .count = g->count,
	    .distinct_inputs = g->inputs,
	    .distinct_results = g->nresults,
	    .deterministic = g->deterministic,
	    .cacheable = cacheable,
	    .mean_cost_us = s->mean_us,
	    .cost_us = (double)g->count * s->mean_us,
	    .cost_source = s->source,
	};
}

/* The entries of t (MSR writes skipped), sorted by key; *m of them. NULL on out of memory. */
static const struct tt_entry **sorted(const struct ttable *t, int is_msr, size_t *m)
{
	const struct tt_entry **v = malloc((t->n + 1) * sizeof(*v));

	*m = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < t->cap; i++)
		if (t->e[i].used && !(is_msr && t->e[i].k[2]))
			v[(*m)++] = &t->e[i];
	qsort(v, *m, sizeof(*v), cmp_key);
	return v;
}

/* The groups of one kind: by RIP (merging the caller entries of a single-caller site), then by call site. */
static int scan(const struct trace_agg *a, const struct ttable *by_rip, const struct ttable *by_caller, int is_msr,
		struct sink *s)
{
	size_t m, mc, i = 0;
	const struct tt_entry **v = sorted(by_rip, is_msr, &m), **vc = sorted(by_caller, is_msr, &mc);
	const struct tt_entry **grp = malloc((m + mc + 1) * sizeof(*grp)); /* one group's entries */
	int ret = v && vc && grp ? 0 : -ENOMEM;

	while (!ret && i < m) {
		struct group g = {.rip = v[i]->k[0], .callsite = -1};
		size_t n = 0;

		while (i < m && v[i]->k[0] == g.rip)
			grp[n++] = v[i++];
		g.callsite = g.rip == TRACE_NO_RIP ? -1 : single_caller(a, g.rip);
		g.caller = g.callsite >= 0 ? a->callsites[g.callsite].ret : 0;
		for (size_t k = 0; g.callsite >= 0 && k < mc; k++)
			if (vc[k]->k[0] == (uint64_t)g.callsite)
				grp[n++] = vc[k];
		ret = fill_group(&g, grp, n);
		emit(&g, s);
	}
	for (i = 0; !ret && i < mc;) {
		const struct callsite *c = trace_agg_callsite(a, vc[i]->k[0]);
		struct group g = {
		    .callsite = (int64_t)vc[i]->k[0], .caller = c ? c->ret : 0, .rip = c ? c->site : TRACE_NO_RIP};
		size_t start = i;

		while (i < mc && vc[i]->k[0] == (uint64_t)g.callsite)
			i++;
		if (!c || (single_caller(a, g.rip) == g.callsite && has_key(by_rip, g.rip, is_msr)))
			continue; /* merged into its site's group above */
		ret = fill_group(&g, vc + start, i - start);
		emit(&g, s);
	}
	free(v);
	free(vc);
	free(grp);
	return ret;
}

static int cmp_cost(const void *a, const void *b)
{
	const struct redundant *x = a, *y = b;

	if (x->cost_us != y->cost_us)
		return x->cost_us > y->cost_us ? -1 : 1;
	return x->count > y->count ? -1 : x->count < y->count;
}

/* The measured mean cost of `k` in µs, or the documented default. */
static double cost_of(const struct trace_agg *a, enum cost_kind k, const char **source)
{
	double ns = trace_agg_mean_cost(a, k);

	*source = ns > 0 ? "trace" : "estimate";
	return ns > 0 ? ns / 1e3 : REDUNDANT_DEFAULT_COST_US;
}

int redundant_find(const struct trace_agg *a, struct redundant **out)
{
	struct redundant *r = calloc(a->cpuid.n + a->msr.n + a->cpuid_callers.n + a->msr_callers.n + 1, sizeof(*r));
	struct sink s = {.out = r};

	if (!r)
		return -ENOMEM;
	s.kind = "cpuid";
	s.mean_us = cost_of(a, COST_CPUID, &s.source);
	if (scan(a, &a->cpuid, &a->cpuid_callers, 0, &s) == 0) {
		s.kind = "msr";
		s.mean_us = cost_of(a, COST_MSR_READ, &s.source);
		if (scan(a, &a->msr, &a->msr_callers, 1, &s) == 0) {
			qsort(r, (size_t)s.n, sizeof(*r), cmp_cost);
			*out = r;
			return s.n;
		}
	}
	free(r);
	return -ENOMEM;
}
