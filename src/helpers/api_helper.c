/*
 * api_helper.c - brisk-api, the HTTP/1.1 server of brisk's Firecracker-compatible API: libmicrohttpd on
 * the listening Unix socket brisk hands it, brisk on the SOCK_SEQPACKET socket beside it (api_link.h).
 *
 *   brisk-api --listen-fd N --link-fd M --claim-fd C [--reply-timeout-ms T] [--verbose]
 *
 * Why a process of its own: brisk is linked statically and Debian's libmicrohttpd cannot be (gnutls); and
 * it keeps HTTP parsing of whatever a client sends out of the monitor process. This helper does only HTTP:
 * each complete request is reduced to method, path and body and sent to brisk, which does the JSON and the
 * VM work and sends back a status and a JSON body (in fragments: api_link.h).
 *
 * Threads: libmicrohttpd's one polling thread serves every connection without blocking; a request that is
 * complete is queued and its connection suspended (a slow client therefore never holds up another one or
 * brisk: brisk sees a request only when all of it has arrived). The main thread owns the socket to brisk:
 * it sends one request at a time (Firecracker's API thread also serves one at a time), reads the reply,
 * resumes the connection, and enforces the deadlines: a request not taken by brisk within the reply
 * timeout of its arrival is answered 503 and never carried out (the claim word, api_link.h); a connection
 * whose request has not arrived whole within REQUEST_DEADLINE_S is closed.
 *
 * Fairness against slow and hostile clients (docs/api.md, docs/security.md): up to CONN_LIMIT connections
 * at once; each must deliver a whole request (headers and body) within REQUEST_DEADLINE_S of its start
 * (the connection's accept, or the end of its previous response), a total deadline that trickling bytes do
 * not extend, and take each response within as long; when every slot is taken, a new connection evicts
 * the incomplete one whose deadline is nearest (never one whose request is with brisk). So a trickler costs
 * another client nothing but its share of the polling thread. Headers within HEADER_MEM bytes, bodies
 * within API_BODY_MAX bytes. Errors are answered as Firecracker's micro_http does: 400 with
 * {"fault_message": ...} for a payload over the limit, an unsupported method, an ambiguous length (two
 * Content-Length headers, or one with Transfer-Encoding) or a NUL byte in the request line (libmicrohttpd
 * answers other malformed requests itself, 400 with an HTML body). It exits when brisk closes its end of
 * the socket (after delivering what it holds, at most DRAIN_MS), or at once when brisk dies
 * (PR_SET_PDEATHSIG). It writes to stderr only on errors, rate-limited (log_ratelimit).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "brisk/api_link.h"
#include "brisk/log.h" /* log_ratelimit only: the helper does not link log.c */
#include "brisk/seccomp.h"

#define CONN_LIMIT	   1024 /* connections at once (fewer when RLIMIT_NOFILE cannot be raised for them) */
#define FD_RESERVE	   16	/* descriptors kept beside the connections: stdio, the sockets, libmicrohttpd's */
#define REQUEST_DEADLINE_S 10	/* a whole request, or the taking of a response, within this */
#define IDLE_TIMEOUT_S	   10	/* libmicrohttpd's own idle timeout, kept as a backstop */
#define HEADER_MEM	   (16 * 1024)
#define DRAIN_MS	   1000
#define FAULT_MAX	   512
#define CLAIM_SIZE	   4096
#define STR_(x)		   #x
#define STR(x)		   STR_(x)

enum req_state {
	NEW,	   /* the request line is in (on_uri); the headers are not yet */
	RECEIVING, /* headers seen, body arriving */
	WAITING,   /* complete: queued for brisk or with brisk; the connection is suspended */
	ANSWERED,  /* a response is ready; the connection is resumed to send it */
	DONE,	   /* the response is queued with libmicrohttpd */
};

/* One connection (libmicrohttpd's socket context), in h.conns while it is open. */
struct conn {
	struct MHD_Connection *mc;
	int fd;
	int64_t deadline_ms; /* the request, or the taking of its response, by then; 0: none (with brisk) */
	struct conn *prev, *next;
};

