/*
 * test_mmds.c - the metadata service: the data store (merge patch, size limit), the HTTP responder (V1, V2
 * tokens, IMDS and JSON output, Firecracker's errors), and the network stack (net_mmds.c) fed raw Ethernet
 * frames as a guest's driver would send them: ARP, the TCP handshake, a GET, FIN, and hostile frames (bad
 * checksums, fragments, out-of-order data, window 0, floods, oversized requests, random bytes).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "brisk/mmds.h"
#include "brisk/net_mmds.h"

#define MMDS_IP	 0xa9fea9feu
#define GUEST_IP 0xc0a80002u

static const uint8_t guest_mac[6] = {0x02, 0, 0, 0, 0, 1};

static void put_json(const char *text)
{
	assert_int_equal(mmds_put(json_tokener_parse(text)), 0);
}

static void expect_store(const char *want)
{
	char *s = mmds_get_json();

	assert_string_equal(s, want);
	free(s);
}

static int setup(void **state)
{
	struct mmds_config c = {.set = true, .version = MMDS_V1, .ipv4 = MMDS_IP, .ifaces = 1};

	(void)state;
	mmds_reset();
	mmds_set_limit(51200);
	mmds_set_config(&c);
	return 0;
}

/* ---- the store ----------------------------------------------------------------------------------------- */

static void test_store_merge_patch(void **state)
{
	(void)state;
	expect_store("{}");
	assert_int_equal(mmds_patch(json_tokener_parse("{\"a\":1}")), -ENODATA); /* never PUT */
	put_json("{\"b\":{\"x\":\"1\",\"y\":[1,2]},\"a\":\"v/w\"}");
	expect_store("{\"a\":\"v/w\",\"b\":{\"x\":\"1\",\"y\":[1,2]}}"); /* sorted, '/' not escaped */
	/* RFC 7396 appendix A's cases: null removes, objects merge, arrays and scalars replace */
	assert_int_equal(mmds_patch(json_tokener_parse("{\"b\":{\"x\":null,\"z\":{\"q\":true}},\"a\":[3]}")), 0);
	expect_store("{\"a\":[3],\"b\":{\"y\":[1,2],\"z\":{\"q\":true}}}");
	assert_int_equal(mmds_patch(json_tokener_parse("\"scalar\"")), 0); /* a non-object patch replaces all */
	expect_store("\"scalar\"");
	assert_int_equal(mmds_patch(json_tokener_parse("{\"k\":{\"n\":null}}")), 0); /* onto a non-object: {} */
	expect_store("{\"k\":{}}");
}

static void test_store_size_limit(void **state)
{
	(void)state;
	mmds_set_limit(20);
	assert_int_equal(mmds_put(json_tokener_parse("{\"k\":\"0123456789abcdef\"}")), -EFBIG); /* 24 bytes */
	expect_store("{}");
	put_json("{\"k\":\"0123456789ab\"}"); /* 20 bytes: at the limit */
	assert_int_equal(mmds_patch(json_tokener_parse("{\"j\":1}")), -EFBIG);
	expect_store("{\"k\":\"0123456789ab\"}"); /* unchanged */
	assert_int_equal(mmds_patch(json_tokener_parse("{\"k\":null,\"j\":1}")), 0);
	expect_store("{\"j\":1}");
}

static void test_ipv4_valid(void **state)
{
	(void)state;
	assert_true(mmds_ipv4_valid(0xa9fea9fe));
	assert_true(mmds_ipv4_valid(0xa9fe0100));
	assert_false(mmds_ipv4_valid(0xa9fe0001));
	assert_false(mmds_ipv4_valid(0xa9feff01));
	assert_false(mmds_ipv4_valid(0x0a000001));
}

/* ---- HTTP ------------------------------------------------------------------------------------------------ */

static char *respond(const char *req)
{
	size_t n;
	char *r = mmds_http_respond(req, strlen(req), &n), *z;

	assert_non_null(r);
	z = malloc(n + 1);
	memcpy(z, r, n);
	z[n] = 0;
	free(r);
	return z;
}

static void expect_response(const char *req, const char *want)
{
	char *r = respond(req);

	assert_string_equal(r, want);
	free(r);
}

