/* test_rate_limiter.c - the token-bucket arithmetic (Firecracker v1.7.0 rate_limiter/mod.rs's rules) and the limiter.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/rate_limiter.h"
#include "brisk/snapshot.h"
#include "snap_test.h"

#define MS 1000000ull

static void test_bucket_off(void **state)
{
	struct rl_bucket_cfg none[] = {{0, 0, 100}, {100, 5, 0}, {1, 0, UINT64_MAX}, {1, 0, UINT64_MAX / MS + 1}};
	struct rl_bucket b;
	double ratio = 0;

	(void)state;
	for (unsigned i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		assert_false(rl_bucket_on(&none[i]));
		rl_bucket_init(&b, &none[i], 0);
		assert_false(b.on);
		assert_int_equal(rl_bucket_reduce(&b, UINT64_MAX, 0, &ratio), RL_OK);
	}
	assert_true(rl_bucket_on(&(struct rl_bucket_cfg){1, 0, UINT64_MAX / MS}));
	assert_true(rl_config_limits(&(struct rl_config){.ops = {1, 0, 1}}));
	assert_false(rl_config_limits(&(struct rl_config){0}));
}

/* Starts full; refills size tokens per refill_ms, linearly; never above size. */
static void test_bucket_refill(void **state)
{
	struct rl_bucket b;
	double ratio;

	(void)state;
	rl_bucket_init(&b, &(struct rl_bucket_cfg){1000, 0, 1000}, 0);
	assert_int_equal(b.budget, 1000);
	assert_int_equal(rl_bucket_reduce(&b, 1000, 0, &ratio), RL_OK);
	assert_int_equal(b.budget, 0);
	assert_int_equal(rl_bucket_reduce(&b, 1, 0, &ratio), RL_FAIL);
	assert_int_equal(rl_bucket_reduce(&b, 100, 100 * MS, &ratio), RL_OK); /* 100 ms: 100 tokens */
	assert_int_equal(b.budget, 0);
	assert_int_equal(rl_bucket_reduce(&b, 101, 200 * MS, &ratio), RL_FAIL);
	assert_int_equal(b.budget, 100); /* the refill is kept though the reduce failed */
	rl_bucket_refill(&b, 10000 * MS);
	assert_int_equal(b.budget, 1000); /* capped */
}

/* The fraction of a token is carried over in last_ns: 3 x 0.5 ms at 1 token/ms gives 1 token, then another. */
static void test_bucket_fraction(void **state)
{
	struct rl_bucket b;
	double ratio;

	(void)state;
	rl_bucket_init(&b, &(struct rl_bucket_cfg){10, 0, 10}, 0); /* 1 token per ms */
	assert_int_equal(rl_bucket_reduce(&b, 10, 0, &ratio), RL_OK);
	rl_bucket_refill(&b, MS / 2);
	assert_int_equal(b.budget, 0);
	rl_bucket_refill(&b, 3 * MS / 2);
	assert_int_equal(b.budget, 1);
	assert_int_equal(b.last_ns, MS); /* the half ms left over stays */
	rl_bucket_refill(&b, 2 * MS);
	assert_int_equal(b.budget, 2);
}

/* The burst is spent first, and refills nothing once gone. */
static void test_bucket_burst(void **state)
{
	struct rl_bucket b;
	double ratio;

	(void)state;
	rl_bucket_init(&b, &(struct rl_bucket_cfg){100, 50, 1000}, 0);
	assert_int_equal(rl_bucket_reduce(&b, 30, 0, &ratio), RL_OK);
	assert_int_equal(b.burst, 20);
	assert_int_equal(b.budget, 100);
	assert_int_equal(rl_bucket_reduce(&b, 70, 0, &ratio), RL_OK); /* 20 from the burst, 50 from the budget */
	assert_int_equal(b.burst, 0);
	assert_int_equal(b.budget, 50);
	rl_bucket_replenish(&b, 1000);
	assert_int_equal(b.budget, 100);
	assert_int_equal(b.burst, 0);
	/* while a burst is left, a replenish goes there, capped at the initial burst */
	rl_bucket_init(&b, &(struct rl_bucket_cfg){100, 50, 1000}, 0);
	assert_int_equal(rl_bucket_reduce(&b, 10, 0, &ratio), RL_OK);
	rl_bucket_replenish(&b, 1000);
	assert_int_equal(b.burst, 50);
}

