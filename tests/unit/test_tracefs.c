/* test_tracefs.c - kvm trace lines (recorded on SVM, synthetic kvm_emulate_insn style), attribution, lost events. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "brisk/profile.h"

#define FIXTURES "tests/unit/fixtures/"
/* Recorded with scripts/nested-kvm.sh (Linux 6.1 kvm_amd under QEMU TCG): brisk run of cpuid-storm / msr-storm. */
#define SVM_CPUID FIXTURES "trace-svm-cpuid-storm.txt"
#define SVM_MSR	  FIXTURES "trace-svm-msr-storm.txt"
#define EMULATE	  FIXTURES "trace-emulate-synthetic.txt"

static void feed_file(struct trace_agg *a, const char *path)
{
	char line[4096];
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		trace_agg_line(a, line);
	}
	fclose(f);
}

static uint64_t count_of(const struct ttable *t, uint64_t k0, uint64_t k1, uint64_t k2)
{
	for (size_t i = 0; i < t->cap; i++)
		if (t->e[i].used && t->e[i].k[0] == k0 && t->e[i].k[1] == k1 && t->e[i].k[2] == k2)
			return t->e[i].count;
	return 0;
}

static uint64_t total(const struct ttable *t)
{
	uint64_t n = 0;

	for (size_t i = 0; i < t->cap; i++)
		n += t->e[i].used ? t->e[i].count : 0;
	return n;
}

static void parse_svm_lines(void **state)
{
	struct trace_line l;
	uint64_t lost = 0;

	(void)state;
	assert_int_equal(trace_parse_line("           brisk-151     [001] .....     6.159167: kvm_exit: vcpu 0 reason "
					  "cpuid rip 0x100103 info1 0x0000000000000000 info2 0x0000000000000000 "
					  "intr_info 0x00000000 error_code 0x00000000",
					  &l, &lost),
			 TP_EVENT);
	assert_int_equal(l.tid, 151);
	assert_string_equal(l.comm, "brisk");
	assert_int_equal(l.cpu, 1);
	assert_int_equal(l.ev, TEV_KVM_EXIT);
	assert_true(l.has_rip);
	assert_int_equal(l.rip, 0x100103);
	assert_string_equal(l.reason, "cpuid");
	assert_int_equal(l.ts_ns, 6159167000ull);

	assert_int_equal(trace_parse_line("           brisk-151     [001] .....     6.160503: kvm_cpuid: func 40000100 "
					  "idx 0 rax 0 rbx 0 rcx 0 rdx 0, cpuid entry not found",
					  &l, &lost),
			 TP_EVENT);
	assert_int_equal(l.ev, TEV_KVM_CPUID);
	assert_int_equal(l.leaf, 0x40000100);
	assert_int_equal(l.subleaf, 0);
	assert_false(l.has_rip);

	assert_int_equal(
	    trace_parse_line("           <...>-156     [001] .....     6.844035: kvm_msr: msr_read c0000080 "
			     "= 0x500",
			     &l, &lost),
	    TP_EVENT);
	assert_int_equal(l.tid, 156);
	assert_int_equal(l.msr, 0xc0000080);
	assert_int_equal(l.regs[0], 0x500);
	assert_false(l.write);

	assert_int_equal(
	    trace_parse_line("           brisk-151     [001] .....     6.150768: kvm_pio: pio_write at 0x3f9 "
			     "size 1 count 1 val 0x0 ",
			     &l, &lost),
	    TP_EVENT);
	assert_int_equal(l.addr, 0x3f9);
	assert_true(l.write);
}

static void parse_emulate_and_markers(void **state)
{
	struct trace_line l;
	uint64_t lost = 0;

	(void)state;
	assert_int_equal(
	    trace_parse_line("  CPU 0/KVM-2001    [000] .....   100.000020: kvm_emulate_insn: 0:100103:0f a2 "
			     "(prot64)",
			     &l, &lost),
	    TP_EVENT);
	assert_string_equal(l.comm, "CPU 0/KVM");
	assert_int_equal(l.tid, 2001);
	assert_int_equal(l.rip, 0x100103);
	/* Outside 64-bit mode the linear RIP is CS base + RIP. */
	assert_int_equal(
	    trace_parse_line("  x-7 (   5) [001] .....   1.000090: kvm_emulate_insn: f0000:fff0:ea 5b (real)", &l,
			     &lost),
	    TP_EVENT);
	assert_int_equal(l.tid, 7);
	assert_int_equal(l.rip, 0xffff0);
	assert_int_equal(trace_parse_line("CPU:3 [LOST 42 EVENTS]", &l, &lost), TP_LOST);
	assert_int_equal(lost, 42);
	assert_int_equal(trace_parse_line("# tracer: nop", &l, &lost), TP_IGNORED);
	assert_int_equal(trace_parse_line("  x-7 [001] .....  1.5: sched_switch: prev=x", &l, &lost), TP_IGNORED);
	assert_int_equal(trace_parse_line("garbage without context", &l, &lost), TP_MALFORMED);
	assert_int_equal(trace_parse_line("  x-7 [001] .....  1.5: kvm_cpuid: func zz", &l, &lost), TP_MALFORMED);
}

/* Recorded SVM trace: every CPUID of the probe is attributed to the RIP of the kvm_exit before it. */
static void svm_cpuid_attribution(void **state)
{
	struct trace_agg a;

	(void)state;
	trace_agg_init(&a, 0, 0, 0);
	feed_file(&a, SVM_CPUID);
	assert_int_equal(a.malformed, 0);
	assert_int_equal(a.events[TEV_KVM_CPUID], 120);
	assert_int_equal(a.rip_event, TEV_KVM_EXIT);
	assert_int_equal(total(&a.cpuid), 120);
	for (uint32_t i = 0; i < 120; i++)
		assert_int_equal(count_of(&a.cpuid, 0x100103, 0x40000000u + 0x100 * i, 0), 1);
	assert_int_equal(a.nthreads, 1);
	assert_true(trace_agg_mean_cost(&a, COST_CPUID) > 0);
	trace_agg_free(&a);
}

