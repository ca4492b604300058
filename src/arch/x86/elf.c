/* elf.c - ELF kernel images: validation without trusting a single field, then loading into guest RAM. */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "brisk/boot.h"
#include "brisk/layout.h"
#include "brisk/mem.h"
#include "pvh_abi.h"
#include "x86_boot.h"

/*
 * References: System V ABI "ELF" (gABI) chapters 4 (header, sections) and 5
 * (program headers, notes); Xen's elfnote.h for XEN_ELFNOTE_PHYS32_ENTRY.
 * The image is host input (docs/security.md case 18): every offset and size is
 * checked against the file with overflow-safe arithmetic before it is used,
 * and structures are copied out with memcpy (the image need not be aligned).
 */
#define ELF_MAX_PHNUM	128	     /* vmlinux has ~5; anything near PN_XNUM is hostile */
#define ELF_PADDR_LIMIT (1ULL << 52) /* x86-64 MAXPHYADDR architectural maximum */

typedef unsigned long long ull;

/* The header fields brisk uses, independent of ELF class. */
struct ehdr {
	int cls; /* 32 or 64 */
	uint16_t type, machine, ehsize, phentsize, phnum;
	uint32_t version;
	uint64_t entry, phoff;
};

/* One program header, widened to 64 bits. */
struct phdr {
	uint32_t type, flags;
	uint64_t offset, paddr, filesz, memsz, align;
};

/* [off, off+len) inside a buffer of `size` bytes, without overflow. */
static int in_file(uint64_t off, uint64_t len, size_t size)
{
	return off <= size && len <= size - off;
}

static void widen_ehdr32(const uint8_t *img, struct ehdr *h)
{
	Elf32_Ehdr e;

	memcpy(&e, img, sizeof(e));
	*h = (struct ehdr){32,	      e.e_type,	   e.e_machine, e.e_ehsize, e.e_phentsize,
			   e.e_phnum, e.e_version, e.e_entry,	e.e_phoff};
}

static void widen_ehdr64(const uint8_t *img, struct ehdr *h)
{
	Elf64_Ehdr e;

	memcpy(&e, img, sizeof(e));
	*h = (struct ehdr){64,	      e.e_type,	   e.e_machine, e.e_ehsize, e.e_phentsize,
			   e.e_phnum, e.e_version, e.e_entry,	e.e_phoff};
}

/* Magic, class and header length; -ENOEXEC only when it is not ELF at all. */
static int read_ehdr(const uint8_t *img, size_t size, struct ehdr *h, char *err, size_t errlen)
{
	size_t need;

	if (size < SELFMAG || memcmp(img, ELFMAG, SELFMAG) != 0)
		return boot_fail(err, errlen, -ENOEXEC, "not an ELF image: %s", size ? "bad magic" : "empty image");
	if (size < EI_NIDENT)
		return boot_fail(err, errlen, -EINVAL, "truncated ELF header: e_ident needs %d bytes, image has %zu",
				 EI_NIDENT, size);
	if (img[EI_CLASS] != ELFCLASS32 && img[EI_CLASS] != ELFCLASS64)
		return boot_fail(err, errlen, -EINVAL, "ELF header: EI_CLASS %u is neither ELFCLASS32 nor ELFCLASS64",
				 img[EI_CLASS]);
	need = img[EI_CLASS] == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	if (size < need)
		return boot_fail(err, errlen, -EINVAL,
				 "truncated ELF header: ELF%d header needs %zu bytes, image has %zu",
				 img[EI_CLASS] == ELFCLASS64 ? 64 : 32, need, size);
	if (img[EI_CLASS] == ELFCLASS64)
		widen_ehdr64(img, h);
	else
		widen_ehdr32(img, h);
	return 0;
}

/* Identity fields: little-endian, current version, x86 executable of the right width. */
static int check_ident(const uint8_t *img, const struct ehdr *h, char *err, size_t errlen)
{
	unsigned want_machine = h->cls == 64 ? EM_X86_64 : EM_386;

	if (img[EI_DATA] != ELFDATA2LSB)
		return boot_fail(err, errlen, -EINVAL, "ELF header: EI_DATA %u is not ELFDATA2LSB (little-endian)",
				 img[EI_DATA]);
	if (img[EI_VERSION] != EV_CURRENT || h->version != EV_CURRENT)
		return boot_fail(err, errlen, -EINVAL, "ELF header: EI_VERSION %u / e_version %u, want %u (EV_CURRENT)",
				 img[EI_VERSION], h->version, EV_CURRENT);
	if (h->type != ET_EXEC)
		return boot_fail(err, errlen, -EINVAL, "ELF header: e_type %u is not ET_EXEC (%u)", h->type, ET_EXEC);
	if (h->machine != want_machine)
		return boot_fail(err, errlen, -EINVAL, "ELF header: e_machine %u, want %u (%s) for ELF%d", h->machine,
				 want_machine, h->cls == 64 ? "EM_X86_64" : "EM_386", h->cls);
	return 0;
}

