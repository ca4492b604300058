/*
 * mmds.h - the microVM metadata service, as Firecracker v1.7.0's (src/vmm/src/mmds/, docs/mmds/): the data
 * store the API fills (PUT /mmds replaces it, PATCH /mmds merges into it, RFC 7396), the guest-facing HTTP
 * responder (V1: any GET; V2: session tokens), and the network stack configuration (which interfaces answer
 * for which IPv4 address) that virtio-net's in-VMM responder (net_mmds.c) consults per frame.
 *
 * One store per process, as Firecracker's Arc<Mutex<Mmds>>: the API thread writes it and the I/O event loop
 * reads it, under one mutex. Every function here takes that lock itself.
 */
#ifndef BRISK_MMDS_H
#define BRISK_MMDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;

enum mmds_version { MMDS_V1 = 0, MMDS_V2 };

#define MMDS_DEFAULT_IPV4    0xa9fea9feu /* 169.254.169.254, host byte order */
#define MMDS_TOKEN_TTL_MIN   1u
#define MMDS_TOKEN_TTL_MAX   21600u
#define MMDS_TOKENS_MAX	     256u /* live V2 tokens kept; one more evicts the one that expires first */
#define MMDS_TOKEN_LEN	     44u  /* base64 of 32 random bytes (getrandom) */
#define MMDS_RESPONSE_HEADER 256u /* bytes of status line and headers, at most */

/* PUT /mmds/config, "mmds-config" of a config file (kept in struct fc_vm for GET /vm/config). */
struct mmds_config {
	bool set; /* configured: then `ifaces` holds at least one interface */
	enum mmds_version version;
	uint32_t ipv4;	  /* host byte order */
	uint32_t ifaces;  /* bit i: network interface i (cfg.net[i]) answers MMDS */
	bool imds_compat; /* always IMDS output, whatever the Accept header */
};

/* Firecracker's check of ipv4_address (utils::net::ipv4addr::is_link_local_valid): 169.254.1.0-169.254.254.255. */
bool mmds_ipv4_valid(uint32_t ipv4);

/* The store's limit in bytes of its compact JSON (--mmds-size-limit). Set once at start. */
void mmds_set_limit(size_t limit);
size_t mmds_limit(void);
/*
 * PUT /mmds: replaces the store with `v` (any JSON value; taken, also on failure). Returns 0, or -EFBIG when
 * its compact JSON is over the limit (the store unchanged).
 */
int mmds_put(struct json_object *v);
/*
 * PATCH /mmds: merges `patch` (taken) into the store as RFC 7396 (Firecracker's json_patch). Returns 0,
 * -ENODATA when the store was never PUT (Firecracker's NotInitialized), -EFBIG when the result would be over
 * the limit (the store unchanged), -ENOMEM.
 */
int mmds_patch(struct json_object *patch);
/* GET /mmds: the store as compact JSON ("{}" when never PUT); malloc'd, or NULL when out of memory. */
char *mmds_get_json(void);
/* Empties the store (never PUT again): for tests and a fresh process state. */
void mmds_reset(void);

/*
 * Makes `c` the live network stack configuration (the version of the data store's token authority too).
 * Changing the version to V1 drops the tokens, as Firecracker's set_version.
 */
void mmds_set_config(const struct mmds_config *c);
/* Whether interface `index` answers MMDS; *ipv4 (host order) then the address. Lock-free (an atomic load). */
bool mmds_iface(unsigned index, uint32_t *ipv4);

/*
 * One guest HTTP request, `req[0..len)`: the request line and headers up to and including the blank line
 * (dumbo's framing: a body is not read). Returns Firecracker's response (status line, headers, body) as a
 * malloc'd buffer of *out_len bytes, or NULL when out of memory. Never reads past `len`.
 */
char *mmds_http_respond(const char *req, size_t len, size_t *out_len);
/* A response to a request the stack could not take (over its buffer): 400 with `msg`. Malloc'd. */
char *mmds_http_error(unsigned status, const char *msg, size_t *out_len);

#endif
