/* acpi.c - the ACPI 6.3 tables of a hardware-reduced machine (include/brisk/acpi.h): RSDP, XSDT, FADT, MADT, DSDT. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "brisk/abi.h"
#include "brisk/acpi.h"
#include "brisk/aml.h"
#include "brisk/devmgr.h"
#include "brisk/errmsg.h"
#include "brisk/layout.h"
#include "brisk/mem.h"

/*
 * Identification in every header. OEM revision and creator revision 1: the
 * tables' shape changes with brisk's code, not with a firmware build.
 */
#define OEM_ID		 "BRISK "
#define OEM_TABLE_ID	 "BRISKVM "
#define OEM_REVISION	 1
#define CREATOR_ID	 "BRSK"
#define CREATOR_REVISION 1

/* Table revisions of ACPI 6.3 (what iasl 20200925, Debian 12's acpica-tools, knows). */
#define RSDP_REVISION	    2 /* ACPI 2.0+: XSDT address and extended checksum */
#define XSDT_REVISION	    1
#define FADT_REVISION	    6
#define FADT_MINOR_REVISION 3
#define MADT_REVISION	    5
#define DSDT_REVISION	    2 /* 64-bit integers in AML */

#define TABLE_ALIGN 16
#define NR_XSDT	    2 /* FADT, MADT; the DSDT is the FADT's */

/* System Description Table Header (ACPI 6.3 section 5.2.6). */
struct sdt_header {
	char signature[4];
	uint32_t length;
	uint8_t revision;
	uint8_t checksum; /* the whole table sums to 0 */
	char oem_id[6];
	char oem_table_id[8];
	uint32_t oem_revision;
	char creator_id[4];
	uint32_t creator_revision;
} __attribute__((packed));

/* Root System Description Pointer (5.2.5.3). */
struct rsdp {
	char signature[8]; /* "RSD PTR " */
	uint8_t checksum;  /* bytes 0..19 sum to 0 */
	char oem_id[6];
	uint8_t revision;
	uint32_t rsdt_address; /* 0: no RSDT, the XSDT is the root */
	uint32_t length;
	uint64_t xsdt_address;
	uint8_t ext_checksum; /* all 36 bytes sum to 0 */
	uint8_t reserved[3];
} __attribute__((packed));

/* Generic Address Structure (5.2.3.2). */
struct gas {
	uint8_t space_id; /* 1 = System I/O */
	uint8_t bit_width;
	uint8_t bit_offset;
	uint8_t access_size; /* 1 = byte */
	uint64_t address;
} __attribute__((packed));

/* Fixed ACPI Description Table, revision 6 (5.2.9). */
struct fadt {
	struct sdt_header h;
	uint32_t firmware_ctrl; /* FACS: none (optional when hardware-reduced) */
	uint32_t dsdt;		/* 0: X_DSDT is used */
	uint8_t reserved0;
	uint8_t preferred_pm_profile;
	uint16_t sci_int;
	uint32_t smi_cmd;
	uint8_t acpi_enable, acpi_disable, s4bios_req, pstate_cnt;
	uint32_t pm1a_evt_blk, pm1b_evt_blk, pm1a_cnt_blk, pm1b_cnt_blk, pm2_cnt_blk, pm_tmr_blk, gpe0_blk, gpe1_blk;
	uint8_t pm1_evt_len, pm1_cnt_len, pm2_cnt_len, pm_tmr_len, gpe0_blk_len, gpe1_blk_len, gpe1_base, cst_cnt;
	uint16_t p_lvl2_lat, p_lvl3_lat, flush_size, flush_stride;
	uint8_t duty_offset, duty_width, day_alrm, mon_alrm, century;
	uint16_t iapc_boot_arch;
	uint8_t reserved1;
	uint32_t flags;
	struct gas reset_reg;
	uint8_t reset_value;
	uint16_t arm_boot_arch;
	uint8_t minor_version;
	uint64_t x_firmware_ctrl;
	uint64_t x_dsdt;
	struct gas x_pm1a_evt_blk, x_pm1b_evt_blk, x_pm1a_cnt_blk, x_pm1b_cnt_blk, x_pm2_cnt_blk, x_pm_tmr_blk,
	    x_gpe0_blk, x_gpe1_blk;
	struct gas sleep_control_reg;
	struct gas sleep_status_reg;
	uint64_t hypervisor_vendor_id;
} __attribute__((packed));

