/*
 * gen_dev_seeds.c - seed inputs for the device harnesses whose input is a recipe of accesses: fuzz_mmio,
 * fuzz_serial/fuzz_i8042/fuzz_cmos (fuzz_pio.c) and fuzz_rng/fuzz_vconsole (fuzz_vdevice.c); see each harness
 * for its format. Usage: gen_dev_seeds TARGET DIR.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "seed_save.h"

struct buf {
	uint8_t b[4096];
	size_t n;
};

static void put(struct buf *s, const void *p, size_t n)
{
	memcpy(s->b + s->n, p, n);
	s->n += n;
}

static void u8(struct buf *s, uint8_t v)
{
	put(s, &v, 1);
}

static void u16(struct buf *s, uint16_t v)
{
	put(s, &v, 2);
}

static void u32(struct buf *s, uint32_t v)
{
	put(s, &v, 4);
}

/* fuzz_mmio: a 32-bit register write / read. */
static void mw(struct buf *s, uint16_t off, uint32_t v)
{
	u8(s, 0x06);
	u16(s, off);
	u32(s, v);
}

static void mr(struct buf *s, uint16_t off)
{
	u8(s, 0x02);
	u16(s, off);
}

/* fuzz_mmio step 3: a one-descriptor chain on queue q. */
static void mchain(struct buf *s, unsigned q, uint64_t addr, uint32_t len, uint16_t flags)
{
	u8(s, 0x83);
	u8(s, (uint8_t)q);
	put(s, &addr, 8);
	u32(s, len);
	u16(s, flags);
	u16(s, 0);
}

static int mmio(const char *dir)
{
	struct buf s = {0};
	int bad = 0;

	/* the driver's way: negotiate, two queues, DRIVER_OK, chains, the loop, a snapshot, a reset */
	u8(&s, 0x80), u8(&s, 3), u8(&s, 0x81), u8(&s, 0x08), u8(&s, 0x81), u8(&s, 0x09), u8(&s, 0x82);
	mchain(&s, 0, 0x40000, 64, 2), mchain(&s, 1, 0x40100, 16, 0);
	u8(&s, 0x84), u8(&s, 0x86), u8(&s, 0x87), put(&s, "abcdefgh", 8), u8(&s, 0x85);
	bad |= seed_save(dir, "bringup", s.b, s.n);
	/* every register read, then hostile writes: QueueSel 0xffff, status out of order, queue after DRIVER_OK */
	s.n = 0;
	for (uint16_t off = 0; off < 0x100; off += 4)
		mr(&s, off);
	mw(&s, 0x030, 0xffff), mw(&s, 0x038, 16), mw(&s, 0x044, 1), mr(&s, 0x034);
	mw(&s, 0x070, 4), mw(&s, 0x070, 8), mw(&s, 0x070, 1), mw(&s, 0x070, 0x80);
	u8(&s, 0x80), u8(&s, 0), u8(&s, 0x81), u8(&s, 0x08), u8(&s, 0x82);
	mw(&s, 0x030, 0), mw(&s, 0x038, 32), mw(&s, 0x080, 0x1234), mw(&s, 0x044, 1), mw(&s, 0x050, 7);
	mw(&s, 0x064, 3), mw(&s, 0x0fc, 1), mw(&s, 0x100, 0x11223344);
	bad |= seed_save(dir, "hostile", s.b, s.n);
	/* regression: undefined status bits were kept, and the snapshot of that state was refused at restore */
	s.n = 0;
	u8(&s, 0x80), u8(&s, 0), mw(&s, 0x070, 0x8f8f8f4f), u8(&s, 0x86);
	bad |= seed_save(dir, "status-undefined-bits", s.b, s.n);
	/* regression: a queue made ready before FEATURES_OK kept the old EVENT_IDX/INDIRECT (refused at restore) */
	s.n = 0;
	u8(&s, 0x81), u8(&s, 0x09), u8(&s, 0x80), u8(&s, 3), u8(&s, 0x82), u8(&s, 0x86);
	bad |= seed_save(dir, "queue-before-features", s.b, s.n);
	/* odd widths and offsets */
	s.n = 0;
	for (uint8_t w = 0; w < 4; w++) {
		u8(&s, w), u16(&s, 0x070 + w);
		u8(&s, (uint8_t)(4 | w)), u16(&s, 0x104 + w), u32(&s, 0xffffffff), u32(&s, 0);
		u8(&s, w), u16(&s, 0x0ffe);
	}
	bad |= seed_save(dir, "widths", s.b, s.n);
	return bad;
}

