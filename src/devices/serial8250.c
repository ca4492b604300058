/* serial8250.c - 8250/16550A UART register model at COM1 (its host side is a console_io.c backend). */
/*
 * References: TI/National PC16550D datasheet ("16550A"), sections 8.1-8.10
 * (register descriptions, Table II "Interrupt Control Functions", Table IV
 * reset values); register and bit names from Linux
 * include/uapi/linux/serial_reg.h; the behaviour Linux relies on from
 * drivers/tty/serial/8250/8250_port.c (autoconfig(), serial8250_startup()'s
 * THRE test, serial8250_handle_irq()).
 *
 * The host is infinitely fast: a THR write is "transmitted" at once, so
 * THRE and TEMT are always set and there is no transmit FIFO to model.
 */
#include <errno.h>
#include <linux/serial_reg.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/abi.h"
#include "brisk/bus.h"
#include "brisk/console_io.h"
#include "brisk/devices.h"
#include "brisk/exitcode.h"
#include "brisk/fc_metrics.h"
#include "brisk/log.h"
#include "brisk/snap_fields.h"
#include "brisk/snapshot.h"
#include "brisk/timeline.h"
#include "serial8250_internal.h"

#define SERIAL_FLUSH_MS 1000 /* at stop: how long a stalled reader may hold up the exit */

#define SERIAL_NR_PORTS	     8
#define UART_IIR_FIFO_16550A 0xc0 /* IIR bits 7:6 read 11 when FCR0 is set */
#define UART_IER_MASK	     0x0f /* IER bits 7:4 are always 0 on a 16550A */
#define UART_MCR_MASK	     0x1f /* MCR bits 7:5 are always 0 on a 16550A */
#define UART_FCR_STORED	     (UART_FCR_ENABLE_FIFO | UART_FCR_TRIGGER_MASK)
#define MSR_LINES_IDLE	     (UART_MSR_DCD | UART_MSR_DSR | UART_MSR_CTS) /* a present, ready peer */

static bool fifo_enabled(const struct serial8250 *s)
{
	return s->fcr & UART_FCR_ENABLE_FIFO;
}

/* Receiver FIFO trigger level (datasheet FCR bits 7:6: 1, 4, 8, 14 bytes). */
static unsigned rx_trigger(const struct serial8250 *s)
{
	static const unsigned level[4] = {1, 4, 8, 14};

	return level[UART_FCR_R_TRIG_BITS(s->fcr)];
}

/* Without FIFOs the receiver holds one byte (16450 mode). */
static unsigned rx_capacity(const struct serial8250 *s)
{
	return fifo_enabled(s) ? SERIAL_FIFO_SIZE : 1;
}

/* Pushes a received byte; when the FIFO is full the byte is lost and OE is set (datasheet LSR1). */
static void rx_push(struct serial8250 *s, uint8_t b)
{
	if (s->rx_count >= rx_capacity(s)) {
		s->lsr |= UART_LSR_OE;
		fcm_inc(fcm_uart, FCM_UART_missed_read_count); /* an input byte lost to a full FIFO */
		return;
	}
	s->rx_fifo[(s->rx_head + s->rx_count) % SERIAL_FIFO_SIZE] = b;
	s->rx_count++;
}

/* Pops the oldest received byte; 0 when the FIFO is empty (the real RBR would repeat a stale byte). */
static uint8_t rx_pop(struct serial8250 *s)
{
	uint8_t b;

	if (s->rx_count == 0)
		return 0;
	b = s->rx_fifo[s->rx_head];
	s->rx_head = (s->rx_head + 1) % SERIAL_FIFO_SIZE;
	s->rx_count--;
	return b;
}

static void rx_clear(struct serial8250 *s)
{
	s->rx_head = 0;
	s->rx_count = 0;
}

/*
 * Whether the guest takes host input now: it asserts DTR and RTS ("ready, and
 * ready to receive": RS-232 hardware flow control, the host being the other
 * end) outside loopback. Until then host input waits in the console's input
 * ring (bounded: console_io.h) and nothing of it is in the RX FIFO, where a
 * driver's set-up would lose it: Linux resets the FIFOs and reads RBR "for
 * luck" in autoconfig() and serial8250_do_startup(), and raises DTR and RTS
 * only after that, once the port is open (uart_port_startup).
 */
