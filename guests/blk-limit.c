/* blk-limit.c - a rate-limited virtio-blk disk and a disk swapped after boot, seen from inside the guest. */
#include "virtio.h"

/*
 * Phases, each when its command-line word is given (the disk is the disk=N'th virtio_mmio.device= word,
 * default 0, all of them virtio-blk):
 *   swap=1   print "blk-limit: READY capacity C generation G", then wait (30 s at most) for a
 *            configuration-change interrupt (the host's PATCH /drives path_on_host), and check that
 *            ConfigGeneration moved, the capacity changed, sector 0 of the new disk starts with
 *            "SWAPPED!" and its last sector reads (virtio 1.2 sections 2.5.1, 4.2.2.1, 5.2.4).
 *   rate=B   read 64 KiB requests for warm= ms (default 1500) and on until a 250 ms window runs at B (+ tol)
 *            or less (the bucket's initial fill is gone), then for secs= s (default 3), and check the measured
 *            bytes per second is within tol= percent (default 10) of B.
 *   iops=N   the same with 512-byte requests, counting requests per second against N.
 *   reads=N  N reads of 4 KiB (each within the driver's 5 s deadline), then "CHECK reads: PASS" with the time.
 * The clock is the TSC, calibrated against the LAPIC timer (KVM's 1 GHz APIC bus): the least of 5 x 50 ms.
 * "blk-limit: PASS" at the end, or "FAIL" with what was seen, and the exit status.
 */
#define NAME "blk-limit"

#define VIRTIO_BLK_T_IN 0
#define VIRTIO_BLK_S_OK 0
#define CFG_CAPACITY	0
#define SECTOR		512
#define BIG		4096
/* The bandwidth phase's requests: few exits per byte, so that even a guest slowed down (an emulated KVM on a loaded
 * host: ~0.7 MB/s in 4 KiB reads) reads faster than its limit. */
#define RATE_LEN	 65536
#define NO_STATUS	 0xee
#define LAPIC_TIMER_INIT 0x380
#define LAPIC_TIMER_CUR	 0x390
#define LAPIC_TIMER_DIV	 0x3e0
#define LAPIC_LVT_TIMER	 0x320
#define CALIBRATE_MS	 50u
#define COUNTS_PER_MS	 7813u /* KVM's APIC bus at 1 GHz, divide by 128 */

struct blk_req_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};

static struct virtio_dev blk; /* in .bss: its queues are 4 KiB-aligned pages */
static struct blk_req_hdr hdr;
static uint8_t status;
static uint8_t data[RATE_LEN] __attribute__((aligned(BIG)));
static uint64_t tsc_per_ms;
static char word[128];

/*
 * TSC ticks per ms: the least of 5 rounds of CALIBRATE_MS on the LAPIC timer (a round the host preempts
 * the vCPU in only reads longer, which would make every later rate look higher than it is).
 */
static void calibrate(void)
{
	uint64_t best = ~0ull;

	lapic_enable();
	mmio_write32(BRISK_LAPIC_BASE + LAPIC_LVT_TIMER, 1u << 16); /* masked: a clock, no interrupt */
	mmio_write32(BRISK_LAPIC_BASE + LAPIC_TIMER_DIV, 0xa);	    /* divide by 128 */
	for (int round = 0; round < 5; round++) {
		uint64_t t0 = rdtsc(), d;

		mmio_write32(BRISK_LAPIC_BASE + LAPIC_TIMER_INIT, CALIBRATE_MS * COUNTS_PER_MS);
		while (mmio_read32(BRISK_LAPIC_BASE + LAPIC_TIMER_CUR) != 0)
			;
		d = rdtsc() - t0;
		best = d < best ? d : best;
	}
	tsc_per_ms = best / CALIBRATE_MS;
	if (tsc_per_ms == 0)
		guest_fail(NAME, "the TSC does not count");
}

static uint64_t ms_since(uint64_t t0)
{
	return (rdtsc() - t0) / tsc_per_ms;
}

/* The first occurrence of `key` in s at or after s, or NULL (the runtime has no strstr). */
static const char *find(const char *s, const char *key)
{
	size_t n = 0;

	while (key[n])
		n++;
	for (; *s; s++)
		if (strncmp(s, key, n) == 0)
			return s;
	return NULL;
}

