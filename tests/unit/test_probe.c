/* test_probe.c - caller probes: call decoding, the stack scan, arming and the exit hook, the join with the trace. */
#include <errno.h>
#include <linux/kvm.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/mem.h"
#include "brisk/probe.h"
#include "brisk/timeline.h"

/*
 * A little guest, identity-mapped with 2 MiB pages (PML4 0x1000, PDPT 0x2000, PD 0x3000):
 *   helper  0x200000: push %rbx; cpuid; pop %rbx; ret          (the shared helper, cpuid at +1)
 *   loop_fn 0x200100: call helper                               (returns to 0x200105)
 *   outer   0x200200: call loop_fn                              (returns to 0x200205)
 *   other   0x200300: call *0x10(%rip) -> pointer to helper    (returns to 0x200306)
 *   _etext  0x200400, the trampolines after it
 *   stack   0x300000: saved rbx, 0x200105, junk, 0x200205
 */
#define MEM_SIZE    (16ull << 20)
#define HELPER	    0x200000ull
#define SITE	    (HELPER + 1)
#define LOOP_FN	    0x200100ull
#define OUTER	    0x200200ull
#define OTHER	    0x200300ull
#define ETEXT	    0x200400ull
#define STACK	    0x300000ull
#define UNMAPPED_SP 0x2000000ull /* past the 16 MiB identity map */

static struct gmem mem;
static struct symtab syms;
static char err[256];
static const char map[] = "0000000000200000 t helper\n"
			  "0000000000200100 t loop_fn\n"
			  "0000000000200200 t outer\n"
			  "0000000000200300 t other\n"
			  "0000000000200400 T _etext\n";

static void put(uint64_t gpa, const void *b, size_t n)
{
	assert_int_equal(gmem_write(&mem, gpa, b, n), 0);
}

static void put64(uint64_t gpa, uint64_t v)
{
	put(gpa, &v, 8);
}

static void call_rel32(uint64_t at, uint64_t to)
{
	uint8_t c[5] = {0xe8};
	int32_t rel = (int32_t)(to - (at + 5));

	memcpy(c + 1, &rel, 4);
	put(at, c, 5);
}

static int setup(void **state)
{
	static const uint8_t helper[] = {0x53, 0x0f, 0xa2, 0x5b, 0xc3};
	static const uint8_t call_rip[] = {0xff, 0x15, 0x0a, 0x00, 0x00, 0x00}; /* call *0xa(%rip): 0x200310 */

	(void)state;
	if (gmem_init(&mem, MEM_SIZE, 0))
		return -1;
	put64(0x1000, 0x2000 | 3);
	put64(0x2000, 0x3000 | 3);
	for (uint64_t i = 0; i < 8; i++)
		put64(0x3000 + 8 * i, (i << 21) | 0x83);
	put(HELPER, helper, sizeof(helper));
	call_rel32(LOOP_FN, HELPER);
	call_rel32(OUTER, LOOP_FN);
	put(OTHER, call_rip, sizeof(call_rip));
	put64(OTHER + 0x10, HELPER);
	put64(STACK, 0x1234);
	put64(STACK + 8, LOOP_FN + 5);
	put64(STACK + 16, OUTER + 0x77); /* in text, but no call before it: not a return address */
	put64(STACK + 24, OUTER + 5);
	return symtab_load_mem(&syms, (const uint8_t *)map, sizeof(map) - 1, "test.map", err, sizeof(err));
}

static int teardown(void **state)
{
	(void)state;
	symtab_free(&syms);
	gmem_destroy(&mem);
	return 0;
}

static const struct gpaging kernel_paging = {
    .cr0 = (1ull << 31) | 1, .cr3 = 0x1000, .cr4 = 0x20, .efer = (1 << 10) | (1 << 8)};

static void after_call(void **state)
{
	static const uint8_t direct[7] = {0x90, 0x90, 0xe8, 0x10, 0x00, 0x00, 0x00};
	static const uint8_t reg[7] = {0, 0, 0, 0, 0, 0xff, 0xd0};		  /* call *%rax */
	static const uint8_t r11[7] = {0, 0, 0, 0, 0x41, 0xff, 0xd3};		  /* call *%r11 */
	static const uint8_t disp8[7] = {0, 0, 0, 0, 0xff, 0x50, 0x08};		  /* call *0x8(%rax) */
	static const uint8_t riprel[7] = {0, 0xff, 0x15, 0xf0, 0xff, 0xff, 0xff}; /* call *-0x10(%rip) */
	static const uint8_t abs32[7] = {0xff, 0x14, 0x25, 1, 2, 3, 4};
	static const uint8_t none[7] = {0x48, 0x89, 0xc7, 0x48, 0x89, 0xd8, 0x90};
	uint64_t t = 0;

	(void)state;
	assert_int_equal(probe_after_call(direct, 0x1000, &t), 2);
	assert_int_equal(t, 0x1010);
	assert_int_equal(probe_after_call(reg, 0x1000, &t), 1);
	assert_int_equal(probe_after_call(r11, 0x1000, &t), 1);
	assert_int_equal(probe_after_call(disp8, 0x1000, &t), 1);
	assert_int_equal(probe_after_call(riprel, 0x1000, &t), 3);
	assert_int_equal(t, 0xff0);
	assert_int_equal(probe_after_call(abs32, 0x1000, &t), 1);
	assert_int_equal(probe_after_call(none, 0x1000, &t), 0);
}

