/* bus.h - the one bus: devices, and their port I/O and MMIO ranges (sorted, binary search). */
#ifndef BRISK_BUS_H
#define BRISK_BUS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/device.h"

/* A device on the bus: its operations and state, owned by the bus from bus_add on. */
struct bus_device {
	const struct dev_ops *ops;
	void *dev;
	bool started; /* start succeeded: stop is due */
};

struct bus_range {
	uint64_t base;
	uint64_t len;
	struct bus_device *device;
};

#define BUS_UNHANDLED_LOG_MAX 64
#define BUS_MAX_DEVICES	      64

struct bus {
	struct bus_range *range[2];
	size_t nr[2];
	size_t cap[2];
	struct bus_device device[BUS_MAX_DEVICES]; /* in the order added: started in it, stopped in reverse */
	unsigned nr_devices;
	/* unhandled addresses already logged (log once each), bounded */
	pthread_mutex_t lock;
	uint64_t logged[2][BUS_UNHANDLED_LOG_MAX];
	unsigned nr_logged[2];
	uint64_t unhandled[2]; /* count of unhandled accesses */
};

void bus_init(struct bus *b);
/* Stops every started device, destroys every device (once each), frees the ranges. */
void bus_destroy(struct bus *b);

/*
 * Adds device `dev` with `ops`; from here on the bus owns it (bus_destroy
 * calls ops->destroy), also when bus_add itself fails (-ENOSPC: more than
 * BUS_MAX_DEVICES). Setup time only. Returns the device or NULL.
 */
struct bus_device *bus_add(struct bus *b, const struct dev_ops *ops, void *dev);

/*
 * Maps [base, base+len) of `space` to device `d`; a device may have several
 * ranges. Setup time only (not thread-safe against concurrent dispatch).
 * Returns 0, -EINVAL (len 0 or wrap-around), -EEXIST (overlaps a mapped
 * range) or -ENOMEM.
 */
__attribute__((warn_unused_result)) int bus_map(struct bus *b, struct bus_device *d, enum bus_space space,
						uint64_t base, uint64_t len);

/* The range containing [addr, addr+len) entirely, or NULL. */
const struct bus_range *bus_find(const struct bus *b, enum bus_space space, uint64_t addr, unsigned len);

/*
 * Dispatch an access. Unhandled: a read returns all-ones, a write is
 * ignored, the address is logged once; returns false.
 */
bool bus_read(struct bus *b, enum bus_space space, uint64_t addr, void *data, unsigned len);
bool bus_write(struct bus *b, enum bus_space space, uint64_t addr, const void *data, unsigned len);

/*
 * The lifecycle (device.h), for every device in the order added: start
 * (before any vCPU runs), late_start (once they run); both stop at the first
 * failure and return its -errno with the device's name in *failed. stop runs
 * in reverse order for the started devices. reset: every device's reset.
 */
int bus_start(struct bus *b, const char **failed);
int bus_late_start(struct bus *b, const char **failed);
void bus_stop(struct bus *b);
void bus_reset(struct bus *b);

struct snap_writer;
struct snap_reader;

/*
 * Snapshot (device.h, snapshot.h). bus_quiesce: every device's quiesce, in
 * the order added; stops at the first failure (its name in *failed).
 * bus_save: one SNAP_TAG_DEVICE section per device (index = position on the
 * bus, name = ops->name), filled by its save; -ENOTSUP with the device's name
 * in *failed when a device has no save. bus_restore: for every device, the
 * section of the same index and name, handed to its restore, which must
 * consume it exactly; a snapshot with other devices (count, order, names)
 * is refused. Both return 0 or -errno; bus_restore fills `err`.
 */
__attribute__((warn_unused_result)) int bus_quiesce(struct bus *b, const char **failed);
__attribute__((warn_unused_result)) int bus_save(struct bus *b, struct snap_writer *w, const char **failed);
__attribute__((warn_unused_result)) int bus_restore(struct bus *b, struct snap_reader *r, const char **failed,
						    char *err, size_t errlen);

#endif
