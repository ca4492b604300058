/* seccomp.c - installs a thread role's allow-list (libseccomp) and reports a denied call (include/brisk/seccomp.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_tun.h>
#include <linux/kvm.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h> /* BLKGETSIZE64 */
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <termios.h>
#include <ucontext.h>
#include <unistd.h>

#include "brisk/exitcode.h"
#include "seccomp_impl.h"

#define SELFTEST_ENV "BRISK_SECCOMP_SELFTEST" /* ROLE: that role's threads call execve once confined */
#define HELPER_ENV   "BRISK_SECCOMP"	      /* "off": the helpers brisk starts run unfiltered too */

static bool enabled;
static int selftest_role = -1;
static pid_t self_pid;
static __thread int thread_role = -1; /* -1: no filter of its own (maybe one inherited from its creator) */
static int process_role = -1;	      /* a helper's role: every thread of the process has its filter (TSYNC) */

/*
 * ioctl is allowed by request number only. The vCPU thread: KVM_RUN, the
 * register dump of an exit that ends the VM, and the device wiring a
 * driver's register write triggers (an IRQ line, a queue's ioeventfd and
 * irqfd, the tap's offloads once the driver chose its features). The main thread: the state a snapshot reads (VM and
 * vCPUs), the same device wiring (a device reset or stopped there), and the terminal restored at exit. brisk-slirp:
 * libslirp's non-blocking switch and queue size.
 */
static const unsigned long vcpu_ioctls[] = {KVM_RUN,	   KVM_GET_REGS, KVM_GET_SREGS, KVM_IRQ_LINE,
					    KVM_IOEVENTFD, KVM_IRQFD,	 TUNSETOFFLOAD};
static const unsigned long main_ioctls[] = {KVM_CHECK_EXTENSION,
					    KVM_GET_CLOCK,
					    KVM_GET_IRQCHIP,
					    KVM_GET_PIT2,
					    KVM_GET_REGS,
					    KVM_GET_SREGS,
					    KVM_GET_FPU,
					    KVM_GET_MSRS,
					    KVM_GET_XSAVE,
					    KVM_GET_XSAVE2,
					    KVM_GET_XCRS,
					    KVM_GET_LAPIC,
					    KVM_GET_MP_STATE,
					    KVM_GET_VCPU_EVENTS,
					    KVM_GET_DEBUGREGS,
					    KVM_GET_CPUID2,
					    KVM_GET_TSC_KHZ,
					    KVM_IRQ_LINE,
					    KVM_IOEVENTFD,
					    KVM_IRQFD,
					    TCSETS,
					    TCGETS,
					    BLKGETSIZE64};
static const unsigned long slirp_ioctls[] = {FIONBIO, FIONREAD};

struct ioctl_list {
	const unsigned long *req;
	unsigned n;
};
#define IOCTLS(a)                                                                                                      \
	{                                                                                                              \
		a, sizeof(a) / sizeof(a[0])                                                                            \
	}
static const struct ioctl_list role_ioctls[SECCOMP_ROLES] = {
    [SECCOMP_MAIN] = IOCTLS(main_ioctls),
    [SECCOMP_VCPU] = IOCTLS(vcpu_ioctls),
    [SECCOMP_SLIRP_HELPER] = IOCTLS(slirp_ioctls),
};

