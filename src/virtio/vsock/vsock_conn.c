/*
 * vsock_conn.c - the virtio-vsock device's connections (src/virtio/vsock/vsock_conn.h): the (local port, peer
 * port) table, the host's AF_UNIX sockets on the device's own epoll set, the hybrid "CONNECT <port>\n"
 * handshake, buffering towards the host within the credit brisk advertised, and timeouts.
 *
 * The device's fds are few and fixed on the VM's event loop; connections come and go, so their sockets sit
 * on an inner epoll set (watched as one fd) whose interest changes with each connection's state:
 * EPOLLIN while the socket has not yet shown data for the guest (then the receive path reads it as credit
 * and receive buffers allow: back-pressure), EPOLLOUT while bytes wait in the buffer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "brisk/fc_metrics.h"
#include "brisk/log.h"
#include "brisk/virtio.h"
#include "vsock_conn.h"

#define EPHEMERAL_FIRST (1u << 30) /* host clients' ports, as Firecracker's: above what guests listen on */
#define TICK_MS		250u
#define EVENT_BATCH	32

uint64_t vsock_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static unsigned bucket(uint32_t local_port, uint32_t peer_port)
{
	return (local_port * 2654435761u ^ peer_port * 40503u) % VSOCK_HASH;
}

struct vsock_conn *vsock_conn_find(struct vsock_dev *v, uint32_t local_port, uint32_t peer_port)
{
	for (struct vsock_conn *c = v->table[bucket(local_port, peer_port)]; c; c = c->hnext)
		if (c->local_port == local_port && c->peer_port == peer_port)
			return c;
	return NULL;
}

static void table_add(struct vsock_conn *c)
{
	unsigned b = bucket(c->local_port, c->peer_port);

	c->hnext = c->v->table[b];
	c->v->table[b] = c;
}

static void table_del(struct vsock_conn *c)
{
	struct vsock_conn **p = &c->v->table[bucket(c->local_port, c->peer_port)];

	for (; *p; p = &(*p)->hnext)
		if (*p == c) {
			*p = c->hnext;
			return;
		}
}

void vsock_rst_push(struct vsock_dev *v, uint32_t local_port, uint32_t peer_port)
{
	if (v->rst_len == VSOCK_RST_QUEUE) {
		v->stats.rst_dropped++;
		return;
	}
	v->rst[(v->rst_head + v->rst_len) % VSOCK_RST_QUEUE] = (struct vsock_rst){local_port, peer_port};
	v->rst_len++;
}

/* ---- the pending list: connections with something for the guest, served round robin ---------------- */

uint32_t vsock_conn_credit(const struct vsock_conn *c)
{
	return vsock_credit(c->peer_buf_alloc, c->peer_fwd_cnt, c->tx_cnt);
}

static bool has_work(const struct vsock_conn *c)
{
	bool data = c->state == CONN_ESTABLISHED && c->rx_ready && !c->eof &&
		    !(c->peer_shut & VSOCK_SHUTDOWN_F_RECEIVE) && vsock_conn_credit(c) > 0;

	return !c->dead && (c->pending || data);
}

void vsock_conn_schedule(struct vsock_conn *c)
{
	struct vsock_dev *v = c->v;

	if (c->queued || !has_work(c))
		return;
	c->queued = true;
	c->pnext = NULL;
	c->pprev = v->pend_tail;
	if (v->pend_tail)
		v->pend_tail->pnext = c;
	else
		v->pend_head = c;
	v->pend_tail = c;
}

static void unqueue(struct vsock_conn *c)
{
	struct vsock_dev *v = c->v;

	if (!c->queued)
		return;
	if (c->pprev)
		c->pprev->pnext = c->pnext;
	else
		v->pend_head = c->pnext;
	if (c->pnext)
		c->pnext->pprev = c->pprev;
	else
		v->pend_tail = c->pprev;
	c->queued = false;
	c->pnext = c->pprev = NULL;
}

struct vsock_conn *vsock_conn_next(struct vsock_dev *v)
{
	struct vsock_conn *c = v->pend_head;

	if (c)
		unqueue(c);
	return c;
}

/* ---- lifetime ------------------------------------------------------------------------------------------- */

