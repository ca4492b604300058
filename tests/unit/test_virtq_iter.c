/*
 * test_virtq_iter.c - the chain iterator (virtq_next: malformed chains and broken queues handled once,
 * docs/security.md cases 1-8) and the buffer cursor (virtq_cursor_*: reads across buffers, writes past
 * the writable space, zero-length buffers, 2^32-byte totals as case 5), against the fake driver.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <cmocka.h>

#include "virtq_test.h"

/* ---- a sink that records what the iterator reported ----------------------------------------------- */

struct reports {
	unsigned bad, broken;
	uint16_t head, value;
	const char *why;
	enum virtq_fault fault;
};

static void rec_bad(void *arg, uint16_t head, const char *why)
{
	struct reports *r = arg;

	r->bad++;
	r->head = head;
	r->why = why;
}

static void rec_broken(void *arg, enum virtq_fault f, uint16_t value)
{
	struct reports *r = arg;

	r->broken++;
	r->fault = f;
	r->value = value;
}

static const struct virtq_sink sink = {.bad_chain = rec_bad, .broken = rec_broken};

static void start(struct drv *d, struct virtq_iter *it, unsigned budget, struct reports *r)
{
	*r = (struct reports){0};
	virtq_iter_init(it, &d->q, d->seg, 64, budget, &sink, r);
}

/* Used ring entry `i`: its id and len (section 2.7.8). */
static void assert_used(struct drv *d, uint16_t i, uint32_t id, uint32_t len)
{
	assert_int_equal(rd32(d, USED + 4 + 8ULL * i), id);
	assert_int_equal(rd32(d, USED + 8 + 8ULL * i), len);
}

/* ---- the iterator ------------------------------------------------------------------------------ */

/* A malformed chain between two good ones: completed with 0 bytes in ring order, reported once, skipped. */
static void test_next_skips_bad_chains(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);
	struct virtq_chain c;
	struct virtq_iter it;
	struct reports r;

	(void)state;
	set_desc(d, DESC, 0, BUF, 10, 0, 0);
	set_desc(d, DESC, 1, BUF, 10, F_NEXT, 9); /* case 1: next >= queue size */
	set_desc(d, DESC, 2, BUF + 0x1000, 20, F_WRITE, 0);
	offer(d, 0);
	offer(d, 1);
	offer(d, 2);
	start(d, &it, VIRTQ_NO_BUDGET, &r);
	assert_false(virtq_iter_pushed(&it));
	assert_true(virtq_next(&it, &c));
	assert_int_equal(c.head, 0);
	virtq_push(&d->q, c.head, 0);
	assert_true(virtq_next(&it, &c)); /* chain 1 completed on the way */
	assert_int_equal(c.head, 2);
	assert_int_equal(c.in_bytes, 20);
	assert_int_equal(it.bad, 1);
	assert_int_equal(r.bad, 1);
	assert_int_equal(r.head, 1);
	assert_string_equal(r.why, "next out of range");
	virtq_push(&d->q, c.head, 20);
	assert_false(virtq_next(&it, &c));
	assert_false(it.more);
	assert_true(virtq_iter_pushed(&it));
	assert_true(virtq_publish(&d->q));
	assert_int_equal(rd16(d, USED + 2), 3);
	assert_used(d, 0, 0, 0);
	assert_used(d, 1, 1, 0);
	assert_used(d, 2, 2, 20);
	assert_int_equal(r.broken, 0);
	assert_faults(d, VIRTQ_FAULT_NEXT_RANGE, 1);
	drv_fini(d);
}