/* Multiple APIC Description Table (5.2.12) and the entries brisk uses. */
struct madt {
	struct sdt_header h;
	uint32_t lapic_address;
	uint32_t flags;
} __attribute__((packed));

struct madt_lapic { /* 5.2.12.2 */
	uint8_t type, length;
	uint8_t uid; /* ACPI processor UID */
	uint8_t apic_id;
	uint32_t flags;
} __attribute__((packed));

struct madt_ioapic { /* 5.2.12.3 */
	uint8_t type, length;
	uint8_t id;
	uint8_t reserved;
	uint32_t address;
	uint32_t gsi_base;
} __attribute__((packed));

struct madt_iso { /* 5.2.12.5 */
	uint8_t type, length;
	uint8_t bus; /* 0 = ISA */
	uint8_t source;
	uint32_t gsi;
	uint16_t flags; /* MPS INTI flags */
} __attribute__((packed));

struct madt_lapic_nmi { /* 5.2.12.7 */
	uint8_t type, length;
	uint8_t uid; /* 0xff: every processor */
	uint16_t flags;
	uint8_t lint;
} __attribute__((packed));

_Static_assert(sizeof(struct sdt_header) == 36, "SDT header");
_Static_assert(sizeof(struct rsdp) == 36, "RSDP");
_Static_assert(sizeof(struct gas) == 12, "GAS");
_Static_assert(sizeof(struct fadt) == 276, "FADT revision 6");
_Static_assert(offsetof(struct fadt, reset_reg) == 116 && offsetof(struct fadt, x_dsdt) == 140 &&
		   offsetof(struct fadt, sleep_control_reg) == 244 &&
		   offsetof(struct fadt, hypervisor_vendor_id) == 268,
	       "FADT field offsets");
_Static_assert(sizeof(struct madt) == 44 && sizeof(struct madt_lapic) == 8 && sizeof(struct madt_ioapic) == 12 &&
		   sizeof(struct madt_iso) == 10 && sizeof(struct madt_lapic_nmi) == 6,
	       "MADT structure sizes");

_Static_assert(LAYOUT_VIRTIO_WINDOWS < 100, "virtio devices are named VR00..VR99 in the DSDT");

enum { MADT_LAPIC = 0, MADT_IOAPIC = 1, MADT_ISO = 2, MADT_LAPIC_NMI = 4 };

#define MADT_PCAT_COMPAT 0x1u /* a dual 8259 is present: KVM_CREATE_IRQCHIP's (--irqchip kernel), never split */
#define LAPIC_ENABLED	 0x1u
#define MPS_INTI_HIGH	 0x1u /* polarity bits 1:0 = 01 active high */
#define MPS_INTI_EDGE	 0x4u /* trigger bits 3:2 = 01 edge */
#define ALL_PROCESSORS	 0xff

/* FADT flags and IA-PC boot architecture flags (5.2.9). */
#define FADT_WBINVD	     (1u << 0)
#define FADT_PWR_BUTTON	     (1u << 4) /* no fixed-feature power button */
#define FADT_SLP_BUTTON	     (1u << 5) /* no fixed-feature sleep button */
#define FADT_RESET_REG_SUP   (1u << 10)
#define FADT_HW_REDUCED_ACPI (1u << 20)
#define BOOT_LEGACY_DEVICES  (1u << 0)
#define BOOT_8042	     (1u << 1)
#define BOOT_NO_VGA	     (1u << 2)

#define GAS_SYSTEM_IO	1
#define GAS_ACCESS_BYTE 1
#define RTC_CENTURY_IDX 0x32 /* brisk's CMOS keeps the century there (devices/cmos.c), as QEMU */

#define CMOS_PORT 0x70

static const char *const table_names[ACPI_NR_TABLES] = {"rsdp", "xsdt", "facp", "apic", "dsdt"};

