/* test_virtq.c - split virtqueues against a fake driver writing real guest RAM: chains, hostile rings, notifications.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "brisk/layout.h"
#include "brisk/log.h"
#include "brisk/mem.h"
#include "brisk/virtq.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

/* Where the fake driver puts things in guest RAM. */
#define DESC  0x10000ULL  /* descriptor table (16-aligned) */
#define AVAIL 0x20000ULL  /* driver area */
#define USED  0x30000ULL  /* device area */
#define TABLE 0x40000ULL  /* indirect tables */
#define BUF   0x100000ULL /* buffers */

#define F_NEXT	VIRTQ_DESC_F_NEXT
#define F_WRITE VIRTQ_DESC_F_WRITE
#define F_IND	VIRTQ_DESC_F_INDIRECT

#define EVENT_IDX 0x1u /* drv_init feature flags */
#define INDIRECT  0x2u

/* The fake driver: guest RAM, the device's queue, and the driver's own avail index. */
struct drv {
	struct gmem mem;
	struct virtq q;
	uint16_t avail_idx;
	struct virtq_seg seg[64];
	struct virtq_chain c;
};

static struct drv D;

static void configure(struct drv *d, uint16_t size, unsigned features)
{
	virtq_reset(&d->q);
	d->q.size = size;
	d->q.desc = DESC;
	d->q.avail = AVAIL;
	d->q.used = USED;
	d->q.event_idx = features & EVENT_IDX;
	d->q.indirect = features & INDIRECT;
	d->avail_idx = 0;
}

/* Guest RAM of `ram` bytes, zeroed rings, an activated queue of `size`. */
static struct drv *drv_init(uint64_t ram, uint16_t size, unsigned features)
{
	struct drv *d = &D;

	memset(d, 0, sizeof(*d));
	assert_int_equal(gmem_init(&d->mem, ram, 0), 0);
	configure(d, size, features);
	assert_int_equal(virtq_activate(&d->q, &d->mem), 0);
	assert_ptr_equal(d->q.mem, &d->mem);
	return d;
}

static void drv_fini(struct drv *d)
{
	gmem_destroy(&d->mem);
}

static void wr16(struct drv *d, uint64_t gpa, uint16_t v)
{
	assert_int_equal(gmem_write(&d->mem, gpa, &v, 2), 0);
}

static uint16_t rd16(struct drv *d, uint64_t gpa)
{
	uint16_t v;

	assert_int_equal(gmem_read(&d->mem, gpa, &v, 2), 0);
	return v;
}

static uint32_t rd32(struct drv *d, uint64_t gpa)
{
	uint32_t v;

	assert_int_equal(gmem_read(&d->mem, gpa, &v, 4), 0);
	return v;
}

/* Descriptor `i` of the table at `table` (section 2.7.5, little-endian like the host). */
static void set_desc(struct drv *d, uint64_t table, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags,
		     uint16_t next)
{
	uint8_t raw[16];

	memcpy(raw, &addr, 8);
	memcpy(raw + 8, &len, 4);
	memcpy(raw + 12, &flags, 2);
	memcpy(raw + 14, &next, 2);
	assert_int_equal(gmem_write(&d->mem, table + 16ULL * i, raw, 16), 0);
}

static void set_avail_idx(struct drv *d, uint16_t idx)
{
	wr16(d, AVAIL + 2, idx);
}

/* Offers chain `head`: ring[idx % size] = head, then idx + 1 (section 2.7.13.2-3). */
static void offer(struct drv *d, uint16_t head)
{
	wr16(d, AVAIL + 4 + 2ULL * (d->avail_idx % d->q.size), head);
	set_avail_idx(d, ++d->avail_idx);
}

static uint64_t used_event_gpa(struct drv *d)
{
	return AVAIL + 4 + 2ULL * d->q.size;
}

static uint64_t avail_event_gpa(struct drv *d)
{
	return USED + 4 + 8ULL * d->q.size;
}

static enum virtq_pop_result pop(struct drv *d, unsigned max_segs)
{
	return virtq_pop(&d->q, &d->c, d->seg, max_segs);
}

/* Exactly `n` faults of kind `f` and none of any other kind. */
static void assert_faults(struct drv *d, enum virtq_fault f, uint64_t n)
{
	for (int i = 0; i < VIRTQ_FAULT__COUNT; i++)
		assert_int_equal(d->q.faults[i], i == (int)f ? n : 0);
}

static void assert_no_faults(struct drv *d)
{
	for (int i = 0; i < VIRTQ_FAULT__COUNT; i++)
		assert_int_equal(d->q.faults[i], 0);
}

/* One chain of `head` offered and refused with `f`; the queue lives on. */
static void assert_bad_chain(struct drv *d, uint16_t head, enum virtq_fault f, uint64_t n)
{
	offer(d, head);
	assert_int_equal(pop(d, 64), VIRTQ_BAD_CHAIN);
	assert_int_equal(d->c.head, head);
	assert_int_equal(d->c.nr_out + d->c.nr_in, 0);
	assert_int_equal(d->c.out_bytes + d->c.in_bytes, 0);
	assert_false(d->q.broken);
	assert_faults(d, f, n);
	virtq_push(&d->q, d->c.head, 0);
	virtq_publish(&d->q);
	assert_int_equal(pop(d, 64), VIRTQ_EMPTY);
}

static void *gpa(struct drv *d, uint64_t addr, uint64_t len)
{
	return gmem_ptr(&d->mem, addr, len);
}

/* ---- chains ------------------------------------------------------------------ */

