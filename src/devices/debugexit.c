/* debugexit.c - QEMU-compatible isa-debug-exit port: a guest write ends the VM with status ((V & 0x7f) << 1) | 1. */
/*
 * As QEMU's hw/misc/debugexit.c (iobase 0xf4, iosize 4): a write of any
 * width at any offset of the 4-byte range ends the VM; the value V is the
 * zero-extended data written. QEMU calls exit((V << 1) | 1) and the
 * process status keeps the low 8 bits, hence ((V & 0x7f) << 1) | 1: the
 * same test guest gets the same status under brisk and QEMU. Reads return
 * 0, as QEMU's debug_exit_read(). The device has no state.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "brisk/abi.h"
#include "brisk/bus.h"
#include "brisk/devices.h"
#include "brisk/vm.h"

/* The zero-extended little-endian value of an access of `len` bytes (at most 8). */
static uint64_t data_value(const void *data, unsigned len)
{
	uint64_t v = 0;

	memcpy(&v, data, len < sizeof(v) ? len : sizeof(v));
	return v;
}

static void debugexit_read(void *dev, uint64_t offset, void *data, unsigned len)
{
	(void)dev;
	(void)offset;
	memset(data, 0, len);
}

static void debugexit_write(void *dev, uint64_t offset, const void *data, unsigned len)
{
	uint64_t v = data_value(data, len);
	int status = (int)(((v & 0x7f) << 1) | 1);
	char reason[64];

	/* vm_request_exit copies the reason. */
	snprintf(reason, sizeof(reason), "guest debug-exit V=0x%llx (offset %llu)", (unsigned long long)v,
		 (unsigned long long)offset);
	vm_request_exit(dev, status, reason);
}

static const struct dev_ops debugexit_ops = {
    .name = "debug-exit",
    .read = debugexit_read,
    .write = debugexit_write,
};

/* The device pointer is the VM itself: nothing to allocate or free. */
int debugexit_create(struct vm *vm)
{
	return bus_register(vm_bus(vm), BUS_PIO, BRISK_DEBUG_EXIT_PORT, BRISK_DEBUG_EXIT_SIZE, &debugexit_ops, vm);
}
