/*
 * api_http.c - the HTTP/1.1 server of brisk's Firecracker-compatible API (api_http.h): llhttp parses, this
 * file owns the sockets. It runs in the "brisk-api" process that api_link_start forks from brisk, with the
 * listening Unix socket brisk created and the SOCK_SEQPACKET link to brisk beside it (api_link.h).
 *
 * Why llhttp (docs/api.md "Why a helper process serves HTTP"): Node.js's HTTP parser, maintained, strict by
 * default (one Content-Length, never with Transfer-Encoding, no control bytes in the request line), a pure
 * parser with no I/O and no dependencies, compiled into brisk from Debian's sources (node-llhttp), so the
 * static brisk carries it and needs no other file.
 *
 * One thread, one poll(2) loop over the listening socket, the link and every connection: no connection ever
 * blocks another. A request that is complete is queued and its connection not read any further until it is
 * answered (brisk sees a request only when all of it has arrived); the loop sends one request at a time to
 * brisk (Firecracker's API thread also serves one at a time), takes its reply in fragments, and enforces the
 * deadlines: a request not taken by brisk within the reply timeout of its arrival is answered 503 and never
 * carried out (the claim word, api_link.h); a connection whose request has not arrived whole within
 * REQUEST_DEADLINE_S is closed.
 *
 * Fairness against slow and hostile clients (docs/api.md, docs/security.md): up to CONN_LIMIT connections at
 * once; each must deliver a whole request (headers and body) within REQUEST_DEADLINE_S of its start (the
 * connection's accept, or the end of its previous response), a total deadline that trickling bytes do not
 * extend, and take each response within as long; when every slot is taken, a new connection evicts the
 * incomplete one whose deadline is nearest (never one whose request is with brisk). Request line and headers
 * within HEADER_MEM bytes (431), bodies within the payload limit. Errors are answered as Firecracker's
 * micro_http does, 400 with {"fault_message": ...}: a payload over the limit (at once, the body unread, the
 * connection closed), an unsupported method, an ambiguous length (two Content-Length or Transfer-Encoding
 * headers, or one of each), a NUL byte in the request line, and whatever else llhttp refuses (its reason in
 * the message). It exits when brisk closes its end of the link (after delivering what it holds, at most
 * DRAIN_MS), or at once when brisk dies (PR_SET_PDEATHSIG). It writes to stderr only on errors, rate-limited.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <llhttp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "brisk/api_http.h"
#include "brisk/api_link.h"
#include "brisk/log.h" /* log_ratelimit */
#include "brisk/seccomp.h"

#define CONN_LIMIT	   1024	       /* connections at once (fewer when RLIMIT_NOFILE cannot be raised for them) */
#define FD_RESERVE	   16	       /* descriptors kept beside the connections: stdio, the sockets */
#define REQUEST_DEADLINE_S 10	       /* a whole request, or the taking of a response, within this */
#define LINGER_MS	   1000	       /* a connection answered with "close" is read and dropped this long at most */
#define HEADER_MEM	   (16 * 1024) /* request line and headers */
#define READ_CHUNK	   8192	       /* bytes read from a connection at a time */
#define URL_MAX		   (API_PATH_MAX + 256) /* the request target as sent: an absolute form's host too */
#define FIELD_MAX	   32			/* a header name's bytes kept: the ones we look at are shorter */
#define DRAIN_MS	   1000
#define FAULT_MAX	   512
#define CLAIM_SIZE	   4096
#define ACCEPT_BURST	   64 /* connections accepted per turn of the loop */
#define STR_(x)		   #x
#define STR(x)		   STR_(x)

enum conn_state {
	READING,  /* a request arriving (or none yet) */
	WAITING,  /* complete: queued for brisk or with brisk; not read meanwhile */
	WRITING,  /* a response going out */
	DRAINING, /* answered with "close" and shut for writing: what the client still sends is read and dropped */
};

/* One client connection, in h.conns (oldest first) while it is open. */
struct conn {
	int fd;
	enum conn_state state;
	bool dead;	     /* closed at the end of this turn of the loop */
	int64_t deadline_ms; /* the request, or the taking of its response, by then; 0: none (with brisk) */
	llhttp_t parser;
	char in[READ_CHUNK]; /* read and not yet parsed (what follows a complete request, pipelined) */
	size_t in_len;
	/* the request being parsed */
	size_t head_bytes; /* request line and headers so far */
	bool line_done;	   /* the request line is parsed */
	bool headers_done;
	char url[URL_MAX];
	size_t url_len;
	bool url_long;
	char field[FIELD_MAX + 1];
	size_t field_len;
	enum { H_OTHER, H_CL, H_TE, H_EXPECT } field_kind;
	unsigned n_cl, n_te;
	char expect[FIELD_MAX + 1];
	size_t expect_len;
	char *body;
	size_t body_len, body_cap;
	const char *reject; /* answered 400 with this once the request is in (its body dropped) */
	char reject_text[FAULT_MAX];
	char early[FAULT_MAX];
	unsigned early_status; /* answered at once, the rest unread, then closed: early[] is the text */
	bool complete;
	bool keep_alive;
	/* with brisk */
	enum api_method method;
	char path[API_PATH_MAX];
	size_t path_len;
	uint32_t id;
	int64_t req_deadline_ms; /* taken by brisk by then, or answered 503 */
	struct conn *qnext;	 /* in the queue to brisk */
	/* the response */
	char *out;
	size_t out_len, out_off;
	bool close_after;
	struct conn *prev, *next;
};

