/* gen_bzimage_seeds.c - writes valid bzImages of bzimage_builder.h (a few variants) into a corpus directory (argv[1]).
 */
#include <stddef.h>
#include <stdio.h>

#include "bzimage_builder.h"
#include "seed_save.h"

static uint8_t img[BB_SIZE + 4 * 512];

int main(int argc, char **argv)
{
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	bb_build(img);
	bad |= seed_save(argv[1], "seed-bzimage", img, BB_SIZE);
	bb_build(img);
	bb_hdr(img)->relocatable_kernel = 0;
	bb_hdr(img)->pref_address = 0x100000;
	bad |= seed_save(argv[1], "seed-bzimage-fixed", img, BB_SIZE);
	bb_build(img);
	bb_hdr(img)->initrd_addr_max = 0x1ffffff;
	bb_hdr(img)->cmdline_size = 16;
	bad |= seed_save(argv[1], "seed-bzimage-limits", img, BB_SIZE);
	/* setup_sects 0 means 4: the protected-mode part starts at 5 * 512 */
	bb_build(img);
	memmove(img + 5 * 512, img + BB_SETUP_SIZE, BB_PM_SIZE);
	memset(img + BB_SETUP_SIZE, 0, 5 * 512 - BB_SETUP_SIZE);
	bb_hdr(img)->setup_sects = 0;
	bad |= seed_save(argv[1], "seed-bzimage-sects0", img, 5 * 512 + BB_PM_SIZE);
	return bad;
}
