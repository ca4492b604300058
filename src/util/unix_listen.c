/*
 * unix_listen.c - a listening Unix socket at a path, published only once it accepts (unix_listen.h): bound under a
 * temporary name in the same directory, listening, then renamed into place; a stale socket (its process died) is
 * replaced, anything else at the path is left untouched and refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/unix_listen.h"

static int fill_addr(struct sockaddr_un *sa, const char *path, const char *what, char *err, size_t errlen)
{
	size_t n = strlen(path);

	if (n == 0)
		return err_set(err, errlen, -EINVAL, "%s path is empty", what);
	if (n >= sizeof(sa->sun_path))
		return err_set(err, errlen, -ENAMETOOLONG, "%s path %s is %zu bytes, the limit is %zu", what, path, n,
			       sizeof(sa->sun_path) - 1);
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, n + 1);
	return 0;
}

int unix_path_check(const char *path, const char *what, char *err, size_t errlen)
{
	struct sockaddr_un sa;

	return fill_addr(&sa, path, what, err, errlen);
}

/*
 * What is at the socket path now: 0 nothing, 1 a stale socket (connect is refused: its process died; *old its
 * identity), -EEXIST a file that is not a socket, -EADDRINUSE a socket some process listens on.
 */
static int probe_target(const struct sockaddr_un *sa, int type, const char *what, struct stat *old, char *err,
			size_t errlen)
{
	int fd, ret;

	if (lstat(sa->sun_path, old) < 0)
		return errno == ENOENT ? 0
				       : err_set(err, errlen, -errno, "%s %s: %s", what, sa->sun_path, strerror(errno));
	if (!S_ISSOCK(old->st_mode))
		return err_set(err, errlen, -EEXIST, "%s path %s exists and is not a socket (left untouched)", what,
			       sa->sun_path);
	fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return err_set(err, errlen, -errno, "socket(AF_UNIX): %s", strerror(errno));
	ret = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ? 0 : -errno;
	close(fd);
	if (ret == -ECONNREFUSED) /* nobody listens: a socket left by a process that died */
		return 1;
	if (ret == 0 || ret == -EAGAIN)
		return err_set(err, errlen, -EADDRINUSE, "%s %s is in use by another process", what, sa->sun_path);
	return err_set(err, errlen, ret, "%s %s exists and cannot be probed: %s", what, sa->sun_path, strerror(-ret));
}

/*
 * A temporary name next to the final one: "DIR/.brisk-" and 8 random characters, shortened to what sun_path
 * leaves after DIR/ (at least one character). Returns 0 or -ENAMETOOLONG.
 */
static int temp_addr(const struct sockaddr_un *final, struct sockaddr_un *tmp)
{
	static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	const char *slash = strrchr(final->sun_path, '/');
	size_t dir = slash ? (size_t)(slash - final->sun_path) + 1 : 0;
	size_t room = sizeof(tmp->sun_path) - 1 - dir, n = 0;
	char name[16] = ".brisk-";
	uint64_t r;

	if (room == 0)
		return -ENAMETOOLONG;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint64_t)getpid() << 32 ^ (uint64_t)clock();
	for (n = room >= 15 ? 7 : 0; n < 15 && n < room; n++, r /= 36)
		name[n] = alnum[r % 36];
	*tmp = *final;
	memcpy(tmp->sun_path + dir, name, n);
	tmp->sun_path[dir + n] = '\0';
	return 0;
}

/* Binds fd to a fresh temporary name beside sa's path (*tmp); a name some file already has is skipped. */
static int bind_temp(int fd, const struct sockaddr_un *sa, struct sockaddr_un *tmp, const char *what, char *err,
		     size_t errlen)
{
	for (int attempt = 0; attempt < 32; attempt++) {
		if (temp_addr(sa, tmp))
			break;
		if (bind(fd, (const struct sockaddr *)tmp, sizeof(*tmp)) == 0)
			return 0;
		if (errno == ENOENT || errno == ENOTDIR)
			return err_set(err, errlen, -errno, "%s %s: its directory does not exist", what, sa->sun_path);
		if (errno != EADDRINUSE)
			return err_set(err, errlen, -errno, "bind %s %s (as %s): %s", what, sa->sun_path, tmp->sun_path,
				       strerror(errno));
	}
	return err_set(err, errlen, -ENAMETOOLONG, "%s %s: no free temporary name in its directory", what,
		       sa->sun_path);
}

/*
 * Gives the listening socket at tmp its final name without ever replacing anything but the stale socket
 * `old` (stale: 1): an absent path is taken only if still absent (RENAME_NOREPLACE, or link where the file
 * system has no such rename), a stale socket only if it is still the one probed.
 */
static int publish(const struct sockaddr_un *tmp, const struct sockaddr_un *sa, int stale, const struct stat *old,
		   const char *what, char *err, size_t errlen)
{
	struct stat now;

	if (stale) {
		if (lstat(sa->sun_path, &now) < 0 || now.st_dev != old->st_dev || now.st_ino != old->st_ino)
			return err_set(err, errlen, -EADDRINUSE, "%s %s was replaced by another process meanwhile",
				       what, sa->sun_path);
		if (rename(tmp->sun_path, sa->sun_path) == 0)
			return 0;
	} else if (renameat2(AT_FDCWD, tmp->sun_path, AT_FDCWD, sa->sun_path, RENAME_NOREPLACE) == 0) {
		return 0;
	} else if ((errno == EINVAL || errno == ENOSYS) && link(tmp->sun_path, sa->sun_path) == 0) {
		unlink(tmp->sun_path);
		return 0;
	}
	if (errno == EEXIST)
		return err_set(err, errlen, -EADDRINUSE, "%s %s was created by another process meanwhile", what,
			       sa->sun_path);
	return err_set(err, errlen, -errno, "naming %s %s: %s", what, sa->sun_path, strerror(errno));
}

int unix_listen(struct unix_listener *u, const char *path, int type, int backlog, const char *what, char *err,
		size_t errlen)
{
	struct sockaddr_un sa, tmp;
	struct stat old, st;
	int fd, stale, ret;

	u->bound = false;
	if ((ret = fill_addr(&sa, path, what, err, errlen)))
		return ret;
	memcpy(u->path, sa.sun_path, sizeof(u->path));
	if ((stale = probe_target(&sa, type, what, &old, err, errlen)) < 0)
		return stale;
	fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set(err, errlen, -errno, "socket(AF_UNIX): %s", strerror(errno));
	if ((ret = bind_temp(fd, &sa, &tmp, what, err, errlen)))
		goto fail;
	if (lstat(tmp.sun_path, &st) < 0 || listen(fd, backlog) < 0) {
		ret = err_set(err, errlen, -errno, "listen on %s %s: %s", what, path, strerror(errno));
		unlink(tmp.sun_path);
		goto fail;
	}
	if ((ret = publish(&tmp, &sa, stale, &old, what, err, errlen))) {
		unlink(tmp.sun_path);
		goto fail;
	}
	u->bound = true;
	u->dev = st.st_dev;
	u->ino = st.st_ino;
	return fd;
fail:
	close(fd);
	return ret;
}

void unix_listen_unlink(struct unix_listener *u)
{
	struct stat st;

	if (u->bound && lstat(u->path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == u->dev && st.st_ino == u->ino)
		unlink(u->path);
	u->bound = false;
}
