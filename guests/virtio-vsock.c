/* virtio-vsock.c - conformance and hostile guest for a virtio socket device (virtio 1.2 section 5.10), on virtio-mmio.
 */
#include "virtio.h"

/*
 * Command-line words (the test on the host runs the other end, tests/integration/test_virtio_vsock.py):
 *   virtio_mmio.device=...  the device windows (the VMM adds them; the first vsock device is used)
 *   expect_cid=N    the guest_cid config space must hold
 *   refused=P       connect to host port P, where nobody listens: a RST must come back
 *   connect=P       connect to host port P (PATH_P echoes), send bytes= bytes of the pattern, shut down
 *                   sending, read the echo back until the host's SHUTDOWN, check it, close
 *   bytes=N         for connect= (default 65536)
 *   hostile=P       malformed packets on connections to host port P (which accepts and never reads): each
 *                   must cost its connection a RST and the device must keep working; then credit abuse
 *   flood=P         open count= connections to host port P: the device's limit (1024) must answer RST
 *   count=N         for flood= (default 1100)
 *   listen=P        answer the host's connection to port P (REQUEST -> RESPONSE, any other port -> RST),
 *                   echo its bytes, checking the pattern, until the host shuts down; listen_ms= bounds it
 *   small_credit=1  with listen=: advertise buf_alloc 4096 and check that the device never sends more than
 *                   the credit it has, and stops when it runs out
 * The pattern: byte i of a stream is (i * 7 + (i >> 10)) & 0xff. Steps run in the order above.
 * Output: "virtio-vsock: CHECK name: PASS|FAIL (values)" on the serial port, then the verdict.
 */
#define NAME "virtio-vsock"

#define VIRTIO_ID_VSOCK 19
#define RX_Q		0
#define TX_Q		1
#define EVT_Q		2
#define HDR		44u
#define RX_DATA		4096u
#define RXBUF		(HDR + RX_DATA)
#define HOST_CID	2u
#define BIG		65536u
#define MY_BUF_ALLOC	65536u

enum { OP_REQUEST = 1, OP_RESPONSE, OP_RST, OP_SHUTDOWN, OP_RW, OP_CREDIT_UPDATE, OP_CREDIT_REQUEST };

struct hdr {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
} __attribute__((packed));

struct pkt {
	struct hdr h;
	uint8_t *data;
	uint32_t len;
	uint16_t id;
};

/* One connection's state, as the guest side keeps it. */
struct conn {
	uint32_t port, peer;	     /* ours, the host's */
	uint32_t buf_alloc;	     /* what we advertise */
	uint32_t rx, fwd;	     /* bytes received; of them consumed */
	uint32_t adv;		     /* fwd as last advertised (fwd_cnt of our last packet) */
	uint32_t tx;		     /* bytes sent */
	uint32_t peer_buf, peer_fwd; /* the device's credit */
};

static struct virtio_dev vs; /* in .bss: its queues are 4 KiB-aligned pages */
static struct virtio_raw rxr;
static uint8_t rxbuf[VIRTQ_MAX_SIZE][RXBUF] __attribute__((aligned(64)));
static uint8_t txdata[BIG] __attribute__((aligned(64)));
static struct hdr txhdr __attribute__((aligned(64)));
static uint8_t evbuf[8] __attribute__((aligned(8)));
static uint64_t cid;
static uint32_t stray; /* packets for no connection the guest expected */

static uint8_t pat(uint32_t i)
{
	return (uint8_t)(i * 7u + (i >> 10));
}

/* ---- packets ---------------------------------------------------------------------------------------------- */

static void rx_setup(void)
{
	virtio_raw_from_queue(&rxr, &vs, RX_Q);
	for (uint16_t i = 0; i < rxr.size; i++) {
		rxr.desc[i].addr = (uintptr_t)rxbuf[i];
		rxr.desc[i].len = RXBUF;
		rxr.desc[i].flags = VIRTQ_DESC_F_WRITE;
		rxr.desc[i].next = 0;
		virtio_raw_ring(&rxr, i, i);
	}
	virtio_raw_publish(&rxr, rxr.size);
}