static bool host_input_on(const struct serial8250 *s)
{
	const uint8_t want = UART_MCR_DTR | UART_MCR_RTS;

	return (s->mcr & (want | UART_MCR_LOOP)) == want;
}

/*
 * Moves host input into the RX FIFO while the guest takes it and the FIFO has
 * room (taking it wakes the input thread when it waits for room). In
 * loopback the receiver is disconnected.
 */
static void rx_refill(struct serial8250 *s)
{
	uint8_t buf[SERIAL_FIFO_SIZE];
	size_t n;

	if (!host_input_on(s) || s->rx_count >= rx_capacity(s))
		return;
	n = console_io_read(s->io, buf, rx_capacity(s) - s->rx_count);
	for (size_t i = 0; i < n; i++)
		rx_push(s, buf[i]);
}

/*
 * The interrupt identification (datasheet Table II), highest priority
 * first: receiver line status, received data (or character timeout when
 * the FIFO holds fewer bytes than the trigger level: the host never sends
 * more, so the timeout is taken as already expired), THR empty, modem
 * status.
 */
static uint8_t iir_value(const struct serial8250 *s)
{
	uint8_t id = UART_IIR_NO_INT;

	if ((s->ier & UART_IER_RLSI) && (s->lsr & UART_LSR_BRK_ERROR_BITS))
		id = UART_IIR_RLSI;
	else if ((s->ier & UART_IER_RDI) && s->rx_count > 0)
		id = (fifo_enabled(s) && s->rx_count < rx_trigger(s)) ? UART_IIR_RX_TIMEOUT : UART_IIR_RDI;
	else if ((s->ier & UART_IER_THRI) && s->thri_pending)
		id = UART_IIR_THRI;
	else if ((s->ier & UART_IER_MSI) && (s->msr & UART_MSR_ANY_DELTA))
		id = UART_IIR_MSI;
	return fifo_enabled(s) ? (uint8_t)(id | UART_IIR_FIFO_16550A) : id;
}

/*
 * On the PC the UART's INTR reaches the PIC through a gate driven by OUT2
 * (Linux's serial8250_do_startup() sets TIOCM_OUT2 for a port with an IRQ).
 * KVM_IRQ_LINE is issued only when the level changes.
 */
static void update_irq(struct serial8250 *s)
{
	int level = !(iir_value(s) & UART_IIR_NO_INT) && (s->mcr & UART_MCR_OUT2);

	if (level == s->irq_level)
		return;
	s->irq_level = level;
	dev_irq_line(&s->ctx, BRISK_COM1_IRQ, level);
}

/* MSR bits 7:4: in loopback they mirror MCR (datasheet MCR4), otherwise a ready peer. */
static uint8_t modem_lines(uint8_t mcr)
{
	uint8_t v = 0;

	if (!(mcr & UART_MCR_LOOP))
		return MSR_LINES_IDLE;
	if (mcr & UART_MCR_RTS)
		v |= UART_MSR_CTS;
	if (mcr & UART_MCR_DTR)
		v |= UART_MSR_DSR;
	if (mcr & UART_MCR_OUT1)
		v |= UART_MSR_RI;
	if (mcr & UART_MCR_OUT2)
		v |= UART_MSR_DCD;
	return v;
}

/* Recomputes MSR's line bits and latches the delta bits (cleared by reading MSR). */
static void update_msr(struct serial8250 *s)
{
	uint8_t old = s->msr & 0xf0, now = modem_lines(s->mcr), changed = old ^ now;
	uint8_t delta = s->msr & UART_MSR_ANY_DELTA;

	if (changed & UART_MSR_CTS)
		delta |= UART_MSR_DCTS;
	if (changed & UART_MSR_DSR)
		delta |= UART_MSR_DDSR;
	if ((old & UART_MSR_RI) && !(now & UART_MSR_RI))
		delta |= UART_MSR_TERI;
	if (changed & UART_MSR_DCD)
		delta |= UART_MSR_DDCD;
	s->msr = now | delta;
}

/* A THR write: transmitted at once, so the THRE interrupt condition is raised again right away. */
static void write_thr(struct serial8250 *s, uint8_t v)
{
	if (s->mcr & UART_MCR_LOOP) {
		rx_push(s, v);
	} else {
		if (!s->first_byte_seen) {
			s->first_byte_seen = true;
			timeline_mark(TL_FIRST_SERIAL);
		}
		/* never blocks: a full ring drops and counts (Firecracker's uart.write_count / missed_write_count) */
		if (console_io_write(s->io, &v, 1) == 1)
			fcm_inc(fcm_uart, FCM_UART_write_count);
		else
			fcm_inc(fcm_uart, FCM_UART_missed_write_count);
	}
	s->thri_pending = true;
}

