/*
 * console_io.h - a guest console's host side, shared by the 8250 UART and the virtio console: a bounded
 * output ring drained by an output thread, an input thread feeding a bounded input ring with
 * back-pressure, the Ctrl-A escape, and raw terminal mode.
 *
 * Output (guest -> host): console_io_write() copies into the ring under the console's own lock and
 * never waits for a reader; what does not fit (a stalled reader) is dropped and counted. A terminal or
 * pipe is written through a private O_NONBLOCK description (stdout's own is shared with the shell and is
 * never switched to O_NONBLOCK), a socket with send(MSG_DONTWAIT), a regular file through the fd itself.
 * When a '\n' (or 4 KiB) is queued, console_io_write() itself writes the ring's bytes, one write(2)
 * per line, unless a write is pending or out_fd is a socket (a regular file's write may wait for the
 * page cache, as Firecracker's and QEMU's serial writes do; never for a reader). The output thread
 * writes the rest: a partial line once it waited out_linger_ms, what a reader was not ready for
 * (EAGAIN), everything for a socket; every wait of it also watches an abort eventfd, so a stalled
 * reader delays a stop by at most the flush time given to console_io_stop().
 *
 * Input (host -> guest): one input thread reads in_fd, at most the ring's free space at a time; while
 * the ring is full it reads nothing (back-pressure: a host stdin flood stays in the pipe, docs/security.md
 * case 14). The exception is the terminal put in raw mode: it is always read, so that Ctrl-A x works
 * while the guest reads nothing, and what the full ring cannot take is dropped and counted. Ctrl-A x
 * calls ops->quit; Ctrl-A Ctrl-A queues one Ctrl-A; Ctrl-A followed by any other byte queues both
 * (QEMU's mon:stdio). After queueing bytes the thread calls ops->input_ready, without the console's
 * lock, and the device takes them with console_io_read() on its own thread.
 *
 * Locking: one mutex per console, taken briefly by every call below and by both threads; a device may
 * hold its own lock when calling console_io_write/read (lock order: device, then console) as long as
 * its input_ready callback takes only its own lock.
 */
#ifndef BRISK_CONSOLE_IO_H
#define BRISK_CONSOLE_IO_H

#include <stddef.h>
#include <stdint.h>

struct console_io;

/* What the input thread tells the device. Both run on the input thread, with no console lock held. */
struct console_io_ops {
	void (*input_ready)(void *arg); /* bytes were queued: console_io_read() has them */
	void (*quit)(void *arg);	/* the user typed Ctrl-A x */
};

struct console_io_opts {
	const char *name; /* for log lines: "serial", "virtio-console" */
	int out_fd;	  /* -1: output discarded (not counted as dropped); borrowed, never closed */
	int in_fd;	  /* -1: no input; borrowed */
	int raw_tty;	  /* put in_fd's terminal in raw mode while input runs */
	size_t out_size;  /* output ring, bytes (> 0) */
	size_t in_size;	  /* input ring, bytes (> 0) */
	/* how long output that does not end a line waits for its '\n' before it is written (so that a line a UART
	 * sends byte by byte is one write); 0: the default, 1 ms */
	unsigned out_linger_ms;
	const struct console_io_ops *ops;
	void *arg; /* passed to ops */
};

/* Allocates a console (no thread yet). Returns NULL with errno set on failure. */
struct console_io *console_io_create(const struct console_io_opts *o);
/* Stops the threads (console_io_stop(io, 0)) and frees everything. NULL is fine. */
void console_io_destroy(struct console_io *io);

/*
 * Starts the output thread (before the guest runs: its first line must not
 * wait for a thread). Returns 0, -EBUSY if started, or -errno.
 */
__attribute__((warn_unused_result)) int console_io_start_output(struct console_io *io);
/*
 * As console_io_start_output, but the output thread waits until it is needed: while every line ends within
 * its linger and every write finds the reader ready, the producer writes them all and no thread is made.
 * For that the console makes a timer fd and passes it to watch(arg, fd, fn, io), which must have the caller's
 * main loop poll it for POLLIN and call fn(io) (console_io_service) on that thread (one that may start
 * threads) when it is readable, until console_io_stop (the devices pass dev_main_watch, device.h). The producer arms it
 * for a line that has not ended when its linger is over, or a write that would have blocked; console_io_service then
 * starts the thread, which takes over as console_io_start_output's would. A socket, no timer, or watch < 0: the thread
 * starts now. A stop with bytes still queued starts it to write them. Returns 0, -EBUSY if started, or -errno.
 */
__attribute__((warn_unused_result)) int
console_io_start_output_deferred(struct console_io *io, int (*watch)(void *arg, int fd, void (*fn)(void *io), void *io),
				 void *arg);
/* The main loop's call when the fd is readable (what watch's fn(io) calls). */
void console_io_service(struct console_io *io);
/*
 * Starts raw terminal mode and the input thread, after console_io_start_output.
 * Returns 0 (also without in_fd, or already running), -EINVAL if output was
 * not started, or -errno.
 */
__attribute__((warn_unused_result)) int console_io_start_input(struct console_io *io);
/*
 * Stops both threads: the input thread at once, the output thread after it
 * drained the ring or after `flush_ms` (then what is left counts as
 * dropped); restores the terminal. Further writes are dropped and counted.
 * Idempotent.
 */
void console_io_stop(struct console_io *io, int flush_ms);

/*
 * Queues up to `len` guest bytes for out_fd and, when they end a line, writes
 * what is queued (see the top); never waits for a reader. Returns the bytes
 * queued; the rest is dropped and counted (ring full, output closed or
 * stopped). With out_fd -1 everything is discarded uncounted (returns len).
 */
size_t console_io_write(struct console_io *io, const void *buf, size_t len);
/* Takes up to `len` bytes of host input; wakes the input thread if it waits for room. Returns the count. */
size_t console_io_read(struct console_io *io, void *buf, size_t len);
/* Bytes of host input waiting in the ring. */
size_t console_io_pending(struct console_io *io);
/* Bytes of guest output dropped so far. */
uint64_t console_io_dropped(const struct console_io *io);
/* Bytes typed on a raw terminal and dropped because the guest left the input ring full. */
uint64_t console_io_input_dropped(const struct console_io *io);

/* Restores the terminal if a console put it in raw mode (async-signal-safe; for atexit and signal paths). */
void console_io_restore_tty(void);

#endif
