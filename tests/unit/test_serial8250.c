/* test_serial8250.c - the legacy devices through the bus: UART registers, host I/O, i8042, debug-exit, bootmark. */
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "../../src/devices/serial8250_internal.h"
#include "brisk/abi.h"
#include "brisk/bus.h"
#include "brisk/device.h"
#include "brisk/devices.h"
#include "brisk/exitcode.h"
#include "brisk/timeline.h"

/* ---- a fake VM behind the devices' context (device.h) ------------------------------ */

struct vm {
	struct bus bus;
};

#define MAX_IRQ_CALLS 64

static struct vm test_vm;
static pthread_mutex_t stub_lock = PTHREAD_MUTEX_INITIALIZER;
static int irq_levels[MAX_IRQ_CALLS];
static unsigned irq_calls, irq_bad_line;
static unsigned exit_calls;
static int exit_code = -1;
static char exit_reason[128];

static void fake_irq_line(void *vm, unsigned irq, int level)
{
	(void)vm;
	pthread_mutex_lock(&stub_lock);
	if (irq != BRISK_COM1_IRQ)
		irq_bad_line++;
	if (irq_calls < MAX_IRQ_CALLS)
		irq_levels[irq_calls] = level;
	irq_calls++;
	pthread_mutex_unlock(&stub_lock);
}

static void fake_request_exit(void *vm, int code, const char *reason)
{
	(void)vm;
	pthread_mutex_lock(&stub_lock);
	exit_calls++;
	exit_code = code;
	snprintf(exit_reason, sizeof(exit_reason), "%s", reason);
	pthread_mutex_unlock(&stub_lock);
}

static const struct devctx_ops fake_ops = {.irq_line = fake_irq_line, .request_exit = fake_request_exit};
static const struct devctx test_ctx = {.vm = &test_vm, .ops = &fake_ops};

static unsigned get_irq_calls(void)
{
	unsigned n;

	pthread_mutex_lock(&stub_lock);
	n = irq_calls;
	pthread_mutex_unlock(&stub_lock);
	return n;
}

static unsigned get_exit_calls(void)
{
	unsigned n;

	pthread_mutex_lock(&stub_lock);
	n = exit_calls;
	pthread_mutex_unlock(&stub_lock);
	return n;
}

/* ---- helpers ------------------------------------------------------------------ */

#define COM1 BRISK_COM1_PORT

static void out8(uint16_t port, uint8_t v)
{
	bus_write(&test_vm.bus, BUS_PIO, port, &v, 1);
}

static uint8_t in8(uint16_t port)
{
	uint8_t v = 0xee;

	bus_read(&test_vm.bus, BUS_PIO, port, &v, 1);
	return v;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ms * 1000000L};

	nanosleep(&ts, NULL);
}

/* Waits (bounded, 2 s) until LSR.DR is set; returns whether it was. */
static int wait_dr(void)
{
	uint64_t end = now_ms() + 2000;

	while (!(in8(COM1 + 5) & 0x01)) {
		if (now_ms() > end)
			return 0;
		sleep_ms(1);
	}
	return 1;
}

static void reset_stubs(void)
{
	pthread_mutex_lock(&stub_lock);
	irq_calls = 0;
	irq_bad_line = 0;
	exit_calls = 0;
	exit_code = -1;
	exit_reason[0] = 0;
	pthread_mutex_unlock(&stub_lock);
}

static struct serial8250 *uart; /* owned by test_vm.bus */

static int setup_uart_with(int out_fd, int in_fd)
{
	struct serial_opts o = {.out_fd = out_fd, .in_fd = in_fd, .raw_tty = 0};

	bus_init(&test_vm.bus);
	reset_stubs();
	return serial8250_create(&test_ctx, &test_vm.bus, &o, &uart);
}

static int setup_uart(void **state)
{
	(void)state;
	return setup_uart_with(-1, -1);
}

static int setup_bus(void **state)
{
	(void)state;
	bus_init(&test_vm.bus);
	reset_stubs();
	return 0;
}

static int teardown_bus(void **state)
{
	(void)state;
	bus_destroy(&test_vm.bus);
	uart = NULL;
	return 0;
}

/* ---- register model ------------------------------------------------------------ */

