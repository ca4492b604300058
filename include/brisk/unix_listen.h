/*
 * unix_listen.h - a listening Unix socket at a path (the API's, the clone server's): the path appears only once
 * the socket accepts connections, so a client that connects as soon as it sees the file is never refused.
 */
#ifndef BRISK_UNIX_LISTEN_H
#define BRISK_UNIX_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct unix_listener {
	char path[108]; /* sun_path's size */
	bool bound;	/* the file unix_listen created, identified by dev and ino */
	dev_t dev;
	ino_t ino;
};

/* Whether `path` can name a Unix socket (not empty, fits sun_path): 0, or -EINVAL/-ENAMETOOLONG with err. */
int unix_path_check(const char *path, const char *what, char *err, size_t errlen);

/*
 * Listens on `path` with a socket of `type` (SOCK_STREAM or SOCK_SEQPACKET; SOCK_CLOEXEC is added): bound and
 * listening under a temporary name in the same directory, then renamed into place. An absent path is taken only
 * if still absent; a socket nobody listens on (its process died) is replaced only if still the one probed; a file
 * that is not a socket, or a socket in use, is refused and left untouched. `what` names the socket in messages
 * ("API socket"). Returns the listening fd and fills *u, or -errno with err (-EINVAL, -ENAMETOOLONG, -ENOENT,
 * -EEXIST, -EADDRINUSE: the path's fault; others the host's).
 */
int unix_listen(struct unix_listener *u, const char *path, int type, int backlog, const char *what, char *err,
		size_t errlen);

/* Unlinks the path only if it is still the socket unix_listen created (someone may have replaced it); once. */
void unix_listen_unlink(struct unix_listener *u);

#endif
