/* test_acpi.c - the ACPI tables: the RSDP -> XSDT -> FADT/MADT/DSDT walk, checksums, every field, limits, placement. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "brisk/abi.h"
#include "brisk/acpi.h"
#include "brisk/cpuid.h"
#include "brisk/devmgr.h"
#include "brisk/layout.h"
#include "brisk/mem.h"

#include "guest_ram.h"

#define MiB (1ULL << 20)

static char err[256];

/* Little-endian field readers: the test parses by the spec's offsets (ACPI 6.3 chapter 5), not brisk's structs. */
static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* A table in guest RAM: signature, length inside the ACPI region, checksum 0. Returns its bytes. */
static const uint8_t *table_at(const struct gmem *mem, uint64_t gpa, const char *sig)
{
	const uint8_t *h = gmem_ptr(mem, gpa, 36);
	uint32_t len;

	assert_non_null(h);
	assert_memory_equal(h, sig, 4);
	len = le32(h + 4);
	assert_true(gpa >= LAYOUT_ACPI && gpa + len <= LAYOUT_ACPI + LAYOUT_ACPI_SIZE);
	assert_int_equal(gpa % 16, 0);
	h = gmem_ptr(mem, gpa, len);
	assert_int_equal(byte_sum(h, len), 0);
	assert_memory_equal(h + 10, "BRISK ", 6);
	assert_memory_equal(h + 28, "BRSK", 4);
	return h;
}

struct walk {
	const uint8_t *fadt, *madt, *dsdt;
};

/* RSDP (5.2.5.3) -> XSDT (5.2.8) -> FADT, MADT; FADT.X_DSDT -> DSDT, as a guest finds them. */
static struct walk walk(const struct gmem *mem, uint64_t rsdp_gpa)
{
	const uint8_t *r = gmem_ptr(mem, rsdp_gpa, 36), *x;
	struct walk w = {0};

	assert_int_equal(rsdp_gpa, LAYOUT_ACPI);
	assert_non_null(r);
	assert_memory_equal(r, "RSD PTR ", 8);
	assert_int_equal(byte_sum(r, 20), 0);
	assert_int_equal(byte_sum(r, 36), 0);
	assert_int_equal(r[15], 2);	    /* revision */
	assert_int_equal(le32(r + 16), 0);  /* no RSDT */
	assert_int_equal(le32(r + 20), 36); /* length */
	x = table_at(mem, le64(r + 24), "XSDT");
	assert_int_equal(le32(x + 4), 36 + 2 * 8);
	w.fadt = table_at(mem, le64(x + 36), "FACP");
	w.madt = table_at(mem, le64(x + 44), "APIC");
	assert_int_equal(le32(w.fadt + 40), 0); /* 32-bit DSDT unused */
	w.dsdt = table_at(mem, le64(w.fadt + 140), "DSDT");
	return w;
}

static struct acpi_machine machine(unsigned cpus, const uint32_t *ids, struct devmgr *dm, unsigned nr_virtio)
{
	*dm = (struct devmgr){0};
	for (unsigned i = 0; i < nr_virtio; i++)
		assert_non_null(devmgr_alloc(dm, "virtio"));
	return (struct acpi_machine){.cpus = cpus,
				     .apic_ids = ids,
				     .nr_virtio = dm->nr,
				     .virtio = dm->win,
				     .legacy = ACPI_DEV_COM1 | ACPI_DEV_I8042 | ACPI_DEV_RTC};
}

static void check_gas(const uint8_t *g, uint64_t port)
{
	assert_int_equal(g[0], 1); /* System I/O */
	assert_int_equal(g[1], 8); /* bit width */
	assert_int_equal(g[2], 0); /* bit offset */
	assert_int_equal(g[3], 1); /* byte access */
	assert_int_equal(le64(g + 4), port);
}

