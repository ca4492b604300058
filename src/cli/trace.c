/* trace.c - `brisk trace`: in-kernel exit accounting and redundant-work detection for another KVM process. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brisk/cli.h"
#include "brisk/exitcode.h"
#include "brisk/kallsyms.h"
#include "brisk/procmem.h"
#include "brisk/profile.h"
#include "brisk/timeline.h"

#define MSG_MAX		   512
#define WATCH_MS	   20		 /* how often the traced process is checked */
#define SERIES_MAX_BUCKETS (1u << 20)	 /* ~17 minutes of 1 ms buckets */
#define STOP_GRACE_NS	   3000000000ull /* a signalled COMMAND gets 3 s to exit before SIGKILL */
#define EXIT_NOT_FOUND	   127		 /* COMMAND not found, as POSIX shells (XCU 2.8.2) */
#define EXIT_NOT_EXEC	   126		 /* COMMAND found but could not be executed */
#define KSYMS_TRIES	   5		 /* kallsyms searches in the traced process's memory */
#define KSYMS_EVERY_NS	   2000000000ull /* between two searches */

struct tracer {
	struct report_opts opt;
	pid_t pid;
	char **cmd; /* -- COMMAND ARGS..., NULL with --pid */
	int seen_kvm;
	int status;	 /* the command's wait status */
	int exec_errno;	 /* why COMMAND could not be executed, 0 if it was */
	int exec_fd;	 /* read end of the exec-failure pipe, -1 if none */
	int stop_signal; /* the signal that asked the tracer to stop, 0 if none */
	struct trace_session trace;
	char instance[256];
	char warn[4][MSG_MAX];
	const char *warnings[4];
	unsigned nwarn;
	/* Without --symbols: the guest kernel's kallsyms, read from the traced VMM's memory while it runs. */
	int want_ksyms;
	struct symtab ksyms;
	struct ksyms_info kinfo;
	struct symtab user_syms, merged; /* --user-symbols, and the report's table with them */
	unsigned ksyms_tries;
	uint64_t ksyms_next_ns;
	char ksyms_why[MSG_MAX];
};

static struct trace_session *live_trace;

static void cleanup_trace_at_exit(void)
{
	if (live_trace)
		trace_cleanup(live_trace);
}

/* 1 when one of pid's file descriptors is a KVM VM (anon_inode:kvm-vm, virt/kvm/kvm_main.c). */
static int is_kvm_process(pid_t pid)
{
	char path[64], link[64];
	struct dirent *e;
	DIR *d;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while (!found && (e = readdir(d)) != NULL) {
		ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);

		if (n > 0) {
			link[n] = '\0';
			found = strcmp(link, "anon_inode:kvm-vm") == 0;
		}
	}
	closedir(d);
	return found;
}

