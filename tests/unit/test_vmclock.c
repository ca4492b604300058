/*
 * test_vmclock.c - the VMClock device (src/devices/vmclock.c): a boot writes struct vmclock_abi at LAYOUT_VMCLOCK
 * as Firecracker's does (magic, size, version 1, no counter, both flags, counters 0) and nothing else in its
 * page; its section saves the address, seq_count and both counters; each restore advances the counters by one
 * and seq_count by two, and a snapshot of a restored VM keeps counting; the device raises no line of its own;
 * a section that is not this brisk's (another address, an odd seq_count, version, length) is refused with guest
 * memory untouched (docs/security.md case 83).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/bus.h"
#include "brisk/devices.h"
#include "brisk/layout.h"
#include "brisk/mem.h"
#include "brisk/snapshot.h"
#include "brisk/vmclock_abi.h"
#include "fake_vm.h"
#include "snap_test.h"

static struct gmem mem;
static struct devctx ctx;

static int setup(void **state)
{
	(void)state;
	assert_int_equal(gmem_init(&mem, 16ull << 20, 0), 0);
	ctx = (struct devctx){.mem = &mem, .ops = &fake_ops};
	irq_pulses = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gmem_destroy(&mem);
	return 0;
}

static struct vmclock_abi abi_of(void)
{
	struct vmclock_abi a;

	assert_int_equal(gmem_read(&mem, LAYOUT_VMCLOCK, &a, sizeof(a)), 0);
	return a;
}

/* The section's body: address, seq_count, disruption marker, generation (little-endian, 28 bytes). */
static void body(uint8_t b[28], uint64_t gpa, uint32_t seq, uint64_t marker, uint64_t gen)
{
	for (int i = 0; i < 8; i++) {
		b[i] = (uint8_t)(gpa >> (8 * i));
		b[12 + i] = (uint8_t)(marker >> (8 * i));
		b[20 + i] = (uint8_t)(gen >> (8 * i));
	}
	for (int i = 0; i < 4; i++)
		b[8 + i] = (uint8_t)(seq >> (8 * i));
}

/* The file of one device section "vmclock" with `body` at `version`. */
static struct snap_reader *file_with(const void *b, size_t len, uint32_t version)
{
	struct snap_writer *w = snap_writer_new();

	assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, 0, "vmclock"), 0);
	assert_int_equal(snap_set_version(w, version), 0);
	assert_int_equal(snap_put(w, b, len), 0);
	assert_int_equal(snap_section_end(w), 0);
	return snap_test_reader(w);
}

/* What a boot publishes, field by field as Firecracker's test_vmclock_read_fields expects it. */
static void test_boot_page(void **state)
{
	struct bus boot;
	struct vmclock_abi a;
	const uint8_t *page;

	(void)state;
	memset(gmem_ptr(&mem, LAYOUT_VMCLOCK, LAYOUT_VMCLOCK_SIZE), 0xee, LAYOUT_VMCLOCK_SIZE);
	bus_init(&boot);
	assert_int_equal(vmclock_create(&ctx, &boot, false), 0);
	a = abi_of();
	assert_int_equal(a.magic, VMCLOCK_MAGIC);
	assert_int_equal(a.size, LAYOUT_VMCLOCK_SIZE);
	assert_int_equal(a.version, 1);
	assert_int_equal(a.counter_id, VMCLOCK_COUNTER_INVALID);
	assert_int_equal(a.clock_status, VMCLOCK_STATUS_UNKNOWN);
	assert_int_equal(a.flags, VMCLOCK_FLAG_VM_GEN_COUNTER_PRESENT | VMCLOCK_FLAG_NOTIFICATION_PRESENT);
	assert_int_equal(a.seq_count, 0);
	assert_int_equal(a.disruption_marker, 0);
	assert_int_equal(a.vm_generation_counter, 0);
	assert_int_equal(a.time_sec, 0);
	page = gmem_ptr(&mem, LAYOUT_VMCLOCK, LAYOUT_VMCLOCK_SIZE);
	for (size_t i = sizeof(a); i < LAYOUT_VMCLOCK_SIZE; i++) /* the page holds the structure alone */
		assert_int_equal(page[i], 0);
	assert_int_equal(irq_pulses, 0);
	bus_destroy(&boot);
}

