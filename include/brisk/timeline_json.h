/* timeline_json.h - one boot's timeline as JSON ("brisk-timeline/1"): written by brisk run, read by bench/compare. */
#ifndef BRISK_TIMELINE_JSON_H
#define BRISK_TIMELINE_JSON_H

#include "brisk/timeline.h"

#define TJ_NAME_MAX  48 /* longest phase name, NUL included */
#define TJ_MAX_ITEMS (TL__COUNT + TL_MAX_MARKERS)

/*
 * Writes this process's timeline and `status` (the exit status brisk run is
 * about to return) to `fd`, an output opened when brisk run started
 * (file_open_output; `path` is for messages):
 *   {"schema": "brisk-timeline/1", "status": S, "unit": "us",
 *    "phases": [{"name": "VM created", "us": 812.4}, ...],   (only phases reached, in order)
 *    "markers": [{"value": 1, "us": 2301.9}, ...]}            (boot markers in arrival order)
 * Times are µs since exec (timeline.h). Returns 0 or -EIO (message on stderr).
 */
int timeline_write_json(int fd, const char *path, int status);

/* One boot read back: flattened, named samples in timeline order. */
struct boot_report {
	int status;
	size_t n;
	struct {
		char name[TJ_NAME_MAX];
		double us;
	} item[TJ_MAX_ITEMS];
};

/*
 * Reads a "brisk-timeline/1" file into `r`: every phase by name, and every
 * marker as "boot marker 0xV" placed before "guest ended" (as brisk run
 * --timeline prints it); the k-th repeat (k >= 2) of a value within the boot
 * is "boot marker 0xV #k". Returns 0, or -EINVAL (unreadable, not this
 * schema, malformed) with a message into err[errlen].
 */
int timeline_read_json(const char *path, struct boot_report *r, char *err, size_t errlen);

#endif