static void test_walk_and_fadt(void **state)
{
	const struct gmem *mem = *state;
	uint32_t ids[4] = {0, 1, 2, 3};
	struct devmgr dm;
	struct acpi_machine m = machine(4, ids, &dm, 2);
	uint64_t rsdp = 0;
	struct walk w;
	uint32_t flags;

	assert_int_equal(acpi_write(mem, &m, &rsdp, err, sizeof(err)), 0);
	w = walk(mem, rsdp);
	assert_int_equal(le32(w.fadt + 4), 276);
	assert_int_equal(w.fadt[8], 6);	  /* FADT revision 6 */
	assert_int_equal(w.fadt[131], 3); /* minor version: ACPI 6.3 */
	flags = le32(w.fadt + 112);
	assert_true(flags & (1u << 20));	 /* HW_REDUCED_ACPI */
	assert_true(flags & (1u << 10));	 /* RESET_REG_SUP */
	assert_int_equal(le32(w.fadt + 36), 0);	 /* no FACS */
	assert_int_equal(le64(w.fadt + 132), 0); /* no X_FACS */
	assert_int_equal(le16(w.fadt + 109), 7); /* legacy devices, 8042, no VGA */
	assert_int_equal(w.fadt[108], 0x32);	 /* RTC century index */
	check_gas(w.fadt + 116, LAYOUT_ACPI_RESET);
	assert_int_equal(w.fadt[128], LAYOUT_ACPI_RESET_VALUE);
	check_gas(w.fadt + 244, LAYOUT_ACPI_SLEEP_CTL);
	check_gas(w.fadt + 256, LAYOUT_ACPI_SLEEP_STS);
	for (size_t off = 148; off < 244; off++) /* the X_ PM1/PM2/timer/GPE blocks: absent */
		assert_int_equal(w.fadt[off], 0);
	for (size_t off = 56; off < 96; off++) /* their 32-bit forms and lengths */
		assert_int_equal(w.fadt[off], 0);
	assert_memory_equal(w.dsdt + 8, "\x02", 1); /* DSDT revision 2: 64-bit integers */
}

/* Without legacy devices: no boot flags but NO_VGA, no century, no legacy devices in the DSDT. */
static void test_no_legacy(void **state)
{
	const struct gmem *mem = *state;
	uint32_t id = 0;
	struct devmgr dm;
	struct acpi_machine m = machine(1, &id, &dm, 0);
	uint64_t rsdp;
	struct walk w;

	m.legacy = 0;
	assert_int_equal(acpi_write(mem, &m, &rsdp, err, sizeof(err)), 0);
	w = walk(mem, rsdp);
	assert_int_equal(le16(w.fadt + 109), 4);
	assert_int_equal(w.fadt[108], 0);
	assert_null(memmem(w.dsdt, le32(w.dsdt + 4), "COM1", 4));
	assert_null(memmem(w.dsdt, le32(w.dsdt + 4), "PS2K", 4));
	assert_null(memmem(w.dsdt, le32(w.dsdt + 4), "RTC_", 4));
	assert_null(memmem(w.dsdt, le32(w.dsdt + 4), "LNRO", 4));
	assert_non_null(memmem(w.dsdt, le32(w.dsdt + 4), "_S5_", 4));
}

/* The MADT for `cpus` vCPUs with `ids`: one LAPIC each in order, the I/O APIC above the highest, IRQ 0 -> GSI 0, NMI.
 */
static void check_madt(const uint8_t *t, unsigned cpus, const uint32_t *ids, bool pic)
{
	uint32_t len = le32(t + 4), max = 0;
	unsigned n_lapic = 0, n_ioapic = 0, n_iso = 0, n_nmi = 0;
	const uint8_t *e = t + 44, *end = t + len;

	assert_int_equal(t[8], 5);
	assert_int_equal(len, 44 + 8 * cpus + 12 + 10 + 6);
	assert_int_equal(le32(t + 36), BRISK_LAPIC_BASE);
	assert_int_equal(le32(t + 40), pic ? 1 : 0); /* PCAT_COMPAT: a dual 8259 only with --irqchip kernel */
	for (unsigned i = 0; i < cpus; i++)
		max = ids[i] > max ? ids[i] : max;
	while (e < end) {
		assert_true(e[1] >= 2 && e + e[1] <= end);
		switch (e[0]) {
		case 0: /* Processor Local APIC */
			assert_int_equal(e[1], 8);
			assert_int_equal(e[2], n_lapic);      /* UID = vCPU index */
			assert_int_equal(e[3], ids[n_lapic]); /* APIC ID, in vCPU order */
			assert_int_equal(le32(e + 4), 1);     /* enabled */
			n_lapic++;
			break;
		case 1: /* I/O APIC */
			assert_int_equal(e[1], 12);
			assert_int_equal(e[2], max + 1);
			assert_int_equal(le32(e + 4), BRISK_IOAPIC_BASE);
			assert_int_equal(le32(e + 8), 0);
			n_ioapic++;
			break;
		case 2: /* Interrupt Source Override */
			assert_int_equal(e[1], 10);
			assert_int_equal(e[2], 0);	    /* ISA */
			assert_int_equal(e[3], 0);	    /* IRQ 0 */
			assert_int_equal(le32(e + 4), 0);   /* GSI 0: no redirection to pin 2 */
			assert_int_equal(le16(e + 8), 0x5); /* edge, active high */
			n_iso++;
			break;
		case 4: /* Local APIC NMI */
			assert_int_equal(e[1], 6);
			assert_int_equal(e[2], 0xff);
			assert_int_equal(e[5], 1); /* LINT1 */
			n_nmi++;
			break;
		default:
			fail_msg("unexpected MADT entry type %u", e[0]);
		}
		e += e[1];
	}
	assert_int_equal(n_lapic, cpus);
	assert_int_equal(n_ioapic, 1);
	assert_int_equal(n_iso, 1);
	assert_int_equal(n_nmi, 1);
}

