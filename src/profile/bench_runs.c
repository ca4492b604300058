/* bench_runs.c - child boots, per-phase samples and summaries shared by brisk bench and brisk compare. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brisk/bench.h"
#include "brisk/config.h"
#include "brisk/exitcode.h"
#include "brisk/file.h"
#include "brisk/timeline.h"

/* ---- shell-like word splitting ------------------------------------------ */

/* A growable string. */
struct buf {
	char *s;
	size_t n, cap;
};

static int buf_put(struct buf *b, char c)
{
	if (b->n + 1 >= b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 32;
		char *s = realloc(b->s, cap);

		if (!s)
			return -ENOMEM;
		b->s = s;
		b->cap = cap;
	}
	b->s[b->n++] = c;
	b->s[b->n] = '\0';
	return 0;
}

static int push_word(char ***words, size_t *n, struct buf *b)
{
	char **w = realloc(*words, (*n + 2) * sizeof(*w));

	if (!w)
		return -ENOMEM;
	*words = w;
	w[(*n)++] = b->s ? b->s : strdup("");
	w[*n] = NULL;
	b->s = NULL;
	b->n = b->cap = 0;
	return w[*n - 1] ? 0 : -ENOMEM;
}

/* Scans one word starting at *p (not a blank); advances *p past it. */
static int scan_word(const char **p, struct buf *b)
{
	const char *s = *p;
	char quote = 0;
	int ret = 0;

	for (; *s && ret == 0 && (quote || (*s != ' ' && *s != '\t' && *s != '\n')); s++) {
		if (quote == '\'' && *s == '\'')
			quote = 0;
		else if (quote == '\'')
			ret = buf_put(b, *s);
		else if (*s == '\\' && (!quote || (s[1] && strchr("\"\\$`", s[1])))) {
			if (!s[1])
				return -EINVAL;
			ret = buf_put(b, *++s);
		} else if (*s == quote)
			quote = 0;
		else if (!quote && (*s == '\'' || *s == '"'))
			quote = *s;
		else
			ret = buf_put(b, *s);
	}
	*p = s;
	return ret ? ret : quote ? -EINVAL : 0;
}

int bench_split_words(const char *s, char ***words, size_t *n)
{
	struct buf b = {0};
	int ret = 0;

	*n = 0;
	*words = calloc(1, sizeof(**words));
	if (!*words)
		return -ENOMEM;
	while (ret == 0) {
		while (*s == ' ' || *s == '\t' || *s == '\n')
			s++;
		if (!*s)
			break;
		ret = scan_word(&s, &b);
		if (ret == 0)
			ret = push_word(words, n, &b);
	}
	free(b.s);
	if (ret) {
		bench_free_words(*words);
		*words = NULL;
		*n = 0;
	}
	return ret;
}

void bench_free_words(char **words)
{
	for (size_t i = 0; words && words[i]; i++)
		free(words[i]);
	free(words);
}

/* ---- samples -------------------------------------------------------------- */

static struct bench_phase *find_or_add(struct bench_samples *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->phase[i].name, name) == 0)
			return &s->phase[i];
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		struct bench_phase *p = realloc(s->phase, cap * sizeof(*p));

		if (!p)
			return NULL;
		s->phase = p;
		s->cap = cap;
	}
	memset(&s->phase[s->n], 0, sizeof(s->phase[s->n]));
	snprintf(s->phase[s->n].name, TJ_NAME_MAX, "%s", name);
	return &s->phase[s->n++];
}

int bench_samples_add(struct bench_samples *s, const char *name, double us)
{
	struct bench_phase *p = find_or_add(s, name);

	if (!p)
		return -ENOMEM;
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 16;
		double *v = realloc(p->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = us;
	return 0;
}

const struct bench_phase *bench_samples_find(const struct bench_samples *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->phase[i].name, name) == 0)
			return &s->phase[i];
	return NULL;
}

void bench_samples_free(struct bench_samples *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->phase[i].v);
	free(s->phase);
	memset(s, 0, sizeof(*s));
}

int bench_summarise(const struct bench_phase *p, unsigned resamples, uint64_t seed, struct bench_summary *s)
{
	double *sorted = malloc(p->n * sizeof(*sorted));
	int ret;

	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, p->v, p->n * sizeof(*sorted));
	stats_sort(sorted, p->n);
	s->n = p->n;
	s->median = stats_quantile_sorted(sorted, p->n, 0.5);
	s->p95 = stats_quantile_sorted(sorted, p->n, 0.95);
	s->min = sorted[0];
	s->max = sorted[p->n - 1];
	free(sorted);
	s->mad = stats_mad(p->v, p->n);
	ret = stats_bootstrap_median_ci(p->v, p->n, resamples, BENCH_CI_LEVEL, seed, &s->ci);
	return ret;
}

