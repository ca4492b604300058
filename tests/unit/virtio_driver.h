/*
 * virtio_driver.h - the guest driver's side of a device behind the real virtio-mmio transport, shared by the unit
 * tests that drive a whole device (test_virtio_console.c, test_virtio_net.c, test_virtio_vsock.c): the fixture
 * (16 MiB of fake guest RAM, a bus holding the device in a devmgr slot, fake_vm.h's event loop), register access,
 * the bring-up of section 3.1.1, and split queues of VDRV_QSIZE entries (section 2.7) fed one-descriptor chains.
 *
 * Contract:
 * - Include after <cmocka.h> and "fake_vm.h" (it creates, starts and destroys fake_vm.h's `loop`).
 * - A test keeps one struct vdrv, zeroed before vdrv_open: vdrv_open, then the device's create function on the
 *   slot returned, then vdrv_start; vdrv_close in the teardown (it destroys the device with the bus).
 * - Queue q lives at VDRV_RING(q): descriptor table, driver area at +0x1000, device area at +0x2000 (the first
 *   VDRV_MAX_QUEUES MiB above 1 MiB). Buffers are the test's: anywhere else in guest RAM (4 MiB and up is free).
 * - The driver side is one thread: the device completes chains from the event loop, the test polls the used ring
 *   (vdrv_wait_used, 1 ms steps) with acquire loads and publishes avail.idx with a release store.
 */
#ifndef BRISK_TEST_VIRTIO_DRIVER_H
#define BRISK_TEST_VIRTIO_DRIVER_H

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "brisk/bus.h"
#include "brisk/devmgr.h"
#include "brisk/evloop.h"
#include "brisk/mem.h"
#include "brisk/virtio.h"

#define VDRV_QSIZE	16
#define VDRV_MAX_QUEUES 3
#define VDRV_RAM	(16u << 20)
#define VDRV_RING(q)	(0x100000ull * ((q) + 1))

/* The driver's view of one split queue. */
struct vdrvq {
	uint64_t desc; /* avail at +0x1000, used at +0x2000 */
	uint16_t avail_idx, used_seen, next;
};

struct vdrv {
	struct gmem mem;
	struct bus bus;
	struct devmgr mgr;
	uint64_t base; /* the device's register window */
	struct vdrvq q[VDRV_MAX_QUEUES];
};

/* A descriptor as the guest lays it (section 2.7.5, little-endian like the host). */
struct vdrv_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

/* Guest RAM, the loop (not started) and a bus; ctx->mem set; returns the devmgr slot `name` for the device. */
static inline const struct devmgr_window *vdrv_open(struct vdrv *d, const char *name, struct devctx *ctx)
{
	const struct devmgr_window *slot;

	assert_int_equal(gmem_init(&d->mem, VDRV_RAM, 0), 0);
	ctx->mem = &d->mem;
	loop = evloop_create();
	assert_non_null(loop);
	bus_init(&d->bus);
	slot = devmgr_alloc(&d->mgr, name);
	d->base = slot->base;
	return slot;
}

/* After the device was created on the slot: the loop and the devices running. */
static inline void vdrv_start(struct vdrv *d)
{
	const char *failed;

	assert_int_equal(evloop_start(loop), 0);
	assert_int_equal(bus_start(&d->bus, &failed), 0);
	assert_int_equal(bus_late_start(&d->bus, &failed), 0);
}

static inline void vdrv_close(struct vdrv *d)
{
	evloop_stop(loop);
	bus_destroy(&d->bus); /* stops and destroys the device */
	evloop_destroy(loop);
	gmem_destroy(&d->mem);
}

/* A 32-bit transport register (0xdeadbeef if nothing answers). */
static inline uint32_t vdrv_rd(struct vdrv *d, uint64_t off)
{
	uint32_t v = 0xdeadbeef;

	bus_read(&d->bus, BUS_MMIO, d->base + off, &v, 4);
	return v;
}

/* `len` bytes (1, 2 or 4) at `off`, zero-extended: the device's config space from 0x100. */
static inline uint32_t vdrv_rd_n(struct vdrv *d, uint64_t off, unsigned len)
{
	uint32_t v = 0;

	bus_read(&d->bus, BUS_MMIO, d->base + off, &v, len);
	return v;
}

static inline void vdrv_wr(struct vdrv *d, uint64_t off, uint32_t v)
{
	bus_write(&d->bus, BUS_MMIO, d->base + off, &v, 4);
}