/* Default and gapped topologies: the APIC IDs are cpuid_apic_id's, whatever holes the bit fields leave. */
static void test_madt_topologies(void **state)
{
	static const unsigned topo[][4] = {
	    /* cpus, sockets, cores, threads (0: default) */
	    {1, 0, 0, 0}, {2, 0, 0, 0},	 {4, 0, 0, 0},	{16, 0, 0, 0}, {254, 0, 0, 0},	{6, 2, 3, 1},
	    {6, 1, 3, 2}, {27, 3, 3, 3}, {12, 2, 3, 2}, {5, 5, 1, 1},  {126, 2, 63, 1},
	};
	const struct gmem *mem = *state;
	uint32_t ids[ACPI_MAX_CPUS];
	struct cpuid_topology t;
	struct devmgr dm;
	uint64_t rsdp;

	for (unsigned k = 0; k < sizeof(topo) / sizeof(topo[0]); k++) {
		unsigned cpus = topo[k][0];
		struct acpi_machine m;

		assert_int_equal(cpuid_topology_init(&t, cpus, topo[k][1], topo[k][2], topo[k][3], err, sizeof(err)),
				 0);
		for (unsigned i = 0; i < cpus; i++)
			ids[i] = cpuid_apic_id(&t, i);
		m = machine(cpus, ids, &dm, 3);
		m.legacy |= k % 2 ? ACPI_DEV_PIC : 0;
		assert_int_equal(acpi_write(mem, &m, &rsdp, err, sizeof(err)), 0);
		check_madt(walk(mem, rsdp).madt, cpus, ids, k % 2);
	}
	/* The gaps are really there: 2 sockets x 3 cores take IDs 0-2 and 4-6. */
	assert_int_equal(cpuid_topology_init(&t, 6, 2, 3, 1, err, sizeof(err)), 0);
	assert_int_equal(cpuid_apic_id(&t, 3), 4);
}

/*
 * The DSDT for COM1, the i8042, the RTC and two virtio devices (slots 0 and
 * 1) is byte for byte what iasl 20200925 compiles from this ASL (the body
 * after the header):
 *   Name (_S5, Package (0x04) { 0x05, Zero, Zero, Zero })
 *   Scope (\_SB)
 *   {
 *       Device (COM1) { Name (_HID, EisaId ("PNP0501")) Name (_UID, One)
 *           Name (_CRS, ResourceTemplate () { IO (Decode16, 0x03F8, 0x03F8, 0x00, 0x08) IRQNoFlags () {4} }) }
 *       Device (PS2K) { Name (_HID, EisaId ("PNP0303"))
 *           Name (_CRS, ResourceTemplate () { IO (Decode16, 0x0060, 0x0060, 0x00, 0x01)
 *               IO (Decode16, 0x0064, 0x0064, 0x00, 0x01) IRQNoFlags () {1} }) }
 *       Device (RTC) { Name (_HID, EisaId ("PNP0B00"))
 *           Name (_CRS, ResourceTemplate () { IO (Decode16, 0x0070, 0x0070, 0x00, 0x02) }) }
 *       Device (VR00) { Name (_HID, "LNRO0005") Name (_UID, Zero) Name (_CCA, One)
 *           Name (_CRS, ResourceTemplate () { Memory32Fixed (ReadWrite, 0xD0001000, 0x00001000)
 *               Interrupt (ResourceConsumer, Edge, ActiveHigh, Exclusive, ,, ) {5} }) }
 *       Device (VR01) { ... _UID One ... 0xD0002000 ... {6} }
 *   }
 */
