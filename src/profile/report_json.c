/* report_json.c - the brisk-profile/1 report object (docs/profiler.md) built from what profile/trace collected. */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/exits.h"
#include "brisk/file.h"
#include "brisk/kvm.h"
#include "brisk/profile.h"
#include "brisk/timeline.h"
#include "report_impl.h"

#define MAX_IOCTL_ROWS 64
#define MAX_SERIES     (1u << 20)

typedef struct json_object jo;

static jo *hex(uint64_t v)
{
	char b[24];

	snprintf(b, sizeof(b), "0x%llx", (unsigned long long)v);
	return json_object_new_string(b);
}

static jo *dbl(double v)
{
	return json_object_new_double(v);
}

static jo *u64(uint64_t v)
{
	return json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t)v);
}

static void add_member(jo *o, const char *k, jo *v)
{
	json_object_object_add(o, k, v);
}

static jo *rip_symbol(const struct symtab *syms, uint64_t rip)
{
	char b[300];

	return rip != TRACE_NO_RIP && symtab_lookup(syms, rip, b, sizeof(b)) ? json_object_new_string(b) : NULL;
}

/* ---- timeline: phases and milestones ------------------------------------------------- */

static const struct {
	enum tl_event ev;
	const char *id;
	int phase; /* 1: a VMM phase (slice); 0: a milestone (instant) */
} tl_ids[] = {
    {TL_EXEC, "exec", 1},
    {TL_MAIN, "main", 1},
    {TL_API_REQUEST, "api_request", 1},
    {TL_SNAPSHOT_READ, "snapshot_read", 1},
    {TL_KVM_OPEN, "kvm_open", 1},
    {TL_KERNEL_LOADED, "kernel_loaded", 1},
    {TL_VM_CREATED, "vm_created", 1},
    {TL_MEMORY, "memory", 1},
    {TL_IRQCHIP, "irqchip", 1},
    {TL_VCPUS_READY, "vcpus_ready", 1},
    {TL_STATE_RESTORED, "state_restored", 1},
    {TL_FIRST_RUN, "first_run", 1},
    {TL_FIRST_EXIT, "first_exit", 0},
    {TL_FIRST_SERIAL, "first_serial", 0},
    {TL_GUEST_END, "guest_end", 0},
    {TL_EXIT, "exit", 0},
};

static jo *phases_json(void)
{
	jo *a = json_object_new_array();
	int64_t prev = 0;

	for (size_t i = 0; i < sizeof(tl_ids) / sizeof(tl_ids[0]); i++) {
		int64_t t = timeline_get(tl_ids[i].ev);
		jo *p;

		if (!tl_ids[i].phase || t < 0)
			continue;
		p = json_object_new_object();
		add_member(p, "id", json_object_new_string(tl_ids[i].id));
		add_member(p, "name", json_object_new_string(timeline_name(tl_ids[i].ev)));
		add_member(p, "start_us", dbl((double)prev / 1e3));
		add_member(p, "end_us", dbl((double)t / 1e3));
		add_member(p, "dur_us", dbl((double)(t - prev) / 1e3));
		json_object_array_add(a, p);
		prev = t;
	}
	return a;
}

static jo *milestone(const char *id, const char *name, int64_t ns)
{
	jo *m = json_object_new_object();

	add_member(m, "id", json_object_new_string(id));
	add_member(m, "name", json_object_new_string(name));
	add_member(m, "us", dbl((double)ns / 1e3));
	return m;
}

static int cmp_us(const void *a, const void *b)
{
	double x = json_object_get_double(json_object_object_get(*(jo *const *)a, "us"));
	double y = json_object_get_double(json_object_object_get(*(jo *const *)b, "us"));

	return x < y ? -1 : x > y;
}

