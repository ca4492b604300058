/* test_console_io.c - the console backend on its own: rings, drops, back-pressure, escape, stop, raw terminal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "brisk/console_io.h"
#include "brisk/log.h"

/* ---- what the device would be told ------------------------------------------------------ */

static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned ready_calls, quit_calls;

static void on_ready(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&cb_lock);
	ready_calls++;
	pthread_mutex_unlock(&cb_lock);
}

static void on_quit(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&cb_lock);
	quit_calls++;
	pthread_mutex_unlock(&cb_lock);
}

static const struct console_io_ops cb_ops = {.input_ready = on_ready, .quit = on_quit};

static unsigned get_quits(void)
{
	unsigned n;

	pthread_mutex_lock(&cb_lock);
	n = quit_calls;
	pthread_mutex_unlock(&cb_lock);
	return n;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static struct console_io *make(int out_fd, int in_fd, size_t out_size, size_t in_size)
{
	struct console_io_opts o = {
	    .name = "test",
	    .out_fd = out_fd,
	    .in_fd = in_fd,
	    .out_size = out_size,
	    .in_size = in_size,
	    .ops = &cb_ops,
	};
	struct console_io *io = console_io_create(&o);

	assert_non_null(io);
	pthread_mutex_lock(&cb_lock);
	ready_calls = quit_calls = 0;
	pthread_mutex_unlock(&cb_lock);
	return io;
}

/* Waits (bounded, 2 s) until the input ring holds at least n bytes. */
static size_t wait_pending(struct console_io *io, size_t n)
{
	size_t have = 0;

	for (uint64_t end = now_ms() + 2000; (have = console_io_pending(io)) < n && now_ms() < end;)
		sleep_ms(1);
	return have;
}

/* Takes exactly n bytes of input (bounded wait). */
static void take(struct console_io *io, uint8_t *buf, size_t n)
{
	size_t got = 0;

	for (uint64_t end = now_ms() + 2000; got < n && now_ms() < end;) {
		size_t k = console_io_read(io, buf + got, n - got);

		got += k;
		if (!k)
			sleep_ms(1);
	}
	assert_int_equal(got, n);
}

/* A pipe with a full buffer that nobody reads. */
static void full_pipe(int p[2])
{
	static const uint8_t junk[4096];

	assert_int_equal(pipe(p), 0);
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	while (write(p[1], junk, sizeof(junk)) > 0)
		;
	fcntl(p[1], F_SETFL, 0);
}

/* Reads and discards n bytes of fd (what full_pipe put there). */
static void drain(int fd, int n)
{
	static uint8_t sink[65536];

	for (ssize_t got; n > 0; n -= (int)got)
		assert_true((got = read(fd, sink, (size_t)n < sizeof(sink) ? (size_t)n : sizeof(sink))) > 0);
}

/* Reads exactly n bytes from fd, each read waiting at most 5 s for them. */
static void read_exactly(int fd, char *buf, size_t n)
{
	for (size_t have = 0; have < n;) {
		assert_int_equal(poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, 5000), 1);
		ssize_t got = read(fd, buf + have, n - have);

		assert_true(got > 0);
		have += (size_t)got;
	}
}