/* The thread ids of pid (/proc/PID/task), at most max. */
static unsigned threads_of(pid_t pid, pid_t *tids, unsigned max)
{
	char path[64];
	struct dirent *e;
	unsigned n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	while (d && n < max && (e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			tids[n++] = (pid_t)atoi(e->d_name);
	if (d)
		closedir(d);
	return n;
}

static int usage_error(const char *msg)
{
	fprintf(stderr, "brisk trace: %s; try 'brisk help trace'\n", msg);
	return EXIT_USAGE;
}

static int parse(struct tracer *t, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		int r = report_opts_take(&t->opt, argc, argv, &i, "trace");

		if (r < 0)
			return EXIT_USAGE;
		if (r)
			continue;
		if (strcmp(argv[i], "--pid") == 0 && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);

			if (*end || v <= 0)
				return usage_error("--pid needs a process id");
			t->pid = (pid_t)v;
		} else if (strcmp(argv[i], "--") == 0 && i + 1 < argc) {
			t->cmd = argv + i + 1;
			break;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			return -1;
		} else {
			fprintf(stderr, "brisk trace: unexpected argument '%s'; try 'brisk help trace'\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!!t->pid == !!t->cmd)
		return usage_error("give either --pid PID or -- COMMAND ARGS...");
	if (t->opt.trace_out || t->opt.svg || t->opt.no_trace)
		return usage_error("--trace-out, --svg and --no-trace are brisk profile options");
	return 0;
}

/*
 * Forks COMMAND held at a pipe until tracing is set up; returns its pid or
 * -1. If exec fails, the child writes errno to *exec_fd's pipe (close-on-
 * exec, so a successful exec closes it empty) and exits 127 (not found) or
 * 126, as shells do.
 */
static pid_t spawn_held(char **cmd, int *go_fd, int *exec_fd)
{
	int p[2], e[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return -1;
	if (pipe2(e, O_CLOEXEC)) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		sigset_t none;
		char c;
		int err;

		close(p[1]);
		close(e[0]);
		if (read(p[0], &c, 1) != 1)
			_exit(EXIT_NOT_FOUND); /* the tracer gave up */
		/* The command gets the signal state brisk was started with, not brisk's signalfd setup. */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		execvp(cmd[0], cmd);
		err = errno;
		fprintf(stderr, "brisk trace: cannot execute %s: %s\n", cmd[0], strerror(err));
		if (write(e[1], &err, sizeof(err)) != sizeof(err))
			err = ENOENT;
		_exit(err == ENOENT ? EXIT_NOT_FOUND : EXIT_NOT_EXEC);
	}
	close(p[0]);
	close(e[1]);
	if (pid < 0) {
		close(p[1]);
		close(e[0]);
		return -1;
	}
	*go_fd = p[1];
	*exec_fd = e[0];
	return pid;
}

/*
 * Passes a stop signal on to COMMAND, unless the terminal already sent it
 * to COMMAND's process group (a kernel-generated SIGINT/SIGHUP reaches
 * every process of the foreground group, so COMMAND has it already).
 */
static void forward(const struct tracer *t, const struct signalfd_siginfo *si)
{
	if (si->ssi_code == SI_KERNEL && getpgid(t->pid) == getpgrp())
		return;
	kill(t->pid, (int)si->ssi_signo);
}

/* The kernel RIP that exited most so far (the reader thread is adding to the table), or 0. */
static uint64_t kernel_rip(struct tracer *t)
{
	const struct ttable *r = &t->trace.agg.rips;
	uint64_t best = 0, n = 0;

	pthread_mutex_lock(&t->trace.lock);
	for (size_t i = 0; i < r->cap; i++)
		if (r->e[i].used && r->e[i].k[0] >= 0xffff800000000000ull && r->e[i].count > n) {
			n = r->e[i].count;
			best = r->e[i].k[0];
		}
	pthread_mutex_unlock(&t->trace.lock);
	return best;
}

/*
 * The guest kernel's symbols from the traced process: its guest RAM is one of its large writable mappings,
 * read through /proc/PID/mem while the process lives (a COMMAND's memory is gone at the end). Tried once
 * the trace shows kernel RIPs, every KSYMS_EVERY_NS, KSYMS_TRIES times at most.
 */
static void try_kallsyms(struct tracer *t)
{
	struct procmem pm;
	struct gspace g;
	uint64_t want;
	char err[MSG_MAX / 2];

	if (!t->want_ksyms || t->ksyms.n || t->ksyms_tries >= KSYMS_TRIES || timeline_now_ns() < t->ksyms_next_ns)
		return;
	want = kernel_rip(t);
	if (!want)
		return;
	t->ksyms_tries++;
	t->ksyms_next_ns = timeline_now_ns() + KSYMS_EVERY_NS;
	if (procmem_open(&pm, &g, t->pid, err, sizeof(err)) == 0 &&
	    ksyms_load(&g, want, &t->ksyms, &t->kinfo, err, sizeof(err)) == 0)
		t->ksyms_why[0] = '\0';
	else
		snprintf(t->ksyms_why, sizeof(t->ksyms_why), "no symbols from the guest's memory: %s", err);
	procmem_close(&pm);
}

/*
 * Waits until the target ends. With --pid, SIGINT/SIGTERM/SIGHUP end the
 * trace. With a COMMAND, they are passed on to it and the trace ends when it
 * exits; one that is still running STOP_GRACE_NS after the first signal is
 * killed (SIGKILL).
 */
static void watch(struct tracer *t, int sig_fd)
{
	uint64_t kill_at = 0;

	for (;;) {
		struct pollfd pf = {.fd = sig_fd, .events = POLLIN};
		int st;

		if (!t->seen_kvm && is_kvm_process(t->pid) == 1)
			t->seen_kvm = 1;
		if (t->seen_kvm)
			try_kallsyms(t);
		if (t->cmd && waitpid(t->pid, &st, WNOHANG) == t->pid) {
			t->status = st;
			return;
		}
		if (!t->cmd && kill(t->pid, 0) && errno == ESRCH)
			return;
		if (kill_at && timeline_now_ns() >= kill_at) {
			fprintf(stderr, "brisk trace: %s still running %.0f s after SIG%s; killing it\n", t->cmd[0],
				(double)STOP_GRACE_NS / 1e9, sigabbrev_np(t->stop_signal));
			kill(t->pid, SIGKILL);
			kill_at = 0;
		}
		if (sig_fd >= 0 && poll(&pf, 1, WATCH_MS) > 0) {
			struct signalfd_siginfo si;

			if (read(sig_fd, &si, sizeof(si)) != sizeof(si))
				continue;
			if (!t->cmd)
				return; /* --pid: stop tracing */
			forward(t, &si);
			if (!t->stop_signal)
				kill_at = timeline_now_ns() + STOP_GRACE_NS;
			t->stop_signal = (int)si.ssi_signo;
		} else if (sig_fd < 0) {
			usleep(WATCH_MS * 1000);
		}
	}
}

/* After COMMAND ended: did its exec fail, and why (read from the exec-failure pipe). */
static void read_exec_error(struct tracer *t)
{
	int e;

	if (t->exec_fd < 0)
		return;
	if (read(t->exec_fd, &e, sizeof(e)) == (ssize_t)sizeof(e))
		t->exec_errno = e;
	close(t->exec_fd);
	t->exec_fd = -1;
}

/* COMMAND's status as a shell reports it: its exit status, or 128 + N when signal N killed it. */
static int command_status(const struct tracer *t)
{
	if (!t->cmd)
		return 0;
	if (WIFEXITED(t->status))
		return WEXITSTATUS(t->status);
	if (WIFSIGNALED(t->status))
		return 128 + WTERMSIG(t->status);
	return EXIT_HOST;
}

__attribute__((format(printf, 2, 3))) static void warn(struct tracer *t, const char *fmt, ...)
{
	va_list ap;

	if (t->nwarn == 4)
		return;
	va_start(ap, fmt);
	vsnprintf(t->warn[t->nwarn], MSG_MAX, fmt, ap);
	va_end(ap);
	t->warnings[t->nwarn] = t->warn[t->nwarn];
	t->nwarn++;
}

/* Checks --pid and starts tracing. Returns 0, -ESRCH / -EINVAL (a --pid that is gone / not KVM: usage), or -EIO. */
static int start(struct tracer *t, char *err, size_t errlen)
{
	pid_t tids[TRACE_MAX_THREADS];
	unsigned n;
	int ret;

	if (t->pid && !t->cmd) {
		ret = is_kvm_process(t->pid);
		if (ret < 0) {
			snprintf(err, errlen, "--pid %d: no such process (%s)", (int)t->pid, strerror(-ret));
			return -ESRCH;
		}
		if (!ret) {
			snprintf(err, errlen,
				 "--pid %d is not a KVM process: none of its file descriptors is anon_inode:kvm-vm",
				 (int)t->pid);
			return -EINVAL;
		}
		t->seen_kvm = 1;
	}
	n = threads_of(t->pid, tids, TRACE_MAX_THREADS);
	ret = trace_start(&t->trace, tids, n ? n : 1, 1, t->opt.buffer_kb, err, errlen);
	return ret ? -EIO : 0; /* a tracing failure is the host's, whatever its errno (not a usage error) */
}

static int report(struct tracer *t, uint64_t t0, const struct symtab *syms, const char *sym_why)
{
	uint64_t lost = t->trace.agg.lost + t->trace.overrun + t->trace.dropped;
	int kall = !(syms && syms->n) && t->ksyms.n;
	const struct symtab *all = report_merge_symbols(kall ? &t->ksyms : syms, &t->user_syms, &t->merged);
	struct json_object *r;
	struct profile_inputs in = {
	    .command = "trace",
	    .argv = t->cmd,
	    .pid = t->pid,
	    .origin_ns = t0,
	    .end_ns = timeline_now_ns(),
	    .tracing = 1,
	    .trace_instance = t->instance,
	    .tracefs_root = t->trace.root,
	    .tracefs_private = t->trace.private_mount,
	    .agg = &t->trace.agg,
	    .lost = lost,
	    .syms = all,
	    .user_symbols = t->user_syms.n ? t->opt.user_symbols : NULL,
	    .kinfo = kall ? &t->kinfo : NULL,
	    .syms_why = kall || (syms && syms->n) ? NULL : (t->ksyms_why[0] ? t->ksyms_why : sym_why),
	    .kstats_reason = "brisk trace reads no KVM statistics of another process",
	    .bucket_ns = t->opt.bucket_ns,
	};
	int ret;

	if (t->exec_errno)
		warn(t, "%s could not be executed (%s): nothing was traced", t->cmd[0], strerror(t->exec_errno));
	else if (!t->seen_kvm)
		warn(t, "the traced process never had a KVM VM open (exited early, or not a KVM process)");
	if (lost)
		warn(t,
		     "the trace lost %llu events (buffer overrun): counts are lower bounds; retry with a larger "
		     "--trace-buffer-kb",
		     (unsigned long long)lost);
	if (!kall && t->ksyms_why[0])
		warn(t, "%s", t->ksyms_why);
	else if (!kall && sym_why[0])
		warn(t, "%s", sym_why);
	in.warnings = t->warnings;
	in.nwarnings = t->nwarn;
	r = report_json_build(&in);
	if (!r)
		return -ENOMEM;
	ret = report_emit(r, &t->opt, "trace");
	json_object_put(r);
	return ret;
}

/*
 * Starts COMMAND (held), makes tracefs reachable, starts tracing, lets
 * COMMAND go and waits for it (or for --pid's process). The fork comes
 * before trace_prepare: COMMAND stays in the host's mount namespace, and
 * brisk is still single-threaded for unshare(CLONE_NEWNS).
 */
static int run_trace(struct tracer *t, const struct symtab *syms, const char *sym_why)
{
	char err[MSG_MAX];
	int go_fd = -1, sig_fd = cli_setup_signals(), ret;
	uint64_t t0 = timeline_now_ns();

	if (t->cmd && (t->pid = spawn_held(t->cmd, &go_fd, &t->exec_fd)) < 0) {
		fprintf(stderr, "brisk trace: fork: %s\n", strerror(errno));
		return EXIT_HOST;
	}
	(void)trace_prepare(&t->trace); /* on failure, trace_start reports s->why */
	trace_agg_init(&t->trace.agg, t0, t->opt.bucket_ns, SERIES_MAX_BUCKETS);
	ret = start(t, err, sizeof(err));
	if (go_fd >= 0) {
		if (ret == 0 && write(go_fd, "g", 1) != 1)
			ret = -errno;
		close(go_fd); /* on failure the child reads EOF and exits 127 */
	}
	if (ret) {
		fprintf(stderr, "brisk trace: %s\n", err);
		if (t->cmd)
			waitpid(t->pid, NULL, 0);
		read_exec_error(t);
		return ret == -EINVAL || ret == -ESRCH ? EXIT_USAGE : EXIT_HOST;
	}
	live_trace = &t->trace;
	snprintf(t->instance, sizeof(t->instance), "%s", strrchr(t->trace.dir, '/') + 1);
	watch(t, sig_fd);
	trace_stop(&t->trace);
	live_trace = NULL;
	if (sig_fd >= 0)
		close(sig_fd);
	read_exec_error(t);
	if (report(t, t0, syms, sym_why))
		return EXIT_HOST;
	return command_status(t);
}

int cmd_trace(int argc, char **argv)
{
	struct tracer *t = calloc(1, sizeof(*t));
	struct symtab syms = {0};
	char err[MSG_MAX], why[MSG_MAX];
	int ret;

	if (!t)
		return EXIT_HOST;
	t->trace.pipe_fd = -1;
	t->exec_fd = -1;
	report_opts_defaults(&t->opt);
	ret = parse(t, argc, argv);
	if (ret < 0) {
		cli_usage(stdout, "trace");
		ret = 0;
	} else if (!ret && report_load_symbols(&syms, t->opt.symbols, NULL, err, sizeof(err), why, sizeof(why))) {
		fprintf(stderr, "brisk trace: --symbols: %s\n", err);
		ret = EXIT_USAGE;
	} else if (!ret && t->opt.user_symbols && symtab_load(&t->user_syms, t->opt.user_symbols, err, sizeof(err))) {
		fprintf(stderr, "brisk trace: --user-symbols: %s\n", err);
		ret = EXIT_USAGE;
	} else if (!ret) {
		atexit(cleanup_trace_at_exit);
		t->want_ksyms = !syms.n;
		ret = run_trace(t, &syms, why);
	}
	symtab_free(&syms);
	symtab_free(&t->ksyms);
	symtab_free(&t->user_syms);
	symtab_free(&t->merged);
	trace_agg_free(&t->trace.agg);
	free(t);
	return ret;
}
