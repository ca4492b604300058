/*
 * ioapic.c - the I/O APIC in brisk, for KVM's split irqchip (KVM_CAP_SPLIT_IRQCHIP: the LAPICs stay in KVM; the
 * I/O APIC, and no PIC and no PIT, are the VMM's, as Cloud Hypervisor and QEMU's microvm do).
 *
 * Why: KVM tears its in-kernel PIC, IOAPIC and PIT down one I/O-bus device at a time, each waiting for an SRCU
 * grace period, after brisk's exit_group and before the process can be reaped (docs/performance.md
 * "Teardown"); a split irqchip registers none of them.
 *
 * The register model is the 82093AA's (Intel 82093AA I/O APIC datasheet, 3.0 and 3.2) as KVM's in-kernel one
 * implements it (arch/x86/kvm/ioapic.c), so that a guest sees no difference: version 0x11, 24 pins, IOREGSEL at
 * 0x00 and IOWIN at 0x10 of a 0x100-byte window, redirection entries whose low half write clears Remote IRR of an
 * edge-triggered pin (as Linux and Xen expect of an I/O APIC without an EOI register), line state in `irr`.
 *
 * Delivery: a redirection entry is an MSI (Intel SDM vol. 3A 11.11.1, 11.11.2): destination and destination mode
 * in the address, vector, delivery mode and trigger mode in the data. Lines brisk raises (the UART, the keyboard,
 * the fallback of a virtio device without an irqfd) are served here and sent with KVM_SIGNAL_MSI. A virtio
 * device's irqfd pulses GSI n in KVM, which follows brisk's routing table: GSI n -> pin n's MSI, kept in step with
 * the entries (KVM_SET_GSI_ROUTING, only when an unmasked pin's message changes; a masked pin has no route, so a
 * pulse on it is lost as an edge on a masked pin is). A level-triggered pin sets Remote IRR when delivered; KVM
 * exits with KVM_EXIT_IOAPIC_EOI when the guest EOIs a vector a level route carries (api.rst
 * KVM_CAP_SPLIT_IRQCHIP), and ioapic_eoi clears it and delivers again while the line is high.
 *
 * Every value here is the guest's (docs/security.md case 68): the selector is 8 bits, indirect registers that do
 * not exist read all ones and ignore writes, accesses of any width at any offset are served without reading or writing
 * outside the state, and whatever an entry says is only ever an MSI that KVM checks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/bus.h"
#include "brisk/devices.h"
#include "brisk/layout.h"
#include "brisk/log.h"
#include "brisk/snap_fields.h"
#include "brisk/snapshot.h"

#define IOAPIC_WINDOW	0x100u /* KVM's IOAPIC_MEM_LENGTH */
#define IOAPIC_REGSEL	0x00u
#define IOAPIC_IOWIN	0x10u
#define IOAPIC_REG_ID	0x00u
#define IOAPIC_REG_VER	0x01u
#define IOAPIC_REG_ARB	0x02u
#define IOAPIC_REDTBL	0x10u /* entry n: low half 0x10 + 2n, high half 0x11 + 2n */
#define IOAPIC_VERSION	0x11u /* the 82093AA's, and KVM's */
#define RTE_VECTOR	0xffull
#define RTE_DELIV_MODE	(7ull << 8)
#define RTE_DEST_LOG	(1ull << 11)
#define RTE_DELIV_STAT	(1ull << 12) /* read-only; brisk delivers at once, so always 0 */
#define RTE_REMOTE_IRR	(1ull << 14) /* read-only */
#define RTE_LEVEL	(1ull << 15)
#define RTE_MASKED	(1ull << 16)
#define RTE_DEST_SHIFT	56
#define RTE_RESET	RTE_MASKED
#define RTE_READ_ONLY	(RTE_DELIV_STAT | RTE_REMOTE_IRR)
#define MSI_ADDR_BASE	0xfee00000ull
#define MSI_DEST_SHIFT	12
#define MSI_DEST_LOG	(1ull << 2)
#define MSI_DATA_LEVEL	(1u << 15)
#define MSI_DATA_ASSERT (1u << 14)

_Static_assert(LAYOUT_IOAPIC_PINS <= 32, "irr is a 32-bit mask");