/* fuzz_pio: a write of one byte at port base + i, a read. */
static void pw(struct buf *s, unsigned i, uint8_t v)
{
	u8(s, (uint8_t)(4 | i << 3));
	u8(s, v);
}

static void pr(struct buf *s, unsigned i)
{
	u8(s, (uint8_t)(i << 3));
}

static int pio(const char *target, const char *dir)
{
	struct buf s = {0};
	int bad = 0;

	if (strcmp(target, "serial") == 0) {
		/* Linux's 8250 probe and setup: LCR DLAB, divisor, 8N1, FIFO, IER, MCR loopback, output, input */
		pw(&s, 3, 0x80), pw(&s, 0, 1), pw(&s, 1, 0), pw(&s, 3, 3), pw(&s, 2, 0xc7), pw(&s, 1, 0x0f);
		pw(&s, 4, 0x1b), pw(&s, 0, 'x'), pr(&s, 6), pw(&s, 4, 0x0b);
		for (const char *p = "hello\n"; *p; p++)
			pw(&s, 0, (uint8_t)*p);
		u8(&s, 0xc1), u8(&s, 4), put(&s, "input", 5);
		for (unsigned i = 0; i < 8; i++)
			pr(&s, i);
		u8(&s, 0xc2), u8(&s, 0xc0);
		bad |= seed_save(dir, "uart", s.b, s.n);
	} else if (strcmp(target, "i8042") == 0) {
		/* read the command byte, write it with KBDINT, keyboard reset, output port, Ctrl+Alt+Del, reset */
		pw(&s, 4, 0x20), pr(&s, 0), pw(&s, 4, 0x60), pw(&s, 0, 0x47), pw(&s, 0, 0xff), pr(&s, 4), pr(&s, 0);
		pw(&s, 4, 0xd1), pw(&s, 0, 0x03), pw(&s, 4, 0xd0), pr(&s, 0), pw(&s, 4, 0xaa), pr(&s, 0);
		u8(&s, 0xc1), pr(&s, 0), pr(&s, 0), u8(&s, 0xc2), pw(&s, 4, 0xfe);
		bad |= seed_save(dir, "kbc", s.b, s.n);
	} else {
		/* every register read, register B binary/24h, NVRAM writes, NMI bit */
		for (uint8_t r = 0; r < 0x0e; r++)
			pw(&s, 0, r), pr(&s, 1);
		pw(&s, 0, 0x0b), pw(&s, 1, 0x06), pw(&s, 0, 0x00), pr(&s, 1), pw(&s, 0, 0x8f), pw(&s, 1, 0x55);
		pw(&s, 0, 0x7f), pw(&s, 1, 0xaa), pr(&s, 1), pw(&s, 0, 0x0a), pw(&s, 1, 0x80);
		u8(&s, 0xc2);
		bad |= seed_save(dir, "rtc", s.b, s.n);
	}
	return bad;
}

/* fuzz_vdevice: one queue of 16 with one descriptor at FUZZ_BUF (0x40000) + off. */
static void vq(struct buf *s, uint32_t off, uint32_t len, uint16_t flags)
{
	uint64_t addr = 0x40000 + off;

	u8(s, 4), u8(s, 1), u8(s, 1), u16(s, 1), u16(s, 0);
	put(s, &addr, 8), u32(s, len), u16(s, flags), u16(s, 0);
	u16(s, 0);
}

static int vdevice(const char *target, const char *dir)
{
	struct buf s = {0};
	int bad = 0;
	int con = strcmp(target, "vconsole") == 0;

	u8(&s, 0x13);
	if (con)
		u8(&s, 5), put(&s, "hello", 5);
	vq(&s, 0, 64, 2); /* writable: entropy or receive */
	if (con)
		vq(&s, 0x100, 16, 0); /* readable: transmit */
	memset(s.b + s.n, 'A', 0x200);
	s.n += 0x200;
	bad |= seed_save(dir, "chain", s.b, s.n);
	s.b[0] = 0x07; /* reset and serve again, notify before DRIVER_OK */
	bad |= seed_save(dir, "chain-reset", s.b, s.n);
	return bad;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: gen_dev_seeds TARGET DIR\n");
		return 2;
	}
	if (strcmp(argv[1], "mmio") == 0)
		return mmio(argv[2]);
	if (strcmp(argv[1], "rng") == 0 || strcmp(argv[1], "vconsole") == 0)
		return vdevice(argv[1], argv[2]);
	return pio(argv[1], argv[2]);
}