/* Boot, save, restore, save the restored VM, restore that: generations 0, 1, 2; the saved sections say so. */
static void test_restores_count(void **state)
{
	struct bus boot, one, two;
	struct snap_writer *w;
	struct snap_reader *r;
	const char *failed;
	char err[256];

	(void)state;
	bus_init(&boot);
	assert_int_equal(vmclock_create(&ctx, &boot, false), 0);
	w = snap_writer_new();
	assert_int_equal(bus_save(&boot, w, &failed), 0);
	r = snap_test_reader(w);
	bus_destroy(&boot);

	memset(gmem_ptr(&mem, LAYOUT_VMCLOCK, LAYOUT_VMCLOCK_SIZE), 0, LAYOUT_VMCLOCK_SIZE);
	bus_init(&one);
	assert_int_equal(vmclock_create(&ctx, &one, true), 0);
	assert_int_equal(abi_of().magic, 0); /* a restoring create writes nothing */
	assert_int_equal(bus_restore(&one, r, &failed, err, sizeof(err)), 0);
	snap_reader_free(r);
	assert_int_equal(abi_of().magic, VMCLOCK_MAGIC);
	assert_int_equal(abi_of().vm_generation_counter, 1);
	assert_int_equal(abi_of().disruption_marker, 1);
	assert_int_equal(abi_of().seq_count, 2);
	assert_int_equal(irq_pulses, 0); /* the GED's edge is the VM Generation ID's to raise */

	w = snap_writer_new();
	assert_int_equal(bus_save(&one, w, &failed), 0);
	r = snap_test_reader(w);
	bus_destroy(&one);
	bus_init(&two);
	assert_int_equal(vmclock_create(&ctx, &two, true), 0);
	assert_int_equal(bus_restore(&two, r, &failed, err, sizeof(err)), 0);
	snap_reader_free(r);
	assert_int_equal(abi_of().vm_generation_counter, 2);
	assert_int_equal(abi_of().disruption_marker, 2);
	assert_int_equal(abi_of().seq_count, 4);
	bus_destroy(&two);
}

/* Counters at their maximum wrap as Firecracker's wrapping_add does; seq_count too. */
static void test_counters_wrap(void **state)
{
	uint8_t sec[28];
	struct bus b;
	struct snap_reader *r;
	const char *failed;
	char err[256];

	(void)state;
	body(sec, LAYOUT_VMCLOCK, UINT32_MAX - 1, UINT64_MAX, UINT64_MAX - 1);
	r = file_with(sec, sizeof(sec), 1);
	bus_init(&b);
	assert_int_equal(vmclock_create(&ctx, &b, true), 0);
	assert_int_equal(bus_restore(&b, r, &failed, err, sizeof(err)), 0);
	assert_int_equal(abi_of().seq_count, 0);
	assert_int_equal(abi_of().disruption_marker, 0);
	assert_true(abi_of().vm_generation_counter == UINT64_MAX);
	snap_reader_free(r);
	bus_destroy(&b);
}

static void test_refused_sections(void **state)
{
	uint8_t sec[29], before[LAYOUT_VMCLOCK_SIZE];
	static const struct {
		uint64_t gpa;
		uint32_t seq, version;
		size_t len;
	} bad[] = {
	    {LAYOUT_VMCLOCK + 4096, 0, 1, 28}, /* another address */
	    {0, 0, 1, 28},
	    {LAYOUT_VMCLOCK, 3, 1, 28}, /* an update left half done */
	    {LAYOUT_VMCLOCK, 0, 2, 28}, /* a version this brisk does not read */
	    {LAYOUT_VMCLOCK, 0, 1, 27}, /* truncated */
	    {LAYOUT_VMCLOCK, 0, 1, 29}, /* too long */
	};

	(void)state;
	memset(gmem_ptr(&mem, LAYOUT_VMCLOCK, LAYOUT_VMCLOCK_SIZE), 0x5a, LAYOUT_VMCLOCK_SIZE);
	memcpy(before, gmem_ptr(&mem, LAYOUT_VMCLOCK, LAYOUT_VMCLOCK_SIZE), sizeof(before));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct bus b;
		struct snap_reader *r;
		const char *failed = NULL;
		char err[256];

		memset(sec, 0, sizeof(sec));
		body(sec, bad[i].gpa, bad[i].seq, 7, 7);
		r = file_with(sec, bad[i].len, bad[i].version);
		bus_init(&b);
		assert_int_equal(vmclock_create(&ctx, &b, true), 0);
		assert_int_not_equal(bus_restore(&b, r, &failed, err, sizeof(err)), 0);
		assert_string_equal(failed, "vmclock");
		snap_reader_free(r);
		bus_destroy(&b);
		assert_memory_equal(before, gmem_ptr(&mem, LAYOUT_VMCLOCK, LAYOUT_VMCLOCK_SIZE), sizeof(before));
	}
	assert_int_equal(irq_pulses, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_boot_page, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_restores_count, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_counters_wrap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refused_sections, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
