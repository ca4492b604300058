/* virtio-net.c - conformance and hostile-frame guest for a virtio network device (virtio 1.2 section 5.1). */
#include "virtio.h"

/*
 * Command-line words:
 *   virtio_mmio.device=SIZE@BASE:IRQ[:ID]  the device windows (the first network device is used)
 *   peer=echo|slirp  what is on the other side (default echo):
 *                    echo   a test helper on the tap that sends every frame back with the destination set
 *                           to the source and the source set to ECHO_MAC (02:ec:40:00:00:01)
 *                    slirp  brisk's user-mode network: an ARP request for the gateway gets a reply
 *   mrg=0|1          accept VIRTIO_NET_F_MRG_RXBUF (default 1): receive buffers of 512 bytes, frames
 *                    spread over several (num_buffers); 0: buffers of 1526 bytes, one per frame
 *   mac=0xMMMMMMMMMMMM  the MAC config space must hold (absent: printed only)
 *   ip=0xAABBCCDD gw=0xAABBCCDD  slirp: the guest's and the gateway's IPv4 addresses
 *   flood=N          instead of the checks: transmit N frames, one every flood_gap_ms (default 10) ms (the host
 *                    may delete the tap or stop the helper meanwhile); every chain must come back (no hang)
 *   flood_wait=1     the flood starts only when a byte arrives on COM1 ("virtio-net: flood waits" first), so
 *                    that the host can stop the helper before it, however fast the flood would end
 *
 * Checks: MAC, STATUS and MTU offered; config space mac, status LINK_UP, mtu 1500; with no receive
 * buffer posted, a frame sent (an ARP request) and its answer waits in the device: once buffers are
 * posted it arrives, the device did not hang; hostile transmit chains (a zero-length frame, a frame one
 * byte above MTU + 18, a segmentation offload that was not negotiated, a frame shorter than an Ethernet
 * header) each complete with used length 0 (dropped: brisk counts them, the test reads the counters);
 * echo: a 1514-byte frame comes back byte for byte (over several buffers with mrg=1, num_buffers
 * checked). Output: "virtio-net: CHECK what: PASS|FAIL (values)".
 */
#define NAME "virtio-net"

#define VIRTIO_NET_F_MTU       (1ULL << 3)
#define VIRTIO_NET_F_MAC       (1ULL << 5)
#define VIRTIO_NET_F_MRG_RXBUF (1ULL << 15)
#define VIRTIO_NET_F_STATUS    (1ULL << 16)
#define VIRTIO_NET_S_LINK_UP   1
#define GSO_TCPV4	       1

#define RXQ	    0
#define TXQ	    1
#define HDR	    12
#define ETH	    14
#define MTU	    1500
#define RX_BUFS	    8
#define RX_BUF_BIG  (HDR + ETH + MTU) /* without MRG_RXBUF: one buffer holds a whole frame */
#define RX_BUF_MRG  512
#define FRAME_MAX   (ETH + MTU + 4 + 1)
#define WAIT_MS	    3000
#define ETHERTYPE_X 0x88b5 /* IEEE 802 local experimental: nobody on the host acts on it */

static const uint8_t ECHO_MAC[6] = {0x02, 0xec, 0x40, 0x00, 0x00, 0x01};

struct net_hdr {
	uint8_t flags, gso_type;
	uint16_t hdr_len, gso_size, csum_start, csum_offset, num_buffers;
};

static struct virtio_dev net; /* in .bss: its queues are 4 KiB-aligned pages */
static uint8_t rxbuf[RX_BUFS][RX_BUF_BIG] __attribute__((aligned(64)));
static int rx_of_head[VIRTQ_MAX_SIZE]; /* used id -> rxbuf index */
static unsigned int rx_size;
static uint8_t frame[FRAME_MAX + 16], got[FRAME_MAX + 64];
static struct net_hdr txhdr;
static uint8_t mac[6];
static int slirp, mrg;
static uint64_t flood_n, flood_gap_ms = 10, flood_wait;
static uint8_t tiny[32] __attribute__((aligned(64)));
static uint64_t my_ip = 0xc0000210, gw_ip = 0xc0000201; /* 192.0.2.16 -> 192.0.2.1 unless told */

