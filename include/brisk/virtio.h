/*
 * virtio.h - the virtio-mmio transport (virtio 1.2 section 4.2.2, version 2 registers only) and what a
 * virtio device implements to sit behind it.
 *
 * The transport is the bus device: it owns the 4 KiB window, the registers, feature negotiation, the
 * device status state machine, the queues' configuration, notifications (one eventfd per queue, wired
 * to KVM_IOEVENTFD so a QueueNotify write costs the vCPU no exit to userspace) and interrupts (one
 * eventfd wired to KVM_IRQFD). Device work runs on the VM's I/O event loop, never on a vCPU thread.
 * Without the KVM capabilities it falls back to plain MMIO exits and KVM_IRQ_LINE.
 *
 * Threads: register accesses come from vCPU threads (under the transport's lock); notify and the
 * device's own watched fds run on the event loop under the transport's I/O lock, which reset and
 * activation also take, so a device never sees a notification while it is being reset.
 */
#ifndef BRISK_VIRTIO_H
#define BRISK_VIRTIO_H

#include <stdbool.h>
#include <stdint.h>

#include "brisk/evloop.h"
#include "brisk/virtq.h"

struct bus;
struct devctx;
struct devmgr_window;
struct gmem;
struct snap_reader;
struct snap_writer;
struct virtio_mmio;

/* Device IDs (section 5). */
#define VIRTIO_ID_BLOCK	  2
#define VIRTIO_ID_CONSOLE 3
#define VIRTIO_ID_RNG	  4

/* Transport feature bits (section 6) the transport offers for every device. */
#define VIRTIO_F_INDIRECT_DESC 28
#define VIRTIO_F_EVENT_IDX     29
#define VIRTIO_F_VERSION_1     32

/* Device status bits (section 2.1). */
#define VIRTIO_STATUS_ACKNOWLEDGE	 1u
#define VIRTIO_STATUS_DRIVER		 2u
#define VIRTIO_STATUS_DRIVER_OK		 4u
#define VIRTIO_STATUS_FEATURES_OK	 8u
#define VIRTIO_STATUS_DEVICE_NEEDS_RESET 64u
#define VIRTIO_STATUS_FAILED		 128u

/* InterruptStatus bits (section 4.2.2). */
#define VIRTIO_MMIO_INT_VRING  1u
#define VIRTIO_MMIO_INT_CONFIG 2u

#define VIRTIO_MMIO_MAGIC      0x74726976u /* "virt" */
#define VIRTIO_MMIO_VENDOR     0x4b535242u /* "BRSK" */
#define VIRTIO_MMIO_MAX_QUEUES 8
#define VIRTIO_MMIO_CONFIG     0x100 /* config space offset in the window */

/*
 * A virtio device, behind the transport. Called by the transport only; all
 * callbacks but config_read/config_write, activate and reset run on the
 * event loop thread.
 */
struct virtio_dev_ops {
	const char *name;     /* "virtio-rng", for logs */
	uint32_t device_id;   /* VIRTIO_ID_* */
	unsigned nr_queues;   /* 1..VIRTIO_MMIO_MAX_QUEUES */
	uint16_t queue_max;   /* QueueNumMax, a power of two <= VIRTQ_MAX_SIZE */
	uint64_t features;    /* device-specific feature bits offered */
	uint32_t config_size; /* bytes of config space (section 4.2.2 "Config", from 0x100) */
	/* Config space access at `offset`, with offset + len <= config_size (checked by the transport). */
	void (*config_read)(void *dev, uint32_t offset, void *data, unsigned len);
	void (*config_write)(void *dev, uint32_t offset, const void *data, unsigned len); /* NULL: read-only */
	/*
	 * DRIVER_OK was written with every ready queue valid: start serving
	 * them with the negotiated `features` (vCPU thread, under the I/O lock).
	 * Returns 0, or -errno: the transport sets DEVICE_NEEDS_RESET.
	 */
	int (*activate)(void *dev, uint64_t features);
	/* The driver notified queue `q` (event loop, I/O lock held). */
	void (*notify)(void *dev, unsigned q);
	/*
	 * The driver reset the device (vCPU thread, I/O lock held): finish or
	 * abandon in-flight work and forget the queues; after it returns the
	 * device touches no guest memory until the next activate.
	 */
	void (*reset)(void *dev);
	/*
	 * Snapshot (device.h), each may be NULL. quiesce: vCPUs paused, under
	 * the I/O lock (no notify or watched callback runs meanwhile): finish,
	 * bounded, the work in flight that touches guest memory, pushing and
	 * publishing its completions; 0 or -errno (-ETIMEDOUT). save: after the
	 * transport's own fields, the device's state that its configuration
	 * does not give back (NULL: none). restore: on a fresh device, after the
	 * transport read and checked its fields and before it re-activates the
	 * device (activate, as a DRIVER_OK write, when the saved status had
	 * DRIVER_OK): reads back what save wrote, checks it, touches no guest
	 * memory; 0 or -errno.
	 */
	int (*quiesce)(void *dev);
	int (*save)(void *dev, struct snap_writer *w);
	int (*restore)(void *dev, struct snap_reader *r);
	/* The bus lifecycle (device.h), passed through; each may be NULL. */
	int (*start)(void *dev);
	int (*late_start)(void *dev);
	void (*stop)(void *dev);
	void (*destroy)(void *dev);
};