static struct {
	int fd;		    /* the link to brisk */
	int lfd;	    /* the listening socket; -1 once brisk has gone */
	uint64_t *claim;    /* the claim word (api_link.h) */
	int64_t timeout_ms; /* a request's deadline after its arrival */
	size_t body_max;
	bool verbose, serving, brisk_gone;
	struct conn *head, *tail; /* complete requests, in arrival order */
	struct conn *inflight;
	bool taken; /* brisk took h.inflight: no deadline, its answer will come */
	struct {    /* brisk's reply to h.inflight, as its fragments arrive */
		char *buf;
		size_t len, got;
		unsigned status;
	} rep;
	uint32_t next_id;
	struct conn *conns, *conns_tail;
	unsigned nconns, conn_limit;
	uint64_t evicted, late, expired, link_errors, errors;
	unsigned char *msg; /* one request message, API_WIRE_REQ_MAX bytes */
	llhttp_settings_t settings;
} h = {.fd = -1, .lfd = -1};

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void msg(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n = n > (int)sizeof(line) - 2 ? (int)sizeof(line) - 2 : n;
	line[n++] = '\n';
	if (write(STDERR_FILENO, "brisk-api: ", 11) < 0 || write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

/* A link error (brisk's side of things), counted in *n and written rate-limited. */
#define link_msg(n, fmt, ...)                                                                                          \
	do {                                                                                                           \
		if (log_ratelimit((n)++))                                                                              \
			msg(fmt " (%" PRIu64 " so far)", __VA_ARGS__, (n));                                            \
	} while (0)

/* A client's doing (evicted, too slow, malformed): only with verbose, and rate-limited. */
#define client_msg(n, fmt, ...)                                                                                        \
	do {                                                                                                           \
		if (log_ratelimit((n)++) && h.verbose)                                                                 \
			msg(fmt " (%" PRIu64 " so far)", __VA_ARGS__, (n));                                            \
	} while (0)

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- responses ---------------------------------------------------------------------------------------- */

static const char *reason(unsigned status)
{
	static const struct {
		unsigned status;
		const char *text;
	} t[] = {{100, "Continue"},
		 {200, "OK"},
		 {201, "Created"},
		 {202, "Accepted"},
		 {204, "No Content"},
		 {400, "Bad Request"},
		 {401, "Unauthorized"},
		 {403, "Forbidden"},
		 {404, "Not Found"},
		 {405, "Method Not Allowed"},
		 {408, "Request Timeout"},
		 {409, "Conflict"},
		 {413, "Payload Too Large"},
		 {414, "URI Too Long"},
		 {415, "Unsupported Media Type"},
		 {431, "Request Header Fields Too Large"},
		 {500, "Internal Server Error"},
		 {501, "Not Implemented"},
		 {502, "Bad Gateway"},
		 {503, "Service Unavailable"},
		 {504, "Gateway Timeout"}};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].status == status)
			return t[i].text;
	return status < 300 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
}

/* {"fault_message": "<text>"}, the text JSON-escaped. Returns the length. */
static size_t fault_json(char *out, size_t cap, const char *text)
{
	size_t n = (size_t)snprintf(out, cap, "{\"fault_message\": \"");

	for (const char *s = text; *s && n + 8 < cap; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			n += (size_t)snprintf(out + n, cap - n, "\\%c", c);
		else if (c < 0x20)
			n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
		else
			out[n++] = (char)c;
	}
	n += (size_t)snprintf(out + n, cap - n, "\"}");
	return n < cap ? n : cap - 1;
}

static void close_conn(struct conn *c);
static void arm(struct conn *c, bool on);

/* Writes what c->out still holds without blocking; a response written whole ends the exchange. */
static void flush_out(struct conn *c);

/*
 * Gives c its response: status line, headers (a body is application/json; 1xx, 204 and 304 carry no length)
 * and body. The connection is written from now on, with REQUEST_DEADLINE_S to take it.
 */
