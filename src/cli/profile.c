/* profile.c - `brisk profile`: one boot with every instrument on (timeline, exits, KVM stats, kvm tracepoints), then
 * the report. */
#include <errno.h>
#include <json-c/json.h>
#include <linux/kvm.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "brisk/cli.h"
#include "brisk/config.h"
#include "brisk/devices.h"
#include "brisk/exitcode.h"
#include "brisk/exits.h"
#include "brisk/helper.h"
#include "brisk/kallsyms.h"
#include "brisk/log.h"
#include "brisk/probe.h"
#include "brisk/profile.h"
#include "brisk/timeline.h"
#include "brisk/vm.h"

#define SERIES_MAX_BUCKETS (1u << 16) /* 65 s of 1 ms buckets per vCPU, 256 KiB each */
#define MAX_WARNINGS	   16
#define MSG_MAX		   512

/* Everything one profiled boot collects; the hook fills it while the vCPUs wait. */
struct prof {
	struct report_opts opt;
	struct kstats vm_stats;
	struct kstats *vcpu_stats;
	unsigned nr_vcpus;
	const char *snap_ids[KSTATS_MAX_SNAPSHOTS];
	uint64_t snap_ns[KSTATS_MAX_SNAPSHOTS];
	unsigned nsnap;
	char kstats_reason[MSG_MAX];
	struct trace_session trace;
	char instance[256]; /* the tracefs instance's name, kept for the report */
	uint64_t setup_ns;  /* time the hook took (between vcpus_ready and the first KVM_RUN) */
	int tracing;
	char trace_reason[MSG_MAX];
	char warn[MAX_WARNINGS][MSG_MAX];
	const char *warnings[MAX_WARNINGS];
	unsigned nwarn;
	/* Guest symbols: the file's (--symbols, the kernel's ELF symtab) or else kallsyms from guest memory. */
	const struct symtab *file_syms;
	struct symtab ksyms;		 /* kallsyms found at the end, when the probes did not find them first */
	struct symtab user_syms, merged; /* --user-symbols, and the report's table with them */
	struct symtab phys, with_phys;	 /* the kernel's head code at its physical addresses, and the merge */
	struct ksyms_info kinfo;
	char ksyms_why[MSG_MAX];
	struct probes probes;
	struct kvm_run **runs; /* every vCPU's kvm_run, for the probes */
	int probes_on;	       /* probes_init succeeded and the hook runs */
	int kernel_elf;	       /* --kernel is an ELF file (loaded as it runs: kallsyms readable before boot) */
};

/* The instance must not outlive brisk, whatever path it exits by. */
static struct trace_session *live_trace;

static void cleanup_trace_at_exit(void)
{
	if (live_trace)
		trace_cleanup(live_trace);
}

__attribute__((format(printf, 2, 3))) static void warn(struct prof *p, const char *fmt, ...)
{
	va_list ap;

	if (p->nwarn == MAX_WARNINGS)
		return;
	va_start(ap, fmt);
	vsnprintf(p->warn[p->nwarn], MSG_MAX, fmt, ap);
	va_end(ap);
	p->warnings[p->nwarn] = p->warn[p->nwarn];
	p->nwarn++;
}

/* Reads every stats fd into the next snapshot, named `id`. */
static void snapshot(struct prof *p, const char *id)
{
	if (p->vm_stats.fd < 0 || p->nsnap == KSTATS_MAX_SNAPSHOTS)
		return;
	p->snap_ids[p->nsnap] = id;
	p->snap_ns[p->nsnap] = timeline_now_ns();
	p->nsnap++;
	kstats_snapshot(&p->vm_stats);
	for (unsigned i = 0; i < p->nr_vcpus; i++)
		kstats_snapshot(&p->vcpu_stats[i]);
}