static jo *milestones_json(void)
{
	jo *a = json_object_new_array();

	for (size_t i = 0; i < sizeof(tl_ids) / sizeof(tl_ids[0]); i++) {
		int64_t t = timeline_get(tl_ids[i].ev);

		if (!tl_ids[i].phase && t >= 0)
			json_object_array_add(a, milestone(tl_ids[i].id, timeline_name(tl_ids[i].ev), t));
	}
	for (unsigned i = 0; i < timeline_nr_markers(); i++) {
		uint32_t v;
		int64_t t;
		char name[32];
		jo *m;

		if (timeline_marker(i, &v, &t))
			continue;
		snprintf(name, sizeof(name), "boot marker 0x%x", v);
		m = milestone("bootmark", name, t);
		add_member(m, "value", json_object_new_int64(v));
		json_object_array_add(a, m);
	}
	json_object_array_sort(a, cmp_us);
	return a;
}

/* ---- userspace exits --------------------------------------------------------------- */

static void exits_of_vcpu(jo *by_reason, jo *by_addr, const struct exit_stats *s, unsigned vcpu)
{
	for (unsigned r = 0; r < EXIT_REASONS; r++) {
		jo *e;

		if (!s->exits[r])
			continue;
		e = json_object_new_object();
		add_member(e, "vcpu", json_object_new_int((int)vcpu));
		add_member(e, "reason", json_object_new_string(exit_reason_name(r)));
		add_member(e, "count", u64(s->exits[r]));
		add_member(e, "total_us", dbl((double)s->ns[r] / 1e3));
		json_object_array_add(by_reason, e);
	}
	for (unsigned i = 0; i < EXIT_ADDR_SLOTS; i++) {
		const struct exit_addr *x = &s->addr[i];
		jo *e;

		if (x->kind == EXIT_ADDR_NONE || !x->count)
			continue;
		e = json_object_new_object();
		add_member(e, "vcpu", json_object_new_int((int)vcpu));
		add_member(e, "kind", json_object_new_string(x->kind == EXIT_ADDR_PIO ? "pio" : "mmio"));
		add_member(e, "addr", u64(x->addr));
		add_member(e, "addr_hex", hex(x->addr));
		add_member(e, "dir", json_object_new_string(x->write ? "write" : "read"));
		add_member(e, "count", u64(x->count));
		add_member(e, "total_us", dbl((double)x->ns / 1e3));
		json_object_array_add(by_addr, e);
	}
}

/* By count, most first; equal counts by leaf/index/address, lowest first (a stable, readable order). */
static int cmp_count(const void *a, const void *b)
{
	static const char *const keys[] = {"leaf", "subleaf", "index", "port", "addr", "nr"};
	jo *p = *(jo *const *)a, *q = *(jo *const *)b;
	int64_t x = json_object_get_int64(json_object_object_get(p, "count"));
	int64_t y = json_object_get_int64(json_object_object_get(q, "count"));

	if (x != y)
		return x > y ? -1 : 1;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		x = json_object_get_int64(json_object_object_get(p, keys[i]));
		y = json_object_get_int64(json_object_object_get(q, keys[i]));
		if (x != y)
			return x < y ? -1 : 1;
	}
	return 0;
}

static jo *exits_json(const struct profile_inputs *in)
{
	jo *o = json_object_new_object(), *by_reason = json_object_new_array(), *by_addr = json_object_new_array();
	uint64_t overflow = 0;

	for (unsigned i = 0; in->exits && i < in->nr_vcpus; i++) {
		const struct exit_stats *s = in->exits[i];

		exits_of_vcpu(by_reason, by_addr, s, i);
		overflow += s->addr_overflow;
	}
	json_object_array_sort(by_addr, cmp_count);
	add_member(o, "by_reason", by_reason);
	add_member(o, "by_address", by_addr);
	add_member(o, "address_overflow", u64(overflow));
	return o;
}

/* ---- KVM binary stats ------------------------------------------------------------- */