/* Names the SIGSYS report knows beyond the allow-lists: what a compromised thread would reach for. */
static const struct sc_call denied_names[] = {SC(execve),
					      SC(execveat),
					      SC(ptrace),
					      SC(process_vm_readv),
					      SC(process_vm_writev),
					      SC(open),
					      SC(openat),
					      SC(openat2),
					      SC(socket),
					      SC(connect),
					      SC(bind),
					      SC(listen),
					      SC(accept),
					      SC(accept4),
					      SC(sendto),
					      SC(recvfrom),
					      SC(fork),
					      SC(vfork),
					      SC(clone3),
					      SC(mount),
					      SC(unshare),
					      SC(setns),
					      SC(chroot),
					      SC(pivot_root),
					      SC(setuid),
					      SC(setgid),
					      SC(prctl),
					      SC(seccomp),
					      SC(bpf),
					      SC(perf_event_open),
					      SC(ioctl),
					      SC(mremap),
					      SC(memfd_create),
					      SC(kill),
					      SC(getppid),
					      SC(uname),
					      SC(readlink),
					      SC(unlink),
					      SC(rename),
					      SC(mkdir),
					      SC(chmod),
					      SC(getdents64),
					      SC(nanosleep),
					      SC(sched_yield),
					      SC(getrandom),
					      SC(poll),
					      SC(ppoll),
					      SC(select),
					      SC(pselect6),
					      SC(epoll_pwait),
					      {0, NULL}};

static const char *call_name(int nr)
{
	for (unsigned r = 0; r < SECCOMP_ROLES; r++)
		for (const struct sc_call *c = sc_roles[r].calls; c->name; c++)
			if (c->nr == nr)
				return c->name;
	for (const struct sc_call *c = denied_names; c->name; c++)
		if (c->nr == nr)
			return c->name;
	return "?";
}

static size_t buf_put(char *buf, size_t at, size_t cap, const char *s)
{
	while (*s && at < cap)
		buf[at++] = *s++;
	return at;
}

/* The report, with async-signal-safe calls only: the number formatted by hand, one write(2), _exit. */
static void on_sigsys(int sig, siginfo_t *si, void *ucv)
{
	const ucontext_t *uc = ucv;
	char buf[192], num[12], req[19];
	int nr = si->si_syscall, i = (int)sizeof(num);
	unsigned v = (unsigned)(nr < 0 ? -nr : nr);
	unsigned long r = (unsigned long)uc->uc_mcontext.gregs[REG_RSI]; /* the second argument (x86-64 ABI) */
	size_t n = 0;

	(void)sig;
	num[--i] = '\0';
	do
		num[--i] = (char)('0' + v % 10);
	while ((v /= 10) && i > 1);
	if (nr < 0)
		num[--i] = '-';
	req[0] = '0', req[1] = 'x', req[18] = '\0';
	for (int k = 17; k >= 2; k--, r >>= 4)
		req[k] = "0123456789abcdef"[r & 0xf];
	n = buf_put(buf, n, sizeof(buf), "brisk: seccomp: thread ");
	n = buf_put(buf, n, sizeof(buf),
		    thread_role >= 0	? sc_roles[thread_role].name
		    : process_role >= 0 ? sc_roles[process_role].name
					: "(inherited filter)");
	n = buf_put(buf, n, sizeof(buf), " called denied syscall ");
	n = buf_put(buf, n, sizeof(buf), call_name(nr));
	n = buf_put(buf, n, sizeof(buf), " (nr ");
	n = buf_put(buf, n, sizeof(buf), num + i);
	if (nr == SCMP_SYS(ioctl)) { /* which request: the allow-lists are per request */
		n = buf_put(buf, n, sizeof(buf), ", request ");
		n = buf_put(buf, n, sizeof(buf), req);
	}
	n = buf_put(buf, n, sizeof(buf) - 1, ")\n");
	if (write(STDERR_FILENO, buf, n) < 0)
		n = 0; /* nothing better to do: the status still says it */
	_exit(EXIT_SECCOMP);
}

int seccomp_configure(bool on)
{
	struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
	const char *st = getenv(SELFTEST_ENV);

	enabled = false;
	if (!on)
		return setenv(HELPER_ENV, "off", 1) ? -errno : 0;
	if (unsetenv(HELPER_ENV))
		return -errno;
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) /* EINVAL: a kernel without CONFIG_SECCOMP */
		return -errno;
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL))
		return -errno;
	for (int r = 0; st && r < SECCOMP_ROLES; r++)
		if (strcmp(st, sc_roles[r].name) == 0)
			selftest_role = r;
	self_pid = getpid();
	enabled = true;
	return 0;
}

