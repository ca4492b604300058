/* test_api_link.c - the framing between brisk and brisk-api (api_wire.c): round trips and hostile messages. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "brisk/api_link.h"

static unsigned char msg[(API_WIRE_REQ_MAX > API_WIRE_REP_MAX ? API_WIRE_REQ_MAX : API_WIRE_REP_MAX) + 64];

static void put32(size_t off, uint32_t v)
{
	memcpy(msg + off, &v, sizeof(v));
}

/* A valid request in msg: returns its length. */
static size_t good_request(const char *path, const char *body)
{
	long n = api_wire_encode_request(msg, sizeof(msg), 7, API_PUT, path, strlen(path), body, strlen(body));

	assert_true(n > 0);
	return (size_t)n;
}

static int decode(size_t len, struct api_request *req)
{
	char err[128];
	uint32_t id;

	return api_wire_decode_request(msg, len, &id, req, err, sizeof(err));
}

static void test_request_round_trip(void **state)
{
	struct api_request req;
	size_t len = good_request("/drives/rootfs", "{\"x\": 1}");
	char err[128];
	uint32_t id = 0;

	(void)state;
	assert_int_equal(len, API_WIRE_REQ_HDR + 14 + 8);
	assert_int_equal(api_wire_decode_request(msg, len, &id, &req, err, sizeof(err)), 0);
	assert_int_equal(id, 7);
	assert_int_equal(req.method, API_PUT);
	assert_string_equal(req.path, "/drives/rootfs");
	assert_int_equal(req.body_len, 8);
	assert_memory_equal(req.body, "{\"x\": 1}", 8);
}

static void test_request_limits(void **state)
{
	static char body[API_BODY_LIMIT_MAX + 1];
	char path[API_PATH_MAX + 1];
	struct api_request req;
	long n;

	(void)state;
	memset(body, 'b', sizeof(body));
	memset(path, 'p', sizeof(path));
	path[0] = '/';
	n = api_wire_encode_request(msg, sizeof(msg), 1, API_GET, path, API_PATH_MAX - 1, body, API_BODY_LIMIT_MAX);
	assert_int_equal(n, API_WIRE_REQ_MAX - 1);
	assert_int_equal(decode((size_t)n, &req), 0);
	assert_int_equal(strlen(req.path), API_PATH_MAX - 1);
	assert_int_equal(req.body_len, API_BODY_LIMIT_MAX);
	/* one over, either way, and bad inputs: the encoder refuses */
	assert_int_equal(api_wire_encode_request(msg, sizeof(msg), 1, API_GET, path, API_PATH_MAX, "", 0), -EINVAL);
	assert_int_equal(api_wire_encode_request(msg, sizeof(msg), 1, API_GET, "/", 1, body, API_BODY_LIMIT_MAX + 1),
			 -EINVAL);
	assert_int_equal(api_wire_encode_request(msg, sizeof(msg), 1, API_GET, "x", 1, "", 0), -EINVAL);
	assert_int_equal(api_wire_encode_request(msg, sizeof(msg), 1, API_GET, "", 0, "", 0), -EINVAL);
	assert_int_equal(api_wire_encode_request(msg, sizeof(msg), 1, API_GET, "/\0x", 3, "", 0), -EINVAL);
	assert_int_equal(api_wire_encode_request(msg, sizeof(msg), 1, API_METHOD_COUNT, "/", 1, "", 0), -EINVAL);
	assert_int_equal(api_wire_encode_request(msg, 20, 1, API_GET, "/", 1, "", 0), -EMSGSIZE);
}

static void test_request_truncated(void **state)
{
	struct api_request req;
	size_t len = good_request("/actions", "{}");

	(void)state;
	for (size_t n = 0; n < len; n++)
		assert_int_equal(decode(n, &req), -EPROTO);
	assert_int_equal(decode(len + 1, &req), -EPROTO); /* trailing byte */
	assert_int_equal(decode(len, &req), 0);
}

