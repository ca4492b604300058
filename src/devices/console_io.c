/* console_io.c - a console's host side: bounded output/input rings, their I/O threads, raw tty, Ctrl-A x. */
/*
 * The contract is in include/brisk/console_io.h. Here, how it is kept:
 *
 * Output: the producer (a vCPU for the UART, the event loop for the virtio
 * console) copies into the ring under io->lock and never waits for a reader.
 * The ring's head moves under the lock, by whoever wrote: the producer, which
 * writes holding the lock, or the output thread, which writes a chunk without
 * it while out_busy says so (nobody else writes then; the producer only adds
 * beyond head + count).
 *
 * A stalled reader must stall neither the producer nor brisk's exit, and
 * stdout must not be switched to O_NONBLOCK (its file description is shared
 * with the shell and other processes). So for a terminal or a pipe both
 * write through a private description of the same file
 * (/proc/self/fd/N reopened O_NONBLOCK), sockets get send(MSG_DONTWAIT), and
 * every wait is a poll() that also watches an abort eventfd (polled only when
 * a write would block). Regular files never stall indefinitely and keep the
 * shared description (and its offset).
 *
 * A UART gets one byte per guest write. A line is one write(2), not one per
 * byte, and reaches the reader without a thread hop: when a '\n' or OUT_CHUNK
 * bytes are queued, the producer itself writes what the ring holds (under the
 * lock, so nobody else writes meanwhile), if the write cannot wait for a
 * reader (out_direct: the private O_NONBLOCK description, or a regular file,
 * whose write waits at most for the page cache, as Firecracker's and QEMU's
 * serial writes do) and no write is pending (the output thread is not writing
 * and no write would have blocked). What is left (a partial write, EAGAIN,
 * a socket) is the output thread's. Given a first byte after the ring was
 * empty, the output thread is woken and lingers (at most opts.out_linger_ms,
 * 1 ms, from that byte) for the line's end, and writes a partial line (a
 * prompt) when it has waited that long. The producer wakes a lingering thread
 * only for what it could not write itself; one whose line the producer wrote
 * sleeps to its deadline and then waits for the line begun since, if any
 * (line_start), so lines that keep coming wake it once per linger, not once
 * per line. Output that keeps coming while the thread writes is written as it
 * comes.
 *
 * Input: the input thread polls in_fd (plus a stop eventfd) and reads at
 * most the free space of the ring; while the ring is full it sleeps on a
 * condition variable and reads nothing (back-pressure). console_io_read()
 * wakes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "brisk/console_io.h"
#include "brisk/file.h"
#include "brisk/log.h"
#include "brisk/seccomp.h"
#include "brisk/thread.h"

#define CTRL_A	      0x01
#define OUT_CHUNK     4096 /* PIPE_BUF: one write after POLLOUT fits a pipe's free slot */
#define OUT_LINGER_MS 1	   /* default opts.out_linger_ms: a partial line waits at most this long for its '\n' */
#define READ_CHUNK    4096 /* at most this much read(2) at a time */
#define ESC_SCAN      64   /* a terminal with the input ring full: read this much, look for Ctrl-A x, drop */

/* A byte ring; `cap` is the size of `buf`. Covered by console_io.lock. */
struct ring {
	uint8_t *buf;
	size_t cap;
	size_t head;  /* index of the oldest byte */
	size_t count; /* bytes held */
};

