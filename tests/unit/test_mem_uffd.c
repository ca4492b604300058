/*
 * test_mem_uffd.c - Firecracker's Uffd handshake end to end without KVM (mem_uffd.h): a forked handler receives
 * the message and the userfaultfd exactly as Firecracker's example handler does and serves brisk's faults with
 * UFFDIO_COPY; brisk places a page itself (gmem_fill_page), fetches all of RAM for a snapshot (gmem_uffd_fetch_all)
 * and gives up on a handler that stops serving, unregisters at teardown, and refuses sockets that are not there.
 * Skipped where this host gives no userfaultfd.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/mem_uffd.h"

#define MEM  (16ull << 20)
#define FILL 0x5a

static char sock_path[108], err[768];
static pid_t child = -1; /* the handler, killed by the teardown whatever the test did */

static int kill_child(void **state)
{
	(void)state;
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		child = -1;
	}
	unlink(sock_path);
	return 0;
}

/*
 * The handler (a child process): Firecracker's recv_with_fd into 1024 bytes, then serve faults with FILL pages;
 * after `limit` faults (0: none) it stops serving and stays alive.
 */
static void handler(int listen_fd, int report_fd, unsigned limit)
{
	static uint8_t page[4096];
	char msg[1024], ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = msg, .iov_len = sizeof(msg) - 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	int c = accept(listen_fd, NULL, NULL), uffd = -1;
	ssize_t n = c >= 0 ? recvmsg(c, &mh, 0) : -1;
	struct cmsghdr *h = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;

	if (!h || h->cmsg_type != SCM_RIGHTS)
		_exit(2);
	memcpy(&uffd, CMSG_DATA(h), sizeof(int));
	msg[n] = 0;
	if (write(report_fd, msg, (size_t)n + 1) < 0)
		_exit(3);
	memset(page, FILL, sizeof(page));
	for (unsigned served = 0;; served++) {
		struct pollfd p = {.fd = uffd, .events = POLLIN};
		struct uffd_msg m;

		if (limit && served == limit)
			pause();
		if (poll(&p, 1, -1) < 0 || (p.revents & (POLLHUP | POLLERR)))
			_exit(0);
		if (read(uffd, &m, sizeof(m)) != sizeof(m) || m.event != UFFD_EVENT_PAGEFAULT)
			continue;
		struct uffdio_copy cp = {
		    .dst = m.arg.pagefault.address & ~4095ull, .src = (uintptr_t)page, .len = 4096};
		(void)ioctl(uffd, UFFDIO_COPY, &cp);
	}
}

static int have_uffd(void)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);

	if (fd >= 0)
		close(fd);
	if (dev >= 0)
		close(dev);
	return fd >= 0 || dev >= 0;
}

static int listen_at(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 1), 0);
	return fd;
}

/* The handler forked, listening (it binds itself: SO_PEERCRED names the listener); returns the report pipe. */
static int start_handler(unsigned limit)
{
	char c;
	int pipefd[2], lfd;

	snprintf(sock_path, sizeof(sock_path), "/tmp/brisk-uffd-%d.sock", (int)getpid());
	assert_int_equal(pipe(pipefd), 0);
	child = fork();
	if (child == 0) {
		close(pipefd[0]);
		lfd = listen_at(sock_path);
		if (write(pipefd[1], "L", 1) != 1)
			_exit(4);
		handler(lfd, pipefd[1], limit);
	}
	close(pipefd[1]);
	assert_int_equal(read(pipefd[0], &c, 1), 1); /* listening */
	return pipefd[0];
}

