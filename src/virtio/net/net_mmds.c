/*
 * net_mmds.c - the metadata service's network stack behind a virtio-net interface (include/brisk/net_mmds.h),
 * after Firecracker v1.7.0's MmdsNetworkStack and dumbo (src/vmm/src/mmds/ns.rs, src/vmm/src/dumbo/).
 *
 * ARP (RFC 826): a request for the MMDS address gets one reply from Firecracker's MMDS MAC 06:01:23:45:67:01
 * (one pending reply, as ns.rs; a newer request replaces it).
 *
 * IPv4 (RFC 791): header checked (version, IHL, total length, header checksum); fragments and non-TCP packets
 * are dropped and counted (dumbo does not reassemble).
 *
 * TCP (RFC 793, RFC 9293), passive only, on port 80: SYN -> SYN/ACK (our MSS option 1460; the peer's MSS
 * option, else 536, bounds our segments); data accepted in order only (anything else is dropped and answered
 * with an ACK: the peer retransmits); our receive window is what is left of the 2500-byte request buffer; a
 * request is complete at its blank line (dumbo's framing) and answered by mmds_http_respond; one response
 * at a time, sent within the peer's window (a window of 0 sends nothing until it opens) and resent from the
 * last ACK on a duplicate ACK; FIN is ACKed and answered with our FIN once the response is sent; RST drops
 * the connection. A buffer full of a request with no end resets the connection (dumbo). A segment for no
 * connection gets a RST (at most MMDS_MAX_RESETS pending, the rest dropped and counted).
 *
 * Memory is fixed: MMDS_MAX_CONNECTIONS connections (a SYN beyond replaces one idle for 40 s, else gets a
 * RST), each a 2500-byte request buffer and one response (at most the store's limit plus its headers).
 * Replies are produced only when the device's receive path asks (net_mmds_output): nothing queues up
 * beyond that (docs/security.md cases 52-54).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "brisk/fc_metrics.h"
#include "brisk/mmds.h"
#include "brisk/net_mmds.h"
#include "brisk/virtio_net.h"

#define ETH_HLEN     14u
#define ETH_P_ARP    0x0806u
#define ETH_P_IPV4   0x0800u
#define IP_HLEN	     20u
#define TCP_HLEN     20u
#define TCP_FIN	     0x01u
#define TCP_SYN	     0x02u
#define TCP_RST	     0x04u
#define TCP_PSH	     0x08u
#define TCP_ACK	     0x10u
#define IPPROTO_TCP_ 6u

static const uint8_t mmds_mac[6] = {0x06, 0x01, 0x23, 0x45, 0x67, 0x01};

enum cstate { C_FREE = 0, C_SYN_RCVD, C_OPEN };

struct conn {
	enum cstate state;
	uint8_t rmac[6];
	uint32_t rip;
	uint16_t rport, mss;
	uint32_t iss, snd_una, snd_nxt, snd_wnd, rcv_nxt;
	uint16_t last_wnd;
	bool ack_pending, synack_pending, fin_rcvd, fin_sent, close_pending;
	uint64_t last_ms;
	char *resp; /* the response being sent; its first byte is at seq resp_seq */
	size_t resp_len;
	uint32_t resp_seq;
	uint32_t rlen;
	uint8_t rbuf[MMDS_RCV_BUF];
};

struct rst {
	uint8_t mac[6];
	uint32_t ip, seq, ack;
	uint16_t port;
	bool with_ack;
};

struct net_mmds {
	uint32_t ipv4; /* the address of the last frame taken (the replies' source) */
	bool arp_pending;
	uint8_t arp_mac[6];
	uint32_t arp_ip;
	struct rst resets[MMDS_MAX_RESETS];
	unsigned nresets;
	unsigned next_conn; /* round-robin start of the output scan */
	uint16_t ip_id;
	struct net_mmds_stats st;
	struct conn c[MMDS_MAX_CONNECTIONS];
};

