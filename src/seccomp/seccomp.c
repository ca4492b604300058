/*
 * seccomp.c - attaches a thread role's allow-list and reports a denied call (include/brisk/seccomp.h). The programs
 * are compiled when brisk is built (seccomp_gen.c): a thread only attaches one.
 */
#include <errno.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "brisk/exitcode.h"
#include "seccomp_impl.h"

#define SELFTEST_ENV "BRISK_SECCOMP_SELFTEST" /* ROLE: that role's threads call execve once confined */
#define HELPER_ENV   "BRISK_SECCOMP"	      /* "off": the helpers brisk starts run unfiltered too */

static bool enabled;
static int selftest_role = -1;
static __thread int thread_role = -1; /* -1: no filter of its own (maybe one inherited from its creator) */
static int process_role = -1;	      /* a helper's role: every thread of the process has its filter (TSYNC) */

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

/* The pid in every role's tgkill rule (seccomp_impl.h): once per process, before any filter is attached. */
static void patch_pid(uint32_t pid)
{
	for (int r = 0; r < SECCOMP_ROLES; r++)
		for (unsigned i = 0; i < sc_bpf[r].nsites; i++)
			sc_bpf[r].insns[sc_bpf[r].site[i]].k = pid;
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
	patch_pid((uint32_t)getpid());
	enabled = true;
	return 0;
}

void seccomp_forked(void)
{
	if (enabled)
		patch_pid((uint32_t)getpid());
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

/* Attaches the role's program to the calling thread; the helpers' to every thread of their process (TSYNC). */
static int load(enum seccomp_role role)
{
	struct sock_fprog prog = {.len = sc_bpf[role].len, .filter = sc_bpf[role].insns};
	unsigned flags = role == SECCOMP_API_HELPER || role == SECCOMP_SLIRP_HELPER ? SECCOMP_FILTER_FLAG_TSYNC : 0;
	long ret;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	ret = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
	if (ret < 0)
		return -errno;
	return ret ? -EBUSY : 0; /* TSYNC: a thread (id ret) could not take the filter */
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
