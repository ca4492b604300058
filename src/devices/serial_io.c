/* serial_io.c - the UART's host side: bounded output/input rings, their I/O threads, raw tty, Ctrl-A x. */
/*
 * Output: the vCPU appends guest bytes to a SERIAL_OUTBUF_SIZE ring under
 * the device lock and never blocks; a full ring (stalled reader) drops and
 * counts. One output thread drains the ring to out_fd.
 *
 * A stalled reader must stall neither a vCPU nor brisk's exit, and stdout
 * must not be switched to O_NONBLOCK (its file description is shared with
 * the shell and other processes). So for a terminal or a pipe the output
 * thread writes through a private description of the same file
 * (/proc/self/fd/N reopened O_NONBLOCK), sockets get send(MSG_DONTWAIT),
 * and every wait is a poll() that also watches an abort eventfd. Regular
 * files never stall indefinitely and keep the shared description (and its
 * offset) as they are.
 *
 * Input: one input thread polls in_fd (plus a stop eventfd) and reads at
 * most the free space of a SERIAL_INBUF_SIZE ring; while the ring is full it
 * sleeps on a condition variable and reads nothing (back-pressure). The
 * model (serial8250.c) moves bytes from the ring into its 16-byte RX FIFO
 * as the guest reads RBR.
 *
 * Escape, as QEMU's -serial mon:stdio: Ctrl-A x ends the VM
 * (EXIT_STOPPED); Ctrl-A Ctrl-A sends one Ctrl-A; Ctrl-A followed by any
 * other byte sends both bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "brisk/devices.h"
#include "brisk/exitcode.h"
#include "brisk/log.h"
#include "serial8250_internal.h"

#define CTRL_A	  0x01
#define OUT_CHUNK 4096 /* PIPE_BUF: one write after POLLOUT fits a pipe's free slot */

/* The terminal state before raw mode; static so that a signal handler can restore it. */
static struct termios saved_tio;
static int saved_tio_fd = -1;
static volatile sig_atomic_t tty_is_raw;

int serial_io_init(struct serial8250 *s, const struct serial_opts *opts)
{
	struct serial_io *io = &s->io;

	io->opts = *opts;
	io->out_fd = -1;
	io->in_stop_fd = -1;
	io->out_abort_fd = -1;
	io->out.buf = io->out_buf;
	io->out.cap = sizeof(io->out_buf);
	io->in.buf = io->in_buf;
	io->in.cap = sizeof(io->in_buf);
	pthread_cond_init(&io->out_cond, NULL);
	pthread_cond_init(&io->in_cond, NULL);
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void serial_io_fini(struct serial8250 *s)
{
	struct serial_io *io = &s->io;

	close_fd(&io->in_stop_fd);
	close_fd(&io->out_abort_fd);
	if (io->out_fd_own)
		close_fd(&io->out_fd);

	pthread_cond_destroy(&io->out_cond);
	pthread_cond_destroy(&io->in_cond);
}

static void count_dropped(struct serial_io *io, uint64_t n)
{
	__atomic_fetch_add(&io->dropped, n, __ATOMIC_RELAXED);
}

void serial_io_put(struct serial8250 *s, uint8_t byte)
{
	struct serial_io *io = &s->io;

	if (io->opts.out_fd < 0)
		return; /* output discarded by configuration, not "dropped" */
	if (io->out_closed || serial_ring_space(&io->out) == 0) {
		count_dropped(io, 1);
		return;
	}
	serial_ring_put(&io->out, byte);
	if (io->out_waiting)
		pthread_cond_signal(&io->out_cond);
}

void serial_io_in_consumed(struct serial8250 *s)
{
	if (s->io.in_waiting)
		pthread_cond_signal(&s->io.in_cond);
}

uint64_t serial8250_dropped(const struct serial8250 *s)
{
	return __atomic_load_n(&s->io.dropped, __ATOMIC_RELAXED);
}

/* ---- raw terminal -------------------------------------------------------- */

void serial8250_restore_tty(void)
{
	if (!tty_is_raw)
		return;
	tty_is_raw = 0;
	tcsetattr(saved_tio_fd, TCSANOW, &saved_tio); /* async-signal-safe (POSIX.1-2008 2.4.3) */
}

/*
 * Raw input as QEMU's stdio backend: no echo, no line editing, no ISIG (so
 * Ctrl-C reaches the guest; Ctrl-A x quits), but output processing (OPOST)
 * stays on so brisk's own log lines still start at column 0.
 */
static void set_raw_tty(int fd)
{
	struct termios t;

	if (!isatty(fd) || tcgetattr(fd, &saved_tio) < 0)
		return;
	t = saved_tio;
	cfmakeraw(&t);
	t.c_oflag |= OPOST;
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	saved_tio_fd = fd;
	if (tcsetattr(fd, TCSANOW, &t) == 0)
		tty_is_raw = 1;
	else
		log_warn("serial: tcsetattr(fd %d, raw): %s", fd, strerror(errno));
}

/* ---- output thread ---------------------------------------------------------- */

/* A private O_NONBLOCK description of out_fd when it is a terminal or a pipe (see the top comment). */
static void open_output(struct serial_io *io)
{
	char path[64];
	struct stat st;
	int fd;

	io->out_fd = io->opts.out_fd;
	if (io->out_fd < 0 || fstat(io->out_fd, &st) < 0)
		return;
	io->out_is_sock = S_ISSOCK(st.st_mode);
	if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", io->opts.out_fd);
	fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		log_debug("serial: reopen %s: %s; writing to fd %d directly", path, strerror(errno), io->out_fd);
		return;
	}
	io->out_fd = fd;
	io->out_fd_own = 1;
}

