/* timeline_json.c - one boot's timeline as JSON ("brisk-timeline/1"): the writer brisk run uses, the reader bench uses.
 */
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "brisk/timeline_json.h"

#define SCHEMA "brisk-timeline/1"

/* µs with ns resolution, printed as such (not as %.17g). */
static json_object *us_json(int64_t ns)
{
	char s[32];

	snprintf(s, sizeof(s), "%.3f", (double)ns / 1e3);
	return json_object_new_double_s((double)ns / 1e3, s);
}

static json_object *phases_json(void)
{
	json_object *arr = json_object_new_array();

	for (int ev = 0; ev < TL__COUNT; ev++) {
		int64_t ns = timeline_get((enum tl_event)ev);
		json_object *o;

		if (ns < 0)
			continue;
		o = json_object_new_object();
		json_object_object_add(o, "name", json_object_new_string(timeline_name((enum tl_event)ev)));
		json_object_object_add(o, "us", us_json(ns));
		json_object_array_add(arr, o);
	}
	return arr;
}

static json_object *markers_json(void)
{
	json_object *arr = json_object_new_array();

	for (unsigned i = 0; i < timeline_nr_markers(); i++) {
		uint32_t value;
		int64_t ns;
		json_object *o;

		if (timeline_marker(i, &value, &ns))
			continue;
		o = json_object_new_object();
		json_object_object_add(o, "value", json_object_new_int64(value));
		json_object_object_add(o, "us", us_json(ns));
		json_object_array_add(arr, o);
	}
	return arr;
}

int timeline_write_json(int fd, const char *path, int status)
{
	json_object *root = json_object_new_object();
	int ret = 0;

	json_object_object_add(root, "schema", json_object_new_string(SCHEMA));
	json_object_object_add(root, "status", json_object_new_int(status));
	json_object_object_add(root, "unit", json_object_new_string("us"));
	json_object_object_add(root, "phases", phases_json());
	json_object_object_add(root, "markers", markers_json());
	if (json_object_to_fd(fd, root,
			      JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE)) {
		fprintf(stderr, "brisk run: cannot write --report-json %s: %s\n", path, json_util_get_last_err());
		ret = -EIO;
	}
	json_object_put(root);
	return ret;
}

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int add_item(struct boot_report *r, const char *name, double us)
{
	if (r->n >= TJ_MAX_ITEMS)
		return -1;
	snprintf(r->item[r->n].name, TJ_NAME_MAX, "%s", name);
	r->item[r->n].us = us;
	r->n++;
	return 0;
}

/* {"us": number} member of o, or -1. */
static int get_us(json_object *o, double *us)
{
	json_object *v;

	if (!json_object_object_get_ex(o, "us", &v) ||
	    !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)))
		return -1;
	*us = json_object_get_double(v);
	return 0;
}

/* Adds every marker of `markers`, named by value with a repeat count. */
static int add_markers(struct boot_report *r, json_object *markers)
{
	size_t n = json_object_array_length(markers);

	for (size_t i = 0; i < n; i++) {
		json_object *o = json_object_array_get_idx(markers, i), *v;
		char name[TJ_NAME_MAX];
		unsigned repeat = 1;
		int64_t value;
		double us;

		if (!json_object_object_get_ex(o, "value", &v) || !json_object_is_type(v, json_type_int) ||
		    get_us(o, &us))
			return -1;
		value = json_object_get_int64(v);
		for (size_t j = 0; j < i; j++) {
			json_object *w;

			if (json_object_object_get_ex(json_object_array_get_idx(markers, j), "value", &w) &&
			    json_object_get_int64(w) == value)
				repeat++;
		}
		if (repeat == 1)
			snprintf(name, sizeof(name), "boot marker 0x%" PRIx64, (uint64_t)value);
		else
			snprintf(name, sizeof(name), "boot marker 0x%" PRIx64 " #%u", (uint64_t)value, repeat);
		if (add_item(r, name, us))
			return -1;
	}
	return 0;
}

/* Phases in order, the markers just before "guest ended" (or at the end). */
static int add_phases(struct boot_report *r, json_object *phases, json_object *markers)
{
	size_t n = json_object_array_length(phases);
	int markers_done = 0;

	for (size_t i = 0; i < n; i++) {
		json_object *o = json_object_array_get_idx(phases, i), *v;
		double us;

		if (!json_object_object_get_ex(o, "name", &v) || !json_object_is_type(v, json_type_string) ||
		    get_us(o, &us))
			return -1;
		if (strcmp(json_object_get_string(v), timeline_name(TL_GUEST_END)) == 0 && !markers_done) {
			if (add_markers(r, markers))
				return -1;
			markers_done = 1;
		}
		if (add_item(r, json_object_get_string(v), us))
			return -1;
	}
	return markers_done ? 0 : add_markers(r, markers);
}

int timeline_read_json(const char *path, struct boot_report *r, char *err, size_t errlen)
{
	json_object *root = json_object_from_file(path), *v, *phases, *markers;
	int ret = 0;

	r->n = 0;
	if (!root)
		return fail(err, errlen, "%s: %s", path, json_util_get_last_err());
	if (!json_object_object_get_ex(root, "schema", &v) || !json_object_is_type(v, json_type_string) ||
	    strcmp(json_object_get_string(v), SCHEMA) != 0)
		ret = fail(err, errlen, "%s: not a %s file", path, SCHEMA);
	else if (!json_object_object_get_ex(root, "status", &v) || !json_object_is_type(v, json_type_int))
		ret = fail(err, errlen, "%s: no integer \"status\"", path);
	else if (!json_object_object_get_ex(root, "phases", &phases) || !json_object_is_type(phases, json_type_array) ||
		 !json_object_object_get_ex(root, "markers", &markers) ||
		 !json_object_is_type(markers, json_type_array))
		ret = fail(err, errlen, "%s: \"phases\" and \"markers\" must be arrays", path);
	else {
		r->status = json_object_get_int(v);
		if (add_phases(r, phases, markers))
			ret = fail(err, errlen, "%s: malformed phase or marker entry", path);
	}
	json_object_put(root);
	return ret;
}
