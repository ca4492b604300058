/* layout.h - the whole x86 guest physical memory map, in one place. */
#ifndef BRISK_LAYOUT_H
#define BRISK_LAYOUT_H

#include "abi.h"

/*
 * Guest physical address map (see docs/architecture.md):
 *
 *   0x0000_0000  real-mode IVT + BIOS data area: left zero
 *   0x0000_0500  boot GDT (4 x 8 bytes) and empty IDT
 *   0x0000_6000  PVH hvm_start_info, its module list and memory map
 *   0x0000_7000  Linux zero page (struct boot_params)
 *   0x0000_8000  boot stack (grows down from 0x8ff0)
 *   0x0000_9000  boot page tables: PML4, PDPT, 4 PDs (identity map 0..4 GiB)
 *   0x0000_f000  setup_data list of the 64-bit boot protocol (the RNG seed)
 *   0x0002_0000  kernel command line
 *   0x0009_fc00  EBDA: MP floating pointer and configuration table (reserved)
 *   0x000a_0000  VGA / option ROM / BIOS area (reserved)
 *   0x000e_0000  ACPI tables: RSDP, XSDT, FADT, MADT, DSDT (reserved)
 *   0x000f_0000  system BIOS area: MP configuration table above 37 vCPUs
 *   0x0010_0000  first byte of high RAM: kernel, initrd
 *   0xc000_0000  32-bit MMIO hole: boot marker, virtio-mmio, IOAPIC, LAPIC,
 *                KVM's identity-map page and TSS
 *   0x1_0000_0000 RAM above 4 GiB when --memory exceeds the hole start
 */
#define LAYOUT_GDT	0x500UL
#define LAYOUT_GDT_SIZE 0x20UL
#define LAYOUT_IDT	0x520UL
#define LAYOUT_IDT_SIZE 0x8UL

#define LAYOUT_START_INFO      0x6000UL
#define LAYOUT_START_INFO_SIZE 0x100UL
#define LAYOUT_MODLIST	       0x6100UL
#define LAYOUT_MODLIST_SIZE    0x100UL /* 8 x struct hvm_modlist_entry */
#define LAYOUT_MEMMAP	       0x6200UL
#define LAYOUT_MEMMAP_SIZE     0xe00UL /* up to 149 x 24-byte entries */

#define LAYOUT_ZERO_PAGE      0x7000UL
#define LAYOUT_ZERO_PAGE_SIZE 0x1000UL

#define LAYOUT_BOOT_STACK      0x8000UL
#define LAYOUT_BOOT_STACK_SIZE 0x1000UL
#define LAYOUT_BOOT_STACK_TOP  0x8ff0UL

#define LAYOUT_PML4	       0x9000UL
#define LAYOUT_PDPT	       0xa000UL
#define LAYOUT_PD	       0xb000UL
#define LAYOUT_PAGETABLES      0x9000UL
#define LAYOUT_PAGETABLES_SIZE 0x6000UL /* PML4 + PDPT + 4 PDs */

/* boot.rst "setup_data": one SETUP_RNG_SEED entry (16-byte header + seed) for the zero-page boots. */
#define LAYOUT_SETUP_DATA      0xf000UL
#define LAYOUT_SETUP_DATA_SIZE 0x100UL

#define LAYOUT_CMDLINE	   0x20000UL
#define LAYOUT_CMDLINE_MAX 0x10000UL /* bytes including the NUL */

#define LAYOUT_EBDA	  0x9fc00UL
#define LAYOUT_EBDA_SIZE  0x400UL
#define LAYOUT_LEGACY_END 0x100000UL /* end of VGA/ROM/BIOS area */

/*
 * MP configuration table when it does not fit in the EBDA after the floating
 * pointer (more than 37 vCPUs, mptable.c): the 64 KiB system BIOS area,
 * reserved in the memory map like the rest of [EBDA, 1 MiB).
 */
#define LAYOUT_MPTABLE_BIOS	 0xf0000UL
#define LAYOUT_MPTABLE_BIOS_SIZE 0x10000UL

#define LAYOUT_HIGH_RAM 0x100000UL /* kernels load at or above this */

/*
 * ACPI tables (acpi.c, docs/acpi.md): the RSDP at the first byte, where
 * Linux's legacy scan of [0xe0000, 0x100000) on 16-byte boundaries
 * (drivers/acpi/acpica/tbxfroot.c) finds it first, then XSDT, FADT, MADT
 * and DSDT. Inside [EBDA, 1 MiB), reserved in the memory map; 254 vCPUs
 * and every virtio window need about 4 KiB of the 56 the tables may take.
 */