struct console_io {
	struct console_io_opts opts;
	pthread_mutex_t lock; /* everything below but the fds and threads */
	int out_fd;	      /* where output is written: opts.out_fd or a private non-blocking reopen */
	bool out_fd_own;      /* out_fd is ours to close */
	bool out_is_sock;     /* out_fd is a socket: send(MSG_DONTWAIT) */
	bool out_direct;      /* the producer may write a line itself: out_fd never waits for a reader */
	int in_stop_fd;	      /* eventfd: the input thread must stop now */
	int out_abort_fd;     /* eventfd: the output thread must stop now, even with bytes left */
	int svc_fd; /* deferred output: the timerfd the caller's main loop polls (console_io_service), or -1 */
	pthread_t in_thread, out_thread;
	bool in_running, out_running;
	bool started, stopped;
	bool stopping;	  /* the output thread exits once the ring is empty */
	bool out_closed;  /* EPIPE, a write error or stopped: further bytes are dropped */
	bool out_waiting; /* the output thread sleeps on out_cond */
	bool out_busy;	  /* the output thread writes a chunk without the lock: nobody else writes */
	bool out_blocked; /* a write would have blocked: the output thread waits for the reader, the producer queues */
	bool out_lingering;	    /* ... and waits for a line's end (out_thread's linger) */
	bool out_eol;		    /* a '\n' was queued since the ring was last empty */
	struct timespec line_start; /* CLOCK_MONOTONIC: when the bytes queued now began (the ring was empty) */
	bool in_waiting;	    /* the input thread sleeps on in_cond (input ring full) */
	bool interactive;	    /* in_fd is the terminal put in raw mode: never left unread (see in_thread) */
	pthread_cond_t out_cond, in_cond;
	struct ring out;     /* guest -> host */
	struct ring in;	     /* host -> guest */
	uint64_t dropped;    /* output bytes lost; __atomic: read without the lock */
	uint64_t in_dropped; /* typed bytes lost (a terminal whose guest does not read); __atomic */
};

/* The terminal state before raw mode; static so that a signal handler can restore it. */
static struct termios saved_tio;
static int saved_tio_fd = -1;
static volatile sig_atomic_t tty_is_raw;

/* ---- rings ------------------------------------------------------------------- */

static size_t ring_space(const struct ring *r)
{
	return r->cap - r->count;
}

/* Appends up to n bytes; returns how many fitted. */
static size_t ring_put(struct ring *r, const uint8_t *p, size_t n)
{
	size_t done = 0;

	if (n > ring_space(r))
		n = ring_space(r);
	while (done < n) {
		size_t tail = (r->head + r->count) % r->cap;
		size_t run = r->cap - tail < n - done ? r->cap - tail : n - done;

		memcpy(r->buf + tail, p + done, run);
		r->count += run;
		done += run;
	}
	return done;
}

/* Removes up to n of the oldest bytes into p; returns how many. */
static size_t ring_get(struct ring *r, uint8_t *p, size_t n)
{
	size_t done = 0;

	if (n > r->count)
		n = r->count;
	while (done < n) {
		size_t run = r->cap - r->head < n - done ? r->cap - r->head : n - done;

		memcpy(p + done, r->buf + r->head, run);
		r->head = (r->head + run) % r->cap;
		r->count -= run;
		done += run;
	}
	return done;
}

/* ---- create / destroy ------------------------------------------------------- */

struct console_io *console_io_create(const struct console_io_opts *o)
{
	struct console_io *io;