/* The statistics of one fd that are non-zero in some snapshot. */
static jo *kstats_list(const struct kstats *k)
{
	jo *a = json_object_new_array();

	for (unsigned i = 0; i < k->n; i++) {
		jo *s, *vals, *deltas;
		int nonzero = 0;

		for (unsigned n = 0; n < k->nsnap; n++)
			nonzero |= k->values[n][i] != 0;
		if (!nonzero)
			continue;
		s = json_object_new_object();
		vals = json_object_new_array();
		deltas = json_object_new_array();
		for (unsigned n = 0; n < k->nsnap; n++) {
			json_object_array_add(vals, u64(k->values[n][i]));
			if (n)
				json_object_array_add(
				    deltas, json_object_new_int64((int64_t)(k->values[n][i] - k->values[n - 1][i])));
		}
		add_member(s, "name", json_object_new_string(k->desc[i].name));
		add_member(s, "kind", json_object_new_string(kstats_kind(k->desc[i].flags)));
		add_member(s, "values", vals);
		add_member(s, "deltas", deltas);
		json_object_array_add(a, s);
	}
	return a;
}

static jo *kvm_stats_json(const struct profile_inputs *in)
{
	jo *o = json_object_new_object(), *snaps = json_object_new_array(), *vcpus = json_object_new_array();
	int ok = in->vm_stats && in->vm_stats->fd >= 0;

	add_member(o, "available", json_object_new_boolean(ok));
	add_member(o, "reason", ok || !in->kstats_reason ? NULL : json_object_new_string(in->kstats_reason));
	for (unsigned n = 0; ok && n < in->vm_stats->nsnap; n++) {
		jo *s = json_object_new_object();

		add_member(s, "id", json_object_new_string(in->snapshot_ids[n]));
		add_member(s, "us", dbl((double)(in->snapshot_ns[n] - in->origin_ns) / 1e3));
		json_object_array_add(snaps, s);
	}
	add_member(o, "snapshots", snaps);
	add_member(o, "vm", ok ? kstats_list(in->vm_stats) : json_object_new_array());
	for (unsigned i = 0; ok && in->vcpu_stats && i < in->nr_vcpus; i++) {
		jo *v = json_object_new_object();

		add_member(v, "vcpu", json_object_new_int((int)i));
		add_member(v, "stats", kstats_list(&in->vcpu_stats[i]));
		json_object_array_add(vcpus, v);
	}
	add_member(o, "vcpus", vcpus);
	return o;
}

/* ---- tracing ------------------------------------------------------------------------ */

static jo *small_table(const struct ttable *t, const char *addr_key, int hex_addr, int dir)
{
	jo *a = json_object_new_array();

	for (size_t i = 0; i < t->cap; i++) {
		const struct tt_entry *e = &t->e[i];
		jo *r;

		if (!e->used)
			continue;
		r = json_object_new_object();
		add_member(r, addr_key, hex_addr ? hex(e->k[0]) : u64(e->k[0]));
		if (!hex_addr && dir) {
			char k[16];

			snprintf(k, sizeof(k), "%s_hex", addr_key);
			add_member(r, k, hex(e->k[0]));
		}
		if (dir)
			add_member(r, "dir", json_object_new_string(e->k[1] ? "write" : "read"));
		add_member(r, "count", u64(e->count));
		json_object_array_add(a, r);
	}
	json_object_array_sort(a, cmp_count);
	return a;
}

static jo *threads_json(const struct trace_agg *a)
{
	jo *arr = json_object_new_array();

	for (unsigned i = 0; i < a->nthreads; i++) {
		jo *t = json_object_new_object();

		add_member(t, "tid", json_object_new_int(a->thread[i].tid));
		add_member(t, "vcpu", json_object_new_int(a->thread[i].vcpu));
		add_member(t, "comm", json_object_new_string(a->thread[i].comm));
		add_member(t, "events", u64(a->thread[i].events));
		json_object_array_add(arr, t);
	}
	return arr;
}

static jo *reasons_json(const struct trace_agg *a)
{
	jo *arr = json_object_new_array();

	for (unsigned i = 0; i < a->nreasons; i++) {
		const struct trace_reason *r = &a->reason[i];
		jo *o = json_object_new_object();

		add_member(o, "reason", json_object_new_string(r->name));
		add_member(o, "count", u64(r->count));
		add_member(o, "mean_us", r->gaps ? dbl((double)r->gap_ns / (double)r->gaps / 1e3) : NULL);
		json_object_array_add(arr, o);
	}
	json_object_array_sort(arr, cmp_count);
	return arr;
}

