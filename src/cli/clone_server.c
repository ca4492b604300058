/*
 * clone_server.c - brisk restore --clone-server SOCK (clone.h): a persistent process that holds one snapshot
 * prepared (state file parsed and checked, guest RAM mapped from the memory file, /dev/kvm open, KVM's CPUID
 * tables read) and forks one VM per request.
 *
 * Why fork, and what it saves: KVM ties a VM to the address space that created it (kvm->mm: its ioctls fail
 * in any other process), so a VM cannot be made ahead and handed over; each child still creates its own VM,
 * memory slot, irqchip and vCPUs. What it saves is everything before: exec, the dynamic loader, brisk's
 * start-up, reading and checking the state file, mapping the memory file, opening /dev/kvm and fetching its
 * tables (docs/performance.md "Clones"). Guest RAM is a private file mapping in the server that no one
 * writes, so each child's writes are copy-on-write pages of its own and the memory file is never written.
 *
 * The server is single-threaded (fork copies the calling thread only), has no filter of its own (a filter is
 * inherited: the children's per-thread filters must be the strictest, so the server's could only be their
 * union), and runs nothing a request controls but the parse of its JSON (json_strict.h) and the descriptors
 * it passes. Each child closes every server descriptor before its VM exists.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brisk/cli.h"
#include "brisk/clone.h"
#include "brisk/exitcode.h"
#include "brisk/fdpass.h"
#include "brisk/kvm.h"
#include "brisk/log.h"
#include "brisk/seccomp.h"
#include "brisk/timeline.h"
#include "brisk/unix_listen.h"
#include "brisk/vm.h"

#define STOP_GRACE_MS 3000 /* at the server's end: SIGTERM, then SIGKILL for clones still there */

/* A warm clone's assignment, from the server over its socketpair, with the request's descriptors. */
struct assignment {
	uint64_t t0; /* the request's arrival (CLOCK_MONOTONIC ns): the clone's timeline starts there */
	struct clone_req req;
};

/* A warm clone: forked and building or built (KVM VM, vCPUs, devices), waiting on fd for a request. */
struct warm {
	pid_t pid;
	int fd;
	bool ready; /* it said its build is done ("r" on fd): only a ready one takes a request */
};

struct conn {
	int fd;	   /* the requester's connection; -1 once it is gone */
	pid_t pid; /* its clone, 0 before the request */
	bool eof;  /* the requester shut its end: the clone was sent SIGTERM */
};

/*
 * The server's state: global, so that a clone's exit (LeakSanitizer) finds it reachable; zero-initialised
 * (bss, not 14 KB of .data in every brisk's image), its descriptors set to -1 by clone_serve first.
 */
static struct {
	struct conn conns[CLONE_CONN_MAX];
	unsigned nr;
	int listen_fd, chld_fd, sig_fd;
	pid_t server;	    /* the server's pid: a child whose parent is another has lost it */
	bool accept_paused; /* out of descriptors (EMFILE): no accept until a connection is dropped */
	struct warm warm[CLONE_POOL_MAX];
	unsigned nr_warm, pool; /* warm clones now, and how many to keep (0 once one failed) */
	/*
	 * The links of warm clones that took a request and have not yet said their guest runs ("s") or ended:
	 * each one's replacement is forked only then, so that the fork and its build do not compete for the
	 * host's CPUs with the clone's start (docs/performance.md "A clone server").
	 */
	struct warm starting[CLONE_POOL_MAX]; /* ready: unused */
	unsigned nr_starting;
	struct unix_listener sock;
} srv;

static void send_msg(int fd, const char *buf, size_t n)
{
	if (fd >= 0 && send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("clone server: a reply was not delivered: %s", strerror(errno));
}

static void send_error(int fd, const char *why, int code)
{
	char buf[CLONE_MSG_MAX];

	send_msg(fd, buf, clone_reply_error(buf, why, code));
}

static void drop(unsigned i)
{
	if (srv.conns[i].fd >= 0)
		close(srv.conns[i].fd);
	srv.conns[i] = srv.conns[--srv.nr];
	srv.accept_paused = false;
}

static void close_fds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
}