void vsock_conn_update_epoll(struct vsock_conn *c)
{
	struct epoll_event ev = {.data.ptr = c};
	uint32_t want = 0;
	int op;

	if (c->dead || c->hup)
		return;
	if (c->state == CONN_LINE || (c->state == CONN_ESTABLISHED && !c->rx_ready && !c->eof))
		want |= EPOLLIN;
	if (c->buf.len)
		want |= EPOLLOUT;
	if (c->in_epoll && want == c->events)
		return;
	ev.events = want;
	op = c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(c->v->ep_fd, op, c->fd, &ev) < 0) {
		log_warn("virtio-vsock: epoll_ctl(%s) on a host socket: %s", op == EPOLL_CTL_ADD ? "ADD" : "MOD",
			 strerror(errno));
		return;
	}
	c->in_epoll = true;
	c->events = want;
}

static struct vsock_conn *conn_new(struct vsock_dev *v, int fd, enum conn_state state)
{
	struct vsock_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->v = v;
	c->fd = fd;
	c->state = state;
	c->next = v->all;
	if (v->all)
		v->all->prev = c;
	v->all = c;
	v->nr_conns++;
	return c;
}

void vsock_conn_kill(struct vsock_dev *v, struct vsock_conn *c, bool rst)
{
	if (c->dead)
		return;
	if (c->state != CONN_LINE) {
		table_del(c);
		if (rst && v->active)
			vsock_rst_push(v, c->local_port, c->peer_port);
	}
	unqueue(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		v->all = c->next;
	if (c->next)
		c->next->prev = c->prev;
	close(c->fd); /* also leaves the epoll set */
	c->fd = -1;
	free(c->buf.data);
	c->buf.data = NULL;
	c->dead = true;
	c->next = v->dead;
	v->dead = c;
	v->nr_conns--;
	fcm_inc(fcm_vsock, FCM_VSOCK_conns_removed);
}

void vsock_conn_kill_all(struct vsock_dev *v, bool keep_lines)
{
	for (struct vsock_conn *c = v->all, *next; c; c = next) {
		next = c->next;
		if (!keep_lines || c->state != CONN_LINE)
			vsock_conn_kill(v, c, false);
	}
	v->rst_len = 0;
}

void vsock_reap(struct vsock_dev *v)
{
	while (v->dead) {
		struct vsock_conn *c = v->dead;

		v->dead = c->next;
		free(c);
	}
}

void vsock_timer_arm(struct vsock_dev *v)
{
	struct itimerspec its = {.it_value = {.tv_nsec = TICK_MS * 1000000L},
				 .it_interval = {.tv_nsec = TICK_MS * 1000000L}};

	if (v->timer_on)
		return;
	if (timerfd_settime(v->timer_fd, 0, &its, NULL) < 0) {
		log_warn("virtio-vsock: timerfd_settime: %s", strerror(errno));
		return;
	}
	v->timer_on = true;
}

void vsock_tick(struct vsock_dev *v)
{
	uint64_t now = vsock_now_ms();
	bool any = false;
	struct itimerspec off = {0};

	for (struct vsock_conn *c = v->all, *next; c; c = next) {
		next = c->next;
		if (!c->deadline_ms)
			continue;
		if (now < c->deadline_ms) {
			any = true;
			continue;
		}
		if (c->state == CONN_LINE)
			v->stats.bad_lines++;
		else
			v->stats.timeouts++;
		vsock_conn_kill(v, c, c->state != CONN_LINE);
	}
	if (!any && timerfd_settime(v->timer_fd, 0, &off, NULL) == 0)
		v->timer_on = false;
}

static void set_deadline(struct vsock_conn *c)
{
	c->deadline_ms = vsock_now_ms() + VSOCK_TIMEOUT_MS;
	vsock_timer_arm(c->v);
}

/* ---- towards the host: the guest's bytes, buffered within the credit brisk gave ------------------------ */

static void forwarded(struct vsock_conn *c, uint32_t n)
{
	c->fwd_cnt += n;
	c->v->stats.bytes_to_host += n;
	fcm_add(fcm_vsock, FCM_VSOCK_tx_bytes_count, n);
	/* Tell the guest once a good part of its credit came back (every packet to it carries fwd_cnt too). */
	if (c->fwd_cnt - c->fwd_sent >= VSOCK_CREDIT_THRESHOLD) {
		c->pending |= PEND_CREDIT;
		vsock_conn_schedule(c);
	}
}

/* Writes what the buffer holds. Returns 0 (all or some taken), or -1 when the socket failed. */
static int flush(struct vsock_conn *c)
{
	struct vsock_txbuf *b = &c->buf;

	while (b->len) {
		uint32_t first = VSOCK_BUF_ALLOC - b->head < b->len ? VSOCK_BUF_ALLOC - b->head : b->len;
		struct iovec iov[2] = {{b->data + b->head, first}, {b->data, b->len - first}};
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = b->len > first ? 2 : 1};
		ssize_t n = sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		b->head = (uint32_t)((b->head + (uint32_t)n) % VSOCK_BUF_ALLOC);
		b->len -= (uint32_t)n;
		forwarded(c, (uint32_t)n);
	}
	free(b->data); /* drained: the memory goes back until the socket blocks again */
	*b = (struct vsock_txbuf){0};
	return 0;
}

