/* mptable.h - the Intel MultiProcessor Specification 1.4 table that lets a guest find its CPUs without ACPI. */
#ifndef BRISK_MPTABLE_H
#define BRISK_MPTABLE_H

#include <stddef.h>
#include <stdint.h>

struct gmem;

/*
 * Highest vCPU count the table describes. xAPIC IDs are 8 bits and 0xff is
 * the broadcast ID (MP spec 1.4, 4.3.1; SDM Vol. 3A 10.6.2.1); the vCPUs
 * take APIC IDs 0..cpus-1 and the I/O APIC takes ID `cpus`, so 254 vCPUs
 * use IDs 0..254 and leave 0xff free.
 */
#define MPTABLE_MAX_CPUS 254

/* On-wire sizes (MP spec 1.4, 4.1 and 4.2, table 4-2). */
#define MPTABLE_FPS_SIZE       16 /* MP floating pointer structure */
#define MPTABLE_HEADER_SIZE    44 /* configuration table header */
#define MPTABLE_CPU_ENTRY_SIZE 20 /* processor entry */
#define MPTABLE_ENTRY_SIZE     8  /* bus, I/O APIC, I/O and local interrupt entries */
#define MPTABLE_IRQS	       24 /* one I/O interrupt entry per I/O APIC pin: ISA IRQs 0-15, virtio lines up to 23 */

/*
 * Bytes of the configuration table (header and base entries, no extended
 * entries) for `cpus` processors: header, one entry per CPU, one bus, one
 * I/O APIC, 24 I/O interrupt entries and two local interrupt entries.
 */
#define MPTABLE_CONFIG_SIZE(cpus)                                                                                      \
	(MPTABLE_HEADER_SIZE + (cpus)*MPTABLE_CPU_ENTRY_SIZE + (2 + MPTABLE_IRQS + 2) * MPTABLE_ENTRY_SIZE)
size_t mptable_config_size(unsigned cpus);

/*
 * Guest-physical address of the configuration table for `cpus` processors:
 * right after the floating pointer in the EBDA when it fits there, else
 * LAYOUT_MPTABLE_BIOS (layout.h). The floating pointer is always at
 * LAYOUT_EBDA. Returns 0 when cpus is 0 or above MPTABLE_MAX_CPUS.
 */
uint64_t mptable_config_addr(unsigned cpus);

/*
 * Writes the floating pointer and the configuration table for `cpus` vCPUs
 * (vCPU i has APIC ID apic_ids[i], or i when apic_ids is NULL; vCPU 0 is the
 * bootstrap processor), one ISA bus, the in-kernel I/O APIC (ID one above
 * the highest CPU's) and its ISA IRQ routing, into guest RAM. The APIC IDs
 * must be the ones the guest's CPUID reports (cpuid_apic_id). Both areas are
 * reserved in the memory map (memmap_build). Returns 0; -EINVAL when cpus is
 * 0 or above MPTABLE_MAX_CPUS or an APIC ID does not fit 8 bits; -EFAULT when guest RAM does not cover the
 * areas. `err` names the problem.
 */
/*
 * The I/O APIC's ID the tables give (MP table and MADT): the first above every vCPU's APIC ID (apic_ids NULL:
 * IDs 0..cpus-1), below the broadcast ID 0xff. 0 with *out, or -EINVAL with err.
 */
__attribute__((warn_unused_result)) int mptable_ioapic_id(unsigned cpus, const uint32_t *apic_ids, uint8_t *out,
							  char *err, size_t errlen);
__attribute__((warn_unused_result)) int mptable_write(const struct gmem *mem, unsigned cpus, const uint32_t *apic_ids,
						      char *err, size_t errlen);

#endif
