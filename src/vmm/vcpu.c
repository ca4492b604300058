/* vcpu.c - one thread per vCPU: create and configure it, then the KVM_RUN loop and its exit dispatch. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "brisk/cpuid.h"
#include "brisk/exitcode.h"
#include "brisk/log.h"
#include "brisk/seccomp.h"
#include "brisk/timeline.h"
#include "vm_impl.h"

/* The signal that kicks a vCPU thread out of KVM_RUN (api.rst 4.10, immediate_exit). */
#define VCPU_KICK_SIGNAL SIGUSR1

static void kick_handler(int sig)
{
	(void)sig; /* its only job is to make KVM_RUN return EINTR */
}

int vcpu_signals_init(void)
{
	struct sigaction sa = {.sa_handler = kick_handler}; /* no SA_RESTART */

	sigemptyset(&sa.sa_mask);
	return sigaction(VCPU_KICK_SIGNAL, &sa, NULL) ? -errno : 0;
}

void vcpu_kick(struct vcpu *v)
{
	if (v->run)
		__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	if (v->started && !atomic_load(&v->done))
		pthread_kill(v->thread, VCPU_KICK_SIGNAL);
}

static void dump_segment(const char *name, const struct kvm_segment *s)
{
	log_error("  %-3s sel=0x%04x base=0x%016llx limit=0x%08x type=%u p=%u dpl=%u db=%u l=%u g=%u", name,
		  s->selector, (unsigned long long)s->base, s->limit, s->type, s->present, s->dpl, s->db, s->l, s->g);
}

/* Register dump for the exits that end the VM (docs/exit-codes.md). */
static void dump_registers(struct vcpu *v)
{
	struct kvm_regs r;
	struct kvm_sregs s;

	if (KVM_IOCTL(v->fd, KVM_GET_REGS, &r) || KVM_IOCTL(v->fd, KVM_GET_SREGS, &s)) {
		log_error("vCPU %u: cannot read registers: %s", v->index, strerror(errno));
		return;
	}
	log_error("vCPU %u registers:", v->index);
	log_error("  rip=0x%016llx rsp=0x%016llx rflags=0x%016llx", r.rip, r.rsp, r.rflags);
	log_error("  rax=0x%016llx rbx=0x%016llx rcx=0x%016llx rdx=0x%016llx", r.rax, r.rbx, r.rcx, r.rdx);
	log_error("  rsi=0x%016llx rdi=0x%016llx rbp=0x%016llx", r.rsi, r.rdi, r.rbp);
	log_error("  r8 =0x%016llx r9 =0x%016llx r10=0x%016llx r11=0x%016llx", r.r8, r.r9, r.r10, r.r11);
	log_error("  r12=0x%016llx r13=0x%016llx r14=0x%016llx r15=0x%016llx", r.r12, r.r13, r.r14, r.r15);
	log_error("  cr0=0x%llx cr2=0x%llx cr3=0x%llx cr4=0x%llx efer=0x%llx", s.cr0, s.cr2, s.cr3, s.cr4, s.efer);
	dump_segment("cs", &s.cs);
	dump_segment("ss", &s.ss);
	dump_segment("ds", &s.ds);
	dump_segment("tr", &s.tr);
	log_error("  gdt base=0x%llx limit=0x%x idt base=0x%llx limit=0x%x", s.gdt.base, s.gdt.limit, s.idt.base,
		  s.idt.limit);
	if (r.rip == 0xfff0 && s.cs.selector == 0xf000 && s.cs.base == 0xffff0000 &&
	    v->run->exit_reason == KVM_EXIT_SHUTDOWN)
		log_error(
		    "  (these are the reset values: KVM on AMD SVM resets a vCPU that shut down, so its state at the "
		    "fault is gone; the kvm:kvm_exit tracepoint's \"reason shutdown\" event has the guest's rip and "
		    "the exception it was delivering)");
}

