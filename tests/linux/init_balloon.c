/*
 * init_balloon.c - the test init's balloon mode (tests/linux/test_balloon_linux.py): brisk.balloon=MIB.
 *
 * Writes MIB MiB of anonymous memory page by page and frees it (the pages go back to the kernel's free lists,
 * still resident in brisk), prints MemTotal, then follows /proc/meminfo's MemTotal every 100 ms: Linux's
 * virtio_balloon takes inflated pages out of MemTotal when VIRTIO_BALLOON_F_DEFLATE_ON_OOM is not negotiated
 * (adjust_managed_page_count). It prints "brisk-balloon: inflated" once MemTotal fell by at least
 * brisk.balloon.min=MIB (default 16), then "brisk-balloon: deflated" once it is back within 1 MiB, and
 * returns 5 s later (the host reads the statistics of the deflated balloon meanwhile); each wait is bounded by
 * brisk.balloon.wait=SECONDS (default 240).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "init.h"

/* A /proc/meminfo field in kB, or -1. */
static long meminfo(const char *key)
{
	char line[256];
	long v = -1;
	size_t n = strlen(key);
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* Waits until done(MemTotal) holds, at most `secs`; returns the last MemTotal seen (kB). */
static long follow(long base, long delta, int falling, int secs)
{
	long t = meminfo("MemTotal");

	for (long end = now_ms() + secs * 1000L; now_ms() < end; usleep(100000)) {
		t = meminfo("MemTotal");
		if (falling ? t <= base - delta : t >= base - delta)
			break;
	}
	return t;
}

void balloon_mode(const char *cmdline)
{
	char v[32];
	long mib = strtol(arg_value(cmdline, "brisk.balloon=", v, sizeof(v), "0"), NULL, 10);
	long min = strtol(arg_value(cmdline, "brisk.balloon.min=", v, sizeof(v), "16"), NULL, 10);
	int secs = (int)strtol(arg_value(cmdline, "brisk.balloon.wait=", v, sizeof(v), "240"), NULL, 10);
	size_t len = (size_t)mib << 20;
	char *p = len ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
	long base, t;

	if (p == MAP_FAILED) {
		say("brisk-balloon: cannot map %ld MiB\n", mib);
		return;
	}
	for (size_t off = 0; off < len; off += 4096)
		p[off] = 1;
	munmap(p, len);
	base = meminfo("MemTotal");
	say("brisk-balloon: touched %ld MiB, MemTotal %ld kB, MemFree %ld kB\n", mib, base, meminfo("MemFree"));
	t = follow(base, min << 10, 1, secs);
	say("brisk-balloon: %s MemTotal %ld kB (%ld kB less)\n", t <= base - (min << 10) ? "inflated" : "not inflated",
	    t, base - t);
	t = follow(base, 1024, 0, secs);
	say("brisk-balloon: %s MemTotal %ld kB\n", t >= base - 1024 ? "deflated" : "not deflated", t);
	sleep(5);
}