/* The next packet from the device within `ms`; 0, or -1 (nothing, or a malformed used element: printed). */
static int rx_get(struct pkt *p, unsigned int ms)
{
	uint32_t id, len;

	if (virtio_raw_poll(&rxr, ms, &id, &len))
		return -1;
	if (id >= rxr.size || len < HDR || len > RXBUF) {
		gprintf("%s: bad rx used element id %u len %u\n", NAME, id, len);
		return -1;
	}
	memcpy(&p->h, rxbuf[id], HDR);
	p->id = (uint16_t)id;
	p->data = rxbuf[id] + HDR;
	p->len = len - HDR;
	if (p->h.len != p->len)
		gprintf("%s: rx hdr.len %u but used length %u\n", NAME, p->h.len, len);
	return 0;
}

static void rx_put(const struct pkt *p)
{
	virtio_raw_post(&rxr, p->id);
}

static void mkhdr(struct hdr *h, const struct conn *c, uint16_t op, uint32_t len)
{
	*h = (struct hdr){.src_cid = cid,
			  .dst_cid = HOST_CID,
			  .src_port = c->port,
			  .dst_port = c->peer,
			  .len = len,
			  .type = 1,
			  .op = op,
			  .buf_alloc = c->buf_alloc,
			  .fwd_cnt = c->fwd};
}

/* Transmit header h with `len` bytes of `data` (one chain, header and data in separate buffers). */
static int tx_raw(const struct hdr *h, const void *data, uint32_t len)
{
	struct virtio_buf b[2] = {{&txhdr, HDR}, {(void *)data, len}};
	uint32_t used;

	txhdr = *h;
	return virtio_transfer(&vs, TX_Q, b, len ? 2 : 1, 0, 0, &used);
}

static int tx(struct conn *c, uint16_t op, const void *data, uint32_t len)
{
	struct hdr h;

	mkhdr(&h, c, op, len);
	if (op == OP_RW)
		c->tx += len;
	c->adv = c->fwd;
	return tx_raw(&h, data, len);
}

static int shut(struct conn *c, uint32_t flags)
{
	struct hdr h;

	mkhdr(&h, c, OP_SHUTDOWN, 0);
	h.flags = flags;
	c->adv = c->fwd;
	return tx_raw(&h, 0, 0);
}

static int for_conn(const struct pkt *p, const struct conn *c)
{
	return p->h.src_port == c->peer && p->h.dst_port == c->port && p->h.src_cid == HOST_CID && p->h.dst_cid == cid;
}

/*
 * Waits up to `ms` for a packet of connection c with op `op` (0: any); others of c are taken as credit
 * information, packets of other connections counted as stray. Returns the op seen (0: none), the packet
 * in *out (the caller puts it back with rx_put).
 */
static int wait_op(struct conn *c, uint16_t op, unsigned int ms, struct pkt *out)
{
	for (unsigned int tries = 0; tries < 4096; tries++) {
		struct pkt p;

		if (rx_get(&p, ms))
			return 0;
		if (!for_conn(&p, c)) {
			stray++;
			rx_put(&p);
			continue;
		}
		c->peer_buf = p.h.buf_alloc;
		c->peer_fwd = p.h.fwd_cnt;
		if (!op || p.h.op == op || p.h.op == OP_RST) {
			*out = p;
			return p.h.op;
		}
		rx_put(&p);
	}
	return 0;
}

static int open_conn(struct conn *c, uint32_t port, uint32_t peer, uint32_t buf_alloc)
{
	struct pkt p;
	int op;

	*c = (struct conn){.port = port, .peer = peer, .buf_alloc = buf_alloc};
	if (tx(c, OP_REQUEST, 0, 0))
		return -1;
	op = wait_op(c, OP_RESPONSE, 3000, &p);
	if (op)
		rx_put(&p);
	return op == OP_RESPONSE ? 0 : -1;
}

static uint32_t credit(const struct conn *c)
{
	uint32_t in_flight = c->tx - c->peer_fwd;

	return in_flight > c->peer_buf ? 0 : c->peer_buf - in_flight;
}

/* ---- steps --------------------------------------------------------------------------------------------- */

static void step_refused(uint32_t port)
{
	struct conn c = {.port = 40000, .peer = port, .buf_alloc = MY_BUF_ALLOC};
	struct pkt p;
	int op = tx(&c, OP_REQUEST, 0, 0) ? -1 : wait_op(&c, 0, 3000, &p);

	if (op > 0)
		rx_put(&p);
	conf_check(op == OP_RST, "refused", "host port %u: op %d, expected RST (3)", port, op);
}

