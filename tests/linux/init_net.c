/*
 * init_net.c - the test init's network and vsock mode (tests/linux/test_net_linux.py): brings up
 * the interfaces the command line names and exchanges data with the host over TCP and vsock, checked byte
 * for byte, timed. Part of tests/linux/init.c's static binary (mkinitramfs.sh builds both).
 *
 * Command-line words (each may repeat where it says so):
 *   brisk.ip=IF,ADDR/PREFIX[,GW]   (repeatable) wait (bounded) for interface IF, give it the IPv4 address,
 *                                  bring it and lo up; with GW a default route through it
 *   brisk.tcp=ADDR:PORT:BYTES      (repeatable) connect to ADDR:PORT, exchange BYTES each way (connector)
 *   brisk.vsock=PORT:BYTES         (repeatable) connect to the host (CID 2) port PORT over AF_VSOCK, exchange
 *   brisk.vsockping=PORT:COUNT     connect to the host port PORT over AF_VSOCK and make COUNT round trips of
 *                                  PING_BYTES (send, wait for the echo); prints the median and minimum
 *   brisk.tcpping=ADDR:PORT:COUNT  the same over TCP (TCP_NODELAY)
 *   brisk.tcplisten=PORT:COUNT     listen on TCP PORT (all addresses), accept COUNT connections one after the
 *                                  other, exchange on each (acceptor; the connector chooses the size)
 *   brisk.vsocklisten=PORT:COUNT   the same on vsock PORT
 *   brisk.mmds=IF                  the metadata service at 169.254.169.254 over IF (a host route added first):
 *                                  GET without a token, PUT /latest/api/token, GET with it (plain and JSON),
 *                                  each on a connection of its own; one line each:
 *                                  "brisk-net: mmds NAME: STATUS 'BODY'" (the body cut to 80 bytes)
 * Connections are made first, in the order given; then both listeners are opened, each announced with
 * "brisk-net: tcp listening on port P" / "brisk-net: vsock listening on port P", and the init waits up to
 * NET_ACCEPT_MS for the host to make all the connections.
 *
 * The exchange (the same in tests/linux/netpeer.py, the host's side): the connector sends N as 8 bytes
 * big-endian, then N bytes of pattern(0x11); the acceptor reads and checks them, then sends N bytes of
 * pattern(0x22), which the connector reads and checks. pattern(seed)[i] = (i % 251 + seed) & 0xff: a prime
 * period, so a lost, repeated or reordered chunk of any power-of-two size shows. Each side times what it
 * receives (first byte to last). Output, one line per exchange:
 *   "brisk-net: KIND WHERE: sent N received N ok, recv MS ms (MIB/s MiB/s)"  or  "... FAIL (why)"
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "init.h"

#define HTTPD_LINGER_MS 2000   /* brisk.httpd: how long it waits for another request after answering one */
#define HTTPD_MAX	16     /* brisk.httpd: requests answered at most */
#define NET_ACCEPT_MS	120000 /* the host connects after it saw the "listening" line; a nested boot is slow */
#define NET_IO_TIMEOUT	60     /* seconds a read or write may block: a stuck peer ends the test, not the VM */
#define NET_MAX_BYTES	(1ull << 30)
#define NET_CHUNK	65536
#define PING_BYTES	64
#define PING_MAX	100000
#define SEED_CONNECTOR	0x11
#define SEED_ACCEPTOR	0x22

static uint8_t pat(uint64_t i, uint8_t seed)
{
	return (uint8_t)(i % 251 + seed);
}

/* Every value of the repeatable word `key` (with '='), in order: calls fn(value) for each. */
static void each_value(const char *cmdline, const char *key, void (*fn)(const char *value))
{
	size_t len = strlen(key);
	for (const char *p = cmdline; (p = strstr(p, key)); p += len) {
		if (p != cmdline && p[-1] != ' ')
			continue;
		char v[160];
		size_t n = strcspn(p + len, " ");
		if (n >= sizeof(v))
			n = sizeof(v) - 1;
		memcpy(v, p + len, n);
		v[n] = 0;
		fn(v);
	}
}

static double now_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- interfaces ---- */

static int set_addr(int s, const char *ifname, unsigned long req, in_addr_t a)
{
	struct ifreq ifr = {0};
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = a};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	memcpy(&ifr.ifr_addr, &sin, sizeof(sin));
	return ioctl(s, req, &ifr);
}

static int set_up(int s, const char *ifname)
{
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
		return -1;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	return ioctl(s, SIOCSIFFLAGS, &ifr);
}

