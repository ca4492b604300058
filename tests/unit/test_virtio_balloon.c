/*
 * test_virtio_balloon.c - the memory balloon (src/virtio/balloon.c) behind the virtio-mmio transport, driven as a
 * guest driver; its PFN checks, config space, post-boot calls, --balloon parsing, and gmem_discard. No KVM.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brisk/bus.h"
#include "brisk/devmgr.h"
#include "brisk/evloop.h"
#include "brisk/fc_metrics.h"
#include "brisk/log.h"
#include "brisk/mem.h"
#include "brisk/virtio.h"
#include "brisk/virtio_balloon.h"
#include "brisk/vm.h"
#include "fake_vm.h"
#include "virtio_driver.h"

#define INFLATE 0
#define DEFLATE 1
#define STATSQ	2
#define PFNS	0x500000 /* the PFN arrays the "driver" posts */
#define PAGES	0x800000 /* pages the "driver" gives up: 8 MiB .. */

static struct fx {
	struct vdrv drv;
	void *dev;
} fx;

static int setup_cfg(const struct vm_balloon *cfg)
{
	struct devctx ctx = {.ops = &fake_ops};
	const struct devmgr_window *win;

	memset(&fx, 0, sizeof(fx));
	win = vdrv_open(&fx.drv, "virtio-balloon", &ctx);
	assert_int_equal(virtio_balloon_create(&ctx, &fx.drv.bus, win, cfg, &fx.dev), 0);
	assert_non_null(fx.dev);
	vdrv_start(&fx.drv);
	return 0;
}

static int setup(void **state)
{
	const struct vm_balloon cfg = {.enabled = true, .amount_mib = 4, .deflate_on_oom = true, .stats_interval_s = 1};

	(void)state;
	return setup_cfg(&cfg);
}

static int setup_plain(void **state)
{
	const struct vm_balloon cfg = {.enabled = true, .amount_mib = 0};

	(void)state;
	return setup_cfg(&cfg);
}

static int teardown(void **state)
{
	(void)state;
	vdrv_close(&fx.drv);
	return 0;
}

static struct balloon_info info(void)
{
	struct balloon_info i;

	assert_int_equal(virtio_balloon_info(fx.dev, &i), 0);
	return i;
}

/* Posts n PFNs (a buffer of `bytes`, 0: n * 4) on queue q and waits for its completion. */
static void post_pfns(unsigned q, const uint32_t *pfn, unsigned n, uint32_t bytes, uint16_t flags)
{
	uint64_t buf = PFNS + vdrv_next_head(&fx.drv, q) * 0x1000;

	memcpy(vdrv_gpa(&fx.drv, buf, n * 4), pfn, n * 4);
	vdrv_post(&fx.drv, q, buf, bytes ? bytes : n * 4, flags);
	assert_int_equal(vdrv_wait_used(&fx.drv, q, 2000, NULL), 0);
}

/* ---- pure helpers ---------------------------------------------------------------------------------------- */

static void test_compact(void **state)
{
	uint32_t pfn[] = {9, 3, 4, 4, 5, 100, 8, 0xffffffffu, 0xfffffffeu}, start[9], len[9];
	unsigned n = balloon_compact(pfn, 9, start, len);

	(void)state;
	assert_int_equal(n, 4);
	assert_int_equal(start[0], 3), assert_int_equal(len[0], 3); /* 3, 4 (twice), 5 */
	assert_int_equal(start[1], 8), assert_int_equal(len[1], 2);
	assert_int_equal(start[2], 100), assert_int_equal(len[2], 1);
	assert_int_equal(start[3], 0xfffffffeu), assert_int_equal(len[3], 2); /* no wrap past the top */
	assert_int_equal(balloon_compact(pfn, 0, start, len), 0);
}

