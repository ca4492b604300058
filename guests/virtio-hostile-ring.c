/* virtio-hostile-ring.c - hostile guest: malformed descriptor chains, ring indices and queue layouts against
 * virtio-rng. */
#include "virtio.h"

/*
 * Command-line words:
 *   case=NAME   the attack (one per run; the table at the end lists them with their docs/security.md case)
 *   virtio_mmio.device=...  the device windows (the VMM adds them; the first entropy device is attacked)
 *
 * Each attack writes the descriptor table, the avail ring or the queue
 * registers by hand (guests/lib/virtio.h, "raw rings") and checks the class
 * it must end in (docs/security.md):
 *   - a malformed chain (cases 1-5, 8) is completed with used length 0, its
 *     id the head, the buffers of the chain untouched, no DEVICE_NEEDS_RESET;
 *   - a corrupt ring index (case 6) raises DEVICE_NEEDS_RESET with a
 *     configuration interrupt, and the device serves nothing until a reset;
 *   - a queue that does not validate (case 7) reads QueueReady 0 and raises
 *     DEVICE_NEEDS_RESET.
 * The boundary just inside each limit (a chain of exactly the queue size,
 * an indirect table of 1024 entries, 2^32 - 1 bytes, the last bytes of RAM,
 * a full ring) must be served. Afterwards (after a reset and a new bring-up
 * where the device needed one) a normal request must complete in poll and
 * in interrupt mode with random bytes. Output: "virtio-hostile-ring: CHECK
 * what: PASS|FAIL (values)", then PASS or FAIL.
 */
#define NAME	     "virtio-hostile-ring"
#define WAIT_MS	     2000
#define QUIET_MS     200 /* how long a device that must not answer is watched */
#define BUF_LEN	     64
#define PATTERN	     0x5a
#define BIG_QUEUE    256  /* the raw queue of the "big_*" cases: brisk's QueueNumMax for virtio-rng */
#define TABLE_MAX    1025 /* indirect table entries: one past the 1024 brisk accepts */
#define FLOOD_CHAINS 4096
#define RACE_ROUNDS  512
#define RACE_FLIPS   64
#define GIB	     (1ULL << 30)
#define HOLE_START   (3 * GIB) /* LAYOUT_MMIO_HOLE */
#define HOLE_END     (4 * GIB)

#define F_NO_INDIRECT 1u /* negotiate without VIRTIO_F_INDIRECT_DESC */

static struct virtio_dev rng;
static struct virtio_raw raw;
static const char *cmdline;
static uint64_t want;
static uint8_t buf[4][BUF_LEN] __attribute__((aligned(64)));
static struct virtq_desc table[TABLE_MAX] __attribute__((aligned(16)));
static uint8_t bigq[VIRTIO_RAW_MEM(BIG_QUEUE)] __attribute__((aligned(4096)));

/* Guest RAM from the PVH memory map: the end of the highest RAM entry, and whether RAM starts at 4 GiB. */
static uint64_t ram_top, high_ram_size;

static void read_memmap(const struct hvm_start_info *si)
{
	const struct hvm_memmap_table_entry *t = (const void *)(uintptr_t)si->memmap_paddr;

	for (uint32_t i = 0; si->memmap_paddr && i < si->memmap_entries && i < 64; i++) {
		if (t[i].type != 1)
			continue;
		if (t[i].addr + t[i].size > ram_top)
			ram_top = t[i].addr + t[i].size;
		if (t[i].addr == HOLE_END)
			high_ram_size = t[i].size;
	}
	gprintf("%s: RAM ends at 0x%llx, 0x%llx bytes above 4 GiB\n", NAME, (unsigned long long)ram_top,
		(unsigned long long)high_ram_size);
}

static void desc(volatile struct virtq_desc *t, unsigned int i, uint64_t addr, uint32_t len, uint16_t flags,
		 uint16_t next)
{
	t[i].addr = addr;
	t[i].len = len;
	t[i].flags = flags;
	t[i].next = next;
}

static uint64_t B(unsigned int i)
{
	return (uintptr_t)buf[i];
}

/* buf[0..2] hold PATTERN before an attack; a chain the device refused must leave them so. */
static void fill_pattern(void)
{
	memset(buf, PATTERN, 3 * BUF_LEN);
}

/* buf[first..2] still hold PATTERN. */
static int untouched_from(unsigned int first)
{
	for (unsigned int i = first * BUF_LEN; i < 3 * BUF_LEN; i++)
		if (buf[i / BUF_LEN][i % BUF_LEN] != PATTERN)
			return 0;
	return 1;
}

static int untouched(void)
{
	return untouched_from(0);
}

/* ---- bring-up and the checks every case ends with ---------------------------------------------- */

static int start(void)
{
	if (virtio_start(&rng, cmdline, VIRTIO_ID_RNG, want, 1))
		return -1;
	virtio_raw_from_queue(&raw, &rng, 0);
	return 0;
}

/* A normal 16-byte request through the library's driver completes with 16 random bytes. */
static void works(const char *what, unsigned int flags)
{
	struct virtio_buf b = {buf[3], 16};
	uint32_t len = 0;
	int ok;

	memset(buf[3], 0, 16);
	ok = virtio_transfer(&rng, 0, &b, 0, 1, flags, &len) == 0;
	conf_check(ok && len == 16 && virtio_looks_random(buf[3], 16), what, "%s %s, used length %u, status 0x%x",
		   flags & VIRTIO_XFER_IRQ ? "interrupt mode" : "poll mode", ok ? "completed" : "no completion", len,
		   virtio_status(&rng));
}

