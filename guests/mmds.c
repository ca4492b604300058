/* mmds.c - a guest that talks to brisk's metadata service over virtio-net (docs/devices.md, "MMDS"). */
#include "virtio.h"

/*
 * Command-line words:
 *   virtio_mmio.device=SIZE@BASE:IRQ[:ID]  the device windows (the first network device is used)
 *   bench=N   N more GETs on the same connection, timed with rdtsc (default 0)
 *
 * The host has PUT {"latest": {"meta-data": {"ami-id": "ami-brisk", ...}}} and configured MMDS V1 on this
 * interface at 169.254.169.254. Checks: an ARP request for it is answered by 06:01:23:45:67:01; a TCP
 * handshake to port 80; GET /latest/meta-data/ami-id gives "HTTP/1.1 200 " and the body "ami-brisk"; a
 * segment with a bad checksum gets no answer; FIN gets FIN. Output: "mmds: CHECK what: PASS|FAIL (values)".
 */
#define NAME "mmds"

#define RXQ	 0
#define TXQ	 1
#define HDR	 12
#define RX_BUFS	 16
#define RX_BUF	 (HDR + 1514)
#define WAIT_MS	 3000
#define MMDS_IP	 0xa9fea9feu
#define MY_IP	 0xc0000210u
#define MY_PORT	 49152
#define WANT	 "ami-brisk"
#define GET_REQ	 "GET /latest/meta-data/ami-id HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n"
#define RESP_MAX 2048

static const uint8_t MMDS_MAC[6] = {0x06, 0x01, 0x23, 0x45, 0x67, 0x01};

static struct virtio_dev net;
static uint8_t rxbuf[RX_BUFS][RX_BUF] __attribute__((aligned(64)));
static int rx_of_head[VIRTQ_MAX_SIZE];
static uint8_t txhdr[HDR], frame[1514], got[RX_BUF];
static uint8_t mac[6];
static uint32_t seq, ack;
static char resp[RESP_MAX];
static unsigned int resp_len;

static void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* RFC 1071 over p[0..n) added to sum, folded and inverted. */
static uint16_t csum(uint32_t sum, const uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i + 1 < n; i += 2)
		sum += get16(p + i);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void post_rx(unsigned int i)
{
	struct virtio_buf b = {rxbuf[i], RX_BUF};
	int head = virtio_submit(&net, RXQ, &b, 0, 1, 0, VIRTIO_POLL);

	if (head >= 0)
		rx_of_head[head] = (int)i;
}

/* The next frame into got[] (header included); its length, or -1 after `ms` without one. */
static int receive(unsigned int ms)
{
	uint32_t id, len;
	int i;

	if (virtio_wait(&net, RXQ, VIRTIO_POLL, ms, &id, &len))
		return -1;
	i = rx_of_head[id];
	memcpy(got, rxbuf[i], len > RX_BUF ? RX_BUF : len);
	post_rx((unsigned int)i);
	return (int)len;
}

static int transmit(uint32_t len)
{
	struct virtio_buf b[2] = {{txhdr, HDR}, {frame, len}};
	uint32_t used = 0;

	if (virtio_transfer(&net, TXQ, b, 2, 0, 0, &used))
		return -1;
	return (int)used;
}

static uint32_t arp_request(void)
{
	memset(frame, 0xff, 6);
	memcpy(frame + 6, mac, 6);
	put16(frame + 12, 0x0806);
	put16(frame + 14, 1);
	put16(frame + 16, 0x0800);
	frame[18] = 6;
	frame[19] = 4;
	put16(frame + 20, 1);
	memcpy(frame + 22, mac, 6);
	put32(frame + 28, MY_IP);
	memset(frame + 32, 0, 6);
	put32(frame + 38, MMDS_IP);
	return 42;
}

