/* virtio-hostile-mmio.c - hostile guest: the virtio-mmio register file abused (docs/security.md case 13, and 7 at
 * scale). */
#include "virtio.h"

/*
 * Command-line words:
 *   case=NAME   the attack (the table at the end)
 *   count=N     accesses for the "widths", "fuzz" and "qready_flood" cases (default 4096)
 *   seed=N      the pseudo-random sequence (default 1)
 *   virtio_mmio.device=...  the device windows (the VMM adds them; the first entropy device is attacked)
 *
 * What the transport must do (virtio 1.2 section 4.2.2, brisk's src/virtio/mmio.c): registers are 32
 * bits wide, so an access of another width or at an unaligned offset reads 0 and writes nothing; the
 * configuration space of an entropy device is empty (reads 0, writes ignored); QueueSel past the
 * queues reads QueueNumMax/QueueReady 0 and its queue registers take no write; status bits are only
 * added (no clearing, DRIVER_OK only after FEATURES_OK, DEVICE_NEEDS_RESET is the device's);
 * FEATURES_OK sticks only for offered features including VERSION_1; DriverFeatures after
 * FEATURES_OK and queue registers of a live queue or after DRIVER_OK are ignored; a reset while
 * requests are in flight leaves a device that can be brought up again. Every case ends with a
 * normal request served (after a new bring-up where the case reset the device).
 * Output: "virtio-hostile-mmio: CHECK what: PASS|FAIL (values)", then PASS or FAIL.
 */
#define NAME	      "virtio-hostile-mmio"
#define WAIT_MS	      2000
#define WINDOW	      0x1000
#define STATUS_UP     (VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK)
#define STATUS_LIVE   (STATUS_UP | VIRTIO_STATUS_DRIVER_OK)
#define SHM_LEN_LOW   0x0b0
#define SHM_LEN_HIGH  0x0b4
#define RESET_ROUNDS  50
#define INFLIGHT      8
#define BURST_ROUNDS  32
#define F_NOT_OFFERED (1ULL << 0) /* virtio-rng offers no device feature bits (section 5.4.3) */
/* brisk's transport has room for 8 queues (VIRTIO_MMIO_MAX_QUEUES): slot 7 exists there, not in the device. */
#define BRISK_TRANSPORT_QUEUES 8

static struct virtio_dev rng;
static struct virtio_raw raw;
static const char *cmdline;
static uint64_t count = 4096, seed = 1;
static uint8_t buf[INFLIGHT + 1][64] __attribute__((aligned(64)));
static struct virtq_desc table[2] __attribute__((aligned(16)));
static uint8_t burst[4096] __attribute__((aligned(64)));

/* xorshift64: the same sequence for the same seed. */
static uint64_t rnd(void)
{
	seed ^= seed << 13;
	seed ^= seed >> 7;
	seed ^= seed << 17;
	return seed;
}

static int start(void)
{
	if (virtio_start(&rng, cmdline, VIRTIO_ID_RNG, VIRTIO_F_EVENT_IDX | VIRTIO_F_INDIRECT_DESC, 1))
		return -1;
	virtio_raw_from_queue(&raw, &rng, 0);
	return 0;
}

static void works(const char *what, unsigned int flags)
{
	struct virtio_buf b = {buf[INFLIGHT], 16};
	uint32_t len = 0;
	int ok;

	memset(buf[INFLIGHT], 0, 16);
	ok = virtio_transfer(&rng, 0, &b, 0, 1, flags, &len) == 0;
	/* 5.4.6.1: one or more bytes; fewer than asked when brisk's rate limit is drained (--rng=64 cases). */
	conf_check(ok && len >= 1 && len <= 16 && (len < 16 || virtio_looks_random(buf[INFLIGHT], 16)), what,
		   "%s %s, used length %u, status 0x%x", flags & VIRTIO_XFER_IRQ ? "interrupt mode" : "poll mode",
		   ok ? "completed" : "no completion", len, virtio_status(&rng));
}

static void works_both(void)
{
	works("works_after_poll", 0);
	works("works_after_irq", VIRTIO_XFER_IRQ);
}

