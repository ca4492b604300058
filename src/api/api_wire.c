/*
 * api_wire.c - the framed messages between brisk and its HTTP helper process, brisk-api (format: api_link.h).
 * Pure functions: no I/O, no allocation. Each message comes from another process, so every length is
 * checked against the message's real size and its limit before anything is read.
 */
#include <errno.h>
#include <string.h>

#include "brisk/api_link.h"
#include "brisk/errmsg.h"

static uint32_t get_u32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void put_u32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, sizeof(v));
}

const char *api_method_name(enum api_method m)
{
	static const char *const names[] = {
	    [API_GET] = "GET", [API_PUT] = "PUT", [API_PATCH] = "PATCH", [API_DELETE] = "DELETE"};

	return (unsigned)m < API_OTHER ? names[m] : "OTHER";
}

/* The path's own rules: starts with '/', no NUL byte, fits api_request.path with its NUL. */
static int check_path(const char *path, size_t len, char *err, size_t errlen)
{
	if (len == 0 || len >= API_PATH_MAX)
		return err_set(err, errlen, -EPROTO, "API request: path_len %zu is outside 1..%d", len,
			       API_PATH_MAX - 1);
	if (path[0] != '/')
		return err_set(err, errlen, -EPROTO, "API request: path does not start with '/' (0x%02x)",
			       (unsigned char)path[0]);
	if (memchr(path, '\0', len))
		return err_set(err, errlen, -EPROTO, "API request: path holds a NUL byte");
	return 0;
}

int api_wire_decode_request(const void *msg, size_t len, uint32_t *id, struct api_request *req, char *err,
			    size_t errlen)
{
	const unsigned char *p = msg;
	uint32_t method, path_len, body_len;
	int ret;

	if (len < API_WIRE_REQ_HDR)
		return err_set(err, errlen, -EPROTO, "API request: %zu bytes, shorter than its %u-byte header", len,
			       API_WIRE_REQ_HDR);
	if (get_u32(p) != API_WIRE_REQ_MAGIC)
		return err_set(err, errlen, -EPROTO, "API request: bad magic 0x%08x", get_u32(p));
	method = get_u32(p + 8);
	path_len = get_u32(p + 12);
	body_len = get_u32(p + 16);
	if (method >= API_METHOD_COUNT)
		return err_set(err, errlen, -EPROTO, "API request: unknown method %u", method);
	if (body_len > API_BODY_LIMIT_MAX)
		return err_set(err, errlen, -EPROTO, "API request: body_len %u is over the limit of %d", body_len,
			       API_BODY_LIMIT_MAX);
	/* path_len is checked before the sum, so the sum cannot wrap (both are small) */
	if (path_len >= API_PATH_MAX || len != (size_t)API_WIRE_REQ_HDR + path_len + body_len)
		return err_set(err, errlen, -EPROTO, "API request: %zu bytes, but path_len %u and body_len %u", len,
			       path_len, body_len);
	if ((ret = check_path((const char *)p + API_WIRE_REQ_HDR, path_len, err, errlen)))
		return ret;
	*id = get_u32(p + 4);
	req->method = (enum api_method)method;
	memcpy(req->path, p + API_WIRE_REQ_HDR, path_len);
	req->path[path_len] = '\0';
	req->body = (char *)p + API_WIRE_REQ_HDR + path_len;
	req->body_len = body_len;
	return 0;
}

long api_wire_encode_request(void *out, size_t cap, uint32_t id, enum api_method method, const char *path,
			     size_t path_len, const void *body, size_t body_len)
{
	unsigned char *p = out;

	if ((unsigned)method >= API_METHOD_COUNT || body_len > API_BODY_LIMIT_MAX ||
	    check_path(path, path_len, NULL, 0))
		return -EINVAL;
	if (cap < API_WIRE_REQ_HDR + path_len + body_len)
		return -EMSGSIZE;
	put_u32(p, API_WIRE_REQ_MAGIC);
	put_u32(p + 4, id);
	put_u32(p + 8, (uint32_t)method);
	put_u32(p + 12, (uint32_t)path_len);
	put_u32(p + 16, (uint32_t)body_len);
	memcpy(p + API_WIRE_REQ_HDR, path, path_len);
	if (body_len)
		memcpy(p + API_WIRE_REQ_HDR + path_len, body, body_len);
	return (long)(API_WIRE_REQ_HDR + path_len + body_len);
}

int api_wire_decode_reply(const void *msg, size_t len, struct api_wire_frag *f, char *err, size_t errlen)
{
	const unsigned char *p = msg;
	uint32_t st, total, off;
	size_t n;

	if (len < API_WIRE_REP_HDR)
		return err_set(err, errlen, -EPROTO, "API reply: %zu bytes, shorter than its %u-byte header", len,
			       API_WIRE_REP_HDR);
	if (get_u32(p) != API_WIRE_REP_MAGIC)
		return err_set(err, errlen, -EPROTO, "API reply: bad magic 0x%08x", get_u32(p));
	st = get_u32(p + 8);
	total = get_u32(p + 12);
	off = get_u32(p + 16);
	n = len - API_WIRE_REP_HDR;
	if (st < 100 || st > 599)
		return err_set(err, errlen, -EPROTO, "API reply: status %u is outside 100..599", st);
	if (total > API_REPLY_MAX)
		return err_set(err, errlen, -EPROTO, "API reply: body_len %u is over the limit of %d", total,
			       API_REPLY_MAX);
	if (off > total || n > total - off || n > API_WIRE_FRAG_MAX || (n == 0 && total != 0))
		return err_set(err, errlen, -EPROTO, "API reply: a fragment of %zu bytes at offset %u of %u (limit %d)",
			       n, off, total, API_WIRE_FRAG_MAX);
	*f = (struct api_wire_frag){.id = get_u32(p + 4),
				    .status = st,
				    .body_len = total,
				    .offset = off,
				    .len = n,
				    .data = (const char *)p + API_WIRE_REP_HDR};
	return 0;
}

long api_wire_encode_reply(void *out, size_t cap, uint32_t id, unsigned status, size_t body_len, size_t offset,
			   const void *data, size_t n)
{
	unsigned char *p = out;

	if (status < 100 || status > 599 || body_len > API_REPLY_MAX || offset > body_len || n > body_len - offset ||
	    n > API_WIRE_FRAG_MAX || (n == 0 && body_len != 0))
		return -EINVAL;
	if (cap < API_WIRE_REP_HDR + n)
		return -EMSGSIZE;
	put_u32(p, API_WIRE_REP_MAGIC);
	put_u32(p + 4, id);
	put_u32(p + 8, status);
	put_u32(p + 12, (uint32_t)body_len);
	put_u32(p + 16, (uint32_t)offset);
	if (n)
		memcpy(p + API_WIRE_REP_HDR, data, n);
	return (long)(API_WIRE_REP_HDR + n);
}