/* ---- bytes ---------------------------------------------------------------------------------------------- */

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void wr16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void wr32(uint8_t *p, uint32_t v)
{
	wr16(p, v >> 16);
	wr16(p + 2, v);
}

/* RFC 1071: the one's complement sum of p[0..n), folded onto `sum`. */
static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += rd16(p + i);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* The TCP checksum over the pseudo-header (RFC 793 3.1) and the segment t[0..n). */
static uint16_t tcp_csum(uint32_t src, uint32_t dst, const uint8_t *t, size_t n)
{
	uint8_t ph[12];

	wr32(ph, src);
	wr32(ph + 4, dst);
	ph[8] = 0;
	ph[9] = IPPROTO_TCP_;
	wr16(ph + 10, (uint32_t)n);
	return csum_fold(csum_add(csum_add(0, ph, sizeof(ph)), t, n));
}

static bool seq_lt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- life --------------------------------------------------------------------------------------------- */

struct net_mmds *net_mmds_new(void)
{
	return calloc(1, sizeof(struct net_mmds));
}

static void conn_free(struct conn *c)
{
	if (c->state != C_FREE)
		fcm_inc(fcm_mmds, FCM_MMDS_connections_destroyed);
	free(c->resp);
	memset(c, 0, offsetof(struct conn, rbuf));
}

void net_mmds_free(struct net_mmds *m)
{
	if (!m)
		return;
	for (unsigned i = 0; i < MMDS_MAX_CONNECTIONS; i++)
		free(m->c[i].resp);
	free(m);
}

const struct net_mmds_stats *net_mmds_stats(const struct net_mmds *m)
{
	return &m->st;
}

/* ---- input -------------------------------------------------------------------------------------------- */

bool net_mmds_is_for(uint32_t ipv4, const uint8_t *f, size_t len)
{
	uint16_t type;

	if (len < ETH_HLEN)
		return false;
	type = rd16(f + 12);
	if (type == ETH_P_ARP) /* test_speculative_tpa: the target protocol address at byte 24 of the ARP */
		return len >= ETH_HLEN + 28 && rd32(f + ETH_HLEN + 24) == ipv4;
	if (type == ETH_P_IPV4) /* test_speculative_dst_addr */
		return len >= ETH_HLEN + IP_HLEN && rd32(f + ETH_HLEN + 16) == ipv4;
	return false;
}

static void arp_input(struct net_mmds *m, const uint8_t *f, size_t len)
{
	const uint8_t *a = f + ETH_HLEN;

	/* Ethernet (1), IPv4 (0x0800), 6-byte and 4-byte addresses, a request (1): RFC 826. */
	if (len < ETH_HLEN + 28 || rd16(a) != 1 || rd16(a + 2) != ETH_P_IPV4 || a[4] != 6 || a[5] != 4 ||
	    rd16(a + 6) != 1) {
		m->st.bad++;
		fcm_inc(fcm_mmds, FCM_MMDS_rx_accepted_err);
		return;
	}
	memcpy(m->arp_mac, a + 8, 6);
	m->arp_ip = rd32(a + 14);
	m->arp_pending = true;
}

static void queue_rst(struct net_mmds *m, const uint8_t *mac, uint32_t ip, uint16_t port, uint32_t seq, uint32_t ack,
		      bool with_ack)
{
	struct rst *r;

	if (m->nresets == MMDS_MAX_RESETS) {
		m->st.resets_dropped++;
		return;
	}
	r = &m->resets[m->nresets++];
	memcpy(r->mac, mac, 6);
	r->ip = ip;
	r->port = port;
	r->seq = seq;
	r->ack = ack;
	r->with_ack = with_ack;
}

/* RFC 793 p. 36, a segment for no connection: RST with seq = its ACK, or RST|ACK acknowledging it. */
static void reset_for(struct net_mmds *m, const uint8_t *mac, uint32_t ip, const uint8_t *t, uint32_t seglen)
{
	uint8_t fl = t[13];

	if (fl & TCP_RST)
		return;
	if (fl & TCP_ACK)
		queue_rst(m, mac, ip, rd16(t), rd32(t + 8), 0, false);
	else
		queue_rst(m, mac, ip, rd16(t), 0, rd32(t + 4) + seglen, true);
}