static void test_inactive_and_empty(void **state)
{
	struct virtq q;
	struct virtq_chain c;
	struct drv *d;

	(void)state;
	virtq_reset(&q);
	assert_int_equal(virtq_pop(&q, &c, NULL, 0), VIRTQ_EMPTY); /* not activated */
	assert_false(virtq_publish(&q));
	assert_false(virtq_notifications(&q, true));
	d = drv_init(16 * MiB, 8, 0);
	assert_int_equal(pop(d, 64), VIRTQ_EMPTY);
	assert_false(virtq_publish(&d->q)); /* nothing pushed */
	assert_no_faults(d);
	drv_fini(d);
}

static void test_simple_chain(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	set_desc(d, DESC, 5, BUF, 100, 0, 0);
	offer(d, 5);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(d->c.head, 5);
	assert_int_equal(d->c.nr_out, 1);
	assert_int_equal(d->c.nr_in, 0);
	assert_int_equal(d->c.out_bytes, 100);
	assert_int_equal(d->c.in_bytes, 0);
	assert_ptr_equal(d->c.seg, d->seg);
	assert_ptr_equal(d->seg[0].ptr, gpa(d, BUF, 100));
	assert_int_equal(d->seg[0].len, 100);
	assert_int_equal(pop(d, 64), VIRTQ_EMPTY);
	virtq_push(&d->q, 5, 0);
	assert_int_equal(rd16(d, USED + 2), 0); /* pushed, not yet published */
	assert_true(virtq_publish(&d->q));
	assert_int_equal(rd16(d, USED + 2), 1);
	assert_int_equal(rd32(d, USED + 4), 5);
	assert_int_equal(rd32(d, USED + 8), 0);
	assert_no_faults(d);
	drv_fini(d);
}

static void test_out_then_in_and_copy(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);
	uint8_t pattern[30], got[40], in[50], back[50];

	(void)state;
	for (unsigned i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)(i + 1);
	assert_int_equal(gmem_write(&d->mem, BUF, pattern, 10), 0);
	assert_int_equal(gmem_write(&d->mem, BUF + 0x1000, pattern + 10, 20), 0);
	set_desc(d, DESC, 0, BUF, 10, F_NEXT, 3);
	set_desc(d, DESC, 3, BUF + 0x1000, 20, F_NEXT, 1);
	set_desc(d, DESC, 1, BUF + 0x2000, 30, F_WRITE | F_NEXT, 7);
	set_desc(d, DESC, 7, BUF + 0x3000, 20, F_WRITE, 0);
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(d->c.nr_out, 2);
	assert_int_equal(d->c.nr_in, 2);
	assert_int_equal(d->c.out_bytes, 30);
	assert_int_equal(d->c.in_bytes, 50);
	assert_ptr_equal(d->seg[2].ptr, gpa(d, BUF + 0x2000, 30));
	/* copy_from across the segment boundary, from an offset, and past the end */
	memset(got, 0, sizeof(got));
	assert_int_equal(virtq_copy_from(&d->c, 5, got, 10), 10);
	assert_memory_equal(got, pattern + 5, 10);
	assert_int_equal(virtq_copy_from(&d->c, 0, got, sizeof(got)), 30);
	assert_memory_equal(got, pattern, 30);
	assert_int_equal(virtq_copy_from(&d->c, 25, got, 40), 5);
	assert_int_equal(virtq_copy_from(&d->c, 30, got, 1), 0);
	assert_int_equal(virtq_copy_from(&d->c, UINT64_MAX, got, 1), 0);
	/* copy_to only reaches the writable segments */
	for (unsigned i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(0x80 + i);
	assert_int_equal(virtq_copy_to(&d->c, 25, in, 10), 10);
	assert_int_equal(gmem_read(&d->mem, BUF + 0x2000 + 25, back, 5), 0);
	assert_memory_equal(back, in, 5);
	assert_int_equal(gmem_read(&d->mem, BUF + 0x3000, back, 5), 0);
	assert_memory_equal(back, in + 5, 5);
	assert_int_equal(virtq_copy_to(&d->c, 0, in, 100), 50);
	assert_int_equal(virtq_copy_to(&d->c, 50, in, 1), 0);
	assert_int_equal(gmem_read(&d->mem, BUF, back, 10), 0);
	assert_memory_equal(back, pattern, 10); /* readable buffers untouched */
	virtq_push(&d->q, 0, 50);
	assert_true(virtq_publish(&d->q));
	assert_int_equal(rd32(d, USED + 8), 50);
	assert_no_faults(d);
	drv_fini(d);
}

static void test_zero_length_skipped(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	/* empty descriptors are not segments, whatever their address or direction */
	set_desc(d, DESC, 0, BUF, 0, F_NEXT, 1);
	set_desc(d, DESC, 1, BUF, 10, F_NEXT, 2);
	set_desc(d, DESC, 2, UINT64_MAX, 0, F_WRITE | F_NEXT, 3);
	set_desc(d, DESC, 3, BUF + 10, 5, F_NEXT, 4);
	set_desc(d, DESC, 4, BUF + 20, 7, F_WRITE, 0);
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(d->c.nr_out, 2);
	assert_int_equal(d->c.nr_in, 1);
	assert_int_equal(d->c.out_bytes, 15);
	assert_int_equal(d->c.in_bytes, 7);
	/* a chain of nothing but empty descriptors: a chain with no segments */
	set_desc(d, DESC, 5, 0, 0, 0, 0);
	offer(d, 5);
	assert_int_equal(pop(d, 0), VIRTQ_CHAIN);
	assert_int_equal(d->c.nr_out + d->c.nr_in, 0);
	assert_no_faults(d);
	drv_fini(d);
}