/* Receives RW packets of c into the pattern check; returns bytes taken, -1 on a pattern error. */
static int take_rw(struct conn *c, const struct pkt *p, uint32_t *bad_at)
{
	for (uint32_t i = 0; i < p->len; i++)
		if (p->data[i] != pat(c->rx + i) && *bad_at == 0xffffffffu)
			*bad_at = c->rx + i;
	c->rx += p->len;
	return (int)p->len;
}

/* Waits for the device's RST after our SHUTDOWN(both) (5.10.6.6: the peer answers a full shutdown with RST). */
static void check_close(struct conn *c, const char *what)
{
	struct pkt p;
	int op = shut(c, 3) ? 0 : wait_op(c, OP_RST, 3000, &p);

	if (op)
		rx_put(&p);
	conf_check(op == OP_RST, what, "op %d after SHUTDOWN(both)", op);
}

static void step_connect(uint32_t port, uint32_t bytes)
{
	struct conn c;
	struct pkt p;
	uint32_t bad_at = 0xffffffffu, blocked = 0, idle = 0;
	int op, ok = open_conn(&c, 40001, port, MY_BUF_ALLOC) == 0, done_rx = 0, shut_sent = 0;

	conf_check(ok, "connect_response", "host port %u, device buf_alloc %u", port, c.peer_buf);
	if (!ok)
		return;
	op = tx(&c, OP_CREDIT_REQUEST, 0, 0) ? 0 : wait_op(&c, OP_CREDIT_UPDATE, 3000, &p);
	if (op)
		rx_put(&p);
	conf_check(op == OP_CREDIT_UPDATE, "credit_request", "op %d, buf_alloc %u fwd_cnt %u", op, c.peer_buf,
		   c.peer_fwd);
	/* Send while taking the echo; the device's credit bounds each packet. */
	while (!done_rx && idle < 50) {
		uint32_t n = bytes - c.tx;
		int got = 0;

		if (n > RX_DATA)
			n = RX_DATA;
		if (n > credit(&c))
			n = credit(&c);
		if (n) {
			for (uint32_t i = 0; i < n; i++)
				txdata[i] = pat(c.tx + i);
			if (tx(&c, OP_RW, txdata, n))
				break;
		} else if (c.tx < bytes) {
			blocked++;
		}
		if (c.tx == bytes && !shut_sent)
			shut_sent = !shut(&c, 2); /* SEND: the host reads EOF after our bytes */
		while (!done_rx && (op = wait_op(&c, 0, n ? 0 : 100, &p))) {
			got = 1;
			if (op == OP_RW) {
				take_rw(&c, &p, &bad_at);
				c.fwd = c.rx; /* consumed at once */
			}
			if (op == OP_SHUTDOWN || op == OP_RST)
				done_rx = op;
			rx_put(&p);
		}
		/* Once we send no more data, nothing carries fwd_cnt: say it when a good part was consumed. */
		if (shut_sent && c.fwd - c.adv >= 16384)
			tx(&c, OP_CREDIT_UPDATE, 0, 0);
		idle = got || n ? 0 : idle + 1;
	}
	conf_check(c.tx == bytes, "connect_tx", "%u of %u bytes sent, %u times out of credit", c.tx, bytes, blocked);
	conf_check(c.rx == bytes && bad_at == 0xffffffffu && done_rx == OP_SHUTDOWN, "connect_rx",
		   "%u of %u bytes echoed, first bad byte %d, ended by op %d", c.rx, bytes,
		   bad_at == 0xffffffffu ? -1 : (int)bad_at, done_rx);
	check_close(&c, "connect_close");
}

/* Sends header h (patched by the caller) with `len` bytes; expects the device to reset connection c. */
static void expect_rst(struct conn *c, const struct hdr *h, uint32_t len, const char *what)
{
	struct pkt p;
	int op = tx_raw(h, txdata, len) ? 0 : wait_op(c, OP_RST, 3000, &p);

	if (op)
		rx_put(&p);
	conf_check(op == OP_RST, what, "op %d, expected RST (3)", op);
}

/*
 * Credit abuse: the host never reads, so once its socket is full the device's fwd_cnt stops; send all the
 * credit there is, then one byte more: the device must reset the connection.
 */
