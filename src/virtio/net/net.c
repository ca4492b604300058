/*
 * net.c - virtio network device (virtio 1.2 section 5.1): one receiveq (0) and one transmitq (1), on a
 * backend (virtio_net.h): a tap (net_tap.c) or user-mode networking (net_user.c).
 *
 * Everything runs on the VM's I/O event loop under the transport's I/O lock. The backend's fd sits in a
 * small epoll set of the device's own, which the loop watches (virtio_watch): the device changes its
 * interest in the backend (EPOLLIN, EPOLLOUT) there without the loop having to support it.
 *
 * Transmit (5.1.6.2): each chain is parsed (net_tx_parse: header copied once, lengths checked), handed
 * to the backend with writev/sendmsg and returned with 0 bytes written. A malformed chain, a frame of
 * length 0 or above the negotiated maximum is dropped, counted and returned (docs/security.md case 10). When the
 * backend is full (EAGAIN) the device keeps that one chain, stops taking more, and waits for EPOLLOUT:
 * back-pressure reaches the guest through its own ring, the loop never blocks.
 *
 * Receive (5.1.6.3, 5.1.6.4): a frame is read from the backend into the device's buffer only while
 * none is pending, then copied into the guest's receive chains: one chain without MRG_RXBUF (a chain
 * too small for it drops the frame, counted), as many as it takes with MRG_RXBUF (num_buffers set in
 * the first). With no chain posted the frame waits, the device stops reading the backend (EPOLLIN
 * off: later frames wait in the kernel's queue, bounded by the tap's txqueuelen or the helper's
 * socket buffer) and the receiveq's next notification resumes it.
 *
 * A backend that disappears (the tap deleted, the helper gone: EPOLLERR/EPOLLHUP, EBADFD, EPIPE) is
 * logged once, the link goes down in config space (VIRTIO_NET_S_LINK_UP cleared, config interrupt),
 * transmitted frames are dropped and counted from then on. Nothing of it is fatal.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "brisk/config.h"
#include "brisk/devices.h"
#include "brisk/fc_metrics.h"
#include "brisk/log.h"
#include "brisk/net_mmds.h"
#include "brisk/rate_limiter.h"
#include "brisk/snapshot.h"
#include "brisk/virtio.h"
#include "brisk/virtio_net.h"
#include "brisk/vm.h"

#define RX_Q	  0
#define TX_Q	  1
#define RX_BUDGET 64 /* frames received per callback before the loop looks at its other fds */

struct counters {
	uint64_t tx_frames, tx_bytes, rx_frames, rx_bytes;
	uint64_t tx_bad;     /* malformed, empty or oversized frames (docs/security.md case 10) */
	uint64_t tx_backend; /* dropped by or because of the backend (gone, errors) */
	uint64_t rx_no_room; /* a frame larger than the receive chain (without MRG_RXBUF) */
	uint64_t rx_bad;     /* malformed receive chains, returned empty */
	uint64_t tx_full;    /* times the backend was full (EAGAIN): transmission paused until EPOLLOUT */
	uint64_t rx_runt;    /* backend frames shorter than an Ethernet header (or too long for the buffer) */
};

