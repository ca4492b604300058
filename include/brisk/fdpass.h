/* fdpass.h - one message with descriptors over a Unix socket (SCM_RIGHTS): the uffd handshake, the clone server. */
#ifndef BRISK_FDPASS_H
#define BRISK_FDPASS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define FDPASS_MAX 8 /* descriptors one message may carry */

/*
 * Sends buf[0..len) as one message with nfds (0..FDPASS_MAX) descriptors attached; EINTR retried, never
 * SIGPIPE. Returns 0 once all of it went, -EPIPE on a short write, -EINVAL for too many descriptors, or -errno.
 */
int fdpass_send(int sock, const void *buf, size_t len, const int *fds, unsigned nfds);

/*
 * Receives one message into buf (at most len bytes; recvmsg `flags`, descriptors close-on-exec): up to `max`
 * (<= FDPASS_MAX) of its descriptors into fds and their count into *nfds, any others closed. *truncated when
 * the data or the descriptors did not fit (more than `max` came). Returns the bytes received (0: the peer's
 * end) or -errno.
 */
ssize_t fdpass_recv(int sock, void *buf, size_t len, int flags, int *fds, unsigned max, unsigned *nfds,
		    bool *truncated);

#endif
