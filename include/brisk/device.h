/*
 * device.h - what a device is to brisk: the accesses it serves, its lifecycle, and the narrow context
 * through which it reaches the VM.
 *
 * A device never sees `struct vm`. It gets a `struct devctx` (guest memory, interrupt lines, eventfd
 * plumbing for ioeventfd/irqfd, the I/O event loop, ending the VM) and registers itself on the bus
 * with bus_add (bus.h), which then owns it. Unit tests give a device a fake context.
 */
#ifndef BRISK_DEVICE_H
#define BRISK_DEVICE_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

struct gmem;
struct evloop;

enum bus_space { BUS_PIO = 0, BUS_MMIO = 1 };

/*
 * One guest access, as the bus dispatches it: the absolute address (port
 * or guest-physical) and the offset into the range the device registered
 * that contains it (as crosvm's BusAccessInfo, Firecracker's
 * read(base, offset)). `len` is 1, 2, 4 or 8 and the access lies wholly
 * inside the range.
 */
struct bus_access {
	enum bus_space space;
	uint64_t addr;
	uint64_t offset;
	uint64_t base; /* the registered range's start */
	unsigned len;
};

struct snap_writer; /* snapshots (snapshot.h): a device's saved state */
struct snap_reader;

/*
 * A device's operations, one const table per device type. All
 * but read/write may be NULL.
 *
 * read/write: called from vCPU threads, concurrently: a device locks its
 * own state. read must fill all a->len bytes.
 *
 * Lifecycle, in this order, each called once per device by the bus:
 *   start       the VM is built and no vCPU has run yet: start what the
 *               guest's first access needs (an output thread). 0 or -errno.
 *   late_start  the vCPUs have just been released: start what may overlap
 *               the guest's early boot (an input thread). 0 or -errno.
 *   stop        the vCPUs have stopped: drain (bounded), stop threads,
 *               report what was lost. Idempotent.
 *   destroy     free everything; stop was called before if start was.
 * reset: the guest (or the host) reset the machine: back to power-on state.
 *
 * Snapshot/restore (snapshot.h; the sequence is vm.c's):
 *   quiesce     every vCPU is paused and the event loop stopped (none of
 *               the device's callbacks runs until after save; a timer or a
 *               completion that fires waits): finish, bounded and without
 *               the loop, the in-flight work that touches guest memory (a
 *               disk's requests in its worker pool) so that nothing changes
 *               guest memory or the device's state after it returns, except
 *               through a vCPU. NULL: nothing in flight. 0 or -errno
 *               (-ETIMEDOUT).
 *   save        vCPUs and event loop paused, after quiesce: writes the
 *               device's state into the section the bus opened for it
 *               (explicit fixed-width fields, described once in a field
 *               table, snap_fields.h; snap_set_version gives the section
 *               its version, 1 if not set). 0 or -errno. NULL: the device cannot be saved (bus_save
 *               refuses the snapshot with -ENOTSUP) — a stateless device
 *               has a save that writes nothing.
 *   restore     a fresh device, built from the same configuration, before
 *               start/late_start, the event loop and any vCPU: reads back
 *               exactly what save wrote, checking every value as it would
 *               a guest's (the file is untrusted). 0 or -errno (-EINVAL
 *               with a log line naming the field; -EPROTONOSUPPORT: a
 *               section version it does not read, snap_version).
 */
struct dev_ops {
	const char *name;
	void (*read)(void *dev, const struct bus_access *a, void *data);
	void (*write)(void *dev, const struct bus_access *a, const void *data);
	int (*start)(void *dev);
	int (*late_start)(void *dev);
	void (*stop)(void *dev);
	void (*reset)(void *dev);
	void (*destroy)(void *dev);
	int (*quiesce)(void *dev);
	int (*save)(void *dev, struct snap_writer *w);
	int (*restore)(void *dev, struct snap_reader *r);
};