static const uint8_t gold_dsdt2[] = {
    0x08, 0x5f, 0x53, 0x35, 0x5f, 0x12, 0x07, 0x04, 0x0a, 0x05, 0x00, 0x00, 0x00, 0x10, 0x4c, 0x10, 0x5f, 0x53, 0x42,
    0x5f, 0x5b, 0x82, 0x2b, 0x43, 0x4f, 0x4d, 0x31, 0x08, 0x5f, 0x48, 0x49, 0x44, 0x0c, 0x41, 0xd0, 0x05, 0x01, 0x08,
    0x5f, 0x55, 0x49, 0x44, 0x01, 0x08, 0x5f, 0x43, 0x52, 0x53, 0x11, 0x10, 0x0a, 0x0d, 0x47, 0x01, 0xf8, 0x03, 0xf8,
    0x03, 0x00, 0x08, 0x22, 0x10, 0x00, 0x79, 0x00, 0x5b, 0x82, 0x2d, 0x50, 0x53, 0x32, 0x4b, 0x08, 0x5f, 0x48, 0x49,
    0x44, 0x0c, 0x41, 0xd0, 0x03, 0x03, 0x08, 0x5f, 0x43, 0x52, 0x53, 0x11, 0x18, 0x0a, 0x15, 0x47, 0x01, 0x60, 0x00,
    0x60, 0x00, 0x00, 0x01, 0x47, 0x01, 0x64, 0x00, 0x64, 0x00, 0x00, 0x01, 0x22, 0x02, 0x00, 0x79, 0x00, 0x5b, 0x82,
    0x22, 0x52, 0x54, 0x43, 0x5f, 0x08, 0x5f, 0x48, 0x49, 0x44, 0x0c, 0x41, 0xd0, 0x0b, 0x00, 0x08, 0x5f, 0x43, 0x52,
    0x53, 0x11, 0x0d, 0x0a, 0x0a, 0x47, 0x01, 0x70, 0x00, 0x70, 0x00, 0x00, 0x02, 0x79, 0x00, 0x5b, 0x82, 0x41, 0x04,
    0x56, 0x52, 0x30, 0x30, 0x08, 0x5f, 0x48, 0x49, 0x44, 0x0d, 0x4c, 0x4e, 0x52, 0x4f, 0x30, 0x30, 0x30, 0x35, 0x00,
    0x08, 0x5f, 0x55, 0x49, 0x44, 0x00, 0x08, 0x5f, 0x43, 0x43, 0x41, 0x01, 0x08, 0x5f, 0x43, 0x52, 0x53, 0x11, 0x1a,
    0x0a, 0x17, 0x86, 0x09, 0x00, 0x01, 0x00, 0x10, 0x00, 0xd0, 0x00, 0x10, 0x00, 0x00, 0x89, 0x06, 0x00, 0x03, 0x01,
    0x05, 0x00, 0x00, 0x00, 0x79, 0x00, 0x5b, 0x82, 0x41, 0x04, 0x56, 0x52, 0x30, 0x31, 0x08, 0x5f, 0x48, 0x49, 0x44,
    0x0d, 0x4c, 0x4e, 0x52, 0x4f, 0x30, 0x30, 0x30, 0x35, 0x00, 0x08, 0x5f, 0x55, 0x49, 0x44, 0x01, 0x08, 0x5f, 0x43,
    0x43, 0x41, 0x01, 0x08, 0x5f, 0x43, 0x52, 0x53, 0x11, 0x1a, 0x0a, 0x17, 0x86, 0x09, 0x00, 0x01, 0x00, 0x20, 0x00,
    0xd0, 0x00, 0x10, 0x00, 0x00, 0x89, 0x06, 0x00, 0x03, 0x01, 0x06, 0x00, 0x00, 0x00, 0x79, 0x00,
};

/* Writes m's tables and checks that the DSDT's body is `gold` (len bytes) byte for byte; returns the DSDT. */
static const uint8_t *dsdt_is(const struct gmem *mem, const struct acpi_machine *m, const uint8_t *gold, size_t len)
{
	uint64_t rsdp;
	const uint8_t *d;

	assert_int_equal(acpi_write(mem, m, &rsdp, err, sizeof(err)), 0);
	d = walk(mem, rsdp).dsdt;
	assert_int_equal(le32(d + 4), 36 + len);
	assert_memory_equal(d + 36, gold, len);
	return d;
}

static void test_dsdt_golden(void **state)
{
	const struct gmem *mem = *state;
	uint32_t id = 0;
	struct devmgr dm;
	struct acpi_machine m = machine(1, &id, &dm, 2);

	dsdt_is(mem, &m, gold_dsdt2, sizeof(gold_dsdt2));
}

/*
 * The VM Generation ID and its GED (no legacy device, no virtio), byte for byte what iasl 20200925 compiles from:
 *   Name (_S5, Package (0x04) { 0x05, Zero, Zero, Zero })
 *   Scope (\_SB)
 *   {
 *       Device (VGEN) { Name (_HID, "BRSK0001") Name (_CID, "VM_Gen_Counter") Name (_DDN, "VM_Gen_Counter")
 *           Name (ADDR, Package (0x02) { 0x000EF000, Zero }) }
 *       Device (GED) { Name (_HID, "ACPI0013")
 *           Name (_CRS, ResourceTemplate () { Interrupt (ResourceConsumer, Edge, ActiveHigh, Exclusive, ,, ) {3} })
 *           Method (_EVT, 1, Serialized) { If (LEqual (Arg0, 0x03)) { Notify (\_SB.VGEN, 0x80) } } }
 *   }
 * (iasl writes \_SB.VGEN as the relative VGEN.)
 */