static void test_handshake_and_faults(void **state)
{
	static uint8_t mine[4096];
	char got[1024] = "", want[256];
	struct uffd_fetcher f = {0};
	struct uffd_peer peer;
	struct gmem m;
	pid_t pid;
	int report;

	(void)state;
	if (!have_uffd())
		skip();
	report = start_handler(0);
	pid = child;
	assert_int_equal(gmem_init_uffd(&m, MEM, false, sock_path, false, &peer, err, sizeof(err)), 0);
	assert_true(m.uffd_backed);
	assert_int_equal(peer.pid, pid);
	assert_true(peer.pidfd >= 0);
	/* The message, as Firecracker's serde writes Vec<GuestRegionUffdMapping>. */
	assert_true(read(report, got, sizeof(got) - 1) > 0);
	snprintf(want, sizeof(want), "[{\"base_host_virt_addr\":%llu,\"size\":%llu,\"offset\":0,\"page_size_kib\":4}]",
		 (unsigned long long)(uintptr_t)m.base, (unsigned long long)MEM);
	assert_string_equal(got, want);
	/* A missing page is the handler's to serve. */
	assert_int_equal(*(volatile uint8_t *)gmem_ptr(&m, 0x3000, 1), FILL);
	assert_int_equal(*(volatile uint8_t *)gmem_ptr(&m, MEM - 1, 1), FILL);
	/* brisk's own page: placed with UFFDIO_COPY (the handler is never asked), or copied once it is there. */
	memset(mine, 0x11, sizeof(mine));
	assert_int_equal(gmem_fill_page(&m, 0x5000, mine), 0);
	assert_int_equal(*(volatile uint8_t *)gmem_ptr(&m, 0x5fff, 1), 0x11);
	assert_int_equal(gmem_fill_page(&m, 0x3000, mine), 0); /* EEXIST: already served */
	assert_int_equal(*(volatile uint8_t *)gmem_ptr(&m, 0x3000, 1), 0x11);
	assert_int_equal(gmem_fill_page(&m, 0x5001, mine), -EINVAL);
	/* A snapshot's fetch of all of RAM: every page there when it returns, brisk's own untouched. */
	assert_true(gmem_uffd_missing(&m) > (MEM >> 12) - 8);
	assert_int_equal(gmem_uffd_fetch_all(&m, &f, 5000, err, sizeof(err)), 0);
	assert_false(f.started);
	assert_int_equal(gmem_uffd_missing(&m), 0);
	assert_int_equal(*(volatile uint8_t *)gmem_ptr(&m, MEM / 2, 1), FILL);
	assert_int_equal(*(volatile uint8_t *)gmem_ptr(&m, 0x5000, 1), 0x11);
	assert_int_equal(gmem_uffd_fetch_all(&m, &f, 5000, err, sizeof(err)), 0); /* nothing missing: at once */
	/* The handler gone and RAM unregistered: a missing page is anonymous again (zero), nothing waits. */
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	child = -1;
	struct pollfd p = {.fd = peer.pidfd, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 1000), 1); /* its pidfd says it exited */
	gmem_uffd_release(&m);
	gmem_uffd_release(&m); /* idempotent */
	close(peer.pidfd);
	close(report);
	gmem_destroy(&m);
	unlink(sock_path);
}

/*
 * A handler that serves a few pages and then none (alive): the fetch gives up after the stall time with how many
 * pages are missing, a second call waits on the same thread and gives up the same way; the release wakes it and
 * the join returns; a missing page then reads as zero (anonymous memory).
 */
static void test_fetch_gives_up(void **state)
{
	struct uffd_fetcher f = {0};
	struct uffd_peer peer;
	struct gmem m;
	int report;

	(void)state;
	if (!have_uffd())
		skip();
	report = start_handler(3);
	assert_int_equal(gmem_init_uffd(&m, MEM, false, sock_path, false, &peer, err, sizeof(err)), 0);
	assert_int_equal(gmem_uffd_fetch_all(&m, &f, 300, err, sizeof(err)), -ETIMEDOUT);
	assert_non_null(strstr(err, "served no page of guest memory in 300 ms"));
	assert_non_null(strstr(err, "are still missing"));
	assert_true(f.started);
	assert_true(gmem_uffd_missing(&m) >= (MEM >> 12) - 3);
	assert_int_equal(gmem_uffd_fetch_all(&m, &f, 200, err, sizeof(err)), -ETIMEDOUT);
	gmem_uffd_release(&m);
	gmem_uffd_fetcher_join(&f);
	assert_false(f.started);
	gmem_uffd_fetcher_join(&f); /* idempotent */
	assert_int_equal(*(volatile uint8_t *)gmem_ptr(&m, MEM - 4096, 1), 0);
	close(peer.pidfd);
	close(report);
	gmem_destroy(&m);
	unlink(sock_path);
}

static void test_refused_sockets(void **state)
{
	char path[200];
	struct uffd_peer peer;
	struct gmem m;
	int fd;

	(void)state;
	if (!have_uffd())
		skip();
	snprintf(path, sizeof(path), "/tmp/brisk-uffd-none-%d.sock", (int)getpid());
	unlink(path);
	assert_int_equal(gmem_init_uffd(&m, MEM, false, path, false, &peer, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, path));
	assert_null(m.base); /* nothing left mapped */
	assert_int_equal(peer.pidfd, -1);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	close(fd);
	assert_int_equal(gmem_init_uffd(&m, MEM, false, path, false, &peer, err, sizeof(err)), -ECONNREFUSED);
	unlink(path);
	memset(path, 'x', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = 0;
	assert_int_equal(gmem_init_uffd(&m, MEM, false, path, false, &peer, err, sizeof(err)), -ENAMETOOLONG);
	assert_non_null(strstr(err, "longer than a Unix socket path"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_handshake_and_faults, kill_child),
	    cmocka_unit_test_teardown(test_fetch_gives_up, kill_child),
	    cmocka_unit_test(test_refused_sockets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
