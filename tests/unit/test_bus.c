/* test_bus.c - the pio/mmio bus: registration, overlap refusal, lookup at range edges, unhandled accesses. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/bus.h"
#include "brisk/log.h"

struct fake {
	uint64_t last_offset;
	unsigned last_len;
	uint8_t last_write;
	int destroyed;
	int resets;
};

static void fake_read(void *dev, uint64_t offset, void *data, unsigned len)
{
	struct fake *f = dev;

	f->last_offset = offset;
	f->last_len = len;
	memset(data, 0x5a, len);
}

static void fake_write(void *dev, uint64_t offset, const void *data, unsigned len)
{
	struct fake *f = dev;

	f->last_offset = offset;
	f->last_len = len;
	f->last_write = *(const uint8_t *)data;
}

static void fake_destroy(void *dev)
{
	((struct fake *)dev)->destroyed++;
}

static void fake_reset(void *dev)
{
	((struct fake *)dev)->resets++;
}

static const struct dev_ops fake_ops = {
    .name = "fake",
    .read = fake_read,
    .write = fake_write,
    .reset = fake_reset,
    .destroy = fake_destroy,
};

static void test_register_and_find(void **state)
{
	struct bus b;
	struct fake a = {0}, c = {0};

	(void)state;
	bus_init(&b);
	assert_int_equal(bus_register(&b, BUS_PIO, 0x3f8, 8, &fake_ops, &a), 0);
	assert_int_equal(bus_register(&b, BUS_PIO, 0x60, 1, &fake_ops, &c), 0);
	assert_int_equal(bus_register(&b, BUS_PIO, 0x64, 1, &fake_ops, &c), 0);
	/* sorted regardless of registration order */
	assert_int_equal(b.range[BUS_PIO][0].base, 0x60);
	assert_int_equal(b.range[BUS_PIO][2].base, 0x3f8);
	assert_ptr_equal(bus_find(&b, BUS_PIO, 0x3f8, 1)->dev, &a);
	assert_ptr_equal(bus_find(&b, BUS_PIO, 0x3ff, 1)->dev, &a);
	assert_null(bus_find(&b, BUS_PIO, 0x400, 1));
	assert_null(bus_find(&b, BUS_PIO, 0x3f7, 1));
	/* an access straddling the end of a range is not the device's */
	assert_null(bus_find(&b, BUS_PIO, 0x3fe, 4));
	assert_non_null(bus_find(&b, BUS_PIO, 0x3fc, 4));
	/* spaces are separate */
	assert_null(bus_find(&b, BUS_MMIO, 0x3f8, 1));
	bus_destroy(&b);
	assert_int_equal(a.destroyed, 1);
	assert_int_equal(c.destroyed, 1); /* on two ranges, destroyed once */
}

static void test_overlap_and_bad_ranges(void **state)
{
	struct bus b;
	struct fake a = {0};

	(void)state;
	bus_init(&b);
	assert_int_equal(bus_register(&b, BUS_MMIO, 0x1000, 0x1000, &fake_ops, &a), 0);
	assert_int_equal(bus_register(&b, BUS_MMIO, 0x1fff, 1, &fake_ops, &a), -EEXIST);
	assert_int_equal(bus_register(&b, BUS_MMIO, 0x0fff, 2, &fake_ops, &a), -EEXIST);
	assert_int_equal(bus_register(&b, BUS_MMIO, 0x0, 0x10000, &fake_ops, &a), -EEXIST);
	assert_int_equal(bus_register(&b, BUS_MMIO, 0x2000, 0, &fake_ops, &a), -EINVAL);
	assert_int_equal(bus_register(&b, BUS_MMIO, UINT64_MAX - 1, 4, &fake_ops, &a), -EINVAL);
	/* adjacent is fine, and the last address of the space too */
	assert_int_equal(bus_register(&b, BUS_MMIO, 0x2000, 0x10, &fake_ops, &a), 0);
	assert_int_equal(bus_register(&b, BUS_MMIO, 0x0fff, 1, &fake_ops, &a), 0);
	assert_int_equal(bus_register(&b, BUS_MMIO, UINT64_MAX, 1, &fake_ops, &a), 0);
	assert_non_null(bus_find(&b, BUS_MMIO, UINT64_MAX, 1));
	assert_null(bus_find(&b, BUS_MMIO, UINT64_MAX, 2));
	assert_int_equal(b.nr[BUS_MMIO], 4);
	bus_destroy(&b);
}

