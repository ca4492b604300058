/*
 * mmio_snap.c - the virtio-mmio transport's snapshot hooks (device.h): quiesce the device's in-flight work,
 * save the register file and every queue, and restore them, validated as if a guest had written
 * them, re-activating a device the driver had set DRIVER_OK on.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/log.h"
#include "brisk/snap_fields.h"
#include "brisk/snapshot.h"
#include "mmio_impl.h"

/* Waits, under the I/O lock, for the device's work in flight (virtio.h). */
int mmio_quiesce(void *dev)
{
	struct virtio_mmio *t = dev;
	int err;

	if (!t->ops->quiesce)
		return 0;
	pthread_mutex_lock(&t->io_lock);
	err = t->ops->quiesce(t->dev);
	pthread_mutex_unlock(&t->io_lock);
	if (err)
		log_warn("%s at 0x%llx: quiesce: %s", t->ops->name, (unsigned long long)t->base, strerror(-err));
	return err;
}

/*
 * The section (version MMIO_SNAP_VERSION; every virtio device's section is named "virtio-mmio"): the
 * device ID and queue count (from the device's ops: compared on restore), the register file (4.2.2),
 * then per queue QueueReady, QueueNum and the virtqueue (virtq_save), then the device's own state. Each
 * part is one record (snap_fields.h) that drives both directions. interrupt_status is copied as plain
 * memory: on save every vCPU is paused and the event loop stopped, on restore the device has not started.
 */
/* Version 2: a device's own state holds its rate limiters (rate_limiter.h RL_SNAP_SINCE); 1 still loads. */
#define MMIO_SNAP_VERSION 2u

#define STATUS_KNOWN                                                                                                   \
	(VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_DRIVER_OK | VIRTIO_STATUS_FEATURES_OK |      \
	 VIRTIO_STATUS_DEVICE_NEEDS_RESET | VIRTIO_STATUS_FAILED)

struct mmio_ident {
	uint32_t device_id, nr_queues;
};

static const struct snap_field ident_fields[] = {
    SNAP_UINT(struct mmio_ident, device_id, 4),
    SNAP_UINT(struct mmio_ident, nr_queues, 4),
};
static const struct snap_record ident_record = SNAP_RECORD("virtio-mmio", ident_fields);

static const struct snap_field reg_fields[] = {
    SNAP_UINT_MASK(struct virtio_mmio, status, 4, STATUS_KNOWN),
    SNAP_UINT(struct virtio_mmio, dev_features_sel, 4),
    SNAP_UINT(struct virtio_mmio, drv_features_sel, 4),
    SNAP_UINT(struct virtio_mmio, queue_sel, 4),
    SNAP_UINT(struct virtio_mmio, drv_features, 8),
    SNAP_UINT(struct virtio_mmio, config_generation, 4),
    SNAP_UINT_MASK(struct virtio_mmio, interrupt_status, 4, VIRTIO_MMIO_INT_VRING | VIRTIO_MMIO_INT_CONFIG),
};
static const struct snap_record reg_record = SNAP_RECORD("virtio-mmio", reg_fields);

static const struct snap_field slot_fields[] = {
    SNAP_FLAG(struct queue_slot, ready),
    SNAP_UINT(struct queue_slot, num, 2),
};
static const struct snap_record slot_record = SNAP_RECORD("virtio-mmio", slot_fields);

static int save_registers(const struct virtio_mmio *t, struct snap_writer *w)
{
	const struct mmio_ident id = {.device_id = t->ops->device_id, .nr_queues = t->ops->nr_queues};
	int err = snap_set_version(w, MMIO_SNAP_VERSION);

	err = err ?: snap_record_put(w, &ident_record, &id, MMIO_SNAP_VERSION);
	err = err ?: snap_record_put(w, &reg_record, t, MMIO_SNAP_VERSION);
	for (unsigned i = 0; i < t->ops->nr_queues && !err; i++) {
		err = snap_record_put(w, &slot_record, &t->q[i], MMIO_SNAP_VERSION);
		err = err ?: virtq_save(&t->q[i].vq, w, MMIO_SNAP_VERSION);
	}
	return err;
}

int mmio_save(void *dev, struct snap_writer *w)
{
	struct virtio_mmio *t = dev;
	int err;

	pthread_mutex_lock(&t->lock);
	err = save_registers(t, w);
	pthread_mutex_unlock(&t->lock);
	if (!err && t->ops->save)
		err = t->ops->save(t->dev, w);
	return err;
}

