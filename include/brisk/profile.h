/* profile.h - the boot instrument: KVM binary stats, the kvm tracepoint reader, symbols, redundant work, reports. */
#ifndef BRISK_PROFILE_H
#define BRISK_PROFILE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct json_object;

#define PROFILE_SCHEMA "brisk-profile/1"

/* ---- KVM binary statistics (kvmstats.c; api.rst 4.134 KVM_GET_STATS_FD) ------------ */

#define KSTATS_MAX_SNAPSHOTS 8
#define KSTATS_NAME_MAX	     64

struct kstat_desc {
	char name[KSTATS_NAME_MAX];
	uint32_t flags;	 /* KVM_STATS_TYPE_* | KVM_STATS_UNIT_* | KVM_STATS_BASE_* */
	uint32_t offset; /* byte offset of the value in the data block */
};

/* The statistics of one VM or vCPU file descriptor: descriptors parsed once, values per snapshot. */
struct kstats {
	int fd; /* the stats fd; -1 when closed */
	uint64_t data_offset;
	unsigned n; /* single-value statistics kept (histograms are skipped) */
	struct kstat_desc *desc;
	unsigned nsnap;
	uint64_t *values[KSTATS_MAX_SNAPSHOTS]; /* values[s][i] */
};

/*
 * Parses the header and descriptors of a binary stats fd (offsets from the
 * header, never assumed). Takes ownership of `stats_fd`. Returns 0 or -errno
 * with a message in err.
 */
__attribute__((warn_unused_result)) int kstats_init_fd(struct kstats *k, int stats_fd, char *err, size_t errlen);
/* KVM_GET_STATS_FD on a VM or vCPU fd, then kstats_init_fd. */
__attribute__((warn_unused_result)) int kstats_open(struct kstats *k, int kvm_fd, char *err, size_t errlen);
/* Reads every value into the next snapshot. Returns 0, -ENOSPC when full, or -errno. */
int kstats_snapshot(struct kstats *k);
/* Index of the statistic named `name`, or -1. */
int kstats_find(const struct kstats *k, const char *name);
/* "cumulative", "instant", "peak", or "other". */
const char *kstats_kind(uint32_t flags);
void kstats_close(struct kstats *k);

/* ---- symbols (symbols.c) ------------------------------------------------------------ */

struct sym {
	uint64_t addr;
	uint64_t size; /* 0 = unknown (System.map) */
	char *name;
};

struct symtab {
	struct sym *s; /* sorted by addr */
	size_t n;
	char source[256];
};

/*
 * Loads `path`: an ELF file's .symtab (functions and untyped labels) or a
 * System.map ("ADDR TYPE NAME" lines, text symbols). A file that is neither
 * gives -EINVAL and a message naming the file and what was wrong.
 */
__attribute__((warn_unused_result)) int symtab_load(struct symtab *t, const char *path, char *err, size_t errlen);
/* The same from a buffer (ELF or System.map text). */
__attribute__((warn_unused_result)) int symtab_load_mem(struct symtab *t, const uint8_t *buf, size_t len,
							const char *name, char *err, size_t errlen);
/* 1 if `buf` starts with the ELF magic. */
int symtab_is_elf(const uint8_t *buf, size_t len);
/*
 * "function+0xoff" for `addr` into out (and 1), or 0 when no symbol covers it
 * (before the first symbol, past a sized symbol's end, or more than
 * SYMTAB_MAX_GAP past an unsized one).
 */
#define SYMTAB_MAX_GAP 0x100000
int symtab_lookup(const struct symtab *t, uint64_t addr, char *out, size_t outlen);
/* The symbol that covers `addr` by the rules of symtab_lookup, or NULL. */
const struct sym *symtab_find(const struct symtab *t, uint64_t addr);
/*
 * For loaders (symbols.c, kallsyms.c): appends a copy of name[0..nlen) at
 * `addr` (size 0: unknown), growing t->s (*cap is its capacity, 0 at first).
 * Returns 0, -ENOMEM, or -E2BIG past 2^24 symbols. symtab_sort then sorts
 * by address and keeps one symbol per address (a sized one first).
 */
