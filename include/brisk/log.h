/*
 * log.h - leveled logging to stderr, or to the Firecracker logger's file in its line format once one is
 * configured (fc_logger.h; docs/api.md, "Logger").
 */
#ifndef BRISK_LOG_H
#define BRISK_LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void log_set_level(enum log_level level);
/* No message at all from now on (Firecracker's level "Off"); log_set_level turns messages on again. */
void log_set_off(void);
/*
 * From here on, messages never block (see log.c): call once, early in
 * main(), after fds 0-2 are known to be open.
 */
void log_init_nonblocking(void);
/* After fd 2 was replaced (a clone server's child, dup2): log_init_nonblocking again on the new stderr. */
void log_reopen_stderr(void);
/* Sends messages to `fd` from now on (the API's logger: a non-blocking file or FIFO the caller keeps open). */
void log_set_fd(int fd);
/* Messages dropped because stderr would have blocked. */
uint64_t log_dropped(void);
/* Parses "error", "warn", "info", "debug". Returns 0 or -EINVAL. */
int log_parse_level(const char *s, enum log_level *out);
int log_enabled(enum log_level level);
/* One message from source `file`:`line` (log_msg passes the caller's). */
void log_msg_at(enum log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define log_msg(level, ...) log_msg_at(level, __FILE__, __LINE__, __VA_ARGS__)

/*
 * Firecracker's line format (v1.7.0 src/vmm/src/logger/logging.rs), on from log_set_fc_format:
 * "<UTC time with ns> [<instance id>:<thread>[:<LEVEL>][:<file>:<line>]] <message>". `module` (NULL: none)
 * keeps only messages whose module starts with it; a message's module is its source file under src/ with
 * "::" for "/" and no ".c" ("virtio::blk::blk", "api::api_vm"). Strings are copied.
 */
void log_set_fc_format(bool show_level, bool show_origin, const char *module);
/* Firecracker's instance id in those lines (--id; default "anonymous-instance"). Copied, at most 64 bytes. */
void log_set_instance_id(const char *id);
/* The calling thread's name in those lines ("fc_vcpu 0"; the main thread is "main", others "-"). Copied. */
void log_set_thread_name(const char *name);
/*
 * Formats one Firecracker line (with its newline) into buf[cap] for the message `msg`, at `level` from
 * file:line, with the settings above; returns its length (cut to cap - 1). For the log and its tests.
 */
int log_fc_line(char *buf, size_t cap, enum log_level level, const char *file, int line, const char *msg);
/* The module of source path `file` into out[cap] ("src/virtio/blk/blk.c" -> "virtio::blk::blk"). */
void log_module_of(const char *file, char *out, size_t cap);

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
