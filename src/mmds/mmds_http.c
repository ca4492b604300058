/*
 * mmds_http.c - the guest's HTTP requests to the metadata service (include/brisk/mmds.h), as Firecracker
 * v1.7.0's src/vmm/src/mmds/mod.rs (convert_to_response) on micro_http's request parser and response
 * writer: the status line "HTTP/1.1 200 \r\n" (no reason phrase), "Server: Firecracker API",
 * "Connection: keep-alive", the content type, Content-Length when the body is not empty, Allow on a 405.
 *
 * V1: GET only, no token looked at. V2: GET needs a live X-metadata-token (401 without or with a bad one);
 * PUT /latest/api/token with X-metadata-token-ttl-seconds (1..21600) makes one; X-Forwarded-For on a PUT
 * is refused (an SSRF through a proxy). Output: "Accept: application/json" gives the value as JSON; anything
 * else (or imds_compat) the IMDS text: an object's keys one per line (an object's with a trailing '/'), a
 * string as it is, other values 501.
 *
 * Every length comes from the request, which is bounded by the stack's receive buffer (net_mmds.c); the
 * parser never reads past it (docs/security.md case 53).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mmds_impl.h"

#define PATH_TO_TOKEN "/latest/api/token"

#define ERR_INVALID_TOKEN "MMDS token not valid."
#define ERR_INVALID_URI	  "Invalid URI."
#define ERR_METHOD	  "Not allowed HTTP method."
#define ERR_NO_TOKEN	  "No MMDS token provided. Use `X-metadata-token` header to specify the session token."
#define ERR_NO_TTL                                                                                                     \
	"Token time to live value not found. Use `X-metadata-token-ttl-seconds` header to specify the token's "        \
	"lifetime."
#define ERR_UNSUPPORTED "Cannot retrieve value. The value has an unsupported type."

enum method { M_GET, M_PUT, M_PATCH, M_POST, M_DELETE, M_HEAD };

/* One request as micro_http parses it: the fields the service looks at, pointing into the request. */
struct req {
	enum method method;
	const char *version; /* "HTTP/1.0" or "HTTP/1.1" */
	const char *path;
	size_t path_len;
	bool json, xff;
	const char *token, *ttl;
	size_t token_len, ttl_len;
};

struct resp {
	unsigned status;
	const char *version;
	const char *type; /* Content-Type */
	const char *allow;
	char *body; /* malloc'd, or NULL with `text` */
	const char *text;
	size_t body_len;
};

static void plain(struct resp *r, unsigned status, const char *text)
{
	r->status = status;
	r->type = "text/plain";
	r->text = text;
	r->body_len = strlen(text);
}

static char *render(const struct resp *r, size_t *out_len)
{
	char head[MMDS_RESPONSE_HEADER + 64];
	int n = snprintf(head, sizeof(head),
			 "%s %u \r\nServer: Firecracker API\r\nConnection: keep-alive\r\nContent-Type: %s\r\n",
			 r->version, r->status, r->type);
	char *out;

	if (r->body_len)
		n += snprintf(head + n, sizeof(head) - (size_t)n, "Content-Length: %zu\r\n", r->body_len);
	if (r->allow)
		n += snprintf(head + n, sizeof(head) - (size_t)n, "Allow: %s\r\n", r->allow);
	n += snprintf(head + n, sizeof(head) - (size_t)n, "\r\n");
	out = malloc((size_t)n + r->body_len + 1);
	if (!out)
		return NULL;
	memcpy(out, head, (size_t)n);
	memcpy(out + n, r->body ? r->body : r->text, r->body_len);
	*out_len = (size_t)n + r->body_len;
	return out;
}

char *mmds_http_error(unsigned status, const char *msg, size_t *out_len)
{
	struct resp r = {.version = "HTTP/1.1"};

	plain(&r, status, msg);
	return render(&r, out_len);
}

/* ---- parsing ------------------------------------------------------------------------------------------ */

static bool word_is(const char *s, size_t n, const char *w)
{
	return strlen(w) == n && memcmp(s, w, n) == 0;
}

/* The next line of [*p, end): its start and length without CR LF; *p after it. False at the end. */
static bool next_line(const char **p, const char *end, const char **line, size_t *len)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));

	if (!nl)
		return false;
	*line = *p;
	*len = (size_t)(nl - *p);
	if (*len && (*line)[*len - 1] == '\r')
		(*len)--;
	*p = nl + 1;
	return true;
}