int symtab_add(struct symtab *t, size_t *cap, uint64_t addr, uint64_t size, const char *name, size_t nlen);
void symtab_sort(struct symtab *t);
void symtab_free(struct symtab *t);

/* ---- aggregation of kvm trace events (tracefs.c, trace_parse.c) ------------------------- */

/* A growable open-addressing table keyed by three 64-bit words (trace_table.c). */
#define TT_MAX_RESULTS 4
struct tt_entry {
	uint64_t k[3];
	uint64_t count;
	uint64_t results[TT_MAX_RESULTS]; /* distinct result hashes seen, first TT_MAX_RESULTS */
	uint32_t nresults;		  /* distinct results; TT_MAX_RESULTS + 1 means "more" */
	uint8_t used;
};
struct ttable {
	struct tt_entry *e;
	size_t cap, n;
};
/* The entry for key (a, b, c), created with count 0; NULL when out of memory. */
struct tt_entry *ttable_get(struct ttable *t, uint64_t a, uint64_t b, uint64_t c);
/* Records result hash `h` in e (distinct results, bounded). */
void tt_entry_result(struct tt_entry *e, uint64_t h);
void ttable_free(struct ttable *t);

enum trace_ev {
	TEV_KVM_EXIT = 0,
	TEV_KVM_EMULATE_INSN,
	TEV_KVM_CPUID,
	TEV_KVM_MSR,
	TEV_KVM_PIO,
	TEV_KVM_MMIO,
	TEV_KVM_HYPERCALL,
	TEV_OTHER,
	TEV__COUNT
};
const char *trace_ev_name(enum trace_ev e);

/* What one kvm trace event line says (trace_parse.c). */
struct trace_line {
	pid_t tid;
	char comm[32];
	int cpu;
	uint64_t ts_ns;
	enum trace_ev ev;
	int has_rip;
	uint64_t rip;
	char reason[32]; /* kvm_exit: the exit reason as printed */
	uint32_t leaf, subleaf;
	uint64_t regs[4]; /* kvm_cpuid: rax rbx rcx rdx; kvm_msr: data in regs[0] */
	uint32_t msr;
	int write;     /* kvm_msr, kvm_pio, kvm_mmio */
	int gp;	       /* kvm_msr raised #GP */
	uint64_t addr; /* kvm_pio port, kvm_mmio gpa */
	uint64_t nr;   /* kvm_hypercall */
};

enum trace_parse_result { TP_EVENT = 0, TP_LOST, TP_IGNORED, TP_MALFORMED };
/*
 * Parses one line of trace_pipe text output. TP_EVENT fills *out; TP_LOST
 * sets *lost from a "CPU:N [LOST M EVENTS]" marker; TP_IGNORED for
 * comments, blank lines and events brisk does not use.
 */
enum trace_parse_result trace_parse_line(const char *line, struct trace_line *out, uint64_t *lost);

#define TRACE_MAX_THREADS 256
#define TRACE_COST_CAP_NS 10000000ull /* gaps above 10 ms are not exit costs (the vCPU was elsewhere) */

enum cost_kind {
	COST_CPUID = 0,
	COST_MSR_READ,
	COST_MSR_WRITE,
	COST_PIO,
	COST_MMIO,
	COST_HYPERCALL,
	COST_OTHER,
	COST__COUNT
};