static void put16be(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32be(uint8_t *p, uint64_t v)
{
	put16be(p, (uint32_t)(v >> 16));
	put16be(p + 2, (uint32_t)v);
}

static int post_rx(unsigned int i)
{
	struct virtio_buf b = {rxbuf[i], rx_size};
	int head;

	memset(rxbuf[i], 0xee, rx_size);
	head = virtio_submit(&net, RXQ, &b, 0, 1, 0, VIRTIO_POLL);
	if (head >= 0)
		rx_of_head[head] = (int)i;
	return head;
}

/*
 * The next received frame, reassembled from num_buffers buffers, into got[] (header included);
 * returns its length with the header, or -1. Each buffer is posted again.
 */
static int receive(unsigned int *nbufs)
{
	uint32_t id, len, n = 0, total = 0;
	const struct net_hdr *h = (const struct net_hdr *)got;

	do {
		int i;

		if (virtio_wait(&net, RXQ, VIRTIO_POLL, WAIT_MS, &id, &len))
			return -1;
		i = rx_of_head[id];
		if (len > rx_size || total + len > sizeof(got)) {
			gprintf("%s: used length %u of a %u-byte buffer\n", NAME, len, rx_size);
			return -1;
		}
		memcpy(got + total, rxbuf[i], len);
		total += len;
		post_rx((unsigned int)i);
		n++;
	} while (total >= HDR && n < h->num_buffers && n < RX_BUFS);
	*nbufs = n;
	return (int)total;
}

/* Receives until a frame from `src` (skipping what else the host sends: at most 16). */
static int receive_from(const uint8_t *src, unsigned int *nbufs)
{
	for (int tries = 0; tries < 16; tries++) {
		int n = receive(nbufs);

		if (n < 0)
			return -1;
		if (n >= HDR + ETH && (!src || !memcmp(got + HDR + 6, src, 6)))
			return n;
		gprintf("%s: skipping a %d-byte frame from %02x:%02x:%02x:%02x:%02x:%02x\n", NAME, n - HDR,
			got[HDR + 6], got[HDR + 7], got[HDR + 8], got[HDR + 9], got[HDR + 10], got[HDR + 11]);
	}
	return -1;
}

/* One transmit chain: the header and `len` bytes of frame[] in two buffers. Returns the used length or -1. */
static int transmit(uint32_t len, unsigned int flags)
{
	struct virtio_buf b[2] = {{&txhdr, HDR}, {frame, len}};
	uint32_t used = 0;

	if (virtio_transfer(&net, TXQ, b, len ? 2 : 1, 0, flags, &used))
		return -1;
	return (int)used;
}

/* An ARP request for gw_ip from my_ip (RFC 826), broadcast. */
static uint32_t arp_request(void)
{
	memset(frame, 0xff, 6);
	memcpy(frame + 6, mac, 6);
	put16be(frame + 12, 0x0806);
	put16be(frame + 14, 1);	     /* Ethernet */
	put16be(frame + 16, 0x0800); /* IPv4 */
	frame[18] = 6;
	frame[19] = 4;
	put16be(frame + 20, 1); /* request */
	memcpy(frame + 22, mac, 6);
	put32be(frame + 28, my_ip);
	memset(frame + 32, 0, 6);
	put32be(frame + 38, gw_ip);
	return 42;
}

static void check_config(const char *cmdline)
{
	uint64_t m[6], status = 0, mtu = 0;
	struct virtio_cfg_field f[8] = {
	    {0, 1, &m[0]}, {1, 1, &m[1]}, {2, 1, &m[2]},   {3, 1, &m[3]},
	    {4, 1, &m[4]}, {5, 1, &m[5]}, {6, 2, &status}, {10, 2, &mtu},
	};
	uint64_t want = 0, have = 0;
	int ok = virtio_config_read(&net, f, 8) >= 0;

	for (int i = 0; i < 6; i++) {
		mac[i] = (uint8_t)m[i];
		have = have << 8 | mac[i];
	}
	conf_check(ok && !(mac[0] & 1) && have, "config_mac", "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2],
		   mac[3], mac[4], mac[5]);
	if (cmdline_get_u64(cmdline, "mac", &want) == 0)
		conf_check(have == want, "config_mac_expected", "0x%llx, expected 0x%llx", (unsigned long long)have,
			   (unsigned long long)want);
	conf_check(status & VIRTIO_NET_S_LINK_UP, "config_status_link_up", "status 0x%llx", (unsigned long long)status);
	conf_check(mtu == MTU, "config_mtu", "mtu %llu", (unsigned long long)mtu);
}

/* flood_n frames, flood_gap_ms apart: each chain must complete, the link may go down meanwhile. */
static void flood(void)
{
	unsigned int sent = 0, done = 0;
	uint64_t status = 0;
	struct virtio_cfg_field f = {6, 2, &status};

	memset(&txhdr, 0, sizeof(txhdr));
	for (; sent < flood_n; sent++) {
		done += transmit(arp_request(), 0) == 0;
		if (flood_gap_ms)
			virtio_poll_status(&net, VIRTIO_STATUS_FAILED, (unsigned int)flood_gap_ms);
	}
	virtio_config_read(&net, &f, 1);
	conf_check(done == sent, "tx_flood_completed", "%u of %u chains completed, link status now 0x%llx", done, sent,
		   (unsigned long long)status);
}

/* Hostile transmit chains: each must come back (used length 0) and the device go on. */
static void hostile_tx(void)
{
	int used;

	memset(&txhdr, 0, sizeof(txhdr));
	used = transmit(0, 0);
	conf_check(used == 0, "tx_zero_length_dropped", "used length %d", used);
	arp_request();
	memset(frame + 42, 0x5a, sizeof(frame) - 42);
	used = transmit(FRAME_MAX, 0);
	conf_check(used == 0, "tx_oversized_dropped", "%u bytes, used length %d", FRAME_MAX, used);
	txhdr.gso_type = GSO_TCPV4;
	txhdr.gso_size = 1448;
	used = transmit(60, 0);
	conf_check(used == 0, "tx_unnegotiated_gso_dropped", "used length %d", used);
	memset(&txhdr, 0, sizeof(txhdr));
	used = transmit(6, 0);
	conf_check(used == 0, "tx_runt_dropped", "used length %d", used);
}

/*
 * The answer waiting in the device meets a receive chain too small for it: without mrg (32 bytes, less than
 * header + frame) the frame is dropped, with mrg (8 bytes, less than the header: 5.1.6.3.1) the chain is
 * malformed; either way the chain comes back with used length 0 and nothing hangs.
 */
static void too_small(void)
{
	struct virtio_buf b = {tiny, mrg ? 8 : sizeof(tiny)};
	uint32_t id, len = 99;
	int head = virtio_submit(&net, RXQ, &b, 0, 1, 0, VIRTIO_POLL);
	int ok = head >= 0 && virtio_wait(&net, RXQ, VIRTIO_POLL, WAIT_MS, &id, &len) == 0 && id == (uint32_t)head;

	conf_check(ok && len == 0, mrg ? "rx_chain_below_header_returned" : "rx_chain_too_small_returned",
		   "%u-byte buffer, used length %u", b.len, len);
}

/* slirp: the ARP request sent before any buffer was posted is answered by the gateway. */
static void check_arp_reply(void)
{
	unsigned int nbufs = 0;
	int n = receive_from(0, &nbufs);
	const uint8_t *e = got + HDR;

	conf_check(n == HDR + 42 || (n >= HDR + 42 && n <= HDR + 64), "rx_arp_reply_length", "%d bytes", n);
	conf_check(n >= HDR + 42 && !memcmp(e, mac, 6) && e[12] == 0x08 && e[13] == 0x06 && e[20] == 0 && e[21] == 2,
		   "rx_arp_reply", "to %02x:%02x:..:%02x, type 0x%02x%02x, op %u", e[0], e[1], e[5], e[12], e[13],
		   e[21]);
	conf_check(n >= HDR + 42 && e[28] == (uint8_t)(gw_ip >> 24) && e[31] == (uint8_t)gw_ip, "rx_arp_sender_gateway",
		   "sender %u.%u.%u.%u, gateway MAC %02x:%02x:%02x:%02x:%02x:%02x", e[28], e[29], e[30], e[31], e[22],
		   e[23], e[24], e[25], e[26], e[27]);
}

/* echo: the frame comes back with the addresses swapped and every other byte equal. */
static void check_echo(const char *what, uint32_t len, unsigned int min_bufs)
{
	unsigned int nbufs = 0;
	int n = receive_from(ECHO_MAC, &nbufs);
	const struct net_hdr *h = (const struct net_hdr *)got;

	conf_check(n == (int)(HDR + len) && !memcmp(got + HDR, mac, 6) && !memcmp(got + HDR + 12, frame + 12, len - 12),
		   what, "%d bytes received (%u sent + 12), %u buffer(s)", n, len, nbufs);
	if (mrg)
		conf_check(n > 0 && h->num_buffers == nbufs && nbufs >= min_bufs, "rx_num_buffers",
			   "num_buffers %u, buffers %u (at least %u)", h->num_buffers, nbufs, min_bufs);
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	uint64_t want = VIRTIO_NET_F_MAC | VIRTIO_NET_F_STATUS | VIRTIO_NET_F_MTU, m = 1;
	char peer[16] = "echo";
	int used;

	serial_init();
	conf_begin(NAME);
	net.name = NAME;
	cmdline_get_str(cmdline, "peer", peer, sizeof(peer));
	slirp = !strcmp(peer, "slirp");
	cmdline_get_u64(cmdline, "mrg", &m);
	cmdline_get_u64(cmdline, "ip", &my_ip);
	cmdline_get_u64(cmdline, "gw", &gw_ip);
	if (m)
		want |= VIRTIO_NET_F_MRG_RXBUF;
	if (virtio_start(&net, cmdline, VIRTIO_ID_NET, want, 2)) {
		conf_check(0, "bringup", "see above");
		conf_end();
	}
	virtio_describe(&net);
	mrg = !!(net.features & VIRTIO_NET_F_MRG_RXBUF);
	rx_size = mrg ? RX_BUF_MRG : RX_BUF_BIG;
	conf_check((net.offered & (VIRTIO_NET_F_MAC | VIRTIO_NET_F_STATUS | VIRTIO_NET_F_MTU)) ==
		       (VIRTIO_NET_F_MAC | VIRTIO_NET_F_STATUS | VIRTIO_NET_F_MTU),
		   "bringup", "offered 0x%llx, negotiated 0x%llx, mrg %d", (unsigned long long)net.offered,
		   (unsigned long long)net.features, mrg);
	check_config(cmdline);
	cmdline_get_u64(cmdline, "flood_gap_ms", &flood_gap_ms);
	cmdline_get_u64(cmdline, "flood_wait", &flood_wait);
	if (cmdline_get_u64(cmdline, "flood", &flood_n) == 0) {
		if (flood_wait) {
			gprintf("virtio-net: flood waits for a byte on COM1\n");
			(void)serial_getc();
		}
		flood();
		conf_end();
	}

	/* No receive buffer yet: the answer to this request has nowhere to go and must wait. */
	memset(&txhdr, 0, sizeof(txhdr));
	used = transmit(arp_request(), 0);
	conf_check(used == 0, "tx_arp_request", "used length %d", used);
	virtio_poll_status(&net, VIRTIO_STATUS_FAILED, 300); /* ~300 ms for the answer to reach the device */
	hostile_tx();
	too_small();
	used = transmit(arp_request(), 0); /* a second request: its answer is the one left without mrg */
	conf_check(used == 0, "tx_arp_request_2", "used length %d", used);
	for (unsigned int i = 0; i < RX_BUFS; i++)
		post_rx(i);
	for (int i = 0; i < (mrg ? 2 : 1); i++) {
		if (slirp)
			check_arp_reply();
		else
			check_echo(i ? "rx_second_answer" : "rx_waited_for_buffers", 42, 1);
	}
	if (!slirp) {
		/* A full-size frame, sent in interrupt mode, back over several buffers with mrg. */
		memset(frame, 0xff, 6);
		memcpy(frame + 6, mac, 6);
		put16be(frame + 12, ETHERTYPE_X);
		for (uint32_t i = 14; i < ETH + MTU; i++)
			frame[i] = (uint8_t)(i * 7 + 3);
		used = transmit(ETH + MTU, VIRTIO_XFER_IRQ);
		conf_check(used == 0, "tx_full_size_frame", "used length %d", used);
		check_echo("rx_full_size_echo", ETH + MTU, 3);
	}
	gprintf("%s: tx %u notifies, rx %u notifies, %u interrupts\n", NAME, net.vq[TXQ].notifies, net.vq[RXQ].notifies,
		net.irq_count);
	conf_end();
}