static void restart_and_check(void)
{
	int ok = start() == 0;

	conf_check(ok, "restart", "status 0x%x after reset and bring-up", virtio_status(&rng));
	if (ok)
		works_both();
}

/* ---- accesses of any width ------------------------------------------------------------------------- */

static uint64_t read_w(unsigned int off, unsigned int width)
{
	uintptr_t a = rng.base + off;

	switch (width) {
	case 1:
		return mmio_read8(a);
	case 2:
		return mmio_read16(a);
	case 4:
		return mmio_read32(a);
	default:
		return mmio_read64(a);
	}
}

static void write_w(unsigned int off, unsigned int width, uint64_t v)
{
	uintptr_t a = rng.base + off;

	switch (width) {
	case 1:
		mmio_write8(a, (uint8_t)v);
		break;
	case 2:
		mmio_write16(a, (uint16_t)v);
		break;
	case 4:
		mmio_write32(a, (uint32_t)v);
		break;
	default:
		mmio_write64(a, v);
	}
}

/*
 * What a read must return where the value does not depend on state, or -1
 * where it does (features, queue registers, interrupt status, status,
 * generation): a wrong width or offset and the (empty) configuration space
 * read 0, the identification registers their values, reserved offsets 0.
 */
static int64_t expected_read(unsigned int off, unsigned int width)
{
	if (width != 4 || off % 4 || off >= VIRTIO_MMIO_CONFIG)
		return 0;
	switch (off) {
	case VIRTIO_MMIO_MAGIC_VALUE:
		return VIRTIO_MMIO_MAGIC;
	case VIRTIO_MMIO_VERSION:
		return 2;
	case VIRTIO_MMIO_DEVICE_ID:
		return VIRTIO_ID_RNG;
	case VIRTIO_MMIO_VENDOR_ID:
		return rng.vendor_id;
	case SHM_LEN_LOW:
	case SHM_LEN_HIGH:
		return 0xffffffff; /* section 4.2.2: no such shared memory region */
	case VIRTIO_MMIO_DEVICE_FEATURES:
	case VIRTIO_MMIO_QUEUE_NUM_MAX:
	case VIRTIO_MMIO_QUEUE_READY:
	case VIRTIO_MMIO_INTERRUPT_STATUS:
	case VIRTIO_MMIO_STATUS:
	case VIRTIO_MMIO_CONFIG_GENERATION:
		return -1;
	default:
		return 0;
	}
}

/* A random offset in the window for `width`, aligned or not, never crossing the window's end. */
static unsigned int random_offset(unsigned int width)
{
	unsigned int off = (unsigned int)(rnd() % (WINDOW - width + 1));

	return rnd() & 1 ? off & ~(width - 1) : off;
}

/* Random reads of every width anywhere in the window, then writes that must all be ignored. */
static void c_widths(void)
{
	static const unsigned int widths[] = {1, 2, 4, 8};
	unsigned int bad = 0, first_off = 0, first_w = 0;
	uint64_t first_v = 0;
	uint32_t s, ready;

	for (uint64_t i = 0; i < count; i++) {
		unsigned int w = widths[rnd() % 4], off = random_offset(w);
		uint64_t v = read_w(off, w);
		int64_t e = expected_read(off, w);

		if (e >= 0 && v != (uint64_t)e && bad++ == 0) {
			first_off = off;
			first_w = w;
			first_v = v;
		}
	}
	conf_check(bad == 0, "random_reads", "%llu reads, %u unexpected; first at 0x%x width %u read 0x%llx",
		   (unsigned long long)count, bad, first_off, first_w, (unsigned long long)first_v);

	/* Writes that a 32-bit-only register file ignores: a reset (status 0) or a queue change would show. */
	for (unsigned int w = 1; w <= 8; w *= 2) {
		if (w == 4)
			continue;
		write_w(VIRTIO_MMIO_STATUS, w, 0);
		write_w(VIRTIO_MMIO_QUEUE_READY, w, 0);
		write_w(VIRTIO_MMIO_QUEUE_SEL, w, 5);
		write_w(VIRTIO_MMIO_QUEUE_NOTIFY, w, 0);
		write_w(VIRTIO_MMIO_INTERRUPT_ACK, w, ~0ULL);
	}
	write_w(VIRTIO_MMIO_STATUS + 1, 4, 0);
	write_w(VIRTIO_MMIO_STATUS + 2, 2, 0);
	for (uint64_t i = 0; i < count; i++) {
		unsigned int w = widths[rnd() % 4], off = random_offset(w);

		if (w == 4 && off % 4 == 0 && off < VIRTIO_MMIO_CONFIG)
			off = VIRTIO_MMIO_CONFIG +
			      off; /* a legal register write: into the (read-only) config space instead */
		write_w(off, w, rnd());
	}
	s = virtio_status(&rng);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_SEL, 0);
	ready = virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY);
	conf_check(s == STATUS_LIVE && ready == 1, "ignored_writes", "status 0x%x (expected 0x%x), QueueReady %u", s,
		   STATUS_LIVE, ready);
	works_both();
}

