/*
 * fuzz_mmds.c - libFuzzer harness: the metadata service's guest side (docs/security.md cases 52-55): the
 * network stack (net_mmds.c) fed a sequence of frames, each answered and drained, and the HTTP responder
 * (mmds_http.c) fed the input as one request. Input: byte 0 picks V1/V2 and checksum offload; then frames
 * as [length (2 bytes, little-endian)][bytes].
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "brisk/mmds.h"
#include "brisk/net_mmds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define IP 0xa9fea9feu

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	struct mmds_config c = {.set = true, .ipv4 = IP, .ifaces = 1};
	struct net_mmds *m;
	uint8_t out[2048];
	size_t len, off = 1;
	char *r;

	if (!ready) {
		mmds_put(json_tokener_parse("{\"latest\":{\"meta-data\":{\"ami-id\":\"ami-1\",\"n\":1}},\"s\":\"v\"}"));
		ready = true;
	}
	if (size < 1)
		return 0;
	c.version = data[0] & 1 ? MMDS_V2 : MMDS_V1;
	c.imds_compat = data[0] & 4;
	mmds_set_config(&c);
	r = mmds_http_respond((const char *)data + 1, size - 1, &len);
	if (!r || len < 16 || memcmp(r, "HTTP/1.", 7))
		abort();
	free(r);
	m = net_mmds_new();
	if (!m)
		return 0;
	while (off + 2 <= size) {
		size_t n = (size_t)data[off] | (size_t)data[off + 1] << 8;

		off += 2;
		n = n > size - off ? size - off : n;
		if (net_mmds_is_for(IP, data + off, n))
			net_mmds_input(m, IP, data + off, n, data[0] & 2);
		off += n;
		for (unsigned k = 0; k < 64 && (len = net_mmds_output(m, out, sizeof(out))); k++)
			if (len > MMDS_FRAME_MAX)
				abort();
	}
	net_mmds_free(m);
	return 0;
}
