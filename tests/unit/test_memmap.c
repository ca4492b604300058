/* test_memmap.c - the guest memory map, the PVH start info, the boot GDT and the identity page tables. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../src/arch/x86/pvh_abi.h"
#include "../../src/arch/x86/x86_boot.h"
#include "brisk/boot.h"
#include "brisk/layout.h"
#include "brisk/mem.h"

#include "guest_ram.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

static char err[BOOT_ERR_MAX];

/* Sorted, non-overlapping, nothing in the MMIO hole, RAM = memory minus the legacy hole. */
static void check_map(uint64_t size)
{
	struct memmap_entry map[MEMMAP_MAX];
	uint64_t ram = 0, prev_end = 0;
	struct gmem mem;
	unsigned n, reserved = 0;

	assert_int_equal(gmem_init(&mem, size, 0), 0);
	n = memmap_build(&mem, map, MEMMAP_MAX);
	assert_in_range(n, 3, 4);
	for (unsigned i = 0; i < n; i++) {
		assert_true(map[i].size > 0);
		assert_true(map[i].addr >= prev_end);
		assert_true(LAYOUT_DISJOINT(map[i].addr, map[i].size, LAYOUT_MMIO_HOLE,
					    LAYOUT_MMIO_HOLE_END - LAYOUT_MMIO_HOLE));
		prev_end = map[i].addr + map[i].size;
		if (map[i].type == MEMMAP_RAM) {
			/* every RAM byte the map claims is backed */
			assert_non_null(gmem_ptr(&mem, map[i].addr, map[i].size));
			ram += map[i].size;
		} else {
			assert_int_equal(map[i].type, MEMMAP_RESERVED);
			reserved++;
		}
	}
	assert_int_equal(reserved, 1);
	assert_int_equal(ram, size - (LAYOUT_LEGACY_END - LAYOUT_EBDA));
	assert_int_equal(n, size > LAYOUT_MMIO_HOLE ? 4 : 3);
	gmem_destroy(&mem);
}

static void test_memmap_sizes(void **state)
{
	(void)state;
	check_map(16 * MiB);
	check_map(128 * MiB);
	check_map(3 * GiB);
	check_map(3 * GiB + MiB);
	check_map(8 * GiB);
}

static void test_memmap_exact_entries(void **state)
{
	struct memmap_entry map[MEMMAP_MAX];
	struct gmem mem;

	(void)state;
	assert_int_equal(gmem_init(&mem, 3 * GiB + MiB, 0), 0);
	assert_int_equal(memmap_build(&mem, map, MEMMAP_MAX), 4);
	assert_int_equal(map[0].addr, 0);
	assert_int_equal(map[0].size, LAYOUT_EBDA);
	assert_int_equal(map[1].addr, LAYOUT_EBDA);
	assert_int_equal(map[1].size, LAYOUT_LEGACY_END - LAYOUT_EBDA);
	assert_int_equal(map[1].type, MEMMAP_RESERVED);
	assert_int_equal(map[2].addr, LAYOUT_HIGH_RAM);
	assert_int_equal(map[2].size, LAYOUT_MMIO_HOLE - LAYOUT_HIGH_RAM);
	assert_int_equal(map[3].addr, LAYOUT_RAM_ABOVE_4G);
	assert_int_equal(map[3].size, MiB);
	/* bounded by max */
	assert_int_equal(memmap_build(&mem, map, 2), 2);
	assert_int_equal(memmap_build(&mem, map, 0), 0);
	gmem_destroy(&mem);
}

static const struct elf_info pvh_info = {.elf_class = 64, .has_pvh = 1, .pvh_entry = 0x1000040};

static void test_pvh_start_info(void **state)
{
	const struct gmem *mem = *state;
	const char *cmdline = "console=ttyS0 reboot=k panic=-1";
	struct hvm_memmap_table_entry tab[MEMMAP_MAX];
	struct memmap_entry map[MEMMAP_MAX];
	struct hvm_start_info si;
	struct boot_entry entry;
	char got[64];
	unsigned n;

	assert_int_equal(pvh_setup(mem, &pvh_info, cmdline, &entry, err, sizeof(err)), 0);
	assert_int_equal(entry.mode, BOOT_PVH32);
	assert_int_equal(entry.rip, 0x1000040);
	assert_int_equal(entry.boot_info, LAYOUT_START_INFO);

	assert_int_equal(gmem_read(mem, LAYOUT_START_INFO, &si, sizeof(si)), 0);
	assert_int_equal(si.magic, BRISK_PVH_START_MAGIC);
	assert_int_equal(si.version, 1);
	assert_int_equal(si.flags, 0);
	assert_int_equal(si.nr_modules, 0);
	assert_int_equal(si.rsdp_paddr, 0);
	assert_int_equal(si.cmdline_paddr, LAYOUT_CMDLINE);
	assert_int_equal(si.memmap_paddr, LAYOUT_MEMMAP);
	assert_int_equal(si.reserved, 0);

	assert_int_equal(gmem_read(mem, si.cmdline_paddr, got, strlen(cmdline) + 1), 0);
	assert_string_equal(got, cmdline);

	n = memmap_build(mem, map, MEMMAP_MAX);
	assert_int_equal(si.memmap_entries, n);
	assert_int_equal(gmem_read(mem, si.memmap_paddr, tab, n * sizeof(tab[0])), 0);
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(tab[i].addr, map[i].addr);
		assert_int_equal(tab[i].size, map[i].size);
		assert_int_equal(tab[i].type, map[i].type);
		assert_int_equal(tab[i].reserved, 0);
	}
}