static void test_reset_values(void **state)
{
	(void)state;
	assert_int_equal(in8(COM1 + 1), 0x00); /* IER */
	assert_int_equal(in8(COM1 + 2), 0x01); /* IIR: none pending, no FIFO */
	assert_int_equal(in8(COM1 + 3), 0x00); /* LCR */
	assert_int_equal(in8(COM1 + 4), 0x00); /* MCR */
	assert_int_equal(in8(COM1 + 5), 0x60); /* LSR: THRE | TEMT */
	assert_int_equal(in8(COM1 + 6), 0xb0); /* MSR: DCD | DSR | CTS */
	assert_int_equal(get_irq_calls(), 0);
}

static void test_scratch(void **state)
{
	(void)state;
	out8(COM1 + 7, 0x5a);
	assert_int_equal(in8(COM1 + 7), 0x5a);
	out8(COM1 + 7, 0xa5);
	assert_int_equal(in8(COM1 + 7), 0xa5);
}

static void test_dlab(void **state)
{
	(void)state;
	out8(COM1 + 4, 0x10); /* loopback: a THR write would show up as DR */
	out8(COM1 + 6, 0);
	(void)in8(COM1 + 6);
	out8(COM1 + 1, 0x05);
	out8(COM1 + 3, 0x83); /* DLAB | 8N1 */
	out8(COM1 + 0, 0x0c);
	out8(COM1 + 1, 0x34);
	assert_int_equal(in8(COM1 + 0), 0x0c);
	assert_int_equal(in8(COM1 + 1), 0x34);
	assert_int_equal(in8(COM1 + 3), 0x83);
	out8(COM1 + 3, 0x03);
	assert_int_equal(in8(COM1 + 1), 0x05);	   /* IER untouched */
	assert_int_equal(in8(COM1 + 5) & 0x01, 0); /* no byte went through THR */
	out8(COM1 + 3, 0x80);
	assert_int_equal(in8(COM1 + 0), 0x0c); /* latch kept */
	assert_int_equal(in8(COM1 + 1), 0x34);
}

static void test_ier_mask(void **state)
{
	(void)state;
	out8(COM1 + 1, 0xff);
	assert_int_equal(in8(COM1 + 1), 0x0f); /* Linux's autoconfig expects bits 7:4 to read 0 */
	out8(COM1 + 4, 0xff);
	assert_int_equal(in8(COM1 + 4), 0x1f);
}

static void test_thre_interrupt(void **state)
{
	(void)state;
	assert_int_equal(in8(COM1 + 2), 0x01);
	out8(COM1 + 1, 0x02); /* ETBEI newly enabled, THR empty */
	assert_int_equal(in8(COM1 + 2), 0x02);
	assert_int_equal(in8(COM1 + 2), 0x01); /* the IIR read cleared it */
	out8(COM1 + 1, 0x02);		       /* no rising edge: nothing new */
	assert_int_equal(in8(COM1 + 2), 0x01);
	out8(COM1 + 0, 'x'); /* a THR write completes at once */
	assert_int_equal(in8(COM1 + 2), 0x02);
	assert_int_equal(in8(COM1 + 2), 0x01);
	/* Linux's serial8250_startup() THRE test: IER=THRI, IIR, IER=0, IER=THRI, IIR */
	out8(COM1 + 1, 0x00);
	out8(COM1 + 1, 0x02);
	assert_int_equal(in8(COM1 + 2), 0x02);
	out8(COM1 + 1, 0x00);
	out8(COM1 + 1, 0x02);
	assert_int_equal(in8(COM1 + 2), 0x02);
	/* disabling ETBEI drops a pending condition */
	out8(COM1 + 0, 'y');
	out8(COM1 + 1, 0x00);
	assert_int_equal(in8(COM1 + 2), 0x01);
}

static void test_fifo_bits(void **state)
{
	(void)state;
	out8(COM1 + 2, 0x01);
	assert_int_equal(in8(COM1 + 2), 0xc1);
	out8(COM1 + 2, 0xc7);
	assert_int_equal(in8(COM1 + 2), 0xc1);
	out8(COM1 + 2, 0x00);
	assert_int_equal(in8(COM1 + 2), 0x01);
	out8(COM1 + 2, 0xc0); /* FCR0 clear: the trigger bits are not programmed */
	assert_int_equal(in8(COM1 + 2), 0x01);
}

