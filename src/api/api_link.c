/*
 * api_link.c - brisk's end of the HTTP API: creates the Unix socket, starts the brisk-api helper on it and
 * exchanges framed requests and replies with it over a SOCK_SEQPACKET socketpair (api_link.h).
 *
 * brisk creates the socket itself so that a bad path is brisk's error, with brisk's message, before any
 * helper runs; the helper inherits the listening descriptor and brisk closes its own copy (if the helper
 * dies, clients are refused instead of waiting in a backlog nobody accepts). The helper parses HTTP; what
 * reaches brisk is a length-checked message that api_wire.c validates again, since it comes from another
 * process.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brisk/api_link.h"
#include "brisk/errmsg.h"
#include "brisk/helper.h"
#include "brisk/log.h"

#define LINK_SOCKBUF   (256 * 1024) /* one message of either kind fits, with room */
#define LISTEN_BACKLOG 64
#define READY_MS       2000 /* the helper's "OK" */
#define EXIT_MS	       1000 /* at close: the helper delivers the last reply, then SIGKILL */
#define HELPER_LISTEN  3    /* descriptor numbers in the helper */
#define HELPER_LINK    4
#define SPAWN_FD_MIN   10 /* descriptors handed to posix_spawn are moved here first: no clash with 3 and 4 */

extern char **environ;

struct api_link {
	int fd; /* the seqpacket end */
	pid_t pid;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	bool bound; /* the socket file brisk created: unlinked at close only if it is still this one */
	dev_t dev;
	ino_t ino;
	bool pending; /* a request was received and not yet answered */
	uint32_t id;
	char buf[API_WIRE_REQ_MAX + 1]; /* +1: MSG_TRUNC tells an oversized message; also body's NUL */
};

/* ---- the socket --------------------------------------------------------------------------------------- */

static int fill_addr(struct sockaddr_un *sa, const char *path, char *err, size_t errlen)
{
	size_t n = strlen(path);

	if (n == 0)
		return err_set(err, errlen, -EINVAL, "API socket path is empty");
	if (n >= sizeof(sa->sun_path))
		return err_set(err, errlen, -ENAMETOOLONG, "API socket path %s is %zu bytes, the limit is %zu", path, n,
			       sizeof(sa->sun_path) - 1);
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, n + 1);
	return 0;
}

