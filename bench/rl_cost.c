/*
 * rl_cost.c - the rate limiter's cost per request on the hot path, in ns (bench/blk-limiter.sh,
 * docs/performance.md "The rate limiter's cost"): the check an unlimited disk makes per request
 * (virtio-blk's `limited`: no bucket on, not blocked), and for comparison a limiter whose buckets never
 * run dry (two consumes, each a clock read when short).
 *   build/bench/rl_cost [ITERATIONS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "brisk/rate_limiter.h"

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* What blk.c's `limited` does for one 4 KiB read; volatile-free but kept by the sum. */
static int limited(struct rate_limiter *rl)
{
	if (!rl_active(rl) && !rl->blocked)
		return 0;
	if (rl_consume(rl, 1, RL_OPS) && rl_consume(rl, 4096, RL_BYTES))
		return 0;
	return 1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000000L;
	struct rate_limiter off, on;
	double t0, t1, t2;
	long refused = 0;

	if (rl_init(&off, NULL) ||
	    rl_init(&on, &(struct rl_config){.bw = {UINT64_MAX / 2, 0, 1}, .ops = {UINT64_MAX / 2, 0, 1}}))
		return 1;
	t0 = now_ns();
	for (long i = 0; i < n; i++)
		refused += limited(&off);
	t1 = now_ns();
	for (long i = 0; i < n / 100; i++)
		refused += limited(&on);
	t2 = now_ns();
	printf("unlimited check: %.2f ns per request; limited, never short: %.1f ns per request (%ld refused)\n",
	       (t1 - t0) / (double)n, (t2 - t1) / (double)(n / 100), refused);
	return 0;
}