/* A test's end: the console destroyed, its pipe closed. */
static void done(struct console_io *io, int p[2])
{
	console_io_destroy(io);
	close(p[0]);
	close(p[1]);
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_create_rejects_bad_opts(void **state)
{
	struct console_io_opts o = {
	    .name = "t", .out_fd = -1, .in_fd = -1, .out_size = 0, .in_size = 8, .ops = &cb_ops};

	(void)state;
	assert_null(console_io_create(&o));
	assert_int_equal(errno, EINVAL);
	o.out_size = 8;
	o.ops = NULL;
	assert_null(console_io_create(&o));
	console_io_destroy(NULL);
}

/* Output reaches the fd in order through the ring's wrap-around; a byte refused (ring full) can be offered again. */
static void test_output_order_and_wrap(void **state)
{
	int p[2];
	struct console_io *io;
	uint8_t in[100], out[100];
	size_t got = 0;

	(void)state;
	assert_int_equal(pipe(p), 0);
	io = make(p[1], -1, 16, 8);
	assert_int_equal(console_io_start_output(io), 0);
	assert_int_equal(console_io_start_output(io), -EBUSY);
	for (size_t i = 0; i < sizeof(in); i++) {
		in[i] = (uint8_t)i;
		for (uint64_t end = now_ms() + 2000; console_io_write(io, in + i, 1) != 1;) {
			assert_true(now_ms() < end); /* the pipe has room: the ring drains */
			sleep_ms(1);
		}
	}
	while (got < sizeof(out)) {
		ssize_t n = read(p[0], out + got, sizeof(out) - got);

		assert_true(n > 0);
		got += (size_t)n;
	}
	assert_memory_equal(in, out, sizeof(in));
	console_io_stop(io, 100);
	done(io, p);
}

/* One message from the output socket, waiting at most 5 s; its length, 0 for none. */
static size_t recv_msg(int fd, char *buf, size_t len)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;

	if (poll(&p, 1, 5000) != 1)
		return 0;
	n = recv(fd, buf, len - 1, 0);
	assert_true(n > 0);
	buf[n] = '\0';
	return (size_t)n;
}

/*
 * A line the guest writes a byte at a time (as a UART does) is one write: on a SOCK_SEQPACKET output each write is
 * one message. The linger is long here (10 s) and the bytes 2 ms apart, so nothing but the '\n' can end it; a
 * partial line then waits, and stop writes it.
 */
static void test_output_line_is_one_write(void **state)
{
	static const char line[] = "hello world\n", prompt[] = "login: ";
	struct console_io_opts o = {.name = "t",
				    .out_fd = -1,
				    .in_fd = -1,
				    .out_size = 64,
				    .in_size = 8,
				    .out_linger_ms = 10000,
				    .ops = &cb_ops};
	struct console_io *io;
	char got[64];
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	o.out_fd = sv[0];
	io = console_io_create(&o);
	assert_non_null(io);
	assert_int_equal(console_io_start_output(io), 0);
	for (size_t i = 0; i < sizeof(line) - 1; i++) {
		assert_int_equal(console_io_write(io, line + i, 1), 1);
		sleep_ms(2);
	}
	assert_int_equal(recv_msg(sv[1], got, sizeof(got)), sizeof(line) - 1);
	assert_string_equal(got, line);
	for (size_t i = 0; i < sizeof(prompt) - 1; i++)
		assert_int_equal(console_io_write(io, prompt + i, 1), 1);
	sleep_ms(20);
	assert_int_equal(recv(sv[1], got, sizeof(got), MSG_DONTWAIT), -1); /* lingering: nothing yet */
	console_io_stop(io, 1000);
	assert_int_equal(recv_msg(sv[1], got, sizeof(got)), sizeof(prompt) - 1);
	assert_string_equal(got, prompt);
	console_io_destroy(io);
	close(sv[0]);
	close(sv[1]);
}

/* With the default linger a partial line (a prompt) is written by itself, without a '\n' or a stop. */
static void test_output_partial_line_written(void **state)
{
	int sv[2];
	struct console_io *io;
	char got[16];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	io = make(sv[0], -1, 64, 8);
	assert_int_equal(console_io_start_output(io), 0);
	assert_int_equal(console_io_write(io, "$ ", 2), 2);
	assert_int_equal(recv_msg(sv[1], got, sizeof(got)), 2);
	assert_string_equal(got, "$ ");
	console_io_stop(io, 100);
	console_io_destroy(io);
	close(sv[0]);
	close(sv[1]);
}

