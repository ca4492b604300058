/* test_i8042.c - the i8042's keyboard through the bus: Ctrl+Alt+Del, OBF, IRQ 1 pulses, the queue, snapshots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "brisk/abi.h"
#include "brisk/bus.h"
#include "brisk/device.h"
#include "brisk/devices.h"
#include "brisk/snapshot.h"
#include "snap_test.h"

/* ---- a fake VM behind the device's context (device.h): every KVM_IRQ_LINE call recorded ---------------- */

struct vm {
	struct bus bus;
};

#define MAX_LINE_CALLS 256

static struct vm test_vm;
static struct {
	unsigned irq;
	int level;
} line_calls[MAX_LINE_CALLS];
static unsigned nr_line_calls;
static unsigned exit_calls;

static void fake_irq_line(void *vm, unsigned irq, int level)
{
	(void)vm;
	if (nr_line_calls < MAX_LINE_CALLS) {
		line_calls[nr_line_calls].irq = irq;
		line_calls[nr_line_calls].level = level;
	}
	nr_line_calls++;
}

static void fake_request_exit(void *vm, int code, const char *reason)
{
	(void)vm, (void)code, (void)reason;
	exit_calls++;
}

static const struct devctx_ops fake_ops = {.irq_line = fake_irq_line, .request_exit = fake_request_exit};
static const struct devctx test_ctx = {.vm = &test_vm, .ops = &fake_ops};

/* ---- helpers -------------------------------------------------------------------------------------------- */

#define DATA 0x60
#define CMD  0x64

#define STR_OBF	    0x01
#define STR_AUXDATA 0x20
#define STR_IDLE    0x14 /* SYS | KEYLOCK */

#define CTR_KBDINT 0x01
#define CTR_SYS	   0x04
#define CTR_KBDDIS 0x10
#define CTR_XLATE  0x40
#define CTR_RESET  0x45 /* KBDINT | SYS | XLATE */

/* Ctrl, Alt, Delete pressed then released: set 1 (translated) and set 2 (raw). */
static const uint8_t set1[] = {0x1d, 0x38, 0xe0, 0x53, 0xe0, 0xd3, 0xb8, 0x9d};
static const uint8_t set2[] = {0x14, 0x11, 0xe0, 0x71, 0xe0, 0xf0, 0x71, 0xf0, 0x11, 0xf0, 0x14};

static void out8(uint16_t port, uint8_t v)
{
	assert_true(bus_write(&test_vm.bus, BUS_PIO, port, &v, 1));
}

static uint8_t in8(uint16_t port)
{
	uint8_t v = 0xee;

	assert_true(bus_read(&test_vm.bus, BUS_PIO, port, &v, 1));
	return v;
}

static void write_ctr(uint8_t v)
{
	out8(CMD, 0x60);
	out8(DATA, v);
}

/* IRQ 1 pulses (1 then 0) recorded since the start; fails on any other line or an unpaired level. */
static unsigned pulses(void)
{
	assert_true(nr_line_calls <= MAX_LINE_CALLS);
	assert_int_equal(nr_line_calls % 2, 0);
	for (unsigned i = 0; i < nr_line_calls; i++) {
		assert_int_equal(line_calls[i].irq, 1);
		assert_int_equal(line_calls[i].level, i % 2 == 0 ? 1 : 0);
	}
	return nr_line_calls / 2;
}

/*
 * Reads `n` bytes as Linux's i8042_interrupt does, one per interrupt: each byte is announced by OBF with
 * AUXDATA clear and (with KBDINT) by exactly one new pulse; compares them with `want`.
 */
static void read_seq(const uint8_t *want, size_t n, int with_irq)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t st = in8(CMD);

		assert_int_equal(st & STR_OBF, STR_OBF);
		assert_int_equal(st & STR_AUXDATA, 0);
		if (with_irq)
			assert_int_equal(pulses(), 0u + (unsigned)i + 1);
		assert_int_equal(in8(DATA), want[i]);
	}
}

static int setup(void **state)
{
	(void)state;
	memset(&test_vm, 0, sizeof(test_vm));
	nr_line_calls = 0;
	exit_calls = 0;
	bus_init(&test_vm.bus);
	return i8042_create(&test_ctx, &test_vm.bus);
}

static int teardown(void **state)
{
	(void)state;
	bus_destroy(&test_vm.bus);
	return 0;
}

/* ---- tests ---------------------------------------------------------------------------------------------- */