/* The host's pointer to guest-physical [a, a + len), which must be RAM. */
static inline void *vdrv_gpa(struct vdrv *d, uint64_t a, uint64_t len)
{
	void *p = gmem_ptr(&d->mem, a, len);

	assert_non_null(p);
	return p;
}

/* Queue q at `desc` (rings zeroed), VDRV_QSIZE entries, then QueueReady. */
static inline void vdrv_setup_queue(struct vdrv *d, unsigned q, uint64_t desc)
{
	d->q[q] = (struct vdrvq){.desc = desc};
	memset(vdrv_gpa(d, desc, 0x3000), 0, 0x3000);
	vdrv_wr(d, 0x030, q);
	vdrv_wr(d, 0x038, VDRV_QSIZE);
	vdrv_wr(d, 0x080, (uint32_t)desc);
	vdrv_wr(d, 0x084, (uint32_t)(desc >> 32));
	vdrv_wr(d, 0x090, (uint32_t)(desc + 0x1000));
	vdrv_wr(d, 0x094, 0);
	vdrv_wr(d, 0x0a0, (uint32_t)(desc + 0x2000));
	vdrv_wr(d, 0x0a4, 0);
	vdrv_wr(d, 0x044, 1);
}

/* The driver's bring-up (3.1.1): reset, `features` plus VERSION_1, queues 0 .. nr_queues - 1, DRIVER_OK. */
static inline void vdrv_bring_up(struct vdrv *d, uint64_t features, unsigned nr_queues)
{
	const uint32_t ok = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK;

	features |= 1ull << VIRTIO_F_VERSION_1;
	vdrv_wr(d, 0x070, 0);
	vdrv_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE);
	vdrv_wr(d, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	vdrv_wr(d, 0x024, 0);
	vdrv_wr(d, 0x020, (uint32_t)features);
	vdrv_wr(d, 0x024, 1);
	vdrv_wr(d, 0x020, (uint32_t)(features >> 32));
	vdrv_wr(d, 0x070, ok);
	assert_int_equal(vdrv_rd(d, 0x070), ok);
	for (unsigned q = 0; q < nr_queues; q++)
		vdrv_setup_queue(d, q, VDRV_RING(q));
	vdrv_wr(d, 0x070, ok | VIRTIO_STATUS_DRIVER_OK);
	assert_int_equal(vdrv_rd(d, 0x070), ok | VIRTIO_STATUS_DRIVER_OK);
}

/* The head (and descriptor slot) the next vdrv_post on queue q takes. */
static inline uint16_t vdrv_next_head(struct vdrv *d, unsigned q)
{
	return d->q[q].next % VDRV_QSIZE;
}

/* Adds a one-descriptor chain (flags: VIRTQ_DESC_F_WRITE or 0) of `len` bytes at `buf`, notifies; returns its head. */
static inline uint16_t vdrv_post(struct vdrv *d, unsigned q, uint64_t buf, uint32_t len, uint16_t flags)
{
	struct vdrvq *vq = &d->q[q];
	uint16_t head = vq->next++ % VDRV_QSIZE;
	struct vdrv_desc *dt = vdrv_gpa(d, vq->desc, VDRV_QSIZE * sizeof(struct vdrv_desc));
	uint16_t *avail = vdrv_gpa(d, vq->desc + 0x1000, 4 + 2 * VDRV_QSIZE);

	dt[head] = (struct vdrv_desc){.addr = buf, .len = len, .flags = flags};
	avail[2 + vq->avail_idx % VDRV_QSIZE] = head;
	__atomic_store_n(&avail[1], ++vq->avail_idx, __ATOMIC_RELEASE);
	vdrv_wr(d, 0x050, q);
	return head;
}

/* The next used entry of queue q, looked for at once and then every 1 ms for `ms` ms: its length (and *id, the
 * head, when id is not NULL), or -1. */
static inline int64_t vdrv_wait_used(struct vdrv *d, unsigned q, int ms, uint32_t *id)
{
	struct vdrvq *vq = &d->q[q];
	uint16_t *used = vdrv_gpa(d, vq->desc + 0x2000, 4 + 8 * VDRV_QSIZE);

	for (int i = 0;; i++) {
		if (__atomic_load_n(&used[1], __ATOMIC_ACQUIRE) != vq->used_seen) {
			uint32_t *e = (uint32_t *)(used + 2) + 2 * (vq->used_seen++ % VDRV_QSIZE);

			if (id)
				*id = e[0];
			return e[1];
		}
		if (i >= ms)
			return -1;
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
}

#endif