/*
 * Enabling ETBEI while THR is empty raises the THRE interrupt (Linux's
 * THRE test in serial8250_startup() and QEMU's serial.c rely on it);
 * disabling it drops the condition.
 */
static void write_ier(struct serial8250 *s, uint8_t v)
{
	uint8_t changed = (uint8_t)((s->ier ^ v) & UART_IER_THRI);

	s->ier = v & UART_IER_MASK;
	if (changed)
		s->thri_pending = (s->ier & UART_IER_THRI) && (s->lsr & UART_LSR_THRE);
}

/* FCR (datasheet 8.5): FCR0 gates the other bits; changing FCR0 or FCR1 clears the RX FIFO. */
static void write_fcr(struct serial8250 *s, uint8_t v)
{
	uint8_t fcr = (v & UART_FCR_ENABLE_FIFO) ? (uint8_t)(v & UART_FCR_STORED) : 0;

	if ((fcr ^ s->fcr) & UART_FCR_ENABLE_FIFO || (fcr && (v & UART_FCR_CLEAR_RCVR)))
		rx_clear(s);
	s->fcr = fcr;
	rx_refill(s);
}

static void write_mcr(struct serial8250 *s, uint8_t v)
{
	s->mcr = v & UART_MCR_MASK;
	update_msr(s);
	rx_refill(s);
}

static void reg_write(struct serial8250 *s, unsigned reg, uint8_t v)
{
	bool dlab = s->lcr & UART_LCR_DLAB;

	switch (reg) {
	case UART_TX:
		if (dlab)
			s->dll = v;
		else
			write_thr(s, v);
		break;
	case UART_IER:
		if (dlab)
			s->dlm = v;
		else
			write_ier(s, v);
		break;
	case UART_FCR:
		write_fcr(s, v);
		break;
	case UART_LCR:
		s->lcr = v;
		break;
	case UART_MCR:
		write_mcr(s, v);
		break;
	case UART_SCR:
		s->scr = v;
		break;
	default: /* LSR and MSR writes are factory-test only: ignored */
		break;
	}
}

static uint8_t read_rbr(struct serial8250 *s)
{
	uint8_t b;

	if (s->rx_count)
		fcm_inc(fcm_uart, FCM_UART_read_count); /* a byte the guest reads (Firecracker: buffer_read) */
	b = rx_pop(s);

	rx_refill(s);
	return b;
}

/* Reading IIR while it reports THRE clears that condition (datasheet Table II, "Reset Control"). */
static uint8_t read_iir(struct serial8250 *s)
{
	uint8_t v = iir_value(s);

	if ((v & UART_IIR_ID) == UART_IIR_THRI && !(v & UART_IIR_NO_INT))
		s->thri_pending = false;
	return v;
}

/* LSR: DR follows the FIFO; the error bits (only OE here) clear on read. */
static uint8_t read_lsr(struct serial8250 *s)
{
	uint8_t v = s->lsr | (s->rx_count ? UART_LSR_DR : 0);

	s->lsr &= (uint8_t)~UART_LSR_BRK_ERROR_BITS;
	return v;
}

static uint8_t read_msr(struct serial8250 *s)
{
	uint8_t v = s->msr;

	s->msr &= (uint8_t)~UART_MSR_ANY_DELTA;
	return v;
}

static uint8_t reg_read(struct serial8250 *s, unsigned reg)
{
	bool dlab = s->lcr & UART_LCR_DLAB;

	switch (reg) {
	case UART_RX:
		return dlab ? s->dll : read_rbr(s);
	case UART_IER:
		return dlab ? s->dlm : s->ier;
	case UART_IIR:
		return read_iir(s);
	case UART_LCR:
		return s->lcr;
	case UART_MCR:
		return s->mcr;
	case UART_LSR:
		return read_lsr(s);
	case UART_MSR:
		return read_msr(s);
	case UART_SCR:
		return s->scr;
	default:
		return 0;
	}
}

/*
 * Accesses wider than a byte touch the register at `offset` only (byte 0
 * of the data); the other bytes of a read are 0. The bus keeps accesses
 * inside the 8 ports; an offset beyond them is ignored anyway.
 */
