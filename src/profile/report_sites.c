/* report_sites.c - report sections about guest code: the symbols used, the top exit sites, the caller probes. */
#include <json-c/json.h>
#include <stdlib.h>

#include "brisk/kallsyms.h"
#include "brisk/probe.h"
#include "report_impl.h"

#define TOP_SITES    40
#define KERNEL_SPACE 0xffff800000000000ull /* the upper half of a 4-level address space: Linux's kernel */

typedef struct json_object jo;

static void add(jo *o, const char *k, jo *v)
{
	json_object_object_add(o, k, v);
}

static jo *pct(uint64_t part, uint64_t whole)
{
	return whole ? json_object_new_double(100.0 * (double)part / (double)whole) : NULL;
}

jo *report_symbols_json(const struct profile_inputs *in)
{
	const struct trace_agg *a = in->tracing ? in->agg : NULL;
	uint64_t exits = 0, named = 0, kernel = 0, kernel_named = 0;
	jo *o = json_object_new_object(), *k = NULL;

	for (size_t i = 0; a && i < a->rips.cap; i++) {
		const struct tt_entry *e = &a->rips.e[i];
		int is_named;

		if (!e->used)
			continue;
		is_named = symtab_find(in->syms, e->k[0]) != NULL;
		exits += e->count;
		named += is_named ? e->count : 0;
		if (e->k[0] >= KERNEL_SPACE) {
			kernel += e->count;
			kernel_named += is_named ? e->count : 0;
		}
	}
	if (in->kinfo) {
		k = json_object_new_object();
		add(k, "token_table_gpa", rj_hex(in->kinfo->token_table));
		add(k, "relative_base", rj_hex(in->kinfo->relative_base));
		add(k, "num_syms", rj_u64(in->kinfo->num_syms));
		add(k, "text_syms", rj_u64(in->kinfo->text_syms));
		add(k, "absolute_percpu", json_object_new_boolean(in->kinfo->absolute_percpu));
		add(k, "seqs_of_names", json_object_new_boolean(in->kinfo->seqs_of_names));
	}
	add(o, "source", in->syms && in->syms->n ? json_object_new_string(in->syms->source) : NULL);
	add(o, "count", rj_u64(in->syms ? in->syms->n : 0));
	add(o, "why_none", in->syms_why ? json_object_new_string(in->syms_why) : NULL);
	add(o, "kallsyms", k);
	add(o, "exits", rj_u64(exits));
	add(o, "named", rj_u64(named));
	add(o, "named_pct", pct(named, exits));
	add(o, "kernel_exits", rj_u64(kernel));
	add(o, "kernel_named", rj_u64(kernel_named));
	add(o, "kernel_named_pct", pct(kernel_named, kernel));
	return o;
}

static int cmp_count(const void *x, const void *y)
{
	const struct tt_entry *a = *(const struct tt_entry *const *)x, *b = *(const struct tt_entry *const *)y;

	return a->count != b->count ? (a->count > b->count ? -1 : 1) : (a->k[0] < b->k[0] ? -1 : a->k[0] > b->k[0]);
}

jo *report_exit_sites_json(const struct profile_inputs *in)
{
	const struct trace_agg *a = in->tracing ? in->agg : NULL;
	const struct tt_entry **v = a && a->rips.n ? malloc(a->rips.n * sizeof(*v)) : NULL;
	jo *arr = json_object_new_array();
	size_t n = 0;

	for (size_t i = 0; v && i < a->rips.cap; i++)
		if (a->rips.e[i].used && a->rips.e[i].count)
			v[n++] = &a->rips.e[i];
	if (n)
		qsort(v, n, sizeof(*v), cmp_count);
	for (size_t i = 0; i < n && i < TOP_SITES; i++) {
		jo *o = json_object_new_object();
		uint64_t r = v[i]->k[1];

		add(o, "rip", rj_hex(v[i]->k[0]));
		add(o, "reason", json_object_new_string(r < a->nreasons ? a->reason[r].name : "emulated"));
		add(o, "count", rj_u64(v[i]->count));
		add(o, "symbol", rj_sym(in->syms, v[i]->k[0]));
		json_object_array_add(arr, o);
	}
	free(v);
	return arr;
}

jo *report_stack_json(const struct profile_inputs *in, uint64_t callsite)
{
	const struct callsite *c = in->tracing ? trace_agg_callsite(in->agg, callsite) : NULL;
	jo *arr = json_object_new_array();

	for (unsigned i = 0; c && i < c->depth; i++) {
		jo *f = json_object_new_object();

		add(f, "addr", rj_hex(c->stack[i]));
		add(f, "symbol", rj_sym(in->syms, c->stack[i]));
		add(f, "reliable", json_object_new_boolean((c->reliable >> i) & 1));
		json_object_array_add(arr, f);
	}
	return arr;
}

static const char *const kind_names[PROBE_KINDS] = {"cpuid", "rdmsr", "wrmsr"};

