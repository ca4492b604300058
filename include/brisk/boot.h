/* boot.h - kernel images: reading, ELF validation and loading, PVH start info, memory map, entry state. */
#ifndef BRISK_BOOT_H
#define BRISK_BOOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct gmem;

#define BOOT_ERR_MAX   256
#define BOOT_IMAGE_MAX (1ULL << 30) /* refuse kernel files above 1 GiB */

/*
 * A kernel or initrd file, mapped read-only for its parsers (which touch only its headers and notes), its bulk
 * copied into guest RAM by image_copy; or a borrowed buffer (mapped 0: the built-in guest, unit tests).
 */
struct image {
	const uint8_t *data;
	size_t size;
	int mapped;	/* 1: munmap and close(fd) on image_close */
	int fd;		/* the file, open while mapped (image_copy reads it); meaningless unless mapped */
	struct stat st; /* the file's, when mapped (an output file must not be this one) */
};

/* Maps `path` read-only and keeps it open. Returns 0 or -errno with `err` filled. */
__attribute__((warn_unused_result)) int image_open(struct image *img, const char *path, char *err, size_t errlen);
void image_close(struct image *img);

/*
 * Copies image bytes [off, off+len) to guest RAM [gpa, gpa+len) and marks them dirty. A file is read with
 * pread(2) straight into guest RAM: one copy and no page fault on the mapping (Debian's 63 MB vmlinux: 8.5 ms
 * against 34 ms for memcpy from the mapping, docs/performance.md "Loading the kernel"), and a file shortened
 * since it was opened is an error, not a SIGBUS. A borrowed buffer is copied. Returns 0; -EFAULT when the range
 * is outside the image or guest RAM (nothing written); -EIO when the file ended early; -errno of pread.
 */
__attribute__((warn_unused_result)) int image_copy(const struct image *img, uint64_t off, uint64_t len,
						   const struct gmem *mem, uint64_t gpa);

#define ELF_MAX_SEGMENTS 16

struct elf_segment {
	uint64_t paddr;
	uint64_t offset;
	uint64_t filesz;
	uint64_t memsz;
};

/* What elf_parse learned from a validated ELF image. */
struct elf_info {
	int elf_class;	/* 32 or 64 */
	uint64_t entry; /* e_entry */
	int has_pvh;	/* XEN_ELFNOTE_PHYS32_ENTRY found */
	uint64_t pvh_entry;
	unsigned nr_segments; /* PT_LOAD segments with memsz > 0 */
	struct elf_segment seg[ELF_MAX_SEGMENTS];
	uint64_t lowest;  /* lowest paddr of any segment */
	uint64_t highest; /* end (exclusive) of the highest segment */
};

/*
 * Validates an ELF kernel image without touching guest memory: header,
 * program headers within the file, segment file ranges, overflow-safe
 * address arithmetic, overlapping segments, notes. Returns 0, or -EINVAL
 * (-ENOEXEC when it is not ELF at all) with `err` naming the problem.
 */
__attribute__((warn_unused_result)) int elf_parse(const uint8_t *img, size_t size, struct elf_info *out, char *err,
						  size_t errlen);

/*
 * Copies the segments of `img` (the image elf_parse validated) into guest
 * RAM through image_copy (zero-filling memsz beyond filesz). Refuses
 * segments outside RAM or below LAYOUT_HIGH_RAM (the boot structures)
 * before copying any. Returns 0, or -EINVAL / image_copy's error with
 * `err` filled.
 */
__attribute__((warn_unused_result)) int elf_load(const struct elf_info *info, const struct image *img,
						 const struct gmem *mem, char *err, size_t errlen);

/* Memory map entry types (E820 / hvm_memmap_table_entry use the same values). */
enum { MEMMAP_RAM = 1, MEMMAP_RESERVED = 2 };

struct memmap_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type;
};

#define MEMMAP_MAX 16

/*
 * The guest memory map (used by both PVH and the zero page): low RAM below
 * the EBDA, reserved legacy area, RAM from 1 MiB to the hole, RAM above
 * 4 GiB. Sorted, non-overlapping. Returns the number of entries.
 */
unsigned memmap_build(const struct gmem *mem, struct memmap_entry *out, unsigned max);

enum boot_mode {
	BOOT_PVH32 = 0, /* 32-bit flat protected mode, paging off, EBX = start info */
	BOOT_LONG64,	/* 64-bit long mode, identity paging, RSI = boot_params */
};

/* Where and how the boot vCPU enters the kernel. */
struct boot_entry {
	enum boot_mode mode;
	uint64_t rip;
	uint64_t boot_info; /* EBX (PVH) or RSI (64-bit) */
};

/*
 * PVH boot (xen/include/public/arch-x86/hvm/start_info.h, version 1):
 * writes the command line, memory map and hvm_start_info, the boot GDT,
 * and fills `entry`. Returns 0 or -EINVAL/-E2BIG with `err` filled.
 */
__attribute__((warn_unused_result)) int pvh_setup(const struct gmem *mem, const struct elf_info *info,
						  const char *cmdline, struct boot_entry *entry, char *err,
						  size_t errlen);

/*
 * Sets the boot vCPU's registers for `entry` (KVM_SET_SREGS, KVM_SET_REGS;
 * segment state as the boot protocol requires). Returns 0, or -errno with
 * `err` naming the call that failed and why.
 */
__attribute__((warn_unused_result)) int x86_vcpu_set_entry(int vcpu_fd, const struct boot_entry *entry, char *err,
							   size_t errlen);

/*
 * Identity-maps guest-physical 0..4 GiB with 2 MiB pages in the boot page
 * tables at LAYOUT_PML4/LAYOUT_PDPT/LAYOUT_PD (SDM Vol. 3A 4.5), for
 * BOOT_LONG64 entry (CR3 = LAYOUT_PML4). Call once per VM before
 * x86_vcpu_set_entry. Returns 0 or -EFAULT (RAM does not cover the tables).
 */
__attribute__((warn_unused_result)) int x86_build_identity_map(const struct gmem *mem);

#endif