/* A request larger than the bucket succeeds once, empties it, and says by how much it overdrew. */
static void test_bucket_over(void **state)
{
	struct rl_bucket b;
	double ratio = 0;

	(void)state;
	rl_bucket_init(&b, &(struct rl_bucket_cfg){100, 0, 1000}, 0);
	assert_int_equal(rl_bucket_reduce(&b, 350, 0, &ratio), RL_OVER);
	assert_int_equal(b.budget, 0);
	assert_true(ratio > 2.49 && ratio < 2.51); /* (350 - 100) / 100 */
	/* u64 max against a u64-max bucket: no overflow anywhere */
	rl_bucket_init(&b, &(struct rl_bucket_cfg){UINT64_MAX, UINT64_MAX, UINT64_MAX / MS}, 0);
	assert_int_equal(rl_bucket_reduce(&b, UINT64_MAX, 0, &ratio), RL_OK);
	assert_int_equal(rl_bucket_reduce(&b, UINT64_MAX, 0, &ratio), RL_OK);
	assert_int_equal(rl_bucket_reduce(&b, 1, 0, &ratio), RL_FAIL);
	rl_bucket_refill(&b, UINT64_MAX);
	assert_true(b.budget > 0);
	rl_bucket_refill(&b, UINT64_MAX); /* time going nowhere is no refill, and no underflow */
}

static bool readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1;
}

/* A refused consume blocks the limiter until the timer fires (100 ms), and an ops-only limiter passes bytes. */
static void test_limiter_block(void **state)
{
	struct rate_limiter rl;
	uint64_t t0;

	(void)state;
	assert_int_equal(rl_init(&rl, &(struct rl_config){.ops = {2, 0, 10000}}), 0);
	assert_true(rl_active(&rl));
	assert_true(rl_consume(&rl, UINT64_MAX, RL_BYTES));
	assert_true(rl_consume(&rl, 1, RL_OPS));
	assert_true(rl_consume(&rl, 1, RL_OPS));
	t0 = rl_now_ns();
	assert_false(rl_consume(&rl, 1, RL_OPS));
	assert_true(rl.blocked);
	assert_int_equal(rl.throttled, 1);
	assert_false(rl_consume(&rl, 1, RL_BYTES)); /* blocked: nothing passes */
	assert_false(readable(rl_timer_fd(&rl), 50));
	assert_true(readable(rl_timer_fd(&rl), 1000));
	assert_true(rl_now_ns() - t0 >= 95 * MS);
	assert_true(rl_timer_event(&rl));
	assert_false(rl.blocked);
	assert_false(rl_timer_event(&rl)); /* spurious: nothing to read */
	rl_replenish(&rl, 1, RL_OPS);
	assert_true(rl_consume(&rl, 1, RL_OPS));
	rl_destroy(&rl);
	rl_destroy(&rl);
}

/* An over-consumption passes and blocks for ratio * refill_time. */
static void test_limiter_over(void **state)
{
	struct rate_limiter rl;
	uint64_t t0 = rl_now_ns();

	(void)state;
	assert_int_equal(rl_init(&rl, &(struct rl_config){.bw = {1000, 0, 100}}), 0);
	assert_true(rl_consume(&rl, 3000, RL_BYTES)); /* 2000 over a 1000 bucket: 200 ms */
	assert_true(rl.blocked);
	assert_false(readable(rl_timer_fd(&rl), 150));
	assert_true(readable(rl_timer_fd(&rl), 1000));
	assert_true(rl_now_ns() - t0 >= 195 * MS);
	assert_true(rl_timer_event(&rl));
	rl_destroy(&rl);
}

/* update_buckets: a given bucket replaces (full), 0 disables, an absent one stays; an update unblocks. */
static void test_limiter_update(void **state)
{
	struct rate_limiter rl;
	struct rl_config got;

	(void)state;
	assert_int_equal(rl_init(&rl, NULL), 0);
	assert_false(rl_active(&rl));
	assert_true(rl_consume(&rl, UINT64_MAX, RL_BYTES));
	rl_update(&rl, &(struct rl_config){.bw = {10, 5, 1000}, .ops = {7, 0, 7}}, true, true);
	rl_get_config(&rl, &got);
	assert_int_equal(got.bw.size, 10);
	assert_int_equal(got.bw.one_time_burst, 5);
	assert_int_equal(got.bw.refill_ms, 1000);
	assert_int_equal(got.ops.size, 7);
	assert_true(rl_consume(&rl, 15, RL_BYTES));
	assert_false(rl_consume(&rl, 1, RL_BYTES));
	rl_update(&rl, &(struct rl_config){.bw = {0, 0, 0}}, true, false); /* bw off, ops stays */
	rl_get_config(&rl, &got);
	assert_int_equal(got.bw.size, 0);
	assert_int_equal(got.ops.size, 7);
	assert_true(readable(rl_timer_fd(&rl), 50)); /* the update let the blocked limiter go within 1 ms */
	assert_true(rl_timer_event(&rl));
	assert_true(rl_consume(&rl, UINT64_MAX, RL_BYTES));
	rl_update(&rl, &(struct rl_config){0}, false, false); /* {} changes nothing */
	rl_get_config(&rl, &got);
	assert_int_equal(got.ops.refill_ms, 7);
	rl_destroy(&rl);
}