static void works_both(void)
{
	works("works_after_poll", 0);
	works("works_after_irq", VIRTIO_XFER_IRQ);
}

/* Reset, bring the device up again, and check it serves. */
static void restart_and_check(void)
{
	int ok = start() == 0;

	conf_check(ok, "restart", "status 0x%x after reset and bring-up", virtio_status(&rng));
	if (ok)
		works_both();
}

/*
 * Make chain `head` available on r and expect it completed with used length
 * `expect` (0: refused, the buffers then untouched), as element `head`, with
 * the device still well (no DEVICE_NEEDS_RESET).
 */
static void expect_used_on(struct virtio_raw *r, const char *what, uint16_t head, uint32_t expect)
{
	uint32_t id = ~0u, len = ~0u, s;
	int ok;

	virtio_raw_post(r, head);
	ok = virtio_raw_poll(r, WAIT_MS, &id, &len) == 0;
	s = virtio_status(&rng);
	conf_check(ok && id == head && len == expect && !(s & VIRTIO_STATUS_DEVICE_NEEDS_RESET), what,
		   "%s: used id %u length %u (expected id %u length %u), status 0x%x",
		   ok ? "completed" : "no completion", id, len, head, expect, s);
	if (expect == 0)
		conf_check(untouched(), "buffers_untouched", "first bytes 0x%02x 0x%02x 0x%02x", buf[0][0], buf[1][0],
			   buf[2][0]);
}

/* The case's chain at head 0 of the library's queue is refused; then the device works as before. */
static void expect_dropped(const char *what)
{
	expect_used_on(&raw, what, 0, 0);
	works_both();
}

static void expect_served(const char *what, uint32_t len)
{
	expect_used_on(&raw, what, 0, len);
	works_both();
}

/*
 * After an attack on the ring itself (virtio_irq_arm was called before it):
 * DEVICE_NEEDS_RESET and a configuration interrupt (section 2.1.2, DRIVER_OK
 * was set), nothing served while it stands, and a reset makes it work again.
 */
static void expect_needs_reset(const char *what)
{
	uint32_t s = virtio_poll_status(&rng, VIRTIO_STATUS_DEVICE_NEEDS_RESET, WAIT_MS);
	uint32_t irq = virtio_irq_wait(&rng, VIRTIO_INT_CONFIG, WAIT_MS), id = 0, len = 0;
	int served;

	conf_check(s & VIRTIO_STATUS_DEVICE_NEEDS_RESET, what, "status 0x%x", s);
	conf_check(irq & VIRTIO_INT_CONFIG, "config_interrupt", "InterruptStatus seen by the ISR 0x%x, %u interrupts",
		   irq, rng.irq_count);
	desc(raw.desc, 1, B(0), 16, VIRTQ_DESC_F_WRITE, 0);
	virtio_raw_post(&raw, 1);
	served = virtio_raw_poll(&raw, QUIET_MS, &id, &len) == 0;
	conf_check(!served, "nothing_served_until_reset", "%s (id %u length %u), used.idx %u",
		   served ? "a request was served" : "none served", id, len, virtio_raw_used_idx(&raw));
	restart_and_check();
}

/* ---- docs/security.md case 1: next out of range ------------------------------------------------------------ */

static void c_next_range(void)
{
	desc(raw.desc, 0, B(0), 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, raw.size);
	expect_dropped("next_equals_queue_size");
}

static void c_next_ffff(void)
{
	desc(raw.desc, 0, B(0), 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 0xffff);
	expect_dropped("next_0xffff");
}

static void c_ind_next_range(void)
{
	desc(table, 0, B(0), 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 2);
	desc(table, 1, B(1), 16, VIRTQ_DESC_F_WRITE, 0);
	desc(raw.desc, 0, (uintptr_t)table, 2 * 16, VIRTQ_DESC_F_INDIRECT, 0);
	expect_dropped("indirect_next_past_table");
}

/* Many malformed chains in a row: every one completed, brisk's log stays short (the test counts lines). */
static void c_bad_flood(void)
{
	uint32_t id = 0, len = 0, bad = 0, done = 0;

	desc(raw.desc, 0, B(0), 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, raw.size);
	for (unsigned int round = 0; round < FLOOD_CHAINS / raw.size; round++) {
		for (unsigned int i = 0; i < raw.size; i++)
			virtio_raw_ring(&raw, (uint16_t)(*raw.avail_idx + i), 0);
		virtio_raw_publish(&raw, (uint16_t)(*raw.avail_idx + raw.size));
		for (unsigned int i = 0; i < raw.size; i++) {
			if (virtio_raw_poll(&raw, WAIT_MS, &id, &len))
				goto out;
			done++;
			bad += id != 0 || len != 0;
		}
	}
out:
	conf_check(done == FLOOD_CHAINS && bad == 0, "flood_all_dropped", "%u of %u completed, %u not (0, 0)", done,
		   FLOOD_CHAINS, bad);
	conf_check(untouched(), "buffers_untouched", "first byte 0x%02x", buf[0][0]);
	works_both();
}

