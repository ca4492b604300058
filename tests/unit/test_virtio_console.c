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

/* ---- the driver's side: two split queues in fake guest RAM (section 2.7) ----------------------------------- */

#define QSIZE  16
#define RX_Q   0
#define TX_Q   1
#define V1     (1ull << VIRTIO_F_VERSION_1)
#define BUFS   0x400000 /* data buffers: 4 KiB per descriptor slot and queue */
#define STATUS (VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK)

struct drvq {
	uint64_t desc; /* avail at +0x1000, used at +0x2000 */
	uint16_t avail_idx, used_seen, next;
};

struct fx {
	struct gmem mem;
	struct bus bus;
	struct devmgr mgr;
	uint64_t base;
	struct virtio_mmio *t;
	struct drvq q[2];
	int in[2], out[2]; /* pipes: the host's input (we write in[1]) and output (we read out[0]) */
};

static struct fx fx;

static uint32_t rd(uint64_t off)
{
	uint32_t v = 0xdeadbeef;

	bus_read(&fx.bus, BUS_MMIO, fx.base + off, &v, 4);
	return v;
}

static void wr(uint64_t off, uint32_t v)
{
	bus_write(&fx.bus, BUS_MMIO, fx.base + off, &v, 4);
}

static void *gpa(uint64_t a, uint64_t len)
{
	void *p = gmem_ptr(&fx.mem, a, len);

	assert_non_null(p);
	return p;
}

static void setup_queue(unsigned q, uint64_t desc)
{
	fx.q[q] = (struct drvq){.desc = desc};
	memset(gpa(desc, 0x3000), 0, 0x3000);
	wr(0x030, q);
	wr(0x038, QSIZE);
	wr(0x080, (uint32_t)desc);
	wr(0x084, 0);
	wr(0x090, (uint32_t)(desc + 0x1000));
	wr(0x094, 0);
	wr(0x0a0, (uint32_t)(desc + 0x2000));
	wr(0x0a4, 0);
	wr(0x044, 1);
}