static void test_loopback(void **state)
{
	(void)state;
	assert_int_equal(in8(COM1 + 6), 0xb0);
	out8(COM1 + 4, 0x10);		       /* LOOP, every output off */
	assert_int_equal(in8(COM1 + 6), 0x0b); /* lines fell: DDCD | DDSR | DCTS */
	assert_int_equal(in8(COM1 + 6), 0x00); /* deltas clear on read */
	out8(COM1 + 4, 0x1a);		       /* Linux autoconfig: LOOP | OUT2 | RTS */
	assert_int_equal(in8(COM1 + 6), 0x99); /* DCD | CTS + DDCD | DCTS */
	out8(COM1 + 4, 0x15);		       /* LOOP | OUT1 | DTR */
	assert_int_equal(in8(COM1 + 6), 0x6b); /* RI | DSR, deltas of DCD, DSR, CTS; RI rose: no TERI */
	out8(COM1 + 4, 0x11);
	assert_int_equal(in8(COM1 + 6), 0x24); /* RI fell: TERI */

	out8(COM1 + 0, 'A');
	assert_int_equal(in8(COM1 + 5), 0x61); /* DR | THRE | TEMT */
	assert_int_equal(in8(COM1 + 0), 'A');
	assert_int_equal(in8(COM1 + 5), 0x60);
	assert_int_equal(in8(COM1 + 0), 0x00); /* empty RBR reads 0 */
}

static void test_overrun_no_fifo(void **state)
{
	(void)state;
	out8(COM1 + 4, 0x10);
	out8(COM1 + 0, 'a');
	out8(COM1 + 0, 'b');		       /* one-byte receiver: lost */
	assert_int_equal(in8(COM1 + 5), 0x63); /* DR | OE | THRE | TEMT */
	assert_int_equal(in8(COM1 + 5), 0x61); /* OE cleared by the read */
	assert_int_equal(in8(COM1 + 0), 'a');
	assert_int_equal(in8(COM1 + 5), 0x60);
}

static void test_overrun_fifo(void **state)
{
	(void)state;
	out8(COM1 + 2, 0x07); /* FIFO on, cleared, trigger 1 */
	out8(COM1 + 4, 0x10);
	for (int i = 0; i < 17; i++)
		out8(COM1 + 0, (uint8_t)('a' + i));
	assert_int_equal(in8(COM1 + 5), 0x63);
	for (int i = 0; i < 16; i++)
		assert_int_equal(in8(COM1 + 0), 'a' + i);
	assert_int_equal(in8(COM1 + 5), 0x60);
	/* FCR clear-receiver empties the FIFO */
	out8(COM1 + 0, 'z');
	out8(COM1 + 2, 0x03);
	assert_int_equal(in8(COM1 + 5), 0x60);
}

static void test_iir_priority(void **state)
{
	(void)state;
	out8(COM1 + 4, 0x10); /* loopback: MSR deltas now pending */
	out8(COM1 + 1, 0x0f); /* every source; ETBEI rising edge: THRE pending */
	out8(COM1 + 0, 'a');
	out8(COM1 + 0, 'b');		       /* overrun */
	assert_int_equal(in8(COM1 + 2), 0x06); /* line status first */
	assert_int_equal(in8(COM1 + 5), 0x63);
	assert_int_equal(in8(COM1 + 2), 0x04); /* then received data */
	assert_int_equal(in8(COM1 + 0), 'a');
	assert_int_equal(in8(COM1 + 2), 0x02); /* then THRE (cleared by this read) */
	assert_int_equal(in8(COM1 + 2), 0x00); /* then modem status */
	(void)in8(COM1 + 6);
	assert_int_equal(in8(COM1 + 2), 0x01);
}

static void test_rx_timeout_id(void **state)
{
	(void)state;
	out8(COM1 + 2, 0xc1); /* FIFO on, trigger 14 */
	out8(COM1 + 4, 0x10);
	out8(COM1 + 1, 0x01);
	out8(COM1 + 0, '1');
	assert_int_equal(in8(COM1 + 2), 0xcc); /* below the trigger: character timeout */
	for (int i = 0; i < 13; i++)
		out8(COM1 + 0, '2');
	assert_int_equal(in8(COM1 + 2), 0xc4); /* 14 bytes: received data available */
}

