/* trace_agg.c - aggregation of kvm trace events: attribution to the latest guest RIP of the same thread, costs, tables.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/profile.h"

#define TT_INITIAL_CAP 256
#define TT_MAX_CAP     (1u << 24) /* 16M distinct keys; past it new keys are dropped (counted as malformed) */

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static uint64_t key_hash(uint64_t a, uint64_t b, uint64_t c)
{
	return mix(mix(mix(0, a), b), c);
}

/* Finds or claims the slot of (a, b, c) in e[cap]; cap is a power of two with a free slot. */
static struct tt_entry *probe(struct tt_entry *e, size_t cap, uint64_t a, uint64_t b, uint64_t c)
{
	size_t i = (size_t)key_hash(a, b, c) & (cap - 1);

	while (e[i].used && !(e[i].k[0] == a && e[i].k[1] == b && e[i].k[2] == c))
		i = (i + 1) & (cap - 1);
	return &e[i];
}

static int grow(struct ttable *t)
{
	size_t cap = t->cap ? t->cap * 2 : TT_INITIAL_CAP;
	struct tt_entry *e;

	if (cap > TT_MAX_CAP)
		return -ENOSPC;
	e = calloc(cap, sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		if (t->e[i].used)
			*probe(e, cap, t->e[i].k[0], t->e[i].k[1], t->e[i].k[2]) = t->e[i];
	free(t->e);
	t->e = e;
	t->cap = cap;
	return 0;
}

struct tt_entry *ttable_get(struct ttable *t, uint64_t a, uint64_t b, uint64_t c)
{
	struct tt_entry *e;

	/* Keep the load factor under 1/2 so that probes stay short. */
	if ((t->n + 1) * 2 > t->cap && grow(t))
		return NULL;
	e = probe(t->e, t->cap, a, b, c);
	if (!e->used) {
		*e = (struct tt_entry){.k = {a, b, c}, .used = 1};
		t->n++;
	}
	return e;
}

void tt_entry_result(struct tt_entry *e, uint64_t h)
{
	uint32_t kept = e->nresults < TT_MAX_RESULTS ? e->nresults : TT_MAX_RESULTS;

	for (uint32_t i = 0; i < kept; i++)
		if (e->results[i] == h)
			return;
	if (e->nresults < TT_MAX_RESULTS)
		e->results[e->nresults++] = h;
	else
		e->nresults = TT_MAX_RESULTS + 1;
}

void ttable_free(struct ttable *t)
{
	free(t->e);
	*t = (struct ttable){0};
}

void trace_agg_init(struct trace_agg *a, uint64_t series_start_ns, uint64_t bucket_ns, uint32_t max_buckets)
{
	memset(a, 0, sizeof(*a));
	a->rip_event = -1;
	a->series_start_ns = series_start_ns;
	a->bucket_ns = bucket_ns;
	a->max_buckets = max_buckets;
}

static struct trace_thread *thread_of(struct trace_agg *a, pid_t tid, const char *comm)
{
	struct trace_thread *t;

	for (unsigned i = 0; i < a->nthreads; i++)
		if (a->thread[i].tid == tid)
			return &a->thread[i];
	if (a->nthreads == TRACE_MAX_THREADS)
		return NULL;
	t = &a->thread[a->nthreads];
	*t = (struct trace_thread){.tid = tid, .vcpu = (int)a->nthreads, .kind = -1, .reason = -1};
	snprintf(t->comm, sizeof(t->comm), "%s", comm ? comm : "");
	a->nthreads++;
	return t;
}

void trace_agg_set_callers(struct trace_agg *a, const struct trace_callers *c, void *ctx)
{
	a->callers = c;
	a->callers_ctx = ctx;
}

void trace_agg_set_vcpu(struct trace_agg *a, pid_t tid, int vcpu)
{
	struct trace_thread *t = thread_of(a, tid, NULL);

	if (t)
		t->vcpu = vcpu;
}

static int reason_index(struct trace_agg *a, const char *name)
{
	for (unsigned i = 0; i < a->nreasons; i++)
		if (strcmp(a->reason[i].name, name) == 0)
			return (int)i;
	if (a->nreasons == TRACE_MAX_REASONS)
		return -1;
	snprintf(a->reason[a->nreasons].name, sizeof(a->reason[0].name), "%s", name);
	return (int)a->nreasons++;
}

/* The bucket of `ts` in t's series, growing it (bounded by max_buckets). */
static void series_add(struct trace_agg *a, struct trace_thread *t, uint64_t ts)
{
	uint64_t i;

	if (!a->bucket_ns || ts < a->series_start_ns)
		return;
	i = (ts - a->series_start_ns) / a->bucket_ns;
	if (i >= a->max_buckets)
		return;
	if (i >= t->nbuckets) {
		uint32_t n = t->nbuckets ? t->nbuckets : 64;
		uint32_t *b;

		while (n <= i)
			n = n * 2 < a->max_buckets ? n * 2 : a->max_buckets;
		b = realloc(t->buckets, n * sizeof(*b));
		if (!b)
			return;
		memset(b + t->nbuckets, 0, (n - t->nbuckets) * sizeof(*b));
		t->buckets = b;
		t->nbuckets = n;
	}
	t->buckets[i]++;
}

/*
 * A new RIP-carrying event ends the previous one: the gap since it is the
 * cost of that exit (exit handling, re-entry and the guest instructions up
 * to the next exit, which in a probe loop are a handful). Gaps over
 * TRACE_COST_CAP_NS mean the vCPU was halted or preempted and are not costs.
 */
static void close_previous(struct trace_agg *a, struct trace_thread *t, uint64_t ts)
{
	uint64_t gap;

	if (!t->have_rip || ts < t->rip_ts)
		return;
	gap = ts - t->rip_ts;
	if (gap > TRACE_COST_CAP_NS)
		return;
	if (t->kind >= 0) {
		a->cost_ns[t->kind] += gap;
		a->cost_n[t->kind]++;
	}
	if (t->reason >= 0) {
		a->reason[t->reason].gap_ns += gap;
		a->reason[t->reason].gaps++;
	}
}

static void count_key(struct trace_agg *a, struct ttable *tab, uint64_t k0, uint64_t k1, uint64_t k2, int has_result,
		      uint64_t result);

/* Where an exit at `rip` counts: a probe trampoline's exits at the instruction it stands in for. */
static uint64_t exit_site(const struct trace_agg *a, uint64_t rip)
{
	uint64_t site;

	return a->callers && a->callers->site_of(a->callers_ctx, rip, &site) ? site : rip;
}

/* An exit in the guest's user half, counted by the address space (CR3) it ran in when the probes know it. */
static void count_user(struct trace_agg *a, struct trace_thread *t, const struct trace_line *l)
{
	uint64_t cr3;

	t->user_counted = 0;
	if (a->callers && a->callers->address_space &&
	    a->callers->address_space(a->callers_ctx, t->vcpu, l->ts_ns, &cr3)) {
		count_key(a, &a->user, cr3, exit_site(a, l->rip),
			  t->reason >= 0 ? (uint64_t)t->reason : TRACE_REASON_EMULATED, 0, 0);
		t->user_counted = 1;
		t->user_cr3 = cr3;
	} else {
		a->user_unknown++;
	}
}

static void rip_event(struct trace_agg *a, struct trace_thread *t, const struct trace_line *l)
{
	/*
	 * SVM without NRIP save skips the exiting instruction through the
	 * emulator: a kvm_emulate_insn at the same RIP right after kvm_exit is
	 * the same exit, not a new one.
	 */
	if (l->ev == TEV_KVM_EMULATE_INSN && t->have_rip && t->rip_ev == TEV_KVM_EXIT && t->rip == l->rip)
		return;
	close_previous(a, t, l->ts_ns);
	if (a->rip_event < 0)
		a->rip_event = (int)l->ev;
	t->have_rip = 1;
	t->rip = l->rip;
	t->rip_ts = l->ts_ns;
	t->rip_ev = (int)l->ev;
	t->kind = -1;
	t->reason = -1;
	if (l->ev == TEV_KVM_EXIT) {
		t->reason = reason_index(a, l->reason);
		if (t->reason >= 0)
			a->reason[t->reason].count++;
		t->kind = COST_OTHER;
	}
	count_key(a, &a->rips, exit_site(a, l->rip), t->reason >= 0 ? (uint64_t)t->reason : TRACE_REASON_EMULATED, 0, 0,
		  0);
	t->user_counted = 0;
	if (l->rip < TRACE_USER_TOP)
		count_user(a, t, l);
	series_add(a, t, l->ts_ns);
}

/* Marks what the current RIP event turned out to be (for its cost). */
static void set_kind(struct trace_thread *t, enum cost_kind k)
{
	if (t->have_rip)
		t->kind = (int)k;
}

static void count_key(struct trace_agg *a, struct ttable *tab, uint64_t k0, uint64_t k1, uint64_t k2, int has_result,
		      uint64_t result)
{
	struct tt_entry *e = ttable_get(tab, k0, k1, k2);

	if (!e) {
		a->malformed++;
		return;
	}
	e->count++;
	if (has_result)
		tt_entry_result(e, result);
}

/*
 * The instruction an event is attributed to and, when a probe resolved it,
 * the caller: a trampoline's RIP becomes the probed instruction's, and the
 * hit that sent the vCPU there gives the return addresses.
 */
struct attribution {
	uint64_t rip;
	uint64_t ret[CALLSITE_STACK];
	unsigned depth, reliable;
};

static void attribute(struct trace_agg *a, const struct trace_thread *t, uint64_t ts, struct attribution *at)
{
	uint64_t site;

	at->rip = t->have_rip ? t->rip : TRACE_NO_RIP;
	at->depth = 0;
	at->reliable = 0;
	if (a->callers && at->rip != TRACE_NO_RIP &&
	    a->callers->resolve(a->callers_ctx, t->vcpu, at->rip, ts, &site, at->ret, &at->depth, &at->reliable))
		at->rip = site;
}

/* The slot of (ret, site) in tab: its own or the free one where it goes; -1 when the table is full. */
static int64_t callsite_slot(const struct callsite *tab, uint64_t ret, uint64_t site)
{
	size_t i = (size_t)mix(mix(0, ret), site) & (CALLSITE_MAX - 1);

	for (size_t n = 0; n < CALLSITE_MAX; n++, i = (i + 1) & (CALLSITE_MAX - 1))
		if (!tab[i].used || (tab[i].ret == ret && tab[i].site == site))
			return (int64_t)i;
	return -1;
}

const struct callsite *trace_agg_callsite(const struct trace_agg *a, uint64_t idx)
{
	return a->callsites && idx < CALLSITE_MAX && a->callsites[idx].used ? &a->callsites[idx] : NULL;
}

int64_t trace_agg_callsite_find(const struct trace_agg *a, uint64_t ret, uint64_t site)
{
	int64_t i = a->callsites ? callsite_slot(a->callsites, ret, site) : -1;

	return i >= 0 && a->callsites[i].used ? i : -1;
}

/* Counts a probe-attributed event at its call site (the first hit's stack is kept). The site's index, or -1. */
static int64_t count_callsite(struct trace_agg *a, const struct attribution *at, enum cost_kind kind)
{
	struct callsite *c;
	int64_t i;

	if (!a->callsites && !(a->callsites = calloc(CALLSITE_MAX, sizeof(*a->callsites))))
		return -1;
	i = callsite_slot(a->callsites, at->ret[0], at->rip);
	if (i < 0) {
		a->callsite_overflow++;
		return -1;
	}
	c = &a->callsites[i];
	if (!c->used) {
		*c = (struct callsite){.ret = at->ret[0],
				       .site = at->rip,
				       .kind = (uint8_t)kind,
				       .used = 1,
				       .depth = (uint8_t)at->depth,
				       .reliable = (uint8_t)at->reliable};
		memcpy(c->stack, at->ret, at->depth * sizeof(at->ret[0]));
	}
	c->count++;
	return i;
}

/* Counts the exit at `rip` towards probing; asks for a probe when it starts repeating. */
static void count_hot(struct trace_agg *a, uint64_t rip, enum cost_kind kind, uint64_t ts)
{
	struct tt_entry *e;

	if (!a->callers || rip == TRACE_NO_RIP)
		return;
	e = ttable_get(&a->hot, rip, (uint64_t)kind, 0);
	if (e && ++e->count == PROBE_HOT_EXITS)
		a->callers->hot(a->callers_ctx, rip, (int)kind, ts);
}

/* The current exit is a caller probe's port write: the profiler's own cost, not the guest's "io". */
static void probe_exit(struct trace_agg *a, struct trace_thread *t)
{
	int r = reason_index(a, PROBE_REASON);

	struct tt_entry *e;

	if (t->reason < 0 || r < 0 || t->reason == r || !t->have_rip)
		return;
	a->reason[t->reason].count--;
	a->reason[r].count++;
	e = ttable_get(&a->rips, exit_site(a, t->rip), (uint64_t)t->reason, 0);
	if (e && e->count)
		e->count--;
	count_key(a, &a->rips, exit_site(a, t->rip), (uint64_t)r, 0, 0, 0);
	if (t->user_counted) { /* the same move in the user table */
		e = ttable_get(&a->user, t->user_cr3, exit_site(a, t->rip), (uint64_t)t->reason);
		if (e && e->count)
			e->count--;
		count_key(a, &a->user, t->user_cr3, exit_site(a, t->rip), (uint64_t)r, 0, 0);
	}
	t->reason = r;
	t->kind = COST_OTHER;
}

static void cpuid_event(struct trace_agg *a, struct trace_thread *t, const struct trace_line *l)
{
	uint64_t h = mix(mix(mix(mix(0, l->regs[0]), l->regs[1]), l->regs[2]), l->regs[3]);
	struct attribution at;
	int64_t cs;

	set_kind(t, COST_CPUID);
	attribute(a, t, l->ts_ns, &at);
	if (at.depth && (cs = count_callsite(a, &at, COST_CPUID)) >= 0) {
		count_key(a, &a->cpuid_callers, (uint64_t)cs, l->leaf, l->subleaf, 1, h);
		return;
	}
	count_key(a, &a->cpuid, at.rip, l->leaf, l->subleaf, 1, h);
	if (at.rip == (t->have_rip ? t->rip : TRACE_NO_RIP)) /* not a trampoline: a candidate */
		count_hot(a, at.rip, COST_CPUID, l->ts_ns);
}

static void msr_event(struct trace_agg *a, struct trace_thread *t, const struct trace_line *l)
{
	enum cost_kind kind = l->write ? COST_MSR_WRITE : COST_MSR_READ;
	/* A #GP result differs from every value: hash it apart. */
	uint64_t h = l->gp ? ~mix(0, l->regs[0]) : mix(0, l->regs[0]);
	struct attribution at;
	int64_t cs;

	set_kind(t, kind);
	attribute(a, t, l->ts_ns, &at);
	if (at.depth && (cs = count_callsite(a, &at, kind)) >= 0) {
		count_key(a, &a->msr_callers, (uint64_t)cs, l->msr, (uint64_t)l->write, 1, h);
		return;
	}
	count_key(a, &a->msr, at.rip, l->msr, (uint64_t)l->write, 1, h);
	if (at.rip == (t->have_rip ? t->rip : TRACE_NO_RIP) && !l->gp) /* an MSR that faults is never probed */
		count_hot(a, at.rip, kind, l->ts_ns);
}

void trace_agg_event(struct trace_agg *a, const struct trace_line *l)
{
	struct trace_thread *t = thread_of(a, l->tid, l->comm);

	if (!t) {
		a->unknown_threads++;
		return;
	}
	if (!a->first_ts || l->ts_ns < a->first_ts)
		a->first_ts = l->ts_ns;
	if (l->ts_ns > a->last_ts)
		a->last_ts = l->ts_ns;
	a->events[l->ev]++;
	t->events++;
	if (!t->comm[0] || (t->comm[0] == '<' && l->comm[0] != '<')) /* "<...>": the comm cache missed */
		snprintf(t->comm, sizeof(t->comm), "%s", l->comm);
	switch (l->ev) {
	case TEV_KVM_EXIT:
	case TEV_KVM_EMULATE_INSN:
		rip_event(a, t, l);
		return;
	case TEV_KVM_CPUID:
		cpuid_event(a, t, l);
		return;
	case TEV_KVM_MSR:
		msr_event(a, t, l);
		return;
	case TEV_KVM_PIO:
		set_kind(t, COST_PIO);
		count_key(a, &a->pio, l->addr, (uint64_t)l->write, 0, 0, 0);
		if (a->callers && l->addr == PROBE_PORT && l->write)
			probe_exit(a, t);
		return;
	case TEV_KVM_MMIO:
		set_kind(t, COST_MMIO);
		count_key(a, &a->mmio, l->addr, (uint64_t)l->write, 0, 0, 0);
		return;
	case TEV_KVM_HYPERCALL:
		set_kind(t, COST_HYPERCALL);
		count_key(a, &a->hcall, l->nr, 0, 0, 0, 0);
		return;
	default:
		return;
	}
}

void trace_agg_line(struct trace_agg *a, const char *line)
{
	struct trace_line l;
	uint64_t lost = 0;

	a->lines++;
	switch (trace_parse_line(line, &l, &lost)) {
	case TP_EVENT:
		trace_agg_event(a, &l);
		return;
	case TP_LOST:
		a->lost += lost;
		return;
	case TP_MALFORMED:
		a->malformed++;
		return;
	default:
		return;
	}
}

double trace_agg_mean_cost(const struct trace_agg *a, enum cost_kind k)
{
	return a->cost_n[k] ? (double)a->cost_ns[k] / (double)a->cost_n[k] : 0.0;
}

void trace_agg_free(struct trace_agg *a)
{
	for (unsigned i = 0; i < a->nthreads; i++)
		free(a->thread[i].buckets);
	ttable_free(&a->cpuid);
	ttable_free(&a->msr);
	ttable_free(&a->pio);
	ttable_free(&a->mmio);
	ttable_free(&a->hcall);
	ttable_free(&a->rips);
	ttable_free(&a->hot);
	ttable_free(&a->user);
	ttable_free(&a->cpuid_callers);
	ttable_free(&a->msr_callers);
	free(a->callsites);
	a->callsites = NULL;
	a->nthreads = 0;
}
