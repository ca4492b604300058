/*
 * test_fc_metrics.c - Firecracker's metrics line (fc_metrics.h): every group and counter of Firecracker
 * v1.7.0 in its order and kind (tests/unit/fixtures/fc-metrics-v1.7.0.txt, written from its sources), INC
 * counters as deltas and STORE values as held, the per-device groups and their aggregate, a FIFO sink
 * that needs no reader and drops (and counts) what does not fit; the boot timer's line.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/devices.h"
#include "brisk/fc_metrics.h"

#define FIXTURE "tests/unit/fixtures/fc-metrics-v1.7.0.txt"

static json_object *render(const uint64_t *vcpu)
{
	char *line = fc_metrics_render(vcpu, NULL);
	json_object *o;

	assert_non_null(line);
	assert_null(strchr(line, '\n'));
	o = json_tokener_parse(line);
	assert_non_null(o);
	free(line);
	return o;
}

static uint64_t get(json_object *o, const char *group, const char *field)
{
	json_object *g, *v;

	assert_true(json_object_object_get_ex(o, group, &g));
	assert_true(json_object_object_get_ex(g, field, &v));
	assert_int_equal(json_object_get_type(v), json_type_int);
	return json_object_get_uint64(v);
}

static void assert_number(json_object *v, const char *what)
{
	if (json_object_get_type(v) != json_type_int)
		fail_msg("%s is not an integer", what);
}

/* One group of the line against the fixture's rows for it, in order, nothing more. */
static void check_group(json_object *g, const char *group, char names[][64], char kinds[][8], unsigned n)
{
	struct json_object_iterator it = json_object_iter_begin(g), end = json_object_iter_end(g);
	unsigned i = 0;

	for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it), i++) {
		json_object *v = json_object_iter_peek_value(&it);
		const char *key = json_object_iter_peek_name(&it);

		if (i >= n || strcmp(key, names[i]) != 0)
			fail_msg("%s: key %u is %s, Firecracker's is %s", group, i, key, i < n ? names[i] : "(none)");
		if (strcmp(kinds[i], "agg") == 0) {
			static const char *const sub[] = {"min_us", "max_us", "sum_us"};
			json_object *s;

			assert_int_equal(json_object_object_length(v), 3);
			for (unsigned k = 0; k < 3; k++) {
				assert_true(json_object_object_get_ex(v, sub[k], &s));
				assert_number(s, key);
			}
		} else {
			assert_number(v, key);
		}
	}
	if (i != n)
		fail_msg("%s: %u keys, Firecracker has %u", group, i, n);
}

/* With no device, the line is Firecracker's, key for key (top level and every group) and kind for kind. */
static void test_names_kinds_and_order(void **state)
{
	static char names[64][64], kinds[64][8];
	FILE *f = fopen(FIXTURE, "r");
	json_object *o, *g = NULL;
	struct json_object_iterator it, end;
	char line[256], group[64], cur[64] = "", field[64], kind[8];
	unsigned n = 0, groups = 0;

	(void)state;
	assert_non_null(f);
	fc_metrics_reset();
	o = render(NULL);
	it = json_object_iter_begin(o);
	end = json_object_iter_end(o);
	assert_string_equal(json_object_iter_peek_name(&it), "utc_timestamp_ms");
	assert_number(json_object_iter_peek_value(&it), "utc_timestamp_ms");
	json_object_iter_next(&it);
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#' || sscanf(line, "%63s %63s %7s", group, field, kind) != 3 ||
		    strcmp(group, "utc_timestamp_ms") == 0)
			continue;
		if (strcmp(group, cur) != 0) {
			if (cur[0]) {
				check_group(g, cur, names, kinds, n);
				json_object_iter_next(&it);
			}
			assert_false(json_object_iter_equal(&it, &end));
			if (strcmp(json_object_iter_peek_name(&it), group) != 0)
				fail_msg("top-level key %s where Firecracker has %s", json_object_iter_peek_name(&it),
					 group);
			g = json_object_iter_peek_value(&it);
			snprintf(cur, sizeof(cur), "%s", group);
			n = 0;
			groups++;
		}
		assert_true(n < 64);
		snprintf(names[n], sizeof(names[n]), "%s", field);
		snprintf(kinds[n++], sizeof(kinds[0]), "%s", kind);
	}
	check_group(g, cur, names, kinds, n);
	json_object_iter_next(&it);
	assert_true(json_object_iter_equal(&it, &end)); /* nothing after entropy when there is no brisk group */
	assert_int_equal(groups, 19);
	fclose(f);
	json_object_put(o);
}

