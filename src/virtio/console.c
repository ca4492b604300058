/*
 * console.c - virtio console (virtio 1.2 section 5.3), one port (no VIRTIO_CONSOLE_F_MULTIPORT), on the
 * VM's stdin/stdout through a console_io backend: the same bounded rings, threads, raw terminal and
 * Ctrl-A escape as the 8250 UART.
 *
 * Queues (5.3.2): receiveq 0 (host -> guest) and transmitq 1 (guest -> host).
 *
 * Transmit: each chain's readable buffers are copied into the output ring at once and the chain is
 * completed with 0 bytes written (5.3.6.2). Linux's hvc put_chars waits, spinning, for the host to
 * return the buffer, so holding transmit chains while stdout stalls would stall the guest; instead a
 * full ring drops and counts, as the UART does (docs/security.md case 14).
 *
 * Receive: host input arrives on the console's input thread, which only queues it in the input ring
 * and signals an eventfd; the event loop (virtio_watch, I/O lock held) fills the guest's writable
 * buffers from the ring. The virtqueues are touched by the event loop thread only. While the guest
 * posts no buffer, input waits in the ring, then in the pipe or terminal (back-pressure: the ring
 * is bounded and the input thread stops reading when it is full).
 *
 * Config space (5.3.4): neither VIRTIO_CONSOLE_F_SIZE nor VIRTIO_CONSOLE_F_EMERG_WRITE is offered (the
 * guest's terminal size is its own business: brisk does not own SIGWINCH), so the 12-byte structure
 * reads as zeros and is read-only.
 *
 * Reset (section 2.4) keeps what the input ring holds: typed input is the user's, not the driver's;
 * it goes to the driver that comes back. Nothing is held across callbacks, so a reset during I/O has
 * nothing to abandon.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "brisk/console_io.h"
#include "brisk/device.h"
#include "brisk/devices.h"
#include "brisk/exitcode.h"
#include "brisk/log.h"
#include "brisk/virtio.h"

#define CON_QUEUE_SIZE	256
#define CON_RX_Q	0
#define CON_TX_Q	1
#define CON_MAX_SEGS	64   /* segments per chain we look at; more is a malformed request */
#define CON_CONFIG_SIZE 12   /* struct virtio_console_config: cols, rows, max_nr_ports, emerg_write */
#define CON_FLUSH_MS	1000 /* at stop: how long a stalled reader may hold up the exit */

struct vcon {
	struct devctx ctx;
	struct virtio_mmio *t;
	struct console_io *io;
	int input_fd; /* eventfd: the input thread queued bytes (or activate wants a look) */
	bool active;  /* between activate and reset (both under the I/O lock, as every callback) */
	uint64_t rx_bytes, tx_bytes;
};

/* Copies a transmit chain's readable buffers to the output ring; what does not fit is dropped and counted. */
static void transmit(struct vcon *c, const struct virtq_chain *ch)
{
	struct virtq_cursor r;
	uint64_t n;
	uint8_t *p;

	virtq_reader(&r, ch);
	while ((n = virtq_cursor_span(&r, UINT32_MAX, &p)) != 0)
		console_io_write(c->io, p, (size_t)n);
	c->tx_bytes += ch->out_bytes;
}

static void kick(struct vcon *c);

/* After a round: a queue that broke stops the device until the driver resets it; what was pushed is published. */
static void end_round(struct vcon *c, struct virtq_iter *it, unsigned qi)
{
	if (it->q && it->q->broken)
		c->active = false; /* the transport set DEVICE_NEEDS_RESET */
	if (it->more)
		kick(c); /* a queue's worth taken: the rest after the loop looked at its other fds */
	if (virtq_iter_pushed(it))
		virtio_queue_done(c->t, qi);
}

/*
 * Serves the chains on the transmit queue (5.3.6.2), at most a queue's worth
 * per call: a guest that keeps adding chains gets the rest after the event
 * loop has looked at its other fds.
 */
static void drain_tx(struct vcon *c)
{
	struct virtq_seg segs[CON_MAX_SEGS];
	struct virtq_chain ch;
	struct virtq_iter it;

	if (!virtio_iter(c->t, CON_TX_Q, &it, segs, CON_MAX_SEGS, CON_QUEUE_SIZE))
		return;
	while (virtq_next(&it, &ch)) {
		if (ch.nr_in) { /* 5.3.6.2: the driver MUST NOT put a writable buffer here */
			virtq_drop(&it, &ch, "a writable buffer on the transmit queue");
			continue;
		}
		transmit(c, &ch);
		virtq_push(it.q, ch.head, 0);
	}
	end_round(c, &it, CON_TX_Q);
}

/* Fills a receive chain's writable buffers from the input ring; returns the bytes written. */
static uint32_t receive(struct vcon *c, const struct virtq_chain *ch)
{
	struct virtq_cursor w;
	uint64_t done = 0, len;
	uint8_t *p;

	virtq_writer(&w, ch);
	while ((len = virtq_cursor_span(&w, UINT32_MAX, &p)) != 0) {
		size_t n = console_io_read(c->io, p, (size_t)len);

		done += n;
		if (n < len)
			break;
	}
	c->rx_bytes += done;
	return (uint32_t)done; /* <= in_bytes <= UINT32_MAX (virtq.h) */
}

/*
 * Moves host input into receive buffers while both exist (5.3.6.1). A chain
 * is taken only when input is waiting; only this thread takes input, so it
 * cannot run dry between the look and the read.
 */