struct ioapic {
	struct devctx ctx;
	pthread_mutex_t lock;
	uint8_t id;	  /* the ID register's bits 31:24; the ACPI/MP tables' I/O APIC ID at reset */
	uint8_t reset_id; /* what reset gives it */
	uint8_t regsel;	  /* IOREGSEL */
	uint32_t irr;	  /* per pin: the line is high (level), or an edge not yet delivered (edge); KVM's irr */
	uint64_t rte[LAYOUT_IOAPIC_PINS];
	uint64_t
	    routed[LAYOUT_IOAPIC_PINS]; /* the MSI (address << 32 | data) of each pin in KVM's table; 0: no route */
	unsigned route_updates;		/* KVM_SET_GSI_ROUTING calls, for tests and the log */
};

/* Entry `e` as an MSI: the address's low 32 bits and the data (SDM vol. 3A 11.11.1, 11.11.2). */
static void rte_msi(uint64_t e, uint64_t *addr, uint32_t *data)
{
	*addr = MSI_ADDR_BASE | (e >> RTE_DEST_SHIFT) << MSI_DEST_SHIFT | (e & RTE_DEST_LOG ? MSI_DEST_LOG : 0);
	*data = (uint32_t)(e & (RTE_VECTOR | RTE_DELIV_MODE)) | (e & RTE_LEVEL ? MSI_DATA_LEVEL | MSI_DATA_ASSERT : 0);
}

/* The route pin `pin` should have in KVM's table: its MSI while unmasked, none (0) while masked. */
static uint64_t wanted_route(const struct ioapic *io, unsigned pin)
{
	uint64_t addr;
	uint32_t data;

	if (io->rte[pin] & RTE_MASKED)
		return 0;
	rte_msi(io->rte[pin], &addr, &data);
	return addr << 32 | data;
}

/* KVM's routing table brought in step with the entries: one call, only when a route changed. Under the lock. */
static void sync_routes(struct ioapic *io, bool force)
{
	struct devctx_msi r[LAYOUT_IOAPIC_PINS];
	unsigned n = 0;
	bool changed = force;
	int err;

	for (unsigned pin = 0; pin < LAYOUT_IOAPIC_PINS; pin++) {
		uint64_t w = wanted_route(io, pin);

		changed |= w != io->routed[pin];
		io->routed[pin] = w;
		if (w)
			r[n++] = (struct devctx_msi){.gsi = pin, .addr = w >> 32, .data = (uint32_t)w};
	}
	if (!changed || !io->ctx.ops->msi_routes)
		return;
	io->route_updates++;
	err = io->ctx.ops->msi_routes(io->ctx.vm, r, n);
	if (err)
		log_warn("ioapic: KVM_SET_GSI_ROUTING with %u routes failed: %s (irqfd interrupts may be lost)", n,
			 strerror(-err));
}

/* Sends pin `pin`'s interrupt when its entry lets it (unmasked; a level pin without Remote IRR). Under the lock. */
static void service(struct ioapic *io, unsigned pin)
{
	uint64_t e = io->rte[pin], addr;
	uint32_t data;
	int err;

	if ((e & RTE_MASKED) || ((e & RTE_LEVEL) && (e & RTE_REMOTE_IRR)))
		return;
	rte_msi(e, &addr, &data);
	err = io->ctx.ops->msi ? io->ctx.ops->msi(io->ctx.vm, addr, data) : -ENOTSUP;
	if (err < 0)
		log_warn("ioapic: KVM_SIGNAL_MSI for pin %u (address 0x%llx data 0x%x) failed: %s", pin,
			 (unsigned long long)addr, data, strerror(-err));
	if (e & RTE_LEVEL)
		io->rte[pin] |= RTE_REMOTE_IRR;
	else
		io->irr &= ~(1u << pin);
}

void ioapic_set_irq(struct ioapic *io, unsigned pin, int level)
{
	uint32_t mask, old;

	if (pin >= LAYOUT_IOAPIC_PINS)
		return;
	mask = 1u << pin;
	pthread_mutex_lock(&io->lock);
	old = io->irr;
	if (!level) {
		io->irr &= ~mask;
	} else {
		io->irr |= mask;
		/* an edge pin already high and not yet delivered: no new edge (KVM's ioapic_set_irq) */
		if ((io->rte[pin] & RTE_LEVEL) || old != io->irr)
			service(io, pin);
	}
	pthread_mutex_unlock(&io->lock);
}