static ssize_t write_once(const struct serial_io *io, const uint8_t *p, size_t n)
{
	if (io->out_is_sock)
		return send(io->out_fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	return write(io->out_fd, p, n);
}

/* Writes some of p[0..n): returns bytes written, 0 when aborted, or -errno. */
static ssize_t write_some(struct serial_io *io, const uint8_t *p, size_t n)
{
	struct pollfd pfd[2] = {{.fd = io->out_fd, .events = POLLOUT}, {.fd = io->out_abort_fd, .events = POLLIN}};
	ssize_t w;

	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pfd[1].revents)
			return 0;
		w = write_once(io, p, n);
		if (w > 0)
			return w;
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
	}
}

/* The contiguous run of queued bytes starting at the ring's head, at most OUT_CHUNK. */
static size_t out_chunk(const struct serial_ring *r)
{
	size_t n = r->cap - r->head;

	if (n > r->count)
		n = r->count;
	return n > OUT_CHUNK ? OUT_CHUNK : n;
}

/*
 * Drains the output ring until it is empty after a stop request, or until
 * aborted. Only this thread moves the ring's head, and the vCPU side only
 * writes beyond head + count, so the chunk is written without the lock.
 */
static void *out_thread(void *arg)
{
	struct serial8250 *s = arg;
	struct serial_io *io = &s->io;
	ssize_t w;
	size_t n;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (io->out.count == 0 && !io->stopping) {
			io->out_waiting = true;
			pthread_cond_wait(&io->out_cond, &s->lock);
			io->out_waiting = false;
		}
		if (io->out.count == 0)
			break;
		n = out_chunk(&io->out);
		pthread_mutex_unlock(&s->lock);
		w = write_some(io, io->out.buf + io->out.head, n);
		pthread_mutex_lock(&s->lock);
		if (w <= 0) {
			if (w == -EPIPE)
				log_debug("serial: the reader of fd %d went away; further output dropped", io->out_fd);
			else if (w < 0)
				log_warn("serial: write(fd %d): %s; further output dropped", io->out_fd,
					 strerror((int)-w));
			io->out_closed = true; /* EPIPE included: the reader is gone */
			break;
		}
		io->out.head = (io->out.head + (size_t)w) % io->out.cap;
		io->out.count -= (size_t)w;
	}
	count_dropped(io, io->out.count);
	io->out.head = 0;
	io->out.count = 0;
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---- input thread ------------------------------------------------------------ */

/* Waits for room in the input ring; returns how many bytes may be read (0: stop). See deliver(). */
static size_t wait_for_room(struct serial8250 *s, bool esc)
{
	struct serial_io *io = &s->io;
	size_t room;

	pthread_mutex_lock(&s->lock);
	while (serial_ring_space(&io->in) <= (size_t)esc && !io->stopping) {
		io->in_waiting = true;
		pthread_cond_wait(&io->in_cond, &s->lock);
		io->in_waiting = false;
	}
	room = io->stopping ? 0 : serial_ring_space(&io->in) - (size_t)esc;
	pthread_mutex_unlock(&s->lock);
	return room;
}

/* Reads at most n bytes once in_fd is readable. Returns the count, 0 at EOF or stop, or -errno. */
static ssize_t read_some(struct serial_io *io, uint8_t *buf, size_t n)
{
	struct pollfd pfd[2] = {{.fd = io->opts.in_fd, .events = POLLIN}, {.fd = io->in_stop_fd, .events = POLLIN}};
	ssize_t r;

	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pfd[1].revents)
			return 0;
		r = read(io->opts.in_fd, buf, n);
		if (r >= 0)
			return r;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
}

static void in_put(struct serial_io *io, uint8_t b)
{
	if (serial_ring_space(&io->in) > 0) /* always true: wait_for_room() bounds the read */
		serial_ring_put(&io->in, b);
}

