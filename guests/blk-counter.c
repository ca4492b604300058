/* blk-counter.c - snapshot/restore guest: virtio-blk write, read back and verify, forever, one line per round. */
#include "virtio.h"

/*
 * The guest a snapshot is taken of with block I/O in flight: round N
 * (N = 1, 2, 3, ...) uses sector s = N % RING (RING = min(64, capacity)):
 *   1. read s and check it holds round N-RING's data (all zero while N <= RING:
 *      the test hands over a zeroed image), so the disk file and the guest's
 *      idea of it agree across the snapshot;
 *   2. write round N's data to s;
 *   3. read s back and compare;
 *   4. print "blk N ok".
 * Odd rounds wait in interrupt mode (I/O APIC pin, LAPIC, the ISR), even
 * rounds poll, so a pause catches either. Round N's data: bytes 0-7 = N,
 * bytes 8-15 = s (little-endian), byte j >= 16 = (N * 31 + j) & 0xff.
 * Any failure prints "blk N FAIL: ..." and exits with status 255.
 *
 * Command-line words:
 *   virtio_mmio.device=SIZE@BASE:IRQ[:ID]  the device window (the VMM adds it)
 *   stop=N   print "blk-counter: PASS" after round N and reset (default: forever)
 */
#define NAME "blk-counter"

#define VIRTIO_BLK_T_IN	 0
#define VIRTIO_BLK_T_OUT 1
#define VIRTIO_BLK_S_OK	 0
#define CFG_CAPACITY	 0
#define SECTOR		 512
#define RING		 64
#define NO_STATUS	 0xee

struct blk_req_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};

static struct virtio_dev blk; /* in .bss: its queues are 4 KiB-aligned pages */
static struct blk_req_hdr hdr;
static uint8_t status;
static uint8_t buf[SECTOR] __attribute__((aligned(SECTOR)));
static uint8_t want[SECTOR] __attribute__((aligned(SECTOR)));

/* Round n's data for sector s into p (all zero for round 0: the fresh image). */
static void fill(uint8_t *p, uint64_t n, uint64_t s)
{
	for (unsigned int j = 0; j < SECTOR; j++) {
		if (n == 0)
			p[j] = 0;
		else if (j < 8)
			p[j] = (uint8_t)(n >> (8 * j));
		else if (j < 16)
			p[j] = (uint8_t)(s >> (8 * (j - 8)));
		else
			p[j] = (uint8_t)(n * 31 + j);
	}
}

__attribute__((noreturn)) static void fail(uint64_t n, const char *what, unsigned int v)
{
	gprintf("blk %llu FAIL: %s (%u)\n", (unsigned long long)n, what, v);
	guest_fail(NAME, what);
}

/* One request on sector s, data in buf; returns only when it completed with VIRTIO_BLK_S_OK. */
static void request(uint64_t n, uint32_t type, uint64_t s, unsigned int flags)
{
	struct virtio_buf b[3];
	uint32_t used = 0;

	hdr = (struct blk_req_hdr){.type = type, .reserved = 0, .sector = s};
	status = NO_STATUS;
	b[0] = (struct virtio_buf){&hdr, sizeof(hdr)};
	b[1] = (struct virtio_buf){buf, SECTOR};
	b[2] = (struct virtio_buf){&status, 1};
	if (virtio_transfer(&blk, 0, b, type == VIRTIO_BLK_T_OUT ? 2 : 1, type == VIRTIO_BLK_T_OUT ? 1 : 2, flags,
			    &used))
		fail(n, type == VIRTIO_BLK_T_OUT ? "write: no completion" : "read: no completion", (unsigned int)s);
	if (status != VIRTIO_BLK_S_OK)
		fail(n, "request status", status);
}

/* The first byte where buf differs from round r's data for sector s, or -1. */
static int differs(uint64_t r, uint64_t s)
{
	fill(want, r, s);
	for (unsigned int j = 0; j < SECTOR; j++) {
		if (buf[j] != want[j])
			return (int)j;
	}
	return -1;
}

static void round_n(uint64_t n, uint64_t ring)
{
	uint64_t s = n % ring;
	unsigned int flags = (n & 1) ? VIRTIO_XFER_IRQ : 0;
	int at;

	memset(buf, 0x5a, SECTOR);
	request(n, VIRTIO_BLK_T_IN, s, flags);
	if ((at = differs(n > ring ? n - ring : 0, s)) >= 0) {
		gprintf("blk %llu FAIL: sector %llu byte %d is 0x%02x before the write, expected 0x%02x (round %llu)\n",
			(unsigned long long)n, (unsigned long long)s, at, buf[at], want[at],
			(unsigned long long)(n > ring ? n - ring : 0));
		guest_fail(NAME, "old data");
	}
	fill(buf, n, s);
	request(n, VIRTIO_BLK_T_OUT, s, flags);
	memset(buf, 0x5a, SECTOR);
	request(n, VIRTIO_BLK_T_IN, s, flags);
	if ((at = differs(n, s)) >= 0) {
		gprintf("blk %llu FAIL: sector %llu byte %d reads 0x%02x after the write, expected 0x%02x\n",
			(unsigned long long)n, (unsigned long long)s, at, buf[at], want[at]);
		guest_fail(NAME, "read back");
	}
	gprintf("blk %llu ok\n", (unsigned long long)n);
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	uint64_t capacity = 0, stop = 0, ring;
	struct virtio_cfg_field f[] = {{CFG_CAPACITY, 8, &capacity}};

	serial_init();
	cmdline_get_u64(cmdline, "stop", &stop);
	blk.name = NAME;
	if (virtio_start(&blk, cmdline, VIRTIO_ID_BLOCK, VIRTIO_F_EVENT_IDX, 1))
		guest_fail(NAME, "virtio-blk bring-up");
	if (virtio_config_read(&blk, f, 1) < 0 || capacity < 2)
		guest_fail(NAME, "capacity");
	ring = capacity < RING ? capacity : RING;
	gprintf("%s: capacity %llu sectors, ring of %llu, features 0x%llx, queue size %u\n", NAME,
		(unsigned long long)capacity, (unsigned long long)ring, (unsigned long long)blk.features,
		blk.vq[0].size);
	for (uint64_t n = 1;; n++) {
		round_n(n, ring);
		if (stop && n >= stop)
			guest_pass(NAME);
	}
}
