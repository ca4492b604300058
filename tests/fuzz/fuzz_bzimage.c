/* fuzz_bzimage.c - libFuzzer harness: bzimage_parse and kernel_open's detection on arbitrary bytes, then kernel_load.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/arch/x86/x86_boot.h"
#include "brisk/boot.h"
#include "brisk/kernel.h"
#include "brisk/layout.h"
#include "brisk/log.h"
#include "brisk/mem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_RAM (64ULL << 20) /* room for a kernel at the usual 16 MiB pref_address */

/*
 * Invariants of an accepted bzImage beyond "no crash, no sanitizer report":
 * the header and both parts lie inside the input, and the chosen window is
 * at or above 1 MiB, page-aligned, covers init_size and ends below the hole.
 */
static void check_bz(const struct bzimage_info *bz, size_t size)
{
	if (bz->version < 0x020c || bz->hdr_len < 0x268 - 0x1f1 || bz->hdr_len > 0x290 - 0x1f1 ||
	    bz->setup_size + bz->pm_size != size || bz->pm_size == 0 || bz->setup_size > 0x8000)
		abort();
	if (bz->load_addr < LAYOUT_HIGH_RAM || (bz->load_addr & 0xfff) || bz->window < bz->init_size ||
	    bz->window < bz->pm_size || bz->load_addr + bz->window > LAYOUT_MMIO_HOLE)
		abort();
	if (bz->kernel_alignment == 0 || (bz->kernel_alignment & (bz->kernel_alignment - 1)))
		abort();
}

/* After a successful load: the entry and the initrd are where the rules put them. */
static void check_loaded(const struct kernel *k, const struct boot_entry *e, const struct gmem *mem)
{
	if (k->format == KERNEL_BZIMAGE && (e->mode != BOOT_LONG64 || e->rip != k->bz.load_addr + 0x200))
		abort();
	if (k->initrd.size &&
	    ((k->initrd_addr & 0xfff) || k->initrd_addr < LAYOUT_HIGH_RAM ||
	     k->initrd_addr + k->initrd.size > gmem_low_size(mem) ||
	     !LAYOUT_DISJOINT(k->initrd_addr, k->initrd.size, k->kernel_start, k->kernel_end - k->kernel_start)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gmem mem; /* created once */
	static const uint8_t initrd[0x1800] = {1};
	struct bzimage_info bz;
	struct kernel k;
	struct boot_entry e;
	char err[BOOT_ERR_MAX];
	struct kernel_files f = {.kernel_data = data, .kernel_size = size, .kernel_name = "fuzz"};

	if (!mem.base) {
		log_set_level(LOG_ERROR);
		if (gmem_init(&mem, FUZZ_RAM, 0))
			abort();
	}
	err[0] = 0;
	if (bzimage_parse(data, size, &bz, err, sizeof(err)) == 0)
		check_bz(&bz, size);
	else if (!err[0])
		abort(); /* every rejection must say why */
	/* The initrd rides along on half the inputs, chosen by a byte of the input. */
	if (size && (data[size - 1] & 1)) {
		f.initrd_data = initrd;
		f.initrd_size = sizeof(initrd);
	}
	err[0] = 0;
	if (kernel_open(&k, &f, err, sizeof(err)) != 0) {
		if (!err[0] || k.image.size)
			abort();
		return 0;
	}
	err[0] = 0;
	if (kernel_load(&k, &mem, size > 2 && (data[size - 2] & 1) ? NULL : "console=ttyS0", &e, err, sizeof(err)) == 0)
		check_loaded(&k, &e, &mem);
	else if (!err[0])
		abort();
	kernel_close(&k);
	return 0;
}
