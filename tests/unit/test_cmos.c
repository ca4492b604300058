/* test_cmos.c - the MC146818 CMOS RTC through the bus: RAM, registers A-D, the time in every format, hostile widths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "brisk/bus.h"
#include "brisk/device.h"
#include "brisk/devices.h"

/* ---- the bus the device sits on (the RTC takes no device context: it raises no IRQ and ends nothing) ---- */

struct vm {
	struct bus bus;
};

static struct vm test_vm;

/*
 * The host clock, replaced: with fake_time set, CLOCK_REALTIME reads it, so
 * every hour of the day and any date can be checked; otherwise the real
 * clock (through the system call, as this definition hides libc's).
 */
static int fake_time_on;
static time_t fake_time;

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	if (fake_time_on && clk == CLOCK_REALTIME) {
		ts->tv_sec = fake_time;
		ts->tv_nsec = 0;
		return 0;
	}
	return (int)syscall(SYS_clock_gettime, clk, ts);
}

/* ---- helpers ------------------------------------------------------------------ */

#define IDX  0x70
#define DATA 0x71

#define REG_A	0x0a
#define REG_B	0x0b
#define REG_C	0x0c
#define REG_D	0x0d
#define CENTURY 0x32

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

static uint8_t rd(uint8_t idx)
{
	out8(IDX, idx);
	return in8(DATA);
}

static void wr(uint8_t idx, uint8_t v)
{
	out8(IDX, idx);
	out8(DATA, v);
}

static int is_time_index(unsigned i)
{
	return i == 0 || i == 2 || i == 4 || (i >= 6 && i <= 9) || i == CENTURY;
}

static unsigned from_bcd(uint8_t v)
{
	assert_true((v & 0x0f) <= 9);
	assert_true((v >> 4) <= 9);
	return (unsigned)(v >> 4) * 10 + (v & 0x0f);
}

static unsigned decode(uint8_t reg_b, uint8_t v)
{
	return (reg_b & 0x04) ? v : from_bcd(v);
}

static unsigned decode_hours(uint8_t reg_b, uint8_t v)
{
	unsigned h;

	if (reg_b & 0x02)
		return decode(reg_b, v);
	h = decode(reg_b, v & 0x7f);
	assert_in_range(h, 1, 12);
	return h % 12 + ((v & 0x80) ? 12 : 0);
}

static time_t host_now(void)
{
	struct timespec ts;

	assert_int_equal(clock_gettime(CLOCK_REALTIME, &ts), 0);
	return ts.tv_sec;
}

/*
 * Reads the clock as Linux's mc146818_get_time does (seconds first and
 * again last; retry when a second boundary fell in between) and checks it
 * against the host's UTC time.
 */
static void check_time(uint8_t reg_b)
{
	for (int attempt = 0; attempt < 5; attempt++) {
		time_t before = host_now();
		uint8_t sec = rd(0x00);
		struct tm tm = {0}, want;
		unsigned century, wday;
		time_t got, after;

		tm.tm_min = (int)decode(reg_b, rd(0x02));
		tm.tm_hour = (int)decode_hours(reg_b, rd(0x04));
		wday = decode(reg_b, rd(0x06));
		tm.tm_mday = (int)decode(reg_b, rd(0x07));
		tm.tm_mon = (int)decode(reg_b, rd(0x08)) - 1;
		tm.tm_year = (int)decode(reg_b, rd(0x09));
		century = decode(reg_b, rd(CENTURY));
		assert_int_equal(rd(REG_A) & 0x80, 0); /* UIP */
		if (rd(0x00) != sec)
			continue;
		after = host_now();
		tm.tm_sec = (int)decode(reg_b, sec);
		tm.tm_year += (int)century * 100 - 1900;
		got = timegm(&tm);
		assert_true(got >= before - 1 && got <= after + 1);
		assert_non_null(gmtime_r(&got, &want));
		assert_int_equal(wday, (unsigned)want.tm_wday + 1); /* 1 = Sunday */
		return;
	}
	fail_msg("the seconds changed on every one of 5 attempts");
}

static const struct bus_range *cmos_range(void)
{
	const struct bus_range *r = bus_find(&test_vm.bus, BUS_PIO, IDX, 1);

	assert_non_null(r);
	assert_int_equal(r->base, IDX);
	assert_int_equal(r->len, 2);
	return r;
}

static int setup(void **state)
{
	(void)state;
	bus_init(&test_vm.bus);
	fake_time_on = 0;
	return cmos_create(&test_vm.bus);
}

static int teardown(void **state)
{
	(void)state;
	bus_destroy(&test_vm.bus);
	return 0;
}

