/*
 * slirp_helper.c - brisk-slirp, the user-mode networking helper process behind `--net user`: libslirp on
 * one end of the SOCK_SEQPACKET socket brisk hands it as fd 3 (one Ethernet frame per message, no
 * virtio header), the host's sockets on the other. Why a process: src/virtio/net/net_user.c.
 *
 *   brisk-slirp --fd N --net A.B.C.D/P --mtu M [--hostfwd tcp|udp:HOST:PORT-GUEST:PORT]... [--verbose]
 *
 * One thread, one poll() loop: the socket, slirp's own sockets (slirp_pollfds_fill/poll) and slirp's
 * timers (a short list, the earliest expiry bounds the poll timeout). The guest network: gateway and
 * host at .2, DNS at .3 (forwarded to the host's resolver), DHCP from .15, as QEMU lays out 10.0.2.0/24;
 * IPv6 off. Its first message to brisk is "OK" once every hostfwd is bound, or "ERR why". When brisk
 * closes the socket (the VM ended) it first writes out what slirp still holds for host sockets (bytes the
 * guest sent and slirp acknowledged), for at most DRAIN_MS, then exits (or at once when brisk dies:
 * PR_SET_PDEATHSIG). Frames for the guest that find brisk's receive
 * buffer full are dropped and counted (slirp's TCP retransmits); with --verbose the counts are printed at
 * exit.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <poll.h>
#include <signal.h>
#include <slirp/libslirp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "brisk/seccomp.h"

#define FRAME_MAX    (65535 + 18)
#define INPUT_BUDGET 64 /* frames from brisk per loop turn */
#define MAX_FWDS     16
#define DRAIN_MS     800 /* at brisk's end-of-file: brisk waits HELPER_EXIT_MS (1 s) before SIGKILL */

struct timer {
	SlirpTimerCb cb;
	void *arg;
	int64_t expire_ms; /* -1: not armed */
	struct timer *next;
};

