/* probe.h - caller probes: who called the CPUID/RDMSR/WRMSR that exits, read from the guest at the exit. */
#ifndef BRISK_PROBE_H
#define BRISK_PROBE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "brisk/guestmem.h"
#include "brisk/kallsyms.h"
#include "brisk/profile.h"

struct kvm_run;

/*
 * A CPUID or MSR access KVM handles in the kernel never reaches brisk, and
 * the kvm tracepoints give only its RIP. When the same instruction keeps
 * exiting (PROBE_HOT_EXITS times, profile.h), brisk patches it: its two opcode bytes become
 * `out %al, $PROBE_PORT` (e6 ib, also two bytes; it changes no register or
 * flag), and a trampoline after the kernel's text (from _etext to the end of
 * its page, bytes the kernel never executes) holds the original instruction
 * and a jmp back. Each execution then exits to brisk first, on the vCPU's
 * own thread, with its registers (KVM_CAP_SYNC_REGS): brisk reads the return
 * addresses from the guest's stack (through its page tables), sets RIP to
 * the trampoline, and the guest runs the original instruction there (KVM
 * handles it as before; the trace shows it at the trampoline's address) and
 * jumps back. docs/profiler.md "Callers" says why not debug registers, int3
 * or userspace MSR exits.
 */
#define PROBE_MAX_SITES	 64		/* instructions patched per run */
#define PROBE_TRAMP	 8		/* bytes per trampoline: the instruction (2), jmp rel32 (5), int3 */
#define PROBE_STACK	 CALLSITE_STACK /* return addresses kept per hit */
#define PROBE_SCAN_WORDS 64		/* stack words read per hit */
#define PROBE_RING	 4096		/* per vCPU: hits recorded and not yet matched with their trace event */
#define PROBE_BUDGET	 10000u		/* hits per site; then the instruction is restored (bounds the cost) */
#define PROBE_QUEUE	 64		/* arming requests waiting for the prober thread */
#define PROBE_RETRIES	 50		/* a request that cannot be served yet (no symbols, no paging context) */

enum probe_kind { PROBE_CPUID = 0, PROBE_RDMSR, PROBE_WRMSR, PROBE_KINDS };

struct probe_site {
	uint64_t va, pa;	     /* the patched instruction (guest virtual, guest physical) */
	uint64_t tramp_va, tramp_pa; /* its trampoline */
	uint64_t fn;		     /* the function it is in (symbol start) */
	int kind;
	uint64_t hot_ns, requested_ns, armed_ns; /* CLOCK_MONOTONIC: the exit that made it hot, asked, patched */
	_Atomic int armed;			 /* patched now (0 after PROBE_BUDGET hits: restored) */
	_Atomic uint64_t hits;
};

/* One hit: when, which site, the return addresses found on the stack (innermost first). */
struct probe_rec {
	uint64_t ts_ns; /* CLOCK_MONOTONIC: the trace's "mono" clock */
	uint32_t site;
	uint16_t depth;
	uint16_t reliable; /* bit i: ret[i] verified (probe_stack_scan) */
	uint64_t ret[PROBE_STACK];
};

/* Address-space changes seen at a vCPU's exits to userspace: when, and the CR3 from then on. */
#define PROBE_CTX_RING 4096
struct probe_ctxring {
	_Atomic uint64_t head, tail; /* single producer (the vCPU thread), single consumer (the trace reader) */
	struct {
		uint64_t ts_ns, cr3;
	} r[PROBE_CTX_RING];
	uint64_t last; /* producer: the CR3 pushed last */
	uint64_t cur;  /* consumer: the CR3 in effect at the last event looked up */
	int have;      /* consumer: cur is known */
};

/* Single producer (the vCPU thread), single consumer (the trace reader). */
struct probe_ring {
	_Atomic uint64_t head, tail;
	_Atomic uint64_t dropped; /* hits not recorded: the reader was PROBE_RING behind */
	struct probe_rec r[PROBE_RING];
};

struct gmem;

