/* test_mptable.c - the MP spec 1.4 tables: checksums, entries, placement and limits, read back byte by byte. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "brisk/abi.h"
#include "brisk/boot.h"
#include "brisk/layout.h"
#include "brisk/mem.h"
#include "brisk/mptable.h"

#include "guest_ram.h"

#define MiB (1ULL << 20)

static char err[BOOT_ERR_MAX];

/* Little-endian field readers: the test parses by the spec's offsets, not brisk's structs. */
static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Floating pointer (MP spec 1.4, 4.1): returns the configuration table's address. */
static uint32_t check_fps(const struct gmem *mem)
{
	const uint8_t *f = gmem_ptr(mem, LAYOUT_EBDA, MPTABLE_FPS_SIZE);

	assert_non_null(f);
	assert_memory_equal(f, "_MP_", 4);
	assert_int_equal(f[8], 1); /* length in paragraphs */
	assert_int_equal(f[9], 4); /* spec rev 1.4 */
	assert_int_equal(byte_sum(f, 16), 0);
	assert_int_equal(f[11], 0); /* feature 1: table present, no default config */
	assert_int_equal(f[12], 0); /* IMCRP clear */
	return le32(f + 4);
}

/* Checks every entry of the table for `cpus` vCPUs. */
static void check_ids(const struct gmem *mem, unsigned cpus, const uint32_t *ids, unsigned ioapic_id)
{
	uint32_t addr = check_fps(mem);
	const uint8_t *h = gmem_ptr(mem, addr, MPTABLE_HEADER_SIZE), *e;
	unsigned n_cpu = 0, n_bus = 0, n_ioapic = 0, n_lint = 0;
	uint32_t irqs = 0;
	uint16_t len, count;

	assert_int_equal(addr, mptable_config_addr(cpus));
	assert_non_null(h);
	assert_memory_equal(h, "PCMP", 4);
	len = le16(h + 4);
	count = le16(h + 34);
	assert_int_equal(len, mptable_config_size(cpus));
	assert_int_equal(len, 44 + 20 * cpus + 8 * (2 + MPTABLE_IRQS + 2));
	assert_int_equal(h[6], 4);
	assert_memory_equal(h + 8, "BRISK   ", 8);
	assert_int_equal(le32(h + 36), BRISK_LAPIC_BASE);
	assert_int_equal(le16(h + 40), 0); /* no extended table */
	assert_int_equal(count, cpus + 2 + MPTABLE_IRQS + 2);
	assert_non_null(gmem_ptr(mem, addr, len));
	assert_int_equal(byte_sum(h, len), 0);

	/* The table stays in its area: EBDA after the floating pointer, or the BIOS area. */
	if (addr == LAYOUT_EBDA + MPTABLE_FPS_SIZE)
		assert_true(addr + len <= LAYOUT_EBDA + LAYOUT_EBDA_SIZE);
	else
		assert_true(addr == LAYOUT_MPTABLE_BIOS &&
			    addr + len <= LAYOUT_MPTABLE_BIOS + LAYOUT_MPTABLE_BIOS_SIZE);

	e = h + 44;
	for (unsigned i = 0; i < count; i++) {
		switch (e[0]) {
		case 0:
			assert_int_equal(e[1], ids ? ids[n_cpu] : n_cpu); /* APIC ID of vCPU n */
			assert_int_equal(e[3], n_cpu == 0 ? 3 : 1);	  /* EN, BP on vCPU 0 only */
			n_cpu++;
			e += 20;
			continue;
		case 1:
			assert_memory_equal(e + 2, "ISA   ", 6);
			n_bus++;
			break;
		case 2:
			assert_int_equal(e[1], ioapic_id); /* I/O APIC ID after the LAPICs */
			assert_int_equal(e[2], 0x11);
			assert_int_equal(e[3], 1);
			assert_int_equal(le32(e + 4), BRISK_IOAPIC_BASE);
			n_ioapic++;
			break;
		case 3:
			assert_int_equal(e[1], 0);	   /* INT */
			assert_int_equal(e[4], 0);	   /* source bus: ISA */
			assert_int_equal(e[6], ioapic_id); /* this I/O APIC */
			assert_int_equal(e[7], e[5]);	   /* IRQ n -> pin n */
			assert_true(e[5] < MPTABLE_IRQS);
			irqs |= 1u << e[5];
			break;
		case 4:
			assert_int_equal(e[1], n_lint == 0 ? 3 : 1); /* ExtINT, then NMI */
			assert_int_equal(e[7], n_lint);		     /* LINT0, LINT1 */
			n_lint++;
			break;
		default:
			fail_msg("entry %u has type %u", i, e[0]);
		}
		e += 8;
	}
	assert_int_equal(e - h, len);
	assert_int_equal(n_cpu, cpus);
	assert_int_equal(n_bus, 1);
	assert_int_equal(n_ioapic, 1);
	assert_int_equal(n_lint, 2);
	assert_int_equal(irqs, (1u << MPTABLE_IRQS) - 1); /* every pin, 0..23 */
}