/* Firecracker's vcpu.failures: a run that ends in an error (its vCPU thread's own counter, exits.h). */
static void count_failure(struct vcpu *v)
{
	fcm_inc(v->stats.fc, FCM_VCPU_failures);
}

static int end_vm(struct vcpu *v, int code, const char *what)
{
	count_failure(v);
	log_error("vCPU %u: %s", v->index, what);
	dump_registers(v);
	vm_request_exit(v->vm, code, what);
	return -1;
}

/* KVM_EXIT_IO: the data lives in the run page at data_offset (api.rst 5, kvm_run). */
static int handle_io(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint64_t size = run->io.size, count = run->io.count, off = run->io.data_offset;
	uint8_t *p = (uint8_t *)run + off;

	/* KVM fills these, but a bad value must not make us read past the mapping. */
	if ((size != 1 && size != 2 && size != 4) || count == 0 || off > (uint64_t)v->vm->kvm.run_size ||
	    size * count > (uint64_t)v->vm->kvm.run_size - off)
		return end_vm(v, EXIT_UNKNOWN_EXIT, "malformed KVM_EXIT_IO from KVM");
	for (uint64_t i = 0; i < count; i++, p += size) {
		if (run->io.direction == KVM_EXIT_IO_OUT)
			bus_write(&v->vm->bus, BUS_PIO, run->io.port, p, (unsigned)size);
		else
			bus_read(&v->vm->bus, BUS_PIO, run->io.port, p, (unsigned)size);
	}
	return 0;
}

static int handle_mmio(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	unsigned len = run->mmio.len;

	if (len == 0 || len > sizeof(run->mmio.data))
		return end_vm(v, EXIT_UNKNOWN_EXIT, "malformed KVM_EXIT_MMIO from KVM");
	if (run->mmio.is_write)
		bus_write(&v->vm->bus, BUS_MMIO, run->mmio.phys_addr, run->mmio.data, len);
	else
		bus_read(&v->vm->bus, BUS_MMIO, run->mmio.phys_addr, run->mmio.data, len);
	return 0;
}

static int handle_internal_error(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	char what[256];
	int n =
	    snprintf(what, sizeof(what), "KVM_EXIT_INTERNAL_ERROR suberror %u%s", run->internal.suberror,
		     run->internal.suberror == KVM_INTERNAL_ERROR_EMULATION ? " (instruction emulation failed)" : "");

	for (unsigned i = 0; i < run->internal.ndata && i < 16 && n < (int)sizeof(what) - 20; i++)
		n += snprintf(what + n, sizeof(what) - (size_t)n, " data[%u]=0x%llx", i,
			      (unsigned long long)run->internal.data[i]);
	return end_vm(v, EXIT_INTERNAL_ERROR, what);
}

static int handle_system_event(struct vcpu *v)
{
	switch (v->run->system_event.type) {
	case KVM_SYSTEM_EVENT_SHUTDOWN:
	case KVM_SYSTEM_EVENT_RESET:
		vm_request_exit(v->vm, EXIT_GUEST_OK, "guest system event (shutdown/reset)");
		return -1;
	default:
		return end_vm(v, EXIT_UNKNOWN_EXIT, "unexpected KVM_EXIT_SYSTEM_EVENT");
	}
}

