/* initrd.c - the initial ramdisk: mapped read-only, placed page-aligned as high as the kernel allows, copied. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "brisk/boot.h"
#include "brisk/kernel.h"
#include "brisk/layout.h"
#include "brisk/mem.h"
#include "x86_boot.h"

#define PAGE 0x1000ULL

typedef unsigned long long ull;

int initrd_open(struct image *img, const char *path, char *err, size_t errlen)
{
	static const char kprefix[] = "kernel image ";
	char msg[BOOT_ERR_MAX];
	int ret = image_open(img, path, msg, sizeof(msg));

	if (!ret)
		return 0;
	/* image_open speaks of "kernel image PATH: ..."; the same checks apply, the noun does not. */
	if (strncmp(msg, kprefix, sizeof(kprefix) - 1) == 0)
		return boot_fail(err, errlen, ret, "initrd %s", msg + sizeof(kprefix) - 1);
	return boot_fail(err, errlen, ret, "initrd %s: %s", path, msg);
}

/* Highest page-aligned start of `size` bytes ending at or below `top`, at or above `floor`; 0 if none. */
static uint64_t highest_fit(uint64_t floor, uint64_t top, uint64_t size)
{
	uint64_t a;

	if (top < floor || size > top - floor)
		return 0;
	a = (top - size) & ~(PAGE - 1);
	return a >= floor ? a : 0;
}

/*
 * boot.rst ("initrd_addr_max") asks only that the initrd end at or below
 * the limit; Linux and other loaders (GRUB, QEMU, Firecracker) put it as
 * high as possible, out of the kernel's way while it decompresses and
 * allocates early. The kernel range is its whole init_size window, so the
 * initrd never lies where the decompressor writes.
 */
int initrd_place(struct kernel *k, const struct gmem *mem, uint64_t limit, char *err, size_t errlen)
{
	uint64_t size = k->initrd.size, top = gmem_low_size(mem), kend = (k->kernel_end + PAGE - 1) & ~(PAGE - 1);
	uint64_t a;

	k->initrd_addr = 0;
	if (!size)
		return 0;
	if (limit < top)
		top = limit;
	a = highest_fit(kend > LAYOUT_HIGH_RAM ? kend : LAYOUT_HIGH_RAM, top, size); /* above the kernel */
	if (!a && k->kernel_start > LAYOUT_HIGH_RAM)
		a = highest_fit(LAYOUT_HIGH_RAM, k->kernel_start < top ? k->kernel_start : top, size); /* below */
	if (!a)
		return boot_fail(err, errlen, -ENOMEM,
				 "initrd %s is %llu bytes (%llu MiB): no room for it in guest RAM below 0x%llx%s "
				 "outside the kernel [0x%llx, 0x%llx) and the first MiB (--memory is %llu MiB; "
				 "raise it)",
				 k->initrd_name, (ull)size, (ull)((size + (1 << 20) - 1) >> 20), (ull)top,
				 top < gmem_low_size(mem) ? " (the kernel's initrd_addr_max)" : "",
				 (ull)k->kernel_start, (ull)k->kernel_end, (ull)(mem->size >> 20));
	k->initrd_addr = a;
	return 0;
}

int initrd_copy(const struct kernel *k, const struct gmem *mem)
{
	if (!k->initrd.size)
		return 0;
	return image_copy(&k->initrd, 0, k->initrd.size, mem, k->initrd_addr);
}