static void open_kstats(struct prof *p, struct vm *vm)
{
	char err[MSG_MAX / 2];

	p->vcpu_stats = calloc(p->nr_vcpus, sizeof(*p->vcpu_stats));
	if (!p->vcpu_stats || kstats_open(&p->vm_stats, vm_fd(vm), err, sizeof(err))) {
		snprintf(p->kstats_reason, sizeof(p->kstats_reason), "%s", p->vcpu_stats ? err : "out of memory");
		p->vm_stats.fd = -1;
		return;
	}
	for (unsigned i = 0; i < p->nr_vcpus; i++) {
		if (kstats_open(&p->vcpu_stats[i], vm_vcpu_fd(vm, i), err, sizeof(err))) {
			snprintf(p->kstats_reason, sizeof(p->kstats_reason), "vCPU %u: %s", i, err);
			kstats_close(&p->vm_stats);
			return;
		}
	}
}

static void start_trace(struct prof *p, struct vm *vm, uint64_t t0)
{
	pid_t tids[TRACE_MAX_THREADS];
	unsigned n = p->nr_vcpus < TRACE_MAX_THREADS ? p->nr_vcpus : TRACE_MAX_THREADS;

	trace_agg_init(&p->trace.agg, t0, p->opt.bucket_ns, SERIES_MAX_BUCKETS);
	for (unsigned i = 0; i < n; i++) {
		tids[i] = vm_vcpu_tid(vm, i);
		trace_agg_set_vcpu(&p->trace.agg, tids[i], (int)i);
	}
	if (p->opt.no_trace) {
		snprintf(p->trace_reason, sizeof(p->trace_reason), "--no-trace given");
		return;
	}
	if (trace_start(&p->trace, tids, n, 0, p->opt.buffer_kb, p->trace_reason, sizeof(p->trace_reason)) == 0) {
		snprintf(p->instance, sizeof(p->instance), "%s", strrchr(p->trace.dir, '/') + 1);
		p->tracing = 1;
		live_trace = &p->trace;
	}
}

/* The probes patch guest code only with every vCPU stopped (probe.h); a pause someone else made is theirs. */
static int pause_vm(void *vm)
{
	return vm_paused(vm) ? -EBUSY : vm_pause(vm);
}

static void resume_vm(void *vm)
{
	vm_resume(vm);
}

/*
 * A vmlinux (ELF) is in guest memory, as it will run, before the first KVM_RUN: its kallsyms can be read now,
 * so the probes are ready for the kernel's first CPUIDs (a bzImage has to decompress first: the probes search
 * later, on demand). The time it takes is the profiler's setup, reported as such.
 */
static void early_kallsyms(struct prof *p, struct vm *vm)
{
	struct gspace g;
	uint64_t ks, ke;
	char err[MSG_MAX / 2];

	if ((p->file_syms && p->file_syms->n) || !p->kernel_elf)
		return;
	gspace_of_gmem(&g, vm_gmem(vm));
	vm_kernel_range(vm, &ks, &ke);
	g.range[0].start = ks; /* only the kernel's own range: the image is all there is yet */
	g.range[0].size = ke - ks;
	g.nr = ke > ks;
	if (ksyms_load(&g, 0, &p->ksyms, &p->kinfo, err, sizeof(err)))
		p->kinfo.num_syms =
		    0; /* not there (an ELF that is not Linux): the probes and the report search later */
}

/*
 * The caller probes (probe.h): every vCPU's exits to userspace carry its registers (KVM_CAP_SYNC_REGS, api.rst
 * 4.10 "kvm_valid_regs"), the trace reader asks for probes and resolves their trampolines, the prober thread
 * patches. Needs the trace (hot instructions come from it).
 */