bool seccomp_helper_wanted(void)
{
	const char *v = getenv(HELPER_ENV);

	return !v || strcmp(v, "off") != 0;
}

bool seccomp_on(void)
{
	return enabled;
}

const char *seccomp_role_name(enum seccomp_role role)
{
	return sc_roles[role].name;
}

static bool seen_before(const struct sc_call *calls, const struct sc_call *c)
{
	for (const struct sc_call *p = calls; p < c; p++)
		if (p->nr == c->nr)
			return true;
	return false;
}

const char *const *seccomp_role_syscalls(enum seccomp_role role, unsigned *count)
{
	static const char *names[SECCOMP_ROLES][128];
	const struct sc_call *calls = sc_roles[role].calls;
	unsigned n = 0;

	for (const struct sc_call *c = calls; c->name && n < 127; c++)
		if (!seen_before(calls, c) && c->nr != SCMP_SYS(clone3))
			names[role][n++] = c->name;
	names[role][n] = NULL;
	*count = n;
	return names[role];
}

static bool role_allows(const struct sc_call *calls, int nr)
{
	for (const struct sc_call *c = calls; c->name; c++)
		if (c->nr == nr)
			return true;
	return false;
}

/* Roles with no socket of their own may only send(2) a log line to stderr (a socket stderr, log.c). */
static bool sendto_stderr_only(enum seccomp_role role)
{
	return role == SECCOMP_VCPU || role == SECCOMP_BLK;
}

/* One allow rule for `nr`, with the argument checks some calls get. Returns 0 or a libseccomp -errno. */
static int add_call(scmp_filter_ctx ctx, enum seccomp_role role, int nr)
{
	const struct ioctl_list *io = &role_ioctls[role];
	int ret = 0;

#if defined(__SANITIZE_ADDRESS__)
	if ((role == SECCOMP_MAIN || role == SECCOMP_API_HELPER || role == SECCOMP_SLIRP_HELPER) &&
	    (nr == SCMP_SYS(prctl) || nr == SCMP_SYS(clone))) /* LeakSanitizer at exit */
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
#endif
	if (nr == SCMP_SYS(ioctl)) {
		for (unsigned i = 0; i < io->n && !ret; i++)
			ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
					       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, io->req[i]));
		return ret;
	}
	if (nr == SCMP_SYS(mmap) || nr == SCMP_SYS(mprotect)) /* no new executable memory */
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	if (nr == SCMP_SYS(tgkill)) /* threads of this process only */
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)self_pid));
	if (nr == SCMP_SYS(kill)) /* a helper that would not exit */
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A1(SCMP_CMP_EQ, SIGKILL));
	if (nr == SCMP_SYS(clone)) /* threads, never a process */
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
					SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
	if (nr == SCMP_SYS(clone3)) /* its flags are behind a pointer: glibc falls back to clone on ENOSYS */
		return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
	if (nr == SCMP_SYS(prctl)) { /* adding a filter, naming a thread */
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_NO_NEW_PRIVS));
		return ret ? ret : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME));
	}
	if (nr == SCMP_SYS(seccomp))
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, SECCOMP_SET_MODE_FILTER));
	if (nr == SCMP_SYS(sendto) && sendto_stderr_only(role))
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, STDERR_FILENO));
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
}

/* The role's filter as a libseccomp context (NULL and *ret when that fails). */
static scmp_filter_ctx build(enum seccomp_role role, int *ret)
{
	const struct sc_call *calls = sc_roles[role].calls;
	bool process = role == SECCOMP_API_HELPER || role == SECCOMP_SLIRP_HELPER;
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);

	*ret = 0;
	if (!ctx) {
		*ret = -ENOMEM;
		return NULL;
	}
	/* Not TSYNC for brisk's threads: seccomp_load then filters the calling thread only (seccomp(2)). */
	if (process)
		*ret = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	for (const struct sc_call *c = calls; c->name && !*ret; c++)
		if (!seen_before(calls, c))
			*ret = add_call(ctx, role, c->nr);
	/*
	 * A role that opens no file still gets an answer, not the report, for openat: glibc's malloc reads
	 * /proc/sys/vm/overcommit_memory the first time it shrinks a thread's heap, and copes with EACCES.
	 */
	if (!*ret && !role_allows(calls, SCMP_SYS(openat)))
		*ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat), 0);
	if (*ret) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