static struct conn *find(struct net_mmds *m, uint32_t ip, uint16_t port)
{
	for (unsigned i = 0; i < MMDS_MAX_CONNECTIONS; i++)
		if (m->c[i].state != C_FREE && m->c[i].rip == ip && m->c[i].rport == port)
			return &m->c[i];
	return NULL;
}

/* A slot for a new connection: a free one, else one idle for MMDS_EVICT_MS (the longest idle), else NULL. */
static struct conn *slot(struct net_mmds *m, uint64_t now)
{
	struct conn *old = NULL;

	for (unsigned i = 0; i < MMDS_MAX_CONNECTIONS; i++) {
		if (m->c[i].state == C_FREE)
			return &m->c[i];
		if (now - m->c[i].last_ms > MMDS_EVICT_MS && (!old || m->c[i].last_ms < old->last_ms))
			old = &m->c[i];
	}
	if (old) {
		m->st.evicted++;
		conn_free(old);
	}
	return old;
}

/* The MSS option of a SYN's options o[0..n) (RFC 9293 3.2), else the default. */
static uint16_t peer_mss(const uint8_t *o, size_t n)
{
	for (size_t i = 0; i < n;) {
		if (o[i] == 0)
			break;
		if (o[i] == 1) {
			i++;
			continue;
		}
		if (i + 1 >= n || o[i + 1] < 2 || i + o[i + 1] > n)
			break;
		if (o[i] == 2 && o[i + 1] == 4) {
			uint16_t v = rd16(o + i + 2);

			return v < 64 ? 64 : v > MMDS_MSS_MAX ? MMDS_MSS_MAX : v;
		}
		i += o[i + 1];
	}
	return MMDS_MSS_DEFAULT;
}

static void syn(struct net_mmds *m, const uint8_t *mac, uint32_t ip, const uint8_t *t, size_t thl)
{
	uint64_t now = now_ms();
	struct conn *c = find(m, ip, rd16(t));
	uint32_t iss;

	if (c && c->state == C_SYN_RCVD && c->rcv_nxt == rd32(t + 4) + 1) { /* a retransmitted SYN */
		c->synack_pending = true;
		return;
	}
	if (c)
		conn_free(c);
	c = slot(m, now);
	if (!c) {
		m->st.refused++;
		return reset_for(m, mac, ip, t, 1);
	}
	if (getrandom(&iss, sizeof(iss), GRND_NONBLOCK) != sizeof(iss))
		iss = (uint32_t)now * 2654435761u;
	*c = (struct conn){.state = C_SYN_RCVD,
			   .rip = ip,
			   .rport = rd16(t),
			   .iss = iss,
			   .snd_una = iss,
			   .snd_nxt = iss,
			   .rcv_nxt = rd32(t + 4) + 1,
			   .snd_wnd = rd16(t + 14),
			   .mss = peer_mss(t + TCP_HLEN, thl - TCP_HLEN),
			   .synack_pending = true,
			   .last_ms = now};
	memcpy(c->rmac, mac, 6);
	c->last_wnd = (uint16_t)c->snd_wnd;
	fcm_inc(fcm_mmds, FCM_MMDS_connections_created);
}

/* The response to the request at the front of the buffer, when it is complete (dumbo's framing). */
static void serve(struct net_mmds *m, struct conn *c)
{
	size_t end = 0;

	if (c->resp)
		return;
	for (uint32_t i = 0; i + 1 < c->rlen && !end; i++) {
		if (c->rbuf[i] != '\n')
			continue;
		if (c->rbuf[i + 1] == '\n')
			end = i + 2;
		else if (i + 2 < c->rlen && c->rbuf[i + 1] == '\r' && c->rbuf[i + 2] == '\n')
			end = i + 3;
	}
	if (!end) {
		if (c->rlen == MMDS_RCV_BUF) { /* a request that does not fit: dumbo resets (case 53) */
			m->st.oversized++;
			queue_rst(m, c->rmac, c->rip, c->rport, c->snd_nxt, 0, false);
			conn_free(c);
		}
		return;
	}
	m->st.requests++;
	c->resp = mmds_http_respond((const char *)c->rbuf, end, &c->resp_len);
	c->resp_seq = c->snd_una;
	memmove(c->rbuf, c->rbuf + end, c->rlen - end);
	c->rlen -= (uint32_t)end;
	c->ack_pending = true; /* the window grew */
	if (!c->resp)
		fcm_inc(fcm_mmds, FCM_MMDS_tx_errors);
}