/* As brisk boots it: CTR 0x45 (XLATE, KBDINT), the buffer empty, no interrupt, reads of 0x60 give 0. */
static void test_idle(void **state)
{
	(void)state;
	assert_int_equal(in8(CMD), STR_IDLE);
	assert_int_equal(in8(DATA), 0);
	out8(CMD, 0x20);
	assert_int_equal(in8(DATA), CTR_RESET);
	assert_int_equal(pulses(), 0);
}

/* XLATE set: set 1 codes, one pulse per byte as the guest takes the previous one, then nothing. */
static void test_set1_with_irq(void **state)
{
	(void)state;
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), 0);
	read_seq(set1, sizeof(set1), 1);
	assert_int_equal(in8(CMD), STR_IDLE);
	assert_int_equal(in8(DATA), 0);
	assert_int_equal(pulses(), sizeof(set1));
	assert_int_equal(exit_calls, 0);
}

/* XLATE clear (the guest's command byte): raw set 2, with 0xf0 break prefixes. */
static void test_set2_with_irq(void **state)
{
	(void)state;
	write_ctr(CTR_KBDINT | CTR_SYS);
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), 0);
	read_seq(set2, sizeof(set2), 1);
	assert_int_equal(in8(CMD) & STR_OBF, 0);
	assert_int_equal(pulses(), sizeof(set2));
}

/* KBDINT clear: the bytes wait and can be polled, no pulse; setting KBDINT with one waiting pulses once. */
static void test_no_kbdint(void **state)
{
	(void)state;
	write_ctr(CTR_SYS | CTR_XLATE);
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), 0);
	assert_int_equal(in8(CMD) & (STR_OBF | STR_AUXDATA), STR_OBF);
	read_seq(set1, 3, 0);
	assert_int_equal(pulses(), 0);
	write_ctr(CTR_SYS | CTR_XLATE | CTR_KBDINT);
	assert_int_equal(pulses(), 1);
	write_ctr(CTR_SYS | CTR_XLATE | CTR_KBDINT); /* still the same byte: no new edge */
	assert_int_equal(pulses(), 1);
	assert_int_equal(in8(DATA), set1[3]);
	assert_int_equal(pulses(), 2);
}

/* Each read of 0x60 takes one byte; a 4-byte read spans past the one-byte port: unhandled, takes none. */
static void test_one_byte_per_read(void **state)
{
	uint32_t v = 0xeeeeeeee;

	(void)state;
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), 0);
	assert_false(bus_read(&test_vm.bus, BUS_PIO, DATA, &v, 4));
	assert_true(bus_read(&test_vm.bus, BUS_PIO, DATA, &v, 1));
	assert_int_equal(v & 0xff, set1[0]);
	assert_int_equal(in8(DATA), set1[1]);
	assert_int_equal(pulses(), 3);
}

/* The queue holds 16 bytes: all of a sequence or none; room comes back as the guest reads. */
static void test_bounded_queue(void **state)
{
	(void)state;
	write_ctr(CTR_SYS | CTR_XLATE); /* polled */
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), 0);
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), 0); /* 2 x 8 = 16 */
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), -EBUSY);
	read_seq(set1, sizeof(set1), 0);
	read_seq(set1, sizeof(set1), 0);
	assert_int_equal(in8(CMD) & STR_OBF, 0);

	write_ctr(CTR_SYS); /* set 2: 11 bytes, a second does not fit until 6 are read */
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), 0);
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), -EBUSY);
	read_seq(set2, 5, 0);
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), -EBUSY);
	read_seq(set2 + 5, 1, 0);
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), 0);
	read_seq(set2 + 6, sizeof(set2) - 6, 0);
	read_seq(set2, sizeof(set2), 0);
	assert_int_equal(in8(CMD) & STR_OBF, 0);
	assert_int_equal(pulses(), 0);
}

/* A controller reply goes ahead of waiting keys, which follow it, announced again. */
static void test_reply_first(void **state)
{
	(void)state;
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), 0);
	assert_int_equal(pulses(), 1);
	out8(CMD, 0x20);
	assert_int_equal(in8(CMD) & STR_OBF, STR_OBF);
	assert_int_equal(in8(DATA), CTR_RESET);
	assert_int_equal(pulses(), 2);
	assert_int_equal(in8(DATA), set1[0]);
	assert_int_equal(pulses(), 3);
}

