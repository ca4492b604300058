/*
 * test_ioapic.c - brisk's I/O APIC (split irqchip) through the bus: its registers as the 82093AA and KVM's
 * in-kernel one have them, edge and level delivery as MSIs, Remote IRR and EOI, the routing table kept in step
 * with the entries (one update per change, none for a masked pin), hostile accesses, and snapshots.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "brisk/bus.h"
#include "brisk/device.h"
#include "brisk/devices.h"
#include "brisk/layout.h"
#include "brisk/snapshot.h"
#include "snap_test.h"

/* ---- the VM behind the device: MSIs and routing tables recorded ----------------------------------------------- */

#define MAX_MSI 64

static struct {
	struct bus bus;
	struct ioapic *io;
	unsigned nr_msi;
	uint64_t msi_addr[MAX_MSI];
	uint32_t msi_data[MAX_MSI];
	unsigned route_calls;
	unsigned nr_routes;
	struct devctx_msi routes[LAYOUT_IOAPIC_PINS];
} t;

static int fake_msi(void *vm, uint64_t addr, uint32_t data)
{
	(void)vm;
	if (t.nr_msi < MAX_MSI) {
		t.msi_addr[t.nr_msi] = addr;
		t.msi_data[t.nr_msi] = data;
	}
	t.nr_msi++;
	return 1;
}

static int fake_routes(void *vm, const struct devctx_msi *r, unsigned n)
{
	(void)vm;
	assert_true(n <= LAYOUT_IOAPIC_PINS);
	t.route_calls++;
	t.nr_routes = n;
	memcpy(t.routes, r, n * sizeof(*r));
	return 0;
}

static void no_line(void *vm, unsigned irq, int level)
{
	(void)vm, (void)irq, (void)level;
	fail_msg("the I/O APIC raised a line of its own");
}

static void no_exit(void *vm, int code, const char *reason)
{
	(void)vm, (void)code, (void)reason;
	fail_msg("the I/O APIC ended the VM");
}

static const struct devctx_ops ops = {
    .irq_line = no_line, .request_exit = no_exit, .msi = fake_msi, .msi_routes = fake_routes};
static const struct devctx ctx = {.ops = &ops};

#define IOAPIC_ID 7

static int setup(void **state)
{
	(void)state;
	memset(&t, 0, sizeof(t));
	bus_init(&t.bus);
	return ioapic_create(&ctx, &t.bus, IOAPIC_ID, &t.io);
}

static int teardown(void **state)
{
	(void)state;
	bus_destroy(&t.bus);
	return 0;
}

/* ---- register access ----------------------------------------------------------------------------------------- */

static void mmio_write(uint64_t off, uint64_t v, unsigned len)
{
	assert_true(bus_write(&t.bus, BUS_MMIO, BRISK_IOAPIC_BASE + off, &v, len));
}

static uint64_t mmio_read(uint64_t off, unsigned len)
{
	uint64_t v = 0;

	assert_true(bus_read(&t.bus, BUS_MMIO, BRISK_IOAPIC_BASE + off, &v, len));
	return v;
}

static uint32_t rd(uint32_t reg)
{
	mmio_write(0x00, reg, 4);
	return (uint32_t)mmio_read(0x10, 4);
}

static void wr(uint32_t reg, uint32_t v)
{
	mmio_write(0x00, reg, 4);
	mmio_write(0x10, v, 4);
}

/* Entry `pin`: both halves, the high one first, as Linux's ioapic_write_entry. */
static void set_rte(unsigned pin, uint64_t e)
{
	wr(0x11 + 2 * pin, (uint32_t)(e >> 32));
	wr(0x10 + 2 * pin, (uint32_t)e);
}

static uint64_t get_rte(unsigned pin)
{
	return (uint64_t)rd(0x11 + 2 * pin) << 32 | rd(0x10 + 2 * pin);
}

#define LEVEL	   (1ull << 15)
#define MASKED	   (1ull << 16)
#define REMOTE_IRR (1ull << 14)
#define DEST(id)   ((uint64_t)(id) << 56)
#define LOGICAL	   (1ull << 11)

/* ---- tests --------------------------------------------------------------------------------------------------- */

/* Power-on: ID as the tables give it, version 0x11 with 24 entries, every entry masked, no route, no MSI. */
static void test_reset_state(void **state)
{
	(void)state;
	assert_int_equal(rd(0x00), IOAPIC_ID << 24);
	assert_int_equal(rd(0x01), 0x00170011);
	assert_int_equal(rd(0x02), IOAPIC_ID << 24);
	for (unsigned pin = 0; pin < LAYOUT_IOAPIC_PINS; pin++)
		assert_int_equal(get_rte(pin), MASKED);
	assert_int_equal(t.route_calls, 0);
	ioapic_set_irq(t.io, 4, 1);
	assert_int_equal(t.nr_msi, 0); /* masked */
}

