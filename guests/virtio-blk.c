/* virtio-blk.c - conformance guest for a virtio block device (virtio 1.2 section 5.2) on virtio-mmio. */
#include "virtio.h"

/*
 * Command-line words:
 *   virtio_mmio.device=SIZE@BASE:IRQ[:ID]  the device windows (the VMM adds them; the first block device is used)
 *   pattern=P       the image's content (required): every byte of sector N is (P + N) & 0xff, for every
 *                   sector of an image of at least 8 sectors (the test writes the image so)
 *   id=NAME         expected GET_ID answer (the disk's serial/id, at most 20 bytes); absent: printed only
 *   sectors=N       expected capacity in 512-byte sectors; absent: only checked >= 8
 *   ro=0|1          the disk is read-only: VIRTIO_BLK_F_RO must be offered and writes must fail with IOERR
 *                   (default 0: RO must not be offered and writes must succeed)
 *   event_idx=0|1   accept VIRTIO_F_EVENT_IDX when offered (default 1)
 *   indirect=0|1    accept VIRTIO_F_INDIRECT_DESC when offered (default 1)
 *   window=N        use the block device among the virtio_mmio.device= words from the Nth on (0-based;
 *                   default 0): with several disks, window=1 tests the second one
 *   stress=N        after the other checks, N single-sector reads in interrupt mode, one at a time (what a
 *                   Linux guest's queue-depth-1 random reads do), each checked: a lost notification or
 *                   interrupt shows as a timeout at request K (check "stress")
 *   hold=1          after the poll-mode checks (sectors 2-3 written, flushed), print "virtio-blk: HOLD" and
 *                   wait for one byte on the UART (bounded, ~10^6 polls) before going on: the host can
 *                   kill the VM or change the image at a known point
 *
 * What a read-write run leaves in the image: sectors 2, 3, 4 and 5 hold the
 * write pattern, byte j of sector N = (0xa5 + N + j) & 0xff; every other
 * sector is untouched. A read-only run writes nothing.
 *
 * Checks (5.2.4, 5.2.6): configuration (capacity, blk_size, seg_max,
 * size_max when offered) read with the generation retry; GET_ID; in poll
 * mode: read sector 0, sectors 0-1 in one request over two data buffers,
 * the last sector; reads at capacity, across the end, at 2^55 (whose byte
 * offset overflows 64 bits to 0) and at 2^64-1 -> IOERR; an unknown request
 * type -> UNSUPP; every successful read's used length is its data + 1
 * (the status byte: bytes written, section 2.7.8); write sectors 2-3 and read them back (ro: IOERR and the
 * sector unchanged); FLUSH when VIRTIO_BLK_F_FLUSH is offered. In interrupt
 * mode: read sector 0, write sector 4 and read it back, FLUSH. Through an
 * indirect table when negotiated: read sector 1, write sector 5 and read it
 * back. Then a reset. Output: "virtio-blk: CHECK what: PASS|FAIL (values)".
 */
#define NAME "virtio-blk"

/* Request types, status values and features (section 5.2.6, 5.2.3). */
#define VIRTIO_BLK_T_IN	    0
#define VIRTIO_BLK_T_OUT    1
#define VIRTIO_BLK_T_FLUSH  4
#define VIRTIO_BLK_T_GET_ID 8
#define VIRTIO_BLK_T_BOGUS  0xff /* no such type */
#define VIRTIO_BLK_S_OK	    0
#define VIRTIO_BLK_S_IOERR  1
#define VIRTIO_BLK_S_UNSUPP 2
#define VIRTIO_BLK_ID_BYTES 20

#define VIRTIO_BLK_F_SIZE_MAX (1ULL << 1)
#define VIRTIO_BLK_F_SEG_MAX  (1ULL << 2)
#define VIRTIO_BLK_F_RO	      (1ULL << 5)
#define VIRTIO_BLK_F_BLK_SIZE (1ULL << 6)
#define VIRTIO_BLK_F_FLUSH    (1ULL << 9)

/* Configuration offsets (struct virtio_blk_config, 5.2.4). */
#define CFG_CAPACITY 0
#define CFG_SIZE_MAX 8
#define CFG_SEG_MAX  12
#define CFG_BLK_SIZE 20