static void start_probes(struct prof *p, struct vm *vm)
{
	int caps = ioctl(vm_fd(vm), KVM_CHECK_EXTENSION, KVM_CAP_SYNC_REGS);
	const unsigned need = KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS;
	uint64_t ks, ke;

	if (p->opt.no_callers || !p->tracing)
		return;
	if (caps < 0 || ((unsigned)caps & need) != need) {
		warn(p, "no caller probes: KVM lacks KVM_CAP_SYNC_REGS (regs and sregs)");
		return;
	}
	p->runs = calloc(p->nr_vcpus, sizeof(*p->runs));
	if (!p->runs || probes_init(&p->probes, vm_gmem(vm), p->file_syms, p->nr_vcpus, 1)) {
		warn(p, "no caller probes: out of memory");
		return;
	}
	vm_kernel_range(vm, &ks, &ke);
	gspace_prefer(&p->probes.phys, ks, ke); /* kallsyms is in the kernel's image: look there first */
	early_kallsyms(p, vm);
	if (p->ksyms.n)
		p->probes.syms = &p->ksyms;
	for (unsigned i = 0; i < p->nr_vcpus; i++) {
		p->runs[i] = vm_vcpu_run(vm, i);
		p->runs[i]->kvm_valid_regs = need;
	}
	if (probes_start(&p->probes, pause_vm, resume_vm, vm, p->runs)) {
		warn(p, "no caller probes: the prober thread could not start");
		probes_free(&p->probes);
		return;
	}
	trace_agg_set_callers(&p->trace.agg, &probes_trace_callers, &p->probes);
	p->probes_on = 1;
}

/* The exit hook: the probes' (vCPU threads). */
static int on_guest_exit(struct vm *vm, unsigned vcpu, struct kvm_run *run, void *ctx)
{
	struct prof *p = ctx;

	(void)vm;
	return p->probes_on ? probes_exit(&p->probes, vcpu, run) : 0;
}

/* The vcpus_ready hook: every vCPU exists and is configured, none has run yet. */
static void on_vcpus_ready(struct vm *vm, void *ctx)
{
	struct prof *p = ctx;
	uint64_t t0 = timeline_now_ns();

	p->nr_vcpus = vm_nr_vcpus(vm);
	open_kstats(p, vm);
	for (unsigned i = 0; i < p->nr_vcpus; i++)
		if (exit_series_alloc(&vm_vcpu_exit_stats(vm, i)->series, t0, p->opt.bucket_ns, SERIES_MAX_BUCKETS))
			warn(p, "vCPU %u: no memory for the exit series", i);
	start_trace(p, vm, t0);
	start_probes(p, vm);
	snapshot(p, "vcpus_ready");
	p->setup_ns = timeline_now_ns() - t0;
}

/* Splits argv into report options (into p->opt) and RUN-OPTIONS (into run_argv). */
static int split_args(struct prof *p, int argc, char **argv, char **run_argv, int *run_argc)
{
	*run_argc = 0;
	run_argv[(*run_argc)++] = argv[0];
	for (int i = 1; i < argc; i++) {
		int r = report_opts_take(&p->opt, argc, argv, &i, "profile");

		if (r < 0)
			return EXIT_USAGE;
		if (r == 0)
			run_argv[(*run_argc)++] = argv[i];
	}
	run_argv[*run_argc] = NULL;
	return 0;
}

static void collect_warnings(struct prof *p, const char *sym_why)
{
	const struct trace_agg *a = &p->trace.agg;
	uint64_t lost = a->lost + p->trace.overrun + p->trace.dropped;

	if (!p->tracing)
		warn(p, "in-kernel exits not traced: %s", p->trace_reason);
	if (p->vm_stats.fd < 0)
		warn(p, "KVM statistics unavailable: %s", p->kstats_reason);
	if (lost)
		warn(p,
		     "the trace lost %llu events (buffer overrun): CPUID/MSR counts are lower bounds; retry with "
		     "a larger --trace-buffer-kb",
		     (unsigned long long)lost);
	if (a->malformed)
		warn(p, "%llu trace lines could not be parsed", (unsigned long long)a->malformed);
	if (p->tracing && a->rip_event < 0 && (a->events[TEV_KVM_CPUID] || a->events[TEV_KVM_MSR]))
		warn(p, "no RIP-carrying event (kvm_exit, kvm_emulate_insn) fired: CPUID/MSR are not attributed");
	if (sym_why[0] && !p->kinfo.num_syms)
		warn(p, "%s", sym_why);
	if (p->ksyms_why[0])
		warn(p, "%s", p->ksyms_why);
	warn(p,
	     "the profiler's own setup (tracefs instance, KVM stats fds) took %.1f us between \"vCPUs ready\" and "
	     "\"first KVM_RUN\"; a plain brisk run does not pay it",
	     (double)p->setup_ns / 1e3);
}