static void mac_of(int s, const char *ifname, char *out, size_t size)
{
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(s, SIOCGIFHWADDR, &ifr) != 0) {
		snprintf(out, size, "?");
		return;
	}
	const uint8_t *m = (const uint8_t *)ifr.ifr_hwaddr.sa_data;
	snprintf(out, size, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

static int add_default_route(int s, in_addr_t gw)
{
	struct rtentry rt = {0};
	struct sockaddr_in any = {.sin_family = AF_INET}, via = {.sin_family = AF_INET, .sin_addr.s_addr = gw};
	memcpy(&rt.rt_dst, &any, sizeof(any));
	memcpy(&rt.rt_genmask, &any, sizeof(any));
	memcpy(&rt.rt_gateway, &via, sizeof(via));
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	return ioctl(s, SIOCADDRT, &rt);
}

/* brisk.ip=IF,ADDR/PREFIX[,GW] */
static void configure_ip(const char *v)
{
	char ifname[IFNAMSIZ] = "", addr[64] = "", gw[64] = "", mac[32];
	unsigned prefix = 33;
	if (sscanf(v, "%15[^,],%63[^/]/%u,%63s", ifname, addr, &prefix, gw) < 3 || prefix > 32) {
		say("brisk-net: ip %s: FAIL (not IF,ADDR/PREFIX[,GW])\n", v);
		return;
	}
	struct in_addr a, g;
	if (inet_pton(AF_INET, addr, &a) != 1 || (gw[0] && inet_pton(AF_INET, gw, &g) != 1)) {
		say("brisk-net: ip %s: FAIL (bad address)\n", v);
		return;
	}
	long t0 = now_ms();
	while (!if_nametoindex(ifname) && now_ms() - t0 < DEV_WAIT_MS)
		usleep(10000);
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0 || !if_nametoindex(ifname)) {
		say("brisk-net: ip %s: FAIL (no interface %s after %ld ms)\n", v, ifname, now_ms() - t0);
		if (s >= 0)
			close(s);
		return;
	}
	in_addr_t mask = prefix ? htonl(~0u << (32 - prefix)) : 0;
	const char *what = set_up(s, "lo")				? "lo up"
			   : set_addr(s, ifname, SIOCSIFADDR, a.s_addr) ? "SIOCSIFADDR"
			   : set_addr(s, ifname, SIOCSIFNETMASK, mask)	? "SIOCSIFNETMASK"
			   : set_up(s, ifname)				? "SIOCSIFFLAGS"
			   : gw[0] && add_default_route(s, g.s_addr)	? "SIOCADDRT"
									: NULL;
	mac_of(s, ifname, mac, sizeof(mac));
	if (what)
		say("brisk-net: ip %s: FAIL (%s: %s)\n", v, what, strerror(errno));
	else
		say("brisk-net: %s %s up %s/%u%s%s (%ld ms)\n", ifname, mac, addr, prefix, gw[0] ? " via " : "", gw,
		    now_ms() - t0);
	close(s);
}

/* ---- the exchange ---- */

static void timeouts(int fd)
{
	struct timeval tv = {.tv_sec = NET_IO_TIMEOUT};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_pattern(int fd, uint64_t bytes, uint8_t seed)
{
	static uint8_t buf[NET_CHUNK];
	for (uint64_t off = 0; off < bytes;) {
		size_t n = bytes - off < NET_CHUNK ? (size_t)(bytes - off) : NET_CHUNK;
		for (size_t i = 0; i < n; i++)
			buf[i] = pat(off + i, seed);
		int err = write_all(fd, buf, n);
		if (err)
			return err;
		off += n;
	}
	return 0;
}

/* Reads `bytes` and checks them against pattern(seed); the receive time (first byte to last) in *secs. */
static int recv_pattern(int fd, uint64_t bytes, uint8_t seed, double *secs, char *why, size_t whylen)
{
	static uint8_t buf[NET_CHUNK];
	double t0 = 0;
	for (uint64_t off = 0; off < bytes;) {
		size_t want = bytes - off < NET_CHUNK ? (size_t)(bytes - off) : NET_CHUNK;
		ssize_t n = read(fd, buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(why, whylen, "%s after %llu bytes", n ? strerror(errno) : "EOF",
				 (unsigned long long)off);
			return -1;
		}
		if (!off)
			t0 = now_sec();
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != pat(off + (uint64_t)i, seed)) {
				snprintf(why, whylen, "byte %llu is 0x%02x, not 0x%02x",
					 (unsigned long long)(off + (uint64_t)i), buf[i], pat(off + (uint64_t)i, seed));
				return -1;
			}
		off += (uint64_t)n;
	}
	*secs = bytes ? now_sec() - t0 : 0;
	return 0;
}

static void report(const char *kind, const char *where, uint64_t bytes, int ok, double secs, const char *why)
{
	if (ok)
		say("brisk-net: %s %s: sent %llu received %llu ok, recv %.1f ms (%.1f MiB/s)\n", kind, where,
		    (unsigned long long)bytes, (unsigned long long)bytes, secs * 1e3,
		    secs > 0 ? (double)bytes / 1048576.0 / secs : 0.0);
	else
		say("brisk-net: %s %s: FAIL (%s)\n", kind, where, why);
}

/* The connector's side on a connected fd (closes it). */
static void exchange_connector(int fd, const char *kind, const char *where, uint64_t bytes)
{
	uint8_t hdr[8];
	char why[160] = "";
	double secs = 0;
	for (int i = 0; i < 8; i++)
		hdr[i] = (uint8_t)(bytes >> (56 - 8 * i));
	int err = write_all(fd, hdr, sizeof(hdr));
	if (!err)
		err = send_pattern(fd, bytes, SEED_CONNECTOR);
	if (err)
		snprintf(why, sizeof(why), "send: %s", strerror(-err));
	int ok = !err && recv_pattern(fd, bytes, SEED_ACCEPTOR, &secs, why, sizeof(why)) == 0;
	report(kind, where, bytes, ok, secs, why);
	close(fd);
}

