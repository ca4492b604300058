/* devices.h - constructors of the legacy platform devices (one file each in src/devices/). */
#ifndef BRISK_DEVICES_H
#define BRISK_DEVICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rl_config;

struct bus;
struct devctx;
struct serial8250;

/* Where a console's output goes and what feeds its input (the UART's, the virtio console's). */
struct serial_opts {
	int out_fd;  /* -1: discard output; borrowed: the caller closes it after destroying the bus */
	int in_fd;   /* -1: no input */
	int raw_tty; /* put in_fd's terminal in raw mode (restored by serial8250_stop) */
};

#define SERIAL_OUTBUF_SIZE (64 * 1024) /* bounded: a stalled stdout drops, never blocks */
#define SERIAL_INBUF_SIZE  4096

/*
 * 8250/16550A UART at COM1 (0x3f8, IRQ 4), added to `bus`, which owns it
 * from then on (also on failure, except -ENOMEM before it was added). Its
 * output thread starts with the bus's start, its input thread with
 * late_start (device.h). `out` (may be NULL) gets the device, for direct
 * control in tests. Returns 0 or -errno.
 */
__attribute__((warn_unused_result)) int serial8250_create(const struct devctx *ctx, struct bus *bus,
							  const struct serial_opts *opts, struct serial8250 **out);
/* Starts the host I/O thread(s): serial8250_start_output then serial8250_start_input. Returns 0 or -errno. */
__attribute__((warn_unused_result)) int serial8250_start(struct serial8250 *s);
/*
 * Starts the output thread (before the guest runs: its first line must not
 * wait for a thread to be created). Returns 0, -EBUSY if started, or -errno.
 */
__attribute__((warn_unused_result)) int serial8250_start_output(struct serial8250 *s);
/*
 * Starts the input thread and raw terminal mode, after serial8250_start_output
 * (it may run once the guest does: input before the guest reads it waits
 * anyway). Returns 0, -EINVAL if output was not started, or -errno.
 */
__attribute__((warn_unused_result)) int serial8250_start_input(struct serial8250 *s);
/*
 * Stops the I/O thread(s): flushes buffered output (waits at most
 * `flush_ms` for a stalled reader), restores the terminal. Idempotent.
 */
void serial8250_stop(struct serial8250 *s, int flush_ms);
/* Bytes dropped because the output buffer was full. */
uint64_t serial8250_dropped(const struct serial8250 *s);
/* Restores the terminal if raw mode is on (async-signal-safe; for atexit paths). */
void serial8250_restore_tty(void);

struct devmgr_window;
struct vm_disk;

/*
 * virtio devices (src/virtio/): each in its virtio-mmio window `win`,
 * added to `bus` (which owns it from then on). Return 0 or -errno.
 */
/* Entropy (section 5.4), getrandom-backed, at most `bytes_per_sec`. */
__attribute__((warn_unused_result)) int virtio_rng_create(const struct devctx *ctx, struct bus *bus,
							  const struct devmgr_window *win, uint64_t bytes_per_sec);
/*
 * virtio_rng_create with the rate limiter `limit` (PUT /entropy's, may be NULL; without a bandwidth
 * bucket, the one-second bucket of `bytes_per_sec` is its), and *dev (may be NULL) its backend.
 */
__attribute__((warn_unused_result)) int virtio_rng_open(const struct devctx *ctx, struct bus *bus,
							const struct devmgr_window *win, uint64_t bytes_per_sec,
							const struct rl_config *limit, void **dev);
/*
 * Block (section 5.2) backed by the raw image d->path; on failure `err`
 * says what is wrong with the image (missing, locked, read-only, size).
 */
__attribute__((warn_unused_result)) int virtio_blk_create(const struct devctx *ctx, struct bus *bus,
							  const struct devmgr_window *win, const struct vm_disk *d,
							  char *err, size_t errlen);
/* virtio_blk_create, and *dev (may be NULL) its backend for the calls below (vm_device_call). */
__attribute__((warn_unused_result)) int virtio_blk_open(const struct devctx *ctx, struct bus *bus,
							const struct devmgr_window *win, const struct vm_disk *d,
							void **dev, char *err, size_t errlen);
/*
 * Firecracker's update_disk_image (PATCH /drives path_on_host after boot): opens `path` with the checks
 * of creation (mode, kind of file, read-only as before, lock; the same file as now: only its size re-read),
 * waits for the requests in flight, then takes it in place of the old image: capacity in config space,
 * ConfigGeneration bumped and a config interrupt. On failure the old image stays in use. 0 or -errno
 * with err. With the event loop stopped (vm_device_call).
 */