/*
 * Filters the Ctrl-A escape and queues the bytes for the guest. n bytes
 * queue at most n + esc bytes (a pending Ctrl-A followed by another byte
 * sends both), which is what wait_for_room() reserved. Returns true on
 * Ctrl-A x.
 */
static bool deliver(struct serial8250 *s, const uint8_t *buf, size_t n, bool *esc)
{
	struct serial_io *io = &s->io;
	bool quit = false;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		uint8_t b = buf[i];

		if (*esc) {
			*esc = false;
			if (b == 'x') {
				quit = true;
				continue;
			}
			if (b != CTRL_A)
				in_put(io, CTRL_A);
			in_put(io, b);
		} else if (b == CTRL_A) {
			*esc = true;
		} else {
			in_put(io, b);
		}
	}
	serial8250_rx_ready(s);
	pthread_mutex_unlock(&s->lock);
	return quit;
}

static void *in_thread(void *arg)
{
	struct serial8250 *s = arg;
	uint8_t buf[SERIAL_INBUF_SIZE];
	bool esc = false;
	size_t room;
	ssize_t r;

	while ((room = wait_for_room(s, esc)) > 0) {
		r = read_some(&s->io, buf, room < sizeof(buf) ? room : sizeof(buf));
		if (r < 0)
			log_warn("serial: read(fd %d): %s; input stopped", s->io.opts.in_fd, strerror((int)-r));
		if (r <= 0)
			break; /* EOF: the guest simply gets no more input */
		if (deliver(s, buf, (size_t)r, &esc))
			dev_request_exit(&s->ctx, EXIT_STOPPED, "Ctrl-A x");
	}
	return NULL;
}

/* ---- start / stop ------------------------------------------------------------ */

/* Starts a thread with every signal blocked: SIGINT/SIGTERM and vCPU kicks are not for it. */
static int start_thread(pthread_t *t, void *(*fn)(void *), struct serial8250 *s)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(t, NULL, fn, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}

static int make_eventfd(int *fd)
{
	*fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return *fd < 0 ? -errno : 0;
}

static void kick(int fd)
{
	uint64_t one = 1;

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0)
		log_debug("serial: eventfd write: %s", strerror(errno));
}

int serial8250_start_output(struct serial8250 *s)
{
	struct serial_io *io = &s->io;
	int err;

	if (io->started)
		return -EBUSY;
	io->started = true;
	err = make_eventfd(&io->in_stop_fd);
	if (!err)
		err = make_eventfd(&io->out_abort_fd);
	if (err)
		return err; /* serial8250_stop()/destroy close what was opened */
	open_output(io);
	if (io->out_fd >= 0) {
		err = start_thread(&io->out_thread, out_thread, s);
		io->out_running = !err;
	}
	return err;
}

int serial8250_start_input(struct serial8250 *s)
{
	struct serial_io *io = &s->io;
	int err = 0;

	if (!io->started || io->in_stop_fd < 0)
		return -EINVAL;
	if (io->in_running || io->opts.in_fd < 0)
		return 0;
	if (io->opts.raw_tty)
		set_raw_tty(io->opts.in_fd);
	err = start_thread(&io->in_thread, in_thread, s);
	io->in_running = !err;
	return err;
}

int serial8250_start(struct serial8250 *s)
{
	int err = serial8250_start_output(s);

	return err ? err : serial8250_start_input(s);
}

static void deadline_after_ms(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_REALTIME, ts); /* pthread_timedjoin_np measures CLOCK_REALTIME */
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Lets the output thread drain for at most flush_ms, then aborts it. */
static void stop_output(struct serial_io *io, int flush_ms)
{
	struct timespec deadline;

	if (!io->out_running)
		return;
	if (flush_ms > 0) {
		deadline_after_ms(&deadline, flush_ms);
		if (pthread_timedjoin_np(io->out_thread, NULL, &deadline) == 0) {
			io->out_running = false;
			return;
		}
	}
	kick(io->out_abort_fd);
	pthread_join(io->out_thread, NULL);
	io->out_running = false;
}

void serial8250_stop(struct serial8250 *s, int flush_ms)
{
	struct serial_io *io = &s->io;

	pthread_mutex_lock(&s->lock);
	if (!io->started || io->stopped) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	io->stopped = true;
	io->stopping = true;
	pthread_cond_broadcast(&io->out_cond);
	pthread_cond_broadcast(&io->in_cond);
	pthread_mutex_unlock(&s->lock);

	kick(io->in_stop_fd);
	if (io->in_running)
		pthread_join(io->in_thread, NULL);
	io->in_running = false;
	stop_output(io, flush_ms);
	serial8250_restore_tty();

	pthread_mutex_lock(&s->lock);
	io->out_closed = true;
	count_dropped(io, io->out.count);
	io->out.count = 0;
	pthread_mutex_unlock(&s->lock);
}