static jo *tracing_json(const struct profile_inputs *in)
{
	jo *o = json_object_new_object(), *ev = json_object_new_object();
	const struct trace_agg *a = in->tracing ? in->agg : NULL;

	add_member(o, "available", json_object_new_boolean(a != NULL));
	add_member(o, "reason", a || !in->trace_reason ? NULL : json_object_new_string(in->trace_reason));
	add_member(o, "instance", in->trace_instance ? json_object_new_string(in->trace_instance) : NULL);
	add_member(o, "tracefs", a && in->tracefs_root ? json_object_new_string(in->tracefs_root) : NULL);
	add_member(o, "tracefs_mounted_by_brisk", json_object_new_boolean(a && in->tracefs_private));
	add_member(o, "clock", json_object_new_string("mono"));
	add_member(o, "rip_event", a && a->rip_event >= 0 ? json_object_new_string(trace_ev_name(a->rip_event)) : NULL);
	for (int e = 0; a && e < TEV_OTHER; e++)
		add_member(ev, trace_ev_name((enum trace_ev)e), u64(a->events[e]));
	add_member(o, "events", ev);
	add_member(o, "lost_events", u64(in->lost));
	add_member(o, "malformed_lines", u64(a ? a->malformed : 0));
	add_member(o, "threads", a ? threads_json(a) : json_object_new_array());
	add_member(o, "exit_reasons", a ? reasons_json(a) : json_object_new_array());
	add_member(o, "pio", a ? small_table(&a->pio, "port", 0, 1) : json_object_new_array());
	add_member(o, "mmio", a ? small_table(&a->mmio, "gpa", 1, 1) : json_object_new_array());
	add_member(o, "hypercalls", a ? small_table(&a->hcall, "nr", 0, 0) : json_object_new_array());
	add_member(o, "exit_sites", report_exit_sites_json(in));
	return o;
}

/* ---- cpuid and msr, by input with their RIPs ---------------------------------------- */

/* Finds or adds the row of input (k1, k2) in rows (a JSON array), keyed by "_k". */
static jo *input_row(jo *rows, jo *index, uint64_t k1, uint64_t k2, int is_msr)
{
	char key[48];
	jo *r;

	snprintf(key, sizeof(key), "%llx:%llx", (unsigned long long)k1, (unsigned long long)k2);
	if (json_object_object_get_ex(index, key, &r))
		return r;
	r = json_object_new_object();
	if (is_msr) {
		add_member(r, "index", u64(k1));
		add_member(r, "index_hex", hex(k1));
		add_member(r, "dir", json_object_new_string(k2 ? "write" : "read"));
	} else {
		add_member(r, "leaf", u64(k1));
		add_member(r, "subleaf", u64(k2));
		add_member(r, "leaf_hex", hex(k1));
	}
	add_member(r, "count", json_object_new_int64(0));
	add_member(r, "rips", json_object_new_array());
	json_object_array_add(rows, r);
	json_object_object_add(index, key, json_object_get(r));
	return r;
}

/* The entry for `rip` in a row's "rips" (added with count 0 when new). */
static jo *rip_entry(jo *row, uint64_t rip, const struct symtab *syms)
{
	jo *rips = json_object_object_get(row, "rips"), *e;
	char h[24];

	snprintf(h, sizeof(h), "0x%llx", (unsigned long long)rip);
	for (size_t i = 0; i < json_object_array_length(rips); i++) {
		const char *have;

		e = json_object_array_get_idx(rips, i);
		have = json_object_get_string(json_object_object_get(e, "rip"));
		if (have ? rip != TRACE_NO_RIP && strcmp(have, h) == 0 : rip == TRACE_NO_RIP)
			return e;
	}
	e = json_object_new_object();
	add_member(e, "rip", rip == TRACE_NO_RIP ? NULL : hex(rip));
	add_member(e, "count", json_object_new_int64(0));
	add_member(e, "symbol", rip_symbol(syms, rip));
	json_object_array_add(rips, e);
	return e;
}

