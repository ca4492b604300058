/*
 * virtq.h - split virtqueues, device side (virtio 1.2 section 2.7), shared by every virtio device.
 *
 * Every descriptor, ring and buffer is reached through gmem_ptr (the one
 * checked accessor): a chain's segments are host pointers whose whole
 * [ptr, ptr+len) lies in one RAM region. Every walk is bounded by the queue
 * size. The guest is hostile (docs/security.md cases 1-9): a
 * malformed *chain* is consumed and reported without its segments (the
 * device completes it with 0 bytes; a well-formed chain carrying a bad
 * request gets the device's error status instead), a malformed *queue*
 * marks it broken (the transport sets DEVICE_NEEDS_RESET and the
 * device stops using it). Neither is ever a crash, a spin or an access
 * outside guest RAM.
 *
 * Threading: a queue is used by one thread at a time (the device's I/O
 * thread); configuration (virtq_* setters, virtq_reset) happens with the
 * device stopped. The guest writes the rings concurrently: indices are read
 * with acquire semantics, the used index published with release semantics
 * (section 2.7.13), and a descriptor's fields are copied once before they
 * are checked (no double fetch).
 */
#ifndef BRISK_VIRTQ_H
#define BRISK_VIRTQ_H

#include <stdbool.h>
#include <stdint.h>

struct gmem;

#define VIRTQ_MAX_SIZE 1024u /* QueueNumMax brisk offers (section 2.7: at most 32768) */

/* Descriptor flags (section 2.7.5) and ring flags (2.7.6, 2.7.8). */
#define VIRTQ_DESC_F_NEXT	   1u
#define VIRTQ_DESC_F_WRITE	   2u
#define VIRTQ_DESC_F_INDIRECT	   4u
#define VIRTQ_AVAIL_F_NO_INTERRUPT 1u
#define VIRTQ_USED_F_NO_NOTIFY	   1u

/* One buffer segment of a chain: host memory the guest gave, checked to lie in RAM. */
struct virtq_seg {
	uint8_t *ptr;
	uint32_t len;
};

/*
 * A popped descriptor chain. Driver-readable ("out") segments come first,
 * then device-writable ("in") ones (section 2.7.4.2: a readable
 * descriptor after a writable one is a malformed chain).
 */
struct virtq_chain {
	uint16_t head;	       /* what to return in the used ring */
	unsigned nr_out;       /* seg[0 .. nr_out) are readable */
	unsigned nr_in;	       /* seg[nr_out .. nr_out + nr_in) are writable */
	uint64_t out_bytes;    /* sum of the readable lengths */
	uint64_t in_bytes;     /* sum of the writable lengths */
	struct virtq_seg *seg; /* the caller's array (virtq_pop's segs) */
};

/* Why a chain or a queue was refused: counted per queue, for logs and tests. */
enum virtq_fault {
	VIRTQ_FAULT_NEXT_RANGE = 0, /* a `next` >= queue size (case 1) */
	VIRTQ_FAULT_LOOP,	    /* more descriptors than the queue size: a cycle or an over-long chain (2) */
	VIRTQ_FAULT_INDIRECT,	    /* indirect table of length 0, not a multiple of 16, nested, too large,
				       or INDIRECT not negotiated (3) */
	VIRTQ_FAULT_ADDR,	    /* a buffer or table outside guest RAM, wrapping, across the hole (4) */
	VIRTQ_FAULT_TOTAL,	    /* total length of a chain above UINT32_MAX (5) */
	VIRTQ_FAULT_ORDER,	    /* a readable descriptor after a writable one (8) */
	VIRTQ_FAULT_SEGS,	    /* more segments than the caller's array holds */
	VIRTQ_FAULT_AVAIL_IDX,	    /* avail.idx moved by more than the queue size (6): the queue is broken */
	VIRTQ_FAULT_HEAD,	    /* an avail ring entry >= queue size: the queue is broken */
	VIRTQ_FAULT__COUNT
};

struct virtq {
	/* Written by the transport while the queue is not ready (QueueNum, QueueDesc/Driver/Device). */
	uint16_t size;	/* QueueNum */
	uint64_t desc;	/* guest-physical: descriptor table, 16-byte aligned */
	uint64_t avail; /* driver area: 2-byte aligned */
	uint64_t used;	/* device area: 4-byte aligned */
	bool event_idx; /* VIRTIO_F_EVENT_IDX negotiated (section 2.7.10) */
	bool indirect;	/* VIRTIO_F_INDIRECT_DESC negotiated (2.7.5.3) */
	/* Set by virtq_activate; NULL while the queue is not usable. */
	const struct gmem *mem;
	/* Device state. */
	uint16_t last_avail;  /* next avail ring slot to consume */
	uint16_t used_idx;    /* next used ring slot to fill (published by virtq_publish) */
	uint16_t signalled;   /* used_idx at the last virtq_publish: the "old" of section 2.7.7.2 */
	bool signalled_valid; /* false until the first virtq_publish that had something new */
	bool notify_off;      /* virtq_notifications(q, false) in effect */
	bool broken;	      /* a queue-level fault: nothing more is popped until reset */
	uint64_t faults[VIRTQ_FAULT__COUNT];
};

