/* zeropage.c - struct boot_params (the Linux "zero page") and the 64-bit entry state, for bzImage and plain ELF. */
#include <asm/bootparam.h>
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "brisk/boot.h"
#include "brisk/layout.h"
#include "brisk/log.h"
#include "brisk/mem.h"
#include "x86_boot.h"

/*
 * The layout is the kernel's own UAPI header (<asm/bootparam.h>, from
 * linux-libc-dev); these pin the offsets boot.rst and zero-page.rst give,
 * so a different header version cannot move them silently.
 */
_Static_assert(sizeof(struct boot_params) == 4096, "boot_params is one page");
_Static_assert(sizeof(struct boot_params) <= LAYOUT_ZERO_PAGE_SIZE, "boot_params fits its slot");
_Static_assert(offsetof(struct boot_params, hdr) == BZ_HDR_OFF, "setup header at 0x1f1");
_Static_assert(offsetof(struct boot_params, ext_ramdisk_image) == 0x0c0, "ext_ramdisk_image at 0x0c0");
_Static_assert(offsetof(struct boot_params, acpi_rsdp_addr) == 0x070, "acpi_rsdp_addr at 0x070");
_Static_assert(offsetof(struct boot_params, ext_cmd_line_ptr) == 0x0c8, "ext_cmd_line_ptr at 0x0c8");
_Static_assert(offsetof(struct boot_params, e820_entries) == 0x1e8, "e820_entries at 0x1e8");
_Static_assert(offsetof(struct boot_params, e820_table) == 0x2d0, "e820_table at 0x2d0");
_Static_assert(offsetof(struct boot_params, hdr.boot_flag) == BZ_BOOT_FLAG, "boot_flag at 0x1fe");
_Static_assert(offsetof(struct boot_params, hdr.header) == BZ_MAGIC_OFF, "header at 0x202");
_Static_assert(offsetof(struct boot_params, hdr.init_size) == 0x260, "init_size at 0x260");
_Static_assert(MEMMAP_MAX <= E820_MAX_ENTRIES_ZEROPAGE, "the whole map fits the zero page");
_Static_assert(LAYOUT_CMDLINE + LAYOUT_CMDLINE_MAX <= 0xa0000, "boot.rst: command line below 0xA0000");

#define BZ_PROTO_PLAIN_ELF  0x020c     /* the version brisk claims in a synthesised header */
#define BZ_ALIGN_PLAIN_ELF  0x1000000u /* Firecracker's KERNEL_MIN_ALIGNMENT_BYTES */
#define BZ_VID_NORMAL	    0xffff     /* boot.rst "Special Command Line Options": vga=normal */
#define BZ_LOADER_UNDEF	    0xff       /* boot.rst type_of_loader: "0xFF = undefined" */
#define BZ_HEAP_END	    0xe000     /* boot.rst "Sample Boot Configuration" heap_end */
#define BZ_PROTO_SETUP_DATA 0x0209     /* boot.rst: setup_data "Protocol: 2.09+" */
#define RNG_SEED_BYTES	    64	       /* credits 512 bits: above the 256 the CRNG needs (random.c POOL_READY_BITS) */

/* One setup_data entry with the seed (boot.rst "Details of Header Fields", setup_data; SETUP_RNG_SEED = 9). */
struct rng_seed_entry {
	struct setup_data hdr;
	uint8_t seed[RNG_SEED_BYTES];
};
_Static_assert(sizeof(struct rng_seed_entry) <= LAYOUT_SETUP_DATA_SIZE, "the seed entry fits its slot");

/* The setup header: the image's own, or the fields Firecracker writes for a plain vmlinux. */
static void fill_header(struct boot_params *bp, const struct zeropage *zp)
{
	struct setup_header *h = &bp->hdr;

	if (zp->setup_hdr) {
		size_t n = zp->setup_hdr_len;

		if (n > sizeof(*bp) - BZ_HDR_OFF)
			n = sizeof(*bp) - BZ_HDR_OFF;
		memcpy((uint8_t *)bp + BZ_HDR_OFF, zp->setup_hdr, n);
		h->code32_start = (uint32_t)zp->code32_start; /* boot.rst code32_start: "(reloc)" */
		return;
	}
	h->boot_flag = 0xaa55;
	h->header = BZ_HDR_MAGIC;
	h->version = BZ_PROTO_PLAIN_ELF;
	h->kernel_alignment = BZ_ALIGN_PLAIN_ELF;
	h->cmdline_size = zp->cmdline_len;
}

/*
 * The fields boot.rst marks "write (obligatory)" or "modify (obligatory)":
 * vid_mode, type_of_loader, loadflags (CAN_USE_HEAP with heap_end_ptr;
 * never used by the 64-bit entry but obligatory for 2.01+), cmd_line_ptr,
 * ramdisk_image/size; plus their ext_* high halves (zero-page.rst).
 */
