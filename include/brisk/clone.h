/*
 * clone.h - brisk restore --clone-server SOCK: one snapshot prepared once (vm_restore_prepare), one forked,
 * confined VM per request (docs/cli.md "Clone server"). The wire: a SOCK_SEQPACKET Unix socket, one
 * JSON object per message.
 *
 *   request  {} or any of {"report_json": "/abs/path", "vsock_override": {"uds_path": "/abs/path"}}, with 0
 *            or 3 descriptors (SCM_RIGHTS): the clone's stdin, stdout and stderr (none: /dev/null, and the
 *            server's stdout and stderr)
 *   replies  {"pid": N} once the clone is forked; {"exit_code": N} when it ended (its brisk exit status,
 *            docs/exit-codes.md; 128+signal if it was killed); or {"error": "...", "exit_code": N} and the
 *            connection closed (2: the request, 4: the host)
 *
 * The connection is the clone's handle: when the requester shuts it down or closes it, the clone gets SIGTERM
 * (it stops as brisk restore does, exit status 16); the exit_code message still comes if the socket is open.
 */
#ifndef BRISK_CLONE_H
#define BRISK_CLONE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "brisk/vm.h"

#define CLONE_MSG_MAX  4096 /* a request or reply message, bytes */
#define CLONE_FDS      3    /* stdin, stdout, stderr */
#define CLONE_CONN_MAX 1024 /* connections (and so clones) at once */
#define CLONE_POOL_MAX 64   /* warm clones (--clone-pool) */

struct clone_req {
	char report_json[PATH_MAX]; /* "" unless the request names a --report-json file for the clone */
	/* "" unless the request moves the clone's vsock socket (Firecracker's snapshot/load vsock_override) */
	char vsock_uds[VM_VSOCK_UDS_MAX + 1];
	/*
	 * Not on the wire: -1, or in a warm clone its link to the server, told "s" (and closed) once the guest
	 * runs (vm_run_notify): the server forks the clone's replacement then, not while the clone starts.
	 */
	int started_fd;
};

/*
 * Parses one request of `n` bytes (untrusted: json_strict.h's rules) that came with `nfds` descriptors.
 * Accepts only the members above, report_json an absolute path without NUL shorter than PATH_MAX,
 * vsock_override an object with only uds_path, an absolute path without NUL of at most VM_VSOCK_UDS_MAX bytes,
 * and 0 or CLONE_FDS descriptors. Returns 0 and *r, or -EINVAL with err.
 */
int clone_req_parse(const char *msg, size_t n, unsigned nfds, struct clone_req *r, char *err, size_t errlen);

/* Reply texts (NUL-terminated, < CLONE_MSG_MAX; `why` is JSON-escaped and cut to fit): returns the length. */
size_t clone_reply_pid(char *buf, pid_t pid);
size_t clone_reply_exit(char *buf, int code);
size_t clone_reply_error(char *buf, const char *why, int code);

/* A reply as the client reads it: exactly one of pid, exit (with code) or error (with code and why). */
struct clone_reply {
	enum { CLONE_REPLY_PID, CLONE_REPLY_EXIT, CLONE_REPLY_ERROR } kind;
	long value; /* the pid, or the exit code */
	char why[CLONE_MSG_MAX];
};
int clone_reply_parse(const char *msg, size_t n, struct clone_reply *r, char *err, size_t errlen);

/*
 * The server loop: listens at `sock_path` (unix_listen.h), gives each request a child, reaps them and tells
 * each requester its clone's exit status. With `pool` > 0 (at most CLONE_POOL_MAX), that many children are
 * kept warm: forked and built (vm_restore_clone_build) ahead of requests, each request taken by the oldest
 * and a new one forked after the reply; a warm clone that fails or cannot be forked switches the pool off
 * (a warning; requests then fork). Without a warm clone a request forks one. In each child: the server's descriptors
 * closed, the request's three on 0-2, the timeline and KVM ioctl counts restarted at the request's arrival, then
 * run(prepared, &req, sig_fd, ctx), whose return is the child's exit status. Ends on SIGINT/SIGTERM/SIGHUP from sig_fd
 * (every clone sent SIGTERM, then SIGKILL after a grace period, all reaped): returns EXIT_STOPPED; EXIT_USAGE or
 * EXIT_HOST if the socket cannot be made. Single-threaded callers only (it forks).
 */
struct vm;
typedef int (*clone_run_fn)(struct vm *prepared, const struct clone_req *req, int sig_fd, void *ctx);
int clone_serve(struct vm *prepared, const char *sock_path, unsigned pool, int sig_fd, clone_run_fn run, void *ctx);

/* `brisk clone --server SOCK [--report-json FILE]`: a clone with this process's stdio; its exit status. */
int cmd_clone(int argc, char **argv);

#endif
