/* virtio.h - the test guests' virtio-mmio driver: discovery, negotiation, split virtqueues, poll and interrupt modes.
 */
#ifndef BRISK_GUEST_VIRTIO_H
#define BRISK_GUEST_VIRTIO_H

#include "guest.h"

/*
 * A deliberately small driver for conformance guests (virtio 1.2): modern
 * virtio-mmio only (section 4.2.2, Version 2), split virtqueues (2.7), one
 * thread, interrupts off except while virtio_wait waits in interrupt mode.
 * Rings and buffers are static guest memory, identity-mapped, so a pointer
 * is its guest-physical address. Every loop is bounded; every failure is
 * printed with the value seen, prefixed by the device's name.
 *
 * Devices are found the way Linux's drivers/virtio/virtio_mmio.c
 * (vm_cmdline_set) finds them without ACPI or a device tree: one command-line
 * word per device, virtio_mmio.device=<size>[KMG]@<base>:<irq>[:<id>].
 * The device's interrupt is I/O APIC pin <irq>, edge-triggered, active high
 * (brisk and QEMU microvm both route it so).
 */

/* Device IDs (section 5). */
#define VIRTIO_ID_NET	  1
#define VIRTIO_ID_BLOCK	  2
#define VIRTIO_ID_CONSOLE 3
#define VIRTIO_ID_RNG	  4

/* Device status bits (section 2.1). */
#define VIRTIO_STATUS_ACKNOWLEDGE	 1
#define VIRTIO_STATUS_DRIVER		 2
#define VIRTIO_STATUS_DRIVER_OK		 4
#define VIRTIO_STATUS_FEATURES_OK	 8
#define VIRTIO_STATUS_DEVICE_NEEDS_RESET 64
#define VIRTIO_STATUS_FAILED		 128

/* Reserved feature bits (section 6). */
#define VIRTIO_F_INDIRECT_DESC (1ULL << 28)
#define VIRTIO_F_EVENT_IDX     (1ULL << 29)
#define VIRTIO_F_VERSION_1     (1ULL << 32)

/* InterruptStatus bits (section 4.2.2, table 4.1). */
#define VIRTIO_INT_USED	  1u
#define VIRTIO_INT_CONFIG 2u

/* virtio-mmio register offsets (section 4.2.2, table 4.1). */
#define VIRTIO_MMIO_MAGIC_VALUE		0x000
#define VIRTIO_MMIO_VERSION		0x004
#define VIRTIO_MMIO_DEVICE_ID		0x008
#define VIRTIO_MMIO_VENDOR_ID		0x00c
#define VIRTIO_MMIO_DEVICE_FEATURES	0x010
#define VIRTIO_MMIO_DEVICE_FEATURES_SEL 0x014
#define VIRTIO_MMIO_DRIVER_FEATURES	0x020
#define VIRTIO_MMIO_DRIVER_FEATURES_SEL 0x024
#define VIRTIO_MMIO_QUEUE_SEL		0x030
#define VIRTIO_MMIO_QUEUE_NUM_MAX	0x034
#define VIRTIO_MMIO_QUEUE_NUM		0x038
#define VIRTIO_MMIO_QUEUE_READY		0x044
#define VIRTIO_MMIO_QUEUE_NOTIFY	0x050
#define VIRTIO_MMIO_INTERRUPT_STATUS	0x060
#define VIRTIO_MMIO_INTERRUPT_ACK	0x064
#define VIRTIO_MMIO_STATUS		0x070
#define VIRTIO_MMIO_QUEUE_DESC_LOW	0x080
#define VIRTIO_MMIO_QUEUE_DESC_HIGH	0x084
#define VIRTIO_MMIO_QUEUE_DRIVER_LOW	0x090
#define VIRTIO_MMIO_QUEUE_DRIVER_HIGH	0x094
#define VIRTIO_MMIO_QUEUE_DEVICE_LOW	0x0a0
#define VIRTIO_MMIO_QUEUE_DEVICE_HIGH	0x0a4
#define VIRTIO_MMIO_CONFIG_GENERATION	0x0fc
#define VIRTIO_MMIO_CONFIG		0x100

