/* test_clone_req.c - the clone server's wire (include/brisk/clone.h): requests parsed strictly, replies round-trip. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "brisk/clone.h"

static int parse(const char *text, unsigned nfds, struct clone_req *r, char *err)
{
	return clone_req_parse(text, strlen(text), nfds, r, err, 512);
}

static void test_good_requests(void **state)
{
	struct clone_req r;
	char err[512];

	(void)state;
	assert_int_equal(parse("{}", 0, &r, err), 0);
	assert_string_equal(r.report_json, "");
	assert_int_equal(parse(" { } \n", 3, &r, err), 0);
	assert_int_equal(parse("{\"report_json\": \"/tmp/c 1.json\"}", 3, &r, err), 0);
	assert_string_equal(r.report_json, "/tmp/c 1.json");
	assert_string_equal(r.vsock_uds, "");
	assert_int_equal(
	    parse("{\"vsock_override\": {\"uds_path\": \"/run/c1/v.sock\"}, \"report_json\": \"/r\"}", 3, &r, err), 0);
	assert_string_equal(r.vsock_uds, "/run/c1/v.sock");
	assert_string_equal(r.report_json, "/r");
}

/* vsock_override: Firecracker's {uds_path}, strictly; the path absolute and short enough for PATH_P. */
static void test_vsock_override(void **state)
{
	static const struct {
		const char *text;
		const char *why;
	} bad[] = {
	    {"{\"vsock_override\": \"/v.sock\"}", "an object with only uds_path"},
	    {"{\"vsock_override\": {}}", "an object with only uds_path"},
	    {"{\"vsock_override\": null}", "an object with only uds_path"},
	    {"{\"vsock_override\": {\"path\": \"/v.sock\"}}", "an object with only uds_path"},
	    {"{\"vsock_override\": {\"uds_path\": \"/v\", \"x\": 1}}", "an object with only uds_path"},
	    {"{\"vsock_override\": {\"uds_path\": \"v.sock\"}}", "vsock_override.uds_path must be an absolute"},
	    {"{\"vsock_override\": {\"uds_path\": 7}}", "vsock_override.uds_path must be a string"},
	    {"{\"vsock_override\": {\"uds_path\": \"/a\\u0000b\"}}", "NUL"},
	};
	char text[256], err[512];
	struct clone_req r;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(parse(bad[i].text, 3, &r, err), -EINVAL);
		if (!strstr(err, bad[i].why))
			fail_msg("%s: '%s' does not say '%s'", bad[i].text, err, bad[i].why);
	}
	/* VM_VSOCK_UDS_MAX bytes fit (with "_4294967295" PATH_P still fits sun_path); one more does not */
	snprintf(text, sizeof(text), "{\"vsock_override\": {\"uds_path\": \"/%0*d\"}}", VM_VSOCK_UDS_MAX - 1, 0);
	assert_int_equal(parse(text, 3, &r, err), 0);
	assert_int_equal(strlen(r.vsock_uds), VM_VSOCK_UDS_MAX);
	snprintf(text, sizeof(text), "{\"vsock_override\": {\"uds_path\": \"/%0*d\"}}", VM_VSOCK_UDS_MAX, 0);
	assert_int_equal(parse(text, 3, &r, err), -EINVAL);
	assert_non_null(strstr(err, "vsock_override.uds_path is 97 bytes, the limit is 96"));
}

