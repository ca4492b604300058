/* test_virtq_ring.c - split virtqueue rings: broken indices, the used ring, interrupts, notifications, activation. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "brisk/log.h"
#include "virtq_test.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_avail_idx_jump),	    cmocka_unit_test(test_head_out_of_range),
	    cmocka_unit_test(test_used_ring_wraps),	    cmocka_unit_test(test_no_interrupt_flag),
	    cmocka_unit_test(test_event_idx_interrupts),    cmocka_unit_test(test_notifications_flags),
	    cmocka_unit_test(test_notifications_event_idx), cmocka_unit_test(test_activate),
	};

	log_set_level(LOG_ERROR); /* the guest-fault lines are expected here */
	return cmocka_run_group_tests_name("virtq_ring", tests, NULL, NULL);
}