static void fill_loader_fields(struct boot_params *bp, const struct zeropage *zp)
{
	struct setup_header *h = &bp->hdr;

	h->vid_mode = BZ_VID_NORMAL;
	h->type_of_loader = BZ_LOADER_UNDEF;
	h->loadflags |= CAN_USE_HEAP;
	h->heap_end_ptr = BZ_HEAP_END - 0x200;
	h->cmd_line_ptr = (uint32_t)LAYOUT_CMDLINE;
	bp->ext_cmd_line_ptr = (uint32_t)((uint64_t)LAYOUT_CMDLINE >> 32);
	h->ramdisk_image = (uint32_t)zp->initrd_addr;
	h->ramdisk_size = (uint32_t)zp->initrd_size;
	bp->ext_ramdisk_image = (uint32_t)(zp->initrd_addr >> 32);
	bp->ext_ramdisk_size = (uint32_t)(zp->initrd_size >> 32);
	h->hardware_subarch = X86_SUBARCH_PC;
	h->setup_data = 0;		    /* set by write_rng_seed when there is a seed */
	bp->acpi_rsdp_addr = zp->rsdp_addr; /* 0: Linux scans 0xe0000-0xfffff itself */
}

/*
 * A SETUP_RNG_SEED entry with fresh host bytes (getrandom(2)) for every
 * boot, as QEMU and EFI stubs pass one: Linux mixes it into the input pool
 * in setup_arch (parse_setup_data -> add_bootloader_randomness), credits it
 * when it trusts the boot loader (CONFIG_RANDOM_TRUST_BOOTLOADER, Debian:
 * y; random.trust_bootloader=off says no) and then zeroes it in guest
 * memory. So the CRNG is ready before init without a virtio-rng device.
 * Kernels before protocol 2.09 have no setup_data field: none is passed.
 * Returns 0, or -errno when the host has no getrandom or guest RAM lacks
 * the slot (the boot then goes on without a seed; the caller logs it).
 */
static int write_rng_seed(const struct gmem *mem, struct boot_params *bp)
{
	struct rng_seed_entry e = {.hdr = {.next = 0, .type = SETUP_RNG_SEED, .len = RNG_SEED_BYTES}};

	if (bp->hdr.version < BZ_PROTO_SETUP_DATA)
		return 0;
	if (getrandom(e.seed, sizeof(e.seed), 0) != (ssize_t)sizeof(e.seed))
		return errno ? -errno : -EIO;
	if (gmem_write(mem, LAYOUT_SETUP_DATA, &e, sizeof(e)))
		return -EFAULT;
	explicit_bzero(e.seed, sizeof(e.seed));
	bp->hdr.setup_data = LAYOUT_SETUP_DATA;
	return 0;
}

/* E820 from the one memory-map builder (zero-page.rst: e820_entries at 0x1e8, e820_table at 0x2d0). */
static void fill_e820(struct boot_params *bp, const struct gmem *mem)
{
	struct memmap_entry map[MEMMAP_MAX];
	unsigned n = memmap_build(mem, map, MEMMAP_MAX);

	for (unsigned i = 0; i < n; i++) {
		bp->e820_table[i].addr = map[i].addr;
		bp->e820_table[i].size = map[i].size;
		bp->e820_table[i].type = map[i].type;
	}
	bp->e820_entries = (uint8_t)n;
}

int zeropage_write(const struct gmem *mem, const struct zeropage *zp)
{
	struct boot_params bp;
	int ret;

	memset(&bp, 0, sizeof(bp)); /* boot.rst: "allocated and initialized to all zero" */
	fill_header(&bp, zp);
	fill_loader_fields(&bp, zp);
	fill_e820(&bp, mem);
	ret = write_rng_seed(mem, &bp);
	if (ret)
		log_warn("no boot-loader RNG seed for the kernel (setup_data at 0x%lx): %s", LAYOUT_SETUP_DATA,
			 strerror(-ret));
	return gmem_write(mem, LAYOUT_ZERO_PAGE, &bp, sizeof(bp));
}

int boot64_setup(const struct gmem *mem, const struct zeropage *zp, const char *cmdline, uint64_t rip,
		 struct boot_entry *entry, char *err, size_t errlen)
{
	int ret = x86_write_cmdline(mem, cmdline, err, errlen);

	if (ret)
		return ret;
	if (zeropage_write(mem, zp) || x86_write_gdt(mem, BOOT_LONG64) || x86_build_identity_map(mem))
		return boot_fail(err, errlen, -EINVAL,
				 "guest RAM (%llu bytes) does not cover the boot structures below 1 MiB",
				 (unsigned long long)mem->size);
	*entry = (struct boot_entry){.mode = BOOT_LONG64, .rip = rip, .boot_info = LAYOUT_ZERO_PAGE};
	return 0;
}