static void step_credit_abuse(uint32_t port, uint32_t local)
{
	uint32_t sent_rounds = 0;
	struct conn c;
	struct hdr h;
	struct pkt p;
	int op, ok = open_conn(&c, local, port, MY_BUF_ALLOC) == 0;

	while (ok && sent_rounds++ < 64) {
		uint32_t n = credit(&c);

		if (n > BIG)
			n = BIG;
		if (n && tx(&c, OP_RW, txdata, n)) {
			ok = 0;
			break;
		}
		while ((op = wait_op(&c, 0, 50, &p))) {
			rx_put(&p);
			if (op == OP_RST)
				ok = 0;
		}
		if (!n)
			break;
	}
	conf_check(ok && credit(&c) == 0, "credit_exhausted", "%u bytes sent, credit %u, buf_alloc %u fwd_cnt %u", c.tx,
		   credit(&c), c.peer_buf, c.peer_fwd);
	if (ok) {
		mkhdr(&h, &c, OP_RW, 1);
		expect_rst(&c, &h, 1, "credit_violation");
	}
}

static void step_hostile(uint32_t port)
{
	struct conn c;
	struct hdr h;
	struct pkt p;
	uint32_t base = 41000;
	int op, ok;

	memset(txdata, 0x5a, 64);
	/* len beyond the data the chain carries */
	if (open_conn(&c, base++, port, MY_BUF_ALLOC) == 0) {
		mkhdr(&h, &c, OP_RW, 1000);
		expect_rst(&c, &h, 10, "len_past_data");
	}
	/* len above 64 KiB */
	if (open_conn(&c, base++, port, MY_BUF_ALLOC) == 0) {
		mkhdr(&h, &c, OP_RW, 70000);
		expect_rst(&c, &h, 10, "len_too_big");
	}
	/* a src_cid that is not ours */
	if (open_conn(&c, base++, port, MY_BUF_ALLOC) == 0) {
		mkhdr(&h, &c, OP_RW, 4);
		h.src_cid = cid + 1;
		expect_rst(&c, &h, 4, "bad_src_cid");
	}
	/* an unknown op */
	if (open_conn(&c, base++, port, MY_BUF_ALLOC) == 0) {
		mkhdr(&h, &c, 99, 0);
		expect_rst(&c, &h, 0, "bad_op");
	}
	/* SEQPACKET, not offered */
	if (open_conn(&c, base++, port, MY_BUF_ALLOC) == 0) {
		mkhdr(&h, &c, OP_RW, 4);
		h.type = 2;
		expect_rst(&c, &h, 4, "bad_type");
	}
	/* a header cut short: dropped (nothing names a connection), the device goes on */
	{
		struct virtio_buf b = {&txhdr, 20};
		uint32_t used;

		memset(&txhdr, 0xee, sizeof(txhdr));
		ok = virtio_transfer(&vs, TX_Q, &b, 1, 0, 0, &used) == 0;
		ok = ok && open_conn(&c, base++, port, MY_BUF_ALLOC) == 0;
		op = ok && !tx(&c, OP_CREDIT_REQUEST, 0, 0) ? wait_op(&c, OP_CREDIT_UPDATE, 3000, &p) : 0;
		if (op)
			rx_put(&p);
		conf_check(op == OP_CREDIT_UPDATE, "short_header_then_alive", "op %d on a new connection", op);
		tx(&c, OP_RST, 0, 0);
	}
	/* a header spread over two buffers is legal (2.7.4): REQUEST -> RESPONSE */
	{
		struct virtio_buf b[2] = {{&txhdr, 20}, {(uint8_t *)&txhdr + 20, HDR - 20}};
		uint32_t used;

		c = (struct conn){.port = base++, .peer = port, .buf_alloc = MY_BUF_ALLOC};
		mkhdr(&txhdr, &c, OP_REQUEST, 0);
		op = virtio_transfer(&vs, TX_Q, b, 2, 0, 0, &used) ? 0 : wait_op(&c, OP_RESPONSE, 3000, &p);
		if (op)
			rx_put(&p);
		conf_check(op == OP_RESPONSE, "split_header", "op %d, expected RESPONSE (2)", op);
		tx(&c, OP_RST, 0, 0);
	}
	step_credit_abuse(port, base++);
	/* the device still serves new connections */
	ok = open_conn(&c, base++, port, MY_BUF_ALLOC) == 0;
	conf_check(ok, "alive_after_hostile", "%u stray packets", stray);
	if (ok)
		tx(&c, OP_RST, 0, 0);
}