static void test_max_segs(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	set_desc(d, DESC, 0, BUF, 1, F_NEXT, 1);
	set_desc(d, DESC, 1, BUF + 1, 1, F_NEXT, 2);
	set_desc(d, DESC, 2, BUF + 2, 1, F_WRITE, 0);
	offer(d, 0);
	assert_int_equal(pop(d, 2), VIRTQ_BAD_CHAIN);
	assert_int_equal(d->c.head, 0);
	assert_int_equal(d->c.nr_out + d->c.nr_in, 0);
	assert_faults(d, VIRTQ_FAULT_SEGS, 1);
	offer(d, 0);
	assert_int_equal(pop(d, 3), VIRTQ_CHAIN);
	assert_int_equal(d->c.nr_out, 2);
	assert_int_equal(d->c.nr_in, 1);
	offer(d, 0);
	assert_int_equal(pop(d, 0), VIRTQ_BAD_CHAIN);
	assert_faults(d, VIRTQ_FAULT_SEGS, 2);
	drv_fini(d);
}

static void test_readable_after_writable(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, INDIRECT);

	(void)state;
	set_desc(d, DESC, 0, BUF, 8, F_NEXT, 1);
	set_desc(d, DESC, 1, BUF + 8, 8, F_WRITE | F_NEXT, 2);
	set_desc(d, DESC, 2, BUF + 16, 8, 0, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_ORDER, 1);
	/* the same across a direct descriptor and an indirect table */
	set_desc(d, DESC, 3, BUF, 8, F_WRITE | F_NEXT, 4);
	set_desc(d, DESC, 4, TABLE, 16, F_IND, 0);
	set_desc(d, TABLE, 0, BUF + 8, 8, 0, 0);
	assert_bad_chain(d, 3, VIRTQ_FAULT_ORDER, 2);
	drv_fini(d);
}

/* ---- indirect tables (section 2.7.5.3) ------------------------------------ */

static void test_indirect(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, INDIRECT);

	(void)state;
	/* WRITE on the referring descriptor is ignored (2.7.5.3.2); entries linked out of order */
	set_desc(d, DESC, 2, TABLE, 48, F_IND | F_WRITE, 0);
	set_desc(d, TABLE, 0, BUF, 8, F_NEXT, 2);
	set_desc(d, TABLE, 2, BUF + 8, 16, F_NEXT, 1);
	set_desc(d, TABLE, 1, BUF + 32, 1, F_WRITE, 0);
	offer(d, 2);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(d->c.head, 2);
	assert_int_equal(d->c.nr_out, 2);
	assert_int_equal(d->c.nr_in, 1);
	assert_int_equal(d->c.out_bytes, 24);
	assert_int_equal(d->c.in_bytes, 1);
	assert_ptr_equal(d->seg[1].ptr, gpa(d, BUF + 8, 16));
	/* direct descriptors followed by one that refers to a table (2.7.5.3.2) */
	set_desc(d, DESC, 4, BUF, 4, F_NEXT, 5);
	set_desc(d, DESC, 5, TABLE + 0x100, 16, F_IND, 0);
	set_desc(d, TABLE + 0x100, 0, BUF + 4, 4, F_WRITE, 0);
	offer(d, 4);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(d->c.nr_out, 1);
	assert_int_equal(d->c.nr_in, 1);
	/* the largest table allowed: VIRTQ_MAX_SIZE entries, one used */
	set_desc(d, DESC, 6, TABLE, 16 * VIRTQ_MAX_SIZE, F_IND, 0);
	set_desc(d, TABLE, 0, BUF, 8, 0, 0);
	offer(d, 6);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(d->c.nr_out, 1);
	assert_no_faults(d);
	drv_fini(d);
}

static void test_indirect_not_negotiated(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	set_desc(d, DESC, 0, TABLE, 16, F_IND, 0);
	set_desc(d, TABLE, 0, BUF, 8, 0, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_INDIRECT, 1);
	/* the chain was consumed and completed: the next one goes through */
	set_desc(d, DESC, 1, BUF, 8, 0, 0);
	offer(d, 1);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(rd16(d, USED + 2), 1);
	assert_int_equal(rd32(d, USED + 4), 0);
	drv_fini(d);
}

static void test_indirect_nested(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, INDIRECT);

	(void)state;
	set_desc(d, DESC, 0, TABLE, 32, F_IND, 0);
	set_desc(d, TABLE, 0, BUF, 8, F_NEXT, 1);
	set_desc(d, TABLE, 1, TABLE + 0x100, 16, F_IND, 0);
	set_desc(d, TABLE + 0x100, 0, BUF, 8, 0, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_INDIRECT, 1);
	drv_fini(d);
}

static void test_indirect_bad_tables(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, INDIRECT);

	(void)state;
	set_desc(d, TABLE, 0, BUF, 8, 0, 0);
	set_desc(d, DESC, 0, TABLE, 0, F_IND, 0); /* length 0 */
	assert_bad_chain(d, 0, VIRTQ_FAULT_INDIRECT, 1);
	set_desc(d, DESC, 0, TABLE, 24, F_IND, 0); /* not a multiple of 16 */
	assert_bad_chain(d, 0, VIRTQ_FAULT_INDIRECT, 2);
	set_desc(d, DESC, 0, TABLE, 16 * (VIRTQ_MAX_SIZE + 1), F_IND, 0); /* too large */
	assert_bad_chain(d, 0, VIRTQ_FAULT_INDIRECT, 3);
	set_desc(d, DESC, 0, TABLE, 0xfffffff0u, F_IND, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_INDIRECT, 4);
	set_desc(d, DESC, 0, TABLE, 16, F_IND | F_NEXT, 1); /* INDIRECT with NEXT (2.7.5.3.1) */
	set_desc(d, DESC, 1, BUF, 8, 0, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_INDIRECT, 5);
	d->q.faults[VIRTQ_FAULT_INDIRECT] = 0;
	set_desc(d, DESC, 0, 16 * MiB - 16, 32, F_IND, 0); /* past the end of RAM */
	assert_bad_chain(d, 0, VIRTQ_FAULT_ADDR, 1);
	set_desc(d, DESC, 0, UINT64_MAX - 15, 32, F_IND, 0); /* wraps */
	assert_bad_chain(d, 0, VIRTQ_FAULT_ADDR, 2);
	set_desc(d, DESC, 0, 16 * MiB - 16, 16, F_IND, 0); /* the last 16 bytes of RAM: fine */
	set_desc(d, 16 * MiB - 16, 0, BUF, 8, 0, 0);
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_faults(d, VIRTQ_FAULT_ADDR, 2);
	drv_fini(d);
}