const char *acpi_table_name(enum acpi_table t)
{
	return (unsigned)t < ACPI_NR_TABLES ? table_names[t] : NULL;
}

static uint8_t checksum(const uint8_t *p, size_t len)
{
	uint8_t sum = 0;

	while (len--)
		sum = (uint8_t)(sum + *p++);
	return (uint8_t)-sum;
}

static struct sdt_header header(const char *sig, size_t len, uint8_t rev)
{
	struct sdt_header h = {
	    .length = (uint32_t)len,
	    .revision = rev,
	    .oem_revision = OEM_REVISION,
	    .creator_revision = CREATOR_REVISION,
	};

	memcpy(h.signature, sig, 4);
	memcpy(h.oem_id, OEM_ID, 6);
	memcpy(h.oem_table_id, OEM_TABLE_ID, 8);
	memcpy(h.creator_id, CREATOR_ID, 4);
	return h;
}

/* Sets the header checksum of the table at p (its length is in the header). */
static void seal(uint8_t *p, size_t len)
{
	p[offsetof(struct sdt_header, checksum)] = 0;
	p[offsetof(struct sdt_header, checksum)] = checksum(p, len);
}

/* The I/O APIC's ID: one above the highest vCPU's, as mptable.c. -EINVAL on a repeated or too large APIC ID. */
static int check_cpus(const struct acpi_machine *m, uint8_t *ioapic_id, char *err, size_t errlen)
{
	uint8_t seen[256 / 8] = {0};
	uint32_t max = 0;

	if (m->cpus == 0 || m->cpus > ACPI_MAX_CPUS || !m->apic_ids)
		return err_set(err, errlen, -EINVAL, "ACPI: %u vCPUs; the MADT describes 1..%u", m->cpus,
			       ACPI_MAX_CPUS);
	for (unsigned i = 0; i < m->cpus; i++) {
		uint32_t id = m->apic_ids[i];

		if (id >= 0xff - 1)
			return err_set(err, errlen, -EINVAL,
				       "ACPI: vCPU %u's APIC ID %u leaves no xAPIC ID below 0xff for the I/O APIC", i,
				       id);
		if (seen[id / 8] & (1u << (id % 8)))
			return err_set(err, errlen, -EINVAL, "ACPI: vCPU %u repeats APIC ID %u", i, id);
		seen[id / 8] |= (uint8_t)(1u << (id % 8));
		if (id > max)
			max = id;
	}
	*ioapic_id = (uint8_t)(max + 1);
	return 0;
}

static int check_virtio(const struct acpi_machine *m, char *err, size_t errlen)
{
	if (m->nr_virtio > LAYOUT_VIRTIO_WINDOWS || (m->nr_virtio && !m->virtio))
		return err_set(err, errlen, -EINVAL, "ACPI: %u virtio devices; at most %u", m->nr_virtio,
			       LAYOUT_VIRTIO_WINDOWS);
	for (unsigned i = 0; i < m->nr_virtio; i++) {
		const struct devmgr_window *s = &m->virtio[i];

		if (s->base > UINT32_MAX - LAYOUT_VIRTIO_MMIO_SIZE + 1 || s->irq >= LAYOUT_IOAPIC_PINS)
			return err_set(err, errlen, -EINVAL,
				       "ACPI: virtio device %u at 0x%llx IRQ %u: the DSDT takes 32-bit windows and "
				       "IRQs 0..%u",
				       i, (unsigned long long)s->base, s->irq, LAYOUT_IOAPIC_PINS - 1);
		if ((m->vmgenid || m->vmclock) && s->irq == m->ged_gsi)
			return err_set(err, errlen, -EINVAL, "ACPI: virtio device %u and the GED share GSI %u", i,
				       s->irq);
	}
	if (m->vmgenid && (m->ged_gsi >= LAYOUT_IOAPIC_PINS || m->vmgenid > UINT64_MAX - LAYOUT_VMGENID_SIZE))
		return err_set(err, errlen, -EINVAL, "ACPI: the GED's GSI %u (0..%u) or VMGenID at 0x%llx", m->ged_gsi,
			       LAYOUT_IOAPIC_PINS - 1, (unsigned long long)m->vmgenid);
	/* Memory32Fixed: a page-aligned page below 4 GiB, on the GED's line as well */
	if (m->vmclock && (m->ged_gsi >= LAYOUT_IOAPIC_PINS || m->vmclock % LAYOUT_VMCLOCK_SIZE ||
			   m->vmclock > (uint64_t)UINT32_MAX + 1 - LAYOUT_VMCLOCK_SIZE))
		return err_set(err, errlen, -EINVAL, "ACPI: the GED's GSI %u (0..%u) or the VMClock page at 0x%llx",
			       m->ged_gsi, LAYOUT_IOAPIC_PINS - 1, (unsigned long long)m->vmclock);
	return 0;
}