/* Forgets everything the driver configured and the device did (device reset, section 2.4). */
void virtq_reset(struct virtq *q);

/*
 * Checks the configured queue (section 2.7 and 4.2.2.2 "QueueReady"): size a
 * power of two in 1..VIRTQ_MAX_SIZE, each area aligned and wholly inside
 * guest RAM (used_event/avail_event included when event_idx); on success
 * binds it to `mem`, starts at index 0 (the driver's avail.idx must be 0
 * then) with notifications on, and zeroes the device area's flags, idx and
 * avail_event. Does not clear `broken`: only virtq_reset does. Returns 0,
 * or -EINVAL (the transport sets DEVICE_NEEDS_RESET: docs/security.md case 7).
 */
int virtq_activate(struct virtq *q, const struct gmem *mem);

/* Results of virtq_pop. */
enum virtq_pop_result {
	VIRTQ_EMPTY = 0, /* nothing available */
	VIRTQ_CHAIN = 1, /* *c is a valid chain */
	VIRTQ_BAD_CHAIN, /* the chain at c->head is malformed (counted in faults[]); it was consumed:
			    complete it with virtq_push(q, c->head, 0) and go on */
	VIRTQ_BROKEN,	 /* the queue is corrupt (q->broken is set): stop, ask for a reset */
};

/*
 * Takes the next available chain (section 2.7.13.1 in reverse): reads
 * avail.idx (acquire), the head, and walks the chain, following at most one
 * indirect table, at most q->size buffer descriptors in all (direct and
 * indirect together; the descriptor that refers to a table is not a
 * buffer), filling segs[0 .. max_segs). Descriptors of length 0 are skipped.
 * Never touches memory outside guest RAM. A queue that is not activated is
 * VIRTQ_EMPTY. With event_idx and notifications on, finding the queue empty
 * re-arms avail_event (as virtq_notifications(q, true) does), so a device
 * that pops until VIRTQ_EMPTY is notified of the next chain.
 */
enum virtq_pop_result virtq_pop(struct virtq *q, struct virtq_chain *c, struct virtq_seg *segs, unsigned max_segs);

/*
 * Returns chain `head` with `written` bytes written into its writable
 * segments (the used ring entry; not yet visible to the driver). Does
 * nothing on a broken or inactive queue.
 */
void virtq_push(struct virtq *q, uint16_t head, uint32_t written);

/*
 * Makes the pushed entries visible (used.idx, release) and says whether the
 * driver wants an interrupt for them (VIRTQ_AVAIL_F_NO_INTERRUPT, or with
 * event_idx the used_event field, section 2.7.7). False when nothing was
 * pushed since the last publish, and on a broken or inactive queue.
 */
bool virtq_publish(struct virtq *q);

/*
 * Available buffer notification suppression (section 2.7.10): while the
 * device is draining a queue it may ask the driver not to notify it.
 * `enable` true re-enables notifications and returns true when more chains
 * arrived in the meantime (the caller must then keep popping: no
 * notification will come for those). Notifications are on after
 * virtq_activate. Returns false when disabling.
 */
bool virtq_notifications(struct virtq *q, bool enable);

/*
 * Copies up to `len` bytes starting `offset` bytes into the chain's
 * readable (out) segments into `dst`; returns bytes copied.
 */
uint64_t virtq_copy_from(const struct virtq_chain *c, uint64_t offset, void *dst, uint64_t len);
/* Copies `len` bytes into the chain's writable (in) segments starting `offset` into them; returns bytes copied. */
uint64_t virtq_copy_to(const struct virtq_chain *c, uint64_t offset, const void *src, uint64_t len);

struct snap_writer;
struct snap_reader;

/*
 * Snapshot of one queue (snapshot.h), one record (snap_fields.h) inside the
 * transport's section: its configuration (size, the three areas, event_idx,
 * indirect), whether it is activated, and the device's indices (last_avail,
 * used_idx, signalled and the flags beside them). The rings themselves are
 * guest memory, saved with it. `version` is the enclosing section's (the
 * fields it holds). Returns 0 or -errno.
 */
int virtq_save(const struct virtq *q, struct snap_writer *w, uint32_t version);

/*
 * Reads what virtq_save wrote into *q (the fields a section of `version`
 * holds), checking it as virtq_activate checks a driver's configuration
 * (section 2.7: size a power of two <= `size_max`, areas aligned and inside
 * `mem`) and that at most `size` chains are outstanding (used_idx ..
 * last_avail); an activated queue is bound to `mem` without touching guest
 * memory (the restored rings are the driver's). *q is written only on
 * success. Returns 0, or -EINVAL with `why` naming the field.
 */
int virtq_restore(struct virtq *q, struct snap_reader *r, uint32_t version, const struct gmem *mem, uint16_t size_max,
		  char *why, size_t whylen);

/* "next out of range", ...: for log lines. */
const char *virtq_fault_name(enum virtq_fault f);

#endif