/* ---- tests -------------------------------------------------------------------- */

static void test_initial_registers(void **state)
{
	(void)state;
	assert_int_equal(rd(REG_A), 0x26);
	assert_int_equal(rd(REG_B), 0x02);
	assert_int_equal(rd(REG_C), 0x00);
	assert_int_equal(rd(REG_D), 0x80);
	assert_int_equal(rd(0x0e), 0x00);
	assert_int_equal(rd(0x7f), 0x00);
	assert_int_equal(in8(IDX), 0xff); /* the index port is write-only */
}

static void test_ram_round_trip(void **state)
{
	(void)state;
	for (unsigned i = 0; i < 128; i++)
		if (!is_time_index(i) && (i < REG_A || i > REG_D))
			wr((uint8_t)i, (uint8_t)(i ^ 0x5a));
	for (unsigned i = 0; i < 128; i++)
		if (!is_time_index(i) && (i < REG_A || i > REG_D))
			assert_int_equal(rd((uint8_t)i), i ^ 0x5a);
	/* the alarms are RAM too */
	assert_int_equal(rd(0x01), 0x01 ^ 0x5a);
	assert_int_equal(rd(0x05), 0x05 ^ 0x5a);
}

static void test_nmi_bit_ignored(void **state)
{
	(void)state;
	wr(0x80 | 0x20, 0xa5);
	assert_int_equal(rd(0x20), 0xa5);
	assert_int_equal(rd(0x80 | 0x20), 0xa5);
	assert_int_equal(rd(0x80 | REG_D), 0x80);
	wr(0x7f, 0x11);
	assert_int_equal(rd(0xff), 0x11);
}

static void test_register_writes(void **state)
{
	(void)state;
	wr(REG_A, 0xff);
	assert_int_equal(rd(REG_A), 0x7f); /* UIP is read-only */
	wr(REG_A, 0x26);
	wr(REG_C, 0xff);
	assert_int_equal(rd(REG_C), 0x00);
	wr(REG_D, 0x00);
	assert_int_equal(rd(REG_D), 0x80);
	wr(REG_B, 0xf2); /* SET | PIE | AIE | UIE | 24H: stored, no IRQ (teardown checks) */
	assert_int_equal(rd(REG_B), 0xf2);
	for (int i = 0; i < 100; i++)
		assert_int_equal(rd(REG_C), 0x00);
}

static void test_uip_never_set(void **state)
{
	(void)state;
	for (int i = 0; i < 20000; i++)
		assert_int_equal(rd(REG_A) & 0x80, 0);
}

static void test_time_bcd_24h(void **state)
{
	(void)state;
	check_time(0x02);
}

static void test_time_binary_24h(void **state)
{
	(void)state;
	wr(REG_B, 0x06);
	check_time(0x06);
}

static void test_time_bcd_12h(void **state)
{
	(void)state;
	wr(REG_B, 0x00);
	check_time(0x00);
}

static void test_time_binary_12h(void **state)
{
	(void)state;
	wr(REG_B, 0x04);
	check_time(0x04);
}

/* Register B's DM bit changes the encoding of the same moment: the year and the century differ between the two. */
static void test_format_changes_encoding(void **state)
{
	uint8_t century_bcd, century_bin, year_bcd, year_bin;

	(void)state;
	century_bcd = rd(CENTURY);
	year_bcd = rd(0x09);
	wr(REG_B, 0x06);
	century_bin = rd(CENTURY);
	year_bin = rd(0x09);
	assert_int_equal(century_bcd, 0x20);
	assert_int_equal(century_bin, 20);
	assert_int_equal(from_bcd(year_bcd), year_bin);
}

/* One fixed moment in every format: the registers as the datasheet's Table 3 encodes them. */
struct moment {
	time_t t;
	uint8_t bcd24[8], bin24[8], bcd12_hours, bin12_hours; /* sec min hour wday mday mon year century */
};

static const struct moment moments[] = {
    /* 2024-02-29 23:59:58 UTC, a Thursday */
    {1709251198, {0x58, 0x59, 0x23, 0x05, 0x29, 0x02, 0x24, 0x20}, {58, 59, 23, 5, 29, 2, 24, 20}, 0x91, 0x8b},
    /* 2000-01-01 00:00:00 UTC, a Saturday: 12 AM */
    {946684800, {0x00, 0x00, 0x00, 0x07, 0x01, 0x01, 0x00, 0x20}, {0, 0, 0, 7, 1, 1, 0, 20}, 0x12, 12},
    /* 1999-12-31 12:34:56 UTC, a Friday: 12 PM */
    {946643696, {0x56, 0x34, 0x12, 0x06, 0x31, 0x12, 0x99, 0x19}, {56, 34, 12, 6, 31, 12, 99, 19}, 0x92, 0x8c},
    /* 2099-07-04 01:02:03 UTC, a Saturday */
    {4086810123, {0x03, 0x02, 0x01, 0x07, 0x04, 0x07, 0x99, 0x20}, {3, 2, 1, 7, 4, 7, 99, 20}, 0x01, 1},
};

