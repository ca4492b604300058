/* report_findings.c - what the report states on its own: page sizes, nested page faults, MSR storms, exit time. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_impl.h"

#define MSR_TSC_DEADLINE 0x6e0u
#define MSR_X2APIC_FIRST 0x800u /* x2APIC registers: 0x800 + (xAPIC offset >> 4) (SDM vol. 3A 11.12.1.2) */
#define MSR_X2APIC_LAST	 0x8ffu
#define STORM_MIN	 100 /* timer/APIC MSR writes below this are not a finding */
#define TOP_REASONS	 4

typedef struct json_object jo;

static void add(jo *o, const char *k, jo *v)
{
	json_object_object_add(o, k, v);
}

static jo *finding(const char *id, const char *title, uint64_t count, double time_us, double total_us)
{
	jo *f = json_object_new_object();

	add(f, "id", json_object_new_string(id));
	add(f, "title", json_object_new_string(title));
	add(f, "count", rj_u64(count));
	add(f, "time_us", time_us >= 0 ? json_object_new_double(time_us) : NULL);
	add(f, "share_pct", time_us >= 0 && total_us > 0 ? json_object_new_double(100.0 * time_us / total_us) : NULL);
	return f;
}

/* Time of an exit reason: its count times its measured mean cost (trace_agg: gap to the next event). */
static double reason_us(const struct trace_reason *r)
{
	return r->gaps ? (double)r->count * ((double)r->gap_ns / (double)r->gaps) / 1e3 : 0;
}

/* The exits the guest caused: a caller probe's port write is the profiler's cost (its own line in the report). */
static int guest_reason(const struct trace_reason *r)
{
	return strcmp(r->name, PROBE_REASON) != 0;
}

static double total_exit_us(const struct trace_agg *a)
{
	double t = 0;

	for (unsigned i = 0; a && i < a->nreasons; i++)
		if (guest_reason(&a->reason[i]))
			t += reason_us(&a->reason[i]);
	return t;
}

/* The instruction that took most exits of reason index `r`, as "symbol" or "0x...", into buf; "" when none. */
static const char *top_site(const struct profile_inputs *in, unsigned r, char *buf, size_t len, uint64_t *count)
{
	const struct ttable *t = &in->agg->rips;
	const struct tt_entry *best = NULL;

	for (size_t i = 0; i < t->cap; i++)
		if (t->e[i].used && t->e[i].k[1] == r && (!best || t->e[i].count > best->count))
			best = &t->e[i];
	buf[0] = '\0';
	*count = best ? best->count : 0;
	if (best && !symtab_lookup(in->syms, best->k[0], buf, len))
		snprintf(buf, len, "0x%llx", (unsigned long long)best->k[0]);
	return buf;
}

/* The last snapshot's value of VM statistic `name`, or -1. */
static int64_t vm_stat(const struct profile_inputs *in, const char *name)
{
	const struct kstats *k = in->vm_stats;
	int i = k && k->fd >= 0 && k->nsnap ? kstats_find(k, name) : -1;

	return i < 0 ? -1 : (int64_t)k->values[k->nsnap - 1][i];
}

static const char *thp_mode(char *buf, size_t len)
{
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
	char *open, *close;

	snprintf(buf, len, "unknown");
	if (f && fgets(buf, (int)len, f) && (open = strchr(buf, '[')) && (close = strchr(open, ']'))) {
		*close = '\0';
		memmove(buf, open + 1, strlen(open + 1) + 1);
	}
	if (f)
		fclose(f);
	return buf;
}

/*
 * KVM's VM statistics pages_4k/pages_2m/pages_1g (api.rst 4.134; arch/x86/kvm/mmu: the sizes it maps guest
 * memory with in its own page tables, EPT/NPT) and the nested page faults that filled them.
 */