#define VIRTIO_MMIO_MAGIC 0x74726976 /* "virt" */

/* Split-virtqueue layout (section 2.7.5, 2.7.6, 2.7.8). */
#define VIRTQ_DESC_F_NEXT	   1
#define VIRTQ_DESC_F_WRITE	   2
#define VIRTQ_DESC_F_INDIRECT	   4
#define VIRTQ_AVAIL_F_NO_INTERRUPT 1
#define VIRTQ_USED_F_NO_NOTIFY	   1

/* Driver limits: small on purpose (CPL-0 code may run emulated, ENVIRONMENT.md). */
#define VIRTIO_MAX_DEVICES 8	/* command-line words looked at */
#define VIRTIO_MAX_QUEUES  3	/* per device: blk and rng use 1, console (single port) 2, vsock 3 */
#define VIRTQ_MAX_SIZE	   16	/* QueueNum used: min(QueueNumMax, this); a power of two */
#define VIRTQ_MAX_INDIRECT 8	/* entries of one chain's indirect table */
#define VIRTIO_IRQ_VECTOR0 0x30 /* IDT vector of device slot s: VIRTIO_IRQ_VECTOR0 + s */
#define VIRTIO_WAIT_MS	   5000 /* default completion deadline */

struct virtq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct virtq_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[VIRTQ_MAX_SIZE + 1]; /* ring[size] is used_event (EVENT_IDX, section 2.7.10) */
};

struct virtq_used_elem {
	uint32_t id;
	uint32_t len;
};

struct virtq_used {
	uint16_t flags;
	uint16_t idx;
	struct virtq_used_elem ring[VIRTQ_MAX_SIZE + 1]; /* avail_event: the first 2 bytes of ring[size] */
};

/* One split virtqueue and the memory it lives in (alignment: section 2.7, table 2.2). */
struct virtq {
	struct virtq_desc desc[VIRTQ_MAX_SIZE] __attribute__((aligned(16)));
	struct virtq_avail avail __attribute__((aligned(2)));
	struct virtq_used used __attribute__((aligned(4)));
	/* One indirect table per head (section 2.7.5.3): descriptor table alignment. */
	struct virtq_desc indirect[VIRTQ_MAX_SIZE][VIRTQ_MAX_INDIRECT] __attribute__((aligned(16)));
	uint16_t size;			   /* QueueNum; 0: not set up */
	uint16_t avail_idx;		   /* next avail->idx to publish */
	uint16_t last_used;		   /* used->idx consumed so far */
	uint16_t next_free;		   /* rotating descriptor allocator */
	uint16_t num_free;		   /* descriptors not in flight */
	uint8_t chain_len[VIRTQ_MAX_SIZE]; /* descriptors taken by the chain at this head; 0: not in flight */
	uint8_t chain_irq[VIRTQ_MAX_SIZE]; /* the chain was submitted in VIRTIO_IRQ mode */
	uint16_t irq_chains;		   /* chains in flight submitted in VIRTIO_IRQ mode */
	volatile uint16_t irq_used;	   /* used->idx when the ISR last ran: elements before it were signalled */
	uint32_t notifies, suppressed;	   /* QueueNotify writes, and those EVENT_IDX/NO_NOTIFY made unneeded */
};

/* One device window from the command line (vm_cmdline_set's fields). */
struct virtio_mmio_window {
	uint64_t base, size;
	unsigned int irq; /* I/O APIC pin */
	int id;		  /* the optional platform-device id, -1 if absent */
};

struct virtio_dev {
	const char *name;  /* prefix of every message */
	unsigned int slot; /* index of its command-line word: IDT vector VIRTIO_IRQ_VECTOR0 + slot */
	struct virtio_mmio_window win;
	uintptr_t base;
	uint32_t version, device_id, vendor_id;
	uint64_t offered;	      /* DeviceFeatures, both halves */
	uint64_t features;	      /* negotiated */
	int irq_ready;		      /* virtio_irq_setup done */
	volatile uint32_t irq_count;  /* interrupts taken (ISR) */
	volatile uint32_t irq_status; /* InterruptStatus bits seen by the ISR, ORed; the guest may clear it */
	struct virtq vq[VIRTIO_MAX_QUEUES] __attribute__((aligned(4096)));
};