#define SECTOR	    512
#define MIN_SECTORS 8
#define NO_STATUS   0xee /* what the status byte holds until the device writes it */

struct blk_req_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};

static struct virtio_dev blk; /* in .bss: its queues are 4 KiB-aligned pages */
static struct blk_req_hdr hdr;
static uint8_t status;
static uint8_t data[2 * SECTOR] __attribute__((aligned(SECTOR)));

static struct {
	uint64_t pattern, sectors, ro;
	uint64_t capacity, seg_max;
	int have_pattern;
} want;

/* "PREFIX_WHAT" for a check name (printed at once, so one buffer serves). */
static const char *nm(const char *prefix, const char *what)
{
	static char b[64];
	size_t n = 0;

	for (; *prefix && n < sizeof(b) - 2; prefix++)
		b[n++] = *prefix;
	b[n++] = '_';
	for (; *what && n < sizeof(b) - 1; what++)
		b[n++] = *what;
	b[n] = '\0';
	return b;
}

static uint8_t read_byte(uint64_t sector)
{
	return (uint8_t)(want.pattern + sector);
}

static uint8_t write_byte(uint64_t sector, unsigned int j)
{
	return (uint8_t)(0xa5 + sector + j);
}

/*
 * One request: header (readable), data over nseg buffers (readable for OUT,
 * writable for IN and GET_ID, none for other types), status (writable).
 * Returns 0 when the device completed it (status in `status`), -1 if not.
 */
static int request(uint32_t type, uint64_t sector, uint32_t len, unsigned int nseg, unsigned int flags, uint32_t *used)
{
	struct virtio_buf b[4];
	unsigned int n = 0, n_out;
	uint32_t half = nseg == 2 ? len / 2 : len;

	hdr = (struct blk_req_hdr){.type = type, .reserved = 0, .sector = sector};
	status = NO_STATUS;
	b[n++] = (struct virtio_buf){&hdr, sizeof(hdr)};
	if (type == VIRTIO_BLK_T_OUT) {
		b[n++] = (struct virtio_buf){data, half};
		if (nseg == 2)
			b[n++] = (struct virtio_buf){data + half, len - half};
	}
	n_out = n;
	if (type == VIRTIO_BLK_T_IN || type == VIRTIO_BLK_T_GET_ID) {
		b[n++] = (struct virtio_buf){data, half};
		if (nseg == 2)
			b[n++] = (struct virtio_buf){data + half, len - half};
	}
	b[n++] = (struct virtio_buf){&status, 1};
	*used = 0;
	return virtio_transfer(&blk, 0, b, n_out, n - n_out, flags, used);
}

/* What byte i of data[] should hold after reading from `first` on (image or write pattern). */
static uint8_t expected(uint64_t first, unsigned int i, int written)
{
	uint64_t s = first + i / SECTOR;

	return written ? write_byte(s, i % SECTOR) : read_byte(s);
}

/*
 * Read nsect sectors at `sector` (over nseg buffers) and compare with the
 * image or write pattern; the used length must be data + status byte.
 */
/* The first byte of data[0 .. nsect*512) that differs from what reading from `first` should give, or -1. */
static int mismatch(uint64_t first, unsigned int nsect, int written)
{
	for (unsigned int i = 0; i < nsect * SECTOR; i++) {
		if (data[i] != expected(first, i, written))
			return (int)i;
	}
	return -1;
}

static void check_read(const char *prefix, const char *what, uint64_t sector, unsigned int nsect, unsigned int nseg,
		       unsigned int flags, int written)
{
	uint32_t used, want_used = nsect * SECTOR + 1;
	int done, bad;
	unsigned int at;

	memset(data, 0, sizeof(data));
	done = request(VIRTIO_BLK_T_IN, sector, nsect * SECTOR, nseg, flags, &used) == 0;
	bad = done && status == VIRTIO_BLK_S_OK ? mismatch(sector, nsect, written) : -1;
	at = bad < 0 ? 0 : (unsigned int)bad;
	conf_check(done && status == VIRTIO_BLK_S_OK && bad < 0 && used == want_used, nm(prefix, what),
		   "sector %llu x%u in %u buffer(s): %s, status %u, used length %u (expected %u), byte %u is 0x%02x "
		   "(expected 0x%02x)",
		   (unsigned long long)sector, nsect, nseg, done ? "completed" : "no completion", status, used,
		   want_used, at, data[at], expected(sector, at, written));
}

