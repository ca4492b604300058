/* mptable.c - Intel MultiProcessor Specification 1.4 tables: how Linux finds the vCPUs and the I/O APIC without ACPI.
 */
#include <errno.h>
#include <string.h>

#include "brisk/abi.h"
#include "brisk/layout.h"
#include "brisk/mem.h"
#include "brisk/mptable.h"
#include "x86_boot.h"

/*
 * Layout: the floating pointer structure sits at LAYOUT_EBDA, the first
 * byte of the top 1 KiB of base memory, one of the places the spec (4.0)
 * and Linux's default_find_smp_config() scan for "_MP_" on 16-byte
 * boundaries. The configuration table follows it in the EBDA while it fits:
 * 1024 - 16 bytes hold the 268 fixed bytes and 37 processor entries. Above
 * 37 vCPUs it goes to the system BIOS area (LAYOUT_MPTABLE_BIOS), which
 * holds all 254. Both are inside [EBDA, 1 MiB), reserved in the memory map,
 * so the kernel keeps its hands off them.
 */
#define EBDA_MAX_CPUS ((LAYOUT_EBDA_SIZE - MPTABLE_FPS_SIZE - MPTABLE_CONFIG_SIZE(0)) / MPTABLE_CPU_ENTRY_SIZE)
_Static_assert(EBDA_MAX_CPUS == 37, "the EBDA holds the table for up to 37 vCPUs");
_Static_assert(MPTABLE_CONFIG_SIZE(MPTABLE_MAX_CPUS) <= LAYOUT_MPTABLE_BIOS_SIZE, "254 vCPUs fit the BIOS area");

#define MP_SPEC_REV 4 /* version 1.4 */

/* MP floating pointer structure (MP spec 1.4, 4.1, figure 4-2). */
struct mpf {
	char signature[4]; /* "_MP_" */
	uint32_t physptr;  /* configuration table */
	uint8_t length;	   /* in 16-byte units: 1 */
	uint8_t spec_rev;
	uint8_t checksum; /* all 16 bytes sum to 0 */
	uint8_t feature1; /* 0: a configuration table is present */
	uint8_t feature2; /* bit 7 IMCRP clear: virtual wire mode, no IMCR */
	uint8_t feature3_5[3];
} __attribute__((packed));

/* Configuration table header (4.2, figure 4-3). */
struct mpc_header {
	char signature[4]; /* "PCMP" */
	uint16_t length;   /* base table, header included */
	uint8_t spec_rev;
	uint8_t checksum; /* base table sums to 0 */
	char oem[8];
	char product[12];
	uint32_t oem_ptr;
	uint16_t oem_size;
	uint16_t count; /* base table entries */
	uint32_t lapic;
	uint16_t ext_length;
	uint8_t ext_checksum;
	uint8_t reserved;
} __attribute__((packed));

/* Processor entry (4.3.1, figure 4-4). */
struct mpc_cpu {
	uint8_t type; /* 0 */
	uint8_t apic_id;
	uint8_t apic_ver;
	uint8_t flags; /* bit 0 EN, bit 1 BP */
	uint32_t signature;
	uint32_t features;
	uint32_t reserved[2];
} __attribute__((packed));

/* Bus entry (4.3.2, figure 4-5). */
struct mpc_bus {
	uint8_t type; /* 1 */
	uint8_t bus_id;
	char bus_type[6]; /* blank-padded, table 4-8 */
} __attribute__((packed));

/* I/O APIC entry (4.3.3, figure 4-6). */
struct mpc_ioapic {
	uint8_t type; /* 2 */
	uint8_t apic_id;
	uint8_t apic_ver;
	uint8_t flags; /* bit 0 EN */
	uint32_t addr;
} __attribute__((packed));

/* I/O (type 3) and local (type 4) interrupt assignment entries (4.3.4, 4.3.5). */
struct mpc_intsrc {
	uint8_t type;
	uint8_t irq_type; /* table 4-10 */
	uint16_t flags;	  /* polarity and trigger mode; 0 = conforms to the bus */
	uint8_t src_bus;
	uint8_t src_irq;
	uint8_t dst_apic; /* I/O APIC ID; for local entries a LAPIC ID or 0xff = all */
	uint8_t dst_pin;  /* I/O APIC INTIN# or LAPIC LINTIN# */
} __attribute__((packed));

