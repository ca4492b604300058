/*
 * guest_ram.h - cmocka fixtures shared by the unit tests that write boot
 * structures into guest RAM (test_acpi, test_mptable, test_memmap): a 128 MiB
 * struct gmem per test, and the byte checksum the firmware tables use (ACPI
 * 6.3 section 5.2.6, MP spec 1.4 section 4: all bytes sum to 0 mod 256).
 */
#ifndef BRISK_TEST_GUEST_RAM_H
#define BRISK_TEST_GUEST_RAM_H

#include <stddef.h>
#include <stdint.h>

#include "brisk/mem.h"

#define GUEST_RAM_TEST_SIZE (128ULL << 20)

/* setup: *state = a fresh gmem of GUEST_RAM_TEST_SIZE (one static instance: tests run one at a time). */
static inline int guest_ram_setup(void **state)
{
	static struct gmem mem;

	if (gmem_init(&mem, GUEST_RAM_TEST_SIZE, 0))
		return -1;
	*state = &mem;
	return 0;
}

static inline int guest_ram_teardown(void **state)
{
	gmem_destroy(*state);
	return 0;
}

/* The 8-bit sum of p[0..n). */
static inline uint8_t byte_sum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s = (uint8_t)(s + *p++);
	return s;
}

#endif