/* A request the device must refuse with `expect` (IOERR, UNSUPP). */
static void check_refused(const char *prefix, const char *what, uint32_t type, uint64_t sector, uint8_t expect,
			  unsigned int flags)
{
	uint32_t used;
	int done = request(type, sector, type == VIRTIO_BLK_T_IN || type == VIRTIO_BLK_T_OUT ? SECTOR : 0, 1, flags,
			   &used) == 0;

	conf_check(done && status == expect, nm(prefix, what), "type %u sector 0x%llx: %s, status %u (expected %u)",
		   type, (unsigned long long)sector, done ? "completed" : "no completion", status, expect);
}

/* Write nsect sectors at `sector` with the write pattern; read them back (rw) or expect IOERR and no change (ro). */
static void check_write(const char *prefix, uint64_t sector, unsigned int nsect, unsigned int flags)
{
	uint32_t used;
	int done;

	for (unsigned int i = 0; i < nsect * SECTOR; i++)
		data[i] = write_byte(sector + i / SECTOR, i % SECTOR);
	done = request(VIRTIO_BLK_T_OUT, sector, nsect * SECTOR, nsect >= 2 && want.seg_max >= 2 ? 2 : 1, flags,
		       &used) == 0;
	if (want.ro) {
		conf_check(done && status == VIRTIO_BLK_S_IOERR, nm(prefix, "write_ro_ioerr"),
			   "sector %llu x%u: %s, status %u (expected %u)", (unsigned long long)sector, nsect,
			   done ? "completed" : "no completion", status, VIRTIO_BLK_S_IOERR);
		check_read(prefix, "ro_unchanged", sector, nsect, 1, flags, 0);
		return;
	}
	conf_check(done && status == VIRTIO_BLK_S_OK, nm(prefix, "write"), "sector %llu x%u: %s, status %u, used %u",
		   (unsigned long long)sector, nsect, done ? "completed" : "no completion", status, used);
	check_read(prefix, "write_readback", sector, nsect, 1, flags, 1);
}

static void check_flush(const char *prefix, unsigned int flags)
{
	uint32_t used;
	int done;

	if (!(blk.features & VIRTIO_BLK_F_FLUSH)) {
		gprintf("%s: SKIP %s (VIRTIO_BLK_F_FLUSH not offered)\n", NAME, nm(prefix, "flush"));
		return;
	}
	done = request(VIRTIO_BLK_T_FLUSH, 0, 0, 1, flags, &used) == 0;
	conf_check(done && status == VIRTIO_BLK_S_OK, nm(prefix, "flush"), "%s, status %u, used %u",
		   done ? "completed" : "no completion", status, used);
}

static void check_config(const char *cmdline)
{
	uint64_t size_max = 0, blk_size = SECTOR;
	struct virtio_cfg_field f[] = {{CFG_CAPACITY, 8, &want.capacity},
				       {CFG_SIZE_MAX, 4, &size_max},
				       {CFG_SEG_MAX, 4, &want.seg_max},
				       {CFG_BLK_SIZE, 4, &blk_size}};
	int tries = virtio_config_read(&blk, f, 4);

	want.sectors = 0;
	cmdline_get_u64(cmdline, "sectors", &want.sectors);
	conf_check(tries >= 0 && want.capacity >= MIN_SECTORS && (!want.sectors || want.capacity == want.sectors),
		   "config_capacity", "%llu sectors (expected %llu; 0: any >= %u), generation retries %d",
		   (unsigned long long)want.capacity, (unsigned long long)want.sectors, MIN_SECTORS, tries);
	if (blk.features & VIRTIO_BLK_F_BLK_SIZE)
		conf_check(blk_size >= SECTOR && !(blk_size & (blk_size - 1)), "config_blk_size", "%llu",
			   (unsigned long long)blk_size);
	if (blk.features & VIRTIO_BLK_F_SEG_MAX)
		conf_check(want.seg_max >= 1, "config_seg_max", "%llu", (unsigned long long)want.seg_max);
	else
		want.seg_max = 2; /* no limit announced */
	if (blk.features & VIRTIO_BLK_F_SIZE_MAX)
		conf_check(size_max >= SECTOR, "config_size_max", "%llu", (unsigned long long)size_max);
	conf_check(!!(blk.offered & VIRTIO_BLK_F_RO) == !!want.ro, "feature_ro", "RO %s, ro=%llu on the command line",
		   blk.offered & VIRTIO_BLK_F_RO ? "offered" : "not offered", (unsigned long long)want.ro);
}

