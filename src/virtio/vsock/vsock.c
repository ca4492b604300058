/*
 * vsock.c - virtio socket device (virtio 1.2 section 5.10) in userspace, each stream bridged to an AF_UNIX
 * socket with the "hybrid vsock" convention (include/brisk/virtio_vsock.h, docs/devices.md).
 *
 * Queues (5.10.2): rx 0 (device -> driver), tx 1 (driver -> device), event 2 (its buffers are kept for
 * VIRTIO_VSOCK_EVENT_TRANSPORT_RESET). Config space (5.10.4): guest_cid, le64, read-only.
 *
 * Transmit: each chain is one packet, parsed and checked (vsock_pkt.c), dispatched on its (dst_port,
 * src_port) connection, and completed at once: RW payload goes to the host socket or, while that would
 * block, into the connection's buffer, which the credit brisk advertised bounds (a guest sending past it
 * is reset and counted, 5.10.6.3). Malformed packets are counted, logged rate-limited, and reset the
 * connection they name (docs/security.md case 11).
 *
 * Receive: packets for the guest are made only when it posted a buffer: resets first (a bounded ring),
 * then the connections with something to say, round robin: REQUEST/RESPONSE, data (read from the host
 * socket straight into the guest's buffer, at most the guest's credit and 64 KiB), CREDIT_UPDATE,
 * SHUTDOWN. While the guest posts nothing or gives no credit, host sockets are not read (back-pressure).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "brisk/fc_metrics.h"
#include "brisk/log.h"
#include "brisk/virtio.h"
#include "vsock_conn.h"

#define CONFIG_SIZE 8 /* struct virtio_vsock_config: le64 guest_cid */
#define BACKLOG	    128

struct virtio_vsock {
	struct vsock_dev d;
};