/* Random 32-bit writes to random registers with random values (small ones half the time), then a reset. */
static void c_fuzz(void)
{
	uint32_t s;
	int ok;

	for (uint64_t i = 0; i < count; i++) {
		unsigned int off = (unsigned int)(rnd() % (VIRTIO_MMIO_CONFIG / 4)) * 4;
		uint32_t v = (uint32_t)(rnd() & 1 ? rnd() % 16 : rnd());

		if (rnd() % 4 == 0)
			(void)virtio_read32(&rng, off);
		else
			virtio_write32(&rng, off, v);
	}
	s = virtio_status(&rng);
	ok = virtio_reset(&rng) == 0;
	conf_check(ok, "reset_after_fuzz", "status 0x%x before, 0x%x after the reset", s, virtio_status(&rng));
	restart_and_check();
}

/* ---- QueueSel past the queues ---------------------------------------------------------------------- */

static void poke_queue(uint32_t sel)
{
	uint32_t max, ready;

	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_SEL, sel);
	max = virtio_read32(&rng, VIRTIO_MMIO_QUEUE_NUM_MAX);
	ready = virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_NUM, 16);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DESC_LOW, 0xd0000000);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DRIVER_LOW, 0xd0000000);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DEVICE_LOW, 0xd0000000);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_READY, 1);
	conf_check(max == 0 && ready == 0 && virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY) == 0, "queue_sel_past_queues",
		   "QueueSel 0x%x: QueueNumMax %u, QueueReady %u before and %u after writing 1", sel, max, ready,
		   virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY));
}

/* Before DRIVER_OK (queue 0 ready) and after it: nothing reaches queue 0, nothing breaks. */
static void c_queue_sel(void)
{
	int ok = virtio_negotiate(&rng, VIRTIO_F_EVENT_IDX) == 0 && virtio_queue_setup(&rng, 0, VIRTQ_MAX_SIZE) == 0;
	uint32_t s;

	conf_check(ok, "setup", "status 0x%x", virtio_status(&rng));
	poke_queue(0xffff);
	poke_queue(1);
	poke_queue(BRISK_TRANSPORT_QUEUES - 1);
	poke_queue(0xffffffff);
	s = virtio_status(&rng);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_SEL, 0);
	conf_check(virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY) == 1 && !(s & VIRTIO_STATUS_DEVICE_NEEDS_RESET),
		   "queue_0_unchanged", "QueueReady %u, status 0x%x", virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY), s);
	ok = virtio_driver_ok(&rng) == 0;
	conf_check(ok, "driver_ok", "status 0x%x", virtio_status(&rng));
	poke_queue(0xffff);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_SEL, 0);
	works_both();
}

/* ---- the status state machine ---------------------------------------------------------------------- */

static void status_check(const char *what, uint32_t write, uint32_t expect)
{
	uint32_t s;

	virtio_write32(&rng, VIRTIO_MMIO_STATUS, write);
	s = virtio_status(&rng);
	conf_check(s == expect, what, "wrote 0x%x, status 0x%x (expected 0x%x)", write, s, expect);
}