/*
 * save/restore of a device with no state of its own (debug-exit, bootmark, acpi-pm): an empty section
 * of version 1, which restore accepts (bus_restore checks it is empty); another version: -EPROTONOSUPPORT.
 */
int dev_save_stateless(void *dev, struct snap_writer *w);
int dev_restore_stateless(void *dev, struct snap_reader *r);

/* One route of KVM's GSI routing table: GSI `gsi` raises the MSI (`addr`, `data`). */
struct devctx_msi {
	unsigned gsi;
	uint64_t addr;
	uint32_t data;
};

/* What a device may ask of its VM (implemented by vm.c; by fakes in unit tests). */
struct devctx_ops {
	/* Sets interrupt line `irq` (an I/O APIC pin): KVM_IRQ_LINE, or brisk's I/O APIC with a split irqchip. */
	void (*irq_line)(void *vm, unsigned irq, int level);
	/* Ends the VM with process status `code` (the first request wins). */
	void (*request_exit)(void *vm, int code, const char *reason);
	/*
	 * KVM_IOEVENTFD: a guest write of `len` bytes to MMIO `addr` (with
	 * `datamatch` when has_match) signals `fd` instead of exiting to
	 * userspace. Returns 0 or -errno (-ENOTSUP: no capability: fall back
	 * to the MMIO exit).
	 */
	int (*ioeventfd)(void *vm, uint64_t addr, unsigned len, bool has_match, uint64_t datamatch, int fd,
			 bool assign);
	/* KVM_IRQFD: a write to `fd` pulses irqchip pin `gsi`. Returns 0 or -errno (-ENOTSUP: no capability). */
	int (*irqfd)(void *vm, unsigned gsi, int fd, bool assign);
	/* The VM's I/O event loop (evloop.h), where device work runs; never a vCPU thread. */
	struct evloop *(*loop)(void *vm);
	/*
	 * The split irqchip's calls, for brisk's I/O APIC (NULL: none). msi: KVM_SIGNAL_MSI, one interrupt
	 * message; >= 0 (0: the guest blocked it) or -errno. msi_routes: KVM_SET_GSI_ROUTING, the whole table:
	 * GSI r[i].gsi raises MSI r[i] for i < n and no other GSI raises anything; 0 or -errno.
	 */
	int (*msi)(void *vm, uint64_t addr, uint32_t data);
	int (*msi_routes)(void *vm, const struct devctx_msi *r, unsigned n);
	/*
	 * Work for the main thread, which otherwise only waits while the guest runs: it polls `fd` for POLLIN
	 * beside its own fds and calls fn(arg) on its thread when it is readable (fn reads what makes it so), until
	 * the VM ends. For what must happen some time after a vCPU asked and may start a thread (which a vCPU's
	 * filter does not allow): the console's deferred output thread. Returns 0, or -ENOSPC (VM_MAIN_WATCHES
	 * taken). NULL: not offered (the device does without).
	 */
	int (*main_watch)(void *vm, int fd, void (*fn)(void *arg), void *arg);
};

struct devctx {
	const struct gmem *mem;
	void *vm; /* opaque to devices */
	const struct devctx_ops *ops;
};

static inline void dev_irq_line(const struct devctx *c, unsigned irq, int level)
{
	c->ops->irq_line(c->vm, irq, level);
}

static inline void dev_request_exit(const struct devctx *c, int code, const char *reason)
{
	c->ops->request_exit(c->vm, code, reason);
}

/* devctx_ops.main_watch, or -ENOTSUP when the VM offers none. ctx is a const struct devctx *, untyped so that
 * it can be passed where a callback's argument is (console_io_start_output_deferred's watch). */
static inline int dev_main_watch(void *ctx, int fd, void (*fn)(void *arg), void *arg)
{
	const struct devctx *c = ctx;

	return c->ops->main_watch ? c->ops->main_watch(c->vm, fd, fn, arg) : -ENOTSUP;
}

#endif