/* A stalled reader: writes never block, what does not fit is dropped and counted; stop is bounded. */
static void test_output_stalled(void **state)
{
	uint8_t buf[40] = {0};
	struct console_io *io;
	uint64_t t0;
	int p[2];

	(void)state;
	full_pipe(p);
	io = make(p[1], -1, 32, 8);
	assert_int_equal(console_io_start_output(io), 0);
	sleep_ms(20);
	t0 = now_ms();
	assert_int_equal(console_io_write(io, buf, sizeof(buf)), 32); /* the ring's size: the rest dropped */
	assert_int_equal(console_io_write(io, buf, 5), 0);
	assert_true(now_ms() - t0 < 500);
	assert_int_equal(console_io_dropped(io), 8 + 5);
	t0 = now_ms();
	console_io_stop(io, 100); /* 100 ms to flush, then aborted: the 32 queued bytes count as dropped */
	assert_true(now_ms() - t0 < 1000);
	assert_int_equal(console_io_dropped(io), 8 + 5 + 32);
	assert_int_equal(console_io_write(io, buf, 3), 0); /* stopped: dropped */
	assert_int_equal(console_io_dropped(io), 8 + 5 + 32 + 3);
	done(io, p);
}

/* A console whose partial lines wait 10 s for their end (only a '\n' or a stop can end the linger). */
static struct console_io *make_lingering(int out_fd)
{
	struct console_io_opts o = {.name = "t",
				    .out_fd = out_fd,
				    .in_fd = -1,
				    .out_size = 256,
				    .in_size = 8,
				    .out_linger_ms = 10000,
				    .ops = &cb_ops};
	struct console_io *io = console_io_create(&o);

	assert_non_null(io);
	assert_int_equal(console_io_start_output(io), 0);
	return io;
}

/*
 * A pipe's reader gets a line the moment the producer writes its '\n', in one write, without waiting for the output
 * thread: the producer wrote it itself. The bytes before the '\n' are not there yet (the line is one write).
 */
static void test_output_line_written_by_the_producer(void **state)
{
	static const char line[] = "first line\n";
	struct console_io *io;
	char got[64];
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	io = make_lingering(p[1]);
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < sizeof(line) - 2; i++)
			assert_int_equal(console_io_write(io, line + i, 1), 1);
		assert_int_equal(poll(&(struct pollfd){.fd = p[0], .events = POLLIN}, 1, 0), 0); /* nothing yet */
		assert_int_equal(console_io_write(io, "\n", 1), 1);
		/* no wait: on return the line is in the pipe (poll timeout 0), all of it in one read */
		assert_int_equal(poll(&(struct pollfd){.fd = p[0], .events = POLLIN}, 1, 0), 1);
		assert_int_equal(read(p[0], got, sizeof(got)), (ssize_t)sizeof(line) - 1);
		assert_memory_equal(got, line, sizeof(line) - 1);
	}
	assert_int_equal(console_io_dropped(io), 0);
	done(io, p);
}

/*
 * Lines that keep coming stay whole: the output thread, lingering since line A began, reaches its deadline while
 * line B (begun after the producer wrote A) is half written; it waits on for B's own deadline instead of writing
 * the half. The linger is 200 ms; B begins 150 ms after A and ends 60 ms later.
 */
static void test_output_next_line_keeps_its_own_linger(void **state)
{
	struct console_io_opts o = {.name = "t",
				    .out_fd = -1,
				    .in_fd = -1,
				    .out_size = 256,
				    .in_size = 8,
				    .out_linger_ms = 200,
				    .ops = &cb_ops};
	static const char b[] = "second line";
	struct console_io *io;
	char got[64];
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	o.out_fd = p[1];
	io = console_io_create(&o);
	assert_non_null(io);
	assert_int_equal(console_io_start_output(io), 0);
	assert_int_equal(console_io_write(io, "A", 1), 1); /* the thread wakes and lingers until A's start + 200 ms */
	sleep_ms(5);
	assert_int_equal(console_io_write(io, "\n", 1), 1); /* written here */
	assert_int_equal(read(p[0], got, sizeof(got)), 2);
	sleep_ms(145);
	for (size_t i = 0; i < sizeof(b) - 1; i++) { /* 60 ms of B, across A's deadline */
		assert_int_equal(console_io_write(io, b + i, 1), 1);
		sleep_ms(6);
	}
	assert_int_equal(poll(&(struct pollfd){.fd = p[0], .events = POLLIN}, 1, 0), 0); /* no half line */
	assert_int_equal(console_io_write(io, "\n", 1), 1);
	assert_int_equal(read(p[0], got, sizeof(got)), (ssize_t)sizeof(b));
	assert_memory_equal(got, "second line\n", sizeof(b));
	done(io, p);
}

