/* fuzz_symbols.c - libFuzzer harness: symtab_load_mem (ELF32/ELF64 .symtab or System.map) on arbitrary bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The input is copied to a buffer of exactly its size, so that ASan reports
 * any read past the end (the System.map parser once ran strcspn past an
 * mmap'd file). Invariants beyond "no crash, no sanitizer report": a loaded
 * table is sorted by address without duplicates, every name is non-empty,
 * and a lookup either fails or names a symbol.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size ? size : 1);
	struct symtab t;
	char err[512], out[600];

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (symtab_load_mem(&t, buf, size, "fuzz", err, sizeof(err)) == 0) {
		for (size_t i = 0; i < t.n; i++) {
			if (!t.s[i].name[0] || (i && t.s[i - 1].addr >= t.s[i].addr))
				abort();
			if (symtab_lookup(&t, t.s[i].addr, out, sizeof(out)) != 1 || !strstr(out, "+0x0"))
				abort();
		}
		symtab_free(&t);
	} else if (t.s || !strstr(err, "fuzz")) {
		abort(); /* a refusal frees everything and names the input */
	}
	free(buf);
	return 0;
}