/* ---- the tables ------------------------------------------------------------------------- */

static void put_rsdp(uint8_t *p, uint64_t xsdt)
{
	struct rsdp r = {
	    .signature = {'R', 'S', 'D', ' ', 'P', 'T', 'R', ' '},
	    .revision = RSDP_REVISION,
	    .length = sizeof(struct rsdp),
	    .xsdt_address = xsdt,
	};

	memcpy(r.oem_id, OEM_ID, 6);
	r.checksum = checksum((const uint8_t *)&r, 20); /* the ACPI 1.0 part (5.2.5.3) */
	r.ext_checksum = checksum((const uint8_t *)&r, sizeof(r));
	memcpy(p, &r, sizeof(r));
}

static size_t xsdt_len(void)
{
	return sizeof(struct sdt_header) + NR_XSDT * sizeof(uint64_t);
}

static void put_xsdt(uint8_t *p, const uint64_t entries[NR_XSDT])
{
	struct sdt_header h = header("XSDT", xsdt_len(), XSDT_REVISION);

	memcpy(p, &h, sizeof(h));
	memcpy(p + sizeof(h), entries, NR_XSDT * sizeof(uint64_t)); /* little-endian host, as the guest */
	seal(p, xsdt_len());
}

static struct gas io_reg8(uint16_t port)
{
	return (struct gas){.space_id = GAS_SYSTEM_IO,
			    .bit_width = 8,
			    .bit_offset = 0,
			    .access_size = GAS_ACCESS_BYTE,
			    .address = port};
}

/*
 * Hardware-reduced (4.1, 5.2.9): no PM1/GPE blocks, no SCI, no FACS; power
 * off and reset through the sleep control and reset registers (layout.h).
 * The boot flags say what the legacy side has: ISA-style devices and the
 * i8042 when present, never a VGA (so vgacon does not probe its ports).
 */
static void put_fadt(uint8_t *p, const struct acpi_machine *m, uint64_t dsdt)
{
	struct fadt f = {
	    .h = header("FACP", sizeof(struct fadt), FADT_REVISION),
	    .century = (m->legacy & ACPI_DEV_RTC) ? RTC_CENTURY_IDX : 0,
	    .iapc_boot_arch = (uint16_t)(BOOT_NO_VGA | ((m->legacy & ACPI_DEV_I8042) ? BOOT_8042 : 0) |
					 (m->legacy ? BOOT_LEGACY_DEVICES : 0)),
	    .flags = FADT_WBINVD | FADT_PWR_BUTTON | FADT_SLP_BUTTON | FADT_RESET_REG_SUP | FADT_HW_REDUCED_ACPI,
	    .reset_reg = io_reg8(LAYOUT_ACPI_RESET),
	    .reset_value = LAYOUT_ACPI_RESET_VALUE,
	    .minor_version = FADT_MINOR_REVISION,
	    .x_dsdt = dsdt,
	    .sleep_control_reg = io_reg8(LAYOUT_ACPI_SLEEP_CTL),
	    .sleep_status_reg = io_reg8(LAYOUT_ACPI_SLEEP_STS),
	};

	memcpy(&f.hypervisor_vendor_id, "brisk\0\0\0", 8);
	memcpy(p, &f, sizeof(f));
	seal(p, sizeof(f));
}

