/* fc_logger.c - Firecracker's logger over brisk's log (fc_logger.h). */
#include <unistd.h>

#include "brisk/fc_logger.h"
#include "brisk/file.h"
#include "brisk/log.h"

/* The log file fc_logger_configure opened last (-1: none): kept open for the process's life, as Firecracker's. */
static int log_file = -1;

/* Firecracker's levels onto brisk's: Trace has no messages of its own in brisk, so it is Debug. */
static void set_level(enum fc_log_level level)
{
	static const enum log_level map[] = {
	    [FC_LOG_ERROR] = LOG_ERROR, [FC_LOG_WARNING] = LOG_WARN, [FC_LOG_INFO] = LOG_INFO,
	    [FC_LOG_DEBUG] = LOG_DEBUG, [FC_LOG_TRACE] = LOG_DEBUG,
	};

	if (level == FC_LOG_OFF)
		log_set_off();
	else
		log_set_level(map[level]);
}

int fc_logger_configure(const struct fc_logger *l, bool open_path, char *err, size_t errlen)
{
	if (open_path && l->log_path) {
		int fd = file_open_output(l->log_path, "logger: log_path", FILE_OUT_APPEND, true, err, errlen);

		if (fd < 0)
			return fd;
		log_set_fd(fd);
		if (log_file >= 0)
			close(log_file);
		log_file = fd;
	}
	set_level(l->level);
	log_set_fc_format(l->show_level, l->show_log_origin, l->module);
	return 0;
}