static const uint8_t gold_dsdt_vmgenid[] = {
    0x08, 0x5f, 0x53, 0x35, 0x5f, 0x12, 0x07, 0x04, 0x0a, 0x05, 0x00, 0x00, 0x00, 0x10, 0x43, 0x09, 0x5f, 0x53,
    0x42, 0x5f, 0x5b, 0x82, 0x4d, 0x04, 0x56, 0x47, 0x45, 0x4e, 0x08, 0x5f, 0x48, 0x49, 0x44, 0x0d, 0x42, 0x52,
    0x53, 0x4b, 0x30, 0x30, 0x30, 0x31, 0x00, 0x08, 0x5f, 0x43, 0x49, 0x44, 0x0d, 0x56, 0x4d, 0x5f, 0x47, 0x65,
    0x6e, 0x5f, 0x43, 0x6f, 0x75, 0x6e, 0x74, 0x65, 0x72, 0x00, 0x08, 0x5f, 0x44, 0x44, 0x4e, 0x0d, 0x56, 0x4d,
    0x5f, 0x47, 0x65, 0x6e, 0x5f, 0x43, 0x6f, 0x75, 0x6e, 0x74, 0x65, 0x72, 0x00, 0x08, 0x41, 0x44, 0x44, 0x52,
    0x12, 0x08, 0x02, 0x0c, 0x00, 0xf0, 0x0e, 0x00, 0x00, 0x5b, 0x82, 0x3c, 0x47, 0x45, 0x44, 0x5f, 0x08, 0x5f,
    0x48, 0x49, 0x44, 0x0d, 0x41, 0x43, 0x50, 0x49, 0x30, 0x30, 0x31, 0x33, 0x00, 0x08, 0x5f, 0x43, 0x52, 0x53,
    0x11, 0x0e, 0x0a, 0x0b, 0x89, 0x06, 0x00, 0x03, 0x01, 0x03, 0x00, 0x00, 0x00, 0x79, 0x00, 0x14, 0x13, 0x5f,
    0x45, 0x56, 0x54, 0x09, 0xa0, 0x0c, 0x93, 0x68, 0x0a, 0x03, 0x86, 0x56, 0x47, 0x45, 0x4e, 0x0a, 0x80,
};

static void test_dsdt_vmgenid(void **state)
{
	const struct gmem *mem = *state;
	uint32_t id = 0;
	struct devmgr dm;
	struct acpi_machine m = machine(1, &id, &dm, 0);
	uint64_t rsdp;

	m.legacy = 0;
	m.vmgenid = LAYOUT_VMGENID;
	m.ged_gsi = LAYOUT_GED_GSI;
	dsdt_is(mem, &m, gold_dsdt_vmgenid, sizeof(gold_dsdt_vmgenid));
	/* A GED on a virtio device's line, or past the I/O APIC's pins, is refused. */
	m = machine(1, &id, &dm, 1);
	m.vmgenid = LAYOUT_VMGENID;
	m.ged_gsi = dm.win[0].irq;
	assert_int_equal(acpi_write(mem, &m, &rsdp, err, sizeof(err)), -EINVAL);
	m.ged_gsi = LAYOUT_IOAPIC_PINS;
	assert_int_equal(acpi_write(mem, &m, &rsdp, err, sizeof(err)), -EINVAL);
}

/*
 * With the VMClock page as well (as every VM with ACPI has them), byte for byte what iasl 20200925 compiles from
 * the ASL above with, between VGEN and GED,
 *       Device (VCLK) { Name (_HID, "AMZNC10C") Name (_CID, "VMCLOCK") Name (_DDN, "VMCLOCK")
 *           Name (_CRS, ResourceTemplate () { Memory32Fixed (ReadOnly, 0x000EE000, 0x00001000, ) }) }
 * and the GED's _EVT notifying both: If (LEqual (Arg0, 0x03)) { Notify (\_SB.VGEN, 0x80) Notify (\_SB.VCLK, 0x80) }
 */
