/* bench.h - what brisk bench and brisk compare share: option words, child boots, per-phase samples, summaries. */
#ifndef BRISK_BENCH_H
#define BRISK_BENCH_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/stats.h"
#include "brisk/timeline_json.h"

#define BENCH_WALL	    "wall (parent)" /* fork to waitpid as the parent measured it */
#define BENCH_MAX_RUNS	    100000ul
#define BENCH_CI_LEVEL	    0.95
#define BENCH_STOP_GRACE_MS 2000 /* a boot being stopped gets this long after SIGTERM before SIGKILL */

/*
 * Splits `s` into words the way a POSIX shell would, without expansions:
 * blanks separate words; '...' is literal; "..." is literal except \" \\ \$ \`;
 * a backslash outside quotes takes the next character literally; "" and ''
 * make an empty word. On success *words is a NULL-terminated array of *n
 * malloc'd strings (free with bench_free_words). Returns 0, -EINVAL
 * (unterminated quote, trailing backslash) or -ENOMEM.
 */
int bench_split_words(const char *s, char ***words, size_t *n);
void bench_free_words(char **words);

/* The samples (µs) of one phase, across boots. */
struct bench_phase {
	char name[TJ_NAME_MAX];
	double *v;
	size_t n, cap;
};

/* Phases in the order first seen; zero-initialise before use. */
struct bench_samples {
	struct bench_phase *phase;
	size_t n, cap;
};

/* Appends sample `us` to phase `name` (created if new). Returns 0 or -ENOMEM. */
int bench_samples_add(struct bench_samples *s, const char *name, double us);
/* The phase called `name`, or NULL. */
const struct bench_phase *bench_samples_find(const struct bench_samples *s, const char *name);
void bench_samples_free(struct bench_samples *s);

/* One child boot as the parent saw it. */
struct bench_run {
	int status; /* exit status; 128 + N when killed by signal N */
	int ok;	    /* status was the expected one and the report was read */
	int warmup; /* a warm-up boot: never counted */
	double wall_us;
};

/*
 * One configuration being measured: `brisk run OPTIONS` as a child process
 * (/proc/self/exe), stdin from /dev/null, with `--serial none` added when
 * OPTIONS has no --serial, and `--report-json` into a private temporary
 * directory ($TMPDIR or /tmp, brisk-bench-XXXXXX). Boots are sequential.
 */
struct bench_side {
	char **argv;	 /* the child's argv, NULL-terminated */
	char dir[256];	 /* mkdtemp directory holding report.json */
	char path[280];	 /* the report file */
	int expect;	 /* expected status; -1: take the first boot's */
	int stop_signal; /* the SIGINT/SIGTERM/SIGHUP that stopped a boot (bench_side_boot gave -EINTR) */
	struct bench_samples samples;
	struct bench_run *runs;
	size_t nr_runs, nr_failed;
};

/*
 * Prepares `side` for OPTIONS opts[0..nopts). expect < 0: first boot decides.
 * The first call also blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD for the rest
 * of the process (each child gets the original mask back), so that
 * bench_side_boot can wait for a boot and a stop request together. Returns 0
 * or -errno; call bench_side_free either way.
 */
int bench_side_init(struct bench_side *side, char *const *opts, size_t nopts, int expect);
/*
 * Boots once. A boot whose status differs from the expected one, or whose
 * report cannot be read, is reported on stderr and not counted. Measured,
 * good boots add every phase and BENCH_WALL to side->samples. Returns 0;
 * EXIT_USAGE (2) when the child rejected the options (status 2, no report):
 * the caller stops; -EINTR when SIGINT, SIGTERM or SIGHUP arrived (before or
 * during the boot): the child was sent SIGTERM, then SIGKILL after
 * BENCH_STOP_GRACE_MS, and reaped; side->stop_signal says which signal; the
 * caller frees the side (removing its directory) and exits EXIT_STOPPED; or
 * -errno on a host failure (fork, memory).
 */
int bench_side_boot(struct bench_side *side, int warmup, const char *label);
/* Measured boots that were counted (expected status, report read). */
size_t bench_side_counted(const struct bench_side *side);
void bench_side_free(struct bench_side *side);

/* n, median, p95, MAD, bootstrap CI of the median, min, max of one phase. */
struct bench_summary {
	size_t n;
	double median, p95, mad, min, max;
	struct stats_ci ci;
};

/* Summarises p (n >= 1). Returns 0 or -ENOMEM. */
int bench_summarise(const struct bench_phase *p, unsigned resamples, uint64_t seed, struct bench_summary *s);

/* ---- command-line and JSON helpers for the two subcommands ---- */

/*
 * If argv[*i] is option `name` ("-n" or "--runs"), as "NAME VALUE" or
 * "--NAME=VALUE", stores the value, advances *i past it and returns 1;
 * returns 0 if it is another argument, EXIT_USAGE (message printed, `cmd`
 * names the subcommand) if the value is missing.
 */
int bench_opt(const char *cmd, int argc, char **argv, int *i, const char *name, const char **value);
/* As bench_opt, for a whole-number value in [min, max] stored in *out; a bad value is EXIT_USAGE with a message. */
int bench_opt_uint(const char *cmd, int argc, char **argv, int *i, const char *name, unsigned long min,
		   unsigned long max, unsigned long *out);

/* A JSON number with `digits` significant digits, or null when v is not finite. */
json_object *bench_json_num(double v, int digits);
/* {"n", "median", "p95", "mad", "mad_scaled", "ci": [lo, hi], "min", "max"} (µs). */
json_object *bench_summary_json(const struct bench_summary *s);
/* {"options": [...], "expected_status", "counted", "failed", "runs": [{"status", "ok", "warmup", "wall_us"}]}. */
json_object *bench_side_json(const struct bench_side *side, char *const *opts, size_t nopts);
/* Writes root to path (pretty). Returns 0 or EXIT_HOST with a message naming `cmd` and the file. */
int bench_write_json(const char *cmd, const char *path, json_object *root);

#endif
