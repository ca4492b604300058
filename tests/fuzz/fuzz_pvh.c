/*
 * fuzz_pvh.c - libFuzzer harness: the PVH boot path (kernel_open and kernel_load of a PVH ELF, as `brisk run --kernel
 * vmlinux --initrd X` takes it) with an initrd and a command line, into guest RAM of any size up to 5 GiB.
 */
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../../src/arch/x86/pvh_abi.h"
#include "../../src/arch/x86/x86_boot.h"
#include "brisk/boot.h"
#include "brisk/kernel.h"
#include "brisk/layout.h"
#include "brisk/log.h"
#include "brisk/mem.h"
#include "elf_builder.h"
#include "pvh_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PAGE	  0x1000ULL
#define NAME	  "pvh-fuzz"
#define DEF_CMDLN KERNEL_OTHER_CMDLINE /* the ELF has no "Linux" note */

/* One test case, decoded. */
struct tcase {
	struct pvh_input in;
	uint32_t entry;	     /* the PVH entry written into the note */
	const uint8_t *tail; /* command line and initrd bytes */
	size_t tail_len;
	uint8_t img[EB_SIZE];
	const char *cmdline; /* NULL: the default */
	const uint8_t *initrd;
	uint64_t initrd_size;
	void *huge; /* PF_INITRD_HUGE: a PROT_NONE reservation, so that reading any of it is a crash */
};

static char cmd[LAYOUT_CMDLINE_MAX + 2];
static uint8_t *initrd_buf; /* PF_INITRD_MAX bytes on the heap; an initrd is its tail, so ASan sees reads past it */

/* The next `bytes` bytes as a little-endian number; past the end of the input they read as zero. */
static uint64_t take(const uint8_t **p, size_t *n, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes && *n; i++, (*p)++, (*n)--)
		v |= (uint64_t)(*p)[0] << (8 * i);
	return v;
}

/* The header fields (pvh_input.h) reduced to their ranges; the rest is the tail. */
static void decode(struct tcase *t, const uint8_t *data, size_t size)
{
	t->in.flags = (uint8_t)take(&data, &size, 1);
	t->in.ram = take(&data, &size, 8) % (PF_RAM_MAX + 1);
	t->in.paddr0 = take(&data, &size, 8) & 0xffffffffULL;
	t->in.memsz0 = 1 + (uint32_t)(take(&data, &size, 4) % PF_SEG_MAX);
	t->in.paddr1 = take(&data, &size, 8) & (t->in.flags & PF_ELF32 ? 0xffffffffULL : (1ULL << 33) - 1);
	t->in.memsz1 = 1 + (uint32_t)(take(&data, &size, 4) % PF_SEG_MAX);
	t->in.entry = (uint32_t)take(&data, &size, 4);
	t->in.initrd = (uint32_t)take(&data, &size, 4);
	t->in.cmdline_len = (uint32_t)(take(&data, &size, 4) % (LAYOUT_CMDLINE_MAX + 2));
	t->tail = data;
	t->tail_len = size;
}

/* Segment 0 (code) patched into elf_builder.h's image, segment 1 (data) added as a third program header. */
static void build_elf64(struct tcase *t)
{
	uint32_t entry = t->entry;
	Elf64_Phdr ph[3];

	eb_elf64(t->img);
	memcpy(ph, t->img + sizeof(Elf64_Ehdr), 2 * sizeof(ph[0]));
	ph[0].p_paddr = ph[0].p_vaddr = t->in.paddr0;
	ph[0].p_memsz = t->in.memsz0;
	ph[0].p_filesz = t->in.memsz0 < EB_CODE_SIZE ? t->in.memsz0 : EB_CODE_SIZE;
	ph[2] = (Elf64_Phdr){.p_type = PT_LOAD,
			     .p_flags = PF_R | PF_W,
			     .p_offset = EB_CODE_OFF,
			     .p_vaddr = t->in.paddr1,
			     .p_paddr = t->in.paddr1,
			     .p_filesz = t->in.memsz1 < EB_CODE_SIZE ? t->in.memsz1 : EB_CODE_SIZE,
			     .p_memsz = t->in.memsz1,
			     .p_align = 0x1000};
	if (t->in.flags & PF_NOTE_DESC8) {
		uint64_t e = entry;

		t->img[EB_NOTE_OFF + 4] = 8;
		memcpy(t->img + EB_NOTE_OFF + 16, &e, 8);
		ph[1].p_filesz = ph[1].p_memsz = 24;
		ph[1].p_align = 8;
	} else {
		memcpy(t->img + EB_NOTE_OFF + 16, &entry, 4);
	}
	memcpy(t->img + sizeof(Elf64_Ehdr), ph, sizeof(ph));
	t->img[offsetof(Elf64_Ehdr, e_phnum)] = t->in.flags & PF_SEG1 ? 3 : 2;
}

