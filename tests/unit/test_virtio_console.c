/* test_virtio_console.c - the virtio console behind the virtio-mmio transport, driven as a guest driver. No KVM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "brisk/bus.h"
#include "brisk/devices.h"
#include "brisk/devmgr.h"
#include "brisk/evloop.h"
#include "brisk/exitcode.h"
#include "brisk/log.h"
#include "brisk/mem.h"
#include "brisk/virtio.h"
#include "fake_vm.h"
#include "virtio_driver.h"

/* ---- the driver's side: two split queues in fake guest RAM (virtio_driver.h) ------------------------------- */

#define RX_Q 0
#define TX_Q 1
#define BUFS 0x400000 /* data buffers: 4 KiB per descriptor slot and queue */

static struct fx {
	struct vdrv drv;
	struct virtio_mmio *t;
	int in[2], out[2]; /* pipes: the host's input (we write in[1]) and output (we read out[0]) */
} fx;

/* The driver's bring-up (3.1.1): VERSION_1 only, both queues, DRIVER_OK. */
static void bring_up(void)
{
	vdrv_bring_up(&fx.drv, 0, 2);
}

/* Sends `s` as one transmit buffer and waits for its completion. */
static void transmit(const char *s)
{
	uint64_t buf = BUFS + 0x10000 + vdrv_next_head(&fx.drv, TX_Q) * 0x1000;

	memcpy(vdrv_gpa(&fx.drv, buf, strlen(s)), s, strlen(s));
	vdrv_post(&fx.drv, TX_Q, buf, (uint32_t)strlen(s), 0);
	assert_int_equal(vdrv_wait_used(&fx.drv, TX_Q, 2000, NULL),
			 0); /* 5.3.6.2: nothing written into a transmit buffer */
}

/* Posts a receive buffer of `len` bytes and returns what the device put in it (NUL-terminated into out). */
static int64_t receive(char *out, uint32_t len, int ms)
{
	uint64_t buf = BUFS + vdrv_next_head(&fx.drv, RX_Q) * 0x1000;
	int64_t n;

	memset(vdrv_gpa(&fx.drv, buf, len), 0, len);
	vdrv_post(&fx.drv, RX_Q, buf, len, VIRTQ_DESC_F_WRITE);
	n = vdrv_wait_used(&fx.drv, RX_Q, ms, NULL);
	if (n >= 0) {
		memcpy(out, vdrv_gpa(&fx.drv, buf, len), (size_t)n);
		out[n] = 0;
	}
	return n;
}

static struct virtio_stats stats(void)
{
	struct virtio_stats s;

	virtio_stats(fx.t, &s);
	return s;
}