/* One buffer of a chain: guest memory the device reads (out) or writes (in). */
struct virtio_buf {
	void *addr;
	uint32_t len;
};

enum virtio_mode { VIRTIO_POLL, VIRTIO_IRQ };

/* virtio_transfer flags. */
#define VIRTIO_XFER_IRQ	     1u /* wait in interrupt mode (else poll) */
#define VIRTIO_XFER_INDIRECT 2u /* put the chain in an indirect table (INDIRECT_DESC must be negotiated) */

/* ---- command line ------------------------------------------------------------------ */

/*
 * Parse one virtio_mmio.device= value as vm_cmdline_set does: size with an
 * optional K/M/G suffix (memparse), '@', base (0x hex, 0 octal, decimal),
 * ':', irq (decimal, not 0), optionally ':' id, and nothing after.
 * [p, end) is the value. Returns 0, or -1 with *why set.
 */
int virtio_parse_window(const char *p, const char *end, struct virtio_mmio_window *w, const char **why);
/*
 * Every virtio_mmio.device= word of cmdline, in order, into w[0 .. max).
 * A malformed word is printed (and skipped, as Linux does). Returns how many
 * parsed (at most max).
 */
unsigned int virtio_cmdline_windows(const char *cmdline, struct virtio_mmio_window *w, unsigned int max);
/*
 * Copy the value of the word "key=VALUE" into buf (NUL-terminated, at most
 * size - 1 bytes). Returns 0, or -1 if absent or too long. The string twin
 * of lib.c's cmdline_get_u64.
 */
int cmdline_get_str(const char *cmdline, const char *key, char *buf, size_t size);

/* ---- device bring-up ----------------------------------------------------------------- */

/*
 * Find the first device with DeviceID device_id among the command line's
 * windows; probe it (MagicValue, Version 2, DeviceID, VendorID, printing
 * every window looked at) and fill dev; dev->name must be set already,
 * dev->slot becomes the window's index.
 * Returns 0, or -1 after printing why (none found, bad magic or version).
 */
int virtio_find(struct virtio_dev *dev, const char *cmdline, uint32_t device_id);
/* Status = 0 and wait (bounded) until it reads 0 (section 4.2.3.1). Returns 0 or -1. */
int virtio_reset(struct virtio_dev *dev);
/*
 * Reset, ACKNOWLEDGE, DRIVER, read DeviceFeatures (both halves), accept
 * (offered & want) | VERSION_1, FEATURES_OK and check it stuck (section
 * 3.1.1). VERSION_1 must be offered. On failure sets FAILED and returns -1.
 */
int virtio_negotiate(struct virtio_dev *dev, uint64_t want);
/*
 * Set up queue q with min(QueueNumMax, VIRTQ_MAX_SIZE, max_size)
 * entries (section 4.2.3.2): QueueReady must read 0 first and 1 after.
 * Returns 0, or -1 after printing why.
 */
int virtio_queue_setup(struct virtio_dev *dev, unsigned int q, unsigned int max_size);
/* Set DRIVER_OK; returns 0, or -1 if the status then reads NEEDS_RESET or FAILED. */
int virtio_driver_ok(struct virtio_dev *dev);
/*
 * Route the device's I/O APIC pin (win.irq) to vector VIRTIO_IRQ_VECTOR0 +
 * slot on this CPU: IDT gate, legacy PICs masked, LAPIC enabled, redirection
 * entry edge/active high/fixed, masked until virtio_wait waits in interrupt
 * mode. Returns 0, or -1 if the pin is beyond the I/O APIC's entries.
 */
int virtio_irq_setup(struct virtio_dev *dev);

/*
 * The whole bring-up in order: virtio_find, virtio_negotiate(want),
 * virtio_queue_setup for queues 0 .. nqueues-1, virtio_driver_ok,
 * virtio_irq_setup. Returns 0, or -1 after printing which step failed.
 */