_Static_assert(sizeof(struct mpf) == MPTABLE_FPS_SIZE, "floating pointer size");
_Static_assert(sizeof(struct mpc_header) == MPTABLE_HEADER_SIZE, "header size");
_Static_assert(sizeof(struct mpc_cpu) == MPTABLE_CPU_ENTRY_SIZE, "processor entry size");
_Static_assert(sizeof(struct mpc_bus) == MPTABLE_ENTRY_SIZE && sizeof(struct mpc_ioapic) == MPTABLE_ENTRY_SIZE &&
		   sizeof(struct mpc_intsrc) == MPTABLE_ENTRY_SIZE,
	       "8-byte entry sizes");

enum { MP_PROCESSOR = 0, MP_BUS = 1, MP_IOAPIC = 2, MP_INTSRC = 3, MP_LINTSRC = 4 };
enum { MP_INT = 0, MP_NMI = 1, MP_SMI = 2, MP_EXTINT = 3 };

#define CPU_EN 0x01
#define CPU_BP 0x02
/*
 * The values Firecracker and kvmtool use: the processor entry's signature
 * and feature flags come from CPUID.1 on real firmware, but Linux only
 * prints them; family 6 with FPU (bit 0) and APIC (bit 9) is a safe claim.
 */
#define CPU_SIGNATURE 0x600
#define CPU_FEATURES  0x201
/* Version registers of KVM's in-kernel LAPIC (0x14) and IOAPIC (0x11). */
#define LAPIC_VERSION  0x14
#define IOAPIC_VERSION 0x11
#define IOAPIC_EN      0x01
#define ISA_BUS_ID     0
#define ALL_LAPICS     0xff

static uint8_t checksum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint8_t sum = 0;

	while (len--)
		sum = (uint8_t)(sum + *b++);
	return (uint8_t)-sum;
}

size_t mptable_config_size(unsigned cpus)
{
	return MPTABLE_CONFIG_SIZE((size_t)cpus);
}

uint64_t mptable_config_addr(unsigned cpus)
{
	if (cpus == 0 || cpus > MPTABLE_MAX_CPUS)
		return 0;
	return cpus <= EBDA_MAX_CPUS ? LAYOUT_EBDA + MPTABLE_FPS_SIZE : LAYOUT_MPTABLE_BIOS;
}

static uint8_t *put_cpus(uint8_t *p, unsigned cpus, const uint32_t *apic_ids)
{
	for (unsigned i = 0; i < cpus; i++) {
		struct mpc_cpu c = {
		    .type = MP_PROCESSOR,
		    .apic_id = (uint8_t)(apic_ids ? apic_ids[i] : i),
		    .apic_ver = LAPIC_VERSION,
		    .flags = (uint8_t)(CPU_EN | (i == 0 ? CPU_BP : 0)),
		    .signature = CPU_SIGNATURE,
		    .features = CPU_FEATURES,
		};

		memcpy(p, &c, sizeof(c));
		p += sizeof(c);
	}
	return p;
}

/*
 * Bus IRQ i -> I/O APIC pin i for every pin, 0..23, as Firecracker writes
 * them (its IRQ_MAX is 23): the ISA IRQs 0..15 and the virtio-mmio lines
 * above them (devmgr.c hands those out), all on the one ISA bus:
 * KVM's default GSI routing (virt/kvm/irqchip.c, kvm_setup_default_irq_routing
 * in arch/x86/kvm/irq_comm.c) connects GSI i to PIC pin i and IOAPIC pin i
 * alike, and the in-kernel PIT raises GSI 0, so the timer arrives on pin 0,
 * not on pin 2 as on PC chipsets that wire IRQ0 through an override.
 * Flags 0 = "conforms to the bus": edge-triggered, active high for ISA.
 * LINT0 is ExtINT (virtual wire to the PIC) and LINT1 NMI on every LAPIC,
 * the spec's default configuration (5.1, figure 5-1).
 */