/*
 * In a child, first: the server's descriptors closed (the requesters' connections above all, whose end is each
 * clone's stop; the other warm clones' links, started or not), SIGCHLD unblocked, SIGTERM when the server dies (the
 * connection it holds is the clone's handle), the seccomp rules made this process's. Returns the child's signalfd.
 */
static int child_setup(void)
{
	sigset_t chld;

	close(srv.listen_fd);
	close(srv.chld_fd);
	close(srv.sig_fd);
	for (unsigned i = 0; i < srv.nr; i++)
		if (srv.conns[i].fd >= 0)
			close(srv.conns[i].fd);
	for (unsigned i = 0; i < srv.nr_warm; i++)
		close(srv.warm[i].fd);
	for (unsigned i = 0; i < srv.nr_starting; i++)
		close(srv.starting[i].fd);
	srv.nr = srv.nr_warm = srv.nr_starting = 0;
	srv.sock.bound = false; /* the path is the server's to unlink */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_UNBLOCK, &chld, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && getppid() != srv.server)
		raise(SIGTERM); /* the server ended before the prctl */
	seccomp_forked();
	return cli_setup_signals();
}

/*
 * In a child with its request: the request's descriptors on 0-2, logging and accounting restarted at the
 * request's arrival, then the clone run. Never returns.
 */
static void child_run(struct vm *prepared, const struct clone_req *req, int *fds, unsigned nfds, uint64_t t0,
		      int sig_fd, clone_run_fn run, void *ctx)
{
	int ret;

	for (unsigned i = 0; i < nfds; i++)
		if (dup2(fds[i], (int)i) < 0)
			_exit(EXIT_HOST);
	close_fds(fds, nfds);
	log_reopen_stderr();
	timeline_restart(t0);
	kvm_ioctl_stats_reset();
	ret = run(prepared, req, sig_fd, ctx);
	fflush(NULL);
	exit(ret);
}

/* A child forked for a request: built and run at once. */
static void child(struct vm *prepared, const struct clone_req *req, int *fds, unsigned nfds, uint64_t t0,
		  clone_run_fn run, void *ctx)
{
	int sig_fd = child_setup();

	child_run(prepared, req, fds, nfds, t0, sig_fd, run, ctx);
}

/*
 * A warm clone: built now (vm_restore_clone_build), then waiting for its assignment on `link`; a signal or the
 * server's end before one ends it (EXIT_STOPPED). Its build's messages go to the server's stderr. Never returns.
 */
static void warm_child(struct vm *prepared, int link, clone_run_fn run, void *ctx)
{
	struct assignment a;
	int sig_fd = child_setup(), fds[CLONE_FDS];
	struct pollfd p[2] = {{.fd = link, .events = POLLIN}, {.fd = sig_fd, .events = POLLIN}};
	struct vm_error e;
	unsigned nfds = 0;
	bool truncated = false;
	ssize_t n;

	if (vm_restore_clone_build(prepared, &e)) {
		vm_destroy(prepared);
		exit(cli_vm_failed(&e)); /* the server then says a warm clone ended unused */
	}
	if (write(link, "r", 1) != 1) { /* ready; no server to tell: stop */
		vm_destroy(prepared);
		exit(EXIT_STOPPED);
	}
	while (poll(p, 2, -1) < 0)
		if (errno != EINTR)
			break;
	n = p[0].revents ? fdpass_recv(link, &a, sizeof(a), 0, fds, CLONE_FDS, &nfds, &truncated) : -1;
	if (n != (ssize_t)sizeof(a) || truncated) {
		vm_destroy(prepared); /* stopped, or the server is gone */
		exit(EXIT_STOPPED);
	}
	a.req.report_json[sizeof(a.req.report_json) - 1] = '\0';
	a.req.vsock_uds[sizeof(a.req.vsock_uds) - 1] = '\0';
	a.req.started_fd = link; /* told "s" once the guest runs; closed then, or at the clone's exit */
	child_run(prepared, &a.req, fds, nfds, a.t0, sig_fd, run, ctx);
}

