/*
 * api_link.h - brisk's end of the Firecracker-compatible HTTP API: the Unix socket, the brisk-api helper
 * process that speaks HTTP/1.1 on it (src/api/api_helper.c, libmicrohttpd), and the framed messages the two
 * exchange over a SOCK_SEQPACKET socketpair (src/api/api_link.c, the codec in src/api/api_wire.c).
 *
 * Why a helper: libmicrohttpd cannot be linked statically on Debian (its gnutls dependency ships no static
 * archives) and brisk is; and HTTP parsing of whatever a client sends then happens outside the monitor's
 * address space. brisk sees one complete request at a time, already reduced to method, path and body, and
 * does the JSON and the VM work itself. A slow or hostile client only ever costs the helper a connection slot.
 *
 * Wire format (one SOCK_SEQPACKET message each, native byte order: both ends run on the same host):
 *
 *   request, brisk-api -> brisk (API_WIRE_REQ_HDR = 20 bytes, then the path and the body):
 *     u32 magic = API_WIRE_REQ_MAGIC
 *     u32 id          the helper's sequence number; the reply must carry it
 *     u32 method      enum api_method
 *     u32 path_len    1 .. API_PATH_MAX - 1; the path starts with '/' and holds no NUL byte
 *     u32 body_len    0 .. API_BODY_MAX
 *     u8  path[path_len], u8 body[body_len]   (the message is exactly 20 + path_len + body_len bytes)
 *
 *   reply, brisk -> brisk-api (API_WIRE_REP_HDR = 16 bytes, then the body):
 *     u32 magic = API_WIRE_REP_MAGIC
 *     u32 id          the request's
 *     u32 status      100 .. 599
 *     u32 body_len    0 .. API_REPLY_MAX; a body is sent with Content-Type: application/json
 *     u8  body[body_len]
 *
 * Start-up: brisk-api's first message is "OK" once it serves the socket, or "ERR why". One request is with
 * brisk at a time (as Firecracker's API thread); the helper queues the other complete ones and answers 503
 * itself when brisk has not replied within API_REPLY_TIMEOUT_S (a late reply, whose id no longer matches,
 * is dropped). The helper exits when brisk closes its end of the socketpair, or dies (PR_SET_PDEATHSIG).
 */
#ifndef BRISK_API_LINK_H
#define BRISK_API_LINK_H

#include <stddef.h>
#include <stdint.h>

#define API_BODY_MAX	    51200  /* request payload limit: Firecracker's default (micro_http MAX_PAYLOAD_SIZE) */
#define API_PATH_MAX	    1024   /* path bytes plus the NUL */
#define API_REPLY_MAX	    131072 /* reply body limit */
#define API_REPLY_TIMEOUT_S 60	   /* then the helper answers 503 (a snapshot of a large guest takes seconds) */

#define API_WIRE_REQ_MAGIC 0x51504142u /* "BAPQ" */
#define API_WIRE_REP_MAGIC 0x52504142u /* "BAPR" */
#define API_WIRE_REQ_HDR   20u
#define API_WIRE_REP_HDR   16u
#define API_WIRE_REQ_MAX   (API_WIRE_REQ_HDR + API_PATH_MAX + API_BODY_MAX)
#define API_WIRE_REP_MAX   (API_WIRE_REP_HDR + API_REPLY_MAX)

/* HTTP methods as brisk sees them. brisk-api answers any other method itself (400, as micro_http does), so
 * API_OTHER is a valid wire value that today's helper never sends; a router treats it as unsupported. */
enum api_method { API_GET = 0, API_PUT = 1, API_PATCH = 2, API_DELETE = 3, API_OTHER = 4, API_METHOD_COUNT };

/* One request. body points into the link's (or the decoder's) buffer, NUL-terminated at body[body_len] when
 * it comes from api_link_recv, and stays valid until the next api_link_recv or api_link_close. */
struct api_request {
	enum api_method method;
	char path[API_PATH_MAX]; /* NUL-terminated, starts with '/' */
	char *body;		 /* never NULL from api_link_recv; body_len 0 for no body */
	size_t body_len;
};

struct api_link;

/* ---- brisk's side (api_link.c) -------------------------------------------------------------------- */

/* Whose fault a failed api_link_start is: the socket path's (the user's), or the host's (the helper missing,
 * not executable or not starting, out of descriptors or memory). brisk exits 2 for the one, 4 for the other. */
