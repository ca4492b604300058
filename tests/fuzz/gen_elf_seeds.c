/* gen_elf_seeds.c - writes the valid ELF images of elf_builder.h into a corpus directory (argv[1]). */
#include <stddef.h>
#include <stdio.h>

#include "elf_builder.h"
#include "seed_save.h"

static uint8_t img[EB_SIZE];

int main(int argc, char **argv)
{
	uint64_t entry = EB_ENTRY;
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	eb_elf64(img);
	bad |= seed_save(argv[1], "seed-elf64-pvh", img, sizeof(img));
	eb_elf32(img);
	bad |= seed_save(argv[1], "seed-elf32-pvh", img, sizeof(img));
	/* Linux's form: an 8-byte descriptor (_ASM_PTR on x86-64) in an 8-aligned note segment. */
	eb_elf64(img);
	img[EB_NOTE_OFF + 4] = 8;
	memcpy(img + EB_NOTE_OFF + 16, &entry, 8);
	img[sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr) + offsetof(Elf64_Phdr, p_filesz)] = 24;
	img[sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr) + offsetof(Elf64_Phdr, p_align)] = 8;
	bad |= seed_save(argv[1], "seed-elf64-pvh-desc8", img, sizeof(img));
	return bad;
}