struct helper {
	int fd;
	bool verbose;
	Slirp *slirp;
	struct timer *timers;
	struct pollfd *pfd;
	unsigned nfds, cap;
	bool want_out; /* slirp asked for POLLOUT on a host socket: it holds bytes for it (slirp_pollfds_fill) */
	uint64_t to_guest, from_guest, dropped, guest_errors;
};

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("brisk-slirp: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- slirp's callbacks ------------------------------------------------------------------------------ */

static ssize_t send_packet(const void *buf, size_t len, void *opaque)
{
	struct helper *h = opaque;

	if (send(h->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS)
			return -1;
		h->dropped++; /* brisk's side is full: the guest posts no buffers or is slow */
		return (ssize_t)len;
	}
	h->to_guest++;
	return (ssize_t)len;
}

static void guest_error(const char *m, void *opaque)
{
	struct helper *h = opaque;

	if (h->guest_errors++ < 8)
		msg("guest error: %s", m);
}

static int64_t clock_get_ns(void *opaque)
{
	(void)opaque;
	return now_ns();
}

static void *timer_new(SlirpTimerCb cb, void *cb_opaque, void *opaque)
{
	struct helper *h = opaque;
	struct timer *t = calloc(1, sizeof(*t));

	if (!t)
		abort(); /* slirp has no failure path here */
	*t = (struct timer){.cb = cb, .arg = cb_opaque, .expire_ms = -1, .next = h->timers};
	h->timers = t;
	return t;
}

static void timer_free(void *timer, void *opaque)
{
	struct helper *h = opaque;

	for (struct timer **p = &h->timers; *p; p = &(*p)->next) {
		if (*p == timer) {
			*p = (*p)->next;
			free(timer);
			return;
		}
	}
}

static void timer_mod(void *timer, int64_t expire_ms, void *opaque)
{
	(void)opaque;
	((struct timer *)timer)->expire_ms = expire_ms;
}

static void poll_fd_noop(int fd, void *opaque)
{
	(void)fd, (void)opaque;
}

static void notify_noop(void *opaque)
{
	(void)opaque;
}

static const SlirpCb callbacks = {
    .send_packet = send_packet,
    .guest_error = guest_error,
    .clock_get_ns = clock_get_ns,
    .timer_new = timer_new,
    .timer_free = timer_free,
    .timer_mod = timer_mod,
    .register_poll_fd = poll_fd_noop,
    .unregister_poll_fd = poll_fd_noop,
    .notify = notify_noop,
};

static int add_poll(int fd, int events, void *opaque)
{
	struct helper *h = opaque;
	short ev = 0;

	if (h->nfds == h->cap) {
		unsigned cap = h->cap ? 2 * h->cap : 16;
		struct pollfd *p = realloc(h->pfd, cap * sizeof(*p));

		if (!p)
			abort();
		h->pfd = p;
		h->cap = cap;
	}
	if (events & SLIRP_POLL_IN)
		ev |= POLLIN;
	if (events & SLIRP_POLL_OUT) {
		ev |= POLLOUT;
		h->want_out = true;
	}
	if (events & SLIRP_POLL_PRI)
		ev |= POLLPRI;
	h->pfd[h->nfds] = (struct pollfd){.fd = fd, .events = ev};
	return (int)h->nfds++;
}

static int get_revents(int idx, void *opaque)
{
	struct helper *h = opaque;
	short r = h->pfd[idx].revents;
	int ev = 0;

	if (r & POLLIN)
		ev |= SLIRP_POLL_IN;
	if (r & POLLOUT)
		ev |= SLIRP_POLL_OUT;
	if (r & POLLPRI)
		ev |= SLIRP_POLL_PRI;
	if (r & POLLERR)
		ev |= SLIRP_POLL_ERR;
	if (r & POLLHUP)
		ev |= SLIRP_POLL_HUP;
	return ev;
}

/* ---- the loop --------------------------------------------------------------------------------------- */

static void run_timers(struct helper *h)
{
	int64_t now = now_ns() / 1000000;
	bool again = true;

	/* A callback may free or add timers: start over after each one that fires (bounded by the list). */
	for (unsigned rounds = 0; again && rounds < 64; rounds++) {
		again = false;
		for (struct timer *t = h->timers; t; t = t->next) {
			if (t->expire_ms >= 0 && t->expire_ms <= now) {
				t->expire_ms = -1;
				t->cb(t->arg);
				again = true;
				break;
			}
		}
	}
}

static int timers_timeout(const struct helper *h, uint32_t timeout)
{
	int64_t now = now_ns() / 1000000;

	for (const struct timer *t = h->timers; t; t = t->next)
		if (t->expire_ms >= 0)
			timeout = t->expire_ms <= now			     ? 0
				  : (uint32_t)(t->expire_ms - now) < timeout ? (uint32_t)(t->expire_ms - now)
									     : timeout;
	return timeout > 60000 ? 60000 : (int)timeout;
}

/* Frames from brisk. Returns false when brisk closed the socket. */
static bool input(struct helper *h)
{
	static uint8_t frame[FRAME_MAX];

	for (unsigned i = 0; i < INPUT_BUDGET; i++) {
		ssize_t n = recv(h->fd, frame, sizeof(frame), MSG_DONTWAIT | MSG_TRUNC);

		if (n == 0)
			return false;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
		if ((size_t)n > sizeof(frame))
			continue; /* truncated: brisk never sends one this long */
		h->from_guest++;
		slirp_input(h->slirp, frame, (int)n);
	}
	return true;
}

/*
 * brisk closed its end: nothing more comes from the guest, and nothing can reach it. What the guest sent
 * and slirp acknowledged still sits in slirp's buffers for host sockets (up to ~300 KiB per connection):
 * written out as the host reads it, for at most DRAIN_MS, so that a guest that sends and powers off loses
 * nothing on the host side (slirp shuts the host socket down for writing once its buffer is empty, if the
 * guest had closed). A host that does not read within DRAIN_MS loses the rest.
 */
static void drain(struct helper *h)
{
	int64_t end = now_ns() / 1000000 + DRAIN_MS;

	for (;;) {
		uint32_t timeout = UINT32_MAX;
		int64_t left = end - now_ns() / 1000000;
		int n;

		h->nfds = 0;
		h->want_out = false;
		slirp_pollfds_fill(h->slirp, &timeout, add_poll, h);
		if (!h->want_out || left <= 0)
			return;
		n = poll(h->pfd, h->nfds, timers_timeout(h, timeout) < left ? timers_timeout(h, timeout) : (int)left);
		if (n < 0 && errno != EINTR)
			return;
		slirp_pollfds_poll(h->slirp, n < 0, get_revents, h);
		run_timers(h);
	}
}

static void loop(struct helper *h)
{
	for (;;) {
		uint32_t timeout = UINT32_MAX;
		int n;

		h->nfds = 0;
		add_poll(h->fd, SLIRP_POLL_IN, h);
		slirp_pollfds_fill(h->slirp, &timeout, add_poll, h);
		n = poll(h->pfd, h->nfds, timers_timeout(h, timeout));
		if (n < 0 && errno != EINTR) {
			msg("poll: %s", strerror(errno));
			return;
		}
		if (n > 0 && (h->pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) && !input(h)) {
			drain(h);
			return;
		}
		slirp_pollfds_poll(h->slirp, n < 0, get_revents, h);
		run_timers(h);
	}
}

/* ---- set-up ----------------------------------------------------------------------------------------- */

static void reply(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reply(int fd, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (send(fd, buf, n < (int)sizeof(buf) ? (size_t)n : sizeof(buf) - 1, MSG_NOSIGNAL) < 0)
		msg("answering brisk: %s", strerror(errno));
}

static int parse_fwd(const char *s, int *udp, struct in_addr *host, int *hport, struct in_addr *guest, int *gport)
{
	char proto[4], ha[16], ga[16];

	if (sscanf(s, "%3[a-z]:%15[0-9.]:%d-%15[0-9.]:%d", proto, ha, hport, ga, gport) != 5 || !inet_aton(ha, host) ||
	    !inet_aton(ga, guest))
		return -1;
	*udp = strcmp(proto, "udp") == 0;
	return 0;
}

/* A warning when a host interface's IPv4 network overlaps the guest's: those addresses are unreachable. */
static void check_overlap(struct in_addr net, struct in_addr mask)
{
	struct ifaddrs *ifa, *i;

	if (getifaddrs(&ifa) < 0)
		return;
	for (i = ifa; i; i = i->ifa_next) {
		uint32_t a, m;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask)
			continue;
		a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
		m = ((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr;
		if ((a & m & mask.s_addr) == (net.s_addr & m & mask.s_addr) && ntohl(a) >> 24 != 127)
			msg("warning: the guest network %s overlaps host interface %s (%s): choose another with "
			    "--net user,net=CIDR",
			    inet_ntoa(net), i->ifa_name, inet_ntoa(((struct sockaddr_in *)i->ifa_addr)->sin_addr));
	}
	freeifaddrs(ifa);
}

static struct in_addr addr_at(struct in_addr net, uint32_t host)
{
	return (struct in_addr){.s_addr = htonl(ntohl(net.s_addr) + host)};
}

/* Frees everything (slirp frees its timers through timer_free); returns `status`. */
static int finish(struct helper *h, int status)
{
	slirp_cleanup(h->slirp);
	while (h->timers) {
		struct timer *t = h->timers;

		h->timers = t->next;
		free(t);
	}
	free(h->pfd);
	return status;
}

int main(int argc, char **argv)
{
	struct helper h = {.fd = -1};
	SlirpConfig cfg = {.version = 3, .in_enabled = true};
	const char *fwd[MAX_FWDS];
	unsigned nfwd = 0, prefix = 0, mtu = 1500;
	char net[16] = "";

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGPIPE, SIG_IGN);
	close_range(4, ~0u, 0); /* nothing of brisk's but the socket (fd 3): brisk uses O_CLOEXEC; to be sure */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--verbose") == 0)
			h.verbose = true;
		else if (strcmp(a, "--fd") == 0 && v && ++i)
			h.fd = atoi(v);
		else if (strcmp(a, "--net") == 0 && v && ++i)
			sscanf(v, "%15[0-9.]/%u", net, &prefix);
		else if (strcmp(a, "--mtu") == 0 && v && ++i)
			mtu = (unsigned)atoi(v);
		else if (strcmp(a, "--hostfwd") == 0 && v && ++i && nfwd < MAX_FWDS)
			fwd[nfwd++] = v;
		else {
			msg("usage: brisk-slirp --fd N --net A.B.C.D/P [--mtu M] [--hostfwd tcp:H:P-G:P]... "
			    "[--verbose]");
			return 2;
		}
	}
	if (h.fd < 0 || !inet_aton(net, &cfg.vnetwork) || prefix < 8 || prefix > 27 || mtu < 68 || mtu > 65521) {
		msg("bad arguments (--fd, --net A.B.C.D/8..27, --mtu 68..65521)");
		if (h.fd >= 0)
			reply(h.fd, "ERR bad helper arguments");
		return 2;
	}
	cfg.vnetmask.s_addr = htonl(0xffffffffu << (32 - prefix));
	cfg.vhost = addr_at(cfg.vnetwork, 2);
	cfg.vnameserver = addr_at(cfg.vnetwork, 3);
	cfg.vdhcp_start = addr_at(cfg.vnetwork, 15);
	cfg.if_mtu = cfg.if_mru = mtu;
	h.slirp = slirp_new(&cfg, &callbacks, &h);
	if (!h.slirp) {
		reply(h.fd, "ERR libslirp refused the configuration (network %s/%u)", net, prefix);
		return 1;
	}
	for (unsigned i = 0; i < nfwd; i++) {
		struct in_addr ha, ga;
		int udp, hp, gp;

		if (parse_fwd(fwd[i], &udp, &ha, &hp, &ga, &gp)) {
			reply(h.fd, "ERR hostfwd %s: malformed", fwd[i]);
			return finish(&h, 2);
		}
		if (slirp_add_hostfwd(h.slirp, udp, ha, hp, ga, gp) < 0) {
			reply(h.fd,
			      "ERR hostfwd=%s: cannot listen on %s port %d (in use, or not an address of this host)",
			      fwd[i], udp ? "UDP" : "TCP", hp);
			return finish(&h, 1);
		}
	}
	check_overlap(cfg.vnetwork, cfg.vnetmask);
	/* the forwards listen: from here on the helper only moves frames and the guest's connections */
	if (seccomp_helper_wanted() && seccomp_configure(true) == 0)
		seccomp_enter(SECCOMP_SLIRP_HELPER);
	reply(h.fd, "OK");
	loop(&h);
	if (h.verbose)
		msg("%llu frames from the guest, %llu to it, %llu dropped (brisk's side full)",
		    (unsigned long long)h.from_guest, (unsigned long long)h.to_guest, (unsigned long long)h.dropped);
	return finish(&h, 0);
}