int vsock_conn_to_host(struct vsock_conn *c, const struct virtq_chain *ch, uint64_t off, uint32_t len)
{
	struct iovec iov[VSOCK_MAX_SEGS];
	struct virtq_cursor r;
	uint32_t done = 0;

	c->rx_cnt += len;
	virtq_reader(&r, ch);
	virtq_cursor_skip(&r, off);
	if (!c->buf.len && len) {
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = virtq_cursor_iov(&r, len, iov, VSOCK_MAX_SEGS, NULL)};
		ssize_t n = sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		done = n > 0 ? (uint32_t)n : 0;
		forwarded(c, done);
	}
	if (done < len) {
		struct vsock_txbuf *b = &c->buf;
		uint32_t tail;

		if (!b->data && !(b->data = malloc(VSOCK_BUF_ALLOC)))
			return -1;
		if (b->len + (len - done) > VSOCK_BUF_ALLOC)
			return -1; /* cannot happen: the credit check bounds it */
		tail = (b->head + b->len) % VSOCK_BUF_ALLOC;
		virtq_cursor_skip(&r, done); /* what the socket took */
		for (uint32_t left = len - done; left;) {
			uint32_t n = VSOCK_BUF_ALLOC - tail < left ? VSOCK_BUF_ALLOC - tail : left;

			virtq_cursor_read(&r, b->data + tail, n);
			tail = (tail + n) % VSOCK_BUF_ALLOC;
			b->len += n;
			done += n;
			left -= n;
		}
		vsock_conn_update_epoll(c);
	}
	return 0;
}

void vsock_conn_shutdown_progress(struct vsock_conn *c)
{
	if (c->buf.len) {
		/* The guest's last bytes first; but a host that never reads them does not hold c forever. */
		if (c->peer_shut == VSOCK_SHUTDOWN_F_BOTH && !c->deadline_ms)
			set_deadline(c);
		return;
	}
	if (c->peer_shut & VSOCK_SHUTDOWN_F_SEND)
		shutdown(c->fd, SHUT_WR);
	/* 5.10.6.6: both ways shut, the peer answers RST. The guest shut both: brisk answers. */
	if (c->peer_shut == VSOCK_SHUTDOWN_F_BOTH) {
		vsock_conn_kill(c->v, c, true);
		return;
	}
	/* brisk shut both (the host side hung up) and the guest has nothing left to say: give it a while. */
	if (c->eof && c->hup && !c->deadline_ms)
		set_deadline(c);
}

/* ---- the host side's events ------------------------------------------------------------------------- */

static void accept_clients(struct vsock_dev *v)
{
	for (unsigned i = 0; i < EVENT_BATCH; i++) {
		int fd = accept4(v->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct vsock_conn *c;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warn("virtio-vsock: accept on %s: %s", v->path, strerror(errno));
			return;
		}
		if (v->nr_conns >= VSOCK_MAX_CONNS || !(c = conn_new(v, fd, CONN_LINE))) {
			v->stats.over_limit++;
			close(fd);
			continue;
		}
		set_deadline(c);
		vsock_conn_update_epoll(c);
	}
}

/* A free ephemeral port for a host client connecting to guest port `peer_port`. */
static uint32_t ephemeral_port(struct vsock_dev *v, uint32_t peer_port)
{
	for (unsigned i = 0; i <= VSOCK_MAX_CONNS; i++) {
		uint32_t p = v->next_port;

		v->next_port = p >= UINT32_MAX - 1 ? EPHEMERAL_FIRST : p + 1;
		if (!vsock_conn_find(v, p, peer_port))
			return p;
	}
	return EPHEMERAL_FIRST; /* unreachable: at most VSOCK_MAX_CONNS ports are taken */
}