/* A TCP segment to the MMDS port 80 with `flags` and `n` bytes of data; checksums right. */
static uint32_t tcp_segment(uint8_t flags, const char *data, uint32_t n)
{
	uint8_t *ip = frame + 14, *t = ip + 20, ph[12];
	uint32_t sum = 0;

	memcpy(frame, MMDS_MAC, 6);
	memcpy(frame + 6, mac, 6);
	put16(frame + 12, 0x0800);
	memset(ip, 0, 40);
	ip[0] = 0x45;
	put16(ip + 2, 40 + n);
	ip[8] = 64;
	ip[9] = 6;
	put32(ip + 12, MY_IP);
	put32(ip + 16, MMDS_IP);
	put16(ip + 10, csum(0, ip, 20));
	put16(t, MY_PORT);
	put16(t + 2, 80);
	put32(t + 4, seq);
	put32(t + 8, ack);
	t[12] = 5 << 4;
	t[13] = flags;
	put16(t + 14, 65535);
	memcpy(t + 20, data, n);
	put32(ph, MY_IP);
	put32(ph + 4, MMDS_IP);
	ph[8] = 0;
	ph[9] = 6;
	put16(ph + 10, 20 + n);
	for (int i = 0; i < 12; i += 2)
		sum += get16(ph + i);
	put16(t + 16, csum(sum, t, 20 + n));
	return 54 + n;
}

/* The next TCP segment from the MMDS: its flags, data appended to resp[] when in order; -1 on timeout. */
static int receive_segment(unsigned int ms)
{
	for (int tries = 0; tries < 8; tries++) {
		int n = receive(ms);
		const uint8_t *e = got + HDR, *ip = e + 14, *t = ip + 20;
		uint32_t hl, dl;

		if (n < 0)
			return -1;
		if (n < HDR + 54 || get16(e + 12) != 0x0800 || ip[9] != 6 || get32(ip + 12) != MMDS_IP)
			continue;
		hl = (uint32_t)(t[12] >> 4) * 4;
		dl = get16(ip + 2) - 20 - hl;
		if (t[13] & 0x02) {
			ack = get32(t + 4) + 1;
		} else if (get32(t + 4) == ack && dl && resp_len + dl < RESP_MAX) {
			memcpy(resp + resp_len, t + hl, dl);
			resp_len += dl;
			ack += dl;
		}
		if (t[13] & 0x01)
			ack++;
		return t[13];
	}
	return -1;
}

/* Whether resp[] holds a whole response (headers and Content-Length bytes of body). */
static const char *body_if_complete(void)
{
	resp[resp_len] = 0;
	for (unsigned int i = 0; i + 3 < resp_len; i++) {
		if (memcmp(resp + i, "\r\n\r\n", 4))
			continue;
		for (unsigned int k = 0; k < i; k++) {
			uint64_t want = 0;

			if (strncmp(resp + k, "Content-Length: ", 16))
				continue;
			for (const char *p = resp + k + 16; *p >= '0' && *p <= '9'; p++)
				want = want * 10 + (uint64_t)(*p - '0');
			return resp_len - (i + 4) >= want ? resp + i + 4 : 0;
		}
		return resp + i + 4;
	}
	return 0;
}

/* One GET on the open connection: sent, every segment ACKed, the body returned (or 0). */
static const char *get(void)
{
	const char *body = 0;

	resp_len = 0;
	transmit(tcp_segment(0x18, GET_REQ, sizeof(GET_REQ) - 1));
	seq += sizeof(GET_REQ) - 1;
	while (!body) {
		if (receive_segment(WAIT_MS) < 0)
			return 0;
		body = body_if_complete();
		transmit(tcp_segment(0x10, 0, 0));
	}
	return body;
}

static void check_arp(void)
{
	int used = transmit(arp_request()), n = used == 0 ? receive(WAIT_MS) : -1;
	const uint8_t *e = got + HDR;

	conf_check(n >= HDR + 42 && !memcmp(e, mac, 6) && get16(e + 12) == 0x0806 && get16(e + 20) == 2 &&
		       !memcmp(e + 22, MMDS_MAC, 6) && get32(e + 28) == MMDS_IP && get32(e + 38) == MY_IP,
		   "arp_reply", "%d bytes, op %u, sender %02x:%02x:%02x:%02x:%02x:%02x %u.%u.%u.%u", n,
		   n > 0 ? get16(e + 20) : 0, e[22], e[23], e[24], e[25], e[26], e[27], e[28], e[29], e[30], e[31]);
}

/* rdtsc cycles per millisecond, against the LAPIC timer behind virtio_poll_status's deadline. */
static uint64_t tsc_per_ms(void)
{
	uint64_t t0 = rdtsc();

	virtio_poll_status(&net, VIRTIO_STATUS_FAILED, 100);
	return (rdtsc() - t0) / 100;
}

#define BENCH_MAX 1000
static uint64_t samples[BENCH_MAX];

