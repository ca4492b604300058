/* test_stats.c - statistics against known values (numpy 1.24 / scipy 1.10), word splitting, timeline JSON, samples. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/bench.h"
#include "brisk/stats.h"
#include "brisk/timeline_json.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void assert_close(double got, double want, double tol)
{
	if (fabs(got - want) > tol)
		fail_msg("got %.12g, want %.12g (tolerance %g)", got, want, tol);
}

/* ---- quantiles, median, MAD ---------------------------------------------- */

static void test_quantiles(void **state)
{
	/* numpy.quantile (type 7): median 4, q95 7.5, q25 2.5, q10 1; MAD 1 (scipy median_abs_deviation). */
	const double x[] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5};
	const double y[] = {10.5, 2.25, 7.0, 4.0};
	double copy[N(x)];

	(void)state;
	memcpy(copy, x, sizeof(x));
	assert_close(stats_median(x, N(x)), 4, 1e-12);
	assert_close(stats_quantile(x, N(x), 0.95), 7.5, 1e-12);
	assert_close(stats_quantile(x, N(x), 0.25), 2.5, 1e-12);
	assert_close(stats_quantile(x, N(x), 0.10), 1, 1e-12);
	assert_close(stats_quantile(x, N(x), 0), 1, 0);
	assert_close(stats_quantile(x, N(x), 1), 9, 0);
	assert_close(stats_mad(x, N(x)), 1, 1e-12);
	assert_close(stats_mad(x, N(x)) * STATS_MAD_SCALE, 1.4826, 1e-12);
	assert_memory_equal(copy, x, sizeof(x)); /* inputs are not modified */
	/* Even n: the mean of the middle two; numpy: q95 9.975, q90 9.45; MAD 2.375. */
	assert_close(stats_median(y, N(y)), 5.5, 1e-12);
	assert_close(stats_quantile(y, N(y), 0.95), 9.975, 1e-12);
	assert_close(stats_quantile(y, N(y), 0.90), 9.45, 1e-12);
	assert_close(stats_mad(y, N(y)), 2.375, 1e-12);
	/* One value and none. */
	assert_close(stats_median(y, 1), 10.5, 0);
	assert_close(stats_quantile(y, 1, 0.95), 10.5, 0);
	assert_true(isnan(stats_median(y, 0)));
	assert_true(isnan(stats_mad(y, 0)));
}

/* ---- PRNG ---------------------------------------------------------------- */

static void test_rng(void **state)
{
	struct stats_rng rng, again;
	unsigned counts[7] = {0};

	(void)state;
	/* splitmix64's reference output for seed 0. */
	stats_rng_seed(&rng, 0);
	assert_true(stats_rng_next(&rng) == 0xe220a8397b1dcdafull);
	assert_true(stats_rng_next(&rng) == 0x6e789e6aa1b965f4ull);
	stats_rng_seed(&rng, 42);
	stats_rng_seed(&again, 42);
	for (int i = 0; i < 70000; i++) {
		uint64_t v = stats_rng_below(&rng, 7);

		assert_true(v < 7);
		assert_true(v == stats_rng_below(&again, 7));
		counts[v]++;
	}
	for (int i = 0; i < 7; i++) /* 10000 expected each; 5 sigma is about 480 */
		assert_true(counts[i] > 9500 && counts[i] < 10500);
	assert_true(stats_rng_below(&rng, 1) == 0);
}

/* ---- bootstrap ----------------------------------------------------------- */

static void test_bootstrap_median(void **state)
{
	double x[201], u[400];
	struct stats_ci ci, ci2;
	struct stats_rng rng;

	(void)state;
	for (int i = 0; i < 201; i++)
		x[i] = 1000 + i; /* median 1100 */
	assert_int_equal(stats_bootstrap_median_ci(x, N(x), STATS_RESAMPLES, 0.95, STATS_SEED, &ci), 0);
	assert_true(ci.lo <= 1100 && 1100 <= ci.hi);
	assert_true(ci.lo > 1080 && ci.hi < 1120); /* sd of the median ~ 0.9 sqrt(n)/1.08: about 7 */
	/* Reproducible with the same seed. */
	assert_int_equal(stats_bootstrap_median_ci(x, N(x), STATS_RESAMPLES, 0.95, STATS_SEED, &ci2), 0);
	assert_true(ci.lo == ci2.lo && ci.hi == ci2.hi);
	/* Uniform [0, 1) samples: the true median 0.5 lies inside the CI. */
	stats_rng_seed(&rng, 7);
	for (size_t i = 0; i < N(u); i++)
		u[i] = (double)(stats_rng_next(&rng) >> 11) / 9007199254740992.0;
	assert_int_equal(stats_bootstrap_median_ci(u, N(u), STATS_RESAMPLES, 0.95, 99, &ci), 0);
	assert_true(ci.lo < 0.5 && 0.5 < ci.hi);
	assert_true(ci.hi - ci.lo < 0.2);
	assert_int_equal(stats_bootstrap_median_ci(u, N(u), STATS_RESAMPLES, 0.95, 100, &ci2), 0);
	assert_true(ci.lo != ci2.lo || ci.hi != ci2.hi); /* the seed matters */
	/* A constant sample has a degenerate CI; n = 1 works. */
	assert_int_equal(stats_bootstrap_median_ci((const double[]){3, 3, 3}, 3, 100, 0.95, 1, &ci), 0);
	assert_true(ci.lo == 3 && ci.hi == 3);
	assert_int_equal(stats_bootstrap_median_ci(x, 1, 100, 0.95, 1, &ci), 0);
	assert_true(ci.lo == 1000 && ci.hi == 1000);
	/* Bad arguments. */
	assert_int_equal(stats_bootstrap_median_ci(x, 0, 100, 0.95, 1, &ci), -EINVAL);
	assert_int_equal(stats_bootstrap_median_ci(x, 3, 0, 0.95, 1, &ci), -EINVAL);
	assert_int_equal(stats_bootstrap_median_ci(x, 3, 100, 1.0, 1, &ci), -EINVAL);
}