/* The disk=N'th virtio_mmio.device= word of the command line, as a command line of its own. */
static const char *pick_disk(const char *cmdline)
{
	static const char key[] = "virtio_mmio.device=";
	uint64_t want = 0;
	const char *p = cmdline;

	cmdline_get_u64(cmdline, "disk", &want);
	for (uint64_t n = 0; (p = find(p, key)) != NULL; n++, p++) {
		size_t len = 0;

		if (n != want)
			continue;
		while (p[len] && p[len] != ' ' && len < sizeof(word) - 1)
			len++;
		memcpy(word, p, len);
		word[len] = 0;
		return word;
	}
	guest_fail(NAME, "no such disk= among the virtio_mmio.device= words");
}

/* One read of `len` bytes at sector s, polled; fails the guest unless it completed with S_OK. */
static void read_at(uint64_t s, uint32_t len)
{
	struct virtio_buf b[3];
	uint32_t used = 0;

	hdr = (struct blk_req_hdr){.type = VIRTIO_BLK_T_IN, .reserved = 0, .sector = s};
	status = NO_STATUS;
	b[0] = (struct virtio_buf){&hdr, sizeof(hdr)};
	b[1] = (struct virtio_buf){data, len};
	b[2] = (struct virtio_buf){&status, 1};
	if (virtio_transfer(&blk, 0, b, 1, 2, 0, &used)) {
		gprintf("%s: FAIL read of %u bytes at sector %llu: no completion\n", NAME, len, (unsigned long long)s);
		guest_fail(NAME, "no completion");
	}
	if (status != VIRTIO_BLK_S_OK) {
		gprintf("%s: FAIL read at sector %llu: status %u\n", NAME, (unsigned long long)s, status);
		guest_fail(NAME, "read status");
	}
}

static uint64_t capacity(void)
{
	uint64_t c = 0;
	struct virtio_cfg_field f[] = {{CFG_CAPACITY, 8, &c}};

	if (virtio_config_read(&blk, f, 1) < 0)
		guest_fail(NAME, "capacity: the configuration never settled");
	return c;
}

static void swap_phase(void)
{
	uint64_t c0 = capacity(), c1;
	uint32_t g0 = virtio_read32(&blk, VIRTIO_MMIO_CONFIG_GENERATION), g1, bits;

	virtio_irq_arm(&blk);
	gprintf("%s: READY capacity %llu generation %u\n", NAME, (unsigned long long)c0, g0);
	bits = virtio_irq_wait(&blk, VIRTIO_INT_CONFIG, 30000);
	g1 = virtio_read32(&blk, VIRTIO_MMIO_CONFIG_GENERATION);
	c1 = capacity();
	gprintf("%s: config change: InterruptStatus 0x%x, generation %u -> %u, capacity %llu -> %llu\n", NAME, bits, g0,
		g1, (unsigned long long)c0, (unsigned long long)c1);
	if (!(bits & VIRTIO_INT_CONFIG))
		guest_fail(NAME, "no configuration-change interrupt");
	if (g1 == g0)
		guest_fail(NAME, "ConfigGeneration did not move");
	if (c1 == c0 || c1 == 0)
		guest_fail(NAME, "the capacity did not change");
	read_at(0, SECTOR);
	if (memcmp(data, "SWAPPED!", 8) != 0) {
		gprintf("%s: FAIL sector 0 of the new disk starts 0x%02x 0x%02x, not \"SWAPPED!\"\n", NAME, data[0],
			data[1]);
		guest_fail(NAME, "new disk content");
	}
	read_at(c1 - 1, SECTOR);
	gprintf("%s: CHECK swap: PASS (new disk read at sectors 0 and %llu)\n", NAME, (unsigned long long)(c1 - 1));
}

/*
 * Reads of `len` bytes: a warm-up of warm_ms at least, and on until two WINDOW_MS windows in a row run within
 * `limit` (+ tol percent; bytes per second, or requests with 512-byte reads) with a request in each that waited
 * THROTTLED_MS or more (the limiter's timer): only then is the bucket's initial fill spent. A guest slowed down
 * (an emulated KVM on a loaded host) spends it more slowly than warm_ms allows, and what was left made the
 * measured rate 116-128 % of the limit; one slow window alone (the host busy elsewhere) is not enough. At most
 * WARM_MAX_MS more; warm_ms 0: no warm-up. Then secs of measured reads; returns the requests done in them, *ms
 * their length. (A guest that cannot read faster than the limit measures its own speed, below it.)
 */