/* One more warm clone (srv.pool of them are kept). Returns 0, or -errno (the pool is then switched off). */
static int spawn_warm(struct vm *prepared, clone_run_fn run, void *ctx)
{
	int sv[2];
	pid_t pid;

	if (srv.nr_warm + srv.nr_starting >= srv.pool)
		return 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		warm_child(prepared, sv[1], run, ctx);
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return -errno;
	}
	srv.warm[srv.nr_warm++] = (struct warm){.pid = pid, .fd = sv[0]};
	return 0;
}

static void refill(struct vm *prepared, clone_run_fn run, void *ctx)
{
	while (srv.nr_warm + srv.nr_starting < srv.pool) {
		int ret = spawn_warm(prepared, run, ctx);

		if (ret) {
			log_warn("clone server: a warm clone: %s; clones are forked per request from now on",
				 strerror(-ret));
			srv.pool = 0;
		}
	}
}

/*
 * The oldest ready warm clone takes the request: its descriptors and arrival time sent over its link, which is
 * then kept in srv.starting until the clone says its guest runs. Returns its pid, or 0 when none is ready (one
 * still building would make the request wait for its build: a fork is no slower) or it could not be told (it
 * is stopped, and the request forks instead).
 */
static pid_t assign_warm(const struct clone_req *req, int *fds, unsigned nfds, uint64_t t0)
{
	struct assignment a = {.t0 = t0, .req = *req};
	unsigned k = 0;
	struct warm w;
	int ret;

	while (k < srv.nr_warm && !srv.warm[k].ready)
		k++;
	if (k == srv.nr_warm)
		return 0;
	w = srv.warm[k];
	memmove(srv.warm + k, srv.warm + k + 1, (--srv.nr_warm - k) * sizeof(srv.warm[0]));
	if ((ret = fdpass_send(w.fd, &a, sizeof(a), fds, nfds))) {
		log_warn("clone server: warm clone %d cannot take a request: %s", (int)w.pid, strerror(-ret));
		kill(w.pid, SIGTERM);
		close(w.fd);
		return 0;
	}
	srv.starting[srv.nr_starting++] = w; /* a slot of the pool's: nr_warm + nr_starting <= pool */
	return w.pid;
}

/* A request on connection i: parsed, then a clone forked for it; any failure answered and the connection closed. */
static void serve_request(unsigned i, struct vm *prepared, clone_run_fn run, void *ctx)
{
	char msg[CLONE_MSG_MAX], err[512], reply[CLONE_MSG_MAX];
	uint64_t t0 = timeline_now_ns();
	struct clone_req req;
	int fds[CLONE_FDS + 1], fork_errno = 0; /* one more than a request may carry: "4 came" is said so */
	unsigned nfds;
	bool truncated;
	ssize_t n =
	    fdpass_recv(srv.conns[i].fd, msg, sizeof(msg) - 1, MSG_DONTWAIT, fds, CLONE_FDS + 1, &nfds, &truncated);
	pid_t pid;

	if (n == -EAGAIN || n == -EINTR)
		return;
	if (n <= 0) { /* gone before asking */
		drop(i);
		return;
	}
	if (truncated) {
		snprintf(err, sizeof(err), "clone request: longer than %d bytes or more than %d descriptors",
			 CLONE_MSG_MAX - 1, CLONE_FDS);
		goto refuse;
	}
	if (clone_req_parse(msg, (size_t)n, nfds, &req, err, sizeof(err)))
		goto refuse;
	bool taken = (pid = assign_warm(&req, fds, nfds, t0)) > 0; /* by a warm clone */

	if (!taken) {
		fflush(NULL);
		pid = fork();
		if (pid == 0)
			child(prepared, &req, fds, nfds, t0, run, ctx);
		fork_errno = errno;
	}
	close_fds(fds, nfds);
	if (pid < 0) {
		log_warn("clone server: fork: %s", strerror(fork_errno));
		snprintf(err, sizeof(err), "fork: %s", strerror(fork_errno));
		send_error(srv.conns[i].fd, err, EXIT_HOST);
		drop(i);
		return;
	}
	srv.conns[i].pid = pid;
	send_msg(srv.conns[i].fd, reply, clone_reply_pid(reply, pid));
	log_info("clone server: clone %d started", (int)pid);
	if (!taken) /* after the reply; a warm clone's replacement once it runs its guest (started_said) */
		refill(prepared, run, ctx);
	return;
refuse:
	close_fds(fds, nfds);
	log_info("clone server: %s", err);
	send_error(srv.conns[i].fd, err, EXIT_USAGE);
	drop(i);
}

