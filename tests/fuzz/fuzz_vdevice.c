/*
 * fuzz_vdevice.c - libFuzzer harness: a whole virtio device's request path, the way fuzz_blk drives virtio-blk's
 * parser but through the real device and transport: guest RAM laid out from the input (descriptor tables, avail
 * rings, buffers), the driver's bring-up, QueueNotify, the device's event-loop work, an optional reset and a
 * second round. One device per build (run.sh): -DFUZZ_DEV_RNG the entropy device (src/virtio/rng.c),
 * -DFUZZ_DEV_CONSOLE the virtio console (src/virtio/console.c, with host input on its receive queue).
 *
 * Input (missing bytes read as zero):
 *   1 byte    flags: bit 0 EVENT_IDX, bit 1 INDIRECT_DESC negotiated; bit 2 reset and serve again; bit 3 notify
 *             before DRIVER_OK too; bits 4-5 the rng's rate (1, 512, 64 KiB, 16 MiB bytes/s)
 *   console only: 1 byte n, then n bytes of host input (console_io's escape filter applied)
 *   per queue (rng 1, console 2: receiveq then transmitq) the part fuzz_vdev.h's fuzz_vq_read describes
 *   the rest  guest RAM from FUZZ_BUF on (where descriptors may point: data, indirect tables)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/devices.h"
#include "brisk/log.h"
#include "brisk/virtio.h"
#include "fuzz_vdev.h"

#if defined(FUZZ_DEV_CONSOLE)
#include "../../src/devices/console_io.c" /* its input path (queue_input) without the input thread */
#define NR_QUEUES 2
#elif defined(FUZZ_DEV_RNG)
#define NR_QUEUES 1
#else
#error "build with -DFUZZ_DEV_RNG or -DFUZZ_DEV_CONSOLE"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef FUZZ_DEV_CONSOLE
static struct console_io *con_io;
struct console_io *__real_console_io_create(const struct console_io_opts *o);
struct console_io *__wrap_console_io_create(const struct console_io_opts *o);

struct console_io *__wrap_console_io_create(const struct console_io_opts *o)
{
	return con_io = __real_console_io_create(o);
}
#endif

static void bring_up(struct fuzz_vm *v, uint8_t flags, const struct fuzz_vq *q)
{
	fuzz_negotiate(v,
		       (flags & 1 ? 1ull << VIRTIO_F_EVENT_IDX : 0) | (flags & 2 ? 1ull << VIRTIO_F_INDIRECT_DESC : 0));
	for (unsigned i = 0; i < NR_QUEUES; i++)
		fuzz_queue(v, i, q[i].size, FUZZ_Q(i));
	if (flags & 8)
		for (unsigned i = 0; i < NR_QUEUES; i++)
			fuzz_wr(v, 0x050, i);
	fuzz_wr(v, 0x070, fuzz_rd(v, 0x070) | VIRTIO_STATUS_DRIVER_OK);
}

static void serve(struct fuzz_vm *v)
{
	for (unsigned i = 0; i < NR_QUEUES; i++)
		fuzz_wr(v, 0x050, i);
	fuzz_loop_run(fuzz_loop, 16);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_bytes in = {.p = data, .n = size};
	struct fuzz_vq q[NR_QUEUES];
	struct fuzz_vm v;
	uint8_t flags;
	uint32_t status;

	log_set_level(LOG_ERROR);
	fuzz_take(&in, &flags, 1);
	fuzz_vm_open(&v, FUZZ_VDEV_RAM);
#ifdef FUZZ_DEV_CONSOLE
	const struct serial_opts o = {.out_fd = -1, .in_fd = -1};
	uint8_t n, input[256], filtered[256];
	bool esc = false, quit = false;
	size_t k;

	fuzz_take(&in, &n, 1);
	fuzz_take(&in, input, n);
	k = unescape(input, n, filtered, &esc, &quit);
	if (virtio_console_create_io(&v.ctx, &v.bus, &v.win, &o))
		abort();
#else
	static const uint64_t rates[4] = {1, 512, 64 << 10, 16 << 20};

	if (virtio_rng_create(&v.ctx, &v.bus, &v.win, rates[(flags >> 4) & 3]))
		abort();
#endif
	for (unsigned i = 0; i < NR_QUEUES; i++)
		fuzz_vq_read(&v, i, &in, &q[i]);
	if (in.n)
		fuzz_take(&in, gmem_ptr(&v.mem, FUZZ_BUF, FUZZ_VDEV_RAM - FUZZ_BUF),
			  in.n < FUZZ_VDEV_RAM - FUZZ_BUF ? in.n : FUZZ_VDEV_RAM - FUZZ_BUF);
	bring_up(&v, flags, q);
#ifdef FUZZ_DEV_CONSOLE
	if (k)
		queue_input(con_io, filtered, k);
#endif
	serve(&v);
	if (flags & 4) { /* a reset during I/O, then the same rings again */
		fuzz_wr(&v, 0x070, 0);
		bring_up(&v, flags, q);
		serve(&v);
	}
	status = fuzz_rd(&v, 0x070);
	if ((status & VIRTIO_STATUS_DRIVER_OK) && !(status & VIRTIO_STATUS_FEATURES_OK))
		abort();
	fuzz_vm_close(&v);
	return 0;
}
