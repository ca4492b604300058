/* bzimage.c - Linux bzImage via the 64-bit boot protocol: setup header validation, placement, loading. */
#include <asm/bootparam.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "brisk/boot.h"
#include "brisk/kernel.h"
#include "brisk/layout.h"
#include "brisk/mem.h"
#include "x86_boot.h"

/*
 * Reference: Linux Documentation/arch/x86/boot.rst (cited by section).
 * The image is host input (docs/security.md case 18): every field is checked
 * against the file and against sane bounds before it is used, and the
 * header is copied out with memcpy (the image need not be aligned).
 */
#define BZ_MIN_VERSION	0x020c	    /* 2.12: first with xloadflags, so XLF_KERNEL_64 is knowable */
#define BZ_HDR_END_MIN	0x268u	    /* a 2.12 header runs through handover_offset (0x264/4) */
#define BZ_HDR_END_MAX	0x290u	    /* boot_params' header slot ends where edd_mbr_sig_buffer starts */
#define BZ_SETUP_MAX	0x8000u	    /* "The real-mode code can total up to 32K" */
#define BZ_ALIGN_MIN	0x1000u	    /* a page; x86-64 kernels use 2 MiB (CONFIG_PHYSICAL_ALIGN) */
#define BZ_ALIGN_MAX	0x40000000u /* 1 GiB: anything larger is absurd */
#define BZ_DEFAULT_LOAD 0x100000ULL /* "Loading the Rest of the Kernel": bzImage at 0x100000 */
#define BZ_64BIT_ENTRY	0x200u	    /* "64-bit Boot Protocol": entry at load address + 0x200 */
#define PAGE		0x1000ULL

typedef unsigned long long ull;

/*
 * The setup header as far as it goes: its own length (0x202 + the byte at
 * 0x201, "64-bit Boot Protocol") and the file's; later fields read as zero.
 */
static void read_header(const uint8_t *img, size_t size, struct setup_header *h)
{
	size_t n = BZ_MAGIC_OFF + img[BZ_JUMP + 1] - BZ_HDR_OFF;

	if (n > size - BZ_HDR_OFF)
		n = size - BZ_HDR_OFF;
	if (n > sizeof(*h))
		n = sizeof(*h);
	memset(h, 0, sizeof(*h));
	memcpy(h, img + BZ_HDR_OFF, n);
}

/* boot_flag, version, the header's own length, and that the image holds all of it. */
static int check_ident(const uint8_t *img, size_t size, const struct setup_header *h, struct bzimage_info *out,
		       char *err, size_t errlen)
{
	uint32_t end = BZ_MAGIC_OFF + img[BZ_JUMP + 1];

	/* The header's extent first: in a truncated file the fields past its end read as zero. */
	if (img[BZ_JUMP] != 0xeb || end < BZ_HDR_END_MIN || end > BZ_HDR_END_MAX)
		return boot_fail(err, errlen, -EINVAL,
				 "bzImage setup header: jump 0x%02x 0x%02x at 0x200 puts the header's end at 0x%x; "
				 "want 0xeb and an end in 0x%x..0x%x",
				 img[BZ_JUMP], img[BZ_JUMP + 1], end, BZ_HDR_END_MIN, BZ_HDR_END_MAX);
	if (size < end)
		return boot_fail(err, errlen, -EINVAL,
				 "truncated bzImage: the setup header ends at 0x%x, the file has 0x%zx bytes", end,
				 size);
	if (h->boot_flag != 0xaa55)
		return boot_fail(err, errlen, -EINVAL, "bzImage setup header: boot_flag 0x%04x at 0x1fe, want 0xaa55",
				 h->boot_flag);
	if (h->version < BZ_MIN_VERSION)
		return boot_fail(err, errlen, -EINVAL,
				 "bzImage setup header: version 0x%04x (boot protocol %u.%02u) is older than 2.12, "
				 "the first with a 64-bit entry (xloadflags)",
				 h->version, h->version >> 8, h->version & 0xff);
	out->version = h->version;
	out->hdr_len = end - BZ_HDR_OFF;
	return 0;
}

