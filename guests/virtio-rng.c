/* virtio-rng.c - conformance guest for a virtio entropy device (virtio 1.2 section 5.4) on virtio-mmio. */
#include "virtio.h"

/*
 * Command-line words:
 *   virtio_mmio.device=SIZE@BASE:IRQ[:ID]  the device windows (the VMM adds them; the first entropy device is used)
 *   event_idx=0|1   accept VIRTIO_F_EVENT_IDX when offered (default 1)
 *   indirect=0|1    accept VIRTIO_F_INDIRECT_DESC when offered (default 1)
 * Checks: requests of 1, 16, 64 and 256 bytes in poll mode, 16 and 512
 * bytes and a two-buffer chain in interrupt mode, one through an indirect
 * table when negotiated: the used length is 1..requested (5.4.6.1: the
 * device places one or more bytes, maybe fewer than asked), the bytes
 * returned (when 16 or more) are neither all zero nor all equal, and two
 * requests do not return the same bytes. Then a reset must read back 0 and
 * leave the queue not ready. Output: "virtio-rng: CHECK what: PASS|FAIL (values)".
 */
#define NAME	"virtio-rng"
#define BUF_MAX 512

static struct virtio_dev rng; /* in .bss: its queues are 4 KiB-aligned pages */
static uint8_t buf[2][BUF_MAX] __attribute__((aligned(64)));

/* One request of `size` bytes split over nbufs buffers; checks the used length and the bytes. */
static void request(const char *what, uint32_t size, unsigned int nbufs, unsigned int flags)
{
	struct virtio_buf b[2] = {{buf[0], size / nbufs}, {buf[0] + size / nbufs, size - size / nbufs}};
	uint32_t len = 0;
	int ok;

	memset(buf[0], 0, size);
	ok = virtio_transfer(&rng, 0, b, 0, nbufs, flags, &len) == 0;
	conf_check(ok && len >= 1 && len <= size, what, "%s, %u bytes asked in %u buffer(s), used length %u",
		   ok ? "completed" : "no completion", size, nbufs, len);
	if (ok && len >= 16 && len <= size)
		conf_check(virtio_looks_random(buf[0], len), what,
			   "bytes look random: first 0x%02x 0x%02x 0x%02x 0x%02x", buf[0][0], buf[0][1], buf[0][2],
			   buf[0][3]);
}

/*
 * Two 64-byte requests must differ. Only when both answers are long enough
 * to tell (16 bytes or more): a rate-limited device (brisk's --rng=64) may
 * answer 1 byte each, and two random bytes are equal once in 256.
 */
static void differ(unsigned int flags)
{
	struct virtio_buf b0 = {buf[0], 64}, b1 = {buf[1], 64};
	uint32_t l0 = 0, l1 = 0;
	int ok;

	memset(buf, 0, sizeof(buf));
	ok = virtio_transfer(&rng, 0, &b0, 0, 1, flags, &l0) == 0 &&
	     virtio_transfer(&rng, 0, &b1, 0, 1, flags, &l1) == 0;
	if (ok && (l0 < 16 || l1 < 16)) {
		gprintf("%s: SKIP two_requests_differ (used lengths %u and %u: too short to compare)\n", NAME, l0, l1);
		return;
	}
	conf_check(ok && memcmp(buf[0], buf[1], 16), "two_requests_differ", "used lengths %u and %u", l0, l1);
}

static void check_reset(void)
{
	uint32_t ready;
	int ok = virtio_reset(&rng) == 0;

	virtio_write32(&rng, VIRTIO_MMIO_QUEUE_SEL, 0);
	ready = virtio_read32(&rng, VIRTIO_MMIO_QUEUE_READY);
	conf_check(ok && ready == 0, "reset", "status 0x%x, QueueReady %u", virtio_status(&rng), ready);
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	uint64_t event_idx = 1, indirect = 1, want = 0;

	serial_init();
	conf_begin(NAME);
	rng.name = NAME;
	cmdline_get_u64(cmdline, "event_idx", &event_idx);
	cmdline_get_u64(cmdline, "indirect", &indirect);
	want = (event_idx ? VIRTIO_F_EVENT_IDX : 0) | (indirect ? VIRTIO_F_INDIRECT_DESC : 0);
	if (virtio_start(&rng, cmdline, VIRTIO_ID_RNG, want, 1)) {
		conf_check(0, "bringup", "see above");
		conf_end();
	}
	virtio_describe(&rng);
	conf_check(1, "bringup", "features 0x%llx, queue size %u", (unsigned long long)rng.features, rng.vq[0].size);

	request("poll_1", 1, 1, 0);
	request("poll_16", 16, 1, 0);
	request("poll_64", 64, 1, 0);
	request("poll_256", 256, 1, 0);
	rng.irq_status = 0;
	request("irq_16", 16, 1, VIRTIO_XFER_IRQ);
	conf_check(rng.irq_count > 0 && (rng.irq_status & VIRTIO_INT_USED), "irq_interrupt_status",
		   "%u interrupts, InterruptStatus seen 0x%x", rng.irq_count, rng.irq_status);
	request("irq_512", 512, 1, VIRTIO_XFER_IRQ);
	request("irq_two_buffers", 64, 2, VIRTIO_XFER_IRQ);
	if (rng.features & VIRTIO_F_INDIRECT_DESC)
		request("irq_indirect", 64, 2, VIRTIO_XFER_IRQ | VIRTIO_XFER_INDIRECT);
	else
		gprintf("%s: SKIP indirect (INDIRECT_DESC not negotiated)\n", NAME);
	differ(VIRTIO_XFER_IRQ);
	gprintf("%s: %u notifies, %u suppressed, %u interrupts\n", NAME, rng.vq[0].notifies, rng.vq[0].suppressed,
		rng.irq_count);
	check_reset();
	conf_end();
}