	if (!o->out_size || !o->in_size || !o->ops) {
		errno = EINVAL;
		return NULL;
	}
	io = calloc(1, sizeof(*io));
	if (!io)
		return NULL;
	io->out.buf = malloc(o->out_size);
	io->in.buf = malloc(o->in_size);
	if (!io->out.buf || !io->in.buf) {
		free(io->out.buf);
		free(io->in.buf);
		free(io);
		errno = ENOMEM;
		return NULL;
	}
	io->opts = *o;
	if (!io->opts.out_linger_ms)
		io->opts.out_linger_ms = OUT_LINGER_MS;
	io->out.cap = o->out_size;
	io->in.cap = o->in_size;
	io->out_fd = -1;
	io->in_stop_fd = -1;
	io->out_abort_fd = -1;
	io->svc_fd = -1;
	pthread_mutex_init(&io->lock, NULL);
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the linger's deadline */
	pthread_cond_init(&io->out_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&io->in_cond, NULL);
	return io;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void console_io_destroy(struct console_io *io)
{
	if (!io)
		return;
	console_io_stop(io, 0);
	close_fd(&io->in_stop_fd);
	close_fd(&io->out_abort_fd);
	close_fd(&io->svc_fd);
	if (io->out_fd_own)
		close_fd(&io->out_fd);
	pthread_cond_destroy(&io->out_cond);
	pthread_cond_destroy(&io->in_cond);
	pthread_mutex_destroy(&io->lock);
	free(io->out.buf);
	free(io->in.buf);
	free(io);
}

/* ---- the device's side -------------------------------------------------------- */

static void count_dropped(struct console_io *io, uint64_t n)
{
	__atomic_fetch_add(&io->dropped, n, __ATOMIC_RELAXED);
}

/* The contiguous run of queued bytes starting at the ring's head, at most OUT_CHUNK. */
static size_t out_chunk(const struct ring *r)
{
	size_t n = r->cap - r->head;

	if (n > r->count)
		n = r->count;
	return n > OUT_CHUNK ? OUT_CHUNK : n;
}

/* Called with the lock held: n bytes at the ring's head were written. An empty ring starts a fresh line. */
static void out_consumed(struct console_io *io, size_t n)
{
	io->out.head = (io->out.head + n) % io->out.cap;
	io->out.count -= n;
	if (io->out.count == 0) {
		io->out_eol = false;
		io->out_blocked = false;
	}
}

/* Called with the lock held: what the output ring still holds is dropped and counted. */
static void drop_queued(struct console_io *io)
{
	count_dropped(io, io->out.count);
	io->out.head = 0;
	io->out.count = 0;
}

/* Called with the lock held: a write failed with -err (0: aborted). Further output is dropped and counted. */
static void out_failed(struct console_io *io, ssize_t err)
{
	if (err == -EPIPE)
		log_debug("%s: the reader of fd %d went away; further output dropped", io->opts.name, io->out_fd);
	else if (err < 0)
		log_warn("%s: write(fd %d): %s; further output dropped", io->opts.name, io->out_fd,
			 strerror((int)-err));
	io->out_closed = true; /* EPIPE included: the reader is gone */
	drop_queued(io);
}

/*
 * Called with the lock held, a line's end or OUT_CHUNK bytes queued, nobody writing: writes what the ring holds
 * from the producer's thread until it is empty or a write would block (then the output thread takes over).
 */
static void write_direct(struct console_io *io)
{
	while (io->out.count) {
		size_t n = out_chunk(&io->out);
		ssize_t w = write(io->out_fd, io->out.buf + io->out.head, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN) {
			out_failed(io, -errno);
			return;
		}
		if (w > 0)
			out_consumed(io, (size_t)w);
		if (w < 0 || (size_t)w < n) {
			io->out_blocked = true; /* the reader is behind: the output thread polls for it */
			return;
		}
	}
}

/*
 * Called with the lock held, bytes queued and no output thread (deferred output): arms the service timer to fire
 * when the queued bytes' linger ends (line_start + linger), or at once when a write would have blocked. The main
 * loop then calls console_io_service, which starts the thread if anything is still queued; a line the producer
 * writes meanwhile leaves nothing for it, and costs no thread.
 */
static void call_service(struct console_io *io)
{
	/* blocked: any time past (1 ns: an it_value of 0 would disarm) */
	struct itimerspec at = {.it_value = io->out_blocked ? (struct timespec){0, 1}
							    : bthread_after(io->line_start, io->opts.out_linger_ms)};

	if (io->svc_fd >= 0 && timerfd_settime(io->svc_fd, TFD_TIMER_ABSTIME, &at, NULL) < 0)
		log_warn("%s: arming the output timer: %s", io->opts.name, strerror(errno));
}

size_t console_io_write(struct console_io *io, const void *buf, size_t len)
{
	size_t n = 0;
	bool began, flush, wake;

	if (io->opts.out_fd < 0)
		return len; /* output discarded by configuration, not "dropped" */
	pthread_mutex_lock(&io->lock);
	began = !io->out_closed && !io->out.count && len;
	if (began)
		clock_gettime(CLOCK_MONOTONIC, &io->line_start); /* the linger counts from here (vDSO) */
	if (!io->out_closed)
		n = ring_put(&io->out, buf, len);
	if (n && memchr(buf, '\n', n))
		io->out_eol = true;
	flush = n && (io->out_eol || io->out.count >= OUT_CHUNK);
	if (flush && io->out_direct && !io->out_busy && !io->out_blocked && !io->stopping)
		write_direct(io);
	if (!io->out_running && io->out.count && (began || io->out_blocked))
		call_service(io); /* no output thread yet: the main loop starts one if these bytes need it */
	/*
	 * The output thread: a sleeping one for what is queued (it lingers for the line's end), a lingering one for
	 * what this call could not write. A lingering thread whose line was written here is left to its timeout: it
	 * waits then for the line begun meanwhile, if any, so lines that keep coming cost it no wake-up each.
	 */
	wake = (io->out_waiting && io->out.count) || (io->out_lingering && flush && io->out.count);
	pthread_mutex_unlock(&io->lock);
	if (wake)
		pthread_cond_signal(&io->out_cond); /* after the unlock: the thread does not wake into a held lock */
	if (n < len)
		count_dropped(io, len - n);
	return n;
}

size_t console_io_read(struct console_io *io, void *buf, size_t len)
{
	size_t n;

	pthread_mutex_lock(&io->lock);
	n = ring_get(&io->in, buf, len);
	if (n && io->in_waiting)
		pthread_cond_signal(&io->in_cond);
	pthread_mutex_unlock(&io->lock);
	return n;
}

/* Bytes ring r (io->in or io->out) holds now. */
static size_t held(struct console_io *io, const struct ring *r)
{
	size_t n;

	pthread_mutex_lock(&io->lock);
	n = r->count;
	pthread_mutex_unlock(&io->lock);
	return n;
}

size_t console_io_pending(struct console_io *io)
{
	return held(io, &io->in);
}

uint64_t console_io_dropped(const struct console_io *io)
{
	return __atomic_load_n(&io->dropped, __ATOMIC_RELAXED);
}

uint64_t console_io_input_dropped(const struct console_io *io)
{
	return __atomic_load_n(&io->in_dropped, __ATOMIC_RELAXED);
}

/* ---- raw terminal -------------------------------------------------------- */

void console_io_restore_tty(void)
{
	if (!tty_is_raw)
		return;
	tty_is_raw = 0;
	tcsetattr(saved_tio_fd, TCSANOW, &saved_tio); /* async-signal-safe (POSIX.1-2008 2.4.3) */
}

/*
 * Raw input as QEMU's stdio backend: no echo, no line editing, no ISIG (so
 * Ctrl-C reaches the guest; Ctrl-A x quits), but output processing (OPOST)
 * stays on so brisk's own log lines still start at column 0. One terminal
 * per process: a second console asking for it finds it raw already.
 */
static void set_raw_tty(const struct console_io *io, int fd)
{
	struct termios t;

	if (tty_is_raw || !isatty(fd) || tcgetattr(fd, &saved_tio) < 0)
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
		log_warn("%s: tcsetattr(fd %d, raw): %s", io->opts.name, fd, strerror(errno));
}

/* ---- output thread ---------------------------------------------------------- */

/* A private O_NONBLOCK description of out_fd when it is a terminal or a pipe (see the top comment). */
static void open_output(struct console_io *io)
{
	char path[64];
	struct stat st;
	int fd;

	io->out_fd = io->opts.out_fd;
	if (io->out_fd < 0 || fstat(io->out_fd, &st) < 0)
		return;
	io->out_is_sock = S_ISSOCK(st.st_mode);
	io->out_direct = S_ISREG(st.st_mode);
	if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", io->opts.out_fd);
	fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		log_debug("%s: reopen %s: %s; writing to fd %d directly", io->opts.name, path, strerror(errno),
			  io->out_fd);
		return;
	}
	io->out_fd = fd;
	io->out_fd_own = true;
	io->out_direct = true; /* its writes never wait */
}