/* ---- signals: a stop request while a child boots --------------------------------- */

static sigset_t orig_mask; /* the mask brisk was started with: each child gets it back */
static int signals_ready;

/*
 * SIGINT, SIGTERM, SIGHUP and SIGCHLD stay blocked for the rest of the
 * process and are taken with sigwaitinfo() while a child runs, so that a stop
 * request can never slip in between fork() and the wait (no handler, no
 * race). SIGCHLD must not be ignored, or children would be reaped by the
 * kernel (POSIX XSH 2.4.3).
 */
static int signals_init(void)
{
	sigset_t set;

	if (signals_ready)
		return 0;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	signal(SIGCHLD, SIG_DFL);
	if (sigprocmask(SIG_BLOCK, &set, &orig_mask))
		return -errno;
	signals_ready = 1;
	return 0;
}

/* A stop signal already pending (it arrived between boots): consumed and returned, else 0. */
static int pending_stop(void)
{
	static const int stops[] = {SIGINT, SIGTERM, SIGHUP};
	const struct timespec zero = {0, 0};
	sigset_t pend;

	if (sigpending(&pend))
		return 0;
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++) {
		if (sigismember(&pend, stops[i])) {
			sigset_t one;

			sigemptyset(&one);
			sigaddset(&one, stops[i]);
			sigtimedwait(&one, NULL, &zero);
			return stops[i];
		}
	}
	return 0;
}

/* Stops child pid: SIGTERM, then SIGKILL if it is still there BENCH_STOP_GRACE_MS later; always reaps it. */
static void stop_child(pid_t pid)
{
	uint64_t deadline = timeline_now_ns() + BENCH_STOP_GRACE_MS * 1000000ull;
	sigset_t chld;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	kill(pid, SIGTERM);
	while (waitpid(pid, NULL, WNOHANG) == 0) {
		uint64_t now = timeline_now_ns();
		struct timespec left;

		if (now >= deadline) {
			kill(pid, SIGKILL);
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
			return;
		}
		left.tv_sec = (time_t)((deadline - now) / 1000000000ull);
		left.tv_nsec = (long)((deadline - now) % 1000000000ull);
		sigtimedwait(&chld, NULL, &left);
	}
}

/* ---- child boots ---------------------------------------------------------- */

/* Whether option `name` ("--serial") is among opts, as "--name" or "--name=VALUE". */
static int has_opt(char *const *opts, size_t n, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < n; i++)
		if (strncmp(opts[i], name, len) == 0 && (opts[i][len] == 0 || opts[i][len] == '='))
			return 1;
	return 0;
}

/* $TMPDIR when it is an absolute path, else /tmp (as mktemp(1)). */
static const char *tmp_dir(void)
{
	const char *d = getenv("TMPDIR");

	return d && d[0] == '/' ? d : "/tmp";
}

int bench_side_init(struct bench_side *side, char *const *opts, size_t nopts, int expect)
{
	size_t n = 0;
	int ret;

	memset(side, 0, sizeof(*side));
	side->expect = expect;
	if ((ret = signals_init()))
		return ret;
	if ((size_t)snprintf(side->dir, sizeof(side->dir), "%s/brisk-bench-XXXXXX", tmp_dir()) >= sizeof(side->dir)) {
		side->dir[0] = '\0';
		return -ENAMETOOLONG;
	}
	if (!mkdtemp(side->dir)) {
		side->dir[0] = '\0';
		return -errno;
	}
	snprintf(side->path, sizeof(side->path), "%s/report.json", side->dir);
	side->argv = calloc(nopts + 8, sizeof(*side->argv));
	if (!side->argv)
		return -ENOMEM;
	side->argv[n++] = "brisk";
	/* Options naming a snapshot measure restores (brisk restore): the same phases, and the restore's own. */
	side->argv[n++] = has_opt(opts, nopts, "--snapshot") ? "restore" : "run";
	for (size_t i = 0; i < nopts; i++)
		side->argv[n++] = opts[i];
	if (!has_opt(opts, nopts, "--serial")) {
		side->argv[n++] = "--serial";
		side->argv[n++] = "none";
	}
	side->argv[n++] = "--report-json";
	side->argv[n++] = side->path;
	return 0;
}

