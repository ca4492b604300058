/* test_config.c - option validation: --serial parsing, cpus and memory ranges against host limits. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "brisk/config.h"
#include "brisk/layout.h"

#define MiB (1ULL << 20)

static void test_defaults(void **state)
{
	struct vm_config c;
	char err[256];

	(void)state;
	config_defaults(&c);
	assert_int_equal(c.cpus, 1);
	assert_int_equal(c.memory, 128 * MiB);
	assert_int_equal(c.serial, SERIAL_STDIO);
	assert_null(c.kernel);
	assert_int_equal(config_validate(&c, 2, 1ULL << 34, err, sizeof(err)), 0);
}

static void test_serial(void **state)
{
	struct vm_config c;

	(void)state;
	config_defaults(&c);
	assert_int_equal(parse_serial("none", &c), 0);
	assert_int_equal(c.serial, SERIAL_NONE);
	assert_int_equal(parse_serial("file:/tmp/x", &c), 0);
	assert_int_equal(c.serial, SERIAL_FILE);
	assert_string_equal(c.serial_path, "/tmp/x");
	assert_int_equal(parse_serial("stdio", &c), 0);
	assert_int_equal(c.serial, SERIAL_STDIO);
	assert_int_equal(parse_serial("file:", &c), -EINVAL);
	assert_int_equal(parse_serial("tcp:1234", &c), -EINVAL);
	assert_int_equal(parse_serial("", &c), -EINVAL);
}

static void test_limits(void **state)
{
	struct vm_config c;
	char err[256];

	(void)state;
	config_defaults(&c);
	c.cpus = 0;
	assert_int_equal(config_validate(&c, 2, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--cpus 0"));
	c.cpus = 3;
	assert_int_equal(config_validate(&c, 2, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "1..2"));
	c.cpus = 2;
	assert_int_equal(config_validate(&c, 2, 0, err, sizeof(err)), 0);
	c.memory = LAYOUT_MEM_MIN - 4096;
	assert_int_equal(config_validate(&c, 2, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "too small"));
	c.memory = LAYOUT_MEM_MIN;
	assert_int_equal(config_validate(&c, 2, 0, err, sizeof(err)), 0);
	c.memory = 8ULL << 30;
	assert_int_equal(config_validate(&c, 2, 4ULL << 30, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "exceeds"));
	c.memory = 128 * MiB + 1;
	assert_int_equal(config_validate(&c, 2, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "4 KiB"));
	assert_true(config_host_memory() > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_serial),
	    cmocka_unit_test(test_limits),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