void ioapic_eoi(struct ioapic *io, uint8_t vector)
{
	pthread_mutex_lock(&io->lock);
	for (unsigned pin = 0; pin < LAYOUT_IOAPIC_PINS; pin++) {
		uint64_t e = io->rte[pin];

		if ((e & RTE_VECTOR) != vector || !(e & RTE_LEVEL) || !(e & RTE_REMOTE_IRR))
			continue;
		io->rte[pin] &= ~RTE_REMOTE_IRR;
		if (io->irr & (1u << pin))
			service(io, pin);
	}
	pthread_mutex_unlock(&io->lock);
}

static uint32_t read_indirect(const struct ioapic *io)
{
	unsigned reg = io->regsel;

	switch (reg) {
	case IOAPIC_REG_ID:
	case IOAPIC_REG_ARB:
		return (uint32_t)io->id << 24;
	case IOAPIC_REG_VER:
		return IOAPIC_VERSION | (LAYOUT_IOAPIC_PINS - 1) << 16;
	default: /* no register (0x03-0x0f, past the last entry): all ones, as KVM's ioapic_read_indirect */
		if (reg < IOAPIC_REDTBL || reg >= IOAPIC_REDTBL + 2 * LAYOUT_IOAPIC_PINS)
			return 0xffffffffu;
		return (uint32_t)(io->rte[(reg - IOAPIC_REDTBL) / 2] >> (reg & 1 ? 32 : 0));
	}
}

/* A write to a redirection entry's half (KVM's ioapic_write_indirect). Under the lock. */
static void write_rte(struct ioapic *io, unsigned pin, bool high, uint32_t v)
{
	uint64_t *e = &io->rte[pin], keep = *e & RTE_READ_ONLY;

	*e = high ? (*e & 0xffffffffull) | (uint64_t)v << 32 : (*e & ~0xffffffffull) | v;
	*e = (*e & ~RTE_READ_ONLY) | keep;
	if (!(*e & RTE_LEVEL)) /* Remote IRR means nothing for an edge pin: cleared, as KVM and real I/O APICs do */
		*e &= ~RTE_REMOTE_IRR;
	sync_routes(io, false);
	/* a level line still high, now unmasked or retargeted with no interrupt outstanding: deliver it */
	if ((*e & RTE_LEVEL) && (io->irr & (1u << pin)))
		service(io, pin);
}

static void write_indirect(struct ioapic *io, uint32_t v)
{
	unsigned reg = io->regsel;

	if (reg == IOAPIC_REG_ID)
		io->id = (uint8_t)(v >> 24);
	else if (reg >= IOAPIC_REDTBL && reg < IOAPIC_REDTBL + 2 * LAYOUT_IOAPIC_PINS)
		write_rte(io, (reg - IOAPIC_REDTBL) / 2, reg & 1, v);
	/* the version and arbitration registers are read-only; past the last entry: nothing */
}

/* Reads of any width return the register's low bytes, as KVM's ioapic_mmio_read; other offsets read 0. */
static void ioapic_read(void *dev, const struct bus_access *a, void *data)
{
	struct ioapic *io = dev;
	uint64_t v = 0;

	pthread_mutex_lock(&io->lock);
	if (a->offset == IOAPIC_REGSEL)
		v = io->regsel;
	else if (a->offset == IOAPIC_IOWIN)
		v = read_indirect(io);
	pthread_mutex_unlock(&io->lock);
	memcpy(data, &v, a->len); /* the bus gives len 1, 2, 4 or 8 (device.h) */
}

/* Writes of any width take their low bytes (an 8-byte write its low 32 bits), as KVM's ioapic_mmio_write. */
static void ioapic_write(void *dev, const struct bus_access *a, const void *data)
{
	struct ioapic *io = dev;
	uint64_t raw = 0;
	uint32_t v;

	memcpy(&raw, data, a->len);
	v = (uint32_t)raw;
	pthread_mutex_lock(&io->lock);
	if (a->offset == IOAPIC_REGSEL)
		io->regsel = (uint8_t)v;
	else if (a->offset == IOAPIC_IOWIN)
		write_indirect(io, v);
	pthread_mutex_unlock(&io->lock);
}

