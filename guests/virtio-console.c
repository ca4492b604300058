/* virtio-console.c - conformance guest for a virtio console (virtio 1.2 section 5.3), single port, on virtio-mmio. */
#include "virtio.h"

/*
 * Command-line words:
 *   virtio_mmio.device=SIZE@BASE:IRQ[:ID]  the device windows (the VMM adds them; the first console is used)
 *   expect=TEXT     the line the test feeds on the console's input (no spaces); absent: any non-empty line
 *   rx_ms=N         how long to wait for each piece of input, in ms (default 10000)
 *   event_idx=0|1   accept VIRTIO_F_EVENT_IDX when offered (default 1)
 *   indirect=0|1    accept VIRTIO_F_INDIRECT_DESC when offered (default 1)
 *
 * VIRTIO_CONSOLE_F_MULTIPORT is never accepted, so the device has port 0
 * only: queue 0 receives, queue 1 transmits (5.3.2). The guest writes
 *   "virtio-console: hello from the guest\n"      (poll mode)
 *   "virtio-console: ready for a line\n"          (interrupt mode)
 * on the console (the host sees them on the console's output), then reads
 * one line from the console's input in interrupt mode (buffers of 32
 * bytes reposted until '\n', at most 128 bytes) and writes back
 *   "virtio-console: got [LINE]\n"
 * LINE being what arrived, without the newline. Checks: bring-up,
 * MULTIPORT not negotiated, cols/rows when VIRTIO_CONSOLE_F_SIZE is
 * offered, each transmit completes, the line arrives (and equals expect=),
 * a reset. The "virtio-console: CHECK ..." lines and the verdict go to the
 * serial port, which is not the console.
 */
#define NAME "virtio-console"

#define VIRTIO_CONSOLE_F_SIZE	   (1ULL << 0)
#define VIRTIO_CONSOLE_F_MULTIPORT (1ULL << 1)
#define CFG_COLS		   0
#define CFG_ROWS		   2
#define RX_Q			   0
#define TX_Q			   1
#define RX_CHUNK		   32
#define LINE_MAX		   128
#define RX_MS			   10000

static struct virtio_dev con; /* in .bss: its queues are 4 KiB-aligned pages */
static uint8_t rx_buf[RX_CHUNK] __attribute__((aligned(64)));
static char tx_buf[LINE_MAX + 32] __attribute__((aligned(64)));
static char line[LINE_MAX + 1];

/* Append s to tx_buf, truncating at its size. */
static void put(const char *s)
{
	size_t n = strlen(tx_buf);

	while (*s && n < sizeof(tx_buf) - 1)
		tx_buf[n++] = *s++;
	tx_buf[n] = '\0';
}

/* Transmit tx_buf (NUL-terminated) as one buffer and check its completion. */
static void transmit(const char *what, unsigned int flags)
{
	struct virtio_buf b = {tx_buf, (uint32_t)strlen(tx_buf)};
	uint32_t used = 0;
	int ok = virtio_transfer(&con, TX_Q, &b, 1, 0, flags, &used) == 0;

	conf_check(ok, what, "%u bytes, %s, used length %u", b.len, ok ? "completed" : "no completion", used);
}

static void say(const char *what, const char *text, unsigned int flags)
{
	tx_buf[0] = '\0';
	put(text);
	transmit(what, flags);
}

static int post_rx(void)
{
	struct virtio_buf b = {rx_buf, RX_CHUNK};

	return virtio_submit(&con, RX_Q, &b, 0, 1, 0, VIRTIO_IRQ) < 0 ? -1 : 0;
}

/* Collect received pieces until '\n' or LINE_MAX bytes; returns the line length or -1. */
static int read_line(unsigned int rx_ms)
{
	unsigned int n = 0, pieces = 0;

	while (pieces++ < LINE_MAX) {
		uint32_t id, len;

		if (virtio_wait(&con, RX_Q, VIRTIO_IRQ, rx_ms, &id, &len))
			return -1;
		if (len > RX_CHUNK) {
			gprintf("%s: receive used length %u > buffer %u\n", NAME, len, RX_CHUNK);
			return -1;
		}
		for (uint32_t i = 0; i < len && n < LINE_MAX; i++) {
			if (rx_buf[i] == '\n') {
				line[n] = '\0';
				return (int)n;
			}
			if (rx_buf[i] != '\r')
				line[n++] = (char)rx_buf[i];
		}
		line[n] = '\0';
		if (n >= LINE_MAX || post_rx())
			return (int)n;
	}
	return (int)n;
}

