/* cmos.c - the MC146818 CMOS real-time clock at ports 0x70/0x71: the host's UTC time, read-only, and 128 bytes of RAM.
 */
/*
 * Modelled after the Motorola MC146818A datasheet ("Address Map",
 * "Registers A-D"); register and bit names as Linux
 * include/linux/mc146818rtc.h. Port 0x70 selects a register (bit 7 is the
 * PC's NMI-disable gate, not part of the index), port 0x71 reads or writes
 * it.
 *
 * Why the device exists: Linux's rtc_cmos probe (drivers/rtc/rtc-cmos.c
 * cmos_do_probe -> mc146818_does_rtc_work -> mc146818_avoid_UIP) polls
 * register A until UIP clears, for up to 1 s in 100 us steps. Without a
 * device 0x71 reads 0xff, UIP never clears, and the guest spends ~40,000
 * port exits and seconds of boot time before it gives up.
 *
 *   0x00 0x02 0x04 0x06-0x09 0x32  seconds, minutes, hours, day of week
 *       (1 = Sunday), day of month, month, year, century: the host's
 *       CLOCK_REALTIME as UTC at the moment of the read, BCD unless B.DM,
 *       12-hour (bit 7 = PM) unless B.24H. Writes are ignored: the guest
 *       cannot move the clock (as kvmtool's hw/rtc.c).
 *   0x01 0x03 0x05  alarms: plain RAM; no alarm ever fires.
 *   0x0a  A: UIP (bit 7) always reads 0, bits 6:0 as written (0x26).
 *   0x0b  B: as written (0x02: 24-hour, BCD). SET, PIE, AIE, UIE, SQWE
 *       are stored and have no effect: IRQ 8 is never raised.
 *   0x0c  C: 0 (no interrupt flag is ever set); writes ignored.
 *   0x0d  D: VRT (0x80, valid RAM and time); writes ignored.
 *   others (0x0e-0x7f)  RAM, 0 at start. The BIOS memory-size bytes
 *       (0x15-0x18, 0x30-0x31, 0x34-0x35) stay 0: Linux sizes memory from
 *       the e820 map.
 *
 * UIP is never set: an answer is computed when it is asked for, so there
 * is no update cycle to wait for. Linux reads the seconds before and after
 * the other fields (mc146818_avoid_UIP) and retries when a second boundary
 * fell in between, so it never keeps a torn time.
 *
 * No IRQ: rtc_cmos's probe only request_irq()s IRQ 8 (and turns
 * PIE/AIE/UIE off); it never waits for an interrupt, so the probe
 * completes and Linux registers rtc0. Alarms and the periodic/update
 * interrupts (RTC_AIE/UIE ioctls, /dev/rtc0 read) then never fire.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brisk/bus.h"
#include "brisk/devices.h"
#include "brisk/log.h"
#include "brisk/snap_fields.h"
#include "brisk/snapshot.h"

#define CMOS_PORT	0x70 /* index at +0, data at +1 */
#define CMOS_PORT_SIZE	2
#define CMOS_SIZE	128
#define CMOS_INDEX_MASK 0x7f /* bit 7 of an index write: NMI disable */

#define RTC_SECONDS	 0x00
#define RTC_MINUTES	 0x02
#define RTC_HOURS	 0x04
#define RTC_DAY_OF_WEEK	 0x06
#define RTC_DAY_OF_MONTH 0x07
#define RTC_MONTH	 0x08
#define RTC_YEAR	 0x09
#define RTC_REG_A	 0x0a
#define RTC_REG_B	 0x0b
#define RTC_REG_C	 0x0c
#define RTC_REG_D	 0x0d
#define RTC_CENTURY	 0x32 /* as QEMU, and the ACPI FADT's usual CENTURY */

#define RTC_UIP	      0x80 /* A: update in progress */
#define RTC_PIE	      0x40
#define RTC_AIE	      0x20
#define RTC_UIE	      0x10
#define RTC_SQWE      0x08
#define RTC_DM_BINARY 0x04 /* B: binary, else BCD */
#define RTC_24H	      0x02 /* B: 24-hour, else 12-hour with bit 7 = PM */
#define RTC_HOURS_PM  0x80
#define RTC_VRT	      0x80 /* D: valid RAM and time */

#define RTC_REG_A_INIT 0x26 /* 32.768 kHz time base, 1024 Hz periodic rate */
#define RTC_REG_B_INIT RTC_24H