/* An ACK of ours: snd_una moves, a duplicate goes back to it, a finished response frees the next. */
static void acked(struct net_mmds *m, struct conn *c, uint32_t ack, uint16_t wnd, bool has_data)
{
	uint32_t end = c->resp ? c->resp_seq + (uint32_t)c->resp_len : c->snd_nxt;

	if (seq_lt(c->snd_nxt, ack))
		return; /* acknowledges what was never sent: ignored (RFC 9293 3.10.7.4) */
	if (seq_lt(c->snd_una, ack)) {
		c->snd_una = ack;
	} else if (ack == c->snd_una && seq_lt(c->snd_una, c->snd_nxt) && !has_data && wnd == c->last_wnd) {
		c->snd_nxt = c->snd_una; /* a duplicate ACK: what follows it was lost (go back) */
	}
	c->snd_wnd = wnd;
	c->last_wnd = wnd;
	if (c->resp && c->snd_una == end) {
		free(c->resp);
		c->resp = NULL;
		serve(m, c);
	}
}

static void data(struct net_mmds *m, struct conn *c, const uint8_t *p, uint32_t n, uint32_t seq, bool fin)
{
	uint32_t room = MMDS_RCV_BUF - c->rlen, given = n;

	if (n || fin)
		c->ack_pending = true;
	if (seq != c->rcv_nxt) {
		if (n || fin)
			m->st.out_of_order++;
		return;
	}
	if (n > room)
		n = room; /* beyond our window: not taken, the peer sends it again */
	memcpy(c->rbuf + c->rlen, p, n);
	c->rlen += n;
	c->rcv_nxt += n;
	if (fin && n == given && !c->fin_rcvd) { /* a FIN counts once all before it is taken */
		c->fin_rcvd = true;
		c->rcv_nxt++;
	}
	serve(m, c);
}

static void segment(struct net_mmds *m, const uint8_t *mac, uint32_t src, const uint8_t *t, size_t tlen)
{
	size_t thl = (size_t)(t[12] >> 4) * 4u;
	uint8_t fl = t[13];
	uint32_t seq = rd32(t + 4);
	struct conn *c;

	if (thl < TCP_HLEN || thl > tlen) {
		m->st.bad++;
		fcm_inc(fcm_mmds, FCM_MMDS_rx_accepted_err);
		return;
	}
	fcm_inc(fcm_mmds, FCM_MMDS_rx_count);
	if (rd16(t + 2) != MMDS_PORT)
		return reset_for(m, mac, src, t, (uint32_t)(tlen - thl) + !!(fl & TCP_SYN) + !!(fl & TCP_FIN));
	if ((fl & (TCP_SYN | TCP_ACK | TCP_RST)) == TCP_SYN)
		return syn(m, mac, src, t, thl);
	c = find(m, src, rd16(t));
	if (!c)
		return reset_for(m, mac, src, t, (uint32_t)(tlen - thl) + !!(fl & TCP_SYN) + !!(fl & TCP_FIN));
	c->last_ms = now_ms();
	memcpy(c->rmac, mac, 6);
	if (fl & TCP_RST) {
		if (seq == c->rcv_nxt) /* RFC 5961 3.2: only an exact RST closes */
			conn_free(c);
		return;
	}
	if (fl & TCP_SYN) {
		fcm_inc(fcm_mmds, FCM_MMDS_rx_accepted_unusual);
		c->ack_pending = true;
		return;
	}
	if (!(fl & TCP_ACK))
		return;
	if (c->state == C_SYN_RCVD) {
		if (rd32(t + 8) != c->iss + 1)
			return reset_for(m, mac, src, t, 0);
		c->state = C_OPEN;
	}
	acked(m, c, rd32(t + 8), rd16(t + 14), tlen > thl);
	if (c->state == C_FREE) /* reset by serve */
		return;
	data(m, c, t + thl, (uint32_t)(tlen - thl), seq, fl & TCP_FIN);
	if (c->state == C_FREE)
		return;
	if (c->fin_rcvd && !c->resp && !c->fin_sent)
		c->close_pending = true;
	if (c->fin_sent && c->fin_rcvd && c->snd_una == c->snd_nxt)
		conn_free(c); /* both FINs sent and acknowledged */
}