static void set_features(uint64_t f)
{
	virtio_write32(&rng, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	virtio_write32(&rng, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)f);
	virtio_write32(&rng, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	virtio_write32(&rng, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(f >> 32));
}

static void c_status_order(void)
{
	const uint32_t ad = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER;

	virtio_reset(&rng);
	status_check("driver_ok_first", VIRTIO_STATUS_DRIVER_OK, 0);
	status_check("needs_reset_is_the_devices", VIRTIO_STATUS_DEVICE_NEEDS_RESET, 0);
	status_check("acknowledge_driver", ad, ad);
	status_check("clear_driver", VIRTIO_STATUS_ACKNOWLEDGE, ad);
	status_check("driver_ok_before_features_ok", ad | VIRTIO_STATUS_DRIVER_OK, ad);
	set_features(VIRTIO_F_VERSION_1);
	status_check("features_ok", ad | VIRTIO_STATUS_FEATURES_OK, STATUS_UP);
	status_check("clear_features_ok", ad, STATUS_UP);
	status_check("clear_all_but_reset", VIRTIO_STATUS_FAILED, STATUS_UP);
	conf_check(virtio_queue_setup(&rng, 0, VIRTQ_MAX_SIZE) == 0, "queue_setup", "status 0x%x", virtio_status(&rng));
	status_check("driver_ok", STATUS_LIVE, STATUS_LIVE);
	virtio_raw_from_queue(&raw, &rng, 0);
	status_check("clear_driver_ok", STATUS_UP, STATUS_LIVE);
	status_check("needs_reset_from_driver", STATUS_LIVE | VIRTIO_STATUS_DEVICE_NEEDS_RESET, STATUS_LIVE);
	works("works_while_live", 0);
	/* FAILED is the driver's to set (section 2.1): then a reset, and the device comes back. */
	status_check("failed", STATUS_LIVE | VIRTIO_STATUS_FAILED, STATUS_LIVE | VIRTIO_STATUS_FAILED);
	restart_and_check();
}

/* FEATURES_OK for a set the device does not accept: it reads back clear (section 3.1.1 step 6). */
static void features_refused(const char *what, uint64_t f)
{
	const uint32_t ad = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER;

	virtio_reset(&rng);
	virtio_write32(&rng, VIRTIO_MMIO_STATUS, ad);
	set_features(f);
	status_check(what, ad | VIRTIO_STATUS_FEATURES_OK, ad);
	status_check("then_driver_ok", ad | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK, ad);
}

static void c_features(void)
{
	uint32_t hi, sel_far;
	uint32_t id = ~0u, len = ~0u;
	int ok;

	features_refused("features_ok_not_offered", VIRTIO_F_VERSION_1 | F_NOT_OFFERED);
	features_refused("features_ok_bit_63", VIRTIO_F_VERSION_1 | (1ULL << 63));
	features_refused("features_ok_without_version_1", VIRTIO_F_INDIRECT_DESC);
	features_refused("features_ok_none", 0);
	/* DeviceFeaturesSel past the two words reads 0; DriverFeaturesSel past them takes nothing. */
	virtio_write32(&rng, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0xffffffff);
	sel_far = virtio_read32(&rng, VIRTIO_MMIO_DEVICE_FEATURES);
	virtio_write32(&rng, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	hi = virtio_read32(&rng, VIRTIO_MMIO_DEVICE_FEATURES);
	conf_check(sel_far == 0 && (hi & 1), "device_features_sel", "word 0xffffffff reads 0x%x, word 1 0x%x", sel_far,
		   hi);
	virtio_reset(&rng);
	virtio_write32(&rng, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	set_features(VIRTIO_F_VERSION_1);
	virtio_write32(&rng, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 2);
	virtio_write32(&rng, VIRTIO_MMIO_DRIVER_FEATURES, 0xffffffff);
	status_check("driver_features_sel_2_ignored",
		     VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK, STATUS_UP);
	/* INDIRECT_DESC written after FEATURES_OK is not negotiated: an indirect chain is refused. */
	set_features(VIRTIO_F_VERSION_1 | VIRTIO_F_INDIRECT_DESC);
	rng.features = VIRTIO_F_VERSION_1;
	ok = virtio_queue_setup(&rng, 0, VIRTQ_MAX_SIZE) == 0 && virtio_driver_ok(&rng) == 0;
	conf_check(ok, "bringup_version_1_only", "status 0x%x", virtio_status(&rng));
	virtio_raw_from_queue(&raw, &rng, 0);
	table[0] = (struct virtq_desc){.addr = (uintptr_t)buf[0], .len = 16, .flags = VIRTQ_DESC_F_WRITE};
	raw.desc[0].addr = (uintptr_t)table;
	raw.desc[0].len = 16;
	raw.desc[0].flags = VIRTQ_DESC_F_INDIRECT;
	raw.desc[0].next = 0;
	virtio_raw_post(&raw, 0);
	ok = virtio_raw_poll(&raw, WAIT_MS, &id, &len) == 0;
	conf_check(ok && id == 0 && len == 0, "late_driver_features_ignored",
		   "%s: an indirect chain completed as id %u length %u (expected 0: INDIRECT_DESC not negotiated)",
		   ok ? "completed" : "no completion", id, len);
	works("works_version_1_only", 0);
	restart_and_check();
}

/* Queue registers written after DRIVER_OK change nothing (section 4.2.2.3). */
static void c_after_driver_ok(void)
{
	uint32_t ready;

	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_SEL, 0);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_NUM, 1);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DESC_LOW, 0xd0000000);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DESC_HIGH, 0xffffffff);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DRIVER_LOW, 0x1);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DEVICE_LOW, 0x2);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_READY, 0);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_READY, 1);
	virtio_write32(&rng, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	virtio_write32(&rng, VIRTIO_MMIO_DRIVER_FEATURES, 0);
	ready = virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY);
	conf_check(ready == 1 && virtio_status(&rng) == STATUS_LIVE, "queue_writes_after_driver_ok",
		   "QueueReady %u, status 0x%x", ready, virtio_status(&rng));
	works_both();
}