/* ---- walks bounded by the queue size (cases 1 and 2) ----------------------- */

static void test_next_out_of_range(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, INDIRECT);

	(void)state;
	set_desc(d, DESC, 0, BUF, 8, F_NEXT, 8);
	assert_bad_chain(d, 0, VIRTQ_FAULT_NEXT_RANGE, 1);
	set_desc(d, DESC, 0, BUF, 8, F_NEXT, 0xffff);
	assert_bad_chain(d, 0, VIRTQ_FAULT_NEXT_RANGE, 2);
	/* inside a table of 2 entries, next 2 is out of range even though the queue has 8 */
	set_desc(d, DESC, 1, TABLE, 32, F_IND, 0);
	set_desc(d, TABLE, 0, BUF, 8, F_NEXT, 1);
	set_desc(d, TABLE, 1, BUF, 8, F_NEXT, 2);
	set_desc(d, TABLE, 2, BUF, 8, 0, 0);
	assert_bad_chain(d, 1, VIRTQ_FAULT_NEXT_RANGE, 3);
	drv_fini(d);
}

static void test_loops_and_long_chains(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, INDIRECT);

	(void)state;
	set_desc(d, DESC, 0, BUF, 8, F_NEXT, 1); /* A -> B -> A */
	set_desc(d, DESC, 1, BUF, 8, F_NEXT, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_LOOP, 1);
	set_desc(d, DESC, 3, BUF, 0, F_NEXT, 3); /* an empty descriptor pointing at itself */
	assert_bad_chain(d, 3, VIRTQ_FAULT_LOOP, 2);
	/* a cycle inside an indirect table */
	set_desc(d, DESC, 2, TABLE, 32, F_IND, 0);
	set_desc(d, TABLE, 0, BUF, 8, F_NEXT, 1);
	set_desc(d, TABLE, 1, BUF, 8, F_NEXT, 0);
	assert_bad_chain(d, 2, VIRTQ_FAULT_LOOP, 3);
	/* exactly the queue size: 8 descriptors, fine */
	for (uint16_t i = 0; i < 8; i++)
		set_desc(d, DESC, i, BUF + i, 1, i < 7 ? F_NEXT : 0, (uint16_t)(i + 1));
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(d->c.nr_out, 8);
	/* 4 direct + 4 indirect = 8 fine; 4 + 5 = 9 is over-long and refused within 8 hops */
	for (uint16_t i = 0; i < 4; i++)
		set_desc(d, DESC, i, BUF + i, 1, F_NEXT, (uint16_t)(i + 1));
	set_desc(d, DESC, 4, TABLE, 16 * 5, F_IND, 0);
	for (uint16_t i = 0; i < 5; i++)
		set_desc(d, TABLE, i, BUF + 16 + i, 1, i < 3 ? F_NEXT : 0, (uint16_t)(i + 1));
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(d->c.nr_out, 8);
	set_desc(d, TABLE, 3, BUF + 19, 1, F_NEXT, 4);
	assert_bad_chain(d, 0, VIRTQ_FAULT_LOOP, 4);
	drv_fini(d);
}

static void test_size_one_queue(void **state)
{
	struct drv *d = drv_init(16 * MiB, 1, INDIRECT);

	(void)state;
	/* the descriptor referring to a table is not a buffer: a 1-entry table fits a 1-entry queue */
	set_desc(d, DESC, 0, TABLE, 16, F_IND, 0);
	set_desc(d, TABLE, 0, BUF, 8, 0, 0);
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(d->c.nr_out, 1);
	set_desc(d, DESC, 0, TABLE, 32, F_IND, 0);
	set_desc(d, TABLE, 0, BUF, 8, F_NEXT, 1);
	set_desc(d, TABLE, 1, BUF, 8, 0, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_LOOP, 1);
	set_desc(d, DESC, 0, BUF, 8, F_NEXT, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_LOOP, 2);
	drv_fini(d);
}

/* ---- buffers outside RAM (case 4) and over 4 GiB (case 5) ---------------------- */

static void test_buffer_addresses(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	set_desc(d, DESC, 0, UINT64_MAX - 10, 100, 0, 0); /* addr + len wraps */
	assert_bad_chain(d, 0, VIRTQ_FAULT_ADDR, 1);
	set_desc(d, DESC, 0, UINT64_MAX, 1, 0, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_ADDR, 2);
	set_desc(d, DESC, 0, 16 * MiB - 16, 17, 0, 0); /* one byte past the end of RAM */
	assert_bad_chain(d, 0, VIRTQ_FAULT_ADDR, 3);
	set_desc(d, DESC, 0, 16 * MiB, 1, 0, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_ADDR, 4);
	set_desc(d, DESC, 0, BUF, 8, F_NEXT, 1); /* a bad writable buffer after a good one */
	set_desc(d, DESC, 1, LAYOUT_VIRTIO_MMIO, 0x100, F_WRITE, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_ADDR, 5);
	set_desc(d, DESC, 0, 16 * MiB - 16, 16, 0, 0); /* the last 16 bytes: fine */
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_ptr_equal(d->seg[0].ptr, d->mem.base + 16 * MiB - 16);
	assert_faults(d, VIRTQ_FAULT_ADDR, 5);
	drv_fini(d);
}