static void respond(struct conn *c, unsigned status, const char *body, size_t len)
{
	bool no_length = status < 200 || status == 204 || status == 304;
	char head[256];
	int n;

	if (no_length)
		len = 0;
	n = snprintf(head, sizeof(head), "HTTP/1.1 %u %s\r\nServer: Firecracker API\r\nConnection: %s\r\n%s", status,
		     reason(status), c->close_after ? "close" : "keep-alive",
		     len ? "Content-Type: application/json\r\n" : "");
	if (!no_length)
		n += snprintf(head + n, sizeof(head) - (size_t)n, "Content-Length: %zu\r\n", len);
	n += snprintf(head + n, sizeof(head) - (size_t)n, "\r\n");
	free(c->out);
	c->out = malloc((size_t)n + len);
	if (!c->out) {
		c->dead = true;
		return;
	}
	memcpy(c->out, head, (size_t)n);
	if (len)
		memcpy(c->out + n, body, len);
	c->out_len = (size_t)n + len;
	c->out_off = 0;
	c->state = WRITING;
	arm(c, true);
	flush_out(c);
}

static void respond_fault(struct conn *c, unsigned status, const char *text)
{
	char body[FAULT_MAX * 2];

	respond(c, status, body, fault_json(body, sizeof(body), text));
}

/* ---- connections and their deadlines ------------------------------------------------------------------ */

/* Sets c's deadline REQUEST_DEADLINE_S from now (0 for none). */
static void arm(struct conn *c, bool on)
{
	c->deadline_ms = on ? now_ms() + REQUEST_DEADLINE_S * 1000 : 0;
}

/* Every slot is taken: evicts the incomplete connection (not `keep`) whose deadline is nearest. Returns
 * false when there is none (every other one waits for brisk). */
static bool evict_one(const struct conn *keep)
{
	struct conn *victim = NULL;

	for (struct conn *c = h.conns; c; c = c->next)
		if (c != keep && !c->dead && c->deadline_ms && (!victim || c->deadline_ms < victim->deadline_ms))
			victim = c;
	if (!victim)
		return false;
	client_msg(h.evicted, "%u connections: evicted the one whose request was furthest from complete", h.nconns);
	victim->dead = true;
	return true;
}

/* Closes the connections past their deadline; returns the ms until the next one's (-1: none). */
static int64_t conn_deadlines(int64_t now)
{
	int64_t next = -1;

	for (struct conn *c = h.conns; c; c = c->next) {
		if (!c->deadline_ms || c->dead)
			continue;
		if (c->deadline_ms <= now) {
			if (c->state != DRAINING)
				client_msg(h.late, "closed a connection whose request did not arrive whole in %d s",
					   REQUEST_DEADLINE_S);
			c->dead = true;
		} else if (next < 0 || c->deadline_ms - now < next) {
			next = c->deadline_ms - now;
		}
	}
	return next;
}

/* A new request on c: the parser's per-request state is cleared. */
static void request_reset(struct conn *c)
{
	free(c->body);
	c->body = NULL;
	c->body_len = c->body_cap = 0;
	c->head_bytes = c->url_len = c->field_len = c->expect_len = 0;
	c->line_done = c->headers_done = c->url_long = c->complete = false;
	c->field_kind = H_OTHER;
	c->n_cl = c->n_te = 0;
	c->reject = NULL;
	c->early_status = 0;
}

static void accept_one(int fd)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->state = READING;
	llhttp_init(&c->parser, HTTP_REQUEST, &h.settings);
	c->parser.data = c;
	c->prev = h.conns_tail;
	*(h.conns_tail ? &h.conns_tail->next : &h.conns) = c;
	h.conns_tail = c;
	h.nconns++;
	arm(c, true);
	if (h.nconns > h.conn_limit && !evict_one(c))
		c->dead = true; /* every other one is with brisk: this one waits in no queue */
}

/* Accepts what the listening socket holds (a burst at most: the other descriptors get their turn). */
static void accept_all(void)
{
	for (int i = 0; i < ACCEPT_BURST && h.lfd >= 0; i++) {
		int fd = accept4(h.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
				link_msg(h.errors, "accept on the API socket: %s", strerror(errno));
			return;
		}
		accept_one(fd);
	}
}

/* ---- the queue to brisk ------------------------------------------------------------------------------- */

#define NOT_TAKEN "The VMM did not take the request in time; it was not carried out."

static void reply_reset(void)
{
	free(h.rep.buf);
	h.rep.buf = NULL;
	h.rep.len = h.rep.got = 0;
}

/* h.inflight is done with (answered by brisk, expired or failed): the next one may go. */
static void inflight_done(void)
{
	h.inflight = NULL;
	h.taken = false;
	reply_reset();
}