struct net {
	struct virtio_mmio *t;
	uint64_t *fcm; /* Firecracker's net_<id> counters (fc_metrics.h), or fcm_own */
	uint64_t fcm_own[FCM_NET_N];
	struct net_backend *be;
	char label[64]; /* "virtio-net 0 (tap tap0)" */
	uint8_t mac[6];
	uint16_t status; /* VIRTIO_NET_S_LINK_UP; read by vCPUs (config space) */
	uint64_t features;
	struct net_limits lim;
	bool active, dead;
	int epfd;	   /* the backend fd, with `interest` */
	int kick_fd;	   /* eventfd: activate, or a queue left for later */
	uint32_t interest; /* EPOLLIN / EPOLLOUT registered for the backend fd */
	uint64_t errors;   /* backend errors (send), logged rate-limited */
	/* A transmit chain the backend could not take yet (EAGAIN). */
	bool tx_pending;
	uint16_t tx_head;
	struct net_tx tx;
	/* The frame being received: header + frame in rx_buf, rx_off bytes of it already in guest chains. */
	uint8_t *rx_buf;
	uint32_t rx_len, rx_off;
	unsigned rx_nbufs; /* MRG_RXBUF: chains taken by this frame */
	uint16_t rx_heads[NET_RX_MAX_BUFFERS];
	uint32_t rx_used[NET_RX_MAX_BUFFERS];
	struct virtq_chain rx_first; /* MRG_RXBUF: the first chain, whose header gets num_buffers at the end */
	struct virtq_seg rx_first_segs[NET_MAX_SEGS];
	struct counters n;
	unsigned index;	       /* the interface's position: whether it answers MMDS (mmds_iface) */
	struct net_mmds *mmds; /* its MMDS stack (net_mmds.c), made at its first frame */
	/* rx_rate_limiter, tx_rate_limiter (docs/devices.md, "Rate limiting"): a frame waits for its timer */
	struct rate_limiter rx_rl, tx_rl;
	bool rx_paid; /* the pending frame (rx_len) has been paid for with rx_rl */
};

