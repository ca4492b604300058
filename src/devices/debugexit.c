/* debugexit.c - QEMU-compatible isa-debug-exit port: a guest write ends the VM with status ((V & 0x7f) << 1) | 1. */
/*
 * As QEMU's hw/misc/debugexit.c (iobase 0xf4, iosize 4): a write of any
 * width at any offset of the 4-byte range ends the VM; the value V is the
 * zero-extended data written. QEMU calls exit((V << 1) | 1) and the
 * process status keeps the low 8 bits, hence ((V & 0x7f) << 1) | 1: the
 * same test guest gets the same status under brisk and QEMU. Reads return
 * 0, as QEMU's debug_exit_read(). The device has no state.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/abi.h"
#include "brisk/bus.h"
#include "brisk/devices.h"

/* The zero-extended little-endian value of an access of `len` bytes (at most 8). */
static uint64_t data_value(const void *data, unsigned len)
{
	uint64_t v = 0;

	memcpy(&v, data, len < sizeof(v) ? len : sizeof(v));
	return v;
}

static void debugexit_read(void *dev, const struct bus_access *a, void *data)
{
	(void)dev;
	memset(data, 0, a->len);
}

static void debugexit_write(void *dev, const struct bus_access *a, const void *data)
{
	uint64_t v = data_value(data, a->len);
	int status = (int)(((v & 0x7f) << 1) | 1);
	char reason[64];

	/* request_exit copies the reason. */
	snprintf(reason, sizeof(reason), "guest debug-exit V=0x%llx (offset %llu)", (unsigned long long)v,
		 (unsigned long long)a->offset);
	dev_request_exit(dev, status, reason);
}

static void debugexit_destroy(void *dev)
{
	free(dev);
}

static const struct dev_ops debugexit_ops = {
    .name = "debug-exit",
    .read = debugexit_read,
    .write = debugexit_write,
    .destroy = debugexit_destroy,
    .save = dev_save_stateless,
    .restore = dev_restore_stateless,
};

/* The device's only state is its context. */
int debugexit_create(const struct devctx *ctx, struct bus *bus)
{
	struct devctx *c = malloc(sizeof(*c));
	struct bus_device *d;

	if (!c)
		return -ENOMEM;
	*c = *ctx;
	d = bus_add(bus, &debugexit_ops, c);
	if (!d)
		return -ENOSPC;
	return bus_map(bus, d, BUS_PIO, BRISK_DEBUG_EXIT_PORT, BRISK_DEBUG_EXIT_SIZE);
}