/* An edge pin: one MSI per rising edge, with the entry's destination, mode and vector; none while masked. */
static void test_edge(void **state)
{
	(void)state;
	set_rte(4, 0x31 | DEST(2));
	assert_int_equal(get_rte(4), 0x31 | DEST(2));
	ioapic_set_irq(t.io, 4, 1);
	assert_int_equal(t.nr_msi, 1);
	assert_true(t.msi_addr[0] == (0xfee00000ull | 2 << 12));
	assert_int_equal(t.msi_data[0], 0x31);
	ioapic_set_irq(t.io, 4, 0);
	ioapic_set_irq(t.io, 4, 1);
	assert_int_equal(t.nr_msi, 2);
	/* lowest priority, logical destination 0x0f */
	set_rte(5, 0x40 | 1 << 8 | LOGICAL | DEST(0x0f));
	ioapic_set_irq(t.io, 5, 1);
	assert_int_equal(t.nr_msi, 3);
	assert_true(t.msi_addr[2] == (0xfee00000ull | 0x0f << 12 | 1 << 2));
	assert_int_equal(t.msi_data[2], 0x140);
	/* masked: nothing, and no interrupt when unmasked later either (an edge on a masked pin is lost) */
	set_rte(6, 0x50 | MASKED);
	ioapic_set_irq(t.io, 6, 1);
	set_rte(6, 0x50);
	assert_int_equal(t.nr_msi, 3);
	/* Remote IRR cannot be written, and means nothing for an edge pin */
	set_rte(7, 0x60 | REMOTE_IRR | 1 << 12);
	assert_int_equal(get_rte(7), 0x60);
}

/* A level pin: delivered once until the guest EOIs its vector; again at the EOI while the line is high. */
static void test_level_eoi(void **state)
{
	(void)state;
	set_rte(9, 0x61 | LEVEL);
	ioapic_set_irq(t.io, 9, 1);
	assert_int_equal(t.nr_msi, 1);
	assert_int_equal(t.msi_data[0], 0x61 | 1u << 15 | 1u << 14); /* level trigger, assert */
	assert_true(get_rte(9) & REMOTE_IRR);
	ioapic_set_irq(t.io, 9, 1);
	assert_int_equal(t.nr_msi, 1);
	ioapic_eoi(t.io, 0x62); /* another vector: nothing */
	assert_true(get_rte(9) & REMOTE_IRR);
	ioapic_eoi(t.io, 0x61);
	assert_int_equal(t.nr_msi, 2); /* still high: again */
	ioapic_set_irq(t.io, 9, 0);
	ioapic_eoi(t.io, 0x61);
	assert_false(get_rte(9) & REMOTE_IRR);
	assert_int_equal(t.nr_msi, 2);
	/* a level line high while masked fires when unmasked */
	set_rte(10, 0x70 | LEVEL | MASKED);
	ioapic_set_irq(t.io, 10, 1);
	assert_int_equal(t.nr_msi, 2);
	set_rte(10, 0x70 | LEVEL);
	assert_int_equal(t.nr_msi, 3);
	assert_int_equal(t.msi_data[2], 0x70 | 1u << 15 | 1u << 14);
	/* Remote IRR survives a rewrite of a level entry; switching it to edge clears it */
	set_rte(10, 0x71 | LEVEL);
	assert_true(get_rte(10) & REMOTE_IRR);
	set_rte(10, 0x71);
	assert_false(get_rte(10) & REMOTE_IRR);
}

/* KVM's routing table: an unmasked pin's MSI, one update per change, none for a rewrite with the same message. */
static void test_routes(void **state)
{
	unsigned calls;

	(void)state;
	set_rte(5, 0x45 | DEST(1) | MASKED);
	assert_int_equal(t.route_calls, 0); /* masked before and after: no route */
	set_rte(5, 0x45 | DEST(1));
	assert_int_equal(t.nr_routes, 1);
	assert_int_equal(t.routes[0].gsi, 5);
	assert_true(t.routes[0].addr == (0xfee00000ull | 1 << 12));
	assert_int_equal(t.routes[0].data, 0x45);
	calls = t.route_calls;
	set_rte(5, 0x45 | DEST(1));
	assert_int_equal(t.route_calls, calls);
	assert_int_equal(ioapic_route_updates(t.io), calls);
	set_rte(12, 0x46 | LEVEL);
	assert_int_equal(t.nr_routes, 2);
	assert_int_equal(t.routes[1].gsi, 12);
	assert_int_equal(t.routes[1].data, 0x46 | 1u << 15 | 1u << 14); /* KVM exits on this vector's EOI */
	set_rte(5, 0x45 | DEST(1) | MASKED);
	assert_int_equal(t.nr_routes, 1);
	assert_int_equal(t.routes[0].gsi, 12);
}