int virtio_blk_swap(void *dev, const char *path, char *err, size_t errlen);
/* The drive's rate limiter updated (rate_limiter.h rl_update). With the event loop stopped. */
void virtio_blk_set_limiter(void *dev, const struct rl_config *cfg, bool has_bw, bool has_ops);
/* The disk's capacity now, in 512-byte sectors. */
uint64_t virtio_blk_capacity(void *dev);
/*
 * Whether d->path opens as virtio_blk_create would open it (mode, kind of file, lock), closed again: a PUT's
 * check, as Firecracker opens the drive at PUT /drives. 0 or -errno with err as virtio_blk_create's.
 */
int virtio_blk_probe(const struct vm_disk *d, char *err, size_t errlen);
/*
 * Console (section 5.3), one port (hvc0), on the VM's stdin and stdout with a
 * raw terminal when stdin is one: the host side is the UART's (console_io.h),
 * so the UART must not read stdin too (its output may share stdout).
 */
__attribute__((warn_unused_result)) int virtio_console_create(const struct devctx *ctx, struct bus *bus,
							      const struct devmgr_window *win);
/* The same on the descriptors `io` names (out_fd -1: output discarded; in_fd -1: no input). */
__attribute__((warn_unused_result)) int virtio_console_create_io(const struct devctx *ctx, struct bus *bus,
								 const struct devmgr_window *win,
								 const struct serial_opts *io);

struct vm_net;
/*
 * Network (section 5.1) on the backend `net` describes (a tap or user-mode
 * networking), interface `index` in --net order (its default MAC derives
 * from it); on failure `err` says what is wrong with the backend (the tap
 * missing or busy, the helper missing, a hostfwd port in use).
 */
__attribute__((warn_unused_result)) int virtio_net_create(const struct devctx *ctx, struct bus *bus,
							  const struct devmgr_window *win, const struct vm_net *net,
							  unsigned index, char *err, size_t errlen);
struct net_backend;
/*
 * virtio_net_create with the interface's rx/tx rate limiters (cfg->rx_rl, tx_rl), *dev (may be NULL) its backend;
 * `early` (owned from here on, also on failure), when not NULL, is cfg's backend already started by
 * net_user_start_for: the device waits for it to be ready instead of opening one.
 */
__attribute__((warn_unused_result)) int virtio_net_open(const struct devctx *ctx, struct bus *bus,
							const struct devmgr_window *win, const struct vm_net *cfg,
							unsigned index, struct net_backend *early, void **dev,
							char *err, size_t errlen);
/*
 * For a user-mode interface, net_user_start with the device's MTU: the helper starts now, while the VM is built
 * (*out for virtio_net_open's `early`); a tap: nothing (*out NULL), it opens at once. 0 or net_user_start's -errno.
 */
__attribute__((warn_unused_result)) int net_user_start_for(const struct vm_net *cfg, struct net_backend **out,
							   char *err, size_t errlen);
/* PATCH /network-interfaces: the rx and tx limiters updated (rate_limiter.h rl_update). Event loop stopped. */
void virtio_net_set_limiters(void *dev, const struct rl_config *rx, bool rx_bw, bool rx_ops, const struct rl_config *tx,
			     bool tx_bw, bool tx_ops);

/* The constructors below add their device to `bus` (which owns it from then on) and return 0 or -errno. */

/* i8042 at 0x60/0x64: 0xfe to 0x64 ends the VM with EXIT_GUEST_OK. */
__attribute__((warn_unused_result)) int i8042_create(const struct devctx *ctx, struct bus *bus);
/*
 * Presses and releases Ctrl+Alt+Del on the keyboard of the i8042 on `bus`
 * (found at its data port): the whole sequence is queued, in scan code
 * set 1 when the guest's command byte has XLATE, else set 2, and IRQ 1 is
 * pulsed per byte if the guest enabled it. Any thread (takes the device's
 * lock). Returns 0, -ENODEV (no i8042 on the bus) or -EBUSY (the guest has
 * not yet read enough of the previous keys to make room).
 */
__attribute__((warn_unused_result)) int i8042_ctrl_alt_del(struct bus *bus);
/* Debug-exit port BRISK_DEBUG_EXIT_PORT (see abi.h). */
__attribute__((warn_unused_result)) int debugexit_create(const struct devctx *ctx, struct bus *bus);
/*
 * Firecracker's boot timer (boot_timer.c, --boot-timer): when the VM's build started, wall and process CPU
 * time in us. boot_timer_start takes them now. boot_timer_write is the guest's write of `len` bytes at
 * `offset` of its page: the byte 123 at offset 0 logs Firecracker's "Guest-boot-time = ..." line at Info
 * and returns true; anything else (or t NULL: no boot timer) does nothing. boot_timer_line formats that
 * line for times now_us / now_cpu_us into buf[cap] (snprintf's result).
 */