static void serial_read(void *dev, const struct bus_access *a, void *data)
{
	struct serial8250 *s = dev;

	memset(data, 0, a->len);
	if (a->offset >= SERIAL_NR_PORTS)
		return;
	pthread_mutex_lock(&s->lock);
	((uint8_t *)data)[0] = reg_read(s, (unsigned)a->offset);
	update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

static void serial_write(void *dev, const struct bus_access *a, const void *data)
{
	struct serial8250 *s = dev;

	if (a->offset >= SERIAL_NR_PORTS)
		return;
	pthread_mutex_lock(&s->lock);
	reg_write(s, (unsigned)a->offset, ((const uint8_t *)data)[0]);
	update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

/* Reset values: datasheet Table IV. SCR and the divisor latch are not reset by MR. */
static void reset_locked(struct serial8250 *s)
{
	s->ier = 0;
	s->lcr = 0;
	s->mcr = 0;
	s->fcr = 0;
	s->lsr = UART_LSR_THRE | UART_LSR_TEMT;
	s->msr = MSR_LINES_IDLE;
	s->thri_pending = false;
	rx_clear(s);
	update_irq(s);
}

static void serial_reset(void *dev)
{
	struct serial8250 *s = dev;

	pthread_mutex_lock(&s->lock);
	reset_locked(s);
	pthread_mutex_unlock(&s->lock);
}

static void serial_destroy(void *dev)
{
	struct serial8250 *s = dev;

	console_io_destroy(s->io); /* stops its threads first */
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int serial_start(void *dev)
{
	return serial8250_start_output(dev);
}

static int serial_late_start(void *dev)
{
	return serial8250_start_input(dev);
}

/* Drains what the guest wrote (at most SERIAL_FLUSH_MS for a stalled reader) and says what was lost. */
static void serial_stop(void *dev)
{
	struct serial8250 *s = dev;

	serial8250_stop(s, SERIAL_FLUSH_MS);
	if (serial8250_dropped(s))
		log_warn("serial output: %llu bytes dropped (host output stalled)",
			 (unsigned long long)serial8250_dropped(s));
}

/* ---- snapshot (device.h) ----------------------------------------------------------------------- */

/*
 * The section (version SERIAL_SNAP_VERSION), one record over struct serial8250: the register file, the
 * THRE interrupt condition, the interrupt line's level and the RX FIFO (its count, then 16 bytes, oldest
 * first, zero-filled: saved from an image with rx_head 0). Host input not yet taken into the FIFO is in
 * console_io's ring and is lost, as is output not yet written to the host: the host side starts afresh.
 * The bounds are what a guest could have set: IER and MCR's writable bits, FCR's stored bits, flags 0/1.
 */
#define SERIAL_SNAP_VERSION 1u

static const struct snap_field serial_fields[] = {
    SNAP_UINT_MASK(struct serial8250, ier, 1, UART_IER_MASK),
    SNAP_UINT(struct serial8250, lcr, 1),
    SNAP_UINT_MASK(struct serial8250, mcr, 1, UART_MCR_MASK),
    SNAP_UINT(struct serial8250, lsr, 1),
    SNAP_UINT(struct serial8250, msr, 1),
    SNAP_UINT(struct serial8250, scr, 1),
    SNAP_UINT(struct serial8250, dll, 1),
    SNAP_UINT(struct serial8250, dlm, 1),
    SNAP_UINT_MASK(struct serial8250, fcr, 1, UART_FCR_STORED),
    SNAP_FLAG(struct serial8250, thri_pending),
    SNAP_UINT_MAX(struct serial8250, irq_level, 1, 1),
    SNAP_UINT_MAX(struct serial8250, rx_count, 1, SERIAL_FIFO_SIZE),
    SNAP_BYTES(struct serial8250, rx_fifo),
};
static const struct snap_record serial_record = SNAP_RECORD("serial8250", serial_fields);

/* Across fields: a FIFO that fits (one byte with the FIFOs off). */
static const char *check_saved(const void *obj)
{
	const struct serial8250 *n = obj;

	return n->rx_count > rx_capacity(n) ? "more received bytes than the FIFO holds" : NULL;
}

static const struct snap_layout serial_layout = {
    .version = SERIAL_SNAP_VERSION, .record = &serial_record, .check = check_saved};

static int serial_save(void *dev, struct snap_writer *w)
{
	struct serial8250 *s = dev;
	struct serial8250 img = {0};

	pthread_mutex_lock(&s->lock);
	snap_record_copy(&serial_record, &img, s);
	memset(img.rx_fifo, 0, sizeof(img.rx_fifo));
	for (unsigned i = 0; i < s->rx_count; i++)
		img.rx_fifo[i] = s->rx_fifo[(s->rx_head + i) % SERIAL_FIFO_SIZE];
	pthread_mutex_unlock(&s->lock);
	return snap_layout_save(w, &serial_layout, &img);
}

/* A fresh UART (before start): the saved state, checked; the line is driven to the saved level. */
static int serial_restore(void *dev, struct snap_reader *r)
{
	struct serial8250 *s = dev;
	struct serial8250 n = {0};
	char why[160];
	int err = snap_layout_load(r, &serial_layout, &n, why, sizeof(why));

	if (err) {
		log_error("serial8250: snapshot refused: %s", why);
		return err;
	}
	pthread_mutex_lock(&s->lock);
	snap_record_copy(&serial_record, s, &n);
	s->rx_head = 0;
	s->first_byte_seen = false; /* the timeline's "first serial byte": the restored guest's next output */
	update_irq(s);		    /* irq_level is what the restored irqchip's pin holds; this corrects a mismatch */
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static const struct dev_ops serial_ops = {
    .name = "serial8250",
    .read = serial_read,
    .write = serial_write,
    .start = serial_start,
    .late_start = serial_late_start,
    .stop = serial_stop,
    .reset = serial_reset,
    .destroy = serial_destroy,
    .save = serial_save,
    .restore = serial_restore,
};

/* ---- the host side (console_io.h) ----------------------------------------------- */

/* Host input was queued (input thread, no console lock held): into the RX FIFO, and the IRQ follows. */
static void input_ready(void *arg)
{
	struct serial8250 *s = arg;

	pthread_mutex_lock(&s->lock);
	rx_refill(s);
	update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

static void quit(void *arg)
{
	struct serial8250 *s = arg;

	dev_request_exit(&s->ctx, EXIT_STOPPED, "Ctrl-A x");
}

static const struct console_io_ops serial_io_ops = {.input_ready = input_ready, .quit = quit};

int serial8250_start_output(struct serial8250 *s)
{
	/* no output thread while the vCPU writes every line itself; the main thread's when needed (console_io.h) */
	return console_io_start_output_deferred(s->io, dev_main_watch, &s->ctx);
}

int serial8250_start_input(struct serial8250 *s)
{
	return console_io_start_input(s->io);
}

int serial8250_start(struct serial8250 *s)
{
	int err = serial8250_start_output(s);

	return err ? err : serial8250_start_input(s);
}

void serial8250_stop(struct serial8250 *s, int flush_ms)
{
	console_io_stop(s->io, flush_ms);
}

uint64_t serial8250_dropped(const struct serial8250 *s)
{
	return console_io_dropped(s->io);
}

void serial8250_restore_tty(void)
{
	console_io_restore_tty();
}

int serial8250_create(const struct devctx *ctx, struct bus *bus, const struct serial_opts *opts,
		      struct serial8250 **out)
{
	struct serial8250 *s = calloc(1, sizeof(*s));
	struct console_io_opts co = {
	    .name = "serial",
	    .out_fd = opts->out_fd,
	    .in_fd = opts->in_fd,
	    .raw_tty = opts->raw_tty,
	    .out_size = SERIAL_OUTBUF_SIZE,
	    .in_size = SERIAL_INBUF_SIZE,
	    .ops = &serial_io_ops,
	    .arg = s,
	};
	struct bus_device *d;
	int err;

	if (!s)
		return -ENOMEM;
	s->ctx = *ctx;
	s->dll = 1; /* 115200 baud with the PC's 1.8432 MHz clock; firmware-less boot leaves it to the guest */
	pthread_mutex_init(&s->lock, NULL);
	s->io = console_io_create(&co);
	if (!s->io) {
		err = -errno;
		goto err_free;
	}
	reset_locked(s);
	d = bus_add(bus, &serial_ops, s); /* the bus owns s from here on */
	if (!d)
		return -ENOSPC;
	err = bus_map(bus, d, BUS_PIO, BRISK_COM1_PORT, SERIAL_NR_PORTS);
	if (!err && out)
		*out = s;
	return err;
err_free:
	pthread_mutex_destroy(&s->lock);
	free(s);
	return err;
}