static void read_all(uint8_t out[8])
{
	static const uint8_t regs[8] = {0x00, 0x02, 0x04, 0x06, 0x07, 0x08, 0x09, CENTURY};

	for (int i = 0; i < 8; i++)
		out[i] = rd(regs[i]);
}

static void test_fixed_moments(void **state)
{
	(void)state;
	fake_time_on = 1;
	for (size_t m = 0; m < sizeof(moments) / sizeof(moments[0]); m++) {
		uint8_t got[8];

		fake_time = moments[m].t;
		wr(REG_B, 0x02);
		read_all(got);
		assert_memory_equal(got, moments[m].bcd24, 8);
		wr(REG_B, 0x06);
		read_all(got);
		assert_memory_equal(got, moments[m].bin24, 8);
		wr(REG_B, 0x00);
		assert_int_equal(rd(0x04), moments[m].bcd12_hours);
		wr(REG_B, 0x04);
		assert_int_equal(rd(0x04), moments[m].bin12_hours);
	}
}

/* The device's calendar arithmetic against glibc's gmtime_r, binary mode, 1970 to 9999. */
static void test_calendar_matches_gmtime(void **state)
{
	(void)state;
	fake_time_on = 1;
	wr(REG_B, 0x06);
	srand(4321);
	for (int n = 0; n < 20000; n++) {
		time_t t = n < 4 ? (time_t[]){0, 951782400, 4107542399, 253402300799}[n]
				 : (time_t)(((uint64_t)rand() << 16 ^ (uint64_t)rand()) % 253402300800ULL);
		uint8_t got[8];
		struct tm tm;

		fake_time = t;
		read_all(got);
		assert_non_null(gmtime_r(&t, &tm));
		assert_int_equal(got[0], tm.tm_sec);
		assert_int_equal(got[1], tm.tm_min);
		assert_int_equal(got[2], tm.tm_hour);
		assert_int_equal(got[3], tm.tm_wday + 1);
		assert_int_equal(got[4], tm.tm_mday);
		assert_int_equal(got[5], tm.tm_mon + 1);
		assert_int_equal(got[6], (tm.tm_year + 1900) % 100);
		assert_int_equal(got[7], (tm.tm_year + 1900) / 100);
	}
	fake_time = -1; /* a host clock before 1970 reads as the epoch */
	read_all((uint8_t[8]){0});
	assert_int_equal(rd(0x09), 70);
	assert_int_equal(rd(CENTURY), 19);
}

/* Every hour of one day, both 12-hour encodings decode back to it. */
static void test_every_hour(void **state)
{
	(void)state;
	fake_time_on = 1;
	for (int h = 0; h < 24; h++) {
		fake_time = 946684800 + h * 3600;
		wr(REG_B, 0x02);
		assert_int_equal(decode_hours(0x02, rd(0x04)), h);
		wr(REG_B, 0x00);
		assert_int_equal(decode_hours(0x00, rd(0x04)), h);
		wr(REG_B, 0x04);
		assert_int_equal(decode_hours(0x04, rd(0x04)), h);
		assert_int_equal(rd(0x04) & 0x80, h >= 12 ? 0x80 : 0);
	}
}

static void test_time_writes_ignored(void **state)
{
	(void)state;
	for (unsigned i = 0; i < 128; i++)
		if (is_time_index(i))
			wr((uint8_t)i, 0x99);
	check_time(0x02);
}

static void test_reset_clears_interrupt_enables(void **state)
{
	(void)state;
	wr(REG_B, 0x7a); /* PIE | AIE | UIE | SQWE | 24H */
	wr(REG_A, 0x2f);
	wr(0x40, 0x33);
	bus_reset(&test_vm.bus);
	assert_int_equal(rd(REG_B), 0x02);
	assert_int_equal(rd(REG_A), 0x2f);
	assert_int_equal(rd(0x40), 0x33);
}

