/*
 * mmio.c - the virtio-mmio transport, version 2 (virtio 1.2 section 4.2.2; include/brisk/virtio.h).
 *
 * Register layout (4.2.2, table "MMIO Device Register Layout"); every register is 32 bits wide and is
 * accessed with 32-bit accesses only (4.2.2.2: the driver MUST), anything else is ignored and counted.
 * The device status state machine follows 3.1.1 and 2.1.2: bits are only ever added, in order, until
 * a 0 write resets the device; FEATURES_OK sticks only for an acceptable feature set (VERSION_1, a
 * subset of what was offered); queue registers are written only while the queue is not ready and the
 * driver is not done (4.2.2.3); a queue that does not validate raises DEVICE_NEEDS_RESET.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "brisk/bus.h"
#include "brisk/device.h"
#include "brisk/devmgr.h"
#include "brisk/log.h"
#include "brisk/snapshot.h"
#include "brisk/virtio.h"

#include "mmio_impl.h"

__attribute__((format(printf, 2, 3))) static void bad_access(struct virtio_mmio *t, const char *fmt, ...)
{
	uint64_t n = atomic_fetch_add(&t->stats.bad_accesses, 1);

	if (log_ratelimit(n)) {
		char what[160];
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(what, sizeof(what), fmt, ap);
		va_end(ap);
		log_warn("%s at 0x%llx: %s (ignored; %llu so far)", t->ops->name, (unsigned long long)t->base, what,
			 (unsigned long long)n + 1);
	}
}

/* ---- interrupts ----------------------------------------------------------------------------------- */