/* QueueNotify for queues that do not exist: ignored (and counted by brisk), the real queue still works. */
static void c_notify_bad(void)
{
	static const uint32_t bad[] = {1, 7, 8, 0xffff, 0x10000, 0xffffffff};

	for (uint64_t i = 0; i < count; i++)
		virtio_write32(&rng, VIRTIO_MMIO_QUEUE_NOTIFY, bad[i % (sizeof(bad) / sizeof(bad[0]))]);
	conf_check(virtio_status(&rng) == STATUS_LIVE, "notify_bad_queues", "%llu notifies, status 0x%x",
		   (unsigned long long)count, virtio_status(&rng));
	works_both();
}

/*
 * A queue that does not validate, made ready again and again: QueueReady stays 0, DEVICE_NEEDS_RESET
 * stands, and brisk's log stays short (the test counts its lines).
 */
static void c_qready_flood(void)
{
	uint32_t ready, s;
	int ok = virtio_negotiate(&rng, VIRTIO_F_EVENT_IDX) == 0;

	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_SEL, 0);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_NUM, 3);
	for (uint64_t i = 0; i < count; i++)
		virtio_write32(&rng, VIRTIO_MMIO_QUEUE_READY, 1);
	ready = virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY);
	s = virtio_status(&rng);
	conf_check(ok && ready == 0 && (s & VIRTIO_STATUS_DEVICE_NEEDS_RESET), "queue_ready_flood",
		   "%llu writes of QueueReady = 1 with size 3: QueueReady %u, status 0x%x", (unsigned long long)count,
		   ready, s);
	restart_and_check();
}

/* DRIVER_OK with no queue made ready: notifies find nothing to serve; a bring-up after a reset works. */
static void c_no_queue(void)
{
	int ok = virtio_negotiate(&rng, VIRTIO_F_EVENT_IDX) == 0 && virtio_driver_ok(&rng) == 0;

	for (uint64_t i = 0; i < count; i++)
		virtio_write32(&rng, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_SEL, 0);
	conf_check(ok && virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY) == 0 && virtio_status(&rng) == STATUS_LIVE,
		   "driver_ok_without_queues", "%llu notifies, QueueReady %u, status 0x%x", (unsigned long long)count,
		   virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY), virtio_status(&rng));
	restart_and_check();
}

/* ---- reset during I/O -------------------------------------------------------------------------------- */

