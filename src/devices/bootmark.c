/* bootmark.c - boot-marker device: a guest write records a value with a host timestamp on the boot timeline. */
/*
 * One device, two doors (abi.h): port BRISK_BOOTMARK_PORT (outl; /dev/port
 * from a Linux init) and the MMIO page BRISK_BOOTMARK_MMIO (a 32-bit store;
 * /dev/mem from a Linux init). A write at offset 0 records the value,
 * zero-extended when narrower than 4 bytes and truncated to its low 32 bits
 * when 8 bytes wide; writes at other offsets are ignored; reads return 0.
 * The timeline keeps TL_MAX_MARKERS values and counts the rest
 * (timeline_bootmark). The device has no state: both ranges carry the VM
 * as their device pointer and there is nothing to destroy.
 */
#include <stdint.h>
#include <string.h>

#include "brisk/abi.h"
#include "brisk/bus.h"
#include "brisk/devices.h"
#include "brisk/timeline.h"
#include "brisk/vm.h"

static void bootmark_read(void *dev, uint64_t offset, void *data, unsigned len)
{
	(void)dev;
	(void)offset;
	memset(data, 0, len);
}

static void bootmark_write(void *dev, uint64_t offset, const void *data, unsigned len)
{
	uint32_t v = 0;

	(void)dev;
	if (offset != 0)
		return;
	memcpy(&v, data, len < sizeof(v) ? len : sizeof(v)); /* little-endian: the low bytes */
	timeline_bootmark(v);
}

static const struct dev_ops bootmark_ops = {
    .name = "bootmark",
    .read = bootmark_read,
    .write = bootmark_write,
};

int bootmark_create(struct vm *vm)
{
	struct bus *bus = vm_bus(vm);
	int err;

	err = bus_register(bus, BUS_PIO, BRISK_BOOTMARK_PORT, BRISK_BOOTMARK_PORT_SIZE, &bootmark_ops, vm);
	if (err)
		return err;
	return bus_register(bus, BUS_MMIO, BRISK_BOOTMARK_MMIO, BRISK_BOOTMARK_MMIO_SIZE, &bootmark_ops, vm);
}
