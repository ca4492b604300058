/* serial8250_internal.h - state shared by the UART register model (serial8250.c) and its host side (serial_io.c). */
#ifndef BRISK_SERIAL8250_INTERNAL_H
#define BRISK_SERIAL8250_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/device.h"
#include "brisk/devices.h"

#define SERIAL_FIFO_SIZE 16 /* 16550A receive FIFO depth (datasheet: "16-byte FIFOs") */

/* A byte ring; `cap` is the size of `buf`. Not locked: the owner's lock covers it. */
struct serial_ring {
	uint8_t *buf;
	size_t cap;
	size_t head;  /* index of the oldest byte */
	size_t count; /* bytes held */
};

static inline size_t serial_ring_space(const struct serial_ring *r)
{
	return r->cap - r->count;
}

/* Appends `b`; the caller has checked that there is space. */
static inline void serial_ring_put(struct serial_ring *r, uint8_t b)
{
	r->buf[(r->head + r->count) % r->cap] = b;
	r->count++;
}

/* Removes and returns the oldest byte; the caller has checked that count > 0. */
static inline uint8_t serial_ring_get(struct serial_ring *r)
{
	uint8_t b = r->buf[r->head];

	r->head = (r->head + 1) % r->cap;
	r->count--;
	return b;
}

/* Host-side state (serial_io.c). Everything but the fds and threads is under serial8250.lock. */
struct serial_io {
	struct serial_opts opts;
	int out_fd;	  /* where the output thread writes: opts.out_fd or a private non-blocking reopen */
	int out_fd_own;	  /* out_fd is ours to close */
	bool out_is_sock; /* out_fd is a socket: send(MSG_DONTWAIT) */
	int in_stop_fd;	  /* eventfd: the input thread must stop now */
	int out_abort_fd; /* eventfd: the output thread must stop now, even with bytes left */
	pthread_t in_thread, out_thread;
	bool in_running, out_running;
	bool started, stopped;
	bool stopping;	  /* the output thread exits once the ring is empty */
	bool out_closed;  /* EPIPE, a write error or stopped: further bytes are dropped */
	bool out_waiting; /* the output thread sleeps on out_cond */
	bool in_waiting;  /* the input thread sleeps on in_cond (input ring full) */
	pthread_cond_t out_cond;
	pthread_cond_t in_cond;
	struct serial_ring out; /* guest -> host, SERIAL_OUTBUF_SIZE */
	struct serial_ring in;	/* host -> guest, SERIAL_INBUF_SIZE, feeds the RX FIFO */
	uint64_t dropped;	/* written with __atomic builtins under the lock */
	uint8_t out_buf[SERIAL_OUTBUF_SIZE];
	uint8_t in_buf[SERIAL_INBUF_SIZE];
};

/* The UART: 16550A registers (names as Linux include/uapi/linux/serial_reg.h). */
struct serial8250 {
	struct devctx ctx;
	pthread_mutex_t lock;
	uint8_t ier, lcr, mcr, lsr, msr, scr, dll, dlm, fcr;
	bool thri_pending; /* THRE interrupt condition (cleared by an IIR read reporting it) */
	bool first_byte_seen;
	int irq_level; /* last level passed to dev_irq_line */
	uint8_t rx_fifo[SERIAL_FIFO_SIZE];
	unsigned rx_head, rx_count;
	struct serial_io io;
};

/*
 * serial_io.c, for the model. All three are called with s->lock held and
 * never block.
 */
/* Sets up the host side (fds -1, rings, condition variables). Returns 0 or -errno. */
int serial_io_init(struct serial8250 *s, const struct serial_opts *opts);
/* Releases what serial_io_init set up; the threads must be stopped. */
void serial_io_fini(struct serial8250 *s);
/* Queues one guest byte for the host; drops and counts it when the ring is full or output is closed. */
void serial_io_put(struct serial8250 *s, uint8_t byte);
/* The model took bytes from the input ring: wakes the input thread if it waits for space. */
void serial_io_in_consumed(struct serial8250 *s);

/*
 * serial8250.c, for the input thread: called with s->lock held after bytes
 * were added to s->io.in; moves them into the RX FIFO and updates the IRQ.
 */
void serial8250_rx_ready(struct serial8250 *s);

#endif
