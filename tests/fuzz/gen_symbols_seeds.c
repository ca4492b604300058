/* gen_symbols_seeds.c - writes ELF32/ELF64 symbol-table files and a System.map into a corpus directory (argv[1]). */
#include <stdio.h>
#include <string.h>

#include "seed_save.h"
#include "symtab_builder.h"

int main(int argc, char **argv)
{
	static const char map[] = "ffffffff81000000 T _text\n"
				  "ffffffff81000000 T startup_64\n"
				  "ffffffff81001000 t probe_hypervisor\n"
				  "ffffffff81001200 D some_data\n"
				  "ffffffff81002000 W weak_fn\r\n"
				  "ffffffff81003000 t kvm_fn\t[kvm]\n"
				  "ffffffff82000000 T _etext";
	uint8_t img[SB_SIZE];
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	sb_build(img, 32);
	bad |= seed_save(argv[1], "seed-elf32-symtab", img, sizeof(img));
	sb_build(img, 64);
	bad |= seed_save(argv[1], "seed-elf64-symtab", img, sizeof(img));
	bad |= seed_save(argv[1], "seed-system-map", map, strlen(map));
	return bad;
}