/* The acceptor's side on an accepted fd (closes it). */
static void exchange_acceptor(int fd, const char *kind, const char *where)
{
	uint8_t hdr[8];
	uint64_t bytes = 0;
	double secs = 0;
	char why[160] = "";
	int ok = 0;
	timeouts(fd);
	if (recv(fd, hdr, sizeof(hdr), MSG_WAITALL) != (ssize_t)sizeof(hdr)) {
		snprintf(why, sizeof(why), "no length: %s", strerror(errno));
	} else {
		for (int i = 0; i < 8; i++)
			bytes = bytes << 8 | hdr[i];
		if (bytes > NET_MAX_BYTES)
			snprintf(why, sizeof(why), "length %llu is more than %llu", (unsigned long long)bytes,
				 NET_MAX_BYTES);
		else if (recv_pattern(fd, bytes, SEED_CONNECTOR, &secs, why, sizeof(why)) == 0) {
			int err = send_pattern(fd, bytes, SEED_ACCEPTOR);
			ok = !err;
			if (err)
				snprintf(why, sizeof(why), "send: %s", strerror(-err));
		}
	}
	report(kind, where, bytes, ok, secs, why);
	/*
	 * The host's EOF before the close: it closes once it has read its N bytes, so the whole stream has left this
	 * kernel. A close alone returns with the tail still in the send buffer, and a poweroff right after cuts it
	 * short (a hostfwd exchange once ended 53,152 bytes early in the nested harness, the guest saying ok).
	 */
	if (ok && shutdown(fd, SHUT_WR) == 0)
		while (recv(fd, hdr, sizeof(hdr), 0) > 0)
			;
	close(fd);
}

