/*
 * fuzz_mmio.c - libFuzzer harness: the virtio-mmio register file (src/virtio/mmio.c) driven by a hostile driver:
 * accesses of 1/2/4/8 bytes at any offset of the window and just past it, status bits out of order, QueueSel
 * 0xffff, queue writes after DRIVER_OK, notifies, resets, then a snapshot of whatever state that left, restored
 * into a fresh transport (every state a guest can reach must restore, and save back to the same bytes).
 *
 * The device behind the transport is a fake (two queues of at most 64, 8 bytes of writable config space) whose
 * notify pops every chain through the real virtqueue walker and completes it. No KVM, no threads (fuzz_vdev.h).
 *
 * Input: records, until the input ends. A record's first byte `op`:
 *   op & 0x80 == 0   an access: width 1 << (op & 3), a write when op & 4; then 2 bytes (le16) giving the
 *                    offset (mod 0x1010, so the 16 bytes past the window are hit too), then for a write the
 *                    value's bytes (missing ones read as zero)
 *   op & 0x80        a step a driver would take, op & 7: 0 negotiate (3.1.1 up to FEATURES_OK; 1 byte of
 *                    transport features: bit 0 EVENT_IDX, bit 1 INDIRECT_DESC), 1 set up queue (1 byte: queue
 *                    in bit 0, log2 size in bits 1-3), 2 DRIVER_OK, 3 a chain (1 byte queue, 16 bytes raw
 *                    descriptor at entry 0, then avail.idx + 1), 4 run the event loop, 5 reset (status 0),
 *                    6 snapshot round trip now, 7 a config-space write of 8 bytes at offset 0.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/log.h"
#include "brisk/virtio.h"
#include "brisk/virtq.h"
#include "fuzz_vdev.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RAM	    (1u << 20)
#define QDESC(q)    (0x10000ull + 0x4000ull * (q))
#define MAX_RECORDS 4096

struct fake_dev {
	uint8_t config[8];
	struct virtio_mmio *t;
	bool active;
	unsigned activations, chains;
};

static void fd_config_read(void *dev, uint32_t off, void *data, unsigned len)
{
	if (off + len > 8)
		abort(); /* the transport checks the range */
	memcpy(data, ((struct fake_dev *)dev)->config + off, len);
}

static void fd_config_write(void *dev, uint32_t off, const void *data, unsigned len)
{
	if (off + len > 8)
		abort();
	memcpy(((struct fake_dev *)dev)->config + off, data, len);
}

static int fd_activate(void *dev, uint64_t features)
{
	struct fake_dev *d = dev;

	if (!(features & (1ull << VIRTIO_F_VERSION_1)))
		abort(); /* FEATURES_OK sticks only with VERSION_1 */
	d->active = true;
	d->activations++;
	return 0;
}

/* Takes every chain (the transport's iterator), touches each byte (ASan checks the walker's bounds), completes
 * it with 0 bytes. */
static void fd_notify(void *dev, unsigned qi)
{
	struct fake_dev *d = dev;
	struct virtq *q = virtio_queue(d->t, qi);
	struct virtq_seg segs[16];
	struct virtq_chain c;
	struct virtq_iter it;

	if (!d->active || !q)
		abort(); /* the transport notifies only an active device's ready queues */
	virtio_iter(d->t, qi, &it, segs, 16, 64);
	while (virtq_next(&it, &c)) {
		for (unsigned i = 0; i < c.nr_out + c.nr_in; i++)
			memset(segs[i].ptr, 0x5a, segs[i].len);
		virtq_push(q, c.head, 0);
		d->chains++;
	}
	d->chains += it.bad;
	virtio_queue_done(d->t, qi);
}

static void fd_reset(void *dev)
{
	((struct fake_dev *)dev)->active = false;
}

static void fd_destroy(void *dev)
{
	free(dev);
}

static const struct virtio_dev_ops fake_ops = {
    .name = "virtio-fuzz",
    .device_id = 42,
    .nr_queues = 2,
    .queue_max = 64,
    .features = 1ull << 5,
    .config_size = 8,
    .config_read = fd_config_read,
    .config_write = fd_config_write,
    .activate = fd_activate,
    .notify = fd_notify,
    .reset = fd_reset,
    .destroy = fd_destroy,
};

static struct fake_dev *add_fake(struct fuzz_vm *v)
{
	struct fake_dev *d = calloc(1, sizeof(*d));

