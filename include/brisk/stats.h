/* stats.h - robust statistics for boot-time samples: quantiles, MAD, bootstrap CIs, Mann-Whitney U, verdicts. */
#ifndef BRISK_STATS_H
#define BRISK_STATS_H

#include <stddef.h>
#include <stdint.h>

/*
 * Every function here is pure: it reads its inputs, never modifies them, and
 * depends on nothing but its arguments (randomness comes from an explicit
 * seed). Definitions are in docs/profiler.md, "Statistics: bench and compare".
 */

#define STATS_MAD_SCALE	  1.4826 /* MAD x this estimates sigma for normal data */
#define STATS_RESAMPLES	  2000u	 /* default bootstrap resamples B */
#define STATS_SEED	  1u	 /* default bootstrap/shuffle seed */
#define STATS_EXACT_LIMIT 25u	 /* exact U distribution when both n <= this, no ties */

/* splitmix64 (Steele, Lea, Flood 2014): a tiny, seedable, reproducible PRNG. */
struct stats_rng {
	uint64_t state;
};

void stats_rng_seed(struct stats_rng *rng, uint64_t seed);
uint64_t stats_rng_next(struct stats_rng *rng);
/* Uniform integer in [0, n), n > 0, without modulo bias (rejection sampling). */
uint64_t stats_rng_below(struct stats_rng *rng, uint64_t n);

/* Sorts x[0..n) ascending in place (the one function here that writes its input). */
void stats_sort(double *x, size_t n);

/*
 * Quantile p in [0, 1] of sorted[0..n), n > 0, by linear interpolation between
 * order statistics: h = (n - 1) p, Q = x[floor h] + (h - floor h)(x[floor h + 1] - x[floor h]).
 * This is Hyndman & Fan's type 7, the default of R's quantile() and numpy.quantile().
 */
double stats_quantile_sorted(const double *sorted, size_t n, double p);
/* Quantile p of x[0..n) (unsorted). NAN when n == 0 or out of memory. */
double stats_quantile(const double *x, size_t n, double p);
/* The median: type 7 at p = 0.5, i.e. the middle value or the mean of the two middle values. */
double stats_median(const double *x, size_t n);
/* Median absolute deviation from the median, unscaled: median(|x_i - median(x)|). NAN when n == 0. */
double stats_mad(const double *x, size_t n);

/* num / den, with 0 / 0 = 1 and x / 0 = +inf for x > 0 (medians of times are >= 0). */
double stats_ratio(double num, double den);

struct stats_ci {
	double lo, hi;
};

/*
 * Percentile bootstrap CI at `level` (e.g. 0.95) of the median of x[0..n):
 * `resamples` resamples of size n drawn with replacement using splitmix64
 * seeded with `seed`; the CI is the type-7 quantiles (1 - level)/2 and
 * (1 + level)/2 of the resampled medians. Returns 0, or -EINVAL (n == 0,
 * resamples == 0, level outside (0, 1)) or -ENOMEM.
 */
int stats_bootstrap_median_ci(const double *x, size_t n, unsigned resamples, double level, uint64_t seed,
			      struct stats_ci *ci);

/*
 * Percentile bootstrap CI of median(b) / median(a): each resample draws a
 * (size na) and b (size nb) independently, with replacement, from one
 * splitmix64 stream seeded with `seed`. A resample whose median(a) is 0 gives
 * +inf (or 1 when median(b) is 0 too). Returns as stats_bootstrap_median_ci.
 */
int stats_bootstrap_ratio_ci(const double *a, size_t na, const double *b, size_t nb, unsigned resamples, double level,
			     uint64_t seed, struct stats_ci *ci);

/* The result of a two-sided Mann-Whitney U test of a against b. */
struct stats_mwu {
	double u;  /* U of sample a: R_a - na(na+1)/2, R_a its rank sum with mid-ranks for ties (as scipy) */
	double p;  /* two-sided p-value, in [0, 1] */
	double z;  /* the normal-approximation z (0 when exact) */
	int exact; /* 1: exact null distribution; 0: normal approximation */
};

/*
 * Two-sided Mann-Whitney U test (Wilcoxon rank-sum) of a[0..na) vs b[0..nb).
 * Exact when there are no ties and na, nb <= STATS_EXACT_LIMIT:
 * p = min(1, 2 P(U >= max(U_a, U_b))) under H0, from the q-binomial generating
 * function. Otherwise the normal approximation with tie and continuity
 * correction (as scipy.stats.mannwhitneyu(method="asymptotic")):
 * z = (max(U_a, U_b) - na nb / 2 - 0.5) / sigma,
 * sigma^2 = na nb / 12 ((N + 1) - sum(t^3 - t) / (N (N - 1))), p = min(1, erfc(z / sqrt 2));
 * sigma == 0 (every value tied) gives p = 1. Returns 0, -EINVAL (an empty
 * sample) or -ENOMEM.
 */
int stats_mann_whitney(const double *a, size_t na, const double *b, size_t nb, struct stats_mwu *out);

enum stats_verdict {
	STATS_NO_DIFFERENCE = 0, /* no significant difference at alpha */
	STATS_FASTER,		 /* B takes less time than A */
	STATS_SLOWER,		 /* B takes more time than A */
};

/*
 * The verdict for B against A at significance `alpha`, for a quantity where
 * smaller is better (time): B is faster when p < alpha AND the ratio CI
 * (median B / median A, at level 1 - alpha) lies entirely below 1; slower when
 * p < alpha AND it lies entirely above 1; otherwise no significant difference.
 * Both tests must agree, so a shift the rank test sees but whose size the
 * bootstrap cannot pin down (or the reverse) is not called.
 */
enum stats_verdict stats_verdict(double p, const struct stats_ci *ratio_ci, double alpha);
/* "B faster", "B slower", "no significant difference". */
const char *stats_verdict_name(enum stats_verdict v);

#endif
