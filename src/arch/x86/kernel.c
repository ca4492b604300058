/* kernel.c - the one kernel entry point for vm.c: open, detect the format by content, validate, dispatch the load. */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "brisk/boot.h"
#include "brisk/kernel.h"
#include "brisk/layout.h"
#include "brisk/mem.h"
#include "x86_boot.h"

/*
 * Linux links vmlinux at __START_KERNEL_map + physical; its e_entry is
 * already physical (ENTRY(phys_startup_64), arch/x86/kernel/vmlinux.lds.S),
 * which is how Firecracker uses it. An ELF whose e_entry is the virtual
 * alias is translated back (arch/x86/include/asm/page_64_types.h).
 */
#define START_KERNEL_MAP 0xffffffff80000000ULL
#define LINUX_NOTE_NAME	 "Linux" /* LINUX_ELFNOTE_* (include/linux/elfnote.h), e.g. the build salt */
#define NOTE_MAX_WALK	 4096	 /* notes examined per image: vmlinux has about ten */

typedef unsigned long long ull;

const char *kernel_format_name(enum kernel_format f)
{
	switch (f) {
	case KERNEL_PVH:
		return "PVH ELF";
	case KERNEL_ELF64:
		return "ELF (64-bit entry)";
	case KERNEL_BZIMAGE:
		return "bzImage";
	default:
		return "none";
	}
}

const char *kernel_default_cmdline(const struct kernel *k)
{
	return k->is_linux ? KERNEL_LINUX_CMDLINE : KERNEL_OTHER_CMDLINE;
}

/* Walks one note segment's bytes [p, p+len) (gABI 5 "Note Section"); 1 when a note is named `name`. */
static int notes_have(const uint8_t *p, uint64_t len, uint64_t align, const char *name, unsigned *budget)
{
	const uint64_t a = align == 8 ? 8 : 4, nlen = strlen(name) + 1;
	uint64_t pos = 0;

	while (pos + sizeof(Elf32_Nhdr) <= len && *budget > 0) {
		Elf32_Nhdr nh;
		uint64_t desc_off;

		(*budget)--;
		memcpy(&nh, p + pos, sizeof(nh));
		desc_off = (sizeof(nh) + (uint64_t)nh.n_namesz + a - 1) & ~(a - 1);
		if (desc_off > len - pos || nh.n_descsz > len - pos - desc_off)
			return 0;
		if (nh.n_namesz == nlen && memcmp(p + pos + sizeof(nh), name, nlen) == 0)
			return 1;
		pos += (desc_off + nh.n_descsz + a - 1) & ~(a - 1);
	}
	return 0;
}

/* One program header of a validated ELF, as (type, offset, filesz, align). */
static void phdr_at(const uint8_t *img, int cls, uint64_t off, uint32_t *type, uint64_t *o, uint64_t *fs, uint64_t *al)
{
	if (cls == 64) {
		Elf64_Phdr p;

		memcpy(&p, img + off, sizeof(p));
		*type = p.p_type, *o = p.p_offset, *fs = p.p_filesz, *al = p.p_align;
	} else {
		Elf32_Phdr p;

		memcpy(&p, img + off, sizeof(p));
		*type = p.p_type, *o = p.p_offset, *fs = p.p_filesz, *al = p.p_align;
	}
}

/*
 * Whether an ELF that elf_parse accepted carries a "Linux" note: every
 * vmlinux does (init/version.c emits LINUX_ELFNOTE_BUILD_SALT), brisk's
 * test guests and unikernels do not. Bounds are rechecked here anyway.
 */
static int has_linux_note(const uint8_t *img, size_t size, int cls)
{
	uint64_t phoff, entsz = cls == 64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
	unsigned phnum, budget = NOTE_MAX_WALK;

	if (cls == 64) {
		Elf64_Ehdr e;

		memcpy(&e, img, sizeof(e));
		phoff = e.e_phoff, phnum = e.e_phnum;
	} else {
		Elf32_Ehdr e;

		memcpy(&e, img, sizeof(e));
		phoff = e.e_phoff, phnum = e.e_phnum;
	}
	for (unsigned i = 0; i < phnum; i++) {
		uint64_t at = phoff + i * entsz, off, len, align;
		uint32_t type;

		if (phoff > size || at > size || entsz > size - at)
			return 0;
		phdr_at(img, cls, at, &type, &off, &len, &align);
		if (type == PT_NOTE && off <= size && len <= size - off &&
		    notes_have(img + off, len, align, LINUX_NOTE_NAME, &budget))
			return 1;
	}
	return 0;
}