/* The path exists: -EEXIST for a non-socket, -EADDRINUSE for a live socket, 0 after unlinking a stale one. */
static int clear_stale(const struct sockaddr_un *sa, char *err, size_t errlen)
{
	struct stat st;
	int fd, ret;

	if (lstat(sa->sun_path, &st) < 0)
		return errno == ENOENT
			   ? 0
			   : err_set(err, errlen, -errno, "API socket %s: %s", sa->sun_path, strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return err_set(err, errlen, -EEXIST, "API socket path %s exists and is not a socket (left untouched)",
			       sa->sun_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return err_set(err, errlen, -errno, "socket(AF_UNIX): %s", strerror(errno));
	ret = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ? 0 : -errno;
	close(fd);
	if (ret == -ECONNREFUSED) { /* nobody listens: a socket left by a process that died */
		if (unlink(sa->sun_path) < 0 && errno != ENOENT)
			return err_set(err, errlen, -errno, "removing stale API socket %s: %s", sa->sun_path,
				       strerror(errno));
		return 0;
	}
	if (ret == 0 || ret == -EAGAIN)
		return err_set(err, errlen, -EADDRINUSE, "API socket %s is in use by another process", sa->sun_path);
	return err_set(err, errlen, ret, "API socket %s exists and cannot be probed: %s", sa->sun_path, strerror(-ret));
}

static int bind_once(int fd, const struct sockaddr_un *sa, char *err, size_t errlen)
{
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		return 0;
	if (errno == EADDRINUSE)
		return -EADDRINUSE;
	if (errno == ENOENT || errno == ENOTDIR)
		return err_set(err, errlen, -errno, "API socket %s: its directory does not exist", sa->sun_path);
	return err_set(err, errlen, -errno, "bind API socket %s: %s", sa->sun_path, strerror(errno));
}

/* Binds and listens on l->path; records the file's identity for api_link_close. Returns the fd or -errno. */
static int listen_at(struct api_link *l, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, ret;

	if ((ret = fill_addr(&sa, l->path, err, errlen)))
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set(err, errlen, -errno, "socket(AF_UNIX): %s", strerror(errno));
	ret = bind_once(fd, &sa, err, errlen);
	if (ret == -EADDRINUSE && (ret = clear_stale(&sa, err, errlen)) == 0 &&
	    (ret = bind_once(fd, &sa, err, errlen)) == -EADDRINUSE)
		ret = err_set(err, errlen, ret, "API socket %s was created by another process meanwhile", l->path);
	if (ret)
		goto fail;
	if (lstat(l->path, &st) < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
		ret = err_set(err, errlen, -errno, "listen on API socket %s: %s", l->path, strerror(errno));
		unlink(l->path);
		goto fail;
	}
	l->bound = true;
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	return fd;
fail:
	close(fd);
	return ret;
}

/* Unlinks the socket path only if it is still the file brisk bound (someone may have replaced it). */
static void unlink_ours(const struct api_link *l)
{
	struct stat st;

	if (l->bound && lstat(l->path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == l->dev && st.st_ino == l->ino)
		unlink(l->path);
}

/* ---- the helper --------------------------------------------------------------------------------------- */

static int spawn_helper(struct api_link *l, int lfd, int hfd, char *err, size_t errlen)
{
	char path[PATH_MAX], lbuf[16], hbuf[16];
	char *argv[] = {path, "--listen-fd", lbuf, "--link-fd", hbuf, log_enabled(LOG_INFO) ? "--verbose" : NULL, NULL};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dfl;
	int ret;

	if ((ret = helper_find("brisk-api", "BRISK_API_HELPER", path, sizeof(path))))
		return err_set(err, errlen, ret,
			       "the brisk-api helper was not found next to brisk (or $BRISK_API_HELPER): %s",
			       strerror(-ret));
	snprintf(lbuf, sizeof(lbuf), "%d", HELPER_LISTEN);
	snprintf(hbuf, sizeof(hbuf), "%d", HELPER_LINK);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, lfd, HELPER_LISTEN); /* dup2 clears FD_CLOEXEC */
	posix_spawn_file_actions_adddup2(&fa, hfd, HELPER_LINK);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addclosefrom_np(&fa, HELPER_LINK + 1); /* whatever brisk left without CLOEXEC */
	/* brisk's blocked signals and ignored SIGPIPE are its own business: the helper starts clean */
	sigemptyset(&none);
	sigfillset(&dfl);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	ret = -posix_spawn(&l->pid, path, &fa, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	if (ret)
		return err_set(err, errlen, ret, "starting %s: %s", path, strerror(-ret));
	return 0;
}

/* The helper's first message: "OK", or "ERR why" (copied to err). */
static int wait_ready(int fd, char *err, size_t errlen)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char msg[256];
	ssize_t n;

	if (poll(&p, 1, READY_MS) != 1)
		return err_set(err, errlen, -ETIMEDOUT, "the brisk-api helper did not answer within %d ms", READY_MS);
	n = recv(fd, msg, sizeof(msg) - 1, MSG_DONTWAIT);
	if (n <= 0)
		return err_set(err, errlen, -EPIPE, "the brisk-api helper exited before it was ready");
	msg[n] = '\0';
	if (strcmp(msg, "OK") == 0)
		return 0;
	return err_set(err, errlen, -EIO, "brisk-api: %s", strncmp(msg, "ERR ", 4) == 0 ? msg + 4 : msg);
}

static void stop_helper(struct api_link *l)
{
	if (l->fd >= 0)
		close(l->fd); /* the helper sees end-of-file, delivers what it holds, and exits */
	l->fd = -1;
	for (int ms = 0; l->pid > 0 && ms < EXIT_MS; ms += 5) {
		if (waitpid(l->pid, NULL, WNOHANG) == l->pid) {
			l->pid = 0;
			return;
		}
		nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
	}
	if (l->pid > 0) {
		kill(l->pid, SIGKILL);
		waitpid(l->pid, NULL, 0);
		l->pid = 0;
	}
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

static int start(struct api_link *l, char *err, size_t errlen)
{
	int sv[2] = {-1, -1}, lfd, moved, ret;

	if ((lfd = listen_at(l, err, errlen)) < 0)
		return lfd;
	moved = fcntl(lfd, F_DUPFD_CLOEXEC, SPAWN_FD_MIN);
	ret = moved < 0 ? err_set(err, errlen, -errno, "fcntl(F_DUPFD_CLOEXEC): %s", strerror(errno)) : 0;
	close(lfd);
	if (!ret && !(ret = make_pair(sv, err, errlen))) {
		ret = spawn_helper(l, moved, sv[1], err, errlen);
		close(sv[1]);
		l->fd = sv[0];
	}
	if (moved >= 0)
		close(moved); /* the helper's now: brisk keeps no copy */
	if (!ret && !(ret = wait_ready(l->fd, err, errlen)) && fcntl(l->fd, F_SETFL, O_NONBLOCK) < 0)
		ret = err_set(err, errlen, -errno, "fcntl(O_NONBLOCK): %s", strerror(errno));
	return ret;
}

int api_link_start(const char *sock_path, struct api_link **out, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	struct api_link *l;
	int ret;

	if ((ret = fill_addr(&sa, sock_path, err, errlen)))
		return ret;
	l = calloc(1, sizeof(*l));
	if (!l)
		return err_set(err, errlen, -ENOMEM, "out of memory for the API link");
	l->fd = -1;
	memcpy(l->path, sa.sun_path, sizeof(l->path));
	ret = start(l, err, errlen);
	if (ret) {
		unlink_ours(l); /* before the helper goes, so nobody connects meanwhile */
		stop_helper(l);
		free(l);
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

int api_link_recv(struct api_link *l, struct api_request *req, char *err, size_t errlen)
{
	ssize_t n = recv(l->fd, l->buf, sizeof(l->buf) - 1, MSG_DONTWAIT | MSG_TRUNC);
	uint32_t id;
	int ret;

	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return -EAGAIN;
		if (errno == ECONNRESET || errno == EPIPE)
			return err_set(err, errlen, -EPIPE, "the brisk-api helper has gone");
		return err_set(err, errlen, -errno, "recv from brisk-api: %s", strerror(errno));
	}
	if (n == 0)
		return err_set(err, errlen, -EPIPE, "the brisk-api helper has gone");
	if ((size_t)n > sizeof(l->buf) - 1)
		return err_set(err, errlen, -EPROTO, "API request: %zd bytes, over the limit of %u", n,
			       API_WIRE_REQ_MAX);
	if ((ret = api_wire_decode_request(l->buf, (size_t)n, &id, req, err, errlen)))
		return ret;
	req->body[req->body_len] = '\0'; /* inside buf: n < sizeof(buf) */
	l->id = id;
	l->pending = true;
	return 0;
}

int api_link_reply(struct api_link *l, unsigned status, const char *json_body)
{
	size_t len = json_body ? strlen(json_body) : 0;
	char *msg;
	long n;

	if (!l->pending)
		return -EINVAL;
	msg = malloc(API_WIRE_REP_HDR + len);
	if (!msg)
		return -ENOMEM;
	n = api_wire_encode_reply(msg, API_WIRE_REP_HDR + len, l->id, status, json_body, len);
	if (n >= 0 && send(l->fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		n = errno == ECONNRESET ? -EPIPE : -errno;
	free(msg);
	if (n >= 0 || n == -EPIPE)
		l->pending = false;
	return n < 0 ? (int)n : 0;
}

void api_link_close(struct api_link *l)
{
	if (!l)
		return;
	unlink_ours(l);
	stop_helper(l);
	free(l);
}