jo *report_probes_json(const struct profile_inputs *in)
{
	const struct probes *p = in->probes;
	jo *o = json_object_new_object(), *sites = json_object_new_array();
	uint64_t dropped = 0;

	add(o, "enabled", json_object_new_boolean(p && p->enabled));
	add(o, "port", json_object_new_int(PROBE_PORT));
	for (unsigned i = 0; p && i < atomic_load(&p->nsites); i++) {
		const struct probe_site *s = &p->site[i];
		jo *x = json_object_new_object();

		add(x, "rip", rj_hex(s->va));
		add(x, "symbol", rj_sym(in->syms, s->va));
		add(x, "kind", json_object_new_string(kind_names[s->kind]));
		add(x, "trampoline", rj_hex(s->tramp_va));
		add(x, "hits", rj_u64(atomic_load(&s->hits)));
		add(x, "hot_us", json_object_new_double((double)(s->hot_ns - in->origin_ns) / 1e3));
		add(x, "requested_us", json_object_new_double((double)(s->requested_ns - in->origin_ns) / 1e3));
		add(x, "armed_us", json_object_new_double((double)(s->armed_ns - in->origin_ns) / 1e3));
		add(x, "armed_at_end", json_object_new_boolean(atomic_load(&s->armed)));
		json_object_array_add(sites, x);
	}
	for (unsigned i = 0; p && p->ring && i < p->nr_vcpus; i++)
		dropped += atomic_load(&p->ring[i].dropped);
	add(o, "sites", sites);
	add(o, "matched", rj_u64(p ? atomic_load(&p->matched) : 0));
	add(o, "stackless", rj_u64(p ? atomic_load(&p->stackless) : 0));
	add(o, "unmatched", rj_u64(p ? atomic_load(&p->unmatched) : 0));
	add(o, "dropped", rj_u64(dropped));
	add(o, "callsite_overflow", rj_u64(in->tracing ? in->agg->callsite_overflow : 0));
	add(o, "last_refusal", p && p->why[0] ? json_object_new_string(p->why) : NULL);
	return o;
}

/* One address space's exits: the total and its top sites. */
struct uspace {
	uint64_t cr3, exits;
};

static int cmp_exits(const void *x, const void *y)
{
	const struct uspace *a = x, *b = y;

	return a->exits != b->exits ? (a->exits > b->exits ? -1 : 1) : (a->cr3 < b->cr3 ? -1 : a->cr3 > b->cr3);
}

#define TOP_SPACES	16
#define TOP_SPACE_SITES 8

/* The exits a guest's user half took, by address space (CR3) as the probes saw it, with their top sites. */
jo *report_user_json(const struct profile_inputs *in)
{
	const struct trace_agg *a = in->tracing ? in->agg : NULL;
	struct uspace *u = a && a->user.n ? calloc(a->user.n, sizeof(*u)) : NULL;
	const struct tt_entry **v = a && a->user.n ? malloc(a->user.n * sizeof(*v)) : NULL;
	jo *o = json_object_new_object(), *arr = json_object_new_array();
	size_t nu = 0, nv = 0;

	for (size_t i = 0; u && v && i < a->user.cap; i++) {
		const struct tt_entry *e = &a->user.e[i];
		size_t k = 0;

		if (!e->used)
			continue;
		v[nv++] = e;
		while (k < nu && u[k].cr3 != e->k[0])
			k++;
		if (k == nu)
			u[nu++].cr3 = e->k[0];
		u[k].exits += e->count;
	}
	if (nu)
		qsort(u, nu, sizeof(*u), cmp_exits);
	if (nv)
		qsort(v, nv, sizeof(*v), cmp_count);
	for (size_t k = 0; k < nu && k < TOP_SPACES; k++) {
		jo *x = json_object_new_object(), *sites = json_object_new_array();
		size_t shown = 0;

		add(x, "cr3", rj_hex(u[k].cr3));
		add(x, "exits", rj_u64(u[k].exits));
		for (size_t i = 0; i < nv && shown < TOP_SPACE_SITES; i++) {
			jo *y;
			uint64_t r = v[i]->k[2];

			if (v[i]->k[0] != u[k].cr3)
				continue;
			y = json_object_new_object();
			add(y, "rip", rj_hex(v[i]->k[1]));
			add(y, "reason", json_object_new_string(r < a->nreasons ? a->reason[r].name : "emulated"));
			add(y, "count", rj_u64(v[i]->count));
			add(y, "symbol", rj_sym(in->syms, v[i]->k[1]));
			json_object_array_add(sites, y);
			shown++;
		}
		add(x, "sites", sites);
		json_object_array_add(arr, x);
	}
	add(o, "address_spaces", arr);
	add(o, "unknown_space_exits", rj_u64(a ? a->user_unknown : 0));
	add(o, "symbols", in->user_symbols ? json_object_new_string(in->user_symbols) : NULL);
	free(u);
	free(v);
	return o;
}