/* "A:B:BYTES" or "B:BYTES" -> the parts; 0 on success. */
static int parse_target(const char *v, char *host, size_t hostlen, unsigned *port, uint64_t *bytes)
{
	char h[64] = "";
	unsigned long long b;
	if (host) {
		if (sscanf(v, "%63[^:]:%u:%llu", h, port, &b) != 3)
			return -1;
		snprintf(host, hostlen, "%s", h);
	} else if (sscanf(v, "%u:%llu", port, &b) != 2) {
		return -1;
	}
	if (*port == 0 || b > NET_MAX_BYTES || (host && *port > 65535))
		return -1;
	*bytes = b;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* COUNT round trips of PING_BYTES on a connected fd (closes it); the host echoes (tests/linux/netpeer.py). */
static void ping(int fd, const char *kind, const char *where, unsigned count)
{
	static double rtt[PING_MAX];
	uint8_t msg[PING_BYTES];
	unsigned done = 0;
	int one = 1;
	if (!strcmp(kind, "tcp ping"))
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (; done < count; done++) {
		double t0 = now_sec();
		memset(msg, (int)(done & 0xff), sizeof(msg));
		if (write_all(fd, msg, sizeof(msg)) ||
		    recv(fd, msg, sizeof(msg), MSG_WAITALL) != (ssize_t)sizeof(msg) || msg[0] != (uint8_t)done ||
		    msg[PING_BYTES - 1] != (uint8_t)done)
			break;
		rtt[done] = now_sec() - t0;
	}
	close(fd);
	if (done < count || !count) {
		say("brisk-net: %s %s: FAIL (%u of %u round trips: %s)\n", kind, where, done, count, strerror(errno));
		return;
	}
	qsort(rtt, count, sizeof(rtt[0]), cmp_double);
	say("brisk-net: %s %s: %u round trips of %d bytes, median %.1f us, min %.1f us\n", kind, where, count,
	    PING_BYTES, rtt[count / 2] * 1e6, rtt[0] * 1e6);
}

/*
 * Connects for a word's value `v` ("ADDR:PORT:N" over TCP, "PORT:N" over vsock to the host, CID 2) and hands
 * the socket to use(fd, kind, where, N); N at most `max`. Every failure is one FAIL line.
 */
static void dial(const char *kind, int family, const char *v, uint64_t max,
		 void (*use)(int, const char *, const char *, uint64_t))
{
	char host[64] = "", where[96];
	unsigned port;
	uint64_t n;
	int tcp = family == AF_INET;
	struct sockaddr_in in = {.sin_family = AF_INET};
	struct sockaddr_vm vm = {.svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST};
	if (parse_target(v, tcp ? host : NULL, sizeof(host), &port, &n) || n > max ||
	    (tcp && inet_pton(AF_INET, host, &in.sin_addr) != 1)) {
		say("brisk-net: %s %s: FAIL (not %sPORT:N, N at most %llu)\n", kind, v, tcp ? "ADDR:" : "",
		    (unsigned long long)max);
		return;
	}
	if (tcp)
		snprintf(where, sizeof(where), "%s:%u", host, port);
	else
		snprintf(where, sizeof(where), "2:%u", port);
	in.sin_port = htons((uint16_t)port);
	vm.svm_port = port;
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		timeouts(fd);
	if (fd < 0 || (tcp ? connect(fd, (struct sockaddr *)&in, sizeof(in))
			   : connect(fd, (struct sockaddr *)&vm, sizeof(vm))) != 0) {
		say("brisk-net: %s %s: FAIL (%s: %s)\n", kind, where, fd < 0 ? "socket" : "connect", strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	use(fd, kind, where, n);
}

static void use_ping(int fd, const char *kind, const char *where, uint64_t count)
{
	ping(fd, kind, where, (unsigned)count);
}

static void tcp_connect(const char *v)
{
	dial("tcp connect", AF_INET, v, NET_MAX_BYTES, exchange_connector);
}

static void vsock_connect(const char *v)
{
	dial("vsock connect", AF_VSOCK, v, NET_MAX_BYTES, exchange_connector);
}

static void tcp_ping(const char *v)
{
	dial("tcp ping", AF_INET, v, PING_MAX, use_ping);
}

static void vsock_ping(const char *v)
{
	dial("vsock ping", AF_VSOCK, v, PING_MAX, use_ping);
}

/* "brisk-net: tcp accept port P from A:Q" before the exchange: which path each connection came by. */
static void say_peer(const char *kind, unsigned port, const struct sockaddr_storage *peer)
{
	char a[INET_ADDRSTRLEN] = "?";

	if (peer->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)peer;

		inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
		say("brisk-net: %s port %u from %s:%u\n", kind, port, a, ntohs(in->sin_port));
	} else if (peer->ss_family == AF_VSOCK) {
		const struct sockaddr_vm *vm = (const struct sockaddr_vm *)peer;

		say("brisk-net: %s port %u from cid %u port %u\n", kind, port, vm->svm_cid, vm->svm_port);
	}
}

/* A listening socket for "PORT:COUNT" (*count connections to accept); -1 on failure. */
static int listen_on(int family, const char *v, unsigned *port, uint64_t *count)
{
	const char *kind = family == AF_VSOCK ? "vsock" : "tcp";
	if (parse_target(v, NULL, 0, port, count) || !*count || (family == AF_INET && *port > 65535)) {
		say("brisk-net: %s listen %s: FAIL (not PORT:COUNT)\n", kind, v);
		return -1;
	}
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*port)};
	struct sockaddr_vm vm = {.svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = *port};
	if (fd >= 0 && family == AF_INET)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 ||
	    (family == AF_INET ? bind(fd, (struct sockaddr *)&in, sizeof(in))
			       : bind(fd, (struct sockaddr *)&vm, sizeof(vm))) ||
	    listen(fd, 4)) {
		say("brisk-net: %s listen %u: FAIL (%s)\n", kind, *port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	say("brisk-net: %s listening on port %u\n", kind, *port);
	return fd;
}

/* ---- the metadata service (brisk.mmds=IF) ---- */

#define MMDS_ADDR "169.254.169.254"

static int add_host_route(int s, in_addr_t dst, const char *ifname)
{
	struct rtentry rt = {0};
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr.s_addr = dst};
	struct sockaddr_in mask = {.sin_family = AF_INET, .sin_addr.s_addr = 0xffffffff};
	char dev[IFNAMSIZ] = {0};

	memcpy(dev, ifname, strnlen(ifname, IFNAMSIZ - 1));
	memcpy(&rt.rt_dst, &to, sizeof(to));
	memcpy(&rt.rt_genmask, &mask, sizeof(mask));
	rt.rt_flags = RTF_UP | RTF_HOST;
	rt.rt_dev = dev;
	return ioctl(s, SIOCADDRT, &rt);
}

/* One request on a new connection; the response's status and body (Content-Length bytes) into body. */
static int mmds_request(const char *req, char *body, size_t cap)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
	static char buf[65536];
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0), status = -1;
	char *end;

	body[0] = 0;
	inet_pton(AF_INET, MMDS_ADDR, &a.sin_addr);
	timeouts(fd);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    write_all(fd, (const uint8_t *)req, strlen(req)) != 0) {
		snprintf(body, cap, "connect/write: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	for (;;) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
		const char *cl;

		if (n <= 0)
			break;
		got += (size_t)n;
		buf[got] = 0;
		end = strstr(buf, "\r\n\r\n");
		if (!end)
			continue;
		cl = strstr(buf, "Content-Length: ");
		if (!cl || cl > end || got - (size_t)(end + 4 - buf) >= strtoul(cl + 16, NULL, 10))
			break;
	}
	close(fd);
	buf[got] = 0;
	end = strstr(buf, "\r\n\r\n");
	if (sscanf(buf, "HTTP/1.1 %d", &status) != 1 || !end)
		return snprintf(body, cap, "no response (%zu bytes)", got), -1;
	snprintf(body, cap, "%s", end + 4);
	return status;
}