static void build_elf32(struct tcase *t)
{
	uint32_t entry = t->entry;
	Elf32_Phdr ph[3];

	eb_elf32(t->img);
	memcpy(ph, t->img + sizeof(Elf32_Ehdr), 2 * sizeof(ph[0]));
	ph[0].p_paddr = ph[0].p_vaddr = (uint32_t)t->in.paddr0;
	ph[0].p_memsz = t->in.memsz0;
	ph[0].p_filesz = t->in.memsz0 < EB_CODE_SIZE ? t->in.memsz0 : EB_CODE_SIZE;
	ph[2] = (Elf32_Phdr){.p_type = PT_LOAD,
			     .p_offset = EB_CODE_OFF,
			     .p_vaddr = (uint32_t)t->in.paddr1,
			     .p_paddr = (uint32_t)t->in.paddr1,
			     .p_filesz = t->in.memsz1 < EB_CODE_SIZE ? t->in.memsz1 : EB_CODE_SIZE,
			     .p_memsz = t->in.memsz1,
			     .p_flags = PF_R | PF_W,
			     .p_align = 0x1000};
	memcpy(t->img + EB_NOTE_OFF + 16, &entry, 4);
	memcpy(t->img + sizeof(Elf32_Ehdr), ph, sizeof(ph));
	t->img[offsetof(Elf32_Ehdr, e_phnum)] = t->in.flags & PF_SEG1 ? 3 : 2;
}

/* Whether kernel_open must accept the image: the entry inside segment 0 (the only executable one), no overlap. */
static int want_open(const struct tcase *t)
{
	const struct pvh_input *in = &t->in;

	if (t->entry < in->paddr0 || t->entry - in->paddr0 >= in->memsz0)
		return 0;
	return !(in->flags & PF_SEG1) || LAYOUT_DISJOINT(in->paddr0, in->memsz0, in->paddr1, in->memsz1);
}

/* The command line: the tail's bytes repeated to the length asked for, NUL read as a space. */
static void build_cmdline(struct tcase *t)
{
	size_t n = t->in.cmdline_len;

	if (t->in.flags & PF_DEFAULT_CMDLINE) {
		t->cmdline = NULL;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		uint8_t c = t->tail_len ? t->tail[i % t->tail_len] : 'x';

		cmd[i] = c ? (char)c : ' ';
	}
	cmd[n] = '\0';
	t->cmdline = cmd;
}

/*
 * The initrd: its first bytes from the tail, its last 8 its size (so a copy
 * that is off by some bytes shows), zero between. A huge one is a PROT_NONE
 * reservation: never read, since it cannot fit.
 */