/* The IPv4 header of a frame for the MMDS (RFC 791 3.1), then TCP. */
static void ipv4_input(struct net_mmds *m, const uint8_t *f, size_t len, bool csum_partial)
{
	const uint8_t *ip = f + ETH_HLEN;
	size_t ihl = (size_t)(ip[0] & 15) * 4u, tot = rd16(ip + 2);

	if ((ip[0] >> 4) != 4 || ihl < IP_HLEN || tot < ihl || tot > len - ETH_HLEN ||
	    csum_fold(csum_add(0, ip, ihl)) != 0) {
		m->st.bad++;
		fcm_inc(fcm_mmds, FCM_MMDS_rx_accepted_err);
		return;
	}
	if (rd16(ip + 6) & 0x3fff) { /* MF or a fragment offset */
		m->st.fragments++;
		fcm_inc(fcm_mmds, FCM_MMDS_rx_accepted_unusual);
		return;
	}
	if (ip[9] != IPPROTO_TCP_) {
		m->st.not_tcp++;
		fcm_inc(fcm_mmds, FCM_MMDS_rx_accepted_unusual);
		return;
	}
	if (tot - ihl < TCP_HLEN ||
	    (!csum_partial && tcp_csum(rd32(ip + 12), rd32(ip + 16), ip + ihl, tot - ihl) != 0)) {
		m->st.bad++;
		fcm_inc(fcm_mmds, FCM_MMDS_rx_accepted_err);
		return;
	}
	m->ipv4 = rd32(ip + 16);
	segment(m, f + 6, rd32(ip + 12), ip + ihl, tot - ihl);
}

void net_mmds_input(struct net_mmds *m, uint32_t ipv4, const uint8_t *f, size_t len, bool csum_partial)
{
	m->st.frames++;
	m->ipv4 = ipv4;
	fcm_inc(fcm_mmds, FCM_MMDS_rx_accepted);
	if (len < ETH_HLEN || len > MMDS_FRAME_MAX) {
		m->st.bad++;
		fcm_inc(fcm_mmds, FCM_MMDS_rx_bad_eth);
		return;
	}
	if (rd16(f + 12) == ETH_P_ARP)
		arp_input(m, f, len);
	else
		ipv4_input(m, f, len, csum_partial);
}

/* ---- output ------------------------------------------------------------------------------------------- */

static size_t eth(uint8_t *b, const uint8_t *dst, uint16_t type)
{
	memcpy(b, dst, 6);
	memcpy(b + 6, mmds_mac, 6);
	wr16(b + 12, type);
	return ETH_HLEN;
}

static size_t arp_reply(struct net_mmds *m, uint8_t *b)
{
	uint8_t *a = b + eth(b, m->arp_mac, ETH_P_ARP);

	wr16(a, 1);
	wr16(a + 2, ETH_P_IPV4);
	a[4] = 6;
	a[5] = 4;
	wr16(a + 6, 2);
	memcpy(a + 8, mmds_mac, 6);
	wr32(a + 14, m->ipv4);
	memcpy(a + 18, m->arp_mac, 6);
	wr32(a + 24, m->arp_ip);
	m->arp_pending = false;
	return ETH_HLEN + 28;
}