static void check_table(const struct gmem *mem, unsigned cpus)
{
	check_ids(mem, cpus, NULL, cpus);
}

/* With --topology the APIC IDs have gaps (cores=3: 0, 1, 2, 4); the table must carry CPUID's IDs. */
static void test_mptable_topology_ids(void **state)
{
	static const uint32_t ids[] = {0, 1, 2, 4};
	static const uint32_t too_big[] = {0, 254};

	assert_int_equal(mptable_write(*state, 4, ids, err, sizeof(err)), 0);
	check_ids(*state, 4, ids, 5);
	assert_int_equal(mptable_write(*state, 2, too_big, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "APIC ID 254"));
}

static void test_mptable_cpu_counts(void **state)
{
	static const unsigned counts[] = {1, 2, 4, 36, 37, 38, 128, MPTABLE_MAX_CPUS};

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		memset(gmem_ptr(*state, LAYOUT_EBDA, LAYOUT_LEGACY_END - LAYOUT_EBDA), 0xa5,
		       LAYOUT_LEGACY_END - LAYOUT_EBDA);
		assert_int_equal(mptable_write(*state, counts[i], NULL, err, sizeof(err)), 0);
		check_table(*state, counts[i]);
	}
}

static void test_mptable_placement(void **state)
{
	(void)state;
	assert_int_equal(mptable_config_addr(1), LAYOUT_EBDA + MPTABLE_FPS_SIZE);
	assert_int_equal(mptable_config_addr(37), LAYOUT_EBDA + MPTABLE_FPS_SIZE);
	assert_int_equal(mptable_config_addr(38), LAYOUT_MPTABLE_BIOS);
	assert_int_equal(mptable_config_addr(MPTABLE_MAX_CPUS), LAYOUT_MPTABLE_BIOS);
	assert_true(LAYOUT_EBDA + MPTABLE_FPS_SIZE + mptable_config_size(37) <= LAYOUT_EBDA + LAYOUT_EBDA_SIZE);
	assert_true(LAYOUT_EBDA + MPTABLE_FPS_SIZE + mptable_config_size(38) > LAYOUT_EBDA + LAYOUT_EBDA_SIZE);
}

static void test_mptable_refuses_counts(void **state)
{
	uint8_t before[MPTABLE_FPS_SIZE];

	memset(gmem_ptr(*state, LAYOUT_EBDA, MPTABLE_FPS_SIZE), 0, MPTABLE_FPS_SIZE);
	assert_int_equal(mptable_write(*state, 0, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "0 vCPUs"));
	assert_int_equal(mptable_write(*state, MPTABLE_MAX_CPUS + 1, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "255 vCPUs"));
	assert_int_equal(mptable_config_addr(0), 0);
	assert_int_equal(mptable_config_addr(MPTABLE_MAX_CPUS + 1), 0);
	/* nothing written on refusal */
	assert_int_equal(gmem_read(*state, LAYOUT_EBDA, before, sizeof(before)), 0);
	for (size_t i = 0; i < sizeof(before); i++)
		assert_int_equal(before[i], 0);
}

static void test_mptable_small_ram(void **state)
{
	struct gmem mem;

	(void)state;
	/* the smallest RAM brisk accepts still covers both areas */
	assert_int_equal(gmem_init(&mem, LAYOUT_MEM_MIN, 0), 0);
	assert_int_equal(mptable_write(&mem, MPTABLE_MAX_CPUS, NULL, err, sizeof(err)), 0);
	check_table(&mem, MPTABLE_MAX_CPUS);
	gmem_destroy(&mem);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_mptable_topology_ids, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test_setup_teardown(test_mptable_cpu_counts, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test(test_mptable_placement),
	    cmocka_unit_test_setup_teardown(test_mptable_refuses_counts, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test(test_mptable_small_ram),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