/* A regular file gets each line as its '\n' is written, at the shared description's offset. */
static void test_output_line_to_a_file(void **state)
{
	char path[] = "/tmp/test_console_io.XXXXXX", got[64];
	struct console_io *io;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	unlink(path);
	io = make_lingering(fd);
	assert_int_equal(console_io_write(io, "ab\ncd\n", 6), 6);
	assert_int_equal(pread(fd, got, sizeof(got), 0), 6); /* no wait */
	assert_memory_equal(got, "ab\ncd\n", 6);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 6);
	console_io_destroy(io);
	close(fd);
}

/*
 * The producer's write meets a full pipe: nothing blocks, the line stays queued, and the output thread writes it in
 * order once the reader makes room, with the lines queued behind it; nothing is dropped.
 */
static void test_output_full_pipe_then_drained(void **state)
{
	struct console_io *io;
	char got[64];
	uint64_t t0;
	int p[2], junk;

	(void)state;
	full_pipe(p);
	assert_int_equal(ioctl(p[0], FIONREAD, &junk), 0);
	io = make_lingering(p[1]);
	t0 = now_ms();
	assert_int_equal(console_io_write(io, "one\n", 4), 4);
	assert_int_equal(console_io_write(io, "two\n", 4), 4);
	assert_true(now_ms() - t0 < 500);
	drain(p[0], junk);
	read_exactly(p[0], got, 8);
	assert_memory_equal(got, "one\ntwo\n", 8);
	assert_int_equal(console_io_dropped(io), 0);
	done(io, p);
}

/* ---- deferred output: the test is the main loop ---- */

static int watched_fd = -1;

static int watch(void *arg, int fd, void (*fn)(void *io), void *io)
{
	(void)arg;
	(void)fn;
	(void)io;
	watched_fd = fd;
	return 0;
}

/* Threads of this process (/proc/self/task). */
static unsigned nr_threads(void)
{
	char line[256];
	unsigned n = 0;
	FILE *f = fopen("/proc/self/status", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %u", &n) == 1)
			break;
	fclose(f);
	return n;
}

/* The main loop's part: waits up to ms for the watched fd, then calls console_io_service; whether it fired. */
static bool serve(struct console_io *io, int ms)
{
	if (poll(&(struct pollfd){.fd = watched_fd, .events = POLLIN}, 1, ms) != 1)
		return false;
	console_io_service(io);
	return true;
}

static struct console_io *make_deferred(int out_fd, unsigned linger_ms)
{
	struct console_io_opts o = {.name = "t",
				    .out_fd = out_fd,
				    .in_fd = -1,
				    .out_size = 256,
				    .in_size = 8,
				    .out_linger_ms = linger_ms,
				    .ops = &cb_ops};
	struct console_io *io = console_io_create(&o);

	assert_non_null(io);
	watched_fd = -1;
	assert_int_equal(console_io_start_output_deferred(io, watch, NULL), 0);
	assert_true(watched_fd >= 0);
	return io;
}

/* Lines that end in time, to a reader that keeps up: the producer writes them all, no thread is ever made. */
static void test_deferred_lines_need_no_thread(void **state)
{
	unsigned threads = nr_threads();
	struct console_io *io;
	char got[64];
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	io = make_deferred(p[1], 20);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(console_io_write(io, "ab", 2), 2);
		assert_int_equal(console_io_write(io, "c\n", 2), 2);
		assert_int_equal(read(p[0], got, sizeof(got)), 4);
		assert_memory_equal(got, "abc\n", 4);
	}
	assert_true(serve(io, 1000)); /* the last line's linger timer: nothing left, so nothing started */
	assert_int_equal(nr_threads(), threads);
	console_io_stop(io, 1000);
	assert_int_equal(nr_threads(), threads);
	assert_int_equal(console_io_dropped(io), 0);
	done(io, p);
}

