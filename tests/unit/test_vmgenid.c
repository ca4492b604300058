/*
 * test_vmgenid.c - the VM Generation ID device (src/devices/vmgenid.c): a boot writes a random ID at LAYOUT_VMGENID
 * and nothing else in its page; its section saves the address and the GSI; a restore writes a new ID and pulses the
 * GED's line once; a section from a VM whose tables said otherwise (another address, GSI, version, length) is
 * refused with guest memory and the line untouched (docs/security.md case 83).
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

static void id_of(uint8_t id[16])
{
	assert_int_equal(gmem_read(&mem, LAYOUT_VMGENID, id, 16), 0);
}

/* The file of one device section "vmgenid" with `body` at `version`. */
static struct snap_reader *file_with(const void *body, size_t len, uint32_t version)
{
	struct snap_writer *w = snap_writer_new();

	assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, 0, "vmgenid"), 0);
	if (version != 1)
		assert_int_equal(snap_set_version(w, version), 0);
	assert_int_equal(snap_put(w, body, len), 0);
	assert_int_equal(snap_section_end(w), 0);
	return snap_test_reader(w);
}

static void body(uint8_t b[12], uint64_t gpa, uint32_t gsi)
{
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(gpa >> (8 * i));
	for (int i = 0; i < 4; i++)
		b[8 + i] = (uint8_t)(gsi >> (8 * i));
}

static void test_boot_and_restore(void **state)
{
	struct bus boot, again;
	uint8_t a[16], b[16], c[16], zero[16] = {0}, sec[12], page[4096];
	struct snap_reader *r;
	const char *failed;
	char err[256];

	(void)state;
	bus_init(&boot);
	memset(gmem_ptr(&mem, LAYOUT_VMGENID, 4096), 0xee, 4096);
	assert_int_equal(vmgenid_create(&ctx, &boot, false), 0);
	id_of(a);
	assert_memory_not_equal(a, zero, 16);
	memcpy(page, gmem_ptr(&mem, LAYOUT_VMGENID, 4096), 4096);
	for (size_t i = 16; i < 4096; i++) /* the page holds the ID alone */
		assert_int_equal(page[i], 0);
	assert_int_equal(irq_pulses, 0); /* a boot notifies nobody */
	bus_destroy(&boot);
	/* Two boots, two IDs. */
	bus_init(&boot);
	assert_int_equal(vmgenid_create(&ctx, &boot, false), 0);
	id_of(b);
	assert_memory_not_equal(a, b, 16);
	bus_destroy(&boot);
	/* A restore: the section is the address and the GSI; a new ID, one edge on the GED's line. */
	body(sec, LAYOUT_VMGENID, LAYOUT_GED_GSI);
	r = file_with(sec, sizeof(sec), 1);
	bus_init(&again);
	assert_int_equal(vmgenid_create(&ctx, &again, true), 0);
	id_of(c);
	assert_memory_equal(b, c, 16); /* a restoring create writes nothing */
	assert_int_equal(bus_restore(&again, r, &failed, err, sizeof(err)), 0);
	id_of(c);
	assert_memory_not_equal(b, c, 16);
	assert_int_equal(irq_pulses, 1);
	snap_reader_free(r);
	bus_destroy(&again);
}

static void test_refused_sections(void **state)
{
	uint8_t sec[13], before[16], after[16];
	static const struct {
		uint64_t gpa;
		uint32_t gsi, version;
		size_t len;
	} bad[] = {
	    {LAYOUT_VMGENID + 8, LAYOUT_GED_GSI, 1, 12}, /* another address */
	    {0, LAYOUT_GED_GSI, 1, 12},
	    {LAYOUT_VMGENID, 4, 1, 12},		     /* another line */
	    {LAYOUT_VMGENID, LAYOUT_GED_GSI, 2, 12}, /* a version this brisk does not read */
	    {LAYOUT_VMGENID, LAYOUT_GED_GSI, 1, 11}, /* truncated */
	    {LAYOUT_VMGENID, LAYOUT_GED_GSI, 1, 13}, /* too long */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct bus b;
		struct snap_reader *r;
		const char *failed = NULL;
		char err[256];

		memset(sec, 0, sizeof(sec));
		body(sec, bad[i].gpa, bad[i].gsi);
		r = file_with(sec, bad[i].len, bad[i].version);
		bus_init(&b);
		assert_int_equal(vmgenid_create(&ctx, &b, true), 0);
		id_of(before);
		irq_pulses = 0;
		assert_int_not_equal(bus_restore(&b, r, &failed, err, sizeof(err)), 0);
		assert_string_equal(failed, "vmgenid");
		assert_int_equal(irq_pulses, 0);
		snap_reader_free(r);
		bus_destroy(&b);
		id_of(after);
		assert_memory_equal(before, after, 16);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_boot_and_restore, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refused_sections, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
