/* mmio_impl.h - the virtio-mmio transport's state, shared by mmio.c (registers) and mmio_snap.c (snapshots). */
#ifndef BRISK_MMIO_IMPL_H
#define BRISK_MMIO_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "brisk/device.h"
#include "brisk/virtio.h"

/* Register offsets (section 4.2.2). */
enum {
	REG_MAGIC = 0x000,
	REG_VERSION = 0x004,
	REG_DEVICE_ID = 0x008,
	REG_VENDOR_ID = 0x00c,
	REG_DEVICE_FEATURES = 0x010,
	REG_DEVICE_FEATURES_SEL = 0x014,
	REG_DRIVER_FEATURES = 0x020,
	REG_DRIVER_FEATURES_SEL = 0x024,
	REG_QUEUE_SEL = 0x030,
	REG_QUEUE_NUM_MAX = 0x034,
	REG_QUEUE_NUM = 0x038,
	REG_QUEUE_READY = 0x044,
	REG_QUEUE_NOTIFY = 0x050,
	REG_INTERRUPT_STATUS = 0x060,
	REG_INTERRUPT_ACK = 0x064,
	REG_STATUS = 0x070,
	REG_QUEUE_DESC_LOW = 0x080,
	REG_QUEUE_DESC_HIGH = 0x084,
	REG_QUEUE_DRIVER_LOW = 0x090,
	REG_QUEUE_DRIVER_HIGH = 0x094,
	REG_QUEUE_DEVICE_LOW = 0x0a0,
	REG_QUEUE_DEVICE_HIGH = 0x0a4,
	REG_SHM_SEL = 0x0ac,
	REG_SHM_LEN_LOW = 0x0b0,
	REG_SHM_LEN_HIGH = 0x0b4,
	REG_SHM_BASE_LOW = 0x0b8,
	REG_SHM_BASE_HIGH = 0x0bc,
	REG_CONFIG_GENERATION = 0x0fc,
};

#define TRANSPORT_FEATURES                                                                                             \
	((1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_EVENT_IDX) | (1ull << VIRTIO_F_INDIRECT_DESC))

#define VIRTIO_MAX_WATCH 4 /* fds a device may watch besides its queues (virtio_watch) */

struct watch {
	struct virtio_mmio *t;
	evloop_fn fn;
	void *arg;
};

struct queue_slot {
	struct virtq vq;
	int notify_fd; /* eventfd: QueueNotify for this queue (KVM_IOEVENTFD or our own write) */
	bool ready;    /* QueueReady */
	uint16_t num;  /* QueueNum as written */
	struct virtio_mmio *t;
	unsigned index;
};

struct virtio_mmio {
	struct devctx ctx;
	const struct virtio_dev_ops *ops;
	void *dev;
	uint64_t features; /* the device-specific bits offered */
	uint64_t base;
	unsigned irq;
	int irq_fd;		 /* eventfd for KVM_IRQFD, or -1: KVM_IRQ_LINE pulses */
	bool ioeventfd;		 /* QueueNotify goes to the eventfds without an exit */
	pthread_mutex_t lock;	 /* registers below */
	pthread_mutex_t io_lock; /* device work vs reset/activate (virtio.h) */
	uint32_t status;
	uint32_t dev_features_sel, drv_features_sel, queue_sel;
	uint64_t drv_features;
	uint32_t config_generation;
	_Atomic uint32_t interrupt_status;
	_Atomic bool active; /* DRIVER_OK accepted and not reset: notifications are served */
	struct queue_slot q[VIRTIO_MMIO_MAX_QUEUES];
	struct watch watch[VIRTIO_MAX_WATCH];
	unsigned nr_watch;
	struct {
		_Atomic uint64_t notifies, interrupts, bad_chains, needs_reset, bad_accesses;
	} stats;
};

/* mmio.c: the device-specific and transport feature bits offered. */
uint64_t mmio_offered(const struct virtio_mmio *t);
/* mmio.c: DRIVER_OK accepted: activates the device (lock held). */
void mmio_driver_ok_locked(struct virtio_mmio *t);
/* mmio_snap.c: the dev_ops snapshot hooks (device.h). */
int mmio_quiesce(void *dev);
int mmio_save(void *dev, struct snap_writer *w);
int mmio_restore(void *dev, struct snap_reader *r);

#endif