struct req {
	struct MHD_Connection *conn;
	struct conn *c; /* NULL when it could not be tracked */
	enum req_state state;
	enum api_method method;
	const char *raw_uri; /* the request target as on_uri saw it (libmicrohttpd's buffer), and its strlen */
	size_t raw_len;
	char path[API_PATH_MAX];
	size_t path_len;
	char *body;
	size_t body_len, body_cap;
	uint32_t id;
	int64_t deadline_ms; /* taken by brisk by then, or answered 503 */
	unsigned status;
	struct MHD_Response *resp;
	const char *reject;	 /* answered 400 with this once the body is in (and dropped) */
	bool counted;		 /* in h.delivering */
	struct req *next;	 /* in the queue to brisk */
	struct req *resume_next; /* in h.resume */
};

/* Shared by the polling thread and the main thread, under lock. */
static struct {
	pthread_mutex_t lock;
	int fd;		    /* to brisk */
	int wake;	    /* eventfd: a deadline to watch appeared; the main thread's poll takes it */
	uint64_t *claim;    /* the claim word (api_link.h) */
	int64_t timeout_ms; /* a request's deadline after its arrival */
	struct req *head, *tail;
	struct req *inflight;
	bool taken; /* brisk took h.inflight: no deadline, its answer will come */
	struct {    /* brisk's reply to h.inflight, as its fragments arrive */
		char *buf;
		size_t len, got;
		unsigned status;
	} rep;
	uint32_t next_id;
	unsigned delivering; /* answered, not yet completed */
	bool brisk_gone;
	bool serving, verbose;		 /* after start-up, libmicrohttpd's messages only with --verbose */
	struct req *resume;		 /* answered: resumed once the lock is dropped (see unlock_resume) */
	struct conn *conns, *conns_tail; /* oldest first */
	unsigned nconns, conn_limit;
	uint64_t evicted, late, expired, link_errors;
	unsigned char msg[API_WIRE_REQ_MAX];
} h = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .wake = -1, .timeout_ms = API_REPLY_TIMEOUT_S * 1000};

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("brisk-api: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* Once the socket serves, libmicrohttpd reports single connections (a client that closed early, sent a
 * malformed request, timed out): the client's doing, not an error of brisk's, so only with --verbose. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	if (__atomic_load_n(&h.serving, __ATOMIC_RELAXED) && !h.verbose)
		return;
	fputs("brisk-api: ", stderr);
	vfprintf(stderr, fmt, ap);
}

/* A link error (brisk's side of things), counted in *n and written rate-limited. */
#define link_msg(n, fmt, ...)                                                                                          \
	do {                                                                                                           \
		if (log_ratelimit((n)++))                                                                              \
			msg(fmt " (%" PRIu64 " so far)", __VA_ARGS__, (n));                                            \
	} while (0)

/* A client's doing (evicted, too slow): only with --verbose, and rate-limited. */
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

static struct MHD_Response *json_response(const char *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);

	if (r && len && MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") != MHD_YES) {
		MHD_destroy_response(r);
		return NULL;
	}
	return r;
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

