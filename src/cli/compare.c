/* compare.c - `brisk compare`: A and B booted interleaved; per phase ratio of medians, U test, verdict. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/bench.h"
#include "brisk/cli.h"
#include "brisk/exitcode.h"

struct compare_opts {
	unsigned long n, warmup, resamples, seed;
	double alpha;
	int expect, shuffle;
	const char *a, *b, *json;
};

/* One side's options as words and its boots. */
struct side {
	char **words;
	size_t nr_words;
	struct bench_side boots;
};

/* One row of the report. */
struct row {
	const char *name;
	const struct bench_phase *pa, *pb;
	struct bench_summary sa, sb;
	double ratio;
	struct stats_ci ci;
	struct stats_mwu mwu;
	const char *verdict;
};

static int parse_alpha(const char *v, double *alpha)
{
	char *end;

	errno = 0;
	*alpha = strtod(v, &end);
	if (errno || end == v || *end || !(*alpha > 0 && *alpha < 0.5)) {
		fprintf(stderr, "brisk compare: invalid --alpha '%s': expected a number in (0, 0.5), e.g. 0.05\n", v);
		return EXIT_USAGE;
	}
	return 0;
}

/* A numeric option at argv[*i] (see bench_opt_uint): 1 taken, 0 not this one, EXIT_USAGE. */
static int uint_option(int argc, char **argv, int *i, const char *name, unsigned long min, unsigned long max,
		       unsigned long *out)
{
	return bench_opt_uint("compare", argc, argv, i, name, min, max, out);
}

/* A string option at argv[*i]: 1 taken, 0 not this one, EXIT_USAGE. */
static int str_option(int argc, char **argv, int *i, const char *name, const char **out)
{
	return bench_opt("compare", argc, argv, i, name, out);
}

static int compare_option(int argc, char **argv, int *i, struct compare_opts *o)
{
	unsigned long st = 0;
	const char *v;
	int r;

	if ((r = uint_option(argc, argv, i, "-n", 1, BENCH_MAX_RUNS, &o->n)) ||
	    (r = uint_option(argc, argv, i, "--runs", 1, BENCH_MAX_RUNS, &o->n)) ||
	    (r = uint_option(argc, argv, i, "--warmup", 0, BENCH_MAX_RUNS, &o->warmup)) ||
	    (r = uint_option(argc, argv, i, "--resamples", 1, 1000000, &o->resamples)) ||
	    (r = uint_option(argc, argv, i, "--seed", 0, ~0ul, &o->seed)) ||
	    (r = str_option(argc, argv, i, "--a", &o->a)) || (r = str_option(argc, argv, i, "--b", &o->b)) ||
	    (r = str_option(argc, argv, i, "--json", &o->json)))
		return r;
	if ((r = uint_option(argc, argv, i, "--expect-status", 0, 255, &st)) == 1)
		o->expect = (int)st;
	if (r)
		return r;
	if ((r = str_option(argc, argv, i, "--alpha", &v)) == 1)
		return parse_alpha(v, &o->alpha) ? EXIT_USAGE : 1;
	if (r)
		return r;
	if (strcmp(argv[*i], "--shuffle") == 0)
		return o->shuffle = 1;
	fprintf(stderr, "brisk compare: unexpected argument '%s'; try 'brisk help compare'\n", argv[*i]);
	return EXIT_USAGE;
}

/* Returns 0, EXIT_USAGE, or -1 for --help. */
static int parse_opts(int argc, char **argv, struct compare_opts *o)
{
	*o = (struct compare_opts){
	    .warmup = 1, .resamples = STATS_RESAMPLES, .seed = STATS_SEED, .alpha = 0.05, .expect = -1};
	for (int i = 1; i < argc; i++) {
		int r;

		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return -1;
		r = compare_option(argc, argv, &i, o);
		if (r != 1)
			return r;
	}
	if (o->n == 0 || !o->a || !o->b) {
		fprintf(stderr, "brisk compare: -n N, --a 'RUN-OPTIONS' and --b 'RUN-OPTIONS' are required; "
				"try 'brisk help compare'\n");
		return EXIT_USAGE;
	}
	return 0;
}

static int side_init(struct side *s, const char *label, const char *opts, int expect)
{
	int ret = bench_split_words(opts, &s->words, &s->nr_words);

	memset(&s->boots, 0, sizeof(s->boots));
	if (ret == -EINVAL) {
		fprintf(stderr, "brisk compare: --%s '%s': unterminated quote or trailing backslash\n", label, opts);
		return EXIT_USAGE;
	}
	if (ret == 0)
		ret = bench_side_init(&s->boots, s->words, s->nr_words, expect);
	if (ret) {
		fprintf(stderr, "brisk compare: cannot set up: %s\n", strerror(-ret));
		return EXIT_HOST;
	}
	return 0;
}

static void side_free(struct side *s)
{
	bench_side_free(&s->boots);
	bench_free_words(s->words);
}

