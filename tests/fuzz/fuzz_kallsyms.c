/* fuzz_kallsyms.c - libFuzzer harness: ksyms_load (kallsyms found and decoded in guest memory) on arbitrary bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/kallsyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The input is the guest's memory (hostile: the guest writes it), copied to
 * a buffer of exactly its size at an 8-aligned guest address, so that ASan
 * reports any read past it. Invariants beyond "no crash, no sanitizer
 * report": a decoded table is sorted without duplicates, every name is
 * non-empty and at most KSYMS_NAME_MAX - 1 bytes, every symbol is found by
 * its own address, the token table lies inside the input, and a refusal
 * leaves nothing allocated.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size ? size : 1);
	struct gspace_buf gb = {.p = buf, .len = size, .base = 0x1000000};
	struct gspace g;
	struct symtab t;
	struct ksyms_info info;
	char err[256];

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	gspace_of_buf(&g, &gb);
	if (ksyms_load(&g, 0, &t, &info, err, sizeof(err)) == 0) {
		if (info.token_table < gb.base || info.token_table - gb.base >= size || !t.n)
			abort();
		for (size_t i = 0; i < t.n; i++) {
			size_t n = strlen(t.s[i].name);

			if (!n || n >= KSYMS_NAME_MAX || (i && t.s[i - 1].addr >= t.s[i].addr))
				abort();
			if (symtab_find(&t, t.s[i].addr) != &t.s[i])
				abort();
		}
		symtab_free(&t);
	} else if (t.s || t.n) {
		abort();
	}
	free(buf);
	return 0;
}
