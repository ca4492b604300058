/* bench.c - `brisk bench`: N boots of one configuration; per phase median, p95, MAD, bootstrap CI of the median. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "brisk/bench.h"
#include "brisk/cli.h"
#include "brisk/exitcode.h"

struct bench_opts {
	unsigned long n, warmup, resamples, seed;
	int expect; /* -1: the first boot's status */
	const char *json;
	char **run_opts; /* the rest of argv */
	size_t nr_run_opts;
};

/* One bench option at argv[*i]: 1 if taken, 0 if not a bench option, EXIT_USAGE on a bad value. */
static int bench_option(int argc, char **argv, int *i, struct bench_opts *o)
{
	unsigned long st = 0;
	int r;

	if ((r = bench_opt_uint("bench", argc, argv, i, "-n", 1, BENCH_MAX_RUNS, &o->n)) ||
	    (r = bench_opt_uint("bench", argc, argv, i, "--runs", 1, BENCH_MAX_RUNS, &o->n)) ||
	    (r = bench_opt_uint("bench", argc, argv, i, "--warmup", 0, BENCH_MAX_RUNS, &o->warmup)) ||
	    (r = bench_opt_uint("bench", argc, argv, i, "--resamples", 1, 1000000, &o->resamples)) ||
	    (r = bench_opt_uint("bench", argc, argv, i, "--seed", 0, ~0ul, &o->seed)) ||
	    (r = bench_opt("bench", argc, argv, i, "--json", &o->json)))
		return r;
	if ((r = bench_opt_uint("bench", argc, argv, i, "--expect-status", 0, 255, &st)) == 1)
		o->expect = (int)st;
	return r;
}

/* Parses bench options, then RUN-OPTIONS (the rest). Returns 0, EXIT_USAGE, or -1 for --help. */
static int parse_opts(int argc, char **argv, struct bench_opts *o)
{
	int i, r;

	*o = (struct bench_opts){.warmup = 1, .resamples = STATS_RESAMPLES, .seed = STATS_SEED, .expect = -1};
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return -1;
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		r = bench_option(argc, argv, &i, o);
		if (r == 0)
			break;
		if (r != 1)
			return r;
	}
	if (o->n == 0) {
		fprintf(stderr, "brisk bench: -n N (the number of boots) is required; try 'brisk help bench'\n");
		return EXIT_USAGE;
	}
	o->run_opts = argv + i;
	o->nr_run_opts = (size_t)(argc - i);
	return 0;
}

static int name_width(const struct bench_samples *s)
{
	size_t w = 5;

	for (size_t i = 0; i < s->n; i++)
		if (strlen(s->phase[i].name) > w)
			w = strlen(s->phase[i].name);
	return (int)w;
}

static void print_header(FILE *f, const struct bench_opts *o, const struct bench_side *side)
{
	fprintf(f, "brisk bench:");
	for (char **a = side->argv; *a; a++)
		if (strcmp(*a, "--report-json") == 0)
			a++; /* skip the private report file */
		else
			fprintf(f, " %s", *a);
	fprintf(f, "\n%zu of %lu boots counted (%zu failed, %lu warm-up), expected exit status %d\n",
		bench_side_counted(side), o->n, side->nr_failed, o->warmup, side->expect);
	fprintf(f, "times in us since exec; CI: 95%% percentile bootstrap of the median, B=%lu, seed %lu\n\n",
		o->resamples, o->seed);
}

/* The aligned table; returns 0 or -ENOMEM. */
static int print_table(FILE *f, const struct bench_opts *o, const struct bench_side *side)
{
	int w = name_width(&side->samples);

	print_header(f, o, side);
	if (side->samples.n == 0) {
		fprintf(f, "(no boots counted)\n");
		return 0;
	}
	fprintf(f, "%-*s %5s %11s %11s %9s %11s %11s %11s %11s\n", w, "phase", "n", "median", "p95", "MAD", "CI low",
		"CI high", "min", "max");
	for (size_t i = 0; i < side->samples.n; i++) {
		struct bench_summary s;

		if (bench_summarise(&side->samples.phase[i], (unsigned)o->resamples, o->seed, &s))
			return -1;
		fprintf(f, "%-*s %5zu %11.1f %11.1f %9.1f %11.1f %11.1f %11.1f %11.1f\n", w,
			side->samples.phase[i].name, s.n, s.median, s.p95, s.mad, s.ci.lo, s.ci.hi, s.min, s.max);
	}
	return 0;
}

