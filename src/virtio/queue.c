/* queue.c - split virtqueues, device side (virtio 1.2 section 2.7): bounded walks through the checked accessor. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "brisk/log.h"
#include "brisk/mem.h"
#include "brisk/snap_fields.h"
#include "brisk/snapshot.h"
#include "brisk/virtq.h"

/* Rings are little-endian (only legacy devices used the guest's order, section 2.7.3); brisk runs on x86 only. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "ring fields are read without byte swapping");

/* struct virtq_desc (section 2.7.5): 16 bytes, also the entry of an indirect table (2.7.5.3). */
struct desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};
_Static_assert(sizeof(struct desc) == 16, "virtq_desc is 16 bytes");

#define DESC_SIZE  16u
#define USED_ELEM  8u /* struct virtq_used_elem: le32 id, le32 len */
#define RING_HDR   4u /* flags and idx before ring[] in both rings */
#define EVENT_SIZE 2u /* used_event / avail_event after ring[] (VIRTIO_F_EVENT_IDX) */

/* No fault: the walk helpers return a virtq_fault or this. */
#define WALK_OK VIRTQ_FAULT__COUNT

static const char *const fault_names[VIRTQ_FAULT__COUNT] = {
    [VIRTQ_FAULT_NEXT_RANGE] = "next out of range",
    [VIRTQ_FAULT_LOOP] = "chain longer than the queue size (loop)",
    [VIRTQ_FAULT_INDIRECT] = "bad indirect table",
    [VIRTQ_FAULT_ADDR] = "buffer outside guest RAM",
    [VIRTQ_FAULT_TOTAL] = "chain longer than 4 GiB",
    [VIRTQ_FAULT_ORDER] = "readable descriptor after a writable one",
    [VIRTQ_FAULT_SEGS] = "more segments than the device takes",
    [VIRTQ_FAULT_AVAIL_IDX] = "avail.idx moved by more than the queue size",
    [VIRTQ_FAULT_HEAD] = "avail ring entry out of range",
};

const char *virtq_fault_name(enum virtq_fault f)
{
	return (unsigned)f < VIRTQ_FAULT__COUNT ? fault_names[f] : "unknown fault";
}

/* ---- ring fields: every access through gmem_ptr -------------------------- */

static uint64_t avail_idx_gpa(const struct virtq *q)
{
	return q->avail + 2;
}

static uint64_t avail_ring_gpa(const struct virtq *q, uint16_t idx)
{
	return q->avail + RING_HDR + 2ull * (idx & (q->size - 1u));
}

static uint64_t used_event_gpa(const struct virtq *q)
{
	return q->avail + RING_HDR + 2ull * q->size;
}

static uint64_t used_elem_gpa(const struct virtq *q, uint16_t idx)
{
	return q->used + RING_HDR + (uint64_t)USED_ELEM * (idx & (q->size - 1u));
}

static uint64_t avail_event_gpa(const struct virtq *q)
{
	return q->used + RING_HDR + (uint64_t)USED_ELEM * q->size;
}

/*
 * A 16-bit ring field. The areas were checked to lie in RAM and to be
 * aligned by virtq_activate, so gmem_ptr cannot fail here unless the queue's
 * configuration changed under it; the callers then treat the queue as broken.
 */
static uint16_t *field16(const struct virtq *q, uint64_t gpa)
{
	return gmem_ptr(q->mem, gpa, 2);
}

/* Reads avail.idx with acquire: the ring entries and descriptors it exposes are read after it (2.7.13.3). */
static bool load_avail_idx(const struct virtq *q, uint16_t *idx)
{
	uint16_t *p = field16(q, avail_idx_gpa(q));

	if (!p)
		return false;
	*idx = __atomic_load_n(p, __ATOMIC_ACQUIRE);
	return true;
}

/* A 16-bit field of the device area (used ring): written, and marked for a Diff snapshot (mem.h). */
static bool store16(const struct virtq *q, uint64_t gpa, uint16_t v, int order)
{
	uint16_t *p = field16(q, gpa);

	if (!p)
		return false;
	__atomic_store_n(p, v, order);
	gmem_mark_dirty_host(q->mem, p, 2);
	return true;
}