static void mmds_fetch(const char *ifname)
{
	char body[128], token[128], req[512];
	int s = socket(AF_INET, SOCK_DGRAM, 0), st;

	if (add_host_route(s, inet_addr(MMDS_ADDR), ifname) != 0)
		printf("brisk-net: mmds route via %s: FAIL (%s)\n", ifname, strerror(errno));
	close(s);
	st = mmds_request("GET /latest/meta-data/ami-id HTTP/1.1\r\nHost: " MMDS_ADDR "\r\n\r\n", body, 81);
	printf("brisk-net: mmds get: %d '%s'\n", st, body);
	st = mmds_request("PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 60\r\n\r\n", token,
			  sizeof(token));
	printf("brisk-net: mmds token: %d '%s'\n", st, token);
	snprintf(req, sizeof(req), "GET /latest/meta-data/ami-id HTTP/1.1\r\nX-metadata-token: %s\r\n\r\n", token);
	st = mmds_request(req, body, 81);
	printf("brisk-net: mmds get with token: %d '%s'\n", st, body);
	snprintf(req, sizeof(req),
		 "GET /latest/meta-data HTTP/1.1\r\nAccept: application/json\r\nX-metadata-token: %s\r\n\r\n", token);
	st = mmds_request(req, body, 81);
	printf("brisk-net: mmds get json: %d '%s'\n", st, body);
	fflush(stdout);
}

