/* seed_save.h - writes one seed file into a corpus directory; shared by the gen_*_seeds.c programs. */
#ifndef BRISK_SEED_SAVE_H
#define BRISK_SEED_SAVE_H

#include <stddef.h>
#include <stdio.h>

/* DIR/NAME := data[0..len). Returns 0, or 1 after printing why. */
static inline int seed_save(const char *dir, const char *name, const void *data, size_t len)
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

#endif
