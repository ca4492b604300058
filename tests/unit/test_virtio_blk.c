/*
 * test_virtio_blk.c - virtio-blk: the request parser against chains a fake driver lays in real guest RAM
 * (docs/security.md cases 8 and 9, every one), and the device end to end on an image file behind the real
 * transport and event loop (no KVM): reads and writes, flush, discard and write-zeroes, the config space,
 * malformed chains, cache=none with unaligned buffers, an image truncated under it, reset during I/O, and
 * the images it refuses to open.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/bus.h"
#include "brisk/devices.h"
#include "brisk/devmgr.h"
#include "brisk/evloop.h"
#include "brisk/log.h"
#include "brisk/virtio.h"
#include "brisk/virtio_blk.h"
#include "brisk/vm.h"
#include "fake_vm.h"
#include "virtq_test.h"

#define HDR    0x50000ULL /* request headers, 32 bytes per head */
#define STATUS 0x60000ULL /* status bytes, one per head */
#define QSIZE  16

#define F(bit) (1ull << (bit))

/* ---- the parser ---------------------------------------------------------------------------------------- */

static const struct blk_limits lim_rw = {
    .capacity = 64,
    .features = F(VIRTIO_BLK_F_FLUSH) | F(VIRTIO_BLK_F_DISCARD) | F(VIRTIO_BLK_F_WRITE_ZEROES),
};

static struct blk_req req; /* large: not on the stack */

static void put_hdr(struct drv *d, uint64_t at, uint32_t type, uint64_t sector)
{
	uint8_t raw[16] = {0};

	memcpy(raw, &type, 4);
	memcpy(raw + 8, &sector, 8);
	assert_int_equal(gmem_write(&d->mem, at, raw, 16), 0);
}

/* Header (16 readable), `len` bytes of data (writable for IN, readable for OUT), status (1 writable): one chain. */
static enum blk_parse_result parse(struct drv *d, const struct blk_limits *l, uint32_t type, uint64_t sector,
				   uint32_t len)
{
	bool in = type != VIRTIO_BLK_T_OUT && type != VIRTIO_BLK_T_DISCARD && type != VIRTIO_BLK_T_WRITE_ZEROES;

	put_hdr(d, HDR, type, sector);
	set_desc(d, DESC, 0, HDR, 16, F_NEXT, 1);
	set_desc(d, DESC, 1, BUF, len, (uint16_t)(F_NEXT | (in ? F_WRITE : 0)), 2);
	set_desc(d, DESC, 2, STATUS, 1, F_WRITE, 0);
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	return blk_parse(l, &d->c, &req);
}

static void test_parse_read(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	assert_int_equal(parse(d, &lim_rw, VIRTIO_BLK_T_IN, 3, 1024), BLK_REQ_IO);
	assert_int_equal(req.type, VIRTIO_BLK_T_IN);
	assert_int_equal(req.sector, 3);
	assert_int_equal(req.len, 1024);
	assert_int_equal(req.nseg, 1);
	assert_ptr_equal(req.seg[0].ptr, gpa(d, BUF, 1024));
	assert_ptr_equal(req.status, gpa(d, STATUS, 1));
	assert_int_equal(req.used, 1025);
	assert_null(req.why);
	drv_fini(d);
}

/* 2.6.4: the device must not assume a framing. Header over two descriptors, data and status in one. */
static void test_parse_any_framing(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	put_hdr(d, HDR, VIRTIO_BLK_T_IN, 7);
	set_desc(d, DESC, 0, HDR, 5, F_NEXT, 1);
	set_desc(d, DESC, 1, HDR + 5, 11, F_NEXT, 2);
	set_desc(d, DESC, 2, BUF, 300, F_WRITE | F_NEXT, 3);
	set_desc(d, DESC, 3, BUF + 0x1000, 213, F_WRITE, 0); /* 212 bytes of data + the status */
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(blk_parse(&lim_rw, &d->c, &req), BLK_REQ_IO);
	assert_int_equal(req.sector, 7);
	assert_int_equal(req.len, 512);
	assert_int_equal(req.nseg, 2);
	assert_int_equal(req.seg[1].len, 212);
	assert_ptr_equal(req.status, gpa(d, BUF + 0x1000 + 212, 1));
	assert_int_equal(req.used, 513);
	/* an OUT whose header and data share one readable descriptor */
	put_hdr(d, BUF, VIRTIO_BLK_T_OUT, 9);
	set_desc(d, DESC, 0, BUF, 16 + 1024, F_NEXT, 1);
	set_desc(d, DESC, 1, STATUS, 1, F_WRITE, 0);
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(blk_parse(&lim_rw, &d->c, &req), BLK_REQ_IO);
	assert_int_equal(req.len, 1024);
	assert_ptr_equal(req.seg[0].ptr, gpa(d, BUF + 16, 1024));
	assert_int_equal(req.used, 1);
	drv_fini(d);
}

