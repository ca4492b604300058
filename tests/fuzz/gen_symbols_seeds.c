/* gen_symbols_seeds.c - writes ELF32/ELF64 symbol-table files and a System.map into a corpus directory (argv[1]). */
#include <stdio.h>
#include <string.h>

#include "symtab_builder.h"

static int save(const char *dir, const char *name, const void *data, size_t len)
{
	char path[512];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f) {
		perror(path);
		return 1;
	}
	n = fwrite(data, 1, len, f);
	return fclose(f) != 0 || n != len;
}

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
	bad |= save(argv[1], "seed-elf32-symtab", img, sizeof(img));
	sb_build(img, 64);
	bad |= save(argv[1], "seed-elf64-symtab", img, sizeof(img));
	bad |= save(argv[1], "seed-system-map", map, strlen(map));
	return bad;
}