#define WINDOW_MS    250u
#define WARM_MAX_MS  30000u
#define THROTTLED_MS 40u
static uint64_t run_reads(uint32_t len, uint64_t limit, uint64_t tol, uint64_t warm_ms, uint64_t secs, uint64_t *ms)
{
	uint64_t cap = capacity(), step = len / SECTOR, slots, n = 0, t0, w0, wn = 0, i = 0, slowest = 0, calm = 0;
	uint64_t unit = len == SECTOR ? 1 : len; /* what `limit` counts per request */

	if (cap < step)
		guest_fail(NAME, "the disk is smaller than one request");
	slots = cap / step;
	t0 = w0 = rdtsc();
	for (; warm_ms > 0; i++, wn++) {
		uint64_t w = ms_since(w0), r0;

		if (w >= WINDOW_MS) {
			int throttled = wn * unit * 1000 * 100 <= limit * w * (100 + tol) && slowest >= THROTTLED_MS;

			calm = throttled ? calm + 1 : 0;
			if (calm >= 2 && ms_since(t0) >= warm_ms)
				break;
			if (ms_since(t0) >= warm_ms + WARM_MAX_MS)
				guest_fail(NAME, "the reads never slowed to the limit: no rate limiter?");
			w0 = rdtsc();
			wn = slowest = 0;
		}
		r0 = rdtsc();
		read_at((i % slots) * step, len);
		r0 = ms_since(r0);
		slowest = r0 > slowest ? r0 : slowest;
	}
	t0 = rdtsc();
	while ((*ms = ms_since(t0)) < secs * 1000) {
		read_at((n % slots) * step, len);
		n++;
	}
	return n;
}

static void rate_phase(const char *what, uint64_t limit, uint32_t len, uint64_t warm, uint64_t secs, uint64_t tol)
{
	uint64_t ms, n = run_reads(len, limit, tol, warm, secs, &ms);
	uint64_t got = (len == SECTOR ? n : n * len) * 1000 / (ms ? ms : 1);
	int ok = got * 100 <= limit * (100 + tol) && got * 100 >= limit * (100 - tol);

	gprintf("%s: CHECK %s: %s (measured %llu per second over %llu ms, %llu requests of %u bytes; limit %llu, "
		"%llu%%)\n",
		NAME, what, ok ? "PASS" : "FAIL", (unsigned long long)got, (unsigned long long)ms,
		(unsigned long long)n, len, (unsigned long long)limit, (unsigned long long)(got * 100 / limit));
	if (!ok)
		guest_fail(NAME, what);
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	uint64_t swap = 0, rate = 0, iops = 0, reads = 0, warm = 1500, secs = 3, tol = 10;

	serial_init();
	cmdline_get_u64(cmdline, "swap", &swap);
	cmdline_get_u64(cmdline, "rate", &rate);
	cmdline_get_u64(cmdline, "iops", &iops);
	cmdline_get_u64(cmdline, "reads", &reads);
	cmdline_get_u64(cmdline, "warm", &warm);
	cmdline_get_u64(cmdline, "secs", &secs);
	cmdline_get_u64(cmdline, "tol", &tol);
	calibrate();
	blk.name = NAME;
	if (virtio_start(&blk, pick_disk(cmdline), VIRTIO_ID_BLOCK, VIRTIO_F_EVENT_IDX, 1))
		guest_fail(NAME, "virtio-blk bring-up");
	gprintf("%s: capacity %llu sectors, TSC %llu per ms\n", NAME, (unsigned long long)capacity(),
		(unsigned long long)tsc_per_ms);
	if (swap)
		swap_phase();
	if (rate)
		rate_phase("bandwidth", rate, RATE_LEN, warm, secs, tol);
	if (iops)
		rate_phase("ops", iops, SECTOR, warm, secs, tol);
	if (reads) {
		uint64_t t0 = rdtsc(), slots = capacity() / (BIG / SECTOR);

		gprintf("%s: reading\n", NAME);
		for (uint64_t i = 0; i < reads; i++)
			read_at((i % (slots ? slots : 1)) * (BIG / SECTOR), BIG);
		gprintf("%s: CHECK reads: PASS (%llu reads of %u bytes in %llu ms)\n", NAME, (unsigned long long)reads,
			BIG, (unsigned long long)ms_since(t0));
	}
	guest_pass(NAME);
}