static void test_pvh_cmdline_limits(void **state)
{
	const struct gmem *mem = *state;
	char *line = malloc(LAYOUT_CMDLINE_MAX + 1);
	struct boot_entry entry;
	char last;

	memset(line, 'a', LAYOUT_CMDLINE_MAX);
	line[LAYOUT_CMDLINE_MAX] = 0;
	assert_int_equal(pvh_setup(mem, &pvh_info, line, &entry, err, sizeof(err)), -E2BIG);
	assert_non_null(strstr(err, "65536 bytes"));
	line[LAYOUT_CMDLINE_MAX - 1] = 0; /* the longest that fits, with its NUL */
	assert_int_equal(pvh_setup(mem, &pvh_info, line, &entry, err, sizeof(err)), 0);
	assert_int_equal(gmem_read(mem, LAYOUT_CMDLINE + LAYOUT_CMDLINE_MAX - 1, &last, 1), 0);
	assert_int_equal(last, 0);
	assert_int_equal(pvh_setup(mem, &pvh_info, NULL, &entry, err, sizeof(err)), 0);
	assert_int_equal(gmem_read(mem, LAYOUT_CMDLINE, &last, 1), 0);
	assert_int_equal(last, 0);
	free(line);
}

static void test_pvh_rejects_non_pvh(void **state)
{
	struct elf_info info = pvh_info;
	struct boot_entry entry;

	info.has_pvh = 0;
	assert_int_equal(pvh_setup(*state, &info, "", &entry, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "XEN_ELFNOTE_PHYS32_ENTRY"));
}

/* The well-known flat descriptors (Linux's GDT_ENTRY_INIT(0xc09b, 0, 0xfffff) etc.). */
static void test_boot_gdt(void **state)
{
	const struct gmem *mem = *state;
	uint64_t gdt[4], idt;

	assert_int_equal(x86_write_gdt(mem, BOOT_PVH32), 0);
	assert_int_equal(gmem_read(mem, LAYOUT_GDT, gdt, sizeof(gdt)), 0);
	assert_int_equal(gdt[0], 0);
	assert_int_equal(gdt[X86_SEL_TSS / 8], 0x00008b0000000067ULL);
	assert_int_equal(gdt[X86_SEL_CS / 8], 0x00cf9b000000ffffULL);
	assert_int_equal(gdt[X86_SEL_DS / 8], 0x00cf93000000ffffULL);
	assert_int_equal(gmem_read(mem, LAYOUT_IDT, &idt, sizeof(idt)), 0);
	assert_int_equal(idt, 0);
	assert_int_equal(x86_write_gdt(mem, BOOT_LONG64), 0);
	assert_int_equal(gmem_read(mem, LAYOUT_GDT, gdt, sizeof(gdt)), 0);
	assert_int_equal(gdt[X86_SEL_CS / 8], 0x00af9b000000ffffULL);
	assert_int_equal(x86_gdt_entry(BOOT_PVH32, X86_GDT_ENTRIES), 0);
}

static void test_identity_map(void **state)
{
	const struct gmem *mem = *state;
	uint64_t e;

	assert_int_equal(x86_build_identity_map(mem), 0);
	assert_int_equal(gmem_read(mem, LAYOUT_PML4, &e, 8), 0);
	assert_int_equal(e, LAYOUT_PDPT | 3);
	assert_int_equal(gmem_read(mem, LAYOUT_PML4 + 8, &e, 8), 0);
	assert_int_equal(e, 0);
	assert_int_equal(gmem_read(mem, LAYOUT_PDPT + 3 * 8, &e, 8), 0);
	assert_int_equal(e, (LAYOUT_PD + 0x3000) | 3);
	assert_int_equal(gmem_read(mem, LAYOUT_PD, &e, 8), 0);
	assert_int_equal(e, 0x83);
	/* the last 2 MiB page below 4 GiB: PD 3, entry 511 */
	assert_int_equal(gmem_read(mem, LAYOUT_PD + 0x3000 + 511 * 8, &e, 8), 0);
	assert_int_equal(e, (4 * GiB - 2 * MiB) | 0x83);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_memmap_sizes),
	    cmocka_unit_test(test_memmap_exact_entries),
	    cmocka_unit_test_setup_teardown(test_pvh_start_info, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test_setup_teardown(test_pvh_cmdline_limits, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test_setup_teardown(test_pvh_rejects_non_pvh, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test_setup_teardown(test_boot_gdt, guest_ram_setup, guest_ram_teardown),
	    cmocka_unit_test_setup_teardown(test_identity_map, guest_ram_setup, guest_ram_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