/* Raises `bits` in InterruptStatus and pulses the line (an edge on the I/O APIC pin). */
static void interrupt(struct virtio_mmio *t, uint32_t bits)
{
	uint64_t one = 1;

	atomic_fetch_or(&t->interrupt_status, bits);
	atomic_fetch_add(&t->stats.interrupts, 1);
	if (t->irq_fd >= 0) {
		if (write(t->irq_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			log_warn("%s: irqfd write: %s", t->ops->name, strerror(errno));
		return;
	}
	dev_irq_line(&t->ctx, t->irq, 1);
	dev_irq_line(&t->ctx, t->irq, 0);
}

void virtio_queue_done(struct virtio_mmio *t, unsigned q)
{
	if (q < t->ops->nr_queues && virtq_publish(&t->q[q].vq))
		interrupt(t, VIRTIO_MMIO_INT_VRING);
}

void virtio_io_lock(struct virtio_mmio *t)
{
	pthread_mutex_lock(&t->io_lock);
}

void virtio_io_unlock(struct virtio_mmio *t)
{
	pthread_mutex_unlock(&t->io_lock);
}

void virtio_config_changed(struct virtio_mmio *t)
{
	pthread_mutex_lock(&t->lock);
	t->config_generation++;
	pthread_mutex_unlock(&t->lock);
	interrupt(t, VIRTIO_MMIO_INT_CONFIG);
}

void virtio_needs_reset(struct virtio_mmio *t, const char *why)
{
	uint64_t n = atomic_fetch_add(&t->stats.needs_reset, 1);
	bool was_ok;

	if (log_ratelimit(n))
		log_warn("%s at 0x%llx: %s: device needs reset", t->ops->name, (unsigned long long)t->base, why);
	pthread_mutex_lock(&t->lock);
	was_ok = t->status & VIRTIO_STATUS_DRIVER_OK;
	t->status |= VIRTIO_STATUS_DEVICE_NEEDS_RESET;
	atomic_store(&t->active, false);
	pthread_mutex_unlock(&t->lock);
	/* 2.1.2: if DRIVER_OK is set, the device MUST send a configuration change notification. */
	if (was_ok)
		interrupt(t, VIRTIO_MMIO_INT_CONFIG);
}

void virtio_bad_request(struct virtio_mmio *t, const char *why)
{
	uint64_t n = atomic_fetch_add(&t->stats.bad_chains, 1);

	if (log_ratelimit(n))
		log_warn("%s at 0x%llx: malformed request: %s (completed with an error; %llu so far)", t->ops->name,
			 (unsigned long long)t->base, why, (unsigned long long)n + 1);
}

/* ---- the chain iterator's reports (virtq.h virtq_sink): one place decides what a fault means -------------- */

/* A chain virtq_next or the device completed empty as malformed (docs/security.md cases 1-5, 8). */
static void sink_bad_chain(void *arg, uint16_t head, const char *why)
{
	struct queue_slot *s = arg;
	struct virtio_mmio *t = s->t;
	uint64_t n = atomic_fetch_add(&t->stats.bad_chains, 1);

	if (log_ratelimit(n))
		log_warn("%s at 0x%llx: malformed request: %s (queue %u, chain at head %u; completed with an error; "
			 "%llu so far)",
			 t->ops->name, (unsigned long long)t->base, why, s->index, head, (unsigned long long)n + 1);
}

/* A queue virtq_next found corrupt (case 6): DEVICE_NEEDS_RESET, nothing served until the driver resets. */
static void sink_broken(void *arg, enum virtq_fault f, uint16_t value)
{
	struct queue_slot *s = arg;
	char why[128];

	snprintf(why, sizeof(why), "queue %u: %s (%u, queue size %u)", s->index, virtq_fault_name(f), value,
		 s->vq.size);
	virtio_needs_reset(s->t, why);
}

static const struct virtq_sink mmio_sink = {.bad_chain = sink_bad_chain, .broken = sink_broken};

bool virtio_iter(struct virtio_mmio *t, unsigned q, struct virtq_iter *it, struct virtq_seg *segs, unsigned max_segs,
		 unsigned budget)
{
	struct queue_slot *s = q < t->ops->nr_queues ? &t->q[q] : NULL;

	virtq_iter_init(it, s ? &s->vq : NULL, segs, max_segs, budget, &mmio_sink, s);
	return s && !s->vq.broken;
}

struct virtq *virtio_queue(struct virtio_mmio *t, unsigned q)
{
	return q < t->ops->nr_queues ? &t->q[q].vq : NULL;
}

const struct gmem *virtio_mem(const struct virtio_mmio *t)
{
	return t->ctx.mem;
}

void virtio_stats(const struct virtio_mmio *t, struct virtio_stats *out)
{
	*out = (struct virtio_stats){
	    .notifies = atomic_load(&t->stats.notifies),
	    .interrupts = atomic_load(&t->stats.interrupts),
	    .bad_chains = atomic_load(&t->stats.bad_chains),
	    .needs_reset = atomic_load(&t->stats.needs_reset),
	    .bad_accesses = atomic_load(&t->stats.bad_accesses),
	};
}

/* ---- notifications (event loop) --------------------------------------------------------------------- */

static void queue_notified(void *arg, uint32_t events)
{
	struct queue_slot *s = arg;
	struct virtio_mmio *t = s->t;
	uint64_t n;

	(void)events;
	if (read(s->notify_fd, &n, sizeof(n)) != sizeof(n))
		return; /* spurious wakeup: nothing counted */
	atomic_fetch_add(&t->stats.notifies, 1);
	pthread_mutex_lock(&t->io_lock);
	if (atomic_load(&t->active) && s->ready && !s->vq.broken)
		t->ops->notify(t->dev, s->index);
	pthread_mutex_unlock(&t->io_lock);
}

static void watched(void *arg, uint32_t events)
{
	struct watch *w = arg;

	pthread_mutex_lock(&w->t->io_lock);
	w->fn(w->arg, events);
	pthread_mutex_unlock(&w->t->io_lock);
}

int virtio_watch(struct virtio_mmio *t, int fd, uint32_t events, evloop_fn fn, void *arg)
{
	struct evloop *l = t->ctx.ops->loop(t->ctx.vm);
	struct watch *w;
	int err;

	if (!l)
		return -ENODEV;
	if (t->nr_watch == VIRTIO_MAX_WATCH)
		return -ENOSPC;
	w = &t->watch[t->nr_watch];
	*w = (struct watch){.t = t, .fn = fn, .arg = arg};
	err = evloop_add(l, fd, events, watched, w);
	if (!err)
		t->nr_watch++;
	return err;
}

/* ---- the status state machine (vCPU thread, t->lock held) --------------------------------------------- */

static void reset_locked(struct virtio_mmio *t)
{
	atomic_store(&t->active, false);
	/* Wait for any notify in progress, then let the device forget. Lock order: io_lock, then lock. */
	pthread_mutex_unlock(&t->lock);
	pthread_mutex_lock(&t->io_lock);
	if (t->ops->reset)
		t->ops->reset(t->dev);
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->ops->nr_queues; i++) {
		virtq_reset(&t->q[i].vq);
		t->q[i].ready = false;
		t->q[i].num = 0;
	}
	pthread_mutex_unlock(&t->io_lock);
	t->status = 0;
	t->drv_features = 0;
	t->dev_features_sel = t->drv_features_sel = t->queue_sel = 0;
	atomic_store(&t->interrupt_status, 0);
}

uint64_t mmio_offered(const struct virtio_mmio *t)
{
	return t->features | TRANSPORT_FEATURES;
}

/* FEATURES_OK sticks only for a set the device accepts (3.1.1 step 5, 6.1: VERSION_1 is required). */
static bool features_ok(const struct virtio_mmio *t)
{
	return (t->drv_features & (1ull << VIRTIO_F_VERSION_1)) && !(t->drv_features & ~mmio_offered(t));
}

/* DRIVER_OK: every ready queue was validated when it became ready; the device starts. */
void mmio_driver_ok_locked(struct virtio_mmio *t)
{
	int err;

	pthread_mutex_unlock(&t->lock);
	pthread_mutex_lock(&t->io_lock);
	err = t->ops->activate ? t->ops->activate(t->dev, t->drv_features) : 0;
	pthread_mutex_lock(&t->lock);
	if (err) {
		uint64_t n = atomic_fetch_add(&t->stats.needs_reset, 1);

		t->status |= VIRTIO_STATUS_DEVICE_NEEDS_RESET;
		if (log_ratelimit(n))
			log_warn("%s at 0x%llx: activation failed: %s; device needs reset", t->ops->name,
				 (unsigned long long)t->base, strerror(-err));
	} else {
		atomic_store(&t->active, true);
	}
	pthread_mutex_unlock(&t->io_lock);
}

/* The status bits a driver sets (2.1); DEVICE_NEEDS_RESET is the device's. */
#define STATUS_DRIVER_BITS                                                                                             \
	(VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_DRIVER_OK | VIRTIO_STATUS_FEATURES_OK |      \
	 VIRTIO_STATUS_FAILED)

static void write_status(struct virtio_mmio *t, uint32_t v)
{
	uint32_t old = t->status, added = v & ~old & STATUS_DRIVER_BITS;

	if (v == 0) {
		reset_locked(t);
		return;
	}
	/* Bits 2.1 does not define are not kept: a snapshot (mmio_snap.c) would refuse the status. */
	if (v & ~(STATUS_DRIVER_BITS | VIRTIO_STATUS_DEVICE_NEEDS_RESET))
		bad_access(t, "status 0x%llx has undefined bits (not kept)", (unsigned long long)v);
	/* Bits are only added (the device's NEEDS_RESET bit is not the driver's to clear). */
	if ((old & ~VIRTIO_STATUS_DEVICE_NEEDS_RESET) & ~v) {
		bad_access(t, "status 0x%llx would clear bits of 0x%llx", (unsigned long long)v,
			   (unsigned long long)old);
		return;
	}
	if ((added & VIRTIO_STATUS_FEATURES_OK) && !features_ok(t)) {
		added &= ~VIRTIO_STATUS_FEATURES_OK; /* the driver reads it back and sees the refusal */
		bad_access(t, "driver features 0x%llx refused (offered 0x%llx)", (unsigned long long)t->drv_features,
			   (unsigned long long)mmio_offered(t));
	}
	if ((added & VIRTIO_STATUS_DRIVER_OK) && !((old | added) & VIRTIO_STATUS_FEATURES_OK)) {
		bad_access(t, "DRIVER_OK 0x%llx without FEATURES_OK (status 0x%llx)", (unsigned long long)v,
			   (unsigned long long)old);
		added &= ~VIRTIO_STATUS_DRIVER_OK;
	}
	t->status = old | (added & ~VIRTIO_STATUS_DEVICE_NEEDS_RESET);
	if ((added & VIRTIO_STATUS_DRIVER_OK) && !(t->status & VIRTIO_STATUS_DEVICE_NEEDS_RESET))
		mmio_driver_ok_locked(t);
}

/* ---- queue registers ----------------------------------------------------------------------------------- */

static struct queue_slot *selected(struct virtio_mmio *t)
{
	return t->queue_sel < t->ops->nr_queues ? &t->q[t->queue_sel] : NULL;
}

/* 4.2.2.3: queue registers may change only while that queue is not ready and the driver is not done. */
static struct queue_slot *writable_queue(struct virtio_mmio *t, uint64_t reg)
{
	struct queue_slot *s = selected(t);

	if (!s) {
		bad_access(t, "queue register 0x%llx with QueueSel %llu past the queues", (unsigned long long)reg,
			   (unsigned long long)t->queue_sel);
		return NULL;
	}
	if (s->ready || (t->status & VIRTIO_STATUS_DRIVER_OK)) {
		bad_access(t, "queue register 0x%llx written while queue %llu is live", (unsigned long long)reg,
			   (unsigned long long)t->queue_sel);
		return NULL;
	}
	return s;
}

static void set_low(uint64_t *v, uint32_t lo)
{
	*v = (*v & ~0xffffffffull) | lo;
}

static void set_high(uint64_t *v, uint32_t hi)
{
	*v = (*v & 0xffffffffull) | ((uint64_t)hi << 32);
}

/* QueueReady = 1: the queue is checked now (docs/security.md case 7); a bad one raises DEVICE_NEEDS_RESET. */
static void write_queue_ready(struct virtio_mmio *t, struct queue_slot *s, uint32_t v)
{
	if (v != 1) {
		/* Without VIRTIO_F_RING_RESET a driver only resets queues through the device status. */
		bad_access(t, "QueueReady %llu for queue %llu", (unsigned long long)v, (unsigned long long)s->index);
		return;
	}
	/* 3.1.1: queues are set up after FEATURES_OK, whose EVENT_IDX and INDIRECT_DESC shape the ring. */
	if (!(t->status & VIRTIO_STATUS_FEATURES_OK)) {
		bad_access(t, "QueueReady for queue %llu before FEATURES_OK", (unsigned long long)s->index);
		return;
	}
	s->vq.size = s->num;
	s->vq.event_idx = t->drv_features & (1ull << VIRTIO_F_EVENT_IDX);
	s->vq.indirect = t->drv_features & (1ull << VIRTIO_F_INDIRECT_DESC);
	if (virtq_activate(&s->vq, t->ctx.mem)) {
		uint64_t n = atomic_fetch_add(&t->stats.needs_reset, 1);

		t->status |= VIRTIO_STATUS_DEVICE_NEEDS_RESET;
		if (log_ratelimit(n))
			log_warn(
			    "%s at 0x%llx: queue %u: size %u, desc 0x%llx, driver 0x%llx, device 0x%llx is not a valid "
			    "virtqueue in guest RAM: device needs reset",
			    t->ops->name, (unsigned long long)t->base, s->index, s->num, (unsigned long long)s->vq.desc,
			    (unsigned long long)s->vq.avail, (unsigned long long)s->vq.used);
		return;
	}
	s->ready = true;
}

static void write_queue_reg(struct virtio_mmio *t, uint64_t reg, uint32_t v)
{
	struct queue_slot *s = writable_queue(t, reg);

	if (!s)
		return;
	switch (reg) {
	case REG_QUEUE_NUM:
		s->num = v <= t->ops->queue_max ? (uint16_t)v : 0; /* 0 (or too big): refused at QueueReady */
		break;
	case REG_QUEUE_READY:
		write_queue_ready(t, s, v);
		break;
	case REG_QUEUE_DESC_LOW:
		set_low(&s->vq.desc, v);
		break;
	case REG_QUEUE_DESC_HIGH:
		set_high(&s->vq.desc, v);
		break;
	case REG_QUEUE_DRIVER_LOW:
		set_low(&s->vq.avail, v);
		break;
	case REG_QUEUE_DRIVER_HIGH:
		set_high(&s->vq.avail, v);
		break;
	case REG_QUEUE_DEVICE_LOW:
		set_low(&s->vq.used, v);
		break;
	case REG_QUEUE_DEVICE_HIGH:
		set_high(&s->vq.used, v);
		break;
	}
}

/* QueueNotify through an MMIO exit (no ioeventfd, or a value no datamatch caught): same path as KVM's. */
static void write_notify(struct virtio_mmio *t, uint32_t v)
{
	uint64_t one = 1;

	if (v >= t->ops->nr_queues) {
		bad_access(t, "QueueNotify %llu past the %llu queues", (unsigned long long)v,
			   (unsigned long long)t->ops->nr_queues);
		return;
	}
	if (write(t->q[v].notify_fd, &one, sizeof(one)) < 0)
		log_warn("%s: notify eventfd: %s", t->ops->name, strerror(errno));
}

static void write_reg(struct virtio_mmio *t, uint64_t reg, uint32_t v)
{
	switch (reg) {
	case REG_DEVICE_FEATURES_SEL:
		t->dev_features_sel = v;
		break;
	case REG_DRIVER_FEATURES_SEL:
		t->drv_features_sel = v;
		break;
	case REG_DRIVER_FEATURES:
		/* 3.1.1: features are written before FEATURES_OK; later writes change nothing. */
		if (t->status & VIRTIO_STATUS_FEATURES_OK)
			bad_access(t, "DriverFeatures 0x%llx after FEATURES_OK (status 0x%llx)", (unsigned long long)v,
				   (unsigned long long)t->status);
		else if (t->drv_features_sel == 0)
			set_low(&t->drv_features, v);
		else if (t->drv_features_sel == 1)
			set_high(&t->drv_features, v);
		break;
	case REG_QUEUE_SEL:
		t->queue_sel = v;
		break;
	case REG_QUEUE_NOTIFY:
		write_notify(t, v);
		break;
	case REG_INTERRUPT_ACK:
		atomic_fetch_and(&t->interrupt_status, ~v);
		break;
	case REG_STATUS:
		write_status(t, v);
		break;
	case REG_SHM_SEL:
		break; /* no shared memory regions: SHMLen reads all-ones */
	case REG_QUEUE_NUM:
	case REG_QUEUE_READY:
	case REG_QUEUE_DESC_LOW:
	case REG_QUEUE_DESC_HIGH:
	case REG_QUEUE_DRIVER_LOW:
	case REG_QUEUE_DRIVER_HIGH:
	case REG_QUEUE_DEVICE_LOW:
	case REG_QUEUE_DEVICE_HIGH:
		write_queue_reg(t, reg, v);
		break;
	default:
		bad_access(t, "write of 0x%llx to read-only or reserved register 0x%llx", (unsigned long long)v,
			   (unsigned long long)reg);
	}
}

static uint32_t read_queue_reg(struct virtio_mmio *t, uint64_t reg)
{
	const struct queue_slot *s = selected(t);

	if (!s)
		return 0; /* 4.2.2.1: QueueNumMax of a queue that is not available reads 0 */
	switch (reg) {
	case REG_QUEUE_NUM_MAX:
		return t->ops->queue_max;
	case REG_QUEUE_READY:
		return s->ready;
	default:
		return 0;
	}
}

static uint32_t read_reg(struct virtio_mmio *t, uint64_t reg)
{
	uint64_t f = mmio_offered(t);

	switch (reg) {
	case REG_MAGIC:
		return VIRTIO_MMIO_MAGIC;
	case REG_VERSION:
		return 2;
	case REG_DEVICE_ID:
		return t->ops->device_id;
	case REG_VENDOR_ID:
		return VIRTIO_MMIO_VENDOR;
	case REG_DEVICE_FEATURES:
		return t->dev_features_sel == 0 ? (uint32_t)f : t->dev_features_sel == 1 ? (uint32_t)(f >> 32) : 0;
	case REG_QUEUE_NUM_MAX:
	case REG_QUEUE_READY:
		return read_queue_reg(t, reg);
	case REG_INTERRUPT_STATUS:
		return atomic_load(&t->interrupt_status);
	case REG_STATUS:
		return t->status;
	case REG_SHM_LEN_LOW:
	case REG_SHM_LEN_HIGH:
		return 0xffffffffu; /* 4.2.2.1: no such region */
	case REG_CONFIG_GENERATION:
		return t->config_generation;
	default:
		return 0;
	}
}

/* ---- the bus device -------------------------------------------------------------------------------------- */

static bool config_access(struct virtio_mmio *t, const struct bus_access *a, uint32_t *off)
{
	uint64_t o = a->offset - VIRTIO_MMIO_CONFIG;

	if (o >= t->ops->config_size || a->len > t->ops->config_size - o) {
		bad_access(t, "config access at 0x%llx of %llu bytes outside the config space",
			   (unsigned long long)a->offset, (unsigned long long)a->len);
		return false;
	}
	*off = (uint32_t)o;
	return true;
}

static void mmio_read(void *dev, const struct bus_access *a, void *data)
{
	struct virtio_mmio *t = dev;
	uint32_t v, off;

	memset(data, 0, a->len);
	if (a->offset >= VIRTIO_MMIO_CONFIG) {
		if (config_access(t, a, &off) && t->ops->config_read)
			t->ops->config_read(t->dev, off, data, a->len);
		return;
	}
	if (a->len != 4 || a->offset % 4) {
		bad_access(t, "register read at 0x%llx of %llu bytes (32-bit accesses only)",
			   (unsigned long long)a->offset, (unsigned long long)a->len);
		return;
	}
	pthread_mutex_lock(&t->lock);
	v = read_reg(t, a->offset);
	pthread_mutex_unlock(&t->lock);
	memcpy(data, &v, 4);
}

static void mmio_write(void *dev, const struct bus_access *a, const void *data)
{
	struct virtio_mmio *t = dev;
	uint32_t v, off;

	if (a->offset >= VIRTIO_MMIO_CONFIG) {
		if (!config_access(t, a, &off))
			return;
		if (t->ops->config_write)
			t->ops->config_write(t->dev, off, data, a->len);
		else
			bad_access(t, "write to the read-only config space at 0x%llx (%llu bytes)",
				   (unsigned long long)a->offset, (unsigned long long)a->len);
		return;
	}
	if (a->len != 4 || a->offset % 4) {
		bad_access(t, "register write at 0x%llx of %llu bytes (32-bit accesses only)",
			   (unsigned long long)a->offset, (unsigned long long)a->len);
		return;
	}
	memcpy(&v, data, 4);
	pthread_mutex_lock(&t->lock);
	write_reg(t, a->offset, v);
	pthread_mutex_unlock(&t->lock);
}

static int mmio_start(void *dev)
{
	struct virtio_mmio *t = dev;

	return t->ops->start ? t->ops->start(t->dev) : 0;
}

static int mmio_late_start(void *dev)
{
	struct virtio_mmio *t = dev;

	return t->ops->late_start ? t->ops->late_start(t->dev) : 0;
}

static void mmio_stop(void *dev)
{
	struct virtio_mmio *t = dev;

	if (t->ops->stop)
		t->ops->stop(t->dev);
}

/* Undoes the KVM wiring, closes the eventfds, destroys the device. The event loop is stopped by now. */
static void mmio_destroy(void *dev)
{
	struct virtio_mmio *t = dev;

	for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++) {
		struct queue_slot *s = &t->q[i];

		if (s->notify_fd < 0)
			continue;
		if (t->ioeventfd)
			t->ctx.ops->ioeventfd(t->ctx.vm, t->base + REG_QUEUE_NOTIFY, 4, true, i, s->notify_fd, false);
		close(s->notify_fd);
	}
	if (t->irq_fd >= 0) {
		t->ctx.ops->irqfd(t->ctx.vm, t->irq, t->irq_fd, false);
		close(t->irq_fd);
	}
	if (t->ops->destroy)
		t->ops->destroy(t->dev);
	pthread_mutex_destroy(&t->lock);
	pthread_mutex_destroy(&t->io_lock);
	free(t);
}

