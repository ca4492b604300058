/*
 * fuzz_restore.c - libFuzzer harness: each device's snapshot restore hook (device.h) on arbitrary bytes, through
 * bus_restore over a bus holding one real device, built as vm_build.c builds it, with a fake context
 * (fuzz_vdev.h). The file around the section is well formed (the state file parser is fuzz_snapshot's): what is
 * fuzzed is what a crafted file with a valid checksum can make a device believe. A restore must refuse garbage
 * with -errno and leave the device as created; what it accepts must save back to the same bytes.
 *
 * Input: 1 byte choosing the device (mod FUZZ_NR_DEVICES, in the order of make_device), then the section body.
 * gen_restore_seeds.c writes each device's own saved state, with this harness's make_device.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/devices.h"
#include "brisk/log.h"
#include "brisk/virtio.h"
#include "fuzz_vdev.h"

#ifndef FUZZ_RESTORE_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
#endif

#define FUZZ_NR_DEVICES 8

/* Device `which` on v's bus, as vm_build.c creates it (no host files: outputs discarded, no input). */
static void make_device(struct fuzz_vm *v, unsigned which)
{
	const struct serial_opts o = {.out_fd = -1, .in_fd = -1};
	int err;

	switch (which) {
	case 0:
		err = serial8250_create(&v->ctx, &v->bus, &o, NULL);
		break;
	case 1:
		err = i8042_create(&v->ctx, &v->bus);
		break;
	case 2:
		err = cmos_create(&v->bus);
		break;
	case 3:
		err = debugexit_create(&v->ctx, &v->bus);
		break;
	case 4:
		err = bootmark_create(&v->bus, NULL);
		break;
	case 5:
		err = acpi_pm_create(&v->ctx, &v->bus);
		break;
	case 6:
		err = virtio_rng_create(&v->ctx, &v->bus, &v->win, 1 << 20);
		break;
	default:
		err = virtio_console_create_io(&v->ctx, &v->bus, &v->win, &o);
		break;
	}
	if (err)
		abort();
}

#ifndef FUZZ_RESTORE_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned which = size ? data[0] % FUZZ_NR_DEVICES : 0;
	struct snap_writer *w = snap_writer_new();
	struct snap_reader *r = NULL;
	const char *failed = NULL;
	struct fuzz_vm v, v2;
	char err[256];
	uint8_t *file;
	size_t len;

	log_set_level(LOG_ERROR);
	fuzz_vm_open(&v, 1 << 20);
	make_device(&v, which);
	if (!w || snap_section_begin(w, SNAP_TAG_DEVICE, 0, v.bus.device[0].ops->name) ||
	    snap_put(w, data + (size ? 1 : 0), size ? size - 1 : 0) || snap_section_end(w))
		abort();
	file = fuzz_snap_bytes(w, &len);
	if (snap_reader_open_mem(file, len, &r, err, sizeof(err)))
		abort(); /* the framing is ours: always valid */
	err[0] = 0;
	if (bus_restore(&v.bus, r, &failed, err, sizeof(err)) == 0) {
		/* Accepted: the device works from that state and saves back to what it restored. */
		struct evloop *keep = fuzz_loop;

		fuzz_loop_run(fuzz_loop, 4);
		fuzz_vm_open(&v2, 1 << 20);
		make_device(&v2, which);
		fuzz_snap_round_trip(&v.bus, &v2.bus);
		fuzz_vm_close(&v2);
		fuzz_loop = keep;
	} else if (!err[0]) {
		abort(); /* every refusal says why */
	}
	snap_reader_free(r);
	free(file);
	fuzz_vm_close(&v);
	return 0;
}
#endif