static void check_get_id(const char *cmdline)
{
	char id[VIRTIO_BLK_ID_BYTES + 1], expect[VIRTIO_BLK_ID_BYTES + 1];
	uint32_t used;
	int done, have = cmdline_get_str(cmdline, "id", expect, sizeof(expect)) == 0;

	memset(data, 0, sizeof(data));
	done = request(VIRTIO_BLK_T_GET_ID, 0, VIRTIO_BLK_ID_BYTES, 1, 0, &used) == 0;
	/* The string is NUL-terminated only when shorter than 20 bytes (5.2.6). */
	memcpy(id, data, VIRTIO_BLK_ID_BYTES);
	id[VIRTIO_BLK_ID_BYTES] = '\0';
	conf_check(done && status == VIRTIO_BLK_S_OK && (!have || !strcmp(id, expect)), "get_id",
		   "%s, status %u, id \"%s\", expected \"%s\"", done ? "completed" : "no completion", status, id,
		   have ? expect : "(any: no id= given)");
}

/* Reads past the end, with and without 64-bit overflow of the byte offset, and a bogus type. */
static void check_bounds(void)
{
	check_refused("poll", "read_at_capacity_ioerr", VIRTIO_BLK_T_IN, want.capacity, VIRTIO_BLK_S_IOERR, 0);
	check_refused("poll", "read_2p55_ioerr", VIRTIO_BLK_T_IN, 1ULL << 55, VIRTIO_BLK_S_IOERR, 0);
	check_refused("poll", "read_max_ioerr", VIRTIO_BLK_T_IN, UINT64_MAX, VIRTIO_BLK_S_IOERR, 0);
	check_refused("poll", "unknown_type_unsupp", VIRTIO_BLK_T_BOGUS, 0, VIRTIO_BLK_S_UNSUPP, 0);
	{
		uint32_t used;
		int done = request(VIRTIO_BLK_T_IN, want.capacity - 1, 2 * SECTOR, 1, 0, &used) == 0;

		conf_check(done && status == VIRTIO_BLK_S_IOERR, "poll_read_across_end_ioerr",
			   "sector %llu x2: %s, status %u (expected %u)", (unsigned long long)(want.capacity - 1),
			   done ? "completed" : "no completion", status, VIRTIO_BLK_S_IOERR);
	}
}

static void run_poll(void)
{
	check_read("poll", "read_sector0", 0, 1, 1, 0, 0);
	if (want.seg_max >= 2)
		check_read("poll", "read_2_sectors_2_buffers", 0, 2, 2, 0, 0);
	check_read("poll", "read_last_sector", want.capacity - 1, 1, 1, 0, 0);
	check_bounds();
	check_write("poll", 2, 2, 0);
	check_flush("poll", 0);
}

/* hold=1: the host acts (kill -9, truncates the image) while the guest waits for one byte on the UART. */
static void hold(const char *cmdline)
{
	uint64_t on = 0;
	unsigned long polls = 0;

	cmdline_get_u64(cmdline, "hold", &on);
	if (!on)
		return;
	gprintf("%s: HOLD\n", NAME);
	while (serial_trygetc() < 0 && ++polls < 1000000ul)
		cpu_relax();
	gprintf("%s: %s\n", NAME, polls < 1000000ul ? "GO" : "hold timed out");
}

/* window=N: the command line from the Nth virtio_mmio.device= word on (virtio_find takes the first match). */
static const char *from_window(const char *cmdline)
{
	static const char word[] = "virtio_mmio.device=";
	uint64_t n = 0;
	const char *p = cmdline;

	cmdline_get_u64(cmdline, "window", &n);
	for (; *p; p++) {
		size_t i = 0;

		while (word[i] && p[i] == word[i])
			i++;
		if (!word[i] && (p == cmdline || p[-1] == ' ') && n-- == 0)
			return p;
	}
	return cmdline;
}

