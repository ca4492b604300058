/*
 * acpi_build.c - what building the ACPI tables costs on the boot path: ACPI must not add a
 * measurable cost to start-up before the first KVM_RUN.
 *
 * brisk builds the tables once per VM (vm_build.c step 3b, acpi_write) straight into guest RAM. This
 * times acpi_build() for a small, a typical and the largest machine, each into a fresh page-aligned
 * buffer (so the first touch of its pages is counted, as in guest RAM), and prints the median, p10 and
 * p90 in microseconds and the bytes written. bench/acpi.sh runs it next to a side-by-side boot
 * comparison (brisk compare --acpi off vs on).
 *
 * Usage: acpi_build [-n RUNS]   (default 2001)
 * Exit status: 0; 1 when a build fails.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "brisk/acpi.h"
#include "brisk/devmgr.h"
#include "brisk/layout.h"

struct shape {
	const char *name;
	unsigned cpus, virtio;
};

static const struct shape shapes[] = {
    {"1 vCPU, no device", 1, 0},
    {"2 vCPUs, 3 devices", 2, 3},
    {"16 vCPUs, 8 devices", 16, 8},
    {"254 vCPUs, 18 devices", ACPI_MAX_CPUS, LAYOUT_VIRTIO_WINDOWS},
};

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* One build into fresh anonymous memory; returns its time in us, or a negative value on failure. */
static double one(const struct acpi_machine *m, size_t *used)
{
	uint8_t *buf = mmap(NULL, LAYOUT_ACPI_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct acpi_layout l;
	char err[256];
	double t0, t1;
	int ret;

	if (buf == MAP_FAILED)
		return -1;
	t0 = now_us();
	ret = acpi_build(m, LAYOUT_ACPI, buf, LAYOUT_ACPI_SIZE, &l, err, sizeof(err));
	t1 = now_us();
	munmap(buf, LAYOUT_ACPI_SIZE);
	if (ret) {
		fprintf(stderr, "acpi_build: %s\n", err);
		return -1;
	}
	*used = l.used;
	return t1 - t0;
}

static int run_shape(const struct shape *s, unsigned runs)
{
	uint32_t ids[ACPI_MAX_CPUS];
	struct devmgr dm = {0};
	double *t = calloc(runs, sizeof(*t));
	size_t used = 0;

	if (!t)
		return -1;
	for (unsigned i = 0; i < s->cpus; i++)
		ids[i] = i;
	for (unsigned i = 0; i < s->virtio; i++)
		devmgr_alloc(&dm, "virtio");
	struct acpi_machine m = {.cpus = s->cpus,
				 .apic_ids = ids,
				 .nr_virtio = dm.nr,
				 .virtio = dm.slot,
				 .legacy = ACPI_DEV_COM1 | ACPI_DEV_I8042 | ACPI_DEV_RTC};
	for (unsigned r = 0; r < runs; r++) {
		if ((t[r] = one(&m, &used)) < 0) {
			free(t);
			return -1;
		}
	}
	qsort(t, runs, sizeof(*t), cmp_double);
	printf("%-24s %8zu %10.2f %10.2f %10.2f\n", s->name, used, t[runs / 2], t[runs / 10], t[runs * 9 / 10]);
	free(t);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned runs = 2001;
	int c;

	while ((c = getopt(argc, argv, "n:")) != -1) {
		if (c != 'n' || (runs = (unsigned)strtoul(optarg, NULL, 10)) < 1) {
			fprintf(stderr, "usage: acpi_build [-n RUNS]\n");
			return 2;
		}
	}
	printf("acpi_build: %u runs each, into fresh memory (first touch counted)\n", runs);
	printf("%-24s %8s %10s %10s %10s\n", "machine", "bytes", "median us", "p10 us", "p90 us");
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (run_shape(&shapes[i], runs))
			return 1;
	return 0;
}