/* One TCP/IPv4 frame from the MMDS into b: flags, seq/ack, window, `opt` option bytes, payload. */
static size_t tcp_frame(struct net_mmds *m, uint8_t *b, const uint8_t *mac, uint32_t dst, uint16_t dport, uint32_t seq,
			uint32_t ack, uint8_t flags, uint16_t wnd, bool mss_opt, const char *pay, size_t n)
{
	uint8_t *ip = b + eth(b, mac, ETH_P_IPV4), *t = ip + IP_HLEN;
	size_t thl = TCP_HLEN + (mss_opt ? 4u : 0u), tot = IP_HLEN + thl + n;

	memset(ip, 0, IP_HLEN + thl);
	ip[0] = 0x45;
	wr16(ip + 2, (uint32_t)tot);
	wr16(ip + 4, m->ip_id++);
	wr16(ip + 6, 0x4000); /* DF */
	ip[8] = 64;
	ip[9] = IPPROTO_TCP_;
	wr32(ip + 12, m->ipv4);
	wr32(ip + 16, dst);
	wr16(ip + 10, csum_fold(csum_add(0, ip, IP_HLEN)));
	wr16(t, MMDS_PORT);
	wr16(t + 2, dport);
	wr32(t + 4, seq);
	wr32(t + 8, ack);
	t[12] = (uint8_t)(thl / 4 << 4);
	t[13] = flags;
	wr16(t + 14, wnd);
	if (mss_opt) {
		t[20] = 2;
		t[21] = 4;
		wr16(t + 22, MMDS_MSS_MAX);
	}
	if (n)
		memcpy(t + thl, pay, n);
	wr16(t + 16, tcp_csum(m->ipv4, dst, t, thl + n));
	return ETH_HLEN + tot;
}

/* The next segment of connection c, or 0 when it has none. */
static size_t conn_output(struct net_mmds *m, struct conn *c, uint8_t *b, size_t cap)
{
	uint16_t wnd = (uint16_t)(MMDS_RCV_BUF - c->rlen);
	size_t n = 0, off;
	uint32_t in_flight, room;

	if (c->synack_pending) {
		c->synack_pending = false;
		c->snd_nxt = c->iss + 1;
		return tcp_frame(m, b, c->rmac, c->rip, c->rport, c->iss, c->rcv_nxt, TCP_SYN | TCP_ACK, wnd, true,
				 NULL, 0);
	}
	if (c->state != C_OPEN)
		return 0;
	if (c->resp) {
		off = (size_t)(c->snd_nxt - c->resp_seq);
		in_flight = c->snd_nxt - c->snd_una;
		room = c->snd_wnd > in_flight ? c->snd_wnd - in_flight : 0;
		n = off < c->resp_len ? c->resp_len - off : 0;
		n = n > c->mss ? c->mss : n;
		n = n > room ? room : n;
		n = n > cap - ETH_HLEN - IP_HLEN - TCP_HLEN ? cap - ETH_HLEN - IP_HLEN - TCP_HLEN : n;
		if (n) {
			size_t len = tcp_frame(m, b, c->rmac, c->rip, c->rport, c->snd_nxt, c->rcv_nxt,
					       TCP_ACK | TCP_PSH, wnd, false, c->resp + off, n);

			c->snd_nxt += (uint32_t)n;
			c->ack_pending = false;
			return len;
		}
	}
	if (c->close_pending && !c->resp) {
		c->close_pending = false;
		c->fin_sent = true;
		c->ack_pending = false;
		return tcp_frame(m, b, c->rmac, c->rip, c->rport, c->snd_nxt++, c->rcv_nxt, TCP_FIN | TCP_ACK, wnd,
				 false, NULL, 0);
	}
	if (c->ack_pending) {
		c->ack_pending = false;
		return tcp_frame(m, b, c->rmac, c->rip, c->rport, c->snd_nxt, c->rcv_nxt, TCP_ACK, wnd, false, NULL, 0);
	}
	return 0;
}