/* Every chain taken spends the budget, malformed ones too; a spent budget says `more`, the rest comes next. */
static void test_next_budget(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);
	struct virtq_chain c;
	struct virtq_iter it;
	struct reports r;

	(void)state;
	set_desc(d, DESC, 0, BUF, 10, 0, 0);
	set_desc(d, DESC, 1, BUF, 10, F_NEXT, 1); /* case 2: a self loop */
	offer(d, 1);
	offer(d, 0);
	offer(d, 0);
	start(d, &it, 2, &r);
	assert_true(virtq_next(&it, &c)); /* the loop, then the first good one: the budget is spent */
	assert_int_equal(c.head, 0);
	virtq_push(&d->q, 0, 0);
	assert_false(virtq_next(&it, &c));
	assert_true(it.more);
	assert_int_equal(it.bad, 1);
	assert_string_equal(r.why, "chain longer than the queue size (loop)");
	start(d, &it, 2, &r);
	assert_true(virtq_next(&it, &c));
	virtq_push(&d->q, 0, 0);
	assert_false(virtq_next(&it, &c)); /* empty, with budget left */
	assert_false(it.more);
	/* budget 1 and a malformed chain: nothing handed out, the chain completed, more to come */
	offer(d, 1);
	start(d, &it, 1, &r);
	assert_false(virtq_next(&it, &c));
	assert_true(it.more);
	assert_int_equal(it.bad, 1);
	assert_true(virtq_iter_pushed(&it));
	drv_fini(d);
}

/* docs/security.md case 6: a queue that breaks is reported once, with the fault and the value that showed it. */
static void test_next_broken_once(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);
	struct virtq_chain c;
	struct virtq_iter it;
	struct reports r;

	(void)state;
	set_avail_idx(d, 9); /* 9 chains on a queue of 8 */
	start(d, &it, VIRTQ_NO_BUDGET, &r);
	assert_false(virtq_next(&it, &c));
	assert_true(d->q.broken);
	assert_int_equal(r.broken, 1);
	assert_int_equal(r.fault, VIRTQ_FAULT_AVAIL_IDX);
	assert_int_equal(r.value, 9);
	assert_false(virtq_next(&it, &c)); /* already broken: not reported again */
	start(d, &it, VIRTQ_NO_BUDGET, &r);
	assert_false(virtq_next(&it, &c));
	assert_int_equal(r.broken, 0);
	assert_false(virtq_iter_pushed(&it));
	/* an avail entry past the queue size */
	virtq_reset(&d->q);
	configure(d, 8, 0);
	assert_int_equal(virtq_activate(&d->q, &d->mem), 0);
	offer(d, 8);
	start(d, &it, VIRTQ_NO_BUDGET, &r);
	assert_false(virtq_next(&it, &c));
	assert_int_equal(r.broken, 1);
	assert_int_equal(r.fault, VIRTQ_FAULT_HEAD);
	assert_int_equal(r.value, 8);
	drv_fini(d);
}

/* No queue, a queue not activated, no sink: nothing handed out, nothing reported, no crash. */
static void test_next_without_queue_or_sink(void **state)
{
	struct virtq_seg segs[4];
	struct virtq_chain c;
	struct virtq_iter it;
	struct virtq q;
	struct drv *d;

	(void)state;
	virtq_iter_init(&it, NULL, segs, 4, VIRTQ_NO_BUDGET, &sink, NULL);
	assert_false(virtq_next(&it, &c));
	assert_false(virtq_iter_pushed(&it));
	virtq_reset(&q);
	virtq_iter_init(&it, &q, segs, 4, VIRTQ_NO_BUDGET, &sink, NULL);
	assert_false(virtq_next(&it, &c));
	d = drv_init(16 * MiB, 8, 0);
	set_desc(d, DESC, 0, UINT64_MAX - 4, 10, 0, 0); /* case 4: wraps 2^64 */
	offer(d, 0);
	virtq_iter_init(&it, &d->q, d->seg, 64, VIRTQ_NO_BUDGET, NULL, NULL);
	assert_false(virtq_next(&it, &c));
	assert_int_equal(it.bad, 1);
	assert_faults(d, VIRTQ_FAULT_ADDR, 1);
	drv_fini(d);
}