int virtio_start(struct virtio_dev *dev, const char *cmdline, uint32_t device_id, uint64_t want, unsigned int nqueues);

static inline uint32_t virtio_read32(const struct virtio_dev *dev, unsigned int reg)
{
	return mmio_read32(dev->base + reg);
}

static inline void virtio_write32(const struct virtio_dev *dev, unsigned int reg, uint32_t v)
{
	mmio_write32(dev->base + reg, v);
}

static inline uint32_t virtio_status(const struct virtio_dev *dev)
{
	return virtio_read32(dev, VIRTIO_MMIO_STATUS);
}

/* ---- configuration space (section 4.2.2: access width = field width) ---------------- */

struct virtio_cfg_field {
	uint16_t off;  /* from the start of the device-specific configuration */
	uint8_t width; /* 1, 2, 4 or 8 (8: two 32-bit reads, low half first) */
	uint64_t *out;
};

/*
 * Read the fields as one consistent snapshot: retry while ConfigGeneration
 * changes across the reads (section 2.5.1, 4.2.2), at most 8 times. Returns
 * the number of retries (>= 0), or -1 if it never settled.
 */
int virtio_config_read(const struct virtio_dev *dev, const struct virtio_cfg_field *f, unsigned int n);

/* ---- requests ----------------------------------------------------------------------------- */

/*
 * Make a chain of n_out device-readable then n_in device-writable buffers
 * available on queue q, directly or (indirect) through the head's indirect
 * table, and notify the device unless EVENT_IDX / NO_NOTIFY says it need
 * not be (section 2.7.13). The avail ring asks for an interrupt in
 * VIRTIO_IRQ mode and not in VIRTIO_POLL mode (2.7.7, 2.7.10). Returns the
 * head, or -1 (too many buffers, no free descriptors, queue not set up).
 */
int virtio_submit(struct virtio_dev *dev, unsigned int q, const struct virtio_buf *bufs, unsigned int n_out,
		  unsigned int n_in, int indirect, enum virtio_mode mode);
/*
 * Wait, bounded by timeout_ms (the LAPIC timer's count, see virtio.c), for
 * the next used element of queue q, in the mode that element's chain was
 * submitted with (a poll-mode chain gets no interrupt). VIRTIO_POLL: interrupts off, used.idx
 * polled. VIRTIO_IRQ: interrupts on until used.idx moved *and* an interrupt
 * came through the I/O APIC pin after the device had published the element
 * (the ISR reads and acknowledges InterruptStatus and records used.idx).
 * The pin is unmasked while any chain submitted in VIRTIO_IRQ mode is in
 * flight, masked otherwise; with it masked, InterruptStatus is acknowledged
 * after a poll. Stores the element's id and len. Returns 0, or -1 after
 * printing what was seen (used.idx, interrupts, InterruptStatus, Status).
 */
int virtio_wait(struct virtio_dev *dev, unsigned int q, enum virtio_mode mode, unsigned int timeout_ms, uint32_t *id,
		uint32_t *len);
/*
 * virtio_submit + virtio_wait (VIRTIO_WAIT_MS) + a check that the used id is
 * the head submitted. flags: VIRTIO_XFER_*. Returns 0 and *len, or -1.
 */
int virtio_transfer(struct virtio_dev *dev, unsigned int q, const struct virtio_buf *bufs, unsigned int n_out,
		    unsigned int n_in, unsigned int flags, uint32_t *len);

/* Print one line describing the device: window, IDs, features offered and negotiated, status. */
void virtio_describe(const struct virtio_dev *dev);

/* ---- raw rings, for the hostile guests (guests/virtio-hostile-*.c) ----------------------------- */

/*
 * A split virtqueue driven by hand: the caller writes descriptors, ring
 * entries and indices as it likes (malformed on purpose), these functions
 * only publish, notify and poll. Either the library's own queue q of a
 * device (virtio_raw_from_queue: the indices stay shared with
 * virtio_submit/virtio_wait, so normal requests work again once every raw
 * chain was consumed with virtio_raw_poll) or memory of the caller's
 * (virtio_raw_setup: any size up to QueueNumMax).
 */