static int build_initrd(struct tcase *t)
{
	uint64_t low = t->in.ram < LAYOUT_MMIO_HOLE ? t->in.ram : LAYOUT_MMIO_HOLE, n;
	uint8_t *p;

	t->initrd = NULL;
	t->initrd_size = 0;
	if (!(t->in.flags & PF_INITRD))
		return 0;
	if (t->in.flags & PF_INITRD_HUGE) {
		t->initrd_size = low + t->in.initrd % (16u << 20);
		t->huge = mmap(NULL, t->initrd_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (t->huge == MAP_FAILED)
			return -1;
		t->initrd = t->huge;
		return 0;
	}
	t->initrd_size = 1 + t->in.initrd % PF_INITRD_MAX;
	p = initrd_buf + PF_INITRD_MAX - t->initrd_size;
	memset(p, 0, t->initrd_size);
	n = t->tail_len < t->initrd_size ? t->tail_len : t->initrd_size;
	memcpy(p, t->tail, n);
	if (t->initrd_size >= 8)
		memcpy(p + t->initrd_size - 8, &t->initrd_size, 8);
	t->initrd = p;
	return 0;
}

/* [a, a + s) inside guest RAM of `ram` bytes: below the hole, or in the part above 4 GiB (not with gmem_ptr). */
static int in_ram(uint64_t ram, uint64_t a, uint64_t s)
{
	uint64_t low = ram < LAYOUT_MMIO_HOLE ? ram : LAYOUT_MMIO_HOLE, high = ram - low;

	if (a <= low && s <= low - a)
		return 1;
	return a >= LAYOUT_RAM_ABOVE_4G && a - LAYOUT_RAM_ABOVE_4G <= high && s <= high - (a - LAYOUT_RAM_ABOVE_4G);
}

/*
 * Where initrd_place's contract (x86_boot.h) puts `size` bytes: the highest
 * page-aligned start at or above 1 MiB whose range ends at or below the end
 * of low RAM and misses the kernel's [kstart, kend): above the kernel when
 * it fits there, else below it. 0: nowhere.
 */
static uint64_t want_initrd_addr(uint64_t low, uint64_t kstart, uint64_t kend, uint64_t size)
{
	uint64_t top = kstart < low ? kstart : low, a;

	if (size <= low) {
		a = (low - size) & ~(PAGE - 1);
		if (a >= LAYOUT_HIGH_RAM && a >= kend)
			return a;
	}
	if (size <= top) {
		a = (top - size) & ~(PAGE - 1);
		if (a >= LAYOUT_HIGH_RAM)
			return a;
	}
	return 0;
}

/* Whether kernel_load must succeed: every check it documents, computed here from the inputs. */
static int want_success(const struct tcase *t, const struct kernel *k, size_t len, uint64_t *initrd_addr)
{
	uint64_t low = t->in.ram < LAYOUT_MMIO_HOLE ? t->in.ram : LAYOUT_MMIO_HOLE;

	*initrd_addr = 0;
	if (len >= LAYOUT_CMDLINE_MAX || low < LAYOUT_CMDLINE + len + 1)
		return 0;
	for (unsigned i = 0; i < k->elf.nr_segments; i++)
		if (k->elf.seg[i].paddr < LAYOUT_HIGH_RAM ||
		    !in_ram(t->in.ram, k->elf.seg[i].paddr, k->elf.seg[i].memsz))
			return 0;
	if (t->initrd_size) {
		*initrd_addr = want_initrd_addr(low, k->elf.lowest, k->elf.highest, t->initrd_size);
		return *initrd_addr != 0;
	}
	return 1;
}

static void check_bytes(const struct gmem *mem, uint64_t gpa, const void *want, uint64_t len)
{
	const void *p = gmem_ptr(mem, gpa, len);

	if (!p || memcmp(p, want, len) != 0)
		abort();
}

/* Inside one RAM entry of the memory map the guest is given. */
static void check_in_map(const struct hvm_memmap_table_entry *map, unsigned n, uint64_t a, uint64_t s)
{
	for (unsigned i = 0; i < n; i++)
		if (map[i].type == MEMMAP_RAM && a >= map[i].addr && a - map[i].addr <= map[i].size &&
		    s <= map[i].size - (a - map[i].addr))
			return;
	abort();
}

/* hvm_start_info and its memory map: what the PVH ABI promises, and a map that tiles exactly the guest's RAM. */
static void check_start_info(const struct tcase *t, const struct gmem *mem, struct hvm_memmap_table_entry *map,
			     unsigned *nmap)
{
	struct hvm_start_info si;
	uint64_t total = 0, end = 0;

	if (gmem_read(mem, LAYOUT_START_INFO, &si, sizeof(si)))
		abort();
	if (si.magic != XEN_HVM_START_MAGIC_VALUE || si.version != XEN_HVM_START_VERSION || si.flags || si.reserved ||
	    si.nr_modules != (t->initrd_size ? 1u : 0u) || si.modlist_paddr != (t->initrd_size ? LAYOUT_MODLIST : 0) ||
	    si.cmdline_paddr != LAYOUT_CMDLINE || si.rsdp_paddr != (t->in.flags & PF_RSDP ? LAYOUT_ACPI : 0) ||
	    si.memmap_paddr != LAYOUT_MEMMAP || si.memmap_entries == 0 || si.memmap_entries > MEMMAP_MAX)
		abort();
	*nmap = si.memmap_entries;
	if (gmem_read(mem, LAYOUT_MEMMAP, map, *nmap * sizeof(map[0])))
		abort();
	for (unsigned i = 0; i < *nmap; i++) {
		if (map[i].size == 0 || map[i].reserved ||
		    (map[i].type != MEMMAP_RAM && map[i].type != MEMMAP_RESERVED) || map[i].addr < end ||
		    !in_ram(t->in.ram, map[i].addr, map[i].size))
			abort();
		end = map[i].addr + map[i].size;
		total += map[i].size;
	}
	if (total != t->in.ram)
		abort();
	/* The boot structures the guest reads first lie in RAM it is told about. */
	check_in_map(map, *nmap, LAYOUT_START_INFO, sizeof(si));
	check_in_map(map, *nmap, LAYOUT_MEMMAP, *nmap * sizeof(map[0]));
	check_in_map(map, *nmap, LAYOUT_GDT, LAYOUT_GDT_SIZE);
}

/* The initrd: module 0, page-aligned in low RAM above 1 MiB, clear of the kernel and the boot structures, intact. */
static void check_initrd(const struct tcase *t, const struct kernel *k, const struct gmem *mem,
			 const struct hvm_memmap_table_entry *map, unsigned nmap, size_t len, uint64_t want)
{
	struct hvm_modlist_entry m;
	uint64_t a = k->initrd_addr, s = t->initrd_size;

	if (!s) {
		if (a)
			abort();
		return;
	}
	if (gmem_read(mem, LAYOUT_MODLIST, &m, sizeof(m)) || m.paddr != a || m.size != s || m.cmdline_paddr ||
	    m.reserved)
		abort();
	if (a != want || (a & (PAGE - 1)) || a < LAYOUT_HIGH_RAM || a + s > gmem_low_size(mem))
		abort();
	for (unsigned i = 0; i < k->elf.nr_segments; i++)
		if (!LAYOUT_DISJOINT(a, s, k->elf.seg[i].paddr, k->elf.seg[i].memsz))
			abort();
	if (!LAYOUT_DISJOINT(a, s, k->kernel_start, k->kernel_end - k->kernel_start) ||
	    !LAYOUT_DISJOINT(a, s, LAYOUT_START_INFO,
			     LAYOUT_START_INFO_SIZE + LAYOUT_MODLIST_SIZE + LAYOUT_MEMMAP_SIZE) ||
	    !LAYOUT_DISJOINT(a, s, LAYOUT_CMDLINE, len + 1) || !LAYOUT_DISJOINT(a, s, LAYOUT_GDT, LAYOUT_GDT_SIZE))
		abort();
	check_in_map(map, nmap, a, s);
	check_bytes(mem, a, t->initrd, s);
}

/* Everything a successful load promises (kernel.h, x86_boot.h, boot.h). */
static void check_loaded(const struct tcase *t, const struct kernel *k, const struct gmem *mem,
			 const struct boot_entry *e, const char *cmdline, uint64_t want_initrd)
{
	struct hvm_memmap_table_entry map[MEMMAP_MAX];
	size_t len = strlen(cmdline);
	unsigned nmap;

	if (e->mode != BOOT_PVH32 || e->rip != k->elf.pvh_entry || e->boot_info != LAYOUT_START_INFO)
		abort();
	check_start_info(t, mem, map, &nmap);
	check_bytes(mem, LAYOUT_CMDLINE, cmdline, len + 1);
	check_in_map(map, nmap, LAYOUT_CMDLINE, len + 1);
	for (unsigned i = 0; i < X86_GDT_ENTRIES; i++) {
		uint64_t d = x86_gdt_entry(BOOT_PVH32, i);

		check_bytes(mem, LAYOUT_GDT + 8 * i, &d, 8);
	}
	for (unsigned i = 0; i < k->elf.nr_segments; i++) {
		const struct elf_segment *s = &k->elf.seg[i];
		const uint8_t zero = 0;

		check_bytes(mem, s->paddr, t->img + s->offset, s->filesz);
		if (s->memsz > s->filesz)
			check_bytes(mem, s->paddr + s->memsz - 1, &zero, 1);
		check_in_map(map, nmap, s->paddr, s->memsz);
	}
	check_initrd(t, k, mem, map, nmap, len, want_initrd);
}

/* A refusal names the kernel, and (kernel.h: every check before the first byte is written) left RAM untouched. */
static void check_refused(const struct kernel *k, const struct gmem *mem, const char *err)
{
	static const uint8_t zero[LAYOUT_START_INFO_SIZE];

	if (strncmp(err, NAME ": ", sizeof(NAME ": ") - 1) != 0 || !err[sizeof(NAME ": ") - 1])
		abort();
	if (gmem_ptr(mem, LAYOUT_START_INFO, sizeof(zero)))
		check_bytes(mem, LAYOUT_START_INFO, zero, sizeof(zero));
	if (gmem_ptr(mem, LAYOUT_CMDLINE, 1))
		check_bytes(mem, LAYOUT_CMDLINE, zero, 1);
	for (unsigned i = 0; i < k->elf.nr_segments; i++)
		if (gmem_ptr(mem, k->elf.seg[i].paddr, 1))
			check_bytes(mem, k->elf.seg[i].paddr, zero, 1);
}

static void run(struct tcase *t)
{
	struct kernel_files f = {.kernel_data = t->img,
				 .kernel_size = EB_SIZE,
				 .kernel_name = NAME,
				 .initrd_data = t->initrd,
				 .initrd_size = t->initrd_size};
	char err[BOOT_ERR_MAX];
	struct boot_entry e;
	struct kernel k;
	struct gmem mem;
	uint64_t want_initrd;
	const char *cmdline;
	int ret, ok;

	err[0] = '\0';
	ret = kernel_open(&k, &f, err, sizeof(err));
	if ((ret == 0) != want_open(t))
		abort();
	if (ret != 0) {
		if (!err[0] || k.image.size)
			abort();
		return;
	}
	if (k.format != KERNEL_PVH || !k.elf.has_pvh || k.elf.pvh_entry != t->entry)
		abort();
	k.rsdp_addr = t->in.flags & PF_RSDP ? LAYOUT_ACPI : 0;
	if (gmem_init(&mem, t->in.ram, 0)) {
		kernel_close(&k);
		return;
	}
	cmdline = t->cmdline ? t->cmdline : DEF_CMDLN;
	ok = want_success(t, &k, strlen(cmdline), &want_initrd);
	err[0] = '\0';
	ret = kernel_load(&k, &mem, t->cmdline, &e, err, sizeof(err));
	if ((ret == 0) != ok || (strlen(cmdline) >= LAYOUT_CMDLINE_MAX && ret != -E2BIG))
		abort();
	if (ret == 0)
		check_loaded(t, &k, &mem, &e, cmdline, want_initrd);
	else
		check_refused(&k, &mem, err);
	kernel_close(&k);
	gmem_destroy(&mem);
}

/*
 * The input (pvh_input.h) describes a PVH ELF built with elf_builder.h,
 * the RAM size, the initrd and the command line; this runs the path of
 * `brisk run --kernel vmlinux --initrd X`: kernel_open, then kernel_load
 * into fresh guest RAM. Invariants beyond "no crash, no sanitizer report":
 * kernel_load succeeds exactly when want_success says; on success the start
 * info, memory map, command line, GDT, segments and initrd are as
 * check_loaded says, the initrd exactly where want_initrd_addr puts it; on
 * refusal RAM is untouched and the message names the kernel.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct tcase t;

	if (!initrd_buf) {
		log_set_level(LOG_ERROR);
		initrd_buf = malloc(PF_INITRD_MAX);
		if (!initrd_buf)
			abort();
	}
	memset(&t.in, 0, sizeof(t.in));
	t.huge = NULL;
	decode(&t, data, size);
	if (t.in.ram == 0)
		return 0;
	t.entry = t.in.flags & PF_RAW_ENTRY ? t.in.entry : (uint32_t)(t.in.paddr0 + t.in.entry % t.in.memsz0);
	if (t.in.flags & PF_ELF32)
		build_elf32(&t);
	else
		build_elf64(&t);
	build_cmdline(&t);
	if (build_initrd(&t))
		return 0;
	run(&t);
	if (t.huge)
		munmap(t.huge, t.initrd_size);
	return 0;
}
