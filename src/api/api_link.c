/*
 * api_link.c - brisk's end of the HTTP API: creates the Unix socket, forks the HTTP helper on it (api_http.h)
 * and exchanges framed requests and replies with it over a SOCK_SEQPACKET socketpair (api_link.h).
 *
 * brisk creates the socket itself so that a bad path is brisk's error, with brisk's message, before any
 * helper runs; the helper inherits the listening descriptor and brisk closes its own copy (if the helper
 * dies, clients are refused instead of waiting in a backlog nobody accepts). The helper parses HTTP; what
 * reaches brisk is a length-checked message that api_wire.c validates again, since it comes from another
 * process.
 *
 * Why fork and not exec: the helper is brisk's own code (no second binary to find), and a jailed brisk has
 * neither /proc (so no /proc/self/exe to re-exec) nor, in general, a path to itself it could trust; fork
 * needs neither, and costs no exec, no loader and no second parse of anything. brisk forks before it has a
 * VM or a thread (api_link_start's contract), so the child is a copy of a small, single-threaded process;
 * it moves its three descriptors to 3, 4 and 5, closes every other one above 2, and never returns into
 * brisk's code (api_http_main ends in _exit).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brisk/api_http.h"
#include "brisk/api_link.h"
#include "brisk/errmsg.h"
#include "brisk/log.h"
#include "brisk/unix_listen.h"

#define LINK_SOCKBUF   (256 * 1024) /* one message of either kind fits, with room */
#define LISTEN_BACKLOG 64
#define READY_MS       2000 /* the helper's "OK" */
#define EXIT_MS	       1000 /* at close: the helper delivers the last reply, then SIGKILL */
#define HELPER_LISTEN  3    /* descriptor numbers in the helper */
#define HELPER_LINK    4
#define HELPER_CLAIM   5
#define CLAIM_SIZE     4096 /* the claim word's page (api_link.h) */
#define FRAG_WAIT_MS   1000 /* a reply fragment waits this long for room on the link */
#define TIMEOUT_ENV    "BRISK_API_REPLY_TIMEOUT_S"
#define TIMEOUT_MAX_S  3600
#define SPAWN_FD_MIN   10 /* descriptors handed to the helper are moved here first: no clash with 3, 4, 5 */

struct api_link {
	int fd; /* the seqpacket end */
	pid_t pid;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct unix_listener sock; /* the socket file brisk created: unlinked at close only if it is still this one */
	bool pending;		   /* a request was received and not yet answered */
	uint32_t id;
	uint64_t *claim;		/* the claim word, shared with the helper (api_link.h) */
	uint64_t expired;		/* requests dropped: the helper had answered them 503 before brisk took them */
	size_t max_payload;		/* the request body limit the helper enforces */
	char buf[API_WIRE_REQ_MAX + 1]; /* +1: MSG_TRUNC tells an oversized message; also body's NUL */
	unsigned char out[API_WIRE_REP_MAX]; /* one reply fragment */
};

/* ---- the socket --------------------------------------------------------------------------------------- */

static int listen_at(struct api_link *l, char *err, size_t errlen)
{
	return unix_listen(&l->sock, l->path, SOCK_STREAM, LISTEN_BACKLOG, "API socket", err, errlen);
}

static void unlink_ours(struct api_link *l)
{
	unix_listen_unlink(&l->sock);
}

/* ---- the helper --------------------------------------------------------------------------------------- */

/* The requests' deadline: $BRISK_API_REPLY_TIMEOUT_S (1..3600, for tests and slow hosts) or the default. */
static unsigned reply_timeout_ms(void)
{
	const char *env = getenv(TIMEOUT_ENV);
	char *end;
	unsigned long v;

	if (!env || !*env)
		return API_REPLY_TIMEOUT_S * 1000;
	errno = 0;
	v = strtoul(env, &end, 10);
	if (errno || *end || v < 1 || v > TIMEOUT_MAX_S) {
		log_warn("$%s=%s is not a number of seconds in 1..%d: %d s it is", TIMEOUT_ENV, env, TIMEOUT_MAX_S,
			 API_REPLY_TIMEOUT_S);
		return API_REPLY_TIMEOUT_S * 1000;
	}
	return (unsigned)v * 1000;
}

