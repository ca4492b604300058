/*
 * api_helper.c - brisk-api, the HTTP/1.1 server of brisk's Firecracker-compatible API: libmicrohttpd on
 * the listening Unix socket brisk hands it, brisk on the SOCK_SEQPACKET socket beside it (api_link.h).
 *
 *   brisk-api --listen-fd N --link-fd M [--verbose]
 *
 * Why a process of its own: brisk is linked statically and Debian's libmicrohttpd cannot be (gnutls); and
 * it keeps HTTP parsing of whatever a client sends out of the monitor process. This helper does only HTTP:
 * each complete request is reduced to method, path and body and sent to brisk, which does the JSON and the
 * VM work and sends back a status and a JSON body.
 *
 * Threads: libmicrohttpd's one polling thread serves every connection without blocking; a request that is
 * complete is queued and its connection suspended (a slow client therefore never holds up another one or
 * brisk: brisk sees a request only when all of it has arrived). The main thread owns the socket to brisk:
 * it sends one request at a time (Firecracker's API thread also serves one at a time), reads the reply,
 * resumes the connection, and answers 503 itself when brisk has not replied within API_REPLY_TIMEOUT_S.
 *
 * Limits against hostile clients: at most CONN_LIMIT connections (more wait in the listen backlog), an idle
 * connection closed after IDLE_TIMEOUT_S, headers within HEADER_MEM bytes, bodies within API_BODY_MAX bytes.
 * Errors are answered as Firecracker's micro_http does: 400 with {"fault_message": ...} for a payload over
 * the limit or an unsupported method (libmicrohttpd answers malformed requests itself, 400 with an HTML
 * body). It exits when brisk closes its end of the socket (after delivering what it holds, at most
 * DRAIN_MS), or at once when brisk dies (PR_SET_PDEATHSIG). It writes to stderr only on errors.
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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "brisk/api_link.h"
#include "brisk/seccomp.h"

#define CONN_LIMIT     32
#define IDLE_TIMEOUT_S 10
#define HEADER_MEM     (16 * 1024)
#define DRAIN_MS       1000
#define FAULT_MAX      512
#define STR_(x)	       #x
#define STR(x)	       STR_(x)

enum req_state {
	RECEIVING, /* headers seen, body arriving */
	WAITING,   /* complete: queued for brisk or with brisk; the connection is suspended */
	ANSWERED,  /* a response is ready; the connection is resumed to send it */
	DONE,	   /* the response is queued with libmicrohttpd */
};

struct req {
	struct MHD_Connection *conn;
	enum req_state state;
	enum api_method method;
	char path[API_PATH_MAX];
	size_t path_len;
	char *body;
	size_t body_len, body_cap;
	uint32_t id;
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
	int fd;	  /* to brisk */
	int wake; /* eventfd: a request went to brisk, the main thread's poll takes its deadline */
	struct req *head, *tail;
	struct req *inflight;
	int64_t deadline_ms;
	uint32_t next_id;
	unsigned delivering; /* answered, not yet completed */
	bool brisk_gone;
	bool serving, verbose; /* after start-up, libmicrohttpd's messages only with --verbose */
	struct req *resume;    /* answered: resumed once the lock is dropped (see unlock_resume) */
	unsigned char msg[API_WIRE_REQ_MAX];
} h = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .wake = -1};

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
}

static void answer_fault(struct req *r, unsigned status, const char *text)
{
	char body[FAULT_MAX];

	answer(r, status, body, fault_json(body, sizeof(body), text));
}

/* ---- the queue to brisk (lock held) ------------------------------------------------------------------- */