/* Reads what reached the host's output, waiting (bounded) for `want` bytes. */
static size_t host_output(char *buf, size_t want)
{
	size_t got = 0;

	fcntl(fx.out[0], F_SETFL, O_NONBLOCK);
	for (int i = 0; i < 2000 && got < want; i++) {
		ssize_t n = read(fx.out[0], buf + got, want - got);

		if (n > 0)
			got += (size_t)n;
		else
			nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
	buf[got] = 0;
	return got;
}

/* ---- fixture --------------------------------------------------------------------------------------------------- */

static int setup_with_output(int out_fd)
{
	struct devctx ctx = {.ops = &fake_ops};
	const struct devmgr_window *win;
	struct serial_opts io;

	memset(&fx, 0, sizeof(fx));
	assert_int_equal(pipe(fx.in), 0);
	if (out_fd < 0) {
		assert_int_equal(pipe(fx.out), 0);
		out_fd = fx.out[1];
	} else {
		fx.out[0] = fx.out[1] = -1;
	}
	io = (struct serial_opts){.out_fd = out_fd, .in_fd = fx.in[0]};
	win = vdrv_open(&fx.drv, "virtio-console", &ctx);
	assert_int_equal(virtio_console_create_io(&ctx, &fx.drv.bus, win, &io), 0);
	fx.t = bus_find(&fx.drv.bus, BUS_MMIO, fx.drv.base, 4)->device->dev;
	vdrv_start(&fx.drv);
	pthread_mutex_lock(&fake_lock);
	exit_calls = 0;
	exit_code = -1;
	pthread_mutex_unlock(&fake_lock);
	return 0;
}

static int setup(void **state)
{
	(void)state;
	return setup_with_output(-1);
}

static int teardown(void **state)
{
	(void)state;
	vdrv_close(&fx.drv);
	for (int i = 0; i < 2; i++) {
		close(fx.in[i]);
		if (fx.out[i] >= 0)
			close(fx.out[i]);
	}
	return 0;
}

/* ---- tests ----------------------------------------------------------------------------------------------------- */

/* Device ID 3, no device feature offered (no SIZE, MULTIPORT, EMERG_WRITE), 12 bytes of config reading 0. */
static void test_identity(void **state)
{
	uint8_t cfg[12];

	(void)state;
	assert_int_equal(vdrv_rd(&fx.drv, 0x008), VIRTIO_ID_CONSOLE);
	vdrv_wr(&fx.drv, 0x014, 0);
	assert_int_equal(vdrv_rd(&fx.drv, 0x010), (1u << VIRTIO_F_INDIRECT_DESC) | (1u << VIRTIO_F_EVENT_IDX));
	vdrv_wr(&fx.drv, 0x030, 0);
	assert_int_equal(vdrv_rd(&fx.drv, 0x034), 256);
	vdrv_wr(&fx.drv, 0x030, 2); /* no control queues without MULTIPORT */
	assert_int_equal(vdrv_rd(&fx.drv, 0x034), 0);
	memset(cfg, 0xee, sizeof(cfg));
	for (unsigned i = 0; i < sizeof(cfg); i += 4)
		bus_read(&fx.drv.bus, BUS_MMIO, fx.drv.base + 0x100 + i, cfg + i, 4);
	for (unsigned i = 0; i < sizeof(cfg); i++)
		assert_int_equal(cfg[i], 0);
}

/* Transmit: the readable bytes reach the host's output in order; receive: host input fills the guest's buffers. */
static void test_transmit_and_receive(void **state)
{
	char buf[64];

	(void)state;
	bring_up();
	transmit("hello ");
	transmit("world\n");
	assert_int_equal(host_output(buf, 12), 12);
	assert_string_equal(buf, "hello world\n");
	assert_int_equal(write(fx.in[1], "typed\n", 6), 6);
	assert_int_equal(receive(buf, 32, 2000), 6);
	assert_string_equal(buf, "typed\n");
	/* a buffer smaller than the input: the rest goes in the next one */
	assert_int_equal(write(fx.in[1], "abcdefgh", 8), 8);
	nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
	assert_int_equal(receive(buf, 5, 2000), 5);
	assert_string_equal(buf, "abcde");
	assert_int_equal(receive(buf, 32, 2000), 3);
	assert_string_equal(buf, "fgh");
	assert_int_equal(stats().bad_chains, 0);
}

/* No receive buffer: input waits (ring, then the pipe); a buffer posted later gets it, nothing lost. */
static void test_receive_backpressure(void **state)
{
	static char data[3 * SERIAL_INBUF_SIZE], got[sizeof(data) + 1];
	size_t have = 0;
	int pending = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)('a' + i % 26);
	bring_up();
	assert_int_equal(write(fx.in[1], data, sizeof(data)), (ssize_t)sizeof(data));
	for (int i = 0;
	     i < 2000 && (ioctl(fx.in[0], FIONREAD, &pending), pending) > (int)sizeof(data) - SERIAL_INBUF_SIZE; i++)
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
	assert_int_equal(ioctl(fx.in[0], FIONREAD, &pending), 0);
	assert_int_equal(pending, (int)sizeof(data) - SERIAL_INBUF_SIZE); /* the ring is full; the rest waits */
	while (have < sizeof(data)) {
		int64_t n = receive(got + have, 1024, 2000);

		assert_true(n > 0);
		have += (size_t)n;
	}
	assert_memory_equal(got, data, sizeof(data));
}

/* Malformed chains (a writable transmit buffer, a readable receive buffer): completed with 0 and counted. */
static void test_bad_chains(void **state)
{
	char buf[16];

	(void)state;
	bring_up();
	vdrv_post(&fx.drv, TX_Q, BUFS, 8, VIRTQ_DESC_F_WRITE);
	assert_int_equal(vdrv_wait_used(&fx.drv, TX_Q, 2000, NULL), 0);
	assert_int_equal(stats().bad_chains, 1);
	assert_int_equal(write(fx.in[1], "q", 1), 1);
	nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
	vdrv_post(&fx.drv, RX_Q, BUFS, 8, 0);
	assert_int_equal(vdrv_wait_used(&fx.drv, RX_Q, 2000, NULL), 0);
	assert_int_equal(stats().bad_chains, 2);
	/* a buffer outside guest RAM (docs/security.md case 4) */
	vdrv_post(&fx.drv, TX_Q, 0xfffff000, 8, 0);
	assert_int_equal(vdrv_wait_used(&fx.drv, TX_Q, 2000, NULL), 0);
	assert_int_equal(stats().bad_chains, 3);
	/* the device goes on: the input is still there for a good buffer */
	assert_int_equal(receive(buf, 8, 2000), 1);
	assert_string_equal(buf, "q");
	assert_int_equal(vdrv_rd(&fx.drv, 0x070) & VIRTIO_STATUS_DEVICE_NEEDS_RESET, 0);
}