static ssize_t write_once(const struct console_io *io, const uint8_t *p, size_t n)
{
	if (io->out_is_sock)
		return send(io->out_fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	return write(io->out_fd, p, n);
}

/*
 * Waits until fd is ready for `events` or stop_fd is readable. Returns 1
 * (ready: the caller's non-blocking call may still get EAGAIN), 0 (stopped)
 * or -errno.
 */
static int wait_or_stop(int fd, short events, int stop_fd)
{
	struct pollfd pfd[2] = {{.fd = fd, .events = events}, {.fd = stop_fd, .events = POLLIN}};

	while (poll(pfd, 2, -1) < 0)
		if (errno != EINTR)
			return -errno;
	return pfd[1].revents ? 0 : 1;
}

/* Writes some of p[0..n): returns bytes written, 0 when aborted, or -errno. Waits only when the write would block. */
static ssize_t write_some(struct console_io *io, const uint8_t *p, size_t n)
{
	ssize_t w;
	int ready;

	for (;;) {
		w = write_once(io, p, n);
		if (w > 0)
			return w;
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN)
			return -errno;
		if ((ready = wait_or_stop(io->out_fd, POLLOUT, io->out_abort_fd)) <= 0)
			return ready;
	}
}

/*
 * Called with the lock held, bytes queued since the ring was last empty: waits until a '\n' or OUT_CHUNK bytes are
 * queued, the console stops, the ring is empty (the producer wrote the line), or opts.out_linger_ms pass since the
 * queued bytes began (a prompt, a line still being written), whichever is first.
 */