/* The device's own rule (a readable buffer where only writable ones belong): virtq_drop completes and reports. */
static void test_drop(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);
	struct virtq_chain c;
	struct virtq_iter it;
	struct reports r;

	(void)state;
	set_desc(d, DESC, 3, BUF, 10, 0, 0);
	offer(d, 3);
	start(d, &it, VIRTQ_NO_BUDGET, &r);
	assert_true(virtq_next(&it, &c));
	virtq_drop(&it, &c, "a readable buffer");
	assert_int_equal(it.bad, 1);
	assert_int_equal(r.bad, 1);
	assert_int_equal(r.head, 3);
	assert_string_equal(r.why, "a readable buffer");
	assert_true(virtq_iter_pushed(&it));
	assert_true(virtq_publish(&d->q));
	assert_used(d, 0, 3, 0);
	assert_no_faults(d); /* the chain itself was well-formed */
	drv_fini(d);
}

/* ---- the cursor -------------------------------------------------------------------------------- */

/* A read crossing buffers, zero-length buffers passed over, a read past the end short. */
static void test_cursor_read_across_buffers(void **state)
{
	uint8_t a[3] = {1, 2, 3}, b[5] = {4, 5, 6, 7, 8}, e[2] = {9, 10}, out[16];
	struct virtq_seg segs[] = {{a, 3}, {NULL, 0}, {b, 5}, {NULL, 0}, {NULL, 0}, {e, 2}};
	struct virtq_cursor cur;

	(void)state;
	virtq_cursor_init(&cur, segs, 6);
	assert_int_equal(virtq_cursor_left(&cur), 10);
	assert_int_equal(virtq_cursor_read(&cur, out, 6), 6);
	assert_memory_equal(out, ((uint8_t[]){1, 2, 3, 4, 5, 6}), 6);
	assert_int_equal(virtq_cursor_left(&cur), 4);
	memset(out, 0, sizeof(out));
	assert_int_equal(virtq_cursor_read(&cur, out, sizeof(out)), 4); /* only what is left */
	assert_memory_equal(out, ((uint8_t[]){7, 8, 9, 10, 0}), 5);
	assert_int_equal(virtq_cursor_left(&cur), 0);
	assert_int_equal(virtq_cursor_read(&cur, out, 1), 0);
	assert_int_equal(virtq_cursor_skip(&cur, 1), 0);
	/* nothing but empty buffers, and no buffers at all */
	virtq_cursor_init(&cur, segs + 3, 2);
	assert_int_equal(virtq_cursor_left(&cur), 0);
	assert_int_equal(virtq_cursor_read(&cur, out, 1), 0);
	virtq_cursor_init(&cur, segs, 0);
	assert_int_equal(virtq_cursor_write(&cur, out, 1), 0);
}

