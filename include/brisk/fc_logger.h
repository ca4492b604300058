/*
 * fc_logger.h - Firecracker's logger (v1.7.0 src/vmm/src/logger/logging.rs; docs/api.md, "Logger"): where the
 * log goes, its level, and its line format, set from PUT /logger, a config file's "logger" and the
 * command line's --log-path, --level, --show-level, --show-log-origin and --module.
 */
#ifndef BRISK_FC_LOGGER_H
#define BRISK_FC_LOGGER_H

#include <stdbool.h>
#include <stddef.h>

#include "brisk/fc_config.h"

/*
 * Applies `l` (every field: the caller merges an update into the current settings, fc_parse_logger): when
 * `open_path` and l->log_path is set, that file or FIFO is opened first (appended, never blocking; a FIFO
 * read-write so it needs no reader yet, as Firecracker's O_RDWR|O_NONBLOCK; through the output guard, file.h:
 * the caller adds the VM's files first, vm_config_guard) and becomes the log's destination, the previous one
 * closed; then the level (Off: nothing is logged; Trace: as Debug), and Firecracker's line format with
 * show_level, show_log_origin and the module filter. Nothing changes when the open fails: returns -errno with
 * `err` naming "logger: log_path". Returns 0 otherwise. Main thread.
 */
int fc_logger_configure(const struct fc_logger *l, bool open_path, char *err, size_t errlen);

#endif
