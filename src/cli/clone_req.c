/* clone_req.c - the clone server's messages (clone.h): requests parsed strictly, replies built and read. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "brisk/clone.h"
#include "brisk/errmsg.h"
#include "brisk/json_strict.h"

#define WHY_MAX 600 /* bytes of an error's text: escaped (at most 6 bytes each) it still fits CLONE_MSG_MAX */

/* An absolute path without NUL, shorter than `size`, into out. */
static int get_path(json_object *v, const char *name, char *out, size_t size, const struct fcj *c)
{
	const char *s;
	size_t n;

	if (!json_object_is_type(v, json_type_string))
		return fcj_fail(c, "%s must be a string", name);
	s = json_object_get_string(v);
	n = (size_t)json_object_get_string_len(v);
	if (n == 0 || s[0] != '/')
		return fcj_fail(c, "%s must be an absolute path (the server's working directory is not yours)", name);
	if (strlen(s) != n)
		return fcj_fail(c, "%s contains a NUL byte", name);
	if (n >= size)
		return fcj_fail(c, "%s is %zu bytes, the limit is %zu", name, n, size - 1);
	memcpy(out, s, n + 1);
	return 0;
}

/* vsock_override: {"uds_path": PATH}, as Firecracker's snapshot/load takes it (brisk's wire: nothing else). */
static int get_vsock(json_object *v, struct clone_req *r, const struct fcj *c)
{
	json_object *path;

	if (!json_object_is_type(v, json_type_object) || json_object_object_length(v) != 1 ||
	    !json_object_object_get_ex(v, "uds_path", &path))
		return fcj_fail(c, "vsock_override must be an object with only uds_path");
	return get_path(path, "vsock_override.uds_path", r->vsock_uds, sizeof(r->vsock_uds), c);
}

int clone_req_parse(const char *msg, size_t n, unsigned nfds, struct clone_req *r, char *err, size_t errlen)
{
	const struct fcj c = {.what = "clone request", .err = err, .errlen = errlen};
	json_object *o;
	int ret;

	memset(r, 0, sizeof(*r));
	r->started_fd = -1;
	if (nfds != 0 && nfds != CLONE_FDS)
		return fcj_fail(&c, "%u descriptors came with it: send none or %d (stdin, stdout, stderr)", nfds,
				CLONE_FDS);
	if (n >= CLONE_MSG_MAX)
		return fcj_fail(&c, "longer than %d bytes", CLONE_MSG_MAX - 1);
	if ((ret = fcj_parse(&c, msg, n, &o)))
		return ret;
	json_object_object_foreach(o, key, v)
	{
		if (strcmp(key, "report_json") == 0)
			ret = get_path(v, "report_json", r->report_json, sizeof(r->report_json), &c);
		else if (strcmp(key, "vsock_override") == 0)
			ret = get_vsock(v, r, &c);
		else
			ret = fcj_fail(&c, "unknown member \"%s\" (a request has only report_json and vsock_override)",
				       key);
		if (ret)
			break;
	}
	json_object_put(o);
	return ret;
}

/* One object as compact text into buf (CLONE_MSG_MAX bytes); returns its length. Consumes o. */
static size_t emit(char *buf, json_object *o)
{
	const char *s = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : NULL;
	size_t n = s ? strlen(s) : 0;

	if (!s || n >= CLONE_MSG_MAX) { /* out of memory: a reply that still parses */
		n = (size_t)snprintf(buf, CLONE_MSG_MAX, "{\"error\":\"out of memory\",\"exit_code\":4}");
	} else {
		memcpy(buf, s, n + 1);
	}
	json_object_put(o);
	return n;
}

static size_t one_int(char *buf, const char *key, long v)
{
	json_object *o = json_object_new_object();

	if (o && json_object_object_add(o, key, json_object_new_int64(v))) {
		json_object_put(o);
		o = NULL;
	}
	return emit(buf, o);
}

size_t clone_reply_pid(char *buf, pid_t pid)
{
	return one_int(buf, "pid", (long)pid);
}

size_t clone_reply_exit(char *buf, int code)
{
	return one_int(buf, "exit_code", code);
}

size_t clone_reply_error(char *buf, const char *why, int code)
{
	json_object *o = json_object_new_object();
	size_t n = strnlen(why, WHY_MAX);

	if (o && (json_object_object_add(o, "error", json_object_new_string_len(why, (int)n)) ||
		  json_object_object_add(o, "exit_code", json_object_new_int(code)))) {
		json_object_put(o);
		o = NULL;
	}
	return emit(buf, o);
}

static int get_long(json_object *v, const char *key, long min, long max, long *out, const struct fcj *c)
{
	int64_t x;

	if (!json_object_is_type(v, json_type_int))
		return fcj_fail(c, "%s must be an integer", key);
	x = json_object_get_int64(v);
	if (x < min || x > max)
		return fcj_fail(c, "%s %lld is out of range", key, (long long)x);
	*out = (long)x;
	return 0;
}

int clone_reply_parse(const char *msg, size_t n, struct clone_reply *r, char *err, size_t errlen)
{
	const struct fcj c = {.what = "clone server's reply", .err = err, .errlen = errlen};
	json_object *o, *v;
	int ret;

	memset(r, 0, sizeof(*r));
	if ((ret = fcj_parse(&c, msg, n, &o)))
		return ret;
	if (json_object_object_get_ex(o, "pid", &v)) {
		r->kind = CLONE_REPLY_PID;
		ret = json_object_object_length(o) == 1 ? get_long(v, "pid", 1, INT_MAX, &r->value, &c)
							: fcj_fail(&c, "pid comes alone");
	} else if (json_object_object_get_ex(o, "error", &v)) {
		json_object *code;

		r->kind = CLONE_REPLY_ERROR;
		if (!json_object_is_type(v, json_type_string) || !json_object_object_get_ex(o, "exit_code", &code) ||
		    json_object_object_length(o) != 2)
			ret = fcj_fail(&c, "an error is a string with an exit_code");
		else if (!(ret = get_long(code, "exit_code", 1, 255, &r->value, &c)))
			snprintf(r->why, sizeof(r->why), "%s", json_object_get_string(v));
	} else if (json_object_object_get_ex(o, "exit_code", &v) && json_object_object_length(o) == 1) {
		r->kind = CLONE_REPLY_EXIT;
		ret = get_long(v, "exit_code", 0, 255, &r->value, &c);
	} else {
		ret = fcj_fail(&c, "neither pid, exit_code nor error");
	}
	json_object_put(o);
	return ret;
}
