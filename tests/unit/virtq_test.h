/*
 * virtq_test.h - the fake driver test_virtq.c and test_virtq_ring.c share: real guest RAM, a queue
 * configured the way a transport does, and helpers that write descriptors and rings as a driver
 * would. Include after <cmocka.h>.
 */
#ifndef BRISK_TEST_VIRTQ_H
#define BRISK_TEST_VIRTQ_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "brisk/layout.h"
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

static inline void configure(struct drv *d, uint16_t size, unsigned features)
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
static inline struct drv *drv_init(uint64_t ram, uint16_t size, unsigned features)
{
	static struct drv drv; /* one at a time: large, and its address stays valid for the test */
	struct drv *d = &drv;

	memset(d, 0, sizeof(*d));
	assert_int_equal(gmem_init(&d->mem, ram, 0), 0);
	configure(d, size, features);
	assert_int_equal(virtq_activate(&d->q, &d->mem), 0);
	assert_ptr_equal(d->q.mem, &d->mem);
	return d;
}

static inline void drv_fini(struct drv *d)
{
	gmem_destroy(&d->mem);
}

static inline void wr16(struct drv *d, uint64_t gpa, uint16_t v)
{
	assert_int_equal(gmem_write(&d->mem, gpa, &v, 2), 0);
}

static inline uint16_t rd16(struct drv *d, uint64_t gpa)
{
	uint16_t v;

	assert_int_equal(gmem_read(&d->mem, gpa, &v, 2), 0);
	return v;
}

static inline uint32_t rd32(struct drv *d, uint64_t gpa)
{
	uint32_t v;

	assert_int_equal(gmem_read(&d->mem, gpa, &v, 4), 0);
	return v;
}

/* Descriptor `i` of the table at `table` (section 2.7.5, little-endian like the host). */
static inline void set_desc(struct drv *d, uint64_t table, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags,
			    uint16_t next)
{
	uint8_t raw[16];

	memcpy(raw, &addr, 8);
	memcpy(raw + 8, &len, 4);
	memcpy(raw + 12, &flags, 2);
	memcpy(raw + 14, &next, 2);
	assert_int_equal(gmem_write(&d->mem, table + 16ULL * i, raw, 16), 0);
}

static inline void set_avail_idx(struct drv *d, uint16_t idx)
{
	wr16(d, AVAIL + 2, idx);
}

/* Offers chain `head`: ring[idx % size] = head, then idx + 1 (section 2.7.13.2-3). */
static inline void offer(struct drv *d, uint16_t head)
{
	wr16(d, AVAIL + 4 + 2ULL * (d->avail_idx % d->q.size), head);
	set_avail_idx(d, ++d->avail_idx);
}

static inline uint64_t used_event_gpa(struct drv *d)
{
	return AVAIL + 4 + 2ULL * d->q.size;
}

static inline uint64_t avail_event_gpa(struct drv *d)
{
	return USED + 4 + 8ULL * d->q.size;
}

static inline enum virtq_pop_result pop(struct drv *d, unsigned max_segs)
{
	return virtq_pop(&d->q, &d->c, d->seg, max_segs);
}

/* Exactly `n` faults of kind `f` and none of any other kind. */
static inline void assert_faults(struct drv *d, enum virtq_fault f, uint64_t n)
{
	for (int i = 0; i < VIRTQ_FAULT__COUNT; i++)
		assert_int_equal(d->q.faults[i], i == (int)f ? n : 0);
}

static inline void assert_no_faults(struct drv *d)
{
	for (int i = 0; i < VIRTQ_FAULT__COUNT; i++)
		assert_int_equal(d->q.faults[i], 0);
}

/* One chain of `head` offered and refused with `f`; the queue lives on. */
static inline void assert_bad_chain(struct drv *d, uint16_t head, enum virtq_fault f, uint64_t n)
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

static inline void *gpa(struct drv *d, uint64_t addr, uint64_t len)
{
	return gmem_ptr(&d->mem, addr, len);
}

#endif
