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
	uint16_t head;		/* what to return in the used ring */
	unsigned nr_out;	/* seg[0 .. nr_out) are readable */
	unsigned nr_in;		/* seg[nr_out .. nr_out + nr_in) are writable */
	uint64_t out_bytes;	/* sum of the readable lengths */
	uint64_t in_bytes;	/* sum of the writable lengths */
	struct virtq_seg *seg;	/* the caller's array (virtq_pop's segs) */
	unsigned fault;		/* VIRTQ_BAD_CHAIN: what was wrong (an enum virtq_fault) */
	const struct gmem *mem; /* the queue's guest RAM (virtq_copy_to marks what it writes dirty) */
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
	uint8_t broken_fault; /* which (enum virtq_fault), and the index or entry that showed it */
	uint16_t broken_value;
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
	VIRTQ_BAD_CHAIN, /* the chain at c->head is malformed (counted in faults[], named by c->fault); it was
			    consumed: complete it with virtq_push(q, c->head, 0) and go on (virtq_next does) */
	VIRTQ_BROKEN,	 /* the queue is corrupt (q->broken set, broken_fault says why): stop, ask for a reset */
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
 * that pops until VIRTQ_EMPTY is notified of the next chain. Logs nothing:
 * devices take chains with virtq_next, which reports faults to the transport.
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

/* ---- the chain iterator: one pop loop for every device ---------------------------------------- */

/*
 * Where an iterator reports what the driver did wrong (the transport, src/virtio/mmio.c: its bad_chains
 * and needs_reset counters, DEVICE_NEEDS_RESET, one rate-limited log line). Either hook may be NULL.
 */
struct virtq_sink {
	/* Chain `head` was completed with used length 0 as malformed; `why` says what was wrong. */
	void (*bad_chain)(void *arg, uint16_t head, const char *why);
	/* The queue broke (fault `f`, the offending index or entry `value`): docs/security.md case 6. */
	void (*broken)(void *arg, enum virtq_fault f, uint16_t value);
};

#define VIRTQ_NO_BUDGET 0xffffffffu /* virtq_iter_init: no bound on the chains one round takes */

/*
 * One round of taking chains from a queue (one event-loop callback). Filled by virtq_iter_init (or the
 * transport's virtio_iter); the device reads `bad` and `more` after the round and leaves the rest alone.
 */
struct virtq_iter {
	struct virtq *q; /* NULL: nothing to take */
	const struct virtq_sink *sink;
	void *sink_arg;
	struct virtq_seg *segs; /* each chain's segments go here */
	unsigned max_segs;
	unsigned budget;     /* chains (malformed ones included) this round may still take */
	uint16_t used_start; /* q->used_idx when the round began: virtq_iter_pushed */
	unsigned bad;	     /* chains completed as malformed this round (virtq_next, virtq_drop) */
	bool more;	     /* the round stopped at its budget: chains may be waiting (come back) */
};

/*
 * Starts a round on `q` (may be NULL) with room for `max_segs` segments per chain in `segs`, taking at most
 * `budget` chains (VIRTQ_NO_BUDGET: no bound; the ring itself bounds what is available) and reporting
 * faults to `sink` (NULL: only counted in q->faults).
 */
void virtq_iter_init(struct virtq_iter *it, struct virtq *q, struct virtq_seg *segs, unsigned max_segs, unsigned budget,
		     const struct virtq_sink *sink, void *sink_arg);

/*
 * The next well-formed chain of the round (virtq_pop underneath): true with *c filled (its segments in the
 * round's segs, valid until the next call). Malformed chains (docs/security.md cases 1-5, 8: VIRTQ_BAD_CHAIN)
 * are completed here with used length 0, counted in it->bad and reported to the sink, and the walk goes on.
 * False when the queue is empty or not activated, when the budget is spent (it->more set: the caller must
 * come back, no notification may come for what is left), or when the queue is broken: a queue that breaks
 * in this call (case 6) is reported to the sink once (the transport sets DEVICE_NEEDS_RESET); one that was
 * broken already is not reported again. Each chain, malformed or not, spends one unit of the budget.
 */
bool virtq_next(struct virtq_iter *it, struct virtq_chain *c);

