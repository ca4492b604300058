/* abi.h - the guest-visible contract shared by brisk (src/) and its test guests (guests/). */
#ifndef BRISK_ABI_H
#define BRISK_ABI_H

/*
 * This header is included by freestanding guest code: plain #defines only,
 * no host types, no libc.
 */

/* 8250/16550A UART, COM1 (the PC standard; Linux's 8250 driver probes it). */
#define BRISK_COM1_PORT 0x3f8
#define BRISK_COM1_IRQ	4

/* i8042 keyboard controller: enough for Linux's reboot=k path. */
#define BRISK_I8042_DATA_PORT 0x60
#define BRISK_I8042_CMD_PORT  0x64
#define BRISK_I8042_CMD_RESET 0xfe /* pulse the CPU reset line */

/*
 * Debug-exit port, compatible with QEMU's "-device isa-debug-exit,
 * iobase=0xf4,iosize=4": writing value V (any width) ends the VM and brisk
 * exits with status ((V & 0x7f) << 1) | 1. The same test guest therefore
 * gives the same status under brisk and QEMU.
 */
#define BRISK_DEBUG_EXIT_PORT 0xf4
#define BRISK_DEBUG_EXIT_SIZE 4

/*
 * Boot-marker device: a 32-bit write records the value with a host
 * CLOCK_MONOTONIC timestamp (brisk run --timeline, brisk profile).
 * Reachable by port (outl; /dev/port from a Linux init) and by MMIO
 * (a 32-bit store; /dev/mem from a Linux init).
 */
#define BRISK_BOOTMARK_PORT	 0x440
#define BRISK_BOOTMARK_PORT_SIZE 4
#define BRISK_BOOTMARK_MMIO	 0xd0000000UL
#define BRISK_BOOTMARK_MMIO_SIZE 0x1000

/* Local and I/O APIC (fixed by the PC platform; in-kernel irqchip). */
#define BRISK_LAPIC_BASE  0xfee00000UL
#define BRISK_IOAPIC_BASE 0xfec00000UL

/* PVH: hvm_start_info magic (xen/include/public/arch-x86/hvm/start_info.h). */
#define BRISK_PVH_START_MAGIC 0x336ec578
/* Test guests are linked at 1 MiB (the first address Linux kernels use too). */
#define BRISK_GUEST_LOAD_ADDR 0x100000

#endif