struct trace_thread {
	pid_t tid;
	char comm[32];
	int vcpu; /* brisk's vCPU index, or order of first appearance */
	uint64_t events;
	int have_rip;
	uint64_t rip;
	uint64_t rip_ts;  /* when the latest RIP-carrying event happened */
	int kind;	  /* cost kind of that event, -1 unknown */
	int reason;	  /* index into the reasons table, -1 none */
	int rip_ev;	  /* enum trace_ev of the latest RIP event */
	int user_counted; /* that event was counted in the user table, under user_cr3 */
	uint64_t user_cr3;
	uint32_t *buckets; /* series: RIP events per bucket */
	uint32_t nbuckets;
};

/*
 * The caller probes' side of the aggregation (probe.c); NULL: no probes.
 * resolve: whether `rip` is a probe trampoline; if so *site is the probed
 * instruction and ret[0..*depth) the return addresses of the hit on vCPU
 * `vcpu` that led there before `ts_ns` (*depth 0: none matched), bit i of
 * *reliable set when ret[i] was verified (a direct call into the function
 * of the frame below). site_of: the same mapping without a hit. hot: the
 * CPUID/MSR exits of `rip` repeat (cost kind `kind`; the event that made it
 * hot happened at ts_ns): worth probing.
 */
struct trace_callers {
	int (*resolve)(void *ctx, int vcpu, uint64_t rip, uint64_t ts_ns, uint64_t *site, uint64_t *ret,
		       unsigned *depth, unsigned *reliable);
	/* The address space (CR3) vCPU `vcpu` ran in at ts_ns, as its latest exit to userspace before showed. */
	int (*address_space)(void *ctx, int vcpu, uint64_t ts_ns, uint64_t *cr3);
	int (*site_of)(void *ctx, uint64_t rip, uint64_t *site);
	void (*hot)(void *ctx, uint64_t rip, int kind, uint64_t ts_ns);
};

/* A call site seen by the probes: the return address, the probed instruction, the stack above. */
#define PROBE_HOT_EXITS 2	/* CPUID/MSR exits at one instruction before a probe is asked for */
#define PROBE_PORT	0xe8	/* the caller probes' port (probe.h): out imm8, no brisk device or Linux driver */
#define PROBE_REASON	"probe" /* the exit reason the trace gives a caller probe's port write */
#define CALLSITE_STACK	4
#define CALLSITE_MAX	4096 /* distinct (return address, site) pairs kept; more are counted in overflow */
struct callsite {
	uint64_t ret, site;
	uint64_t count;
	uint64_t stack[CALLSITE_STACK]; /* the first hit's return addresses, ret first */
	uint8_t depth;
	uint8_t reliable; /* bit i: stack[i] verified (trace_callers.resolve) */
	uint8_t kind;	  /* enum cost_kind */
	uint8_t used;
};

#define TRACE_MAX_REASONS 64
struct trace_reason {
	char name[32];
	uint64_t count, gap_ns, gaps;
};

/* Everything the reader derives from the event stream, without keeping events. */
struct trace_agg {
	uint64_t events[TEV__COUNT];
	uint64_t lines, malformed, lost, unknown_threads;
	uint64_t first_ts, last_ts;
	struct trace_thread thread[TRACE_MAX_THREADS];
	unsigned nthreads;
	struct trace_reason reason[TRACE_MAX_REASONS];
	unsigned nreasons;
	uint64_t cost_ns[COST__COUNT], cost_n[COST__COUNT];
	struct ttable cpuid;	     /* (rip|unknown, leaf, subleaf) -> count, results: no caller known */
	struct ttable msr;	     /* (rip|unknown, index, write) -> count, value hashes: no caller known */
	struct ttable pio;	     /* (port, write, 0) */
	struct ttable mmio;	     /* (gpa, write, 0) */
	struct ttable hcall;	     /* (nr, 0, 0) */
	struct ttable rips;	     /* (rip, reason index or TRACE_REASON_EMULATED, 0): every exit's RIP */
	struct ttable hot;	     /* (rip, cost kind, 0): CPUID/MSR exits per instruction, for probing */
	struct ttable user;	     /* (CR3, rip, reason): exits in the guest's user half, by process */
	uint64_t user_unknown;	     /* exits in the user half whose address space is not known */
	struct ttable cpuid_callers; /* (call site index, leaf, subleaf): CPUIDs a probe attributed */
	struct ttable msr_callers;   /* (call site index, index, write) */
	struct callsite *callsites;  /* [CALLSITE_MAX], open addressing on (ret, site): the index above */
	uint64_t callsite_overflow;
	const struct trace_callers *callers; /* NULL: no probes */
	void *callers_ctx;
	int rip_event;			     /* enum trace_ev of the RIP events seen first, -1 none */
	uint64_t series_start_ns, bucket_ns; /* 0: no series */
	uint32_t max_buckets;
};
#define TRACE_NO_RIP	      UINT64_MAX	/* key of events with no preceding RIP event */
#define TRACE_USER_TOP	      0x800000000000ull /* RIPs below: the guest's user half (or early boot, paging off) */
#define TRACE_REASON_EMULATED TRACE_MAX_REASONS /* rips key of a kvm_emulate_insn (no kvm_exit reason) */

