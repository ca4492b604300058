/* test_log.c - logging never blocks: a stalled stderr drops (and counts) messages instead. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/log.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * stderr is a pipe nobody reads, already full: before the fix the first
 * log_warn blocked in write() forever (alarm() then kills this test, which
 * fails it); now every message returns at once and is counted.
 */
static void test_full_pipe_does_not_block(void **state)
{
	int p[2], saved = dup(STDERR_FILENO), fl;
	char junk[4096];
	double t0;

	(void)state;
	alarm(30);
	memset(junk, 'x', sizeof(junk));
	assert_int_equal(pipe(p), 0);
	fl = fcntl(p[1], F_GETFL);
	assert_int_equal(fcntl(p[1], F_SETFL, fl | O_NONBLOCK), 0);
	while (write(p[1], junk, sizeof(junk)) > 0)
		;
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(fcntl(p[1], F_SETFL, fl), 0); /* stderr's own description stays blocking */
	assert_int_equal(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
	log_init_nonblocking();
	t0 = now_s();
	for (int i = 0; i < 1000; i++)
		log_warn("message %d from a vCPU that must not stall", i);
	assert_true(now_s() - t0 < 5.0);
	assert_int_equal(log_dropped(), 1000);
	/* stderr's shared description was not switched to non-blocking */
	assert_false(fcntl(STDERR_FILENO, F_GETFL) & O_NONBLOCK);
	dup2(saved, STDERR_FILENO);
	close(p[0]);
	close(p[1]);
	alarm(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_full_pipe_does_not_block),
	};

	return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