void bench_side_free(struct bench_side *side)
{
	if (side->path[0])
		unlink(side->path);
	if (side->dir[0])
		rmdir(side->dir);
	free(side->argv);
	free(side->runs);
	bench_samples_free(&side->samples);
	memset(side, 0, sizeof(*side));
}

/*
 * Forks and execs the child and waits for it, or for a stop signal (then the
 * child is stopped and reaped, *stop_sig set, -EINTR returned). Returns its
 * exit status (128 + N for signal N) or -errno.
 */
static int spawn_wait(char **argv, double *wall_us, int *stop_sig)
{
	uint64_t t0 = timeline_now_ns();
	sigset_t wait_set;
	int st;
	pid_t pid;

	if ((*stop_sig = pending_stop()))
		return -EINTR;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open("/dev/null", O_RDONLY);

		if (fd >= 0)
			dup2(fd, STDIN_FILENO);
		sigprocmask(SIG_SETMASK, &orig_mask, NULL);
		execv("/proc/self/exe", argv);
		fprintf(stderr, "brisk: exec /proc/self/exe: %s\n", strerror(errno));
		_exit(127);
	}
	sigemptyset(&wait_set);
	sigaddset(&wait_set, SIGCHLD);
	sigaddset(&wait_set, SIGINT);
	sigaddset(&wait_set, SIGTERM);
	sigaddset(&wait_set, SIGHUP);
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		int sig;

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -errno;
		sig = sigwaitinfo(&wait_set, NULL);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
			stop_child(pid);
			*stop_sig = sig;
			return -EINTR;
		}
	}
	*wall_us = (double)(timeline_now_ns() - t0) / 1e3;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int record_run(struct bench_side *side, const struct bench_run *run)
{
	struct bench_run *r = realloc(side->runs, (side->nr_runs + 1) * sizeof(*r));

	if (!r)
		return -ENOMEM;
	side->runs = r;
	r[side->nr_runs++] = *run;
	return 0;
}

static int add_boot(struct bench_side *side, const struct boot_report *rep, double wall_us)
{
	int ret = 0;

	for (size_t i = 0; i < rep->n && ret == 0; i++)
		ret = bench_samples_add(&side->samples, rep->item[i].name, rep->item[i].us);
	return ret ? ret : bench_samples_add(&side->samples, BENCH_WALL, wall_us);
}

int bench_side_boot(struct bench_side *side, int warmup, const char *label)
{
	static struct boot_report rep; /* ~15 KiB; bench is single-threaded */
	struct bench_run run = {.warmup = warmup};
	char err[256];
	int ret, have;

	unlink(side->path);
	ret = spawn_wait(side->argv, &run.wall_us, &side->stop_signal);
	if (ret < 0)
		return ret;
	run.status = ret;
	have = timeline_read_json(side->path, &rep, err, sizeof(err)) == 0;
	if (run.status == EXIT_USAGE && !have)
		return EXIT_USAGE;
	if (side->expect < 0) {
		side->expect = run.status;
		if (run.status != 0 && run.status % 2 == 0)
			fprintf(stderr,
				"brisk %s: the first boot ended with brisk's own status %d (docs/exit-codes.md); "
				"measuring boots that end that way\n",
				label, run.status);
	}
	run.ok = have && run.status == side->expect;
	if (!have)
		fprintf(stderr, "brisk %s: boot %zu: no timeline report (%s); excluded\n", label, side->nr_runs + 1,
			err);
	else if (!run.ok)
		fprintf(stderr, "brisk %s: boot %zu: exit status %d, expected %d; excluded\n", label, side->nr_runs + 1,
			run.status, side->expect);
	if (!run.ok && !warmup)
		side->nr_failed++;
	if (run.ok && !warmup && (ret = add_boot(side, &rep, run.wall_us)))
		return ret;
	return record_run(side, &run);
}

size_t bench_side_counted(const struct bench_side *side)
{
	size_t n = 0;

	for (size_t i = 0; i < side->nr_runs; i++)
		n += side->runs[i].ok && !side->runs[i].warmup;
	return n;
}

/* ---- command-line and JSON helpers ----------------------------------------- */

