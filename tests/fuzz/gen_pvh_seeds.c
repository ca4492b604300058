/*
 * gen_pvh_seeds.c - writes fuzz_pvh seeds (pvh_input.h) into a corpus directory (argv[1]): a PVH kernel with and
 * without an initrd, command lines at the limit, RAM sizes below 1 MiB and around the 4 GiB hole.
 */
#include <stdio.h>
#include <string.h>

#include "brisk/layout.h"
#include "pvh_input.h"
#include "seed_save.h"

#define MIB (1ULL << 20)
#define GIB (1ULL << 30)

static const char console[] = "console=ttyS0 panic=1";

/* One seed: the header from `in`, then the command line's bytes (the tail). */
static int put(const char *dir, const char *name, struct pvh_input in)
{
	uint8_t buf[PF_HDR + sizeof(console)];

	if (!in.cmdline_len && !(in.flags & PF_DEFAULT_CMDLINE))
		in.cmdline_len = sizeof(console) - 1;
	pvh_input_put(buf, &in);
	memcpy(buf + PF_HDR, console, sizeof(console) - 1);
	return seed_save(dir, name, buf, PF_HDR + sizeof(console) - 1);
}

/* A kernel at 1 MiB (8 KiB, entry 0x10 in), `ram` bytes of RAM; memsz and sizes are stored minus one. */
static struct pvh_input base(uint64_t ram)
{
	return (struct pvh_input){.ram = ram, .paddr0 = MIB, .memsz0 = 0x2000 - 1, .entry = 0x10};
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		uint64_t ram;
	} sizes[] = {
	    {"ram-4k", 0x1000},
	    {"ram-start-info", LAYOUT_START_INFO + 0x38},
	    {"ram-cmdline", LAYOUT_CMDLINE + 22},
	    {"ram-ebda", LAYOUT_EBDA},
	    {"ram-1m", MIB},
	    {"ram-kernel-exact", MIB + 0x2000},
	    {"ram-16m", 16 * MIB},
	    {"ram-hole-1", LAYOUT_MMIO_HOLE - 1},
	    {"ram-hole", LAYOUT_MMIO_HOLE},
	    {"ram-hole+1", LAYOUT_MMIO_HOLE + 1},
	    {"ram-4g", 4 * GIB},
	    {"ram-4g+4k", 4 * GIB + 0x1000},
	    {"ram-max", PF_RAM_MAX},
	};
	struct pvh_input in;
	const char *dir;
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	bad |= put(dir, "seed-pvh64", base(64 * MIB));
	in = base(64 * MIB);
	in.flags = PF_INITRD | PF_RSDP, in.initrd = 0x1800 - 1;
	bad |= put(dir, "seed-pvh64-initrd", in);
	in.flags = PF_ELF32 | PF_INITRD, in.initrd = 0x1234;
	bad |= put(dir, "seed-pvh32-initrd", in);
	in.flags = PF_NOTE_DESC8 | PF_DEFAULT_CMDLINE;
	bad |= put(dir, "seed-pvh64-desc8-default-cmdline", in);
	/* the command line at its limit (65535 bytes and the NUL) and one byte over it */
	in = base(64 * MIB);
	in.cmdline_len = LAYOUT_CMDLINE_MAX - 1;
	bad |= put(dir, "seed-cmdline-max", in);
	in.cmdline_len = LAYOUT_CMDLINE_MAX;
	bad |= put(dir, "seed-cmdline-over", in);
	/* an initrd larger than RAM, small and large */
	in = base(16 * MIB);
	in.flags = PF_INITRD | PF_INITRD_HUGE, in.initrd = 1;
	bad |= put(dir, "seed-initrd-over-ram", in);
	in.ram = PF_RAM_MAX;
	bad |= put(dir, "seed-initrd-over-low-ram", in);
	/* an initrd that fits exactly above the kernel, and one page too big for it */
	in = base(MIB + 0x2000 + 0x3000);
	in.flags = PF_INITRD, in.initrd = 0x3000 - 1;
	bad |= put(dir, "seed-initrd-exact", in);
	in.initrd = 0x3000;
	bad |= put(dir, "seed-initrd-one-over", in);
	/* the kernel at the top of low RAM: the initrd goes below it */
	in = base(16 * MIB);
	in.paddr0 = 16 * MIB - 0x2000, in.flags = PF_INITRD, in.initrd = 0x10000 - 1;
	bad |= put(dir, "seed-initrd-below-kernel", in);
	in.ram = LAYOUT_MMIO_HOLE + MIB, in.paddr0 = LAYOUT_MMIO_HOLE - 0x2000, in.initrd = PF_INITRD_MAX - 1;
	bad |= put(dir, "seed-kernel-at-hole", in);
	/* a second segment above 4 GiB; and one across the hole (refused) */
	in = base(PF_RAM_MAX);
	in.flags = PF_SEG1 | PF_INITRD, in.paddr1 = 4 * GIB + 0x10000, in.memsz1 = 0x4000 - 1, in.initrd = 0x8000;
	bad |= put(dir, "seed-seg1-above-4g", in);
	in.flags = PF_SEG1;
	bad |= put(dir, "seed-seg1-above-4g-no-initrd", in);
	in.paddr1 = LAYOUT_MMIO_HOLE - 0x1000;
	bad |= put(dir, "seed-seg1-across-hole", in);
	in = base(64 * MIB);
	in.flags = PF_SEG1 | PF_INITRD, in.paddr1 = 32 * MIB, in.memsz1 = PF_SEG_MAX - 1, in.initrd = PF_INITRD_MAX - 1;
	bad |= put(dir, "seed-seg1-gap", in);
	/* the entry outside the code (refused by kernel_open) */
	in = base(64 * MIB);
	in.flags = PF_RAW_ENTRY, in.entry = MIB + 0x2000;
	bad |= put(dir, "seed-entry-outside", in);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char name[64];

		in = base(sizes[i].ram);
		snprintf(name, sizeof(name), "seed-%s", sizes[i].name);
		bad |= put(dir, name, in);
		in.flags = PF_INITRD, in.initrd = 0x1000 - 1;
		snprintf(name, sizeof(name), "seed-%s-initrd", sizes[i].name);
		bad |= put(dir, name, in);
	}
	return bad;
}