/* The kernel RIP that exited most (a kallsyms candidate must cover it), or 0. */
static uint64_t top_kernel_rip(const struct trace_agg *a)
{
	uint64_t best = 0, n = 0;

	for (size_t i = 0; i < a->rips.cap; i++)
		if (a->rips.e[i].used && a->rips.e[i].k[0] >= 0xffff800000000000ull && a->rips.e[i].count > n) {
			n = a->rips.e[i].count;
			best = a->rips.e[i].k[0];
		}
	return best;
}

/*
 * The symbols the report uses: the file's when it had any, else the kernel's own kallsyms, found in guest
 * memory by the probes or now (the VM still exists: its memory is there).
 */
static const struct symtab *guest_symbols(struct prof *p, struct vm *vm, const struct symtab *syms)
{
	const struct ksyms_info *ki;
	const struct symtab *k = p->probes_on ? probes_kallsyms(&p->probes, &ki) : NULL;
	uint64_t ks, ke;
	struct gspace g;
	char err[MSG_MAX / 2];

	if (syms && syms->n)
		return syms;
	if (p->ksyms.n)
		return &p->ksyms;
	if (k) {
		p->kinfo = *ki;
		return k;
	}
	gspace_of_gmem(&g, vm_gmem(vm));
	vm_kernel_range(vm, &ks, &ke);
	gspace_prefer(&g, ks, ke);
	if (ksyms_load(&g, p->tracing ? top_kernel_rip(&p->trace.agg) : 0, &p->ksyms, &p->kinfo, err, sizeof(err))) {
		snprintf(p->ksyms_why, sizeof(p->ksyms_why), "no symbols: %s; pass --symbols System.map|vmlinux", err);
		return syms;
	}
	return &p->ksyms;
}

/*
 * A vmlinux runs its first instructions (the PVH or 64-bit entry, head code) at physical addresses, before it
 * jumps to its virtual mapping: the ELF put _text at the start of the kernel's range. These aliases, "name@phys",
 * name those exits; the first PHYS_ALIAS_SPAN bytes of text hold the head code. A bzImage's load window runs its
 * own setup and decompressor first (no symbols: the bzImage has none), which one symbol names as such,
 * "bzImage_load_window+0x..." (with nokaslr the kernel's head code runs there too, after it).
 */
#define PHYS_ALIAS_SPAN (2ull << 20)

static const struct symtab *physical_aliases(struct prof *p, struct vm *vm, const struct symtab *syms)
{
	static const char window[] = "bzImage_load_window";
	uint64_t ks, ke, base = p->kinfo.relative_base;
	size_t cap = 0;
	char name[600];

	vm_kernel_range(vm, &ks, &ke);
	if (ke <= ks || !p->kinfo.num_syms || !syms)
		return NULL;
	snprintf(p->phys.source, sizeof(p->phys.source), "kallsyms at physical addresses");
	if (!p->kernel_elf) {
		(void)symtab_add(&p->phys, &cap, ks, ke - ks, window, sizeof(window) - 1);
		return &p->phys;
	}
	for (size_t i = 0; i < syms->n; i++) {
		const struct sym *x = &syms->s[i];
		int n;

		if (x->addr < base || x->addr - base >= PHYS_ALIAS_SPAN)
			continue;
		n = snprintf(name, sizeof(name), "%s@phys", x->name);
		if (n < 0 || symtab_add(&p->phys, &cap, x->addr - base + ks, x->size, name, (size_t)n))
			break;
	}
	return &p->phys;
}

