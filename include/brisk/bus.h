/* bus.h - one bus for port I/O and MMIO: sorted ranges, binary search. */
#ifndef BRISK_BUS_H
#define BRISK_BUS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum bus_space { BUS_PIO = 0, BUS_MMIO = 1 };

/*
 * A device's operations. `offset` is relative to the registered base;
 * `len` is 1, 2, 4 or 8. read must fill all `len` bytes of `data`.
 * Called from vCPU threads concurrently: a device locks its own state.
 * reset/destroy may be NULL.
 */
struct dev_ops {
	const char *name;
	void (*read)(void *dev, uint64_t offset, void *data, unsigned len);
	void (*write)(void *dev, uint64_t offset, const void *data, unsigned len);
	void (*reset)(void *dev);
	void (*destroy)(void *dev);
};

struct bus_range {
	uint64_t base;
	uint64_t len;
	const struct dev_ops *ops;
	void *dev;
};

#define BUS_UNHANDLED_LOG_MAX 64

struct bus {
	struct bus_range *range[2];
	size_t nr[2];
	size_t cap[2];
	/* unhandled addresses already logged (log once each), bounded */
	pthread_mutex_t lock;
	uint64_t logged[2][BUS_UNHANDLED_LOG_MAX];
	unsigned nr_logged[2];
	uint64_t unhandled[2]; /* count of unhandled accesses */
};

void bus_init(struct bus *b);
/* Calls every device's destroy (once per device) and frees the ranges. */
void bus_destroy(struct bus *b);

/*
 * Registers [base, base+len) in `space`. Setup time only (not thread-safe
 * against concurrent dispatch). Returns 0, -EINVAL (len 0 or wrap-around),
 * -EEXIST (overlaps a registered range) or -ENOMEM.
 */
__attribute__((warn_unused_result)) int bus_register(struct bus *b, enum bus_space space, uint64_t base, uint64_t len,
						     const struct dev_ops *ops, void *dev);

/* The range containing [addr, addr+len) entirely, or NULL. */
const struct bus_range *bus_find(const struct bus *b, enum bus_space space, uint64_t addr, unsigned len);

/*
 * Dispatch an access. Unhandled: a read returns all-ones, a write is
 * ignored, the address is logged once; returns false.
 */
bool bus_read(struct bus *b, enum bus_space space, uint64_t addr, void *data, unsigned len);
bool bus_write(struct bus *b, enum bus_space space, uint64_t addr, const void *data, unsigned len);

/* Calls every registered device's reset. */
void bus_reset(struct bus *b);

#endif
