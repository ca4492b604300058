/* devmgr.c - virtio-mmio windows, interrupt lines and their command-line words (include/brisk/devmgr.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "brisk/acpi.h"
#include "brisk/cpuid.h"
#include "brisk/devmgr.h"
#include "brisk/vm.h"

static const unsigned irqs[LAYOUT_VIRTIO_SLOTS] = LAYOUT_VIRTIO_IRQS;

const struct devmgr_slot *devmgr_alloc(struct devmgr *m, const char *what)
{
	struct devmgr_slot *s;

	if (m->nr == LAYOUT_VIRTIO_SLOTS)
		return NULL;
	s = &m->slot[m->nr];
	*s = (struct devmgr_slot){
	    .base = LAYOUT_VIRTIO_MMIO + m->nr * LAYOUT_VIRTIO_MMIO_SIZE,
	    .irq = irqs[m->nr],
	    .what = what,
	};
	m->nr++;
	return s;
}

void devmgr_plan(struct devmgr *m, const struct vm_config *cfg)
{
	*m = (struct devmgr){0};
	for (unsigned i = 0; i < cfg->nr_disks; i++)
		devmgr_alloc(m, "virtio-blk");
	for (unsigned i = 0; i < cfg->nr_nets; i++)
		devmgr_alloc(m, "virtio-net");
	if (cfg->vsock.cid)
		devmgr_alloc(m, "virtio-vsock");
	if (cfg->rng_rate)
		devmgr_alloc(m, "virtio-rng");
	if (cfg->console == CONSOLE_VIRTIO)
		devmgr_alloc(m, "virtio-console");
}

void devmgr_acpi_machine(const struct devmgr *m, const struct vm_config *cfg, const struct cpuid_topology *topo,
			 uint32_t *ids, struct acpi_machine *out)
{
	for (unsigned i = 0; i < cfg->cpus; i++)
		ids[i] = cpuid_apic_id(topo, i);
	*out = (struct acpi_machine){
	    .cpus = cfg->cpus,
	    .apic_ids = ids,
	    .nr_virtio = m->nr,
	    .virtio = m->slot,
	    .legacy = ACPI_DEV_COM1 | ACPI_DEV_I8042 | ACPI_DEV_RTC,
	};
}

int devmgr_cmdline(const struct devmgr *m, const char *base, char *out, size_t outlen)
{
	size_t n = 0;
	int w = snprintf(out, outlen, "%s", base);

	if (w < 0 || (size_t)w >= outlen)
		return -E2BIG;
	n = (size_t)w;
	/* Linux: "virtio_mmio.device=<size>@<baseaddr>:<irq>[:<id>]" (drivers/virtio/virtio_mmio.c). */
	for (unsigned i = 0; i < m->nr; i++) {
		w = snprintf(out + n, outlen - n, "%svirtio_mmio.device=%lluK@0x%llx:%u", n ? " " : "",
			     (unsigned long long)(LAYOUT_VIRTIO_MMIO_SIZE >> 10), (unsigned long long)m->slot[i].base,
			     m->slot[i].irq);
		if (w < 0 || (size_t)w >= outlen - n)
			return -E2BIG;
		n += (size_t)w;
	}
	return (int)n;
}