/* The median of samples[0..n) (insertion sort: n is small). */
static uint64_t median(uint64_t n)
{
	for (uint64_t i = 1; i < n; i++)
		for (uint64_t j = i; j > 0 && samples[j - 1] > samples[j]; j--) {
			uint64_t t = samples[j];

			samples[j] = samples[j - 1];
			samples[j - 1] = t;
		}
	return samples[n / 2];
}

static void bench(uint64_t n)
{
	uint64_t per_ms = tsc_per_ms(), total = 0, lo = ~0ull, hi = 0;
	unsigned int ok = 0;

	n = n > BENCH_MAX ? BENCH_MAX : n;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t t0 = rdtsc(), d;
		const char *b = get();

		d = rdtsc() - t0;
		samples[i] = d;
		ok += b && !strcmp(b, WANT);
		total += d;
		lo = d < lo ? d : lo;
		hi = d > hi ? d : hi;
	}
	conf_check(ok == n, "bench_gets", "%u of %llu GETs answered", ok, (unsigned long long)n);
	if (per_ms)
		gprintf("%s: bench %llu GETs: median %llu us, mean %llu us, min %llu us, max %llu us (tsc %llu kHz)\n",
			NAME, (unsigned long long)n, (unsigned long long)(median(n) * 1000 / per_ms),
			(unsigned long long)(total * 1000 / n / per_ms), (unsigned long long)(lo * 1000 / per_ms),
			(unsigned long long)(hi * 1000 / per_ms), (unsigned long long)per_ms);
	/* The floor: one transmit chain to the backend and its completion (a GET is two of them and a receive). */
	for (uint64_t i = 0; i < n; i++) {
		uint64_t t0 = rdtsc();

		memset(frame, 0xff, 6);
		memcpy(frame + 6, mac, 6);
		put16(frame + 12, 0x88b5); /* IEEE 802 local experimental: nobody acts on it */
		transmit(60);
		samples[i] = rdtsc() - t0;
	}
	if (per_ms)
		gprintf("%s: bench %llu transmit chains to the backend: median %llu us\n", NAME, (unsigned long long)n,
			(unsigned long long)(median(n) * 1000 / per_ms));
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si), *body;
	uint64_t m[6], n_bench = 0;
	struct virtio_cfg_field f[6] = {{0, 1, &m[0]}, {1, 1, &m[1]}, {2, 1, &m[2]},
					{3, 1, &m[3]}, {4, 1, &m[4]}, {5, 1, &m[5]}};
	int fl;
	uint32_t len;

	serial_init();
	conf_begin(NAME);
	net.name = NAME;
	cmdline_get_u64(cmdline, "bench", &n_bench);
	if (virtio_start(&net, cmdline, VIRTIO_ID_NET, 1ULL << 5, 2) || virtio_config_read(&net, f, 6) < 0) {
		conf_check(0, "bringup", "see above");
		conf_end();
	}
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)m[i];
	for (unsigned int i = 0; i < RX_BUFS; i++)
		post_rx(i);
	check_arp();

	seq = 1000;
	transmit(tcp_segment(0x02, 0, 0));
	fl = receive_segment(WAIT_MS);
	conf_check(fl == 0x12, "tcp_syn_ack", "flags 0x%x", fl);
	seq++;
	transmit(tcp_segment(0x10, 0, 0));
	body = get();
	conf_check(body && !strncmp(resp, "HTTP/1.1 200 \r\n", 15), "http_status", "%.15s", resp);
	conf_check(body && !strcmp(body, WANT), "http_body", "'%s'", body ? body : "(none)");

	/* A bad TCP checksum: dropped by the stack, nothing comes back. */
	len = tcp_segment(0x18, "GET / HTTP/1.1\r\n\r\n", 18);
	frame[14 + 20 + 16] ^= 0x5a;
	transmit(len);
	fl = receive_segment(300);
	conf_check(fl < 0, "bad_checksum_ignored", "got a segment with flags 0x%x", fl);

	if (n_bench)
		bench(n_bench);

	transmit(tcp_segment(0x11, 0, 0));
	seq++;
	fl = receive_segment(WAIT_MS);
	if (fl == 0x10)
		fl = receive_segment(WAIT_MS);
	conf_check(fl >= 0 && (fl & 0x01), "tcp_fin", "flags 0x%x", fl);
	transmit(tcp_segment(0x10, 0, 0));
	conf_end();
}
