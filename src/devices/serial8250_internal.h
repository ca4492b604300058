/* serial8250_internal.h - the UART's state, for serial8250.c and the unit tests that look inside it. */
#ifndef BRISK_SERIAL8250_INTERNAL_H
#define BRISK_SERIAL8250_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "brisk/console_io.h"
#include "brisk/device.h"
#include "brisk/devices.h"

#define SERIAL_FIFO_SIZE 16 /* 16550A receive FIFO depth (datasheet: "16-byte FIFOs") */

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
	struct console_io *io; /* the host side: output and input rings, threads, raw tty (console_io.h) */
};

#endif