static void step_flood(uint32_t port, uint32_t count)
{
	uint32_t responses = 0, rsts = 0;
	struct conn c = {.buf_alloc = MY_BUF_ALLOC, .peer = port};
	struct pkt p;
	int ok;

	for (uint32_t i = 0; i < count || responses + rsts < count; i++) {
		if (i < count) {
			c.port = 50000 + i;
			if (tx(&c, OP_REQUEST, 0, 0))
				break;
		}
		while (!rx_get(&p, i < count ? 0 : 3000)) {
			if (p.h.op == OP_RESPONSE)
				responses++;
			else if (p.h.op == OP_RST)
				rsts++;
			rx_put(&p);
			if (i >= count)
				break;
		}
		if (i >= count + 4096)
			break;
		if (i >= count && responses + rsts < count && rx_get(&p, 0) && i > count + 8)
			break;
	}
	conf_check(responses == 1024 && rsts == count - 1024, "flood_limit",
		   "%u connections accepted, %u reset, of %u (limit 1024)", responses, rsts, count);
	for (uint32_t i = 0; i < count; i++) {
		c.port = 50000 + i;
		tx(&c, OP_RST, 0, 0);
	}
	ok = open_conn(&c, 49999, port, MY_BUF_ALLOC) == 0;
	conf_check(ok, "flood_recovered", "a new connection after the flood's were reset: %s", ok ? "accepted" : "no");
}

/* Answers REQUESTs: ours with RESPONSE, any other port with RST; returns the connection or -1. */
static int accept_one(struct conn *c, uint32_t port, uint32_t buf_alloc, unsigned int ms, unsigned int *refused)
{
	struct pkt p;

	for (unsigned int tries = 0; tries < 64; tries++) {
		struct conn other;

		if (rx_get(&p, ms))
			return -1;
		rx_put(&p);
		if (p.h.op != OP_REQUEST || p.h.src_cid != HOST_CID || p.h.dst_cid != cid) {
			stray++;
			continue;
		}
		other = (struct conn){.port = p.h.dst_port,
				      .peer = p.h.src_port,
				      .buf_alloc = buf_alloc,
				      .peer_buf = p.h.buf_alloc,
				      .peer_fwd = p.h.fwd_cnt};
		if (p.h.dst_port != port) {
			tx(&other, OP_RST, 0, 0);
			(*refused)++;
			continue;
		}
		*c = other;
		return tx(c, OP_RESPONSE, 0, 0);
	}
	return -1;
}

/* Appends an RW packet's bytes to the echo backlog txdata[0 .. *held); counts bytes beyond the credit given. */
static void hold(struct conn *c, const struct pkt *p, uint32_t *held, uint32_t *bad_at, uint32_t *over,
		 uint32_t *max_in_flight)
{
	take_rw(c, p, bad_at);
	if (c->rx - c->adv > *max_in_flight)
		*max_in_flight = c->rx - c->adv;
	if (c->rx - c->adv > c->buf_alloc || *held + p->len > BIG) {
		(*over)++;
		return;
	}
	memcpy(txdata + *held, p->data, p->len);
	*held += p->len;
}

static void step_listen(uint32_t port, int small, unsigned int ms)
{
	uint32_t buf_alloc = small ? 4096 : MY_BUF_ALLOC, bad_at = 0xffffffffu, over = 0, max_in_flight = 0;
	uint32_t held = 0, idle = 0;
	unsigned int refused = 0;
	int stalled_ok = small ? -1 : 1, done = 0;
	struct conn c = {0};
	struct pkt p;
	int ok = accept_one(&c, port, buf_alloc, ms, &refused) == 0;

	conf_check(ok, "listen_accept", "port %u, host port %u, %u other ports refused", port, c.peer, refused);
	if (!ok)
		return;
	while (done != OP_RST && !(done && !held) && idle < 10) {
		/* Echo what the device's credit allows; echoed bytes are consumed (fwd_cnt moves). */
		uint32_t n = held < credit(&c) ? held : credit(&c);
		int op;

		if (n > BIG)
			n = BIG;
		if (stalled_ok < 0)
			n = 0; /* small credit: nothing consumed until the device was seen to stop */
		if (n) {
			c.fwd += n;
			tx(&c, OP_RW, txdata, n);
			for (uint32_t i = n; i < held; i++)
				txdata[i - n] = txdata[i];
			held -= n;
		}
		op = wait_op(&c, 0, n ? 0 : 1000, &p);
		if (!op) {
			if (!n && stalled_ok < 0)
				stalled_ok = 0; /* the stream ended before the credit ran out */
			idle += !n;
			continue;
		}
		idle = 0;
		if (op == OP_RW)
			hold(&c, &p, &held, &bad_at, &over, &max_in_flight);
		if (op == OP_SHUTDOWN || op == OP_RST)
			done = op;
		rx_put(&p);
		/* Small credit: once it ran out, the device must go quiet until we consume. */
		if (stalled_ok < 0 && c.rx - c.adv >= buf_alloc) {
			struct pkt q;
			int extra = wait_op(&c, OP_RW, 300, &q);

			stalled_ok = extra != OP_RW;
			if (extra == OP_RW)
				hold(&c, &q, &held, &bad_at, &over, &max_in_flight);
			if (extra)
				rx_put(&q);
		}
	}
	conf_check(c.rx > 0 && bad_at == 0xffffffffu && c.tx == c.rx && done == OP_SHUTDOWN, "listen_echo",
		   "%u bytes in, %u echoed, first bad byte %d, ended by op %d", c.rx, c.tx,
		   bad_at == 0xffffffffu ? -1 : (int)bad_at, done);
	conf_check(over == 0, "listen_credit_respected", "buf_alloc %u, most in flight %u, %u packets beyond",
		   buf_alloc, max_in_flight, over);
	if (small)
		conf_check(stalled_ok == 1, "listen_credit_stall", "device %s once the credit ran out",
			   stalled_ok == 1 ? "went quiet" : "kept sending");
	check_close(&c, "listen_close");
}