static const uint8_t gold_dsdt_vmclock[] = {
    0x08, 0x5f, 0x53, 0x35, 0x5f, 0x12, 0x07, 0x04, 0x0a, 0x05, 0x00, 0x00, 0x00, 0x10, 0x45, 0x0e, 0x5f, 0x53, 0x42,
    0x5f, 0x5b, 0x82, 0x4d, 0x04, 0x56, 0x47, 0x45, 0x4e, 0x08, 0x5f, 0x48, 0x49, 0x44, 0x0d, 0x42, 0x52, 0x53, 0x4b,
    0x30, 0x30, 0x30, 0x31, 0x00, 0x08, 0x5f, 0x43, 0x49, 0x44, 0x0d, 0x56, 0x4d, 0x5f, 0x47, 0x65, 0x6e, 0x5f, 0x43,
    0x6f, 0x75, 0x6e, 0x74, 0x65, 0x72, 0x00, 0x08, 0x5f, 0x44, 0x44, 0x4e, 0x0d, 0x56, 0x4d, 0x5f, 0x47, 0x65, 0x6e,
    0x5f, 0x43, 0x6f, 0x75, 0x6e, 0x74, 0x65, 0x72, 0x00, 0x08, 0x41, 0x44, 0x44, 0x52, 0x12, 0x08, 0x02, 0x0c, 0x00,
    0xf0, 0x0e, 0x00, 0x00, 0x5b, 0x82, 0x48, 0x04, 0x56, 0x43, 0x4c, 0x4b, 0x08, 0x5f, 0x48, 0x49, 0x44, 0x0d, 0x41,
    0x4d, 0x5a, 0x4e, 0x43, 0x31, 0x30, 0x43, 0x00, 0x08, 0x5f, 0x43, 0x49, 0x44, 0x0d, 0x56, 0x4d, 0x43, 0x4c, 0x4f,
    0x43, 0x4b, 0x00, 0x08, 0x5f, 0x44, 0x44, 0x4e, 0x0d, 0x56, 0x4d, 0x43, 0x4c, 0x4f, 0x43, 0x4b, 0x00, 0x08, 0x5f,
    0x43, 0x52, 0x53, 0x11, 0x11, 0x0a, 0x0e, 0x86, 0x09, 0x00, 0x00, 0x00, 0xe0, 0x0e, 0x00, 0x00, 0x10, 0x00, 0x00,
    0x79, 0x00, 0x5b, 0x82, 0x44, 0x04, 0x47, 0x45, 0x44, 0x5f, 0x08, 0x5f, 0x48, 0x49, 0x44, 0x0d, 0x41, 0x43, 0x50,
    0x49, 0x30, 0x30, 0x31, 0x33, 0x00, 0x08, 0x5f, 0x43, 0x52, 0x53, 0x11, 0x0e, 0x0a, 0x0b, 0x89, 0x06, 0x00, 0x03,
    0x01, 0x03, 0x00, 0x00, 0x00, 0x79, 0x00, 0x14, 0x1a, 0x5f, 0x45, 0x56, 0x54, 0x09, 0xa0, 0x13, 0x93, 0x68, 0x0a,
    0x03, 0x86, 0x56, 0x47, 0x45, 0x4e, 0x0a, 0x80, 0x86, 0x56, 0x43, 0x4c, 0x4b, 0x0a, 0x80,
};

static void test_dsdt_vmclock(void **state)
{
	const struct gmem *mem = *state;
	uint32_t id = 0;
	struct devmgr dm;
	struct acpi_machine m = machine(1, &id, &dm, 0);
	uint64_t rsdp;
	const uint8_t *d;

	m.legacy = 0;
	m.vmgenid = LAYOUT_VMGENID;
	m.vmclock = LAYOUT_VMCLOCK;
	m.ged_gsi = LAYOUT_GED_GSI;
	d = dsdt_is(mem, &m, gold_dsdt_vmclock, sizeof(gold_dsdt_vmclock));
	/* The tables end below the page (and the VMGenID's above it). */
	assert_true(d + le32(d + 4) <= (const uint8_t *)gmem_ptr(mem, LAYOUT_VMCLOCK, 1));
	/* A page not page-aligned, or not below 4 GiB, or on a virtio device's line, is refused. */
	m.vmclock = LAYOUT_VMCLOCK + 8;
	assert_int_equal(acpi_write(mem, &m, &rsdp, err, sizeof(err)), -EINVAL);
	m.vmclock = 1ull << 32;
	assert_int_equal(acpi_write(mem, &m, &rsdp, err, sizeof(err)), -EINVAL);
	m = machine(1, &id, &dm, 1);
	m.vmclock = LAYOUT_VMCLOCK;
	m.ged_gsi = dm.win[0].irq;
	assert_int_equal(acpi_write(mem, &m, &rsdp, err, sizeof(err)), -EINVAL);
}

