/* devmgr.c - virtio-mmio windows, interrupt lines and their command-line words (include/brisk/devmgr.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "brisk/acpi.h"
#include "brisk/cpuid.h"
#include "brisk/devkinds.h"
#include "brisk/devmgr.h"
#include "brisk/vm.h"

static const unsigned irqs[LAYOUT_VIRTIO_WINDOWS] = LAYOUT_VIRTIO_IRQS;

static struct devmgr_window *take(struct devmgr *m, const char *what)
{
	struct devmgr_window *s;

	if (m->nr == LAYOUT_VIRTIO_WINDOWS)
		return NULL;
	s = &m->win[m->nr];
	*s = (struct devmgr_window){
	    .base = LAYOUT_VIRTIO_MMIO + m->nr * LAYOUT_VIRTIO_MMIO_SIZE,
	    .irq = irqs[m->nr],
	    .what = what,
	};
	m->nr++;
	return s;
}

const struct devmgr_window *devmgr_alloc(struct devmgr *m, const char *what)
{
	return take(m, what);
}

void devmgr_plan(struct devmgr *m, const struct vm_config *cfg)
{
	*m = (struct devmgr){0};
	for (unsigned k = 0; k < devkinds_nr; k++) {
		unsigned n = devkinds[k].count(cfg);

		for (unsigned i = 0; i < n; i++) {
			struct devmgr_window *s = take(m, devkinds[k].name);

			if (s)
				s->kind = &devkinds[k], s->index = i;
		}
	}
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
	    .virtio = m->win,
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
			     (unsigned long long)(LAYOUT_VIRTIO_MMIO_SIZE >> 10), (unsigned long long)m->win[i].base,
			     m->win[i].irq);
		if (w < 0 || (size_t)w >= outlen - n)
			return -E2BIG;
		n += (size_t)w;
	}
	return (int)n;
}