static size_t output(struct net_mmds *m, uint8_t *b, size_t cap)
{
	if (m->arp_pending)
		return arp_reply(m, b);
	if (m->nresets) {
		struct rst *r = &m->resets[--m->nresets];

		m->st.resets_sent++;
		return tcp_frame(m, b, r->mac, r->ip, r->port, r->seq, r->ack, TCP_RST | (r->with_ack ? TCP_ACK : 0), 0,
				 false, NULL, 0);
	}
	for (unsigned k = 0; k < MMDS_MAX_CONNECTIONS; k++) {
		struct conn *c = &m->c[(m->next_conn + k) % MMDS_MAX_CONNECTIONS];
		size_t len = c->state == C_FREE ? 0 : conn_output(m, c, b, cap);

		if (len) {
			m->next_conn = (m->next_conn + k + 1) % MMDS_MAX_CONNECTIONS;
			return len;
		}
	}
	return 0;
}

size_t net_mmds_output(struct net_mmds *m, uint8_t *buf, size_t cap)
{
	size_t len;

	if (!m || cap < MMDS_FRAME_MAX)
		return 0;
	len = output(m, buf, cap);
	if (len) {
		m->st.frames_out++;
		fcm_inc(fcm_mmds, FCM_MMDS_tx_count);
		fcm_inc(fcm_mmds, FCM_MMDS_tx_frames);
		fcm_add(fcm_mmds, FCM_MMDS_tx_bytes, len);
	}
	return len;
}

bool net_mmds_pending(const struct net_mmds *m)
{
	if (!m)
		return false;
	if (m->arp_pending || m->nresets)
		return true;
	for (unsigned i = 0; i < MMDS_MAX_CONNECTIONS; i++) {
		const struct conn *c = &m->c[i];

		if (c->state == C_FREE)
			continue;
		if (c->synack_pending || c->ack_pending || (c->close_pending && !c->resp))
			return true;
		if (c->state == C_OPEN && c->resp && (size_t)(c->snd_nxt - c->resp_seq) < c->resp_len &&
		    c->snd_wnd > c->snd_nxt - c->snd_una)
			return true;
	}
	return false;
}

/* ---- the device's side (net.c) ---------------------------------------------------------------------- */

/* Copies bytes [0, len) of the transmit frame to f. */
static void tx_copy(const struct net_tx *t, uint8_t *f, size_t len)
{
	size_t off = 0;

	for (unsigned i = 0; i < t->niov && off < len; i++) {
		size_t k = t->iov[i].iov_len < len - off ? t->iov[i].iov_len : len - off;

		memcpy(f + off, t->iov[i].iov_base, k);
		off += k;
	}
}

bool net_mmds_tx(struct net_mmds **m, unsigned index, const struct net_tx *t)
{
	uint8_t f[MMDS_FRAME_MAX];
	size_t len = t->len < sizeof(f) ? t->len : sizeof(f), head = len < 42 ? len : 42;
	uint32_t ip;

	if (!mmds_iface(index, &ip))
		return false;
	tx_copy(t, f, head); /* Ethernet and the ARP target or the IPv4 destination */
	if (!net_mmds_is_for(ip, f, head))
		return false;
	if (!*m && !(*m = net_mmds_new()))
		return true; /* out of memory: dropped */
	tx_copy(t, f, len);  /* once: the guest may rewrite its buffers behind us */
	net_mmds_input(*m, ip, f, t->len, t->hdr.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM);
	return true;
}

uint32_t net_mmds_rx(struct net_mmds *m, uint8_t *buf, size_t cap)
{
	size_t len = cap > NET_HDR_SIZE ? net_mmds_output(m, buf + NET_HDR_SIZE, cap - NET_HDR_SIZE) : 0;
	struct virtio_net_hdr h = {.num_buffers = 1}; /* no offloads; num_buffers rewritten with MRG_RXBUF */

	if (!len)
		return 0;
	memcpy(buf, &h, sizeof(h));
	return (uint32_t)(NET_HDR_SIZE + len);
}