/* A warm clone's link readable: "r", its build is done (its end or anything else: reap() sees to it). */
static void warm_said(unsigned k)
{
	char c;

	if (recv(srv.warm[k].fd, &c, 1, MSG_DONTWAIT) == 1 && c == 'r') {
		srv.warm[k].ready = true;
		log_info("clone server: warm clone %d ready", (int)srv.warm[k].pid);
	}
}

/* A started clone's link readable: "s" (its guest runs), its end, or anything else: its replacement is due. */
static void started_said(unsigned k, struct vm *prepared, clone_run_fn run, void *ctx)
{
	struct warm w = srv.starting[k];
	char c = 0;

	srv.starting[k] = srv.starting[--srv.nr_starting];
	if (recv(w.fd, &c, 1, MSG_DONTWAIT) == 1 && c == 's')
		log_info("clone server: clone %d runs its guest; its replacement is forked now", (int)w.pid);
	else
		log_info("clone server: clone %d ended before its guest ran; its replacement is forked now",
			 (int)w.pid);
	close(w.fd);
	refill(prepared, run, ctx);
}

/* The requester shut or closed its end (or sent more): its clone is asked to stop. */
static void requester_gone(unsigned i)
{
	char c;
	ssize_t n = recv(srv.conns[i].fd, &c, 1, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) /* nothing more is asked after the request: read and ignored */
		return;
	srv.conns[i].eof = true;
	log_info("clone server: the requester of clone %d is gone: stopping it", (int)srv.conns[i].pid);
	kill(srv.conns[i].pid, SIGTERM);
}

/*
 * At the limit, before a new connection is refused: every connection whose requester hung up before asking (no
 * clone yet) gives its slot back now. Their hang-ups may sit in this turn's poll results unread, or come after
 * it, while the new connection is already waiting (a client that closes 1,024 idle connections and connects at
 * once).
 */
static void sweep_unasked(void)
{
	static struct pollfd p[CLONE_CONN_MAX];

	for (unsigned i = 0; i < srv.nr; i++)
		p[i] = (struct pollfd){.fd = srv.conns[i].pid ? -1 : srv.conns[i].fd, .events = POLLIN};
	if (poll(p, srv.nr, 0) <= 0)
		return;
	for (unsigned i = srv.nr; i-- > 0;) /* from the last down: drop() moves the last entry into i */
		if (p[i].revents & (POLLHUP | POLLERR))
			drop(i);
}

static void accept_all(void)
{
	for (;;) {
		int fd = accept4(srv.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) { /* waits in the backlog until a connection goes */
				log_warn("clone server: accept: %s; %u connections open", strerror(errno), srv.nr);
				srv.accept_paused = true;
			} else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
				log_warn("clone server: accept: %s", strerror(errno));
			}
			return;
		}
		if (srv.nr == CLONE_CONN_MAX)
			sweep_unasked();
		if (srv.nr == CLONE_CONN_MAX) {
			char why[96];

			snprintf(why, sizeof(why), "%d connections (clones) at once is this server's limit",
				 CLONE_CONN_MAX);
			send_error(fd, why, EXIT_HOST);
			close(fd);
			continue;
		}
		srv.conns[srv.nr++] = (struct conn){.fd = fd};
	}
}