static int in_segment(const struct elf_info *e, uint64_t a)
{
	for (unsigned i = 0; i < e->nr_segments; i++)
		if (a >= e->seg[i].paddr && a - e->seg[i].paddr < e->seg[i].memsz)
			return 1;
	return 0;
}

/* An ELF without the PVH note: 64-bit, with an entry brisk loads (as Firecracker's load_kernel). */
static int check_elf64(struct kernel *k, char *err, size_t errlen)
{
	uint64_t e = k->elf.entry;

	if (k->elf.elf_class != 64)
		return boot_fail(err, errlen, -EINVAL,
				 "%s: ELF32 without a XEN_ELFNOTE_PHYS32_ENTRY (PVH) note: brisk enters other ELF "
				 "kernels in 64-bit mode only",
				 k->name);
	if (!in_segment(&k->elf, e) && e >= START_KERNEL_MAP && in_segment(&k->elf, e - START_KERNEL_MAP))
		e -= START_KERNEL_MAP;
	if (!in_segment(&k->elf, e))
		return boot_fail(err, errlen, -EINVAL,
				 "%s: ELF e_entry 0x%llx is not inside any PT_LOAD segment's physical range, and there "
				 "is no PVH note",
				 k->name, (ull)k->elf.entry);
	k->entry64 = e;
	k->format = KERNEL_ELF64;
	return 0;
}

/* By content: ELF magic, else the bzImage "HdrS" signature, else neither. */
static int detect(struct kernel *k, char *err, size_t errlen)
{
	const uint8_t *d = k->image.data;
	size_t n = k->image.size;
	char why[BOOT_ERR_MAX] = "";
	int ret;

	if (n >= SELFMAG && memcmp(d, ELFMAG, SELFMAG) == 0) {
		ret = elf_parse(d, n, &k->elf, why, sizeof(why));
		if (ret)
			return boot_fail(err, errlen, ret, "%s: %s", k->name, why);
		k->is_linux = has_linux_note(d, n, k->elf.elf_class);
		if (!k->elf.has_pvh)
			return check_elf64(k, err, errlen);
		k->format = KERNEL_PVH;
		return 0;
	}
	ret = bzimage_parse(d, n, &k->bz, why, sizeof(why));
	if (ret == -ENOEXEC)
		return boot_fail(err, errlen, -ENOEXEC,
				 "%s: not a kernel brisk can boot: neither ELF (no \\x7fELF magic) nor a bzImage "
				 "(no \"HdrS\" at offset 0x202)",
				 k->name);
	if (ret)
		return boot_fail(err, errlen, ret, "%s: %s", k->name, why);
	k->format = KERNEL_BZIMAGE;
	k->is_linux = 1;
	return 0;
}

/* The kernel bytes: a mapped file, or a borrowed buffer. */
static int open_image(struct kernel *k, const struct kernel_files *f, char *err, size_t errlen)
{
	if (f->kernel) {
		snprintf(k->name, sizeof(k->name), "%s", f->kernel);
		return image_open(&k->image, f->kernel, err, errlen);
	}
	snprintf(k->name, sizeof(k->name), "%s", f->kernel_name ? f->kernel_name : "kernel image");
	if (!f->kernel_data || !f->kernel_size)
		return boot_fail(err, errlen, -EINVAL, "%s: empty image", k->name);
	k->image = (struct image){.data = f->kernel_data, .size = f->kernel_size, .mapped = 0};
	return 0;
}