static void test_request_bad_fields(void **state)
{
	struct api_request req;
	size_t len;

	(void)state;
	len = good_request("/actions", "{}");
	put32(0, 0xdeadbeef);
	assert_int_equal(decode(len, &req), -EPROTO);

	len = good_request("/actions", "{}");
	put32(8, API_METHOD_COUNT);
	assert_int_equal(decode(len, &req), -EPROTO);

	len = good_request("/actions", "{}");
	put32(12, 0xffffffff); /* a path_len that would wrap the sum */
	assert_int_equal(decode(len, &req), -EPROTO);

	len = good_request("/actions", "{}");
	put32(16, 0xfffffff0); /* body_len likewise */
	assert_int_equal(decode(len, &req), -EPROTO);

	len = good_request("/actions", "{}");
	put32(12, 0); /* empty path, the length still adding up */
	put32(16, 10);
	assert_int_equal(decode(len, &req), -EPROTO);

	len = good_request("/actions", "{}");
	msg[API_WIRE_REQ_HDR] = 'a'; /* no leading '/' */
	assert_int_equal(decode(len, &req), -EPROTO);

	len = good_request("/actions", "{}");
	msg[API_WIRE_REQ_HDR + 3] = '\0'; /* a NUL in the path */
	assert_int_equal(decode(len, &req), -EPROTO);
}

static void test_request_oversized_body(void **state)
{
	struct api_request req;
	size_t len = API_WIRE_REQ_HDR + 1 + API_BODY_LIMIT_MAX + 1;

	(void)state;
	memset(msg, 'z', len);
	put32(0, API_WIRE_REQ_MAGIC);
	put32(4, 1);
	put32(8, API_GET);
	put32(12, 1);
	put32(16, API_BODY_LIMIT_MAX + 1);
	msg[API_WIRE_REQ_HDR] = '/';
	assert_int_equal(decode(len, &req), -EPROTO);
}

static void test_reply(void **state)
{
	struct api_wire_frag f;
	char err[128];
	long n;

	(void)state;
	n = api_wire_encode_reply(msg, sizeof(msg), 9, 204, 0, 0, NULL, 0);
	assert_int_equal(n, API_WIRE_REP_HDR);
	assert_int_equal(api_wire_decode_reply(msg, (size_t)n, &f, err, sizeof(err)), 0);
	assert_int_equal(f.id, 9);
	assert_int_equal(f.status, 204);
	assert_int_equal(f.body_len, 0);
	assert_int_equal(f.len, 0);

	n = api_wire_encode_reply(msg, sizeof(msg), 3, 400, 22, 0, "{\"fault_message\": \"x\"}", 22);
	assert_int_equal(api_wire_decode_reply(msg, (size_t)n, &f, err, sizeof(err)), 0);
	assert_int_equal(f.body_len, 22);
	assert_int_equal(f.len, 22);
	assert_memory_equal(f.data, "{\"fault_message\": \"x\"}", 22);
	for (long k = 0; k < API_WIRE_REP_HDR; k++)
		assert_int_equal(api_wire_decode_reply(msg, (size_t)k, &f, err, sizeof(err)), -EPROTO);
	put32(8, 99); /* status out of range */
	assert_int_equal(api_wire_decode_reply(msg, (size_t)n, &f, err, sizeof(err)), -EPROTO);
	put32(8, 200);
	put32(12, 0xffffffff);
	assert_int_equal(api_wire_decode_reply(msg, (size_t)n, &f, err, sizeof(err)), -EPROTO);
	put32(12, 22);
	put32(0, API_WIRE_REQ_MAGIC);
	assert_int_equal(api_wire_decode_reply(msg, (size_t)n, &f, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "magic"));
	assert_int_equal(api_wire_encode_reply(msg, sizeof(msg), 1, 600, 0, 0, NULL, 0), -EINVAL);
	assert_int_equal(api_wire_encode_reply(msg, sizeof(msg), 1, 200, API_REPLY_MAX + 1, 0, msg, 1), -EINVAL);
	assert_int_equal(api_wire_encode_reply(msg, 10, 1, 200, 0, 0, NULL, 0), -EMSGSIZE);
}