static const struct dev_ops mmio_ops = {
    .name = "virtio-mmio",
    .read = mmio_read,
    .write = mmio_write,
    .start = mmio_start,
    .late_start = mmio_late_start,
    .stop = mmio_stop,
    .destroy = mmio_destroy,
    .quiesce = mmio_quiesce,
    .save = mmio_save,
    .restore = mmio_restore,
};

/* One eventfd per queue, watched by the event loop; KVM signals it on the matching QueueNotify write. */
static int wire_queue(struct virtio_mmio *t, unsigned i)
{
	struct queue_slot *s = &t->q[i];
	struct evloop *l = t->ctx.ops->loop(t->ctx.vm);
	int err;

	s->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->notify_fd < 0)
		return -errno;
	if (!l)
		return -ENODEV;
	err = evloop_add(l, s->notify_fd, EPOLLIN, queue_notified, s);
	if (err)
		return err;
	if (t->ioeventfd) {
		err = t->ctx.ops->ioeventfd(t->ctx.vm, t->base + REG_QUEUE_NOTIFY, 4, true, i, s->notify_fd, true);
		if (err == -ENOTSUP) {
			t->ioeventfd = false;
			log_info("%s: no KVM_IOEVENTFD: queue notifications exit to userspace", t->ops->name);
			return 0;
		}
	}
	return err;
}