/* A prompt (no '\n'): its linger ends, the main loop's call starts the thread, which writes it. */
static void test_deferred_prompt_starts_the_thread(void **state)
{
	unsigned threads = nr_threads();
	struct console_io *io;
	char got[16];
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	io = make_deferred(p[1], 20);
	assert_int_equal(console_io_write(io, "$ ", 2), 2);
	assert_false(serve(io, 0)); /* its 20 ms are not over */
	assert_true(serve(io, 2000));
	assert_int_equal(poll(&(struct pollfd){.fd = p[0], .events = POLLIN}, 1, 2000), 1);
	assert_int_equal(read(p[0], got, sizeof(got)), 2);
	assert_memory_equal(got, "$ ", 2);
	assert_int_equal(nr_threads(), threads + 1);
	console_io_stop(io, 1000);
	assert_int_equal(nr_threads(), threads);
	done(io, p);
}

/* A reader not ready (a full pipe): the timer fires at once, the thread waits for the reader and writes in order. */
static void test_deferred_full_pipe(void **state)
{
	struct console_io *io;
	char got[16];
	int p[2], junk;

	(void)state;
	full_pipe(p);
	assert_int_equal(ioctl(p[0], FIONREAD, &junk), 0);
	io = make_deferred(p[1], 10000);
	assert_int_equal(console_io_write(io, "one\n", 4), 4);
	assert_int_equal(console_io_write(io, "two\n", 4), 4);
	assert_true(serve(io, 1000)); /* not the 10 s linger: at once */
	drain(p[0], junk);
	read_exactly(p[0], got, 8);
	assert_memory_equal(got, "one\ntwo\n", 8);
	assert_int_equal(console_io_dropped(io), 0);
	done(io, p);
}

/* A partial line still queued when the console stops (the main loop never served it): the stop writes it. */
static void test_deferred_stop_writes_what_is_left(void **state)
{
	struct console_io *io;
	char got[16];
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	io = make_deferred(p[1], 10000);
	assert_int_equal(console_io_write(io, "bye", 3), 3);
	console_io_stop(io, 1000);
	assert_int_equal(read(p[0], got, sizeof(got)), 3);
	assert_memory_equal(got, "bye", 3);
	assert_int_equal(console_io_dropped(io), 0);
	done(io, p);
}

/* A socket's output is all the thread's: it starts at once, no timer is watched. */
static void test_deferred_socket_starts_the_thread(void **state)
{
	unsigned threads = nr_threads();
	struct console_io_opts o = {
	    .name = "t", .out_fd = -1, .in_fd = -1, .out_size = 64, .in_size = 8, .ops = &cb_ops};
	struct console_io *io;
	char got[16];
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	o.out_fd = sv[0];
	io = console_io_create(&o);
	assert_non_null(io);
	watched_fd = -1;
	assert_int_equal(console_io_start_output_deferred(io, watch, NULL), 0);
	assert_int_equal(watched_fd, -1);
	assert_int_equal(nr_threads(), threads + 1);
	assert_int_equal(console_io_write(io, "x\n", 2), 2);
	assert_int_equal(recv_msg(sv[1], got, sizeof(got)), 2);
	console_io_destroy(io);
	close(sv[0]);
	close(sv[1]);
}

/* The reader went away (EPIPE; SIGPIPE ignored as brisk does): output closes, later bytes are dropped. */
static void test_output_epipe(void **state)
{
	struct console_io *io;
	int p[2];

	(void)state;
	signal(SIGPIPE, SIG_IGN);
	assert_int_equal(pipe(p), 0);
	close(p[0]);
	io = make(p[1], -1, 64, 8);
	assert_int_equal(console_io_start_output(io), 0);
	assert_int_equal(console_io_write(io, "abc", 3), 3);
	for (uint64_t end = now_ms() + 2000; console_io_dropped(io) < 3 && now_ms() < end;)
		sleep_ms(1);
	assert_int_equal(console_io_dropped(io), 3);
	assert_int_equal(console_io_write(io, "de", 2), 0);
	assert_int_equal(console_io_dropped(io), 5);
	console_io_destroy(io);
	close(p[1]);
}

