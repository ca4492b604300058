/* wset.c - working-set guest: fills a scattered 64 MiB, waits to be snapshotted, then touches it all and times it. */
#include "guest.h"

/*
 * The guest behind docs/performance.md "Working set": what a restored function does first is touch the memory it
 * had warmed up, scattered over its RAM. Boot: the guest writes a value into each of N pages (default 16384 =
 * 64 MiB) picked from the 65536 pages (256 MiB) above 16 MiB in the order of a full-period LCG, so they are spread
 * over the region and visited in no order a readahead can follow; then it prints "wset: ready" and waits for a
 * byte on COM1 (the snapshot is taken there). Given one, it reads the first word of every page in the same order,
 * checks each value, writes boot marker WSET_DONE_MARKER (which also ends a --working-set record window) and
 * prints
 *   wset: touched N pages (M MiB) in C cycles, checksum OK
 * then "wset: PASS" (exit status 0). A page whose value is wrong is "wset: FAIL" (status 255).
 * The guest needs at least 16 + 256 MiB of RAM (--memory 320). Command-line word: pages=N (1..65536).
 */
#define NAME "wset"

#define REGION_START	 (16ull << 20)
#define REGION_PAGES	 65536u /* 256 MiB: the LCG's modulus */
#define DEFAULT_PAGES	 16384u /* 64 MiB */
#define WSET_DONE_MARKER 0x57530002u
#define LCG_A		 0x5bd5u /* a = 1 (mod 4), c odd: full period mod 2^16 (Hull-Dobell) */
#define LCG_C		 0x3039u

static uint32_t next(uint32_t x)
{
	return (x * LCG_A + LCG_C) & (REGION_PAGES - 1);
}

static uint64_t value(uint32_t page)
{
	return 0x5753000000000000ull ^ ((uint64_t)page * 0x9e3779b97f4a7c15ull);
}

static volatile uint64_t *page_at(uint32_t page)
{
	return (volatile uint64_t *)(uintptr_t)(REGION_START + (uint64_t)page * 4096);
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	uint64_t n = DEFAULT_PAGES, bad = 0, t0, t1;
	uint32_t p = 0;

	serial_init();
	cmdline_get_u64(cmdline, "pages", &n);
	if (n < 1 || n > REGION_PAGES)
		guest_fail(NAME, "pages= out of 1..65536");
	for (uint64_t i = 0; i < n; i++, p = next(p)) {
		page_at(p)[0] = value(p);
		page_at(p)[511] = ~value(p);
	}
	gprintf("%s: ready: %llu pages (%llu MiB) written over 256 MiB from 0x%llx\n", NAME, (unsigned long long)n,
		(unsigned long long)(n * 4096 >> 20), (unsigned long long)REGION_START);
	serial_getc();
	t0 = rdtsc();
	p = 0;
	for (uint64_t i = 0; i < n; i++, p = next(p))
		bad += page_at(p)[0] != value(p);
	t1 = rdtsc();
	bootmark(WSET_DONE_MARKER);
	gprintf("%s: touched %llu pages (%llu MiB) in %llu cycles, checksum %s\n", NAME, (unsigned long long)n,
		(unsigned long long)(n * 4096 >> 20), (unsigned long long)(t1 - t0), bad ? "BAD" : "OK");
	if (bad)
		guest_fail(NAME, "a page lost its value");
	guest_pass(NAME);
}