/* A body over one fragment: fragments at each offset, none past the body, none empty, none over the limit. */
static void test_reply_fragments(void **state)
{
	static char big[API_REPLY_MAX];
	struct api_wire_frag f;
	char err[128];
	long n;

	(void)state;
	memset(big, 'x', sizeof(big));
	n = api_wire_encode_reply(msg, sizeof(msg), 5, 200, sizeof(big), 0, big, API_WIRE_FRAG_MAX);
	assert_int_equal(n, API_WIRE_REP_HDR + API_WIRE_FRAG_MAX);
	assert_int_equal(api_wire_decode_reply(msg, (size_t)n, &f, err, sizeof(err)), 0);
	assert_int_equal(f.offset, 0);
	assert_int_equal(f.len, API_WIRE_FRAG_MAX);
	assert_int_equal(f.body_len, API_REPLY_MAX);
	n = api_wire_encode_reply(msg, sizeof(msg), 5, 200, sizeof(big), sizeof(big) - 10, big, 10); /* the last */
	assert_int_equal(api_wire_decode_reply(msg, (size_t)n, &f, err, sizeof(err)), 0);
	assert_int_equal(f.offset + f.len, API_REPLY_MAX);
	put32(16, API_REPLY_MAX - 9); /* would end one byte past the body */
	assert_int_equal(api_wire_decode_reply(msg, (size_t)n, &f, err, sizeof(err)), -EPROTO);
	put32(16, 0);
	assert_int_equal(api_wire_decode_reply(msg, API_WIRE_REP_HDR, &f, err, sizeof(err)), -EPROTO); /* empty */
	assert_int_equal(api_wire_encode_reply(msg, sizeof(msg), 5, 200, sizeof(big), 0, big, API_WIRE_FRAG_MAX + 1),
			 -EINVAL);
	assert_int_equal(api_wire_encode_reply(msg, sizeof(msg), 5, 200, 10, 5, big, 6), -EINVAL);
	assert_int_equal(api_wire_encode_reply(msg, sizeof(msg), 5, 200, 10, 0, big, 0), -EINVAL);
}

/* The claim word: one of the two swaps wins, never both; another id's swap never does. */
static void test_claim(void **state)
{
	uint64_t w = API_CLAIM(7, API_CLAIM_SENT);

	(void)state;
	assert_false(api_claim_swap(&w, 6, API_CLAIM_SENT, API_CLAIM_TAKEN));
	assert_true(api_claim_swap(&w, 7, API_CLAIM_SENT, API_CLAIM_TAKEN));
	assert_false(api_claim_swap(&w, 7, API_CLAIM_SENT, API_CLAIM_EXPIRED));
	w = API_CLAIM(8, API_CLAIM_SENT);
	assert_true(api_claim_swap(&w, 8, API_CLAIM_SENT, API_CLAIM_EXPIRED));
	assert_false(api_claim_swap(&w, 8, API_CLAIM_SENT, API_CLAIM_TAKEN));
	assert_int_equal(w, API_CLAIM(8, API_CLAIM_EXPIRED));
}

static void test_method_names(void **state)
{
	(void)state;
	assert_string_equal(api_method_name(API_GET), "GET");
	assert_string_equal(api_method_name(API_DELETE), "DELETE");
	assert_string_equal(api_method_name(API_OTHER), "OTHER");
	assert_string_equal(api_method_name((enum api_method)77), "OTHER");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_request_round_trip),	   cmocka_unit_test(test_request_limits),
	    cmocka_unit_test(test_request_truncated),	   cmocka_unit_test(test_request_bad_fields),
	    cmocka_unit_test(test_request_oversized_body), cmocka_unit_test(test_reply),
	    cmocka_unit_test(test_reply_fragments),	   cmocka_unit_test(test_claim),
	    cmocka_unit_test(test_method_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