/* Reset with input waiting and transmit buffers in the ring, then DRIVER_OK again: all served by the new driver. */
static void test_reset_during_io(void **state)
{
	char buf[32];

	(void)state;
	bring_up();
	assert_int_equal(write(fx.in[1], "kept", 4), 4);
	nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
	memcpy(vdrv_gpa(&fx.drv, BUFS + 0x10000, 4), "zzzz", 4);
	for (int i = 0; i < 4; i++)
		vdrv_post(&fx.drv, TX_Q, BUFS + 0x10000, 4, 0); /* possibly still being served when the reset comes */
	vdrv_wr(&fx.drv, 0x070, 0);
	assert_int_equal(vdrv_rd(&fx.drv, 0x070), 0);
	vdrv_wr(&fx.drv, 0x030, RX_Q);
	assert_int_equal(vdrv_rd(&fx.drv, 0x044), 0);
	bring_up();
	assert_int_equal(receive(buf, 32, 2000), 4);
	assert_string_equal(buf, "kept");
	transmit("again\n");
	/* before it, what the old driver sent (all of it or some: the reset may have come first) */
	for (size_t n = 0, i = 0; i < 24 && !(n >= 6 && !strcmp(buf + n - 6, "again\n")); i++) {
		n += host_output(buf + n, 1);
		assert_true(n < sizeof(buf));
	}
	assert_true(strlen(buf) >= 6 && !strcmp(buf + strlen(buf) - 6, "again\n"));
	assert_int_equal(strspn(buf, "z"), strlen(buf) - 6);
	/* and a second cycle */
	vdrv_wr(&fx.drv, 0x070, 0);
	bring_up();
	assert_int_equal(write(fx.in[1], "x", 1), 1);
	assert_int_equal(receive(buf, 32, 2000), 1);
}

/* Ctrl-A x on the input ends the VM (EXIT_STOPPED); Ctrl-A Ctrl-A reaches the guest as one Ctrl-A. */
static void test_escape(void **state)
{
	char buf[8];
	unsigned calls;

	(void)state;
	bring_up();
	assert_int_equal(write(fx.in[1], "a\001\001b", 4), 4);
	assert_int_equal(receive(buf, 8, 2000), 3);
	assert_memory_equal(buf, "a\001b", 3);
	assert_int_equal(write(fx.in[1], "\x01x", 2), 2);
	for (int i = 0; i < 2000; i++) {
		pthread_mutex_lock(&fake_lock);
		calls = exit_calls;
		pthread_mutex_unlock(&fake_lock);
		if (calls)
			break;
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
	assert_int_equal(calls, 1);
	assert_int_equal(exit_code, EXIT_STOPPED);
}

static int setup_stalled(void **state)
{
	static int p[2];
	static const char junk[4096];

	(void)state;
	assert_int_equal(pipe(p), 0);
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	while (write(p[1], junk, sizeof(junk)) > 0)
		;
	setup_with_output(p[1]);
	fx.out[0] = p[0]; /* closed by teardown */
	fx.out[1] = p[1];
	return 0;
}

/* Host output stalled: transmit chains still complete at once (bytes beyond the ring dropped); stop is bounded. */
static void test_output_stalled(void **state)
{
	struct timespec t0, t1;

	(void)state;
	bring_up();
	for (int i = 0; i < 40; i++) { /* 40 x 4 KiB > the 64 KiB ring */
		vdrv_post(&fx.drv, TX_Q, BUFS + 0x10000, 4096, 0);
		assert_int_equal(vdrv_wait_used(&fx.drv, TX_Q, 2000, NULL), 0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bus_stop(&fx.drv.bus); /* at most CON_FLUSH_MS (1 s) for the stalled reader */
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec < 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_identity, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_transmit_and_receive, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_receive_backpressure, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_chains, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reset_during_io, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_escape, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_output_stalled, setup_stalled, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_ERROR); /* the malformed-request warnings are expected here */
	return cmocka_run_group_tests_name("virtio_console", tests, NULL, NULL);
}