int bench_opt(const char *cmd, int argc, char **argv, int *i, const char *name, const char **value)
{
	const char *arg = argv[*i];
	size_t len = strlen(name);

	if (strncmp(arg, name, len) != 0)
		return 0;
	if (arg[len] == '=' && name[1] == '-') {
		*value = arg + len + 1;
		return 1;
	}
	if (arg[len] != '\0')
		return 0;
	if (*i + 1 >= argc) {
		fprintf(stderr, "brisk %s: %s needs a value; try 'brisk help %s'\n", cmd, name, cmd);
		return EXIT_USAGE;
	}
	*value = argv[++*i];
	return 1;
}

int bench_opt_uint(const char *cmd, int argc, char **argv, int *i, const char *name, unsigned long min,
		   unsigned long max, unsigned long *out)
{
	const char *v;
	int r = bench_opt(cmd, argc, argv, i, name, &v);

	if (r != 1)
		return r;
	if (config_parse_uint(v, min, max, out) == 0)
		return 1;
	fprintf(stderr, "brisk %s: invalid %s '%s': expected a whole number from %lu to %lu\n", cmd, name, v, min, max);
	return EXIT_USAGE;
}

json_object *bench_json_num(double v, int digits)
{
	char s[64];

	if (!isfinite(v))
		return NULL;
	snprintf(s, sizeof(s), "%.*g", digits, v);
	return json_object_new_double_s(v, s);
}

json_object *bench_summary_json(const struct bench_summary *s)
{
	json_object *o = json_object_new_object(), *ci = json_object_new_array();

	json_object_object_add(o, "n", json_object_new_int64((int64_t)s->n));
	json_object_object_add(o, "median", bench_json_num(s->median, 10));
	json_object_object_add(o, "p95", bench_json_num(s->p95, 10));
	json_object_object_add(o, "mad", bench_json_num(s->mad, 10));
	json_object_object_add(o, "mad_scaled", bench_json_num(s->mad * STATS_MAD_SCALE, 10));
	json_object_array_add(ci, bench_json_num(s->ci.lo, 10));
	json_object_array_add(ci, bench_json_num(s->ci.hi, 10));
	json_object_object_add(o, "ci", ci);
	json_object_object_add(o, "min", bench_json_num(s->min, 10));
	json_object_object_add(o, "max", bench_json_num(s->max, 10));
	return o;
}

json_object *bench_side_json(const struct bench_side *side, char *const *opts, size_t nopts)
{
	json_object *o = json_object_new_object(), *words = json_object_new_array(), *runs = json_object_new_array();

	for (size_t i = 0; i < nopts; i++)
		json_object_array_add(words, json_object_new_string(opts[i]));
	for (size_t i = 0; i < side->nr_runs; i++) {
		const struct bench_run *r = &side->runs[i];
		json_object *run = json_object_new_object();

		json_object_object_add(run, "status", json_object_new_int(r->status));
		json_object_object_add(run, "ok", json_object_new_boolean(r->ok));
		json_object_object_add(run, "warmup", json_object_new_boolean(r->warmup));
		json_object_object_add(run, "wall_us", bench_json_num(r->wall_us, 10));
		json_object_array_add(runs, run);
	}
	json_object_object_add(o, "options", words);
	json_object_object_add(o, "expected_status", json_object_new_int(side->expect));
	json_object_object_add(o, "counted", json_object_new_int64((int64_t)bench_side_counted(side)));
	json_object_object_add(o, "failed", json_object_new_int64((int64_t)side->nr_failed));
	json_object_object_add(o, "runs", runs);
	return o;
}

int bench_write_json(const char *cmd, const char *path, json_object *root)
{
	char err[512];
	struct file_replace r;
	int ret = file_replace_open(&r, path, "--json", 0, err, sizeof(err));

	if (ret) {
		fprintf(stderr, "brisk %s: %s\n", cmd, err);
		return ret == -EMFILE || ret == -ENFILE ? EXIT_HOST : EXIT_USAGE;
	}
	if (json_object_to_fd(r.fd, root,
			      JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE)) {
		fprintf(stderr, "brisk %s: cannot write --json %s: %s\n", cmd, path, json_util_get_last_err());
		file_replace_abort(&r);
		return EXIT_HOST;
	}
	if (file_replace_commit(&r, false, err, sizeof(err))) {
		fprintf(stderr, "brisk %s: --json %s: %s\n", cmd, path, err);
		file_replace_abort(&r);
		return EXIT_HOST;
	}
	return 0;
}