static void test_bootstrap_ratio(void **state)
{
	double a[101], b[101];
	struct stats_ci ci, ci2;

	(void)state;
	for (int i = 0; i < 101; i++) {
		a[i] = 100 + i;
		b[i] = 2 * a[i];
	}
	assert_int_equal(stats_bootstrap_ratio_ci(a, N(a), b, N(b), STATS_RESAMPLES, 0.95, STATS_SEED, &ci), 0);
	assert_true(ci.lo < 2 && 2 < ci.hi);
	assert_true(ci.lo > 1.7 && ci.hi < 2.3);
	assert_int_equal(stats_bootstrap_ratio_ci(a, N(a), b, N(b), STATS_RESAMPLES, 0.95, STATS_SEED, &ci2), 0);
	assert_true(ci.lo == ci2.lo && ci.hi == ci2.hi);
	/* Same sample: 1 inside. Constant samples: exactly the ratio. */
	assert_int_equal(stats_bootstrap_ratio_ci(a, N(a), a, N(a), STATS_RESAMPLES, 0.95, 5, &ci), 0);
	assert_true(ci.lo < 1 && 1 < ci.hi);
	assert_int_equal(
	    stats_bootstrap_ratio_ci((const double[]){4, 4}, 2, (const double[]){3, 3, 3}, 3, 50, 0.95, 5, &ci), 0);
	assert_close(ci.lo, 0.75, 0);
	assert_close(ci.hi, 0.75, 0);
	/* Zero medians: 0/0 = 1, x/0 = inf. */
	assert_close(stats_ratio(0, 0), 1, 0);
	assert_true(isinf(stats_ratio(1, 0)));
	assert_int_equal(stats_bootstrap_ratio_ci(a, 0, b, 3, 50, 0.95, 5, &ci), -EINVAL);
	assert_int_equal(stats_bootstrap_ratio_ci(a, 3, b, 0, 50, 0.95, 5, &ci), -EINVAL);
}

/* ---- Mann-Whitney U ------------------------------------------------------ */

static void check_mwu(const double *a, size_t na, const double *b, size_t nb, double u, double p, int exact)
{
	struct stats_mwu r;

	assert_int_equal(stats_mann_whitney(a, na, b, nb, &r), 0);
	assert_close(r.u, u, 1e-9);
	assert_close(r.p, p, 1e-9 + 1e-6 * p);
	assert_int_equal(r.exact, exact);
}