/* out_fd -1: output is discarded by configuration, not dropped. */
static void test_output_discarded(void **state)
{
	struct console_io *io = make(-1, -1, 8, 8);

	(void)state;
	assert_int_equal(console_io_start_output(io), 0);
	assert_int_equal(console_io_start_input(io), 0); /* no in_fd: nothing to start */
	assert_int_equal(console_io_write(io, "0123456789abcdef", 16), 16);
	assert_int_equal(console_io_dropped(io), 0);
	console_io_destroy(io);
}

/* Input before output was started is refused; the threads start in order. */
static void test_input_needs_output_first(void **state)
{
	int p[2];
	struct console_io *io;

	(void)state;
	assert_int_equal(pipe(p), 0);
	io = make(-1, p[0], 8, 8);
	assert_int_equal(console_io_start_input(io), -EINVAL);
	console_io_destroy(io); /* never started: nothing to stop */
	close(p[0]);
	close(p[1]);
}

/* A flood of input: the ring fills, the rest stays in the pipe (back-pressure), and all of it arrives in order. */
static void test_input_backpressure(void **state)
{
	static uint8_t data[1000], got[1000];
	struct console_io *io;
	int p[2], pending = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)('a' + i % 26);
	assert_int_equal(pipe(p), 0);
	io = make(-1, p[0], 8, 64);
	assert_int_equal(console_io_start_output(io), 0);
	assert_int_equal(console_io_start_input(io), 0);
	assert_int_equal(write(p[1], data, sizeof(data)), (ssize_t)sizeof(data));
	assert_int_equal(wait_pending(io, 64), 64);
	sleep_ms(20);
	assert_int_equal(console_io_pending(io), 64);
	assert_int_equal(ioctl(p[0], FIONREAD, &pending), 0);
	assert_int_equal(pending, (int)sizeof(data) - 64);
	take(io, got, sizeof(got));
	assert_memory_equal(data, got, sizeof(data));
	console_io_stop(io, 100);
	done(io, p);
}

/* Ctrl-A Ctrl-A sends one Ctrl-A, Ctrl-A y sends both, Ctrl-A x quits (input goes on), also split across reads. */
static void test_escape(void **state)
{
	static const uint8_t seq[] = {0x01, 0x01, 'z', 0x01, 'y', 0x01, 'x', 'w', 0x01};
	static const uint8_t want[] = {0x01, 'z', 0x01, 'y', 'w', 0x01, 'v'};
	uint8_t got[sizeof(want)];
	struct console_io *io;
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	io = make(-1, p[0], 8, 4); /* a ring smaller than the sequence: the escape's reserved byte matters */
	assert_int_equal(console_io_start_output(io), 0);
	assert_int_equal(console_io_start_input(io), 0);
	assert_int_equal(write(p[1], seq, sizeof(seq)), (ssize_t)sizeof(seq));
	take(io, got, 5);
	sleep_ms(20); /* the trailing Ctrl-A was read alone: it waits for its partner */
	assert_int_equal(console_io_pending(io), 0);
	assert_int_equal(write(p[1], "v", 1), 1); /* Ctrl-A v: both bytes */
	take(io, got + 5, 2);
	assert_memory_equal(got, want, sizeof(want));
	assert_int_equal(get_quits(), 1);
	assert_int_equal(write(p[1], "\x01x", 2), 2); /* every Ctrl-A x asks again: the first request wins */
	for (uint64_t end = now_ms() + 2000; get_quits() < 2 && now_ms() < end;)
		sleep_ms(1);
	assert_int_equal(get_quits(), 2);
	console_io_stop(io, 100);
	done(io, p);
}

/* EOF on input ends the input thread only; stop still returns at once. */
static void test_input_eof(void **state)
{
	struct console_io *io;
	uint8_t b[2];
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	io = make(-1, p[0], 8, 8);
	assert_int_equal(console_io_start_output(io), 0);
	assert_int_equal(console_io_start_input(io), 0);
	assert_int_equal(write(p[1], "hi", 2), 2);
	close(p[1]);
	take(io, b, 2);
	assert_memory_equal(b, "hi", 2);
	console_io_stop(io, 100);
	console_io_destroy(io);
	close(p[0]);
}