	if (!d || virtio_mmio_create(&v->ctx, &v->bus, &v->win, &fake_ops, d, fake_ops.features, &d->t))
		abort();
	return d;
}

/* The state the guest left, saved, restored into a fresh transport and saved again: the same bytes. */
static void round_trip(struct fuzz_vm *v)
{
	struct evloop *keep = fuzz_loop;
	struct fuzz_vm v2;

	fuzz_vm_open(&v2, RAM);
	memcpy(v2.mem.base, v->mem.base, RAM); /* the queues' rings as they were */
	add_fake(&v2);
	fuzz_snap_round_trip(&v->bus, &v2.bus);
	fuzz_vm_close(&v2);
	fuzz_loop = keep;
}

static void step(struct fuzz_vm *v, struct fake_dev *d, uint8_t op, struct fuzz_bytes *in)
{
	uint8_t b[17];

	(void)d;
	switch (op & 7) {
	case 0:
		fuzz_take(in, b, 1);
		fuzz_negotiate(v, (b[0] & 1 ? 1ull << VIRTIO_F_EVENT_IDX : 0) |
				      (b[0] & 2 ? 1ull << VIRTIO_F_INDIRECT_DESC : 0));
		break;
	case 1:
		fuzz_take(in, b, 1);
		fuzz_queue(v, b[0] & 1, 1u << ((b[0] >> 1) & 7), QDESC(b[0] & 1));
		break;
	case 2:
		fuzz_wr(v, 0x070, fuzz_rd(v, 0x070) | VIRTIO_STATUS_DRIVER_OK);
		break;
	case 3: {
		uint16_t *avail;

		fuzz_take(in, b, 17);
		memcpy(gmem_ptr(&v->mem, QDESC(b[0] & 1), 16), b + 1, 16);
		avail = gmem_ptr(&v->mem, QDESC(b[0] & 1) + 0x1000, 4);
		avail[1]++;
		fuzz_wr(v, 0x050, b[0] & 1);
		break;
	}
	case 4:
		fuzz_loop_run(fuzz_loop, 8);
		break;
	case 5:
		fuzz_wr(v, 0x070, 0);
		break;
	case 6:
		round_trip(v);
		break;
	case 7:
		fuzz_take(in, b, 8);
		bus_write(&v->bus, BUS_MMIO, FUZZ_MMIO_BASE + VIRTIO_MMIO_CONFIG, b, 8);
		break;
	}
}

static void reg_access(struct fuzz_vm *v, uint8_t op, struct fuzz_bytes *in)
{
	unsigned len = 1u << (op & 3);
	uint8_t val[8];
	uint16_t off;

	fuzz_take(in, &off, 2);
	if (op & 4) {
		fuzz_take(in, val, len);
		bus_write(&v->bus, BUS_MMIO, FUZZ_MMIO_BASE + off % 0x1010, val, len);
	} else {
		memset(val, 0xcc, sizeof(val));
		bus_read(&v->bus, BUS_MMIO, FUZZ_MMIO_BASE + off % 0x1010, val, len);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_bytes in = {.p = data, .n = size};
	struct fuzz_vm v;
	struct fake_dev *d;
	uint32_t status, isr;

	log_set_level(LOG_ERROR);
	fuzz_vm_open(&v, RAM);
	d = add_fake(&v);
	for (unsigned n = 0; in.n && n < MAX_RECORDS; n++) {
		uint8_t op;

		fuzz_take(&in, &op, 1);
		if (op & 0x80)
			step(&v, d, op, &in);
		else
			reg_access(&v, op, &in);
		fuzz_loop_run(fuzz_loop, 1);
	}
	/* Invariants of the register file, whatever came before. */
	status = fuzz_rd(&v, 0x070);
	isr = fuzz_rd(&v, 0x060);
	if (fuzz_rd(&v, 0x000) != VIRTIO_MMIO_MAGIC || fuzz_rd(&v, 0x004) != 2 ||
	    ((status & VIRTIO_STATUS_DRIVER_OK) && !(status & VIRTIO_STATUS_FEATURES_OK)) ||
	    (isr & ~(VIRTIO_MMIO_INT_VRING | VIRTIO_MMIO_INT_CONFIG)))
		abort();
	round_trip(&v);
	fuzz_vm_close(&v);
	return 0;
}