/* docs/security.md case 8: no status byte (nothing writable) -> completed with 0 bytes; a short header -> IOERR. */
static void test_parse_status_and_header(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	put_hdr(d, HDR, VIRTIO_BLK_T_FLUSH, 0);
	set_desc(d, DESC, 0, HDR, 16, 0, 0);
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(blk_parse(&lim_rw, &d->c, &req), BLK_REQ_BAD_CHAIN);
	assert_non_null(req.why);
	/* header of 12 bytes, then the status */
	set_desc(d, DESC, 0, HDR, 12, F_NEXT, 1);
	set_desc(d, DESC, 1, STATUS, 1, F_WRITE, 0);
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(blk_parse(&lim_rw, &d->c, &req), BLK_REQ_DONE);
	assert_int_equal(req.result, VIRTIO_BLK_S_IOERR);
	assert_non_null(req.why);
	assert_ptr_equal(req.status, gpa(d, STATUS, 1));
	/* no readable part at all: only a status byte */
	set_desc(d, DESC, 0, STATUS, 1, F_WRITE, 0);
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(blk_parse(&lim_rw, &d->c, &req), BLK_REQ_DONE);
	assert_int_equal(req.result, VIRTIO_BLK_S_IOERR);
	drv_fini(d);
}

static void expect_done(struct drv *d, const struct blk_limits *l, uint32_t type, uint64_t sector, uint32_t len,
			uint8_t status)
{
	assert_int_equal(parse(d, l, type, sector, len), BLK_REQ_DONE);
	assert_int_equal(req.result, status);
}

/* docs/security.md case 9: past the end (with 64-bit overflow of the byte offset), lengths not a multiple of 512. */
static void test_parse_ranges(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	expect_done(d, &lim_rw, VIRTIO_BLK_T_IN, 64, 512, VIRTIO_BLK_S_IOERR);	/* at capacity */
	expect_done(d, &lim_rw, VIRTIO_BLK_T_IN, 63, 1024, VIRTIO_BLK_S_IOERR); /* across the end */
	expect_done(d, &lim_rw, VIRTIO_BLK_T_OUT, 63, 1024, VIRTIO_BLK_S_IOERR);
	expect_done(d, &lim_rw, VIRTIO_BLK_T_IN, 1ull << 55, 512, VIRTIO_BLK_S_IOERR); /* * 512 wraps to 0 */
	expect_done(d, &lim_rw, VIRTIO_BLK_T_IN, UINT64_MAX, 512, VIRTIO_BLK_S_IOERR);
	expect_done(d, &lim_rw, VIRTIO_BLK_T_IN, UINT64_MAX - 1, 1024, VIRTIO_BLK_S_IOERR);
	assert_null(req.why); /* the driver's range mistake is not a malformed request */
	expect_done(d, &lim_rw, VIRTIO_BLK_T_IN, 0, 100, VIRTIO_BLK_S_IOERR);
	assert_non_null(req.why);
	expect_done(d, &lim_rw, VIRTIO_BLK_T_OUT, 0, 513, VIRTIO_BLK_S_IOERR);
	assert_int_equal(parse(d, &lim_rw, VIRTIO_BLK_T_IN, 63, 512), BLK_REQ_IO); /* the last sector */
	assert_int_equal(parse(d, &lim_rw, VIRTIO_BLK_T_IN, 64, 0), BLK_REQ_IO); /* no data at the end: nothing to do */
	assert_int_equal(req.len, 0);
	drv_fini(d);
}