/*
 * Compiled programs of brisk's thread roles, filled once by seccomp_prepare off the critical path (a vCPU
 * thread while the main thread still builds the VM): libseccomp takes ~50-100 us to generate a program,
 * the kernel ~10 us to attach one. `ready` is set once `prog` is complete and never changes after.
 */
static struct {
	struct sock_fprog prog;
	atomic_bool ready;
} cache[SECCOMP_ROLES];
static atomic_bool preparing;

/* libseccomp 2.5 exports BPF to a file descriptor only: a memfd, read back. */
static int compile(enum seccomp_role role, struct sock_fprog *prog)
{
	int ret, fd = (int)syscall(SYS_memfd_create, "brisk-seccomp", MFD_CLOEXEC);
	scmp_filter_ctx ctx = build(role, &ret);
	off_t size = -1;
	void *buf = NULL;

	if (fd >= 0 && ctx && seccomp_export_bpf(ctx, fd) == 0)
		size = lseek(fd, 0, SEEK_END);
	if (size > 0 && size % (off_t)sizeof(struct sock_filter) == 0 && (buf = malloc((size_t)size)) &&
	    pread(fd, buf, (size_t)size, 0) == size) {
		prog->filter = buf;
		prog->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
		buf = NULL;
		ret = 0;
	} else {
		ret = ret ? ret : -EIO;
	}
	free(buf);
	if (ctx)
		seccomp_release(ctx);
	if (fd >= 0)
		close(fd);
	return ret;
}

void seccomp_prepare(void)
{
	if (!enabled || atomic_exchange(&preparing, true))
		return;
	for (int r = 0; r < SECCOMP_ROLES; r++)
		if (r != SECCOMP_API_HELPER && r != SECCOMP_SLIRP_HELPER && compile(r, &cache[r].prog) == 0)
			atomic_store(&cache[r].ready, true);
}

/* Attaches the role's filter to the calling thread: the compiled program when there is one, else built here. */
static int load(enum seccomp_role role)
{
	int ret;
	scmp_filter_ctx ctx;

	if (atomic_load(&cache[role].ready)) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &cache[role].prog))
			return -errno;
		return 0;
	}
	ctx = build(role, &ret);
	if (ctx) {
		ret = seccomp_load(ctx);
		seccomp_release(ctx);
	}
	return ret;
}

void seccomp_enter(enum seccomp_role role)
{
	int ret;

	sigset_t sys;

	if (!enabled || thread_role == (int)role)
		return;
	thread_role = (int)role;
	if (role == SECCOMP_API_HELPER || role == SECCOMP_SLIRP_HELPER)
		process_role = (int)role;
	/* A trapped call raises SIGSYS in this thread: were it blocked, the kernel would kill without the report. */
	sigemptyset(&sys);
	sigaddset(&sys, SIGSYS);
	ret = -pthread_sigmask(SIG_UNBLOCK, &sys, NULL);
	if (!ret)
		ret = load(role);
	if (ret) {
		const char *what = strerror(-ret);

		if (write(STDERR_FILENO, "brisk: error: seccomp: cannot install the filter of thread ", 59) < 0 ||
		    write(STDERR_FILENO, sc_roles[role].name, strlen(sc_roles[role].name)) < 0 ||
		    write(STDERR_FILENO, ": ", 2) < 0 || write(STDERR_FILENO, what, strlen(what)) < 0 ||
		    write(STDERR_FILENO, "\n", 1) < 0)
			ret = 0;
		_exit(EXIT_HOST); /* a thread that cannot be confined must not run unconfined */
	}
	if (selftest_role == (int)role)
		syscall(SYS_execve, "", NULL, NULL); /* denied in every role (unfiltered: ENOENT, nothing runs) */
}