static size_t madt_len(unsigned cpus)
{
	return sizeof(struct madt) + cpus * sizeof(struct madt_lapic) + sizeof(struct madt_ioapic) +
	       sizeof(struct madt_iso) + sizeof(struct madt_lapic_nmi);
}

/*
 * One Processor Local APIC per vCPU in vCPU order (the BSP first, 5.2.12),
 * UID = vCPU index; the I/O APIC at BRISK_IOAPIC_BASE, GSIs 0..23. KVM's
 * default routing joins GSI n to I/O APIC pin n for every n, the PIT's IRQ 0
 * included (see mptable.c), as brisk's own I/O APIC does (split irqchip, no
 * PIC and no PIT, and then no PCAT_COMPAT), which is the identity mapping ACPI assumes for
 * ISA IRQs without an override (5.2.12.5). One override is written anyway,
 * IRQ 0 -> GSI 0, edge, active high: PC chipsets wire IRQ 0 to pin 2 and
 * some OSes assume it; this one does not. LINT1 of every LAPIC is NMI, as
 * the MP table's local interrupt entry.
 */
static void put_madt(uint8_t *p, const struct acpi_machine *m, uint8_t ioapic_id)
{
	size_t len = madt_len(m->cpus), at = sizeof(struct madt);
	struct madt h = {.h = header("APIC", len, MADT_REVISION),
			 .lapic_address = (uint32_t)BRISK_LAPIC_BASE,
			 .flags = m->legacy & ACPI_DEV_PIC ? MADT_PCAT_COMPAT : 0};
	struct madt_ioapic io = {
	    .type = MADT_IOAPIC, .length = sizeof(io), .id = ioapic_id, .address = (uint32_t)BRISK_IOAPIC_BASE};
	struct madt_iso iso = {
	    .type = MADT_ISO, .length = sizeof(iso), .source = 0, .gsi = 0, .flags = MPS_INTI_EDGE | MPS_INTI_HIGH};
	struct madt_lapic_nmi nmi = {.type = MADT_LAPIC_NMI, .length = sizeof(nmi), .uid = ALL_PROCESSORS, .lint = 1};

	memcpy(p, &h, sizeof(h));
	for (unsigned i = 0; i < m->cpus; i++) {
		struct madt_lapic l = {.type = MADT_LAPIC,
				       .length = sizeof(l),
				       .uid = (uint8_t)i,
				       .apic_id = (uint8_t)m->apic_ids[i],
				       .flags = LAPIC_ENABLED};

		memcpy(p + at, &l, sizeof(l));
		at += sizeof(l);
	}
	memcpy(p + at, &io, sizeof(io));
	at += sizeof(io);
	memcpy(p + at, &iso, sizeof(iso));
	at += sizeof(iso);
	memcpy(p + at, &nmi, sizeof(nmi));
	seal(p, len);
}

/* ---- the DSDT --------------------------------------------------------------------------- */

/* Name(_CRS, ResourceTemplate() { ... }) is opened by the caller's descriptors between these two. */
static size_t crs_begin(struct aml *a)
{
	aml_name(a, "_CRS");
	return aml_resource_begin(a);
}

/* Name(name, "s"). */
static void name_string(struct aml *a, const char *name, const char *str)
{
	aml_name(a, name);
	aml_string(a, str);
}

static void dsdt_com1(struct aml *a)
{
	size_t dev = aml_device_begin(a, "COM1"), res;

	aml_name(a, "_HID");
	aml_eisaid(a, "PNP0501");
	aml_name(a, "_UID");
	aml_int(a, 1);
	res = crs_begin(a);
	aml_io(a, true, BRISK_COM1_PORT, BRISK_COM1_PORT, 0, 8);
	aml_irq_noflags(a, BRISK_COM1_IRQ);
	aml_resource_end(a, res);
	aml_end(a, dev);
}

/*
 * The keyboard controller's IRQ 1 is the PC's: brisk's i8042 raises it for
 * the keys SendCtrlAltDel presses (devices.md). No PNP0F13 (mouse): the aux
 * port stays unprobed.
 */