/* Header sizes and the program header table's place in the file. */
static int check_phtab(const struct ehdr *h, size_t size, char *err, size_t errlen)
{
	unsigned ehsize = h->cls == 64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	unsigned phentsize = h->cls == 64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
	uint64_t table;

	if (h->ehsize != ehsize)
		return boot_fail(err, errlen, -EINVAL, "ELF header: e_ehsize %u, want %u", h->ehsize, ehsize);
	if (h->phentsize != phentsize)
		return boot_fail(err, errlen, -EINVAL, "ELF header: e_phentsize %u, want %u", h->phentsize, phentsize);
	if (h->phnum == 0 || h->phnum > ELF_MAX_PHNUM)
		return boot_fail(err, errlen, -EINVAL, "ELF header: e_phnum %u, want 1..%u", h->phnum, ELF_MAX_PHNUM);
	table = (uint64_t)h->phnum * phentsize; /* both 16-bit: cannot overflow */
	if (!in_file(h->phoff, table, size))
		return boot_fail(err, errlen, -EINVAL,
				 "ELF header: program header table e_phoff 0x%llx + e_phnum %u * e_phentsize %u "
				 "beyond file size 0x%zx",
				 (ull)h->phoff, h->phnum, phentsize, size);
	return 0;
}

/* Program header `i`; check_phtab has proven it lies inside the image. */
static void read_phdr(const uint8_t *img, const struct ehdr *h, unsigned i, struct phdr *p)
{
	const uint8_t *at = img + h->phoff + (uint64_t)i * h->phentsize;

	if (h->cls == 64) {
		Elf64_Phdr q;

		memcpy(&q, at, sizeof(q));
		*p = (struct phdr){q.p_type, q.p_flags, q.p_offset, q.p_paddr, q.p_filesz, q.p_memsz, q.p_align};
	} else {
		Elf32_Phdr q;

		memcpy(&q, at, sizeof(q));
		*p = (struct phdr){q.p_type, q.p_flags, q.p_offset, q.p_paddr, q.p_filesz, q.p_memsz, q.p_align};
	}
}

/* The segment's bytes lie inside the file. */
static int check_file_range(const struct phdr *p, unsigned i, size_t size, char *err, size_t errlen)
{
	if (!in_file(p->offset, p->filesz, size))
		return boot_fail(err, errlen, -EINVAL,
				 "program header %u: segment offset 0x%llx + filesz 0x%llx beyond file size 0x%zx", i,
				 (ull)p->offset, (ull)p->filesz, size);
	return 0;
}

/* A PT_LOAD's sizes and physical range; RAM placement is elf_load's job. */
static int check_load(const struct phdr *p, unsigned i, size_t size, char *err, size_t errlen)
{
	if (p->filesz > p->memsz)
		return boot_fail(err, errlen, -EINVAL, "program header %u: filesz 0x%llx > memsz 0x%llx", i,
				 (ull)p->filesz, (ull)p->memsz);
	if (check_file_range(p, i, size, err, errlen))
		return -EINVAL;
	if (p->paddr > ELF_PADDR_LIMIT || p->memsz > ELF_PADDR_LIMIT - p->paddr)
		return boot_fail(err, errlen, -EINVAL,
				 "program header %u: paddr 0x%llx + memsz 0x%llx wraps or exceeds the 52-bit physical "
				 "address space",
				 i, (ull)p->paddr, (ull)p->memsz);
	return 0;
}

/* Records a non-empty PT_LOAD, refusing overlaps and too many segments. */
static int add_segment(struct elf_info *out, const struct phdr *p, unsigned i, char *err, size_t errlen)
{
	uint64_t end = p->paddr + p->memsz;

	if (p->memsz == 0)
		return 0;
	for (unsigned k = 0; k < out->nr_segments; k++) {
		const struct elf_segment *s = &out->seg[k];

		if (LAYOUT_DISJOINT(p->paddr, p->memsz, s->paddr, s->memsz))
			continue;
		return boot_fail(err, errlen, -EINVAL,
				 "program header %u: segment paddr [0x%llx, 0x%llx) overlaps an earlier segment "
				 "[0x%llx, 0x%llx)",
				 i, (ull)p->paddr, (ull)end, (ull)s->paddr, (ull)(s->paddr + s->memsz));
	}
	if (out->nr_segments == ELF_MAX_SEGMENTS)
		return boot_fail(err, errlen, -EINVAL, "program header %u: more than %d non-empty PT_LOAD segments", i,
				 ELF_MAX_SEGMENTS);
	out->seg[out->nr_segments++] = (struct elf_segment){p->paddr, p->offset, p->filesz, p->memsz};
	if (out->nr_segments == 1 || p->paddr < out->lowest)
		out->lowest = p->paddr;
	if (end > out->highest)
		out->highest = end;
	return 0;
}