static int exit_code(int status)
{
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Every ended child reaped; its requester told. */
static void reap(void)
{
	struct signalfd_siginfo si;
	char reply[CLONE_MSG_MAX];
	int status;
	pid_t pid;

	while (read(srv.chld_fd, &si, sizeof(si)) == sizeof(si))
		;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (unsigned i = 0; i < srv.nr_warm; i++) {
			if (srv.warm[i].pid != pid)
				continue;
			if (srv.pool) /* not the server's own stop (stop_all) */
				log_warn(
				    "clone server: warm clone %d ended before any request (exit status %d); clones "
				    "are forked per request from now on",
				    (int)pid, exit_code(status));
			close(srv.warm[i].fd);
			srv.warm[i] = srv.warm[--srv.nr_warm];
			srv.pool = 0;
			break;
		}
		for (unsigned i = 0; i < srv.nr; i++) {
			if (srv.conns[i].pid != pid)
				continue;
			log_info("clone server: clone %d ended: %d", (int)pid, exit_code(status));
			send_msg(srv.conns[i].fd, reply, clone_reply_exit(reply, exit_code(status)));
			drop(i);
			break;
		}
	}
}

/* The server's end: each clone sent SIGTERM, SIGKILL after STOP_GRACE_MS, all reaped, every connection closed. */
static void stop_all(void)
{
	struct timespec end, now;
	unsigned left = 0;

	srv.pool = 0;
	while (srv.nr_starting)
		close(srv.starting[--srv.nr_starting].fd);
	for (unsigned i = 0; i < srv.nr_warm; i++) { /* their EOF ends them; reaped below */
		close(srv.warm[i].fd);
		srv.warm[i].fd = -1;
	}
	for (unsigned i = 0; i < srv.nr; i++)
		if (srv.conns[i].pid > 0 && kill(srv.conns[i].pid, SIGTERM) == 0)
			left++;
	left += srv.nr_warm;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += STOP_GRACE_MS / 1000;
	while (left) {
		struct pollfd p = {.fd = srv.chld_fd, .events = POLLIN};
		long ms;

		clock_gettime(CLOCK_MONOTONIC, &now);
		ms = (end.tv_sec - now.tv_sec) * 1000 + (end.tv_nsec - now.tv_nsec) / 1000000;
		if (ms <= 0) {
			for (unsigned i = 0; i < srv.nr; i++)
				if (srv.conns[i].pid > 0) {
					log_warn("clone server: clone %d still running %d s after SIGTERM; killing it",
						 (int)srv.conns[i].pid, STOP_GRACE_MS / 1000);
					kill(srv.conns[i].pid, SIGKILL);
				}
			for (unsigned i = 0; i < srv.nr_warm; i++)
				kill(srv.warm[i].pid, SIGKILL);
			end.tv_sec += 3600;
		}
		poll(&p, 1, ms > 0 ? (int)ms : 100);
		reap();
		left = srv.nr_warm;
		for (unsigned i = 0; i < srv.nr; i++)
			left += srv.conns[i].pid > 0;
	}
	while (srv.nr)
		drop(srv.nr - 1);
}

/* Room for CLONE_CONN_MAX connections beside brisk's own descriptors: the soft limit raised to the hard one. */
static void raise_nofile(void)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max && r.rlim_cur < 2 * CLONE_CONN_MAX) {
		r.rlim_cur = r.rlim_max < 2 * CLONE_CONN_MAX ? r.rlim_max : 2 * CLONE_CONN_MAX;
		(void)setrlimit(RLIMIT_NOFILE, &r);
	}
}