static void test_mann_whitney(void **state)
{
	/* Reference values: scipy.stats.mannwhitneyu(a, b) 1.10.1, method as noted. */
	const double t1a[] = {19, 22, 16, 29, 24}, t1b[] = {20, 11, 17, 12};
	const double oa[] = {1, 3, 5, 7, 9}, ob[] = {2, 4, 6, 8, 10, 12, 14};
	const double ta[] = {1, 2, 2, 3, 3, 3, 4, 5, 5, 6, 7, 7, 8, 9, 10, 10, 11, 12, 12, 13, 14, 15, 15, 16, 17, 18};
	const double tb[] = {3,	 4,  4,	 5,  6,	 6,  7,	 8,  9,	 9,  10, 11, 12, 13,
			     13, 14, 15, 16, 17, 18, 19, 20, 20, 21, 22, 23, 24, 25};
	double sa[10], sb[10], ea[25], eb[25], na_[30], nb_[30], same[10];

	(void)state;
	/* Textbook: U = 17, exact p = 14/126 (two-sided). */
	check_mwu(t1a, N(t1a), t1b, N(t1b), 17, 1.0 / 9, 1);
	check_mwu(t1b, N(t1b), t1a, N(t1a), 3, 1.0 / 9, 1); /* U_b = na nb - U_a */
	check_mwu(oa, N(oa), ob, N(ob), 10, 0.26767676767676774, 1);
	/* Clearly separated: exact p = 2 / C(20, 10). */
	for (int i = 0; i < 10; i++) {
		sa[i] = 1 + i;
		sb[i] = 101 + i;
	}
	check_mwu(sa, 10, sb, 10, 0, 1.082508822446903e-05, 1);
	/* Ties: normal approximation with tie and continuity correction. */
	check_mwu(ta, N(ta), tb, N(tb), 220.5, 0.013206676261189184, 0);
	/* n = 25 each, no ties: still exact. */
	for (int i = 0; i < 25; i++) {
		ea[i] = 2 * i;
		eb[i] = 10 + 2 * i + 0.5;
	}
	check_mwu(ea, 25, eb, 25, 190, 0.016982216353507554, 1);
	/* n = 30 each, no ties: normal approximation. */
	for (int i = 0; i < 30; i++) {
		na_[i] = 3.0 * i;
		nb_[i] = 3.0 * i + 16.3;
	}
	check_mwu(na_, 30, nb_, 30, 300, 0.027086318388295935, 0);
	/* Identical samples: p = 1 (all tied, and distinct-but-equal). */
	for (int i = 0; i < 10; i++)
		same[i] = 5;
	check_mwu(same, 10, same, 10, 50, 1, 0);
	check_mwu(sa, 8, sa, 8, 32, 1, 0);
	assert_int_equal(stats_mann_whitney(sa, 0, sb, 3, &(struct stats_mwu){0}), -EINVAL);
}

/* ---- verdict ------------------------------------------------------------- */

static void test_verdict(void **state)
{
	(void)state;
	assert_int_equal(stats_verdict(0.001, &(struct stats_ci){0.80, 0.95}, 0.05), STATS_FASTER);
	assert_int_equal(stats_verdict(0.001, &(struct stats_ci){1.02, 1.30}, 0.05), STATS_SLOWER);
	/* Significant U test but the CI straddles 1: not called. */
	assert_int_equal(stats_verdict(0.001, &(struct stats_ci){0.90, 1.05}, 0.05), STATS_NO_DIFFERENCE);
	/* CI below 1 but p not below alpha: not called. */
	assert_int_equal(stats_verdict(0.05, &(struct stats_ci){0.80, 0.95}, 0.05), STATS_NO_DIFFERENCE);
	assert_int_equal(stats_verdict(0.2, &(struct stats_ci){1.1, 1.3}, 0.05), STATS_NO_DIFFERENCE);
	/* A CI touching 1 is not "excluding" it. */
	assert_int_equal(stats_verdict(0.001, &(struct stats_ci){0.8, 1.0}, 0.05), STATS_NO_DIFFERENCE);
	assert_int_equal(stats_verdict(NAN, &(struct stats_ci){0.8, 0.9}, 0.05), STATS_NO_DIFFERENCE);
	assert_string_equal(stats_verdict_name(STATS_FASTER), "B faster");
	assert_string_equal(stats_verdict_name(STATS_SLOWER), "B slower");
	assert_string_equal(stats_verdict_name(STATS_NO_DIFFERENCE), "no significant difference");
}

/* ---- word splitting ------------------------------------------------------ */