/* A 64-bit bzImage: LOADED_HIGH ("Loading the Rest of the Kernel") and XLF_KERNEL_64 (xloadflags). */
static int check_flags(const struct setup_header *h, char *err, size_t errlen)
{
	if (!(h->loadflags & LOADED_HIGH))
		return boot_fail(err, errlen, -EINVAL,
				 "bzImage setup header: loadflags 0x%02x lacks LOADED_HIGH (bit 0): a zImage, not a "
				 "bzImage",
				 h->loadflags);
	if (!(h->xloadflags & XLF_KERNEL_64))
		return boot_fail(err, errlen, -EINVAL,
				 "bzImage setup header: xloadflags 0x%04x lacks XLF_KERNEL_64 (bit 0): no 64-bit entry "
				 "point at 0x200 (a 32-bit kernel?)",
				 h->xloadflags);
	return 0;
}

/* setup_sects, syssize and init_size against the file ("The Real-Mode Kernel Header"). */
static int check_sizes(const struct setup_header *h, size_t size, struct bzimage_info *out, char *err, size_t errlen)
{
	uint32_t sects = h->setup_sects ? h->setup_sects : 4; /* "if this field is 0, the real value is 4" */
	uint32_t setup = (sects + 1) * 512;
	uint64_t sys = (uint64_t)h->syssize * 16;

	if (setup > BZ_SETUP_MAX)
		return boot_fail(err, errlen, -EINVAL,
				 "bzImage setup header: setup_sects %u means %u bytes of real-mode code; boot.rst "
				 "allows at most 32 KiB",
				 h->setup_sects, setup);
	if (setup >= size)
		return boot_fail(err, errlen, -EINVAL,
				 "truncated bzImage: setup_sects %u puts the protected-mode part at 0x%x, the file "
				 "has only 0x%zx bytes",
				 h->setup_sects, setup, size);
	out->setup_size = setup;
	out->pm_size = size - setup;
	if (sys == 0 || sys > out->pm_size)
		return boot_fail(err, errlen, -EINVAL,
				 "bzImage setup header: syssize 0x%x (0x%llx bytes) does not match the 0x%llx bytes "
				 "of protected-mode code in the file (truncated image?)",
				 h->syssize, (ull)sys, (ull)out->pm_size);
	if (h->init_size < sys)
		return boot_fail(err, errlen, -EINVAL,
				 "bzImage setup header: init_size 0x%x is smaller than the protected-mode code "
				 "(syssize * 16 = 0x%llx)",
				 h->init_size, (ull)sys);
	out->init_size = h->init_size;
	return 0;
}

/*
 * Where the protected-mode part goes. boot.rst ("init_size") gives the
 * kernel's runtime start: a relocatable kernel loaded below pref_address
 * moves itself up to it, and aligns itself to kernel_alignment; a fixed one
 * runs at pref_address. So brisk loads exactly at that runtime start,
 * align_up(pref_address, kernel_alignment) (pref_address 0: 0x100000),
 * where the kernel decompresses in place inside its init_size window.
 */
static int choose_load(const struct setup_header *h, struct bzimage_info *out, char *err, size_t errlen)
{
	uint32_t a = h->kernel_alignment;
	uint64_t load = h->pref_address ? h->pref_address : BZ_DEFAULT_LOAD;

	if (a < BZ_ALIGN_MIN || a > BZ_ALIGN_MAX || (a & (a - 1)))
		return boot_fail(err, errlen, -EINVAL,
				 "bzImage setup header: kernel_alignment 0x%x is not a power of two in 0x%x..0x%x", a,
				 BZ_ALIGN_MIN, BZ_ALIGN_MAX);
	if (load < LAYOUT_HIGH_RAM || load >= LAYOUT_MMIO_HOLE)
		return boot_fail(err, errlen, -EINVAL,
				 "bzImage setup header: pref_address 0x%llx is outside [0x%lx, 0x%llx), where brisk "
				 "loads kernels",
				 (ull)h->pref_address, LAYOUT_HIGH_RAM, LAYOUT_MMIO_HOLE);
	if (h->relocatable_kernel)
		load = (load + a - 1) & ~(uint64_t)(a - 1);
	out->window = ((out->init_size > out->pm_size ? out->init_size : out->pm_size) + PAGE - 1) & ~(PAGE - 1);
	if (load & (PAGE - 1) || out->window > LAYOUT_MMIO_HOLE - load)
		return boot_fail(err, errlen, -EINVAL,
				 "bzImage: load address 0x%llx (pref_address) + init_size 0x%llx is unaligned or "
				 "reaches past the MMIO hole at 0x%llx",
				 (ull)load, (ull)out->window, LAYOUT_MMIO_HOLE);
	out->load_addr = load;
	out->kernel_alignment = a;
	out->relocatable = h->relocatable_kernel;
	out->pref_address = h->pref_address;
	return 0;
}