/* One boot of side s. Returns 0, EXIT_USAGE (options rejected), EXIT_STOPPED (a signal) or EXIT_HOST. */
static int boot_side(struct side *s, int warmup, const char *label)
{
	int ret = bench_side_boot(&s->boots, warmup, label[0] == 'a' ? "compare A" : "compare B");

	if (ret == -EINTR) {
		fprintf(stderr,
			"brisk compare: stopped by SIG%s during a boot of %c (%zu boots of it done); no results\n",
			sigabbrev_np(s->boots.stop_signal), label[0] == 'a' ? 'A' : 'B', s->boots.nr_runs);
		return EXIT_STOPPED;
	}
	if (ret == EXIT_USAGE) {
		fprintf(stderr, "brisk compare: brisk run rejected the --%s options (status 2)\n", label);
		return EXIT_USAGE;
	}
	if (ret < 0) {
		fprintf(stderr, "brisk compare: cannot start a boot: %s\n", strerror(-ret));
		return EXIT_HOST;
	}
	return 0;
}

/* Warm-up pairs, then measured pairs: A B, or in a seeded random order per pair with --shuffle. */
static int boot_all(const struct compare_opts *o, struct side *a, struct side *b)
{
	struct stats_rng rng;
	int ret = 0;

	stats_rng_seed(&rng, o->seed);
	for (unsigned long i = 0; i < o->warmup + o->n && ret == 0; i++) {
		int warm = i < o->warmup, b_first = o->shuffle && stats_rng_below(&rng, 2);

		ret = b_first ? boot_side(b, warm, "b") : boot_side(a, warm, "a");
		if (ret == 0)
			ret = b_first ? boot_side(a, warm, "a") : boot_side(b, warm, "b");
	}
	return ret;
}

/* Fills r for phase `name` (present on at least one side). Returns 0 or -ENOMEM. */
static int analyse(const struct compare_opts *o, const struct side *a, const struct side *b, const char *name,
		   struct row *r)
{
	int ret;

	memset(r, 0, sizeof(*r));
	r->name = name;
	r->pa = bench_samples_find(&a->boots.samples, name);
	r->pb = bench_samples_find(&b->boots.samples, name);
	if ((r->pa && (ret = bench_summarise(r->pa, (unsigned)o->resamples, o->seed, &r->sa))) ||
	    (r->pb && (ret = bench_summarise(r->pb, (unsigned)o->resamples, o->seed, &r->sb))))
		return ret;
	if (!r->pa || !r->pb) {
		r->verdict = r->pa ? "only in A" : "only in B";
		return 0;
	}
	r->ratio = stats_ratio(r->sb.median, r->sa.median);
	ret = stats_bootstrap_ratio_ci(r->pa->v, r->pa->n, r->pb->v, r->pb->n, (unsigned)o->resamples, 1 - o->alpha,
				       o->seed, &r->ci);
	if (ret == 0)
		ret = stats_mann_whitney(r->pa->v, r->pa->n, r->pb->v, r->pb->n, &r->mwu);
	if (ret == 0)
		r->verdict = stats_verdict_name(stats_verdict(r->mwu.p, &r->ci, o->alpha));
	return ret;
}

/* Calls fn for every phase: A's in order, then those only B has. Stops at the first nonzero return. */
static int for_each_row(const struct compare_opts *o, const struct side *a, const struct side *b,
			int (*fn)(const struct row *r, void *ctx), void *ctx)
{
	const struct bench_samples *sa = &a->boots.samples, *sb = &b->boots.samples;
	struct row r;
	int ret = 0;

	for (size_t i = 0; i < sa->n + sb->n && ret == 0; i++) {
		const char *name = i < sa->n ? sa->phase[i].name : sb->phase[i - sa->n].name;

		if (i >= sa->n && bench_samples_find(sa, name))
			continue;
		ret = analyse(o, a, b, name, &r);
		if (ret == 0)
			ret = fn(&r, ctx);
	}
	return ret;
}

struct text_ctx {
	FILE *f;
	int width;
};

static int print_row(const struct row *r, void *ctx)
{
	const struct text_ctx *t = ctx;

	fprintf(t->f, "%-*s %4zu %4zu ", t->width, r->name, r->sa.n, r->sb.n);
	if (!r->pa || !r->pb) {
		fprintf(t->f, "%11s %11s %7s %17s %9s  %s\n", r->pa ? "" : "-", r->pb ? "" : "-", "-", "-", "-",
			r->verdict);
		return 0;
	}
	fprintf(t->f, "%11.1f %11.1f %7.3f [%7.3f, %7.3f] %9.2g  %s\n", r->sa.median, r->sb.median, r->ratio, r->ci.lo,
		r->ci.hi, r->mwu.p, r->verdict);
	return 0;
}

static int max_name(const struct bench_samples *s, int w)
{
	for (size_t i = 0; i < s->n; i++)
		if ((int)strlen(s->phase[i].name) > w)
			w = (int)strlen(s->phase[i].name);
	return w;
}

