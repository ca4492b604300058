/*
 * clone.c - `brisk clone --server SOCK`: asks a clone server (brisk restore --clone-server, clone.h) for one
 * clone that uses this process's stdin, stdout and stderr (and, with --vsock-uds, its own vsock socket path),
 * and exits with the clone's exit status. A signal (SIGINT, SIGTERM, SIGHUP) shuts the connection's sending
 * side: the server stops the clone, whose status (16, stopped) still comes back.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "brisk/cli.h"
#include "brisk/clone.h"
#include "brisk/exitcode.h"
#include "brisk/fdpass.h"
#include "brisk/log.h"
#include "brisk/opts.h"

static const struct option opts[] = {
    {"server", required_argument, NULL, 's'},
    {"report-json", required_argument, NULL, 'r'},
    {"vsock-uds", required_argument, NULL, 'v'},
    {"log-level", required_argument, NULL, 'l'},
    {"help", no_argument, NULL, 'h'},
    {0, 0, 0, 0},
};

static int usage_error(const char *why, const char *arg)
{
	fprintf(stderr, "brisk clone: %s%s%s%s; try 'brisk help clone'\n", why, arg ? " '" : "", arg ? arg : "",
		arg ? "'" : "");
	return EXIT_USAGE;
}

/* `path` made absolute into out (PATH_MAX bytes): the server's working directory is not ours. NULL stays NULL. */
static const char *absolute(const char *opt, const char *path, char *out)
{
	char cwd[PATH_MAX];

	if (!path || path[0] == '/')
		return path;
	if (!getcwd(cwd, sizeof(cwd)) || snprintf(out, PATH_MAX, "%s/%s", cwd, path) >= PATH_MAX) {
		fprintf(stderr, "brisk clone: %s %s: cannot make it an absolute path\n", opt, path);
		return NULL;
	}
	return out;
}

/*
 * The request into buf: {} with report_json and vsock_override {uds_path} when given, made absolute. Returns
 * its length or -1 (message printed; the server checks the lengths).
 */
static int build_request(const char *report, const char *vsock, char *buf)
{
	char rpath[PATH_MAX], vpath[PATH_MAX];
	json_object *o = json_object_new_object(), *v = NULL;
	const char *s;
	int n = -1;

	if (!o)
		return fprintf(stderr, "brisk clone: out of memory\n"), -1;
	if ((report && !(report = absolute("--report-json", report, rpath))) ||
	    (vsock && !(vsock = absolute("--vsock-uds", vsock, vpath))))
		goto out;
	if (report && json_object_object_add(o, "report_json", json_object_new_string(report)))
		goto out;
	if (vsock &&
	    (!(v = json_object_new_object()) || json_object_object_add(v, "uds_path", json_object_new_string(vsock)) ||
	     json_object_object_add(o, "vsock_override", v))) {
		json_object_put(v);
		goto out;
	}
	s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	if (s && strlen(s) < CLONE_MSG_MAX)
		n = snprintf(buf, CLONE_MSG_MAX, "%s", s);
	else
		fprintf(stderr, "brisk clone: the request is too long (the paths)\n");
out:
	json_object_put(o);
	return n;
}

static int connect_to(const char *server)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(server) >= sizeof(sa.sun_path) || !server[0]) {
		fprintf(stderr, "brisk clone: --server %s: not a Unix socket path (1..%zu bytes)\n", server,
			sizeof(sa.sun_path) - 1);
		return -EXIT_USAGE;
	}
	memcpy(sa.sun_path, server, strlen(server) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "brisk clone: socket: %s\n", strerror(errno));
		return -EXIT_HOST;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "brisk clone: --server %s: %s (is brisk restore --clone-server running there?)\n",
			server, strerror(errno));
		close(fd);
		return -EXIT_USAGE;
	}
	return fd;
}

/* The request with this process's descriptors 0-2. */
static int send_request(int fd, const char *req, size_t n)
{
	static const int stdio[CLONE_FDS] = {0, 1, 2};
	int ret = fdpass_send(fd, req, n, stdio, CLONE_FDS);

	if (ret) {
		fprintf(stderr, "brisk clone: sending the request: %s\n", strerror(-ret));
		return EXIT_HOST;
	}
	return 0;
}

/* The replies until the clone's exit status; a signal shuts our sending side (the server stops the clone). */
static int wait_replies(int fd)
{
	char buf[CLONE_MSG_MAX], err[512];
	struct clone_reply r;
	sigset_t set;
	int sig_fd;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sig_fd = signalfd(-1, &set, SFD_CLOEXEC);
	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = sig_fd, .events = POLLIN}};
		ssize_t n;

		if (poll(p, sig_fd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
			break;
		if (sig_fd >= 0 && (p[1].revents & POLLIN)) {
			struct signalfd_siginfo si;

			if (read(sig_fd, &si, sizeof(si)) == sizeof(si))
				log_info("brisk clone: %s: asking the server to stop the clone",
					 strsignal((int)si.ssi_signo));
			shutdown(fd, SHUT_WR);
			close(sig_fd);
			sig_fd = -1;
		}
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (clone_reply_parse(buf, (size_t)n, &r, err, sizeof(err))) {
			fprintf(stderr, "brisk clone: %s\n", err);
			return EXIT_HOST;
		}
		if (r.kind == CLONE_REPLY_PID)
			log_info("brisk clone: clone %ld started", r.value);
		else if (r.kind == CLONE_REPLY_ERROR)
			return fprintf(stderr, "brisk clone: the clone server refused: %s\n", r.why), (int)r.value;
		else
			return (int)r.value;
	}
	fprintf(stderr, "brisk clone: the clone server closed the connection before the clone's exit status\n");
	return EXIT_HOST;
}

int cmd_clone(int argc, char **argv)
{
	const char *server = NULL, *report = NULL, *vsock = NULL;
	char req[CLONE_MSG_MAX], err[256];
	enum log_level level;
	int c, fd, n, ret;

	if (opts_check_exact(argc - 1, argv + 1, "h", opts, err, sizeof(err)))
		return usage_error(err, NULL);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 's')
			server = optarg;
		else if (c == 'r')
			report = optarg;
		else if (c == 'v')
			vsock = optarg;
		else if (c == 'l' && !log_parse_level(optarg, &level))
			log_set_level(level);
		else if (c == 'h')
			return cli_usage(stdout, "clone"), 0;
		else
			return c == 'l' ? usage_error("invalid --log-level (error, warn, info or debug):", optarg)
					: usage_error("unknown option", NULL);
	}
	if (optind < argc)
		return usage_error("unexpected argument", argv[optind]);
	if (!server)
		return usage_error("--server SOCK is required", NULL);
	if ((n = build_request(report, vsock, req)) < 0)
		return EXIT_USAGE;
	if ((fd = connect_to(server)) < 0)
		return -fd;
	ret = send_request(fd, req, (size_t)n);
	if (!ret)
		ret = wait_replies(fd);
	close(fd);
	return ret;
}
