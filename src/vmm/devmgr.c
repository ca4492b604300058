/* devmgr.c - virtio-mmio windows, interrupt lines and their command-line words (include/brisk/devmgr.h). */
#include <errno.h>
#include <stdbool.h>
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
	    .legacy =
		ACPI_DEV_COM1 | ACPI_DEV_I8042 | ACPI_DEV_RTC | (cfg->irqchip == IRQCHIP_KERNEL ? ACPI_DEV_PIC : 0),
	    .vmgenid = LAYOUT_VMGENID,
	    .vmclock = LAYOUT_VMCLOCK,
	    .ged_gsi = LAYOUT_GED_GSI,
	};
}

/*
 * One word of a command line as Linux's next_arg (lib/cmdline.c) reads it:
 * from p, past leading blanks; a double quote starts a stretch where blanks do not end the
 * word. Returns the word's start (NULL at the end) and its length in *len.
 */
static const char *next_word(const char *p, size_t *len)
{
	bool quote = false;
	size_t i;

	while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
		p++;
	if (!*p)
		return NULL;
	for (i = 0; p[i] && (quote || !(p[i] == ' ' || (p[i] >= '\t' && p[i] <= '\r'))); i++)
		if (p[i] == '"')
			quote = !quote;
	*len = i;
	return p;
}

/* Word w[0..n) without its quotes equals `want` (Linux strips a quote before the name and the value). */
static bool word_is(const char *w, size_t n, const char *want)
{
	char plain[32];
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (w[i] == '"')
			continue;
		if (k + 1 == sizeof(plain))
			return false;
		plain[k++] = w[i];
	}
	plain[k] = '\0';
	return strcmp(plain, want) == 0;
}

/* Offset of the word "--" that ends the kernel's parameters (the rest is init's), or strlen(s). */
static size_t params_end(const char *s)
{
	size_t n;

	for (const char *w = s; (w = next_word(w, &n)) != NULL; w += n)
		if (word_is(w, n, "--"))
			return (size_t)(w - s);
	return strlen(s);
}

bool devmgr_cmdline_acpi_off(const char *cmdline)
{
	size_t end = params_end(cmdline), n;
	bool off = false;

	/* arch/x86/kernel/acpi/boot.c parse_acpi: "off" disables ACPI, "force" enables it again; in order. */
	for (const char *w = cmdline; (w = next_word(w, &n)) != NULL && (size_t)(w - cmdline) < end; w += n) {
		if (word_is(w, n, "acpi=off"))
			off = true;
		else if (word_is(w, n, "acpi=force"))
			off = false;
	}
	return off;
}

/* Appends " virtio_mmio.device=..." for every window at out[*n]; -E2BIG when it does not fit. */
static int put_words(const struct devmgr *m, char *out, size_t outlen, size_t *n)
{
	/* Linux: "virtio_mmio.device=<size>@<baseaddr>:<irq>[:<id>]" (drivers/virtio/virtio_mmio.c). */
	for (unsigned i = 0; i < m->nr; i++) {
		int w = snprintf(out + *n, outlen - *n, "%svirtio_mmio.device=%lluK@0x%llx:%u", *n ? " " : "",
				 (unsigned long long)(LAYOUT_VIRTIO_MMIO_SIZE >> 10),
				 (unsigned long long)m->win[i].base, m->win[i].irq);

		if (w < 0 || (size_t)w >= outlen - *n)
			return -E2BIG;
		*n += (size_t)w;
	}
	return 0;
}

int devmgr_cmdline(const struct devmgr *m, const char *base, char *out, size_t outlen)
{
	size_t cut = params_end(base), n = cut;
	int w;

	/* The kernel's own words before its "--"; init's after (Firecracker: linux_loader's Cmdline keeps them apart).
	 */
	while (n && (base[n - 1] == ' ' || base[n - 1] == '\t'))
		n--;
	if (n >= outlen)
		return -E2BIG;
	memcpy(out, base, n);
	out[n] = '\0';
	if (put_words(m, out, outlen, &n))
		return -E2BIG;
	w = snprintf(out + n, outlen - n, "%s%s", base[cut] && n ? " " : "", base + cut);
	if (w < 0 || (size_t)w >= outlen - n)
		return -E2BIG;
	return (int)(n + (size_t)w);
}