void net_mode(const char *cmdline)
{
	char v[2][64];
	unsigned port[2] = {0, 0};
	uint64_t left[2] = {0, 0};
	struct pollfd p[2] = {{.fd = -1}, {.fd = -1}};
	static const char *const kind[2] = {"tcp accept", "vsock accept"};

	each_value(cmdline, "brisk.ip=", configure_ip);
	each_value(cmdline, "brisk.tcp=", tcp_connect);
	each_value(cmdline, "brisk.vsock=", vsock_connect);
	each_value(cmdline, "brisk.tcpping=", tcp_ping);
	each_value(cmdline, "brisk.vsockping=", vsock_ping);
	each_value(cmdline, "brisk.mmds=", mmds_fetch);
	if (arg_value(cmdline, "brisk.tcplisten=", v[0], sizeof(v[0]), NULL))
		p[0].fd = listen_on(AF_INET, v[0], &port[0], &left[0]);
	if (arg_value(cmdline, "brisk.vsocklisten=", v[1], sizeof(v[1]), NULL))
		p[1].fd = listen_on(AF_VSOCK, v[1], &port[1], &left[1]);
	long t0 = now_ms();
	while ((p[0].fd >= 0 || p[1].fd >= 0) && now_ms() - t0 < NET_ACCEPT_MS) {
		p[0].events = p[1].events = POLLIN;
		if (poll(p, 2, 1000) <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !(p[i].revents & POLLIN))
				continue;
			struct sockaddr_storage peer;
			socklen_t plen = sizeof(peer);
			int c = accept4(p[i].fd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
			if (c < 0)
				continue;
			char where[32];
			snprintf(where, sizeof(where), "port %u", port[i]);
			say_peer(kind[i], port[i], &peer);
			exchange_acceptor(c, kind[i], where);
			if (--left[i] == 0) {
				close(p[i].fd);
				p[i].fd = -1;
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (p[i].fd >= 0) {
			say("brisk-net: %s port %u: FAIL (%llu connections missing after %d s)\n", kind[i], port[i],
			    (unsigned long long)left[i], NET_ACCEPT_MS / 1000);
			close(p[i].fd);
		}
}

/*
 * ---- HTTP answers (brisk.httpd=PORT: the disk stage, bench/linux_boots.py --http) ----
 *
 * The boot's end as a service sees it: listen on TCP PORT, answer requests ("GET ..." gets 200 and a short
 * body, anything else 400; Connection: close) until none came for HTTPD_LINGER_MS after one was answered, then
 * return. One line per request: "brisk-net: httpd port P: answered 'REQUEST LINE' STATUS", or "... FAIL (why)".
 * A request is read until its blank line, at most 4 KiB and NET_ACCEPT_MS.
 */
/* One request on connection c: read until its blank line (at most 4 KiB, until deadline), answer, close; says
 * what it answered. */
static void http_answer(int c, unsigned long port, long deadline)
{
	char req[4096];
	size_t got = 0;
	struct pollfd pc = {.fd = c, .events = POLLIN};
	while (got < sizeof(req) - 1 && !memmem(req, got, "\r\n\r\n", 4) && now_ms() < deadline &&
	       poll(&pc, 1, 1000) >= 0) {
		if (!(pc.revents & POLLIN))
			continue;
		ssize_t n = read(c, req + got, sizeof(req) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	req[got] = 0;
	req[strcspn(req, "\r\n")] = 0;
	int ok = !strncmp(req, "GET ", 4);
	static const char body[] = "brisk-init: ok\n";
	char resp[256];
	int len = snprintf(resp, sizeof(resp),
			   "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
			   "Connection: close\r\n\r\n%s",
			   ok ? "200 OK" : "400 Bad Request", ok ? sizeof(body) - 1 : (size_t)0, ok ? body : "");
	int sent = write(c, resp, (size_t)len) == len;
	close(c);
	say("brisk-net: httpd port %lu: answered '%.80s' %s%s\n", port, req, ok ? "200" : "400",
	    sent ? "" : " (FAIL: short write)");
}

void httpd_once(const char *cmdline)
{
	char v[16];
	if (!arg_value(cmdline, "brisk.httpd=", v, sizeof(v), NULL))
		return;
	char *end;
	unsigned long port = strtoul(v, &end, 10);
	if (*end || port == 0 || port > 65535) {
		say("brisk-net: httpd: FAIL (port '%s')\n", v);
		return;
	}
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s, 8) != 0) {
		say("brisk-net: httpd port %lu: FAIL (%s)\n", port, strerror(errno));
		if (s >= 0)
			close(s);
		return;
	}
	say("brisk-net: httpd listening on port %lu\n", port);
	/* The first request may be one its client gave up on while the guest was not yet listening (user-mode
	 * networking accepts on the host at once): so after the first answer, every further request within
	 * HTTPD_LINGER_MS of the last is answered too. */
	struct pollfd p = {.fd = s, .events = POLLIN};
	long deadline = now_ms() + NET_ACCEPT_MS;
	int answered = 0;
	while (answered < HTTPD_MAX && now_ms() < deadline) {
		int n = poll(&p, 1, answered ? HTTPD_LINGER_MS : 1000);
		if (n == 0 && answered)
			break;
		int c = n > 0 ? accept4(s, NULL, NULL, SOCK_CLOEXEC) : -1;
		if (c >= 0) {
			http_answer(c, port, deadline);
			answered++;
		}
	}
	close(s);
	if (!answered)
		say("brisk-net: httpd port %lu: FAIL (no request in %d s)\n", port, NET_ACCEPT_MS / 1000);
}

/*
 * ---- snapshot mode (brisk.snapshot=1: tests/linux/test_snapshot_linux.py) ----
 *
 * Runs after the other virtio steps (init.c's virtio_mode) and returns when the host says "stop"; the init
 * then ends the VM as usual. Words:
 *   brisk.snapshot.disk=DEV    mounted read-write (ext4) on /mnt (default /dev/vda)
 *   brisk.snapshot.hold=PORT   first connect to the host (CID 2) port PORT, send "hold\n", read the echo,
 *                              and keep that connection open: across a snapshot and restore it must end
 *                              (the transport reset), printed as "brisk-snap: held connection ... ended"
 *   brisk.snapshot.listen=PORT listen on vsock PORT for the host's commands (below)
 *   brisk.snapshot.max=SECONDS stop by itself after that much guest uptime (default 900)
 * Every TICK_MS of CLOCK_MONOTONIC (the next tick is due TICK_MS after the last one was due, or now when
 * that has passed): appends "tick N uptime U\n" to /mnt/brisk-ticks and fsync()s it, writes the same line
 * in a 4 KiB block to /mnt/brisk-tick with O_DIRECT, fdatasync()s and reads the block back with O_DIRECT
 * (from the device, not the page cache), then prints
 *   "brisk-init: tick N uptime U mono M disk ok"   (U: CLOCK_BOOTTIME, M: CLOCK_MONOTONIC, seconds)
 * or "disk FAIL (what)". A connection to the listening port starts with one command line:
 *   "exchange\n"          then the exchange of init_net.c's header comment, the init as the acceptor
 *   "dial PORT BYTES\n"   answered "ok\n"; the init then connects to the host port PORT and exchanges BYTES
 *   "random\n"            answered with 32 bytes of /dev/urandom in hex and "\n", also printed as
 *                         "brisk-snap: random HEX" (two restores of one snapshot must differ: VMGenID),
 *                         then the VMClock line (snap_vmclock), also printed once before the first tick
 *   "stop\n"              answered "ok\n"; the init closes its files, unmounts /mnt and returns
 * Ctrl-Alt-Del (the API's SendCtrlAltDel) stops it the same way, for when vsock does not work: the mode turns
 * the kernel's immediate reboot off (RB_DISABLE_CAD), so the kernel sends PID 1 a SIGINT instead.
 */
#define TICK_MS	     200
#define SNAP_MNT     "/mnt"
#define SNAP_BLOCK   4096
#define SNAP_CMD_MAX 64

static volatile sig_atomic_t snap_sigint;

static void on_sigint(int sig)
{
	(void)sig;
	snap_sigint = 1;
}

struct snap {
	int log_fd, blk_fd;
	uint8_t *wbuf, *rbuf; /* SNAP_BLOCK each, aligned for O_DIRECT */
};

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void snap_tick(struct snap *s, unsigned n)
{
	double up = clock_s(CLOCK_BOOTTIME), mono = clock_s(CLOCK_MONOTONIC);
	char line[96], why[96] = "";
	int len = snprintf(line, sizeof(line), "tick %u uptime %.3f\n", n, up);
	if (s->log_fd < 0 || s->blk_fd < 0)
		snprintf(why, sizeof(why), "files not open");
	else if (write_all(s->log_fd, (const uint8_t *)line, (size_t)len))
		snprintf(why, sizeof(why), "append: %s", strerror(errno));
	else if (fsync(s->log_fd))
		snprintf(why, sizeof(why), "fsync: %s", strerror(errno));
	if (!why[0]) {
		memset(s->wbuf, 0, SNAP_BLOCK);
		memcpy(s->wbuf, line, (size_t)len);
		memset(s->rbuf, 0xff, SNAP_BLOCK);
		if (pwrite(s->blk_fd, s->wbuf, SNAP_BLOCK, 0) != SNAP_BLOCK)
			snprintf(why, sizeof(why), "O_DIRECT write: %s", strerror(errno));
		else if (fdatasync(s->blk_fd))
			snprintf(why, sizeof(why), "fdatasync: %s", strerror(errno));
		else if (pread(s->blk_fd, s->rbuf, SNAP_BLOCK, 0) != SNAP_BLOCK)
			snprintf(why, sizeof(why), "O_DIRECT read: %s", strerror(errno));
		else if (memcmp(s->wbuf, s->rbuf, SNAP_BLOCK))
			snprintf(why, sizeof(why), "read back differs");
	}
	if (why[0])
		say("brisk-init: tick %u uptime %.3f mono %.3f disk FAIL (%s)\n", n, up, mono, why);
	else
		say("brisk-init: tick %u uptime %.3f mono %.3f disk ok\n", n, up, mono);
}

static int snap_open_disk(struct snap *s, const char *dev)
{
	long ms = -1, t0 = now_ms();
	while (now_ms() - t0 < DEV_WAIT_MS) {
		if (access(dev, F_OK) == 0) {
			ms = now_ms() - t0;
			break;
		}
		usleep(20000);
	}
	mkdir(SNAP_MNT, 0755);
	if (ms < 0 || mount(dev, SNAP_MNT, "ext4", 0, "") != 0) {
		say("brisk-snap: disk %s: FAIL (%s)\n", dev, ms < 0 ? "did not appear" : strerror(errno));
		return -1;
	}
	s->log_fd = open(SNAP_MNT "/brisk-ticks", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
	s->blk_fd = open(SNAP_MNT "/brisk-tick", O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0644);
	if (s->log_fd < 0 || s->blk_fd < 0 || posix_memalign((void **)&s->wbuf, SNAP_BLOCK, SNAP_BLOCK) ||
	    posix_memalign((void **)&s->rbuf, SNAP_BLOCK, SNAP_BLOCK)) {
		say("brisk-snap: disk %s: FAIL (files on " SNAP_MNT ": %s)\n", dev, strerror(errno));
		return -1;
	}
	say("brisk-snap: disk %s mounted on " SNAP_MNT " (ext4) after %ld ms\n", dev, ms);
	return 0;
}

/* The held connection: "hold\n" sent and echoed; the fd, or -1. */
static int snap_hold(unsigned port)
{
	struct sockaddr_vm vm = {.svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = port};
	char back[8] = "";
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		timeouts(fd);
	if (fd < 0 || connect(fd, (struct sockaddr *)&vm, sizeof(vm)) || write_all(fd, (const uint8_t *)"hold\n", 5) ||
	    recv(fd, back, 5, MSG_WAITALL) != 5 || memcmp(back, "hold\n", 5)) {
		say("brisk-snap: hold 2:%u: FAIL (%s)\n", port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	say("brisk-snap: holding vsock connection 2:%u open\n", port);
	return fd;
}

/*
 * The VMClock page where Linux put it: the region of the platform device it made from the DSDT's VCLK (_HID
 * AMZNC10C, the page in _CRS) in /proc/iomem, read through /dev/mem (x86 lets the first MiB be read where it is
 * not RAM). Debian's 6.1 kernel has no ptp_vmclock driver (7.0 has the generation counter); this reads the bytes
 * that driver maps (include/brisk/vmclock_abi.h's offsets). Printed as
 *   "brisk-snap: vmclock START-END magic 0xM generation G disruption marker D seq S"
 * or "brisk-snap: vmclock absent (why)".
 */
static void snap_vmclock(void)
{
	FILE *f = fopen("/proc/iomem", "re");
	char line[256], why[96] = "no AMZNC10C region in /proc/iomem";
	unsigned long long start = 0, end = 0;
	uint8_t b[112];
	int fd;

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "AMZNC10C") && sscanf(line, " %llx-%llx", &start, &end) == 2) {
			why[0] = 0;
			break;
		}
	if (f)
		fclose(f);
	if (!why[0]) {
		fd = open("/dev/mem", O_RDONLY | O_CLOEXEC);
		if (fd < 0 || pread(fd, b, sizeof(b), (off_t)start) != (ssize_t)sizeof(b))
			snprintf(why, sizeof(why), "/dev/mem at 0x%llx: %s", start, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	if (why[0]) {
		say("brisk-snap: vmclock absent (%s)\n", why);
		return;
	}
	uint32_t magic, seq;
	uint64_t marker, gen;
	memcpy(&magic, b, 4);
	memcpy(&seq, b + 12, 4);
	memcpy(&marker, b + 16, 8);
	memcpy(&gen, b + 104, 8);
	say("brisk-snap: vmclock %llx-%llx magic 0x%x generation %llu disruption marker %llu seq %u\n", start, end,
	    magic, (unsigned long long)gen, (unsigned long long)marker, seq);
}

/* "random": 32 bytes read from /dev/urandom, as a userspace program draws them, in hex; then the VMClock page. */
static void snap_random(int c)
{
	unsigned char b[32];
	char hex[2 * sizeof(b) + 2];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, b, sizeof(b)) : -1;

	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)sizeof(b)) {
		(void)!write(c, "error\n", 6);
		close(c);
		return;
	}
	for (size_t i = 0; i < sizeof(b); i++)
		snprintf(hex + 2 * i, 3, "%02x", b[i]);
	say("brisk-snap: random %s\n", hex);
	snap_vmclock();
	hex[2 * sizeof(b)] = '\n';
	(void)!write(c, hex, 2 * sizeof(b) + 1);
	close(c);
}

/* One command connection; returns 1 for "stop". */
static int snap_command(int c, unsigned port)
{
	char cmd[SNAP_CMD_MAX + 1], where[32], v[64];
	size_t n = 0;
	timeouts(c);
	while (n < SNAP_CMD_MAX && read(c, cmd + n, 1) == 1 && cmd[n] != '\n')
		n++;
	cmd[n] = 0;
	unsigned dport;
	unsigned long long bytes;
	snprintf(where, sizeof(where), "port %u", port);
	if (!strcmp(cmd, "exchange")) {
		exchange_acceptor(c, "vsock accept", where);
		return 0;
	}
	if (!strcmp(cmd, "random")) {
		snap_random(c);
		return 0;
	}
	if (sscanf(cmd, "dial %u %llu", &dport, &bytes) == 2) {
		(void)!write(c, "ok\n", 3);
		close(c);
		snprintf(v, sizeof(v), "%u:%llu", dport, bytes);
		vsock_connect(v);
		return 0;
	}
	int stop = !strcmp(cmd, "stop");
	(void)!write(c, stop ? "ok\n" : "unknown\n", stop ? 3 : 8);
	close(c);
	if (!stop)
		say("brisk-snap: unknown command '%s'\n", cmd);
	return stop;
}

void snapshot_mode(const char *cmdline)
{
	char v[64], dev[64];
	struct snap s = {.log_fd = -1, .blk_fd = -1};
	unsigned lport = 0, hport, tick = 0;
	uint64_t one;
	const char *disk = arg_value(cmdline, "brisk.snapshot.disk=", dev, sizeof(dev), "/dev/vda");
	double max_up = atof(arg_value(cmdline, "brisk.snapshot.max=", v, sizeof(v), "900"));
	snap_open_disk(&s, disk);
	int hold = -1, lfd = -1;
	if (arg_value(cmdline, "brisk.snapshot.hold=", v, sizeof(v), NULL) && sscanf(v, "%u", &hport) == 1)
		hold = snap_hold(hport);
	if (arg_value(cmdline, "brisk.snapshot.listen=", v, sizeof(v), NULL)) {
		snprintf(v + strlen(v), sizeof(v) - strlen(v), ":1");
		lfd = listen_on(AF_VSOCK, v, &lport, &one);
	}
	struct sigaction sa = {.sa_handler = on_sigint}; /* no SA_RESTART: poll returns EINTR */
	sigaction(SIGINT, &sa, NULL);
	reboot(RB_DISABLE_CAD);
	snap_vmclock();
	say("brisk-snap: ticking every %d ms\n", TICK_MS);
	long due = now_ms();
	int stop = 0;
	while (!stop) {
		if (snap_sigint) {
			say("brisk-snap: SIGINT (Ctrl-Alt-Del): stopping\n");
			break;
		}
		long now = now_ms();
		if (now >= due) {
			snap_tick(&s, ++tick);
			due += TICK_MS;
			if (due < now_ms())
				due = now_ms();
			if (clock_s(CLOCK_BOOTTIME) > max_up) {
				say("brisk-snap: %.0f s of uptime: stopping by itself\n", max_up);
				break;
			}
			continue;
		}
		struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = hold, .events = POLLIN}};
		if (poll(p, 2, (int)(due - now)) <= 0)
			continue;
		if (hold >= 0 && p[1].revents) {
			char b[16];
			int err = 0;
			socklen_t len = sizeof(err);
			/* SO_ERROR first: recv on a vsock socket that is no longer connected says only ENOTCONN */
			getsockopt(hold, SOL_SOCKET, SO_ERROR, &err, &len);
			ssize_t r = recv(hold, b, sizeof(b), MSG_DONTWAIT);
			int e = errno;
			say("brisk-snap: held connection 2:%u ended at tick %u: SO_ERROR %s, recv %s (revents 0x%x)\n",
			    hport, tick, err ? strerror(err) : "0",
			    r == 0  ? "EOF"
			    : r > 0 ? "unexpected data"
				    : strerror(e),
			    (unsigned)p[1].revents);
			close(hold);
			hold = -1;
		}
		if (lfd >= 0 && (p[0].revents & POLLIN)) {
			int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0)
				stop = snap_command(c, lport);
		}
	}
	if (lfd >= 0)
		close(lfd);
	if (hold >= 0)
		close(hold);
	int closed = (s.log_fd < 0 || close(s.log_fd) == 0) & (s.blk_fd < 0 || close(s.blk_fd) == 0);
	sync();
	int um = umount(SNAP_MNT);
	say("brisk-snap: stopped after tick %u; files closed: %s; " SNAP_MNT " unmounted: %s\n", tick,
	    closed ? "yes" : "no", um == 0 ? "yes" : strerror(errno));
	free(s.wbuf);
	free(s.rbuf);
}