/*
 * Copies descriptor `i` of the table at `table` out of guest memory once.
 * The compiler barrier keeps every later check on this copy: without it the
 * compiler may re-load a field from guest memory, which the guest can change
 * between the check and the use (a double fetch).
 */
static bool read_desc(const struct gmem *mem, uint64_t table, uint16_t i, struct desc *d)
{
	const void *p = gmem_ptr(mem, table + (uint64_t)DESC_SIZE * i, DESC_SIZE);

	if (!p)
		return false;
	memcpy(d, p, sizeof(*d));
	__asm__ __volatile__("" ::: "memory");
	return true;
}

/* ---- faults ---------------------------------------------------------------- */

/*
 * A queue-level fault: the driver corrupted its avail ring (2.7.6, 2.7.13); no more pops until virtq_reset.
 * Counted here; virtq_next reports it (the transport logs it and sets DEVICE_NEEDS_RESET).
 */
static enum virtq_pop_result queue_fault(struct virtq *q, enum virtq_fault f, uint16_t value)
{
	q->faults[f]++;
	q->broken = true;
	q->broken_fault = f;
	q->broken_value = value;
	return VIRTQ_BROKEN;
}

/* A chain-level fault: the chain was consumed; virtq_next completes it with 0 bytes and reports it. */
static enum virtq_pop_result chain_fault(struct virtq *q, struct virtq_chain *c, enum virtq_fault f)
{
	q->faults[f]++;
	c->fault = f;
	c->nr_out = c->nr_in = 0;
	c->out_bytes = c->in_bytes = 0;
	return VIRTQ_BAD_CHAIN;
}

/* ---- the chain walk -------------------------------------------------------- */

struct walk {
	const struct gmem *mem;
	struct virtq_chain *c;
	unsigned max_segs;
	unsigned budget; /* buffer descriptors still allowed: starts at the queue size */
};

/*
 * Adds one buffer descriptor (already copied out) to the chain. Every
 * buffer descriptor, empty ones included, spends one hop of the budget:
 * section 2.7.5.3.1 bounds a chain, indirect entries included, by the
 * queue size, and that bound also ends any cycle.
 */
static enum virtq_fault add_buffer(struct walk *w, const struct desc *d)
{
	struct virtq_chain *c = w->c;
	bool writable = d->flags & VIRTQ_DESC_F_WRITE;
	void *ptr;

	if (w->budget == 0)
		return VIRTQ_FAULT_LOOP;
	w->budget--;
	if (d->len == 0)
		return WALK_OK; /* no bytes, no segment, no ordering constraint */
	/* Section 2.7.4.2: device-writable descriptors come after every device-readable one. */
	if (!writable && c->nr_in)
		return VIRTQ_FAULT_ORDER;
	ptr = gmem_ptr(w->mem, d->addr, d->len);
	if (!ptr)
		return VIRTQ_FAULT_ADDR;
	/* Section 2.7.5.2: at most 2^32 - 1 bytes in all, so used.len can count them. */
	if (c->out_bytes + c->in_bytes + d->len > UINT32_MAX)
		return VIRTQ_FAULT_TOTAL;
	if (c->nr_out + c->nr_in >= w->max_segs)
		return VIRTQ_FAULT_SEGS;
	c->seg[c->nr_out + c->nr_in] = (struct virtq_seg){.ptr = ptr, .len = d->len};
	if (writable) {
		/* the device may write all of it from now on: a Diff snapshot saves it (mem.h gmem_mark_dirty) */
		gmem_mark_dirty_host(w->mem, ptr, d->len);
		c->nr_in++;
		c->in_bytes += d->len;
	} else {
		c->nr_out++;
		c->out_bytes += d->len;
	}
	return WALK_OK;
}

/*
 * Checks the descriptor `ind` that refers to an indirect table (section
 * 2.7.5.3): the feature negotiated, not combined with NEXT (2.7.5.3.1), a
 * length that is a non-zero multiple of 16 and at most VIRTQ_MAX_SIZE
 * entries, the whole table in one RAM region. Its WRITE flag is ignored
 * (2.7.5.3.2).
 */