void trace_agg_init(struct trace_agg *a, uint64_t series_start_ns, uint64_t bucket_ns, uint32_t max_buckets);
/* The callers of the CPUID/MSR exits, from the probes (probe.h); call before the first event. */
void trace_agg_set_callers(struct trace_agg *a, const struct trace_callers *c, void *ctx);
/* Call site number `idx` (the key of the caller tables), or NULL. */
const struct callsite *trace_agg_callsite(const struct trace_agg *a, uint64_t idx);
/* The index of the call site (ret, site), or -1. */
int64_t trace_agg_callsite_find(const struct trace_agg *a, uint64_t ret, uint64_t site);
/* Names thread `tid` as vCPU `vcpu` (brisk profile knows its own threads). */
void trace_agg_set_vcpu(struct trace_agg *a, pid_t tid, int vcpu);
/* Feeds one parsed event: attribution to the latest RIP event of the same thread, costs, tables. */
void trace_agg_event(struct trace_agg *a, const struct trace_line *l);
/* Feeds one line of text (parse + event, or a lost-events marker). */
void trace_agg_line(struct trace_agg *a, const char *line);
/* Mean measured cost of an exit kind in ns, or 0 when never measured. */
double trace_agg_mean_cost(const struct trace_agg *a, enum cost_kind k);
void trace_agg_free(struct trace_agg *a);

/* ---- the tracefs session (tracefs.c) ------------------------------------------------ */

#define TRACE_DEFAULT_BUFFER_KB 16384

struct trace_session {
	char root[128];	   /* tracefs mount */
	char why[256];	   /* trace_prepare: why tracefs could not be mounted, "" if it could */
	int private_mount; /* trace_prepare mounted tracefs in a private mount namespace */
	char dir[256];	   /* our instance */
	int pipe_fd;
	pthread_t reader;
	int reader_started;
	_Atomic int stop;
	uint64_t overrun, dropped; /* per_cpu stats at the end */
	struct trace_agg agg;
	pthread_mutex_t lock; /* held by the reader while it feeds agg */
};

/*
 * Makes tracefs reachable, as trace-cmd and perf do. If it is mounted
 * (/sys/kernel/tracing, or debugfs's tracing directory), nothing changes.
 * Otherwise brisk mounts it where only brisk sees it: unshare(CLONE_NEWNS),
 * every mount made private (MS_REC|MS_PRIVATE) so that nothing propagates
 * to the host, then tracefs on /sys/kernel/tracing (or debugfs as the
 * fallback); s->private_mount says so. The host's mount table is never
 * changed. Precondition: the process has no other thread yet (unshare
 * fails with EINVAL otherwise); it moves brisk into the new namespace for
 * the rest of its life. Returns 0, or -ENOENT with s->why saying why not
 * (e.g. "...: unshare(CLONE_NEWNS): Operation not permitted (needs root)"),
 * which trace_start then reports.
 */
