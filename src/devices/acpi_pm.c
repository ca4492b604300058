/*
 * acpi_pm.c - the hardware-reduced ACPI power-management registers the FADT names (include/brisk/acpi.h,
 * ACPI 6.3 sections 4.8.3.6-4.8.3.7): three 8-bit I/O ports at LAYOUT_ACPI_PM_PORT.
 *
 *   SLEEP_CONTROL_REG (0x600)  a write with SLP_EN (bit 5) set and SLP_TYP (bits 4:2) = 5, the DSDT's
 *                              \_S5, powers the machine off: the VM ends with status 0 (as a guest
 *                              shutdown). Other sleep states are not offered (no \_S1-\_S4 in the
 *                              DSDT); a write asking for one is ignored and counted.
 *   SLEEP_STATUS_REG  (0x601)  WAK_STS (bit 7): reads 0 (nothing wakes a machine that never sleeps);
 *                              writes (the guest clears it before sleeping) are accepted.
 *   RESET_REG         (0x602)  a write of LAYOUT_ACPI_RESET_VALUE resets the machine: the VM ends with
 *                              status 0, the same outcome as the i8042 reset (docs/exit-codes.md).
 *
 * Reads return 0; wider accesses use byte 0, as the other legacy devices do.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/acpi.h"
#include "brisk/bus.h"
#include "brisk/devices.h"
#include "brisk/exitcode.h"
#include "brisk/layout.h"
#include "brisk/log.h"

struct acpi_pm {
	struct devctx ctx;
	_Atomic uint64_t ignored; /* writes asking for something brisk does not do */
};

static void pm_read(void *dev, const struct bus_access *a, void *data)
{
	(void)dev;
	memset(data, 0, a->len);
}

static void ignored(struct acpi_pm *p, const char *what, uint8_t v)
{
	uint64_t n = atomic_fetch_add(&p->ignored, 1);

	if (log_ratelimit(n))
		log_warn("ACPI %s write 0x%02x ignored (%llu so far)", what, v, (unsigned long long)n + 1);
}

static void sleep_control(struct acpi_pm *p, uint8_t v)
{
	unsigned typ = (v >> ACPI_SLP_TYP_SHIFT) & 7;

	if (!(v & ACPI_SLP_EN))
		return; /* setting SLP_TYP alone does nothing until SLP_EN */
	if (typ != ACPI_S5_SLP_TYP) {
		ignored(p, "SLEEP_CONTROL_REG: a sleep state other than S5", v);
		return;
	}
	dev_request_exit(&p->ctx, EXIT_GUEST_OK, "guest powered off (ACPI S5)");
}

static void pm_write(void *dev, const struct bus_access *a, const void *data)
{
	struct acpi_pm *p = dev;
	uint8_t v = ((const uint8_t *)data)[0];

	switch (a->addr) {
	case LAYOUT_ACPI_SLEEP_CTL:
		sleep_control(p, v);
		break;
	case LAYOUT_ACPI_SLEEP_STS:
		break; /* clearing WAK_STS: nothing is ever set */
	case LAYOUT_ACPI_RESET:
		if (v == LAYOUT_ACPI_RESET_VALUE)
			dev_request_exit(&p->ctx, EXIT_GUEST_OK, "guest requested reset (ACPI reset register)");
		else
			ignored(p, "RESET_REG: not the reset value", v);
		break;
	}
}

static void pm_destroy(void *dev)
{
	free(dev);
}

static const struct dev_ops acpi_pm_ops = {
    .name = "acpi-pm",
    .read = pm_read,
    .write = pm_write,
    .destroy = pm_destroy,
    .save = dev_save_stateless, /* `ignored` is a counter for logs, not state */
    .restore = dev_restore_stateless,
};

int acpi_pm_create(const struct devctx *ctx, struct bus *bus)
{
	struct acpi_pm *p = calloc(1, sizeof(*p));
	struct bus_device *d;

	if (!p)
		return -ENOMEM;
	p->ctx = *ctx;
	d = bus_add(bus, &acpi_pm_ops, p); /* the bus owns p from here on */
	return d ? bus_map(bus, d, BUS_PIO, LAYOUT_ACPI_PM_PORT, LAYOUT_ACPI_PM_SIZE) : -ENOSPC;
}
