/* faultcost.c - what a page fault and a system call cost on this host, against mapping the same pages at once. */
/*
 * Usage: faultcost [BINARY]   (default /proc/self/exe)
 *
 * Prints medians of 5 rounds of:
 *   - a system call (getppid) in a loop of 100,000;
 *   - a write fault on a fresh anonymous page (one per page of 256 fresh pages, THP off for them), and the
 *     same pages allocated by one MADV_POPULATE_WRITE (then written, as the faulting loop writes them);
 *   - a read fault on each 64 KiB window of BINARY's first executable segment, mapped as exec maps it (each
 *     fault also maps the window's cached pages: fault-around), and the same mapping filled by one
 *     MADV_POPULATE_READ.
 * docs/performance.md "The start path in one place" says why these decide brisk's start-up on a
 * virtualised host. Needs Linux 5.14 (MADV_POPULATE_*); no privileges.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define ROUNDS	     5
#define ANON_PAGES   256
#define WINDOW	     (64 * 1024)
#define SYSCALL_LOOP 100000

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v)
{
	qsort(v, ROUNDS, sizeof(*v), cmp);
	return v[ROUNDS / 2];
}

static double syscall_us(void)
{
	double t0 = now_us();

	for (int i = 0; i < SYSCALL_LOOP; i++)
		syscall(SYS_getppid);
	return (now_us() - t0) / SYSCALL_LOOP;
}

/* Per page: touched one by one (faults), or populated by one madvise. -1 on a failed mapping. */
static double anon_us(int populate)
{
	size_t len = (size_t)ANON_PAGES * 4096;
	volatile char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	double t0, us = -1;

	if (p == MAP_FAILED)
		return -1;
	madvise((void *)p, len, MADV_NOHUGEPAGE);
	t0 = now_us();
	if (!populate || madvise((void *)p, len, MADV_POPULATE_WRITE) == 0) {
		for (size_t o = 0; o < len; o += 4096)
			p[o] = 1;
		us = (now_us() - t0) / ANON_PAGES;
	}
	munmap((void *)p, len);
	return us;
}

/* The first PT_LOAD with PF_X: its page-aligned file offset and length. 0 or -1. */
static int text_segment(int fd, off_t *off, size_t *len)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;

	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64)
		return -1;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != (ssize_t)sizeof(ph))
			return -1;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			*off = (off_t)(ph.p_offset & ~4095ULL);
			*len = (size_t)(ph.p_offset + ph.p_filesz - (uint64_t)*off);
			return 0;
		}
	}
	return -1;
}

/* The whole segment: one read per 64 KiB window (faults), or one MADV_POPULATE_READ. -1 on failure. */
static double text_us(int fd, off_t off, size_t len, int populate)
{
	volatile char *p = mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, off);
	double t0, us = -1;

	if (p == MAP_FAILED)
		return -1;
	t0 = now_us();
	if (populate) {
		if (madvise((void *)p, len, MADV_POPULATE_READ) == 0)
			us = now_us() - t0;
	} else {
		for (size_t o = 0; o < len; o += WINDOW)
			(void)p[o];
		us = now_us() - t0;
	}
	munmap((void *)p, len);
	return us;
}

int main(int argc, char **argv)
{
	const char *bin = argc > 1 ? argv[1] : "/proc/self/exe";
	double sc[ROUNDS], af[ROUNDS], ap[ROUNDS], tf[ROUNDS], tp[ROUNDS];
	int fd = open(bin, O_RDONLY | O_CLOEXEC), windows;
	off_t off;
	size_t len;

	if (fd < 0 || text_segment(fd, &off, &len) != 0) {
		fprintf(stderr, "faultcost: %s: not a readable 64-bit ELF with an executable segment\n", bin);
		return 2;
	}
	windows = (int)((len + WINDOW - 1) / WINDOW);
	/* warm the page cache: the windows' faults then map cached pages, as an exec of a cached binary does */
	text_us(fd, off, len, 1);
	for (int r = 0; r < ROUNDS; r++) {
		sc[r] = syscall_us();
		af[r] = anon_us(0);
		ap[r] = anon_us(1);
		tf[r] = text_us(fd, off, len, 0);
		tp[r] = text_us(fd, off, len, 1);
		if (af[r] < 0 || ap[r] < 0 || tf[r] < 0 || tp[r] < 0) {
			fprintf(stderr,
				"faultcost: a mapping or MADV_POPULATE_* failed (Linux 5.14 or later needed)\n");
			return 1;
		}
	}
	printf("system call (getppid)                 %8.2f us\n", median(sc));
	printf("anonymous write fault, per page       %8.2f us   one MADV_POPULATE_WRITE, per page %.2f us\n",
	       median(af), median(ap));
	printf("text of %s: %zu KiB, %d windows of 64 KiB\n", bin, len >> 10, windows);
	printf("  one read per window (a fault each)  %8.1f us   (%.1f us a window)\n", median(tf),
	       median(tf) / windows);
	printf("  one MADV_POPULATE_READ of it all    %8.1f us\n", median(tp));
	close(fd);
	return 0;
}
