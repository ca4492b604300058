/*
 * net_user.c - the virtio-net user-mode backend: frames go to and come from libslirp running in a helper
 * process, brisk-slirp (src/helpers/slirp_helper.c), over a SOCK_SEQPACKET socketpair, one frame per message.
 *
 * Why a process of its own: brisk is linked statically (docs/performance.md, start-up) and Debian ships
 * libslirp (and the GLib under it) only as a shared library; slirp also parses every guest packet in a
 * large C code base, so keeping it out of the VMM's address space is defence in depth (the helper can be
 * confined separately), and its sockets, timers and threads never meet brisk's. The cost is one copy and
 * one context switch per frame, which user-mode networking (slirp's own TCP stack) does not notice.
 *
 * The socket buffers bound what waits between the two (NET_USER_SOCKBUF each way): the helper drops
 * frames for the guest when brisk's side is full (slirp's TCP retransmits), brisk stops sending when the
 * helper's side is full (EAGAIN: back-pressure to the guest's transmit ring). The helper exits when the
 * socket closes and, should brisk die, on PR_SET_PDEATHSIG.
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
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brisk/helper.h"
#include "brisk/log.h"
#include "brisk/virtio_net.h"
#include "brisk/vm.h"

#define NET_USER_SOCKBUF (256 * 1024) /* bytes queued each way, at most */
#define HELPER_READY_MS	 5000	      /* the helper's "OK" or "ERR why" */
#define HELPER_EXIT_MS	 1000	      /* at destroy: then SIGKILL */
#define HELPER_FD	 3	      /* the socket's number in the helper */
#define HELPER_MAX_ARGS	 (10 + 2 * VM_NET_MAX_FWDS)

extern char **environ;

struct user {
	struct net_backend b;
	pid_t pid;
	bool waiting; /* net_user_start's helper: its "OK" not read yet (net_user_wait) */
};

static ssize_t user_send(struct net_backend *b, const struct virtio_net_hdr *hdr, const struct iovec *iov,
			 unsigned niov)
{
	struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = niov};
	ssize_t n;

	(void)hdr; /* no offloads are offered: the header says nothing slirp needs */
	n = sendmsg(b->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
	return n < 0 ? (errno == EWOULDBLOCK ? -EAGAIN : -errno) : n;
}

static ssize_t user_recv(struct net_backend *b, uint8_t *buf, size_t len)
{
	ssize_t n = recv(b->fd, buf + NET_HDR_SIZE, len - NET_HDR_SIZE, MSG_DONTWAIT | MSG_TRUNC);

	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (n == 0)
		return -EPIPE;
	if ((size_t)n > len - NET_HDR_SIZE)
		return -EMSGSIZE; /* truncated: the helper's MTU is ours, so never in practice */
	memset(buf, 0, NET_HDR_SIZE);
	return n + (ssize_t)NET_HDR_SIZE;
}

static int user_set_offload(struct net_backend *b, uint64_t features)
{
	(void)b, (void)features;
	return 0;
}

static void user_destroy(struct net_backend *b)
{
	struct user *u = (struct user *)b;

	if (b->fd >= 0)
		close(b->fd); /* the helper sees end-of-file and exits */
	for (int ms = 0; u->pid > 0 && ms < HELPER_EXIT_MS; ms += 10) {
		if (waitpid(u->pid, NULL, WNOHANG) == u->pid) {
			u->pid = 0;
			break;
		}
		nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
	}
	if (u->pid > 0) {
		kill(u->pid, SIGKILL);
		waitpid(u->pid, NULL, 0);
	}
	free(u);
}

static const struct net_backend_ops user_ops = {
    .send = user_send,
    .recv = user_recv,
    .set_offload = user_set_offload,
    .destroy = user_destroy,
};

int net_seqpacket_backend(int fd, pid_t pid, const char *name, struct net_backend **out)
{
	struct user *u = calloc(1, sizeof(*u));

	if (!u)
		return -ENOMEM;
	*u = (struct user){.b = {.ops = &user_ops, .fd = fd}, .pid = pid};
	snprintf(u->b.name, sizeof(u->b.name), "%s", name);
	*out = &u->b;
	return 0;
}