/* Reads a XEN_ELFNOTE_PHYS32_ENTRY descriptor: a 32-bit entry, stored in 4 or 8 bytes. */
static int take_pvh_note(const uint8_t *desc, uint32_t descsz, unsigned i, struct elf_info *out, char *err,
			 size_t errlen)
{
	uint32_t v32;
	uint64_t v64;

	if (descsz == 4) {
		memcpy(&v32, desc, 4);
		v64 = v32;
	} else if (descsz == 8) {
		memcpy(&v64, desc, 8);
	} else {
		return boot_fail(err, errlen, -EINVAL,
				 "program header %u: Xen PHYS32_ENTRY note descsz %u, want 4 or 8", i, descsz);
	}
	if (v64 > UINT32_MAX)
		return boot_fail(err, errlen, -EINVAL,
				 "program header %u: Xen PHYS32_ENTRY 0x%llx is above 4 GiB (a 32-bit entry)", i,
				 (ull)v64);
	if (!out->has_pvh) {
		out->has_pvh = 1;
		out->pvh_entry = v64;
	}
	return 0;
}

/*
 * Walks the notes of PT_NOTE `p` (gABI 5 "Note Section": 12-byte header,
 * name and descriptor each padded to the segment's alignment, 4 or 8). Each
 * step advances at least 12 bytes through a range check_file_range proved
 * inside the file, so the walk is bounded by filesz / 12.
 */
static int walk_notes(const uint8_t *img, const struct phdr *p, unsigned i, struct elf_info *out, char *err,
		      size_t errlen)
{
	const uint64_t a = p->align == 8 ? 8 : 4;
	uint64_t pos = 0;

	while (pos < p->filesz) {
		const uint8_t *n = img + p->offset + pos;
		uint64_t left = p->filesz - pos, desc_off;
		Elf32_Nhdr nh; /* Elf64_Nhdr is the same three 32-bit words */

		if (left < sizeof(nh))
			return boot_fail(
			    err, errlen, -EINVAL,
			    "program header %u: truncated note header at note offset 0x%llx (%llu bytes left)", i,
			    (ull)pos, (ull)left);
		memcpy(&nh, n, sizeof(nh));
		desc_off = (sizeof(nh) + (uint64_t)nh.n_namesz + a - 1) & ~(a - 1);
		if (desc_off > left || nh.n_descsz > left - desc_off)
			return boot_fail(err, errlen, -EINVAL,
					 "program header %u: note at offset 0x%llx: namesz %u + descsz %u run past the "
					 "segment (%llu bytes left)",
					 i, (ull)pos, nh.n_namesz, nh.n_descsz, (ull)left);
		if (nh.n_type == XEN_ELFNOTE_PHYS32_ENTRY && nh.n_namesz == sizeof(XEN_ELFNOTE_NAME) &&
		    memcmp(n + sizeof(nh), XEN_ELFNOTE_NAME, sizeof(XEN_ELFNOTE_NAME)) == 0 &&
		    take_pvh_note(n + desc_off, nh.n_descsz, i, out, err, errlen))
			return -EINVAL;
		pos += (desc_off + nh.n_descsz + a - 1) & ~(a - 1); /* past the end is fine: the loop ends */
	}
	return 0;
}

/* The PVH entry must be code brisk loads: inside an executable PT_LOAD. */
static int check_pvh_entry(const uint8_t *img, const struct ehdr *h, const struct elf_info *out, char *err,
			   size_t errlen)
{
	struct phdr p;

	if (!out->has_pvh)
		return 0;
	for (unsigned i = 0; i < h->phnum; i++) {
		read_phdr(img, h, i, &p);
		if (p.type == PT_LOAD && (p.flags & PF_X) && out->pvh_entry >= p.paddr &&
		    out->pvh_entry - p.paddr < p.memsz)
			return 0;
	}
	return boot_fail(err, errlen, -EINVAL,
			 "Xen PHYS32_ENTRY 0x%llx is not inside any executable (PF_X) PT_LOAD segment",
			 (ull)out->pvh_entry);
}

