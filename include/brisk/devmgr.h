/*
 * devmgr.h - the device manager: hands out virtio-mmio windows and interrupt lines from layout.h, in the
 * order devices are planned, and writes what the guest needs to find them: a `virtio_mmio.device=`
 * word per device on the kernel command line (the form Linux's drivers/virtio/virtio_mmio.c parses,
 * for every kernel). As Firecracker's device_manager/mmio.rs.
 */
#ifndef BRISK_DEVMGR_H
#define BRISK_DEVMGR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/layout.h"

struct devkind;

struct devmgr_window {
	uint64_t base;		    /* guest-physical start of the 4 KiB window */
	unsigned irq;		    /* I/O APIC pin = GSI */
	const char *what;	    /* "virtio-blk", for logs */
	const struct devkind *kind; /* devmgr_plan's: the kind (devkinds.h) of the device planned here; else NULL */
	unsigned index;		    /* devmgr_plan's: which device of its kind (the first --disk: 0) */
};

struct devmgr {
	unsigned nr;
	struct devmgr_window win[LAYOUT_VIRTIO_WINDOWS];
};

struct vm_config;
struct cpuid_topology;
struct acpi_machine;

/*
 * The windows of the virtio devices `cfg` asks for, in the one order users
 * expect (the VM recipe and `brisk acpi --dump` both use it): the order of
 * the kinds table (devkinds.h), each kind's devices as given: each --disk
 * (the first is vda), then each --net, then --vsock, then --rng, then
 * --console virtio. Each window records its kind and index, which the recipe's
 * constructors walk. config_validate keeps the count within LAYOUT_VIRTIO_WINDOWS.
 */
void devmgr_plan(struct devmgr *m, const struct vm_config *cfg);

/*
 * The machine the ACPI tables describe (acpi.h) for `cfg` with the planned
 * windows `m`: its vCPUs with the APIC IDs of `topo` (written to ids[0..cfg->cpus)),
 * the virtio windows, and the legacy devices every brisk VM has (the UART,
 * the i8042 and the CMOS RTC: vm_build.c create_devices). The VM recipe and
 * `brisk acpi --dump` both describe their machine through it. `out` points
 * into `m` and `ids`.
 */
void devmgr_acpi_machine(const struct devmgr *m, const struct vm_config *cfg, const struct cpuid_topology *topo,
			 uint32_t *ids, struct acpi_machine *out);

/* Takes the next window and line. Returns the window, or NULL when all LAYOUT_VIRTIO_WINDOWS are taken. */
const struct devmgr_window *devmgr_alloc(struct devmgr *m, const char *what);

/*
 * Writes `base` with " virtio_mmio.device=4K@0xADDR:IRQ" for every window
 * into out[0..outlen): after the kernel's parameters, i.e. before a word
 * "--" (what follows it is init's, Linux kernel/params.c parse_args).
 * Returns the length, or -E2BIG when it does not fit (the message is then
 * the caller's: the command line limit).
 */
int devmgr_cmdline(const struct devmgr *m, const char *base, char *out, size_t outlen);

/*
 * Whether Linux booted with `cmdline` runs without ACPI: its last acpi=off
 * or acpi=force among the kernel's parameters (before "--") is acpi=off
 * (arch/x86/kernel/acpi/boot.c parse_acpi). Such a kernel ignores the DSDT,
 * so it finds the virtio devices only through the command line words.
 */
bool devmgr_cmdline_acpi_off(const char *cmdline);

#endif
