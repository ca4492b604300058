/*
 * api_echo.c - a stand-in for brisk's API router, for tests/integration/test_api_http.py: serves the API
 * socket with api_link and answers every request 200 {"method": M, "path": P, "body_len": N}.
 *
 *   api_echo SOCKET_PATH [MAX_PAYLOAD]      (MAX_PAYLOAD: api_link_start's request body limit; default 0)
 *
 * Path "/fail" is answered 400 {"fault_message": "..."}, "/empty" 204 with no body, "/slow" after 2 s (the
 * other requests wait: one at a time), "/count" 200 {"handled": N} (the requests api_echo has acted on, this
 * one included: an expired request is never one of them), "/big" 200 with a body of BIG_LEN bytes (a JSON
 * string of "0123456789" repeated: several reply fragments), "/huge" with one over API_REPLY_MAX (refused by
 * api_link_reply: answered 500 instead), and "/exit" 200 before a clean exit. Prints "ready" on stdout once
 * the socket serves. Exit status: 0 after SIGTERM, SIGINT or /exit; 1 api_link_start failed (its message on
 * stderr); 3 the helper went away (api_link_recv returned -EPIPE); 4 any other error.
 */
#include <errno.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "brisk/api_link.h"

#define EXIT_START_FAILED 1
#define EXIT_HELPER_GONE  3
#define EXIT_OTHER	  4
#define BIG_LEN		  400002 /* '"' + 400,000 digits + '"' */

static unsigned long handled;

static int echo(struct api_link *l, const struct api_request *req)
{
	json_object *o = json_object_new_object();
	int ret;

	json_object_object_add(o, "method", json_object_new_string(api_method_name(req->method)));
	json_object_object_add(o, "path", json_object_new_string(req->path));
	json_object_object_add(o, "body_len", json_object_new_int64((int64_t)req->body_len));
	ret = api_link_reply(
	    l, 200, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return ret;
}

/* A JSON string of len - 2 digits, malloc'd. */
static char *digits(size_t len)
{
	char *b = malloc(len + 1);

	if (!b)
		return NULL;
	b[0] = '"';
	for (size_t i = 1; i + 1 < len; i++)
		b[i] = (char)('0' + (i - 1) % 10);
	b[len - 1] = '"';
	b[len] = '\0';
	return b;
}

/* "/big" and "/huge": a reply of len bytes; one over the limit is refused and answered 500 at once. */
static int big(struct api_link *l, size_t len)
{
	char *b = digits(len);
	int ret;

	if (!b)
		return -ENOMEM;
	ret = api_link_reply(l, 200, b);
	free(b);
	if (ret == -EMSGSIZE)
		ret = api_link_reply(l, 500, "{\"fault_message\": \"the reply is over the limit\"}");
	return ret;
}

/* Answers one request; 1 when it asked to exit. */
static int handle(struct api_link *l, const struct api_request *req)
{
	char text[64];
	int ret;

	handled++;
	if (strcmp(req->path, "/count") == 0) {
		snprintf(text, sizeof(text), "{\"handled\": %lu}", handled);
		ret = api_link_reply(l, 200, text);
	} else if (strcmp(req->path, "/big") == 0)
		ret = big(l, BIG_LEN);
	else if (strcmp(req->path, "/huge") == 0)
		ret = big(l, API_REPLY_MAX + 1);
	else if (strcmp(req->path, "/fail") == 0)
		ret = api_link_reply(l, 400, "{\"fault_message\": \"asked to fail\"}");
	else if (strcmp(req->path, "/empty") == 0)
		ret = api_link_reply(l, 204, NULL);
	else {
		if (strcmp(req->path, "/slow") == 0)
			sleep(2);
		ret = echo(l, req);
	}
	if (ret)
		fprintf(stderr, "api_echo: reply: %s\n", strerror(-ret));
	return strcmp(req->path, "/exit") == 0;
}

/* Serves until a signal, /exit or an error; returns the exit status. */
static int serve(struct api_link *l, int sfd)
{
	struct pollfd p[2] = {{.fd = api_link_fd(l), .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
	struct api_request req;
	char err[256];
	int ret;

	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return EXIT_OTHER;
		if (p[1].revents)
			return 0;
		if (!p[0].revents)
			continue;
		ret = api_link_recv(l, &req, err, sizeof(err));
		if (ret == -EAGAIN)
			continue;
		if (ret == -EPIPE)
			return EXIT_HELPER_GONE;
		if (ret) {
			fprintf(stderr, "api_echo: %s\n", err);
			if (ret == -EPROTO)
				continue;
			return EXIT_OTHER;
		}
		if (handle(l, &req))
			return 0;
	}
}

int main(int argc, char **argv)
{
	struct api_link *l;
	char err[256];
	sigset_t set;
	int sfd, status;

	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: api_echo SOCKET_PATH [MAX_PAYLOAD]\n");
		return EXIT_OTHER;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0)
		return EXIT_OTHER;
	if (api_link_start(argv[1], argc == 3 ? strtoul(argv[2], NULL, 10) : 0, &l, NULL, err, sizeof(err))) {
		fprintf(stderr, "api_echo: %s\n", err);
		return EXIT_START_FAILED;
	}
	printf("ready\n");
	fflush(stdout);
	status = serve(l, sfd);
	api_link_close(l);
	return status;
}