static void add_count(jo *o, const char *key, uint64_t n)
{
	add_member(o, key, json_object_new_int64(json_object_get_int64(json_object_object_get(o, key)) + (int64_t)n));
}

/*
 * By input: every exit of `t` (no caller known, keyed by RIP) and of `callers` (a probe found the call site:
 * keyed by return address, counted at the probed instruction and listed in the row's "callers").
 */
static jo *inputs_json(const struct trace_agg *a, const struct ttable *t, const struct ttable *callers,
		       const struct symtab *syms, int is_msr)
{
	jo *rows = json_object_new_array(), *index = json_object_new_object();

	for (size_t i = 0; i < t->cap; i++) {
		const struct tt_entry *e = &t->e[i];
		jo *r;

		if (!e->used)
			continue;
		r = input_row(rows, index, e->k[1], e->k[2], is_msr);
		add_count(r, "count", e->count);
		add_count(rip_entry(r, e->k[0], syms), "count", e->count);
	}
	for (size_t i = 0; i < callers->cap; i++) {
		const struct tt_entry *e = &callers->e[i];
		const struct callsite *c = e->used ? trace_agg_callsite(a, e->k[0]) : NULL;
		jo *r, *cl;

		if (!c)
			continue;
		r = input_row(rows, index, e->k[1], e->k[2], is_msr);
		add_count(r, "count", e->count);
		add_count(rip_entry(r, c->site, syms), "count", e->count);
		if (!json_object_object_get_ex(r, "callers", &cl)) {
			cl = json_object_new_array();
			add_member(r, "callers", cl);
		}
		json_object_array_add(cl, json_object_new_object());
		cl = json_object_array_get_idx(cl, json_object_array_length(cl) - 1);
		add_member(cl, "caller", hex(c->ret));
		add_member(cl, "count", u64(e->count));
		add_member(cl, "symbol", rip_symbol(syms, c->ret));
	}
	json_object_put(index);
	for (size_t i = 0; i < json_object_array_length(rows); i++) {
		jo *r = json_object_array_get_idx(rows, i), *cl;

		json_object_array_sort(json_object_object_get(r, "rips"), cmp_count);
		if (json_object_object_get_ex(r, "callers", &cl))
			json_object_array_sort(cl, cmp_count);
	}
	json_object_array_sort(rows, cmp_count);
	return rows;
}

static jo *redundant_json(const struct profile_inputs *in, const struct trace_agg *a, const struct symtab *syms)
{
	jo *arr = json_object_new_array();
	struct redundant *r = NULL;
	int n = redundant_find(a, &r);

	for (int i = 0; i < n; i++) {
		jo *o = json_object_new_object();

		add_member(o, "kind", json_object_new_string(r[i].kind));
		add_member(o, "rip", hex(r[i].rip));
		add_member(o, "symbol", rip_symbol(syms, r[i].rip));
		add_member(o, "caller", r[i].caller ? hex(r[i].caller) : NULL);
		add_member(o, "caller_symbol", r[i].caller ? rip_symbol(syms, r[i].caller) : NULL);
		add_member(o, "stack",
			   r[i].callsite >= 0 ? report_stack_json(in, (uint64_t)r[i].callsite)
					      : json_object_new_array());
		add_member(o, "count", u64(r[i].count));
		add_member(o, "distinct_inputs", u64(r[i].distinct_inputs));
		add_member(o, "distinct_results", u64(r[i].distinct_results));
		add_member(o, "deterministic", json_object_new_boolean(r[i].deterministic));
		add_member(o, "cacheable", u64(r[i].cacheable));
		add_member(o, "mean_cost_us", dbl(r[i].mean_cost_us));
		add_member(o, "cost_us", dbl(r[i].cost_us));
		add_member(o, "cost_source", json_object_new_string(r[i].cost_source));
		json_object_array_add(arr, o);
	}
	free(r);
	return arr;
}

/* ---- ioctls ------------------------------------------------------------------------- */