/* Unknown and unnegotiated types -> UNSUPP; writes to a read-only disk -> IOERR; GET_ID's length. */
static void test_parse_types(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);
	struct blk_limits ro = {.capacity = 64, .ro = true, .features = F(VIRTIO_BLK_F_FLUSH)};
	struct blk_limits bare = {.capacity = 64};
	static const uint32_t unknown[] = {2, 3, 5, 10, 14, 0xff, 0x80000000u, UINT32_MAX};

	(void)state;
	for (unsigned i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
		expect_done(d, &lim_rw, unknown[i], 0, 512, VIRTIO_BLK_S_UNSUPP);
	expect_done(d, &ro, VIRTIO_BLK_T_OUT, 0, 512, VIRTIO_BLK_S_IOERR);
	assert_int_equal(parse(d, &ro, VIRTIO_BLK_T_IN, 0, 512), BLK_REQ_IO);
	assert_int_equal(parse(d, &ro, VIRTIO_BLK_T_FLUSH, 0, 0), BLK_REQ_IO); /* flushing a read-only disk is fine */
	expect_done(d, &bare, VIRTIO_BLK_T_FLUSH, 0, 0, VIRTIO_BLK_S_UNSUPP);
	expect_done(d, &bare, VIRTIO_BLK_T_DISCARD, 0, 16, VIRTIO_BLK_S_UNSUPP);
	expect_done(d, &bare, VIRTIO_BLK_T_WRITE_ZEROES, 0, 16, VIRTIO_BLK_S_UNSUPP);
	assert_int_equal(parse(d, &lim_rw, VIRTIO_BLK_T_GET_ID, 0, 20), BLK_REQ_IO);
	assert_int_equal(req.len, 20);
	assert_int_equal(parse(d, &lim_rw, VIRTIO_BLK_T_GET_ID, 0, 512), BLK_REQ_IO);
	assert_int_equal(req.len, 20);
	assert_int_equal(parse(d, &lim_rw, VIRTIO_BLK_T_GET_ID, 0, 7), BLK_REQ_IO);
	assert_int_equal(req.len, 7);
	drv_fini(d);
}

static void put_dwz(struct drv *d, uint64_t sector, uint32_t n, uint32_t flags)
{
	uint8_t raw[16];

	memcpy(raw, &sector, 8);
	memcpy(raw + 8, &n, 4);
	memcpy(raw + 12, &flags, 4);
	assert_int_equal(gmem_write(&d->mem, BUF, raw, 16), 0);
}

/* DISCARD and WRITE_ZEROES (5.2.6.2): one segment, known flags, no UNMAP on a discard, inside the disk. */
static void test_parse_discard(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);
	struct blk_limits ro = lim_rw;

	(void)state;
	put_dwz(d, 8, 16, 0);
	assert_int_equal(parse(d, &lim_rw, VIRTIO_BLK_T_DISCARD, 0, 16), BLK_REQ_IO);
	assert_int_equal(req.sector, 8);
	assert_int_equal(req.nr_sectors, 16);
	put_dwz(d, 8, 16, VIRTIO_BLK_DWZ_F_UNMAP);
	expect_done(d, &lim_rw, VIRTIO_BLK_T_DISCARD, 0, 16, VIRTIO_BLK_S_UNSUPP);
	assert_int_equal(parse(d, &lim_rw, VIRTIO_BLK_T_WRITE_ZEROES, 0, 16), BLK_REQ_IO);
	assert_int_equal(req.flags, VIRTIO_BLK_DWZ_F_UNMAP);
	put_dwz(d, 8, 16, 2);
	expect_done(d, &lim_rw, VIRTIO_BLK_T_WRITE_ZEROES, 0, 16, VIRTIO_BLK_S_UNSUPP);
	put_dwz(d, 60, 5, 0);
	expect_done(d, &lim_rw, VIRTIO_BLK_T_DISCARD, 0, 16, VIRTIO_BLK_S_IOERR);
	put_dwz(d, UINT64_MAX, 2, 0);
	expect_done(d, &lim_rw, VIRTIO_BLK_T_WRITE_ZEROES, 0, 16, VIRTIO_BLK_S_IOERR);
	put_dwz(d, 0, 8, 0);
	expect_done(d, &lim_rw, VIRTIO_BLK_T_DISCARD, 0, 32, VIRTIO_BLK_S_IOERR); /* two segments: max_seg is 1 */
	expect_done(d, &lim_rw, VIRTIO_BLK_T_DISCARD, 0, 8, VIRTIO_BLK_S_IOERR);
	assert_non_null(req.why);
	ro.ro = true;
	expect_done(d, &ro, VIRTIO_BLK_T_DISCARD, 0, 16, VIRTIO_BLK_S_IOERR);
	drv_fini(d);
}

/* The parser copies the header once: what it decided on is what it reports, whatever guest memory says later. */
static void test_parse_header_copied(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	assert_int_equal(parse(d, &lim_rw, VIRTIO_BLK_T_IN, 5, 512), BLK_REQ_IO);
	put_hdr(d, HDR, VIRTIO_BLK_T_OUT, 1ull << 60); /* the guest changes it after the check */
	assert_int_equal(req.type, VIRTIO_BLK_T_IN);
	assert_int_equal(req.sector, 5);
	drv_fini(d);
}

/* ---- the device, behind the real transport and event loop ------------------------------------------------------ */