static void linger(struct console_io *io)
{
	io->out_lingering = true;
	/* ends early for a line's end, a chunk, a stop, a blocked write, or a ring the producer emptied itself */
	while (!io->stopping && !io->out_eol && io->out.count && io->out.count < OUT_CHUNK && !io->out_closed &&
	       !io->out_blocked) {
		struct timespec started = io->line_start, deadline = bthread_after(started, io->opts.out_linger_ms);

		/* timed out: unless the producer wrote that line and began another meanwhile (wait for its end) */
		if (pthread_cond_timedwait(&io->out_cond, &io->lock, &deadline) == ETIMEDOUT &&
		    io->line_start.tv_sec == started.tv_sec && io->line_start.tv_nsec == started.tv_nsec)
			break;
	}
	io->out_lingering = false;
}

/*
 * Drains what the producer leaves in the output ring (a partial line after its linger, what a reader was not
 * ready for, everything for a socket) until it is empty after a stop request, or until aborted or closed.
 */
static void *out_thread(void *arg)
{
	struct console_io *io = arg;
	bool fresh = true; /* the bytes queued now began after the ring was last empty: linger for the line's end */
	ssize_t w;
	size_t n;

	prctl(PR_SET_NAME, "brisk_con_out", 0, 0, 0);
	seccomp_enter(SECCOMP_CONSOLE_OUT);
	pthread_mutex_lock(&io->lock);
	for (;;) {
		while (io->out.count == 0 && !io->stopping && !io->out_closed) {
			io->out_waiting = true;
			pthread_cond_wait(&io->out_cond, &io->lock);
			io->out_waiting = false;
			fresh = true;
		}
		if (io->out.count == 0 || io->out_closed)
			break;
		if (fresh)
			linger(io);
		fresh = false;
		if (io->out.count == 0 || io->out_closed)
			continue; /* the producer wrote the line itself (or failed to) */
		n = out_chunk(&io->out);
		io->out_busy = true;
		pthread_mutex_unlock(&io->lock);
		w = write_some(io, io->out.buf + io->out.head, n);
		pthread_mutex_lock(&io->lock);
		io->out_busy = false;
		if (w <= 0) {
			out_failed(io, w);
			break;
		}
		out_consumed(io, (size_t)w); /* an empty ring: the loop waits, and lingers for the next line */
	}
	drop_queued(io);
	pthread_mutex_unlock(&io->lock);
	return NULL;
}

/* ---- input thread ------------------------------------------------------------ */

/*
 * Waits for room in the input ring and says how many bytes may be read
 * (*room); false: stop. With an escape pending one byte more is kept free: n
 * bytes read queue at most n + 1 (a pending Ctrl-A followed by another byte
 * sends both). A terminal is never left unread (*room may be 0): see
 * in_thread().
 */
static bool wait_for_room(struct console_io *io, bool esc, size_t *room)
{
	bool go;

	pthread_mutex_lock(&io->lock);
	while (!io->interactive && ring_space(&io->in) <= (size_t)esc && !io->stopping) {
		io->in_waiting = true;
		pthread_cond_wait(&io->in_cond, &io->lock);
		io->in_waiting = false;
	}
	go = !io->stopping;
	*room = ring_space(&io->in) > (size_t)esc ? ring_space(&io->in) - (size_t)esc : 0;
	pthread_mutex_unlock(&io->lock);
	return go;
}

/* Reads at most n bytes once in_fd is readable. Returns the count, 0 at EOF or stop, or -errno. */
static ssize_t read_some(struct console_io *io, uint8_t *buf, size_t n)
{
	ssize_t r;
	int ready;

	for (;;) {
		if ((ready = wait_or_stop(io->opts.in_fd, POLLIN, io->in_stop_fd)) <= 0)
			return ready;
		r = read(io->opts.in_fd, buf, n);
		if (r >= 0)
			return r;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
}

/*
 * Filters the Ctrl-A escape out of buf[0..n): returns the bytes to queue in
 * out[] (at most n + 1), sets *quit on Ctrl-A x.
 */
static size_t unescape(const uint8_t *buf, size_t n, uint8_t *out, bool *esc, bool *quit)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t b = buf[i];

		if (*esc) {
			*esc = false;
			if (b == 'x') {
				*quit = true;
				continue;
			}
			if (b != CTRL_A)
				out[k++] = CTRL_A;
			out[k++] = b;
		} else if (b == CTRL_A) {
			*esc = true;
		} else {
			out[k++] = b;
		}
	}
	return k;
}

