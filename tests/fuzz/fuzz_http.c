/*
 * fuzz_http.c - libFuzzer harness: the API helper's HTTP side (src/api/api_http.c, included here for its
 * static functions) on hostile client bytes: llhttp's callbacks, the header and body limits, the framing
 * checks, pipelining and keep-alive, the responses. One connection on a socketpair; no brisk: a request
 * that completes is answered here ("200 {}"), as brisk would, and the parser goes on with what follows.
 *
 * Input: its first byte picks the payload limit (1 .. 256 << 8, or API_BODY_MAX for 0); the rest is fed to
 * the connection in pieces whose sizes the following bytes give (a size byte, then that many bytes), so
 * a request split anywhere is exercised. Everything the helper writes back is read and dropped.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/api/api_http.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads and drops what the helper wrote to its client. */
static void drain_client(int fd)
{
	char buf[65536];

	while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

/* A request queued for brisk is answered as brisk would: the connection then parses what follows. */
static void answer_waiting(struct conn *c)
{
	while (!c->dead && c->state == WAITING) {
		dequeue(c);
		respond(c, 200, "{}", 2);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool once;
	int sv[2];
	struct conn *c;
	size_t off = 1;

	if (!once) {
		settings_init();
		h.timeout_ms = 1000;
		h.conn_limit = 4;
		h.claim = calloc(1, sizeof(*h.claim));
		h.msg = malloc(API_WIRE_REQ_MAX);
		once = true;
	}
	if (size < 1 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
		return 0;
	h.body_max = data[0] ? (size_t)data[0] << 8 : API_BODY_MAX;
	accept_one(sv[0]);
	c = h.conns_tail;
	while (off < size && !c->dead) {
		size_t n = data[off++], room = sizeof(c->in) - c->in_len;

		n = n > size - off ? size - off : n;
		n = n > room ? room : n;
		if (c->state == READING) {
			memcpy(c->in + c->in_len, data + off, n);
			c->in_len += n;
			parse(c);
		}
		off += n;
		answer_waiting(c);
		drain_client(sv[1]);
		if (c->state == WRITING)
			flush_out(c);
		answer_waiting(c);
		drain_client(sv[1]);
	}
	c->dead = true;
	sweep(); /* closes sv[0] */
	close(sv[1]);
	return 0;
}