struct fx {
	struct drv *d;
	struct bus bus;
	struct devmgr mgr;
	uint64_t base;
	char path[64];
	uint16_t used_seen;
};

static struct fx fx;

#define IMG_SECTORS 4096 /* 2 MiB */

static void make_image(const char *path, unsigned sectors)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	uint8_t s[512];

	assert_true(fd >= 0);
	for (unsigned n = 0; n < sectors; n++) {
		memset(s, (int)(n & 0xff), sizeof(s));
		assert_int_equal(pwrite(fd, s, sizeof(s), (off_t)n * 512), 512);
	}
	close(fd);
}

static uint32_t rd(uint64_t off)
{
	uint32_t v = 0;

	bus_read(&fx.bus, BUS_MMIO, fx.base + off, &v, 4);
	return v;
}

static void wr(uint64_t off, uint32_t v)
{
	bus_write(&fx.bus, BUS_MMIO, fx.base + off, &v, 4);
}

/* 3.1.1 with `features` (VERSION_1 added), queue 0 at DESC/AVAIL/USED, DRIVER_OK. */
static void bring_up(uint64_t features)
{
	features |= F(VIRTIO_F_VERSION_1);
	wr(0x070, 0);
	configure(fx.d, QSIZE, 0);
	memset(gpa(fx.d, AVAIL, 0x1000), 0, 0x1000);
	fx.used_seen = 0;
	wr(0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	wr(0x024, 0);
	wr(0x020, (uint32_t)features);
	wr(0x024, 1);
	wr(0x020, (uint32_t)(features >> 32));
	wr(0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	wr(0x030, 0);
	wr(0x038, QSIZE);
	wr(0x080, (uint32_t)DESC);
	wr(0x084, 0);
	wr(0x090, (uint32_t)AVAIL);
	wr(0x094, 0);
	wr(0x0a0, (uint32_t)USED);
	wr(0x0a4, 0);
	wr(0x044, 1);
	wr(0x070,
	   VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
	assert_int_equal(rd(0x070) & VIRTIO_STATUS_DEVICE_NEEDS_RESET, 0);
}

static int open_disk(const struct vm_disk *disk, char *err, size_t errlen)
{
	const struct devctx ctx = {.mem = &fx.d->mem, .ops = &fake_ops};
	const struct devmgr_window *win = devmgr_alloc(&fx.mgr, "virtio-blk");

	fx.base = win->base;
	return virtio_blk_create(&ctx, &fx.bus, win, disk, err, errlen);
}

static int setup_disk(const char *opts_path, enum disk_cache cache, bool ro)
{
	struct vm_disk disk = {.path = (char *)opts_path, .cache = cache, .ro = ro}; /* borrowed: never released */
	char err[256];

	memset(&fx.bus, 0, sizeof(fx.bus));
	memset(&fx.mgr, 0, sizeof(fx.mgr));
	fx.d = drv_init(64 * MiB, QSIZE, 0);
	loop = evloop_create();
	assert_non_null(loop);
	bus_init(&fx.bus);
	if (open_disk(&disk, err, sizeof(err))) {
		fail_msg("virtio_blk_create: %s", err);
		return -1;
	}
	assert_int_equal(evloop_start(loop), 0);
	return 0;
}

static int setup(void **state)
{
	(void)state;
	snprintf(fx.path, sizeof(fx.path), "/tmp/test_virtio_blk.%d.img", (int)getpid());
	make_image(fx.path, IMG_SECTORS);
	return setup_disk(fx.path, DISK_CACHE_WRITEBACK, false);
}

static int setup_direct(void **state)
{
	(void)state;
	snprintf(fx.path, sizeof(fx.path), "/tmp/test_virtio_blk.%d.img", (int)getpid());
	make_image(fx.path, IMG_SECTORS);
	return setup_disk(fx.path, DISK_CACHE_NONE, false);
}

static int teardown(void **state)
{
	(void)state;
	evloop_stop(loop);
	bus_stop(&fx.bus);
	bus_destroy(&fx.bus);
	evloop_destroy(loop);
	drv_fini(fx.d);
	unlink(fx.path);
	return 0;
}

/* Waits (5 s at most) for used.idx to pass fx.used_seen; returns the new element's len, or -1. */
static int64_t wait_used(uint16_t *id)
{
	for (int i = 0; i < 5000; i++) {
		uint16_t idx = __atomic_load_n((uint16_t *)gpa(fx.d, USED + 2, 2), __ATOMIC_ACQUIRE);

		if (idx != fx.used_seen) {
			uint64_t e = USED + 4 + 8ULL * (fx.used_seen % QSIZE);

			fx.used_seen++;
			if (id)
				*id = (uint16_t)rd32(fx.d, e);
			return rd32(fx.d, e + 4);
		}
		usleep(1000);
	}
	return -1;
}

/* Chain at head h (3 descriptors from 3h): header, data at `buf` (writable unless OUT-like), status. Notifies. */
static void post(uint16_t h, uint32_t type, uint64_t sector, uint64_t buf, uint32_t len)
{
	bool in = type == VIRTIO_BLK_T_IN || type == VIRTIO_BLK_T_GET_ID;
	uint16_t d0 = (uint16_t)(3 * h);

	put_hdr(fx.d, HDR + 32ULL * h, type, sector);
	*(uint8_t *)gpa(fx.d, STATUS + h, 1) = 0xee;
	if (len) {
		set_desc(fx.d, DESC, d0, HDR + 32ULL * h, 16, F_NEXT, (uint16_t)(d0 + 1));
		set_desc(fx.d, DESC, (uint16_t)(d0 + 1), buf, len, (uint16_t)(F_NEXT | (in ? F_WRITE : 0)),
			 (uint16_t)(d0 + 2));
	} else {
		set_desc(fx.d, DESC, d0, HDR + 32ULL * h, 16, F_NEXT, (uint16_t)(d0 + 2));
	}
	set_desc(fx.d, DESC, (uint16_t)(d0 + 2), STATUS + h, 1, F_WRITE, 0);
	offer(fx.d, d0);
	wr(0x050, 0);
}

/* One request, waited for: returns the status byte (0xee: not completed) and *used. */
static uint8_t request(uint32_t type, uint64_t sector, uint64_t buf, uint32_t len, int64_t *used)
{
	int64_t u;

	post(0, type, sector, buf, len);
	u = wait_used(NULL);
	if (used)
		*used = u;
	return *(uint8_t *)gpa(fx.d, STATUS, 1);
}

static struct virtio_stats stats(void)
{
	struct virtio_stats st;

	virtio_stats(bus_find(&fx.bus, BUS_MMIO, fx.base, 4)->device->dev, &st);
	return st;
}

static void file_read(uint64_t off, void *buf, size_t len)
{
	int fd = open(fx.path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
}

static void test_config_space(void **state)
{
	uint32_t v;
	uint8_t b;

	(void)state;
	assert_int_equal(rd(0x008), VIRTIO_ID_BLOCK);
	wr(0x014, 0);
	v = rd(0x010);
	assert_true(v & F(VIRTIO_BLK_F_FLUSH));
	assert_true(v & F(VIRTIO_BLK_F_SEG_MAX));
	assert_true(v & F(VIRTIO_BLK_F_SIZE_MAX));
	assert_true(v & F(VIRTIO_BLK_F_BLK_SIZE));
	assert_false(v & F(VIRTIO_BLK_F_RO));
	assert_int_equal(rd(0x100 + VIRTIO_BLK_CFG_CAPACITY), IMG_SECTORS);
	assert_int_equal(rd(0x100 + VIRTIO_BLK_CFG_CAPACITY + 4), 0);
	assert_int_equal(rd(0x100 + VIRTIO_BLK_CFG_SEG_MAX), BLK_SEG_MAX);
	assert_int_equal(rd(0x100 + VIRTIO_BLK_CFG_SIZE_MAX), BLK_SIZE_MAX);
	assert_int_equal(rd(0x100 + VIRTIO_BLK_CFG_BLK_SIZE), 512);
	if (v & F(VIRTIO_BLK_F_DISCARD)) { /* the file system punches holes (ext4, xfs, tmpfs do) */
		assert_int_equal(rd(0x100 + VIRTIO_BLK_CFG_MAX_DISCARD_SEG), 1);
		assert_int_equal(rd(0x100 + VIRTIO_BLK_CFG_MAX_WZ_SECTORS), BLK_DWZ_MAX);
		bus_read(&fx.bus, BUS_MMIO, fx.base + 0x100 + VIRTIO_BLK_CFG_WZ_MAY_UNMAP, &b, 1);
		assert_int_equal(b, 1);
	}
	assert_int_equal(rd(0x034), BLK_QUEUE_SIZE); /* QueueNumMax */
}

static void test_read_write_flush(void **state)
{
	uint8_t back[1024], want[1024];
	int64_t used;

	(void)state;
	bring_up(F(VIRTIO_BLK_F_FLUSH));
	assert_int_equal(request(VIRTIO_BLK_T_IN, 5, BUF, 1024, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 1025);
	memset(want, 5, 512);
	memset(want + 512, 6, 512);
	assert_memory_equal(gpa(fx.d, BUF, 1024), want, 1024);
	/* the second read of the same sectors comes from the page cache, on the loop (counted in the stop log) */
	assert_int_equal(request(VIRTIO_BLK_T_IN, 5, BUF, 1024, NULL), VIRTIO_BLK_S_OK);
	for (unsigned i = 0; i < sizeof(want); i++)
		want[i] = (uint8_t)(i * 7 + 3);
	memcpy(gpa(fx.d, BUF + 0x10000, 1024), want, 1024);
	assert_int_equal(request(VIRTIO_BLK_T_OUT, 100, BUF + 0x10000, 1024, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 1);
	file_read(100 * 512, back, sizeof(back));
	assert_memory_equal(back, want, sizeof(back));
	assert_int_equal(request(VIRTIO_BLK_T_FLUSH, 0, 0, 0, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(request(VIRTIO_BLK_T_IN, IMG_SECTORS, BUF, 512, NULL), VIRTIO_BLK_S_IOERR);
	assert_int_equal(request(0x77, 0, BUF, 512, NULL), VIRTIO_BLK_S_UNSUPP);
	assert_int_equal(request(VIRTIO_BLK_T_GET_ID, 0, BUF, 20, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 21);
	assert_int_equal(stats().bad_chains, 0);
}

/* Without FLUSH negotiated the cache is write-through (5.2.5): FLUSH is UNSUPP, writes still work. */
static void test_no_flush_feature(void **state)
{
	(void)state;
	bring_up(0);
	assert_int_equal(request(VIRTIO_BLK_T_FLUSH, 0, 0, 0, NULL), VIRTIO_BLK_S_UNSUPP);
	assert_int_equal(request(VIRTIO_BLK_T_OUT, 1, BUF, 512, NULL), VIRTIO_BLK_S_OK);
	assert_int_equal(request(VIRTIO_BLK_T_DISCARD, 0, BUF, 16, NULL), VIRTIO_BLK_S_UNSUPP);
}

static void test_discard_and_write_zeroes(void **state)
{
	uint8_t back[4096], zero[4096] = {0};
	struct stat before, after;

	(void)state;
	wr(0x014, 0);
	if (!(rd(0x010) & F(VIRTIO_BLK_F_DISCARD)))
		skip(); /* this file system cannot punch holes: not offered */
	bring_up(F(VIRTIO_BLK_F_DISCARD) | F(VIRTIO_BLK_F_WRITE_ZEROES));
	assert_int_equal(stat(fx.path, &before), 0);
	put_dwz(fx.d, 8, 8, 0);
	assert_int_equal(request(VIRTIO_BLK_T_DISCARD, 0, BUF, 16, NULL), VIRTIO_BLK_S_OK);
	file_read(8 * 512, back, 4096);
	assert_memory_equal(back, zero, 4096);
	put_dwz(fx.d, 64, 8, 0); /* write zeroes without unmap: ZERO_RANGE */
	assert_int_equal(request(VIRTIO_BLK_T_WRITE_ZEROES, 0, BUF, 16, NULL), VIRTIO_BLK_S_OK);
	file_read(64 * 512, back, 4096);
	assert_memory_equal(back, zero, 4096);
	put_dwz(fx.d, 128, 8, VIRTIO_BLK_DWZ_F_UNMAP);
	assert_int_equal(request(VIRTIO_BLK_T_WRITE_ZEROES, 0, BUF, 16, NULL), VIRTIO_BLK_S_OK);
	file_read(128 * 512, back, 4096);
	assert_memory_equal(back, zero, 4096);
	file_read(16 * 512, back, 512); /* neighbours untouched */
	assert_int_equal(back[0], 16);
	assert_int_equal(stat(fx.path, &after), 0);
	assert_int_equal(after.st_size, before.st_size);
	put_dwz(fx.d, IMG_SECTORS - 1, 2, 0);
	assert_int_equal(request(VIRTIO_BLK_T_DISCARD, 0, BUF, 16, NULL), VIRTIO_BLK_S_IOERR);
}

/* docs/security.md case 8 on the device: a chain with no writable byte is returned with 0 bytes and counted. */
static void test_malformed_chains(void **state)
{
	uint16_t id;

	(void)state;
	bring_up(F(VIRTIO_BLK_F_FLUSH));
	put_hdr(fx.d, HDR, VIRTIO_BLK_T_IN, 0);
	set_desc(fx.d, DESC, 0, HDR, 16, F_NEXT, 1);
	set_desc(fx.d, DESC, 1, BUF, 512, 0, 0); /* the "status" is readable */
	offer(fx.d, 0);
	wr(0x050, 0);
	assert_int_equal(wait_used(&id), 0);
	assert_int_equal(id, 0);
	assert_int_equal(stats().bad_chains, 1);
	/* a readable descriptor after a writable one: the virtqueue refuses it, the device completes it with 0 */
	set_desc(fx.d, DESC, 0, HDR, 16, F_NEXT, 1);
	set_desc(fx.d, DESC, 1, BUF, 512, F_WRITE | F_NEXT, 2);
	set_desc(fx.d, DESC, 2, STATUS, 1, 0, 0);
	offer(fx.d, 0);
	wr(0x050, 0);
	assert_int_equal(wait_used(&id), 0);
	assert_int_equal(stats().bad_chains, 2);
	/* a data length that is not whole sectors: IOERR, counted; the device goes on */
	assert_int_equal(request(VIRTIO_BLK_T_IN, 0, BUF, 100, NULL), VIRTIO_BLK_S_IOERR);
	assert_int_equal(stats().bad_chains, 3);
	assert_int_equal(request(VIRTIO_BLK_T_IN, 0, BUF, 512, NULL), VIRTIO_BLK_S_OK);
	assert_int_equal(rd(0x070) & VIRTIO_STATUS_DEVICE_NEEDS_RESET, 0);
}

/* Many requests in flight at once, completed in any order, every one exactly once. */
static void test_many_in_flight(void **state)
{
	unsigned seen = 0, mask = 0;

	(void)state;
	bring_up(F(VIRTIO_BLK_F_FLUSH));
	for (uint16_t h = 0; h < 5; h++)
		post(h, h % 2 ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN, 200 + 64ull * h, BUF + 0x20000ULL * h, 32768);
	for (; seen < 5; seen++) {
		uint16_t id;

		assert_true(wait_used(&id) >= 0);
		assert_int_equal(id % 3, 0);
		mask |= 1u << (id / 3);
	}
	assert_int_equal(mask, 0x1f);
	for (uint16_t h = 0; h < 5; h++)
		assert_int_equal(*(uint8_t *)gpa(fx.d, STATUS + h, 1), VIRTIO_BLK_S_OK);
}

/* The image shrinks under the device: reads past the new end and writes there get IOERR; no regrowth. */
static void test_truncated_image(void **state)
{
	struct stat st;

	(void)state;
	bring_up(F(VIRTIO_BLK_F_FLUSH));
	assert_int_equal(truncate(fx.path, 8 * 512), 0);
	assert_int_equal(request(VIRTIO_BLK_T_IN, 4, BUF, 512, NULL), VIRTIO_BLK_S_OK);
	assert_int_equal(request(VIRTIO_BLK_T_IN, 8, BUF, 512, NULL), VIRTIO_BLK_S_IOERR);
	assert_int_equal(request(VIRTIO_BLK_T_IN, 6, BUF, 2048, NULL), VIRTIO_BLK_S_IOERR); /* a short read */
	assert_int_equal(request(VIRTIO_BLK_T_OUT, 100, BUF, 512, NULL), VIRTIO_BLK_S_IOERR);
	assert_int_equal(stat(fx.path, &st), 0);
	assert_int_equal(st.st_size, 8 * 512);
}

/* Device reset while requests run: the reset waits for them; nothing completes into the forgotten queue. */
static void test_reset_during_io(void **state)
{
	uint16_t idx;

	(void)state;
	bring_up(F(VIRTIO_BLK_F_FLUSH));
	for (uint16_t h = 0; h < 5; h++)
		post(h, VIRTIO_BLK_T_OUT, 64ull * h, BUF + 0x20000ULL * h, 65536);
	wr(0x070, 0); /* returns once no request is running */
	assert_int_equal(rd(0x070), 0);
	idx = rd16(fx.d, USED + 2);
	usleep(50000);
	assert_int_equal(rd16(fx.d, USED + 2), idx);
	/* and the device serves the driver that comes next (a sector none of the writes above covers: whether a
	 * write in flight at the reset landed is up to timing) */
	bring_up(F(VIRTIO_BLK_F_FLUSH));
	assert_int_equal(request(VIRTIO_BLK_T_IN, 1001, BUF, 512, NULL), VIRTIO_BLK_S_OK);
	assert_int_equal(*(uint8_t *)gpa(fx.d, BUF, 1), 1001 & 0xff);
}

/* cache=none: aligned guest buffers go straight to O_DIRECT; unaligned ones through the bounce buffer. */
static void test_direct_io(void **state)
{
	uint8_t want[2048], back[2048];

	(void)state;
	bring_up(F(VIRTIO_BLK_F_FLUSH));
	for (unsigned i = 0; i < sizeof(want); i++)
		want[i] = (uint8_t)(i ^ 0x5a);
	memcpy(gpa(fx.d, BUF + 1, sizeof(want)), want, sizeof(want));
	assert_int_equal(request(VIRTIO_BLK_T_OUT, 10, BUF + 1, sizeof(want), NULL), VIRTIO_BLK_S_OK);
	file_read(10 * 512, back, sizeof(back));
	assert_memory_equal(back, want, sizeof(back));
	memset(gpa(fx.d, BUF + 0x10003, sizeof(want)), 0, sizeof(want));
	assert_int_equal(request(VIRTIO_BLK_T_IN, 10, BUF + 0x10003, sizeof(want), NULL), VIRTIO_BLK_S_OK);
	assert_memory_equal(gpa(fx.d, BUF + 0x10003, sizeof(want)), want, sizeof(want));
	assert_int_equal(request(VIRTIO_BLK_T_IN, 20, BUF + 0x20000, 4096, NULL), VIRTIO_BLK_S_OK);
	assert_int_equal(*(uint8_t *)gpa(fx.d, BUF + 0x20000 + 4095, 1), 27);
	assert_int_equal(request(VIRTIO_BLK_T_FLUSH, 0, 0, 0, NULL), VIRTIO_BLK_S_OK);
}

/* ---- images refused at creation (docs/security.md case 21)
 * ------------------------------------------------------------- */

static int refuse(const char *path, bool ro, char *err, size_t errlen)
{
	struct vm_disk disk = {.path = (char *)path, .ro = ro}; /* borrowed: never released */
	struct bus bus;
	struct devmgr mgr = {0};
	struct gmem mem;
	const struct devctx ctx = {.mem = &mem, .ops = &fake_ops};
	struct evloop *running = loop; /* a test's own device keeps its loop */
	int ret;

	assert_int_equal(gmem_init(&mem, 1 * MiB, 0), 0);
	loop = evloop_create();
	bus_init(&bus);
	ret = virtio_blk_create(&ctx, &bus, devmgr_alloc(&mgr, "virtio-blk"), &disk, err, errlen);
	bus_destroy(&bus);
	evloop_destroy(loop);
	loop = running;
	gmem_destroy(&mem);
	return ret;
}

static void test_refused_images(void **state)
{
	char path[64], err[256];
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/test_virtio_blk.%d.bad", (int)getpid());
	unlink(path);
	assert_int_equal(refuse(path, false, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no such file"));
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	close(fd);
	/* any size, as Firecracker: 0 bytes is a 0-sector disk, 1000 bytes one sector and an unreachable tail */
	assert_int_equal(refuse(path, false, err, sizeof(err)), 0);
	assert_int_equal(truncate(path, 1000), 0);
	assert_int_equal(refuse(path, false, err, sizeof(err)), 0);
	assert_int_equal(truncate(path, 4096), 0);
	assert_int_equal(chmod(path, 0444), 0);
	assert_int_equal(refuse(path, false, err, sizeof(err)), -EACCES);
	assert_non_null(strstr(err, "read-only"));
	assert_int_equal(refuse(path, true, err, sizeof(err)), 0);
	unlink(path);
	assert_int_equal(refuse("/tmp", false, err, sizeof(err)), -EISDIR);
	assert_int_equal(refuse("/dev/null", true, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "character device"));
	assert_int_equal(refuse("/proc/self/mem", true, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "on procfs, a kernel interface"));
}

/* The running disk holds its lock: a second open of the same image is refused, read-only too. */
static void test_locked(void **state)
{
	char err[256];

	(void)state;
	assert_int_equal(refuse(fx.path, false, err, sizeof(err)), -EAGAIN);
	assert_non_null(strstr(err, "locked by another process"));
	assert_int_equal(refuse(fx.path, true, err, sizeof(err)), -EAGAIN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_read),
	    cmocka_unit_test(test_parse_any_framing),
	    cmocka_unit_test(test_parse_status_and_header),
	    cmocka_unit_test(test_parse_ranges),
	    cmocka_unit_test(test_parse_types),
	    cmocka_unit_test(test_parse_discard),
	    cmocka_unit_test(test_parse_header_copied),
	    cmocka_unit_test_setup_teardown(test_config_space, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_write_flush, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_flush_feature, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_discard_and_write_zeroes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_malformed_chains, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_many_in_flight, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_truncated_image, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reset_during_io, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_direct_io, setup_direct, teardown),
	    cmocka_unit_test(test_refused_images),
	    cmocka_unit_test_setup_teardown(test_locked, setup, teardown),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