/* Every window the device manager hands out is named: VRnn, "LNRO0005", its base and its line. */
static void test_dsdt_names_each_window(void **state)
{
	const struct gmem *mem = *state;
	uint32_t id = 0;
	struct devmgr dm;
	uint64_t rsdp;

	for (unsigned n = 0; n <= LAYOUT_VIRTIO_WINDOWS; n++) {
		struct acpi_machine m = machine(1, &id, &dm, n);
		const uint8_t *d, *at;
		uint32_t len;

		assert_int_equal(acpi_write(mem, &m, &rsdp, err, sizeof(err)), 0);
		d = walk(mem, rsdp).dsdt;
		len = le32(d + 4);
		for (unsigned i = 0; i < LAYOUT_VIRTIO_WINDOWS; i++) {
			char name[5];
			uint8_t mem32[12] = {0x86, 0x09, 0x00, 0x01}, irq[9] = {0x89, 0x06, 0x00, 0x03, 0x01};
			uint32_t base = (uint32_t)(LAYOUT_VIRTIO_MMIO + i * LAYOUT_VIRTIO_MMIO_SIZE);

			snprintf(name, sizeof(name), "VR%02u", i);
			memcpy(mem32 + 4, &base, 4);
			memcpy(mem32 + 8, &(uint32_t){LAYOUT_VIRTIO_MMIO_SIZE}, 4);
			at = memmem(d, len, name, 4);
			if (i >= n) {
				assert_null(at);
				assert_null(memmem(d, len, mem32, sizeof(mem32)));
				continue;
			}
			assert_non_null(at);
			assert_int_equal(dm.win[i].base, base);
			/* This device's _CRS follows its name, before the next device's. */
			at = memmem(at, len - (size_t)(at - d), mem32, sizeof(mem32));
			assert_non_null(at);
			memcpy(irq + 5, &(uint32_t){dm.win[i].irq}, 4);
			assert_memory_equal(at + sizeof(mem32), irq, sizeof(irq));
		}
	}
}

/* acpi_build writes buf[0..used) and at most ACPI_SCRATCH zero bytes past it; the padding between tables is zero. */
static void test_build_bounds(void **state)
{
	static uint8_t buf[LAYOUT_ACPI_SIZE + 64];
	uint32_t ids[ACPI_MAX_CPUS];
	struct devmgr dm;
	struct acpi_machine m;
	struct acpi_layout l;
	size_t used;

	(void)state;
	for (unsigned i = 0; i < ACPI_MAX_CPUS; i++)
		ids[i] = i;
	m = machine(ACPI_MAX_CPUS, ids, &dm, LAYOUT_VIRTIO_WINDOWS);
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(acpi_build(&m, LAYOUT_ACPI, buf, LAYOUT_ACPI_SIZE, &l, err, sizeof(err)), 0);
	used = l.used;
	assert_true(used < 8192); /* the largest machine fits easily */
	for (size_t i = used; i < used + ACPI_SCRATCH; i++)
		assert_true(buf[i] == 0x5a || buf[i] == 0);
	for (size_t i = used + ACPI_SCRATCH; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0x5a);
	for (unsigned t = 0; t < ACPI_NR_TABLES; t++) {
		size_t end = l.off[t] + l.len[t], next = used;

		assert_int_equal(l.off[t] % 16, 0);
		for (unsigned u = 0; u < ACPI_NR_TABLES; u++)
			if (l.off[u] > l.off[t] && l.off[u] < next)
				next = l.off[u];
		assert_true(end <= next);
		for (size_t i = end; i < next; i++)
			assert_int_equal(buf[i], 0);
	}
	assert_int_equal(l.off[ACPI_RSDP], 0);
	assert_int_equal(l.off[ACPI_DSDT] + l.len[ACPI_DSDT], used);

	/* Every capacity below `used` fails with -ENOSPC and writes nothing at or past it. */
	for (size_t cap = 0; cap < used; cap += cap < 600 ? 1 : 7) {
		memset(buf, 0x5a, sizeof(buf));
		assert_int_equal(acpi_build(&m, LAYOUT_ACPI, buf, cap, &l, err, sizeof(err)), -ENOSPC);
		for (size_t i = cap; i < sizeof(buf); i++)
			assert_int_equal(buf[i], 0x5a);
	}
}

