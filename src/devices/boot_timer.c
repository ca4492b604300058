/*
 * boot_timer.c - Firecracker's boot timer (v1.7.0 src/vmm/src/devices/pseudo/boot_timer.rs, --boot-timer):
 * a guest that writes the byte 123 at offset 0 of the first MMIO page (0xd0000000, where Firecracker places
 * it as its first MMIO device, src/vmm/src/builder.rs) gets one Info line in the log:
 * "Guest-boot-time = <us> us <ms> ms, <cpu us> CPU us <cpu ms> CPU ms", the wall (monotonic) and process
 * CPU time since the VM's build started (Firecracker's request_ts, taken as build_microvm_for_boot begins).
 *
 * brisk's boot-marker device already serves that page (bootmark.c, abi.h): the boot timer is its MMIO
 * door's second reader, so the bus and a snapshot's device sections are the same with or without it. Like
 * Firecracker, the timer has no state to save and a restored VM has none.
 */
#include <stdio.h>
#include <time.h>

#include "brisk/devices.h"
#include "brisk/log.h"

/* Firecracker's MAGIC_VALUE_SIGNAL_GUEST_BOOT_COMPLETE. */
#define BOOT_TIMER_MAGIC 123

static uint64_t clock_us(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void boot_timer_start(struct boot_timer *t)
{
	t->start_us = clock_us(CLOCK_MONOTONIC);
	t->start_cpu_us = clock_us(CLOCK_PROCESS_CPUTIME_ID);
}

int boot_timer_line(const struct boot_timer *t, uint64_t now_us, uint64_t now_cpu_us, char *buf, size_t cap)
{
	uint64_t us = now_us - t->start_us, cpu = now_cpu_us - t->start_cpu_us;

	return snprintf(buf, cap, "Guest-boot-time = %6llu us %llu ms, %6llu CPU us %llu CPU ms",
			(unsigned long long)us, (unsigned long long)(us / 1000), (unsigned long long)cpu,
			(unsigned long long)(cpu / 1000));
}

bool boot_timer_write(const struct boot_timer *t, uint64_t offset, const void *data, unsigned len)
{
	char line[160];

	/* Only a byte-wide write at offset 0 (Firecracker: "Only handle byte length instructions at a zero offset"). */
	if (!t || len != 1 || offset != 0 || *(const uint8_t *)data != BOOT_TIMER_MAGIC)
		return false;
	boot_timer_line(t, clock_us(CLOCK_MONOTONIC), clock_us(CLOCK_PROCESS_CPUTIME_ID), line, sizeof(line));
	log_info("%s", line);
	return true;
}