/* Raw mode on a terminal while input runs; stop (and console_io_restore_tty) put the settings back. */
static void test_raw_tty(void **state)
{
	struct console_io_opts o = {.name = "t", .out_fd = -1, .out_size = 8, .in_size = 8, .ops = &cb_ops};
	struct termios before, during, after;
	struct console_io *io;
	int master, slave;

	(void)state;
	master = posix_openpt(O_RDWR | O_NOCTTY);
	if (master < 0 || grantpt(master) || unlockpt(master)) {
		skip();
		return;
	}
	slave = open(ptsname(master), O_RDWR | O_NOCTTY);
	assert_true(slave >= 0);
	assert_int_equal(tcgetattr(slave, &before), 0);
	assert_true(before.c_lflag & ICANON);
	o.in_fd = slave;
	o.raw_tty = 1;
	io = console_io_create(&o);
	assert_non_null(io);
	assert_int_equal(console_io_start_output(io), 0);
	assert_int_equal(console_io_start_input(io), 0);
	assert_int_equal(tcgetattr(slave, &during), 0);
	assert_false(during.c_lflag & (ICANON | ECHO | ISIG));
	assert_true(during.c_oflag & OPOST); /* brisk's own log lines keep their column */
	/* the guest reads nothing: the terminal is still read, beyond the ring dropped, and Ctrl-A x works */
	pthread_mutex_lock(&cb_lock);
	quit_calls = 0;
	pthread_mutex_unlock(&cb_lock);
	for (int i = 0; i < 10; i++)
		assert_int_equal(write(master, "0123456789", 10), 10);
	assert_int_equal(write(master, "\x01x", 2), 2);
	for (uint64_t end = now_ms() + 2000; get_quits() == 0 && now_ms() < end;)
		sleep_ms(1);
	assert_int_equal(get_quits(), 1);
	assert_int_equal(console_io_pending(io), 8);
	assert_int_equal(console_io_input_dropped(io), 100 - 8);
	console_io_stop(io, 100);
	assert_int_equal(tcgetattr(slave, &after), 0);
	assert_int_equal(after.c_lflag, before.c_lflag);
	assert_int_equal(after.c_iflag, before.c_iflag);
	console_io_restore_tty(); /* already restored: nothing happens */
	console_io_destroy(io);
	close(slave);
	close(master);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_create_rejects_bad_opts),
	    cmocka_unit_test(test_output_order_and_wrap),
	    cmocka_unit_test(test_output_line_is_one_write),
	    cmocka_unit_test(test_output_partial_line_written),
	    cmocka_unit_test(test_output_line_written_by_the_producer),
	    cmocka_unit_test(test_output_line_to_a_file),
	    cmocka_unit_test(test_output_next_line_keeps_its_own_linger),
	    cmocka_unit_test(test_deferred_lines_need_no_thread),
	    cmocka_unit_test(test_deferred_prompt_starts_the_thread),
	    cmocka_unit_test(test_deferred_full_pipe),
	    cmocka_unit_test(test_deferred_stop_writes_what_is_left),
	    cmocka_unit_test(test_deferred_socket_starts_the_thread),
	    cmocka_unit_test(test_output_full_pipe_then_drained),
	    cmocka_unit_test(test_output_stalled),
	    cmocka_unit_test(test_output_epipe),
	    cmocka_unit_test(test_output_discarded),
	    cmocka_unit_test(test_input_needs_output_first),
	    cmocka_unit_test(test_input_backpressure),
	    cmocka_unit_test(test_escape),
	    cmocka_unit_test(test_input_eof),
	    cmocka_unit_test(test_raw_tty),
	};

	log_set_level(LOG_ERROR); /* the dropped-input warning is expected here */
	return cmocka_run_group_tests_name("console_io", tests, NULL, NULL);
}
