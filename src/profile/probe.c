/* probe.c - caller probes (probe.h): arming a site, the exit hook that reads the stack, the join with the trace. */
#include <errno.h>
#include <linux/kvm.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brisk/abi.h"
#include "brisk/layout.h"
#include "brisk/mem.h"
#include "brisk/probe.h"
#include "brisk/thread.h"
#include "brisk/timeline.h"

_Static_assert(PROBE_PORT < 0x100, "out imm8 reaches ports 0..0xff only");
_Static_assert(LAYOUT_DISJOINT(PROBE_PORT, 1, BRISK_DEBUG_EXIT_PORT, BRISK_DEBUG_EXIT_SIZE) &&
		   LAYOUT_DISJOINT(PROBE_PORT, 1, 0x80, 1) /* Linux's io_delay */ &&
		   LAYOUT_DISJOINT(PROBE_PORT, 1, BRISK_I8042_DATA_PORT, 5) && LAYOUT_DISJOINT(PROBE_PORT, 1, 0x70, 2),
	       "the probe port is nobody else's");
_Static_assert((int)PROBE_CPUID == (int)COST_CPUID && (int)PROBE_RDMSR == (int)COST_MSR_READ &&
		   (int)PROBE_WRMSR == (int)COST_MSR_WRITE,
	       "probe kinds are the trace's cost kinds");

#define CR0_PG	    (1ull << 31)
#define EFER_LMA    (1ull << 10)
#define PAGE	    4096ull
#define OP_OUT_IMM8 0xe6
#define OP_JMP_REL  0xe9
#define OP_INT3	    0xcc
#define KSYMS_TRIES 3		  /* kallsyms searches (each scans guest RAM) before giving up */
#define KSYMS_GAP   1000000000ull /* ns between two searches: the kernel may still be decompressing */
#define RETRY_NS    100000000ull  /* a request that could not be served waits this long */
#define CR3_PCID    0xfffull	  /* CR3's PCID bits (with CR4.PCIDE) name no address space */
#define CR3_NOFLUSH (1ull << 63)

static const uint8_t opcode[PROBE_KINDS][2] = {
    [PROBE_CPUID] = {0x0f, 0xa2}, /* cpuid */
    [PROBE_RDMSR] = {0x0f, 0x32}, /* rdmsr */
    [PROBE_WRMSR] = {0x0f, 0x30}, /* wrmsr */
};