static void page_sizes(const struct profile_inputs *in, jo *out, double total_us)
{
	int64_t p4k = vm_stat(in, "pages_4k"), p2m = vm_stat(in, "pages_2m"), p1g = vm_stat(in, "pages_1g");
	const struct trace_agg *a = in->tracing ? in->agg : NULL;
	uint64_t npf = 0;
	double npf_us = 0;
	char title[320], thp[64];
	jo *f, *d;

	for (unsigned i = 0; a && i < a->nreasons; i++)
		if (!strcmp(a->reason[i].name, "npf") || !strcmp(a->reason[i].name, "EPT_VIOLATION") ||
		    !strcmp(a->reason[i].name, "EPT_MISCONFIG")) {
			npf += a->reason[i].count;
			npf_us += reason_us(&a->reason[i]);
		}
	if (p4k < 0 && !npf)
		return;
	if (p4k >= 0) {
		uint64_t mib4 = (uint64_t)p4k * 4 / 1024, mib2 = (uint64_t)(p2m > 0 ? p2m : 0) * 2;

		snprintf(title, sizeof(title),
			 "KVM maps guest memory with %lld 4 KiB pages (%llu MiB), %lld 2 MiB (%llu MiB), %lld 1 GiB"
			 "%s; %llu nested page faults filled them",
			 (long long)p4k, (unsigned long long)mib4, (long long)(p2m > 0 ? p2m : 0),
			 (unsigned long long)mib2, (long long)(p1g > 0 ? p1g : 0),
			 p2m <= 0 && p1g <= 0 && p4k > 0 ? ": no huge pages" : "", (unsigned long long)npf);
	} else {
		snprintf(title, sizeof(title), "%llu nested page faults (KVM's page-size statistics unavailable)",
			 (unsigned long long)npf);
	}
	f = finding("page_sizes", title, npf, a ? npf_us : -1, total_us);
	d = json_object_new_object();
	add(d, "pages_4k", p4k >= 0 ? json_object_new_int64(p4k) : NULL);
	add(d, "pages_2m", p2m >= 0 ? json_object_new_int64(p2m) : NULL);
	add(d, "pages_1g", p1g >= 0 ? json_object_new_int64(p1g) : NULL);
	add(d, "nested_page_faults", rj_u64(npf));
	add(d, "host_thp", json_object_new_string(thp_mode(thp, sizeof(thp))));
	add(f, "data", d);
	add(f, "hint",
	    json_object_new_string(
		p2m <= 0 && p1g <= 0 ? "every guest page was faulted in and mapped 4 KiB at a time: --hugepages "
				       "(MADV_HUGEPAGE; the host's THP mode must allow it) lets KVM map 2 MiB at once, "
				       "--prefault populates guest RAM before boot"
				     : "huge pages in use"));
	json_object_array_add(out, f);
}

static const char *msr_name(uint64_t index)
{
	switch (index) {
	case MSR_TSC_DEADLINE:
		return "TSC_DEADLINE";
	case 0x808:
		return "x2APIC TPR";
	case 0x80b:
		return "x2APIC EOI";
	case 0x830:
		return "x2APIC ICR";
	case 0x832:
		return "x2APIC LVT timer";
	case 0x838:
		return "x2APIC initial count";
	default:
		return index >= MSR_X2APIC_FIRST && index <= MSR_X2APIC_LAST ? "x2APIC" : "MSR";
	}
}

static int timer_apic_write(const struct tt_entry *e)
{
	return e->k[2] && (e->k[1] == MSR_TSC_DEADLINE || (e->k[1] >= MSR_X2APIC_FIRST && e->k[1] <= MSR_X2APIC_LAST));
}

/* Writes to TSC_DEADLINE and the x2APIC registers: the timer and interrupt traffic of a boot, by register. */
static void msr_storm(const struct profile_inputs *in, jo *out, double total_us)
{
	const struct trace_agg *a = in->agg;
	const struct ttable *tabs[2] = {&a->msr, &a->msr_callers};
	uint64_t by_index[0x102] = {0}, total = 0; /* 0x800..0x8ff, then TSC_DEADLINE */
	double mean_us = trace_agg_mean_cost(a, COST_MSR_WRITE) / 1e3;
	char title[256];
	jo *f, *regs = json_object_new_array(), *callers = json_object_new_array();

	for (int t = 0; t < 2; t++)
		for (size_t i = 0; i < tabs[t]->cap; i++) {
			const struct tt_entry *e = &tabs[t]->e[i];

			if (!e->used || !timer_apic_write(e))
				continue;
			by_index[e->k[1] == MSR_TSC_DEADLINE ? 0x100 : e->k[1] - MSR_X2APIC_FIRST] += e->count;
			total += e->count;
		}
	if (total < STORM_MIN) {
		json_object_put(regs);
		json_object_put(callers);
		return;
	}
	for (unsigned i = 0; i <= 0x100; i++) {
		uint64_t index = i == 0x100 ? MSR_TSC_DEADLINE : MSR_X2APIC_FIRST + i;
		jo *r;

		if (!by_index[i])
			continue;
		r = json_object_new_object();
		add(r, "index_hex", rj_hex(index));
		add(r, "name", json_object_new_string(msr_name(index)));
		add(r, "count", rj_u64(by_index[i]));
		json_object_array_add(regs, r);
	}
	for (size_t i = 0; a->callsites && i < CALLSITE_MAX; i++) {
		const struct callsite *c = &a->callsites[i];
		jo *r;

		if (!c->used || c->kind != COST_MSR_WRITE)
			continue;
		r = json_object_new_object();
		add(r, "caller", rj_hex(c->ret));
		add(r, "symbol", rj_sym(in->syms, c->ret));
		add(r, "count", rj_u64(c->count));
		json_object_array_add(callers, r);
	}
	{
		unsigned top = 0;

		for (unsigned i = 1; i <= 0x100; i++)
			if (by_index[i] > by_index[top])
				top = i;
		snprintf(title, sizeof(title),
			 "%llu writes to TSC_DEADLINE and the x2APIC registers (timer and interrupt traffic), %llu of "
			 "them to %s (0x%x)",
			 (unsigned long long)total, (unsigned long long)by_index[top],
			 msr_name(top == 0x100 ? MSR_TSC_DEADLINE : MSR_X2APIC_FIRST + top),
			 top == 0x100 ? MSR_TSC_DEADLINE : MSR_X2APIC_FIRST + top);
	}
	f = finding("timer_apic_writes", title, total, mean_us > 0 ? (double)total * mean_us : -1, total_us);
	add(f, "data", json_object_new_object());
	add(json_object_object_get(f, "data"), "registers", regs);
	add(json_object_object_get(f, "data"), "callers", callers);
	json_object_array_add(out, f);
}

