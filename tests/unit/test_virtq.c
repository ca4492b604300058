/* test_virtq.c - split virtqueue chain walks against a fake driver in real guest RAM: docs/security.md cases 1-5 and 8.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>

#include "brisk/log.h"
#include "virtq_test.h"

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
	    cmocka_unit_test(test_concurrent_driver),
	    cmocka_unit_test(test_fault_names),
	};

	log_set_level(LOG_ERROR); /* the guest-fault lines are expected here */
	return cmocka_run_group_tests_name("virtq", tests, NULL, NULL);
}
