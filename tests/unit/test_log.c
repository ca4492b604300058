/*
 * test_log.c - logging never blocks: a stalled stderr drops (and counts) messages instead; Firecracker's
 * line format, module filter and level Off once a Firecracker logger is configured.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

/* Firecracker v1.7.0 logging.rs: "<time> [<id>:<thread>[:<LEVEL>][:<file>:<line>]] <message>\n". */
static void test_fc_line_format(void **state)
{
	char buf[512];
	int n, y, mo, d, h, mi, sec;
	long ns;
	char rest[256];

	(void)state;
	log_set_instance_id("vm-1");
	log_set_thread_name("fc_vcpu 3");
	log_set_fc_format(true, true, NULL);
	n = log_fc_line(buf, sizeof(buf), LOG_WARN, "src/vmm/vcpu.c", 42, "hello");
	assert_int_equal(n, (int)strlen(buf));
	assert_int_equal(sscanf(buf, "%4d-%2d-%2dT%2d:%2d:%2d.%9ld %255[^\n]", &y, &mo, &d, &h, &mi, &sec, &ns, rest),
			 8);
	assert_int_equal(buf[29], ' '); /* 2024-01-02T03:04:05.123456789: nine digits of ns, always */
	assert_string_equal(rest, "[vm-1:fc_vcpu 3:WARN:src/vmm/vcpu.c:42] hello");
	assert_int_equal(buf[n - 1], '\n');
	log_set_fc_format(false, false, NULL);
	log_set_thread_name(NULL);
	log_set_instance_id(NULL);
	n = log_fc_line(buf, sizeof(buf), LOG_ERROR, "src/x.c", 1, "m");
	assert_string_equal(buf + 30, "[anonymous-instance:main] m\n"); /* this test runs on the main thread */
	n = log_fc_line(buf, 40, LOG_ERROR, "src/x.c", 1, "a message far too long for the buffer");
	assert_int_equal(n, 39);
	assert_int_equal(buf[38], '\n');
}

static void test_module_of(void **state)
{
	char m[64];

	(void)state;
	log_module_of("src/virtio/blk/blk.c", m, sizeof(m));
	assert_string_equal(m, "virtio::blk::blk");
	log_module_of("src/api/api_vm.c", m, sizeof(m));
	assert_string_equal(m, "api::api_vm");
	log_module_of("src/virtio/blk/blk.c", m, 8);
	assert_string_equal(m, "virtio"); /* cut to fit, never half a "::" */
}

/* The module filter keeps a message whose module starts with it; Off keeps none; a level brings them back. */
static void test_filter_and_off(void **state)
{
	int p[2], saved = dup(STDERR_FILENO);
	char buf[4096];
	ssize_t n;

	(void)state;
	assert_int_equal(pipe(p), 0);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	log_set_fd(p[1]);
	log_set_level(LOG_INFO);
	log_set_fc_format(false, false, "virtio::blk");
	log_msg_at(LOG_INFO, "src/virtio/blk/blk_io.c", 1, "kept");
	log_msg_at(LOG_INFO, "src/virtio/net/net.c", 1, "filtered");
	log_set_fc_format(false, false, NULL);
	log_set_off();
	log_msg_at(LOG_ERROR, "src/virtio/blk/blk_io.c", 1, "off");
	log_set_level(LOG_WARN);
	log_msg_at(LOG_ERROR, "src/x.c", 1, "back");
	n = read(p[0], buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = 0;
	assert_non_null(strstr(buf, "] kept\n"));
	assert_null(strstr(buf, "filtered"));
	assert_null(strstr(buf, "off"));
	assert_non_null(strstr(buf, "] back\n"));
	log_set_fd(saved);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_full_pipe_does_not_block),
	    cmocka_unit_test(test_fc_line_format),
	    cmocka_unit_test(test_module_of),
	    cmocka_unit_test(test_filter_and_off),
	};

	return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