/* ---- docs/security.md case 2: cycles and over-long chains ---------------------------------------------------- */

static void c_cycle(void)
{
	desc(raw.desc, 0, B(0), 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	desc(raw.desc, 1, B(1), 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 0);
	expect_dropped("cycle_a_b_a");
}

static void c_self_loop(void)
{
	desc(raw.desc, 0, B(0), 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 0);
	expect_dropped("self_loop");
}

/* Empty descriptors are skipped, but each still spends a hop: a cycle of them ends too. */
static void c_cycle_empty(void)
{
	desc(raw.desc, 0, B(0), 0, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	desc(raw.desc, 1, B(1), 0, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 0);
	expect_dropped("cycle_of_empty_descriptors");
}

/* Exactly queue-size descriptors: the longest legal chain is served. */
static void c_chain_max(void)
{
	for (unsigned int i = 0; i < raw.size; i++)
		desc(raw.desc, i, B(3), 4, (uint16_t)(VIRTQ_DESC_F_WRITE | (i + 1 < raw.size ? VIRTQ_DESC_F_NEXT : 0)),
		     (uint16_t)(i + 1));
	expect_served("chain_of_queue_size", 4 * raw.size);
}

static void c_ind_long(void)
{
	for (unsigned int i = 0; i <= raw.size; i++)
		desc(table, i, B(i % 3), 1, VIRTQ_DESC_F_WRITE | (i < raw.size ? VIRTQ_DESC_F_NEXT : 0),
		     (uint16_t)(i + 1));
	desc(raw.desc, 0, (uintptr_t)table, (raw.size + 1u) * 16, VIRTQ_DESC_F_INDIRECT, 0);
	expect_dropped("indirect_chain_of_queue_size_plus_1");
}

static void c_ind_cycle(void)
{
	desc(table, 0, B(0), 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	desc(table, 1, B(1), 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 0);
	desc(raw.desc, 0, (uintptr_t)table, 2 * 16, VIRTQ_DESC_F_INDIRECT, 0);
	expect_dropped("indirect_cycle");
}

static void c_ind_max(void)
{
	for (unsigned int i = 0; i < raw.size; i++)
		desc(table, i, B(3), 1, VIRTQ_DESC_F_WRITE | (i + 1 < raw.size ? VIRTQ_DESC_F_NEXT : 0),
		     (uint16_t)(i + 1));
	desc(raw.desc, 0, (uintptr_t)table, raw.size * 16u, VIRTQ_DESC_F_INDIRECT, 0);
	expect_served("indirect_chain_of_queue_size", raw.size);
}

/*
 * A queue of BIG_QUEUE entries in this guest's own memory: chains longer
 * than virtio-rng's segment array, a 256-hop cycle and the longest chain.
 * `fn` fills its descriptor table and says what to expect.
 */
static void on_big_queue(const char *what, uint16_t head, uint32_t expect, void (*fill)(volatile struct virtq_desc *t))
{
	struct virtio_raw big;
	uint32_t max, ready;
	int ok;

	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_SEL, 0);
	max = virtio_read32(&rng, VIRTIO_MMIO_QUEUE_NUM_MAX);
	ok = max >= BIG_QUEUE && virtio_negotiate(&rng, want) == 0;
	ready = ok ? virtio_raw_setup(&big, &rng, 0, BIG_QUEUE, bigq) : 0;
	ok = ok && ready == 1 && virtio_driver_ok(&rng) == 0;
	conf_check(ok, "big_queue_setup", "QueueNumMax %u, QueueReady %u, status 0x%x", max, ready,
		   virtio_status(&rng));
	if (!ok)
		return;
	fill(big.desc);
	expect_used_on(&big, what, head, expect);
	restart_and_check();
}

/* 256 one-byte descriptors: more segments than virtio-rng takes (64), refused as a whole. */
static void fill_many_segs(volatile struct virtq_desc *t)
{
	for (unsigned int i = 0; i < BIG_QUEUE; i++)
		desc(t, i, B(i % 3), 1, VIRTQ_DESC_F_WRITE | (i + 1 < BIG_QUEUE ? VIRTQ_DESC_F_NEXT : 0),
		     (uint16_t)(i + 1));
}

/* 256 descriptors, only the last one non-empty: the longest chain, served. */
static void fill_long_empty(volatile struct virtq_desc *t)
{
	for (unsigned int i = 0; i < BIG_QUEUE; i++)
		desc(t, i, B(3), i + 1 < BIG_QUEUE ? 0 : 16,
		     VIRTQ_DESC_F_WRITE | (i + 1 < BIG_QUEUE ? VIRTQ_DESC_F_NEXT : 0), (uint16_t)(i + 1));
}

/* A 256-descriptor cycle of empty descriptors. */
static void fill_big_cycle(volatile struct virtq_desc *t)
{
	for (unsigned int i = 0; i < BIG_QUEUE; i++)
		desc(t, i, B(0), 0, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, (uint16_t)((i + 1) % BIG_QUEUE));
}

/* 64 descriptors of 64 MiB inside the first 128 MiB: 2^32 bytes in all (docs/security.md case 5 without a big RAM). */
static void fill_total_4g(volatile struct virtq_desc *t)
{
	for (unsigned int i = 0; i < 64; i++)
		desc(t, i, 32ULL << 20, 64u << 20, VIRTQ_DESC_F_WRITE | (i + 1 < 64 ? VIRTQ_DESC_F_NEXT : 0),
		     (uint16_t)(i + 1));
}

static void c_big_segs(void)
{
	on_big_queue("more_segments_than_the_device_takes", 0, 0, fill_many_segs);
}

static void c_big_chain_max(void)
{
	on_big_queue("chain_of_256_mostly_empty", 0, 16, fill_long_empty);
}

static void c_big_cycle(void)
{
	on_big_queue("cycle_of_256", 5, 0, fill_big_cycle);
}

static void c_big_total(void)
{
	on_big_queue("total_length_2^32_in_64_buffers", 0, 0, fill_total_4g);
}

/* ---- docs/security.md case 3: indirect tables ----------------------------------------------------------------- */

/* table[0] is a good 16-byte buffer: only the table descriptor itself is wrong. */
static void ind_case(const char *what, uint64_t addr, uint32_t len, uint16_t flags)
{
	desc(table, 0, B(0), 16, VIRTQ_DESC_F_WRITE, 0);
	desc(raw.desc, 0, addr, len, flags, 1);
	desc(raw.desc, 1, B(1), 16, VIRTQ_DESC_F_WRITE, 0);
	expect_dropped(what);
}

static void c_ind_len0(void)
{
	ind_case("indirect_length_0", (uintptr_t)table, 0, VIRTQ_DESC_F_INDIRECT);
}

static void c_ind_len_odd(void)
{
	ind_case("indirect_length_24", (uintptr_t)table, 24, VIRTQ_DESC_F_INDIRECT);
}

static void c_ind_too_large(void)
{
	ind_case("indirect_1025_entries", (uintptr_t)table, TABLE_MAX * 16u, VIRTQ_DESC_F_INDIRECT);
}

static void c_ind_with_next(void)
{
	ind_case("indirect_with_next", (uintptr_t)table, 16, VIRTQ_DESC_F_INDIRECT | VIRTQ_DESC_F_NEXT);
}

static void c_ind_not_negotiated(void)
{
	conf_check(!(rng.features & VIRTIO_F_INDIRECT_DESC), "indirect_not_negotiated", "features 0x%llx",
		   (unsigned long long)rng.features);
	ind_case("indirect_without_the_feature", (uintptr_t)table, 16, VIRTQ_DESC_F_INDIRECT);
}

static void c_ind_nested(void)
{
	desc(table, 1, B(0), 16, VIRTQ_DESC_F_WRITE, 0);
	desc(table, 0, (uintptr_t)&table[1], 16, VIRTQ_DESC_F_INDIRECT, 0);
	desc(raw.desc, 0, (uintptr_t)table, 16, VIRTQ_DESC_F_INDIRECT, 0);
	expect_dropped("nested_indirect");
}

/* The largest table brisk takes (1024 entries), only its first entry used: served. */
static void c_ind_1024(void)
{
	desc(table, 0, B(3), 16, VIRTQ_DESC_F_WRITE, 0);
	desc(raw.desc, 0, (uintptr_t)table, (TABLE_MAX - 1) * 16u, VIRTQ_DESC_F_INDIRECT, 0);
	expect_served("indirect_1024_entries", 16);
}

/* ---- docs/security.md case 4: buffers outside guest RAM ------------------------------------------------------- */

static void addr_case(const char *what, uint64_t addr, uint32_t len)
{
	desc(raw.desc, 0, addr, len, VIRTQ_DESC_F_WRITE, 0);
	expect_dropped(what);
}

static void c_addr_wrap(void)
{
	addr_case("buffer_wraps_2^64", 0xfffffffffffff000ULL, 0x2000);
}

static void c_addr_wrap_last(void)
{
	addr_case("buffer_at_2^64-1", 0xffffffffffffffffULL, 2);
}

static void c_addr_ram_end(void)
{
	addr_case("buffer_across_the_end_of_ram", ram_top - 8, 16);
}

static void c_addr_past_ram(void)
{
	addr_case("buffer_just_past_ram", ram_top, 16);
}

/* The last 16 bytes of RAM are RAM: served. */
static void c_addr_ram_last(void)
{
	desc(raw.desc, 0, ram_top - 16, 16, VIRTQ_DESC_F_WRITE, 0);
	expect_served("buffer_at_the_last_bytes_of_ram", 16);
}

static void c_addr_mmio(void)
{
	addr_case("buffer_on_mmio_0xd0000000", BRISK_BOOTMARK_MMIO, 16);
}

static void c_addr_window(void)
{
	addr_case("buffer_on_its_own_registers", rng.base, 0x100);
}

static void c_addr_lapic(void)
{
	addr_case("buffer_on_the_lapic", BRISK_LAPIC_BASE, 16);
}

/* Needs --memory above 3 GiB: RAM on both sides of the MMIO hole. */
static int have_high_ram(void)
{
	conf_check(high_ram_size >= GIB / 4, "ram_above_4g", "0x%llx bytes (run with --memory 4G)",
		   (unsigned long long)high_ram_size);
	return high_ram_size >= GIB / 4;
}

static void c_addr_hole_start(void)
{
	if (have_high_ram())
		addr_case("buffer_across_the_hole_start", HOLE_START - 8, 16);
}

static void c_addr_hole_end(void)
{
	if (have_high_ram())
		addr_case("buffer_across_the_hole_end", HOLE_END - 8, 16);
}

static void c_addr_across_hole(void)
{
	if (have_high_ram())
		addr_case("buffer_from_low_to_high_ram", HOLE_START - 16, (uint32_t)(HOLE_END - HOLE_START + 32));
}

/* RAM above 4 GiB is RAM: served (this guest cannot look, its identity map ends at 4 GiB). */
static void c_addr_high(void)
{
	if (!have_high_ram())
		return;
	desc(raw.desc, 0, HOLE_END + 0x1000, 16, VIRTQ_DESC_F_WRITE, 0);
	expect_served("buffer_above_4g", 16);
}

static void c_ind_addr_mmio(void)
{
	ind_case("indirect_table_on_mmio", BRISK_BOOTMARK_MMIO, 32, VIRTQ_DESC_F_INDIRECT);
}

static void c_ind_addr_ram_end(void)
{
	ind_case("indirect_table_across_the_end_of_ram", ram_top - 16, 32, VIRTQ_DESC_F_INDIRECT);
}

/*
 * A writable buffer over the queue's own descriptor table and driver area:
 * the device fills them with random bytes, then finds the ring it pops
 * from garbage (a random avail.idx: 17 in 65536 that it is not): DEVICE_NEEDS_RESET,
 * nothing outside guest RAM touched, and a reset brings the device back.
 */
static void c_buf_on_rings(void)
{
	uint32_t len = (uint32_t)((uintptr_t)&rng.vq[0].avail.ring[raw.size + 1] - (uintptr_t)rng.vq[0].desc);
	uint32_t id = ~0u, got = ~0u, s;
	int ok;

	desc(raw.desc, 0, (uintptr_t)rng.vq[0].desc, len, VIRTQ_DESC_F_WRITE, 0);
	virtio_raw_post(&raw, 0);
	s = virtio_poll_status(&rng, VIRTIO_STATUS_DEVICE_NEEDS_RESET, WAIT_MS);
	ok = virtio_raw_poll(&raw, QUIET_MS, &id, &got) == 0;
	/*
	 * brisk publishes nothing on a queue it found broken, so the chain it
	 * served just before is not returned either: that is what a driver that
	 * must reset expects (section 2.1.2), and so is a completion.
	 */
	conf_check((s & VIRTIO_STATUS_DEVICE_NEEDS_RESET) && (!ok || (id == 0 && got == len)),
		   "buffer_over_its_own_rings", "status 0x%x; %s: used id %u length %u (%u asked)", s,
		   ok ? "completed" : "not returned", id, got, len);
	restart_and_check();
}

/*
 * The guest rewrites a posted descriptor while the device walks it (the
 * device runs on another host thread): between a good 16-byte buffer and a
 * 4 GiB one past the end of RAM. The device copies a descriptor once and
 * checks that copy, so each chain ends served with 16 bytes or refused with
 * 0, and nothing past the 16 bytes is ever written. One more outcome is
 * right: the device read descriptor 0 while it said NEXT to 0, then again,
 * N times (each copy valid when read, and N below the queue size, so no
 * loop the walker must refuse): a chain of N 16-byte buffers at B(0),
 * served N*16 bytes, all of them into those 16 (seen about once in 20 runs).
 */
static void c_race(void)
{
	volatile struct virtq_desc *d = &raw.desc[0];
	uint32_t id = 0, len = 0, served = 0, refused = 0, looped = 0, other = 0, lost = 0, other_id = 0, other_len = 0;

	for (unsigned int round = 0; round < RACE_ROUNDS; round++) {
		desc(raw.desc, 0, B(0), 16, VIRTQ_DESC_F_WRITE, 0);
		virtio_raw_post(&raw, 0);
		for (unsigned int i = 0; i < RACE_FLIPS; i++) {
			d->len = i & 1 ? 0xffffffffu : 16;
			d->addr = i & 2 ? ram_top - 8 : B(0);
			d->flags = i & 4 ? VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT : VIRTQ_DESC_F_WRITE;
			d->next = i & 8 ? 0xffff : 0;
		}
		if (virtio_raw_poll(&raw, WAIT_MS, &id, &len)) {
			lost++;
			break;
		}
		served += id == 0 && len == 16;
		refused += id == 0 && len == 0;
		looped += id == 0 && len > 16 && len % 16 == 0 && len < 16u * raw.size;
		if (id != 0 || (len != 0 && len % 16) || len >= 16u * raw.size) {
			other_id = other ? other_id : id;
			other_len = other ? other_len : len;
			other++;
		}
	}
	conf_check(!lost && !other && served + looped + refused == RACE_ROUNDS, "descriptor_rewritten_during_walk",
		   "%u chains: %u served with 16 bytes, %u through descriptor 0 again, %u refused, %u otherwise (the "
		   "first: id %u length %u), %u lost",
		   RACE_ROUNDS, served, looped, refused, other, other_id, other_len, lost);
	conf_check(buf[1][0] == PATTERN && untouched_from(1), "nothing_past_the_buffer", "next bytes 0x%02x 0x%02x",
		   buf[1][0], buf[1][1]);
	restart_and_check();
}

/* ---- docs/security.md case 5: chains longer than 2^32 - 1 bytes --------------------------------------------- */

/* Needs --memory 3G: two 2 GiB buffers at 1 GiB (never touched when refused). */
static int have_3g(void)
{
	conf_check(ram_top >= HOLE_START, "ram_3g", "RAM ends at 0x%llx (run with --memory 3G)",
		   (unsigned long long)ram_top);
	return ram_top >= HOLE_START;
}

static void c_total_len(void)
{
	if (!have_3g())
		return;
	desc(raw.desc, 0, GIB, 0x80000000u, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	desc(raw.desc, 1, GIB, 0x80000000u, VIRTQ_DESC_F_WRITE, 0);
	expect_dropped("total_length_2^32");
}

/* 2^32 - 1 bytes in all is still legal: served (virtio-rng fills at most 64 KiB of it). */
static void c_total_max(void)
{
	uint32_t id = ~0u, len = 0;
	int ok;

	if (!have_3g())
		return;
	desc(raw.desc, 0, GIB, 0x80000000u, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	desc(raw.desc, 1, GIB, 0x7fffffffu, VIRTQ_DESC_F_WRITE, 0);
	virtio_raw_post(&raw, 0);
	ok = virtio_raw_poll(&raw, WAIT_MS, &id, &len) == 0;
	conf_check(ok && id == 0 && len >= 1 && len <= 65536, "total_length_2^32-1",
		   "%s: used id %u length %u (expected 1..65536), status 0x%x", ok ? "completed" : "no completion", id,
		   len, virtio_status(&rng));
	works_both();
}

/* ---- docs/security.md case 6: corrupt ring indices ----------------------------------------------------------- */

static void c_avail_idx(void)
{
	desc(raw.desc, 0, B(0), 16, VIRTQ_DESC_F_WRITE, 0);
	for (unsigned int i = 0; i <= raw.size; i++)
		virtio_raw_ring(&raw, (uint16_t)(*raw.avail_idx + i), 0);
	virtio_irq_arm(&rng);
	virtio_raw_publish(&raw, (uint16_t)(*raw.avail_idx + raw.size + 1));
	expect_needs_reset("avail_idx_plus_size_plus_1");
}

static void c_avail_idx_back(void)
{
	desc(raw.desc, 0, B(0), 16, VIRTQ_DESC_F_WRITE, 0);
	virtio_irq_arm(&rng);
	virtio_raw_publish(&raw, (uint16_t)(*raw.avail_idx - 1));
	expect_needs_reset("avail_idx_minus_1");
}

static void c_head_range(void)
{
	virtio_irq_arm(&rng);
	virtio_raw_post(&raw, raw.size);
	expect_needs_reset("avail_entry_equals_queue_size");
}

/* A full ring (avail.idx moved by exactly the queue size) is legal: every chain served. */
static void c_avail_full(void)
{
	uint32_t id = 0, len = 0, good = 0;

	desc(raw.desc, 0, B(3), 16, VIRTQ_DESC_F_WRITE, 0);
	for (unsigned int i = 0; i < raw.size; i++)
		virtio_raw_ring(&raw, (uint16_t)(*raw.avail_idx + i), 0);
	virtio_raw_publish(&raw, (uint16_t)(*raw.avail_idx + raw.size));
	for (unsigned int i = 0; i < raw.size; i++) {
		if (virtio_raw_poll(&raw, WAIT_MS, &id, &len))
			break;
		good += id == 0 && len == 16;
	}
	conf_check(good == raw.size, "avail_idx_plus_size", "%u of %u chains served with 16 bytes, status 0x%x", good,
		   raw.size, virtio_status(&rng));
	works_both();
}

/* ---- docs/security.md case 7: queues that do not validate ----------------------------------------------------- */

struct qcfg {
	uint32_t num;
	uint64_t desc, avail, used;
};

/* Program queue 0 with c (after negotiation), QueueReady = 1: it must stay 0 with DEVICE_NEEDS_RESET. */
static void queue_case(const char *what, struct qcfg c)
{
	uint32_t ready = 1, s = 0;
	int ok = virtio_negotiate(&rng, want) == 0;

	if (ok) {
		virtio_write32(&rng, VIRTIO_MMIO_QUEUE_SEL, 0);
		virtio_write32(&rng, VIRTIO_MMIO_QUEUE_NUM, c.num);
		virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)c.desc);
		virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DESC_HIGH, (uint32_t)(c.desc >> 32));
		virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)c.avail);
		virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DRIVER_HIGH, (uint32_t)(c.avail >> 32));
		virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)c.used);
		virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DEVICE_HIGH, (uint32_t)(c.used >> 32));
		virtio_write32(&rng, VIRTIO_MMIO_QUEUE_READY, 1);
		ready = virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY);
		s = virtio_status(&rng);
	}
	conf_check(ok && ready == 0 && (s & VIRTIO_STATUS_DEVICE_NEEDS_RESET), what,
		   "size %u desc 0x%llx avail 0x%llx used 0x%llx: QueueReady %u, status 0x%x", c.num,
		   (unsigned long long)c.desc, (unsigned long long)c.avail, (unsigned long long)c.used, ready, s);
	/* DRIVER_OK now must not start the device: a request on the refused queue is never served. */
	virtio_write32(&rng, VIRTIO_MMIO_STATUS, virtio_status(&rng) | VIRTIO_STATUS_DRIVER_OK);
	conf_check(virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY) == 0, "queue_stays_not_ready", "status 0x%x",
		   virtio_status(&rng));
	restart_and_check();
}

