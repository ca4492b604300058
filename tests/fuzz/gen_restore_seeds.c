/*
 * gen_restore_seeds.c - seed inputs for fuzz_restore: each device's own saved state (fresh, and for the virtio
 * devices also after a driver's bring-up with DRIVER_OK), as fuzz_restore's input: the device's number, then the
 * section body bus_save wrote. Built with fuzz_restore.c's make_device and the same device sources.
 * Usage: gen_restore_seeds DIR.
 */
#define FUZZ_RESTORE_NO_MAIN
#include "fuzz_restore.c"

#include <stdio.h>

#include "seed_save.h"

/* Saves v's one device and writes [which, body...] as DIR/NAME. */
static int save_seed(struct fuzz_vm *v, unsigned which, const char *dir, const char *name)
{
	struct snap_writer *w = snap_writer_new();
	struct snap_reader *r = NULL, *sec;
	static uint8_t seed[1 + 65536];
	const char *failed;
	uint8_t *file;
	size_t len, body;
	char err[256];

	if (!w || bus_save(&v->bus, w, &failed))
		return 1;
	file = fuzz_snap_bytes(w, &len);
	if (snap_reader_open_mem(file, len, &r, err, sizeof(err)) || snap_section(r, SNAP_TAG_DEVICE, 0, NULL, &sec) ||
	    (body = snap_remaining(sec)) > 65536 || snap_get(sec, seed + 1, body))
		return 1;
	seed[0] = (uint8_t)which;
	snap_reader_free(r);
	free(file);
	return seed_save(dir, name, seed, 1 + body);
}

int main(int argc, char **argv)
{
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_restore_seeds DIR\n");
		return 2;
	}
	for (unsigned i = 0; i < FUZZ_NR_DEVICES; i++) {
		struct fuzz_vm v;
		char name[32];

		fuzz_vm_open(&v, 1 << 20);
		make_device(&v, i);
		snprintf(name, sizeof(name), "dev%u-fresh", i);
		bad |= save_seed(&v, i, argv[1], name);
		if (i >= 6) { /* virtio: a driver's bring-up, queues at FUZZ_Q(q) */
			fuzz_negotiate(&v, (1ull << VIRTIO_F_EVENT_IDX) | (1ull << VIRTIO_F_INDIRECT_DESC));
			for (unsigned q = 0; q < (i == 6 ? 1u : 2u); q++)
				fuzz_queue(&v, q, 16, FUZZ_Q(q));
			fuzz_wr(&v, 0x070, 15);
			snprintf(name, sizeof(name), "dev%u-driver-ok", i);
			bad |= save_seed(&v, i, argv[1], name);
		}
		fuzz_vm_close(&v);
	}
	return bad;
}