/* Sends queued requests until one is with brisk or the queue is empty; expired ones are answered 503. */
static void send_next(void)
{
	struct conn *c;
	long n;

	if (!h.serving) /* nothing reaches brisk before "OK": brisk reads its first message as the start-up answer */
		return;
	while (!h.inflight && (c = h.head)) {
		h.head = c->qnext;
		if (!h.head)
			h.tail = NULL;
		c->qnext = NULL;
		if (h.brisk_gone) {
			respond_fault(c, 503, "The VMM is not running.");
			continue;
		}
		if (now_ms() >= c->req_deadline_ms) {
			h.expired++;
			respond_fault(c, 503, NOT_TAKEN);
			continue;
		}
		c->id = ++h.next_id;
		n = api_wire_encode_request(h.msg, API_WIRE_REQ_MAX, c->id, c->method, c->path, c->path_len, c->body,
					    c->body_len);
		__atomic_store_n(h.claim, API_CLAIM(c->id, API_CLAIM_SENT), __ATOMIC_SEQ_CST);
		if (n >= 0 && send(h.fd, h.msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
			n = -errno;
		if (n < 0) {
			__atomic_store_n(h.claim, API_CLAIM(c->id, API_CLAIM_EXPIRED), __ATOMIC_SEQ_CST);
			link_msg(h.link_errors, "sending a request to brisk: %s", strerror((int)-n));
			respond_fault(c, 503, "The request could not be passed to the VMM.");
			continue;
		}
		h.inflight = c;
		h.taken = false;
	}
}

static void enqueue(struct conn *c)
{
	c->state = WAITING;
	c->req_deadline_ms = now_ms() + h.timeout_ms;
	arm(c, false); /* the request's own deadline applies now */
	if (h.tail)
		h.tail->qnext = c;
	else
		h.head = c;
	h.tail = c;
	send_next();
}

/* Takes c out of the queue (a connection closed while it waits: only when the helper ends). */
static void dequeue(struct conn *c)
{
	struct conn **p = &h.head, *prev = NULL;

	if (h.inflight == c)
		inflight_done(); /* brisk's late reply no longer matches an id */
	while (*p && *p != c) {
		prev = *p;
		p = &(*p)->qnext;
	}
	if (*p) {
		*p = c->qnext;
		if (h.tail == c)
			h.tail = prev;
	}
}

/*
 * The requests' deadlines: h.inflight, if brisk has not taken it (the claim word decides), and the queued
 * ones (in arrival order, so the head's is the nearest), each answered 503 when it passes. Returns the ms
 * until the next one (-1: none).
 */
static int64_t request_deadlines(int64_t now)
{
	int64_t next = -1;

	if (h.inflight && !h.taken && now >= h.inflight->req_deadline_ms) {
		if (api_claim_swap(h.claim, h.inflight->id, API_CLAIM_SENT, API_CLAIM_EXPIRED)) {
			struct conn *c = h.inflight;

			h.expired++;
			inflight_done();
			respond_fault(c, 503, NOT_TAKEN);
		} else {
			h.taken = true; /* brisk is carrying it out: its answer is the only true one */
		}
	}
	while (h.head && now >= h.head->req_deadline_ms) {
		struct conn *c = h.head;

		h.head = c->qnext;
		if (!h.head)
			h.tail = NULL;
		c->qnext = NULL;
		h.expired++;
		respond_fault(c, 503, NOT_TAKEN);
	}
	send_next();
	if (h.inflight && !h.taken)
		next = h.inflight->req_deadline_ms - now;
	if (h.head && (next < 0 || h.head->req_deadline_ms - now < next))
		next = h.head->req_deadline_ms - now;
	return next < 0 ? -1 : next;
}

/* ---- llhttp's callbacks (one connection's request) ---------------------------------------------------- */

static struct conn *conn_of(llhttp_t *p)
{
	return p->data;
}

/* Request line and headers are bounded: past HEADER_MEM the request is answered 431 at once. */
static int count_head(struct conn *c, size_t len)
{
	c->head_bytes += len;
	if (c->head_bytes <= HEADER_MEM)
		return 0;
	c->early_status = 431;
	snprintf(c->early, sizeof(c->early), "Request line and headers are larger than the limit of %d bytes.",
		 HEADER_MEM);
	return -1;
}

static int on_message_begin(llhttp_t *p)
{
	request_reset(conn_of(p));
	return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
	struct conn *c = conn_of(p);

	if (c->url_len + len > sizeof(c->url) - 1)
		c->url_long = true;
	else
		memcpy(c->url + c->url_len, at, len), c->url_len += len;
	return count_head(c, len);
}

static int on_data_counted(llhttp_t *p, const char *at, size_t len)
{
	(void)at;
	return count_head(conn_of(p), len);
}

static int on_version_complete(llhttp_t *p)
{
	conn_of(p)->line_done = true;
	return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct conn *c = conn_of(p);
	size_t n = c->field_len + len > FIELD_MAX ? FIELD_MAX - c->field_len : len;

	memcpy(c->field + c->field_len, at, n);
	c->field_len += n;
	return count_head(c, len);
}

/* The framing headers are counted here, before llhttp parses their values: the second one is refused. */
static int on_header_field_complete(llhttp_t *p)
{
	struct conn *c = conn_of(p);

	c->field[c->field_len] = '\0';
	c->field_kind = strcasecmp(c->field, "Content-Length") == 0	 ? H_CL
			: strcasecmp(c->field, "Transfer-Encoding") == 0 ? H_TE
			: strcasecmp(c->field, "Expect") == 0		 ? H_EXPECT
									 : H_OTHER;
	c->n_cl += c->field_kind == H_CL;
	c->n_te += c->field_kind == H_TE;
	c->field_len = 0;
	if (c->n_cl > 1 || c->n_te > 1 || (c->n_cl && c->n_te))
		return -1; /* reported as ambiguous (parse_error) */
	return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
	struct conn *c = conn_of(p);

	if (c->field_kind == H_EXPECT) {
		size_t n = c->expect_len + len > FIELD_MAX ? FIELD_MAX - c->expect_len : len;

		memcpy(c->expect + c->expect_len, at, n);
		c->expect_len += n;
	}
	return count_head(c, len);
}

static bool method_of(uint8_t m, enum api_method *out)
{
	switch (m) {
	case HTTP_GET:
		*out = API_GET;
		return true;
	case HTTP_PUT:
		*out = API_PUT;
		return true;
	case HTTP_PATCH:
		*out = API_PATCH;
		return true;
	case HTTP_DELETE:
		*out = API_DELETE;
		return true;
	default:
		return false;
	}
}

/* Firecracker accepts absolute-form targets too: "http://localhost/x" is "/x" (micro_http get_abs_path). The
 * query string is not part of the path. Fills c->path, or sets c->reject. */
static void take_path(struct conn *c)
{
	const char *url = c->url, *path = url, *q;
	size_t len;

	c->url[c->url_len] = '\0';
	if (strncmp(url, "http://", 7) == 0) {
		const char *slash = strchr(url + 7, '/');

		path = slash ? slash : "";
	}
	q = strchr(path, '?');
	len = q ? (size_t)(q - path) : strlen(path);
	if (c->url_long || path[0] != '/' || len >= API_PATH_MAX) {
		c->reject = "Invalid URI: the path must start with '/' and be under " STR(API_PATH_MAX) " bytes.";
		return;
	}
	memcpy(c->path, path, len);
	c->path[len] = '\0';
	c->path_len = len;
}

/* Headers complete: what can be checked before any body arrives. */
static int on_headers_complete(llhttp_t *p)
{
	struct conn *c = conn_of(p);

	c->headers_done = true;
	if ((p->flags & F_CONTENT_LENGTH) && p->content_length > h.body_max) {
		/* answered at once, the body unread, and the connection closed: micro_http's way */
		c->early_status = 400;
		snprintf(c->early, sizeof(c->early),
			 "Request payload with size %" PRIu64 " is larger than the limit of %zu allowed by server.",
			 p->content_length, h.body_max);
		return -1;
	}
	/* other errors wait for the (bounded) body, so that the client reads its answer, not a reset */
	if (!method_of(p->method, &c->method))
		c->reject = "Invalid HTTP Method: Unsupported HTTP method.";
	else
		take_path(c);
	c->body_cap = (p->flags & F_CONTENT_LENGTH) ? (size_t)p->content_length : 0;
	c->expect[c->expect_len] = '\0';
	if (!c->reject && c->body_cap && strcasecmp(c->expect, "100-continue") == 0 &&
	    send(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		c->dead = true;
	return 0;
}

/* Appends to the body. A chunked body over the limit is read to its end and dropped, then answered 400; so
 * is a rejected request's body. */
static int on_body(llhttp_t *p, const char *at, size_t len)
{
	struct conn *c = conn_of(p);

	if (!c->reject && c->body_len + len > h.body_max) {
		snprintf(c->reject_text, sizeof(c->reject_text),
			 "Request payload is larger than the limit of %zu allowed by server.", h.body_max);
		c->reject = c->reject_text;
	}
	if (c->reject)
		return 0;
	if (c->body_len + len > c->body_cap) { /* chunked: grows, the limit bounding it */
		size_t cap = c->body_cap ? c->body_cap * 2 : 4096;
		char *b;

		while (cap < c->body_len + len)
			cap *= 2;
		cap = cap > h.body_max ? h.body_max : cap;
		if (!(b = realloc(c->body, cap)))
			return -1;
		c->body = b;
		c->body_cap = cap;
	}
	if (!c->body && !(c->body = malloc(c->body_cap)))
		return -1;
	memcpy(c->body + c->body_len, at, len);
	c->body_len += len;
	return 0;
}

static int on_message_complete(llhttp_t *p)
{
	struct conn *c = conn_of(p);

	c->complete = true;
	c->keep_alive = llhttp_should_keep_alive(p);
	return HPE_PAUSED; /* one request at a time per connection: the rest waits in c->in */
}

static void settings_init(void)
{
	llhttp_settings_init(&h.settings);
	h.settings.on_message_begin = on_message_begin;
	h.settings.on_url = on_url;
	h.settings.on_method = on_data_counted;
	h.settings.on_version = on_data_counted;
	h.settings.on_version_complete = on_version_complete;
	h.settings.on_header_field = on_header_field;
	h.settings.on_header_field_complete = on_header_field_complete;
	h.settings.on_header_value = on_header_value;
	h.settings.on_headers_complete = on_headers_complete;
	h.settings.on_body = on_body;
	h.settings.on_message_complete = on_message_complete;
}

/* ---- one connection's bytes --------------------------------------------------------------------------- */

/* llhttp refused the request (or a check above did): 400 (431 for the headers' size) with why, then close. */
static void parse_error(struct conn *c, llhttp_errno_t err, const char *from, const char *pos)
{
	char text[FAULT_MAX];
	unsigned status = 400;

	c->close_after = true;
	if (c->early_status) {
		status = c->early_status;
		snprintf(text, sizeof(text), "%s", c->early);
	} else if (c->n_cl > 1 || c->n_te > 1 || (c->n_cl && c->n_te) || err == HPE_UNEXPECTED_CONTENT_LENGTH) {
		snprintf(text, sizeof(text),
			 "Invalid request: more than one Content-Length or Transfer-Encoding header, or both.");
	} else if (!c->line_done && pos && memchr(from, '\0', (size_t)(pos - from + 1))) {
		snprintf(text, sizeof(text), "Invalid request line: it holds a NUL byte.");
	} else if (err == HPE_INVALID_METHOD) {
		snprintf(text, sizeof(text), "Invalid HTTP Method: Unsupported HTTP method.");
	} else {
		snprintf(text, sizeof(text), "Invalid request: %s.", llhttp_get_error_reason(&c->parser));
	}
	client_msg(h.errors, "refused a request: %s", text);
	respond_fault(c, status, text);
}

/* A complete request: refused at once (c->reject), or queued for brisk. */
static void request_complete(struct conn *c)
{
	c->close_after = !c->keep_alive;
	if (c->reject) {
		respond_fault(c, 400, c->reject);
		return;
	}
	enqueue(c);
}

/* Parses what c->in holds; stops at a complete request (kept, the rest stays in c->in) or an error. */
static void parse(struct conn *c)
{
	llhttp_errno_t err;
	const char *pos;
	size_t used;

	if (!c->in_len || c->state != READING || c->dead)
		return;
	err = llhttp_execute(&c->parser, c->in, c->in_len);
	if (err == HPE_OK) {
		c->in_len = 0;
		return;
	}
	pos = llhttp_get_error_pos(&c->parser);
	if (err == HPE_PAUSED || (err == HPE_PAUSED_UPGRADE && c->complete)) {
		used = pos && pos >= c->in && pos <= c->in + c->in_len ? (size_t)(pos - c->in) : c->in_len;
		memmove(c->in, c->in + used, c->in_len - used);
		c->in_len -= used;
		if (err == HPE_PAUSED_UPGRADE) /* CONNECT or Upgrade: no protocol but this one, then closed */
			c->keep_alive = false;
		else
			llhttp_resume(&c->parser);
		request_complete(c);
		return;
	}
	c->in_len = 0;
	parse_error(c, err, c->in, pos && pos >= c->in && pos < c->in + READ_CHUNK ? pos : NULL);
}

static void on_readable(struct conn *c)
{
	ssize_t n;

	if (c->in_len == sizeof(c->in)) { /* never while READING (parse takes it all), but a 0-byte recv is no EOF */
		parse(c);
		return;
	}
	n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);

	if (n == 0) {
		/* end of file: a request whose length only the end gives (none is valid here) is over too */
		c->dead = true;
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			c->dead = true;
		return;
	}
	c->in_len += (size_t)n;
	parse(c);
}

/* A DRAINING connection readable: its bytes dropped; its end, or an error, closes it. */
static void drain(struct conn *c)
{
	char junk[READ_CHUNK];
	ssize_t n = recv(c->fd, junk, sizeof(junk), MSG_DONTWAIT);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
		c->dead = true;
}

static void flush_out(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				c->dead = true;
			return;
		}
		c->out_off += (size_t)n;
	}
	free(c->out);
	c->out = NULL;
	c->out_len = c->out_off = 0;
	if (c->close_after) {
		/*
		 * The client reads to end-of-file. What it still sends (the body of a request refused on its headers)
		 * is read and dropped until it closes, for LINGER_MS at most: closed at once, the client's next write
		 * would fail (EPIPE) before it read this answer.
		 */
		shutdown(c->fd, SHUT_WR);
		c->state = DRAINING;
		c->deadline_ms = now_ms() + LINGER_MS;
		return;
	}
	c->state = READING;
	arm(c, true); /* a kept-alive connection's next request: from now */
	parse(c);     /* a pipelined request already read */
}

/* ---- the list of connections -------------------------------------------------------------------------- */

static void close_conn(struct conn *c)
{
	if (c->state == WAITING)
		dequeue(c);
	*(c->prev ? &c->prev->next : &h.conns) = c->next;
	*(c->next ? &c->next->prev : &h.conns_tail) = c->prev;
	h.nconns--;
	close(c->fd);
	free(c->body);
	free(c->out);
	free(c);
}

static void sweep(void)
{
	for (struct conn *c = h.conns, *next; c; c = next) {
		next = c->next;
		if (c->dead)
			close_conn(c);
	}
}

/* ---- brisk's replies ---------------------------------------------------------------------------------- */

/* One fragment of brisk's reply to h.inflight: assembled, answered once complete. */
static void take_fragment(const struct api_wire_frag *f)
{
	struct conn *c = h.inflight;

	if (f->offset == 0 && h.rep.got == 0 && !h.rep.buf) {
		h.rep.len = f->body_len;
		h.rep.status = f->status;
		if (f->body_len && !(h.rep.buf = malloc(f->body_len))) {
			inflight_done();
			respond_fault(c, 500, "The helper is out of memory for the VMM's reply.");
			return;
		}
	}
	if (f->offset != h.rep.got || f->body_len != h.rep.len || f->status != h.rep.status) {
		link_msg(h.link_errors, "dropping a reply from brisk: a fragment at %zu of %zu, expected at %zu of %zu",
			 f->offset, f->body_len, h.rep.got, h.rep.len);
		inflight_done();
		respond_fault(c, 502, "The VMM's reply was malformed.");
		return;
	}
	if (f->len)
		memcpy(h.rep.buf + f->offset, f->data, f->len);
	h.rep.got += f->len;
	if (h.rep.got < h.rep.len)
		return;
	respond(c, h.rep.status, h.rep.buf, h.rep.len);
	inflight_done();
	send_next();
}

static void on_reply(const unsigned char *buf, size_t len)
{
	struct api_wire_frag f;
	char err[160];

	if (api_wire_decode_reply(buf, len, &f, err, sizeof(err))) {
		link_msg(h.link_errors, "dropping a malformed reply from brisk: %s", err);
		return;
	}
	if (h.inflight && h.inflight->id == f.id) /* else: a reply after its request timed out */
		take_fragment(&f);
}

/* Reads brisk's replies; false once brisk has closed the link. */
static bool link_readable(void)
{
	static unsigned char buf[API_WIRE_REP_MAX + 1];

	for (;;) {
		ssize_t n = recv(h.fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return false;
		if (n < 0)
			return true;
		if (n > (ssize_t)API_WIRE_REP_MAX)
			link_msg(h.link_errors, "dropping a reply from brisk of %zd bytes (limit %u)", n,
				 API_WIRE_REP_MAX);
		else
			on_reply(buf, (size_t)n);
	}
}

/* brisk has gone: stop accepting, answer what waits. */
static void brisk_gone(void)
{
	struct conn *c = h.inflight;

	h.brisk_gone = true;
	close(h.lfd);
	h.lfd = -1;
	close(h.fd);
	h.fd = -1;
	if (c) {
		inflight_done();
		respond_fault(c, 503, "The VMM is not running.");
	}
	send_next();
}

/* ---- the loop ----------------------------------------------------------------------------------------- */

/* Enforces every deadline that passed; returns poll's timeout until the next one. */
static int next_timeout_ms(void)
{
	int64_t now = now_ms(), a = request_deadlines(now), b = conn_deadlines(now);

	if (a < 0 || (b >= 0 && b < a))
		a = b;
	return a < 0 ? -1 : a > INT32_MAX ? INT32_MAX : (int)a;
}

/* Whether a connection still has a response to deliver (the drain after brisk has gone). */
static bool delivering(void)
{
	for (struct conn *c = h.conns; c; c = c->next)
		if (!c->dead && (c->state == WRITING || c->state == WAITING))
			return true;
	return false;
}

static void serve(void)
{
	size_t cap = (size_t)h.conn_limit + 1 + ACCEPT_BURST + 2;
	struct pollfd *p = calloc(cap, sizeof(*p));
	struct conn **who = calloc(cap, sizeof(*who));
	int64_t drain_end = 0;

	if (!p || !who) {
		msg("out of memory for %zu connections", cap);
		return;
	}
	for (;;) {
		int timeout = next_timeout_ms();
		nfds_t n = 2;

		sweep();
		if (h.brisk_gone) {
			if (!delivering() || now_ms() >= drain_end)
				return;
			timeout = timeout < 0 || timeout > 5 ? 5 : timeout;
		}
		p[0] = (struct pollfd){.fd = h.fd, .events = POLLIN};
		p[1] = (struct pollfd){.fd = h.lfd, .events = POLLIN};
		for (struct conn *c = h.conns; c && n < cap; c = c->next) {
			if (c->state == WAITING)
				continue; /* not read until answered (a peer's hang-up would wake poll for nothing) */
			p[n] = (struct pollfd){.fd = c->fd, .events = c->state == WRITING ? POLLOUT : POLLIN};
			who[n++] = c;
		}
		if (poll(p, n, timeout) < 0)
			continue;
		for (nfds_t i = 2; i < n; i++) {
			struct conn *c = who[i];

			if (!p[i].revents || c->dead)
				continue;
			if (c->state == WRITING)
				flush_out(c);
			else if (c->state == READING)
				on_readable(c);
			else if (c->state == DRAINING)
				drain(c);
		}
		if (p[0].revents && !link_readable()) {
			brisk_gone();
			drain_end = now_ms() + DRAIN_MS;
		}
		if (p[1].revents) {
			sweep(); /* the connections closed this turn leave their slots before any is evicted */
			accept_all();
		}
	}
}

/* ---- start-up ----------------------------------------------------------------------------------------- */

/* Room for CONN_LIMIT connections: RLIMIT_NOFILE's soft limit raised as far as the hard one allows; the
 * connection limit is what then fits. */
static unsigned connection_limit(void)
{
	struct rlimit rl;
	rlim_t want = CONN_LIMIT + FD_RESERVE;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 64;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur >= want)
		return CONN_LIMIT;
	return rl.rlim_cur > FD_RESERVE + 8 ? (unsigned)(rl.rlim_cur - FD_RESERVE) : 8;
}

static void say(const char *text)
{
	if (send(h.fd, text, strlen(text), MSG_NOSIGNAL) < 0)
		msg("telling brisk '%s': %s", text, strerror(errno));
}

/*
 * brisk's signal set-up is its own: the helper unblocks every signal and gives the ones brisk handles or a
 * caller may have ignored (the vCPU kick SIGUSR1, SIGSYS, the stop signals, SIGCHLD) their defaults back;
 * SIGPIPE stays ignored (every send says MSG_NOSIGNAL anyway). Eight calls, not one per signal: this is on
 * the API's start path.
 */
static void reset_signals(void)
{
	static const int dfl[] = {SIGUSR1, SIGSYS, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD};
	sigset_t none;

	for (size_t i = 0; i < sizeof(dfl) / sizeof(dfl[0]); i++)
		signal(dfl[i], SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

void api_http_main(const struct api_http_args *a)
{
	void *claim;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != a->parent) /* brisk died before PDEATHSIG was set (later: the link closes) */
		_exit(1);
	prctl(PR_SET_NAME, "brisk-api");
	reset_signals();
	h.fd = a->link_fd;
	h.lfd = a->listen_fd;
	h.timeout_ms = a->reply_timeout_ms;
	h.body_max = a->body_max;
	h.verbose = a->verbose;
	claim = mmap(NULL, CLAIM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, a->claim_fd, 0);
	close(a->claim_fd);
	h.claim = claim == MAP_FAILED ? NULL : claim;
	h.msg = malloc(API_WIRE_REQ_MAX);
	h.conn_limit = connection_limit();
	settings_init();
	if (!h.claim || !h.msg || fcntl(h.lfd, F_SETFL, O_NONBLOCK) < 0) {
		say("ERR the HTTP helper could not set up (claim word, memory or the socket's flags)");
		_exit(1);
	}
	/* the helper confined before brisk hears OK (docs/security.md) */
	if (seccomp_helper_wanted() && seccomp_configure(true) == 0)
		seccomp_enter(SECCOMP_API_HELPER);
	say("OK");
	h.serving = true;
	serve();
	_exit(0); /* connections still open are the kernel's to close */
}