/* The library queue's own (good) layout, size 16; each case spoils one field. */
static struct qcfg good_queue(void)
{
	struct virtq *vq = &rng.vq[0];

	return (struct qcfg){.num = VIRTQ_MAX_SIZE,
			     .desc = (uintptr_t)vq->desc,
			     .avail = (uintptr_t)&vq->avail,
			     .used = (uintptr_t)&vq->used};
}

#define QUEUE_CASE(fn, what, field, value)                                                                             \
	static void fn(void)                                                                                           \
	{                                                                                                              \
		struct qcfg c = good_queue();                                                                          \
		c.field = value;                                                                                       \
		queue_case(what, c);                                                                                   \
	}
QUEUE_CASE(c_qsize0, "queue_size_0", num, 0)
QUEUE_CASE(c_qsize_npot, "queue_size_3", num, 3)
QUEUE_CASE(c_qsize_big, "queue_size_above_max", num, 2 * BIG_QUEUE)
QUEUE_CASE(c_qsize_huge, "queue_size_0x10010", num, 0x10010)
QUEUE_CASE(c_desc_misaligned, "desc_misaligned", desc, c.desc + 8)
QUEUE_CASE(c_avail_misaligned, "avail_misaligned", avail, c.avail + 1)
QUEUE_CASE(c_used_misaligned, "used_misaligned", used, c.used + 2)
QUEUE_CASE(c_desc_mmio, "desc_on_mmio", desc, BRISK_BOOTMARK_MMIO)
QUEUE_CASE(c_desc_ram_end, "desc_across_the_end_of_ram", desc, ram_top - 16 * 8)
QUEUE_CASE(c_avail_wrap, "avail_wraps_2^64", avail, 0xfffffffffffffff0ULL)
QUEUE_CASE(c_used_past_ram, "used_past_ram", used, ram_top)
QUEUE_CASE(c_used_high_bits, "used_high_bits_set", used, c.used | (1ULL << 40))