enum api_link_fault { API_LINK_FAULT_PATH = 1, API_LINK_FAULT_HOST };

/*
 * Creates the listening Unix stream socket at sock_path and starts brisk-api on it; waits (at most 2 s) for
 * the helper's "OK". The socket is bound and listening under a temporary name in the same directory before
 * it is renamed to sock_path, so the path exists only once connections are accepted. A path longer than
 * sun_path allows (-ENAMETOOLONG), a missing directory (-ENOENT), a socket some process still listens on
 * (-EADDRINUSE, "in use") or an existing file that is not a socket (-EEXIST; never touched) is an error; a
 * stale socket (connect is refused) is replaced. The helper is $BRISK_API_HELPER, else brisk-api next to
 * the running binary (or one directory up). On failure nothing is left behind: the socket is unlinked and
 * the helper reaped. Returns 0 and *out, or -errno, err and (when fault is not NULL) *fault.
 */
__attribute__((warn_unused_result)) int api_link_start(const char *sock_path, struct api_link **out,
						       enum api_link_fault *fault, char *err, size_t errlen);

/* The descriptor to poll for POLLIN: a request (or the helper's exit) is waiting for api_link_recv. */
int api_link_fd(const struct api_link *l);

/*
 * Reads one request without blocking. Returns 0 with *req filled (answer it with api_link_reply before the
 * next recv), -EAGAIN when nothing is waiting, -EPIPE when the helper has gone (the API is dead: close the
 * link), or -EPROTO with err for a malformed message (dropped; the helper answers its client 503 later).
 */
__attribute__((warn_unused_result)) int api_link_recv(struct api_link *l, struct api_request *req, char *err,
						      size_t errlen);

/*
 * Answers the request api_link_recv returned last: status (100..599) and json_body (NUL-terminated JSON, or
 * NULL for no body, as for 204). Returns 0, -EINVAL (no request outstanding, status out of range, body over
 * API_REPLY_MAX), -EPIPE (helper gone) or another -errno from send.
 */
int api_link_reply(struct api_link *l, unsigned status, const char *json_body);

/*
 * The helper has gone (api_link_recv returned -EPIPE): removes the socket file (if still the one brisk
 * created), reaps the helper, and writes how it ended to why ("was killed by signal 9 (Killed)"). The link
 * is dead afterwards: api_link_fd is -1; api_link_close still frees it.
 */
void api_link_lost(struct api_link *l, char *why, size_t whylen);

/* The socket path the link serves. */
const char *api_link_path(const struct api_link *l);

/* Stops the helper (its end of the socketpair closes; SIGKILL after 1 s), reaps it, and unlinks the socket
 * path if it is still the socket api_link_start created (same st_dev and st_ino). NULL is a no-op. */
void api_link_close(struct api_link *l);

/* ---- the codec (api_wire.c), pure functions shared by both ends and fuzzed (tests/fuzz) --------------- */

/* Validates msg[0..len) as a request and fills *id and *req (req->body points into msg, NOT NUL-terminated
 * here). Returns 0, or -EPROTO with err naming the field and value. Never reads outside msg. */
int api_wire_decode_request(const void *msg, size_t len, uint32_t *id, struct api_request *req, char *err,
			    size_t errlen);

/* Writes a request into out[0..cap). Returns the message length, or -EMSGSIZE / -EINVAL (bad method, empty
 * path or path not starting with '/', a NUL in the path, a length over its limit). */
long api_wire_encode_request(void *out, size_t cap, uint32_t id, enum api_method method, const char *path,
			     size_t path_len, const void *body, size_t body_len);

/* Validates msg[0..len) as a reply: fills *id, *status, *body (pointing into msg) and *body_len. Returns 0
 * or -EPROTO with err. */
int api_wire_decode_reply(const void *msg, size_t len, uint32_t *id, unsigned *status, const char **body,
			  size_t *body_len, char *err, size_t errlen);

/* Writes a reply into out[0..cap). Returns the message length, or -EMSGSIZE / -EINVAL. */
long api_wire_encode_reply(void *out, size_t cap, uint32_t id, unsigned status, const void *body, size_t body_len);

/* "GET", "PUT", "PATCH", "DELETE", or "OTHER" for anything else. */
const char *api_method_name(enum api_method m);

#endif
