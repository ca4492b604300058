/* gen_kallsyms_seeds.c - writes kallsyms tables (both 6.1 layouts, both offset encodings) into a corpus (argv[1]). */
#include <stdio.h>

#include "kallsyms_builder.h"
#include "seed_save.h"

int main(int argc, char **argv)
{
	static const struct kb_sym syms[] = {
	    {0x0, "Afixed_percpu_data"},
	    {0xffffffff81000000ull, "T_text"},
	    {0xffffffff8107e590ull, "tnative_cpuid"},
	    {0xffffffff8107e910ull, "tnative_write_msr"},
	    {0xffffffff81e01d32ull, "T_etext"},
	    {0xffffffff82a00000ull, "Dsome_data"},
	};
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	for (int apc = 0; apc < 2; apc++)
		for (int seqs = 0; seqs < 2; seqs++) {
			struct kb_opts o = {.absolute_percpu = apc, .seqs = seqs, .lead = 16, .tail = 8};
			char name[64];
			size_t len;
			uint8_t *b = kb_build(syms, sizeof(syms) / sizeof(syms[0]), &o, &len);

			snprintf(name, sizeof(name), "seed-kallsyms-apc%d-seqs%d", apc, seqs);
			bad |= !b || seed_save(argv[1], name, b, len);
			free(b);
		}
	return bad;
}