/* Power-on state (82093AA 3.2.4: every entry masked), and no routes. */
static void ioapic_reset(void *dev)
{
	struct ioapic *io = dev;

	pthread_mutex_lock(&io->lock);
	io->id = io->reset_id;
	io->regsel = 0;
	io->irr = 0;
	for (unsigned pin = 0; pin < LAYOUT_IOAPIC_PINS; pin++)
		io->rte[pin] = RTE_RESET;
	sync_routes(io, false);
	pthread_mutex_unlock(&io->lock);
}

static void ioapic_destroy(void *dev)
{
	struct ioapic *io = dev;

	pthread_mutex_destroy(&io->lock);
	free(io);
}

/*
 * Snapshot (device.h), version IOAPIC_SNAP_VERSION, one record over struct ioapic: the ID, the selector, the
 * line state and the 24 entries (little-endian, as x86 holds them). The routes are not saved: restore rebuilds
 * KVM's table from the entries.
 */
#define IOAPIC_SNAP_VERSION 1u

static const struct snap_field ioapic_fields[] = {
    SNAP_UINT(struct ioapic, id, 1),
    SNAP_UINT(struct ioapic, regsel, 1),
    SNAP_UINT_MASK(struct ioapic, irr, 4, (1ull << LAYOUT_IOAPIC_PINS) - 1),
    SNAP_BYTES(struct ioapic, rte),
};
static const struct snap_record ioapic_record = SNAP_RECORD("ioapic", ioapic_fields);

/* Refuses what no guest can produce: Delivery Status set, Remote IRR on an edge-triggered entry. */
static const char *check_saved(const void *obj)
{
	const struct ioapic *n = obj;

	for (unsigned pin = 0; pin < LAYOUT_IOAPIC_PINS; pin++) {
		if (n->rte[pin] & RTE_DELIV_STAT)
			return "a redirection entry with Delivery Status set";
		if ((n->rte[pin] & RTE_REMOTE_IRR) && !(n->rte[pin] & RTE_LEVEL))
			return "an edge-triggered redirection entry with Remote IRR set";
	}
	return NULL;
}

static const struct snap_layout ioapic_layout = {
    .version = IOAPIC_SNAP_VERSION, .record = &ioapic_record, .check = check_saved};

static int ioapic_save(void *dev, struct snap_writer *w)
{
	struct ioapic *io = dev;
	int err;

	pthread_mutex_lock(&io->lock);
	err = snap_layout_save(w, &ioapic_layout, io);
	pthread_mutex_unlock(&io->lock);
	return err;
}

static int ioapic_restore(void *dev, struct snap_reader *r)
{
	struct ioapic *io = dev;
	struct ioapic n;
	char why[160];
	int err;

	memset(&n, 0, sizeof(n));
	err = snap_layout_load(r, &ioapic_layout, &n, why, sizeof(why));
	if (err) {
		log_error("ioapic: snapshot refused: %s", why);
		return err;
	}
	pthread_mutex_lock(&io->lock);
	snap_record_copy(&ioapic_record, io, &n);
	sync_routes(io, true);
	pthread_mutex_unlock(&io->lock);
	return 0;
}

static const struct dev_ops ioapic_ops = {
    .name = "ioapic",
    .read = ioapic_read,
    .write = ioapic_write,
    .reset = ioapic_reset,
    .destroy = ioapic_destroy,
    .save = ioapic_save,
    .restore = ioapic_restore,
};

int ioapic_create(const struct devctx *ctx, struct bus *bus, uint8_t id, struct ioapic **out)
{
	struct ioapic *io = calloc(1, sizeof(*io));
	struct bus_device *d;

	if (!io)
		return -ENOMEM;
	io->ctx = *ctx;
	io->id = io->reset_id = id;
	for (unsigned pin = 0; pin < LAYOUT_IOAPIC_PINS; pin++)
		io->rte[pin] = RTE_RESET;
	pthread_mutex_init(&io->lock, NULL);
	d = bus_add(bus, &ioapic_ops, io);
	if (!d)
		return -ENOSPC;
	if (out)
		*out = io;
	return bus_map(bus, d, BUS_MMIO, BRISK_IOAPIC_BASE, IOAPIC_WINDOW);
}

unsigned ioapic_route_updates(struct ioapic *io)
{
	unsigned n;

	pthread_mutex_lock(&io->lock);
	n = io->route_updates;
	pthread_mutex_unlock(&io->lock);
	return n;
}
