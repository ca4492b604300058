/* gen_elf_seeds.c - writes the valid ELF images of elf_builder.h into a corpus directory (argv[1]). */
#include <stddef.h>
#include <stdio.h>

#include "elf_builder.h"

static uint8_t img[EB_SIZE];

static int save(const char *dir, const char *name)
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
	n = fwrite(img, 1, EB_SIZE, f);
	return fclose(f) != 0 || n != EB_SIZE;
}

int main(int argc, char **argv)
{
	uint64_t entry = EB_ENTRY;
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	eb_elf64(img);
	bad |= save(argv[1], "seed-elf64-pvh");
	eb_elf32(img);
	bad |= save(argv[1], "seed-elf32-pvh");
	/* Linux's form: an 8-byte descriptor (_ASM_PTR on x86-64) in an 8-aligned note segment. */
	eb_elf64(img);
	img[EB_NOTE_OFF + 4] = 8;
	memcpy(img + EB_NOTE_OFF + 16, &entry, 8);
	img[sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr) + offsetof(Elf64_Phdr, p_filesz)] = 24;
	img[sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr) + offsetof(Elf64_Phdr, p_align)] = 8;
	bad |= save(argv[1], "seed-elf64-pvh-desc8");
	return bad;
}