int bzimage_parse(const uint8_t *img, size_t size, struct bzimage_info *out, char *err, size_t errlen)
{
	struct setup_header h;
	uint32_t magic;

	memset(out, 0, sizeof(*out));
	if (!img || size < BZ_MAGIC_OFF + 4)
		return boot_fail(err, errlen, -ENOEXEC, "not a bzImage: %zu bytes, too short for a setup header",
				 img ? size : 0);
	memcpy(&magic, img + BZ_MAGIC_OFF, 4);
	if (magic != BZ_HDR_MAGIC)
		return boot_fail(err, errlen, -ENOEXEC, "not a bzImage: no \"HdrS\" at offset 0x202");
	read_header(img, size, &h);
	if (check_ident(img, size, &h, out, err, errlen) || check_flags(&h, err, errlen) ||
	    check_sizes(&h, size, out, err, errlen) || choose_load(&h, out, err, errlen))
		return -EINVAL;
	out->initrd_addr_max = h.initrd_addr_max;
	out->cmdline_size = h.cmdline_size;
	out->xloadflags = h.xloadflags;
	return 0;
}

/* The init_size window in RAM below the hole, and the command line within cmdline_size. */
static int check_fit(const struct kernel *k, const struct gmem *mem, const char *cmdline, char *err, size_t errlen)
{
	const struct bzimage_info *bz = &k->bz;
	size_t len = strlen(cmdline), max = bz->cmdline_size;

	if (bz->window > gmem_low_size(mem) || bz->load_addr > gmem_low_size(mem) - bz->window)
		return boot_fail(
		    err, errlen, -ENOMEM,
		    "guest RAM too small for the kernel: it needs [0x%llx, 0x%llx) (load address + "
		    "init_size, up to %llu MiB) but RAM below the MMIO hole ends at 0x%llx (--memory %llu MiB)",
		    (ull)bz->load_addr, (ull)(bz->load_addr + bz->window),
		    (ull)((bz->load_addr + bz->window + (1 << 20) - 1) >> 20), (ull)gmem_low_size(mem),
		    (ull)(mem->size >> 20));
	if (max > LAYOUT_CMDLINE_MAX - 1)
		max = LAYOUT_CMDLINE_MAX - 1; /* brisk's own slot at LAYOUT_CMDLINE */
	if (len > max)
		return boot_fail(err, errlen, -E2BIG,
				 "kernel command line is %zu bytes; this kernel accepts at most %zu (cmdline_size %u)",
				 len, max, bz->cmdline_size);
	return 0;
}

int bzimage_load(struct kernel *k, const struct gmem *mem, const char *cmdline, struct boot_entry *entry, char *err,
		 size_t errlen)
{
	const struct bzimage_info *bz = &k->bz;
	/* initrd_addr_max is the highest byte it may occupy: the limit is one past it. */
	uint64_t limit = (uint64_t)bz->initrd_addr_max + 1;
	struct zeropage zp;
	int ret;

	k->kernel_start = bz->load_addr;
	k->kernel_end = bz->load_addr + bz->window;
	ret = check_fit(k, mem, cmdline, err, errlen);
	if (!ret)
		ret = initrd_place(k, mem, limit, err, errlen);
	if (ret)
		return ret;
	ret = image_copy(&k->image, bz->setup_size, bz->pm_size, mem, bz->load_addr);
	if (ret)
		return boot_fail(err, errlen, ret, "copying the kernel into guest RAM failed: %s", strerror(-ret));
	ret = initrd_copy(k, mem);
	if (ret)
		return boot_fail(err, errlen, ret, "copying initrd %s into guest RAM failed: %s", k->initrd_name,
				 strerror(-ret));
	zp = (struct zeropage){
	    .setup_hdr = k->image.data + BZ_HDR_OFF,
	    .setup_hdr_len = bz->hdr_len,
	    .code32_start = bz->load_addr,
	    .initrd_addr = k->initrd_addr,
	    .initrd_size = k->initrd.size,
	    .rsdp_addr = k->rsdp_addr,
	};
	return boot64_setup(mem, &zp, cmdline, bz->load_addr + BZ_64BIT_ENTRY, entry, err, errlen);
}