static int print_report(FILE *f, const struct compare_opts *o, const struct side *a, const struct side *b)
{
	struct text_ctx t = {f, max_name(&b->boots.samples, max_name(&a->boots.samples, 5))};

	fprintf(f, "brisk compare: %lu pairs (+%lu warm-up), order %s, alpha %g\n", o->n, o->warmup,
		o->shuffle ? "shuffled per pair" : "A B A B", o->alpha);
	fprintf(f, "A: %s\n   %zu counted, %zu failed, expected exit status %d\n", o->a, bench_side_counted(&a->boots),
		a->boots.nr_failed, a->boots.expect);
	fprintf(f, "B: %s\n   %zu counted, %zu failed, expected exit status %d\n", o->b, bench_side_counted(&b->boots),
		b->boots.nr_failed, b->boots.expect);
	fprintf(f,
		"times in us since exec; B/A = ratio of medians, %g%% percentile bootstrap CI (B=%lu, seed %lu); "
		"p: two-sided Mann-Whitney U\n\n",
		100 * (1 - o->alpha), o->resamples, o->seed);
	fprintf(f, "%-*s %4s %4s %11s %11s %7s %17s %9s  %s\n", t.width, "phase", "nA", "nB", "median A", "median B",
		"B/A", "CI of B/A", "p", "verdict");
	return for_each_row(o, a, b, print_row, &t);
}

static int row_json(const struct row *r, void *ctx)
{
	json_object *o = json_object_new_object(), *ci = json_object_new_array();

	json_object_object_add(o, "name", json_object_new_string(r->name));
	json_object_object_add(o, "a", r->pa ? bench_summary_json(&r->sa) : NULL);
	json_object_object_add(o, "b", r->pb ? bench_summary_json(&r->sb) : NULL);
	if (r->pa && r->pb) {
		json_object_object_add(o, "ratio", bench_json_num(r->ratio, 7));
		json_object_array_add(ci, bench_json_num(r->ci.lo, 7));
		json_object_array_add(ci, bench_json_num(r->ci.hi, 7));
		json_object_object_add(o, "ratio_ci", ci);
		json_object_object_add(o, "u", bench_json_num(r->mwu.u, 10));
		json_object_object_add(o, "p", bench_json_num(r->mwu.p, 6));
		json_object_object_add(o, "p_method", json_object_new_string(r->mwu.exact ? "exact" : "normal"));
	} else {
		json_object_put(ci);
	}
	json_object_object_add(o, "verdict", json_object_new_string(r->verdict));
	json_object_array_add(ctx, o);
	return 0;
}

static int write_compare_json(const struct compare_opts *o, const struct side *a, const struct side *b)
{
	json_object *root = json_object_new_object(), *phases = json_object_new_array();
	int ret;

	json_object_object_add(root, "schema", json_object_new_string("brisk-compare/1"));
	json_object_object_add(root, "unit", json_object_new_string("us"));
	json_object_object_add(root, "n", json_object_new_int64((int64_t)o->n));
	json_object_object_add(root, "warmup", json_object_new_int64((int64_t)o->warmup));
	json_object_object_add(root, "order", json_object_new_string(o->shuffle ? "shuffled" : "alternate"));
	json_object_object_add(root, "alpha", bench_json_num(o->alpha, 6));
	json_object_object_add(root, "ci_level", bench_json_num(1 - o->alpha, 6));
	json_object_object_add(root, "resamples", json_object_new_int64((int64_t)o->resamples));
	json_object_object_add(root, "seed", json_object_new_uint64(o->seed));
	json_object_object_add(root, "a", bench_side_json(&a->boots, a->words, a->nr_words));
	json_object_object_add(root, "b", bench_side_json(&b->boots, b->words, b->nr_words));
	ret = for_each_row(o, a, b, row_json, phases);
	json_object_object_add(root, "phases", phases);
	ret = ret ? EXIT_HOST : bench_write_json("compare", o->json, root);
	json_object_put(root);
	return ret;
}

int cmd_compare(int argc, char **argv)
{
	struct compare_opts o;
	struct side a = {0}, b = {0};
	int ret = parse_opts(argc, argv, &o);

	if (ret < 0)
		return cli_usage(stdout, "compare"), 0;
	if (ret)
		return ret;
	ret = side_init(&a, "a", o.a, o.expect);
	if (ret == 0)
		ret = side_init(&b, "b", o.b, o.expect);
	if (ret == 0)
		ret = boot_all(&o, &a, &b);
	if (ret == 0 && print_report(stdout, &o, &a, &b))
		ret = EXIT_HOST;
	if (ret == 0 && o.json)
		ret = write_compare_json(&o, &a, &b);
	if (ret == 0 && (a.boots.nr_failed || b.boots.nr_failed)) {
		fprintf(stderr, "brisk compare: %zu A and %zu B boots failed and were excluded\n", a.boots.nr_failed,
			b.boots.nr_failed);
		ret = EXIT_HOST;
	}
	side_free(&a);
	side_free(&b);
	return ret;
}