static void kick(struct net *n)
{
	uint64_t one = 1;

	if (write(n->kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_debug("%s: eventfd write: %s", n->label, strerror(errno));
}

/* Registers what the device wants from the backend now: frames while none is pending, room while blocked. */
static void update_interest(struct net *n)
{
	uint32_t want = 0;
	struct epoll_event ev;

	if (n->active && !n->dead)
		want = (n->rx_len ? 0 : EPOLLIN) | (n->tx_pending ? EPOLLOUT : 0);
	if (want == n->interest || n->dead)
		return;
	ev = (struct epoll_event){.events = want, .data.ptr = n};
	if (epoll_ctl(n->epfd, EPOLL_CTL_MOD, n->be->fd, &ev) < 0)
		log_warn("%s: epoll_ctl: %s", n->label, strerror(errno));
	else
		n->interest = want;
}

static void backend_error(struct net *n, const char *what, int err)
{
	if (log_ratelimit(n->errors++))
		log_warn("%s: %s: %s (%llu so far)", n->label, what, strerror(err), (unsigned long long)n->errors);
}

/* The backend is gone for good: link down, nothing more read or written (logged once). */
static void backend_gone(struct net *n, const char *why)
{
	if (n->dead)
		return;
	n->dead = true;
	log_error("%s: the backend is gone (%s): link down, frames dropped from now on", n->label, why);
	epoll_ctl(n->epfd, EPOLL_CTL_DEL, n->be->fd, NULL);
	n->interest = 0;
	__atomic_store_n(&n->status, 0, __ATOMIC_RELAXED);
	virtio_config_changed(n->t);
}

static void fill_rx(struct net *n); /* the MMDS reply path */

/* ---- transmit --------------------------------------------------------------------------------------- */

/* Sends n->tx; returns false when the backend is full (the chain stays pending). */
static bool send_frame(struct net *n)
{
	ssize_t r;

	if (n->dead) {
		n->n.tx_backend++;
		return true;
	}
	r = n->be->ops->send(n->be, &n->tx.hdr, n->tx.iov, n->tx.niov);
	if (r == -EAGAIN)
		return false;
	if (r == -EPIPE || r == -EBADFD || r == -ENODEV || r == -ENXIO || r == -EBADF || r == -ECONNRESET) {
		backend_gone(n, strerror((int)-r));
		n->n.tx_backend++;
		fcm_inc(n->fcm, FCM_NET_tx_fails);
		fcm_inc(n->fcm, FCM_NET_tap_write_fails);
	} else if (r < 0) {
		backend_error(n, "send", (int)-r); /* e.g. EIO while the tap is down: dropped, as a wire would */
		n->n.tx_backend++;
		fcm_inc(n->fcm, FCM_NET_tx_fails);
		fcm_inc(n->fcm, FCM_NET_tap_write_fails);
	} else {
		n->n.tx_frames++;
		n->n.tx_bytes += n->tx.len;
		fcm_inc(n->fcm, FCM_NET_tx_count);
		fcm_inc(n->fcm, FCM_NET_tx_packets_count);
		fcm_add(n->fcm, FCM_NET_tx_bytes_count, n->tx.len);
	}
	return true;
}

/*
 * Firecracker's rate_limit for a frame of `bytes` (net device.rs): one op, then the bytes; a refused
 * bytes consume gives the op back. False: throttled (the limiter's timer is armed).
 */
static bool pay(struct rate_limiter *rl, uint64_t bytes)
{
	if (!rl_active(rl) && !rl->blocked)
		return true;
	if (!rl_consume(rl, 1, RL_OPS))
		return false;
	if (rl_consume(rl, bytes, RL_BYTES))
		return true;
	rl_replenish(rl, 1, RL_OPS);
	return false;
}

/*
 * One transmit chain: dropped if malformed, else sent; false when the backend is full (the chain waits)
 * or tx_rl refuses it (the chain goes back to the ring until the limiter's timer).
 */
static bool transmit(struct net *n, struct virtq_iter *it, const struct virtq_chain *c)
{
	if (net_tx_parse(&n->lim, c, &n->tx) != NET_TX_OK) {
		virtq_drop(it, c, n->tx.why);
		return true;
	}
	if (!pay(&n->tx_rl, n->tx.len)) {
		fcm_inc(n->fcm, FCM_NET_tx_rate_limiter_throttled);
		virtq_unpop(it);
		return false;
	}
	if (net_mmds_tx(&n->mmds, n->index, &n->tx)) { /* the metadata service's (net_mmds.c), never the backend's */
		virtq_push(it->q, c->head, 0);
		if (net_mmds_pending(n->mmds))
			fill_rx(n); /* the reply at once: measured 2x faster than a kick through the loop */
		return true;
	}
	if (!send_frame(n)) {
		n->n.tx_full++;
		n->tx_pending = true;
		n->tx_head = c->head;
		return false;
	}
	virtq_push(it->q, c->head, 0);
	return true;
}

/* After a round: a queue that broke stops the device; more left for later; what was pushed published. */
static void end_round(struct net *n, struct virtq_iter *it, unsigned qi)
{
	if (it->q && it->q->broken)
		n->active = false; /* the transport set DEVICE_NEEDS_RESET */
	if (it->more)
		kick(n);
	if (virtq_iter_pushed(it))
		virtio_queue_done(n->t, qi);
}

static void drain_tx(struct net *n)
{
	struct virtq_seg segs[NET_MAX_SEGS];
	struct virtq_chain c;
	struct virtq_iter it;
	bool ok = virtio_iter(n->t, TX_Q, &it, segs, NET_MAX_SEGS, NET_QUEUE_SIZE);

	if (n->tx_rl.blocked)
		ok = false; /* the limiter's timer drains the queue again */
	if (n->tx_pending) {
		if (!send_frame(n))
			return;
		n->tx_pending = false;
		virtq_push(it.q, n->tx_head, 0);
	}
	while (ok && virtq_next(&it, &c) && transmit(n, &it, &c))
		;
	n->n.tx_bad += it.bad; /* malformed chains and frames (docs/security.md case 10) */
	fcm_add(n->fcm, FCM_NET_tx_malformed_frames, it.bad);
	end_round(n, &it, TX_Q);
}

/* ---- receive ---------------------------------------------------------------------------------------- */

enum deliver { DELIVERED, NO_BUFFER, STOPPED };

static void finish_frame(struct net *n, struct virtq *q)
{
	if (n->features & VIRTIO_NET_F_MRG_RXBUF) {
		uint16_t nb = (uint16_t)n->rx_nbufs;

		virtq_copy_to(&n->rx_first, offsetof(struct virtio_net_hdr, num_buffers), &nb, sizeof(nb));
		for (unsigned i = 0; i < n->rx_nbufs; i++)
			virtq_push(q, n->rx_heads[i], n->rx_used[i]);
	}
	n->n.rx_frames++;
	n->n.rx_bytes += n->rx_len - NET_HDR_SIZE;
	fcm_inc(n->fcm, FCM_NET_rx_count);
	fcm_inc(n->fcm, FCM_NET_rx_packets_count);
	fcm_add(n->fcm, FCM_NET_rx_bytes_count, n->rx_len - NET_HDR_SIZE);
	n->rx_len = n->rx_off = 0;
	n->rx_nbufs = 0;
}

/* One chain for the pending frame. */
static enum deliver take_chain(struct net *n, struct virtq_iter *it)
{
	bool mrg = n->features & VIRTIO_NET_F_MRG_RXBUF;
	struct virtq *q = it->q;
	struct virtq_chain c;
	uint32_t chunk;

	if (!virtq_next(it, &c))
		return q && q->broken ? STOPPED : NO_BUFFER;
	/* 5.1.6.3.1: with MRG_RXBUF every buffer holds at least the header. */
	if (c.nr_out || c.in_bytes < (mrg ? NET_HDR_SIZE : 1)) {
		virtq_drop(it, &c,
			   c.nr_out ? "a readable buffer on the receive queue"
				    : "a receive chain shorter than the header");
		return DELIVERED; /* not the frame: the caller goes on with the next chain */
	}
	if (!mrg) {
		if (c.in_bytes < n->rx_len) {
			n->n.rx_no_room++;
			virtq_push(q, c.head, 0);
			n->rx_len = 0;
		} else {
			virtq_copy_to(&c, 0, n->rx_buf, n->rx_len);
			virtq_push(q, c.head, n->rx_len);
			finish_frame(n, q);
		}
		return DELIVERED;
	}
	chunk = c.in_bytes < n->rx_len - n->rx_off ? (uint32_t)c.in_bytes : n->rx_len - n->rx_off;
	virtq_copy_to(&c, 0, n->rx_buf + n->rx_off, chunk);
	if (n->rx_nbufs == 0) {
		n->rx_first = c;
		memcpy(n->rx_first_segs, c.seg, (c.nr_in) * sizeof(c.seg[0]));
		n->rx_first.seg = n->rx_first_segs;
	}
	n->rx_heads[n->rx_nbufs] = c.head;
	n->rx_used[n->rx_nbufs++] = chunk;
	n->rx_off += chunk;
	if (n->rx_off == n->rx_len) {
		finish_frame(n, q);
	} else if (n->rx_nbufs == NET_RX_MAX_BUFFERS) { /* cannot happen with a queue of this size; bounded anyway */
		for (unsigned i = 0; i < n->rx_nbufs; i++)
			virtq_push(q, n->rx_heads[i], 0);
		n->n.rx_no_room++;
		n->rx_len = n->rx_off = 0;
		n->rx_nbufs = 0;
	}
	return DELIVERED;
}

/* Reads the next frame from the backend into rx_buf. Returns false when there is none (or no backend). */
static bool read_frame(struct net *n)
{
	struct virtio_net_hdr *h = (struct virtio_net_hdr *)n->rx_buf;
	ssize_t r;

	for (unsigned tries = 0;; tries++) {
		if (tries == RX_BUDGET)
			return false; /* a run of runts: the loop comes back (level-triggered) */
		r = n->be->ops->recv(n->be, n->rx_buf, NET_RX_BUF_SIZE);
		if (r == -EAGAIN || r == -EINTR)
			return false;
		if (r >= (ssize_t)(NET_HDR_SIZE + NET_ETH_MIN))
			break;
		if (r >= 0 || r == -EMSGSIZE) { /* too short, or too long for the buffer: that frame is gone */
			n->n.rx_runt++;
			continue;
		}
		/* Anything else would come back at once on a readable fd: the backend is unusable. */
		backend_gone(n, r == -EPIPE ? "end of file" : strerror((int)-r));
		return false;
	}
	h->num_buffers = 1; /* without MRG_RXBUF (5.1.6.4); with it, rewritten when the frame is placed */
	n->rx_paid = false;
	n->rx_len = (uint32_t)r;
	n->rx_off = 0;
	n->rx_nbufs = 0;
	return true;
}

static void fill_rx(struct net *n)
{
	struct virtq_seg segs[NET_MAX_SEGS];
	unsigned budget = RX_BUDGET;
	struct virtq_iter it;

	if (!virtio_iter(n->t, RX_Q, &it, segs, NET_MAX_SEGS, VIRTQ_NO_BUDGET))
		return;
	while (n->active) {
		/* the MMDS stack's replies first (net_mmds_rx: header and frame), then the backend's frames */
		if (!n->rx_len && (budget-- == 0 || !((n->rx_len = net_mmds_rx(n->mmds, n->rx_buf, NET_RX_BUF_SIZE)) ||
						      (!n->dead && read_frame(n)))))
			break;
		if (!n->rx_paid && !(n->rx_paid = pay(&n->rx_rl, n->rx_len - NET_HDR_SIZE))) {
			fcm_inc(n->fcm, FCM_NET_rx_rate_limiter_throttled);
			break; /* the frame waits (no EPOLLIN meanwhile) for rx_rl's timer */
		}
		if (take_chain(n, &it) != DELIVERED)
			break; /* no buffer: the frame waits for the receiveq's next notification */
	}
	n->n.rx_bad += it.bad;
	end_round(n, &it, RX_Q);
}

/* ---- callbacks -------------------------------------------------------------------------------------- */

static void net_notify(void *dev, unsigned q)
{
	struct net *n = dev;

	if (!n->active)
		return;
	fcm_inc(n->fcm, q == RX_Q ? FCM_NET_rx_queue_event_count : FCM_NET_tx_queue_event_count);
	if (q == RX_Q)
		fill_rx(n);
	else
		drain_tx(n);
	update_interest(n);
}

/* The device's epoll set: the backend is readable, writable, or gone. */
static void backend_ready(void *arg, uint32_t events)
{
	struct net *n = arg;
	struct epoll_event ev;

	(void)events;
	if (epoll_wait(n->epfd, &ev, 1, 0) != 1)
		return;
	fcm_inc(n->fcm, FCM_NET_rx_tap_event_count);
	/* Reported whatever the interest, also while the driver is away: handled here or the loop would spin. */
	if (ev.events & (EPOLLERR | EPOLLHUP))
		backend_gone(n, ev.events & EPOLLHUP ? "hang-up" : "error on its fd");
	if (!n->active)
		return;
	if (ev.events & EPOLLOUT || n->dead)
		drain_tx(n);
	if (ev.events & EPOLLIN)
		fill_rx(n);
	update_interest(n);
}

/* rx_rl's timer: the frame that waited may go in. */
static void rx_rl_fired(void *arg, uint32_t events)
{
	struct net *n = arg;

	(void)events;
	fcm_inc(n->fcm, FCM_NET_rx_event_rate_limiter_count);
	if (!rl_timer_event(&n->rx_rl) || !n->active)
		return;
	fill_rx(n);
	update_interest(n);
}

/* tx_rl's timer: the chains that waited in the transmit queue go out. */
static void tx_rl_fired(void *arg, uint32_t events)
{
	struct net *n = arg;

	(void)events;
	fcm_inc(n->fcm, FCM_NET_tx_rate_limiter_event_count);
	if (!rl_timer_event(&n->tx_rl) || !n->active)
		return;
	drain_tx(n);
	update_interest(n);
}

static void kicked(void *arg, uint32_t events)
{
	struct net *n = arg;
	uint64_t v;

	(void)events;
	if (read(n->kick_fd, &v, sizeof(v)) != sizeof(v) || !n->active)
		return;
	drain_tx(n);
	fill_rx(n);
	update_interest(n);
}

static void net_config_read(void *dev, uint32_t offset, void *data, unsigned len)
{
	struct net *n = dev;
	uint8_t cfg[VIRTIO_NET_CFG_SIZE] = {0};
	uint16_t status = __atomic_load_n(&n->status, __ATOMIC_RELAXED), pairs = 1, mtu = NET_MTU;

	memcpy(cfg + VIRTIO_NET_CFG_MAC, n->mac, 6);
	memcpy(cfg + VIRTIO_NET_CFG_STATUS, &status, 2);
	memcpy(cfg + VIRTIO_NET_CFG_PAIRS, &pairs, 2);
	memcpy(cfg + VIRTIO_NET_CFG_MTU, &mtu, 2);
	memcpy(data, cfg + offset, len);
}

static int net_activate(void *dev, uint64_t features)
{
	struct net *n = dev;
	int err = n->dead ? 0 : n->be->ops->set_offload(n->be, features);

	if (err) {
		log_error("%s: setting the backend's offloads for features 0x%llx: %s", n->label,
			  (unsigned long long)features, strerror(-err));
		return err;
	}
	n->features = features;
	n->lim = (struct net_limits){.features = features, .max_frame = net_max_frame(features, NET_MTU)};
	n->active = true;
	kick(n);
	return 0;
}

static void net_reset(void *dev)
{
	struct net *n = dev;

	n->active = false;
	n->tx_pending = false; /* the chain belonged to the queue that is gone */
	n->rx_len = n->rx_off = 0;
	n->rx_nbufs = 0;
	update_interest(n);
}

/* The interface's own state: its rx and tx rate limiters (a version-1 section has none). */
static int net_save(void *dev, struct snap_writer *w)
{
	struct net *n = dev;
	int err = rl_save(&n->rx_rl, w);

	return err ? err : rl_save(&n->tx_rl, w);
}

static int net_restore(void *dev, struct snap_reader *r)
{
	struct net *n = dev;
	char why[160];

	if (snap_version(r) < RL_SNAP_SINCE)
		return 0;
	if (rl_restore(&n->rx_rl, r, why, sizeof(why)) || rl_restore(&n->tx_rl, r, why, sizeof(why))) {
		log_error("%s: restore: %s", n->label, why);
		return -EINVAL;
	}
	return 0;
}

static void net_stop(void *dev)
{
	struct net *n = dev;
	const struct counters *c = &n->n;

	log_info("%s: %llu frames tx, %llu rx, %llu dropped (tx: %llu malformed/empty/oversized, %llu backend; "
		 "rx: %llu no room, %llu runt; %llu bad rx chains); %llu bytes tx, %llu rx; backend full %llu times",
		 n->label, (unsigned long long)c->tx_frames, (unsigned long long)c->rx_frames,
		 (unsigned long long)(c->tx_bad + c->tx_backend + c->rx_no_room + c->rx_runt),
		 (unsigned long long)c->tx_bad, (unsigned long long)c->tx_backend, (unsigned long long)c->rx_no_room,
		 (unsigned long long)c->rx_runt, (unsigned long long)c->rx_bad, (unsigned long long)c->tx_bytes,
		 (unsigned long long)c->rx_bytes, (unsigned long long)c->tx_full);
}

static void net_destroy(void *dev)
{
	struct net *n = dev;

	if (n->be)
		n->be->ops->destroy(n->be);
	if (n->epfd >= 0)
		close(n->epfd);
	if (n->kick_fd >= 0)
		close(n->kick_fd);
	rl_destroy(&n->rx_rl);
	rl_destroy(&n->tx_rl);
	free(n->rx_buf);
	net_mmds_free(n->mmds);
	free(n);
}

static const struct virtio_dev_ops net_ops = {
    .name = "virtio-net",
    .device_id = VIRTIO_ID_NET,
    .nr_queues = 2, /* receiveq1, transmitq1: no VIRTIO_NET_F_MQ, no control queue */
    .queue_max = NET_QUEUE_SIZE,
    .config_size = VIRTIO_NET_CFG_SIZE,
    .config_read = net_config_read,
    .activate = net_activate,
    .notify = net_notify,
    .reset = net_reset,
    .save = net_save,
    .restore = net_restore,
    .stop = net_stop,
    .destroy = net_destroy,
};

int virtio_net_create_on(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win,
			 struct net_backend *be, const uint8_t mac[6], unsigned index, char *err, size_t errlen)
{
	return virtio_net_open_on(ctx, bus, win, be, mac, index, NULL, NULL, err, errlen);
}

int virtio_net_open_on(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win,
		       struct net_backend *be, const uint8_t mac[6], unsigned index, const struct vm_net *cfg,
		       void **dev, char *err, size_t errlen)
{
	struct net *n = calloc(1, sizeof(*n));
	struct epoll_event ev = {.events = 0};
	uint64_t features = VIRTIO_NET_F_MAC | VIRTIO_NET_F_STATUS | VIRTIO_NET_F_MTU | VIRTIO_NET_F_MRG_RXBUF;
	int ret;

	if (!n) {
		be->ops->destroy(be);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	n->be = be;
	n->rx_rl.timer_fd = n->tx_rl.timer_fd = -1;
	n->fcm = fcm_net(index, NULL);
	if (!n->fcm)
		n->fcm = n->fcm_own;
	n->epfd = epoll_create1(EPOLL_CLOEXEC);
	n->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	n->rx_buf = malloc(NET_RX_BUF_SIZE);
	ev.data.ptr = n;
	if (n->epfd < 0 || n->kick_fd < 0 || !n->rx_buf || epoll_ctl(n->epfd, EPOLL_CTL_ADD, be->fd, &ev) < 0 ||
	    rl_init(&n->rx_rl, cfg ? &cfg->rx_rl : NULL) || rl_init(&n->tx_rl, cfg ? &cfg->tx_rl : NULL)) {
		ret = n->rx_buf ? -errno : -ENOMEM;
		snprintf(err, errlen, "setting up the device: %s", strerror(-ret));
		net_destroy(n);
		return ret;
	}
	memcpy(n->mac, mac, 6);
	n->index = index;
	n->status = VIRTIO_NET_S_LINK_UP;
	snprintf(n->label, sizeof(n->label), "virtio-net %u (%s)", index, be->name);
	features |= be->features;
	ret = virtio_mmio_create(ctx, bus, win, &net_ops, n, features, &n->t); /* owns n from here on */
	if (!ret)
		ret = virtio_watch(n->t, n->epfd, EPOLLIN, backend_ready, n);
	if (!ret)
		ret = virtio_watch(n->t, n->kick_fd, EPOLLIN, kicked, n);
	if (!ret)
		ret = virtio_watch(n->t, rl_timer_fd(&n->rx_rl), EPOLLIN, rx_rl_fired, n);
	if (!ret)
		ret = virtio_watch(n->t, rl_timer_fd(&n->tx_rl), EPOLLIN, tx_rl_fired, n);
	if (ret)
		snprintf(err, errlen, "creating the device: %s", strerror(-ret));
	else if (dev)
		*dev = n;
	return ret;
}

void virtio_net_set_limiters(void *dev, const struct rl_config *rx, bool rx_bw, bool rx_ops, const struct rl_config *tx,
			     bool tx_bw, bool tx_ops)
{
	struct net *n = dev;

	virtio_io_lock(n->t);
	rl_update(&n->rx_rl, rx, rx_bw, rx_ops);
	rl_update(&n->tx_rl, tx, tx_bw, tx_ops);
	virtio_io_unlock(n->t);
}

int virtio_net_create(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win,
		      const struct vm_net *cfg, unsigned index, char *err, size_t errlen)
{
	return virtio_net_open(ctx, bus, win, cfg, index, NULL, NULL, err, errlen);
}

/* The backend: the one started early (its helper's "OK" awaited now), else opened now. */
static int backend(const struct vm_net *cfg, struct net_backend *early, struct net_backend **be, char *err,
		   size_t errlen)
{
	int ret;

	if (!early)
		return cfg->kind == NET_TAP ? net_tap_open(cfg->tap, be, err, errlen)
					    : net_user_open(cfg, NET_MTU, be, err, errlen);
	ret = net_user_wait(early, err, errlen);
	if (ret) {
		early->ops->destroy(early);
		return ret;
	}
	*be = early;
	return 0;
}

int net_user_start_for(const struct vm_net *cfg, struct net_backend **out, char *err, size_t errlen)
{
	*out = NULL;
	return cfg->kind == NET_USER ? net_user_start(cfg, NET_MTU, out, err, errlen) : 0;
}

int virtio_net_open(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win,
		    const struct vm_net *cfg, unsigned index, struct net_backend *early, void **dev, char *err,
		    size_t errlen)
{
	struct net_backend *be;
	uint8_t mac[6];
	int ret = backend(cfg, early, &be, err, errlen);

	if (ret)
		return ret;
	config_net_mac(cfg, index, mac);
	return virtio_net_open_on(ctx, bus, win, be, mac, index, cfg, dev, err, errlen);
}