/*
 * Creates the transport for device `dev` in window `win`, offering the
 * device-specific feature bits `features` (a disk's depend on its image: RO,
 * DISCARD), and adds it to `bus` (which owns both from then on; the transport destroys `dev` through
 * ops->destroy, also when this fails after taking it). Wires each queue's
 * QueueNotify to an eventfd (KVM_IOEVENTFD, datamatch = queue index) watched
 * by the event loop, and the interrupt line to an eventfd (KVM_IRQFD).
 * Returns 0 and *out (may be NULL), or -errno.
 */
int virtio_mmio_create(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win,
		       const struct virtio_dev_ops *ops, void *dev, uint64_t features, struct virtio_mmio **out);

/* Queue `q` of the device (valid between activate and reset). */
struct virtq *virtio_queue(struct virtio_mmio *t, unsigned q);

/*
 * Starts a round of taking chains from queue `q` (virtq.h virtq_iter_init, virtq_next), whose faults the
 * transport handles: a malformed chain (docs/security.md cases 1-5, 8) or one the device drops
 * (virtq_drop) is counted in bad_chains and logged rate-limited; a queue that breaks (case 6) gets
 * virtio_needs_reset. `segs`/`max_segs`: each chain's segments; `budget`: chains per round, or
 * VIRTQ_NO_BUDGET. Returns false when there is no such queue or it is broken already (virtq_next then
 * returns false at once), so a device may skip work it would do before taking a chain.
 */
bool virtio_iter(struct virtio_mmio *t, unsigned q, struct virtq_iter *it, struct virtq_seg *segs, unsigned max_segs,
		 unsigned budget);

/*
 * The device pushed used entries on queue `q`: publish them and interrupt
 * the driver if it asked for it (event loop thread).
 */
void virtio_queue_done(struct virtio_mmio *t, unsigned q);

/*
 * The transport's I/O lock (what notify, watched callbacks, activate and reset run under), for a device
 * changing its state from another thread (a post-boot change through vm_device_call).
 */
void virtio_io_lock(struct virtio_mmio *t);
void virtio_io_unlock(struct virtio_mmio *t);

/* The device's config space changed: ConfigGeneration moves on, a config interrupt is sent. */
void virtio_config_changed(struct virtio_mmio *t);

/*
 * The device or one of its queues is corrupt (a broken virtqueue,
 * docs/security.md case 7): sets DEVICE_NEEDS_RESET and sends a config
 * interrupt (section 2.1.2); the device serves nothing until reset. `why` is
 * logged (rate-limited).
 */
void virtio_needs_reset(struct virtio_mmio *t, const char *why);

/*
 * Watches `fd` on the event loop for the device (its own completions, a
 * host socket): `fn(arg, events)` runs with the I/O lock held, so never
 * concurrently with notify, activate or reset. Returns 0 or -errno.
 */
int virtio_watch(struct virtio_mmio *t, int fd, uint32_t events, evloop_fn fn, void *arg);

/* Guest memory, for the device's own accesses through gmem_ptr. */
const struct gmem *virtio_mem(const struct virtio_mmio *t);

/* Counters, for logs and tests: notifications received, interrupts sent, faults seen. */
struct virtio_stats {
	uint64_t notifies;
	uint64_t interrupts;
	uint64_t bad_chains;   /* malformed requests completed with an error (docs/security.md class G) */
	uint64_t needs_reset;  /* DEVICE_NEEDS_RESET raised */
	uint64_t bad_accesses; /* register accesses of a wrong width or offset, writes in a wrong state */
};
void virtio_stats(const struct virtio_mmio *t, struct virtio_stats *out);
/* Counts a malformed request the device completed with an error, logging `why` rate-limited. */
void virtio_bad_request(struct virtio_mmio *t, const char *why);

#endif