/* Each refused with -EINVAL and a message naming what is wrong. */
static void test_bad_requests(void **state)
{
	static char long_path[PATH_MAX + 64];
	static const struct {
		const char *text;
		unsigned nfds;
		const char *why;
	} bad[] = {
	    {"", 3, "clone request"},
	    {"not json", 3, "clone request"},
	    {"[]", 3, "clone request"},
	    {"{} {}", 3, "clone request"},
	    {"{\"report_json\": \"/a\", \"report_json\": \"/b\"}", 3, "clone request"},
	    {"{\"kernel\": \"/x\"}", 3, "unknown member \"kernel\""},
	    {"{\"report_json\": \"r.json\"}", 3, "absolute path"},
	    {"{\"report_json\": \"\"}", 3, "absolute path"},
	    {"{\"report_json\": 1}", 3, "must be a string"},
	    {"{\"report_json\": null}", 3, "must be a string"},
	    {"{\"report_json\": \"/a\\u0000b\"}", 3, "NUL"},
	    {"{}", 1, "1 descriptors came with it"},
	    {"{}", 4, "4 descriptors came with it"},
	};
	struct clone_req r;
	char err[512];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(parse(bad[i].text, bad[i].nfds, &r, err), -EINVAL);
		if (!strstr(err, bad[i].why))
			fail_msg("%s: '%s' does not say '%s'", bad[i].text, err, bad[i].why);
	}
	/* a path of PATH_MAX bytes does not fit; one byte less does */
	strcpy(long_path, "{\"report_json\": \"/");
	memset(long_path + strlen(long_path), 'a', PATH_MAX - 1);
	strcpy(long_path + strlen("{\"report_json\": \"/") + PATH_MAX - 1, "\"}");
	assert_int_equal(clone_req_parse(long_path, strlen(long_path), 3, &r, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "longer than 4095 bytes"));
	/* a message of CLONE_MSG_MAX bytes or more is refused whatever it holds */
	memset(long_path, ' ', CLONE_MSG_MAX);
	long_path[0] = '{';
	long_path[CLONE_MSG_MAX - 1] = '}';
	assert_int_equal(clone_req_parse(long_path, CLONE_MSG_MAX, 3, &r, err, sizeof(err)), -EINVAL);
	assert_int_equal(clone_req_parse(long_path, CLONE_MSG_MAX - 1, 3, &r, err, sizeof(err)), -EINVAL); /* "{  " */
	long_path[CLONE_MSG_MAX - 2] = '}';
	assert_int_equal(clone_req_parse(long_path, CLONE_MSG_MAX - 1, 3, &r, err, sizeof(err)), 0);
}

static void test_replies_round_trip(void **state)
{
	char buf[CLONE_MSG_MAX], why[2000], err[512];
	struct clone_reply r;
	size_t n;

	(void)state;
	n = clone_reply_pid(buf, 4242);
	assert_int_equal(n, strlen(buf));
	assert_int_equal(clone_reply_parse(buf, n, &r, err, sizeof(err)), 0);
	assert_int_equal(r.kind, CLONE_REPLY_PID);
	assert_int_equal(r.value, 4242);
	n = clone_reply_exit(buf, 16);
	assert_int_equal(clone_reply_parse(buf, n, &r, err, sizeof(err)), 0);
	assert_int_equal(r.kind, CLONE_REPLY_EXIT);
	assert_int_equal(r.value, 16);
	n = clone_reply_error(buf, "bad \"quote\"\n\x01", 2);
	assert_int_equal(clone_reply_parse(buf, n, &r, err, sizeof(err)), 0);
	assert_int_equal(r.kind, CLONE_REPLY_ERROR);
	assert_int_equal(r.value, 2);
	assert_string_equal(r.why, "bad \"quote\"\n\x01");
	/* a long text of control characters (6 bytes each escaped) is cut, and still fits and parses */
	memset(why, '\x02', sizeof(why) - 1);
	why[sizeof(why) - 1] = '\0';
	n = clone_reply_error(buf, why, 4);
	assert_true(n < CLONE_MSG_MAX);
	assert_int_equal(clone_reply_parse(buf, n, &r, err, sizeof(err)), 0);
	assert_int_equal(r.value, 4);
	assert_true(strlen(r.why) > 100 && strlen(r.why) < sizeof(why) - 1);
}

static void test_bad_replies(void **state)
{
	static const char *const bad[] = {
	    "{\"pid\": 0}",
	    "{\"pid\": -1}",
	    "{\"pid\": 1, \"exit_code\": 0}",
	    "{\"exit_code\": 256}",
	    "{\"exit_code\": \"0\"}",
	    "{\"error\": \"x\"}",
	    "{\"error\": 1, \"exit_code\": 2}",
	    "{\"error\": \"x\", \"exit_code\": 0}",
	    "{}",
	    "[1]",
	};
	struct clone_reply r;
	char err[512];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (clone_reply_parse(bad[i], strlen(bad[i]), &r, err, sizeof(err)) != -EINVAL)
			fail_msg("accepted %s", bad[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good_requests),  cmocka_unit_test(test_bad_requests),
	    cmocka_unit_test(test_vsock_override), cmocka_unit_test(test_replies_round_trip),
	    cmocka_unit_test(test_bad_replies),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
