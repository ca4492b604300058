/* fuzz_api_link.c - libFuzzer harness: brisk's decoder of the messages brisk-api sends (api_wire.c), and the
 * helper's decoder of brisk's replies, on arbitrary bytes. An accepted message must re-encode to itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/api_link.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned char out[API_WIRE_REQ_MAX > API_WIRE_REP_MAX ? API_WIRE_REQ_MAX : API_WIRE_REP_MAX];

static void check_request(const uint8_t *data, size_t size)
{
	struct api_request req;
	char err[160];
	uint32_t id;
	size_t plen;
	long n;

	if (api_wire_decode_request(data, size, &id, &req, err, sizeof(err)))
		return;
	plen = strnlen(req.path, sizeof(req.path));
	if (plen == 0 || plen >= sizeof(req.path) || req.path[0] != '/' || req.body_len > API_BODY_MAX ||
	    (const uint8_t *)req.body != data + API_WIRE_REQ_HDR + plen ||
	    API_WIRE_REQ_HDR + plen + req.body_len != size)
		abort();
	n = api_wire_encode_request(out, sizeof(out), id, req.method, req.path, plen, req.body, req.body_len);
	if (n < 0 || (size_t)n != size || memcmp(out, data, size))
		abort();
}

static void check_reply(const uint8_t *data, size_t size)
{
	struct api_wire_frag f;
	char err[160];
	long n;

	if (api_wire_decode_reply(data, size, &f, err, sizeof(err)))
		return;
	if (f.status < 100 || f.status > 599 || f.body_len > API_REPLY_MAX || f.offset > f.body_len ||
	    f.len > f.body_len - f.offset || f.len > API_WIRE_FRAG_MAX || API_WIRE_REP_HDR + f.len != size ||
	    (const uint8_t *)f.data != data + API_WIRE_REP_HDR)
		abort();
	n = api_wire_encode_reply(out, sizeof(out), f.id, f.status, f.body_len, f.offset, f.data, f.len);
	if (n < 0 || (size_t)n != size || memcmp(out, data, size))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* an exact-size copy, so that ASan sees any read past the message */
	uint8_t *copy = malloc(size ? size : 1);

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	check_request(copy, size);
	check_reply(copy, size);
	free(copy);
	return 0;
}
