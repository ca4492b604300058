/* gen_api_link_seeds.c - writes valid brisk-api requests and brisk replies (api_link.h) as fuzz seeds. */
#include <stdio.h>
#include <string.h>

#include "brisk/api_link.h"
#include "seed_save.h"

static unsigned char buf[API_WIRE_REQ_MAX];

static int request(const char *dir, const char *name, enum api_method m, const char *path, const char *body)
{
	long n = api_wire_encode_request(buf, sizeof(buf), 1, m, path, strlen(path), body, strlen(body));

	return n < 0 || seed_save(dir, name, buf, (size_t)n);
}

static int reply(const char *dir, const char *name, unsigned status, const char *body)
{
	long n = api_wire_encode_reply(buf, sizeof(buf), 1, status, strlen(body), 0, body, strlen(body));

	return n < 0 || seed_save(dir, name, buf, (size_t)n);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	return request(argv[1], "get", API_GET, "/", "") |
	       request(argv[1], "put", API_PUT, "/boot-source", "{\"kernel_image_path\": \"/k\"}") |
	       request(argv[1], "patch", API_PATCH, "/vm", "{\"state\": \"Paused\"}") |
	       reply(argv[1], "reply-204", 204, "") | reply(argv[1], "reply-400", 400, "{\"fault_message\": \"x\"}");
}