int probes_init(struct probes *p, const struct gmem *mem, const struct symtab *syms, unsigned nr_vcpus, int enabled)
{
	memset(p, 0, sizeof(*p));
	gspace_of_gmem(&p->phys, mem);
	p->mem = mem;
	p->enabled = enabled;
	p->syms = syms && syms->n ? syms : NULL;
	p->nr_vcpus = nr_vcpus;
	p->ring = calloc(nr_vcpus ? nr_vcpus : 1, sizeof(*p->ring));
	p->ctxring = calloc(nr_vcpus ? nr_vcpus : 1, sizeof(*p->ctxring));
	if (!p->ring || !p->ctxring) {
		free(p->ring);
		free(p->ctxring);
		p->ring = NULL;
		p->ctxring = NULL;
		return -ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	return 0;
}

/* ---- arming (the prober thread) ------------------------------------------------------ */

static int cpl0_long_mode(const struct kvm_sregs *s)
{
	return s->cs.dpl == 0 && (s->cr0 & CR0_PG) && (s->efer & EFER_LMA);
}

static void remember_paging(struct probes *p, const struct kvm_sregs *s)
{
	if (!cpl0_long_mode(s))
		return;
	atomic_store(&p->cr0, s->cr0);
	atomic_store(&p->cr3, s->cr3);
	atomic_store(&p->cr4, s->cr4);
	atomic_store(&p->efer, s->efer);
	atomic_store_explicit(&p->have_paging, 1, memory_order_release);
}

/*
 * A kernel paging context (the kernel's text maps the same in every address space): a stopped vCPU's own
 * registers (KVM stores the sync regs on every return from KVM_RUN, a kick's EINTR included), else the one
 * remembered from the last CPL-0 exit. 0 or -1. Only with every vCPU stopped.
 */
static int paging(struct probes *p, struct gpaging *pg)
{
	for (unsigned i = 0; p->runs && i < p->nr_vcpus; i++)
		if (p->runs[i] && (p->runs[i]->kvm_valid_regs & KVM_SYNC_X86_SREGS))
			remember_paging(p, &p->runs[i]->s.regs.sregs);
	if (!atomic_load_explicit(&p->have_paging, memory_order_acquire))
		return -1;
	*pg = (struct gpaging){.cr0 = atomic_load(&p->cr0),
			       .cr3 = atomic_load(&p->cr3),
			       .cr4 = atomic_load(&p->cr4),
			       .efer = atomic_load(&p->efer)};
	return 0;
}

/* One kallsyms search (each scans guest RAM): at start, then on demand at most KSYMS_TRIES times, spaced. */
static int find_kallsyms(struct probes *p, uint64_t want)
{
	char err[200];

	if (p->syms || p->ksyms_tries >= KSYMS_TRIES || timeline_now_ns() < p->ksyms_next_ns)
		return p->syms ? 0 : -1;
	p->ksyms_tries++;
	p->ksyms_next_ns = timeline_now_ns() + KSYMS_GAP;
	if (ksyms_load(&p->phys, want, &p->ksyms, &p->kinfo, err, sizeof(err))) {
		snprintf(p->why, sizeof(p->why), "%s", err);
		return -1;
	}
	p->syms = &p->ksyms;
	return 0;
}

/* Symbols for `rip`: given ones, or kallsyms from guest memory. 0, 1 (later), -1 (never). */
static int need_symbols(struct probes *p, uint64_t rip)
{
	if (p->syms || find_kallsyms(p, rip) == 0)
		return 0;
	return p->ksyms_tries >= KSYMS_TRIES ? -1 : 1;
}

/* The trampoline area: from _etext (8-aligned) to the end of its page. 0, or -1 when the symbols have none. */
static int tramp_area(struct probes *p)
{
	if (p->tramp_end)
		return p->tramp_next + PROBE_TRAMP <= p->tramp_end ? 0 : -1;
	for (size_t i = 0; i < p->syms->n; i++)
		if (strcmp(p->syms->s[i].name, "_etext") == 0) {
			p->tramp_next = (p->syms->s[i].addr + 7) & ~7ull;
			p->tramp_end = (p->syms->s[i].addr + PAGE - 1) & ~(PAGE - 1);
		}
	if (!p->tramp_end)
		p->tramp_end = 1; /* none: never looked for again */
	return p->tramp_next + PROBE_TRAMP <= p->tramp_end ? 0 : -1;
}

/* Translates va and checks it is executable. 0 or -1. */
static int exec_pa(const struct probes *p, const struct gpaging *pg, uint64_t va, uint64_t *pa)
{
	int nx;

	return gwalk(&p->phys, pg, va, pa, &nx) == 0 && !nx ? 0 : -1;
}

/* Replaces the two bytes at guest-physical pa, `from` -> `to`. Only with every vCPU stopped. 0 or -1. */
static int swap2(const struct probes *p, uint64_t pa, const uint8_t from[2], const uint8_t to[2])
{
	uint8_t cur[2];

	if (p->phys.read(p->phys.ctx, pa, cur, 2) || memcmp(cur, from, 2))
		return -1;
	return gmem_write(p->mem, pa, to, 2) ? -1 : 0;
}

/* Writes the trampoline for `s` (the original instruction, jmp back to s->va + 2, int3). 0 or -1. */
static int write_tramp(const struct probes *p, const struct probe_site *s)
{
	uint8_t t[PROBE_TRAMP], cur[PROBE_TRAMP];
	int64_t rel = (int64_t)(s->va + 2) - (int64_t)(s->tramp_va + 7);
	int32_t rel32 = (int32_t)rel;

	if (rel != rel32 || p->phys.read(p->phys.ctx, s->tramp_pa, cur, sizeof(cur)))
		return -1;
	for (size_t i = 0; i < sizeof(cur); i++)
		if (cur[i] != 0 && cur[i] != OP_INT3)
			return -1; /* not padding: something lives here */
	memcpy(t, opcode[s->kind], 2);
	t[2] = OP_JMP_REL;
	memcpy(t + 3, &rel32, 4);
	t[7] = OP_INT3;
	return gmem_write(p->mem, s->tramp_pa, t, sizeof(t)) ? -1 : 0;
}

__attribute__((format(printf, 2, 3))) static int reject(struct probes *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
	return -1;
}

/* The patch itself, every vCPU stopped: translate, check, trampoline, publish, patch. 0, 1 (later) or -1. */
static int arm_stopped(struct probes *p, struct probe_site *s, unsigned n)
{
	const uint8_t out[2] = {OP_OUT_IMM8, PROBE_PORT};
	struct gpaging pg;
	uint8_t cur[2];

	if (paging(p, &pg))
		return 1; /* no vCPU in long mode at CPL 0 yet */
	if (exec_pa(p, &pg, s->va, &s->pa) || exec_pa(p, &pg, s->tramp_va, &s->tramp_pa))
		return reject(p, "0x%llx or its trampoline is not mapped executable", (unsigned long long)s->va);
	if (p->phys.read(p->phys.ctx, s->pa, cur, 2) || memcmp(cur, opcode[s->kind], 2))
		return reject(p, "0x%llx does not hold the exiting instruction (%02x %02x)", (unsigned long long)s->va,
			      cur[0], cur[1]);
	if (write_tramp(p, s))
		return reject(p, "the trampoline space after _etext (0x%llx) is in use",
			      (unsigned long long)s->tramp_va);
	p->tramp_next += PROBE_TRAMP;
	s->armed_ns = timeline_now_ns();
	atomic_store(&s->armed, 1);
	/* Published before the patch: the first `out` must find its site. */
	atomic_store_explicit(&p->nsites, n + 1, memory_order_release);
	if (swap2(p, s->pa, opcode[s->kind], out))
		atomic_store(&s->armed, 0);
	return 0;
}

/* Patches the instruction at rip. 0 armed, 1 try again later, -1 never. */
static int arm(struct probes *p, uint64_t rip, int kind, uint64_t requested_ns, uint64_t hot_ns)
{
	unsigned n = atomic_load(&p->nsites);
	struct probe_site *s = &p->site[n];
	const struct sym *fn;
	int ret = need_symbols(p, rip);

	if (ret)
		return ret;
	if (n == PROBE_MAX_SITES)
		return reject(p, "%d instructions probed already (PROBE_MAX_SITES)", PROBE_MAX_SITES);
	for (unsigned i = 0; i < n; i++)
		if (p->site[i].va + 2 == rip || rip + 2 == p->site[i].va)
			return reject(p, "0x%llx is next to a probed instruction (its exit would be ambiguous)",
				      (unsigned long long)rip);
	fn = symtab_find(p->syms, rip);
	if (!fn)
		return reject(p, "0x%llx is in no function of %s", (unsigned long long)rip, p->syms->source);
	if (tramp_area(p))
		return reject(p, "no room for a trampoline after _etext (%s)", p->syms->source);
	*s = (struct probe_site){.va = rip,
				 .tramp_va = p->tramp_next,
				 .fn = fn->addr,
				 .kind = kind,
				 .requested_ns = requested_ns,
				 .hot_ns = hot_ns};
	if (p->pause(p->pause_ctx))
		return 1; /* the VM would not stop (or is ending): later, or never */
	ret = arm_stopped(p, s, n);
	p->resume(p->pause_ctx);
	return ret;
}

/* Puts back the original instruction of every site that used up its budget (its trampoline stays). */
static void restore_spent(struct probes *p)
{
	const uint8_t out[2] = {OP_OUT_IMM8, PROBE_PORT};

	if (!atomic_exchange(&p->restore_pending, 0) || p->pause(p->pause_ctx))
		return;
	for (unsigned i = 0; i < atomic_load(&p->nsites); i++) {
		struct probe_site *s = &p->site[i];

		if (atomic_load(&s->armed) && atomic_load(&s->hits) >= PROBE_BUDGET &&
		    swap2(p, s->pa, out, opcode[s->kind]) == 0)
			atomic_store(&s->armed, 0);
	}
	p->resume(p->pause_ctx);
}

static int queued_or_known(const struct probes *p, uint64_t rip)
{
	for (unsigned i = 0; i < p->nqueue; i++)
		if (p->queue[i].rip == rip)
			return 1;
	for (unsigned i = 0; i < p->nrejected; i++)
		if (p->rejected[i] == rip)
			return 1;
	for (unsigned i = 0; i < atomic_load(&p->nsites); i++)
		if (p->site[i].va == rip)
			return 1;
	return 0;
}

/* The trace reader's request (under its lock: quick). */
static void request(void *ctx, uint64_t rip, int kind, uint64_t hot_ns)
{
	struct probes *p = ctx;

	if (!p->enabled || kind < 0 || kind >= PROBE_KINDS)
		return;
	pthread_mutex_lock(&p->lock);
	if (p->nqueue < PROBE_QUEUE && !queued_or_known(p, rip)) {
		p->queue[p->nqueue].rip = rip;
		p->queue[p->nqueue].kind = kind;
		p->queue[p->nqueue].tries = 0;
		p->queue[p->nqueue].ns = timeline_now_ns();
		p->queue[p->nqueue].hot_ns = hot_ns;
		p->nqueue++;
		pthread_cond_signal(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
}

static void wait_ns(struct probes *p, uint64_t ns)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += (long)(ns % 1000000000ull);
	t.tv_sec += (time_t)(ns / 1000000000ull) + t.tv_nsec / 1000000000;
	t.tv_nsec %= 1000000000;
	pthread_cond_timedwait(&p->cond, &p->lock, &t);
}

static void *prober(void *arg)
{
	struct probes *p = arg;

	/* A vmlinux loaded as an ELF is in guest memory before the kernel runs: its first CPUIDs can be probed. */
	(void)find_kallsyms(p, 0);
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		uint64_t rip, ns, hot_ns;
		int kind, tries, r;

		if (atomic_load(&p->restore_pending)) {
			pthread_mutex_unlock(&p->lock);
			restore_spent(p);
			pthread_mutex_lock(&p->lock);
			continue;
		}
		if (!p->nqueue) {
			pthread_cond_wait(&p->cond, &p->lock);
			continue;
		}
		rip = p->queue[0].rip;
		kind = p->queue[0].kind;
		tries = p->queue[0].tries;
		ns = p->queue[0].ns;
		hot_ns = p->queue[0].hot_ns;
		memmove(p->queue, p->queue + 1, --p->nqueue * sizeof(p->queue[0]));
		pthread_mutex_unlock(&p->lock);
		r = arm(p, rip, kind, ns, hot_ns);
		pthread_mutex_lock(&p->lock);
		if (r > 0 && tries < PROBE_RETRIES && p->nqueue < PROBE_QUEUE) {
			p->queue[p->nqueue].rip = rip;
			p->queue[p->nqueue].kind = kind;
			p->queue[p->nqueue].ns = ns;
			p->queue[p->nqueue].hot_ns = hot_ns;
			p->queue[p->nqueue].tries = tries + 1;
			p->nqueue++;
			if (!p->stop)
				wait_ns(p, RETRY_NS);
		} else if (r != 0 && p->nrejected < PROBE_QUEUE) {
			p->rejected[p->nrejected++] = rip;
		}
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int probes_start(struct probes *p, int (*pause)(void *ctx), void (*resume)(void *ctx), void *ctx, struct kvm_run **runs)
{
	int ret;

	p->pause = pause;
	p->resume = resume;
	p->pause_ctx = ctx;
	p->runs = runs;
	if (!p->enabled)
		return 0;
	ret = bthread_create(&p->thread, prober, p);
	if (ret)
		return -ret;
	p->thread_started = 1;
	return 0;
}

void probes_stop(struct probes *p)
{
	if (!p->thread_started)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	bthread_join(p->thread, NULL);
	p->thread_started = 0;
}

void probes_free(struct probes *p)
{
	probes_stop(p);
	free(p->ring);
	free(p->ctxring);
	p->ring = NULL;
	p->ctxring = NULL;
	symtab_free(&p->ksyms);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
}

const struct symtab *probes_kallsyms(const struct probes *p, const struct ksyms_info **info)
{
	if (info)
		*info = &p->kinfo;
	return p->ksyms.n ? &p->ksyms : NULL;
}

/* ---- the exit hook (vCPU threads) ------------------------------------------------------ */

int probe_after_call(const uint8_t c[7], uint64_t ret, uint64_t *target)
{
	if (c[2] == 0xe8) { /* call rel32 */
		int32_t rel;

		memcpy(&rel, c + 3, 4);
		*target = ret + (uint64_t)(int64_t)rel;
		return 2;
	}
	if (c[5] == 0xff && (c[6] & 0xf8) == 0xd0) /* call *%reg */
		return 1;
	if (c[4] >= 0x40 && c[4] <= 0x4f && c[5] == 0xff && (c[6] & 0xf8) == 0xd0) /* call *%r8..r15 */
		return 1;
	if (c[4] == 0xff && (c[5] & 0xf8) == 0x50 && (c[5] & 7) != 4) /* call *disp8(%reg) */
		return 1;
	if (c[1] == 0xff && (c[2] & 0xf8) == 0x90 && (c[2] & 7) != 4) /* call *disp32(%reg) */
		return 1;
	if (c[1] == 0xff && c[2] == 0x15) { /* call *disp32(%rip): a paravirt call before patching */
		int32_t rel;

		memcpy(&rel, c + 3, 4);
		*target = ret + (uint64_t)(int64_t)rel; /* where the pointer is */
		return 3;
	}
	if (c[0] == 0xff && (c[1] & 0xc7) == 0x84) /* call *disp32(%reg,%reg,s) (mod 2, SIB) */
		return 1;
	return c[0] == 0xff && c[1] == 0x14 && c[2] == 0x25; /* call *abs32 */
}

/* Reads n bytes at guest-virtual va (at most across one page boundary). 0 or -1. */
static int read_virt(const struct gspace *phys, const struct gpaging *pg, uint64_t va, void *buf, size_t n)
{
	uint64_t first = PAGE - (va & (PAGE - 1)), pa;
	size_t a = n < first ? n : (size_t)first;
	int nx;

	if (gwalk(phys, pg, va, &pa, &nx) || phys->read(phys->ctx, pa, buf, a))
		return -1;
	if (a == n)
		return 0;
	if (gwalk(phys, pg, va + a, &pa, &nx) || phys->read(phys->ctx, pa, (uint8_t *)buf + a, n - a))
		return -1;
	return 0;
}

/* The start of the function holding addr, or 0. */
static uint64_t fn_of(const struct symtab *syms, uint64_t addr)
{
	const struct sym *f = symtab_find(syms, addr);

	return f ? f->addr : 0;
}

/* The function a call before return address `ret` calls (its code c), or 0 when that cannot be known. */
static uint64_t callee(const struct gspace *phys, const struct gpaging *pg, const struct symtab *syms,
		       const uint8_t c[7], uint64_t ret)
{
	uint64_t target = 0, ptr;

	switch (probe_after_call(c, ret, &target)) {
	case 2:
		return fn_of(syms, target);
	case 3: /* through a pointer in memory (pv_ops before apply_paravirt): read it */
		return read_virt(phys, pg, target, &ptr, sizeof(ptr)) ? 0 : fn_of(syms, ptr);
	default:
		return 0;
	}
}

unsigned probe_stack_scan(const struct gspace *phys, const struct gpaging *pg, const struct symtab *syms, uint64_t site,
			  const uint64_t *w, unsigned n, uint64_t *out, unsigned max, unsigned *reliable)
{
	uint64_t site_fn = fn_of(syms, site), target = 0;
	unsigned k = 0;

	*reliable = 0;
	for (unsigned i = 0; i < n && k < max; i++) {
		uint8_t code[7];
		uint64_t to;

		if (w[i] < 7 || !symtab_find(syms, w[i]) || (k && out[k - 1] == w[i]))
			continue;
		if (read_virt(phys, pg, w[i] - 7, code, sizeof(code)) || !probe_after_call(code, w[i], &target))
			continue;
		to = callee(phys, pg, syms, code, w[i]);
		if (to && to == site_fn && !(*reliable & 1u)) {
			k = 0; /* the site's verified caller: the words below it were stale */
			*reliable = 0;
		}
		if (to && to == (k ? fn_of(syms, out[k - 1]) : site_fn))
			*reliable |= 1u << k;
		out[k++] = w[i];
	}
	return k;
}

/* Records one hit on this vCPU's ring; a full ring drops it (counted). */
static void record(struct probes *p, unsigned vcpu, const struct probe_rec *r)
{
	struct probe_ring *q = &p->ring[vcpu];
	uint64_t head = atomic_load_explicit(&q->head, memory_order_relaxed);

	if (head - atomic_load_explicit(&q->tail, memory_order_acquire) >= PROBE_RING) {
		atomic_fetch_add(&q->dropped, 1);
		return;
	}
	q->r[head % PROBE_RING] = *r;
	atomic_store_explicit(&q->head, head + 1, memory_order_release);
}

/* The hit's stack: PROBE_SCAN_WORDS words from RSP through the vCPU's own page tables, then its return addresses. */
static void read_stack(struct probes *p, const struct kvm_sync_regs *s, struct probe_rec *r)
{
	struct gpaging pg = {.cr0 = s->sregs.cr0, .cr3 = s->sregs.cr3, .cr4 = s->sregs.cr4, .efer = s->sregs.efer};
	uint64_t w[PROBE_SCAN_WORDS], rsp = s->regs.rsp & ~7ull, first = (PAGE - (rsp & (PAGE - 1))) / 8;
	unsigned n = first < PROBE_SCAN_WORDS ? (unsigned)first : PROBE_SCAN_WORDS, reliable;

	/* The words up to the end of RSP's page, then the rest when the next page is mapped (one walk each). */
	if (read_virt(&p->phys, &pg, rsp, w, n * 8))
		n = 0;
	else if (n < PROBE_SCAN_WORDS && read_virt(&p->phys, &pg, rsp + n * 8, w + n, (PROBE_SCAN_WORDS - n) * 8) == 0)
		n = PROBE_SCAN_WORDS;
	r->depth = (uint16_t)probe_stack_scan(&p->phys, &pg, p->syms, p->site[r->site].va, w, n, r->ret, PROBE_STACK,
					      &reliable);
	r->reliable = (uint16_t)reliable;
}

/* Records a change of vCPU vcpu's address space (one entry per change; a full ring drops it). */
static void note_cr3(struct probes *p, unsigned vcpu, const struct kvm_sregs *sr)
{
	struct probe_ctxring *q = &p->ctxring[vcpu];
	uint64_t cr3 = sr->cr3 & ~(CR3_PCID | CR3_NOFLUSH), head;

	if (!(sr->cr0 & CR0_PG) || (q->last == cr3 && atomic_load_explicit(&q->head, memory_order_relaxed)))
		return;
	head = atomic_load_explicit(&q->head, memory_order_relaxed);
	if (head - atomic_load_explicit(&q->tail, memory_order_acquire) >= PROBE_CTX_RING)
		return;
	q->r[head % PROBE_CTX_RING].ts_ns = timeline_now_ns();
	q->r[head % PROBE_CTX_RING].cr3 = cr3;
	q->last = cr3;
	atomic_store_explicit(&q->head, head + 1, memory_order_release);
}

/*
 * The site whose `out` made this exit, or n. KVM's fast path for an `out` (the instruction exits as itself) leaves
 * RIP at it; an `out` KVM ran through its instruction emulator (a host that emulates the guest's CPL 0, or an
 * instruction emulated for another reason) has already moved RIP past it (x86.c, x86_emulate_instruction: an OUT
 * is written back before the exit to user space). arm() keeps sites 2 bytes apart at least, so the two never meet.
 */
static unsigned site_at_exit(const struct probes *p, unsigned n, uint64_t rip)
{
	for (unsigned i = 0; i < n; i++)
		if (p->site[i].va == rip)
			return i;
	for (unsigned i = 0; i < n; i++)
		if (p->site[i].va + 2 == rip)
			return i;
	return n;
}

int probes_exit(struct probes *p, unsigned vcpu, struct kvm_run *run)
{
	struct kvm_sync_regs *s = &run->s.regs;
	struct probe_rec r;
	unsigned n, i;

	if (!(run->kvm_valid_regs & KVM_SYNC_X86_SREGS) || !(run->kvm_valid_regs & KVM_SYNC_X86_REGS) ||
	    vcpu >= p->nr_vcpus)
		return 0;
	remember_paging(p, &s->sregs);
	note_cr3(p, vcpu, &s->sregs);
	if (run->exit_reason != KVM_EXIT_IO || run->io.direction != KVM_EXIT_IO_OUT || run->io.port != PROBE_PORT ||
	    run->io.size != 1 || vcpu >= p->nr_vcpus)
		return 0;
	n = atomic_load_explicit(&p->nsites, memory_order_acquire);
	i = site_at_exit(p, n, s->regs.rip);
	if (i == n)
		return 0; /* not from a site: an ordinary (unhandled) port write */
	r = (struct probe_rec){.ts_ns = timeline_now_ns(), .site = i};
	read_stack(p, s, &r);
	record(p, vcpu, &r);
	/*
	 * To the trampoline, which runs the instruction and jumps back past the site. KVM completes a fast-path `out`
	 * only while RIP is unchanged (complete_fast_pio_out): moving it skips that; an emulated one is complete.
	 */
	s->regs.rip = p->site[i].tramp_va;
	run->kvm_dirty_regs |= KVM_SYNC_X86_REGS;
	if (atomic_fetch_add(&p->site[i].hits, 1) + 1 == PROBE_BUDGET) {
		/* Spent: the prober restores it (stopping every vCPU, this one included, so not from here). */
		atomic_store(&p->restore_pending, 1);
		pthread_mutex_lock(&p->lock);
		pthread_cond_signal(&p->cond);
		pthread_mutex_unlock(&p->lock);
	}
	return 1;
}

/* ---- the join with the trace (the trace reader) ------------------------------------------ */

static int site_of(void *ctx, uint64_t rip, uint64_t *site)
{
	struct probes *p = ctx;
	unsigned n = atomic_load_explicit(&p->nsites, memory_order_acquire);

	for (unsigned i = 0; i < n; i++)
		if (rip >= p->site[i].tramp_va && rip - p->site[i].tramp_va < PROBE_TRAMP) {
			*site = p->site[i].va; /* an interrupt taken at the jmp back counts there too */
			return 1;
		}
	return 0;
}

static int resolve(void *ctx, int vcpu, uint64_t rip, uint64_t ts, uint64_t *site, uint64_t *ret, unsigned *depth,
		   unsigned *reliable)
{
	struct probes *p = ctx;
	unsigned n = atomic_load_explicit(&p->nsites, memory_order_acquire), i;
	struct probe_ring *q;
	struct probe_rec best;
	uint64_t tail, head;
	int found = 0;

	for (i = 0; i < n && p->site[i].tramp_va != rip; i++)
		;
	if (i == n)
		return 0;
	*site = p->site[i].va;
	*depth = 0;
	if (vcpu < 0 || (unsigned)vcpu >= p->nr_vcpus) {
		atomic_fetch_add(&p->unmatched, 1);
		return 1;
	}
	/* The hit that sent this vCPU to the trampoline is its latest one recorded before the event. */
	q = &p->ring[vcpu];
	tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
	head = atomic_load_explicit(&q->head, memory_order_acquire);
	while (tail < head && q->r[tail % PROBE_RING].ts_ns < ts) {
		best = q->r[tail % PROBE_RING];
		found = 1;
		tail++;
	}
	atomic_store_explicit(&q->tail, tail, memory_order_release);
	if (!found || best.site != i) {
		atomic_fetch_add(&p->unmatched, 1);
	} else if (!best.depth) {
		atomic_fetch_add(&p->stackless, 1);
	} else {
		memcpy(ret, best.ret, best.depth * sizeof(best.ret[0]));
		*depth = best.depth;
		*reliable = best.reliable;
		atomic_fetch_add(&p->matched, 1);
	}
	return 1;
}

/* The CR3 of vCPU vcpu's latest exit to userspace before ts (events come in time order per vCPU). */
static int address_space(void *ctx, int vcpu, uint64_t ts, uint64_t *cr3)
{
	struct probes *p = ctx;
	struct probe_ctxring *q;
	uint64_t tail, head;

	if (vcpu < 0 || (unsigned)vcpu >= p->nr_vcpus)
		return 0;
	q = &p->ctxring[vcpu];
	tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
	head = atomic_load_explicit(&q->head, memory_order_acquire);
	while (tail < head && q->r[tail % PROBE_CTX_RING].ts_ns < ts) {
		q->cur = q->r[tail % PROBE_CTX_RING].cr3;
		q->have = 1;
		tail++;
	}
	atomic_store_explicit(&q->tail, tail, memory_order_release);
	*cr3 = q->cur;
	return q->have;
}

const struct trace_callers probes_trace_callers = {
    .resolve = resolve, .address_space = address_space, .site_of = site_of, .hot = request};