static void test_irq_line(void **state)
{
	(void)state;
	out8(COM1 + 1, 0x02); /* THRE pending, but OUT2 low: the PIC sees nothing */
	assert_int_equal(get_irq_calls(), 0);
	out8(COM1 + 4, 0x08); /* OUT2 */
	assert_int_equal(get_irq_calls(), 1);
	assert_int_equal(irq_levels[0], 1);
	out8(COM1 + 0, 'q'); /* still pending: no second ioctl */
	out8(COM1 + 7, 1);
	(void)in8(COM1 + 5);
	assert_int_equal(get_irq_calls(), 1);
	assert_int_equal(in8(COM1 + 2), 0x02);
	assert_int_equal(get_irq_calls(), 2);
	assert_int_equal(irq_levels[1], 0);
	out8(COM1 + 0, 'r');
	assert_int_equal(get_irq_calls(), 3);
	assert_int_equal(irq_levels[2], 1);
	out8(COM1 + 4, 0x00); /* OUT2 low gates it off */
	assert_int_equal(get_irq_calls(), 4);
	assert_int_equal(irq_levels[3], 0);
	out8(COM1 + 1, 0x00);
	out8(COM1 + 4, 0x08);
	assert_int_equal(get_irq_calls(), 4);
	assert_int_equal(irq_bad_line, 0);
}

static void test_widths_and_offsets(void **state)
{
	static const unsigned widths[] = {1, 2, 4, 8};
	const struct bus_range *r;
	uint8_t buf[8];

	(void)state;
	out8(COM1 + 7, 0x77);
	memset(buf, 0xee, sizeof(buf));
	assert_true(bus_read(&test_vm.bus, BUS_PIO, COM1 + 4, buf, 4));
	assert_int_equal(buf[0], 0x00);
	assert_int_equal(buf[1] | buf[2] | buf[3], 0); /* the upper bytes are 0 */
	memset(buf, 0xee, sizeof(buf));
	assert_true(bus_read(&test_vm.bus, BUS_PIO, COM1, buf, 8));
	assert_int_equal(buf[1] | buf[2] | buf[3] | buf[4] | buf[5] | buf[6] | buf[7], 0);
	/* a 2-byte write touches the register at the offset only (byte 0) */
	buf[0] = 0x11;
	buf[1] = 0x22;
	bus_write(&test_vm.bus, BUS_PIO, COM1 + 6, buf, 2);
	assert_int_equal(in8(COM1 + 7), 0x77);
	/* offsets past the 8 ports, called directly: ignored */
	r = bus_find(&test_vm.bus, BUS_PIO, COM1, 1);
	assert_non_null(r);
	memset(buf, 0xee, sizeof(buf));
	{
		struct bus_access past = {.space = BUS_PIO, .addr = COM1 + 100, .offset = 100, .base = COM1, .len = 8};
		struct bus_access far = {.space = BUS_PIO, .addr = 0, .offset = UINT64_MAX, .base = COM1, .len = 8};

		r->device->ops->read(r->device->dev, &past, buf);
		for (int i = 0; i < 8; i++)
			assert_int_equal(buf[i], 0);
		r->device->ops->write(r->device->dev, &far, buf);
	}
	/* hostile register traffic */
	srand(1234);
	for (int i = 0; i < 200000; i++) {
		unsigned w = widths[rand() % 4];
		uint64_t v = ((uint64_t)rand() << 32) | (unsigned)rand();
		uint16_t port = (uint16_t)(COM1 + rand() % 8);

		if (rand() & 1) {
			bus_write(&test_vm.bus, BUS_PIO, port, &v, w);
		} else {
			memset(buf, 0xee, sizeof(buf));
			if (bus_read(&test_vm.bus, BUS_PIO, port, buf, w))
				for (unsigned j = 1; j < w; j++)
					assert_int_equal(buf[j], 0);
		}
	}
	assert_int_equal(irq_bad_line, 0);
}

/* ---- host output ----------------------------------------------------------------- */

