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
#include "brisk/profile.h"
#include "brisk/timeline.h"

#define MSG_MAX		   512
#define WATCH_MS	   20	      /* how often the traced process is checked */
#define SERIES_MAX_BUCKETS (1u << 20) /* ~17 minutes of 1 ms buckets */

struct tracer {
	struct report_opts opt;
	pid_t pid;
	char **cmd; /* -- COMMAND ARGS..., NULL with --pid */
	int seen_kvm;
	int status; /* the command's wait status */
	struct trace_session trace;
	char instance[256];
	char warn[4][MSG_MAX];
	const char *warnings[4];
	unsigned nwarn;
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

/* Forks COMMAND held at a pipe until tracing is set up; returns its pid or -1. */
static pid_t spawn_held(char **cmd, int *go_fd)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid == 0) {
		sigset_t none;
		char c;

		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(127); /* the tracer gave up */
		/* The command gets the signal state brisk was started with, not brisk's signalfd setup. */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		execvp(cmd[0], cmd);
		fprintf(stderr, "brisk trace: cannot execute %s: %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	close(p[0]);
	if (pid < 0) {
		close(p[1]);
		return -1;
	}
	*go_fd = p[1];
	return pid;
}

/* Waits until the target ends (or a signal stops the trace of a --pid). */
static void watch(struct tracer *t, int sig_fd)
{
	for (;;) {
		struct pollfd pf = {.fd = sig_fd, .events = POLLIN};
		int st;

		if (!t->seen_kvm && is_kvm_process(t->pid) == 1)
			t->seen_kvm = 1;
		if (t->cmd && waitpid(t->pid, &st, WNOHANG) == t->pid) {
			t->status = st;
			return;
		}
		if (!t->cmd && kill(t->pid, 0) && errno == ESRCH)
			return;
		if (sig_fd >= 0 && poll(&pf, 1, WATCH_MS) > 0) {
			struct signalfd_siginfo si;

			if (read(sig_fd, &si, sizeof(si)) == sizeof(si) && !t->cmd)
				return; /* --pid: stop tracing; a command gets the signal too and ends itself */
		} else if (sig_fd < 0) {
			usleep(WATCH_MS * 1000);
		}
	}
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
	return trace_start(&t->trace, tids, n ? n : 1, 1, t->opt.buffer_kb, err, errlen);
}

static int report(struct tracer *t, uint64_t t0, const struct symtab *syms, const char *sym_why)
{
	uint64_t lost = t->trace.agg.lost + t->trace.overrun + t->trace.dropped;
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
	    .syms = syms,
	    .kstats_reason = "brisk trace reads no KVM statistics of another process",
	    .bucket_ns = t->opt.bucket_ns,
	};
	int ret;

	if (!t->seen_kvm)
		warn(t, "the traced process never had a KVM VM open (exited early, or not a KVM process)");
	if (lost)
		warn(t,
		     "the trace lost %llu events (buffer overrun): counts are lower bounds; retry with a larger "
		     "--trace-buffer-kb",
		     (unsigned long long)lost);
	if (sym_why[0])
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

static int run_trace(struct tracer *t, const struct symtab *syms, const char *sym_why)
{
	char err[MSG_MAX];
	int go_fd = -1, sig_fd = cli_setup_signals(), ret;
	uint64_t t0 = timeline_now_ns();

	if (t->cmd && (t->pid = spawn_held(t->cmd, &go_fd)) < 0) {
		fprintf(stderr, "brisk trace: fork: %s\n", strerror(errno));
		return EXIT_HOST;
	}
	/*
	 * After the fork: COMMAND stays in the host's mount namespace, and brisk
	 * is still single-threaded, as unshare(CLONE_NEWNS) needs.
	 */
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
		return ret == -EINVAL || ret == -ESRCH ? EXIT_USAGE : EXIT_HOST;
	}
	live_trace = &t->trace;
	snprintf(t->instance, sizeof(t->instance), "%s", strrchr(t->trace.dir, '/') + 1);
	watch(t, sig_fd);
	trace_stop(&t->trace);
	live_trace = NULL;
	if (sig_fd >= 0)
		close(sig_fd);
	ret = report(t, t0, syms, sym_why) ? EXIT_HOST : 0;
	if (t->cmd && WIFEXITED(t->status) && WEXITSTATUS(t->status) == 127 && !t->seen_kvm)
		fprintf(stderr, "brisk trace: %s exited with status 127 (not found or not executable?)\n", t->cmd[0]);
	return ret;
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
	report_opts_defaults(&t->opt);
	ret = parse(t, argc, argv);
	if (ret < 0) {
		cli_usage(stdout, "trace");
		ret = 0;
	} else if (!ret && report_load_symbols(&syms, t->opt.symbols, NULL, err, sizeof(err), why, sizeof(why))) {
		fprintf(stderr, "brisk trace: --symbols: %s\n", err);
		ret = EXIT_USAGE;
	} else if (!ret) {
		atexit(cleanup_trace_at_exit);
		ret = run_trace(t, &syms, why);
	}
	symtab_free(&syms);
	trace_agg_free(&t->trace.agg);
	free(t);
	return ret;
}