/* Sends queued requests until one is with brisk or the queue is empty. */
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
		r->id = ++h.next_id;
		n = api_wire_encode_request(h.msg, sizeof(h.msg), r->id, r->method, r->path, r->path_len, r->body,
					    r->body_len);
		if (n >= 0 && send(h.fd, h.msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
			n = -errno;
		if (n < 0) {
			msg("sending a request to brisk: %s", strerror((int)-n));
			answer_fault(r, 503, "The request could not be passed to the VMM.");
			continue;
		}
		h.inflight = r;
		h.deadline_ms = now_ms() + API_REPLY_TIMEOUT_S * 1000;
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
		h.inflight = NULL; /* brisk's late reply no longer matches an id */
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

/* The first call, headers complete: checks what can be checked before any body arrives. */
static enum MHD_Result start_request(struct MHD_Connection *conn, const char *url, const char *method, void **con_cls)
{
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;
	const char *path = abs_path(url);
	struct req *r = calloc(1, sizeof(*r));

	if (!r)
		return MHD_NO;
	*con_cls = r;
	r->conn = conn;
	r->state = RECEIVING;
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

/* The request is complete: suspend the connection and queue the request for brisk. */
static enum MHD_Result forward(struct req *r)
{
	if (r->reject) {
		r->state = DONE;
		return queue_fault(r->conn, 400, "%s", r->reject);
	}
	pthread_mutex_lock(&h.lock);
	r->state = WAITING;
	MHD_suspend_connection(r->conn);
	enqueue(r);
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

	(void)cls, (void)version;
	if (!r)
		return start_request(conn, url, method, con_cls);
	switch (r->state) {
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

static void on_reply(const unsigned char *buf, size_t len)
{
	const char *body;
	size_t body_len;
	unsigned status;
	char err[160];
	uint32_t id;

	if (api_wire_decode_reply(buf, len, &id, &status, &body, &body_len, err, sizeof(err))) {
		msg("dropping a malformed reply from brisk: %s", err);
		return;
	}
	pthread_mutex_lock(&h.lock);
	if (h.inflight && h.inflight->id == id) { /* else: a reply after its request timed out */
		answer(h.inflight, status, body, body_len);
		h.inflight = NULL;
		send_next();
	}
	unlock_resume();
}

static int reply_timeout_ms(void)
{
	int64_t left;

	pthread_mutex_lock(&h.lock);
	left = h.inflight ? h.deadline_ms - now_ms() : -1;
	if (h.inflight && left <= 0) {
		answer_fault(h.inflight, 503, "The VMM did not answer in time.");
		h.inflight = NULL;
		send_next();
		left = h.inflight ? API_REPLY_TIMEOUT_S * 1000 : -1;
	}
	unlock_resume();
	return (int)left;
}

/* Serves brisk's replies until brisk closes the socket. */
static void serve(void)
{
	static unsigned char buf[API_WIRE_REP_MAX + 1];
	struct pollfd p[2] = {{.fd = h.fd, .events = POLLIN}, {.fd = h.wake, .events = POLLIN}};
	eventfd_t count;
	ssize_t n;

	for (;;) {
		if (poll(p, 2, reply_timeout_ms()) <= 0)
			continue;
		if (p[1].revents)
			eventfd_read(h.wake, &count);
		if (!p[0].revents)
			continue;
		n = recv(h.fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return;
		if (n > (ssize_t)API_WIRE_REP_MAX)
			msg("dropping a reply from brisk of %zd bytes (limit %u)", n, API_WIRE_REP_MAX);
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
	h.inflight = NULL;
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

static struct MHD_Daemon *start_daemon(int lfd)
{
	unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;

	/* the logger first: libmicrohttpd reports the options after it through it */
	return MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				MHD_OPTION_LISTEN_SOCKET, lfd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_LIMIT,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HEADER_MEM, MHD_OPTION_NOTIFY_COMPLETED,
				on_completed, NULL, MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL, MHD_OPTION_END);
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
	int lfd = -1;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--listen-fd") == 0 && i + 1 < argc)
			lfd = parse_fd(argv[++i]);
		else if (strcmp(argv[i], "--link-fd") == 0 && i + 1 < argc)
			h.fd = parse_fd(argv[++i]);
		else if (strcmp(argv[i], "--verbose") == 0)
			h.verbose = true;
		else
			lfd = -1;
	}
	if (lfd < 0 || h.fd < 0 || lfd == h.fd) {
		msg("usage: brisk-api --listen-fd N --link-fd M [--verbose] (started by brisk: src/api/api_link.c)");
		return 2;
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent) /* brisk died before PDEATHSIG was set (earlier: serve() sees the link close) */
		return 1;
	signal(SIGPIPE, SIG_IGN);
	close_range((unsigned)(lfd > h.fd ? lfd : h.fd) + 1, ~0u, 0);
	h.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (h.wake < 0 || fcntl(lfd, F_SETFL, O_NONBLOCK) < 0 || !(d = start_daemon(lfd))) {
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