static void dsdt_i8042(struct aml *a)
{
	size_t dev = aml_device_begin(a, "PS2K"), res;

	aml_name(a, "_HID");
	aml_eisaid(a, "PNP0303");
	res = crs_begin(a);
	aml_io(a, true, BRISK_I8042_DATA_PORT, BRISK_I8042_DATA_PORT, 0, 1);
	aml_io(a, true, BRISK_I8042_CMD_PORT, BRISK_I8042_CMD_PORT, 0, 1);
	aml_irq_noflags(a, 1);
	aml_resource_end(a, res);
	aml_end(a, dev);
}

/* The CMOS RTC raises no interrupt (devices/cmos.c), so none is named. */
static void dsdt_rtc(struct aml *a)
{
	size_t dev = aml_device_begin(a, "RTC"), res;

	aml_name(a, "_HID");
	aml_eisaid(a, "PNP0B00");
	res = crs_begin(a);
	aml_io(a, true, CMOS_PORT, CMOS_PORT, 0, 2);
	aml_resource_end(a, res);
	aml_end(a, dev);
}

/*
 * A virtio-mmio device as Linux's drivers/virtio/virtio_mmio.c matches it
 * through ACPI ("LNRO0005"), as QEMU's microvm and Firecracker describe it:
 * its 4 KiB window and its interrupt, edge-triggered and active high like
 * the ISA lines the MP table routes (KVM_IRQFD injects edges). _CCA 1:
 * DMA is cache-coherent (6.2.17; x86 assumes it, arm64 requires it said).
 */
static void dsdt_virtio(struct aml *a, unsigned i, const struct devmgr_window *s)
{
	char name[16]; /* "VRnn": nr_virtio <= LAYOUT_VIRTIO_WINDOWS < 100 */
	size_t dev, res;

	snprintf(name, sizeof(name), "VR%02u", i);
	dev = aml_device_begin(a, name);
	name_string(a, "_HID", "LNRO0005");
	aml_name(a, "_UID");
	aml_int(a, i);
	aml_name(a, "_CCA");
	aml_int(a, 1);
	res = crs_begin(a);
	aml_memory32_fixed(a, true, (uint32_t)s->base, (uint32_t)LAYOUT_VIRTIO_MMIO_SIZE);
	aml_interrupt(a, AML_INT_CONSUMER | AML_INT_EDGE, s->irq);
	aml_resource_end(a, res);
	aml_end(a, dev);
}

/*
 * \_S5 (7.4.2): SLP_TYPa for the sleep control register; the other three
 * elements are ignored or reserved on a hardware-reduced machine (the form
 * QEMU's microvm uses).
 */
static void dsdt_s5(struct aml *a)
{
	size_t pkg;

	aml_name(a, "_S5");
	pkg = aml_package_begin(a, 4);
	aml_int(a, ACPI_S5_SLP_TYP);
	aml_int(a, 0);
	aml_int(a, 0);
	aml_int(a, 0);
	aml_end(a, pkg);
}

/*
 * The VM Generation ID device (Microsoft's "Virtual Machine Generation ID", QEMU's hw/acpi/vmgenid.c, Firecracker
 * 1.9's devices/acpi/vmgenid.rs): _CID "VM_Gen_Counter", which Linux's drivers/virt/vmgenid.c matches as
 * "VM_GEN_COUNTER" (ACPICA upper-cases _HID and _CID strings: nsrepair2.c acpi_ns_repair_HID), and ADDR, a
 * package of the 16 bytes' address, low and high 32 bits. _HID is brisk's own "BRSK0001": Linux's other ID,
 * "VMGENCTR", is no valid ACPI ID (iasl refuses its non-hex suffix: error 6035), and every table brisk writes must
 * compile back with iasl.
 */
static void dsdt_vmgenid(struct aml *a, uint64_t gpa)
{
	size_t dev = aml_device_begin(a, "VGEN"), pkg;

	name_string(a, "_HID", "BRSK0001");
	name_string(a, "_CID", "VM_Gen_Counter");
	name_string(a, "_DDN", "VM_Gen_Counter");
	aml_name(a, "ADDR");
	pkg = aml_package_begin(a, 2);
	aml_int(a, gpa & 0xffffffffu);
	aml_int(a, gpa >> 32);
	aml_end(a, pkg);
	aml_end(a, dev);
}