/* Queues q[0..k) for the guest; what does not fit (a terminal whose guest does not read) is dropped and counted. */
static void queue_input(struct console_io *io, const uint8_t *q, size_t k)
{
	size_t put;

	pthread_mutex_lock(&io->lock);
	put = ring_put(&io->in, q, k);
	pthread_mutex_unlock(&io->lock);
	if (put < k && __atomic_fetch_add(&io->in_dropped, k - put, __ATOMIC_RELAXED) == 0)
		log_warn("%s: the guest is not reading its console: typed input dropped (Ctrl-A x still quits)",
			 io->opts.name);
	if (put)
		io->opts.ops->input_ready(io->opts.arg);
}

/*
 * Reads input, filters the escape, queues the rest. From a pipe or a file it
 * reads only what the ring can take (back-pressure: a flood stays with the
 * writer). From a terminal in raw mode it never stops reading, so that
 * Ctrl-A x works while the guest reads nothing: with the ring full it reads
 * ESC_SCAN bytes at a time and drops them, counted (a person types; a
 * terminal is not a bulk channel).
 */
static void *in_thread(void *arg)
{
	struct console_io *io = arg;
	uint8_t buf[READ_CHUNK], q[READ_CHUNK + 1];
	bool esc = false, quit;
	size_t room, k;
	ssize_t r;

	prctl(PR_SET_NAME, "brisk_con_in", 0, 0, 0);
	seccomp_enter(SECCOMP_CONSOLE_IN);
	while (wait_for_room(io, esc, &room)) {
		if (room == 0)
			room = ESC_SCAN; /* a terminal with the ring full */
		r = read_some(io, buf, room < sizeof(buf) ? room : sizeof(buf));
		if (r < 0)
			log_warn("%s: read(fd %d): %s; input stopped", io->opts.name, io->opts.in_fd,
				 strerror((int)-r));
		if (r <= 0)
			break; /* EOF: the guest simply gets no more input */
		quit = false;
		k = unescape(buf, (size_t)r, q, &esc, &quit);
		if (k)
			queue_input(io, q, k); /* fits, but on a terminal whose guest does not read */
		if (quit)
			io->opts.ops->quit(io->opts.arg);
	}
	return NULL;
}

/* ---- start / stop ------------------------------------------------------------ */

/* Starts a thread with every signal blocked: SIGINT/SIGTERM and vCPU kicks are not for it. 0 or -errno. */
static int start_thread(pthread_t *t, void *(*fn)(void *), struct console_io *io)
{
	return -bthread_create_masked(t, fn, io);
}

static int make_eventfd(int *fd)
{
	*fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return *fd < 0 ? -errno : 0;
}

static void kick(const struct console_io *io, int fd)
{
	uint64_t one = 1;

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0)
		log_debug("%s: eventfd write: %s", io->opts.name, strerror(errno));
}

static void set_out_running(struct console_io *io, bool running)
{
	pthread_mutex_lock(&io->lock); /* console_io_write reads it */
	io->out_running = running;
	pthread_mutex_unlock(&io->lock);
}

/* The output thread, now; 0 or -errno. */
static int start_out_thread(struct console_io *io)
{
	int err = start_thread(&io->out_thread, out_thread, io);

	set_out_running(io, !err);
	return err;
}

/* What both starts do first: the eventfds, the output's description. */
static int prepare_output(struct console_io *io)
{
	int err;

	if (io->started)
		return -EBUSY;
	io->started = true;
	err = make_eventfd(&io->in_stop_fd);
	if (!err)
		err = make_eventfd(&io->out_abort_fd);
	if (err)
		return err; /* console_io_destroy closes what was opened */
	open_output(io);
	return 0;
}

int console_io_start_output(struct console_io *io)
{
	int err = prepare_output(io);

	return err || io->out_fd < 0 ? err : start_out_thread(io);
}