static enum MHD_Result queue_fault(struct MHD_Connection *conn, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result queue_fault(struct MHD_Connection *conn, unsigned status, const char *fmt, ...)
{
	char text[FAULT_MAX], body[FAULT_MAX * 2];
	struct MHD_Response *r;
	enum MHD_Result ret;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	r = json_response(body, fault_json(body, sizeof(body), text));
	if (!r)
		return MHD_NO;
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

/*
 * Drops the lock, then resumes the connections answered meanwhile. Never under the lock: libmicrohttpd takes
 * its own lock in MHD_resume_connection, and it may hold that one while it calls on_completed, which takes
 * ours. A suspended connection is not closed, so each req stays valid until its resume.
 */
static void unlock_resume(void)
{
	struct req *r = h.resume, *next;

	h.resume = NULL;
	pthread_mutex_unlock(&h.lock);
	for (; r; r = next) {
		struct MHD_Connection *conn = r->conn;

		next = r->resume_next; /* r may be freed as soon as it is resumed */
		MHD_resume_connection(conn);
	}
}

/* ---- connections and their deadlines (lock held) ----------------------------------------------------- */

/* Sets c's deadline REQUEST_DEADLINE_S from now (0 for none) and tells the main thread to watch it. */
static void arm(struct conn *c, bool on)
{
	if (!c)
		return;
	c->deadline_ms = on ? now_ms() + REQUEST_DEADLINE_S * 1000 : 0;
	if (on)
		eventfd_write(h.wake, 1);
}

/* Ends c from outside libmicrohttpd: shutdown(2) makes its next read see end-of-file, and libmicrohttpd
 * closes it (its fd stays c's until NOTIFY_CLOSED, which takes our lock: never a reused descriptor). */
static void cut(struct conn *c)
{
	c->deadline_ms = 0;
	shutdown(c->fd, SHUT_RDWR);
}

/* Every slot is taken: evicts the incomplete connection (not `keep`) whose deadline is nearest. Returns
 * false when there is none (every other one waits for brisk). */
static bool evict_one(const struct conn *keep)
{
	struct conn *victim = NULL;

	for (struct conn *c = h.conns; c; c = c->next)
		if (c != keep && c->deadline_ms && (!victim || c->deadline_ms < victim->deadline_ms))
			victim = c;
	if (!victim)
		return false;
	client_msg(h.evicted, "%u connections: evicted the one whose request was furthest from complete", h.nconns);
	cut(victim);
	return true;
}

/* Closes the connections past their deadline; returns the ms until the next one's (-1: none). */
static int64_t conn_deadlines(int64_t now)
{
	int64_t next = -1;

	for (struct conn *c = h.conns; c; c = c->next) {
		if (!c->deadline_ms)
			continue;
		if (c->deadline_ms <= now) {
			client_msg(h.late, "closed a connection whose request did not arrive whole in %d s",
				   REQUEST_DEADLINE_S);
			cut(c);
		} else if (next < 0 || c->deadline_ms - now < next) {
			next = c->deadline_ms - now;
		}
	}
	return next;
}

/* libmicrohttpd accepted or closed a connection (its polling thread). */
static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	const union MHD_ConnectionInfo *info;
	struct conn *c = *socket_context;

	(void)cls;
	pthread_mutex_lock(&h.lock);
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
		c = info ? calloc(1, sizeof(*c)) : NULL;
		if (!c) { /* untracked is unbounded: refuse it */
			if (info)
				shutdown(info->connect_fd, SHUT_RDWR);
		} else {
			*c = (struct conn){.mc = mc, .fd = info->connect_fd, .prev = h.conns_tail};
			*(h.conns_tail ? &h.conns_tail->next : &h.conns) = c;
			h.conns_tail = c;
			h.nconns++;
			arm(c, true);
			if (h.nconns > h.conn_limit && !evict_one(c))
				cut(c); /* every other one is with brisk: this one waits in no queue */
		}
		*socket_context = c;
	} else if (c) {
		*(c->prev ? &c->prev->next : &h.conns) = c->next;
		*(c->next ? &c->next->prev : &h.conns_tail) = c->prev;
		h.nconns--;
		free(c);
		*socket_context = NULL;
	}
	pthread_mutex_unlock(&h.lock);
}

/* Hands r its response (lock held); unlock_resume resumes it. A failed allocation closes the connection. */
static void answer(struct req *r, unsigned status, const char *body, size_t len)
{
	r->status = status;
	r->resp = json_response(body, len);
	r->state = ANSWERED;
	r->counted = true;
	h.delivering++;
	r->resume_next = h.resume;
	h.resume = r;
	arm(r->c, true); /* the response must be taken in time too */
}

static void answer_fault(struct req *r, unsigned status, const char *text)
{
	char body[FAULT_MAX];

	answer(r, status, body, fault_json(body, sizeof(body), text));
}

/* ---- the queue to brisk (lock held) ------------------------------------------------------------------- */

#define NOT_TAKEN "The VMM did not take the request in time; it was not carried out."