int trace_prepare(struct trace_session *s);
/*
 * Creates a private instance, filters it to `tids` (children too when
 * follow_forks), enables the kvm events this kernel has, sizes the buffer
 * and starts a reader thread that aggregates into s->agg while the guest
 * runs. On failure the instance is removed and err says what is missing
 * (no tracefs, no permission, no kvm events). Returns 0 or -errno.
 */
__attribute__((warn_unused_result)) int trace_start(struct trace_session *s, const pid_t *tids, unsigned ntids,
						    int follow_forks, unsigned buffer_kb, char *err, size_t errlen);
/* Stops tracing, drains what is buffered, joins the reader, reads overruns, removes the instance. */
void trace_stop(struct trace_session *s);
/* Removes the instance if it still exists (error paths); idempotent. */
void trace_cleanup(struct trace_session *s);

/* ---- redundant work (redundant.c) --------------------------------------------------- */

struct redundant {
	const char *kind; /* "cpuid" or "msr" */
	uint64_t rip;	  /* the exiting instruction */
	uint64_t caller;  /* the return address a caller probe found (a call site), 0 when none */
	int64_t callsite; /* its index (trace_agg_callsite), -1 when none */
	uint64_t count;
	uint64_t distinct_inputs, distinct_results;
	int deterministic;
	uint64_t cacheable;
	double mean_cost_us, cost_us;
	const char *cost_source; /* "trace" or "estimate" */
};

/* Default exit costs when the trace measured none (documented in docs/profiler.md). */
#define REDUNDANT_DEFAULT_COST_US 1.0

/*
 * Finds the (kind, RIP) groups, and the (kind, call site) groups of the
 * exits a caller probe attributed, where repeated identical inputs gave
 * identical results; *out (malloc'd) sorted by cost, most expensive first.
 * Returns the count, or -ENOMEM.
 */
int redundant_find(const struct trace_agg *a, struct redundant **out);

/* ---- the report (report_json.c, report_text.c) ------------------------------------- */

struct exit_stats;
struct probes;
struct ksyms_info;

/* Inputs of the report that brisk profile knows and brisk trace does not. */
/*
 * Page faults of a profiled run (report "page_faults", docs/profiler.md): the process's (getrusage RUSAGE_SELF at
 * the end) and each vCPU thread's (getrusage RUSAGE_THREAD as the thread ends: exits.h); a vCPU thread's count
 * includes the faults KVM took on guest RAM for it (get_user_pages counts them to the task), and its kernel CPU
 * time bounds the time those took. For a restore (brisk profile --snapshot) that prefetched its working set
 * (wset.h), how much and how long.
 */
struct profile_fault_vcpu {
	uint64_t minor, major, system_us;
	int ok; /* 0: the thread's stat could not be read */
};
struct profile_faults {
	uint64_t minor, major;		       /* the process */
	const struct profile_fault_vcpu *vcpu; /* [profile_inputs.nr_vcpus] */
	int prefetched;			       /* a working set was prefetched: */
	uint64_t wset_pages, wset_advise_us, wset_populate_us;
};