static void stack_scan(void **state)
{
	struct gspace g;
	uint64_t w[6] = {0x1234, OTHER + 0x77, LOOP_FN + 5, OUTER + 0x77, OUTER + 5, OTHER + 6}, out[4];
	unsigned rel, n;

	(void)state;
	gspace_of_gmem(&g, &mem);
	n = probe_stack_scan(&g, &kernel_paging, &syms, SITE, w, 6, out, 4, &rel);
	/* OTHER+0x77 follows no call; OUTER+0x77 neither; the pointer call at OTHER reaches helper, not outer */
	assert_int_equal(n, 3);
	assert_int_equal(out[0], LOOP_FN + 5);
	assert_int_equal(out[1], OUTER + 5);
	assert_int_equal(out[2], OTHER + 6);
	assert_int_equal(rel, 3); /* loop_fn calls helper, outer calls loop_fn; other's pointer is not outer */
	/* a verified caller of the site drops stale words below it */
	w[0] = OUTER + 5;
	w[1] = LOOP_FN + 5;
	n = probe_stack_scan(&g, &kernel_paging, &syms, SITE, w, 2, out, 4, &rel);
	assert_int_equal(n, 1);
	assert_int_equal(out[0], LOOP_FN + 5);
	assert_int_equal(rel, 1);
	/* the call through a pointer (pv_ops before patching) verified by reading the pointer */
	w[0] = OTHER + 6;
	n = probe_stack_scan(&g, &kernel_paging, &syms, SITE, w, 1, out, 4, &rel);
	assert_int_equal(n, 1);
	assert_int_equal(rel, 1);
}

static int stopped;

static int pause_ok(void *ctx)
{
	(void)ctx;
	stopped++;
	return 0;
}

static void resume_ok(void *ctx)
{
	(void)ctx;
}

static void wait_sites(const struct probes *p, unsigned n)
{
	for (int i = 0; i < 400 && atomic_load(&p->nsites) < n; i++)
		usleep(5000);
	assert_int_equal(atomic_load(&p->nsites), n);
}

static struct kvm_run *vcpu_at(uint64_t rip, uint64_t rsp, uint16_t port)
{
	struct kvm_run *r = calloc(1, sizeof(*r));

	r->kvm_valid_regs = KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS;
	r->s.regs.sregs.cr0 = kernel_paging.cr0;
	r->s.regs.sregs.cr3 = kernel_paging.cr3;
	r->s.regs.sregs.cr4 = kernel_paging.cr4;
	r->s.regs.sregs.efer = kernel_paging.efer;
	r->s.regs.regs.rip = rip;
	r->s.regs.regs.rsp = rsp;
	r->exit_reason = KVM_EXIT_IO;
	r->io.direction = KVM_EXIT_IO_OUT;
	r->io.port = port;
	r->io.size = 1;
	r->io.count = 1;
	return r;
}

