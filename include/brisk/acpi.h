/* acpi.h - ACPI 6.3 tables, hardware-reduced profile, no firmware: how a stock kernel finds CPUs, IRQs and devices. */
#ifndef BRISK_ACPI_H
#define BRISK_ACPI_H

#include <stddef.h>
#include <stdint.h>

#include "brisk/layout.h"

struct gmem;
struct devmgr_window;

/*
 * Where the tables live (layout.h, docs/acpi.md): the region
 * [LAYOUT_ACPI, LAYOUT_ACPI + LAYOUT_ACPI_SIZE) = [0xe0000, 0xf0000), inside
 * the range [EBDA, 1 MiB) that the memory map reserves. The RSDP is its
 * first byte (16-byte aligned, found by Linux's legacy scan of 0xe0000..
 * 0xfffff as well as through boot_params.acpi_rsdp_addr / PVH
 * start_info.rsdp_paddr); XSDT, FADT, MADT and DSDT follow, each 16-byte
 * aligned. The XSDT lists the FADT and the MADT; the FADT points at the
 * DSDT (X_DSDT only).
 *
 * Registers the FADT names (8-bit I/O ports, layout.h), which a device
 * model must serve:
 *   SLEEP_CONTROL_REG  LAYOUT_ACPI_SLEEP_CTL (0x600): the guest writes
 *                      (ACPI_S5_SLP_TYP << 2) | ACPI_SLP_EN = 0x34 to power off
 *                      (ACPI 6.3 section 4.8.3.7; Linux acpi_hw_extended_sleep)
 *   SLEEP_STATUS_REG   LAYOUT_ACPI_SLEEP_STS (0x601): WAK_STS (bit 7); the
 *                      guest writes 0x80 to clear it before sleeping
 *   RESET_REG          LAYOUT_ACPI_RESET (0x602): the guest writes
 *                      LAYOUT_ACPI_RESET_VALUE (0x01) to reset (4.8.3.6)
 */

#define ACPI_MAX_CPUS	   254	/* xAPIC IDs, as the MP table: the I/O APIC takes the one above the highest CPU's */
#define ACPI_S5_SLP_TYP	   5	/* the DSDT's \_S5 package: SLP_TYPa */
#define ACPI_SLP_TYP_SHIFT 2	/* SLEEP_CONTROL_REG bits 4:2 (ACPI 6.3 section 4.8.3.7) */
#define ACPI_SLP_EN	   0x20 /* SLEEP_CONTROL_REG bit 5 */
#define ACPI_WAK_STS	   0x80 /* SLEEP_STATUS_REG bit 7 */

/* Legacy devices the DSDT describes (struct acpi_machine.legacy). */
#define ACPI_DEV_COM1  0x1u /* 8250 UART at 0x3f8, IRQ 4 (PNP0501) */
#define ACPI_DEV_I8042 0x2u /* keyboard controller at 0x60/0x64 (PNP0303) */
#define ACPI_DEV_RTC   0x4u /* MC146818 CMOS RTC at 0x70 (PNP0B00), no IRQ */
#define ACPI_DEV_PIC   0x8u /* the dual 8259 (--irqchip kernel): the MADT's PCAT_COMPAT flag */

/* The machine the tables describe. */
struct acpi_machine {
	unsigned cpus;			    /* 1..ACPI_MAX_CPUS */
	const uint32_t *apic_ids;	    /* [cpus]: vCPU i's APIC ID (cpuid_apic_id); vCPU 0 is the BSP */
	unsigned nr_virtio;		    /* 0..LAYOUT_VIRTIO_WINDOWS */
	const struct devmgr_window *virtio; /* [nr_virtio]: the device manager's windows, in its order */
	unsigned legacy;		    /* ACPI_DEV_* */
	uint64_t vmgenid;		    /* guest-physical address of the VM Generation ID (VGEN, GED); 0: none */
	uint64_t vmclock;		    /* ... of the VMClock page (VCLK; 4 KiB below 4 GiB); 0: none */
	uint32_t ged_gsi;		    /* the GED's interrupt (with either), which notifies VGEN and VCLK */
};

#define ACPI_SCRATCH 16 /* Scope > Device > Buffer: (4 - 1) + (4 - 1) + (9 - 3) bytes reserved at most */

enum acpi_table { ACPI_RSDP, ACPI_XSDT, ACPI_FACP, ACPI_APIC, ACPI_DSDT, ACPI_NR_TABLES };

/* Where each table went in the region: offsets from its start, lengths. */
struct acpi_layout {
	size_t off[ACPI_NR_TABLES];
	size_t len[ACPI_NR_TABLES];
	size_t used; /* bytes of the region written, padding included */
};

/* "rsdp", "xsdt", "facp", "apic", "dsdt": the dump's file names, without ".dat". */
const char *acpi_table_name(enum acpi_table t);

/*
 * Builds every table into buf[0..cap), which the guest will see at
 * guest-physical `base`: the tables point at each other as base + offset,
 * through 64-bit fields only (the RSDP's RSDT and the FADT's 32-bit DSDT
 * are 0). Writes buf[0..out->used), and zeroes up to ACPI_SCRATCH bytes
 * past it that the AML encoder used as scratch (aml.h); nothing past `cap`,
 * whatever happens. Returns 0; -EINVAL when the machine is outside what the
 * tables describe (cpus 0 or above ACPI_MAX_CPUS, an APIC ID above 253 or
 * repeated, a virtio window above 4 GiB or an IRQ above 23, too many
 * windows); -ENOSPC when cap is too small. `err` says which.
 */
__attribute__((warn_unused_result)) int acpi_build(const struct acpi_machine *m, uint64_t base, uint8_t *buf,
						   size_t cap, struct acpi_layout *out, char *err, size_t errlen);

/*
 * acpi_build into guest RAM at LAYOUT_ACPI (through gmem_ptr), and the
 * RSDP's guest-physical address in *rsdp_gpa, for boot_params.acpi_rsdp_addr
 * and PVH start_info.rsdp_paddr. Returns as acpi_build, or -EFAULT when
 * guest RAM does not cover the region.
 */
__attribute__((warn_unused_result)) int acpi_write(const struct gmem *mem, const struct acpi_machine *m,
						   uint64_t *rsdp_gpa, char *err, size_t errlen);

#endif
