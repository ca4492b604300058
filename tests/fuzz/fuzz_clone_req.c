/*
 * fuzz_clone_req.c - libFuzzer harness: the clone server's wire (include/brisk/clone.h, docs/security.md case 87):
 * a request from any process that can connect, and a reply as `brisk clone` reads it. Input: byte 0's low two
 * bits pick the descriptor count (0..3); the rest is the message. An accepted request's paths (report_json,
 * vsock_override.uds_path) are absolute, have no NUL and fit; an accepted reply's values are in range.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/clone.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct clone_req req;
	struct clone_reply rep;
	char err[512];

	if (size < 1)
		return 0;
	if (clone_req_parse((const char *)data + 1, size - 1, data[0] & 3, &req, err, sizeof(err)) == 0) {
		size_t n = strnlen(req.report_json, sizeof(req.report_json));
		size_t v = strnlen(req.vsock_uds, sizeof(req.vsock_uds));

		if (n == sizeof(req.report_json) || (n && req.report_json[0] != '/') || (data[0] & 3) == 1 ||
		    (data[0] & 3) == 2)
			abort();
		if (v == sizeof(req.vsock_uds) || (v && req.vsock_uds[0] != '/'))
			abort();
	} else if (!err[0]) {
		abort(); /* a refusal always says why */
	}
	if (clone_reply_parse((const char *)data + 1, size - 1, &rep, err, sizeof(err)) == 0) {
		if ((rep.kind == CLONE_REPLY_PID && rep.value < 1) ||
		    (rep.kind != CLONE_REPLY_PID && (rep.value < 0 || rep.value > 255)))
			abort();
	}
	return 0;
}
