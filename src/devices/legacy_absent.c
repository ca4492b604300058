/*
 * legacy_absent.c - the ISA ports of the PC's 8259 PICs, 8254 PIT and port 0x61 when the VM has none of them (a
 * split irqchip: brisk's I/O APIC, no PIC, no PIT; include/brisk/vm.h). Claimed so that a guest's probes meet an
 * empty bus quietly instead of one unhandled-port warning each.
 *
 * Reads of 0x20-0x21, 0xa0-0xa1 (PICs) and 0x40-0x43 (PIT) return 0xff, as an ISA bus with nothing on it:
 * Linux's probe_8259A writes 0xfb to the master's mask register and, reading 0xff back, uses its NULL legacy PIC
 * (arch/x86/kernel/i8259.c), so it never routes an interrupt through a PIC; its PIT is not used either when the
 * TSC and LAPIC timer need no calibration (kvmclock, TSC-deadline and ARAT: apic_needs_pit()). Port 0x61 (NMI
 * status and control) reads 0: no SERR or IOCHK source, so an NMI the guest cannot explain is not reported as a
 * PCI system error (default_get_nmi_reason). Writes anywhere are ignored. No state.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/bus.h"
#include "brisk/devices.h"

#define NMI_SC_PORT 0x61

static const struct {
	uint16_t base, len;
} ranges[] = {
    {0x20, 2}, /* master PIC */
    {0xa0, 2}, /* slave PIC */
    {0x40, 4}, /* PIT counters 0-2, mode/command */
    {NMI_SC_PORT, 1},
};

static void absent_read(void *dev, const struct bus_access *a, void *data)
{
	(void)dev;
	memset(data, a->base == NMI_SC_PORT ? 0 : 0xff, a->len);
}

static void absent_write(void *dev, const struct bus_access *a, const void *data)
{
	(void)dev, (void)a, (void)data;
}

static void absent_destroy(void *dev)
{
	free(dev);
}

static const struct dev_ops absent_ops = {
    .name = "legacy-absent",
    .read = absent_read,
    .write = absent_write,
    .destroy = absent_destroy,
    .save = dev_save_stateless,
    .restore = dev_restore_stateless,
};

int legacy_absent_create(struct bus *bus)
{
	void *dev = malloc(1);
	struct bus_device *d;
	int ret = 0;

	if (!dev)
		return -ENOMEM;
	d = bus_add(bus, &absent_ops, dev);
	if (!d)
		return -ENOSPC;
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]) && !ret; i++)
		ret = bus_map(bus, d, BUS_PIO, ranges[i].base, ranges[i].len);
	return ret;
}