/* The reply being assembled for h.inflight is dropped. */
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
	struct req *r;
	long n;

	/* Nothing reaches brisk before "OK": brisk reads its first message as the start-up answer. */
	if (!__atomic_load_n(&h.serving, __ATOMIC_RELAXED))
		return;
	while (!h.inflight && (r = h.head)) {
		h.head = r->next;
		if (!h.head)
			h.tail = NULL;
		r->next = NULL;
		if (h.brisk_gone) {
			answer_fault(r, 503, "The VMM is not running.");
			continue;
		}
		if (now_ms() >= r->deadline_ms) {
			h.expired++;
			answer_fault(r, 503, NOT_TAKEN);
			continue;
		}
		r->id = ++h.next_id;
		n = api_wire_encode_request(h.msg, sizeof(h.msg), r->id, r->method, r->path, r->path_len, r->body,
					    r->body_len);
		__atomic_store_n(h.claim, API_CLAIM(r->id, API_CLAIM_SENT), __ATOMIC_SEQ_CST);
		if (n >= 0 && send(h.fd, h.msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
			n = -errno;
		if (n < 0) {
			__atomic_store_n(h.claim, API_CLAIM(r->id, API_CLAIM_EXPIRED), __ATOMIC_SEQ_CST);
			link_msg(h.link_errors, "sending a request to brisk: %s", strerror((int)-n));
			answer_fault(r, 503, "The request could not be passed to the VMM.");
			continue;
		}
		h.inflight = r;
		h.taken = false;
		eventfd_write(h.wake, 1);
	}
}

static void enqueue(struct req *r)
{
	if (h.tail)
		h.tail->next = r;
	else
		h.head = r;
	h.tail = r;
	send_next();
}

/* Takes r out of the queue (a connection that libmicrohttpd ends while it waits: daemon shutdown only). */
static void dequeue(struct req *r)
{
	struct req **p = &h.head;

	if (h.inflight == r)
		inflight_done(); /* brisk's late reply no longer matches an id */
	while (*p && *p != r)
		p = &(*p)->next;
	if (*p) {
		*p = r->next;
		if (h.tail == r)
			for (h.tail = h.head; h.tail && h.tail->next; h.tail = h.tail->next)
				;
	}
	send_next();
}

/*
 * The requests' deadlines: h.inflight, if brisk has not taken it (the claim word decides), and the queued
 * ones (in arrival order, so the head's is the nearest), each answered 503 when it passes. Returns the ms
 * until the next one (-1: none).
 */
static int64_t request_deadlines(int64_t now)
{
	int64_t next = -1;

	if (h.inflight && !h.taken && now >= h.inflight->deadline_ms) {
		if (api_claim_swap(h.claim, h.inflight->id, API_CLAIM_SENT, API_CLAIM_EXPIRED)) {
			h.expired++;
			answer_fault(h.inflight, 503, NOT_TAKEN);
			inflight_done();
		} else {
			h.taken = true; /* brisk is carrying it out: its answer is the only true one */
		}
	}
	while (h.head && now >= h.head->deadline_ms) {
		struct req *r = h.head;

		h.head = r->next;
		if (!h.head)
			h.tail = NULL;
		h.expired++;
		answer_fault(r, 503, NOT_TAKEN);
	}
	send_next();
	if (h.inflight && !h.taken)
		next = h.inflight->deadline_ms - now;
	if (h.head && (next < 0 || h.head->deadline_ms - now < next))
		next = h.head->deadline_ms - now;
	return next < 0 ? -1 : next;
}

/* ---- libmicrohttpd's callbacks (the polling thread) -------------------------------------------------- */

static bool method_of(const char *m, enum api_method *out)
{
	static const char *const names[] = {"GET", "PUT", "PATCH", "DELETE"};

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(m, names[i]) == 0) {
			*out = (enum api_method)i;
			return true;
		}
	return false;
}

/* Firecracker accepts absolute-form targets too: "http://localhost/x" is "/x" (micro_http get_abs_path). */
static const char *abs_path(const char *url)
{
	const char *slash;

	if (strncmp(url, "http://", 7) != 0)
		return url;
	slash = strchr(url + 7, '/');
	return slash ? slash : "";
}

/*
 * The request line, before libmicrohttpd cuts the query string off or unescapes anything: the request's
 * state starts here (the return value is its *con_cls), with the target's length as a C string.
 */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct req *r = calloc(1, sizeof(*r));

	(void)cls;
	if (r) {
		r->conn = conn;
		r->state = NEW;
		r->raw_uri = uri;
		r->raw_len = uri ? strlen(uri) : 0;
	}
	return r;
}

/*
 * Whether the request line held a NUL byte, which C strings would silently cut ("GET /\0abc" served as
 * "/"): libmicrohttpd 0.9.75 keeps the line in its buffer as "METHOD\0 TARGET\0VERSION" (the spaces it
 * split at made NULs), so the method must reach the spaces before the target and the target (as on_uri saw
 * it, before the query string was split off) must reach the NUL before the version. Where the pointers are
 * not laid out so (another libmicrohttpd), nothing is concluded.
 */
static bool nul_in_request_line(const struct req *r, const char *url, const char *method, const char *version)
{
	size_t mlen = strlen(method);

	if (r->raw_uri != url || !version || version <= url || (size_t)(version - url) > HEADER_MEM)
		return false;
	if ((size_t)(version - url) - 1 != r->raw_len)
		return true;
	if (method >= url || (size_t)(url - method) > 64 || mlen >= (size_t)(url - method))
		return false;
	for (const char *p = method + mlen + 1; p < url; p++)
		if (*p != ' ')
			return true;
	return false;
}