/*
 * The VMClock device (the UAPI group's VMClock specification; Linux drivers/ptp/ptp_vmclock.c; Firecracker's
 * devices/acpi/vmclock.rs, QEMU's hw/acpi/vmclock.c): _HID "AMZNC10C", which Linux's driver matches, _CID and
 * _DDN "VMCLOCK", and the page holding struct vmclock_abi as its one memory resource: Memory32Fixed, read-only
 * (the driver walks _CRS for a memory or an address-space descriptor; Firecracker writes a QWord one, QEMU a
 * Memory32Fixed one, read-write).
 */
static void dsdt_vmclock(struct aml *a, uint64_t gpa)
{
	size_t dev = aml_device_begin(a, "VCLK"), res;

	name_string(a, "_HID", "AMZNC10C");
	name_string(a, "_CID", "VMCLOCK");
	name_string(a, "_DDN", "VMCLOCK");
	res = crs_begin(a);
	aml_memory32_fixed(a, false, (uint32_t)gpa, (uint32_t)LAYOUT_VMCLOCK_SIZE);
	aml_resource_end(a, res);
	aml_end(a, dev);
}

static void notify_0x80(struct aml *a, const char *device)
{
	aml_notify(a);
	aml_name_string(a, device);
	aml_int(a, 0x80);
}

/*
 * The Generic Event Device (ACPI 6.3 section 5.6.9, "ACPI0013"): how a hardware-reduced machine raises an ACPI
 * event. Its interrupt (edge, active high) makes the OS run _EVT with the GSI, which notifies VGEN and VCLK
 * (0x80: the generation changed), as Firecracker's acpi.rs and QEMU's microvm write it; one line for both, as
 * a restore changes both at once (Firecracker gives each its own GSI and the same _EVT dispatch). The devices
 * are named relative: the namespace search from \_SB.GED_._EVT finds \_SB.VGEN, and iasl writes it so.
 */
static void dsdt_ged(struct aml *a, const struct acpi_machine *mach)
{
	size_t dev = aml_device_begin(a, "GED"), res, m, cond;

	name_string(a, "_HID", "ACPI0013");
	res = crs_begin(a);
	aml_interrupt(a, AML_INT_CONSUMER | AML_INT_EDGE, mach->ged_gsi);
	aml_resource_end(a, res);
	m = aml_method_begin(a, "_EVT", 1, true);
	cond = aml_if_begin(a);
	aml_lequal(a);
	aml_arg(a, 0);
	aml_int(a, mach->ged_gsi);
	if (mach->vmgenid)
		notify_0x80(a, "VGEN");
	if (mach->vmclock)
		notify_0x80(a, "VCLK");
	aml_end(a, cond);
	aml_end(a, m);
	aml_end(a, dev);
}

/* The DSDT at p (cap bytes): header, \_S5, then \_SB with the legacy and virtio devices. Returns its length. */
static int put_dsdt(uint8_t *p, size_t cap, const struct acpi_machine *m, size_t *len)
{
	struct sdt_header h = {0};
	struct aml a;
	size_t sb;
	int ret;

	aml_init(&a, p, cap);
	aml_bytes(&a, &h, sizeof(h));
	dsdt_s5(&a);
	/* \_SB, written relative to the root as iasl optimises it, so the bytes match its output. */
	sb = aml_scope_begin(&a, "_SB");
	if (m->legacy & ACPI_DEV_COM1)
		dsdt_com1(&a);
	if (m->legacy & ACPI_DEV_I8042)
		dsdt_i8042(&a);
	if (m->legacy & ACPI_DEV_RTC)
		dsdt_rtc(&a);
	for (unsigned i = 0; i < m->nr_virtio; i++)
		dsdt_virtio(&a, i, &m->virtio[i]);
	if (m->vmgenid)
		dsdt_vmgenid(&a, m->vmgenid);
	if (m->vmclock)
		dsdt_vmclock(&a, m->vmclock);
	if (m->vmgenid || m->vmclock)
		dsdt_ged(&a, m);
	aml_end(&a, sb);
	ret = aml_status(&a);
	if (ret)
		return ret;
	h = header("DSDT", a.len, DSDT_REVISION);
	memcpy(p, &h, sizeof(h));
	seal(p, a.len);
	*len = a.len;
	return 0;
}