struct virtio_raw {
	struct virtio_dev *dev;
	unsigned int q;
	uint16_t size;
	volatile struct virtq_desc *desc; /* desc[0 .. size) */
	volatile uint16_t *avail;	  /* [0] flags, [1] idx, [2 + i] ring[i], [2 + size] used_event */
	volatile uint32_t *used;	  /* [0] flags | idx << 16, then (id, len) per element from [1] */
	uint16_t *avail_idx;		  /* next avail.idx: the library queue's, or own_avail_idx */
	uint16_t *last_used;		  /* used.idx consumed: the library queue's, or own_last_used */
	uint16_t own_avail_idx, own_last_used;
};

/* Bytes virtio_raw_setup needs for a queue of `size` entries (descriptors, driver and device areas). */
#define VIRTIO_RAW_MEM(size) (16u * (size) + ((6u + 2u * (size) + 3u) & ~3u) + 6u + 8u * (size))

/* Drive the library's queue q of dev (set up by virtio_queue_setup) by hand. */
void virtio_raw_from_queue(struct virtio_raw *r, struct virtio_dev *dev, unsigned int q);
/*
 * Lay a queue of `size` entries out in mem (16-byte aligned, at least
 * VIRTIO_RAW_MEM(size) bytes, zeroed here), program queue q's registers
 * with it and write QueueReady = 1. Returns what QueueReady then reads (1
 * when the device took it).
 */
uint32_t virtio_raw_setup(struct virtio_raw *r, struct virtio_dev *dev, unsigned int q, uint16_t size, void *mem);
/* Write avail ring entry `slot` (taken modulo size) as is. */
void virtio_raw_ring(struct virtio_raw *r, uint16_t slot, uint16_t head);
/* Publish avail.idx = idx as is (after the ring entries) and write QueueNotify, unconditionally. */
void virtio_raw_publish(struct virtio_raw *r, uint16_t idx);
/* One chain: ring entry at the next index, avail.idx moved on by one, notify. */
void virtio_raw_post(struct virtio_raw *r, uint16_t head);
/*
 * Poll, bounded by timeout_ms, for the next used element and consume it
 * whatever its id (no in-flight check). Returns 0 with *id and *len, or -1
 * (nothing printed: the caller says what it expected).
 */
int virtio_raw_poll(struct virtio_raw *r, unsigned int timeout_ms, uint32_t *id, uint32_t *len);
/* used.idx as the device last published it. */
uint16_t virtio_raw_used_idx(const struct virtio_raw *r);

/* Waits about `ms` milliseconds (the LAPIC timer, or a poll budget), touching no device. */
void virtio_sleep_ms(unsigned int ms);
/* Poll the Status register, bounded by timeout_ms, until it has every bit of `bits`; returns the last value read. */
uint32_t virtio_poll_status(const struct virtio_dev *dev, uint32_t bits, unsigned int timeout_ms);
/*
 * Acknowledge what InterruptStatus holds, clear dev->irq_status and unmask
 * the device's pin (interrupts stay off), so that an interrupt the device
 * sends next is not lost; virtio_irq_wait waits for it. Poll mode only: no
 * interrupt-mode chain may be in flight (virtio_wait owns the pin then).
 */
void virtio_irq_arm(struct virtio_dev *dev);
/*
 * With interrupts on, wait (bounded by timeout_ms) until the ISR saw one of
 * `bits` in InterruptStatus; then interrupts off and the pin masked again.
 * Returns the InterruptStatus bits the ISR saw since virtio_irq_arm (0: no
 * interrupt came).
 */
uint32_t virtio_irq_wait(struct virtio_dev *dev, uint32_t bits, unsigned int timeout_ms);

/*
 * Bytes from an entropy device: neither all zero nor all one value (for 16
 * random bytes that fails once in 2^120). Returns 1 when they look random.
 */
int virtio_looks_random(const uint8_t *p, uint32_t n);

#endif