static void test_refuses(void **state)
{
	uint8_t buf[8192];
	uint32_t ids[ACPI_MAX_CPUS + 1] = {0};
	struct devmgr dm;
	struct acpi_machine m;
	struct acpi_layout l;

	(void)state;
	for (unsigned i = 0; i <= ACPI_MAX_CPUS; i++)
		ids[i] = i;
	m = machine(0, ids, &dm, 1);
	assert_int_equal(acpi_build(&m, 0, buf, sizeof(buf), &l, err, sizeof(err)), -EINVAL);
	m.cpus = ACPI_MAX_CPUS + 1;
	assert_int_equal(acpi_build(&m, 0, buf, sizeof(buf), &l, err, sizeof(err)), -EINVAL);
	m.cpus = 2;
	m.apic_ids = NULL;
	assert_int_equal(acpi_build(&m, 0, buf, sizeof(buf), &l, err, sizeof(err)), -EINVAL);
	/* APIC ID 254 leaves nothing below the broadcast ID for the I/O APIC; 253 does. */
	m.apic_ids = (const uint32_t[]){0, 254};
	assert_int_equal(acpi_build(&m, 0, buf, sizeof(buf), &l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "254"));
	m.apic_ids = (const uint32_t[]){0, 253};
	assert_int_equal(acpi_build(&m, 0, buf, sizeof(buf), &l, err, sizeof(err)), 0);
	m.apic_ids = (const uint32_t[]){0, 1000};
	assert_int_equal(acpi_build(&m, 0, buf, sizeof(buf), &l, err, sizeof(err)), -EINVAL);
	m.apic_ids = (const uint32_t[]){3, 3};
	assert_int_equal(acpi_build(&m, 0, buf, sizeof(buf), &l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "repeats"));
	/* Virtio: more windows than slots, a window above 4 GiB, a line the I/O APIC lacks. */
	m.apic_ids = ids;
	m.nr_virtio = LAYOUT_VIRTIO_WINDOWS + 1;
	assert_int_equal(acpi_build(&m, 0, buf, sizeof(buf), &l, err, sizeof(err)), -EINVAL);
	m.nr_virtio = 1;
	dm.win[0].base = 0xfffff000;
	assert_int_equal(acpi_build(&m, 0, buf, sizeof(buf), &l, err, sizeof(err)), 0);
	dm.win[0].base = 0xfffff001;
	assert_int_equal(acpi_build(&m, 0, buf, sizeof(buf), &l, err, sizeof(err)), -EINVAL);
	dm.win[0].base = 0x100000000ULL;
	assert_int_equal(acpi_build(&m, 0, buf, sizeof(buf), &l, err, sizeof(err)), -EINVAL);
	dm.win[0].base = LAYOUT_VIRTIO_MMIO;
	dm.win[0].irq = 24;
	assert_int_equal(acpi_build(&m, 0, buf, sizeof(buf), &l, err, sizeof(err)), -EINVAL);
	dm.win[0].irq = 23;
	assert_int_equal(acpi_build(&m, 0, buf, sizeof(buf), &l, err, sizeof(err)), 0);
}

/* Guest RAM that does not reach the ACPI region: -EFAULT, nothing written. */
static void test_small_ram(void **state)
{
	struct gmem mem;
	uint32_t id = 0;
	struct devmgr dm;
	struct acpi_machine m = machine(1, &id, &dm, 0);
	uint64_t rsdp = 0;

	(void)state;
	assert_int_equal(gmem_init(&mem, LAYOUT_ACPI + LAYOUT_ACPI_SIZE - 4096, 0), 0);
	assert_int_equal(acpi_write(&mem, &m, &rsdp, err, sizeof(err)), -EFAULT);
	assert_int_equal(rsdp, 0);
	gmem_destroy(&mem);
	assert_int_equal(gmem_init(&mem, LAYOUT_ACPI + LAYOUT_ACPI_SIZE, 0), 0);
	assert_int_equal(acpi_write(&mem, &m, &rsdp, err, sizeof(err)), 0);
	assert_int_equal(rsdp, LAYOUT_ACPI);
	gmem_destroy(&mem);
}

static void test_table_names(void **state)
{
	(void)state;
	assert_string_equal(acpi_table_name(ACPI_RSDP), "rsdp");
	assert_string_equal(acpi_table_name(ACPI_XSDT), "xsdt");
	assert_string_equal(acpi_table_name(ACPI_FACP), "facp");
	assert_string_equal(acpi_table_name(ACPI_APIC), "apic");
	assert_string_equal(acpi_table_name(ACPI_DSDT), "dsdt");
	assert_null(acpi_table_name(ACPI_NR_TABLES));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_walk_and_fadt, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test_setup_teardown(test_no_legacy, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test_setup_teardown(test_madt_topologies, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test_setup_teardown(test_dsdt_golden, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test_setup_teardown(test_dsdt_vmgenid, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test_setup_teardown(test_dsdt_vmclock, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test_setup_teardown(test_dsdt_names_each_window, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test(test_build_bounds),
	    cmocka_unit_test(test_refuses),
	    cmocka_unit_test(test_small_ram),
	    cmocka_unit_test(test_table_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