static void check_split(const char *s, const char *const *want, size_t n)
{
	char **w;
	size_t got;

	assert_int_equal(bench_split_words(s, &w, &got), 0);
	assert_int_equal(got, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(w[i], want[i]);
	assert_null(w[n]);
	bench_free_words(w);
}

static void test_split_words(void **state)
{
	char **w = (char **)1;
	size_t n = 7;

	(void)state;
	check_split("--kernel build/guests/hello.elf --prefault",
		    (const char *const[]){"--kernel", "build/guests/hello.elf", "--prefault"}, 3);
	check_split("  \t\n", NULL, 0);
	check_split("", NULL, 0);
	check_split("--cmdline 'console=ttyS0 quiet' -m 64M",
		    (const char *const[]){"--cmdline", "console=ttyS0 quiet", "-m", "64M"}, 4);
	check_split("-c \"a \\\"b\\\" \\$x \\n\"", (const char *const[]){"-c", "a \"b\" $x \\n"}, 2);
	check_split("a\\ b c\\\\d 'it'\\''s'", (const char *const[]){"a b", "c\\d", "it's"}, 3);
	check_split("x'y'\"z\" '' \"\"", (const char *const[]){"xyz", "", ""}, 3);
	check_split("'*' $HOME ~", (const char *const[]){"*", "$HOME", "~"}, 3); /* no expansions */
	assert_int_equal(bench_split_words("'open", &w, &n), -EINVAL);
	assert_null(w);
	assert_int_equal(n, 0);
	assert_int_equal(bench_split_words("a \"open", &w, &n), -EINVAL);
	assert_int_equal(bench_split_words("trailing\\", &w, &n), -EINVAL);
}

/* ---- timeline JSON and samples --------------------------------------------- */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_timeline_json(void **state)
{
	char path[] = "/tmp/test_stats-XXXXXX", err[256];
	struct boot_report *r = calloc(1, sizeof(*r));
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0 && r);
	/* Round trip of this process's own timeline (written to an fd opened before, as brisk run does). */
	timeline_init();
	timeline_bootmark(0x10);
	timeline_bootmark(0x20);
	timeline_bootmark(0x10);
	timeline_mark(TL_GUEST_END);
	assert_int_equal(timeline_write_json(fd, path, 5), 0);
	close(fd);
	assert_int_equal(timeline_read_json(path, r, err, sizeof(err)), 0);
	assert_int_equal(r->status, 5);
	assert_int_equal(r->n, 6);
	assert_string_equal(r->item[0].name, "process start");
	assert_string_equal(r->item[1].name, "main entered");
	assert_string_equal(r->item[2].name, "boot marker 0x10");
	assert_string_equal(r->item[3].name, "boot marker 0x20");
	assert_string_equal(r->item[4].name, "boot marker 0x10 #2");
	assert_string_equal(r->item[5].name, "guest ended");
	assert_true(r->item[5].us >= r->item[2].us);
	/* No "guest ended": markers come last. */
	write_file(path, "{\"schema\": \"brisk-timeline/1\", \"status\": 0, \"phases\": [{\"name\": \"a\", \"us\": 1}],"
			 " \"markers\": [{\"value\": 255, \"us\": 2.5}]}");
	assert_int_equal(timeline_read_json(path, r, err, sizeof(err)), 0);
	assert_int_equal(r->n, 2);
	assert_string_equal(r->item[1].name, "boot marker 0xff");
	assert_close(r->item[1].us, 2.5, 0);
	/* Rejected: wrong schema, missing fields, bad entries, not JSON. */
	write_file(path, "{\"schema\": \"brisk-bench/1\", \"status\": 0, \"phases\": [], \"markers\": []}");
	assert_int_equal(timeline_read_json(path, r, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "brisk-timeline/1"));
	write_file(path, "{\"schema\": \"brisk-timeline/1\", \"phases\": [], \"markers\": []}");
	assert_int_equal(timeline_read_json(path, r, err, sizeof(err)), -EINVAL);
	write_file(path,
		   "{\"schema\": \"brisk-timeline/1\", \"status\": 0, \"phases\": [{\"name\": 3}], \"markers\": []}");
	assert_int_equal(timeline_read_json(path, r, err, sizeof(err)), -EINVAL);
	write_file(path, "not json");
	assert_int_equal(timeline_read_json(path, r, err, sizeof(err)), -EINVAL);
	unlink(path);
	assert_int_equal(timeline_read_json(path, r, err, sizeof(err)), -EINVAL);
	free(r);
}

static void test_samples(void **state)
{
	struct bench_samples s = {0};
	struct bench_summary sum;
	const struct bench_phase *p;

	(void)state;
	for (int i = 0; i < 40; i++) {
		assert_int_equal(bench_samples_add(&s, "VM created", 100 + i % 5), 0);
		assert_int_equal(bench_samples_add(&s, "guest ended", 1000 + i), 0);
	}
	assert_int_equal(s.n, 2);
	assert_string_equal(s.phase[0].name, "VM created");
	p = bench_samples_find(&s, "guest ended");
	assert_non_null(p);
	assert_int_equal(p->n, 40);
	assert_null(bench_samples_find(&s, "nope"));
	assert_int_equal(bench_summarise(p, 500, 1, &sum), 0);
	assert_int_equal(sum.n, 40);
	assert_close(sum.median, 1019.5, 1e-9);
	assert_close(sum.p95, 1037.05, 1e-9);
	assert_close(sum.mad, 10, 1e-9);
	assert_close(sum.min, 1000, 0);
	assert_close(sum.max, 1039, 0);
	assert_true(sum.ci.lo <= sum.median && sum.median <= sum.ci.hi);
	bench_samples_free(&s);
	assert_int_equal(s.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quantiles),	     cmocka_unit_test(test_rng),
	    cmocka_unit_test(test_bootstrap_median), cmocka_unit_test(test_bootstrap_ratio),
	    cmocka_unit_test(test_mann_whitney),     cmocka_unit_test(test_verdict),
	    cmocka_unit_test(test_split_words),	     cmocka_unit_test(test_timeline_json),
	    cmocka_unit_test(test_samples),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