static void ip4(char *out, size_t len, uint32_t a)
{
	snprintf(out, len, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
}

/* The helper's argv: --fd 3 --net A.B.C.D/N --mtu M [--hostfwd tcp:H:P-G:P]... [--verbose]. */
static void helper_args(const struct vm_net *n, uint32_t mtu, char *path, char store[][64], char **argv)
{
	unsigned a = 0, s = 0;
	char net[20], host[20], guest[20];

	argv[a++] = path;
	argv[a++] = "--fd";
	snprintf(store[s], 64, "%d", HELPER_FD);
	argv[a++] = store[s++];
	argv[a++] = "--net";
	ip4(net, sizeof(net), n->user_net);
	snprintf(store[s], 64, "%s/%u", net, n->user_prefix);
	argv[a++] = store[s++];
	argv[a++] = "--mtu";
	snprintf(store[s], 64, "%u", mtu);
	argv[a++] = store[s++];
	for (unsigned i = 0; i < n->nr_fwds; i++) {
		const struct vm_net_fwd *f = &n->fwd[i];

		ip4(host, sizeof(host), f->host_addr);
		ip4(guest, sizeof(guest), f->guest_addr);
		argv[a++] = "--hostfwd";
		snprintf(store[s], 64, "%s:%s:%u-%s:%u", f->udp ? "udp" : "tcp", host, f->host_port, guest,
			 f->guest_port);
		argv[a++] = store[s++];
	}
	if (log_enabled(LOG_INFO))
		argv[a++] = "--verbose";
	argv[a] = NULL;
}

/* Waits for the helper's first message: "OK", or "ERR why" (copied to err). */
static int wait_ready(int fd, char *err, size_t errlen)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char msg[256];
	ssize_t n;

	if (poll(&p, 1, HELPER_READY_MS) != 1) {
		snprintf(err, errlen, "the brisk-slirp helper did not answer within %d ms", HELPER_READY_MS);
		return -ECHILD;
	}
	n = recv(fd, msg, sizeof(msg) - 1, 0);
	if (n <= 0) {
		snprintf(err, errlen, "the brisk-slirp helper exited before it was ready (see its message above)");
		return -ECHILD;
	}
	msg[n] = '\0';
	if (strcmp(msg, "OK") == 0)
		return 0;
	snprintf(err, errlen, "%s", strncmp(msg, "ERR ", 4) == 0 ? msg + 4 : msg);
	return -EINVAL;
}

static int set_bufs(int fd)
{
	int size = NET_USER_SOCKBUF;

	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) < 0)
		return -errno;
	return 0;
}

int net_user_start(const struct vm_net *n, uint32_t mtu, struct net_backend **out, char *err, size_t errlen)
{
	char path[PATH_MAX], store[4 + VM_NET_MAX_FWDS][64];
	char *argv[HELPER_MAX_ARGS];
	posix_spawn_file_actions_t fa;
	int sv[2], ret;
	pid_t pid;

	if ((ret = helper_find("brisk-slirp", "BRISK_SLIRP_HELPER", path, sizeof(path)))) {
		snprintf(err, errlen, "the brisk-slirp helper was not found next to brisk (or $BRISK_SLIRP_HELPER): %s",
			 strerror(-ret));
		return -ECHILD;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		ret = -errno;
		snprintf(err, errlen, "socketpair: %s", strerror(-ret));
		return ret;
	}
	if ((ret = set_bufs(sv[0])) || (ret = set_bufs(sv[1]))) {
		snprintf(err, errlen, "setsockopt SO_SNDBUF/SO_RCVBUF %d: %s", NET_USER_SOCKBUF, strerror(-ret));
		goto fail;
	}
	helper_args(n, mtu, path, store, argv);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, sv[1], HELPER_FD); /* clears FD_CLOEXEC, also when equal (glibc 2.29) */
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0); /* the terminal is the VM's */
	ret = -posix_spawn(&pid, path, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(sv[1]);
	sv[1] = -1;
	if (ret) {
		snprintf(err, errlen, "starting %s: %s", path, strerror(-ret));
		ret = -ECHILD;
		goto fail;
	}
	if (net_seqpacket_backend(sv[0], pid, "user", out)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	((struct user *)*out)->waiting = true;
	return 0;
fail:
	close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return ret;
}

int net_user_wait(struct net_backend *b, char *err, size_t errlen)
{
	struct user *u = (struct user *)b;
	int ret;

	if (b->ops != &user_ops || !u->waiting)
		return 0;
	ret = wait_ready(b->fd, err, errlen);
	if (!ret && fcntl(b->fd, F_SETFL, O_NONBLOCK) < 0) {
		ret = -errno;
		snprintf(err, errlen, "fcntl O_NONBLOCK on the helper's socket: %s", strerror(-ret));
	}
	if (!ret)
		u->waiting = false;
	return ret;
}

int net_user_open(const struct vm_net *n, uint32_t mtu, struct net_backend **out, char *err, size_t errlen)
{
	int ret = net_user_start(n, mtu, out, err, errlen);

	if (ret)
		return ret;
	ret = net_user_wait(*out, err, errlen);
	if (ret) {
		(*out)->ops->destroy(*out);
		*out = NULL;
	}
	return ret;
}
