/*
 * log.c - leveled logging to stderr (results go to stdout, logs never do).
 *
 * Logging never blocks: a vCPU thread that logs (an unhandled port, say)
 * must not stall because whoever reads stderr stopped reading. So when
 * stderr is a pipe or a terminal, messages go through a private O_NONBLOCK
 * description of it (/proc/self/fd/2 reopened: stderr's own description is
 * shared with the shell and must keep its mode), sockets get MSG_DONTWAIT,
 * and a message that would block is dropped and counted. Regular files
 * never block and keep the shared description (its offset, O_APPEND).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/log.h"

static enum log_level current_level = LOG_WARN;
static int log_fd = STDERR_FILENO;
static int log_is_sock;
static _Atomic uint64_t dropped;

static const char *const level_names[] = {
    [LOG_ERROR] = "error",
    [LOG_WARN] = "warn",
    [LOG_INFO] = "info",
    [LOG_DEBUG] = "debug",
};

void log_set_level(enum log_level level)
{
	current_level = level;
}

int log_parse_level(const char *s, enum log_level *out)
{
	for (unsigned i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void log_init_nonblocking(void)
{
	struct stat st;
	int fd;

	if (log_fd != STDERR_FILENO || fstat(STDERR_FILENO, &st) != 0)
		return;
	if (S_ISSOCK(st.st_mode)) {
		log_is_sock = 1;
		return;
	}
	if (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
		return;
	fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd >= 0)
		log_fd = fd; /* else: stderr as it is (a /proc-less chroot, say) */
}

void log_set_fd(int fd)
{
	log_is_sock = 0;
	log_fd = fd;
}

uint64_t log_dropped(void)
{
	return atomic_load(&dropped);
}

int log_enabled(enum log_level level)
{
	return level <= current_level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	if (!log_enabled(level))
		return;
	/* One write per message so lines from several threads don't interleave. */
	n = snprintf(buf, sizeof(buf), "brisk: %s: ", level_names[level]);
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(buf) - 1)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (log_is_sock ? send(log_fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0
			: write(log_fd, buf, (size_t)n) < 0)
		atomic_fetch_add(&dropped, 1); /* EAGAIN: the reader stalled; never wait for it */
}