static void ioctls_json(jo *report, int have)
{
	struct kvm_ioctl_stat s[MAX_IOCTL_ROWS];
	unsigned n = have ? kvm_ioctl_stats(s, MAX_IOCTL_ROWS) : 0;
	jo *c = json_object_new_object(), *t = json_object_new_object();

	for (unsigned i = 0; i < n && i < MAX_IOCTL_ROWS; i++) {
		add_member(c, s[i].name, u64(s[i].count));
		add_member(t, s[i].name, dbl((double)s[i].ns / 1e3));
	}
	add_member(report, "ioctls", c);
	add_member(report, "ioctls_us", t);
}

/* ---- series --------------------------------------------------------------------------- */

static jo *track(int vcpu, int tid, const char *source, const uint32_t *b, uint32_t nb, uint32_t len)
{
	jo *t = json_object_new_object(), *counts = json_object_new_array_ext((int)len);

	add_member(t, "vcpu", json_object_new_int(vcpu));
	add_member(t, "tid", tid > 0 ? json_object_new_int(tid) : NULL);
	add_member(t, "source", json_object_new_string(source));
	for (uint32_t i = 0; i < len; i++)
		json_object_array_add(counts, json_object_new_int64(i < nb && b ? b[i] : 0));
	add_member(t, "counts", counts);
	return t;
}

/* The number of buckets up to the last non-zero one over every track. */
static uint32_t series_len(const struct profile_inputs *in)
{
	uint32_t len = 0;

	for (unsigned i = 0; in->exits && i < in->nr_vcpus; i++) {
		const struct exit_series *s = &in->exits[i]->series;

		for (uint32_t b = 0; s->buckets && b < s->nr; b++)
			if (s->buckets[b] && b + 1 > len)
				len = b + 1;
	}
	for (unsigned i = 0; in->tracing && i < in->agg->nthreads; i++) {
		const struct trace_thread *t = &in->agg->thread[i];

		for (uint32_t b = 0; b < t->nbuckets; b++)
			if (t->buckets[b] && b + 1 > len)
				len = b + 1;
	}
	return len < MAX_SERIES ? len : MAX_SERIES;
}

static jo *series_json(const struct profile_inputs *in, uint64_t start_ns)
{
	jo *o = json_object_new_object(), *tracks = json_object_new_array();
	uint32_t len = series_len(in);

	add_member(o, "bucket_us", dbl((double)in->bucket_ns / 1e3));
	add_member(o, "start_us", dbl((double)(start_ns - in->origin_ns) / 1e3));
	for (unsigned i = 0; in->tracing && i < in->agg->nthreads; i++) {
		const struct trace_thread *t = &in->agg->thread[i];

		json_object_array_add(tracks, track(t->vcpu, t->tid, "kvm", t->buckets, t->nbuckets, len));
	}
	for (unsigned i = 0; in->exits && i < in->nr_vcpus; i++) {
		const struct exit_series *s = &in->exits[i]->series;

		json_object_array_add(tracks,
				      track((int)i, in->tids ? in->tids[i] : 0, "userspace", s->buckets, s->nr, len));
	}
	add_member(o, "tracks", tracks);
	return o;
}

/* Where bucket 0 starts: the userspace series' start (brisk sets both alike), the trace's, or the origin. */
static uint64_t series_start(const struct profile_inputs *in)
{
	if (in->exits && in->nr_vcpus && in->exits[0]->series.buckets)
		return in->exits[0]->series.start_ns;
	if (in->tracing && in->agg->bucket_ns)
		return in->agg->series_start_ns;
	return in->origin_ns;
}

/* ---- the whole report ---------------------------------------------------------------- */

static jo *target_json(const struct profile_inputs *in)
{
	jo *t = json_object_new_object(), *argv = NULL;

	if (in->argv) {
		argv = json_object_new_array();
		for (size_t i = 0; in->argv[i]; i++)
			json_object_array_add(argv, json_object_new_string(in->argv[i]));
	}
	add_member(t, "kernel", in->kernel ? json_object_new_string(in->kernel) : NULL);
	add_member(t, "argv", argv);
	add_member(t, "pid", in->pid > 0 ? json_object_new_int(in->pid) : NULL);
	return t;
}

