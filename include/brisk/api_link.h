/*
 * api_link.h - brisk's end of the Firecracker-compatible HTTP API: the Unix socket, the helper process that
 * speaks HTTP/1.1 on it ("brisk-api": brisk forked, running src/api/api_http.c on llhttp), and the framed
 * messages the two exchange over a SOCK_SEQPACKET socketpair (src/api/api_link.c, the codec in
 * src/api/api_wire.c).
 *
 * Why a helper process: HTTP parsing of whatever a client sends happens outside the monitor's address space,
 * under a seccomp filter of its own. It is brisk itself, forked (no second binary: an orchestrator that
 * copies only the VMM binary into a chroot or a container gets the whole API). brisk sees one complete
 * request at a time, already reduced to method, path and body, and does the JSON and the VM work itself. A
 * slow or hostile client only ever costs the helper a connection slot.
 *
 * Wire format (one SOCK_SEQPACKET message each, native byte order: both ends run on the same host):
 *
 *   request, helper -> brisk (API_WIRE_REQ_HDR = 20 bytes, then the path and the body):
 *     u32 magic = API_WIRE_REQ_MAGIC
 *     u32 id          the helper's sequence number; the reply must carry it
 *     u32 method      enum api_method
 *     u32 path_len    1 .. API_PATH_MAX - 1; the path starts with '/' and holds no NUL byte
 *     u32 body_len    0 .. API_BODY_LIMIT_MAX (the helper enforces the link's own limit, api_link_start)
 *     u8  path[path_len], u8 body[body_len]   (the message is exactly 20 + path_len + body_len bytes)
 *
 *   reply, brisk -> helper: one or more fragments (API_WIRE_REP_HDR = 20 bytes, then a piece of the body),
 *   so that any body up to API_REPLY_MAX passes whatever the socket buffers' size:
 *     u32 magic = API_WIRE_REP_MAGIC
 *     u32 id          the request's
 *     u32 status      100 .. 599, the same in every fragment
 *     u32 body_len    the whole body, 0 .. API_REPLY_MAX, the same in every fragment
 *     u32 offset      where this fragment's bytes go: 0 in the first, then the previous fragment's end
 *     u8  bytes[n]    n = the message's length - 20: 1 .. API_WIRE_FRAG_MAX and at most body_len - offset
 *                     (n = 0 only for an empty body); a body is sent with Content-Type: application/json
 *   The reply is complete when offset + n == body_len. A fragment out of order is a malformed reply: the
 *   helper answers its client 502 at once.
 *
 * Start-up: the helper's first message is "OK" once it serves the socket, or "ERR why". One request is with
 * brisk at a time (as Firecracker's API thread); the helper queues the other complete ones. Every request
 * has a deadline, API_REPLY_TIMEOUT_S (or $BRISK_API_REPLY_TIMEOUT_S, passed as --reply-timeout-ms) after
 * it arrived complete: one still queued then, or sent but not yet taken by brisk, is answered 503 by the
 * helper and never carried out.
 *
 * "Taken" is decided by one compare-and-swap on the claim word, a 64-bit word in a page both processes map
 * (a memfd, --claim-fd): before sending request id the helper stores API_CLAIM(id, API_CLAIM_SENT); brisk,
 * before acting on it, swaps (id, SENT) for (id, TAKEN); the helper, at the deadline, swaps (id, SENT) for
 * (id, EXPIRED) and answers 503. Only one swap can succeed: an expired request is dropped by brisk unread
 * (also one read long after, by a brisk that was stopped), a taken one is answered by brisk, however long
 * it takes. The helper exits when brisk closes its end of the socketpair, or dies (PR_SET_PDEATHSIG).
 */
#ifndef BRISK_API_LINK_H
#define BRISK_API_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define API_BODY_MAX 51200 /* request payload limit: Firecracker's default (micro_http MAX_PAYLOAD_SIZE) */
/* The largest payload limit api_link_start takes: a request is one message on the link, and the whole message
 * (header, path, body) stays within the link's socket buffers (LINK_SOCKBUF, 256 KiB, api_link.c). */
#define API_BODY_LIMIT_MAX (255 * 1024)
#define API_PATH_MAX	   1024 /* path bytes plus the NUL */
/* Reply body limit: above the largest configuration GET /vm/config can describe (every string at its limit
 * and each of its bytes escaped: 302,594 bytes; test_fc_config.c test_largest_config_is_describable). */
#define API_REPLY_MAX	  (512 * 1024)
#define API_WIRE_FRAG_MAX 65536 /* body bytes in one reply fragment */
/* A request's deadline, from its arrival (a snapshot of a large guest takes seconds): then 503. */
#define API_REPLY_TIMEOUT_S 60

#define API_WIRE_REQ_MAGIC 0x51504142u /* "BAPQ" */
#define API_WIRE_REP_MAGIC 0x52504142u /* "BAPR" */
#define API_WIRE_REQ_HDR   20u
#define API_WIRE_REP_HDR   20u
#define API_WIRE_REQ_MAX   (API_WIRE_REQ_HDR + API_PATH_MAX + API_BODY_LIMIT_MAX)
#define API_WIRE_REP_MAX   (API_WIRE_REP_HDR + API_WIRE_FRAG_MAX) /* one reply fragment */