struct cmos {
	pthread_mutex_t lock;
	uint8_t index;
	uint8_t ram[CMOS_SIZE]; /* also holds A, B and the alarms */
};

static int is_time_register(unsigned idx)
{
	return idx == RTC_SECONDS || idx == RTC_MINUTES || idx == RTC_HOURS ||
	       (idx >= RTC_DAY_OF_WEEK && idx <= RTC_YEAR) || idx == RTC_CENTURY;
}

/* v (0..99 after the modulo) in the format register B asks for. */
static uint8_t encode(uint8_t reg_b, unsigned v)
{
	v %= 100;
	if (reg_b & RTC_DM_BINARY)
		return (uint8_t)v;
	return (uint8_t)((v / 10) << 4 | v % 10);
}

/* Datasheet "Time, Calendar and Alarm Data Modes": 12-hour mode counts 12, 1..11 with bit 7 set from noon. */
static uint8_t encode_hours(uint8_t reg_b, unsigned h)
{
	if (reg_b & RTC_24H)
		return encode(reg_b, h);
	return (uint8_t)(encode(reg_b, h % 12 ? h % 12 : 12) | (h >= 12 ? RTC_HOURS_PM : 0));
}

/* A UTC calendar time, as the RTC counts it. */
struct rtc_time {
	unsigned sec, min, hour;
	unsigned wday;	    /* 0 = Sunday */
	unsigned mday, mon; /* 1-based */
	uint64_t year;
};

/*
 * Seconds since the epoch to the UTC calendar, by Howard Hinnant's
 * civil_from_days (proleptic Gregorian, eras of 400 years from 0000-03-01).
 * Arithmetic only: glibc's gmtime_r would read /etc/localtime on its first
 * call and takes the time-zone lock, neither of which belongs in a vCPU
 * thread.
 */
static void civil_from_epoch(uint64_t t, struct rtc_time *rt)
{
	uint64_t days = t / 86400, s = t % 86400;
	uint64_t z = days + 719468; /* days since 0000-03-01 */
	uint64_t era = z / 146097, doe = z % 146097;
	uint64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	uint64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	uint64_t mp = (5 * doy + 2) / 153; /* March = 0 */

	rt->sec = (unsigned)(s % 60);
	rt->min = (unsigned)(s / 60 % 60);
	rt->hour = (unsigned)(s / 3600);
	rt->wday = (unsigned)((days + 4) % 7); /* 1970-01-01 was a Thursday */
	rt->mday = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
	rt->mon = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
	rt->year = yoe + era * 400 + (rt->mon <= 2);
}

/* The host's current UTC time (CLOCK_REALTIME); a clock before 1970 reads as 1970-01-01. */
static void host_time(struct rtc_time *rt)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts) || ts.tv_sec < 0)
		ts.tv_sec = 0;
	civil_from_epoch((uint64_t)ts.tv_sec, rt);
}

static uint8_t read_time(uint8_t reg_b, unsigned idx)
{
	struct rtc_time rt;

	host_time(&rt);
	switch (idx) {
	case RTC_SECONDS:
		return encode(reg_b, rt.sec);
	case RTC_MINUTES:
		return encode(reg_b, rt.min);
	case RTC_HOURS:
		return encode_hours(reg_b, rt.hour);
	case RTC_DAY_OF_WEEK:
		return encode(reg_b, rt.wday + 1);
	case RTC_DAY_OF_MONTH:
		return encode(reg_b, rt.mday);
	case RTC_MONTH:
		return encode(reg_b, rt.mon);
	case RTC_YEAR:
		return encode(reg_b, (unsigned)(rt.year % 100));
	default: /* RTC_CENTURY */
		return encode(reg_b, (unsigned)(rt.year / 100 % 100));
	}
}

static uint8_t read_data(const struct cmos *c)
{
	unsigned idx = c->index;

	if (is_time_register(idx))
		return read_time(c->ram[RTC_REG_B], idx);
	switch (idx) {
	case RTC_REG_A:
		return c->ram[RTC_REG_A] & (uint8_t)~RTC_UIP;
	case RTC_REG_C:
		return 0;
	case RTC_REG_D:
		return RTC_VRT;
	default:
		return c->ram[idx];
	}
}

static void write_data(struct cmos *c, uint8_t v)
{
	unsigned idx = c->index;

	if (is_time_register(idx) || idx == RTC_REG_C || idx == RTC_REG_D)
		return;
	if (idx == RTC_REG_A)
		v &= (uint8_t)~RTC_UIP;
	c->ram[idx] = v;
}