/*
 * The descriptor table, the driver area and the device area all at one
 * address: legal to configure (each is aligned and in RAM), meaningless to
 * use; the device's used-ring writes land in the descriptors and indices.
 * Whatever it does with that, it stays inside guest RAM, and a reset brings
 * it back.
 */
static void c_rings_overlap(void)
{
	uintptr_t at = (uintptr_t)bigq;
	uint32_t ready, s;
	int ok = virtio_negotiate(&rng, want) == 0;

	memset(bigq, 0, sizeof(bigq));
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_SEL, 0);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_NUM, VIRTQ_MAX_SIZE);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)at);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)at);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)at);
	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_READY, 1);
	ready = virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY);
	if (ready == 1)
		ok = ok && virtio_driver_ok(&rng) == 0;
	desc((volatile struct virtq_desc *)bigq, 0, B(3), 16, VIRTQ_DESC_F_WRITE, 0);
	for (unsigned int i = 0; i < 64; i++)
		virtio_write32(&rng, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	s = virtio_poll_status(&rng, VIRTIO_STATUS_DEVICE_NEEDS_RESET, QUIET_MS);
	/* Refusing such a queue would be fine too: then with DEVICE_NEEDS_RESET. */
	conf_check(ok && (ready == 1 || (s & VIRTIO_STATUS_DEVICE_NEEDS_RESET)), "overlapping_rings",
		   "QueueReady %u, then status 0x%x after 64 notifies", ready, s);
	restart_and_check();
}