static void collect_faults(struct vm *vm, unsigned nr, struct profile_fault_vcpu *v, struct profile_faults *f)
{
	struct rusage ru;

	*f = (struct profile_faults){.vcpu = v};
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		f->minor = (uint64_t)ru.ru_minflt;
		f->major = (uint64_t)ru.ru_majflt;
	}
	for (unsigned i = 0; v && i < nr; i++) {
		const struct exit_stats *s = vm_vcpu_exit_stats(vm, i);

		v[i] = (struct profile_fault_vcpu){
		    .minor = s->ru_minflt, .major = s->ru_majflt, .system_us = s->ru_stime_us, .ok = s->ru_valid};
	}
	f->prefetched = vm_wset_prefetched(vm, &f->wset_pages, &f->wset_advise_us, &f->wset_populate_us);
}

/* After the run: last snapshot, trace stopped, report built and emitted. */
static int finish(struct prof *p, struct vm *vm, const struct vm_config *cfg, const struct symtab *syms,
		  const char *sym_why)
{
	uint64_t before, end;
	const struct exit_stats **exits = calloc(p->nr_vcpus + 1, sizeof(*exits));
	int *tids = calloc(p->nr_vcpus + 1, sizeof(*tids));
	struct profile_fault_vcpu *fv = calloc(p->nr_vcpus + 1, sizeof(*fv));
	struct profile_faults faults;
	struct profile_inputs in;
	struct json_object *r;
	int ret = -ENOMEM;

	snapshot(p, "end");
	if (p->tracing)
		trace_stop(&p->trace);
	live_trace = NULL;
	if (p->probes_on)
		probes_stop(&p->probes);
	syms = guest_symbols(p, vm, syms);
	syms = report_merge_symbols(syms, physical_aliases(p, vm, syms), &p->with_phys);
	syms = report_merge_symbols(syms, &p->user_syms, &p->merged);
	before = timeline_now_ns();
	timeline_mark(TL_EXIT);
	end = timeline_now_ns();
	collect_warnings(p, sym_why);
	for (unsigned i = 0; exits && tids && i < p->nr_vcpus; i++) {
		exits[i] = vm_vcpu_exit_stats(vm, i);
		tids[i] = vm_vcpu_tid(vm, i);
	}
	collect_faults(vm, p->nr_vcpus, fv, &faults);
	in = (struct profile_inputs){
	    .command = "profile",
	    .user_symbols = p->user_syms.n ? p->opt.user_symbols : NULL,
	    .kernel = cfg->kernel,
	    .pid = getpid(),
	    /* timeline_get() counts from exec; TL_EXIT was stamped just after `before`. */
	    .origin_ns = before - (uint64_t)timeline_get(TL_EXIT),
	    .end_ns = end,
	    .exits = exits,
	    .tids = tids,
	    .vm_stats = &p->vm_stats,
	    .vcpu_stats = p->vcpu_stats,
	    .nr_vcpus = p->nr_vcpus,
	    .snapshot_ids = p->snap_ids,
	    .snapshot_ns = p->snap_ns,
	    .tracing = p->tracing,
	    .trace_reason = p->trace_reason,
	    .trace_instance = p->tracing ? p->instance : NULL,
	    .tracefs_root = p->tracing ? p->trace.root : NULL,
	    .tracefs_private = p->trace.private_mount,
	    .agg = &p->trace.agg,
	    .lost = p->trace.agg.lost + p->trace.overrun + p->trace.dropped,
	    .syms = syms,
	    .kinfo = p->kinfo.num_syms ? &p->kinfo : NULL,
	    .syms_why = syms && syms->n ? NULL : (p->ksyms_why[0] ? p->ksyms_why : sym_why),
	    .probes = p->probes_on ? &p->probes : NULL,
	    .kstats_reason = p->kstats_reason,
	    .warnings = p->warnings,
	    .nwarnings = p->nwarn,
	    .bucket_ns = p->opt.bucket_ns,
	    .faults = &faults,
	};
	r = exits && tids ? report_json_build(&in) : NULL;
	if (r)
		ret = report_emit(r, &p->opt, "profile");
	json_object_put(r);
	free(exits);
	free(tids);
	free(fv);
	return ret;
}

