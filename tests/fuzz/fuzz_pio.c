/*
 * fuzz_pio.c - libFuzzer harness: a legacy device's port register file driven by a hostile guest, one device per
 * build (run.sh: -DFUZZ_PIO_SERIAL the 8250 UART at 0x3f8, -DFUZZ_PIO_I8042 the i8042 at 0x60/0x64,
 * -DFUZZ_PIO_CMOS the CMOS RTC at 0x70/0x71), through the bus and the device's dev_ops read/write; then its
 * snapshot, restored into a fresh device: every state a guest reaches must restore and save back the same.
 *
 * Input: records, until the input ends. A record's first byte `op`:
 *   op < 0xc0   an access of 1 << (op & 3) bytes (8 never reaches a device: the bus refuses it), a write when
 *               op & 4, at port base + ((op >> 3) & 7) (the device's ports and its unmapped neighbours); a write's
 *               value bytes follow (missing ones read as zero)
 *   op >= 0xc0  op & 3: 0 machine reset (dev_ops reset), 1 host side: the UART gets 1 + next byte % 32 bytes of
 *               host input (console_io's input path, Ctrl-A escape included), the i8042 Ctrl+Alt+Del; 2 a
 *               snapshot round trip now; 3 nothing
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/devices.h"
#include "brisk/log.h"
#include "fuzz_vdev.h"

#if defined(FUZZ_PIO_SERIAL)
/* console_io.c itself, for its input path (queue_input) without the input thread; see make_device. */
#include "../../src/devices/console_io.c"
#define PIO_BASE 0x3f8
#elif defined(FUZZ_PIO_I8042)
#define PIO_BASE 0x60
#elif defined(FUZZ_PIO_CMOS)
#define PIO_BASE 0x70
#else
#error "build with -DFUZZ_PIO_SERIAL, -DFUZZ_PIO_I8042 or -DFUZZ_PIO_CMOS"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECORDS 4096

#ifdef FUZZ_PIO_SERIAL
/* The UART's console (linked with -Wl,--wrap=console_io_create): the harness queues host input into it. */
static struct console_io *uart_io;
struct console_io *__real_console_io_create(const struct console_io_opts *o);
struct console_io *__wrap_console_io_create(const struct console_io_opts *o);

struct console_io *__wrap_console_io_create(const struct console_io_opts *o)
{
	return uart_io = __real_console_io_create(o);
}
#endif

static void make_device(struct fuzz_vm *v)
{
#if defined(FUZZ_PIO_SERIAL)
	const struct serial_opts o = {.out_fd = -1, .in_fd = -1};

	if (serial8250_create(&v->ctx, &v->bus, &o, NULL))
		abort();
#elif defined(FUZZ_PIO_I8042)
	if (i8042_create(&v->ctx, &v->bus))
		abort();
#else
	(void)v;
	if (cmos_create(&v->bus))
		abort();
#endif
}

static void host_side(struct fuzz_vm *v, struct fuzz_bytes *in)
{
#if defined(FUZZ_PIO_SERIAL)
	uint8_t n, buf[32], out[32];
	bool esc = false, quit = false;
	size_t k;

	(void)v;
	fuzz_take(in, &n, 1);
	n = (uint8_t)(1 + n % 32);
	fuzz_take(in, buf, n);
	k = unescape(buf, n, out, &esc, &quit); /* as the input thread filters what it reads */
	if (k)
		queue_input(uart_io, out, k);
#elif defined(FUZZ_PIO_I8042)
	int err = i8042_ctrl_alt_del(&v->bus);

	(void)in;
	if (err && err != -EBUSY)
		abort();
#else
	(void)v, (void)in;
#endif
}

static void round_trip(struct fuzz_vm *v)
{
	struct fuzz_vm v2;
	struct evloop *keep = fuzz_loop;
#ifdef FUZZ_PIO_SERIAL
	struct console_io *io = uart_io;
#endif

	fuzz_vm_open(&v2, 4096);
	make_device(&v2);
	fuzz_snap_round_trip(&v->bus, &v2.bus);
	fuzz_vm_close(&v2);
	fuzz_loop = keep;
#ifdef FUZZ_PIO_SERIAL
	uart_io = io;
#endif
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_bytes in = {.p = data, .n = size};
	struct fuzz_vm v;

	log_set_level(LOG_ERROR);
	fuzz_vm_open(&v, 4096);
	make_device(&v);
	for (unsigned n = 0; in.n && n < MAX_RECORDS; n++) {
		uint8_t op, val[8];
		unsigned len;
		uint16_t port;

		fuzz_take(&in, &op, 1);
		if (op >= 0xc0) {
			if ((op & 3) == 0)
				bus_reset(&v.bus);
			else if ((op & 3) == 1)
				host_side(&v, &in);
			else if ((op & 3) == 2)
				round_trip(&v);
			continue;
		}
		len = 1u << (op & 3);
		port = (uint16_t)(PIO_BASE + ((op >> 3) & 7));
		if (op & 4) {
			fuzz_take(&in, val, len);
			bus_write(&v.bus, BUS_PIO, port, val, len);
		} else {
			memset(val, 0xcc, sizeof(val));
			bus_read(&v.bus, BUS_PIO, port, val, len);
		}
	}
	round_trip(&v);
	fuzz_vm_close(&v);
	return 0;
}