#define LAYOUT_ACPI	 0xe0000UL
#define LAYOUT_ACPI_SIZE 0x10000UL
#define LAYOUT_ACPI_SCAN 0xe0000UL /* the legacy RSDP scan window (ACPI 6.3 section 5.2.5.1) */
/*
 * The VM Generation ID (Microsoft's "Virtual Machine Generation ID" specification; src/devices/vmgenid.c): 16
 * bytes at the start of the ACPI region's last page, which holds nothing else (so that a restore can write the
 * page whole: mem_uffd.h gmem_fill_page). The tables end below it. The DSDT's VGEN device names it (ADDR), and
 * its GED device's interrupt, GSI LAYOUT_GED_GSI (I/O APIC pin 3: COM2's, which brisk has not), is how a restore
 * tells the guest it changed (Notify 0x80).
 */
#define LAYOUT_VMGENID	    0xef000UL
#define LAYOUT_VMGENID_SIZE 16UL
/*
 * The VMClock page (the UAPI group's VMClock specification; src/devices/vmclock.c): struct vmclock_abi at the
 * start of the page below the VM Generation ID's, the whole page its region (the DSDT's VCLK device names it in
 * _CRS, and Linux maps that page into user space), so it too holds nothing else. The same GED interrupt notifies
 * VCLK. The tables end below it.
 */
#define LAYOUT_VMCLOCK	     0xee000UL
#define LAYOUT_VMCLOCK_SIZE  0x1000UL
#define LAYOUT_ACPI_TABLES   (LAYOUT_VMCLOCK - LAYOUT_ACPI) /* bytes the tables may take: 56 KiB */
#define LAYOUT_GED_GSI	     3u
#define LAYOUT_ACPI_SCAN_END 0x100000UL

/*
 * ACPI power-management registers (FADT, hardware-reduced: ACPI 6.3
 * sections 4.8.3.7 and 4.8.3.6), 8-bit I/O ports:
 *   SLEEP_CONTROL_REG  write (SLP_TYP << 2) | SLP_EN (0x20); SLP_TYP 5 is S5 (the DSDT's \_S5)
 *   SLEEP_STATUS_REG   bit 7 WAK_STS, written 1 to clear before sleeping
 *   RESET_REG          write LAYOUT_ACPI_RESET_VALUE to reset the machine
 * Port 0x600, where QEMU's q35 puts its ACPI PM block too: free of the
 * PC's legacy ports and of every port brisk and KVM's irqchip/PIT claim.
 */
#define LAYOUT_ACPI_PM_PORT	0x600
#define LAYOUT_ACPI_PM_SIZE	3
#define LAYOUT_ACPI_SLEEP_CTL	0x600
#define LAYOUT_ACPI_SLEEP_STS	0x601
#define LAYOUT_ACPI_RESET	0x602
#define LAYOUT_ACPI_RESET_VALUE 0x01

#define LAYOUT_MMIO_HOLE     0xc0000000ULL
#define LAYOUT_MMIO_HOLE_END 0x100000000ULL
#define LAYOUT_RAM_ABOVE_4G  0x100000000ULL

#define LAYOUT_VIRTIO_MMIO	0xd0001000ULL /* virtio-mmio devices, one page each */
#define LAYOUT_VIRTIO_MMIO_SIZE 0x1000ULL     /* one window: registers at 0, config space at 0x100 */
#define LAYOUT_VIRTIO_WINDOWS	18	      /* windows, one per interrupt line below */
/*
 * The virtio-mmio interrupt lines: I/O APIC pins 5-7 and 9-23 (the MP table
 * routes every pin 0-23, mptable.c). Not 0-4 (PIT, keyboard, cascade, COM2,
 * COM1) nor 8 (the CMOS RTC's, which Linux's rtc_cmos requests unshared).
 */
#define LAYOUT_VIRTIO_IRQS                                                                                             \
	{                                                                                                              \
		5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23                                     \
	}
/* The I/O APIC at BRISK_IOAPIC_BASE: 24 pins, as KVM's in-kernel one and brisk's (src/devices/ioapic.c). */
#define LAYOUT_IOAPIC_PINS	24
#define LAYOUT_KVM_IDENTITY_MAP 0xfeffc000ULL /* KVM_SET_IDENTITY_MAP_ADDR, 1 page */
#define LAYOUT_KVM_TSS		0xfeffd000ULL /* KVM_SET_TSS_ADDR, 3 pages */

/* Memory limits enforced by the CLI. */
#define LAYOUT_MEM_MIN (16ULL << 20)