/* The whole path: a hot instruction is patched (all vCPUs stopped), a hit goes to the trampoline, the trace joins. */
static void arm_hit_resolve(void **state)
{
	struct probes p;
	struct kvm_run *run = vcpu_at(0, 0, 0), *runs[1] = {run};
	uint8_t b[8], want_tramp[8] = {0x0f, 0xa2, 0xe9};
	int32_t back = (int32_t)((SITE + 2) - (ETEXT + 7));
	uint64_t site, ret[PROBE_STACK];
	unsigned depth, rel;

	(void)state;
	memcpy(want_tramp + 3, &back, 4);
	want_tramp[7] = 0xcc;
	run->exit_reason = KVM_EXIT_HLT;
	assert_int_equal(probes_init(&p, &mem, &syms, 1, 1), 0);
	stopped = 0;
	assert_int_equal(probes_start(&p, pause_ok, resume_ok, NULL, runs), 0);
	probes_trace_callers.hot(&p, SITE, PROBE_CPUID, 1);
	wait_sites(&p, 1);
	assert_true(stopped >= 1); /* patched with the vCPUs stopped */
	assert_int_equal(gmem_read(&mem, SITE, b, 2), 0);
	assert_int_equal(b[0], 0xe6);
	assert_int_equal(b[1], PROBE_PORT);
	assert_int_equal(gmem_read(&mem, ETEXT, b, 8), 0);
	assert_memory_equal(b, want_tramp, 8);
	/* a hit: recorded, sent to the trampoline */
	free(run);
	run = runs[0] = vcpu_at(SITE, STACK, PROBE_PORT);
	assert_int_equal(probes_exit(&p, 0, run), 1);
	assert_int_equal(run->s.regs.regs.rip, ETEXT);
	assert_true(run->kvm_dirty_regs & KVM_SYNC_X86_REGS);
	/* the trace's exit at the trampoline: the site, and the caller the hit found */
	assert_int_equal(probes_trace_callers.resolve(&p, 0, ETEXT, timeline_now_ns(), &site, ret, &depth, &rel), 1);
	assert_int_equal(site, SITE);
	assert_int_equal(depth, 2);
	assert_int_equal(ret[0], LOOP_FN + 5);
	assert_int_equal(ret[1], OUTER + 5);
	assert_int_equal(rel, 3);
	/* the same `out` run by KVM's instruction emulator exits with RIP already past it: the same hit */
	run->s.regs.regs.rip = SITE + 2;
	run->kvm_dirty_regs = 0;
	assert_int_equal(probes_exit(&p, 0, run), 1);
	assert_int_equal(run->s.regs.regs.rip, ETEXT);
	assert_true(run->kvm_dirty_regs & KVM_SYNC_X86_REGS);
	run->s.regs.regs.rip = SITE + 1; /* neither */
	run->kvm_dirty_regs = 0;
	assert_int_equal(probes_exit(&p, 0, run), 0);
	assert_int_equal(run->kvm_dirty_regs, 0);
	/* an exit at another RIP is not a trampoline; a port write from elsewhere is not consumed */
	assert_int_equal(probes_trace_callers.resolve(&p, 0, SITE, timeline_now_ns(), &site, ret, &depth, &rel), 0);
	run->s.regs.regs.rip = SITE + 6;
	run->kvm_dirty_regs = 0;
	assert_int_equal(probes_exit(&p, 0, run), 0);
	assert_int_equal(run->kvm_dirty_regs, 0);
	/* a stack the guest unmapped: the hit still goes to the trampoline, without callers */
	run->s.regs.regs.rip = SITE;
	run->s.regs.regs.rsp = UNMAPPED_SP;
	assert_int_equal(probes_exit(&p, 0, run), 1);
	assert_int_equal(probes_trace_callers.resolve(&p, 0, ETEXT, timeline_now_ns(), &site, ret, &depth, &rel), 1);
	assert_int_equal(depth, 0);
	assert_int_equal(atomic_load(&p.stackless), 1);
	/* the address space of every exit to userspace, PCID bits cleared, for the user-half exits */
	{
		uint64_t cr3 = 0;

		run->s.regs.sregs.cr3 = 0x5000 | 0x7; /* PCID 7 */
		run->exit_reason = KVM_EXIT_MMIO;
		assert_int_equal(probes_exit(&p, 0, run), 0);
		assert_int_equal(probes_trace_callers.address_space(&p, 0, timeline_now_ns(), &cr3), 1);
		assert_int_equal(cr3, 0x5000);
		assert_int_equal(probes_trace_callers.address_space(&p, 1, timeline_now_ns(), &cr3), 0); /* no vCPU 1 */
		run->s.regs.sregs.cr3 = kernel_paging.cr3;
		run->exit_reason = KVM_EXIT_IO;
	}
	/* an event older than any hit matches none */
	assert_int_equal(probes_trace_callers.resolve(&p, 0, ETEXT, 1, &site, ret, &depth, &rel), 1);
	assert_int_equal(depth, 0);
	/* an instruction that is not the exiting one is refused and not asked again */
	probes_trace_callers.hot(&p, SITE + 6, PROBE_CPUID, 1);
	usleep(50000);
	assert_int_equal(atomic_load(&p.nsites), 1);
	assert_non_null(strstr(p.why, "does not hold the exiting instruction"));
	/* nor one right after a probed one: an emulated exit there would look like the site's */
	probes_trace_callers.hot(&p, SITE + 2, PROBE_CPUID, 1);
	usleep(50000);
	assert_int_equal(atomic_load(&p.nsites), 1);
	assert_non_null(strstr(p.why, "next to a probed instruction"));
	probes_free(&p);
	free(run);
}

