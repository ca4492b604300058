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
 * The register file (4.2.2), then per queue QueueReady, QueueNum and the virtqueue (virtq_save), then the
 * device's own state. The device ID comes first: every virtio device's section is named "virtio-mmio".
 */
static int save_registers(const struct virtio_mmio *t, struct snap_writer *w)
{
	int err = snap_put_u32(w, t->ops->device_id);

	err = err ?: snap_put_u32(w, t->ops->nr_queues);
	err = err ?: snap_put_u32(w, t->status);
	err = err ?: snap_put_u32(w, t->dev_features_sel);
	err = err ?: snap_put_u32(w, t->drv_features_sel);
	err = err ?: snap_put_u32(w, t->queue_sel);
	err = err ?: snap_put_u64(w, t->drv_features);
	err = err ?: snap_put_u32(w, t->config_generation);
	err = err ?: snap_put_u32(w, atomic_load(&t->interrupt_status));
	for (unsigned i = 0; i < t->ops->nr_queues && !err; i++) {
		err = snap_put_u8(w, t->q[i].ready);
		err = err ?: snap_put_u16(w, t->q[i].num);
		err = err ?: virtq_save(&t->q[i].vq, w);
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

/* What a restore reads before anything is changed. */
struct saved {
	uint32_t device_id, nr_queues, status, dev_features_sel, drv_features_sel, queue_sel;
	uint64_t drv_features;
	uint32_t config_generation, interrupt_status;
	uint8_t ready[VIRTIO_MMIO_MAX_QUEUES];
	uint16_t num[VIRTIO_MMIO_MAX_QUEUES];
	struct virtq vq[VIRTIO_MMIO_MAX_QUEUES];
};

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

#define STATUS_KNOWN                                                                                                   \
	(VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_DRIVER_OK | VIRTIO_STATUS_FEATURES_OK |      \
	 VIRTIO_STATUS_DEVICE_NEEDS_RESET | VIRTIO_STATUS_FAILED)

/* The register file, checked as write_status and write_reg would have let a driver set it (3.1.1, 4.2.2). */
static int read_registers(const struct virtio_mmio *t, struct snap_reader *r, struct saved *s)
{
	snap_get_u32(r, &s->device_id);
	snap_get_u32(r, &s->nr_queues);
	snap_get_u32(r, &s->status);
	snap_get_u32(r, &s->dev_features_sel);
	snap_get_u32(r, &s->drv_features_sel);
	snap_get_u32(r, &s->queue_sel);
	snap_get_u64(r, &s->drv_features);
	snap_get_u32(r, &s->config_generation);
	snap_get_u32(r, &s->interrupt_status);
	if (snap_reader_error(r))
		return refuse_restore(t, "register file truncated");
	if (s->device_id != t->ops->device_id || s->nr_queues != t->ops->nr_queues)
		return refuse_restore(t, "device ID %u with %u queues, this VM has %u with %u here", s->device_id,
				      s->nr_queues, t->ops->device_id, t->ops->nr_queues);
	if (s->status & ~STATUS_KNOWN)
		return refuse_restore(t, "status 0x%x has unknown bits", s->status);
	if ((s->status & VIRTIO_STATUS_FEATURES_OK) &&
	    (!(s->drv_features & (1ull << VIRTIO_F_VERSION_1)) || (s->drv_features & ~mmio_offered(t))))
		return refuse_restore(t, "driver features 0x%llx not a set the device offers (0x%llx)",
				      (unsigned long long)s->drv_features, (unsigned long long)mmio_offered(t));
	if ((s->status & VIRTIO_STATUS_DRIVER_OK) && !(s->status & VIRTIO_STATUS_FEATURES_OK))
		return refuse_restore(t, "status 0x%x: DRIVER_OK without FEATURES_OK", s->status);
	if (s->interrupt_status & ~(VIRTIO_MMIO_INT_VRING | VIRTIO_MMIO_INT_CONFIG))
		return refuse_restore(t, "interrupt status 0x%x has unknown bits", s->interrupt_status);
	return 0;
}

/* One queue, checked as QueueNum and QueueReady writes are (4.2.2.3, write_queue_ready). */
static int read_queue(const struct virtio_mmio *t, struct snap_reader *r, struct saved *s, unsigned i)
{
	bool event_idx = s->drv_features & (1ull << VIRTIO_F_EVENT_IDX);
	bool indirect = s->drv_features & (1ull << VIRTIO_F_INDIRECT_DESC);
	const char *why = NULL;
	struct virtq *q = &s->vq[i];

	snap_get_u8(r, &s->ready[i]);
	snap_get_u16(r, &s->num[i]);
	if (virtq_restore(q, r, t->ctx.mem, t->ops->queue_max, &why))
		return refuse_restore(t, "queue %u: %s", i, why);
	if (s->ready[i] > 1 || s->num[i] > t->ops->queue_max)
		return refuse_restore(t, "queue %u: QueueReady %u, QueueNum %u (maximum %u)", i, s->ready[i], s->num[i],
				      t->ops->queue_max);
	/* A ready queue is exactly the one the driver's writes activated: the same size and features. */
	if (s->ready[i] && (!q->mem || q->size != s->num[i] || q->event_idx != event_idx || q->indirect != indirect))
		return refuse_restore(t, "queue %u: ready but not the queue QueueNum %u and the features describe", i,
				      s->num[i]);
	if (!s->ready[i] && q->mem)
		return refuse_restore(t, "queue %u: activated but not ready", i);
	return 0;
}

/* Makes the checked state the transport's; with DRIVER_OK, activates the device as the status write does. */
static void commit_restore(struct virtio_mmio *t, const struct saved *s)
{
	pthread_mutex_lock(&t->lock);
	t->status = s->status;
	t->dev_features_sel = s->dev_features_sel;
	t->drv_features_sel = s->drv_features_sel;
	t->queue_sel = s->queue_sel;
	t->drv_features = s->drv_features;
	t->config_generation = s->config_generation;
	atomic_store(&t->interrupt_status, s->interrupt_status);
	for (unsigned i = 0; i < t->ops->nr_queues; i++) {
		t->q[i].ready = s->ready[i];
		t->q[i].num = s->num[i];
		t->q[i].vq = s->vq[i];
	}
	if ((t->status & VIRTIO_STATUS_DRIVER_OK) && !(t->status & VIRTIO_STATUS_DEVICE_NEEDS_RESET))
		mmio_driver_ok_locked(t);
	pthread_mutex_unlock(&t->lock);
}

/*
 * Everything is read and checked (the transport's fields, then the device's through its restore hook)
 * before anything changes: a refused snapshot leaves the device as created, nothing activated.
 */
int mmio_restore(void *dev, struct snap_reader *r)
{
	struct virtio_mmio *t = dev;
	struct saved *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	err = read_registers(t, r, s);
	for (unsigned i = 0; i < t->ops->nr_queues && !err; i++)
		err = read_queue(t, r, s, i);
	if (!err && t->ops->restore)
		err = t->ops->restore(t->dev, r);
	if (!err && (snap_reader_error(r) || snap_remaining(r)))
		err = refuse_restore(t, "device section %s", snap_reader_error(r) ? "truncated" : "has extra bytes");
	if (!err)
		commit_restore(t, s);
	free(s);
	return err;
}