/* A disabled keyboard port (CTR.KBDDIS, command 0xad) holds its bytes back; 0xae lets them through. */
static void test_port_disabled(void **state)
{
	(void)state;
	out8(CMD, 0xad);
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), 0);
	assert_int_equal(in8(CMD) & STR_OBF, 0);
	assert_int_equal(in8(DATA), 0);
	assert_int_equal(pulses(), 0);
	out8(CMD, 0xae);
	assert_int_equal(pulses(), 1);
	assert_int_equal(in8(DATA), set1[0]);
	assert_int_equal(pulses(), 2);
}

/* A machine reset empties the queue. */
static void test_reset(void **state)
{
	(void)state;
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), 0);
	bus_reset(&test_vm.bus);
	assert_int_equal(in8(CMD), STR_IDLE);
	assert_int_equal(in8(DATA), 0);
}

/* No i8042 on the bus: -ENODEV. */
static void test_no_device(void **state)
{
	struct bus b;

	(void)state;
	bus_init(&b);
	assert_int_equal(i8042_ctrl_alt_del(&b), -ENODEV);
	bus_destroy(&b);
}

/* ---- snapshots ------------------------------------------------------------------------------------------ */

/* Restores r onto a fresh i8042 in test_vm.bus (the old one destroyed). Returns bus_restore's result. */
static int restore_fresh(struct snap_reader *r)
{
	const char *failed = NULL;
	char err[256];
	int ret;

	bus_destroy(&test_vm.bus);
	bus_init(&test_vm.bus);
	assert_int_equal(i8042_create(&test_ctx, &test_vm.bus), 0);
	nr_line_calls = 0;
	ret = bus_restore(&test_vm.bus, r, &failed, err, sizeof(err));
	snap_reader_free(r);
	return ret;
}

/* Half a sequence read, the queue wrapped: the rest comes back in order, with its pulses, after a restore. */
static void test_snapshot_queue(void **state)
{
	struct snap_writer *w = snap_writer_new();
	const char *failed = NULL;

	(void)state;
	assert_non_null(w);
	write_ctr(CTR_KBDINT | CTR_SYS); /* set 2 */
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), 0);
	read_seq(set2, 9, 1); /* head at 9: the next sequence wraps */
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), 0);
	assert_int_equal(bus_save(&test_vm.bus, w, &failed), 0);
	assert_int_equal(restore_fresh(snap_test_reader(w)), 0);

	assert_int_equal(pulses(), 0); /* the pending edge is the irqchip's state, not re-sent */
	out8(CMD, 0x20);
	assert_int_equal(in8(DATA), CTR_KBDINT | CTR_SYS);
	assert_int_equal(in8(DATA), set2[9]);
	assert_int_equal(in8(DATA), set2[10]);
	read_seq(set2, sizeof(set2), 0);
	/* one edge per byte as it reaches the output buffer: set2[9] after the reply, set2[10], 11 more */
	assert_int_equal(pulses(), 2 + sizeof(set2));
	assert_int_equal(in8(CMD) & STR_OBF, 0);
}

/* Sections brisk never writes: the old 6-byte layout, a queue longer than 16. */
static void test_snapshot_refused(void **state)
{
	uint8_t v[7 + 16] = {0x45, 0x01};
	struct snap_writer *w;

	(void)state;
	w = snap_writer_new();
	assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, 0, "i8042"), 0);
	assert_int_equal(snap_put(w, v, 6), 0);
	assert_int_equal(snap_section_end(w), 0);
	assert_int_equal(restore_fresh(snap_test_reader(w)), -EINVAL);

	v[6] = 17;
	w = snap_writer_new();
	assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, 0, "i8042"), 0);
	assert_int_equal(snap_put(w, v, sizeof(v)), 0);
	assert_int_equal(snap_section_end(w), 0);
	assert_int_equal(restore_fresh(snap_test_reader(w)), -EINVAL);

	v[6] = 16;
	w = snap_writer_new();
	assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, 0, "i8042"), 0);
	assert_int_equal(snap_put(w, v, sizeof(v)), 0);
	assert_int_equal(snap_section_end(w), 0);
	assert_int_equal(restore_fresh(snap_test_reader(w)), 0);
	assert_int_equal(i8042_ctrl_alt_del(&test_vm.bus), -EBUSY);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_idle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_set1_with_irq, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_set2_with_irq, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_kbdint, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_one_byte_per_read, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bounded_queue, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reply_first, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_port_disabled, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reset, setup, teardown),
	    cmocka_unit_test(test_no_device),
	    cmocka_unit_test_setup_teardown(test_snapshot_queue, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_snapshot_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