static void run_irq(void)
{
	blk.irq_status = 0;
	check_read("irq", "read_sector0", 0, 1, 1, VIRTIO_XFER_IRQ, 0);
	conf_check(blk.irq_count > 0 && (blk.irq_status & VIRTIO_INT_USED), "irq_interrupt_status",
		   "%u interrupts, InterruptStatus seen 0x%x", blk.irq_count, blk.irq_status);
	check_write("irq", 4, 1, VIRTIO_XFER_IRQ);
	check_flush("irq", VIRTIO_XFER_IRQ);
}

static void run_indirect(void)
{
	if (!(blk.features & VIRTIO_F_INDIRECT_DESC)) {
		gprintf("%s: SKIP indirect (INDIRECT_DESC not negotiated)\n", NAME);
		return;
	}
	check_read("indirect", "read_sector1", 1, 1, 1, VIRTIO_XFER_IRQ | VIRTIO_XFER_INDIRECT, 0);
	check_write("indirect", 5, 1, VIRTIO_XFER_IRQ | VIRTIO_XFER_INDIRECT);
}

/* stress=N: N interrupt-mode reads of scattered sectors; stops at the first failure. */
static void run_stress(const char *cmdline)
{
	uint64_t n = 0, i, sector = 0;
	unsigned int irqs = blk.irq_count;

	cmdline_get_u64(cmdline, "stress", &n);
	if (!n)
		return;
	for (i = 0; i < n; i++) {
		uint32_t used;

		sector = (i * 7919 + 3) % want.capacity;
		if (request(VIRTIO_BLK_T_IN, sector, SECTOR, 1, VIRTIO_XFER_IRQ, &used) || status != VIRTIO_BLK_S_OK ||
		    mismatch(sector, 1, !want.ro && sector >= 2 && sector <= 5) >= 0)
			break;
	}
	conf_check(i == n, "stress", "%llu of %llu interrupt-mode reads completed (last sector %llu), %u interrupts",
		   (unsigned long long)i, (unsigned long long)n, (unsigned long long)sector, blk.irq_count - irqs);
}

static void check_reset(void)
{
	uint32_t ready;
	int ok = virtio_reset(&blk) == 0;

	virtio_write32(&blk, VIRTIO_MMIO_QUEUE_SEL, 0);
	ready = virtio_read32(&blk, VIRTIO_MMIO_QUEUE_READY);
	conf_check(ok && ready == 0, "reset", "status 0x%x, QueueReady %u", virtio_status(&blk), ready);
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	uint64_t event_idx = 1, indirect = 1, feats;

	serial_init();
	conf_begin(NAME);
	blk.name = NAME;
	cmdline_get_u64(cmdline, "event_idx", &event_idx);
	cmdline_get_u64(cmdline, "indirect", &indirect);
	cmdline_get_u64(cmdline, "ro", &want.ro);
	want.have_pattern = cmdline_get_u64(cmdline, "pattern", &want.pattern) == 0;
	conf_check(want.have_pattern, "pattern_given", "pattern=0x%llx", (unsigned long long)want.pattern);
	feats = VIRTIO_BLK_F_SIZE_MAX | VIRTIO_BLK_F_SEG_MAX | VIRTIO_BLK_F_RO | VIRTIO_BLK_F_BLK_SIZE |
		VIRTIO_BLK_F_FLUSH | (event_idx ? VIRTIO_F_EVENT_IDX : 0) | (indirect ? VIRTIO_F_INDIRECT_DESC : 0);
	if (!want.have_pattern || virtio_start(&blk, from_window(cmdline), VIRTIO_ID_BLOCK, feats, 1)) {
		conf_check(0, "bringup", "see above");
		conf_end();
	}
	virtio_describe(&blk);
	conf_check(1, "bringup", "features 0x%llx, queue size %u", (unsigned long long)blk.features, blk.vq[0].size);
	check_config(cmdline);
	if (want.capacity < MIN_SECTORS)
		conf_end();
	check_get_id(cmdline);
	run_poll();
	hold(cmdline);
	run_irq();
	run_indirect();
	run_stress(cmdline);
	gprintf("%s: %u notifies, %u suppressed, %u interrupts\n", NAME, blk.vq[0].notifies, blk.vq[0].suppressed,
		blk.irq_count);
	check_reset();
	conf_end();
}
