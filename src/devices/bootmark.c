/* bootmark.c - boot-marker device: a guest write records a value with a host timestamp on the boot timeline. */
/*
 * One device, two doors (abi.h): port BRISK_BOOTMARK_PORT (outl; /dev/port
 * from a Linux init) and the MMIO page BRISK_BOOTMARK_MMIO (a 32-bit store;
 * /dev/mem from a Linux init). A write at offset 0 records the value,
 * zero-extended when narrower than 4 bytes and truncated to its low 32 bits
 * when 8 bytes wide; writes at other offsets are ignored; reads return 0.
 * The timeline keeps TL_MAX_MARKERS values and counts the rest
 * (timeline_bootmark). The device has no state: one device, two ranges,
 * nothing to allocate or destroy. With --boot-timer its MMIO door is also
 * Firecracker's boot timer (boot_timer.c): the page is the same one.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "brisk/abi.h"
#include "brisk/bus.h"
#include "brisk/devices.h"
#include "brisk/timeline.h"

static void bootmark_read(void *dev, const struct bus_access *a, void *data)
{
	(void)dev;
	memset(data, 0, a->len);
}

static void bootmark_write(void *dev, const struct bus_access *a, const void *data)
{
	uint32_t v = 0;

	if (a->space == BUS_MMIO)
		boot_timer_write(dev, a->offset, data, a->len);
	if (a->offset != 0)
		return;
	memcpy(&v, data, a->len < sizeof(v) ? a->len : sizeof(v)); /* little-endian: the low bytes */
	timeline_bootmark(v);
}

static const struct dev_ops bootmark_ops = {
    .name = "bootmark",
    .read = bootmark_read,
    .write = bootmark_write,
    .save = dev_save_stateless,
    .restore = dev_restore_stateless,
};

int bootmark_create(struct bus *bus, const struct boot_timer *timer)
{
	struct bus_device *d = bus_add(bus, &bootmark_ops, (void *)timer);
	int err;

	if (!d)
		return -ENOSPC;
	err = bus_map(bus, d, BUS_PIO, BRISK_BOOTMARK_PORT, BRISK_BOOTMARK_PORT_SIZE);
	if (err)
		return err;
	return bus_map(bus, d, BUS_MMIO, BRISK_BOOTMARK_MMIO, BRISK_BOOTMARK_MMIO_SIZE);
}