/* One program header: PT_LOAD recorded, PT_NOTE walked, everything else ignored. */
static int parse_phdr(const uint8_t *img, size_t size, const struct phdr *p, unsigned i, struct elf_info *out,
		      char *err, size_t errlen)
{
	if (p->type == PT_LOAD) {
		if (check_load(p, i, size, err, errlen))
			return -EINVAL;
		return add_segment(out, p, i, err, errlen);
	}
	if (p->type == PT_NOTE) {
		if (check_file_range(p, i, size, err, errlen))
			return -EINVAL;
		return walk_notes(img, p, i, out, err, errlen);
	}
	return 0;
}

int elf_parse(const uint8_t *img, size_t size, struct elf_info *out, char *err, size_t errlen)
{
	struct ehdr h = {0};
	struct phdr p;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!img)
		size = 0;
	ret = read_ehdr(img, size, &h, err, errlen);
	if (ret)
		return ret;
	if (check_ident(img, &h, err, errlen) || check_phtab(&h, size, err, errlen))
		return -EINVAL;
	for (unsigned i = 0; i < h.phnum; i++) {
		read_phdr(img, &h, i, &p);
		if (parse_phdr(img, size, &p, i, out, err, errlen))
			return -EINVAL;
	}
	if (out->nr_segments == 0)
		return boot_fail(err, errlen, -EINVAL, "no non-empty PT_LOAD segment among %u program headers",
				 h.phnum);
	if (check_pvh_entry(img, &h, out, err, errlen))
		return -EINVAL;
	out->elf_class = h.cls;
	out->entry = h.entry;
	return 0;
}

static void describe_ram(const struct gmem *mem, char *buf, size_t len)
{
	if (mem->nr > 1)
		snprintf(buf, len, "[0, 0x%llx) and [0x%llx, 0x%llx)", (ull)mem->region[0].size,
			 (ull)mem->region[1].gpa, (ull)(mem->region[1].gpa + mem->region[1].size));
	else
		snprintf(buf, len, "[0, 0x%llx)", (ull)gmem_low_size(mem));
}

/* Segment `k` lies above the boot structures, entirely in one RAM region, and its bytes in the image. */
static int check_segment(const struct elf_segment *s, unsigned k, size_t size, const struct gmem *mem, char *err,
			 size_t errlen)
{
	char ram[96];

	if (s->paddr < LAYOUT_HIGH_RAM)
		return boot_fail(err, errlen, -EINVAL,
				 "segment %u at paddr 0x%llx is below 0x%lx (reserved for boot structures)", k,
				 (ull)s->paddr, LAYOUT_HIGH_RAM);
	if (s->filesz > s->memsz || !in_file(s->offset, s->filesz, size))
		return boot_fail(err, errlen, -EINVAL, "segment %u: file range 0x%llx + 0x%llx outside the image", k,
				 (ull)s->offset, (ull)s->filesz);
	if (!gmem_ptr(mem, s->paddr, s->memsz)) {
		describe_ram(mem, ram, sizeof(ram));
		return boot_fail(err, errlen, -EINVAL,
				 "segment %u [0x%llx, 0x%llx) is not inside guest RAM %s (%llu MiB)", k, (ull)s->paddr,
				 (ull)(s->paddr + s->memsz), ram, (ull)(mem->size >> 20));
	}
	return 0;
}

int elf_load(const struct elf_info *info, const struct image *img, const struct gmem *mem, char *err, size_t errlen)
{
	size_t size = img->size;
	int ret;

	if (info->nr_segments > ELF_MAX_SEGMENTS)
		return boot_fail(err, errlen, -EINVAL, "elf_info: %u segments (max %d)", info->nr_segments,
				 ELF_MAX_SEGMENTS);
	/* Check every segment before copying any, so a failure leaves RAM untouched. */
	for (unsigned k = 0; k < info->nr_segments; k++) {
		if (check_segment(&info->seg[k], k, size, mem, err, errlen))
			return -EINVAL;
	}
	for (unsigned k = 0; k < info->nr_segments; k++) {
		const struct elf_segment *s = &info->seg[k];
		uint8_t *dst = gmem_ptr(mem, s->paddr, s->memsz);

		ret = image_copy(img, s->offset, s->filesz, mem, s->paddr);
		if (ret)
			return boot_fail(err, errlen, ret, "segment %u: reading 0x%llx bytes at file offset 0x%llx: %s",
					 k, (ull)s->filesz, (ull)s->offset, strerror(-ret));
		memset(dst + s->filesz, 0, (size_t)(s->memsz - s->filesz));
		gmem_mark_dirty(mem, s->paddr, s->memsz);
	}
	return 0;
}
