/* test_fdpass.c - one message with descriptors over a Unix socket (include/brisk/fdpass.h). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/fdpass.h"

/* n pipes' write ends into w (read ends into r). */
static void pipes(int *r, int *w, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int p[2];

		assert_int_equal(pipe(p), 0);
		r[i] = p[0];
		w[i] = p[1];
	}
}

/* Three descriptors and the bytes arrive; each received one is the sent one's file (a byte goes through it). */
static void test_round_trip(void **state)
{
	int sv[2], r[3], w[3], got[3];
	unsigned nfds;
	bool trunc;
	char buf[16], c;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	pipes(r, w, 3);
	assert_int_equal(fdpass_send(sv[0], "hello", 5, w, 3), 0);
	assert_int_equal(fdpass_recv(sv[1], buf, sizeof(buf), 0, got, 3, &nfds, &trunc), 5);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(nfds, 3);
	assert_false(trunc);
	for (unsigned i = 0; i < 3; i++) {
		assert_true((fcntl(got[i], F_GETFD) & FD_CLOEXEC) != 0);
		assert_int_equal(write(got[i], "x", 1), 1);
		assert_int_equal(read(r[i], &c, 1), 1);
		close(got[i]);
		close(r[i]);
		close(w[i]);
	}
	/* none at all */
	assert_int_equal(fdpass_send(sv[0], "{}", 2, NULL, 0), 0);
	assert_int_equal(fdpass_recv(sv[1], buf, sizeof(buf), 0, got, 3, &nfds, &trunc), 2);
	assert_int_equal(nfds, 0);
	assert_false(trunc);
	close(sv[0]);
	assert_int_equal(fdpass_recv(sv[1], buf, sizeof(buf), 0, got, 3, &nfds, &trunc), 0); /* the peer's end */
	close(sv[1]);
}

/* More descriptors than asked for: the first `max` kept, the rest closed, truncated said; so for too long data. */
static void test_too_many_and_too_long(void **state)
{
	int sv[2], r[FDPASS_MAX + 1], w[FDPASS_MAX + 1], got[FDPASS_MAX];
	unsigned nfds;
	bool trunc;
	char buf[4];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	pipes(r, w, FDPASS_MAX + 1);
	assert_int_equal(fdpass_send(sv[0], "x", 1, w, FDPASS_MAX + 1), -EINVAL);
	assert_int_equal(fdpass_send(sv[0], "x", 1, w, 5), 0);
	assert_int_equal(fdpass_recv(sv[1], buf, sizeof(buf), 0, got, 3, &nfds, &trunc), 1);
	assert_int_equal(nfds, 3);
	assert_true(trunc);
	for (unsigned i = 0; i < 3; i++)
		close(got[i]);
	for (unsigned i = 0; i < FDPASS_MAX + 1; i++)
		close(w[i]);
	/* every write end is closed now, the extra two received ones too: each read end sees EOF (a leaked one:
	 * EAGAIN) */
	for (unsigned i = 0; i < 5; i++) {
		char c;

		assert_int_equal(fcntl(r[i], F_SETFL, O_NONBLOCK), 0);
		assert_int_equal(read(r[i], &c, 1), 0);
	}
	assert_int_equal(fdpass_send(sv[0], "too long", 8, NULL, 0), 0);
	assert_int_equal(fdpass_recv(sv[1], buf, sizeof(buf), 0, got, 3, &nfds, &trunc), 4);
	assert_true(trunc);
	assert_int_equal(fdpass_recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT, got, 3, &nfds, &trunc), -EAGAIN);
	for (unsigned i = 0; i < FDPASS_MAX + 1; i++)
		close(r[i]);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_too_many_and_too_long),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
