/* test_size.c - size and integer parsing for command-line values. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "brisk/config.h"

static void test_sizes(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(config_parse_size("128M", &v), 0);
	assert_int_equal(v, 128ULL << 20);
	assert_int_equal(config_parse_size("2G", &v), 0);
	assert_int_equal(v, 2ULL << 30);
	assert_int_equal(config_parse_size("2g", &v), 0);
	assert_int_equal(v, 2ULL << 30);
	assert_int_equal(config_parse_size("512MiB", &v), 0);
	assert_int_equal(v, 512ULL << 20);
	assert_int_equal(config_parse_size("64k", &v), 0);
	assert_int_equal(v, 64ULL << 10);
	assert_int_equal(config_parse_size("1T", &v), 0);
	assert_int_equal(v, 1ULL << 40);
	assert_int_equal(config_parse_size("4096B", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(config_parse_size("256", &v), 0); /* bare number: MiB, as QEMU -m */
	assert_int_equal(v, 256ULL << 20);
	assert_int_equal(config_parse_size("0", &v), 0);
	assert_int_equal(v, 0);
}

static void test_bad_sizes(void **state)
{
	uint64_t v = 7;

	(void)state;
	assert_int_equal(config_parse_size("", &v), -EINVAL);
	assert_int_equal(config_parse_size(NULL, &v), -EINVAL);
	assert_int_equal(config_parse_size("M", &v), -EINVAL);
	assert_int_equal(config_parse_size("-1G", &v), -EINVAL);
	assert_int_equal(config_parse_size(" 1G", &v), -EINVAL);
	assert_int_equal(config_parse_size("1.5G", &v), -EINVAL);
	assert_int_equal(config_parse_size("12X", &v), -EINVAL);
	assert_int_equal(config_parse_size("1G ", &v), -EINVAL);
	assert_int_equal(config_parse_size("99999999999999999999", &v), -ERANGE);
	assert_int_equal(config_parse_size("16777216T", &v), -ERANGE); /* 2^64 */
	assert_int_equal(config_parse_size("16777215T", &v), 0);
	assert_int_equal(v, 16777215ULL << 40);
}

static void test_uint(void **state)
{
	unsigned long v;

	(void)state;
	assert_int_equal(config_parse_uint("1", 1, 254, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(config_parse_uint("254", 1, 254, &v), 0);
	assert_int_equal(config_parse_uint("0", 1, 254, &v), -ERANGE);
	assert_int_equal(config_parse_uint("255", 1, 254, &v), -ERANGE);
	assert_int_equal(config_parse_uint("2x", 1, 254, &v), -EINVAL);
	assert_int_equal(config_parse_uint("-2", 1, 254, &v), -EINVAL);
	assert_int_equal(config_parse_uint("", 1, 254, &v), -EINVAL);
	assert_int_equal(config_parse_uint("99999999999999999999999", 1, 254, &v), -ERANGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_bad_sizes),
	    cmocka_unit_test(test_uint),
	};

	return cmocka_run_group_tests_name("size", tests, NULL, NULL);
}