static uint8_t *put_interrupts(uint8_t *p, uint8_t ioapic_id)
{
	struct mpc_intsrc e;

	for (unsigned irq = 0; irq < MPTABLE_IRQS; irq++) {
		e = (struct mpc_intsrc){.type = MP_INTSRC,
					.irq_type = MP_INT,
					.src_bus = ISA_BUS_ID,
					.src_irq = (uint8_t)irq,
					.dst_apic = ioapic_id,
					.dst_pin = (uint8_t)irq};
		memcpy(p, &e, sizeof(e));
		p += sizeof(e);
	}
	e = (struct mpc_intsrc){
	    .type = MP_LINTSRC, .irq_type = MP_EXTINT, .src_bus = ISA_BUS_ID, .dst_apic = ALL_LAPICS};
	memcpy(p, &e, sizeof(e));
	p += sizeof(e);
	e = (struct mpc_intsrc){
	    .type = MP_LINTSRC, .irq_type = MP_NMI, .src_bus = ISA_BUS_ID, .dst_apic = ALL_LAPICS, .dst_pin = 1};
	memcpy(p, &e, sizeof(e));
	return p + sizeof(e);
}

/* Builds the whole configuration table for `cpus` in `buf` (MPTABLE_CONFIG_SIZE(cpus) bytes). */
static void build_config(uint8_t *buf, unsigned cpus, const uint32_t *apic_ids, uint8_t ioapic_id)
{
	struct mpc_header h = {
	    .signature = {'P', 'C', 'M', 'P'},
	    .length = (uint16_t)mptable_config_size(cpus),
	    .spec_rev = MP_SPEC_REV,
	    .oem = {'B', 'R', 'I', 'S', 'K', ' ', ' ', ' '},
	    .product = {'m', 'i', 'c', 'r', 'o', 'V', 'M', ' ', ' ', ' ', ' ', ' '},
	    .count = (uint16_t)(cpus + 2 + MPTABLE_IRQS + 2),
	    .lapic = (uint32_t)BRISK_LAPIC_BASE,
	};
	struct mpc_bus bus = {.type = MP_BUS, .bus_id = ISA_BUS_ID, .bus_type = {'I', 'S', 'A', ' ', ' ', ' '}};
	struct mpc_ioapic io = {.type = MP_IOAPIC,
				.apic_id = ioapic_id,
				.apic_ver = IOAPIC_VERSION,
				.flags = IOAPIC_EN,
				.addr = (uint32_t)BRISK_IOAPIC_BASE};
	uint8_t *p = buf + sizeof(h);

	p = put_cpus(p, cpus, apic_ids);
	memcpy(p, &bus, sizeof(bus));
	p += sizeof(bus);
	memcpy(p, &io, sizeof(io));
	p += sizeof(io);
	put_interrupts(p, io.apic_id);
	memcpy(buf, &h, sizeof(h));
	buf[offsetof(struct mpc_header, checksum)] = checksum(buf, h.length);
}

int mptable_ioapic_id(unsigned cpus, const uint32_t *apic_ids, uint8_t *out, char *err, size_t errlen)
{
	uint32_t max = 0;

	for (unsigned i = 0; i < cpus; i++) {
		uint32_t id = apic_ids ? apic_ids[i] : i;

		if (id > max)
			max = id;
	}
	if (max + 1 >= 0xff)
		return boot_fail(err, errlen, -EINVAL, "MP table: APIC ID %u does not fit the xAPIC's 8 bits", max);
	*out = (uint8_t)(max + 1);
	return 0;
}

int mptable_write(const struct gmem *mem, unsigned cpus, const uint32_t *apic_ids, char *err, size_t errlen)
{
	uint8_t ioapic_id = 0;
	uint8_t buf[MPTABLE_CONFIG_SIZE(MPTABLE_MAX_CPUS)];
	uint64_t addr = mptable_config_addr(cpus);
	size_t len = mptable_config_size(cpus);
	struct mpf f = {
	    .signature = {'_', 'M', 'P', '_'},
	    .physptr = (uint32_t)addr,
	    .length = 1,
	    .spec_rev = MP_SPEC_REV,
	};

	if (!addr)
		return boot_fail(err, errlen, -EINVAL, "MP table: %u vCPUs; it describes 1..%u", cpus,
				 MPTABLE_MAX_CPUS);
	if (mptable_ioapic_id(cpus, apic_ids, &ioapic_id, err, errlen))
		return -EINVAL;
	f.checksum = checksum(&f, sizeof(f));
	memset(buf, 0, len);
	build_config(buf, cpus, apic_ids, ioapic_id);
	if (gmem_write(mem, LAYOUT_EBDA, &f, sizeof(f)) || gmem_write(mem, addr, buf, len))
		return boot_fail(err, errlen, -EFAULT, "MP table: guest RAM does not cover 0x%lx and 0x%llx..0x%llx",
				 LAYOUT_EBDA, (unsigned long long)addr, (unsigned long long)(addr + len));
	return 0;
}
