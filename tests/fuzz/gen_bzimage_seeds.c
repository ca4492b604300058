/* gen_bzimage_seeds.c - writes valid bzImages of bzimage_builder.h (a few variants) into a corpus directory (argv[1]).
 */
#include <stddef.h>
#include <stdio.h>

#include "bzimage_builder.h"

static uint8_t img[BB_SIZE + 4 * 512];

static int save(const char *dir, const char *name, size_t len)
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
	n = fwrite(img, 1, len, f);
	return fclose(f) != 0 || n != len;
}

int main(int argc, char **argv)
{
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	bb_build(img);
	bad |= save(argv[1], "seed-bzimage", BB_SIZE);
	bb_build(img);
	bb_hdr(img)->relocatable_kernel = 0;
	bb_hdr(img)->pref_address = 0x100000;
	bad |= save(argv[1], "seed-bzimage-fixed", BB_SIZE);
	bb_build(img);
	bb_hdr(img)->initrd_addr_max = 0x1ffffff;
	bb_hdr(img)->cmdline_size = 16;
	bad |= save(argv[1], "seed-bzimage-limits", BB_SIZE);
	/* setup_sects 0 means 4: the protected-mode part starts at 5 * 512 */
	bb_build(img);
	memmove(img + 5 * 512, img + BB_SETUP_SIZE, BB_PM_SIZE);
	memset(img + BB_SETUP_SIZE, 0, 5 * 512 - BB_SETUP_SIZE);
	bb_hdr(img)->setup_sects = 0;
	bad |= save(argv[1], "seed-bzimage-sects0", 5 * 512 + BB_PM_SIZE);
	return bad;
}