static void test_buffer_across_hole(void **state)
{
	/* two regions: [0, 3 GiB) and [4 GiB, 4 GiB + 64 MiB); MAP_NORESERVE makes this cheap */
	struct drv *d = drv_init(LAYOUT_MMIO_HOLE + 64 * MiB, 8, INDIRECT);

	(void)state;
	assert_int_equal(d->mem.nr, 2);
	set_desc(d, DESC, 0, LAYOUT_MMIO_HOLE - 8, 16, 0, 0); /* into the hole */
	assert_bad_chain(d, 0, VIRTQ_FAULT_ADDR, 1);
	set_desc(d, DESC, 0, LAYOUT_MMIO_HOLE - 8, (uint32_t)(LAYOUT_RAM_ABOVE_4G - LAYOUT_MMIO_HOLE + 16), 0, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_ADDR, 2);	   /* across the whole hole, both ends in RAM */
	set_desc(d, DESC, 0, LAYOUT_VIRTIO_MMIO, 4, 0, 0); /* MMIO */
	assert_bad_chain(d, 0, VIRTQ_FAULT_ADDR, 3);
	set_desc(d, DESC, 0, BRISK_LAPIC_BASE, 4, F_WRITE, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_ADDR, 4);
	set_desc(d, DESC, 0, LAYOUT_MMIO_HOLE - 16, 32, F_IND, 0); /* an indirect table across the hole */
	assert_bad_chain(d, 0, VIRTQ_FAULT_ADDR, 5);
	set_desc(d, DESC, 0, LAYOUT_RAM_ABOVE_4G + 64 * MiB - 8, 16, 0, 0); /* past the end of high RAM */
	assert_bad_chain(d, 0, VIRTQ_FAULT_ADDR, 6);
	/* each side of the hole on its own is fine, and so is a table above 4 GiB */
	set_desc(d, DESC, 0, LAYOUT_MMIO_HOLE - 16, 16, F_NEXT, 1);
	set_desc(d, DESC, 1, LAYOUT_RAM_ABOVE_4G, 16, F_NEXT, 2);
	set_desc(d, DESC, 2, LAYOUT_RAM_ABOVE_4G + 0x1000, 16, F_IND, 0);
	set_desc(d, LAYOUT_RAM_ABOVE_4G + 0x1000, 0, LAYOUT_RAM_ABOVE_4G + 64 * MiB - 16, 16, F_WRITE, 0);
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(d->c.nr_out, 2);
	assert_int_equal(d->c.nr_in, 1);
	assert_ptr_equal(d->seg[0].ptr, d->mem.base + LAYOUT_MMIO_HOLE - 16);
	assert_ptr_equal(d->seg[1].ptr, d->mem.base + LAYOUT_MMIO_HOLE);
	assert_ptr_equal(d->seg[2].ptr, d->mem.base + LAYOUT_MMIO_HOLE + 64 * MiB - 16);
	assert_faults(d, VIRTQ_FAULT_ADDR, 6);
	drv_fini(d);
}

static void test_total_over_4g(void **state)
{
	/* 4 GiB of RAM above the hole, so that buffers of 0xffffffff bytes are in RAM */
	struct drv *d = drv_init(LAYOUT_MMIO_HOLE + 4 * GiB, 16, 0);

	(void)state;
	for (uint16_t i = 0; i < 16; i++)
		set_desc(d, DESC, i, LAYOUT_RAM_ABOVE_4G, 0xffffffffu, i < 15 ? F_NEXT : 0, (uint16_t)(i + 1));
	assert_bad_chain(d, 0, VIRTQ_FAULT_TOTAL, 1);
	/* readable and writable bytes count together */
	set_desc(d, DESC, 0, LAYOUT_RAM_ABOVE_4G, 0xffffffffu, F_NEXT, 1);
	set_desc(d, DESC, 1, LAYOUT_RAM_ABOVE_4G, 1, F_WRITE, 0);
	assert_bad_chain(d, 0, VIRTQ_FAULT_TOTAL, 2);
	/* exactly UINT32_MAX bytes: fine */
	set_desc(d, DESC, 0, LAYOUT_RAM_ABOVE_4G, 0xfffffff0u, F_NEXT, 1);
	set_desc(d, DESC, 1, LAYOUT_RAM_ABOVE_4G, 0xf, F_WRITE, 0);
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(d->c.out_bytes + d->c.in_bytes, UINT32_MAX);
	assert_faults(d, VIRTQ_FAULT_TOTAL, 2);
	drv_fini(d);
}

/* ---- broken queues (case 6) ------------------------------------------------- */

