/* log.h - leveled logging to stderr. */
#ifndef BRISK_LOG_H
#define BRISK_LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

#include <stdbool.h>
#include <stdint.h>

void log_set_level(enum log_level level);
/*
 * From here on, messages never block (see log.c): call once, early in
 * main(), after fds 0-2 are known to be open.
 */
void log_init_nonblocking(void);
/* Sends messages to `fd` from now on (the API's logger: a non-blocking file or FIFO the caller keeps open). */
void log_set_fd(int fd);
/* Messages dropped because stderr would have blocked. */
uint64_t log_dropped(void);
/* Parses "error", "warn", "info", "debug". Returns 0 or -EINVAL. */
int log_parse_level(const char *s, enum log_level *out);
int log_enabled(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Rate limit for a kind of log line that a client, a guest or a flood can repeat: true for the first 8, then
 * the 16th, 32nd, 64th, ... occurrence (n: how many came before; count every one, log when this says so).
 * The one policy for every such line: the virtio transport and devices, the ACPI registers, the API.
 */
static inline bool log_ratelimit(uint64_t n)
{
	uint64_t nth = n + 1;

	return nth <= 8 || (nth & (nth - 1)) == 0;
}

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