/* One exit: 0 to continue, -1 when the VM is ending. A short switch. */
static int dispatch(struct vcpu *v)
{
	const struct vm_hooks *h = v->vm->cfg.hooks;
	char what[96];

	if (h && h->exit && h->exit(v->vm, v->index, v->run, h->ctx))
		return 0; /* the profiler's (vm.h) */
	switch (v->run->exit_reason) {
	case KVM_EXIT_IO:
		return handle_io(v);
	case KVM_EXIT_MMIO:
		return handle_mmio(v);
	case KVM_EXIT_INTR:
		return 0;
	case KVM_EXIT_SHUTDOWN:
		return end_vm(v, EXIT_TRIPLE_FAULT, "KVM_EXIT_SHUTDOWN: the guest triple-faulted");
	case KVM_EXIT_INTERNAL_ERROR:
		return handle_internal_error(v);
	case KVM_EXIT_FAIL_ENTRY:
		snprintf(what, sizeof(what), "KVM_EXIT_FAIL_ENTRY: hardware entry failure reason 0x%llx",
			 (unsigned long long)v->run->fail_entry.hardware_entry_failure_reason);
		return end_vm(v, EXIT_FAIL_ENTRY, what);
	case KVM_EXIT_SYSTEM_EVENT:
		return handle_system_event(v);
	case KVM_EXIT_IOAPIC_EOI: /* split irqchip: a level-triggered vector EOIed (api.rst 5, kvm_run eoi) */
		if (v->vm->ioapic)
			ioapic_eoi(v->vm->ioapic, v->run->eoi.vector);
		return 0;
	case KVM_EXIT_HLT:
		/* Only without an in-kernel LAPIC; brisk always has one. */
		vm_request_exit(v->vm, EXIT_GUEST_OK, "guest halted");
		return -1;
	default:
		snprintf(what, sizeof(what), "unhandled exit reason %u", v->run->exit_reason);
		return end_vm(v, EXIT_UNKNOWN_EXIT, what);
	}
}

static void account(struct vcpu *v, uint64_t t0)
{
	exit_stats_account(&v->stats, v->run, t0, timeline_now_ns());
}

