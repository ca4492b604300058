/* report_text.c - the aligned text report, rendered from a brisk-profile/1 object (so text and JSON never disagree). */
#include <json-c/json.h>
#include <string.h>

#include "brisk/profile.h"

typedef struct json_object jo;

#define TOP_ROWS 15

static jo *get(jo *o, const char *k)
{
	jo *v = NULL;

	return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static const char *str(jo *o, const char *k)
{
	jo *v = get(o, k);

	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "-";
}

static long long num(jo *o, const char *k)
{
	return (long long)json_object_get_int64(get(o, k));
}

static double dnum(jo *o, const char *k)
{
	return json_object_get_double(get(o, k));
}

static size_t len(jo *a)
{
	return a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
}

static jo *at(jo *a, size_t i)
{
	return json_object_array_get_idx(a, i);
}

static void section(FILE *f, const char *title)
{
	fprintf(f, "\n== %s ==\n", title);
}

static void timeline(jo *r, FILE *f)
{
	jo *ph = get(r, "phases"), *ms = get(r, "milestones");

	if (!len(ph) && !len(ms))
		return;
	section(f, "Timeline (us since exec)");
	fprintf(f, "%-24s %12s %12s\n", "VMM phase", "end us", "took us");
	for (size_t i = 0; i < len(ph); i++)
		fprintf(f, "%-24s %12.1f %12.1f\n", str(at(ph, i), "name"), dnum(at(ph, i), "end_us"),
			dnum(at(ph, i), "dur_us"));
	fprintf(f, "%-24s %12s\n", "guest milestone", "at us");
	for (size_t i = 0; i < len(ms); i++)
		fprintf(f, "%-24s %12.1f\n", str(at(ms, i), "name"), dnum(at(ms, i), "us"));
}

static void exits(jo *r, FILE *f)
{
	jo *e = get(r, "exits"), *br = get(e, "by_reason"), *ba = get(e, "by_address");

	if (!len(br))
		return;
	section(f, "Userspace exits (handled by brisk)");
	fprintf(f, "%-5s %-16s %10s %12s\n", "vcpu", "reason", "count", "total us");
	for (size_t i = 0; i < len(br); i++)
		fprintf(f, "%-5lld %-16s %10lld %12.1f\n", num(at(br, i), "vcpu"), str(at(br, i), "reason"),
			num(at(br, i), "count"), dnum(at(br, i), "total_us"));
	fprintf(f, "\n%-5s %-5s %-14s %-5s %10s %12s\n", "vcpu", "kind", "address", "dir", "count", "total us");
	for (size_t i = 0; i < len(ba) && i < TOP_ROWS; i++)
		fprintf(f, "%-5lld %-5s %-14s %-5s %10lld %12.1f\n", num(at(ba, i), "vcpu"), str(at(ba, i), "kind"),
			str(at(ba, i), "addr_hex"), str(at(ba, i), "dir"), num(at(ba, i), "count"),
			dnum(at(ba, i), "total_us"));
	if (len(ba) > TOP_ROWS)
		fprintf(f, "(%zu more addresses in the JSON report)\n", len(ba) - TOP_ROWS);
	if (num(e, "address_overflow"))
		fprintf(f, "%lld exits at addresses beyond the per-vCPU table\n", num(e, "address_overflow"));
}

static void kstat_rows(FILE *f, const char *who, jo *stats)
{
	for (size_t i = 0; i < len(stats); i++) {
		jo *s = at(stats, i), *d = get(s, "deltas"), *v = get(s, "values");

		fprintf(f, "%-8s %-28s %-10s", who, str(s, "name"), str(s, "kind"));
		for (size_t k = 0; k < len(d); k++)
			fprintf(f, " %12lld", (long long)json_object_get_int64(at(d, k)));
		fprintf(f, " %14lld\n", len(v) ? (long long)json_object_get_int64(at(v, len(v) - 1)) : 0LL);
	}
}

static void kvm_stats(jo *r, FILE *f)
{
	jo *k = get(r, "kvm_stats"), *snaps = get(k, "snapshots"), *vcpus = get(k, "vcpus");
	char who[16];

	if (!get(k, "available"))
		return;
	section(f, "KVM statistics (KVM_GET_STATS_FD; non-zero only)");
	if (!json_object_get_boolean(get(k, "available"))) {
		fprintf(f, "unavailable: %s\n", str(k, "reason"));
		return;
	}
	fprintf(f, "%-8s %-28s %-10s", "scope", "statistic", "kind");
	for (size_t i = 1; i < len(snaps); i++)
		fprintf(f, " %12.12s", str(at(snaps, i), "id"));
	fprintf(f, " %14s\n", "value at end");
	kstat_rows(f, "vm", get(k, "vm"));
	for (size_t i = 0; i < len(vcpus); i++) {
		snprintf(who, sizeof(who), "vcpu%lld", num(at(vcpus, i), "vcpu"));
		kstat_rows(f, who, get(at(vcpus, i), "stats"));
	}
	if (len(snaps) > 1)
		fprintf(f, "(columns: change from the previous snapshot to the one named)\n");
}

static void tracing(jo *r, FILE *f)
{
	jo *t = get(r, "tracing"), *reasons = get(t, "exit_reasons");

	section(f, "In-kernel exits (kvm tracepoints)");
	if (!json_object_get_boolean(get(t, "available"))) {
		fprintf(f, "unavailable: %s\n", str(t, "reason"));
		return;
	}
	fprintf(f, "instance %s, RIP from %s, %lld lost events\n", str(t, "instance"), str(t, "rip_event"),
		num(t, "lost_events"));
	if (json_object_get_boolean(get(t, "tracefs_mounted_by_brisk")))
		fprintf(f,
			"(tracefs was not mounted: brisk mounted it at %s in a private mount namespace; the host's "
			"mounts are unchanged)\n",
			str(t, "tracefs"));
	json_object_object_foreach(get(t, "events"), name, v)
	{
		if (json_object_get_int64(v))
			fprintf(f, "  %-18s %10lld\n", name, (long long)json_object_get_int64(v));
	}
	if (!len(reasons))
		return;
	fprintf(f, "\n%-24s %10s %12s\n", "exit reason (kvm_exit)", "count", "mean us");
	for (size_t i = 0; i < len(reasons) && i < TOP_ROWS; i++)
		fprintf(f, "%-24s %10lld %12.2f\n", str(at(reasons, i), "reason"), num(at(reasons, i), "count"),
			dnum(at(reasons, i), "mean_us"));
}

/* The guest symbols used and how many exits they name. */
static void symbols(jo *r, FILE *f)
{
	jo *s = get(r, "symbols");

	if (!s)
		return;
	if (!get(s, "source")) {
		fprintf(f, "\nguest symbols: none (%s)\n", str(s, "why_none"));
		return;
	}
	fprintf(f, "\nguest symbols: %s, %lld text symbols\n", str(s, "source"), num(s, "count"));
	if (num(s, "exits"))
		fprintf(f,
			"named: %lld of %lld exits (%.1f%%); in the kernel's half of the address space %lld of %lld "
			"(%.1f%%)\n",
			num(s, "named"), num(s, "exits"), dnum(s, "named_pct"), num(s, "kernel_named"),
			num(s, "kernel_exits"), dnum(s, "kernel_named_pct"));
}

static void exit_sites(jo *r, FILE *f)
{
	jo *rows = get(get(r, "tracing"), "exit_sites");

	if (!len(rows))
		return;
	fprintf(f, "\n%-18s %-16s %10s  %s\n", "exit site (rip)", "reason", "count", "symbol");
	for (size_t i = 0; i < len(rows) && i < TOP_ROWS; i++)
		fprintf(f, "%-18s %-16s %10lld  %s\n", str(at(rows, i), "rip"), str(at(rows, i), "reason"),
			num(at(rows, i), "count"), str(at(rows, i), "symbol"));
	if (len(rows) > TOP_ROWS)
		fprintf(f, "(%zu more in the JSON report)\n", len(rows) - TOP_ROWS);
}

static void findings(jo *r, FILE *f)
{
	jo *rows = get(r, "findings");

	if (!len(rows))
		return;
	section(f, "Findings");
	for (size_t i = 0; i < len(rows); i++) {
		jo *x = at(rows, i);

		fprintf(f, "- %s", str(x, "title"));
		if (get(x, "time_us"))
			fprintf(f, " [%.1f us%s", dnum(x, "time_us"), get(x, "share_pct") ? "" : "]");
		if (get(x, "time_us") && get(x, "share_pct"))
			fprintf(f, ", %.1f%% of exit time]", dnum(x, "share_pct"));
		fprintf(f, "\n");
		if (get(x, "hint") && strcmp(str(x, "id"), "page_sizes") == 0)
			fprintf(f, "  %s\n", str(x, "hint"));
	}
}

static void probes(jo *r, FILE *f)
{
	jo *p = get(r, "probes"), *sites = get(p, "sites");

	if (!p || !json_object_get_boolean(get(p, "enabled")))
		return;
	fprintf(f,
		"\ncaller probes (docs/profiler.md \"Callers\"): %zu instructions patched; %lld hits matched a call "
		"site, %lld without a return address on the stack, %lld unmatched, %lld dropped\n",
		len(sites), num(p, "matched"), num(p, "stackless"), num(p, "unmatched"), num(p, "dropped"));
	for (size_t i = 0; i < len(sites) && i < TOP_ROWS; i++)
		fprintf(f, "  %-6s %-18s %-40s %8lld hits%s\n", str(at(sites, i), "kind"), str(at(sites, i), "rip"),
			str(at(sites, i), "symbol"), num(at(sites, i), "hits"),
			json_object_get_boolean(get(at(sites, i), "armed_at_end")) ? "" : " (restored)");
	if (get(p, "last_refusal"))
		fprintf(f, "  last instruction not probed: %s\n", str(p, "last_refusal"));
}

/* Exits in the guest's user half, by address space (the process, named by its page-table root). */
static void user(jo *r, FILE *f)
{
	jo *u = get(r, "user"), *spaces = get(u, "address_spaces");

	if (!len(spaces))
		return;
	section(f, "Exits below the kernel's half (user processes; early boot), by address space (CR3)");
	for (size_t i = 0; i < len(spaces); i++) {
		jo *x = at(spaces, i), *sites = get(x, "sites");

		fprintf(f, "cr3 %-18s %8lld exits\n", str(x, "cr3"), num(x, "exits"));
		for (size_t k = 0; k < len(sites); k++)
			fprintf(f, "  %-18s %-12s %8lld  %s\n", str(at(sites, k), "rip"), str(at(sites, k), "reason"),
				num(at(sites, k), "count"), str(at(sites, k), "symbol"));
	}
	if (num(u, "unknown_space_exits"))
		fprintf(f, "(%lld more before the first exit to userspace showed an address space)\n",
			num(u, "unknown_space_exits"));
}

static void inputs(jo *r, FILE *f, const char *key, const char *title)
{
	jo *rows = get(r, key);

	if (!len(rows))
		return;
	section(f, title);
	fprintf(f, "%-22s %10s %6s  %-18s %s\n", "input", "count", "rips", "top rip", "symbol");
	for (size_t i = 0; i < len(rows) && i < TOP_ROWS; i++) {
		jo *row = at(rows, i), *top = at(get(row, "rips"), 0);
		char in[48];

		if (strcmp(key, "cpuid") == 0)
			snprintf(in, sizeof(in), "%s.%lld", str(row, "leaf_hex"), num(row, "subleaf"));
		else
			snprintf(in, sizeof(in), "%s %s", str(row, "index_hex"), str(row, "dir"));
		fprintf(f, "%-22s %10lld %6zu  %-18s %s\n", in, num(row, "count"), len(get(row, "rips")),
			str(top, "rip"), str(top, "symbol"));
	}
	if (len(rows) > TOP_ROWS)
		fprintf(f, "(%zu more in the JSON report)\n", len(rows) - TOP_ROWS);
}

static void redundant(jo *r, FILE *f)
{
	jo *rows = get(r, "redundant");

	section(f, "Redundant work (same input, same result, same code: cacheable)");
	if (!len(rows)) {
		fprintf(f, "none found%s\n",
			json_object_get_boolean(get(get(r, "tracing"), "available")) ? ""
										     : " (needs the kvm tracepoints)");
		return;
	}
	fprintf(f, "%-5s %-34s %-34s %8s %7s %8s %9s %12s\n", "kind", "exiting instruction", "called from", "count",
		"inputs", "results", "cacheable", "est. cost us");
	for (size_t i = 0; i < len(rows) && i < TOP_ROWS; i++) {
		jo *x = at(rows, i), *st = get(x, "stack");

		fprintf(f, "%-5s %-34s %-34s %8lld %7lld %8lld %9lld %12.1f\n", str(x, "kind"),
			get(x, "symbol") ? str(x, "symbol") : str(x, "rip"),
			get(x, "caller") ? (get(x, "caller_symbol") ? str(x, "caller_symbol") : str(x, "caller")) : "-",
			num(x, "count"), num(x, "distinct_inputs"), num(x, "distinct_results"), num(x, "cacheable"),
			dnum(x, "cost_us"));
		for (size_t k = 1; k < len(st); k++)
			fprintf(f, "%-5s %-34s <- %s%s\n", "", "",
				json_object_get_boolean(get(at(st, k), "reliable")) ? "" : "? ",
				get(at(st, k), "symbol") ? str(at(st, k), "symbol") : str(at(st, k), "addr"));
	}
	fprintf(f,
		"(est. cost = count x mean cost of that exit, measured from the trace: %s; \"called from\": the "
		"return address a caller probe read, with the stack above it; \"?\": not verified, maybe stale)\n",
		str(at(rows, 0), "cost_source"));
}

static void ioctls(jo *r, FILE *f)
{
	jo *c = get(r, "ioctls"), *t = get(r, "ioctls_us");
	long long total = 0;

	if (!c || !json_object_object_length(c))
		return;
	section(f, "Host cost: KVM ioctls made by brisk");
	fprintf(f, "%-32s %8s %12s\n", "ioctl", "calls", "total us");
	json_object_object_foreach(c, name, v)
	{
		fprintf(f, "%-32s %8lld %12.1f\n", name, (long long)json_object_get_int64(v), dnum(t, name));
		total += json_object_get_int64(v);
	}
	fprintf(f, "%-32s %8lld\n", "total", total);
}

static void page_faults(jo *r, FILE *f)
{
	jo *pf = get(r, "page_faults"), *v, *ws;

	if (!pf)
		return;
	section(f, "Page faults (host)");
	fprintf(f, "process: %lld minor, %lld major\n", (long long)json_object_get_int64(get(pf, "minor")),
		(long long)json_object_get_int64(get(pf, "major")));
	v = get(pf, "vcpus");
	for (size_t i = 0; i < len(v); i++)
		fprintf(f, "vCPU %lld: %lld minor, %lld major, %lld us in the kernel (its faults included)\n",
			(long long)json_object_get_int64(get(at(v, i), "vcpu")),
			(long long)json_object_get_int64(get(at(v, i), "minor")),
			(long long)json_object_get_int64(get(at(v, i), "major")),
			(long long)json_object_get_int64(get(at(v, i), "system_us")));
	ws = get(pf, "working_set");
	if (ws)
		fprintf(f, "working set prefetched: %lld pages, reads started in %lld us, mapped in %lld us\n",
			(long long)json_object_get_int64(get(ws, "pages")),
			(long long)json_object_get_int64(get(ws, "advise_us")),
			(long long)json_object_get_int64(get(ws, "populate_us")));
}

void report_text_print(jo *r, FILE *f)
{
	jo *w = get(r, "warnings");

	fprintf(f, "brisk %s report (%s)\n", str(r, "command"), str(r, "schema"));
	timeline(r, f);
	findings(r, f);
	exits(r, f);
	kvm_stats(r, f);
	tracing(r, f);
	symbols(r, f);
	exit_sites(r, f);
	probes(r, f);
	inputs(r, f, "cpuid", "CPUID handled by KVM, by input");
	inputs(r, f, "msr", "MSR accesses handled by KVM, by index");
	redundant(r, f);
	user(r, f);
	ioctls(r, f);
	page_faults(r, f);
	if (len(w)) {
		section(f, "Warnings");
		for (size_t i = 0; i < len(w); i++)
			fprintf(f, "- %s\n", json_object_get_string(at(w, i)));
	}
}