/* A site that used up its budget gets its instruction back (with the vCPUs stopped); later hits still work. */
static void budget_restores(void **state)
{
	struct probes p;
	struct kvm_run *run = vcpu_at(SITE, STACK, PROBE_PORT), *runs[1] = {run};
	uint8_t b[2] = {0x0f, 0xa2};
	int i;

	(void)state;
	put(SITE, b, 2); /* as the guest has it (an earlier test patched it and filled the trampoline space) */
	put64(ETEXT, 0);
	assert_int_equal(probes_init(&p, &mem, &syms, 1, 1), 0);
	assert_int_equal(probes_start(&p, pause_ok, resume_ok, NULL, runs), 0);
	probes_trace_callers.hot(&p, SITE, PROBE_CPUID, 1);
	wait_sites(&p, 1);
	for (unsigned k = 0; k < PROBE_BUDGET; k++) {
		run->s.regs.regs.rip = SITE;
		assert_int_equal(probes_exit(&p, 0, run), 1);
	}
	for (i = 0; i < 400 && atomic_load(&p.site[0].armed); i++)
		usleep(5000);
	assert_int_equal(atomic_load(&p.site[0].armed), 0);
	assert_int_equal(gmem_read(&mem, SITE, b, 2), 0);
	assert_int_equal(b[0], 0x0f);
	assert_int_equal(b[1], 0xa2);
	/* a vCPU that had already fetched the `out` is still sent to the trampoline */
	run->s.regs.regs.rip = SITE;
	assert_int_equal(probes_exit(&p, 0, run), 1);
	assert_int_equal(run->s.regs.regs.rip, ETEXT);
	/* the hit ring is bounded: PROBE_BUDGET hits, nobody reading, PROBE_RING kept, the rest dropped and counted */
	assert_int_equal(atomic_load(&p.ring[0].dropped), PROBE_BUDGET + 1 - PROBE_RING);
	probes_free(&p);
	free(run);
}

/* --no-callers: nothing is patched whatever the trace asks. */
static void disabled(void **state)
{
	struct probes p;
	uint8_t b[2];

	(void)state;
	assert_int_equal(gmem_read(&mem, SITE, b, 2), 0);
	assert_int_equal(probes_init(&p, &mem, &syms, 1, 0), 0);
	assert_int_equal(probes_start(&p, pause_ok, resume_ok, NULL, NULL), 0);
	probes_trace_callers.hot(&p, SITE, PROBE_CPUID, 1);
	assert_int_equal(atomic_load(&p.nsites), 0);
	probes_free(&p);
}

/* The aggregation side: a trampoline's CPUIDs count at their site and, grouped by caller, in redundant[]. */
static int one_caller; /* fake_resolve: every hit from loop_fn */

static int fake_resolve(void *ctx, int vcpu, uint64_t rip, uint64_t ts, uint64_t *site, uint64_t *ret, unsigned *depth,
			unsigned *rel)
{
	(void)ctx;
	(void)vcpu;
	if (rip != ETEXT)
		return 0;
	*site = SITE;
	ret[0] = ts & 1 || one_caller ? LOOP_FN + 5 : OTHER + 6; /* odd events from loop_fn, even ones from other */
	ret[1] = OUTER + 5;
	*depth = 2;
	*rel = 3;
	return 1;
}

static int fake_site_of(void *ctx, uint64_t rip, uint64_t *site)
{
	(void)ctx;
	*site = SITE;
	return rip == ETEXT;
}

static uint64_t hot_rip;

static int fake_space(void *ctx, int vcpu, uint64_t ts, uint64_t *cr3)
{
	(void)ctx;
	(void)vcpu;
	(void)ts;
	*cr3 = 0x1000;
	return 1;
}

static void fake_hot(void *ctx, uint64_t rip, int kind, uint64_t ts)
{
	(void)ctx;
	(void)kind;
	(void)ts;
	hot_rip = rip;
}