struct profile_inputs {
	const char *command;	  /* "profile" or "trace" */
	const char *user_symbols; /* --user-symbols FILE (its symbols are in syms too), NULL when none */
	const char *kernel;
	char *const *argv; /* trace: the traced command */
	pid_t pid;
	uint64_t origin_ns; /* CLOCK_MONOTONIC of time 0 */
	uint64_t end_ns;
	/* brisk profile only (NULL for trace): the userspace counters and thread ids of each vCPU. */
	const struct exit_stats *const *exits; /* [nr_vcpus]; non-NULL also means phases and ioctls are reported */
	const int *tids;		       /* [nr_vcpus] */
	unsigned nr_vcpus;
	const struct kstats *vm_stats;
	const struct kstats *vcpu_stats; /* [nr_vcpus] */
	const char *const *snapshot_ids;
	const uint64_t *snapshot_ns;
	int tracing;		  /* 1: agg is valid */
	const char *trace_reason; /* why tracing is unavailable */
	const char *trace_instance;
	const char *tracefs_root; /* the tracefs mount used, NULL when not tracing */
	int tracefs_private;	  /* brisk mounted it in a private mount namespace (trace_prepare) */
	const struct trace_agg *agg;
	uint64_t lost; /* lost events (markers + overruns) */
	const struct symtab *syms;
	const struct ksyms_info *kinfo; /* syms came from kallsyms in guest memory (kallsyms.h); else NULL */
	const char *syms_why;		/* why there are no symbols; NULL when there are */
	const struct probes *probes;	/* brisk profile's caller probes (probe.h); NULL: none (trace, --no-callers) */
	const char *kstats_reason;	/* why KVM stats are unavailable */
	const char *const *warnings;
	unsigned nwarnings;
	uint64_t bucket_ns;
	const struct profile_faults *faults; /* brisk profile only; NULL: none */
};

/* Builds the brisk-profile/1 object (docs/profiler.md); NULL on out of memory. Caller puts it. */
struct json_object *report_json_build(const struct profile_inputs *in);
/* Writes `report` pretty-printed to path. Returns 0 or -errno with err. */
int report_json_write(struct json_object *report, const char *path, char *err, size_t errlen);
/* The aligned text report of a brisk-profile/1 object. */
void report_text_print(struct json_object *report, FILE *f);

/* The report options shared by brisk profile and brisk trace (report_out.c). */
#define REPORT_DEFAULT_BUCKET_US 1000
struct report_opts {
	const char *json, *trace_out, *svg, *symbols, *user_symbols;
	uint64_t bucket_ns;
	unsigned buffer_kb;
	int no_trace;	/* --no-trace: skip the tracepoints (measures their overhead) */
	int no_callers; /* --no-callers: never patch guest code for the caller probes (probe.h) */
};
void report_opts_defaults(struct report_opts *o);
/*
 * If argv[*i] is a report option ("--json FILE" or "--json=FILE", ...),
 * consumes it (advancing *i past its value) and returns 1; returns 0 for
 * any other argument, -1 after printing a message for a bad value.
 */
int report_opts_take(struct report_opts *o, int argc, char **argv, int *i, const char *cmd);
/*
 * Loads --symbols, or else the symbols of `kernel` when it is an ELF file.
 * Returns 0 (t may be empty: *why says why, NULL if nothing was asked) or
 * -EINVAL when an explicit --symbols file is garbage (message in err).
 */
/* 1 when `path` is a regular file that starts with the ELF magic (a FIFO is refused without blocking). */
int report_kernel_is_elf(const char *path);
/*
 * The symbols the report names addresses with: `kernel`'s (may be NULL or empty) and, when `user` has any,
 * --user-symbols' (a guest program's ELF, in the user half of the address space) merged into *out. Returns
 * `kernel` when there is nothing to merge, else out (symtab_free it), or NULL on out of memory.
 */
const struct symtab *report_merge_symbols(const struct symtab *kernel, const struct symtab *user, struct symtab *out);
int report_load_symbols(struct symtab *t, const char *symbols, const char *kernel, char *err, size_t errlen, char *why,
			size_t whylen);
/* Prints the text report to stdout and writes --json/--trace-out/--svg. Returns 0, or -1 after messages. */
int report_emit(struct json_object *report, const struct report_opts *o, const char *cmd);

/* Chrome trace-event JSON (Perfetto) and SVG timeline writers, from the report object. Return 0 or -errno. */
int report_perfetto_write(struct json_object *profile, const char *path, char *err, size_t errlen);
int report_svg_write(struct json_object *profile, const char *path, char *err, size_t errlen);

#endif