/* Post INFLIGHT requests without waiting and reset at once; the device must come back. */
static int post_and_reset(void)
{
	uint32_t s;

	for (unsigned int i = 0; i < INFLIGHT; i++) {
		struct virtio_buf b = {buf[i], 64};

		if (virtio_submit(&rng, 0, &b, 0, 1, 0, VIRTIO_POLL) < 0)
			return -1;
	}
	virtio_write32(&rng, VIRTIO_MMIO_STATUS, 0);
	s = virtio_status(&rng);
	if (s) {
		gprintf("%s: status 0x%x right after the reset write\n", NAME, s);
		return -1;
	}
	return start();
}

static void c_reset_io(void)
{
	conf_check(post_and_reset() == 0, "reset_with_requests_in_flight", "status 0x%x, used.idx %u",
		   virtio_status(&rng), virtio_raw_used_idx(&raw));
	works_both();
}

static void c_reset_loop(void)
{
	unsigned int done = 0;

	while (done < RESET_ROUNDS && post_and_reset() == 0)
		done++;
	conf_check(done == RESET_ROUNDS, "reset_loop", "%u of %u rounds of %u requests then a reset", done,
		   RESET_ROUNDS, INFLIGHT);
	works_both();
}

/*
 * A device reset must not be a way around the entropy rate limit (docs/security.md case 12 through 13): rounds
 * of bring-up, one request as large as a burst, reset. The guest counts what it got; the test compares
 * brisk's own count of bytes served with the rate (--rng=RATE, --log-level info).
 */
static void c_reset_burst(void)
{
	struct virtio_buf b = {burst, sizeof(burst)};
	uint32_t len = 0, total = 0, done = 0;

	for (unsigned int round = 0; round < BURST_ROUNDS; round++) {
		if (round && start())
			break;
		if (virtio_transfer(&rng, 0, &b, 0, 1, 0, &len))
			break;
		total += len;
		done++;
		virtio_write32(&rng, VIRTIO_MMIO_STATUS, 0);
	}
	conf_check(done == BURST_ROUNDS, "reset_burst", "%u of %u rounds, %u bytes in all", done, BURST_ROUNDS, total);
	gprintf("%s: reset_burst got %u bytes\n", NAME, total);
	restart_and_check();
}

/* ---- the cases ------------------------------------------------------------------------------------- */

static const struct hcase {
	const char *name;
	unsigned int security; /* docs/security.md case */
	void (*run)(void);
} cases[] = {
    {"widths", 13, c_widths},	      {"fuzz", 13, c_fuzz},
    {"queue_sel", 13, c_queue_sel},   {"status_order", 13, c_status_order},
    {"features", 13, c_features},     {"after_driver_ok", 13, c_after_driver_ok},
    {"notify_bad", 13, c_notify_bad}, {"qready_flood", 7, c_qready_flood},
    {"no_queue", 13, c_no_queue},     {"reset_io", 13, c_reset_io},
    {"reset_loop", 13, c_reset_loop}, {"reset_burst", 13, c_reset_burst},
};

void guest_main(struct hvm_start_info *si)
{
	const struct hcase *c = NULL;
	char name[32];

	serial_init();
	conf_begin(NAME);
	rng.name = NAME;
	cmdline = guest_cmdline(si);
	cmdline_get_u64(cmdline, "count", &count);
	cmdline_get_u64(cmdline, "seed", &seed);
	if (seed == 0)
		seed = 1;
	if (cmdline_get_str(cmdline, "case", name, sizeof(name)) == 0)
		for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			if (!strcmp(cases[i].name, name))
				c = &cases[i];
	if (!c) {
		gprintf("%s: case=NAME missing or unknown; cases:", NAME);
		for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			gprintf(" %s", cases[i].name);
		gprintf("\n");
		guest_fail(NAME, "no case");
	}
	if (start()) {
		conf_check(0, "bringup", "see above");
		conf_end();
	}
	gprintf("%s: case %s (docs/security.md case %u), count %llu, features 0x%llx\n", NAME, c->name, c->security,
		(unsigned long long)count, (unsigned long long)rng.features);
	c->run();
	conf_end();
}