static void release(struct prof *p)
{
	kstats_close(&p->vm_stats);
	for (unsigned i = 0; p->vcpu_stats && i < p->nr_vcpus; i++)
		kstats_close(&p->vcpu_stats[i]);
	free(p->vcpu_stats);
	trace_agg_free(&p->trace.agg);
	if (p->probes_on)
		probes_free(&p->probes);
	free(p->runs);
	symtab_free(&p->ksyms);
	symtab_free(&p->user_syms);
	symtab_free(&p->merged);
	symtab_free(&p->phys);
	symtab_free(&p->with_phys);
}

/* Builds, runs and reports; returns the exit status. */
static int profile_boot(struct prof *p, struct vm_config *cfg, const struct symtab *syms, const char *sym_why)
{
	struct vm_hooks hooks = {.vcpus_ready = on_vcpus_ready, .exit = on_guest_exit, .ctx = p};
	struct vm *vm = NULL;
	int sig_fd = cli_setup_signals(), ret;

	cfg->hooks = &hooks;
	atexit(serial8250_restore_tty);
	atexit(cleanup_trace_at_exit);
	if (vm_signals_init() != 0)
		log_warn("cannot install the vCPU kick signal handler");
	ret = cli_vm_build(cfg, &vm); /* a boot, or a restore with --snapshot/--mem */
	if (ret == 0) {
		ret = vm_run(vm, sig_fd);
		if (finish(p, vm, cfg, syms, sym_why) && ret == 0)
			ret = EXIT_HOST;
		vm_destroy(vm);
	}
	if (sig_fd >= 0)
		close(sig_fd);
	return ret;
}

int cmd_profile(int argc, char **argv)
{
	struct prof *p = calloc(1, sizeof(*p));
	char **run_argv = calloc((size_t)argc + 1, sizeof(*run_argv));
	char err[MSG_MAX], why[MSG_MAX];
	struct vm_config cfg = {0};
	struct symtab syms = {0};
	int run_argc, ret;

	if (!p || !run_argv) {
		free(p);
		free(run_argv);
		return EXIT_HOST;
	}
	report_opts_defaults(&p->opt);
	p->vm_stats.fd = -1;
	p->trace.pipe_fd = -1;
	ret = split_args(p, argc, argv, run_argv, &run_argc);
	if (!ret)
		ret = cli_parse_run_options(run_argc, run_argv, &cfg);
	if (ret < 0) { /* --help */
		cli_usage(stdout, "profile");
		ret = 0;
	} else if (!ret && report_load_symbols(&syms, p->opt.symbols, cfg.kernel, err, sizeof(err), why, sizeof(why))) {
		fprintf(stderr, "brisk profile: --symbols: %s\n", err);
		ret = EXIT_USAGE;
	} else if (!ret && p->opt.user_symbols && symtab_load(&p->user_syms, p->opt.user_symbols, err, sizeof(err))) {
		fprintf(stderr, "brisk profile: --user-symbols: %s\n", err);
		ret = EXIT_USAGE;
	} else if (!ret) {
		/* Before vm_create starts any thread: unshare(CLONE_NEWNS) needs a single-threaded process; and
		 * before that, where the helpers are (brisk-slirp for --net user): helper.h. */
		if (!p->opt.no_trace) {
			(void)helper_pin_self();
			(void)trace_prepare(&p->trace); /* on failure, trace_start reports p->trace.why */
		}
		p->file_syms = &syms;
		p->kernel_elf = cfg.kernel && report_kernel_is_elf(cfg.kernel);
		ret = profile_boot(p, &cfg, &syms, why);
	}
	symtab_free(&syms);
	config_release(&cfg);
	release(p);
	free(p);
	free(run_argv);
	return ret;
}