static jo *warnings_json(const struct profile_inputs *in)
{
	jo *a = json_object_new_array();

	for (unsigned i = 0; i < in->nwarnings; i++)
		json_object_array_add(a, json_object_new_string(in->warnings[i]));
	return a;
}

/* "page_faults": {minor, major, vcpus: [{vcpu, minor, major, system_us}], working_set: {...} or null}. */
static jo *faults_json(const struct profile_inputs *in)
{
	const struct profile_faults *f = in->faults;
	jo *o, *v, *ws;

	if (!f)
		return NULL;
	o = json_object_new_object();
	v = json_object_new_array();
	add_member(o, "minor", json_object_new_int64((int64_t)f->minor));
	add_member(o, "major", json_object_new_int64((int64_t)f->major));
	for (unsigned i = 0; f->vcpu && i < in->nr_vcpus; i++) {
		jo *e;

		if (!f->vcpu[i].ok)
			continue;
		e = json_object_new_object();
		add_member(e, "vcpu", json_object_new_int((int)i));
		add_member(e, "minor", json_object_new_int64((int64_t)f->vcpu[i].minor));
		add_member(e, "major", json_object_new_int64((int64_t)f->vcpu[i].major));
		add_member(e, "system_us", json_object_new_int64((int64_t)f->vcpu[i].system_us));
		json_object_array_add(v, e);
	}
	add_member(o, "vcpus", v);
	ws = NULL;
	if (f->prefetched) {
		ws = json_object_new_object();
		add_member(ws, "pages", json_object_new_int64((int64_t)f->wset_pages));
		add_member(ws, "advise_us", json_object_new_int64((int64_t)f->wset_advise_us));
		add_member(ws, "populate_us", json_object_new_int64((int64_t)f->wset_populate_us));
	}
	add_member(o, "working_set", ws);
	return o;
}

jo *report_json_build(const struct profile_inputs *in)
{
	static struct trace_agg empty;
	const struct trace_agg *a = in->tracing ? in->agg : &empty;
	jo *r = json_object_new_object();
	int profile = in->exits != NULL;

	if (!r)
		return NULL;
	add_member(r, "schema", json_object_new_string(PROFILE_SCHEMA));
	add_member(r, "generator", json_object_new_string("brisk " BRISK_VERSION));
	add_member(r, "command", json_object_new_string(in->command));
	add_member(r, "target", target_json(in));
	add_member(r, "time_origin", json_object_new_string(profile ? "exec" : "trace_start"));
	add_member(r, "duration_us", dbl((double)(in->end_ns - in->origin_ns) / 1e3));
	add_member(r, "phases", profile ? phases_json() : json_object_new_array());
	add_member(r, "milestones", profile ? milestones_json() : json_object_new_array());
	add_member(r, "exits", exits_json(in));
	add_member(r, "kvm_stats", kvm_stats_json(in));
	add_member(r, "tracing", tracing_json(in));
	add_member(r, "symbols", report_symbols_json(in));
	add_member(r, "cpuid", inputs_json(a, &a->cpuid, &a->cpuid_callers, in->syms, 0));
	add_member(r, "msr", inputs_json(a, &a->msr, &a->msr_callers, in->syms, 1));
	add_member(r, "redundant", redundant_json(in, a, in->syms));
	add_member(r, "probes", report_probes_json(in));
	add_member(r, "user", report_user_json(in));
	add_member(r, "findings", report_findings_json(in));
	ioctls_json(r, profile);
	add_member(r, "page_faults", faults_json(in));
	add_member(r, "series", series_json(in, series_start(in)));
	add_member(r, "warnings", warnings_json(in));
	return r;
}

int report_json_write(jo *report, const char *path, char *err, size_t errlen)
{
	struct file_replace r;
	int ret = file_replace_open(&r, path, "--json", 0, err, errlen);

	if (ret)
		return ret;
	if (json_object_to_fd(r.fd, report, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE)) {
		snprintf(err, errlen, "--json %s: %s", path, json_util_get_last_err());
		file_replace_abort(&r);
		return -EIO;
	}
	ret = file_replace_commit(&r, false, err, errlen);
	if (ret)
		file_replace_abort(&r);
	return ret;
}