static void check_reset(void)
{
	uint32_t ready = 0;
	int ok = virtio_reset(&vs) == 0;

	for (unsigned int q = 0; q < 3; q++) {
		virtio_write32(&vs, VIRTIO_MMIO_QUEUE_SEL, q);
		ready |= virtio_read32(&vs, VIRTIO_MMIO_QUEUE_READY) << q;
	}
	conf_check(ok && !ready, "reset", "status 0x%x, QueueReady bits 0x%x", virtio_status(&vs), ready);
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	uint64_t expect = 0, port = 0, bytes = BIG, count = 1100, small = 0, ms = 30000;
	struct virtio_cfg_field f[] = {{0, 8, &cid}};
	struct virtio_buf ev = {evbuf, sizeof(evbuf)};
	int ok;

	serial_init();
	conf_begin(NAME);
	vs.name = NAME;
	if (virtio_start(&vs, cmdline, VIRTIO_ID_VSOCK, 0, 3)) {
		conf_check(0, "bringup", "see above");
		conf_end();
	}
	virtio_describe(&vs);
	conf_check(1, "bringup", "features 0x%llx, queue sizes %u %u %u", (unsigned long long)vs.features,
		   vs.vq[RX_Q].size, vs.vq[TX_Q].size, vs.vq[EVT_Q].size);
	conf_check(!(vs.offered & 2), "no_seqpacket", "features offered 0x%llx", (unsigned long long)vs.offered);
	cmdline_get_u64(cmdline, "expect_cid", &expect);
	ok = virtio_config_read(&vs, f, 1) >= 0; /* before the check prints cid */
	conf_check(ok && cid == expect, "guest_cid", "%llu, expected %llu", (unsigned long long)cid,
		   (unsigned long long)expect);
	rx_setup();
	conf_check(virtio_submit(&vs, EVT_Q, &ev, 0, 1, 0, VIRTIO_POLL) >= 0, "event_buffer_posted", "%u bytes",
		   (unsigned int)sizeof(evbuf));
	cmdline_get_u64(cmdline, "bytes", &bytes);
	cmdline_get_u64(cmdline, "count", &count);
	cmdline_get_u64(cmdline, "small_credit", &small);
	cmdline_get_u64(cmdline, "listen_ms", &ms);
	if (!cmdline_get_u64(cmdline, "refused", &port))
		step_refused((uint32_t)port);
	if (!cmdline_get_u64(cmdline, "connect", &port))
		step_connect((uint32_t)port, (uint32_t)bytes);
	if (!cmdline_get_u64(cmdline, "hostile", &port))
		step_hostile((uint32_t)port);
	if (!cmdline_get_u64(cmdline, "flood", &port))
		step_flood((uint32_t)port, (uint32_t)count);
	if (!cmdline_get_u64(cmdline, "listen", &port))
		step_listen((uint32_t)port, small != 0, (unsigned int)ms);
	gprintf("%s: %u stray packets, %u tx notifies\n", NAME, stray, vs.vq[TX_Q].notifies);
	check_reset();
	conf_end();
}
