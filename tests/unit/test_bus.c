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
	uint64_t last_offset, last_addr, last_base;
	unsigned last_len;
	uint8_t last_write;
	int destroyed;
	int resets;
	int started, late_started, stopped;
	int fail_start; /* start returns this */
	int *order;	/* where start/stop record their turn */
	int *turn;
	int start_turn, stop_turn;
};

static void record(struct fake *f, const struct bus_access *a)
{
	f->last_offset = a->offset;
	f->last_addr = a->addr;
	f->last_base = a->base;
	f->last_len = a->len;
}

static void fake_read(void *dev, const struct bus_access *a, void *data)
{
	record(dev, a);
	memset(data, 0x5a, a->len);
}

static void fake_write(void *dev, const struct bus_access *a, const void *data)
{
	struct fake *f = dev;

	record(f, a);
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

static int fake_start(void *dev)
{
	struct fake *f = dev;

	f->started++;
	if (f->turn)
		f->start_turn = (*f->turn)++;
	return f->fail_start;
}

static int fake_late_start(void *dev)
{
	((struct fake *)dev)->late_started++;
	return 0;
}

static void fake_stop(void *dev)
{
	struct fake *f = dev;

	f->stopped++;
	if (f->turn)
		f->stop_turn = (*f->turn)++;
}

static const struct dev_ops fake_ops = {
    .name = "fake",
    .read = fake_read,
    .write = fake_write,
    .start = fake_start,
    .late_start = fake_late_start,
    .stop = fake_stop,
    .reset = fake_reset,
    .destroy = fake_destroy,
};

/* Adds `f` and maps one range; the device handle for more ranges. */
static struct bus_device *add(struct bus *b, struct fake *f, enum bus_space s, uint64_t base, uint64_t len)
{
	struct bus_device *d = bus_add(b, &fake_ops, f);

	assert_non_null(d);
	assert_int_equal(bus_map(b, d, s, base, len), 0);
	return d;
}

static void test_register_and_find(void **state)
{
	struct bus b;
	struct fake a = {0}, c = {0};
	struct bus_device *dc;

	(void)state;
	bus_init(&b);
	add(&b, &a, BUS_PIO, 0x3f8, 8);
	dc = add(&b, &c, BUS_PIO, 0x60, 1);
	assert_int_equal(bus_map(&b, dc, BUS_PIO, 0x64, 1), 0);
	/* sorted regardless of registration order */
	assert_int_equal(b.range[BUS_PIO][0].base, 0x60);
	assert_int_equal(b.range[BUS_PIO][2].base, 0x3f8);
	assert_ptr_equal(bus_find(&b, BUS_PIO, 0x3f8, 1)->device->dev, &a);
	assert_ptr_equal(bus_find(&b, BUS_PIO, 0x3ff, 1)->device->dev, &a);
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
	struct bus_device *d;

	(void)state;
	bus_init(&b);
	d = add(&b, &a, BUS_MMIO, 0x1000, 0x1000);
	assert_int_equal(bus_map(&b, d, BUS_MMIO, 0x1fff, 1), -EEXIST);
	assert_int_equal(bus_map(&b, d, BUS_MMIO, 0x0fff, 2), -EEXIST);
	assert_int_equal(bus_map(&b, d, BUS_MMIO, 0x0, 0x10000), -EEXIST);
	assert_int_equal(bus_map(&b, d, BUS_MMIO, 0x2000, 0), -EINVAL);
	assert_int_equal(bus_map(&b, d, BUS_MMIO, UINT64_MAX - 1, 4), -EINVAL);
	assert_int_equal(bus_map(&b, NULL, BUS_MMIO, 0x5000, 4), -EINVAL);
	/* adjacent is fine, and the last address of the space too */
	assert_int_equal(bus_map(&b, d, BUS_MMIO, 0x2000, 0x10), 0);
	assert_int_equal(bus_map(&b, d, BUS_MMIO, 0x0fff, 1), 0);
	assert_int_equal(bus_map(&b, d, BUS_MMIO, UINT64_MAX, 1), 0);
	assert_non_null(bus_find(&b, BUS_MMIO, UINT64_MAX, 1));
	assert_null(bus_find(&b, BUS_MMIO, UINT64_MAX, 2));
	assert_int_equal(b.nr[BUS_MMIO], 4);
	bus_destroy(&b);
	assert_int_equal(a.destroyed, 1);
}

/* Each access carries the absolute address, the range's base and the offset into it. */
static void test_dispatch(void **state)
{
	struct bus b;
	struct fake a = {0};
	struct bus_device *d;
	uint8_t v = 0x42;
	uint32_t r = 0;

	(void)state;
	bus_init(&b);
	d = add(&b, &a, BUS_PIO, 0x3f8, 8);
	assert_true(bus_write(&b, BUS_PIO, 0x3fb, &v, 1));
	assert_int_equal(a.last_offset, 3);
	assert_int_equal(a.last_addr, 0x3fb);
	assert_int_equal(a.last_base, 0x3f8);
	assert_int_equal(a.last_write, 0x42);
	assert_true(bus_read(&b, BUS_PIO, 0x3fc, &r, 4));
	assert_int_equal(a.last_offset, 4);
	assert_int_equal(a.last_len, 4);
	assert_int_equal(r, 0x5a5a5a5a);
	/* a device on two ranges is reset once */
	assert_int_equal(bus_map(&b, d, BUS_MMIO, 0x1000, 8), 0);
	assert_true(bus_read(&b, BUS_MMIO, 0x1004, &r, 4));
	assert_int_equal(a.last_addr, 0x1004);
	assert_int_equal(a.last_base, 0x1000);
	bus_reset(&b);
	assert_int_equal(a.resets, 1);
	bus_destroy(&b);
}

/* start in the order added, stop in reverse, once each, only for started devices; a failure names the device. */
static void test_lifecycle(void **state)
{
	struct bus b;
	int turn = 0;
	struct fake x = {.turn = &turn}, y = {.turn = &turn}, z = {.turn = &turn, .fail_start = -EMFILE};
	const char *failed = NULL;

	(void)state;
	bus_init(&b);
	add(&b, &x, BUS_PIO, 0x10, 1);
	add(&b, &y, BUS_PIO, 0x20, 1);
	assert_int_equal(bus_start(&b, &failed), 0);
	assert_int_equal(bus_late_start(&b, &failed), 0);
	assert_true(x.start_turn < y.start_turn);
	assert_int_equal(x.late_started + y.late_started, 2);
	bus_stop(&b);
	bus_stop(&b); /* idempotent */
	assert_int_equal(x.stopped + y.stopped, 2);
	assert_true(y.stop_turn < x.stop_turn);
	bus_destroy(&b); /* nothing left to stop */
	assert_int_equal(x.stopped + y.stopped, 2);

	bus_init(&b);
	x = (struct fake){0};
	add(&b, &x, BUS_PIO, 0x10, 1);
	add(&b, &z, BUS_PIO, 0x20, 1);
	assert_int_equal(bus_start(&b, &failed), -EMFILE);
	assert_string_equal(failed, "fake");
	bus_destroy(&b); /* stops what was started, the failed one included, then destroys all */
	assert_int_equal(x.stopped, 1);
	assert_int_equal(z.stopped, 1);
	assert_int_equal(x.destroyed + z.destroyed, 2);
}

/* Beyond BUS_MAX_DEVICES, bus_add refuses and still takes ownership: the device is destroyed at once. */
static void test_too_many_devices(void **state)
{
	static struct fake f[BUS_MAX_DEVICES + 1];
	struct bus b;

	(void)state;
	bus_init(&b);
	for (unsigned i = 0; i < BUS_MAX_DEVICES; i++)
		assert_non_null(bus_add(&b, &fake_ops, &f[i]));
	assert_null(bus_add(&b, &fake_ops, &f[BUS_MAX_DEVICES]));
	assert_int_equal(f[BUS_MAX_DEVICES].destroyed, 1);
	bus_destroy(&b);
	for (unsigned i = 0; i < BUS_MAX_DEVICES; i++)
		assert_int_equal(f[i].destroyed, 1);
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

/* Ports Linux probes on every boot are logged at debug level only; others warn. */
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
	    cmocka_unit_test(test_lifecycle),
	    cmocka_unit_test(test_too_many_devices),
	    cmocka_unit_test(test_unhandled),
	    cmocka_unit_test(test_linux_probe_ports_quiet),
	};

	log_set_level(LOG_ERROR); /* the unhandled-access warnings are expected here */
	return cmocka_run_group_tests_name("bus", tests, NULL, NULL);
}