/* ---- docs/security.md case 8: readable buffers in an entropy request ------------------------------------------ */

static void c_order(void)
{
	desc(raw.desc, 0, B(0), 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	desc(raw.desc, 1, B(1), 16, 0, 0);
	expect_dropped("readable_after_writable");
}

static void c_ind_order(void)
{
	desc(table, 0, B(0), 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	desc(table, 1, B(1), 16, 0, 0);
	desc(raw.desc, 0, (uintptr_t)table, 32, VIRTQ_DESC_F_INDIRECT, 0);
	expect_dropped("indirect_readable_after_writable");
}

static void c_readable_only(void)
{
	desc(raw.desc, 0, B(0), 16, 0, 0);
	expect_dropped("readable_only");
}

/*
 * Readable first, then writable (well ordered, but section 5.4.6.1 says an
 * entropy driver puts no readable buffer at all): whatever the device does
 * with the chain, it never writes the readable buffer.
 */
static void c_readable_first(void)
{
	uint32_t id = ~0u, len = ~0u;
	int ok;

	desc(raw.desc, 0, B(0), 16, VIRTQ_DESC_F_NEXT, 1);
	desc(raw.desc, 1, B(3), 16, VIRTQ_DESC_F_WRITE, 0);
	virtio_raw_post(&raw, 0);
	ok = virtio_raw_poll(&raw, WAIT_MS, &id, &len) == 0;
	conf_check(ok && id == 0 && (len == 0 || len == 16), "readable_then_writable",
		   "%s: used id %u length %u (0 or 16), status 0x%x", ok ? "completed" : "no completion", id, len,
		   virtio_status(&rng));
	conf_check(untouched(), "readable_buffer_untouched", "first bytes 0x%02x 0x%02x", buf[0][0], buf[0][1]);
	works_both();
}

/* ---- the cases ------------------------------------------------------------------------------------- */

static const struct hcase {
	const char *name;
	unsigned int security; /* docs/security.md case */
	void (*run)(void);
	unsigned int flags;
} cases[] = {
    {"next_range", 1, c_next_range, 0},
    {"next_ffff", 1, c_next_ffff, 0},
    {"ind_next_range", 1, c_ind_next_range, 0},
    {"bad_flood", 1, c_bad_flood, 0},
    {"cycle", 2, c_cycle, 0},
    {"self_loop", 2, c_self_loop, 0},
    {"cycle_empty", 2, c_cycle_empty, 0},
    {"chain_max", 2, c_chain_max, 0},
    {"ind_long", 2, c_ind_long, 0},
    {"ind_cycle", 2, c_ind_cycle, 0},
    {"ind_max", 2, c_ind_max, 0},
    {"big_segs", 2, c_big_segs, 0},
    {"big_chain_max", 2, c_big_chain_max, 0},
    {"big_cycle", 2, c_big_cycle, 0},
    {"ind_len0", 3, c_ind_len0, 0},
    {"ind_len_odd", 3, c_ind_len_odd, 0},
    {"ind_nested", 3, c_ind_nested, 0},
    {"ind_too_large", 3, c_ind_too_large, 0},
    {"ind_with_next", 3, c_ind_with_next, 0},
    {"ind_not_negotiated", 3, c_ind_not_negotiated, F_NO_INDIRECT},
    {"ind_1024", 3, c_ind_1024, 0},
    {"addr_wrap", 4, c_addr_wrap, 0},
    {"addr_wrap_last", 4, c_addr_wrap_last, 0},
    {"addr_ram_end", 4, c_addr_ram_end, 0},
    {"addr_past_ram", 4, c_addr_past_ram, 0},
    {"addr_ram_last", 4, c_addr_ram_last, 0},
    {"addr_mmio", 4, c_addr_mmio, 0},
    {"addr_window", 4, c_addr_window, 0},
    {"addr_lapic", 4, c_addr_lapic, 0},
    {"addr_hole_start", 4, c_addr_hole_start, 0},
    {"addr_hole_end", 4, c_addr_hole_end, 0},
    {"addr_across_hole", 4, c_addr_across_hole, 0},
    {"addr_high", 4, c_addr_high, 0},
    {"ind_addr_mmio", 4, c_ind_addr_mmio, 0},
    {"ind_addr_ram_end", 4, c_ind_addr_ram_end, 0},
    {"buf_on_rings", 4, c_buf_on_rings, 0},
    {"race", 4, c_race, 0},
    {"total_len", 5, c_total_len, 0},
    {"total_max", 5, c_total_max, 0},
    {"big_total", 5, c_big_total, 0},
    {"avail_idx", 6, c_avail_idx, 0},
    {"avail_idx_back", 6, c_avail_idx_back, 0},
    {"head_range", 6, c_head_range, 0},
    {"avail_full", 6, c_avail_full, 0},
    {"qsize0", 7, c_qsize0, 0},
    {"qsize_npot", 7, c_qsize_npot, 0},
    {"qsize_big", 7, c_qsize_big, 0},
    {"qsize_huge", 7, c_qsize_huge, 0},
    {"desc_misaligned", 7, c_desc_misaligned, 0},
    {"avail_misaligned", 7, c_avail_misaligned, 0},
    {"used_misaligned", 7, c_used_misaligned, 0},
    {"desc_mmio", 7, c_desc_mmio, 0},
    {"desc_ram_end", 7, c_desc_ram_end, 0},
    {"avail_wrap", 7, c_avail_wrap, 0},
    {"used_past_ram", 7, c_used_past_ram, 0},
    {"used_high_bits", 7, c_used_high_bits, 0},
    {"rings_overlap", 7, c_rings_overlap, 0},
    {"order", 8, c_order, 0},
    {"ind_order", 8, c_ind_order, 0},
    {"readable_only", 8, c_readable_only, 0},
    {"readable_first", 8, c_readable_first, 0},
};

void guest_main(struct hvm_start_info *si)
{
	const struct hcase *c = NULL;
	char name[32];

	serial_init();
	conf_begin(NAME);
	rng.name = NAME;
	cmdline = guest_cmdline(si);
	read_memmap(si);
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
	want = VIRTIO_F_EVENT_IDX | (c->flags & F_NO_INDIRECT ? 0 : VIRTIO_F_INDIRECT_DESC);
	if (start()) {
		conf_check(0, "bringup", "see above");
		conf_end();
	}
	gprintf("%s: case %s (docs/security.md case %u), features 0x%llx, queue size %u\n", NAME, c->name, c->security,
		(unsigned long long)rng.features, raw.size);
	fill_pattern();
	c->run();
	conf_end();
}