#define LAYOUT_END(a, s)	      ((a) + (s))
#define LAYOUT_DISJOINT(a, as, b, bs) (LAYOUT_END(a, as) <= (b) || LAYOUT_END(b, bs) <= (a))

_Static_assert(LAYOUT_END(LAYOUT_GDT, LAYOUT_GDT_SIZE) <= LAYOUT_IDT, "GDT/IDT overlap");
_Static_assert(LAYOUT_END(LAYOUT_IDT, LAYOUT_IDT_SIZE) <= LAYOUT_START_INFO, "IDT/start_info");
_Static_assert(LAYOUT_END(LAYOUT_START_INFO, LAYOUT_START_INFO_SIZE) <= LAYOUT_MODLIST, "start_info/modlist");
_Static_assert(LAYOUT_END(LAYOUT_MODLIST, LAYOUT_MODLIST_SIZE) <= LAYOUT_MEMMAP, "modlist/memmap");
_Static_assert(LAYOUT_END(LAYOUT_MEMMAP, LAYOUT_MEMMAP_SIZE) <= LAYOUT_ZERO_PAGE, "memmap/zero page");
_Static_assert(LAYOUT_END(LAYOUT_ZERO_PAGE, LAYOUT_ZERO_PAGE_SIZE) <= LAYOUT_BOOT_STACK, "zero page/stack");
_Static_assert(LAYOUT_END(LAYOUT_BOOT_STACK, LAYOUT_BOOT_STACK_SIZE) <= LAYOUT_PAGETABLES, "stack/page tables");
_Static_assert(LAYOUT_PML4 == LAYOUT_PAGETABLES && LAYOUT_PDPT == LAYOUT_PML4 + 0x1000 &&
		   LAYOUT_PD == LAYOUT_PDPT + 0x1000,
	       "page-table order");
_Static_assert(LAYOUT_END(LAYOUT_PAGETABLES, LAYOUT_PAGETABLES_SIZE) <= LAYOUT_SETUP_DATA, "page tables/setup_data");
_Static_assert(LAYOUT_END(LAYOUT_SETUP_DATA, LAYOUT_SETUP_DATA_SIZE) <= LAYOUT_CMDLINE, "setup_data/cmdline");
_Static_assert(LAYOUT_END(LAYOUT_CMDLINE, LAYOUT_CMDLINE_MAX) <= LAYOUT_EBDA, "cmdline/EBDA");
_Static_assert(LAYOUT_END(LAYOUT_EBDA, LAYOUT_EBDA_SIZE) <= LAYOUT_HIGH_RAM, "EBDA/high RAM");
_Static_assert(LAYOUT_END(LAYOUT_EBDA, LAYOUT_EBDA_SIZE) <= LAYOUT_MPTABLE_BIOS &&
		   LAYOUT_END(LAYOUT_MPTABLE_BIOS, LAYOUT_MPTABLE_BIOS_SIZE) <= LAYOUT_LEGACY_END,
	       "MP table BIOS area inside the reserved legacy window");
_Static_assert(LAYOUT_HIGH_RAM == BRISK_GUEST_LOAD_ADDR, "test guests load at high RAM");
_Static_assert(LAYOUT_END(LAYOUT_EBDA, LAYOUT_EBDA_SIZE) <= LAYOUT_ACPI &&
		   LAYOUT_END(LAYOUT_ACPI, LAYOUT_ACPI_SIZE) <= LAYOUT_MPTABLE_BIOS,
	       "ACPI tables between the EBDA and the MP table BIOS area, inside the reserved legacy window");
_Static_assert(LAYOUT_VMGENID > LAYOUT_ACPI && LAYOUT_VMGENID % 0x1000 == 0 &&
		   LAYOUT_END(LAYOUT_VMGENID, 0x1000) == LAYOUT_END(LAYOUT_ACPI, LAYOUT_ACPI_SIZE),
	       "the VMGenID page is the ACPI region's last, apart from the tables");
_Static_assert(LAYOUT_ACPI >= LAYOUT_ACPI_SCAN && LAYOUT_ACPI % 16 == 0 &&
		   LAYOUT_END(LAYOUT_ACPI, 36) <= LAYOUT_ACPI_SCAN_END,
	       "the RSDP where the legacy scan finds it");