static void test_avail_idx_jump(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	/* exactly `size` outstanding chains is a full ring, not a fault */
	set_desc(d, DESC, 0, BUF, 8, 0, 0);
	for (int i = 0; i < 8; i++)
		offer(d, 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(pop(d, 64), VIRTQ_EMPTY);
	/* 9 more at once: broken, and it stays broken */
	set_avail_idx(d, (uint16_t)(d->avail_idx + 9));
	assert_int_equal(pop(d, 64), VIRTQ_BROKEN);
	assert_true(d->q.broken);
	assert_faults(d, VIRTQ_FAULT_AVAIL_IDX, 1);
	set_avail_idx(d, (uint16_t)(d->avail_idx + 1)); /* even once the index looks sane again */
	assert_int_equal(pop(d, 64), VIRTQ_BROKEN);
	assert_faults(d, VIRTQ_FAULT_AVAIL_IDX, 1);
	virtq_push(&d->q, 0, 0);
	assert_false(virtq_publish(&d->q));
	assert_int_equal(rd16(d, USED + 2), 0); /* nothing written to a broken queue */
	assert_false(virtq_notifications(&d->q, true));
	assert_int_equal(virtq_activate(&d->q, &d->mem), 0);
	assert_int_equal(pop(d, 64), VIRTQ_BROKEN); /* only a reset clears it */
	/* reset, and the driver sets the queue up again */
	configure(d, 8, 0);
	set_avail_idx(d, 0);
	assert_int_equal(virtq_activate(&d->q, &d->mem), 0);
	assert_false(d->q.broken);
	assert_no_faults(d);
	assert_int_equal(pop(d, 64), VIRTQ_EMPTY);
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	/* an index that went backwards is a jump of nearly 2^16 */
	set_avail_idx(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_BROKEN);
	assert_faults(d, VIRTQ_FAULT_AVAIL_IDX, 1);
	drv_fini(d);
}

static void test_head_out_of_range(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	offer(d, 8);
	assert_int_equal(pop(d, 64), VIRTQ_BROKEN);
	assert_true(d->q.broken);
	assert_faults(d, VIRTQ_FAULT_HEAD, 1);
	assert_int_equal(pop(d, 64), VIRTQ_BROKEN);
	assert_faults(d, VIRTQ_FAULT_HEAD, 1);
	drv_fini(d);
}

/* ---- the used ring and interrupts (section 2.7.7, 2.7.8) ----------------- */

static void test_used_ring_wraps(void **state)
{
	struct drv *d = drv_init(16 * MiB, 4, 0);

	(void)state;
	set_desc(d, DESC, 2, BUF, 8, F_WRITE, 0);
	for (uint32_t i = 0; i < 70000; i++) {
		offer(d, 2);
		assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
		virtq_push(&d->q, d->c.head, i);
		assert_true(virtq_publish(&d->q));
		assert_int_equal(rd16(d, USED + 2), (uint16_t)(i + 1));
		assert_int_equal(rd32(d, USED + 4 + 8 * (i % 4)), 2);
		assert_int_equal(rd32(d, USED + 4 + 8 * (i % 4) + 4), i);
	}
	assert_int_equal(d->q.last_avail, (uint16_t)70000);
	assert_int_equal(d->q.used_idx, (uint16_t)70000);
	assert_int_equal(pop(d, 64), VIRTQ_EMPTY);
	assert_no_faults(d);
	drv_fini(d);
}

/* Pushes `n` completions and publishes them. */
static bool complete(struct drv *d, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		virtq_push(&d->q, 0, 0);
	return virtq_publish(&d->q);
}

static void test_no_interrupt_flag(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	assert_true(complete(d, 1));
	wr16(d, AVAIL, VIRTQ_AVAIL_F_NO_INTERRUPT);
	assert_false(complete(d, 1));
	wr16(d, AVAIL, 0);
	assert_true(complete(d, 2));
	assert_false(complete(d, 0));	 /* nothing new */
	wr16(d, used_event_gpa(d), 100); /* used_event is ignored without EVENT_IDX */
	assert_true(complete(d, 1));
	assert_int_equal(rd16(d, USED + 2), 5);
	drv_fini(d);
}

static void test_event_idx_interrupts(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, EVENT_IDX);

	(void)state;
	assert_false(complete(d, 0));
	assert_true(complete(d, 1));   /* the first publish always interrupts */
	wr16(d, used_event_gpa(d), 1); /* "interrupt once used.idx passes 1" */
	assert_true(complete(d, 1));   /* 1 -> 2 */
	wr16(d, used_event_gpa(d), 5);
	assert_false(complete(d, 1)); /* 2 -> 3 */
	assert_false(complete(d, 1)); /* 3 -> 4 */
	assert_true(complete(d, 2));  /* 4 -> 6 passes 5 */
	assert_false(complete(d, 1)); /* 6 -> 7: used_event left behind */
	/* NO_INTERRUPT is ignored with EVENT_IDX (2.7.7.2) */
	wr16(d, AVAIL, VIRTQ_AVAIL_F_NO_INTERRUPT);
	wr16(d, used_event_gpa(d), 7);
	assert_true(complete(d, 1)); /* 7 -> 8 */
	/* across the 16-bit wrap */
	d->q.used_idx = d->q.signalled = 65534;
	wr16(d, used_event_gpa(d), 65535);
	assert_true(complete(d, 2)); /* 65534 -> 0 passes 65535 */
	wr16(d, used_event_gpa(d), 0);
	assert_true(complete(d, 1)); /* 0 -> 1 */
	wr16(d, used_event_gpa(d), 0);
	assert_false(complete(d, 3)); /* 1 -> 4 */
	assert_int_equal(rd16(d, USED + 2), 4);
	drv_fini(d);
}

/* ---- available buffer notifications (section 2.7.10) ------------------------- */

static void test_notifications_flags(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);

	(void)state;
	wr16(d, USED, 0xffff); /* whatever was there: the device area starts clean */
	assert_int_equal(virtq_activate(&d->q, &d->mem), 0);
	assert_int_equal(rd16(d, USED), 0);
	assert_false(virtq_notifications(&d->q, false));
	assert_int_equal(rd16(d, USED), VIRTQ_USED_F_NO_NOTIFY);
	assert_false(virtq_notifications(&d->q, true)); /* nothing arrived */
	assert_int_equal(rd16(d, USED), 0);
	/* the race: a chain arrives while notifications are off, the driver does not notify */
	set_desc(d, DESC, 0, BUF, 8, 0, 0);
	assert_false(virtq_notifications(&d->q, false));
	offer(d, 0);
	assert_true(virtq_notifications(&d->q, true)); /* so re-enabling must report it */
	assert_int_equal(rd16(d, USED), 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_false(virtq_notifications(&d->q, true));
	assert_no_faults(d);
	drv_fini(d);
}

