/* test_fc_args.c - Firecracker's command line with its parser's rules (src/config/fc_args.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "brisk/fc_args.h"

static const struct option extra[] = {{"serial", required_argument, NULL, 1}, {"timeline", no_argument, NULL, 2}, {0}};
static int extra_seen[3];

static int count_extra(void *ctx, const struct option *o, const char *value)
{
	(void)ctx, (void)value;
	extra_seen[o->val]++;
	return o->val == 1 && value && strcmp(value, "fail") == 0 ? 7 : 0;
}

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int parse(int argc, char **argv, struct fc_args *a, char *err)
{
	memset(extra_seen, 0, sizeof(extra_seen));
	return fc_args_parse(argc, argv, extra, count_extra, NULL, a, err, 256);
}

/* The Go SDK's argv (command_builder.go, jailer.go) and flintlock's, in any order. */
static void test_orchestrator_argv(void **state)
{
	char *sdk[] = {"firecracker", "--api-sock", "/s", "--id", "vm-1", "--no-seccomp"};
	char *flint[] = {"firecracker", "--id",	      "UID", "--boot-timer", "--no-api", "--config-file",
			 "/f",		"--metadata", "/m"};
	struct fc_args a;
	char err[256];

	(void)state;
	assert_int_equal(parse(ARGC(sdk), sdk, &a, err), 0);
	assert_string_equal(a.api_sock, "/s");
	assert_string_equal(a.id, "vm-1");
	assert_true(a.no_seccomp);
	assert_int_equal(a.http_api_max_payload_size, API_BODY_MAX);
	assert_int_equal(a.mmds_size_limit, API_BODY_MAX); /* defaults to the payload limit */
	assert_int_equal(parse(ARGC(flint), flint, &a, err), 0);
	assert_true(a.boot_timer && a.no_api);
	assert_null(a.api_sock);
	assert_string_equal(a.config_file, "/f");
	assert_string_equal(a.metadata, "/m");
}

static void test_defaults_and_numbers(void **state)
{
	char *none[] = {"firecracker"};
	char *nums[] = {"firecracker", "--start-time-us",      "12", "--start-time-cpu-us",
			"+3",	       "--parent-cpu-time-us", "4",  "--http-api-max-payload-size",
			"1000",	       "--mmds-size-limit",    "99"};
	struct fc_args a;
	char err[256];

	(void)state;
	assert_int_equal(parse(ARGC(none), none, &a, err), 0);
	assert_string_equal(a.id, FC_DEFAULT_INSTANCE_ID);
	assert_null(a.api_sock);
	assert_false(a.has_start_time_us);
	assert_int_equal(parse(ARGC(nums), nums, &a, err), 0);
	assert_true(a.has_start_time_us && a.has_start_time_cpu_us && a.has_parent_cpu_time_us);
	assert_int_equal(a.start_time_us, 12);
	assert_int_equal(a.start_time_cpu_us, 3);
	assert_int_equal(a.parent_cpu_time_us, 4);
	assert_int_equal(a.http_api_max_payload_size, 1000);
	assert_int_equal(a.mmds_size_limit, 99);
}

/* arg_parser.rs: each mistake and Firecracker's words for it. */
static void test_refusals(void **state)
{
	static const struct {
		const char *words[4];
		const char *needle;
	} cases[] = {
	    {{"--api-sock=/s"}, "Found argument 'api-sock=/s' which wasn't expected"},
	    {{"--api"}, "Found argument 'api' which wasn't expected"},
	    {{"positional"}, "Found argument 'positional' which wasn't expected"},
	    {{"--id", "a", "--id", "b"}, "The argument 'id' was provided more than once."},
	    {{"--id"}, "The argument 'id' requires a value, but none was supplied."},
	    {{"--id", "--no-api"}, "The argument 'id' requires a value"},
	    {{"--no-api"}, "Argument 'config-file' required, but not found."},
	    {{"--seccomp-filter", "f", "--no-seccomp"}, "cannot be used together"},
	    {{"--start-time-us", "-1"}, "'start-time-us' parameter expected to be of 'u64' type"},
	    {{"--http-api-max-payload-size", "1k"}, "expected to be of 'usize' type"},
	    {{"--mmds-size-limit", "99999999999999999999999"}, "'mmds-size-limit' parameter expected"},
	};
	struct fc_args a;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[5] = {"firecracker"};
		int argc = 1;

		for (int w = 0; w < 4 && cases[i].words[w]; w++)
			argv[argc++] = (char *)cases[i].words[w];
		err[0] = '\0';
		assert_int_equal(parse(argc, argv, &a, err), -EINVAL);
		if (!strstr(err, cases[i].needle))
			fail_msg("case %zu: '%s' lacks '%s'", i, err, cases[i].needle);
	}
}

/* --help and --version win over everything, mistakes included; `--` ends the flags. */
static void test_help_version_separator(void **state)
{
	char *help[] = {"firecracker", "--bogus", "--help"};
	char *version[] = {"firecracker", "--id", "--version"};
	char *sep[] = {"firecracker", "--id", "x", "--", "--bogus", "--help"};
	struct fc_args a;
	char err[256];

	(void)state;
	assert_int_equal(parse(ARGC(help), help, &a, err), 0);
	assert_true(a.help);
	assert_int_equal(parse(ARGC(version), version, &a, err), 0);
	assert_true(a.version);
	assert_int_equal(parse(ARGC(sep), sep, &a, err), 0);
	assert_false(a.help);
	assert_string_equal(a.id, "x");
}

/* brisk's process options beside Firecracker's, under the same rules; the callback's status ends the parse. */
static void test_extra_options(void **state)
{
	char *ok[] = {"firecracker", "--serial", "none", "--api-sock", "/s", "--timeline"};
	char *dup_fc[] = {"firecracker", "--serial", "fail"};
	char *noval[] = {"firecracker", "--serial", "--timeline"};
	struct fc_args a;
	char err[256];

	(void)state;
	assert_int_equal(parse(ARGC(ok), ok, &a, err), 0);
	assert_int_equal(extra_seen[1], 1);
	assert_int_equal(extra_seen[2], 1);
	assert_int_equal(parse(ARGC(dup_fc), dup_fc, &a, err), 7);
	assert_int_equal(parse(ARGC(noval), noval, &a, err), -EINVAL);
	assert_non_null(strstr(err, "'serial' requires a value"));
}

/* utils/src/validators.rs validate_instance_id, with its tests' messages. */
static void test_instance_id(void **state)
{
	char err[256], long_id[FC_INSTANCE_ID_MAX + 2];

	(void)state;
	assert_int_equal(fc_args_check_id("12-3aa", err, sizeof(err)), 0);
	assert_int_equal(fc_args_check_id("12_3aa", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "Invalid char (_) at position 2"));
	assert_int_equal(fc_args_check_id("", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "Invalid len (0);  the length must be between 1 and 64"));
	memset(long_id, 'a', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	assert_int_equal(fc_args_check_id(long_id, err, sizeof(err)), -EINVAL);
	long_id[FC_INSTANCE_ID_MAX] = '\0';
	assert_int_equal(fc_args_check_id(long_id, err, sizeof(err)), 0);
	assert_int_equal(fc_args_check_id("a/b", err, sizeof(err)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_orchestrator_argv), cmocka_unit_test(test_defaults_and_numbers),
	    cmocka_unit_test(test_refusals),	      cmocka_unit_test(test_help_version_separator),
	    cmocka_unit_test(test_extra_options),     cmocka_unit_test(test_instance_id),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
