/* fdpass.c - one message with descriptors over a Unix socket, both ways (fdpass.h; unix(7) SCM_RIGHTS). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brisk/fdpass.h"

union fdpass_ctl {
	struct cmsghdr align;
	char buf[CMSG_SPACE(sizeof(int) * FDPASS_MAX)];
};

int fdpass_send(int sock, const void *buf, size_t len, const int *fds, unsigned nfds)
{
	union fdpass_ctl ctl;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (nfds > FDPASS_MAX)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EPIPE;
}

ssize_t fdpass_recv(int sock, void *buf, size_t len, int flags, int *fds, unsigned max, unsigned *nfds, bool *truncated)
{
	union fdpass_ctl ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
	ssize_t n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);

	*nfds = 0;
	*truncated = false;
	if (n < 0)
		return -errno;
	*truncated = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
			if (*nfds < max && *nfds < FDPASS_MAX) {
				fds[(*nfds)++] = fd;
			} else {
				close(fd);
				*truncated = true;
			}
		}
	}
	return n;
}