/* What the driver does after adding chains from `old` to `now` (vring_need_event on avail_event). */
static bool driver_notifies(struct drv *d, uint16_t old, uint16_t now)
{
	uint16_t ev = rd16(d, avail_event_gpa(d));

	return (uint16_t)(now - ev - 1) < (uint16_t)(now - old);
}

static void test_notifications_event_idx(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, EVENT_IDX);

	(void)state;
	set_desc(d, DESC, 0, BUF, 8, 0, 0);
	assert_int_equal(rd16(d, avail_event_gpa(d)), 0);
	assert_true(driver_notifies(d, 0, 1));
	assert_false(virtq_notifications(&d->q, false));
	assert_int_equal(rd16(d, USED), 0); /* flags stay 0 with EVENT_IDX */
	assert_int_equal(rd16(d, avail_event_gpa(d)), 0xffff);
	offer(d, 0); /* work arrives while disabled: the driver does not notify */
	assert_false(driver_notifies(d, 0, 1));
	assert_true(virtq_notifications(&d->q, true));
	assert_int_equal(rd16(d, avail_event_gpa(d)), 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	/* finding the queue empty re-arms: the driver notifies for the next chain */
	assert_int_equal(pop(d, 64), VIRTQ_EMPTY);
	assert_int_equal(rd16(d, avail_event_gpa(d)), 1);
	assert_true(driver_notifies(d, 1, 2));
	/* not while notifications are off */
	assert_false(virtq_notifications(&d->q, false));
	assert_int_equal(pop(d, 64), VIRTQ_EMPTY);
	assert_int_equal(rd16(d, avail_event_gpa(d)), 0);
	assert_false(driver_notifies(d, 1, 2));
	assert_false(virtq_notifications(&d->q, true));
	assert_int_equal(rd16(d, avail_event_gpa(d)), 1);
	/* several chains in one batch: one notification when the batch crosses avail_event */
	offer(d, 0);
	offer(d, 0);
	assert_true(driver_notifies(d, 1, 3));
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	assert_int_equal(pop(d, 64), VIRTQ_EMPTY);
	assert_int_equal(rd16(d, avail_event_gpa(d)), 3);
	assert_no_faults(d);
	drv_fini(d);
}

/* ---- a driver that rewrites descriptors while the device walks them ------------ */

static bool stop_flipping; /* atomic accesses only */

/* Flips descriptors 0-1 and the indirect table's entries between good and hostile values, as fast as it can. */
static void *flipper(void *arg)
{
	struct drv *d = arg;
	volatile uint8_t *table = gpa(d, DESC, 32), *ind = gpa(d, TABLE, 32);
	const uint64_t addrs[] = {BUF, UINT64_MAX - 4, 16 * MiB - 8, LAYOUT_VIRTIO_MMIO};
	const uint32_t lens[] = {8, 0xffffffffu, 0, 16 * MiB};
	const uint16_t flags[] = {0, F_NEXT, F_WRITE, F_IND, F_NEXT | F_IND, F_NEXT | F_WRITE};
	uint32_t x = 1;

	while (!__atomic_load_n(&stop_flipping, __ATOMIC_RELAXED)) {
		volatile uint8_t *t = (x & 1) ? table : ind;
		unsigned i = (x >> 1) & 1;

		x = x * 1103515245u + 12345u;
		*(volatile uint64_t *)(t + 16 * i) = addrs[(x >> 8) % 4];
		*(volatile uint32_t *)(t + 16 * i + 8) = lens[(x >> 12) % 4];
		*(volatile uint16_t *)(t + 16 * i + 12) = flags[(x >> 16) % 6];
		*(volatile uint16_t *)(t + 16 * i + 14) = (uint16_t)((x >> 20) % 3);
	}
	return NULL;
}

/*
 * Whatever the descriptors hold at any instant, every chain handed out lies
 * in RAM and adds up: each descriptor is checked on the one copy the walker
 * took (no double fetch). Run under ASan, any access outside RAM is a report.
 */
static void test_concurrent_driver(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, INDIRECT);
	uint64_t chains = 0, bad = 0;
	pthread_t t;

	(void)state;
	set_desc(d, DESC, 0, TABLE, 32, F_IND, 0);
	__atomic_store_n(&stop_flipping, false, __ATOMIC_RELAXED);
	assert_int_equal(pthread_create(&t, NULL, flipper, d), 0);
	for (int n = 0; n < 200000; n++) {
		enum virtq_pop_result r;

		offer(d, (uint16_t)(n & 1));
		r = pop(d, 64);
		assert_true(r == VIRTQ_CHAIN || r == VIRTQ_BAD_CHAIN);
		for (unsigned i = 0; i < d->c.nr_out + d->c.nr_in; i++) {
			assert_true(d->seg[i].ptr >= d->mem.base);
			assert_true(d->seg[i].len <= d->mem.base + 16 * MiB - d->seg[i].ptr);
		}
		assert_true(d->c.out_bytes + d->c.in_bytes <= UINT32_MAX);
		chains += r == VIRTQ_CHAIN;
		bad += r == VIRTQ_BAD_CHAIN;
		virtq_push(&d->q, d->c.head, 0);
		virtq_publish(&d->q);
	}
	__atomic_store_n(&stop_flipping, true, __ATOMIC_RELAXED);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_false(d->q.broken);
	assert_int_equal(chains + bad, 200000);
	assert_int_equal(d->q.faults[VIRTQ_FAULT_AVAIL_IDX] + d->q.faults[VIRTQ_FAULT_HEAD], 0);
	drv_fini(d);
}