/* The measured rate over 300 ms of 100-token requests matches size / refill_time. */
static void test_limiter_rate(void **state)
{
	struct rate_limiter rl;
	uint64_t t0 = rl_now_ns(), got = 0;

	(void)state;
	assert_int_equal(rl_init(&rl, &(struct rl_config){.bw = {1000, 0, 100}}), 0); /* 10000/s, 1000 burst */
	while (rl_now_ns() - t0 < 300 * MS) {
		if (rl_consume(&rl, 100, RL_BYTES)) {
			got += 100;
		} else {
			assert_true(readable(rl_timer_fd(&rl), 1000));
			rl_timer_event(&rl);
		}
	}
	/* 1000 at start + 3000 refilled in 300 ms; the 100 ms timer granularity loses at most one refill */
	assert_true(got >= 3000 && got <= 4100);
	rl_destroy(&rl);
}

/* rl_save's bytes, put back in a file's device section and opened again: the section's reader. */
static struct snap_reader *saved(struct rate_limiter *rl, struct snap_reader **file, const void *extra, size_t n)
{
	struct snap_writer *w = snap_writer_new();
	struct snap_reader *sec;

	assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, 0, "rl"), 0);
	if (rl)
		assert_int_equal(rl_save(rl, w), 0);
	if (n)
		assert_int_equal(snap_put(w, extra, n), 0);
	assert_int_equal(snap_section_end(w), 0);
	*file = snap_test_reader(w);
	assert_int_equal(snap_section(*file, SNAP_TAG_DEVICE, 0, "rl", &sec), 0);
	return sec;
}

/* A snapshot keeps each bucket's configuration, budget and burst left, and a blocked limiter resumes on its timer. */
static void test_limiter_snapshot(void **state)
{
	struct rate_limiter a, b;
	struct snap_reader *file, *sec;
	char why[160];

	(void)state;
	assert_int_equal(rl_init(&a, &(struct rl_config){.bw = {1000, 300, 100000}, .ops = {5, 0, 100000}}), 0);
	assert_true(rl_consume(&a, 500, RL_BYTES)); /* 300 from the burst, 200 from the budget */
	assert_true(rl_consume(&a, 5, RL_OPS));
	assert_false(rl_consume(&a, 1, RL_OPS)); /* blocked */
	sec = saved(&a, &file, NULL, 0);
	assert_int_equal(rl_init(&b, NULL), 0);
	assert_int_equal(rl_restore(&b, sec, why, sizeof(why)), 0);
	assert_int_equal(b.bw.size, 1000);
	assert_int_equal(b.bw.initial_burst, 300);
	assert_int_equal(b.bw.burst, 0);
	assert_true(b.bw.budget >= 800 && b.bw.budget <= 801);
	assert_int_equal(b.ops.budget, 0);
	assert_true(b.blocked);
	assert_true(readable(rl_timer_fd(&b), 1000));
	assert_true(rl_timer_event(&b));
	snap_reader_free(file);
	/* a budget above the size is refused, and nothing changes */
	{
		uint8_t img[2 * (1 + 5 * 8) + 1] = {0};
		uint64_t v[5] = {10, 0, 100, 0, 11}; /* size, initial burst, refill_ms, burst, budget > size */

		img[0] = 1;
		memcpy(img + 1, v, sizeof(v));
		sec = saved(NULL, &file, img, sizeof(img));
		assert_int_equal(rl_restore(&b, sec, why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "budget above"));
		assert_int_equal(b.bw.size, 1000);
		snap_reader_free(file);
	}
	rl_destroy(&a);
	rl_destroy(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bucket_off),	    cmocka_unit_test(test_bucket_refill),
	    cmocka_unit_test(test_bucket_fraction), cmocka_unit_test(test_bucket_burst),
	    cmocka_unit_test(test_bucket_over),	    cmocka_unit_test(test_limiter_block),
	    cmocka_unit_test(test_limiter_over),    cmocka_unit_test(test_limiter_update),
	    cmocka_unit_test(test_limiter_rate),    cmocka_unit_test(test_limiter_snapshot),
	};

	return cmocka_run_group_tests_name("rate_limiter", tests, NULL, NULL);
}