/* The claim word's states (see above) and its value for request id. */
enum api_claim { API_CLAIM_NONE = 0, API_CLAIM_SENT, API_CLAIM_TAKEN, API_CLAIM_EXPIRED };
#define API_CLAIM(id, state) ((uint64_t)(id) << 32 | (uint64_t)(state))

/* Swaps the claim word from (id, from) to (id, to); false when it held anything else. Both processes. */
static inline bool api_claim_swap(uint64_t *word, uint32_t id, enum api_claim from, enum api_claim to)
{
	uint64_t expected = API_CLAIM(id, from);

	return __atomic_compare_exchange_n(word, &expected, API_CLAIM(id, to), false, __ATOMIC_SEQ_CST,
					   __ATOMIC_SEQ_CST);
}

/* HTTP methods as brisk sees them. The helper answers any other method itself (400, as micro_http does), so
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

/* Whose fault a failed api_link_start is: the socket path's or the payload limit's (the user's), or the
 * host's (the helper not starting, out of descriptors or memory). brisk exits 2 for the one, 4 for the other. */
enum api_link_fault { API_LINK_FAULT_PATH = 1, API_LINK_FAULT_HOST };

/*
 * Creates the listening Unix stream socket at sock_path and starts the HTTP helper on it: a child of fork(2)
 * running api_http_main (api_http.h), so it needs no file of its own (no helper binary, no /proc: it works in
 * a chroot holding nothing but brisk); waits (at most 2 s) for the helper's "OK". Call it before the main
 * thread's seccomp filter (which forbids fork) and before brisk starts threads. max_payload is the request
 * body limit (Firecracker's --http-api-max-payload-size): 0 for API_BODY_MAX, else 1 .. API_BODY_LIMIT_MAX
 * (-EINVAL otherwise, the user's fault); a request over it is answered 400 by the helper, as Firecracker does.
 * The socket is bound and listening under a temporary name in the same directory before it is renamed to
 * sock_path, so the path exists only once connections are accepted. A path longer than sun_path allows
 * (-ENAMETOOLONG), a missing directory (-ENOENT), a socket some process still listens on (-EADDRINUSE, "in
 * use") or an existing file that is not a socket (-EEXIST; never touched) is an error; a stale socket (connect
 * is refused) is replaced. On failure nothing is left behind: the socket is unlinked and the helper reaped.
 * Returns 0 and *out, or -errno, err and (when fault is not NULL) *fault.
 */
__attribute__((warn_unused_result)) int api_link_start(const char *sock_path, size_t max_payload, struct api_link **out,
						       enum api_link_fault *fault, char *err, size_t errlen);

/* The descriptor to poll for POLLIN: a request (or the helper's exit) is waiting for api_link_recv. */
int api_link_fd(const struct api_link *l);

/*
 * Reads one request without blocking and takes it (the claim word): a request the helper has already
 * answered 503 (expired) is dropped unread and counted (api_link_expired). Returns 0 with *req filled
 * (answer it with api_link_reply before the next recv), -EAGAIN when nothing is waiting, -EPIPE when the helper has
 * gone (the API is dead: close the link), or -EPROTO with err for a malformed message (dropped; the helper answers its
 * client 503 later).
 */
__attribute__((warn_unused_result)) int api_link_recv(struct api_link *l, struct api_request *req, char *err,
						      size_t errlen);
/* Requests dropped because they had expired before brisk took them. */
uint64_t api_link_expired(const struct api_link *l);

/*
 * Answers the request api_link_recv returned last: status (100..599) and json_body (NUL-terminated JSON, or
 * NULL for no body, as for 204), in fragments of API_WIRE_FRAG_MAX bytes; waits (at most 1 s per fragment)
 * while the helper reads. Returns 0, -EINVAL (no request outstanding, status out of range), -EMSGSIZE (body
 * over API_REPLY_MAX: nothing was sent, the request is still outstanding, answer it with an error),
 * -EPIPE (helper gone), -ETIMEDOUT (the helper read nothing for 1 s) or another -errno from send.
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

/* One reply fragment as decoded: data[0..len) is body[offset..offset+len) of a body_len-byte body. */
struct api_wire_frag {
	uint32_t id;
	unsigned status;
	size_t body_len, offset, len;
	const char *data; /* into the message */
};

/* Validates msg[0..len) as a reply fragment (the rules above) and fills *f. Returns 0 or -EPROTO with err. */
int api_wire_decode_reply(const void *msg, size_t len, struct api_wire_frag *f, char *err, size_t errlen);

/* Writes the fragment of a body_len-byte reply that carries data[0..n) at `offset` into out[0..cap). Returns
 * the message length, or -EMSGSIZE (cap) / -EINVAL (status, body_len, offset or n outside the rules). */
long api_wire_encode_reply(void *out, size_t cap, uint32_t id, unsigned status, size_t body_len, size_t offset,
			   const void *data, size_t n);

/* "GET", "PUT", "PATCH", "DELETE", or "OTHER" for anything else. */
const char *api_method_name(enum api_method m);

#endif