static enum virtq_fault check_indirect(const struct virtq *q, const struct desc *ind)
{
	if (!q->indirect || (ind->flags & VIRTQ_DESC_F_NEXT))
		return VIRTQ_FAULT_INDIRECT;
	if (ind->len == 0 || ind->len % DESC_SIZE || ind->len / DESC_SIZE > VIRTQ_MAX_SIZE)
		return VIRTQ_FAULT_INDIRECT;
	if (!gmem_ptr(q->mem, ind->addr, ind->len))
		return VIRTQ_FAULT_ADDR;
	return WALK_OK;
}

/* Walks the indirect table `ind` refers to, from entry 0; an entry may not refer to a table itself (2.7.5.3.1). */
static enum virtq_fault walk_indirect(const struct virtq *q, struct walk *w, const struct desc *ind)
{
	enum virtq_fault f = check_indirect(q, ind);
	uint32_t n = ind->len / DESC_SIZE;
	uint16_t i = 0;
	struct desc d;

	if (f != WALK_OK)
		return f;
	for (;;) {
		if (!read_desc(w->mem, ind->addr, i, &d))
			return VIRTQ_FAULT_ADDR;
		if (d.flags & VIRTQ_DESC_F_INDIRECT)
			return VIRTQ_FAULT_INDIRECT;
		f = add_buffer(w, &d);
		if (f != WALK_OK || !(d.flags & VIRTQ_DESC_F_NEXT))
			return f;
		if (d.next >= n)
			return VIRTQ_FAULT_NEXT_RANGE;
		i = d.next;
	}
}

/*
 * Walks the chain at c->head through the descriptor table: zero or more
 * buffer descriptors, the last of which may refer to an indirect table
 * (section 2.7.5.3.2). At most q->size buffer descriptors in all, plus the
 * one that refers to a table.
 */
static enum virtq_fault walk_chain(const struct virtq *q, struct virtq_chain *c, unsigned max_segs)
{
	struct walk w = {.mem = q->mem, .c = c, .max_segs = max_segs, .budget = q->size};
	uint16_t i = c->head;
	enum virtq_fault f;
	struct desc d;

	for (;;) {
		if (!read_desc(q->mem, q->desc, i, &d))
			return VIRTQ_FAULT_ADDR;
		if (d.flags & VIRTQ_DESC_F_INDIRECT)
			return walk_indirect(q, &w, &d);
		f = add_buffer(&w, &d);
		if (f != WALK_OK || !(d.flags & VIRTQ_DESC_F_NEXT))
			return f;
		if (d.next >= q->size)
			return VIRTQ_FAULT_NEXT_RANGE;
		i = d.next;
	}
}

/* ---- the queue ------------------------------------------------------------- */

void virtq_reset(struct virtq *q)
{
	memset(q, 0, sizeof(*q));
}

static int refuse_queue(const struct virtq *q, const char *why)
{
	static uint64_t refused;
	uint64_t n = __atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);

	if (log_ratelimit(n - 1))
		log_warn("virtqueue refused: %s (size %u, desc 0x%llx, driver 0x%llx, device 0x%llx; %llu so far)", why,
			 q->size, (unsigned long long)q->desc, (unsigned long long)q->avail,
			 (unsigned long long)q->used, (unsigned long long)n);
	return -EINVAL;
}

/* The sizes and alignments of section 2.7's table; the event fields only where EVENT_IDX is negotiated. */
static int check_layout(const struct virtq *q, const struct gmem *mem)
{
	uint64_t event = q->event_idx ? EVENT_SIZE : 0;

	if (q->size == 0 || q->size > VIRTQ_MAX_SIZE || (q->size & (q->size - 1u)))
		return refuse_queue(q, "queue size 0, not a power of two, or above the maximum");
	if (q->desc % 16 || q->avail % 2 || q->used % 4)
		return refuse_queue(q, "misaligned ring (descriptors 16, driver area 2, device area 4)");
	if (!gmem_ptr(mem, q->desc, (uint64_t)DESC_SIZE * q->size))
		return refuse_queue(q, "descriptor table outside guest RAM");
	if (!gmem_ptr(mem, q->avail, RING_HDR + 2ull * q->size + event))
		return refuse_queue(q, "driver area outside guest RAM");
	if (!gmem_ptr(mem, q->used, RING_HDR + (uint64_t)USED_ELEM * q->size + event))
		return refuse_queue(q, "device area outside guest RAM");
	return 0;
}