/* "METHOD URI VERSION": 0, or the response's status with *msg. */
static unsigned request_line(struct req *q, const char *l, size_t n, const char **msg)
{
	static const char *const methods[] = {"GET", "PUT", "PATCH", "POST", "DELETE", "HEAD", NULL};
	const char *sp1 = memchr(l, ' ', n), *sp2, *uri;
	size_t ulen;
	unsigned i;

	*msg = "Invalid request.";
	if (!sp1 || !(sp2 = memchr(sp1 + 1, ' ', (size_t)(l + n - sp1 - 1))))
		return 400;
	for (i = 0; methods[i] && !word_is(l, (size_t)(sp1 - l), methods[i]); i++)
		;
	if (!methods[i])
		return *msg = "Unsupported HTTP method.", 501;
	q->method = (enum method)i;
	if (word_is(sp2 + 1, (size_t)(l + n - sp2 - 1), "HTTP/1.1"))
		q->version = "HTTP/1.1";
	else if (word_is(sp2 + 1, (size_t)(l + n - sp2 - 1), "HTTP/1.0"))
		q->version = "HTTP/1.0";
	else
		return *msg = "Unsupported HTTP version.", 501;
	uri = sp1 + 1;
	ulen = (size_t)(sp2 - uri);
	if (ulen > 7 && strncasecmp(uri, "http://", 7) == 0) { /* absolute form: the path after the host */
		const char *slash = memchr(uri + 7, '/', ulen - 7);

		ulen = slash ? ulen - (size_t)(slash - uri) : 0;
		uri = slash ? slash : uri + ulen;
	}
	if (ulen == 0 || uri[0] != '/')
		return *msg = ERR_INVALID_URI, 400;
	q->path = uri;
	q->path_len = ulen;
	return 0;
}

static void trim(const char **v, size_t *n)
{
	while (*n && (**v == ' ' || **v == '\t'))
		(*v)++, (*n)--;
	while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
		(*n)--;
}

static bool header(struct req *q, const char *l, size_t n)
{
	const char *colon = memchr(l, ':', n), *v;
	size_t k, vn;

	if (!colon || colon == l)
		return false;
	k = (size_t)(colon - l);
	v = colon + 1;
	vn = n - k - 1;
	trim(&v, &vn);
	if (k == 6 && strncasecmp(l, "Accept", 6) == 0)
		q->json = vn == 16 && strncasecmp(v, "application/json", 16) == 0;
	else if (k == 16 && strncasecmp(l, "X-metadata-token", 16) == 0)
		q->token = v, q->token_len = vn;
	else if (k == 28 && strncasecmp(l, "X-metadata-token-ttl-seconds", 28) == 0)
		q->ttl = v, q->ttl_len = vn;
	else if (k == 15 && strncasecmp(l, "X-Forwarded-For", 15) == 0)
		q->xff = true;
	return true;
}

/* A u32 as Rust's str::parse::<u32>: digits only (a leading '+' allowed), no overflow. */
static bool parse_u32(const char *s, size_t n, uint32_t *out)
{
	uint64_t v = 0;
	size_t i = n && s[0] == '+' ? 1 : 0;

	if (i == n)
		return false;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || (v = v * 10 + (uint64_t)(s[i] - '0')) > UINT32_MAX)
			return false;
	}
	*out = (uint32_t)v;
	return true;
}

/* ---- answering ---------------------------------------------------------------------------------------- */

/* Firecracker's sanitize_uri: every "//" collapsed; then a trailing '/' dropped for the JSON pointer. */
static char *json_path(const struct req *q)
{
	char *p = malloc(q->path_len + 1);
	size_t o = 0;

	if (!p)
		return NULL;
	for (size_t i = 0; i < q->path_len; i++)
		if (!(q->path[i] == '/' && o && p[o - 1] == '/'))
			p[o++] = q->path[i];
	if (o && p[o - 1] == '/')
		o--;
	p[o] = 0;
	return p;
}

/* IMDS text of `v` (Mmds::format_imds): malloc'd, or NULL with *unsupported for a non-string leaf. */
static char *imds(json_object *v, bool *unsupported)
{
	size_t n, len = 0;
	const char **keys;
	char *out;

	if (json_object_is_type(v, json_type_string))
		return strdup(json_object_get_string(v));
	if (!json_object_is_type(v, json_type_object)) {
		*unsupported = true;
		return NULL;
	}
	keys = mmds_sorted_keys(v, &n);
	for (size_t i = 0; i < n; i++)
		len += strlen(keys[i]) + 2;
	out = malloc(len + 1);
	if (out) {
		len = 0;
		for (size_t i = 0; i < n; i++) {
			bool obj = json_object_is_type(json_object_object_get(v, keys[i]), json_type_object);

			len += (size_t)sprintf(out + len, "%s%s%s", i ? "\n" : "", keys[i], obj ? "/" : "");
		}
		out[len] = 0;
	}
	free(keys);
	return out;
}

