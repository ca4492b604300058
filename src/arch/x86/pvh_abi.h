/* pvh_abi.h - the PVH boot ABI's in-memory structures (Xen start_info.h, version 1). */
#ifndef BRISK_X86_PVH_ABI_H
#define BRISK_X86_PVH_ABI_H

#include <stdint.h>

/*
 * Layouts from xen/include/public/arch-x86/hvm/start_info.h (mirrored in
 * Linux's include/xen/interface/hvm/start_info.h). Linux's header is not a
 * userspace header, so brisk carries its own copy; the _Static_asserts pin
 * the offsets the ABI comment in that header documents.
 */
#define XEN_HVM_START_MAGIC_VALUE 0x336ec578u
#define XEN_HVM_START_VERSION	  1u

/* Xen ELF note name and type of the 32-bit PVH entry (xen/interface/elfnote.h). */
#define XEN_ELFNOTE_NAME	 "Xen"
#define XEN_ELFNOTE_PHYS32_ENTRY 18u

struct hvm_start_info {
	uint32_t magic;		 /* XEN_HVM_START_MAGIC_VALUE */
	uint32_t version;	 /* 1: memmap fields present */
	uint32_t flags;		 /* SIF_xxx; brisk sets none */
	uint32_t nr_modules;	 /* entries at modlist_paddr */
	uint64_t modlist_paddr;	 /* struct hvm_modlist_entry[nr_modules] */
	uint64_t cmdline_paddr;	 /* NUL-terminated ASCII */
	uint64_t rsdp_paddr;	 /* ACPI RSDP; 0 = none */
	uint64_t memmap_paddr;	 /* struct hvm_memmap_table_entry[memmap_entries] */
	uint32_t memmap_entries; /* 0 = no map provided */
	uint32_t reserved;	 /* must be zero */
} __attribute__((packed));

struct hvm_modlist_entry {
	uint64_t paddr;
	uint64_t size;
	uint64_t cmdline_paddr;
	uint64_t reserved;
} __attribute__((packed));

struct hvm_memmap_table_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type; /* XEN_HVM_MEMMAP_TYPE_*: the E820/ACPI values, as MEMMAP_RAM/RESERVED */
	uint32_t reserved;
} __attribute__((packed));

_Static_assert(sizeof(struct hvm_start_info) == 56, "hvm_start_info v1 is 56 bytes");
_Static_assert(__builtin_offsetof(struct hvm_start_info, memmap_paddr) == 40, "memmap_paddr at 40");
_Static_assert(sizeof(struct hvm_modlist_entry) == 32, "hvm_modlist_entry is 32 bytes");
_Static_assert(sizeof(struct hvm_memmap_table_entry) == 24, "hvm_memmap_table_entry is 24 bytes");

#endif
