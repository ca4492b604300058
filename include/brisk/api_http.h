/*
 * api_http.h - the API socket's HTTP/1.1 server (src/api/api_http.c): the code of the helper process that
 * api_link_start forks from brisk (api_link.h). It runs in a process of its own, under its own seccomp
 * filter (SECCOMP_API_HELPER), so that HTTP parsing of whatever a client sends never happens in the
 * monitor's address space; brisk sees only the framed requests of api_link.h.
 */
#ifndef BRISK_API_HTTP_H
#define BRISK_API_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What the helper is handed (descriptors already at these numbers, the rest closed: api_link.c). */
struct api_http_args {
	int listen_fd;		  /* the listening Unix stream socket */
	int link_fd;		  /* the SOCK_SEQPACKET end to brisk */
	int claim_fd;		  /* the claim word's memfd (api_link.h); closed once mapped */
	int64_t reply_timeout_ms; /* a request's deadline after its arrival (1 .. 3,600,000) */
	size_t body_max;	  /* request payload limit, 1 .. API_BODY_LIMIT_MAX */
	bool verbose;		  /* report clients' mistakes (evicted, too slow) too */
	pid_t parent;		  /* brisk: the helper ends with it */
};

/*
 * The helper's whole life, in the child of fork(2): confines itself (PR_SET_PDEATHSIG, its name "brisk-api",
 * default signal dispositions, its seccomp filter unless brisk runs without), tells brisk "OK" (or "ERR why")
 * on the link, serves until brisk closes the link, delivers what it holds (at most 1 s) and _exits. Never
 * returns, never runs brisk's exit handlers.
 */
__attribute__((noreturn)) void api_http_main(const struct api_http_args *a);

#endif