static int setup(const char *sock_path, int sig_fd)
{
	char err[512];
	sigset_t chld;

	raise_nofile();
	srv.server = getpid();
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &chld, NULL) ||
	    (srv.chld_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		log_error("clone server: signalfd(SIGCHLD): %s", strerror(errno));
		return EXIT_HOST;
	}
	srv.sig_fd = sig_fd;
	srv.listen_fd = unix_listen(&srv.sock, sock_path, SOCK_SEQPACKET, 128, "clone server socket", err, sizeof(err));
	if (srv.listen_fd < 0) {
		int e = -srv.listen_fd;

		log_error("--clone-server %s: %s", sock_path, err);
		return e == EINVAL || e == ENAMETOOLONG || e == ENOENT || e == ENOTDIR || e == EEXIST ||
			       e == EADDRINUSE || e == EACCES
			   ? EXIT_USAGE
			   : EXIT_HOST;
	}
	if (fcntl(srv.listen_fd, F_SETFL, O_NONBLOCK) < 0) {
		log_error("clone server: fcntl: %s", strerror(errno));
		return EXIT_HOST;
	}
	return 0;
}

int clone_serve(struct vm *prepared, const char *sock_path, unsigned pool, int sig_fd, clone_run_fn run, void *ctx)
{
	static struct pollfd p[3 + CLONE_CONN_MAX + 2 * CLONE_POOL_MAX];
	int ret;

	srv.listen_fd = srv.chld_fd = srv.sig_fd = -1;
	ret = setup(sock_path, sig_fd);

	if (ret)
		goto out;
	srv.pool = pool < CLONE_POOL_MAX ? pool : CLONE_POOL_MAX;
	refill(prepared, run, ctx);
	log_info("clone server: listening on %s, %u warm clones", sock_path, srv.nr_warm);
	for (;;) {
		unsigned nr = srv.nr, nw = srv.nr_warm, ns = srv.nr_starting;

		p[0] = (struct pollfd){.fd = sig_fd, .events = POLLIN};
		p[1] = (struct pollfd){.fd = srv.chld_fd, .events = POLLIN};
		p[2] = (struct pollfd){.fd = srv.accept_paused ? -1 : srv.listen_fd, .events = POLLIN};
		for (unsigned i = 0; i < nr; i++) /* a clone's requester: watched until it is gone */
			p[3 + i] = (struct pollfd){.fd = srv.conns[i].eof ? -1 : srv.conns[i].fd, .events = POLLIN};
		for (unsigned k = 0; k < nw; k++) /* a warm clone's link, until it is ready */
			p[3 + nr + k] =
			    (struct pollfd){.fd = srv.warm[k].ready ? -1 : srv.warm[k].fd, .events = POLLIN};
		for (unsigned k = 0; k < ns; k++) /* a started warm clone's link, until it says its guest runs */
			p[3 + nr + nw + k] = (struct pollfd){.fd = srv.starting[k].fd, .events = POLLIN};
		if (poll(p, 3 + nr + nw + ns, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error("clone server: poll: %s", strerror(errno));
			ret = EXIT_HOST;
			break;
		}
		if (p[0].revents) {
			struct signalfd_siginfo si;

			if (read(sig_fd, &si, sizeof(si)) == sizeof(si))
				log_info("clone server: stopping on %s", strsignal((int)si.ssi_signo));
			ret = EXIT_STOPPED;
			break;
		}
		for (unsigned k = 0; k < nw; k++) /* first: nothing below changes the warm table before this */
			if (p[3 + nr + k].revents)
				warm_said(k);
		for (unsigned k = ns; k-- > 0;) /* from the last down: started_said moves the last into k */
			if (p[3 + nr + nw + k].revents)
				started_said(k, prepared, run, ctx);
		/* Connections from the last one down: drop() moves the last entry into a dropped one's place. */
		for (unsigned i = nr; i-- > 0;) {
			if (!p[3 + i].revents)
				continue;
			if (srv.conns[i].pid == 0)
				serve_request(i, prepared, run, ctx);
			else
				requester_gone(i);
		}
		if (p[1].revents)
			reap();
		if (p[2].revents)
			accept_all();
	}
out:
	unix_listen_unlink(&srv.sock);
	if (srv.listen_fd >= 0)
		close(srv.listen_fd);
	stop_all();
	if (srv.chld_fd >= 0)
		close(srv.chld_fd);
	return ret;
}