static void test_parse_option(void **state)
{
	struct vm_config cfg = {0};
	char err[256];

	(void)state;
	assert_int_equal(balloon_parse_option("64", &cfg, err, sizeof(err)), 0);
	assert_true(cfg.balloon.enabled);
	assert_int_equal(cfg.balloon.amount_mib, 64);
	assert_false(cfg.balloon.deflate_on_oom);
	assert_int_equal(cfg.balloon.stats_interval_s, 0);
	assert_int_equal(balloon_parse_option("1G,deflate_on_oom,stats=5", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.balloon.amount_mib, 1024);
	assert_true(cfg.balloon.deflate_on_oom);
	assert_int_equal(cfg.balloon.stats_interval_s, 5);
	assert_int_equal(balloon_parse_option("0", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.balloon.amount_mib, 0);
	const char *bad[] = {"", "3K", "x", "1,stats=65536", "1,stats=", "1,foo", "16777216", NULL};
	for (unsigned i = 0; bad[i]; i++) {
		err[0] = 0;
		assert_int_equal(balloon_parse_option(bad[i], &cfg, err, sizeof(err)), -EINVAL);
		assert_true(err[0]);
	}
	assert_int_equal(cfg.balloon.amount_mib, 0); /* a refused option changes nothing */
}

/* gmem_discard: page-aligned ranges inside one region only; anonymous and file-backed RAM read back zero. */
static void test_discard(void **state)
{
	char path[] = "/tmp/brisk-balloon-XXXXXX";
	int fd = mkstemp(path);
	struct gmem m;
	uint8_t *p, page[4096];

	(void)state;
	assert_int_equal(gmem_init(&m, 4u << 20, 0), 0);
	p = gmem_ptr(&m, 0x100000, 4096);
	memset(p, 0xab, 8192);
	assert_int_equal(gmem_discard(&m, 0x100000, 4096), 0);
	assert_int_equal(p[0], 0);
	assert_int_equal(p[4096], 0xab);			     /* the next page is kept */
	assert_int_equal(gmem_discard(&m, 0x100800, 4096), -EINVAL); /* unaligned */
	assert_int_equal(gmem_discard(&m, 0x100000, 100), -EINVAL);  /* a part of a page */
	assert_int_equal(gmem_discard(&m, 4u << 20, 4096), -EINVAL); /* past RAM */
	assert_int_equal(gmem_discard(&m, (4u << 20) - 4096, 8192), -EINVAL);
	assert_int_equal(gmem_discard(&m, 0, 0), -EINVAL);
	assert_int_equal(p[4096], 0xab);
	gmem_destroy(&m);
	/* A restored VM's RAM: a private mapping of its memory file; the page must read zero, the file unchanged. */
	assert_true(fd >= 0);
	unlink(path);
	memset(page, 0x5a, sizeof(page));
	assert_int_equal(ftruncate(fd, 4u << 20), 0);
	assert_int_equal(pwrite(fd, page, sizeof(page), 0x200000), (ssize_t)sizeof(page));
	assert_int_equal(gmem_init_file(&m, fd, 4u << 20), 0);
	p = gmem_ptr(&m, 0x200000, 4096);
	assert_int_equal(p[0], 0x5a);
	p[1] = 1; /* the guest's private copy */
	assert_int_equal(gmem_discard(&m, 0x200000, 4096), 0);
	assert_int_equal(p[0], 0);
	assert_int_equal(p[1], 0);
	assert_int_equal(pread(fd, page, 1, 0x200000), 1);
	assert_int_equal(page[0], 0x5a);
	gmem_destroy(&m);
	close(fd);
}

/* ---- the device -------------------------------------------------------------------------------------------- */

static void test_identity_and_config(void **state)
{
	struct balloon_info i;
	uint32_t v;

	(void)state;
	assert_int_equal(vdrv_rd(&fx.drv, 0x008), VIRTIO_ID_BALLOON);
	vdrv_wr(&fx.drv, 0x014, 0);
	assert_int_equal(vdrv_rd(&fx.drv, 0x010) & 0xff, VIRTIO_BALLOON_F_STATS_VQ | VIRTIO_BALLOON_F_DEFLATE_ON_OOM);
	/* 5.5.4: num_pages, actual; byte and word reads agree */
	assert_int_equal(vdrv_rd(&fx.drv, 0x100), 4 * 256);
	assert_int_equal(vdrv_rd_n(&fx.drv, 0x101, 1), (4 * 256) >> 8);
	assert_int_equal(vdrv_rd(&fx.drv, 0x104), 0);
	/* the driver writes actual, a byte at a time too; a write to num_pages is ignored */
	vdrv_wr(&fx.drv, 0x104, 0x1234);
	v = 0x56;
	bus_write(&fx.drv.bus, BUS_MMIO, fx.drv.base + 0x105, &v, 1);
	assert_int_equal(vdrv_rd(&fx.drv, 0x104), 0x5634);
	vdrv_wr(&fx.drv, 0x100, 7);
	assert_int_equal(vdrv_rd(&fx.drv, 0x100), 1024);
	/* beyond the 8 bytes: nothing (the transport refuses) */
	assert_int_equal(vdrv_rd_n(&fx.drv, 0x108, 4), 0);
	i = info();
	assert_int_equal(i.num_pages, 1024);
	assert_int_equal(i.actual_pages, 0x5634);
	assert_true(i.deflate_on_oom);
	assert_int_equal(i.stats_interval_s, 1);
	assert_false(i.active);
}

static void test_post_boot_calls(void **state)
{
	uint32_t mib = 8, huge = 0x01000000;
	uint16_t s0 = 0, s1 = 1, s3 = 3;
	uint32_t before;

	(void)state;
	assert_int_equal(virtio_balloon_set_target(fx.dev, &mib), -ENOTCONN); /* DeviceNotActive */
	vdrv_bring_up(&fx.drv, (1ull << 1) | (1ull << 2), 3);
	assert_true(info().active);
	before = vdrv_rd(&fx.drv, 0x0fc);
	assert_int_equal(virtio_balloon_set_target(fx.dev, &mib), 0);
	assert_int_equal(vdrv_rd(&fx.drv, 0x100), 8 * 256);
	assert_int_not_equal(vdrv_rd(&fx.drv, 0x0fc), before);	       /* ConfigGeneration moved */
	assert_true(vdrv_rd(&fx.drv, 0x060) & VIRTIO_MMIO_INT_CONFIG); /* a config change interrupt */
	assert_int_equal(virtio_balloon_set_target(fx.dev, &huge), -ERANGE);
	assert_int_equal(vdrv_rd(&fx.drv, 0x100), 8 * 256);
	assert_int_equal(virtio_balloon_set_stats_interval(fx.dev, &s1), 0); /* the same: nothing to do */
	assert_int_equal(virtio_balloon_set_stats_interval(fx.dev, &s0), -EPERM);
	assert_int_equal(virtio_balloon_set_stats_interval(fx.dev, &s3), 0);
	assert_int_equal(info().stats_interval_s, 3);
	/* a reset: not active any more */
	vdrv_wr(&fx.drv, 0x070, 0);
	assert_false(info().active);
	assert_int_equal(virtio_balloon_set_target(fx.dev, &mib), -ENOTCONN);
}

static void test_stats_off_cannot_turn_on(void **state)
{
	uint16_t s = 5, z = 0;

	(void)state;
	vdrv_wr(&fx.drv, 0x014, 0);
	assert_int_equal(vdrv_rd(&fx.drv, 0x010) & 0xff, 0); /* neither STATS_VQ nor DEFLATE_ON_OOM */
	assert_int_equal(virtio_balloon_set_stats_interval(fx.dev, &s), -EPERM);
	assert_int_equal(virtio_balloon_set_stats_interval(fx.dev, &z), 0);
}

/* Valid PFNs are discarded (the page reads zero), PFNs outside RAM dropped and counted, the page next door kept. */
static void test_inflate_checks_pfns(void **state)
{
	uint8_t *pages = vdrv_gpa(&fx.drv, PAGES, 4 * 4096);
	uint32_t pfn[] = {PAGES / 4096, PAGES / 4096 + 1, VDRV_RAM / 4096, 0xd0000, 0xffffffffu, PAGES / 4096 + 1};
	struct balloon_info i;

	(void)state;
	vdrv_bring_up(&fx.drv, 0, 3);
	memset(pages, 0xcd, 4 * 4096);
	post_pfns(INFLATE, pfn, 6, 0, 0);
	assert_int_equal(pages[0], 0);
	assert_int_equal(pages[4096], 0);
	assert_int_equal(pages[2 * 4096], 0xcd);
	i = info();
	assert_int_equal(i.inflated, 3); /* the duplicate counts, it is discarded once */
	assert_int_equal(i.bad_pfns, 3);
	assert_int_equal(i.bad_discards, 0);
	/* deflate: counted the same way, nothing discarded */
	pages[3 * 4096] = 0xee;
	pfn[0] = PAGES / 4096 + 3;
	post_pfns(DEFLATE, pfn, 1, 0, 0);
	assert_int_equal(pages[3 * 4096], 0xee);
	assert_int_equal(info().deflated, 1);
	assert_false(vdrv_rd(&fx.drv, 0x070) & VIRTIO_STATUS_DEVICE_NEEDS_RESET);
}

/* Malformed PFN arrays (case 58) are completed empty and counted; no page is touched. */
static void test_inflate_malformed(void **state)
{
	static uint32_t pfn[BALLOON_MAX_PFNS_PER_BUF + 1];
	uint8_t *pages = vdrv_gpa(&fx.drv, PAGES, 4096);
	struct virtio_stats s;
	struct virtio_mmio *t = bus_find(&fx.drv.bus, BUS_MMIO, fx.drv.base, 4)->device->dev;

	(void)state;
	vdrv_bring_up(&fx.drv, 0, 3);
	for (unsigned k = 0; k <= BALLOON_MAX_PFNS_PER_BUF; k++)
		pfn[k] = PAGES / 4096;
	pages[0] = 0x77;
	post_pfns(INFLATE, pfn, BALLOON_MAX_PFNS_PER_BUF + 1, 0, 0); /* 257 PFNs */
	post_pfns(INFLATE, pfn, 1, 3, 0);			     /* 3 bytes */
	post_pfns(INFLATE, pfn, 1, 0, VIRTQ_DESC_F_WRITE);	     /* device-writable */
	assert_int_equal(pages[0], 0x77);
	virtio_stats(t, &s);
	assert_int_equal(s.bad_chains, 3);
	assert_int_equal(info().inflated, 0);
	post_pfns(INFLATE, pfn, BALLOON_MAX_PFNS_PER_BUF, 0, 0); /* exactly 256: accepted */
	assert_int_equal(pages[0], 0);
	assert_int_equal(info().inflated, BALLOON_MAX_PFNS_PER_BUF);
}

/* 5.5.6.3: the buffer is read and kept; the tick returns it; unknown tags are skipped; a second buffer frees the
 * first. */
static void test_stats_queue(void **state)
{
	uint8_t e[4][10];
	uint64_t buf = PFNS + 0x80000;
	uint16_t tag;
	uint64_t val;
	struct balloon_info i;
	uint32_t id;

	(void)state;
	vdrv_bring_up(&fx.drv, 1ull << 1, 3);
	for (unsigned k = 0; k < 4; k++) {
		tag = k == 2 ? 42 : (uint16_t)(k == 3 ? 9 : k + 4); /* 4 free, 5 total, 42 unknown, 9 htlb fail */
		val = 1000 + k;
		memcpy(e[k], &tag, 2);
		memcpy(e[k] + 2, &val, 8);
	}
	memcpy(vdrv_gpa(&fx.drv, buf, sizeof(e)), e, sizeof(e));
	vdrv_post(&fx.drv, STATSQ, buf, sizeof(e) + 5, 0);		  /* a trailing partial entry is not read */
	assert_int_equal(vdrv_wait_used(&fx.drv, STATSQ, 100, NULL), -1); /* kept */
	i = info();
	assert_int_equal(i.stats_present, (1u << 4) | (1u << 5) | (1u << 9));
	assert_int_equal(i.stat[4], 1000);
	assert_int_equal(i.stat[5], 1001);
	assert_int_equal(i.stat[9], 1003);
	/* the 1 s tick gives it back */
	assert_int_equal(vdrv_wait_used(&fx.drv, STATSQ, 3000, &id), 0);
	assert_int_equal(id, 0);
	/* two buffers: the first comes back at once */
	vdrv_post(&fx.drv, STATSQ, buf, 10, 0);
	vdrv_post(&fx.drv, STATSQ, buf, 10, 0);
	assert_int_equal(vdrv_wait_used(&fx.drv, STATSQ, 500, &id), 0);
	assert_int_equal(id, 1);
	/* a 4 MiB buffer: only BALLOON_MAX_STATS entries are read (the rest is never looked at); it frees head 2 */
	memset(vdrv_gpa(&fx.drv, 0x800000, 4u << 20), 0, 4u << 20);
	vdrv_post(&fx.drv, STATSQ, 0x800000, 4u << 20, 0);
	assert_int_equal(vdrv_wait_used(&fx.drv, STATSQ, 500, &id), 0);
	assert_int_equal(id, 2);
	assert_int_equal(info().stat[0], 0); /* tag 0 (swap_in) with value 0: read */
	assert_false(vdrv_rd(&fx.drv, 0x070) & VIRTIO_STATUS_DEVICE_NEEDS_RESET);
}

/*
 * Case 60: a flood of inflate buffers behind one notification is taken at most 32 per event-loop callback
 * (BALLOON_CHAINS_PER_ROUND), the rest on the next turns; every buffer completes. Queue 0 is set up here with 128
 * entries (virtio_driver.h's queues have 16).
 */
static void test_inflate_bounded_rounds(void **state)
{
	enum { N = 128 };
	const uint64_t desc = VDRV_RING(0), avail = desc + 0x1000, used = desc + 0x2000;
	const uint32_t ok = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK;
	struct vdrv_desc *dt;
	uint16_t *av, *us;
	uint64_t rounds0 = fcm_balloon[FCM_BALLOON_inflate_count];
	int i;

	(void)state;
	vdrv_wr(&fx.drv, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	vdrv_wr(&fx.drv, 0x024, 1);
	vdrv_wr(&fx.drv, 0x020, 1); /* VERSION_1 */
	vdrv_wr(&fx.drv, 0x070, ok);
	memset(vdrv_gpa(&fx.drv, desc, 0x3000), 0, 0x3000);
	vdrv_wr(&fx.drv, 0x030, 0);
	vdrv_wr(&fx.drv, 0x038, N);
	vdrv_wr(&fx.drv, 0x080, (uint32_t)desc);
	vdrv_wr(&fx.drv, 0x090, (uint32_t)avail);
	vdrv_wr(&fx.drv, 0x0a0, (uint32_t)used);
	vdrv_wr(&fx.drv, 0x044, 1);
	vdrv_wr(&fx.drv, 0x070, ok | VIRTIO_STATUS_DRIVER_OK);
	dt = vdrv_gpa(&fx.drv, desc, N * sizeof(*dt));
	av = vdrv_gpa(&fx.drv, avail, 4 + 2 * N);
	us = vdrv_gpa(&fx.drv, used, 4 + 8 * N);
	for (i = 0; i < N; i++) {
		uint32_t *pfn = vdrv_gpa(&fx.drv, PFNS + (uint64_t)i * 64, 64);

		for (unsigned k = 0; k < 16; k++)
			pfn[k] = PAGES / 4096 + (uint32_t)(i * 16 + k) % 1024;
		dt[i] = (struct vdrv_desc){.addr = PFNS + (uint64_t)i * 64, .len = 64};
		av[2 + i] = (uint16_t)i;
	}
	__atomic_store_n(&av[1], N, __ATOMIC_RELEASE);
	vdrv_wr(&fx.drv, 0x050, 0); /* one notification for all of them */
	for (i = 0; i < 5000 && __atomic_load_n(&us[1], __ATOMIC_ACQUIRE) != N; i++)
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	assert_int_equal(__atomic_load_n(&us[1], __ATOMIC_ACQUIRE), N);
	assert_int_equal(info().inflated, N * 16);
	/* 128 buffers, 32 a round: at least 4 rounds (the notification's and the eventfd's) */
	assert_true(fcm_balloon[FCM_BALLOON_inflate_count] - rounds0 >= N / 32);
}

/* 3.1.1 step 7: buffers made available before DRIVER_OK (Linux primes the statistics queue so) are served once the
 * driver sets it, although their notifications came while the device was not active. */
static void test_buffers_before_driver_ok(void **state)
{
	const uint32_t ok = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK;
	uint8_t e[10] = {5, 0}, *pages = vdrv_gpa(&fx.drv, PAGES, 4096);
	uint32_t pfn = PAGES / 4096;
	uint64_t val = 4242;

	(void)state;
	memcpy(e + 2, &val, 8);
	vdrv_wr(&fx.drv, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	vdrv_wr(&fx.drv, 0x024, 0);
	vdrv_wr(&fx.drv, 0x020, 1u << 1); /* STATS_VQ */
	vdrv_wr(&fx.drv, 0x024, 1);
	vdrv_wr(&fx.drv, 0x020, 1); /* VERSION_1 */
	vdrv_wr(&fx.drv, 0x070, ok);
	for (unsigned q = 0; q < 3; q++)
		vdrv_setup_queue(&fx.drv, q, VDRV_RING(q));
	memcpy(vdrv_gpa(&fx.drv, PFNS, 10), e, 10);
	memcpy(vdrv_gpa(&fx.drv, PFNS + 0x1000, 4), &pfn, 4);
	pages[0] = 9;
	vdrv_post(&fx.drv, STATSQ, PFNS, 10, 0);
	vdrv_post(&fx.drv, INFLATE, PFNS + 0x1000, 4, 0);
	assert_int_equal(vdrv_wait_used(&fx.drv, INFLATE, 50, NULL), -1); /* not before DRIVER_OK */
	assert_int_equal(pages[0], 9);
	vdrv_wr(&fx.drv, 0x070, ok | VIRTIO_STATUS_DRIVER_OK);
	assert_int_equal(vdrv_wait_used(&fx.drv, INFLATE, 2000, NULL), 0);
	assert_int_equal(pages[0], 0);
	for (int i = 0; i < 2000 && !(info().stats_present & (1u << 5)); i++)
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	assert_int_equal(info().stats_present, 1u << 5);
	assert_int_equal(info().stat[5], 4242);
}

/*
 * The API's post-boot calls stop and restart the event loop (vm_device_call); many in a row (GET /balloon, GET
 * /balloon/statistics, PATCH /balloon) must leave it running: a buffer posted afterwards is served.
 */
static void test_loop_survives_calls_in_a_row(void **state)
{
	uint8_t *pages = vdrv_gpa(&fx.drv, PAGES, 4096);
	uint32_t pfn = PAGES / 4096;

	(void)state;
	vdrv_bring_up(&fx.drv, 0, 3);
	for (int i = 0; i < 2000; i++) {
		evloop_stop(loop);
		evloop_start(loop);
	}
	pages[0] = 3;
	post_pfns(INFLATE, &pfn, 1, 0, 0);
	assert_int_equal(pages[0], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_compact),
	    cmocka_unit_test(test_parse_option),
	    cmocka_unit_test(test_discard),
	    cmocka_unit_test_setup_teardown(test_identity_and_config, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_post_boot_calls, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stats_off_cannot_turn_on, setup_plain, teardown),
	    cmocka_unit_test_setup_teardown(test_inflate_checks_pfns, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_inflate_malformed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stats_queue, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_inflate_bounded_rounds, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_buffers_before_driver_ok, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_loop_survives_calls_in_a_row, setup, teardown),
	};

	log_set_level(LOG_ERROR); /* the malformed-request warnings are expected here */
	return cmocka_run_group_tests_name("virtio_balloon", tests, NULL, NULL);
}