static void kick(struct vsock_dev *v)
{
	uint64_t one = 1;

	if (write(v->kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_debug("virtio-vsock: eventfd write: %s", strerror(errno));
}

/* ---- transmit: the guest's packets ----------------------------------------------------------------- */

static void reply_rst(struct vsock_dev *v, const struct virtio_vsock_hdr *h)
{
	if (h->op != VSOCK_OP_RST) /* 5.10.6.4: never answer a RST with one */
		vsock_rst_push(v, h->dst_port, h->src_port);
}

/* A packet that breaks the protocol: counted, logged (rate-limited), the connection it names reset. */
static void refuse_packet(struct vsock_dev *v, const struct virtio_vsock_hdr *h, struct vsock_conn *c, const char *why)
{
	v->stats.malformed++;
	virtio_bad_request(v->t, why);
	if (!h)
		return;
	if (!c)
		c = vsock_conn_find(v, h->dst_port, h->src_port);
	if (c)
		vsock_conn_kill(v, c, true);
	else
		reply_rst(v, h);
}

static void take_credit(struct vsock_conn *c, const struct virtio_vsock_hdr *h)
{
	c->peer_buf_alloc = h->buf_alloc;
	c->peer_fwd_cnt = h->fwd_cnt;
}

/* The guest accepted a host client's connection: "OK <hostport>\n" to the client, then data. */
static void accepted(struct vsock_dev *v, struct vsock_conn *c, const struct virtio_vsock_hdr *h)
{
	char ok[24];
	int n = snprintf(ok, sizeof(ok), "OK %u\n", c->local_port);

	take_credit(c, h);
	c->state = CONN_ESTABLISHED;
	c->deadline_ms = 0;
	if (send(c->fd, ok, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n) {
		vsock_conn_kill(v, c, true);
		return;
	}
	v->stats.conns_host++;
	fcm_inc(fcm_vsock, FCM_VSOCK_conns_added);
	vsock_conn_update_epoll(c);
	vsock_conn_schedule(c);
}

/* RW on an established connection: within the credit brisk gave, to the host socket. */
static void data_from_guest(struct vsock_dev *v, struct vsock_conn *c, const struct virtq_chain *ch,
			    const struct virtio_vsock_hdr *h)
{
	if (c->peer_shut & VSOCK_SHUTDOWN_F_SEND) {
		refuse_packet(v, h, c, "data after the guest's SHUTDOWN(send)");
		return;
	}
	if (!vsock_credit_allows(VSOCK_BUF_ALLOC, c->fwd_sent, c->rx_cnt, h->len)) {
		v->stats.credit_violations++;
		refuse_packet(v, h, c, "data beyond the credit the device gave");
		return;
	}
	if (vsock_conn_to_host(c, ch, VSOCK_HDR_SIZE, h->len))
		vsock_conn_kill(v, c, true); /* the host peer went away */
}

static void on_established(struct vsock_dev *v, struct vsock_conn *c, const struct virtq_chain *ch,
			   const struct virtio_vsock_hdr *h)
{
	take_credit(c, h);
	switch (h->op) {
	case VSOCK_OP_RW:
		data_from_guest(v, c, ch, h);
		break;
	case VSOCK_OP_SHUTDOWN:
		c->peer_shut |= h->flags & VSOCK_SHUTDOWN_F_BOTH;
		vsock_conn_shutdown_progress(c);
		break;
	case VSOCK_OP_CREDIT_REQUEST:
		c->pending |= PEND_CREDIT;
		break;
	case VSOCK_OP_CREDIT_UPDATE:
		break;
	default: /* REQUEST or RESPONSE on an open connection */
		refuse_packet(v, h, c, "REQUEST or RESPONSE on an established connection");
		break;
	}
	if (!c->dead) {
		vsock_conn_update_epoll(c);
		vsock_conn_schedule(c);
	}
}

static void on_packet(struct vsock_dev *v, const struct virtq_chain *ch, const struct virtio_vsock_hdr *h)
{
	struct vsock_conn *c = vsock_conn_find(v, h->dst_port, h->src_port);

	if (h->op == VSOCK_OP_REQUEST) {
		if (c) {
			refuse_packet(v, h, c, "REQUEST for an open connection");
			return;
		}
		c = vsock_conn_connect(v, h->dst_port, h->src_port);
		if (c) {
			take_credit(c, h);
			vsock_conn_schedule(c);
		}
		return;
	}
	if (!c) {
		reply_rst(v, h); /* 5.10.6.4: a packet for no connection gets a RST */
		return;
	}
	if (h->op == VSOCK_OP_RST) {
		vsock_conn_kill(v, c, false);
		return;
	}
	if (c->state == CONN_CONNECTING) {
		if (h->op == VSOCK_OP_RESPONSE)
			accepted(v, c, h);
		else
			refuse_packet(v, h, c, "a packet other than RESPONSE or RST answering a REQUEST");
		return;
	}
	on_established(v, c, ch, h);
}

/* After a round: a queue that broke drops every connection; more left for later; what was pushed published. */
static void end_round(struct vsock_dev *v, struct virtq_iter *it, unsigned qi)
{
	if (it->q && it->q->broken && v->active) {
		v->active = false; /* the transport set DEVICE_NEEDS_RESET */
		vsock_conn_kill_all(v, true);
	}
	if (it->more)
		kick(v); /* the rest after the loop looked at the other fds */
	if (virtq_iter_pushed(it))
		virtio_queue_done(v->t, qi);
}

/* One packet from the guest: parsed, dispatched, completed with 0 bytes (5.10.6.2). */
static void transmit(struct vsock_dev *v, struct virtq_iter *it, const struct virtq_chain *ch)
{
	struct virtio_vsock_hdr h;
	enum vsock_fault f = vsock_parse(ch, v->cid, &h);

	if (f != VSOCK_OK)
		refuse_packet(v, f >= VSOCK_LEN_TOO_BIG ? &h : NULL, NULL, vsock_fault_name(f));
	else
		on_packet(v, ch, &h);
	fcm_inc(fcm_vsock, FCM_VSOCK_tx_packets_count);
	virtq_push(it->q, ch->head, 0);
}

static void drain_tx(struct vsock_dev *v)
{
	struct virtq_seg segs[VSOCK_MAX_SEGS];
	struct virtq_chain ch;
	struct virtq_iter it;

	if (!v->active || !virtio_iter(v->t, VSOCK_TX_Q, &it, segs, VSOCK_MAX_SEGS, VSOCK_QUEUE_SIZE))
		return;
	while (v->active && virtq_next(&it, &ch))
		transmit(v, &it, &ch);
	v->stats.malformed += it.bad; /* malformed chains (VSOCK_BAD_CHAIN) */
	end_round(v, &it, VSOCK_TX_Q);
}

/* ---- receive: packets for the guest ------------------------------------------------------------------ */

static void header(const struct vsock_dev *v, uint32_t local_port, uint32_t peer_port, uint16_t op,
		   struct virtio_vsock_hdr *h)
{
	*h = (struct virtio_vsock_hdr){.src_cid = VSOCK_HOST_CID,
				       .dst_cid = v->cid,
				       .src_port = local_port,
				       .dst_port = peer_port,
				       .type = VSOCK_TYPE_STREAM,
				       .op = op,
				       .buf_alloc = VSOCK_BUF_ALLOC};
}

/*
 * What c sends next (VSOCK_OP_INVALID: nothing now). Looks at the host socket without reading it (one
 * byte, MSG_PEEK), so that no receive buffer is taken for nothing.
 */
static uint16_t plan(struct vsock_conn *c)
{
	if (c->pending & PEND_REQUEST)
		return VSOCK_OP_REQUEST;
	if (c->pending & PEND_RESPONSE)
		return VSOCK_OP_RESPONSE;
	if (c->state == CONN_ESTABLISHED && c->rx_ready && !c->eof && !(c->peer_shut & VSOCK_SHUTDOWN_F_RECEIVE) &&
	    vsock_conn_credit(c) > 0) {
		char b;
		ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

		if (n > 0)
			return VSOCK_OP_RW;
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			c->rx_ready = false;
			vsock_conn_update_epoll(c);
		} else { /* EOF (or a dead socket): the host sends no more */
			c->eof = true;
			c->pending |= PEND_SHUTDOWN;
			c->shut_flags = c->hup || n < 0 ? VSOCK_SHUTDOWN_F_BOTH : VSOCK_SHUTDOWN_F_SEND;
		}
	}
	if (c->pending & PEND_CREDIT)
		return VSOCK_OP_CREDIT_UPDATE;
	if (c->pending & PEND_SHUTDOWN)
		return VSOCK_OP_SHUTDOWN;
	return VSOCK_OP_INVALID;
}

/* Reads host bytes into the chain after the header; returns how many (0: nothing came after all). */
static uint32_t read_data(struct vsock_conn *c, const struct virtq_chain *ch)
{
	uint64_t max = ch->in_bytes - VSOCK_HDR_SIZE;
	uint32_t credit = vsock_conn_credit(c);
	struct iovec iov[VSOCK_MAX_SEGS];
	struct virtq_cursor w;
	ssize_t n;

	if (max > credit)
		max = credit;
	if (max > VSOCK_MAX_PKT)
		max = VSOCK_MAX_PKT;
	if (!max)
		return 0;
	virtq_writer(&w, ch);
	virtq_cursor_skip(&w, VSOCK_HDR_SIZE);
	n = readv(c->fd, iov, (int)virtq_cursor_iov(&w, max, iov, VSOCK_MAX_SEGS, NULL));
	return n > 0 ? (uint32_t)n : 0;
}

/*
 * Writes c's next packet `op` into the chain; returns the bytes written. The header carries fwd_cnt, so
 * any packet is also a credit update (5.10.6.3).
 */
static uint32_t conn_packet(struct vsock_dev *v, struct vsock_conn *c, uint16_t op, const struct virtq_chain *ch)
{
	struct virtio_vsock_hdr h;
	uint32_t len = op == VSOCK_OP_RW ? read_data(c, ch) : 0;

	if (op == VSOCK_OP_RW && !len)
		op = VSOCK_OP_CREDIT_UPDATE; /* no room after the header, or nothing came: say something harmless */
	header(v, c->local_port, c->peer_port, op, &h);
	h.len = len;
	h.fwd_cnt = c->fwd_cnt;
	if (op == VSOCK_OP_SHUTDOWN)
		h.flags = c->shut_flags;
	virtq_copy_to(ch, 0, &h, VSOCK_HDR_SIZE);
	fcm_inc(fcm_vsock, FCM_VSOCK_rx_packets_count);
	c->fwd_sent = c->fwd_cnt;
	c->pending &= ~PEND_CREDIT;
	switch (op) {
	case VSOCK_OP_REQUEST:
		c->pending &= ~PEND_REQUEST;
		break;
	case VSOCK_OP_RESPONSE:
		c->pending &= ~PEND_RESPONSE;
		break;
	case VSOCK_OP_RW:
		c->tx_cnt += len;
		v->stats.bytes_to_guest += len;
		fcm_add(fcm_vsock, FCM_VSOCK_rx_bytes_count, len);
		break;
	case VSOCK_OP_SHUTDOWN:
		c->pending &= ~PEND_SHUTDOWN;
		break;
	default:
		break;
	}
	return VSOCK_HDR_SIZE + len;
}

/* A receive chain the device can write a packet into (5.10.6.1: writable buffers only, room for a header). */
static bool rx_chain_ok(struct virtq_iter *it, const struct virtq_chain *ch)
{
	if (!ch->nr_out && ch->in_bytes >= VSOCK_HDR_SIZE)
		return true;
	virtq_drop(it, ch,
		   ch->nr_out ? "a readable buffer on the receive queue"
			      : "a receive buffer shorter than the 44-byte header");
	return false;
}

/* What goes next: a reset, else the first pending connection with something to say now (*c, *op). */
static bool something_to_send(struct vsock_dev *v, struct vsock_conn **c, uint16_t *op)
{
	*c = NULL;
	*op = VSOCK_OP_INVALID;
	while (!v->rst_len && (*c = v->pend_head) && (*op = plan(*c)) == VSOCK_OP_INVALID)
		vsock_conn_next(v); /* nothing now (plan saw EAGAIN): its next event puts it back */
	return v->rst_len || *c;
}

/* The oldest queued reset, into the chain. */
static void send_rst(struct vsock_dev *v, struct virtq_iter *it, const struct virtq_chain *ch)
{
	struct vsock_rst r = v->rst[v->rst_head];
	struct virtio_vsock_hdr h;

	v->rst_head = (v->rst_head + 1) % VSOCK_RST_QUEUE;
	v->rst_len--;
	header(v, r.local_port, r.peer_port, VSOCK_OP_RST, &h);
	virtq_copy_to(ch, 0, &h, VSOCK_HDR_SIZE);
	virtq_push(it->q, ch->head, VSOCK_HDR_SIZE);
	v->stats.rst_sent++;
}

/* c's packet `op`, into the chain; then c goes to the back of the list if it has more (round robin). */
static void send_conn(struct vsock_dev *v, struct virtq_iter *it, const struct virtq_chain *ch, struct vsock_conn *c,
		      uint16_t op)
{
	virtq_push(it->q, ch->head, conn_packet(v, c, op, ch));
	vsock_conn_next(v); /* c was the head */
	if (op == VSOCK_OP_SHUTDOWN)
		vsock_conn_shutdown_progress(c);
	if (!c->dead)
		vsock_conn_schedule(c);
}

void vsock_fill_rx(struct vsock_dev *v)
{
	struct virtq_seg segs[VSOCK_MAX_SEGS];
	struct virtq_chain ch;
	struct virtq_iter it;
	struct vsock_conn *c;
	uint16_t op;

	if (!v->active || !virtio_iter(v->t, VSOCK_RX_Q, &it, segs, VSOCK_MAX_SEGS, VSOCK_QUEUE_SIZE))
		return;
	/* a chain only for a packet to send: else everything waits for the guest's buffers */
	while (v->active && something_to_send(v, &c, &op) && virtq_next(&it, &ch)) {
		if (!rx_chain_ok(&it, &ch))
			continue;
		if (v->rst_len)
			send_rst(v, &it, &ch);
		else
			send_conn(v, &it, &ch, c, op);
	}
	v->stats.malformed += it.bad;
	end_round(v, &it, VSOCK_RX_Q);
}

/* ---- the event queue ------------------------------------------------------------------------------------ */

/* 5.10.6.8: every connection dropped, then the event in the driver's next event buffer. */
static void transport_reset(struct vsock_dev *v)
{
	struct virtq_seg segs[VSOCK_MAX_SEGS];
	uint32_t id = VSOCK_EVENT_TRANSPORT_RESET;
	struct virtq_chain ch;
	struct virtq_iter it;

	vsock_conn_kill_all(v, true);
	if (!v->active || !virtio_iter(v->t, VSOCK_EVT_Q, &it, segs, VSOCK_MAX_SEGS, 1)) {
		v->stats.events_missed++;
		return;
	}
	/* One buffer, well-formed or not: empty, broken, or malformed (completed empty), the event is missed. */
	if (!virtq_next(&it, &ch)) {
		v->stats.events_missed++;
		end_round(v, &it, VSOCK_EVT_Q);
		return;
	}
	if (!ch.nr_out && ch.in_bytes >= sizeof(id)) {
		virtq_copy_to(&ch, 0, &id, sizeof(id));
		virtq_push(it.q, ch.head, sizeof(id));
	} else {
		v->stats.events_missed++;
		virtq_drop(&it, &ch, "a malformed event buffer");
	}
	virtio_queue_done(v->t, VSOCK_EVT_Q);
}

int virtio_vsock_transport_reset(struct virtio_vsock *vv)
{
	atomic_store(&vv->d.reset_requested, true);
	kick(&vv->d);
	return 0;
}

/* ---- the event loop's callbacks (I/O lock held) ------------------------------------------------------- */

static void host_ready(void *arg, uint32_t events)
{
	struct vsock_dev *v = arg;

	(void)events;
	vsock_host_events(v);
	vsock_fill_rx(v);
	vsock_reap(v);
}

static void timer_fired(void *arg, uint32_t events)
{
	struct vsock_dev *v = arg;
	uint64_t n;

	(void)events;
	if (read(v->timer_fd, &n, sizeof(n)) != sizeof(n))
		return;
	vsock_tick(v);
	vsock_fill_rx(v);
	vsock_reap(v);
}

static void kicked(void *arg, uint32_t events)
{
	struct vsock_dev *v = arg;
	uint64_t n;

	(void)events;
	if (read(v->kick_fd, &n, sizeof(n)) != sizeof(n))
		return;
	if (atomic_exchange(&v->reset_requested, false))
		transport_reset(v);
	drain_tx(v);
	vsock_fill_rx(v);
	vsock_reap(v);
}

static void vsock_notify(void *dev, unsigned q)
{
	struct vsock_dev *v = dev;

	if (q != VSOCK_EVT_Q)
		fcm_inc(fcm_vsock, q == VSOCK_TX_Q ? FCM_VSOCK_tx_queue_event_count : FCM_VSOCK_rx_queue_event_count);
	if (q == VSOCK_TX_Q)
		drain_tx(v);
	if (q != VSOCK_EVT_Q) /* event buffers are kept for transport_reset */
		vsock_fill_rx(v);
	vsock_reap(v);
}

static void vsock_config_read(void *dev, uint32_t offset, void *data, unsigned len)
{
	struct vsock_dev *v = dev;
	uint64_t cid = v->cid; /* le64 (the build asserts little-endian, vsock_pkt.c) */

	memcpy(data, (const uint8_t *)&cid + offset, len);
}

static int vsock_activate(void *dev, uint64_t features)
{
	struct vsock_dev *v = dev;

	(void)features;
	v->active = true;
	kick(v); /* what the driver queued before DRIVER_OK */
	return 0;
}

/* Device reset (2.4): the driver's connections are gone; their host sockets are closed. */
static void vsock_reset(void *dev)
{
	struct vsock_dev *v = dev;

	v->active = false;
	vsock_conn_kill_all(v, true);
	vsock_reap(v);
}

/*
 * Snapshot restore: the host sockets behind the guest's connections did not survive, so the guest is
 * told to drop them all with VIRTIO_VSOCK_EVENT_TRANSPORT_RESET (5.10.6.6), as Firecracker does. Nothing
 * is saved beyond the transport's state. The event is requested here and sent by the event loop's first
 * round (`kicked`: the kick eventfd stays readable until then, and activate, which the transport calls
 * after this when DRIVER_OK was saved, kicks it too), under the I/O lock like any event; the vCPUs may
 * already run by then, which the driver handles as for a reset at any other time. Without DRIVER_OK no
 * event buffer is there: it is counted as missed, and the driver has no connections to drop.
 */
static int vsock_restore(void *dev, struct snap_reader *r)
{
	struct vsock_dev *v = dev;

	(void)r;
	atomic_store(&v->reset_requested, true);
	kick(v);
	return 0;
}

static void vsock_stop(void *dev)
{
	struct vsock_dev *v = dev;
	const struct vsock_stats *s = &v->stats;

	log_info("virtio-vsock: %llu connections (%llu from the host, %llu from the guest), %llu bytes to the host, "
		 "%llu to the guest, %llu resets sent (%llu dropped), %llu malformed packets, %llu credit violations, "
		 "%llu refused, %llu over the connection limit, %llu bad CONNECT lines, %llu timeouts",
		 (unsigned long long)(s->conns_host + s->conns_guest), (unsigned long long)s->conns_host,
		 (unsigned long long)s->conns_guest, (unsigned long long)s->bytes_to_host,
		 (unsigned long long)s->bytes_to_guest, (unsigned long long)s->rst_sent,
		 (unsigned long long)s->rst_dropped, (unsigned long long)s->malformed,
		 (unsigned long long)s->credit_violations, (unsigned long long)s->refused,
		 (unsigned long long)s->over_limit, (unsigned long long)s->bad_lines, (unsigned long long)s->timeouts);
}

static void close_fds(struct vsock_dev *v)
{
	if (v->listen_fd >= 0) {
		close(v->listen_fd);
		unlink(v->path); /* ours: created by listen_on */
	}
	if (v->ep_fd >= 0)
		close(v->ep_fd);
	if (v->timer_fd >= 0)
		close(v->timer_fd);
	if (v->kick_fd >= 0)
		close(v->kick_fd);
}

static void vsock_destroy(void *dev)
{
	struct vsock_dev *v = dev;

	vsock_conn_kill_all(v, false);
	vsock_reap(v);
	close_fds(v);
	free(v);
}

static const struct virtio_dev_ops vsock_ops = {
    .name = "virtio-vsock",
    .device_id = VIRTIO_ID_VSOCK,
    .nr_queues = 3,
    .queue_max = VSOCK_QUEUE_SIZE,
    .config_size = CONFIG_SIZE,
    .config_read = vsock_config_read,
    .activate = vsock_activate,
    .restore = vsock_restore,
    .notify = vsock_notify,
    .reset = vsock_reset,
    .stop = vsock_stop,
    .destroy = vsock_destroy,
};

/* ---- construction ---------------------------------------------------------------------------------------- */

/*
 * The listening socket at v->path. A socket already there is replaced when nobody answers on it (left by
 * a process that died); a socket someone listens on, or anything else, is refused.
 */
static int listen_on(struct vsock_dev *v, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, e;

	memcpy(sa.sun_path, v->path, strlen(v->path) + 1);
	if (lstat(v->path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket", v->path);
			return -EEXIST;
		}
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		e = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : errno;
		if (fd >= 0)
			close(fd);
		if (!e || e == EAGAIN) {
			snprintf(err, errlen, "%s is in use: another process listens on it", v->path);
			return -EADDRINUSE;
		}
		if (unlink(v->path) < 0) {
			e = errno;
			snprintf(err, errlen, "cannot remove the stale socket %s: %s", v->path, strerror(e));
			return -e;
		}
	} else if (errno != ENOENT) {
		e = errno;
		snprintf(err, errlen, "%s: %s", v->path, strerror(e));
		return -e;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, BACKLOG) < 0) {
		e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", v->path, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	v->listen_fd = fd;
	return 0;
}

/* The listening socket at v->path, in the inner epoll set. */
static int listen_and_watch(struct vsock_dev *v, char *err, size_t errlen)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}; /* NULL: the listener */
	int e = listen_on(v, err, errlen);

	if (e)
		return e;
	if (epoll_ctl(v->ep_fd, EPOLL_CTL_ADD, v->listen_fd, &ev) < 0) {
		e = errno;
		snprintf(err, errlen, "epoll_ctl: %s", strerror(e));
		return -e;
	}
	return 0;
}

