/* conf64.c - conformance guest for the 64-bit boot protocol: built as conf-elf64 (plain ELF) and conf-bzimage. */
#include "bzimage.h"
#include "guest.h"

/*
 * What Linux's startup_64 relies on (Documentation/arch/x86/boot.rst,
 * "64-bit Boot Protocol", "Details of Header Fields", "The zero page"), read
 * from inside the guest; command-line parameters as for conf-pvh
 * (cpus=, mem_mib=, initrd_size=, initrd_sum=, acpi_off=). CONF_BZIMAGE selects the
 * bzImage checks: the setup header copied from our own image and a load
 * address honouring kernel_alignment.
 */
#ifndef CONF_BZIMAGE
#error "build with -DCONF_BZIMAGE=0 (conf-elf64) or 1 (conf-bzimage)"
#endif
#define NAME (CONF_BZIMAGE ? "conf-bzimage" : "conf-elf64")

#define CR0_PG	      (1ULL << 31)
#define CR4_PAE	      (1ULL << 5)
#define EFER_LMA      (1ULL << 10)
#define RFLAGS_IF     (1ULL << 9)
#define BOOT_CS	      0x10
#define BOOT_DS	      0x18
#define LEGACY_HOLE   (0x100000ULL - 0x9fc00ULL)
#define E820_MAX      128
#define E820_ENTRY_SZ 20

/* struct boot_params offsets (arch/x86/include/uapi/asm/bootparam.h). */
#define BP_ACPI_RSDP_ADDR    0x070
#define BP_EXT_RAMDISK_IMAGE 0x0c0
#define BP_EXT_RAMDISK_SIZE  0x0c4
#define BP_EXT_CMD_LINE_PTR  0x0c8
#define BP_E820_ENTRIES	     0x1e8
#define BP_SETUP_SECTS	     0x1f1
#define BP_VID_MODE	     0x1fa
#define BP_BOOT_FLAG	     0x1fe
#define BP_HEADER	     0x202
#define BP_VERSION	     0x206
#define BP_TYPE_OF_LOADER    0x210
#define BP_LOADFLAGS	     0x211
#define BP_RAMDISK_IMAGE     0x218
#define BP_RAMDISK_SIZE	     0x21c
#define BP_CMD_LINE_PTR	     0x228
#define BP_INITRD_ADDR_MAX   0x22c
#define BP_KERNEL_ALIGNMENT  0x230
#define BP_RELOCATABLE	     0x234
#define BP_XLOADFLAGS	     0x236
#define BP_CMDLINE_SIZE	     0x238
#define BP_PREF_ADDRESS	     0x258
#define BP_E820_TABLE	     0x2d0

#if CONF_BZIMAGE
/* Start of the payload (guest64.ld.S); hidden, so it is reached RIP-relative, never through the GOT. */
extern const char _payload[] __attribute__((visibility("hidden")));
#define PAYLOAD ((uintptr_t)_payload)
#else
#define PAYLOAD ((uintptr_t)0)
#endif

static uint8_t u8(const uint8_t *bp, unsigned int off)
{
	return bp[off];
}

static uint16_t u16(const uint8_t *bp, unsigned int off)
{
	return (uint16_t)(bp[off] | bp[off + 1] << 8);
}

static uint32_t u32(const uint8_t *bp, unsigned int off)
{
	return (uint32_t)u16(bp, off) | (uint32_t)u16(bp, off + 2) << 16;
}

static uint64_t u64(const uint8_t *bp, unsigned int off)
{
	return (uint64_t)u32(bp, off) | (uint64_t)u32(bp, off + 4) << 32;
}

static void check_registers(const struct guest_entry_state *es)
{
	conf_check(es->mode == 64, "entry_mode", "%llu-bit entry", (unsigned long long)es->mode);
	conf_check((es->efer & EFER_LMA) && (es->cr0 & CR0_PG) && (es->cr4 & CR4_PAE), "long_mode_paging",
		   "efer 0x%llx cr0 0x%llx cr4 0x%llx", (unsigned long long)es->efer, (unsigned long long)es->cr0,
		   (unsigned long long)es->cr4);
	conf_check(!(es->rflags & RFLAGS_IF), "rflags_if_clear", "rflags 0x%llx", (unsigned long long)es->rflags);
	conf_check(es->cs == BOOT_CS, "cs_boot_cs", "0x%x", es->cs);
	conf_check(es->ds == BOOT_DS && es->es == BOOT_DS && es->ss == BOOT_DS, "ds_es_ss_boot_ds",
		   "ds 0x%x es 0x%x ss 0x%x", es->ds, es->es, es->ss);
	conf_check_segment(es, "cs_64bit_code", es->cs, CONF_SEG_CODE64);
	conf_check_segment(es, "ds_flat_data", es->ds, CONF_SEG_DATA);
}