static void not_found(struct resp *r, const struct req *q)
{
	size_t n = q->path_len + 32;

	r->body = malloc(n);
	r->status = 404;
	r->type = "text/plain";
	if (!r->body)
		return plain(r, 500, "out of memory");
	r->body_len = (size_t)snprintf(r->body, n, "Resource not found: %.*s.", (int)q->path_len, q->path);
}

/* respond_to_get_request_unchecked, under the lock. */
static void get(struct resp *r, const struct req *q)
{
	char *path = json_path(q);
	json_object *v = NULL, *store = mmds_store_locked();
	bool unsupported = false, json = q->json && !mmds_config_locked()->imds_compat;
	int found;

	if (!path)
		return plain(r, 500, "out of memory");
	found = !path[0] ? 1 : store ? json_pointer_get(store, path, &v) == 0 : 0;
	v = path[0] ? v : store;
	free(path);
	if (!found)
		return not_found(r, q);
	r->status = 200;
	if (json) {
		r->type = "application/json";
		r->body = strdup(
		    v ? json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
		      : "null");
	} else {
		r->type = "text/plain";
		r->body = imds(v, &unsupported);
		if (unsupported)
			return plain(r, 501, ERR_UNSUPPORTED);
	}
	if (!r->body)
		return plain(r, 500, "out of memory");
	r->body_len = strlen(r->body);
}

/* respond_to_put_request (V2): a new token. */
static void put_token(struct resp *r, const struct req *q, uint32_t ttl)
{
	char *path = json_path(q);
	bool is_token = path && strcmp(path, PATH_TO_TOKEN) == 0;

	free(path);
	if (q->xff)
		return plain(r, 400, "Unsupported header name. Key: X-Forwarded-For");
	if (!is_token)
		return not_found(r, q);
	if (!q->ttl)
		return plain(r, 400, ERR_NO_TTL);
	if (ttl < MMDS_TOKEN_TTL_MIN || ttl > MMDS_TOKEN_TTL_MAX) {
		r->body = malloc(160);
		if (!r->body)
			return plain(r, 500, "out of memory");
		r->status = 400;
		r->type = "text/plain";
		r->body_len = (size_t)snprintf(r->body, 160,
					       "Invalid time to live value provided for token: %u. Please provide a "
					       "value between %u and %u.",
					       ttl, MMDS_TOKEN_TTL_MIN, MMDS_TOKEN_TTL_MAX);
		return;
	}
	r->body = malloc(MMDS_TOKEN_LEN + 1);
	if (!r->body || mmds_token_new_locked(ttl, r->body))
		return plain(r, 400, "Failed to extract entropy from /dev/urandom entropy pool.");
	r->status = 200;
	r->type = "text/plain";
	r->body_len = MMDS_TOKEN_LEN;
}

static void respond_v2(struct resp *r, const struct req *q)
{
	uint32_t ttl = 0;
	char msg[160];

	if (q->ttl && !parse_u32(q->ttl, q->ttl_len, &ttl)) {
		snprintf(msg, sizeof(msg), "Invalid value. Key:X-metadata-token-ttl-seconds; Value:%.*s",
			 (int)(q->ttl_len > 64 ? 64 : q->ttl_len), q->ttl);
		r->body = strdup(msg);
		if (!r->body)
			return plain(r, 500, "out of memory");
		r->status = 400;
		r->type = "text/plain";
		r->body_len = strlen(r->body);
		return;
	}
	if (q->method == M_GET) {
		if (!q->token)
			return plain(r, 401, ERR_NO_TOKEN);
		if (!mmds_token_valid_locked(q->token, q->token_len))
			return plain(r, 401, ERR_INVALID_TOKEN);
		return get(r, q);
	}
	if (q->method == M_PUT)
		return put_token(r, q, ttl);
	plain(r, 405, ERR_METHOD);
	r->allow = "GET, PUT";
}

char *mmds_http_respond(const char *req, size_t len, size_t *out_len)
{
	struct req q = {0};
	struct resp r = {.version = "HTTP/1.1"};
	const char *p = req, *end = req + len, *l, *msg;
	size_t n;
	unsigned st;
	char *out;

	if (!next_line(&p, end, &l, &n))
		return mmds_http_error(400, "Invalid request.", out_len);
	st = request_line(&q, l, n, &msg);
	if (st)
		return mmds_http_error(st, msg, out_len);
	r.version = q.version;
	while (next_line(&p, end, &l, &n) && n)
		if (!header(&q, l, n))
			return mmds_http_error(400, "Invalid request.", out_len);
	mmds_lock();
	if (mmds_config_locked()->version == MMDS_V2) {
		respond_v2(&r, &q);
	} else if (q.method == M_GET) {
		get(&r, &q);
	} else {
		plain(&r, 405, ERR_METHOD);
		r.allow = "GET";
	}
	mmds_unlock();
	out = render(&r, out_len);
	free(r.body);
	return out;
}