/* The driver's bring-up (3.1.1): VERSION_1 only, both queues, DRIVER_OK. */
static void bring_up(void)
{
	wr(0x070, VIRTIO_STATUS_ACKNOWLEDGE);
	wr(0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	wr(0x024, 1);
	wr(0x020, 1); /* VERSION_1 (bit 32) */
	wr(0x070, STATUS);
	assert_int_equal(rd(0x070), STATUS);
	setup_queue(RX_Q, 0x100000);
	setup_queue(TX_Q, 0x200000);
	wr(0x070, STATUS | VIRTIO_STATUS_DRIVER_OK);
	assert_int_equal(rd(0x070), STATUS | VIRTIO_STATUS_DRIVER_OK);
}

struct desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

/* Adds a one-descriptor chain (flags: VIRTQ_DESC_F_WRITE or 0) of `len` bytes at `buf`, notifies; returns its head. */
static uint16_t post(unsigned q, uint64_t buf, uint32_t len, uint16_t flags)
{
	struct drvq *d = &fx.q[q];
	uint16_t head = d->next++ % QSIZE;
	struct desc *dt = gpa(d->desc, QSIZE * sizeof(struct desc));
	uint16_t *avail = gpa(d->desc + 0x1000, 4 + 2 * QSIZE);

	dt[head] = (struct desc){.addr = buf, .len = len, .flags = flags};
	avail[2 + d->avail_idx % QSIZE] = head;
	__atomic_store_n(&avail[1], ++d->avail_idx, __ATOMIC_RELEASE);
	wr(0x050, q);
	return head;
}

/* Waits (bounded) for the next used entry of queue q; returns its length, or -1. */
static int64_t wait_used(unsigned q, int ms)
{
	struct drvq *d = &fx.q[q];
	uint16_t *used = gpa(d->desc + 0x2000, 4 + 8 * QSIZE);
	struct timespec one = {.tv_nsec = 1000000};

	for (int i = 0; i < ms; i++) {
		if (__atomic_load_n(&used[1], __ATOMIC_ACQUIRE) != d->used_seen) {
			uint32_t *e = (uint32_t *)(used + 2) + 2 * (d->used_seen++ % QSIZE);

			return e[1];
		}
		nanosleep(&one, NULL);
	}
	return -1;
}

/* Sends `s` as one transmit buffer and waits for its completion. */
static void transmit(const char *s)
{
	uint64_t buf = BUFS + 0x10000 + (fx.q[TX_Q].next % QSIZE) * 0x1000;

	memcpy(gpa(buf, strlen(s)), s, strlen(s));
	post(TX_Q, buf, (uint32_t)strlen(s), 0);
	assert_int_equal(wait_used(TX_Q, 2000), 0); /* 5.3.6.2: nothing written into a transmit buffer */
}

/* Posts a receive buffer of `len` bytes and returns what the device put in it (NUL-terminated into out). */
static int64_t receive(char *out, uint32_t len, int ms)
{
	uint64_t buf = BUFS + (fx.q[RX_Q].next % QSIZE) * 0x1000;
	int64_t n;

	memset(gpa(buf, len), 0, len);
	post(RX_Q, buf, len, VIRTQ_DESC_F_WRITE);
	n = wait_used(RX_Q, ms);
	if (n >= 0) {
		memcpy(out, gpa(buf, len), (size_t)n);
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
	const struct devmgr_slot *slot;
	struct serial_opts io;
	const char *failed;

	memset(&fx, 0, sizeof(fx));
	assert_int_equal(pipe(fx.in), 0);
	if (out_fd < 0) {
		assert_int_equal(pipe(fx.out), 0);
		out_fd = fx.out[1];
	} else {
		fx.out[0] = fx.out[1] = -1;
	}
	io = (struct serial_opts){.out_fd = out_fd, .in_fd = fx.in[0]};
	assert_int_equal(gmem_init(&fx.mem, 16 << 20, 0), 0);
	ctx.mem = &fx.mem;
	loop = evloop_create();
	assert_non_null(loop);
	bus_init(&fx.bus);
	slot = devmgr_alloc(&fx.mgr, "virtio-console");
	fx.base = slot->base;
	assert_int_equal(virtio_console_create_io(&ctx, &fx.bus, slot, &io), 0);
	fx.t = bus_find(&fx.bus, BUS_MMIO, fx.base, 4)->device->dev;
	assert_int_equal(evloop_start(loop), 0);
	assert_int_equal(bus_start(&fx.bus, &failed), 0);
	assert_int_equal(bus_late_start(&fx.bus, &failed), 0);
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
	evloop_stop(loop);
	bus_destroy(&fx.bus);
	evloop_destroy(loop);
	gmem_destroy(&fx.mem);
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
	assert_int_equal(rd(0x008), VIRTIO_ID_CONSOLE);
	wr(0x014, 0);
	assert_int_equal(rd(0x010), (1u << VIRTIO_F_INDIRECT_DESC) | (1u << VIRTIO_F_EVENT_IDX));
	wr(0x030, 0);
	assert_int_equal(rd(0x034), 256);
	wr(0x030, 2); /* no control queues without MULTIPORT */
	assert_int_equal(rd(0x034), 0);
	memset(cfg, 0xee, sizeof(cfg));
	for (unsigned i = 0; i < sizeof(cfg); i += 4)
		bus_read(&fx.bus, BUS_MMIO, fx.base + 0x100 + i, cfg + i, 4);
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
	post(TX_Q, BUFS, 8, VIRTQ_DESC_F_WRITE);
	assert_int_equal(wait_used(TX_Q, 2000), 0);
	assert_int_equal(stats().bad_chains, 1);
	assert_int_equal(write(fx.in[1], "q", 1), 1);
	nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
	post(RX_Q, BUFS, 8, 0);
	assert_int_equal(wait_used(RX_Q, 2000), 0);
	assert_int_equal(stats().bad_chains, 2);
	/* a buffer outside guest RAM (SECURITY.md case 4) */
	post(TX_Q, 0xfffff000, 8, 0);
	assert_int_equal(wait_used(TX_Q, 2000), 0);
	assert_int_equal(stats().bad_chains, 3);
	/* the device goes on: the input is still there for a good buffer */
	assert_int_equal(receive(buf, 8, 2000), 1);
	assert_string_equal(buf, "q");
	assert_int_equal(rd(0x070) & VIRTIO_STATUS_DEVICE_NEEDS_RESET, 0);
}

/* Reset with input waiting and transmit buffers in the ring, then DRIVER_OK again: all served by the new driver. */
static void test_reset_during_io(void **state)
{
	char buf[32];

	(void)state;
	bring_up();
	assert_int_equal(write(fx.in[1], "kept", 4), 4);
	nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
	memcpy(gpa(BUFS + 0x10000, 4), "zzzz", 4);
	for (int i = 0; i < 4; i++)
		post(TX_Q, BUFS + 0x10000, 4, 0); /* possibly still being served when the reset comes */
	wr(0x070, 0);
	assert_int_equal(rd(0x070), 0);
	wr(0x030, RX_Q);
	assert_int_equal(rd(0x044), 0);
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
	wr(0x070, 0);
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
		post(TX_Q, BUFS + 0x10000, 4096, 0);
		assert_int_equal(wait_used(TX_Q, 2000), 0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bus_stop(&fx.bus); /* at most CON_FLUSH_MS (1 s) for the stalled reader */
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
