/*
 * api_serve.c - the API's loop (api.h): requests from the brisk-api helper, the VM's end, signals and
 * the periodic metrics flush, on one thread (the main thread), one request at a time.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "api_impl.h"
#include "brisk/exitcode.h"
#include "brisk/fc_metrics.h"
#include "brisk/log.h"
#include "brisk/timeline.h"

void api_init(struct api *a, const struct vm_config *base)
{
	memset(a, 0, sizeof(*a));
	fc_vm_init(&a->fc);
	a->fc.check_files = true; /* the PUTs open what they name, as Firecracker's (fc_config.h) */
	a->base = *base;
	a->base.nr_disks = 0; /* a restore takes its disks from the snapshot; base's stay the caller's */
	memset(a->base.disk, 0, sizeof(a->base.disk));
}

int api_adopt_vm(struct api *a, struct vm *vm, const struct vm_config *cfg, bool started)
{
	a->vm = vm;
	a->state = started ? API_RUNNING : API_PAUSED;
	return fc_vm_set_from_config(&a->fc, cfg);
}

void api_free(struct api *a)
{
	fc_vm_free(&a->fc);
}

/* Link errors a client or a flood can repeat, each kind counted and logged rate-limited (log_ratelimit). */
static struct {
	uint64_t malformed, reply_failed, too_big;
} link_errors;

/* Sends r, or a 500 naming the limit at once when r's body is over it (never a client left to time out). */
static int send_reply(struct api_link *link, const struct api_request *req, const struct api_reply *r)
{
	struct api_reply big = {0};
	int ret = api_link_reply(link, r->status, r->body);

	if (ret != -EMSGSIZE)
		return ret;
	if (log_ratelimit(link_errors.too_big++))
		log_warn("API: the reply to %s %s is %zu bytes, over the limit of %d (%" PRIu64 " so far)",
			 api_method_name(req->method), req->path, strlen(r->body), API_REPLY_MAX, link_errors.too_big);
	api_fault(&big, 500, "The reply of %zu bytes exceeds the API's limit of %d bytes.", strlen(r->body),
		  API_REPLY_MAX);
	ret = api_link_reply(link, big.status, big.body);
	free(big.body);
	return ret;
}

/* Answers every request waiting on the link. Returns 0, or -EPIPE when the helper has gone. */
static int serve_requests(struct api *a, struct api_link *link)
{
	struct api_request req;
	struct api_reply r;
	char err[256];

	for (;;) {
		int ret = api_link_recv(link, &req, err, sizeof(err));

		if (ret == -EAGAIN)
			return 0;
		if (ret == -EPROTO) {
			if (log_ratelimit(link_errors.malformed++))
				log_warn("API: dropped a malformed message from brisk-api: %s (%" PRIu64 " so far)",
					 err, link_errors.malformed);
			continue;
		}
		if (ret)
			return ret;
		api_handle(a, req.method, req.path, req.body, req.body_len, &r);
		ret = send_reply(link, &req, &r);
		free(r.body);
		if (ret == -EPIPE)
			return ret;
		if (ret && log_ratelimit(link_errors.reply_failed++))
			log_warn("API: replying to %s %s failed: %s (%" PRIu64 " so far)", api_method_name(req.method),
				 req.path, strerror(-ret), link_errors.reply_failed);
	}
}

/* SIGINT/SIGTERM/SIGHUP: stops a running VM (its end is then handled as any other), or brisk itself. */
static bool on_signal(struct api *a, int sig_fd)
{
	struct signalfd_siginfo si;

	if (read(sig_fd, &si, sizeof(si)) == sizeof(si)) {
		fc_metrics_signal((int)si.ssi_signo); /* SIGHUP, SIGXCPU: Firecracker's "signals" group */
		log_warn("stopping on %s", strsignal((int)si.ssi_signo));
	}
	if (!a->vm)
		return true;
	vm_request_exit(a->vm, EXIT_STOPPED, "stopped by signal");
	return false;
}

/* The VM ended: its threads joined, a last metrics line, the exit status. */
static int finish(struct api *a)
{
	int code = vm_finish(a->vm);

	timeline_mark(TL_EXIT);
	api_metrics_flush(a); /* Firecracker's Vmm::stop: "Write the metrics before exiting." */
	if (a->base.timeline)
		vm_print_report(a->vm, stdout);
	vm_destroy(a->vm);
	a->vm = NULL;
	return code;
}

int api_serve(struct api *a, struct api_link *link, int sig_fd)
{
	struct pollfd p[4 + VM_WATCH_FDS];
	bool warming = !a->vm && !a->dry_run; /* vm_prewarm_step's pieces left for idle turns */
	char why[96];
	int n;

	fc_metrics_report_process_times(); /* Firecracker's ApiServer::run, as its API starts serving */
	for (;;) {
		if (a->vm && fc_metrics_start_periodic())
			api_metrics_tick(a); /* Firecracker's PeriodicMetrics::start: a line once the VM is built */
		p[0] = (struct pollfd){.fd = link ? api_link_fd(link) : -1, .events = POLLIN};
		p[1] = (struct pollfd){.fd = sig_fd, .events = POLLIN};
		p[2] = (struct pollfd){.fd = a->vm ? vm_wake_fd(a->vm) : -1, .events = POLLIN};
		p[3] = (struct pollfd){.fd = fc_metrics_rest_fd(), .events = POLLOUT}; /* a line's rest, FIFO */
		for (unsigned i = 4; i < 4 + VM_WATCH_FDS; i++)
			p[i] = (struct pollfd){.fd = -1};
		if (a->vm)
			vm_watch_fds(a->vm, p + 4); /* a Uffd handler's exit, a working set's window */
		if (a->vm && vm_exit_requested(a->vm))
			return finish(a);
		warming = warming && !a->vm;
		n = poll(p, 4 + VM_WATCH_FDS, warming ? 0 : fc_metrics_timeout_ms());
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("API: poll: %s", strerror(errno));
			return EXIT_HOST;
		}
		if (n == 0 && warming) { /* idle: one more piece of any VM's set-up, then look again */
			warming = vm_prewarm_step();
			continue;
		}
		if ((p[1].revents & POLLIN) && on_signal(a, sig_fd))
			return EXIT_STOPPED;
		if (a->vm)
			vm_watch_events(a->vm, p + 4);
		if (p[3].revents & POLLOUT)
			fc_metrics_write_rest();
		api_metrics_tick(a);
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)) || serve_requests(a, link) == 0)
			continue;
		/*
		 * The helper is gone: reaped at once and its socket file removed (no zombie, no path that refuses
		 * connections). It is not restarted: a running VM's main thread may no longer create processes
		 * (its seccomp filter), so the VM runs on without its API, as Firecracker's VMM outlives its API
		 * thread; with no VM yet, brisk has nothing left to serve and ends (docs/exit-codes.md: 4).
		 */
		api_link_lost(link, why, sizeof(why));
		log_error("API: the brisk-api helper %s; the API socket %s is removed%s", why, api_link_path(link),
			  a->vm ? ", the VM runs on without its API" : "");
		if (!a->vm)
			return EXIT_HOST;
		link = NULL;
	}
}