static int run_loop(struct vcpu *v)
{
	struct vm *vm = v->vm;

	/* Paused before the first entry (a restore without resume_vm): the state set is the state saved. */
	if (atomic_load(&vm->pause_req))
		vm_vcpu_park(v);
	timeline_mark(TL_FIRST_RUN);
	while (!atomic_load(&vm->exit_requested)) {
		if (KVM_IOCTL(v->fd, KVM_RUN, 0) < 0) {
			/*
			 * EINTR: kicked; EAGAIN: an AP woke for an event before its SIPI.
			 * Either way KVM completed any pending MMIO/PIO read first, so
			 * the state is consistent here and only here (api.rst 4.10,
			 * "immediate_exit"): where a pause parks the thread.
			 */
			if (errno == EINTR || errno == EAGAIN) {
				v->run->immediate_exit = 0;
				if (atomic_load(&vm->pause_req))
					vm_vcpu_park(v);
				continue;
			}
			count_failure(v);
			log_error("vCPU %u: KVM_RUN failed: %s", v->index, strerror(errno));
			vm_request_exit(vm, EXIT_HOST, "KVM_RUN failed");
			return -1;
		}
		timeline_mark(TL_FIRST_EXIT);
		uint64_t t0 = timeline_now_ns();
		int ret = dispatch(v);

		account(v, t0);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Records why this vCPU's set-up failed in v->setup_why (one line naming the call and the values), which
 * vm_start hands to the API's reply and the CLI's message. Returns the exit status: the host's (4).
 */
__attribute__((format(printf, 2, 3))) static int setup_failed(struct vcpu *v, const char *fmt, ...)
{
	va_list ap;

	v->setup_why.kind = VM_ERR_HOST;
	va_start(ap, fmt);
	vsnprintf(v->setup_why.msg, sizeof(v->setup_why.msg), fmt, ap);
	va_end(ap);
	return EXIT_HOST;
}

/* KVM_CREATE_VCPU and the run page: needs only the VM and its irqchip. */
static int vcpu_create(struct vcpu *v)
{
	struct vm *vm = v->vm;
	void *run;

	/* The id is the APIC ID CPUID and the MP table report, so the LAPIC agrees with them (gaps included). */
	v->fd = KVM_IOCTL(vm->fd, KVM_CREATE_VCPU, v->apic_id);
	if (v->fd < 0)
		return setup_failed(v, "KVM_CREATE_VCPU %u (vCPU %u) failed: %s", v->apic_id, v->index,
				    strerror(errno));
	run = mmap(NULL, (size_t)vm->kvm.run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (run == MAP_FAILED)
		return setup_failed(v, "mmap of vCPU %u's kvm_run failed: %s", v->index, strerror(errno));
	v->run = run;
	return 0;
}

/* CPUID, MSRs, and for the boot vCPU the entry state: needs the published per-VM template. */
static int vcpu_configure(struct vcpu *v)
{
	struct vm *vm = v->vm;
	struct kvm_cpuid2 *scratch = malloc((size_t)cpuid_table_size(vm->cpuid_vm.tmpl));
	char err[sizeof(v->setup_why.msg) / 2];
	int ret = 0;

	if (!scratch)
		return setup_failed(v, "vCPU %u: out of memory for its CPUID table", v->index);
	/* One KVM_SET_CPUID2 and one KVM_SET_MSRS, in parallel with the other vCPU threads. */
	if (cpuid_vcpu_configure(v->fd, &vm->cpuid_vm, v->index, scratch, err, sizeof(err)))
		ret = setup_failed(v, "%s", err);
	/* APs stay in KVM_MP_STATE_UNINITIALIZED until the BSP sends INIT/SIPI. */
	else if (v->index == 0 && !vm->restoring && x86_vcpu_set_entry(v->fd, &vm->entry, err, sizeof(err)))
		ret = setup_failed(v, "setting vCPU 0's boot registers failed: %s", err);
	free(scratch);
	return ret;
}

/* This thread's page faults and kernel time as it ends, for brisk profile (exits.h). */
static void record_rusage(struct exit_stats *s)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) != 0)
		return;
	s->ru_minflt = (uint64_t)ru.ru_minflt;
	s->ru_majflt = (uint64_t)ru.ru_majflt;
	s->ru_stime_us = (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec;
	s->ru_valid = 1;
}

void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	struct vm *vm = v->vm;
	sigset_t kick;
	char name[16];

	/* Firecracker's name (v1.7.0 src/vmm/src/vstate/vcpu/mod.rs): Kata finds the vCPU threads by it (comm). */
	snprintf(name, sizeof(name), "fc_vcpu %u", v->index);
	prctl(PR_SET_NAME, name, 0, 0, 0);
	log_set_thread_name(name); /* and in the logger's lines */
	sigemptyset(&kick);
	sigaddset(&kick, VCPU_KICK_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &kick, NULL);
	v->tid = gettid();
	v->setup_error = vcpu_create(v);
	if (vm_vcpu_wait_config(vm) == 0 && !v->setup_error)
		v->setup_error = vcpu_configure(v);
	vm_vcpu_ready(vm);
	/*
	 * Configured: from here on only what the guest's exits need. Attached between ready and go, while the main
	 * thread finishes the build (its own filter; a restore's saved state, which it sets on this vCPU's fd), not
	 * after go on the way to the first KVM_RUN (docs/performance.md, "The console's input thread and the vCPU's
	 * filter").
	 */
	if (!v->setup_error)
		seccomp_enter(SECCOMP_VCPU);
	vm_vcpu_wait_go(vm);
	if (!v->setup_error && !atomic_load(&vm->exit_requested))
		run_loop(v);
	record_rusage(&v->stats);
	atomic_store(&v->done, 1);
	return NULL;
}

void vcpu_print_stats(const struct vm *vm, FILE *f)
{
	fprintf(f, "%-6s %-16s %10s %12s\n", "vcpu", "exit reason", "count", "total us");
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		const struct exit_stats *s = &vm->vcpus[i].stats;

		for (unsigned r = 0; r < EXIT_REASONS; r++)
			if (s->exits[r])
				fprintf(f, "%-6u %-16s %10llu %12.1f\n", i, exit_reason_name(r),
					(unsigned long long)s->exits[r], (double)s->ns[r] / 1e3);
	}
	fprintf(f, "\n%-6s %-4s %-5s %-14s %10s %12s\n", "vcpu", "kind", "dir", "address", "count", "total us");
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		exit_stats_print_addrs(&vm->vcpus[i].stats, i, f);
}