/* Everything but the transport: the inner epoll set, the timer, the kick; the socket unless `listen_later`. */
static int setup(struct vsock_dev *v, bool listen_later, char *err, size_t errlen)
{
	int e;

	v->ep_fd = epoll_create1(EPOLL_CLOEXEC);
	v->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	v->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (v->ep_fd < 0 || v->timer_fd < 0 || v->kick_fd < 0) {
		e = errno;
		snprintf(err, errlen, "epoll, timerfd or eventfd: %s", strerror(e));
		return -e;
	}
	return listen_later ? 0 : listen_and_watch(v, err, errlen);
}

/* `uds` into v->path, where PATH_P (the guest's connections to port P) must still fit sun_path. */
static int set_path(struct vsock_dev *v, const char *uds, char *err, size_t errlen)
{
	if (strlen(uds) + VSOCK_PORT_SUFFIX_MAX >= sizeof(v->path)) {
		snprintf(err, errlen, "path %s out of range", uds);
		return -EINVAL;
	}
	memcpy(v->path, uds, strlen(uds) + 1);
	return 0;
}

int virtio_vsock_create(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win, uint32_t cid,
			const char *uds, char *err, size_t errlen, struct virtio_vsock **out)
{
	struct virtio_vsock *vv = calloc(1, sizeof(*vv));
	struct vsock_dev *v = vv ? &vv->d : NULL;
	int e;

	if (!vv) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*v = (struct vsock_dev){
	    .cid = cid, .listen_fd = -1, .ep_fd = -1, .timer_fd = -1, .kick_fd = -1, .next_port = 1u << 30};
	/* Any CID: --vsock holds it to VSOCK_CID_MIN..MAX, the API takes any u32 as Firecracker does. */
	if (uds && (e = set_path(v, uds, err, errlen))) {
		free(vv);
		return e;
	}
	e = setup(v, !uds, err, errlen);
	if (e) {
		close_fds(v);
		free(vv);
		return e;
	}
	e = virtio_mmio_create(ctx, bus, win, &vsock_ops, v, 1ull << VIRTIO_VSOCK_F_STREAM, &v->t); /* owns v */
	if (!e && ((e = virtio_watch(v->t, v->ep_fd, EPOLLIN, host_ready, v)) ||
		   (e = virtio_watch(v->t, v->timer_fd, EPOLLIN, timer_fired, v)) ||
		   (e = virtio_watch(v->t, v->kick_fd, EPOLLIN, kicked, v))))
		snprintf(err, errlen, "watching its fds on the I/O event loop: %s", strerror(-e));
	else if (e)
		snprintf(err, errlen, "creating its virtio-mmio transport: %s", strerror(-e));
	if (!e && out)
		*out = vv;
	return e;
}

int virtio_vsock_listen(struct virtio_vsock *vv, const char *uds, char *err, size_t errlen)
{
	struct vsock_dev *v = &vv->d;
	int e;

	if (v->listen_fd >= 0) {
		snprintf(err, errlen, "already listening on %s", v->path);
		return -EBUSY;
	}
	if ((e = set_path(v, uds, err, errlen)))
		return e;
	if ((e = listen_and_watch(v, err, errlen)) && v->listen_fd >= 0) {
		close(v->listen_fd);
		unlink(v->path);
		v->listen_fd = -1;
	}
	return e;
}