/* A chain's writable part: a write past it is short and leaves every byte after it alone. */
static void test_cursor_write_past_writable(void **state)
{
	struct drv *d = drv_init(16 * MiB, 8, 0);
	uint8_t src[64], *w1, *w2;
	struct virtq_cursor w, r;

	(void)state;
	for (unsigned i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(0x40 + i);
	memset(gpa(d, BUF, 0x3000), 0xee, 0x3000);
	set_desc(d, DESC, 0, BUF, 8, F_NEXT, 1);		    /* readable */
	set_desc(d, DESC, 1, BUF + 0x1000, 5, F_WRITE | F_NEXT, 2); /* writable: 5 + 0 + 7 */
	set_desc(d, DESC, 2, BUF + 0x1800, 0, F_WRITE | F_NEXT, 3);
	set_desc(d, DESC, 3, BUF + 0x2000, 7, F_WRITE, 0);
	offer(d, 0);
	assert_int_equal(pop(d, 64), VIRTQ_CHAIN);
	virtq_writer(&w, &d->c);
	assert_int_equal(virtq_cursor_left(&w), 12);
	assert_int_equal(virtq_cursor_skip(&w, 3), 3);
	assert_int_equal(virtq_cursor_write(&w, src, sizeof(src)), 9); /* 2 + 7 */
	assert_int_equal(virtq_cursor_left(&w), 0);
	assert_int_equal(virtq_cursor_write(&w, src, 1), 0);
	w1 = gpa(d, BUF + 0x1000, 6);
	w2 = gpa(d, BUF + 0x2000, 8);
	assert_memory_equal(w1, ((uint8_t[]){0xee, 0xee, 0xee, 0x40, 0x41, 0xee}), 6);
	assert_memory_equal(w2, ((uint8_t[]){0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0xee}), 8);
	assert_int_equal(*(uint8_t *)gpa(d, BUF + 0x1800, 1), 0xee);
	/* the reader sees the readable part only */
	virtq_reader(&r, &d->c);
	assert_int_equal(virtq_cursor_left(&r), 8);
	assert_int_equal(virtq_cursor_skip(&r, 100), 8);
	/* the copy helpers: an offset past the part copies nothing */
	assert_int_equal(virtq_copy_to(&d->c, 13, src, 1), 0);
	assert_int_equal(virtq_copy_to(&d->c, 11, src, 4), 1);
	assert_int_equal(virtq_copy_from(&d->c, 9, src, 1), 0);
	assert_int_equal(virtq_copy_from(&d->c, 6, src, 8), 2);
	drv_fini(d);
}

/* Spans, iovecs and segment lists describe the bytes without moving the cursor (iov/segs) or with it (span). */
static void test_cursor_span_iov_segs(void **state)
{
	uint8_t a[4], b[6], c[3];
	struct virtq_seg segs[] = {{a, 4}, {NULL, 0}, {b, 6}, {c, 3}}, out[4];
	struct virtq_cursor cur;
	struct iovec iov[4];
	uint64_t bytes;
	uint8_t *p;

	(void)state;
	virtq_cursor_init(&cur, segs, 4);
	assert_int_equal(virtq_cursor_skip(&cur, 2), 2);
	assert_int_equal(virtq_cursor_span(&cur, 100, &p), 2); /* the rest of a[] */
	assert_ptr_equal(p, a + 2);
	assert_int_equal(virtq_cursor_span(&cur, 4, &p), 4); /* at most max */
	assert_ptr_equal(p, b);
	assert_int_equal(virtq_cursor_span(&cur, 0, &p), 0);
	assert_int_equal(virtq_cursor_iov(&cur, 100, iov, 4, &bytes), 2);
	assert_int_equal(bytes, 5);
	assert_ptr_equal(iov[0].iov_base, b + 4);
	assert_int_equal(iov[0].iov_len, 2);
	assert_ptr_equal(iov[1].iov_base, c);
	assert_int_equal(iov[1].iov_len, 3);
	assert_int_equal(virtq_cursor_left(&cur), 5); /* not moved */
	assert_int_equal(virtq_cursor_iov(&cur, 3, iov, 4, &bytes), 2);
	assert_int_equal(bytes, 3);
	assert_int_equal(iov[1].iov_len, 1);
	assert_int_equal(virtq_cursor_iov(&cur, 100, iov, 1, &bytes), 1); /* at most max_iov entries */
	assert_int_equal(bytes, 2);
	assert_int_equal(virtq_cursor_segs(&cur, 4, out, 4, NULL), 2);
	assert_ptr_equal(out[0].ptr, b + 4);
	assert_int_equal(out[1].len, 2);
	assert_int_equal(virtq_cursor_skip(&cur, 5), 5);
	assert_int_equal(virtq_cursor_span(&cur, 1, &p), 0);
	assert_int_equal(virtq_cursor_iov(&cur, 1, iov, 4, &bytes), 0);
	assert_int_equal(bytes, 0);
}

/*
 * docs/security.md case 5: a chain of 2^32 bytes is refused by the iterator (completed empty, reported); one
 * of 2^32 - 1 is served, and the cursor reaches its last byte. A list beyond 2^32 bytes counts in 64 bits.
 */
static void test_cursor_4g(void **state)
{
	/* 4 GiB of RAM above the hole (MAP_NORESERVE: only the pages touched cost anything) */
	struct drv *d = drv_init(LAYOUT_MMIO_HOLE + 4 * GiB, 16, 0);
	const uint64_t hi = LAYOUT_RAM_ABOVE_4G;
	uint8_t one = 0x5a, got[2];
	struct virtq_seg segs[3];
	struct virtq_cursor w;
	struct virtq_chain c;
	struct virtq_iter it;
	struct reports r;

	(void)state;
	set_desc(d, DESC, 0, hi, 0x80000000u, F_WRITE | F_NEXT, 1);
	set_desc(d, DESC, 1, hi + 0x80000000u, 0x80000000u, F_WRITE, 0); /* 2^32 in two buffers */
	set_desc(d, DESC, 2, hi, 0x80000000u, F_WRITE | F_NEXT, 3);
	set_desc(d, DESC, 3, hi + 0x80000000u, 0x7fffffffu, F_WRITE, 0); /* 2^32 - 1 */
	offer(d, 0);
	offer(d, 2);
	start(d, &it, VIRTQ_NO_BUDGET, &r);
	assert_true(virtq_next(&it, &c));
	assert_int_equal(r.bad, 1);
	assert_string_equal(r.why, "chain longer than 4 GiB");
	assert_int_equal(c.head, 2);
	virtq_writer(&w, &c);
	assert_int_equal(virtq_cursor_left(&w), UINT32_MAX);
	assert_int_equal(virtq_cursor_skip(&w, UINT32_MAX - 1), UINT32_MAX - 1);
	assert_int_equal(virtq_cursor_write(&w, (uint8_t[]){0xa5, 0xa6}, 2), 1);
	assert_int_equal(*(uint8_t *)gpa(d, hi + 0xfffffffeULL, 1), 0xa5);
	assert_int_equal(*(uint8_t *)gpa(d, hi + 0xffffffffULL, 1), 0); /* past the chain: untouched */
	virtq_push(&d->q, c.head, 0);
	/* a list of three 0xffffffff-byte segments: 3 * (2^32 - 1) bytes */
	for (unsigned i = 0; i < 3; i++)
		segs[i] = (struct virtq_seg){gpa(d, hi, 0xffffffffu), 0xffffffffu};
	virtq_cursor_init(&w, segs, 3);
	assert_int_equal(virtq_cursor_left(&w), 3 * 0xffffffffULL);
	assert_int_equal(virtq_cursor_skip(&w, 1ULL << 32), 1ULL << 32); /* across the first boundary */
	assert_int_equal(virtq_cursor_left(&w), 3 * 0xffffffffULL - (1ULL << 32));
	assert_int_equal(virtq_cursor_write(&w, &one, 1), 1);
	assert_int_equal(*(uint8_t *)gpa(d, hi + 1, 1), 0x5a); /* byte 1 of the second segment */
	assert_int_equal(virtq_cursor_skip(&w, UINT64_MAX), 3 * 0xffffffffULL - (1ULL << 32) - 1);
	assert_int_equal(virtq_cursor_read(&w, got, 2), 0);
	drv_fini(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_next_skips_bad_chains),
	    cmocka_unit_test(test_next_budget),
	    cmocka_unit_test(test_next_broken_once),
	    cmocka_unit_test(test_next_without_queue_or_sink),
	    cmocka_unit_test(test_drop),
	    cmocka_unit_test(test_cursor_read_across_buffers),
	    cmocka_unit_test(test_cursor_write_past_writable),
	    cmocka_unit_test(test_cursor_span_iov_segs),
	    cmocka_unit_test(test_cursor_4g),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