/* The interrupt line: an eventfd KVM pulses the pin with (KVM_IRQFD), or KVM_IRQ_LINE without it. */
static int wire_irq(struct virtio_mmio *t)
{
	int err;

	t->irq_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->irq_fd < 0)
		return -errno;
	err = t->ctx.ops->irqfd(t->ctx.vm, t->irq, t->irq_fd, true);
	if (err == -ENOTSUP) {
		close(t->irq_fd);
		t->irq_fd = -1;
		log_info("%s: no KVM_IRQFD: interrupts through KVM_IRQ_LINE", t->ops->name);
		return 0;
	}
	return err;
}

static struct virtio_mmio *transport_new(const struct devctx *ctx, const struct devmgr_window *win,
					 const struct virtio_dev_ops *ops, void *dev, uint64_t features)
{
	struct virtio_mmio *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	*t = (struct virtio_mmio){.ctx = *ctx,
				  .ops = ops,
				  .dev = dev,
				  .features = features,
				  .base = win->base,
				  .irq = win->irq,
				  .irq_fd = -1,
				  .ioeventfd = true};
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->io_lock, NULL);
	for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
		t->q[i] = (struct queue_slot){.notify_fd = -1, .t = t, .index = i};
	return t;
}

int virtio_mmio_create(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win,
		       const struct virtio_dev_ops *ops, void *dev, uint64_t features, struct virtio_mmio **out)
{
	struct virtio_mmio *t;
	struct bus_device *d;
	int err = 0;

	if (ops->nr_queues == 0 || ops->nr_queues > VIRTIO_MMIO_MAX_QUEUES || ops->queue_max == 0 ||
	    ops->queue_max > VIRTQ_MAX_SIZE || (ops->queue_max & (ops->queue_max - 1)) ||
	    ops->config_size > LAYOUT_VIRTIO_MMIO_SIZE - VIRTIO_MMIO_CONFIG)
		err = -EINVAL;
	t = err ? NULL : transport_new(ctx, win, ops, dev, features);
	if (!t) {
		if (ops->destroy)
			ops->destroy(dev);
		return err ? err : -ENOMEM;
	}
	d = bus_add(bus, &mmio_ops, t); /* the bus owns t (and through it dev) from here on */
	if (!d)
		return -ENOSPC;
	for (unsigned i = 0; i < ops->nr_queues && !err; i++)
		err = wire_queue(t, i);
	if (!err)
		err = wire_irq(t);
	if (!err)
		err = bus_map(bus, d, BUS_MMIO, win->base, LAYOUT_VIRTIO_MMIO_SIZE);
	if (!err && out)
		*out = t;
	return err;
}