struct boot_timer {
	uint64_t start_us, start_cpu_us;
};
void boot_timer_start(struct boot_timer *t);
bool boot_timer_write(const struct boot_timer *t, uint64_t offset, const void *data, unsigned len);
int boot_timer_line(const struct boot_timer *t, uint64_t now_us, uint64_t now_cpu_us, char *buf, size_t cap);
/*
 * Boot-marker device at BRISK_BOOTMARK_PORT and BRISK_BOOTMARK_MMIO; with `timer` (NULL: none, kept by the
 * caller for the device's life) its MMIO page is Firecracker's boot timer too (the same page, 0xd0000000).
 */
__attribute__((warn_unused_result)) int bootmark_create(struct bus *bus, const struct boot_timer *timer);
/*
 * MC146818 CMOS RTC at ports 0x70 (index, bit 7 = NMI disable, ignored) and
 * 0x71 (data): time registers read the host's CLOCK_REALTIME as UTC in the
 * format register B selects; UIP never set; IRQ 8 never raised; guest time
 * writes ignored; 128 bytes of CMOS RAM.
 */
__attribute__((warn_unused_result)) int cmos_create(struct bus *bus);
/*
 * The ACPI power-management registers the FADT names (acpi_pm.c, acpi.h):
 * an S5 write to SLEEP_CONTROL_REG or the reset value to RESET_REG ends the
 * VM with status 0. Only where the VM has ACPI tables.
 */
__attribute__((warn_unused_result)) int acpi_pm_create(const struct devctx *ctx, struct bus *bus);
/*
 * The VM Generation ID (vmgenid.c, docs/acpi.md): 16 bytes at LAYOUT_VMGENID that the DSDT's VGEN device names,
 * and the GED's line LAYOUT_GED_GSI that notifies it. A boot writes a random ID now (`restoring` false); a
 * restore writes a new one when the device's section is restored, and raises the line. Only where the VM has
 * ACPI tables. 0 or -errno.
 */
__attribute__((warn_unused_result)) int vmgenid_create(const struct devctx *ctx, struct bus *bus, bool restoring);
/*
 * The VMClock page (vmclock.c, docs/acpi.md): struct vmclock_abi at LAYOUT_VMCLOCK, which the DSDT's VCLK device
 * names. A boot writes it now with both counters 0 (`restoring` false); a restore advances its disruption marker
 * and VM generation counter when the device's section is restored (the GED's edge, raised by the VM Generation
 * ID's restore, notifies both). Only where the VM has ACPI tables. 0 or -errno.
 */
__attribute__((warn_unused_result)) int vmclock_create(const struct devctx *ctx, struct bus *bus, bool restoring);

/*
 * The I/O APIC of a split irqchip (ioapic.c): 24 pins at BRISK_IOAPIC_BASE, the ID register reading `id` after
 * reset (the ACPI and MP tables' I/O APIC ID), every entry masked; interrupts sent through ctx's msi and its
 * routing table kept in step through msi_routes (device.h). Added to `bus`, which owns it. *out (may be NULL)
 * gets it for the calls below. 0 or -errno.
 */
struct ioapic;
__attribute__((warn_unused_result)) int ioapic_create(const struct devctx *ctx, struct bus *bus, uint8_t id,
						      struct ioapic **out);
/* Line `pin` (0..23; others ignored) goes to `level`: delivered as the pin's entry says. Any thread. */
void ioapic_set_irq(struct ioapic *io, unsigned pin, int level);
/* The guest EOIed `vector` (KVM_EXIT_IOAPIC_EOI): level pins with it clear Remote IRR, and fire again if high. */
void ioapic_eoi(struct ioapic *io, uint8_t vector);
/* How often the routing table was set (KVM_SET_GSI_ROUTING calls), for tests. */
unsigned ioapic_route_updates(struct ioapic *io);
/*
 * The PIC, PIT and port 0x61 ports of a VM without them (split irqchip): reads 0xff (0 at 0x61, NMI status),
 * writes ignored, nothing logged (legacy_absent.c). Added to `bus`, which owns it. 0 or -errno.
 */
__attribute__((warn_unused_result)) int legacy_absent_create(struct bus *bus);

#endif
