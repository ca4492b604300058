/*
 * log.c - leveled logging to stderr (results go to stdout, logs never do).
 *
 * Logging never blocks: a vCPU thread that logs (an unhandled port, say)
 * must not stall because whoever reads stderr stopped reading. So when
 * stderr is a pipe or a terminal, messages go through a private O_NONBLOCK
 * description of it (/proc/self/fd/2 reopened: stderr's own description is
 * shared with the shell and must keep its mode), sockets get MSG_DONTWAIT,
 * and a message that would block is dropped and counted (also in Firecracker's
 * logger.missed_log_count). Regular files never block and keep the shared
 * description (its offset, O_APPEND).
 *
 * Two line formats: brisk's own ("brisk: warn: ..."), and Firecracker's once a
 * Firecracker logger is configured (log_set_fc_format; fc_logger.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "brisk/fc_metrics.h"
#include "brisk/log.h"

#define LOG_OFF -1 /* below every level: nothing is logged */

static int current_level = LOG_WARN;
static int log_fd = STDERR_FILENO;
static int log_is_sock;
static int stderr_dup = -1; /* log_init_nonblocking's own non-blocking open of stderr, or -1 */
static _Atomic uint64_t dropped;

static const char *const level_names[] = {
    [LOG_ERROR] = "error",
    [LOG_WARN] = "warn",
    [LOG_INFO] = "info",
    [LOG_DEBUG] = "debug",
};

/* Firecracker's settings (log_set_fc_format); written by the main thread before or between messages. */
static struct {
	bool on, show_level, show_origin;
	char module[128]; /* empty: no filter */
	char id[65];
} fc = {.id = "anonymous-instance"};
static __thread char thread_name[32];
static pthread_t main_thread;
static bool main_known;

void log_set_level(enum log_level level)
{
	current_level = level;
}

void log_set_off(void)
{
	current_level = LOG_OFF;
}

void log_set_fc_format(bool show_level, bool show_origin, const char *module)
{
	fc.show_level = show_level;
	fc.show_origin = show_origin;
	snprintf(fc.module, sizeof(fc.module), "%s", module ? module : "");
	fc.on = true;
}

void log_set_instance_id(const char *id)
{
	snprintf(fc.id, sizeof(fc.id), "%s", id && *id ? id : "anonymous-instance");
}

void log_set_thread_name(const char *name)
{
	snprintf(thread_name, sizeof(thread_name), "%s", name ? name : "");
}

static const char *this_thread(void)
{
	if (thread_name[0])
		return thread_name;
	return main_known && pthread_equal(pthread_self(), main_thread) ? "main" : "-";
}

void log_module_of(const char *file, char *out, size_t cap)
{
	const char *p = strncmp(file, "src/", 4) == 0 ? file + 4 : file;
	size_t n = 0;

	for (; *p && n + 2 < cap; p++) {
		if (*p == '.' && strcmp(p, ".c") == 0)
			break;
		if (*p == '/') {
			out[n++] = ':';
			out[n++] = ':';
		} else {
			out[n++] = *p;
		}
	}
	out[n < cap ? n : cap - 1] = 0;
}

/* Firecracker v1.7.0's record.level() as its log crate prints it. */
static const char *const fc_level_names[] = {
    [LOG_ERROR] = "ERROR",
    [LOG_WARN] = "WARN",
    [LOG_INFO] = "INFO",
    [LOG_DEBUG] = "DEBUG",
};

int log_fc_line(char *buf, size_t cap, enum log_level level, const char *file, int line, const char *msg)
{
	struct timespec ts;
	struct tm tm;
	char lvl[16] = "", origin[160] = "";
	int n;

	/* Firecracker prints its LocalTime; brisk prints UTC, which is what its jail (no /etc/localtime) shows. */
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	if (fc.show_level)
		snprintf(lvl, sizeof(lvl), ":%s", fc_level_names[level]);
	if (fc.show_origin)
		snprintf(origin, sizeof(origin), ":%s:%d", file, line);
	n = snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%09ld [%s:%s%s%s] %s\n", tm.tm_year + 1900, tm.tm_mon + 1,
		     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec, fc.id, this_thread(), lvl, origin, msg);
	if (n >= (int)cap) {
		n = (int)cap - 1;
		buf[n - 1] = '\n';
	}
	return n;
}

/* Firecracker's module filter: the message's module starts with the configured one. */
static bool module_wanted(const char *file)
{
	char mod[128];

	if (!fc.module[0])
		return true;
	log_module_of(file, mod, sizeof(mod));
	return strncmp(mod, fc.module, strlen(fc.module)) == 0;
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

	main_thread = pthread_self();
	main_known = true;
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
		log_fd = stderr_dup = fd; /* else: stderr as it is (a /proc-less chroot, say) */
}

void log_reopen_stderr(void)
{
	if (log_fd != stderr_dup && log_fd != STDERR_FILENO)
		return; /* a log file of the process's (log_set_fd) stays */
	if (stderr_dup >= 0)
		close(stderr_dup);
	stderr_dup = -1;
	log_fd = STDERR_FILENO;
	log_is_sock = 0;
	log_init_nonblocking();
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
	return (int)level <= current_level;
}

/* brisk's own line: "brisk: <level>: <message>\n". */
static int brisk_line(char *buf, size_t cap, enum log_level level, const char *msg)
{
	int n = snprintf(buf, cap, "brisk: %s: %s\n", level_names[level], msg);

	if (n >= (int)cap) {
		n = (int)cap - 1;
		buf[n - 1] = '\n';
	}
	return n;
}

void log_msg_at(enum log_level level, const char *file, int line, const char *fmt, ...)
{
	char msg[1024], buf[1400];
	va_list ap;
	int n;

	if (!log_enabled(level) || (fc.on && !module_wanted(file)))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One write per message (under PIPE_BUF: atomic on a FIFO) so lines from several threads don't interleave. */
	n = fc.on ? log_fc_line(buf, sizeof(buf), level, file, line, msg) : brisk_line(buf, sizeof(buf), level, msg);
	if (log_is_sock ? send(log_fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0
			: write(log_fd, buf, (size_t)n) < 0) {
		atomic_fetch_add(&dropped, 1); /* EAGAIN: the reader stalled; never wait for it */
		fcm_inc(fcm_logger, FCM_LOGGER_missed_log_count);
	}
}