/* Recorded SVM trace of msr-storm (calls=5): two RIPs, five reads each, both cacheable. */
static void svm_msr_redundant(void **state)
{
	struct trace_agg a;
	struct redundant *r;
	int n;

	(void)state;
	trace_agg_init(&a, 0, 0, 0);
	feed_file(&a, SVM_MSR);
	assert_int_equal(count_of(&a.msr, 0x1000d5, 0x1b, 0), 5);
	assert_int_equal(total(&a.msr), 13);
	n = redundant_find(&a, &r);
	assert_int_equal(n, 2);
	for (int i = 0; i < n; i++) {
		assert_string_equal(r[i].kind, "msr");
		assert_int_equal(r[i].count, 5);
		assert_int_equal(r[i].distinct_inputs, 1);
		assert_int_equal(r[i].cacheable, 4);
		assert_string_equal(r[i].cost_source, "trace");
	}
	free(r);
	trace_agg_free(&a);
}

/* kvm_emulate_insn style: attribution per thread, lost events, costs from the gaps, series buckets. */
static void emulate_style(void **state)
{
	struct trace_agg a;
	struct redundant *r;
	int n;

	(void)state;
	trace_agg_init(&a, 100000000000ull, 10000, 16);
	feed_file(&a, EMULATE);
	assert_int_equal(a.malformed, 0);
	assert_int_equal(a.lost, 7);
	assert_int_equal(a.rip_event, TEV_KVM_EMULATE_INSN);
	assert_int_equal(a.nthreads, 2);
	assert_int_equal(count_of(&a.cpuid, 0x100103, 0x40000000, 0), 2);
	assert_int_equal(count_of(&a.cpuid, 0x100103, 0x40000200, 0), 2);
	assert_int_equal(count_of(&a.msr, 0x200000, 0x1b, 0), 2);
	/* 10 us from each probe CPUID's emulate_insn to the next one on the same thread. */
	assert_int_equal((int)trace_agg_mean_cost(&a, COST_CPUID), 10000);
	n = redundant_find(&a, &r);
	assert_int_equal(n, 2);
	/* cpuid: 6 x 10 us; msr: 2 x mean(30, 15) us. Ranked by cost. */
	assert_string_equal(r[0].kind, "cpuid");
	assert_true(r[0].cost_us > r[1].cost_us);
	assert_int_equal(r[0].rip, 0x100103);
	assert_int_equal(r[0].count, 6);
	assert_int_equal(r[0].distinct_inputs, 3);
	assert_int_equal(r[0].distinct_results, 2);
	assert_int_equal(r[0].cacheable, 3);
	assert_int_equal(r[1].rip, 0x200000);
	free(r);
	/* 10 us buckets from t=100 s: thread 2001's RIP events are at 10, 20, ... 80 us. */
	assert_int_equal(a.thread[0].tid, 2001);
	assert_int_equal(a.thread[0].buckets[0], 0);
	assert_int_equal(a.thread[0].buckets[1], 1);
	assert_int_equal(a.thread[0].buckets[8], 1);
	trace_agg_free(&a);
}

/* A result that differs for the same input makes the group non-cacheable. */
static void nondeterministic_not_reported(void **state)
{
	struct trace_agg a;
	struct trace_line rip = {.tid = 1, .ev = TEV_KVM_EMULATE_INSN, .has_rip = 1, .rip = 0x1000};
	struct trace_line msr = {.tid = 1, .ev = TEV_KVM_MSR, .msr = 0x10};
	struct redundant *r;

	(void)state;
	trace_agg_init(&a, 0, 0, 0);
	for (int i = 0; i < 5; i++) {
		rip.ts_ns = (uint64_t)i * 100;
		msr.ts_ns = rip.ts_ns + 1;
		msr.regs[0] = (uint64_t)i; /* a TSC-like MSR: a new value each time */
		trace_agg_event(&a, &rip);
		trace_agg_event(&a, &msr);
	}
	assert_int_equal(redundant_find(&a, &r), 0);
	free(r);
	trace_agg_free(&a);
}

/* An event with no RIP event before it on its thread keeps the "no RIP" key; another thread's RIP is not used. */
static void attribution_is_per_thread(void **state)
{
	struct trace_agg a;
	struct trace_line rip = {.tid = 1, .ev = TEV_KVM_EXIT, .has_rip = 1, .rip = 0x1000, .reason = "cpuid"};
	struct trace_line c = {.tid = 2, .ev = TEV_KVM_CPUID, .leaf = 1};

	(void)state;
	trace_agg_init(&a, 0, 0, 0);
	trace_agg_event(&a, &rip);
	trace_agg_event(&a, &c);
	assert_int_equal(count_of(&a.cpuid, TRACE_NO_RIP, 1, 0), 1);
	assert_int_equal(count_of(&a.cpuid, 0x1000, 1, 0), 0);
	trace_agg_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(parse_svm_lines),
	    cmocka_unit_test(parse_emulate_and_markers),
	    cmocka_unit_test(svm_cpuid_attribution),
	    cmocka_unit_test(svm_msr_redundant),
	    cmocka_unit_test(emulate_style),
	    cmocka_unit_test(nondeterministic_not_reported),
	    cmocka_unit_test(attribution_is_per_thread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