static ssize_t read_timeout(int fd, void *buf, size_t n, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	if (poll(&p, 1, ms) <= 0)
		return -1;
	return read(fd, buf, n);
}

static void test_output_pipe(void **state)
{
	const char *msg = "hello\r\n";
	char got[16] = {0};
	size_t have = 0;
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(setup_uart_with(p[1], -1), 0);
	assert_true(timeline_get(TL_FIRST_SERIAL) < 0); /* this test runs first */
	assert_int_equal(serial8250_start(uart), 0);
	assert_int_equal(serial8250_start(uart), -EBUSY);
	for (const char *c = msg; *c; c++)
		out8(COM1, (uint8_t)*c);
	assert_true(timeline_get(TL_FIRST_SERIAL) >= 0);
	while (have < strlen(msg)) {
		ssize_t r = read_timeout(p[0], got + have, sizeof(got) - 1 - have, 2000);

		assert_true(r > 0);
		have += (size_t)r;
	}
	assert_string_equal(got, msg);
	serial8250_stop(uart, 1000);
	serial8250_stop(uart, 1000); /* idempotent */
	assert_int_equal(serial8250_dropped(uart), 0);
	teardown_bus(NULL);
	close(p[0]);
	close(p[1]);
}

static void test_output_stalled(void **state)
{
	int p[2], pipe_sz;
	size_t n, got = 0;
	uint64_t t0, dropped;
	char buf[4096];
	ssize_t r;

	(void)state;
	assert_int_equal(pipe(p), 0);
	pipe_sz = fcntl(p[1], F_GETPIPE_SZ);
	assert_true(pipe_sz > 0);
	n = SERIAL_OUTBUF_SIZE + (size_t)pipe_sz + 10000;
	assert_int_equal(setup_uart_with(p[1], -1), 0);
	assert_int_equal(serial8250_start(uart), 0);
	t0 = now_ms();
	for (size_t i = 0; i < n; i++)
		out8(COM1, (uint8_t)i);
	assert_true(now_ms() - t0 < 2000); /* the vCPU side never blocked */
	assert_true(serial8250_dropped(uart) >= 10000);
	t0 = now_ms();
	serial8250_stop(uart, 50); /* nobody reads: gives up after 50 ms */
	assert_true(now_ms() - t0 < 1000);
	dropped = serial8250_dropped(uart);
	out8(COM1, 'z'); /* stopped: counted as dropped */
	assert_int_equal(serial8250_dropped(uart), dropped + 1);
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	/* Nothing is dropped before the ring holds SERIAL_OUTBUF_SIZE bytes: that prefix arrives intact. */
	while ((r = read(p[0], buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < r && got + (size_t)i < SERIAL_OUTBUF_SIZE; i++)
			assert_int_equal((uint8_t)buf[i], (uint8_t)(got + (size_t)i));
		got += (size_t)r;
	}
	assert_int_equal(got + dropped, n); /* every byte written or counted */
	teardown_bus(NULL);
	close(p[0]);
	close(p[1]);
}

static void test_output_epipe(void **state)
{
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	close(p[0]);
	assert_int_equal(setup_uart_with(p[1], -1), 0);
	assert_int_equal(serial8250_start(uart), 0);
	out8(COM1, 'a');
	for (uint64_t end = now_ms() + 2000; serial8250_dropped(uart) == 0 && now_ms() < end;)
		sleep_ms(1);
	assert_int_equal(serial8250_dropped(uart), 1);
	out8(COM1, 'b');
	assert_int_equal(serial8250_dropped(uart), 2);
	serial8250_stop(uart, 1000);
	teardown_bus(NULL);
	close(p[1]);
}

/* ---- host input ------------------------------------------------------------------ */

static void test_input(void **state)
{
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(setup_uart_with(-1, p[0]), 0);
	out8(COM1 + 1, 0x01); /* ERBFI */
	out8(COM1 + 4, 0x0b); /* OUT2 | RTS | DTR: the guest takes input */
	assert_int_equal(serial8250_start(uart), 0);
	assert_int_equal(write(p[1], "ab", 2), 2);
	assert_true(wait_dr());
	assert_int_equal(get_irq_calls(), 1); /* raised by the input thread */
	assert_int_equal(irq_levels[0], 1);
	assert_int_equal(in8(COM1 + 2), 0x04);
	assert_int_equal(in8(COM1 + 0), 'a');
	assert_int_equal(in8(COM1 + 0), 'b'); /* refilled from the input ring on the read */
	assert_int_equal(in8(COM1 + 5), 0x60);
	assert_int_equal(get_irq_calls(), 2);
	assert_int_equal(irq_levels[1], 0);
	close(p[1]); /* EOF: input stops, stop still works */
	serial8250_stop(uart, 100);
	assert_int_equal(get_exit_calls(), 0);
	teardown_bus(NULL);
	close(p[0]);
}

static void test_input_escape(void **state)
{
	static const uint8_t seq[] = {0x01, 0x01, 'z', 0x01, 'y', 0x01, 'x', 'w'};
	static const uint8_t want[] = {0x01, 'z', 0x01, 'y', 'w'};
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(setup_uart_with(-1, p[0]), 0);
	out8(COM1 + 2, 0x01); /* FIFO */
	out8(COM1 + 4, 0x03); /* RTS | DTR */
	assert_int_equal(serial8250_start(uart), 0);
	assert_int_equal(write(p[1], seq, sizeof(seq)), (ssize_t)sizeof(seq));
	for (size_t i = 0; i < sizeof(want); i++) {
		assert_true(wait_dr());
		assert_int_equal(in8(COM1 + 0), want[i]);
	}
	assert_int_equal(in8(COM1 + 5) & 0x01, 0);
	assert_int_equal(get_exit_calls(), 1);
	assert_int_equal(exit_code, EXIT_STOPPED);
	assert_string_equal(exit_reason, "Ctrl-A x");
	serial8250_stop(uart, 100);
	teardown_bus(NULL);
	close(p[0]);
	close(p[1]);
}

/*
 * Host input typed before the guest takes it (DTR and RTS low) is kept whole through a driver's set-up, as
 * Linux's 8250 driver does it before the tty is opened: FIFO enable and reset, loopback tests, RBR and LSR
 * reads "for luck"; DR stays clear meanwhile. Once DTR and RTS are raised every byte arrives, in order.
 */
static void test_input_waits_for_dtr_rts(void **state)
{
	static const char text[] = "echo typed-before-the-shell-started; uname -a\n";
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(setup_uart_with(-1, p[0]), 0);
	assert_int_equal(serial8250_start(uart), 0);
	assert_int_equal(write(p[1], text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
	for (uint64_t end = now_ms() + 2000; console_io_pending(uart->io) < sizeof(text) - 1 && now_ms() < end;)
		sleep_ms(1);
	assert_int_equal(console_io_pending(uart->io), sizeof(text) - 1);
	out8(COM1 + 4, 0x01); /* DTR alone (Linux's console set-up): not yet */
	assert_int_equal(in8(COM1 + 5) & 0x01, 0);
	out8(COM1 + 4, 0x1a); /* autoconfig's loopback test */
	out8(COM1 + 0, 'L');
	assert_int_equal(in8(COM1 + 0), 'L');
	out8(COM1 + 4, 0x01);
	out8(COM1 + 2, 0x07); /* FIFO on, both reset */
	out8(COM1 + 2, 0x00); /* off again: a reset too */
	for (int i = 0; i < 4; i++) {
		(void)in8(COM1 + 5);
		(void)in8(COM1 + 0); /* "clear the interrupt registers ... for luck" */
		(void)in8(COM1 + 2);
		(void)in8(COM1 + 6);
	}
	out8(COM1 + 4, 0x09); /* OUT2 | DTR: startup's modem lines, still no RTS */
	out8(COM1 + 1, 0x05); /* RLSI | RDI */
	out8(COM1 + 2, 0x01); /* set_termios: FIFO on (a reset) */
	assert_int_equal(in8(COM1 + 5) & 0x01, 0);
	assert_int_equal(console_io_pending(uart->io), sizeof(text) - 1);
	out8(COM1 + 4, 0x0b); /* the port is open: DTR | RTS raised */
	for (size_t i = 0; i < sizeof(text) - 1; i++) {
		assert_true(wait_dr());
		assert_int_equal(in8(COM1 + 0), (uint8_t)text[i]);
	}
	assert_int_equal(in8(COM1 + 5) & 0x01, 0);
	serial8250_stop(uart, 100);
	teardown_bus(NULL);
	close(p[0]);
	close(p[1]);
}

static size_t in_ring_count(void)
{
	size_t n;

	n = console_io_pending(uart->io);
	return n;
}

static void test_input_backpressure(void **state)
{
	static uint8_t data[3 * SERIAL_INBUF_SIZE];
	int p[2], pending = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)('a' + i % 26);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(setup_uart_with(-1, p[0]), 0);
	out8(COM1 + 4, 0x03); /* RTS | DTR */
	assert_int_equal(serial8250_start(uart), 0);
	assert_int_equal(write(p[1], data, sizeof(data)), (ssize_t)sizeof(data));
	for (uint64_t end = now_ms() + 2000; in_ring_count() < SERIAL_INBUF_SIZE && now_ms() < end;)
		sleep_ms(1);
	sleep_ms(20);
	assert_int_equal(in_ring_count(), SERIAL_INBUF_SIZE);
	/* the ring (4096) and the one-byte receiver hold the rest stays in the pipe */
	assert_int_equal(ioctl(p[0], FIONREAD, &pending), 0);
	assert_int_equal(pending, (int)sizeof(data) - SERIAL_INBUF_SIZE - 1);
	for (size_t i = 0; i < sizeof(data); i++) {
		assert_true(wait_dr());
		assert_int_equal(in8(COM1 + 0), data[i]);
	}
	assert_int_equal(in8(COM1 + 5) & 0x01, 0);
	serial8250_stop(uart, 100);
	teardown_bus(NULL);
	close(p[0]);
	close(p[1]);
}

/* ---- i8042, debug-exit, bootmark ------------------------------------------------------------ */

static void test_i8042(void **state)
{
	uint32_t v32 = 0xeeeeeeee;

	(void)state;
	assert_int_equal(i8042_create(&test_ctx, &test_vm.bus), 0);
	assert_int_equal(in8(0x64), 0x14); /* SYS | KEYLOCK, output buffer empty */
	assert_int_equal(in8(0x60), 0x00);
	out8(0x64, 0xaa);
	assert_int_equal(in8(0x64), 0x1d); /* OBF | SYS | CMD | KEYLOCK */
	assert_int_equal(in8(0x60), 0x55);
	assert_int_equal(in8(0x64) & 0x01, 0);
	out8(0x64, 0x20);
	assert_int_equal(in8(0x60), 0x45);
	out8(0x64, 0x60);
	out8(0x60, 0x30);
	assert_int_equal(in8(0x64), 0x14);
	out8(0x64, 0x20);
	bus_read(&test_vm.bus, BUS_PIO, 0x60, &v32, 1);
	assert_int_equal(v32 & 0xff, 0x30);
	out8(0x64, 0xad); /* accepted: CTR bit 4 */
	out8(0x64, 0x20);
	assert_int_equal(in8(0x60), 0x30);
	out8(0x60, 0xff); /* keyboard reset, no keyboard: ignored */
	assert_int_equal(in8(0x64) & 0x01, 0);
	out8(0x64, 0xd1); /* write output port: no reset modelled */
	out8(0x60, 0x00);
	assert_int_equal(get_exit_calls(), 0);
	out8(0x64, BRISK_I8042_CMD_RESET);
	assert_int_equal(get_exit_calls(), 1);
	assert_int_equal(exit_code, EXIT_GUEST_OK);
	assert_string_equal(exit_reason, "guest requested reset (i8042)");
	out8(0x64, 0xff); /* odd: pulses no line */
	assert_int_equal(get_exit_calls(), 1);
	/* 0x61..0x63 are not ours */
	assert_null(bus_find(&test_vm.bus, BUS_PIO, 0x61, 1));
}

static void test_debugexit(void **state)
{
	static const struct {
		uint32_t v;
		unsigned len;
		int want;
	} cases[] = {
	    {0x00, 1, 1},      {0x01, 1, 3},	  {0x10, 1, 33},	{0x7f, 1, 255},	 {0x80, 1, 1},
	    {0x1234, 2, 0x69}, {0x1234, 1, 0x69}, {0xffffffff, 4, 255}, {0x3e, 4, 0x7d}, {0x12345600, 4, 1},
	};
	uint8_t b = 0x02;

	(void)state;
	assert_int_equal(debugexit_create(&test_ctx, &test_vm.bus), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t v = cases[i].v, r = 0xeeeeeeee;

		bus_write(&test_vm.bus, BUS_PIO, BRISK_DEBUG_EXIT_PORT, &v, cases[i].len);
		assert_int_equal(get_exit_calls(), i + 1);
		assert_int_equal(exit_code, cases[i].want);
		bus_read(&test_vm.bus, BUS_PIO, BRISK_DEBUG_EXIT_PORT, &r, 4);
		assert_int_equal(r, 0);
	}
	/* QEMU-compatible: any offset of the 4-byte range */
	bus_write(&test_vm.bus, BUS_PIO, BRISK_DEBUG_EXIT_PORT + 3, &b, 1);
	assert_int_equal(exit_code, 5);
	assert_true(strstr(exit_reason, "V=0x2") != NULL);
}

static void test_bootmark(void **state)
{
	unsigned base = timeline_nr_markers();
	uint32_t v = 0xdeadbeef, r = 0xeeeeeeee, got;
	uint8_t b = 0xab;
	uint64_t q = 0x1122334455667788ULL;
	int64_t ns;

	(void)state;
	assert_int_equal(bootmark_create(&test_vm.bus, NULL), 0);
	assert_true(bus_write(&test_vm.bus, BUS_PIO, BRISK_BOOTMARK_PORT, &v, 4));
	v = 0x12345678;
	assert_true(bus_write(&test_vm.bus, BUS_MMIO, BRISK_BOOTMARK_MMIO, &v, 4));
	assert_true(bus_write(&test_vm.bus, BUS_PIO, BRISK_BOOTMARK_PORT, &b, 1));
	assert_true(bus_write(&test_vm.bus, BUS_MMIO, BRISK_BOOTMARK_MMIO, &q, 8));
	assert_true(bus_write(&test_vm.bus, BUS_MMIO, BRISK_BOOTMARK_MMIO + 4, &v, 4)); /* ignored */
	assert_true(bus_read(&test_vm.bus, BUS_MMIO, BRISK_BOOTMARK_MMIO, &r, 4));
	assert_int_equal(r, 0);
	assert_int_equal(timeline_nr_markers(), base + 4);
	assert_int_equal(timeline_marker(base, &got, &ns), 0);
	assert_int_equal(got, 0xdeadbeef);
	assert_true(ns >= 0);
	assert_int_equal(timeline_marker(base + 1, &got, &ns), 0);
	assert_int_equal(got, 0x12345678);
	assert_int_equal(timeline_marker(base + 2, &got, &ns), 0);
	assert_int_equal(got, 0xab);
	assert_int_equal(timeline_marker(base + 3, &got, &ns), 0);
	assert_int_equal(got, 0x55667788);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    /* first: it checks that TL_FIRST_SERIAL is not yet recorded */
	    cmocka_unit_test(test_output_pipe),
	    cmocka_unit_test_setup_teardown(test_reset_values, setup_uart, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_scratch, setup_uart, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_dlab, setup_uart, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_ier_mask, setup_uart, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_thre_interrupt, setup_uart, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_fifo_bits, setup_uart, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_loopback, setup_uart, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_overrun_no_fifo, setup_uart, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_overrun_fifo, setup_uart, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_iir_priority, setup_uart, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_rx_timeout_id, setup_uart, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_irq_line, setup_uart, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_widths_and_offsets, setup_uart, teardown_bus),
	    cmocka_unit_test(test_output_stalled),
	    cmocka_unit_test(test_output_epipe),
	    cmocka_unit_test(test_input),
	    cmocka_unit_test(test_input_escape),
	    cmocka_unit_test(test_input_backpressure),
	    cmocka_unit_test(test_input_waits_for_dtr_rts),
	    cmocka_unit_test_setup_teardown(test_i8042, setup_bus, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_debugexit, setup_bus, teardown_bus),
	    cmocka_unit_test_setup_teardown(test_bootmark, setup_bus, teardown_bus),
	};

	timeline_init();
	signal(SIGPIPE, SIG_IGN); /* as brisk's main() */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
