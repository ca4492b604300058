/* log.c - leveled logging to stderr (results go to stdout, logs never do). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "brisk/log.h"

static enum log_level current_level = LOG_WARN;

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
	fwrite(buf, 1, (size_t)n, stderr);
}