struct framing {
	unsigned content_length, transfer_encoding;
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct framing *f = cls;

	(void)kind, (void)value;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
		f->content_length++;
	else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0)
		f->transfer_encoding++;
	return MHD_YES;
}

/* The request's length must be unambiguous (request smuggling, RFC 9112 section 6.3): one Content-Length,
 * or one Transfer-Encoding, never both. */
static bool framing_ambiguous(struct MHD_Connection *conn)
{
	struct framing f = {0};

	MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, &f);
	return f.content_length > 1 || f.transfer_encoding > 1 || (f.content_length && f.transfer_encoding);
}

/* Answers 400 at once and closes the connection, its body (if any) unread. */
static enum MHD_Result refuse_now(struct req *r, const char *text)
{
	r->state = DONE;
	return queue_fault(r->conn, 400, "%s", text);
}

/* The first call, headers complete: checks what can be checked before any body arrives. */
static enum MHD_Result start_request(struct req *r, struct MHD_Connection *conn, const char *url, const char *method,
				     const char *version)
{
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;
	const char *path = abs_path(url);

	r->c = info ? info->socket_context : NULL;
	r->state = RECEIVING;
	if (nul_in_request_line(r, url, method, version))
		return refuse_now(r, "Invalid request line: it holds a NUL byte.");
	if (framing_ambiguous(conn))
		return refuse_now(r, "Invalid request: more than one Content-Length or Transfer-Encoding header, or "
				     "both.");
	if (len > API_BODY_MAX) { /* answered at once, the body unread, and the connection closed: micro_http's way */
		r->state = DONE;
		return queue_fault(conn, 400,
				   "Request payload with size %llu is larger than the limit of %d allowed by server.",
				   len, API_BODY_MAX);
	}
	/* other errors wait for the (bounded) body, so that the client reads its answer, not a reset */
	r->path_len = strlen(path);
	if (!method_of(method, &r->method))
		r->reject = "Invalid HTTP Method: Unsupported HTTP method.";
	else if (path[0] != '/' || r->path_len >= API_PATH_MAX)
		r->reject = "Invalid URI: the path must start with '/' and be under " STR(API_PATH_MAX) " bytes.";
	else
		memcpy(r->path, path, r->path_len + 1);
	r->body_cap = cl ? (size_t)len : API_BODY_MAX; /* chunked: grows to the limit at most */
	return MHD_YES;
}

/* Appends to the body. A chunked body over the limit is read to its end and dropped, then answered 400
 * (libmicrohttpd 0.9.75 takes no response in the middle of an upload); so is a rejected request's body. */
static enum MHD_Result take_body(struct req *r, const char *data, size_t *size)
{
	if (!r->reject && r->body_len + *size > API_BODY_MAX)
		r->reject = "Request payload is larger than the limit of " STR(API_BODY_MAX) " allowed by server.";
	if (r->reject) {
		*size = 0;
		return MHD_YES;
	}
	if (!r->body && !(r->body = malloc(r->body_cap ? r->body_cap : 1)))
		return MHD_NO;
	if (r->body_len + *size > r->body_cap) /* more than Content-Length said: libmicrohttpd prevents it */
		return MHD_NO;
	memcpy(r->body + r->body_len, data, *size);
	r->body_len += *size;
	*size = 0;
	return MHD_YES;
}

/* The request is complete: suspend the connection and queue the request for brisk, with its deadline. */
static enum MHD_Result forward(struct req *r)
{
	if (r->reject) {
		r->state = DONE;
		return queue_fault(r->conn, 400, "%s", r->reject);
	}
	pthread_mutex_lock(&h.lock);
	r->state = WAITING;
	r->deadline_ms = now_ms() + h.timeout_ms;
	arm(r->c, false); /* the request's own deadline applies now */
	MHD_suspend_connection(r->conn);
	enqueue(r);
	eventfd_write(h.wake, 1);
	unlock_resume();
	return MHD_YES;
}

static enum MHD_Result deliver(struct req *r)
{
	enum MHD_Result ret;