_Static_assert(LAYOUT_ACPI_SLEEP_CTL >= LAYOUT_ACPI_PM_PORT && LAYOUT_ACPI_SLEEP_STS >= LAYOUT_ACPI_PM_PORT &&
		   LAYOUT_ACPI_RESET >= LAYOUT_ACPI_PM_PORT &&
		   LAYOUT_ACPI_SLEEP_CTL < LAYOUT_ACPI_PM_PORT + LAYOUT_ACPI_PM_SIZE &&
		   LAYOUT_ACPI_SLEEP_STS < LAYOUT_ACPI_PM_PORT + LAYOUT_ACPI_PM_SIZE &&
		   LAYOUT_ACPI_RESET < LAYOUT_ACPI_PM_PORT + LAYOUT_ACPI_PM_SIZE &&
		   LAYOUT_ACPI_SLEEP_CTL != LAYOUT_ACPI_SLEEP_STS && LAYOUT_ACPI_SLEEP_CTL != LAYOUT_ACPI_RESET &&
		   LAYOUT_ACPI_SLEEP_STS != LAYOUT_ACPI_RESET,
	       "three distinct ACPI PM registers in their block");
/* The PM block against every other port: COM1, i8042, CMOS, debug-exit, boot marker, and KVM's PIC, PIT, ELCR. */
_Static_assert(LAYOUT_DISJOINT(LAYOUT_ACPI_PM_PORT, LAYOUT_ACPI_PM_SIZE, BRISK_COM1_PORT, 8) &&
		   LAYOUT_DISJOINT(LAYOUT_ACPI_PM_PORT, LAYOUT_ACPI_PM_SIZE, BRISK_I8042_DATA_PORT, 5) &&
		   LAYOUT_DISJOINT(LAYOUT_ACPI_PM_PORT, LAYOUT_ACPI_PM_SIZE, 0x70, 2) &&
		   LAYOUT_DISJOINT(LAYOUT_ACPI_PM_PORT, LAYOUT_ACPI_PM_SIZE, BRISK_DEBUG_EXIT_PORT,
				   BRISK_DEBUG_EXIT_SIZE) &&
		   LAYOUT_DISJOINT(LAYOUT_ACPI_PM_PORT, LAYOUT_ACPI_PM_SIZE, BRISK_BOOTMARK_PORT,
				   BRISK_BOOTMARK_PORT_SIZE) &&
		   LAYOUT_DISJOINT(LAYOUT_ACPI_PM_PORT, LAYOUT_ACPI_PM_SIZE, 0x20, 2) &&
		   LAYOUT_DISJOINT(LAYOUT_ACPI_PM_PORT, LAYOUT_ACPI_PM_SIZE, 0xa0, 2) &&
		   LAYOUT_DISJOINT(LAYOUT_ACPI_PM_PORT, LAYOUT_ACPI_PM_SIZE, 0x40, 4) &&
		   LAYOUT_DISJOINT(LAYOUT_ACPI_PM_PORT, LAYOUT_ACPI_PM_SIZE, 0x61, 1) &&
		   LAYOUT_DISJOINT(LAYOUT_ACPI_PM_PORT, LAYOUT_ACPI_PM_SIZE, 0x4d0, 2),
	       "ACPI PM registers/other ports");

_Static_assert(LAYOUT_MMIO_HOLE <= BRISK_BOOTMARK_MMIO, "boot marker inside the hole");
_Static_assert(LAYOUT_DISJOINT(BRISK_BOOTMARK_MMIO, BRISK_BOOTMARK_MMIO_SIZE, LAYOUT_VIRTIO_MMIO,
			       LAYOUT_VIRTIO_WINDOWS *LAYOUT_VIRTIO_MMIO_SIZE),
	       "boot marker/virtio");
_Static_assert(LAYOUT_END(LAYOUT_VIRTIO_MMIO, LAYOUT_VIRTIO_WINDOWS *LAYOUT_VIRTIO_MMIO_SIZE) <= BRISK_IOAPIC_BASE,
	       "virtio windows below the I/O APIC");
_Static_assert(LAYOUT_VIRTIO_MMIO + 0x100000 <= BRISK_IOAPIC_BASE, "virtio window/IOAPIC");
_Static_assert(BRISK_IOAPIC_BASE + 0x1000 <= BRISK_LAPIC_BASE, "IOAPIC/LAPIC");
_Static_assert(BRISK_LAPIC_BASE + 0x1000 <= LAYOUT_KVM_IDENTITY_MAP, "LAPIC/identity map");
_Static_assert(LAYOUT_KVM_IDENTITY_MAP + 0x1000 == LAYOUT_KVM_TSS, "identity map/TSS");
_Static_assert(LAYOUT_KVM_TSS + 0x3000 <= LAYOUT_MMIO_HOLE_END, "TSS inside the hole");

#endif
