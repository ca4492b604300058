/* kernel.h - the kernel to boot: format detection by content, validation, loading, and its default command line. */
#ifndef BRISK_KERNEL_H
#define BRISK_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "brisk/boot.h"

struct gmem;

/*
 * The default command line for a Linux kernel (docs/boot.md explains each
 * option): KERNEL_LINUX_CMDLINE, then a word for each mode. With ACPI (the
 * default) KERNEL_LINUX_ACPI: the kernel powers off through the FADT's
 * sleep control register and reboots through its reset register (without a
 * reboot= word, x86 Linux on a hardware-reduced ACPI machine tries EFI and
 * then a jump to the BIOS reset vector, which hangs a machine with no
 * firmware); the i8042 driver takes its ports and IRQ 1 from the DSDT (on a
 * hardware-reduced machine Linux maps no legacy IRQ it is not told about, so
 * i8042.nopnp there fails its request_irq(1) with -EINVAL). With --acpi off
 * KERNEL_LINUX_NOACPI: the kernel finds CPUs in the MP table and virtio
 * devices in virtio_mmio.device= words, and reboots through the i8042. --cmdline replaces it entirely.
 */
#define KERNEL_LINUX_CMDLINE "console=ttyS0 panic=1 pci=off i8042.noaux i8042.nomux i8042.dumbkbd"
#define KERNEL_LINUX_ACPI    "reboot=acpi"
#define KERNEL_LINUX_NOACPI  "i8042.nopnp reboot=k acpi=off"
/* The default for any other kernel (brisk's test guests, unikernels). */
#define KERNEL_OTHER_CMDLINE "console=ttyS0"

enum kernel_format {
	KERNEL_NONE = 0,
	KERNEL_PVH,	/* ELF with XEN_ELFNOTE_PHYS32_ENTRY: 32-bit PVH entry */
	KERNEL_ELF64,	/* ELF64 without the PVH note: 64-bit entry at e_entry, RSI = boot_params */
	KERNEL_BZIMAGE, /* Linux bzImage: 64-bit boot protocol, entry at load address + 0x200 */
};

/*
 * What bzimage_parse learned from a validated setup header
 * (Documentation/arch/x86/boot.rst, "The Real-Mode Kernel Header").
 */
struct bzimage_info {
	uint16_t version;	   /* boot protocol, e.g. 0x020f */
	uint32_t hdr_len;	   /* setup header bytes from image offset 0x1f1: 0x202 + byte at 0x201 - 0x1f1 */
	uint32_t setup_size;	   /* (setup_sects + 1) * 512: file offset of the protected-mode part */
	uint64_t pm_size;	   /* bytes of the protected-mode part (the rest of the file), all loaded */
	uint32_t init_size;	   /* memory the kernel needs from its load address before it reads the map */
	uint32_t kernel_alignment; /* power of two */
	uint8_t relocatable;	   /* relocatable_kernel */
	uint64_t pref_address;	   /* 0 when the header leaves it 0 */
	uint32_t initrd_addr_max;  /* highest byte an initrd may occupy */
	uint32_t cmdline_size;	   /* longest command line, without its NUL */
	uint16_t xloadflags;
	uint64_t load_addr; /* where brisk loads the protected-mode part (see bzimage_parse) */
	uint64_t window;    /* bytes reserved from load_addr: max(init_size, pm_size), page-rounded */
};

/* The files to boot. Each of kernel/initrd is a path, or (path NULL) a borrowed buffer. */
struct kernel_files {
	const char *kernel;	    /* path; NULL: kernel_data/kernel_size */
	const uint8_t *kernel_data; /* in-memory image (the built-in demo guest, tests), borrowed */
	size_t kernel_size;
	const char *kernel_name;    /* for messages when in memory; NULL = "kernel image" */
	const char *initrd;	    /* path; NULL: initrd_data/initrd_size, or no initrd when that is NULL too */
	const uint8_t *initrd_data; /* borrowed */
	size_t initrd_size;
};

/* An opened, validated kernel (and initrd). */
struct kernel {
	enum kernel_format format;
	int is_linux;	/* a bzImage, or an ELF with a "Linux" note: gets KERNEL_LINUX_CMDLINE */
	char name[128]; /* path or kernel_name, for messages */
	char initrd_name[128];
	struct image image;	/* the kernel bytes (mapped when opened from a path) */
	struct image initrd;	/* size 0: no initrd */
	struct elf_info elf;	/* KERNEL_PVH, KERNEL_ELF64 */
	uint64_t entry64;	/* KERNEL_ELF64: the 64-bit entry (physical) */
	struct bzimage_info bz; /* KERNEL_BZIMAGE */
	/* Filled by kernel_load: */
	uint64_t kernel_start, kernel_end; /* guest range the kernel occupies (bzImage: the init_size window) */
	uint64_t initrd_addr;		   /* 0 when there is no initrd */
	/* Set by the caller before kernel_load: */
	uint64_t rsdp_addr; /* the ACPI RSDP the boot structures point at (zero page, PVH start info), or 0 */
};

/*
 * Opens (maps read-only) or adopts the kernel and optional initrd in `f`,
 * detects the kernel's format by content (bzImage: "HdrS" at 0x202; ELF:
 * \x7fELF) and validates every header, all without guest memory, so a bad
 * image fails before /dev/kvm is opened. An empty initrd is refused.
 * Returns 0, or -errno with `err` naming the file, the field and the values
 * (nothing stays open on failure). Call kernel_close in either case.
 */
__attribute__((warn_unused_result)) int kernel_open(struct kernel *k, const struct kernel_files *f, char *err,
						    size_t errlen);

/*
 * Loads the kernel (and initrd) into guest RAM and builds the boot
 * structures its format needs (boot_params or hvm_start_info, command
 * line, memory map, GDT, identity page tables for 64-bit entry); fills
 * `entry`. `cmdline` NULL means kernel_default_cmdline(k). Every size check
 * (kernel and initrd against RAM, command line against the kernel's limit)
 * happens before the first byte is written. Returns 0, or -EINVAL/-E2BIG/
 * -ENOMEM with `err` filled.
 */
__attribute__((warn_unused_result)) int kernel_load(struct kernel *k, const struct gmem *mem, const char *cmdline,
						    struct boot_entry *entry, char *err, size_t errlen);

/* Unmaps what kernel_open mapped (the bytes are in guest RAM after kernel_load). Idempotent. */
void kernel_close(struct kernel *k);

/* KERNEL_LINUX_CMDLINE for a Linux kernel, KERNEL_OTHER_CMDLINE otherwise. */
const char *kernel_default_cmdline(const struct kernel *k);

/* "bzImage", "PVH ELF", "ELF (64-bit entry)": for logs. */
const char *kernel_format_name(enum kernel_format f);

#endif