int virtq_activate(struct virtq *q, const struct gmem *mem)
{
	int ret;

	q->mem = NULL;
	ret = check_layout(q, mem);
	if (ret)
		return ret;
	q->mem = mem;
	q->last_avail = q->used_idx = q->signalled = 0;
	q->signalled_valid = false;
	q->notify_off = false;
	/* The device area is the device's: start it consistent with the state above (flags 0, 2.7.10). */
	store16(q, q->used, 0, __ATOMIC_RELAXED);
	store16(q, q->used + 2, 0, __ATOMIC_RELEASE);
	if (q->event_idx)
		store16(q, avail_event_gpa(q), 0, __ATOMIC_RELAXED);
	return 0;
}

/*
 * avail_event := last_avail (section 2.7.10): notify me for the next chain.
 * Then a full fence, so that the store is visible before avail.idx is read
 * again: otherwise the driver may read the old avail_event after adding a
 * chain (no notification) while the device reads the old avail.idx (no
 * chain), and the chain waits forever. Returns false if the queue is broken.
 */
static bool arm_and_recheck(struct virtq *q, uint16_t *idx)
{
	if (!store16(q, avail_event_gpa(q), q->last_avail, __ATOMIC_RELAXED))
		return false;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return load_avail_idx(q, idx);
}

/*
 * avail.idx, and with EVENT_IDX while notifications are on, the re-arming of
 * avail_event when the queue looks empty: a device that pops until
 * VIRTQ_EMPTY is notified of the next chain without further calls.
 */
static bool avail_idx(struct virtq *q, uint16_t *idx)
{
	if (!load_avail_idx(q, idx))
		return false;
	if (*idx != q->last_avail || !q->event_idx || q->notify_off)
		return true;
	return arm_and_recheck(q, idx);
}

enum virtq_pop_result virtq_pop(struct virtq *q, struct virtq_chain *c, struct virtq_seg *segs, unsigned max_segs)
{
	uint16_t idx, *entry, head;
	enum virtq_fault f;

	*c = (struct virtq_chain){.seg = segs, .mem = q->mem};
	if (q->broken)
		return VIRTQ_BROKEN;
	if (!q->mem)
		return VIRTQ_EMPTY;
	if (!avail_idx(q, &idx))
		return queue_fault(q, VIRTQ_FAULT_ADDR, 0);
	if (idx == q->last_avail)
		return VIRTQ_EMPTY;
	/* Section 2.7.13: at most queue-size chains are outstanding; more is a corrupt index, not work. */
	if ((uint16_t)(idx - q->last_avail) > q->size)
		return queue_fault(q, VIRTQ_FAULT_AVAIL_IDX, idx);
	entry = field16(q, avail_ring_gpa(q, q->last_avail));
	if (!entry)
		return queue_fault(q, VIRTQ_FAULT_ADDR, 0);
	head = __atomic_load_n(entry, __ATOMIC_RELAXED);
	if (head >= q->size)
		return queue_fault(q, VIRTQ_FAULT_HEAD, head);
	c->head = head;
	q->last_avail++;
	f = walk_chain(q, c, max_segs);
	if (f != WALK_OK)
		return chain_fault(q, c, f);
	return VIRTQ_CHAIN;
}

void virtq_push(struct virtq *q, uint16_t head, uint32_t written)
{
	uint32_t *elem;

	if (!q->mem || q->broken)
		return;
	elem = gmem_ptr(q->mem, used_elem_gpa(q, q->used_idx), USED_ELEM);
	if (!elem)
		return;
	/* Section 2.7.8.2: id and len are set before used.idx (virtq_publish's release store). */
	__atomic_store_n(&elem[0], head, __ATOMIC_RELAXED);
	__atomic_store_n(&elem[1], written, __ATOMIC_RELAXED);
	gmem_mark_dirty_host(q->mem, elem, USED_ELEM);
	q->used_idx++;
}

