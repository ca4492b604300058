/*
 * console_line.c - what a guest's console line costs brisk's host side (docs/performance.md "Console output"):
 * a UART hands brisk one byte per guest write (one VM exit each), and console_io (src/devices/console_io.c)
 * carries them to stdout through its output thread. This bench is the producer a vCPU is: LINES lines of 28
 * bytes, one console_io_write per byte, about 2 us apart (a VM exit's round trip on a host), into a pipe a
 * reader thread drains (as a parent reading brisk's stdout does). It prints the process's CPU time and context
 * switches per line and the write(2) calls that reached the pipe. Link it with two libbrisk.a builds to
 * compare them side by side.
 *   build/bench/console_line [LINES]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "brisk/console_io.h"

static const struct console_io_ops no_ops;
static int pipe_fd[2];
static uint64_t reads;

static void *reader(void *arg)
{
	char buf[65536];

	(void)arg;
	while (read(pipe_fd[0], buf, sizeof(buf)) > 0)
		reads++;
	return NULL;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
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

	if (lines < 1 || pipe(pipe_fd) || pthread_create(&rd, NULL, reader, NULL))
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
	printf(
	    "%d lines of %zu bytes in %.0f ms: CPU %.1f us per line beyond the producer's spinning, context switches "
	    "%.2f per line, reads %.2f per line, dropped %llu\n",
	    lines, sizeof(line) - 1, (now_us() - t0) / 1e3,
	    (cpu_us(&r1) - cpu_us(&r0)) / lines - ((sizeof(line) - 1) * 2.0 + 200),
	    (double)(r1.ru_nvcsw + r1.ru_nivcsw - r0.ru_nvcsw - r0.ru_nivcsw) / lines, (double)reads / lines,
	    (unsigned long long)dropped);
	return 0;
}