static int cmp_time(const void *x, const void *y)
{
	double a = reason_us(*(const struct trace_reason *const *)x),
	       b = reason_us(*(const struct trace_reason *const *)y);

	return a > b ? -1 : a < b;
}

/* The exit reasons that took most of the exit time, as one finding each. */
static void exit_time(const struct profile_inputs *in, jo *out, double total_us)
{
	const struct trace_agg *a = in->agg;
	const struct trace_reason *v[TRACE_MAX_REASONS];
	unsigned n = 0;

	for (unsigned i = 0; i < a->nreasons; i++)
		if (a->reason[i].count && guest_reason(&a->reason[i]))
			v[n++] = &a->reason[i];
	qsort(v, n, sizeof(v[0]), cmp_time);
	for (unsigned i = 0; i < n && i < TOP_REASONS; i++) {
		char title[800], site[300];
		double us = reason_us(v[i]);
		uint64_t at;

		top_site(in, (unsigned)(v[i] - a->reason), site, sizeof(site), &at);
		snprintf(title, sizeof(title),
			 "%.1f%% of the in-kernel exit time is \"%s\" exits (%llu, %.1f us each), %llu of them at %s",
			 total_us > 0 ? 100.0 * us / total_us : 0.0, v[i]->name, (unsigned long long)v[i]->count,
			 v[i]->count ? us / (double)v[i]->count : 0.0, (unsigned long long)at, site);
		json_object_array_add(out, finding("exit_time", title, v[i]->count, us, total_us));
	}
}

/* The most expensive redundant group (redundant[] has them all). */
static void redundant_top(const struct profile_inputs *in, jo *out, double total_us)
{
	struct redundant *r = NULL;
	int n = redundant_find(in->agg, &r);
	char title[800], site[300] = "", caller[300] = "";

	if (n > 0) {
		if (!symtab_lookup(in->syms, r[0].rip, site, sizeof(site)))
			snprintf(site, sizeof(site), "0x%llx", (unsigned long long)r[0].rip);
		if (r[0].caller && !symtab_lookup(in->syms, r[0].caller, caller, sizeof(caller)))
			snprintf(caller, sizeof(caller), "0x%llx", (unsigned long long)r[0].caller);
		snprintf(title, sizeof(title),
			 "%llu of %llu %s exits at %s%s%s repeat an answer already given (cacheable)",
			 (unsigned long long)r[0].cacheable, (unsigned long long)r[0].count, r[0].kind, site,
			 caller[0] ? ", called from " : "", caller);
		json_object_array_add(out, finding("redundant", title, r[0].cacheable,
						   (double)r[0].cacheable * r[0].mean_cost_us, total_us));
	}
	free(r);
}

jo *report_findings_json(const struct profile_inputs *in)
{
	jo *out = json_object_new_array();
	const struct trace_agg *a = in->tracing ? in->agg : NULL;
	double total = total_exit_us(a);

	page_sizes(in, out, total);
	if (!a)
		return out;
	redundant_top(in, out, total);
	msr_storm(in, out, total);
	exit_time(in, out, total);
	return out;
}