/* ---- placement ---------------------------------------------------------------------------- */

static size_t align_up(size_t v)
{
	return (v + TABLE_ALIGN - 1) & ~(size_t)(TABLE_ALIGN - 1);
}

/* Offsets and lengths of every table but the DSDT's length (known once it is encoded). */
static void plan(const struct acpi_machine *m, struct acpi_layout *l)
{
	static const enum acpi_table order[] = {ACPI_RSDP, ACPI_XSDT, ACPI_FACP, ACPI_APIC, ACPI_DSDT};
	size_t at = 0;

	*l = (struct acpi_layout){0};
	l->len[ACPI_RSDP] = sizeof(struct rsdp);
	l->len[ACPI_XSDT] = xsdt_len();
	l->len[ACPI_FACP] = sizeof(struct fadt);
	l->len[ACPI_APIC] = madt_len(m->cpus);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		l->off[order[i]] = at;
		at = align_up(at + l->len[order[i]]);
	}
}

int acpi_build(const struct acpi_machine *m, uint64_t base, uint8_t *buf, size_t cap, struct acpi_layout *out,
	       char *err, size_t errlen)
{
	struct acpi_layout l;
	uint8_t ioapic_id = 0;
	uint64_t xsdt[NR_XSDT];
	int ret;

	if ((ret = check_cpus(m, &ioapic_id, err, errlen)) || (ret = check_virtio(m, err, errlen)))
		return ret;
	plan(m, &l);
	if (l.off[ACPI_DSDT] + sizeof(struct sdt_header) > cap)
		return err_set(err, errlen, -ENOSPC, "ACPI: %zu bytes do not hold the tables for %u vCPUs", cap,
			       m->cpus);
	ret = put_dsdt(buf + l.off[ACPI_DSDT], cap - l.off[ACPI_DSDT], m, &l.len[ACPI_DSDT]);
	if (ret)
		return err_set(err, errlen, ret, "ACPI: encoding the DSDT (%u virtio devices) into %zu bytes: %s",
			       m->nr_virtio, cap - l.off[ACPI_DSDT], strerror(-ret));
	l.used = l.off[ACPI_DSDT] + l.len[ACPI_DSDT];
	/* The padding between tables is written too: buf may be reused guest RAM. */
	memset(buf, 0, l.off[ACPI_DSDT]);
	xsdt[0] = base + l.off[ACPI_FACP];
	xsdt[1] = base + l.off[ACPI_APIC];
	put_rsdp(buf + l.off[ACPI_RSDP], base + l.off[ACPI_XSDT]);
	put_xsdt(buf + l.off[ACPI_XSDT], xsdt);
	put_fadt(buf + l.off[ACPI_FACP], m, base + l.off[ACPI_DSDT]);
	put_madt(buf + l.off[ACPI_APIC], m, ioapic_id);
	*out = l;
	return 0;
}

int acpi_write(const struct gmem *mem, const struct acpi_machine *m, uint64_t *rsdp_gpa, char *err, size_t errlen)
{
	struct acpi_layout l;
	uint8_t *p = gmem_ptr(mem, LAYOUT_ACPI, LAYOUT_ACPI_SIZE);
	int ret;

	if (!p)
		return err_set(err, errlen, -EFAULT, "ACPI: guest RAM does not cover 0x%lx..0x%lx", LAYOUT_ACPI,
			       LAYOUT_ACPI + LAYOUT_ACPI_SIZE);
	ret = acpi_build(m, LAYOUT_ACPI, p, LAYOUT_ACPI_TABLES, &l, err, errlen); /* below the VMClock page */
	if (ret)
		return ret;
	gmem_mark_dirty(mem, LAYOUT_ACPI, LAYOUT_ACPI_SIZE);
	*rsdp_gpa = LAYOUT_ACPI + l.off[ACPI_RSDP];
	return 0;
}