/*
 * Section 2.7.7.2 with EVENT_IDX: interrupt when the used index passed
 * used_event while moving from `old` to `now`, i.e. used_event is in
 * [old, now) modulo 2^16 (Linux's vring_need_event).
 */
static bool need_event(uint16_t used_event, uint16_t now, uint16_t old)
{
	return (uint16_t)(now - used_event - 1) < (uint16_t)(now - old);
}

bool virtq_publish(struct virtq *q)
{
	uint16_t old = q->signalled, *p;
	bool valid = q->signalled_valid;

	if (!q->mem || q->broken)
		return false;
	if (!store16(q, q->used + 2, q->used_idx, __ATOMIC_RELEASE))
		return false;
	if (q->used_idx == old)
		return false; /* nothing new since the last publish */
	q->signalled = q->used_idx;
	q->signalled_valid = true;
	/* used.idx must be visible before the driver's suppression is read, as in 2.7.13.4.1 for the driver. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (q->event_idx) {
		p = field16(q, used_event_gpa(q));
		if (!valid || !p)
			return true; /* first publish: no reference point yet, interrupt */
		return need_event(__atomic_load_n(p, __ATOMIC_RELAXED), q->used_idx, old);
	}
	p = field16(q, q->avail);
	return !p || !(__atomic_load_n(p, __ATOMIC_RELAXED) & VIRTQ_AVAIL_F_NO_INTERRUPT);
}

/*
 * Section 2.7.10: without EVENT_IDX the used ring's flags say NO_NOTIFY;
 * with it, avail_event says which avail index to notify at: last_avail
 * (the next chain) to enable, last_avail - 1 (already passed: no
 * notification until the index wraps) to disable.
 */
