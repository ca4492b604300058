/*
 * kernel_load.c - what loading a kernel and initrd into guest RAM costs, side by side (docs/performance.md
 * "Loading the kernel"): brisk's kernel_load, which reads the file's segments with pread(2) straight into guest
 * RAM, against the copy it made before, memcpy from the file's read-only mapping. No KVM: guest RAM is a fresh
 * gmem (as brisk allocates it: 2 MiB-aligned, transparent huge pages asked for) per run, so each run pays its
 * own page faults, as a VM's start does. Runs alternate between the two; medians and min-max in ms.
 *   build/bench/kernel_load [-n RUNS] [--memory MiB] KERNEL [INITRD]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brisk/kernel.h"
#include "brisk/mem.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Before: each segment (or the bzImage's protected-mode code) and the initrd memcpy'd from the mapping. */
static int load_by_memcpy(const struct kernel *k, const struct gmem *mem)
{
	if (k->format == KERNEL_BZIMAGE) {
		if (gmem_write(mem, k->bz.load_addr, k->image.data + k->bz.setup_size, k->bz.pm_size))
			return -1;
	} else {
		for (unsigned i = 0; i < k->elf.nr_segments; i++) {
			const struct elf_segment *s = &k->elf.seg[i];

			if (gmem_write(mem, s->paddr, k->image.data + s->offset, s->filesz))
				return -1;
		}
	}
	/* initrd_place's address is known only after kernel_load; 64 MiB is clear of every kernel here */
	return k->initrd.size ? gmem_write(mem, 64ULL << 20, k->initrd.data, k->initrd.size) : 0;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void report(const char *what, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	printf("%-38s median %8.2f ms  (%.2f-%.2f)\n", what, v[n / 2], v[0], v[n - 1]);
}

static double one(const struct kernel_files *f, uint64_t size, int by_memcpy)
{
	struct boot_entry entry;
	struct kernel k;
	struct gmem mem;
	char err[512];
	double t0, t;
	int ret;

	if (gmem_init(&mem, size, 0)) {
		fprintf(stderr, "kernel_load: cannot allocate guest RAM\n");
		exit(1);
	}
	t0 = now_ms();
	ret = kernel_open(&k, f, err, sizeof(err));
	if (!ret)
		ret = by_memcpy ? load_by_memcpy(&k, &mem) : kernel_load(&k, &mem, NULL, &entry, err, sizeof(err));
	t = now_ms() - t0;
	if (ret) {
		fprintf(stderr, "kernel_load: %s\n", by_memcpy ? "memcpy load failed" : err);
		exit(1);
	}
	kernel_close(&k);
	gmem_destroy(&mem);
	return t;
}

int main(int argc, char **argv)
{
	int n = 21, a = 1;
	uint64_t mib = 256;
	double *pr, *mc;

	for (; a < argc && argv[a][0] == '-'; a += 2) {
		if (a + 1 >= argc)
			break;
		if (!strcmp(argv[a], "-n"))
			n = atoi(argv[a + 1]);
		else if (!strcmp(argv[a], "--memory"))
			mib = strtoull(argv[a + 1], NULL, 10);
	}
	if (a >= argc || n < 1 || mib < 64) {
		fprintf(stderr, "usage: kernel_load [-n RUNS] [--memory MiB] KERNEL [INITRD]\n");
		return 2;
	}
	struct kernel_files f = {.kernel = argv[a], .initrd = a + 1 < argc ? argv[a + 1] : NULL};
	pr = calloc((size_t)n, sizeof(*pr));
	mc = calloc((size_t)n, sizeof(*mc));
	if (!pr || !mc)
		return 1;
	one(&f, mib << 20, 0); /* the page cache warm for both */
	for (int i = 0; i < n; i++) {
		if (i % 2) {
			pr[i] = one(&f, mib << 20, 0);
			mc[i] = one(&f, mib << 20, 1);
		} else {
			mc[i] = one(&f, mib << 20, 1);
			pr[i] = one(&f, mib << 20, 0);
		}
	}
	printf("%s%s%s, %llu MiB of guest RAM, %d runs each, interleaved:\n", argv[a], f.initrd ? " + " : "",
	       f.initrd ? f.initrd : "", (unsigned long long)mib, n);
	report("open + pread into guest RAM (brisk)", pr, n);
	report("open + memcpy from the mapping (before)", mc, n);
	printf("pread / memcpy (medians) %.2f\n", pr[n / 2] / mc[n / 2]);
	free(pr);
	free(mc);
	return 0;
}