struct probes {
	struct gspace phys;
	const struct gmem *mem; /* for the patches (gmem_write, gmem_ptr) */
	int enabled;
	/* Symbols for sites and return addresses: the caller's (ELF, System.map) or kallsyms found here. */
	const struct symtab *syms;
	struct symtab ksyms; /* owned: kallsyms, when no other symbols were given */
	struct ksyms_info kinfo;
	unsigned ksyms_tries;	/* kallsyms searches made (each scans guest RAM) */
	uint64_t ksyms_next_ns; /* not before this (CLOCK_MONOTONIC) */
	char why[256];		/* the last reason a request could not be served (for the report) */
	uint64_t tramp_next, tramp_end;
	struct probe_site site[PROBE_MAX_SITES];
	_Atomic unsigned nsites;
	unsigned nr_vcpus;
	struct probe_ring *ring;       /* [nr_vcpus] */
	struct probe_ctxring *ctxring; /* [nr_vcpus] */
	/* A paging context seen at a CPL-0 exit (kernel text maps the same in every address space). */
	_Atomic uint64_t cr0, cr3, cr4, efer;
	_Atomic int have_paging;
	/* Stops and restarts every vCPU around a patch (vm_pause/vm_resume): nothing executes code being changed. */
	int (*pause)(void *ctx);
	void (*resume)(void *ctx);
	void *pause_ctx;
	struct kvm_run **runs;	     /* [nr_vcpus]: a stopped vCPU's registers (sync regs) give a paging context */
	_Atomic int restore_pending; /* a site used up its PROBE_BUDGET: the prober restores it */
	/* Statistics for the report. */
	_Atomic uint64_t matched, unmatched, stackless;
	/* The prober thread and its queue. */
	pthread_t thread;
	int thread_started, stop;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct {
		uint64_t rip, ns, hot_ns;
		int kind, tries;
	} queue[PROBE_QUEUE];
	unsigned nqueue;
	uint64_t rejected[PROBE_QUEUE]; /* instructions found unprobeable, not asked again */
	unsigned nrejected;
};

/*
 * Sets up probes over guest RAM `mem` for nr_vcpus vCPUs; `syms` (may be
 * NULL or empty: kallsyms is then searched in guest memory when first
 * needed). enabled 0: nothing is ever patched (--no-callers). 0 or -ENOMEM.
 */
int probes_init(struct probes *p, const struct gmem *mem, const struct symtab *syms, unsigned nr_vcpus, int enabled);
/*
 * Starts the prober thread (arms sites off the trace reader's path). Every
 * patch, and every restore, happens with all vCPUs stopped by `pause`
 * (returns 0 once they are out of KVM_RUN) and restarted by `resume`: x86
 * does not promise that a processor executing an instruction sees a
 * concurrent change to it whole (Intel SDM vol. 3A 9.1.3 "Handling Self-
 * and Cross-Modifying Code"), and re-entering the guest serialises. 0 or -errno.
 */
int probes_start(struct probes *p, int (*pause)(void *ctx), void (*resume)(void *ctx), void *ctx,
		 struct kvm_run **runs);
/* Stops and joins it; sites stay as they are (the VM is ending). */
void probes_stop(struct probes *p);
void probes_free(struct probes *p);

/*
 * The vCPU thread's hook for every exit that reaches userspace (kvm_run's
 * sync regs valid: KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS). Remembers a
 * CPL-0 paging context and every change of the vCPU's address space (CR3,
 * PCID bits cleared: the process it runs for, or runs, as the trace's user
 * RIPs are attributed); for a write to PROBE_PORT from an armed site,
 * records the hit and sends the guest to the site's trampoline (returns 1:
 * consumed). Anything else: 0, brisk handles the exit as usual (a guest that
 * writes the port itself is treated like any unhandled port write).
 */
int probes_exit(struct probes *p, unsigned vcpu, struct kvm_run *run);

/* The trace side (trace_callers, profile.h): resolve a trampoline RIP, ask for a hot RIP. */
extern const struct trace_callers probes_trace_callers;

/* The symbols kallsyms gave (NULL when none were found or needed). */
const struct symtab *probes_kallsyms(const struct probes *p, const struct ksyms_info **info);

/*
 * Pure helpers, unit-tested. probe_after_call: whether the 7 bytes before a
 * return address, code[0..7), end in a call instruction (e8 rel32, ff /2 in
 * its 2, 3, 6 and 7-byte forms): 2 for a direct call (its target in
 * *target), 3 for `call *disp32(%rip)` (the pointer's address in *target),
 * 1 for another indirect one, 0 for none. probe_stack_scan: the return
 * addresses among stack words w[0..n) (in a function of `syms`, after a
 * call; code and pointers read through `phys` and `pg`), innermost first, at
 * most max, as an ORC kernel's stack has no frame chain to follow. A return
 * address is verified (bit i of *reliable) when its call provably goes to
 * the function of the frame below (for the first, the function holding
 * `site`); one that calls the site's function drops the words found below
 * it (stale), the unverified ones are kept and marked (Linux prints those
 * "? "). Returns how many.
 */
int probe_after_call(const uint8_t code[7], uint64_t ret, uint64_t *target);
unsigned probe_stack_scan(const struct gspace *phys, const struct gpaging *pg, const struct symtab *syms, uint64_t site,
			  const uint64_t *w, unsigned n, uint64_t *out, unsigned max, unsigned *reliable);

#endif
