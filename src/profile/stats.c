/* stats.c - robust statistics for boot-time samples: quantiles, MAD, bootstrap CIs, Mann-Whitney U, verdicts. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/stats.h"

void stats_rng_seed(struct stats_rng *rng, uint64_t seed)
{
	rng->state = seed;
}

uint64_t stats_rng_next(struct stats_rng *rng)
{
	uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t stats_rng_below(struct stats_rng *rng, uint64_t n)
{
	/* Reject the top partial block of 2^64 so every residue is equally likely. */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t r;

	do
		r = stats_rng_next(rng);
	while (r >= limit);
	return r % n;
}

static int cmp_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;

	return (a > b) - (a < b);
}

void stats_sort(double *x, size_t n)
{
	if (n > 1)
		qsort(x, n, sizeof(*x), cmp_double);
}

double stats_quantile_sorted(const double *sorted, size_t n, double p)
{
	double h, frac;
	size_t lo;

	if (n == 0)
		return NAN;
	if (p <= 0)
		return sorted[0];
	if (p >= 1)
		return sorted[n - 1];
	h = (double)(n - 1) * p;
	lo = (size_t)h;
	frac = h - (double)lo;
	if (lo + 1 >= n)
		return sorted[n - 1];
	return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

/* A sorted copy of x[0..n), or NULL (n == 0 or out of memory). The caller frees it. */
static double *sorted_copy(const double *x, size_t n)
{
	double *s;

	if (n == 0)
		return NULL;
	s = malloc(n * sizeof(*s));
	if (!s)
		return NULL;
	memcpy(s, x, n * sizeof(*s));
	stats_sort(s, n);
	return s;
}

double stats_quantile(const double *x, size_t n, double p)
{
	double *s = sorted_copy(x, n);
	double q;

	if (!s)
		return NAN;
	q = stats_quantile_sorted(s, n, p);
	free(s);
	return q;
}

double stats_median(const double *x, size_t n)
{
	return stats_quantile(x, n, 0.5);
}

double stats_mad(const double *x, size_t n)
{
	double *dev, med = stats_median(x, n), mad;

	if (isnan(med))
		return NAN;
	dev = malloc(n * sizeof(*dev));
	if (!dev)
		return NAN;
	for (size_t i = 0; i < n; i++)
		dev[i] = fabs(x[i] - med);
	mad = stats_median(dev, n);
	free(dev);
	return mad;
}

/* Median of a size-n resample of x drawn with replacement; buf holds n doubles. */
static double resample_median(const double *x, size_t n, double *buf, struct stats_rng *rng)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = x[stats_rng_below(rng, n)];
	stats_sort(buf, n);
	return stats_quantile_sorted(buf, n, 0.5);
}

/* The percentile CI from `resamples` bootstrap statistics (sorted in place). */
static void percentile_ci(double *stat, unsigned resamples, double level, struct stats_ci *ci)
{
	stats_sort(stat, resamples);
	ci->lo = stats_quantile_sorted(stat, resamples, (1 - level) / 2);
	ci->hi = stats_quantile_sorted(stat, resamples, (1 + level) / 2);
}

static int bad_bootstrap_args(size_t n, unsigned resamples, double level)
{
	return n == 0 || resamples == 0 || !(level > 0 && level < 1);
}

int stats_bootstrap_median_ci(const double *x, size_t n, unsigned resamples, double level, uint64_t seed,
			      struct stats_ci *ci)
{
	struct stats_rng rng;
	double *buf, *stat;

	if (bad_bootstrap_args(n, resamples, level))
		return -EINVAL;
	buf = malloc(n * sizeof(*buf));
	stat = malloc(resamples * sizeof(*stat));
	if (!buf || !stat) {
		free(buf);
		free(stat);
		return -ENOMEM;
	}
	stats_rng_seed(&rng, seed);
	for (unsigned r = 0; r < resamples; r++)
		stat[r] = resample_median(x, n, buf, &rng);
	percentile_ci(stat, resamples, level, ci);
	free(buf);
	free(stat);
	return 0;
}

double stats_ratio(double num, double den)
{
	if (den == 0)
		return num == 0 ? 1.0 : INFINITY;
	return num / den;
}

int stats_bootstrap_ratio_ci(const double *a, size_t na, const double *b, size_t nb, unsigned resamples, double level,
			     uint64_t seed, struct stats_ci *ci)
{
	struct stats_rng rng;
	double *buf, *stat;

	if (bad_bootstrap_args(na, resamples, level) || nb == 0)
		return -EINVAL;
	buf = malloc((na > nb ? na : nb) * sizeof(*buf));
	stat = malloc(resamples * sizeof(*stat));
	if (!buf || !stat) {
		free(buf);
		free(stat);
		return -ENOMEM;
	}
	stats_rng_seed(&rng, seed);
	for (unsigned r = 0; r < resamples; r++) {
		double ma = resample_median(a, na, buf, &rng);
		double mb = resample_median(b, nb, buf, &rng);

		stat[r] = stats_ratio(mb, ma);
	}
	percentile_ci(stat, resamples, level, ci);
	free(buf);
	free(stat);
	return 0;
}