static void test_http_v1(void **state)
{
	(void)state;
	put_json("{\"latest\":{\"meta-data\":{\"ami-id\":\"ami-123\",\"local\":{}},\"user-data\":\"hi\"},\"n\":7}");
	expect_response("GET / HTTP/1.1\r\n\r\n",
			"HTTP/1.1 200 \r\nServer: Firecracker API\r\nConnection: keep-alive\r\n"
			"Content-Type: text/plain\r\nContent-Length: 9\r\n\r\nlatest/\nn");
	expect_response("GET //latest//meta-data/ HTTP/1.1\r\n\r\n",
			"HTTP/1.1 200 \r\nServer: Firecracker API\r\nConnection: keep-alive\r\n"
			"Content-Type: text/plain\r\nContent-Length: 13\r\n\r\nami-id\nlocal/");
	expect_response("GET http://169.254.169.254/latest/meta-data/ami-id HTTP/1.0\r\n\r\n",
			"HTTP/1.0 200 \r\nServer: Firecracker API\r\nConnection: keep-alive\r\n"
			"Content-Type: text/plain\r\nContent-Length: 7\r\n\r\nami-123");
	expect_response("GET /latest/meta-data HTTP/1.1\r\nAccept: application/json\r\n\r\n",
			"HTTP/1.1 200 \r\nServer: Firecracker API\r\nConnection: keep-alive\r\n"
			"Content-Type: application/json\r\nContent-Length: 31\r\n\r\n"
			"{\"ami-id\":\"ami-123\",\"local\":{}}");
	expect_response("GET /n HTTP/1.1\r\n\r\n",
			"HTTP/1.1 501 \r\nServer: Firecracker API\r\nConnection: keep-alive\r\n"
			"Content-Type: text/plain\r\nContent-Length: 57\r\n\r\n"
			"Cannot retrieve value. The value has an unsupported type.");
	expect_response("GET /nope HTTP/1.1\r\n\r\n",
			"HTTP/1.1 404 \r\nServer: Firecracker API\r\nConnection: keep-alive\r\n"
			"Content-Type: text/plain\r\nContent-Length: 26\r\n\r\nResource not found: /nope.");
	expect_response("PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 60\r\n\r\n",
			"HTTP/1.1 405 \r\nServer: Firecracker API\r\nConnection: keep-alive\r\n"
			"Content-Type: text/plain\r\nContent-Length: 24\r\nAllow: GET\r\n\r\nNot allowed HTTP method.");
	expect_response("BREW / HTTP/1.1\r\n\r\n",
			"HTTP/1.1 501 \r\nServer: Firecracker API\r\nConnection: keep-alive\r\n"
			"Content-Type: text/plain\r\nContent-Length: 24\r\n\r\nUnsupported HTTP method.");
	expect_response("GET x HTTP/1.1\r\n\r\n",
			"HTTP/1.1 400 \r\nServer: Firecracker API\r\nConnection: keep-alive\r\n"
			"Content-Type: text/plain\r\nContent-Length: 12\r\n\r\nInvalid URI.");
}

/* The body of response r (after the blank line). */
static const char *body_of(const char *r)
{
	const char *b = strstr(r, "\r\n\r\n");

	assert_non_null(b);
	return b + 4;
}