	r->state = DONE;
	if (!r->resp)
		return MHD_NO;
	ret = MHD_queue_response(r->conn, r->status, r->resp);
	MHD_destroy_response(r->resp);
	r->resp = NULL;
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *data, size_t *size, void **con_cls)
{
	struct req *r = *con_cls;

	(void)cls;
	if (!r) /* on_uri could not allocate it */
		return MHD_NO;
	switch (r->state) {
	case NEW:
		return start_request(r, conn, url, method, version);
	case RECEIVING:
		return *size ? take_body(r, data, size) : forward(r);
	case ANSWERED:
		return deliver(r);
	case WAITING:
	case DONE:
		break;
	}
	*size = 0; /* after an early error response: what the client still sends is dropped */
	return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct req *r = *con_cls;

	(void)cls, (void)conn, (void)toe;
	if (!r)
		return;
	pthread_mutex_lock(&h.lock);
	if (r->state == WAITING)
		dequeue(r);
	if (r->counted)
		h.delivering--;
	arm(r->c, true); /* a kept-alive connection's next request: from now */
	unlock_resume();
	if (r->resp)
		MHD_destroy_response(r->resp);
	free(r->body);
	free(r);
	*con_cls = NULL;
}

/* Paths are passed on as sent: no percent-decoding (Firecracker decodes none, and "%00" must not cut one). */
static size_t no_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	(void)cls, (void)conn;
	return strlen(s);
}

/* ---- the main thread: brisk's replies ----------------------------------------------------------------- */

/* One fragment of brisk's reply to h.inflight (lock held): assembled, answered once complete. */
static void take_fragment(const struct api_wire_frag *f)
{
	if (f->offset == 0 && h.rep.got == 0 && !h.rep.buf) {
		h.rep.len = f->body_len;
		h.rep.status = f->status;
		if (f->body_len && !(h.rep.buf = malloc(f->body_len))) {
			answer_fault(h.inflight, 500, "The helper is out of memory for the VMM's reply.");
			inflight_done();
			return;
		}
	}
	if (f->offset != h.rep.got || f->body_len != h.rep.len || f->status != h.rep.status) {
		link_msg(h.link_errors, "dropping a reply from brisk: a fragment at %zu of %zu, expected at %zu of %zu",
			 f->offset, f->body_len, h.rep.got, h.rep.len);
		answer_fault(h.inflight, 502, "The VMM's reply was malformed.");
		inflight_done();
		return;
	}
	if (f->len)
		memcpy(h.rep.buf + f->offset, f->data, f->len);
	h.rep.got += f->len;
	if (h.rep.got < h.rep.len)
		return;
	answer(h.inflight, h.rep.status, h.rep.buf, h.rep.len);
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
	pthread_mutex_lock(&h.lock);
	if (h.inflight && h.inflight->id == f.id) /* else: a reply after its request timed out */
		take_fragment(&f);
	unlock_resume();
}

/* Enforces every deadline that passed; returns poll's timeout until the next one. */
static int next_timeout_ms(void)
{
	int64_t now = now_ms(), a, b;

	pthread_mutex_lock(&h.lock);
	a = request_deadlines(now);
	b = conn_deadlines(now);
	unlock_resume();
	if (a < 0 || (b >= 0 && b < a))
		a = b;
	return a < 0 ? -1 : a > INT32_MAX ? INT32_MAX : (int)a;
}

