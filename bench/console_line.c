/*
 * console_line.c - what a guest's console line costs brisk's host side (docs/performance.md "Console output"):
 * a UART hands brisk one byte per guest write (one VM exit each), and console_io (src/devices/console_io.c)
 * carries them to stdout through its output thread. This bench is the producer a vCPU is: LINES lines of 28
 * bytes, one console_io_write per byte, about 2 us apart (a VM exit's round trip on a host), into a pipe a
 * reader thread drains (as a parent reading brisk's stdout does). It prints the process's CPU time and context
 * switches per line, the write(2) calls that reached the pipe, and each line's latency: from the call that
 * queued its '\n' to the reader's read(2) returning it (the median and p90 over the lines). Link it with two
 * libbrisk.a builds to compare them side by side.
 *   build/bench/console_line [LINES]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "brisk/console_io.h"

#define LINE_LEN 28 /* sizeof("Hello from brisk test guest\n") - 1 */

static const struct console_io_ops no_ops;
static int pipe_fd[2];
static uint64_t reads;
static double *nl_at, *got_at; /* per line: its '\n' queued; the read that completed it returned */

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void *reader(void *arg)
{
	int lines = *(const int *)arg;
	uint64_t bytes = 0;
	char buf[65536];
	ssize_t n;

	while ((n = read(pipe_fd[0], buf, sizeof(buf))) > 0) {
		double t = now_us();

		reads++;
		for (uint64_t l = bytes / LINE_LEN; l < (bytes + (uint64_t)n) / LINE_LEN && l < (uint64_t)lines; l++)
			got_at[l] = t;
		bytes += (uint64_t)n;
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double cpu_us(const struct rusage *r)
{
	return (double)(r->ru_utime.tv_sec + r->ru_stime.tv_sec) * 1e6 +
	       (double)(r->ru_utime.tv_usec + r->ru_stime.tv_usec);
}

int main(int argc, char **argv)
{
	static const char line[] = "Hello from brisk test guest\n";
	int lines = argc > 1 ? atoi(argv[1]) : 2000;
	struct rusage r0, r1;
	struct console_io *io;
	unsigned long long dropped;
	pthread_t rd;
	double t0;

	if (lines < 1 || !(nl_at = calloc((size_t)lines, sizeof(double))) ||
	    !(got_at = calloc((size_t)lines, sizeof(double))) || pipe(pipe_fd) ||
	    pthread_create(&rd, NULL, reader, &lines))
		return 1;
	io = console_io_create(&(struct console_io_opts){
	    .name = "bench", .out_fd = pipe_fd[1], .in_fd = -1, .out_size = 65536, .in_size = 16, .ops = &no_ops});
	if (!io || console_io_start_output(io))
		return 1;
	getrusage(RUSAGE_SELF, &r0);
	t0 = now_us();
	for (int l = 0; l < lines; l++) {
		for (size_t i = 0; i < sizeof(line) - 1; i++) {
			double until = now_us() + 2;

			if (line[i] == '\n')
				nl_at[l] = until - 2;
			console_io_write(io, line + i, 1);
			while (now_us() < until) /* the next exit */
				;
		}
		for (double until = now_us() + 200; now_us() < until;) /* the guest between lines */
			;
	}
	console_io_stop(io, 5000);
	getrusage(RUSAGE_SELF, &r1);
	dropped = console_io_dropped(io);
	console_io_destroy(io); /* its private reopen of the pipe closed too: the reader sees the end */
	close(pipe_fd[1]);
	pthread_join(rd, NULL);
	for (int l = 0; l < lines; l++)
		got_at[l] = got_at[l] ? got_at[l] - nl_at[l] : 1e9; /* a line never read: far off the scale */
	qsort(got_at, (size_t)lines, sizeof(double), cmp_double);
	printf(
	    "%d lines of %zu bytes in %.0f ms: CPU %.1f us per line beyond the producer's spinning, context switches "
	    "%.2f per line, reads %.2f per line, dropped %llu, line latency median %.1f us p90 %.1f us\n",
	    lines, sizeof(line) - 1, (now_us() - t0) / 1e3,
	    (cpu_us(&r1) - cpu_us(&r0)) / lines - ((sizeof(line) - 1) * 2.0 + 200),
	    (double)(r1.ru_nvcsw + r1.ru_nivcsw - r0.ru_nvcsw - r0.ru_nivcsw) / lines, (double)reads / lines,
	    (unsigned long long)dropped, got_at[lines / 2], got_at[lines * 9 / 10]);
	return 0;
}