static void test_http_v2_tokens(void **state)
{
	struct mmds_config c = {.set = true, .version = MMDS_V2, .ipv4 = MMDS_IP, .ifaces = 1};
	char req[256], *r, token[MMDS_TOKEN_LEN + 1];

	(void)state;
	mmds_set_config(&c);
	put_json("{\"k\":\"v\"}");
	r = respond("GET /k HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(r, "HTTP/1.1 401 "));
	assert_string_equal(body_of(r), "No MMDS token provided. Use `X-metadata-token` header to specify the "
					"session token.");
	free(r);
	r = respond("PUT /latest/api/token HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(r, "HTTP/1.1 400 "));
	assert_non_null(strstr(body_of(r), "Token time to live value not found."));
	free(r);
	r = respond("PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 0\r\n\r\n");
	assert_string_equal(body_of(r), "Invalid time to live value provided for token: 0. Please provide a value "
					"between 1 and 21600.");
	free(r);
	r = respond("PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: -1\r\n\r\n");
	assert_string_equal(body_of(r), "Invalid value. Key:X-metadata-token-ttl-seconds; Value:-1");
	free(r);
	r = respond("PUT /latest/api/token HTTP/1.1\r\nX-Forwarded-For: 1.2.3.4\r\nX-metadata-token-ttl-seconds: "
		    "5\r\n\r\n");
	assert_string_equal(body_of(r), "Unsupported header name. Key: X-Forwarded-For");
	free(r);
	r = respond("PUT /latest/api/other HTTP/1.1\r\nX-metadata-token-ttl-seconds: 5\r\n\r\n");
	assert_string_equal(body_of(r), "Resource not found: /latest/api/other.");
	free(r);
	r = respond("PUT //latest/api/token/ HTTP/1.1\r\nx-METADATA-token-ttl-seconds: 21600\r\n\r\n");
	assert_non_null(strstr(r, "HTTP/1.1 200 "));
	assert_int_equal(strlen(body_of(r)), MMDS_TOKEN_LEN);
	snprintf(token, sizeof(token), "%s", body_of(r));
	free(r);
	snprintf(req, sizeof(req), "GET /k HTTP/1.1\r\nX-metadata-token: %s\r\n\r\n", token);
	r = respond(req);
	assert_non_null(strstr(r, "HTTP/1.1 200 "));
	assert_string_equal(body_of(r), "v");
	free(r);
	token[3] ^= 1;
	snprintf(req, sizeof(req), "GET /k HTTP/1.1\r\nX-metadata-token: %s\r\n\r\n", token);
	r = respond(req);
	assert_string_equal(body_of(r), "MMDS token not valid.");
	free(r);
	r = respond("PATCH /k HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(r, "HTTP/1.1 405 "));
	assert_non_null(strstr(r, "Allow: GET, PUT\r\n"));
	free(r);
	/* a token of 1 s is refused once it expired */
	r = respond("PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 1\r\n\r\n");
	snprintf(token, sizeof(token), "%s", body_of(r));
	free(r);
	snprintf(req, sizeof(req), "GET /k HTTP/1.1\r\nX-metadata-token: %s\r\n\r\n", token);
	r = respond(req);
	assert_string_equal(body_of(r), "v");
	free(r);
	usleep(1100 * 1000);
	r = respond(req);
	assert_string_equal(body_of(r), "MMDS token not valid.");
	free(r);
	/* a flood of token requests: the table keeps MMDS_TOKENS_MAX, the one expiring first goes */
	r = respond("PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 100\r\n\r\n");
	snprintf(token, sizeof(token), "%s", body_of(r));
	free(r);
	for (unsigned i = 0; i < MMDS_TOKENS_MAX; i++)
		free(respond("PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 200\r\n\r\n"));
	snprintf(req, sizeof(req), "GET /k HTTP/1.1\r\nX-metadata-token: %s\r\n\r\n", token);
	r = respond(req);
	assert_string_equal(body_of(r), "MMDS token not valid.");
	free(r);
}

static void test_http_imds_compat(void **state)
{
	struct mmds_config c = {.set = true, .version = MMDS_V1, .ipv4 = MMDS_IP, .ifaces = 1, .imds_compat = true};
	char *r;

	(void)state;
	mmds_set_config(&c);
	put_json("{\"a\":{\"b\":\"c\"}}");
	r = respond("GET /a HTTP/1.1\r\nAccept: application/json\r\n\r\n");
	assert_string_equal(body_of(r), "b");
	free(r);
}

/* ---- the network stack ------------------------------------------------------------------------------ */

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

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint16_t csum(uint32_t sum, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += rd16(p + i);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static size_t arp_request(uint8_t *f, uint32_t tpa)
{
	memset(f, 0xff, 6);
	memcpy(f + 6, guest_mac, 6);
	wr16(f + 12, 0x0806);
	wr16(f + 14, 1);
	wr16(f + 16, 0x0800);
	f[18] = 6;
	f[19] = 4;
	wr16(f + 20, 1);
	memcpy(f + 22, guest_mac, 6);
	wr32(f + 28, GUEST_IP);
	memset(f + 32, 0, 6);
	wr32(f + 38, tpa);
	return 42;
}

/* A TCP segment from the guest (port sport) to the MMDS port 80, checksums right. */
static size_t tcp_seg(uint8_t *f, uint16_t sport, uint32_t seq, uint32_t ack, uint8_t flags, uint16_t wnd,
		      const void *data, size_t n)
{
	uint8_t *ip = f + 14, *t = ip + 20, ph[12];
	uint32_t sum = 0;

	memset(f, 0, 54);
	memset(f, 0x06, 6);
	memcpy(f + 6, guest_mac, 6);
	wr16(f + 12, 0x0800);
	ip[0] = 0x45;
	wr16(ip + 2, (uint32_t)(40 + n));
	ip[8] = 64;
	ip[9] = 6;
	wr32(ip + 12, GUEST_IP);
	wr32(ip + 16, MMDS_IP);
	wr16(ip + 10, csum(0, ip, 20));
	wr16(t, sport);
	wr16(t + 2, 80);
	wr32(t + 4, seq);
	wr32(t + 8, ack);
	t[12] = 5 << 4;
	t[13] = flags;
	wr16(t + 14, wnd);
	if (n)
		memcpy(t + 20, data, n);
	wr32(ph, GUEST_IP);
	wr32(ph + 4, MMDS_IP);
	ph[8] = 0;
	ph[9] = 6;
	wr16(ph + 10, (uint32_t)(20 + n));
	for (size_t i = 0; i < 12; i += 2)
		sum += rd16(ph + i);
	wr16(t + 16, csum(sum, t, 20 + n));
	return 54 + n;
}

struct client {
	struct net_mmds *m;
	uint16_t port;
	uint32_t seq, ack;
	char got[8192];
	size_t got_len;
	bool fin;
};

static void feed(struct net_mmds *m, const uint8_t *f, size_t len)
{
	assert_true(net_mmds_is_for(MMDS_IP, f, len));
	net_mmds_input(m, MMDS_IP, f, len, false);
}

/* Takes every frame the stack has for the guest; data in order appended to c->got. Returns the frames. */
static unsigned drain(struct client *c, uint8_t *flags_seen)
{
	uint8_t b[2048];
	size_t len;
	unsigned frames = 0;

	*flags_seen = 0;
	while ((len = net_mmds_output(c->m, b, sizeof(b)))) {
		const uint8_t *ip = b + 14, *t = ip + 20;
		size_t hl = (size_t)(t[12] >> 4) * 4, n = rd16(ip + 2) - 20 - hl;

		frames++;
		assert_true(frames < 10000);
		assert_int_equal(rd16(b + 12), 0x0800);
		assert_int_equal(csum(0, ip, 20), 0);
		*flags_seen |= t[13];
		if (rd16(t + 2) != c->port)
			continue;
		if (t[13] & 0x02) /* SYN/ACK */
			c->ack = rd32(t + 4) + 1;
		else if (rd32(t + 4) == c->ack && n) {
			memcpy(c->got + c->got_len, t + hl, n);
			c->got_len += n;
			c->ack += (uint32_t)n;
		}
		if (t[13] & 0x01) {
			c->fin = true;
			c->ack++;
		}
	}
	return frames;
}

static void connect_client(struct client *c, uint16_t port)
{
	uint8_t f[2048], fl;

	c->port = port;
	c->seq = 1000;
	feed(c->m, f, tcp_seg(f, port, c->seq++, 0, 0x02, 65535, NULL, 0));
	assert_int_equal(drain(c, &fl), 1);
	assert_int_equal(fl, 0x12); /* SYN|ACK */
	feed(c->m, f, tcp_seg(f, port, c->seq, c->ack, 0x10, 65535, NULL, 0));
}

/* Sends `req`, ACKs what comes back until nothing does; returns the response bytes in c->got. */
static void request(struct client *c, const char *req, uint16_t wnd)
{
	uint8_t f[2048], fl;

	feed(c->m, f, tcp_seg(f, c->port, c->seq, c->ack, 0x18, wnd, req, strlen(req)));
	c->seq += (uint32_t)strlen(req);
	while (drain(c, &fl))
		feed(c->m, f, tcp_seg(f, c->port, c->seq, c->ack, 0x10, wnd, NULL, 0));
}

static void test_arp(void **state)
{
	struct net_mmds *m = net_mmds_new();
	uint8_t f[64], b[2048];
	size_t len;

	(void)state;
	assert_false(net_mmds_is_for(MMDS_IP, f, arp_request(f, 0x0a000001))); /* another address: not ours */
	feed(m, f, arp_request(f, MMDS_IP));
	len = net_mmds_output(m, b, sizeof(b));
	assert_int_equal(len, 42);
	assert_memory_equal(b, guest_mac, 6);
	assert_int_equal(rd16(b + 20), 2); /* a reply */
	assert_memory_equal(b + 22, "\x06\x01\x23\x45\x67\x01", 6);
	assert_int_equal(rd32(b + 28), MMDS_IP);
	assert_int_equal(rd32(b + 38), GUEST_IP);
	assert_int_equal(net_mmds_output(m, b, sizeof(b)), 0);
	net_mmds_free(m);
}

static void test_tcp_get_v1(void **state)
{
	struct client c = {.m = net_mmds_new()};
	uint8_t f[2048], fl;
	char big[4000];

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	{
		char doc[4100];

		snprintf(doc, sizeof(doc), "{\"big\":\"%s\",\"k\":\"v\"}", big);
		put_json(doc);
	}
	connect_client(&c, 40000);
	request(&c, "GET /k HTTP/1.1\r\nHost: x\r\n\r\n", 65535);
	c.got[c.got_len] = 0;
	assert_string_equal(c.got, "HTTP/1.1 200 \r\nServer: Firecracker API\r\nConnection: keep-alive\r\n"
				   "Content-Type: text/plain\r\nContent-Length: 1\r\n\r\nv");
	/* keep-alive: a second request on the same connection, a response of several segments */
	c.got_len = 0;
	request(&c, "GET /big HTTP/1.1\r\n\r\n", 65535);
	c.got[c.got_len] = 0;
	assert_string_equal(body_of(c.got), big);
	/* the guest closes: ACK and our FIN; its ACK of our FIN ends the connection */
	feed(c.m, f, tcp_seg(f, c.port, c.seq++, c.ack, 0x11, 65535, NULL, 0));
	drain(&c, &fl);
	assert_true(c.fin);
	feed(c.m, f, tcp_seg(f, c.port, c.seq, c.ack, 0x10, 65535, NULL, 0));
	assert_false(net_mmds_pending(c.m));
	/* the connection is gone: a segment on it gets a RST */
	feed(c.m, f, tcp_seg(f, c.port, c.seq, c.ack, 0x10, 65535, NULL, 0));
	drain(&c, &fl);
	assert_true(fl & 0x04);
	assert_int_equal(net_mmds_stats(c.m)->requests, 2);
	net_mmds_free(c.m);
}

static void test_tcp_token_flow_v2(void **state)
{
	struct mmds_config cfg = {.set = true, .version = MMDS_V2, .ipv4 = MMDS_IP, .ifaces = 1};
	struct client c = {.m = net_mmds_new()};
	char req[256], token[MMDS_TOKEN_LEN + 1];

	(void)state;
	mmds_set_config(&cfg);
	put_json("{\"latest\":{\"meta-data\":{\"id\":\"i-1\"}}}");
	connect_client(&c, 40001);
	request(&c, "PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 60\r\n\r\n", 65535);
	c.got[c.got_len] = 0;
	assert_non_null(strstr(c.got, "HTTP/1.1 200 "));
	snprintf(token, sizeof(token), "%s", body_of(c.got));
	c.got_len = 0;
	snprintf(req, sizeof(req), "GET /latest/meta-data/id HTTP/1.1\r\nX-metadata-token: %s\r\n\r\n", token);
	request(&c, req, 65535);
	c.got[c.got_len] = 0;
	assert_string_equal(body_of(c.got), "i-1");
	net_mmds_free(c.m);
}

/* docs/security.md case 52: bad checksums, fragments, non-TCP, runts: dropped and counted, nothing sent. */
static void test_hostile_headers(void **state)
{
	struct net_mmds *m = net_mmds_new();
	const struct net_mmds_stats *st = net_mmds_stats(m);
	uint8_t f[2048], b[2048];
	size_t len;

	(void)state;
	len = tcp_seg(f, 1234, 1, 0, 0x02, 65535, NULL, 0);
	f[14 + 20 + 16] ^= 0xff; /* TCP checksum */
	feed(m, f, len);
	len = tcp_seg(f, 1234, 1, 0, 0x02, 65535, NULL, 0);
	f[14 + 10] ^= 0xff; /* IPv4 header checksum */
	feed(m, f, len);
	assert_int_equal(st->bad, 2);
	len = tcp_seg(f, 1234, 1, 0, 0x02, 65535, NULL, 0);
	wr16(f + 14 + 6, 0x2000); /* MF */
	wr16(f + 14 + 10, 0);
	wr16(f + 14 + 10, csum(0, f + 14, 20));
	feed(m, f, len);
	assert_int_equal(st->fragments, 1);
	len = tcp_seg(f, 1234, 1, 0, 0x02, 65535, NULL, 0);
	f[14 + 9] = 17; /* UDP */
	wr16(f + 14 + 10, 0);
	wr16(f + 14 + 10, csum(0, f + 14, 20));
	feed(m, f, len);
	assert_int_equal(st->not_tcp, 1);
	len = tcp_seg(f, 1234, 1, 0, 0x02, 65535, NULL, 0);
	wr16(f + 14 + 2, 2000); /* total length past the frame */
	feed(m, f, len);
	net_mmds_input(m, MMDS_IP, f, 3000, false); /* over the frame limit: not even looked at */
	assert_int_equal(st->bad, 4);
	assert_int_equal(net_mmds_output(m, b, sizeof(b)), 0);
	/* a NEEDS_CSUM frame (checksum left to the device) is taken without its TCP checksum */
	len = tcp_seg(f, 1234, 1, 0, 0x02, 65535, NULL, 0);
	f[14 + 20 + 16] ^= 0xff;
	net_mmds_input(m, MMDS_IP, f, len, true);
	assert_true(net_mmds_output(m, b, sizeof(b)) > 0);
	net_mmds_free(m);
}

/* Out-of-order data is not taken (ACKed at rcv_nxt); window 0 holds the response until the window opens. */
static void test_out_of_order_and_zero_window(void **state)
{
	struct client c = {.m = net_mmds_new()};
	const char *req = "GET /k HTTP/1.1\r\n\r\n";
	uint8_t f[2048], b[2048], fl;

	(void)state;
	put_json("{\"k\":\"v\"}");
	connect_client(&c, 40002);
	feed(c.m, f, tcp_seg(f, c.port, c.seq + 5, c.ack, 0x18, 65535, req + 5, strlen(req) - 5));
	assert_int_equal(net_mmds_stats(c.m)->out_of_order, 1);
	assert_int_equal(drain(&c, &fl), 1); /* a duplicate ACK, no data */
	assert_int_equal(c.got_len, 0);
	feed(c.m, f, tcp_seg(f, c.port, c.seq, c.ack, 0x18, 0, req, strlen(req))); /* in order, window 0 */
	c.seq += (uint32_t)strlen(req);
	drain(&c, &fl);
	assert_int_equal(c.got_len, 0); /* only an ACK: nothing may be sent into a closed window */
	assert_false(net_mmds_pending(c.m));
	feed(c.m, f, tcp_seg(f, c.port, c.seq, c.ack, 0x10, 100, NULL, 0)); /* opens to 100 bytes */
	drain(&c, &fl);
	assert_int_equal(c.got_len, 100);
	feed(c.m, f, tcp_seg(f, c.port, c.seq, c.ack, 0x10, 65535, NULL, 0));
	while (drain(&c, &fl))
		feed(c.m, f, tcp_seg(f, c.port, c.seq, c.ack, 0x10, 65535, NULL, 0));
	c.got[c.got_len] = 0;
	assert_string_equal(body_of(c.got), "v");
	assert_int_equal(net_mmds_output(c.m, b, sizeof(b)), 0);
	net_mmds_free(c.m);
}

/* docs/security.md case 53: a request that fills the 2500-byte buffer without its end resets the connection. */
static void test_oversized_request(void **state)
{
	struct client c = {.m = net_mmds_new()};
	char chunk[1001];
	uint8_t f[2048], fl;

	(void)state;
	memset(chunk, 'a', 1000);
	chunk[1000] = 0;
	connect_client(&c, 40003);
	for (int i = 0; i < 3; i++) {
		size_t n = i == 2 ? 500 : 1000;

		feed(c.m, f, tcp_seg(f, c.port, c.seq, c.ack, 0x18, 65535, chunk, n));
		c.seq += (uint32_t)n;
	}
	assert_int_equal(net_mmds_stats(c.m)->oversized, 1);
	drain(&c, &fl);
	assert_true(fl & 0x04);
	net_mmds_free(c.m);
}

/* docs/security.md case 54: a SYN flood fills 30 connections; the 31st gets a RST; resets are bounded too. */
static void test_syn_flood(void **state)
{
	struct net_mmds *m = net_mmds_new();
	const struct net_mmds_stats *st = net_mmds_stats(m);
	uint8_t f[2048], b[2048];

	(void)state;
	for (unsigned i = 0; i < MMDS_MAX_CONNECTIONS + 200; i++)
		feed(m, f, tcp_seg(f, (uint16_t)(10000 + i), 1, 0, 0x02, 65535, NULL, 0));
	assert_int_equal(st->refused, 200);
	assert_int_equal(st->resets_dropped, 200 - MMDS_MAX_RESETS);
	for (unsigned i = 0; i < 100000 && net_mmds_output(m, b, sizeof(b)); i++)
		;
	assert_int_equal(st->frames_out, MMDS_MAX_RESETS + MMDS_MAX_CONNECTIONS);
	net_mmds_free(m);
}

/* Random and mutated frames (fuzz-style): never a crash or a read out of bounds (this binary runs with ASan). */
static void test_random_frames(void **state)
{
	struct net_mmds *m = net_mmds_new();
	uint8_t f[2048], b[2048];
	uint32_t x = 12345;

	(void)state;
	put_json("{\"k\":\"v\"}");
	for (unsigned i = 0; i < 20000; i++) {
		size_t len = tcp_seg(f, (uint16_t)(x % 64), x % 7, x % 5, (uint8_t)x, (uint16_t)(x >> 8),
				     "GET / HTTP/1.1\r\n\r\n", x % 20);

		for (unsigned k = 0; k < 4; k++) {
			x = x * 1103515245u + 12345u;
			f[14 + (x >> 8) % (len - 14)] = (uint8_t)(x >> 16);
		}
		x = x * 1103515245u + 12345u;
		if (x % 4 == 0) { /* valid checksums after the mutation */
			wr16(f + 14 + 10, 0);
			wr16(f + 14 + 10, csum(0, f + 14, 20));
		}
		len = x % 3 == 0 ? (x >> 4) % len : len;
		if (net_mmds_is_for(MMDS_IP, f, len))
			net_mmds_input(m, MMDS_IP, f, len, x % 5 == 0);
		for (unsigned k = 0; k < 3 && net_mmds_output(m, b, sizeof(b)); k++)
			;
	}
	net_mmds_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_store_merge_patch, setup),
	    cmocka_unit_test_setup(test_store_size_limit, setup),
	    cmocka_unit_test_setup(test_ipv4_valid, setup),
	    cmocka_unit_test_setup(test_http_v1, setup),
	    cmocka_unit_test_setup(test_http_v2_tokens, setup),
	    cmocka_unit_test_setup(test_http_imds_compat, setup),
	    cmocka_unit_test_setup(test_arp, setup),
	    cmocka_unit_test_setup(test_tcp_get_v1, setup),
	    cmocka_unit_test_setup(test_tcp_token_flow_v2, setup),
	    cmocka_unit_test_setup(test_hostile_headers, setup),
	    cmocka_unit_test_setup(test_out_of_order_and_zero_window, setup),
	    cmocka_unit_test_setup(test_oversized_request, setup),
	    cmocka_unit_test_setup(test_syn_flood, setup),
	    cmocka_unit_test_setup(test_random_frames, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