/* What a guest can do to it: any width, any offset, a selector past the entries, read-only registers. */
static void test_hostile_access(void **state)
{
	(void)state;
	for (uint32_t reg = 0x40; reg < 0x100; reg += 7) { /* no such register: all ones, as KVM's */
		wr(reg, 0);
		assert_int_equal(rd(reg), 0xffffffff);
	}
	assert_int_equal(rd(0x03), 0xffffffff);
	wr(0x01, 0xffffffff); /* version: read-only */
	assert_int_equal(rd(0x01), 0x00170011);
	wr(0x02, 0); /* arbitration: read-only */
	assert_int_equal(rd(0x02), IOAPIC_ID << 24);
	wr(0x00, 0x0c000000); /* the ID is writable, as KVM's */
	assert_int_equal(rd(0x00), 0x0c000000);
	mmio_write(0x00, 0x1ff, 2); /* the selector keeps 8 bits */
	assert_int_equal(mmio_read(0x00, 1), 0xff);
	assert_int_equal(mmio_read(0x10, 8), 0xffffffff);
	for (uint64_t off = 1; off + 8 <= 0x100; off += 3)
		if (off != 0x10) {
			mmio_write(off, ~0ull, off % 2 ? 1 : 8);
			assert_int_equal(mmio_read(off, 4), 0);
		}
	mmio_write(0x00, 0x10 + 2 * 3, 1); /* byte-wide selector, qword window write (its low 32 bits) */
	mmio_write(0x10, 0xabcdef0000000033ull, 8);
	assert_int_equal(get_rte(3) & 0xffffffffull, 0x33);
	ioapic_set_irq(t.io, 24, 1); /* past the last pin */
	ioapic_set_irq(t.io, ~0u, 1);
	ioapic_eoi(t.io, 0);
	assert_int_equal(t.nr_msi, 0);
}

/* Reset: every entry masked again, no route left. */
static void test_reset(void **state)
{
	(void)state;
	set_rte(4, 0x31);
	assert_int_equal(t.nr_routes, 1);
	bus_reset(&t.bus);
	assert_int_equal(get_rte(4), MASKED);
	assert_int_equal(t.nr_routes, 0);
	assert_int_equal(rd(0x00), IOAPIC_ID << 24);
}

/* Restores r onto a fresh I/O APIC (the old one destroyed). Returns bus_restore's result. */
static int restore_fresh(struct snap_reader *r)
{
	const char *failed = NULL;
	char err[256];
	int ret;

	bus_destroy(&t.bus);
	bus_init(&t.bus);
	assert_int_equal(ioapic_create(&ctx, &t.bus, IOAPIC_ID, &t.io), 0);
	t.route_calls = t.nr_routes = 0;
	ret = bus_restore(&t.bus, r, &failed, err, sizeof(err));
	snap_reader_free(r);
	return ret;
}

/* A snapshot keeps entries, Remote IRR and line state, and rebuilds the routes; no interrupt is sent again. */
static void test_snapshot(void **state)
{
	struct snap_writer *w = snap_writer_new();
	const char *failed = NULL;

	(void)state;
	set_rte(9, 0x61 | LEVEL | DEST(3));
	set_rte(4, 0x31);
	ioapic_set_irq(t.io, 9, 1);
	wr(0x00, 0x05000000);
	mmio_write(0x00, 0x12, 4);
	assert_int_equal(t.nr_msi, 1);
	assert_int_equal(bus_save(&t.bus, w, &failed), 0);
	assert_int_equal(restore_fresh(snap_test_reader(w)), 0);
	assert_int_equal(t.nr_msi, 1);
	assert_int_equal(t.route_calls, 1);
	assert_int_equal(t.nr_routes, 2);
	assert_int_equal(mmio_read(0x00, 4), 0x12);
	assert_int_equal(rd(0x00), 0x05000000);
	assert_true(get_rte(9) == (0x61 | LEVEL | DEST(3) | REMOTE_IRR));
	ioapic_eoi(t.io, 0x61); /* the line was high when saved */
	assert_int_equal(t.nr_msi, 2);
}

/* A section no guest could produce: refused, the fresh device left as it was. */
static void test_snapshot_refused(void **state)
{
	struct snap_writer *w = snap_writer_new();
	uint8_t body[1 + 1 + 4 + 8 * LAYOUT_IOAPIC_PINS] = {0};

	(void)state;
	body[6] = 0x31;
	body[7] = 0x40; /* entry 0: vector 0x31, edge, Remote IRR */
	assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, 0, "ioapic"), 0);
	assert_int_equal(snap_put(w, body, sizeof(body)), 0);
	assert_int_equal(snap_section_end(w), 0);
	assert_int_not_equal(restore_fresh(snap_test_reader(w)), 0);
	assert_int_equal(get_rte(0), MASKED);
	assert_int_equal(t.route_calls, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_reset_state, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_edge, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_level_eoi, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_routes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hostile_access, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reset, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_snapshot, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_snapshot_refused, setup, teardown),
	};

	return cmocka_run_group_tests_name("ioapic", tests, NULL, NULL);
}