bool virtq_notifications(struct virtq *q, bool enable)
{
	uint16_t idx;

	if (!q->mem || q->broken)
		return false;
	q->notify_off = !enable;
	if (q->event_idx)
		store16(q, avail_event_gpa(q), (uint16_t)(q->last_avail - (enable ? 0 : 1)), __ATOMIC_RELAXED);
	else
		store16(q, q->used, enable ? 0 : VIRTQ_USED_F_NO_NOTIFY, __ATOMIC_RELAXED);
	if (!enable)
		return false;
	/* The same race as arm_and_recheck: the store must be visible before avail.idx is read. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return load_avail_idx(q, &idx) && idx != q->last_avail;
}

/* ---- the chain iterator ------------------------------------------------------------------------ */

void virtq_iter_init(struct virtq_iter *it, struct virtq *q, struct virtq_seg *segs, unsigned max_segs, unsigned budget,
		     const struct virtq_sink *sink, void *sink_arg)
{
	*it = (struct virtq_iter){.q = q,
				  .sink = sink,
				  .sink_arg = sink_arg,
				  .segs = segs,
				  .max_segs = max_segs,
				  .budget = budget,
				  .used_start = q ? q->used_idx : 0};
}

/* One chain of the budget; false (and `more`) once it is spent. */
static bool spend(struct virtq_iter *it)
{
	if (it->budget == VIRTQ_NO_BUDGET)
		return true;
	if (it->budget == 0) {
		it->more = true;
		return false;
	}
	it->budget--;
	return true;
}

static void report_bad(struct virtq_iter *it, uint16_t head, const char *why)
{
	it->bad++;
	if (it->sink && it->sink->bad_chain)
		it->sink->bad_chain(it->sink_arg, head, why);
}

void virtq_drop(struct virtq_iter *it, const struct virtq_chain *c, const char *why)
{
	virtq_push(it->q, c->head, 0);
	report_bad(it, c->head, why);
}

void virtq_unpop(struct virtq_iter *it)
{
	it->q->last_avail--;
	if (it->budget != VIRTQ_NO_BUDGET)
		it->budget++;
}

bool virtq_next(struct virtq_iter *it, struct virtq_chain *c)
{
	struct virtq *q = it->q;

	if (!q || q->broken)
		return false; /* reported when it broke */
	while (spend(it)) {
		switch (virtq_pop(q, c, it->segs, it->max_segs)) {
		case VIRTQ_CHAIN:
			return true;
		case VIRTQ_BAD_CHAIN: /* docs/security.md cases 1-5, 8: consumed, completed empty, and on */
			virtq_push(q, c->head, 0);
			report_bad(it, c->head, virtq_fault_name((enum virtq_fault)c->fault));
			continue;
		case VIRTQ_BROKEN: /* case 6: broken in this pop (it was not before) */
			if (it->sink && it->sink->broken)
				it->sink->broken(it->sink_arg, q->broken_fault, q->broken_value);
			return false;
		case VIRTQ_EMPTY:
			return false;
		}
	}
	return false;
}

/* ---- the buffer cursor ------------------------------------------------------------------------- */

void virtq_cursor_init(struct virtq_cursor *cur, const struct virtq_seg *seg, unsigned n)
{
	uint64_t left = 0;

	for (unsigned i = 0; i < n; i++)
		left += seg[i].len;
	*cur = (struct virtq_cursor){.seg = seg, .n = n, .left = left};
}

void virtq_reader(struct virtq_cursor *r, const struct virtq_chain *c)
{
	*r = (struct virtq_cursor){.seg = c->seg, .n = c->nr_out, .left = c->out_bytes};
}

void virtq_writer(struct virtq_cursor *w, const struct virtq_chain *c)
{
	*w = (struct virtq_cursor){.seg = c->seg + c->nr_out, .n = c->nr_in, .left = c->in_bytes};
}

/*
 * The one walk over segments: every other cursor operation is made of it. Passes used-up (and empty)
 * segments, then takes at most `max` bytes of the current one.
 */
uint64_t virtq_cursor_span(struct virtq_cursor *cur, uint64_t max, uint8_t **ptr)
{
	uint64_t take;

	while (cur->n && cur->off >= cur->seg->len) {
		cur->seg++;
		cur->n--;
		cur->off = 0;
	}
	if (!cur->n || !max)
		return 0;
	take = cur->seg->len - cur->off;
	if (take > max)
		take = max;
	*ptr = cur->seg->ptr + cur->off;
	cur->off += (uint32_t)take; /* take <= len - off: no overflow */
	cur->left -= take;
	return take;
}

uint64_t virtq_cursor_skip(struct virtq_cursor *cur, uint64_t len)
{
	uint64_t done = 0, n;
	uint8_t *p;

	while (done < len && (n = virtq_cursor_span(cur, len - done, &p)) != 0)
		done += n;
	return done;
}

uint64_t virtq_cursor_read(struct virtq_cursor *cur, void *dst, uint64_t len)
{
	uint64_t done = 0, n;
	uint8_t *p;

	while (done < len && (n = virtq_cursor_span(cur, len - done, &p)) != 0) {
		memcpy((uint8_t *)dst + done, p, n);
		done += n;
	}
	return done;
}

uint64_t virtq_cursor_write(struct virtq_cursor *cur, const void *src, uint64_t len)
{
	uint64_t done = 0, n;
	uint8_t *p;

	while (done < len && (n = virtq_cursor_span(cur, len - done, &p)) != 0) {
		memcpy(p, (const uint8_t *)src + done, n);
		done += n;
	}
	return done;
}

unsigned virtq_cursor_iov(const struct virtq_cursor *cur, uint64_t max, struct iovec *iov, unsigned max_iov,
			  uint64_t *bytes)
{
	struct virtq_cursor c = *cur;
	uint64_t done = 0, n;
	unsigned k = 0;
	uint8_t *p;

	while (k < max_iov && (n = virtq_cursor_span(&c, max - done, &p)) != 0) {
		iov[k++] = (struct iovec){.iov_base = p, .iov_len = (size_t)n};
		done += n;
	}
	if (bytes)
		*bytes = done;
	return k;
}

unsigned virtq_cursor_segs(const struct virtq_cursor *cur, uint64_t max, struct virtq_seg *out, unsigned max_out,
			   uint64_t *bytes)
{
	struct virtq_cursor c = *cur;
	uint64_t done = 0, n;
	unsigned k = 0;
	uint8_t *p;

	while (k < max_out && (n = virtq_cursor_span(&c, max - done, &p)) != 0) {
		out[k++] = (struct virtq_seg){.ptr = p, .len = (uint32_t)n}; /* n <= a segment's length */
		done += n;
	}
	if (bytes)
		*bytes = done;
	return k;
}

uint64_t virtq_copy_from(const struct virtq_chain *c, uint64_t offset, void *dst, uint64_t len)
{
	struct virtq_cursor r;

	virtq_reader(&r, c);
	if (virtq_cursor_skip(&r, offset) != offset)
		return 0;
	return virtq_cursor_read(&r, dst, len);
}

uint64_t virtq_copy_to(const struct virtq_chain *c, uint64_t offset, const void *src, uint64_t len)
{
	struct virtq_cursor w;

	virtq_writer(&w, c);
	if (virtq_cursor_skip(&w, offset) != offset)
		return 0;
	/*
	 * A chain a device keeps across a snapshot (virtio-net's first buffer of a merged frame, written once the
	 * frame's last buffer is in) is written after the pop that marked it: marked again here.
	 */
	if (c->mem) {
		struct virtq_cursor m = w;
		uint64_t left = len, n;
		uint8_t *p;

		while (left && (n = virtq_cursor_span(&m, left, &p)) != 0) {
			gmem_mark_dirty_host(c->mem, p, n);
			left -= n;
		}
	}
	return virtq_cursor_write(&w, src, len);
}

/* ---- snapshot ---------------------------------------------------------------- */

/* What a queue's record describes: the queue, and whether it is activated (bound to guest memory). */
struct virtq_image {
	struct virtq q;
	bool active;
};

static const struct snap_field virtq_fields[] = {
    SNAP_UINT(struct virtq_image, q.size, 2),
    SNAP_UINT(struct virtq_image, q.desc, 8),
    SNAP_UINT(struct virtq_image, q.avail, 8),
    SNAP_UINT(struct virtq_image, q.used, 8),
    SNAP_FLAG(struct virtq_image, q.event_idx),
    SNAP_FLAG(struct virtq_image, q.indirect),
    SNAP_FLAG(struct virtq_image, active),
    SNAP_UINT(struct virtq_image, q.last_avail, 2),
    SNAP_UINT(struct virtq_image, q.used_idx, 2),
    SNAP_UINT(struct virtq_image, q.signalled, 2),
    SNAP_FLAG(struct virtq_image, q.signalled_valid),
    SNAP_FLAG(struct virtq_image, q.notify_off),
    SNAP_FLAG(struct virtq_image, q.broken),
};
static const struct snap_record virtq_record = SNAP_RECORD("virtqueue", virtq_fields);

int virtq_save(const struct virtq *q, struct snap_writer *w, uint32_t version)
{
	struct virtq_image img = {.q = *q, .active = q->mem != NULL};

	return snap_record_put(w, &virtq_record, &img, version);
}

int virtq_restore(struct virtq *q, struct snap_reader *r, uint32_t version, const struct gmem *mem, uint16_t size_max,
		  char *why, size_t whylen)
{
	struct virtq_image img = {0};
	struct virtq n;
	bool active;

	if (snap_record_get(r, &virtq_record, &img, version, why, whylen))
		return -EINVAL;
	n = img.q;
	active = img.active;
	if (active && n.size > size_max) {
		snprintf(why, whylen, "%s", "queue size above the device's maximum");
		return -EINVAL;
	}
	if (active && check_layout(&n, mem)) {
		snprintf(why, whylen, "%s", "queue size, alignment or ring address (outside guest RAM)");
		return -EINVAL;
	}
	/* Section 2.7.13: the device holds at most queue-size chains it has not returned. */
	if (active && (uint16_t)(n.last_avail - n.used_idx) > n.size) {
		snprintf(why, whylen, "%s", "used index more than the queue size behind the available index");
		return -EINVAL;
	}
	if (!active) { /* not activated: only the driver's configuration means anything */
		n.last_avail = n.used_idx = n.signalled = 0;
		n.signalled_valid = n.notify_off = n.broken = false;
	}
	n.mem = active ? mem : NULL;
	*q = n;
	return 0;
}