static void check_config(void)
{
	uint64_t cols = 0, rows = 0;
	struct virtio_cfg_field f[] = {{CFG_COLS, 2, &cols}, {CFG_ROWS, 2, &rows}};

	conf_check(!(con.features & VIRTIO_CONSOLE_F_MULTIPORT), "single_port", "MULTIPORT %s, not accepted",
		   con.offered & VIRTIO_CONSOLE_F_MULTIPORT ? "offered" : "not offered");
	if (!(con.offered & VIRTIO_CONSOLE_F_SIZE)) {
		gprintf("%s: SKIP config_size (VIRTIO_CONSOLE_F_SIZE not offered)\n", NAME);
		return;
	}
	conf_check(virtio_config_read(&con, f, 2) >= 0, "config_size", "%llu cols, %llu rows", (unsigned long long)cols,
		   (unsigned long long)rows);
}

static void check_reset(void)
{
	uint32_t ready[2];
	int ok = virtio_reset(&con) == 0;

	for (unsigned int q = 0; q < 2; q++) {
		virtio_write32(&con, VIRTIO_MMIO_QUEUE_SEL, q);
		ready[q] = virtio_read32(&con, VIRTIO_MMIO_QUEUE_READY);
	}
	conf_check(ok && !ready[0] && !ready[1], "reset", "status 0x%x, QueueReady %u %u", virtio_status(&con),
		   ready[0], ready[1]);
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	uint64_t event_idx = 1, indirect = 1, rx_ms = RX_MS;
	char expect[LINE_MAX + 1];
	int have_expect, n;

	serial_init();
	conf_begin(NAME);
	con.name = NAME;
	cmdline_get_u64(cmdline, "event_idx", &event_idx);
	cmdline_get_u64(cmdline, "indirect", &indirect);
	cmdline_get_u64(cmdline, "rx_ms", &rx_ms);
	have_expect = cmdline_get_str(cmdline, "expect", expect, sizeof(expect)) == 0;
	if (virtio_start(&con, cmdline, VIRTIO_ID_CONSOLE,
			 VIRTIO_CONSOLE_F_SIZE | (event_idx ? VIRTIO_F_EVENT_IDX : 0) |
			     (indirect ? VIRTIO_F_INDIRECT_DESC : 0),
			 2)) {
		conf_check(0, "bringup", "see above");
		conf_end();
	}
	virtio_describe(&con);
	conf_check(1, "bringup", "features 0x%llx, queue sizes %u %u", (unsigned long long)con.features,
		   con.vq[RX_Q].size, con.vq[TX_Q].size);
	check_config();
	/* Receive buffers first (after DRIVER_OK, section 3.1.1), so that no input waits for them. */
	conf_check(post_rx() == 0, "rx_buffer_posted", "%u bytes on queue %u", RX_CHUNK, RX_Q);
	say("tx_poll", NAME ": hello from the guest\n", 0);
	say("tx_irq", NAME ": ready for a line\n", VIRTIO_XFER_IRQ);
	n = read_line(rx_ms > 0xffffffffu ? 0xffffffffu : (unsigned int)rx_ms);
	conf_check(n > 0 && (!have_expect || !strcmp(line, expect)), "rx_line", "%d bytes \"%s\", expected \"%s\"", n,
		   n >= 0 ? line : "", have_expect ? expect : "(any non-empty line)");
	tx_buf[0] = '\0';
	put(NAME ": got [");
	put(n >= 0 ? line : "");
	put("]\n");
	transmit("tx_echo", VIRTIO_XFER_IRQ);
	gprintf("%s: %u/%u notifies rx/tx, %u interrupts\n", NAME, con.vq[RX_Q].notifies, con.vq[TX_Q].notifies,
		con.irq_count);
	check_reset();
	conf_end();
}