/* A host client's "CONNECT <port>\n", read up to its newline only (what follows is data for the guest). */
static void read_line(struct vsock_dev *v, struct vsock_conn *c)
{
	char peek[VSOCK_CONNECT_MAX];
	size_t room = sizeof(c->line) - c->line_len, take;
	ssize_t n = recv(c->fd, peek, room, MSG_PEEK | MSG_DONTWAIT);
	char *nl;
	uint32_t port;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		v->stats.bad_lines++;
		vsock_conn_kill(v, c, false);
		return;
	}
	nl = memchr(peek, '\n', (size_t)n);
	take = nl ? (size_t)(nl - peek) + 1 : (size_t)n;
	if (recv(c->fd, c->line + c->line_len, take, MSG_DONTWAIT) != (ssize_t)take) {
		vsock_conn_kill(v, c, false);
		return;
	}
	c->line_len += (uint32_t)take;
	if (!nl) {
		if (c->line_len == sizeof(c->line)) {
			v->stats.bad_lines++; /* no newline within the bound: not a CONNECT line */
			vsock_conn_kill(v, c, false);
		}
		return;
	}
	if (vsock_parse_connect(c->line, c->line_len - 1, &port)) {
		v->stats.bad_lines++;
		log_debug("virtio-vsock: a host client sent a line that is not \"CONNECT <port>\"");
		vsock_conn_kill(v, c, false);
		return;
	}
	c->peer_port = port;
	c->local_port = ephemeral_port(v, port);
	c->state = CONN_CONNECTING;
	table_add(c);
	set_deadline(c); /* the guest's RESPONSE or RST, within the timeout */
	c->pending = PEND_REQUEST;
	vsock_conn_update_epoll(c);
	vsock_conn_schedule(c);
}

static void host_event(struct vsock_dev *v, struct vsock_conn *c, uint32_t events)
{
	if (c->dead)
		return;
	if (c->state == CONN_LINE) {
		read_line(v, c);
		return;
	}
	if (events & (EPOLLHUP | EPOLLERR)) {
		/* No more interest can be expressed (HUP is always reported): leave the set; reads find the EOF. */
		if (c->state != CONN_ESTABLISHED) {
			vsock_conn_kill(v, c, true);
			return;
		}
		c->hup = true;
		c->rx_ready = true;
		epoll_ctl(v->ep_fd, EPOLL_CTL_DEL, c->fd, NULL);
		c->in_epoll = false;
	}
	if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) {
		if (flush(c)) {
			vsock_conn_kill(v, c, true);
			return;
		}
		vsock_conn_shutdown_progress(c);
		if (c->dead)
			return;
	}
	if (events & EPOLLIN)
		c->rx_ready = true;
	vsock_conn_update_epoll(c);
	vsock_conn_schedule(c);
}

void vsock_host_events(struct vsock_dev *v)
{
	struct epoll_event ev[EVENT_BATCH];
	int n = epoll_wait(v->ep_fd, ev, EVENT_BATCH, 0);

	for (int i = 0; i < n; i++) {
		if (!ev[i].data.ptr)
			accept_clients(v);
		else
			host_event(v, ev[i].data.ptr, ev[i].events);
	}
}

/* ---- towards the host: a guest's REQUEST ---------------------------------------------------------------- */

struct vsock_conn *vsock_conn_connect(struct vsock_dev *v, uint32_t local_port, uint32_t peer_port)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct vsock_conn *c;
	int fd;

	if (v->nr_conns >= VSOCK_MAX_CONNS) {
		v->stats.over_limit++;
		vsock_rst_push(v, local_port, peer_port);
		return NULL;
	}
	/* PATH_P fits: --vsock checked PATH's length with room for "_4294967295". */
	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_%u", v->path, local_port) >= (int)sizeof(sa.sun_path))
		return NULL; /* cannot happen: --vsock checked PATH's length */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_warn("virtio-vsock: socket(AF_UNIX): %s", strerror(errno));
		vsock_rst_push(v, local_port, peer_port);
		return NULL;
	}
	/* AF_UNIX connects at once or fails (a full backlog is EAGAIN): no EINPROGRESS to wait for. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || !(c = conn_new(v, fd, CONN_ESTABLISHED))) {
		log_debug("virtio-vsock: guest port %u to %s: %s", peer_port, sa.sun_path, strerror(errno));
		close(fd);
		v->stats.refused++;
		vsock_rst_push(v, local_port, peer_port);
		return NULL;
	}
	c->local_port = local_port;
	c->peer_port = peer_port;
	c->pending = PEND_RESPONSE;
	table_add(c);
	vsock_conn_update_epoll(c);
	v->stats.conns_guest++;
	fcm_inc(fcm_vsock, FCM_VSOCK_conns_added);
	return c;
}