__attribute__((format(printf, 2, 3))) static int refuse_restore(const struct virtio_mmio *t, const char *fmt, ...)
{
	char what[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	log_error("%s at 0x%llx: snapshot refused: %s", t->ops->name, (unsigned long long)t->base, what);
	return -EINVAL;
}

/*
 * The register file into the scratch transport `n`, checked as write_status and write_reg would have let a
 * driver set it (3.1.1, 4.2.2).
 */
static int read_registers(const struct virtio_mmio *t, struct snap_reader *r, struct virtio_mmio *n)
{
	struct mmio_ident id = {0};
	char why[160];
	int err = snap_version_check(r, "virtio-mmio", MMIO_SNAP_VERSION, why, sizeof(why));

	if (err) {
		refuse_restore(t, "%s", why);
		return err;
	}
	if (snap_record_get(r, &ident_record, &id, snap_version(r), why, sizeof(why)) ||
	    snap_record_get(r, &reg_record, n, snap_version(r), why, sizeof(why)))
		return refuse_restore(t, "register file: %s", why);
	if (id.device_id != t->ops->device_id || id.nr_queues != t->ops->nr_queues)
		return refuse_restore(t, "device ID %u with %u queues, this VM has %u with %u here", id.device_id,
				      id.nr_queues, t->ops->device_id, t->ops->nr_queues);
	if ((n->status & VIRTIO_STATUS_FEATURES_OK) &&
	    (!(n->drv_features & (1ull << VIRTIO_F_VERSION_1)) || (n->drv_features & ~mmio_offered(t))))
		return refuse_restore(t, "driver features 0x%llx not a set the device offers (0x%llx)",
				      (unsigned long long)n->drv_features, (unsigned long long)mmio_offered(t));
	if ((n->status & VIRTIO_STATUS_DRIVER_OK) && !(n->status & VIRTIO_STATUS_FEATURES_OK))
		return refuse_restore(t, "status 0x%x: DRIVER_OK without FEATURES_OK", n->status);
	return 0;
}

/* One queue into n->q[i], checked as QueueNum and QueueReady writes are (4.2.2.3, write_queue_ready). */
static int read_queue(const struct virtio_mmio *t, struct snap_reader *r, struct virtio_mmio *n, unsigned i)
{
	bool event_idx = n->drv_features & (1ull << VIRTIO_F_EVENT_IDX);
	bool indirect = n->drv_features & (1ull << VIRTIO_F_INDIRECT_DESC);
	struct queue_slot *s = &n->q[i];
	struct virtq *q = &s->vq;
	char why[160];

	if (snap_record_get(r, &slot_record, s, snap_version(r), why, sizeof(why)) ||
	    virtq_restore(q, r, snap_version(r), t->ctx.mem, t->ops->queue_max, why, sizeof(why)))
		return refuse_restore(t, "queue %u: %s", i, why);
	if (s->num > t->ops->queue_max)
		return refuse_restore(t, "queue %u: QueueReady %u, QueueNum %u (maximum %u)", i, s->ready, s->num,
				      t->ops->queue_max);
	/* A ready queue is exactly the one the driver's writes activated: the same size and features. */
	if (s->ready && (!q->mem || q->size != s->num || q->event_idx != event_idx || q->indirect != indirect))
		return refuse_restore(t, "queue %u: ready but not the queue QueueNum %u and the features describe", i,
				      s->num);
	if (!s->ready && q->mem)
		return refuse_restore(t, "queue %u: activated but not ready", i);
	return 0;
}

/* Makes the checked state the transport's; with DRIVER_OK, activates the device as the status write does. */
static void commit_restore(struct virtio_mmio *t, const struct virtio_mmio *n)
{
	pthread_mutex_lock(&t->lock);
	snap_record_copy(&reg_record, t, n);
	for (unsigned i = 0; i < t->ops->nr_queues; i++) {
		snap_record_copy(&slot_record, &t->q[i], &n->q[i]);
		t->q[i].vq = n->q[i].vq;
	}
	if ((t->status & VIRTIO_STATUS_DRIVER_OK) && !(t->status & VIRTIO_STATUS_DEVICE_NEEDS_RESET))
		mmio_driver_ok_locked(t);
	pthread_mutex_unlock(&t->lock);
}

/*
 * Everything is read and checked (the transport's fields into a scratch transport, then the device's
 * through its restore hook) before anything changes: a refused snapshot leaves the device as created,
 * nothing activated.
 */
int mmio_restore(void *dev, struct snap_reader *r)
{
	struct virtio_mmio *t = dev;
	struct virtio_mmio *n = calloc(1, sizeof(*n));
	int err;

	if (!n)
		return -ENOMEM;
	err = read_registers(t, r, n);
	for (unsigned i = 0; i < t->ops->nr_queues && !err; i++)
		err = read_queue(t, r, n, i);
	if (!err && t->ops->restore)
		err = t->ops->restore(t->dev, r);
	if (!err && (snap_reader_error(r) || snap_remaining(r)))
		err = refuse_restore(t, "device section %s", snap_reader_error(r) ? "truncated" : "has extra bytes");
	if (!err)
		commit_restore(t, n);
	free(n);
	return err;
}