/* In the child of fork: the helper's descriptors at HELPER_LISTEN, HELPER_LINK and HELPER_CLAIM (dup2 clears
 * FD_CLOEXEC), every other one above stderr closed (brisk's end of the link among them), stdin /dev/null where
 * there is one (a jail may have none: then brisk's stays), then the helper's life. Never returns. */
static void helper_child(const struct api_link *l, int lfd, int hfd, int cfd, pid_t parent)
{
	struct api_http_args a = {.listen_fd = HELPER_LISTEN,
				  .link_fd = HELPER_LINK,
				  .claim_fd = HELPER_CLAIM,
				  .reply_timeout_ms = reply_timeout_ms(),
				  .body_max = l->max_payload,
				  .verbose = log_enabled(LOG_INFO),
				  .parent = parent};
	int null;

	if (dup2(lfd, HELPER_LISTEN) < 0 || dup2(hfd, HELPER_LINK) < 0 || dup2(cfd, HELPER_CLAIM) < 0)
		_exit(1); /* brisk sees the link close before "OK" */
	close_range(HELPER_CLAIM + 1, ~0u, 0);
	null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null >= 0 && null != STDIN_FILENO) {
		dup2(null, STDIN_FILENO);
		close(null);
	}
	api_http_main(&a);
}

/* Forks the helper (the file's header comment says why fork). */
static int fork_helper(struct api_link *l, int lfd, int hfd, int cfd, char *err, size_t errlen)
{
	pid_t parent = getpid(), pid;

	pid = fork();
	if (pid < 0)
		return err_set(err, errlen, -errno, "fork of the HTTP helper: %s", strerror(errno));
	if (pid == 0)
		helper_child(l, lfd, hfd, cfd, parent);
	l->pid = pid;
	return 0;
}

/* The helper's first message: "OK", or "ERR why" (copied to err). */
static int wait_ready(int fd, char *err, size_t errlen)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char msg[256];
	ssize_t n;

	if (poll(&p, 1, READY_MS) != 1)
		return err_set(err, errlen, -ETIMEDOUT, "the HTTP helper did not answer within %d ms", READY_MS);
	n = recv(fd, msg, sizeof(msg) - 1, MSG_DONTWAIT);
	if (n <= 0)
		return err_set(err, errlen, -EPIPE, "the HTTP helper exited before it was ready");
	msg[n] = '\0';
	if (strcmp(msg, "OK") == 0)
		return 0;
	return err_set(err, errlen, -EIO, "brisk-api: %s", strncmp(msg, "ERR ", 4) == 0 ? msg + 4 : msg);
}

/* Closes the link, waits for the helper (SIGKILL after EXIT_MS) and reaps it. Returns its wait status, or -1
 * when there was none to reap. */
static int stop_helper(struct api_link *l)
{
	int status = -1;

	if (l->fd >= 0)
		close(l->fd); /* the helper sees end-of-file, delivers what it holds, and exits */
	l->fd = -1;
	for (int ms = 0; l->pid > 0 && ms < EXIT_MS; ms += 5) {
		if (waitpid(l->pid, &status, WNOHANG) == l->pid) {
			l->pid = 0;
			return status;
		}
		nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
	}
	if (l->pid > 0) {
		kill(l->pid, SIGKILL);
		if (waitpid(l->pid, &status, 0) != l->pid)
			status = -1;
		l->pid = 0;
	}
	return status;
}

static int set_bufs(int fd)
{
	int size = LINK_SOCKBUF;

	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) < 0)
		return -errno;
	return 0;
}

/* The socketpair, both ends moved to SPAWN_FD_MIN or above (see spawn_helper). */
static int make_pair(int sv[2], char *err, size_t errlen)
{
	int raw[2], ret;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, raw) < 0)
		return err_set(err, errlen, -errno, "socketpair(SOCK_SEQPACKET): %s", strerror(errno));
	sv[0] = fcntl(raw[0], F_DUPFD_CLOEXEC, SPAWN_FD_MIN);
	sv[1] = fcntl(raw[1], F_DUPFD_CLOEXEC, SPAWN_FD_MIN);
	ret = sv[0] < 0 || sv[1] < 0 ? -errno : 0;
	close(raw[0]);
	close(raw[1]);
	if (!ret && ((ret = set_bufs(sv[0])) || (ret = set_bufs(sv[1]))))
		err_set(err, errlen, ret, "setsockopt SO_SNDBUF/SO_RCVBUF %d: %s", LINK_SOCKBUF, strerror(-ret));
	else if (ret)
		err_set(err, errlen, ret, "fcntl(F_DUPFD_CLOEXEC): %s", strerror(-ret));
	if (ret) {
		if (sv[0] >= 0)
			close(sv[0]);
		if (sv[1] >= 0)
			close(sv[1]);
	}
	return ret;
}