/*
 * Completes chain `c` of the round with used length 0 as malformed for this device (section 2.7.4.2
 * ordering is the queue's business; this is the device's own rule, e.g. 5.4.6.1: no readable buffer),
 * counts it in it->bad and reports `why` to the sink.
 */
void virtq_drop(struct virtq_iter *it, const struct virtq_chain *c, const char *why);

/*
 * Gives back the well-formed chain virtq_next just returned, untouched, so that the next virtq_next
 * (this round or a later one) returns it again: a rate-limited device leaves a request it may not
 * serve yet in the ring (Firecracker's Queue::undo_pop). Only right after a virtq_next that returned true.
 */
void virtq_unpop(struct virtq_iter *it);

/* Whether used entries were pushed on the round's queue since virtq_iter_init (publish them then). */
static inline bool virtq_iter_pushed(const struct virtq_iter *it)
{
	return it->q && it->q->used_idx != it->used_start;
}

/* ---- the buffer cursor: reading and writing a chain's buffers ----------------------------------- */

/*
 * A position in a list of segments: a chain's readable part (virtq_reader), its writable part
 * (virtq_writer), or any segment list (virtq_cursor_init). The segments came from gmem_ptr (virtq_pop
 * checked each to lie in one RAM region, docs/security.md case 4), and the cursor never forms a pointer
 * outside one: every operation is bounded by the bytes left, so a read or write past the end is short,
 * never out of bounds. Segments of length 0 are passed over. Totals up to 2^32 - 1 per chain (case 5) and
 * beyond for other lists: lengths are 64-bit.
 */
struct virtq_cursor {
	const struct virtq_seg *seg; /* the current segment */
	unsigned n;		     /* segments from seg on */
	uint32_t off;		     /* bytes of seg[0] already passed */
	uint64_t left;		     /* bytes from the cursor to the end */
};

/* A cursor at the start of the chain's readable (driver -> device) segments. */
void virtq_reader(struct virtq_cursor *r, const struct virtq_chain *c);
/* A cursor at the start of the chain's writable (device -> driver) segments. */
void virtq_writer(struct virtq_cursor *w, const struct virtq_chain *c);
/* A cursor at the start of seg[0 .. n). */
void virtq_cursor_init(struct virtq_cursor *cur, const struct virtq_seg *seg, unsigned n);

/* Bytes from the cursor to the end. */
static inline uint64_t virtq_cursor_left(const struct virtq_cursor *cur)
{
	return cur->left;
}

/*
 * The next contiguous piece, of at most `max` bytes: *ptr and its length, the cursor moved past it.
 * 0 at the end (or with max 0), *ptr untouched.
 */
uint64_t virtq_cursor_span(struct virtq_cursor *cur, uint64_t max, uint8_t **ptr);
/* Moves the cursor `len` bytes on (at most to the end); returns how many it moved. */
uint64_t virtq_cursor_skip(struct virtq_cursor *cur, uint64_t len);
/* Copies up to `len` bytes from the cursor into dst and moves past them; returns how many. */
uint64_t virtq_cursor_read(struct virtq_cursor *cur, void *dst, uint64_t len);
/* Copies up to `len` bytes from src at the cursor and moves past them; returns how many. */
uint64_t virtq_cursor_write(struct virtq_cursor *cur, const void *src, uint64_t len);

struct iovec;
/*
 * Describes up to `max` bytes from the cursor as iov[0 .. k), at most `max_iov` entries (none empty), for
 * readv/writev/sendmsg straight into guest memory; the cursor does not move (virtq_cursor_skip by what
 * the call moved). Returns k; *bytes (may be NULL) gets the bytes described.
 */
unsigned virtq_cursor_iov(const struct virtq_cursor *cur, uint64_t max, struct iovec *iov, unsigned max_iov,
			  uint64_t *bytes);
/* The same as segments, for a list to keep beyond the chain (a request handed to another thread). */
unsigned virtq_cursor_segs(const struct virtq_cursor *cur, uint64_t max, struct virtq_seg *out, unsigned max_out,
			   uint64_t *bytes);

/*
 * Copies up to `len` bytes starting `offset` bytes into the chain's
 * readable (out) segments into `dst`; returns bytes copied (a reader, skipped, read).
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