/* ---- activation (case 7) ----------------------------------------------------- */

/* virtq_activate's answer for one configuration. */
static int activate(struct drv *d, uint16_t size, uint64_t desc, uint64_t avail, uint64_t used, unsigned features)
{
	int ret;

	configure(d, size, features);
	d->q.desc = desc;
	d->q.avail = avail;
	d->q.used = used;
	ret = virtq_activate(&d->q, &d->mem);
	if (ret)
		assert_null(d->q.mem);
	else
		assert_ptr_equal(d->q.mem, &d->mem);
	return ret;
}

static void test_activate(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);
	const uint64_t end = 16 * MiB;

	(void)state;
	assert_int_equal(activate(d, 0, DESC, AVAIL, USED, 0), -EINVAL);
	assert_int_equal(activate(d, 3, DESC, AVAIL, USED, 0), -EINVAL);
	assert_int_equal(activate(d, 2048, DESC, AVAIL, USED, 0), -EINVAL);
	assert_int_equal(activate(d, 32768, DESC, AVAIL, USED, 0), -EINVAL);
	assert_int_equal(activate(d, 1, DESC, AVAIL, USED, 0), 0);
	assert_int_equal(activate(d, VIRTQ_MAX_SIZE, DESC, AVAIL, USED, 0), 0);
	/* alignment: 16, 2, 4 (section 2.7) */
	assert_int_equal(activate(d, 8, DESC + 8, AVAIL, USED, 0), -EINVAL);
	assert_int_equal(activate(d, 8, DESC, AVAIL + 1, USED, 0), -EINVAL);
	assert_int_equal(activate(d, 8, DESC, AVAIL, USED + 2, 0), -EINVAL);
	assert_int_equal(activate(d, 8, DESC + 16, AVAIL + 2, USED + 4, 0), 0);
	/* each area wholly in RAM: up to the last byte, with the event fields only when negotiated */
	assert_int_equal(activate(d, 8, end - 128, AVAIL, USED, 0), 0);
	assert_int_equal(activate(d, 8, end - 112, AVAIL, USED, 0), -EINVAL);
	assert_int_equal(activate(d, 8, DESC, end - 20, USED, 0), 0);
	assert_int_equal(activate(d, 8, DESC, end - 20, USED, EVENT_IDX), -EINVAL);
	assert_int_equal(activate(d, 8, DESC, end - 22, USED, EVENT_IDX), 0);
	assert_int_equal(activate(d, 8, DESC, AVAIL, end - 68, 0), 0);
	assert_int_equal(activate(d, 8, DESC, AVAIL, end - 68, EVENT_IDX), -EINVAL);
	assert_int_equal(activate(d, 8, DESC, AVAIL, end - 72, EVENT_IDX), 0);
	assert_int_equal(activate(d, 8, end, AVAIL, USED, 0), -EINVAL);
	assert_int_equal(activate(d, 8, UINT64_MAX - 15, AVAIL, USED, 0), -EINVAL);
	assert_int_equal(activate(d, 8, DESC, UINT64_MAX - 1, USED, 0), -EINVAL);
	assert_int_equal(activate(d, 8, DESC, AVAIL, UINT64_MAX - 3, 0), -EINVAL);
	assert_int_equal(activate(d, 8, DESC, AVAIL, LAYOUT_VIRTIO_MMIO, 0), -EINVAL);
	/* a refused queue pops nothing */
	assert_int_equal(pop(d, 64), VIRTQ_EMPTY);
	drv_fini(d);
}

static void test_fault_names(void **state)
{
	(void)state;
	for (int i = 0; i < VIRTQ_FAULT__COUNT; i++) {
		assert_non_null(virtq_fault_name((enum virtq_fault)i));
		for (int j = 0; j < i; j++)
			assert_string_not_equal(virtq_fault_name((enum virtq_fault)i),
						virtq_fault_name((enum virtq_fault)j));
	}
	assert_string_equal(virtq_fault_name(VIRTQ_FAULT__COUNT), "unknown fault");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_inactive_and_empty),
	    cmocka_unit_test(test_simple_chain),
	    cmocka_unit_test(test_out_then_in_and_copy),
	    cmocka_unit_test(test_zero_length_skipped),
	    cmocka_unit_test(test_max_segs),
	    cmocka_unit_test(test_readable_after_writable),
	    cmocka_unit_test(test_indirect),
	    cmocka_unit_test(test_indirect_not_negotiated),
	    cmocka_unit_test(test_indirect_nested),
	    cmocka_unit_test(test_indirect_bad_tables),
	    cmocka_unit_test(test_next_out_of_range),
	    cmocka_unit_test(test_loops_and_long_chains),
	    cmocka_unit_test(test_size_one_queue),
	    cmocka_unit_test(test_buffer_addresses),
	    cmocka_unit_test(test_buffer_across_hole),
	    cmocka_unit_test(test_total_over_4g),
	    cmocka_unit_test(test_avail_idx_jump),
	    cmocka_unit_test(test_head_out_of_range),
	    cmocka_unit_test(test_used_ring_wraps),
	    cmocka_unit_test(test_no_interrupt_flag),
	    cmocka_unit_test(test_event_idx_interrupts),
	    cmocka_unit_test(test_notifications_flags),
	    cmocka_unit_test(test_notifications_event_idx),
	    cmocka_unit_test(test_concurrent_driver),
	    cmocka_unit_test(test_activate),
	    cmocka_unit_test(test_fault_names),
	};

	log_set_level(LOG_ERROR); /* the guest-fault lines are expected here */
	return cmocka_run_group_tests_name("virtq", tests, NULL, NULL);
}