/* The initrd, if any: a mapped file, or a borrowed buffer. Zero bytes is refused: there is nothing to load. */
static int open_initrd(struct kernel *k, const struct kernel_files *f, char *err, size_t errlen)
{
	if (f->initrd) {
		snprintf(k->initrd_name, sizeof(k->initrd_name), "%s", f->initrd);
		return initrd_open(&k->initrd, f->initrd, err, errlen);
	}
	if (!f->initrd_data)
		return 0;
	snprintf(k->initrd_name, sizeof(k->initrd_name), "(in memory)");
	if (!f->initrd_size)
		return boot_fail(err, errlen, -EINVAL, "initrd %s: empty", k->initrd_name);
	k->initrd = (struct image){.data = f->initrd_data, .size = f->initrd_size, .mapped = 0};
	return 0;
}

int kernel_open(struct kernel *k, const struct kernel_files *f, char *err, size_t errlen)
{
	int ret;

	memset(k, 0, sizeof(*k));
	ret = open_image(k, f, err, errlen);
	if (!ret)
		ret = detect(k, err, errlen);
	if (!ret)
		ret = open_initrd(k, f, err, errlen);
	if (ret)
		kernel_close(k);
	return ret;
}

/* PVH or plain 64-bit ELF: segments at their physical addresses, then the format's boot structures. */
static int load_elf(struct kernel *k, const struct gmem *mem, const char *cmdline, struct boot_entry *entry, char *err,
		    size_t errlen)
{
	size_t len = strlen(cmdline);
	struct zeropage zp;
	int ret;

	k->kernel_start = k->elf.lowest;
	k->kernel_end = k->elf.highest;
	if (len >= LAYOUT_CMDLINE_MAX)
		return boot_fail(err, errlen, -E2BIG,
				 "kernel command line is %zu bytes; the limit is %lu bytes (%lu with its NUL)", len,
				 LAYOUT_CMDLINE_MAX - 1, LAYOUT_CMDLINE_MAX);
	ret = initrd_place(k, mem, UINT64_MAX, err, errlen);
	if (!ret)
		ret = elf_load(&k->elf, &k->image, mem, err, errlen);
	if (!ret && (ret = initrd_copy(k, mem)) != 0)
		ret = boot_fail(err, errlen, ret, "copying initrd %s into guest RAM failed: %s", k->initrd_name,
				strerror(-ret));
	if (ret)
		return ret;
	if (k->format == KERNEL_PVH)
		return pvh_setup_initrd(mem, &k->elf, cmdline, k->initrd_addr, k->initrd.size, k->rsdp_addr, entry, err,
					errlen);
	zp = (struct zeropage){.cmdline_len = (uint32_t)len,
			       .initrd_addr = k->initrd_addr,
			       .initrd_size = k->initrd.size,
			       .rsdp_addr = k->rsdp_addr};
	return boot64_setup(mem, &zp, cmdline, k->entry64, entry, err, errlen);
}

static int load(struct kernel *k, const struct gmem *mem, const char *cmdline, struct boot_entry *entry, char *err,
		size_t errlen)
{
	switch (k->format) {
	case KERNEL_BZIMAGE:
		return bzimage_load(k, mem, cmdline, entry, err, errlen);
	case KERNEL_PVH:
	case KERNEL_ELF64:
		return load_elf(k, mem, cmdline, entry, err, errlen);
	default:
		return boot_fail(err, errlen, -EINVAL, "kernel_load: no kernel was opened");
	}
}

int kernel_load(struct kernel *k, const struct gmem *mem, const char *cmdline, struct boot_entry *entry, char *err,
		size_t errlen)
{
	char why[BOOT_ERR_MAX];
	size_t n = strlen(k->name);
	int ret;

	if (!cmdline)
		cmdline = kernel_default_cmdline(k);
	ret = load(k, mem, cmdline, entry, why, sizeof(why));
	if (!ret)
		return 0;
	/* Every message names the kernel file, whatever loader step it came from. */
	if (strncmp(why, k->name, n) == 0 && why[n] == ':')
		return boot_fail(err, errlen, ret, "%s", why);
	return boot_fail(err, errlen, ret, "%s: %s", k->name, why);
}

void kernel_close(struct kernel *k)
{
	image_close(&k->image);
	image_close(&k->initrd);
}