/* SharedIncMetric: the count since the previous line; SharedStoreMetric: the value. */
static void test_inc_is_a_delta_store_a_value(void **state)
{
	json_object *o;

	(void)state;
	fc_metrics_reset();
	for (int i = 0; i < 3; i++)
		fcm_inc(fcm_uart, FCM_UART_write_count);
	fcm_store(fcm_seccomp, FCM_SECCOMP_num_faults, 5);
	fcm_latency(fcm_vsock, FCM_VSOCK_rx_bytes_count, 0); /* not an aggregate: only sums; harmless */
	o = render(NULL);
	assert_int_equal(get(o, "uart", "write_count"), 3);
	assert_int_equal(get(o, "seccomp", "num_faults"), 5);
	json_object_put(o);
	fcm_inc(fcm_uart, FCM_UART_write_count);
	o = render(NULL);
	assert_int_equal(get(o, "uart", "write_count"), 1);
	assert_int_equal(get(o, "seccomp", "num_faults"), 5);
	json_object_put(o);
	o = render(NULL);
	assert_int_equal(get(o, "uart", "write_count"), 0);
	json_object_put(o);
}

/* block_<id> per drive in id order, then "block": the sum of their deltas; aggregates' min/max not summed. */
static void test_devices_and_aggregate(void **state)
{
	uint64_t *zz, *aa;
	json_object *o, *agg, *v;
	struct json_object_iterator it, end;
	const char *order[6];
	unsigned n = 0;

	(void)state;
	fc_metrics_reset();
	zz = fcm_block(1, "zz");
	aa = fcm_block(0, "aa");
	assert_non_null(zz);
	assert_non_null(aa);
	assert_null(fcm_block(1000, "x"));
	fcm_add(zz, FCM_BLOCK_read_bytes, 512);
	fcm_add(aa, FCM_BLOCK_read_bytes, 1024);
	fcm_inc(aa, FCM_BLOCK_read_count);
	fcm_latency(aa, FCM_BLOCK_read_agg, 7);
	fcm_latency(aa, FCM_BLOCK_read_agg, 3);
	assert_non_null(fcm_net(0, NULL));
	o = render(NULL);
	it = json_object_iter_begin(o);
	end = json_object_iter_end(o);
	for (; !json_object_iter_equal(&it, &end) && n < 6; json_object_iter_next(&it))
		order[n++] = json_object_iter_peek_name(&it);
	assert_string_equal(order[2], "balloon");
	assert_string_equal(order[3], "block_aa");
	assert_string_equal(order[4], "block_zz");
	assert_string_equal(order[5], "block");
	assert_int_equal(get(o, "block_aa", "read_bytes"), 1024);
	assert_int_equal(get(o, "block_zz", "read_bytes"), 512);
	assert_int_equal(get(o, "block", "read_bytes"), 1536);
	assert_int_equal(get(o, "block", "read_count"), 1);
	assert_true(json_object_object_get_ex(o, "block_aa", &v) && json_object_object_get_ex(v, "read_agg", &agg));
	assert_true(json_object_object_get_ex(agg, "min_us", &v) && json_object_get_uint64(v) == 3);
	assert_true(json_object_object_get_ex(agg, "max_us", &v) && json_object_get_uint64(v) == 7);
	assert_true(json_object_object_get_ex(agg, "sum_us", &v) && json_object_get_uint64(v) == 10);
	assert_true(json_object_object_get_ex(o, "block", &v) && json_object_object_get_ex(v, "read_agg", &agg));
	assert_true(json_object_object_get_ex(agg, "sum_us", &v) && json_object_get_uint64(v) == 10);
	assert_true(json_object_object_get_ex(agg, "min_us", &v) && json_object_get_uint64(v) == 0);
	assert_true(json_object_object_get_ex(o, "net_eth0", &v)); /* a net device without an id: its position */
	json_object_put(o);
	fcm_block(1, "rootfs"); /* renamed (the API's drive id) */
	o = render(NULL);
	assert_int_equal(get(o, "block_rootfs", "read_bytes"), 0);
	assert_false(json_object_object_get_ex(o, "block_zz", &v));
	assert_int_equal(get(o, "block", "read_bytes"), 0);
	json_object_put(o);
}

/* The vcpu group from the caller's sums: deltas of its counts, the aggregates' min/max as given. */
static void test_vcpu_sums(void **state)
{
	uint64_t v[FCM_VCPU_N] = {0};
	json_object *o;

	(void)state;
	fc_metrics_reset();
	v[FCM_VCPU_exit_io_out] = 10;
	v[FCM_VCPU_exit_mmio_read] = 4;
	o = render(v);
	assert_int_equal(get(o, "vcpu", "exit_io_out"), 10);
	assert_int_equal(get(o, "vcpu", "exit_mmio_read"), 4);
	json_object_put(o);
	v[FCM_VCPU_exit_io_out] = 15;
	o = render(v);
	assert_int_equal(get(o, "vcpu", "exit_io_out"), 5);
	assert_int_equal(get(o, "vcpu", "exit_mmio_read"), 0);
	json_object_put(o);
}