/* The host's condition rather than the path's: out of descriptors or memory. */
static bool host_errno(int ret)
{
	return ret == -EMFILE || ret == -ENFILE || ret == -ENOMEM || ret == -ENOBUFS;
}

/* The claim word's page: a memfd (moved to SPAWN_FD_MIN or above, *cfd) mapped shared in brisk. */
static int make_claim(struct api_link *l, int *cfd, char *err, size_t errlen)
{
	int raw = memfd_create("brisk-api-claim", MFD_CLOEXEC);
	void *p;

	*cfd = raw < 0 ? -1 : fcntl(raw, F_DUPFD_CLOEXEC, SPAWN_FD_MIN);
	if (raw >= 0)
		close(raw);
	if (*cfd < 0)
		return err_set(err, errlen, -errno, "memfd for the API's claim word: %s", strerror(errno));
	if (ftruncate(*cfd, CLAIM_SIZE) < 0)
		return err_set(err, errlen, -errno, "ftruncate of the API's claim word: %s", strerror(errno));
	p = mmap(NULL, CLAIM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, *cfd, 0);
	if (p == MAP_FAILED)
		return err_set(err, errlen, -errno, "mmap of the API's claim word: %s", strerror(errno));
	l->claim = p;
	return 0;
}

static int start(struct api_link *l, enum api_link_fault *fault, char *err, size_t errlen)
{
	int sv[2] = {-1, -1}, lfd, moved, cfd = -1, ret;

	*fault = API_LINK_FAULT_PATH;
	if ((lfd = listen_at(l, err, errlen)) < 0) {
		if (host_errno(lfd))
			*fault = API_LINK_FAULT_HOST;
		return lfd;
	}
	*fault = API_LINK_FAULT_HOST; /* from here on: the helper, the socketpair, descriptors */
	moved = fcntl(lfd, F_DUPFD_CLOEXEC, SPAWN_FD_MIN);
	ret = moved < 0 ? err_set(err, errlen, -errno, "fcntl(F_DUPFD_CLOEXEC): %s", strerror(errno)) : 0;
	close(lfd);
	if (!ret)
		ret = make_claim(l, &cfd, err, errlen);
	if (!ret && !(ret = make_pair(sv, err, errlen))) {
		ret = fork_helper(l, moved, sv[1], cfd, err, errlen);
		close(sv[1]);
		l->fd = sv[0];
	}
	if (cfd >= 0)
		close(cfd); /* the mapping stays */
	if (moved >= 0)
		close(moved); /* the helper's now: brisk keeps no copy */
	if (!ret && !(ret = wait_ready(l->fd, err, errlen)) && fcntl(l->fd, F_SETFL, O_NONBLOCK) < 0)
		ret = err_set(err, errlen, -errno, "fcntl(O_NONBLOCK): %s", strerror(errno));
	return ret;
}

static void free_link(struct api_link *l)
{
	if (l->claim)
		munmap(l->claim, CLAIM_SIZE);
	free(l);
}

int api_link_start(const char *sock_path, size_t max_payload, struct api_link **out, enum api_link_fault *fault,
		   char *err, size_t errlen)
{
	enum api_link_fault ignored;
	struct api_link *l;
	int ret;

	fault = fault ? fault : &ignored;
	*fault = API_LINK_FAULT_PATH;
	if ((ret = unix_path_check(sock_path, "API socket", err, errlen)))
		return ret;
	if (max_payload > API_BODY_LIMIT_MAX)
		return err_set(err, errlen, -EINVAL, "API payload limit %zu is over the largest brisk takes, %d bytes",
			       max_payload, API_BODY_LIMIT_MAX);
	*fault = API_LINK_FAULT_HOST;
	l = calloc(1, sizeof(*l));
	if (!l)
		return err_set(err, errlen, -ENOMEM, "out of memory for the API link");
	l->fd = -1;
	l->max_payload = max_payload ? max_payload : API_BODY_MAX;
	memcpy(l->path, sock_path, strlen(sock_path) + 1); /* checked: it fits */
	ret = start(l, fault, err, errlen);
	if (ret) {
		unlink_ours(l); /* before the helper goes, so nobody connects meanwhile */
		stop_helper(l);
		free_link(l);
		return ret;
	}
	*out = l;
	return 0;
}

