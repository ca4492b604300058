/* redundant.c - the redundant-work detector: CPUID and MSR reads repeated at one RIP with identical results. */
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
 */

struct group {
	uint64_t rip;
	uint64_t count, inputs;
	int deterministic;
	uint64_t results[64]; /* distinct result hashes, bounded */
	unsigned nresults;
	int more_results;
};

static int cmp_rip(const void *a, const void *b)
{
	const struct tt_entry *x = *(const struct tt_entry *const *)a, *y = *(const struct tt_entry *const *)b;

	return x->k[0] < y->k[0] ? -1 : x->k[0] > y->k[0];
}

static void add_result(struct group *g, const struct tt_entry *e)
{
	uint32_t kept = e->nresults < TT_MAX_RESULTS ? e->nresults : TT_MAX_RESULTS;

	for (uint32_t i = 0; i < kept; i++) {
		unsigned j = 0;

		while (j < g->nresults && g->results[j] != e->results[i])
			j++;
		if (j < g->nresults)
			continue;
		if (g->nresults < sizeof(g->results) / sizeof(g->results[0]))
			g->results[g->nresults++] = e->results[i];
		else
			g->more_results = 1;
	}
}

/* Appends the finding for group g (if it is cacheable) to out[*n]. */
static void emit(const struct group *g, const char *kind, double mean_us, const char *source, struct redundant *out,
		 int *n)
{
	uint64_t cacheable = g->deterministic ? g->count - g->inputs : 0;

	if (!cacheable || g->rip == TRACE_NO_RIP)
		return;
	out[(*n)++] = (struct redundant){
	    .kind = kind,
	    .rip = g->rip,
	    .count = g->count,
	    .distinct_inputs = g->inputs,
	    .distinct_results = g->nresults,
	    .deterministic = g->deterministic,
	    .cacheable = cacheable,
	    .mean_cost_us = mean_us,
	    .cost_us = (double)g->count * mean_us,
	    .cost_source = source,
	};
}

/* Groups the entries of `tab` (MSR writes skipped) by RIP and emits each group. */
static int scan(const struct ttable *tab, int is_msr, const char *kind, double mean_us, const char *source,
		struct redundant *out, int *n)
{
	const struct tt_entry **v = malloc((tab->n ? tab->n : 1) * sizeof(*v));
	size_t m = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < tab->cap; i++)
		if (tab->e[i].used && !(is_msr && tab->e[i].k[2]))
			v[m++] = &tab->e[i];
	qsort(v, m, sizeof(*v), cmp_rip);
	for (size_t i = 0; i < m;) {
		struct group g = {.rip = v[i]->k[0], .deterministic = 1};

		for (; i < m && v[i]->k[0] == g.rip; i++) {
			g.count += v[i]->count;
			g.inputs++;
			if (v[i]->nresults != 1)
				g.deterministic = 0;
			add_result(&g, v[i]);
		}
		emit(&g, kind, mean_us, source, out, n);
	}
	free(v);
	return 0;
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
	struct redundant *r = calloc(a->cpuid.n + a->msr.n + 1, sizeof(*r));
	const char *src_c, *src_m;
	double cpuid_us = cost_of(a, COST_CPUID, &src_c), msr_us = cost_of(a, COST_MSR_READ, &src_m);
	int n = 0;

	if (!r)
		return -ENOMEM;
	if (scan(&a->cpuid, 0, "cpuid", cpuid_us, src_c, r, &n) || scan(&a->msr, 1, "msr", msr_us, src_m, r, &n)) {
		free(r);
		return -ENOMEM;
	}
	qsort(r, (size_t)n, sizeof(*r), cmp_cost);
	*out = r;
	return n;
}