static void serve(void *io)
{
	console_io_service(io);
}

int console_io_start_output_deferred(struct console_io *io,
				     int (*watch)(void *arg, int fd, void (*fn)(void *io), void *io), void *arg)
{
	int err = prepare_output(io);

	if (err || io->out_fd < 0)
		return err;
	if (!io->out_direct) /* a socket: every line is the thread's */
		return start_out_thread(io);
	io->svc_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (io->svc_fd < 0 || watch(arg, io->svc_fd, serve, io) < 0) {
		log_debug("%s: no deferred output thread (%s): starting it now", io->opts.name,
			  io->svc_fd < 0 ? strerror(errno) : "no main-loop watch");
		close_fd(&io->svc_fd);
		return start_out_thread(io);
	}
	pthread_mutex_lock(&io->lock);
	if (io->out.count) { /* queued before the start: written when the main loop first looks */
		io->out_blocked = true;
		call_service(io);
	}
	pthread_mutex_unlock(&io->lock);
	return 0;
}

void console_io_service(struct console_io *io)
{
	uint64_t expired;
	bool need;
	int err;

	if (read(io->svc_fd, &expired, sizeof(expired)) < 0 && errno != EAGAIN)
		log_debug("%s: reading the output timer: %s", io->opts.name, strerror(errno));
	pthread_mutex_lock(&io->lock);
	need = !io->out_running && io->out.count && !io->stopping && !io->out_closed;
	pthread_mutex_unlock(&io->lock);
	if (!need || !(err = start_out_thread(io)))
		return;
	log_warn("%s: starting the output thread: %s; further output dropped", io->opts.name, strerror(-err));
	pthread_mutex_lock(&io->lock);
	out_failed(io, 0);
	pthread_mutex_unlock(&io->lock);
}

int console_io_start_input(struct console_io *io)
{
	int err;

	if (!io->started || io->in_stop_fd < 0)
		return -EINVAL;
	/*
	 * The null device only ever reads EOF (stdin under systemd, an orchestrator, a benchmark): no thread to read
	 * it. Asked now, not when the console was made: a warm clone gets its stdin with its request.
	 */
	if (io->in_running || io->opts.in_fd < 0 || file_is_dev_null(io->opts.in_fd))
		return 0;
	if (io->opts.raw_tty)
		set_raw_tty(io, io->opts.in_fd);
	io->interactive = io->opts.raw_tty && tty_is_raw && saved_tio_fd == io->opts.in_fd;
	err = start_thread(&io->in_thread, in_thread, io);
	io->in_running = !err;
	return err;
}

/* Lets the output thread drain for at most flush_ms, then aborts it. */
static void stop_output(struct console_io *io, int flush_ms)
{
	struct timespec deadline;

	if (!io->out_running)
		return;
	if (flush_ms > 0) {
		deadline = bthread_deadline(CLOCK_REALTIME, (unsigned)flush_ms);
		if (bthread_timedjoin(io->out_thread, NULL, &deadline) == 0) {
			set_out_running(io, false);
			return;
		}
	}
	kick(io, io->out_abort_fd);
	bthread_join(io->out_thread, NULL);
	set_out_running(io, false);
}

void console_io_stop(struct console_io *io, int flush_ms)
{
	pthread_mutex_lock(&io->lock);
	if (!io->started || io->stopped) {
		pthread_mutex_unlock(&io->lock);
		return;
	}
	io->stopped = true;
	io->stopping = true;
	pthread_cond_broadcast(&io->out_cond);
	pthread_cond_broadcast(&io->in_cond);
	pthread_mutex_unlock(&io->lock);

	kick(io, io->in_stop_fd);
	if (io->in_running)
		bthread_join(io->in_thread, NULL);
	io->in_running = false;
	if (!io->out_running && io->svc_fd >= 0 && flush_ms > 0 && held(io, &io->out) && start_out_thread(io) < 0)
		log_debug("%s: no thread to write the output left at stop: dropped", io->opts.name);
	stop_output(io, flush_ms);
	if (io->opts.raw_tty)
		console_io_restore_tty();

	pthread_mutex_lock(&io->lock);
	io->out_closed = true;
	drop_queued(io);
	pthread_mutex_unlock(&io->lock);
}