/* The port (0 index, 1 data) that byte i of an access at `offset` reaches, or -1 past the two ports. */
static int port_of(uint64_t offset, unsigned i)
{
	return offset < CMOS_PORT_SIZE && i < CMOS_PORT_SIZE - offset ? (int)(offset + i) : -1;
}

/*
 * Byte i of an access goes to port CMOS_PORT + offset + i, as the ISA bus
 * splits a wide access: `outw` to 0x70 writes the index, then the data.
 * The index port reads 0xff (it is write-only; QEMU's mc146818rtc.c does
 * the same), as does any byte outside the two ports.
 */
static void cmos_read(void *dev, const struct bus_access *a, void *data)
{
	struct cmos *c = dev;
	uint8_t *out = data;

	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < a->len; i++)
		out[i] = port_of(a->offset, i) == 1 ? read_data(c) : 0xff;
	pthread_mutex_unlock(&c->lock);
}

static void cmos_write(void *dev, const struct bus_access *a, const void *data)
{
	struct cmos *c = dev;
	const uint8_t *in = data;

	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < a->len; i++) {
		int port = port_of(a->offset, i);

		if (port == 0)
			c->index = in[i] & CMOS_INDEX_MASK;
		else if (port == 1)
			write_data(c, in[i]);
	}
	pthread_mutex_unlock(&c->lock);
}

/* The datasheet's RESET pin: clears the interrupt enables and SQWE; time, A and RAM are untouched. */
static void cmos_reset(void *dev)
{
	struct cmos *c = dev;

	pthread_mutex_lock(&c->lock);
	c->ram[RTC_REG_B] &= (uint8_t) ~(RTC_PIE | RTC_AIE | RTC_UIE | RTC_SQWE);
	pthread_mutex_unlock(&c->lock);
}

static void cmos_destroy(void *dev)
{
	struct cmos *c = dev;

	pthread_mutex_destroy(&c->lock);
	free(c);
}

/*
 * Snapshot (device.h), version CMOS_SNAP_VERSION, one record over struct cmos: the index register (the
 * NMI-disable bit is not kept: see cmos_write) and the 128 bytes of RAM, status registers A and B
 * included; the clock itself is the host's and is not saved.
 */
#define CMOS_SNAP_VERSION 1u

static const struct snap_field cmos_fields[] = {
    SNAP_UINT_MASK(struct cmos, index, 1, CMOS_INDEX_MASK),
    SNAP_BYTES(struct cmos, ram),
};
static const struct snap_record cmos_record = SNAP_RECORD("cmos-rtc", cmos_fields);

/* Refuses what no guest write can produce: register A with UIP set. */
static const char *check_saved(const void *obj)
{
	const struct cmos *n = obj;

	return n->ram[RTC_REG_A] & RTC_UIP ? "register A with UIP set" : NULL;
}

static const struct snap_layout cmos_layout = {
    .version = CMOS_SNAP_VERSION, .record = &cmos_record, .check = check_saved};

static int cmos_save(void *dev, struct snap_writer *w)
{
	struct cmos *c = dev;
	int err;

	pthread_mutex_lock(&c->lock);
	err = snap_layout_save(w, &cmos_layout, c);
	pthread_mutex_unlock(&c->lock);
	return err;
}

static int cmos_restore(void *dev, struct snap_reader *r)
{
	struct cmos *c = dev;
	struct cmos n = {0};
	char why[160];
	int err = snap_layout_load(r, &cmos_layout, &n, why, sizeof(why));

	if (err) {
		log_error("cmos-rtc: snapshot refused: %s", why);
		return err;
	}
	pthread_mutex_lock(&c->lock);
	snap_record_copy(&cmos_record, c, &n);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static const struct dev_ops cmos_ops = {
    .name = "cmos-rtc",
    .read = cmos_read,
    .write = cmos_write,
    .reset = cmos_reset,
    .destroy = cmos_destroy,
    .save = cmos_save,
    .restore = cmos_restore,
};

int cmos_create(struct bus *bus)
{
	struct cmos *c = calloc(1, sizeof(*c));
	struct bus_device *d;

	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	c->ram[RTC_REG_A] = RTC_REG_A_INIT;
	c->ram[RTC_REG_B] = RTC_REG_B_INIT;
	d = bus_add(bus, &cmos_ops, c); /* the bus owns c from here on */
	return d ? bus_map(bus, d, BUS_PIO, CMOS_PORT, CMOS_PORT_SIZE) : -ENOSPC;
}