static void test_dispatch(void **state)
{
	struct bus b;
	struct fake a = {0};
	uint8_t v = 0x42;
	uint32_t r = 0;

	(void)state;
	bus_init(&b);
	assert_int_equal(bus_register(&b, BUS_PIO, 0x3f8, 8, &fake_ops, &a), 0);
	assert_true(bus_write(&b, BUS_PIO, 0x3fb, &v, 1));
	assert_int_equal(a.last_offset, 3);
	assert_int_equal(a.last_write, 0x42);
	assert_true(bus_read(&b, BUS_PIO, 0x3fc, &r, 4));
	assert_int_equal(a.last_offset, 4);
	assert_int_equal(r, 0x5a5a5a5a);
	/* a device on two ranges is reset once */
	assert_int_equal(bus_register(&b, BUS_MMIO, 0x1000, 8, &fake_ops, &a), 0);
	bus_reset(&b);
	assert_int_equal(a.resets, 1);
	bus_destroy(&b);
}

static void test_unhandled(void **state)
{
	struct bus b;
	uint32_t r = 0;
	uint8_t v = 1;

	(void)state;
	bus_init(&b);
	assert_false(bus_read(&b, BUS_PIO, 0x200, &r, 4));
	assert_int_equal(r, 0xffffffff);
	assert_false(bus_write(&b, BUS_PIO, 0x200, &v, 1));
	assert_false(bus_write(&b, BUS_PIO, 0x200, &v, 1));
	assert_int_equal(b.unhandled[BUS_PIO], 3);
	assert_int_equal(b.nr_logged[BUS_PIO], 1); /* logged once */
	/* the log-once set is bounded */
	for (uint64_t a = 0; a < 1000; a++)
		bus_write(&b, BUS_MMIO, 0x10000 + a * 8, &v, 1);
	assert_int_equal(b.nr_logged[BUS_MMIO], BUS_UNHANDLED_LOG_MAX);
	assert_int_equal(b.unhandled[BUS_MMIO], 1000);
	bus_destroy(&b);
}

/* Runs one unhandled port access at log level `level` with stderr captured; returns what was logged. */
static void logged_for(uint16_t port, enum log_level level, char *out, size_t len)
{
	char path[] = "/tmp/brisk-test-bus-XXXXXX";
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	struct bus b;
	uint32_t r;
	ssize_t n;

	assert_true(fd >= 0 && saved >= 0);
	unlink(path);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	log_set_level(level);
	bus_init(&b);
	bus_read(&b, BUS_PIO, port, &r, 1);
	bus_destroy(&b);
	log_set_level(LOG_ERROR);
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	n = pread(fd, out, len - 1, 0);
	out[n > 0 ? n : 0] = 0;
	close(fd);
}

/* Ports Linux probes on every boot are logged at debug level only; others warn (issue 8). */
static void test_linux_probe_ports_quiet(void **state)
{
	static const uint16_t quiet[] = {0xcf8, 0xcfc, 0x87, 0x2e, 0x2f, 0x4e, 0x4f, 0x2f8, 0x3e8, 0x2e8, 0x80};
	char out[512];

	(void)state;
	for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
		logged_for(quiet[i], LOG_WARN, out, sizeof(out));
		assert_string_equal(out, "");
		logged_for(quiet[i], LOG_DEBUG, out, sizeof(out));
		assert_non_null(strstr(out, "brisk: debug: unhandled read from"));
		assert_non_null(strstr(out, "a probe of"));
	}
	logged_for(0x500, LOG_WARN, out, sizeof(out));
	assert_non_null(strstr(out, "brisk: warn: unhandled read from port 0x500"));
	logged_for(0x3f0, LOG_WARN, out, sizeof(out)); /* floppy, just below COM1: not a probe brisk expects */
	assert_non_null(strstr(out, "warn: unhandled read from port 0x3f0"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_register_and_find),
	    cmocka_unit_test(test_overlap_and_bad_ranges),
	    cmocka_unit_test(test_dispatch),
	    cmocka_unit_test(test_unhandled),
	    cmocka_unit_test(test_linux_probe_ports_quiet),
	};

	log_set_level(LOG_ERROR); /* the unhandled-access warnings are expected here */
	return cmocka_run_group_tests_name("bus", tests, NULL, NULL);
}