static void test_signals(void **state)
{
	json_object *o;

	(void)state;
	fc_metrics_reset();
	fc_metrics_signal(SIGBUS);
	fc_metrics_signal(SIGBUS);
	fc_metrics_signal(SIGPIPE);
	fc_metrics_signal(SIGPIPE);
	fc_metrics_signal(SIGUSR1); /* not one of Firecracker's: ignored */
	o = render(NULL);
	assert_int_equal(get(o, "signals", "sigbus"), 1); /* a deadly signal is 0 or 1 */
	assert_int_equal(get(o, "signals", "sigpipe"), 2);
	assert_int_equal(get(o, "signals", "sigsegv"), 0);
	json_object_put(o);
}

static void test_process_times(void **state)
{
	json_object *o;

	(void)state;
	fc_metrics_reset();
	fc_metrics_process_times(UINT64_MAX, UINT64_MAX, 5);
	o = render(NULL);
	assert_int_equal(get(o, "api_server", "process_startup_time_us"), 0); /* not given: stays 0 */
	json_object_put(o);
	fc_metrics_process_times(0, 0, 1000000000);
	o = render(NULL);
	assert_true(get(o, "api_server", "process_startup_time_us") > 0);
	assert_true(get(o, "api_server", "process_startup_time_cpu_us") >= 1000000000);
	json_object_put(o);
}

/*
 * A FIFO made with mkfifo and no reader (as firecracker-containerd does) is accepted; a reader that comes
 * later reads whole lines; when the reader lags, a line that does not fit is dropped and counted, not split.
 */
static void test_fifo_sink(void **state)
{
	char dir[] = "/tmp/fcmXXXXXX", path[64], err[256], *buf = malloc(1 << 20);
	int rd, ret = 0, lines = 0;
	ssize_t n;
	size_t got = 0;
	json_object *o;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/metrics.fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	fc_metrics_reset();
	assert_int_equal(fc_metrics_configure(path, err, sizeof(err)), 0);
	assert_int_equal(fc_metrics_configure(path, err, sizeof(err)), -EALREADY);
	assert_non_null(strstr(err, "Reinitialization of metrics not allowed."));
	rd = open(path, O_RDONLY | O_NONBLOCK);
	assert_true(rd >= 0);
	for (int i = 0; i < 64 && ret == 0; i++, lines += ret == 0)
		ret = fc_metrics_flush(NULL, NULL);
	assert_int_equal(ret, -EAGAIN);
	assert_true(lines >= 2);
	o = render(NULL); /* the drop was counted (this render consumes the counts) */
	assert_int_equal(get(o, "logger", "missed_metrics_count"), 1);
	json_object_put(o);
	while ((n = read(rd, buf + got, (1 << 20) - got)) > 0)
		got += (size_t)n;
	for (char *p = buf, *nl; p < buf + got; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(buf + got - p));
		assert_non_null(nl); /* every byte belongs to a whole line */
		*nl = 0;
		o = json_tokener_parse(p);
		assert_non_null(o);
		json_object_put(o);
		lines--;
	}
	assert_int_equal(lines, 0);
	close(rd);
	fc_metrics_reset();
	unlink(path);
	rmdir(dir);
	free(buf);
}

static void test_boot_timer(void **state)
{
	struct boot_timer t = {.start_us = 1000, .start_cpu_us = 500};
	char line[160];
	uint8_t magic = 123, other = 7;
	uint32_t wide = 123;

	(void)state;
	boot_timer_line(&t, 1000 + 2345678, 500 + 1234, line, sizeof(line));
	assert_string_equal(line, "Guest-boot-time = 2345678 us 2345 ms,   1234 CPU us 1 CPU ms");
	boot_timer_line(&t, 1000 + 42, 500, line, sizeof(line));
	assert_string_equal(line, "Guest-boot-time =     42 us 0 ms,      0 CPU us 0 CPU ms");
	assert_false(boot_timer_write(&t, 0, &other, 1));
	assert_false(boot_timer_write(&t, 1, &magic, 1));
	assert_false(boot_timer_write(&t, 0, &wide, 4));
	assert_false(boot_timer_write(NULL, 0, &magic, 1));
	assert_true(boot_timer_write(&t, 0, &magic, 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names_kinds_and_order),
	    cmocka_unit_test(test_inc_is_a_delta_store_a_value),
	    cmocka_unit_test(test_devices_and_aggregate),
	    cmocka_unit_test(test_vcpu_sums),
	    cmocka_unit_test(test_signals),
	    cmocka_unit_test(test_process_times),
	    cmocka_unit_test(test_fifo_sink),
	    cmocka_unit_test(test_boot_timer),
	};

	return cmocka_run_group_tests_name("fc_metrics", tests, NULL, NULL);
}