/* One pooled observation and the sample it came from. */
struct ranked {
	double value;
	size_t from_a;
};

static int cmp_ranked(const void *pa, const void *pb)
{
	return cmp_double(&((const struct ranked *)pa)->value, &((const struct ranked *)pb)->value);
}

/*
 * Sorts all[0..n) and returns the rank sum of sample a's values (mid-ranks
 * for ties) and the tie term sum(t^3 - t) over groups of t equal values.
 */
static void rank_sum(struct ranked *all, size_t n, double *sum_a, double *ties)
{
	qsort(all, n, sizeof(*all), cmp_ranked);
	*sum_a = 0;
	*ties = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		double mid, t;

		while (j < n && all[j].value == all[i].value)
			j++;
		mid = (double)(i + 1 + j) / 2; /* mean of ranks i+1 .. j */
		for (size_t k = i; k < j; k++)
			if (all[k].from_a)
				*sum_a += mid;
		t = (double)(j - i);
		*ties += t * t * t - t;
		i = j;
	}
}

/*
 * P(U >= u) under H0 for samples of sizes m and n without ties. The number of
 * arrangements with U = k is the coefficient of q^k in the Gaussian binomial
 * [m+n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i) (Andrews, The
 * Theory of Partitions, 3.3). Coefficients are integers below C(m+n, m),
 * exact in a double for m, n <= STATS_EXACT_LIMIT. Returns NAN if out of memory.
 */
static double exact_sf(size_t m, size_t n, double u)
{
	size_t deg = m * n;
	double *c = calloc(deg + 1, sizeof(*c));
	double total = 0, tail = 0;

	if (!c)
		return NAN;
	c[0] = 1;
	for (size_t i = 1; i <= m; i++) {
		for (size_t k = deg; k >= n + i; k--) /* x (1 - q^(n+i)), truncated at deg */
			c[k] -= c[k - (n + i)];
		for (size_t k = i; k <= deg; k++) /* / (1 - q^i) as a power series */
			c[k] += c[k - i];
	}
	for (size_t k = 0; k <= deg; k++) {
		total += c[k];
		if ((double)k >= u)
			tail += c[k];
	}
	free(c);
	return tail / total;
}

static double normal_p(double u_max, double na, double nb, double ties, double *z)
{
	double n = na + nb;
	double var = na * nb / 12 * ((n + 1) - ties / (n * (n - 1)));

	if (!(var > 0)) {
		*z = 0;
		return 1;
	}
	*z = (u_max - na * nb / 2 - 0.5) / sqrt(var);
	return fmin(1.0, erfc(*z / sqrt(2.0)));
}

int stats_mann_whitney(const double *a, size_t na, const double *b, size_t nb, struct stats_mwu *out)
{
	struct ranked *all;
	double sum_a, ties, u_max;

	if (na == 0 || nb == 0)
		return -EINVAL;
	all = malloc((na + nb) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (size_t i = 0; i < na; i++)
		all[i] = (struct ranked){a[i], 1};
	for (size_t i = 0; i < nb; i++)
		all[na + i] = (struct ranked){b[i], 0};
	rank_sum(all, na + nb, &sum_a, &ties);
	free(all);
	out->u = sum_a - (double)na * (double)(na + 1) / 2;
	u_max = fmax(out->u, (double)na * (double)nb - out->u);
	out->z = 0;
	out->exact = ties == 0 && na <= STATS_EXACT_LIMIT && nb <= STATS_EXACT_LIMIT;
	if (out->exact) {
		double sf = exact_sf(na < nb ? na : nb, na < nb ? nb : na, u_max);

		if (isnan(sf))
			return -ENOMEM;
		out->p = fmin(1.0, 2 * sf);
		return 0;
	}
	out->p = normal_p(u_max, (double)na, (double)nb, ties, &out->z);
	return 0;
}

enum stats_verdict stats_verdict(double p, const struct stats_ci *ratio_ci, double alpha)
{
	if (!(p < alpha))
		return STATS_NO_DIFFERENCE;
	if (ratio_ci->hi < 1)
		return STATS_FASTER;
	if (ratio_ci->lo > 1)
		return STATS_SLOWER;
	return STATS_NO_DIFFERENCE;
}

const char *stats_verdict_name(enum stats_verdict v)
{
	switch (v) {
	case STATS_FASTER:
		return "B faster";
	case STATS_SLOWER:
		return "B slower";
	default:
		return "no significant difference";
	}
}
