/* fuzz_elf.c - libFuzzer harness: elf_parse on arbitrary bytes and, when it accepts them, elf_load into 16 MiB. */
#include <stdint.h>
#include <stdlib.h>

#include "brisk/boot.h"
#include "brisk/log.h"
#include "brisk/mem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Invariants checked beyond "no crash, no sanitizer report": an accepted
 * image has 1..ELF_MAX_SEGMENTS segments whose file ranges lie inside the
 * input, and a PVH entry below 4 GiB; elf_load either succeeds or explains.
 */
static void check_info(const struct elf_info *info, size_t size)
{
	if (info->nr_segments == 0 || info->nr_segments > ELF_MAX_SEGMENTS)
		abort();
	for (unsigned i = 0; i < info->nr_segments; i++) {
		const struct elf_segment *s = &info->seg[i];

		if (s->offset > size || s->filesz > size - s->offset || s->filesz > s->memsz)
			abort();
	}
	if (info->has_pvh && info->pvh_entry > UINT32_MAX)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gmem mem; /* created once: 16 MiB, the smallest VM brisk allows */
	struct elf_info info;
	char err[BOOT_ERR_MAX];

	if (!mem.base) {
		log_set_level(LOG_ERROR);
		if (gmem_init(&mem, 16ULL << 20, 0))
			abort();
	}
	err[0] = 0;
	if (elf_parse(data, size, &info, err, sizeof(err)) != 0) {
		if (!err[0])
			abort(); /* every rejection must say why */
		return 0;
	}
	check_info(&info, size);
	err[0] = 0;
	if (elf_load(&info, &(struct image){.data = data, .size = size}, &mem, err, sizeof(err)) != 0 && !err[0])
		abort();
	return 0;
}
