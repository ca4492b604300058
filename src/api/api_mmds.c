/*
 * api_mmds.c - the API's /mmds endpoints (docs/api.md), as Firecracker v1.7.0's (src/firecracker/src/api_server/
 * request/mmds.rs, rpc_interface.rs MmdsRequestHandler): GET /mmds, PUT /mmds (replace), PATCH /mmds (RFC 7396
 * merge), before and after InstanceStart alike, with no mmds-config needed (the store exists on first use).
 * The body is any JSON value (serde_json::Value), parsed strictly; the store's limit (--mmds-size-limit) gives
 * 413 (docs/security.md case 51). PUT /mmds/config is api.c's (a pre-boot configuration body).
 */
#include <errno.h>
#include <string.h>

#include <json-c/json.h>

#include "api_impl.h"
#include "brisk/mmds.h"

#define MMDS_JSON_DEPTH	  64 /* nesting the parser takes (serde_json's recursion limit is 128) */
#define ERR_LIMIT	  "MMDS limit exceeded error: The MMDS patch request doesn't fit."
#define ERR_UNINITIALIZED "MMDS error: The MMDS data store is not initialized."

/* The body as one JSON value and nothing but white space after it: 0 and *out (NULL for null), or a 400. */
static int parse(const char *body, size_t len, json_object **out, struct api_reply *r)
{
	json_tokener *t = json_tokener_new_ex(MMDS_JSON_DEPTH);
	enum json_tokener_error e;
	size_t end;

	if (!t)
		return api_fault(r, 500, "out of memory"), -ENOMEM;
	json_tokener_set_flags(t, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	*out = json_tokener_parse_ex(t, body ? body : "", (int)len);
	e = json_tokener_get_error(t);
	end = json_tokener_get_parse_end(t);
	json_tokener_free(t);
	while (e == json_tokener_success && end < len && strchr(" \t\r\n", body[end]) && body[end])
		end++;
	if (e != json_tokener_success || end != len || memchr(body ? body : "", 0, len)) {
		json_object_put(*out);
		api_fault(r, 400, "%s at byte %zu of the body",
			  e == json_tokener_continue || len == 0 ? "EOF while parsing a value"
			  : e != json_tokener_success		 ? json_tokener_error_desc(e)
								 : "trailing characters",
			  end);
		return -EINVAL;
	}
	return 0;
}

static void put(const char *body, size_t len, struct api_reply *r)
{
	json_object *v;
	int ret;

	if (parse(body, len, &v, r))
		return;
	ret = mmds_put(v);
	if (ret == -EFBIG)
		return api_fault(r, 413, ERR_LIMIT);
	if (ret)
		return api_fault(r, 500, "MMDS error: %s", strerror(-ret));
	r->status = 204;
}

static void patch(const char *body, size_t len, struct api_reply *r)
{
	json_object *v;
	int ret;

	if (parse(body, len, &v, r))
		return;
	ret = mmds_patch(v);
	if (ret == -EFBIG)
		return api_fault(r, 413, ERR_LIMIT);
	if (ret == -ENODATA)
		return api_fault(r, 400, ERR_UNINITIALIZED);
	if (ret)
		return api_fault(r, 500, "MMDS error: %s", strerror(-ret));
	r->status = 204;
}

bool api_route_mmds(enum api_method m, const char *p, const char *body, size_t len, struct api_reply *r)
{
	char *s;

	if (strcmp(p, "/mmds") == 0 && m == API_GET) {
		s = mmds_get_json();
		r->status = s ? 200 : 500;
		r->body = s;
		if (!s)
			api_fault(r, 500, "out of memory");
	} else if (strcmp(p, "/mmds") == 0 && m == API_PUT) {
		put(body, len, r);
	} else if (strcmp(p, "/mmds") == 0 && m == API_PATCH) {
		patch(body, len, r);
	} else if (strncmp(p, "/mmds/", 6) == 0 && m == API_PUT && strcmp(p, "/mmds/config") != 0) {
		api_fault(r, 400, "Unrecognized PUT request path `%s`.", p + 6);
	} else {
		return false;
	}
	return true;
}