static void fill_rx(struct vcon *c)
{
	struct virtq_seg segs[CON_MAX_SEGS];
	struct virtq_chain ch;
	struct virtq_iter it;

	if (!virtio_iter(c->t, CON_RX_Q, &it, segs, CON_MAX_SEGS, CON_QUEUE_SIZE))
		return;
	/* no buffer: the input waits (the guest's next notify brings us back) */
	while (console_io_pending(c->io) > 0 && virtq_next(&it, &ch)) {
		if (ch.nr_out || !ch.nr_in) {
			virtq_drop(&it, &ch,
				   ch.nr_out ? "a readable buffer on the receive queue"
					     : "a receive chain with no buffer");
			continue;
		}
		virtq_push(it.q, ch.head, receive(c, &ch));
	}
	end_round(c, &it, CON_RX_Q);
}

/* ---- callbacks ------------------------------------------------------------------------------------ */

static void con_notify(void *dev, unsigned q)
{
	struct vcon *c = dev;

	if (!c->active)
		return;
	if (q == CON_RX_Q)
		fill_rx(c);
	else
		drain_tx(c);
}

/* The input eventfd (event loop, I/O lock held): input was queued, or activate asked for a look. */
static void input_signalled(void *arg, uint32_t events)
{
	struct vcon *c = arg;
	uint64_t n;

	(void)events;
	if (read(c->input_fd, &n, sizeof(n)) != sizeof(n))
		return;
	if (!c->active)
		return; /* the input stays in the ring for the driver to come */
	fill_rx(c);
	drain_tx(c); /* after activate: what the driver queued before DRIVER_OK (its notify found us inactive) */
}

static void kick(struct vcon *c)
{
	uint64_t one = 1;

	if (write(c->input_fd, &one, sizeof(one)) < 0 && errno != EAGAIN) /* EAGAIN: a wakeup is pending */
		log_debug("virtio-console: eventfd write: %s", strerror(errno));
}

/* console_io: input thread, no lock held. */
static void input_ready(void *arg)
{
	kick(arg);
}

static void quit(void *arg)
{
	struct vcon *c = arg;

	dev_request_exit(&c->ctx, EXIT_STOPPED, "Ctrl-A x");
}

static const struct console_io_ops con_io_ops = {.input_ready = input_ready, .quit = quit};

static void con_config_read(void *dev, uint32_t offset, void *data, unsigned len)
{
	(void)dev, (void)offset;
	memset(data, 0, len); /* cols, rows, max_nr_ports, emerg_write: none of their features offered */
}

/* DRIVER_OK (vCPU thread, I/O lock held): the queues are served from the event loop, which is kicked. */
static int con_activate(void *dev, uint64_t features)
{
	struct vcon *c = dev;

	(void)features;
	c->active = true;
	kick(c);
	return 0;
}

static void con_reset(void *dev)
{
	struct vcon *c = dev;

	c->active = false;
}

static int con_start(void *dev)
{
	struct vcon *c = dev;

	/* the I/O loop writes each complete line; a thread only for what it leaves (console_io.h) */
	return console_io_start_output_deferred(c->io, dev_main_watch, &c->ctx);
}

static int con_late_start(void *dev)
{
	struct vcon *c = dev;

	return console_io_start_input(c->io);
}

static void con_stop(void *dev)
{
	struct vcon *c = dev;
	uint64_t dropped;

	console_io_stop(c->io, CON_FLUSH_MS);
	dropped = console_io_dropped(c->io);
	if (dropped)
		log_warn("virtio-console output: %llu bytes dropped (host output stalled)",
			 (unsigned long long)dropped);
	log_info("virtio-console: %llu bytes to the host, %llu to the guest", (unsigned long long)c->tx_bytes,
		 (unsigned long long)c->rx_bytes);
}

static void con_destroy(void *dev)
{
	struct vcon *c = dev;

	console_io_destroy(c->io);
	if (c->input_fd >= 0)
		close(c->input_fd);
	free(c);
}

static const struct virtio_dev_ops con_ops = {
    .name = "virtio-console",
    .device_id = VIRTIO_ID_CONSOLE,
    .nr_queues = 2, /* port 0's receiveq and transmitq; no control queues without MULTIPORT */
    .queue_max = CON_QUEUE_SIZE,
    .config_size = CON_CONFIG_SIZE,
    .config_read = con_config_read,
    .activate = con_activate,
    .notify = con_notify,
    .reset = con_reset,
    .start = con_start,
    .late_start = con_late_start,
    .stop = con_stop,
    .destroy = con_destroy,
};

int virtio_console_create_io(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win,
			     const struct serial_opts *io)
{
	struct vcon *c = calloc(1, sizeof(*c));
	struct console_io_opts o = {
	    .name = "virtio-console",
	    .out_fd = io->out_fd,
	    .in_fd = io->in_fd,
	    .raw_tty = io->raw_tty,
	    .out_size = SERIAL_OUTBUF_SIZE,
	    .in_size = SERIAL_INBUF_SIZE,
	    .ops = &con_io_ops,
	    .arg = c,
	};
	int err;

	if (!c)
		return -ENOMEM;
	c->ctx = *ctx;
	c->input_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->io = c->input_fd >= 0 ? console_io_create(&o) : NULL;
	if (!c->io) {
		err = -errno;
		if (c->input_fd >= 0)
			close(c->input_fd);
		free(c);
		return err;
	}
	err = virtio_mmio_create(ctx, bus, win, &con_ops, c, 0, &c->t); /* owns c from here on */
	if (!err)
		err = virtio_watch(c->t, c->input_fd, EPOLLIN, input_signalled, c);
	return err;
}

int virtio_console_create(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win)
{
	const struct serial_opts io = {.out_fd = STDOUT_FILENO, .in_fd = STDIN_FILENO, .raw_tty = isatty(STDIN_FILENO)};

	return virtio_console_create_io(ctx, bus, win, &io);
}