/* ---- requests and replies ----------------------------------------------------------------------------- */

int api_link_fd(const struct api_link *l)
{
	return l->fd;
}

/* One message from the helper into l->buf: its length, -EAGAIN, or -errno with err. */
static ssize_t recv_msg(struct api_link *l, char *err, size_t errlen)
{
	ssize_t n = recv(l->fd, l->buf, sizeof(l->buf) - 1, MSG_DONTWAIT | MSG_TRUNC);

	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return -EAGAIN;
		if (errno == ECONNRESET || errno == EPIPE)
			return err_set(err, errlen, -EPIPE, "the HTTP helper has gone");
		return err_set(err, errlen, -errno, "recv from the HTTP helper: %s", strerror(errno));
	}
	if (n == 0)
		return err_set(err, errlen, -EPIPE, "the HTTP helper has gone");
	if ((size_t)n > sizeof(l->buf) - 1)
		return err_set(err, errlen, -EPROTO, "API request: %zd bytes, over the limit of %u", n,
			       API_WIRE_REQ_MAX);
	return n;
}

int api_link_recv(struct api_link *l, struct api_request *req, char *err, size_t errlen)
{
	uint32_t id;
	ssize_t n;
	int ret;

	for (;;) {
		if (l->fd < 0)
			return err_set(err, errlen, -EPIPE, "the HTTP helper has gone");
		if ((n = recv_msg(l, err, errlen)) < 0)
			return (int)n;
		if ((ret = api_wire_decode_request(l->buf, (size_t)n, &id, req, err, errlen)))
			return ret;
		if (api_claim_swap(l->claim, id, API_CLAIM_SENT, API_CLAIM_TAKEN))
			break;
		l->expired++; /* answered 503 by the helper already: it must not take effect now */
		log_debug("API: %s %s expired before brisk took it; dropped", api_method_name(req->method), req->path);
	}
	req->body[req->body_len] = '\0'; /* inside buf: n < sizeof(buf) */
	l->id = id;
	l->pending = true;
	return 0;
}

uint64_t api_link_expired(const struct api_link *l)
{
	return l->expired;
}

/* Sends one fragment, waiting up to FRAG_WAIT_MS for room while the helper reads. 0 or -errno. */
static int send_frag(struct api_link *l, size_t len)
{
	struct pollfd p = {.fd = l->fd, .events = POLLOUT};

	for (;;) {
		if (send(l->fd, l->out, len, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
			return 0;
		if (errno == ECONNRESET || errno == EPIPE)
			return -EPIPE;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (errno != EINTR && poll(&p, 1, FRAG_WAIT_MS) == 0)
			return -ETIMEDOUT;
	}
}

int api_link_reply(struct api_link *l, unsigned status, const char *json_body)
{
	size_t len = json_body ? strlen(json_body) : 0, off = 0, n;
	long m;
	int ret = 0;

	if (!l->pending || status < 100 || status > 599)
		return -EINVAL;
	if (len > API_REPLY_MAX)
		return -EMSGSIZE;
	do {
		n = len - off < API_WIRE_FRAG_MAX ? len - off : API_WIRE_FRAG_MAX;
		m = api_wire_encode_reply(l->out, sizeof(l->out), l->id, status, len, off, json_body + off, n);
		ret = m < 0 ? (int)m : send_frag(l, (size_t)m);
		off += n;
	} while (!ret && off < len);
	l->pending = false; /* answered, or a part sent and the rest lost: either way no second answer */
	return ret;
}

/* "exited with status N" / "was killed by signal N (NAME)" for a wait status. */
static void describe_status(int status, char *out, size_t len)
{
	if (status < 0)
		snprintf(out, len, "exited");
	else if (WIFSIGNALED(status))
		snprintf(out, len, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(out, len, "exited with status %d", WEXITSTATUS(status));
}

void api_link_lost(struct api_link *l, char *why, size_t whylen)
{
	unlink_ours(l);
	describe_status(stop_helper(l), why, whylen);
}

const char *api_link_path(const struct api_link *l)
{
	return l->path;
}

void api_link_close(struct api_link *l)
{
	if (!l)
		return;
	unlink_ours(l);
	stop_helper(l);
	free_link(l);
}