/* ISA splits a wide access into bytes: outw to 0x70 writes index then data; inw reads 0xff then data. */
static void test_wide_access(void **state)
{
	uint8_t w[2] = {0x21, 0x77}, r[2] = {0, 0};
	uint8_t q[4] = {0, 0, 0, 0};

	(void)state;
	assert_true(bus_write(&test_vm.bus, BUS_PIO, IDX, w, 2));
	assert_int_equal(rd(0x21), 0x77);
	out8(IDX, REG_D);
	assert_true(bus_read(&test_vm.bus, BUS_PIO, IDX, r, 2));
	assert_int_equal(r[0], 0xff);
	assert_int_equal(r[1], 0x80);
	/* 4 bytes at 0x70 run past the device: the bus leaves them unhandled */
	assert_false(bus_read(&test_vm.bus, BUS_PIO, IDX, q, 4));
	assert_false(bus_read(&test_vm.bus, BUS_PIO, DATA, r, 2));
}

/* Calls the device's op directly, as the bus would for an access at `offset` of `len` bytes. */
static void direct(const struct bus_range *r, int write, uint64_t offset, uint8_t *buf, unsigned len)
{
	struct bus_access a = {
	    .space = BUS_PIO, .addr = r->base + offset, .offset = offset, .base = r->base, .len = len};

	if (write)
		r->device->ops->write(r->device->dev, &a, buf);
	else
		r->device->ops->read(r->device->dev, &a, buf);
}

/* The ops called directly with any offset and width: in bounds, and only port 1 carries data. */
static void test_random_offsets_and_widths(void **state)
{
	const struct bus_range *r = cmos_range();
	static const uint64_t offsets[] = {0, 1, 2, 3, 7, 0x80, UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - 7};
	static const unsigned widths[] = {1, 2, 4, 8};

	(void)state;
	srand(1234);
	for (size_t o = 0; o < sizeof(offsets) / sizeof(offsets[0]); o++) {
		for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
			uint8_t buf[8];

			memset(buf, 0x5a, sizeof(buf));
			direct(r, 1, offsets[o], buf, widths[w]);
			memset(buf, 0, sizeof(buf));
			direct(r, 0, offsets[o], buf, widths[w]);
			for (unsigned i = 0; i < widths[w]; i++)
				if (offsets[o] + i != 1 || offsets[o] > 1)
					assert_int_equal(buf[i], 0xff);
		}
	}
	for (int n = 0; n < 100000; n++) {
		uint8_t buf[8];
		uint64_t off = (uint64_t)rand() % 4;
		unsigned len = widths[rand() % 4];

		for (unsigned i = 0; i < sizeof(buf); i++)
			buf[i] = (uint8_t)rand();
		if (rand() & 1)
			direct(r, 1, off, buf, len);
		else
			direct(r, 0, off, buf, len);
	}
	assert_int_equal(rd(REG_D), 0x80);
	assert_int_equal(rd(REG_C), 0x00);
	assert_int_equal(rd(REG_A) & 0x80, 0);
}

/*
 * Each thread owns one RAM byte and writes it with one 16-bit access (index
 * and data under the device's lock); reads race on the shared index, as
 * vCPUs without the guest's rtc_lock would.
 */
static void *hammer_thread(void *arg)
{
	uint8_t idx = *(const uint8_t *)arg;
	const struct bus_range *r = bus_find(&test_vm.bus, BUS_PIO, IDX, 1);

	for (int i = 0; i < 20000; i++) {
		uint8_t w[2] = {idx, (uint8_t)i}, out[2];

		direct(r, 1, 0, w, 2);
		direct(r, 0, 0, out, 2);
	}
	return NULL;
}

static void test_concurrent_vcpus(void **state)
{
	pthread_t t[4];
	uint8_t idx[4];

	(void)state;
	for (int i = 0; i < 4; i++) {
		idx[i] = (uint8_t)(0x40 + i);
		assert_int_equal(pthread_create(&t[i], NULL, hammer_thread, &idx[i]), 0);
	}
	/* Join every thread before reading back: rd() is two accesses that a running thread could split. */
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	/* the last write of each thread was index + data in one locked access */
	for (int i = 0; i < 4; i++)
		assert_int_equal(rd((uint8_t)(0x40 + i)), (uint8_t)(20000 - 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_initial_registers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ram_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nmi_bit_ignored, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_register_writes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_uip_never_set, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_time_bcd_24h, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_time_binary_24h, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_time_bcd_12h, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_time_binary_12h, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_format_changes_encoding, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fixed_moments, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_every_hour, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_calendar_matches_gmtime, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_time_writes_ignored, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reset_clears_interrupt_enables, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wide_access, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_random_offsets_and_widths, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_vcpus, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