static void aggregate_by_caller(void **state)
{
	static const struct trace_callers fake = {
	    .resolve = fake_resolve, .address_space = fake_space, .site_of = fake_site_of, .hot = fake_hot};
	struct trace_agg a;
	struct redundant *r = NULL;
	int64_t cs;
	int n;

	(void)state;
	trace_agg_init(&a, 0, 0, 0);
	trace_agg_set_callers(&a, &fake, NULL);
	for (uint64_t i = 0; i < 40; i++) {
		/* loop_fn (odd) scans 4 leaves again and again; other (even) asks 20 different leaves once */
		struct trace_line ex = {.tid = 1, .ev = TEV_KVM_EXIT, .has_rip = 1, .rip = ETEXT, .ts_ns = i};
		struct trace_line c = {
		    .tid = 1, .ev = TEV_KVM_CPUID, .ts_ns = i, .leaf = (uint32_t)(i & 1 ? i % 8 : 100 + i)};

		snprintf(ex.reason, sizeof(ex.reason), "cpuid");
		trace_agg_event(&a, &ex);
		trace_agg_event(&a, &c);
	}
	/* a plain instruction exiting twice asks for a probe */
	for (int i = 0; i < 2; i++) {
		struct trace_line ex = {.tid = 1, .ev = TEV_KVM_EXIT, .has_rip = 1, .rip = 0x999, .ts_ns = 100};
		struct trace_line c = {.tid = 1, .ev = TEV_KVM_CPUID, .ts_ns = 100, .leaf = 1};

		trace_agg_event(&a, &ex);
		trace_agg_event(&a, &c);
	}
	assert_int_equal(hot_rip, 0x999);
	cs = trace_agg_callsite_find(&a, LOOP_FN + 5, SITE);
	assert_true(cs >= 0);
	assert_int_equal(trace_agg_callsite(&a, (uint64_t)cs)->count, 20);
	assert_int_equal(trace_agg_callsite(&a, (uint64_t)cs)->site, SITE);
	assert_int_equal(trace_agg_callsite_find(&a, LOOP_FN + 5, SITE + 7), -1);
	n = redundant_find(&a, &r);
	/* loop_fn: 20 CPUIDs, 4 inputs (1 3 5 7), all deterministic: 16 cacheable; other: nothing repeats */
	assert_true(n >= 1);
	assert_int_equal(r[0].rip, SITE);
	assert_int_equal(r[0].caller, LOOP_FN + 5);
	assert_int_equal(r[0].count, 20);
	assert_int_equal(r[0].distinct_inputs, 4);
	assert_int_equal(r[0].cacheable, 16);
	for (int i = 0; i < n; i++)
		assert_true(r[i].caller != OTHER + 6);
	/* exits below the kernel's half (this guest's all are): by address space */
	assert_true(a.user.n > 0 && a.user_unknown == 0);
	/* exits at the trampoline count at the site */
	for (size_t i = 0; i < a.rips.cap; i++)
		assert_true(!a.rips.e[i].used || a.rips.e[i].k[0] != ETEXT);
	free(r);
	trace_agg_free(&a);
}

static void feed_cpuid(struct trace_agg *a, uint64_t rip, uint64_t ts, uint32_t leaf)
{
	struct trace_line ex = {.tid = 1, .ev = TEV_KVM_EXIT, .has_rip = 1, .rip = rip, .ts_ns = ts};
	struct trace_line c = {.tid = 1, .ev = TEV_KVM_CPUID, .ts_ns = ts, .leaf = leaf};

	snprintf(ex.reason, sizeof(ex.reason), "cpuid");
	trace_agg_event(a, &ex);
	trace_agg_event(a, &c);
}

/* An instruction with one caller stays one group: its exits before the probe and after, naming the caller. */
static void single_caller_merges(void **state)
{
	static const struct trace_callers fake = {
	    .resolve = fake_resolve, .address_space = fake_space, .site_of = fake_site_of, .hot = fake_hot};
	struct trace_agg a;
	struct redundant *r = NULL;

	(void)state;
	one_caller = 1;
	trace_agg_init(&a, 0, 0, 0);
	trace_agg_set_callers(&a, &fake, NULL);
	for (uint64_t i = 0; i < 3; i++)
		feed_cpuid(&a, SITE, i, 1); /* before the probe: at the instruction itself */
	for (uint64_t i = 3; i < 8; i++)
		feed_cpuid(&a, ETEXT, i, 1); /* after: at its trampoline, from loop_fn */
	assert_int_equal(redundant_find(&a, &r), 1);
	assert_int_equal(r[0].rip, SITE);
	assert_int_equal(r[0].caller, LOOP_FN + 5);
	assert_int_equal(r[0].count, 8);
	assert_int_equal(r[0].distinct_inputs, 1);
	assert_int_equal(r[0].cacheable, 7);
	free(r);
	trace_agg_free(&a);
	one_caller = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(after_call),	    cmocka_unit_test(stack_scan), cmocka_unit_test(arm_hit_resolve),
	    cmocka_unit_test(budget_restores),	    cmocka_unit_test(disabled),	  cmocka_unit_test(aggregate_by_caller),
	    cmocka_unit_test(single_caller_merges),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