static json_object *phase_json(const struct bench_phase *p, const struct bench_opts *o)
{
	struct bench_summary s;
	json_object *obj, *samples = json_object_new_array();

	if (bench_summarise(p, (unsigned)o->resamples, o->seed, &s)) {
		json_object_put(samples);
		return NULL;
	}
	obj = bench_summary_json(&s);
	json_object_object_add(obj, "name", json_object_new_string(p->name));
	for (size_t i = 0; i < p->n; i++)
		json_object_array_add(samples, bench_json_num(p->v[i], 10));
	json_object_object_add(obj, "samples", samples);
	return obj;
}

static int write_bench_json(const struct bench_opts *o, const struct bench_side *side)
{
	json_object *root = json_object_new_object(), *phases = json_object_new_array();
	int ret;

	json_object_object_add(root, "schema", json_object_new_string("brisk-bench/1"));
	json_object_object_add(root, "unit", json_object_new_string("us"));
	json_object_object_add(root, "n", json_object_new_int64((int64_t)o->n));
	json_object_object_add(root, "warmup", json_object_new_int64((int64_t)o->warmup));
	json_object_object_add(root, "ci_level", bench_json_num(BENCH_CI_LEVEL, 6));
	json_object_object_add(root, "resamples", json_object_new_int64((int64_t)o->resamples));
	json_object_object_add(root, "seed", json_object_new_uint64(o->seed));
	json_object_object_add(root, "run", bench_side_json(side, o->run_opts, o->nr_run_opts));
	for (size_t i = 0; i < side->samples.n; i++)
		json_object_array_add(phases, phase_json(&side->samples.phase[i], o));
	json_object_object_add(root, "phases", phases);
	ret = bench_write_json("bench", o->json, root);
	json_object_put(root);
	return ret;
}

/* Warm-ups then measured boots. Returns 0, EXIT_USAGE (options rejected), EXIT_STOPPED (a signal) or EXIT_HOST. */
static int boot_all(const struct bench_opts *o, struct bench_side *side)
{
	for (unsigned long i = 0; i < o->warmup + o->n; i++) {
		int ret = bench_side_boot(side, i < o->warmup, "bench");

		if (ret == -EINTR) {
			fprintf(stderr,
				"brisk bench: stopped by SIG%s during boot %lu of %lu (%lu warm-up); no results\n",
				sigabbrev_np(side->stop_signal), i + 1, o->warmup + o->n, o->warmup);
			return EXIT_STOPPED;
		}
		if (ret == EXIT_USAGE) {
			fprintf(stderr, "brisk bench: brisk run rejected the options (status 2)\n");
			return EXIT_USAGE;
		}
		if (ret < 0) {
			fprintf(stderr, "brisk bench: cannot start a boot: %s\n", strerror(-ret));
			return EXIT_HOST;
		}
	}
	return 0;
}

int cmd_bench(int argc, char **argv)
{
	struct bench_opts o;
	struct bench_side side;
	int ret = parse_opts(argc, argv, &o);

	if (ret < 0)
		return cli_usage(stdout, "bench"), 0;
	if (ret)
		return ret;
	ret = bench_side_init(&side, o.run_opts, o.nr_run_opts, o.expect);
	if (ret) {
		fprintf(stderr, "brisk bench: cannot set up: %s\n", strerror(-ret));
		bench_side_free(&side);
		return EXIT_HOST;
	}
	ret = boot_all(&o, &side);
	if (ret == 0 && print_table(stdout, &o, &side))
		ret = EXIT_HOST;
	if (ret == 0 && o.json)
		ret = write_bench_json(&o, &side);
	if (ret == 0 && side.nr_failed) {
		fprintf(stderr, "brisk bench: %zu of %lu boots failed and were excluded\n", side.nr_failed, o.n);
		ret = EXIT_HOST;
	}
	bench_side_free(&side);
	return ret;
}