/* Serves brisk's replies until brisk closes the socket. */
static void serve(void)
{
	static unsigned char buf[API_WIRE_REP_MAX + 1];
	struct pollfd p[2] = {{.fd = h.fd, .events = POLLIN}, {.fd = h.wake, .events = POLLIN}};
	eventfd_t count;
	ssize_t n;

	for (;;) {
		if (poll(p, 2, next_timeout_ms()) <= 0)
			continue;
		if (p[1].revents)
			eventfd_read(h.wake, &count);
		if (!p[0].revents)
			continue;
		n = recv(h.fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return;
		if (n > (ssize_t)API_WIRE_REP_MAX)
			link_msg(h.link_errors, "dropping a reply from brisk of %zd bytes (limit %u)", n,
				 API_WIRE_REP_MAX);
		else if (n > 0)
			on_reply(buf, (size_t)n);
	}
}

/* brisk has gone: answer what waits, stop accepting, give the answers DRAIN_MS to reach their clients. */
static void drain(struct MHD_Daemon *d)
{
	int64_t end = now_ms() + DRAIN_MS;
	unsigned left;

	MHD_quiesce_daemon(d);
	pthread_mutex_lock(&h.lock);
	h.brisk_gone = true;
	if (h.inflight)
		answer_fault(h.inflight, 503, "The VMM is not running.");
	inflight_done();
	send_next();
	unlock_resume();
	do {
		pthread_mutex_lock(&h.lock);
		left = h.delivering;
		pthread_mutex_unlock(&h.lock);
		if (left)
			nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
	} while (left && now_ms() < end);
}

/* ---- start-up ----------------------------------------------------------------------------------------- */

static int parse_fd(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	return *s && !*end && v >= 0 && v < 1024 ? (int)v : -1;
}

/* --reply-timeout-ms: 1 .. 3,600,000; -1 when malformed. */
static int64_t parse_ms(const char *s)
{
	char *end;
	long long v = strtoll(s, &end, 10);

	return *s && !*end && v >= 1 && v <= 3600000 ? v : -1;
}

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

static struct MHD_Daemon *start_daemon(int lfd)
{
	unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;

	/* the logger first: libmicrohttpd reports the options after it through it. One connection over the
	 * limit is accepted, so that on_connection can evict one for it rather than leave it in the backlog. */
	return MHD_start_daemon(
	    flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET,
	    lfd, MHD_OPTION_CONNECTION_LIMIT, h.conn_limit + 1, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HEADER_MEM, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL, MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
	    MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL, MHD_OPTION_END);
}

static void say(int fd, const char *text)
{
	if (send(fd, text, strlen(text), MSG_NOSIGNAL) < 0)
		msg("telling brisk '%s': %s", text, strerror(errno));
}

int main(int argc, char **argv)
{
	const pid_t parent = getppid(); /* not "1 means orphaned": in brisk jail, brisk is PID 1 of its namespace */
	struct MHD_Daemon *d;
	int lfd = -1, cfd = -1;
	bool bad = false;
	void *claim;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--listen-fd") == 0 && i + 1 < argc)
			lfd = parse_fd(argv[++i]);
		else if (strcmp(argv[i], "--link-fd") == 0 && i + 1 < argc)
			h.fd = parse_fd(argv[++i]);
		else if (strcmp(argv[i], "--claim-fd") == 0 && i + 1 < argc)
			cfd = parse_fd(argv[++i]);
		else if (strcmp(argv[i], "--reply-timeout-ms") == 0 && i + 1 < argc)
			bad |= (h.timeout_ms = parse_ms(argv[++i])) < 0;
		else if (strcmp(argv[i], "--verbose") == 0)
			h.verbose = true;
		else
			bad = true;
	}
	if (bad || lfd < 0 || h.fd < 0 || cfd < 0 || lfd == h.fd || cfd == lfd || cfd == h.fd) {
		msg("usage: brisk-api --listen-fd N --link-fd M --claim-fd C [--reply-timeout-ms T] [--verbose] "
		    "(started by brisk: src/api/api_link.c)");
		return 2;
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent) /* brisk died before PDEATHSIG was set (earlier: serve() sees the link close) */
		return 1;
	signal(SIGPIPE, SIG_IGN);
	close_range((unsigned)(lfd > h.fd ? (lfd > cfd ? lfd : cfd) : (h.fd > cfd ? h.fd : cfd)) + 1, ~0u, 0);
	claim = mmap(NULL, CLAIM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0);
	close(cfd);
	h.claim = claim == MAP_FAILED ? NULL : claim;
	h.conn_limit = connection_limit();
	h.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!h.claim || h.wake < 0 || fcntl(lfd, F_SETFL, O_NONBLOCK) < 0 || !(d = start_daemon(lfd))) {
		say(h.fd, "ERR libmicrohttpd could not serve the API socket");
		return 1;
	}
	/* every thread of the helper (libmicrohttpd's too) confined before brisk hears OK (docs/security.md) */
	if (seccomp_helper_wanted() && seccomp_configure(true) == 0)
		seccomp_enter(SECCOMP_API_HELPER);
	say(h.fd, "OK");
	/* A client that connected while the helper started has its request queued: pass it on now. */
	pthread_mutex_lock(&h.lock);
	__atomic_store_n(&h.serving, true, __ATOMIC_RELAXED);
	send_next();
	pthread_mutex_unlock(&h.lock);
	serve();
	drain(d);
	_exit(0); /* no MHD_stop_daemon: connections still open are the kernel's to close */
}