static void check_header(const uint8_t *bp)
{
	conf_check(u16(bp, BP_BOOT_FLAG) == 0xaa55 && !memcmp(bp + BP_HEADER, "HdrS", 4), "setup_header_magic",
		   "boot_flag 0x%x header %c%c%c%c", u16(bp, BP_BOOT_FLAG), bp[BP_HEADER], bp[BP_HEADER + 1],
		   bp[BP_HEADER + 2], bp[BP_HEADER + 3]);
	conf_check(u16(bp, BP_VERSION) >= 0x020c, "setup_header_version", "0x%x", u16(bp, BP_VERSION));
	conf_check(u8(bp, BP_TYPE_OF_LOADER) == 0xff, "type_of_loader", "0x%x", u8(bp, BP_TYPE_OF_LOADER));
	gprintf("%s: vid_mode 0x%x loadflags 0x%x\n", NAME, u16(bp, BP_VID_MODE), u8(bp, BP_LOADFLAGS));
	if (!CONF_BZIMAGE)
		return;
	conf_check(u8(bp, BP_SETUP_SECTS) == BZ_SETUP_SECTS && u16(bp, BP_VERSION) == BZ_VERSION &&
		       u32(bp, BP_KERNEL_ALIGNMENT) == BZ_KERNEL_ALIGNMENT && u8(bp, BP_RELOCATABLE) == 1 &&
		       u16(bp, BP_XLOADFLAGS) == BZ_XLOADFLAGS && u32(bp, BP_CMDLINE_SIZE) == BZ_CMDLINE_SIZE &&
		       u64(bp, BP_PREF_ADDRESS) == BZ_PREF_ADDRESS && u32(bp, BP_INITRD_ADDR_MAX) == BZ_INITRD_ADDR_MAX,
		   "setup_header_copied", "setup_sects %u version 0x%x align 0x%x reloc %u xlf 0x%x cmdline_size %u",
		   u8(bp, BP_SETUP_SECTS), u16(bp, BP_VERSION), u32(bp, BP_KERNEL_ALIGNMENT), u8(bp, BP_RELOCATABLE),
		   u16(bp, BP_XLOADFLAGS), u32(bp, BP_CMDLINE_SIZE));
	conf_check(u8(bp, BP_LOADFLAGS) & 1, "loadflags_loaded_high", "0x%x", u8(bp, BP_LOADFLAGS));
	conf_check((PAYLOAD & (BZ_KERNEL_ALIGNMENT - 1)) == 0 && PAYLOAD >= 0x100000, "load_address_aligned",
		   "payload at 0x%llx", (unsigned long long)PAYLOAD);
}

static const char *check_cmdline(const uint8_t *bp)
{
	uint64_t ptr = u32(bp, BP_CMD_LINE_PTR) | (uint64_t)u32(bp, BP_EXT_CMD_LINE_PTR) << 32;
	const char *cmdline = (const char *)(uintptr_t)ptr;
	size_t len;

	conf_check(ptr != 0 && ptr < 0x100000000ULL, "cmd_line_ptr", "0x%llx", (unsigned long long)ptr);
	if (!ptr || ptr >= 0x100000000ULL)
		return "";
	len = strlen(cmdline);
	gprintf("%s: cmdline [%s] len %u\n", NAME, cmdline, (unsigned int)len);
	if (CONF_BZIMAGE)
		conf_check(len <= BZ_CMDLINE_SIZE, "cmdline_within_cmdline_size", "%u", (unsigned int)len);
	return cmdline;
}

static void check_e820(const uint8_t *bp, const char *cmdline)
{
	struct memmap_view v[E820_MAX];
	unsigned int n = u8(bp, BP_E820_ENTRIES);
	uint64_t mib = 0;

	conf_check(n > 0 && n <= E820_MAX, "e820_entries", "%u", n);
	if (n > E820_MAX)
		n = E820_MAX;
	for (unsigned int i = 0; i < n; i++) {
		unsigned int off = BP_E820_TABLE + i * E820_ENTRY_SZ;

		v[i] = (struct memmap_view){.addr = u64(bp, off), .size = u64(bp, off + 8), .type = u32(bp, off + 16)};
	}
	if (cmdline_get_u64(cmdline, "mem_mib", &mib)) {
		conf_check(0, "memmap_ram_total", "mem_mib= missing from the command line");
		return;
	}
	conf_check_memmap(v, n, (mib << 20) - LEGACY_HOLE);
}

void guest_main64(uint8_t *bp)
{
	const struct guest_entry_state *es = &guest_entry_state;
	const char *cmdline;
	uint64_t cpus = 0;

	serial_init();
	conf_begin(NAME);
	check_registers(es);
	conf_check(bp != 0 && (uintptr_t)bp == es->boot_info, "rsi_boot_params", "0x%llx",
		   (unsigned long long)es->boot_info);
	if (!bp)
		conf_end();
	check_header(bp);
	cmdline = check_cmdline(bp);
	check_e820(bp, cmdline);
	conf_check_initrd(cmdline, u32(bp, BP_RAMDISK_IMAGE) | (uint64_t)u32(bp, BP_EXT_RAMDISK_IMAGE) << 32,
			  u32(bp, BP_RAMDISK_SIZE) | (uint64_t)u32(bp, BP_EXT_RAMDISK_SIZE) << 32);
	conf_check_rsdp(cmdline, u64(bp, BP_ACPI_RSDP_ADDR));
	if (cmdline_get_u64(cmdline, "cpus", &cpus))
		conf_check(0, "mptable_cpus", "cpus= missing from the command line");
	else
		conf_check_mptable((unsigned int)cpus);
	conf_end();
}
