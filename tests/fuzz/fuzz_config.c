/*
 * fuzz_config.c - libFuzzer harness: Firecracker-compatible configuration (fc_config.h) on arbitrary bytes, as a
 * --config-file text and as each API body.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/fc_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the API bodies are applied on top of: a drive, an interface, a vsock, so replacements are reached too. */
static const char base[] = "{\"boot-source\": {\"kernel_image_path\": \"/k\"},"
			   " \"drives\": [{\"drive_id\": \"x\", \"path_on_host\": \"/d\", \"is_root_device\": true}],"
			   " \"network-interfaces\": [{\"iface_id\": \"x\", \"host_dev_name\": \"tap0\","
			   " \"guest_mac\": \"02:00:00:00:00:01\"}],"
			   " \"machine-config\": {\"vcpu_count\": 2, \"mem_size_mib\": 128, \"smt\": true}}";

/* Applies body `text` as object `sel`; the drive and interface bodies go to id "x", then to the body's own id. */
static int apply(struct fc_vm *f, unsigned sel, const char *text, size_t len, char *err, size_t errlen)
{
	switch (sel) {
	case 0:
		return fc_vm_load_config_json(f, text, len, err, errlen);
	case 1:
		return fc_put_boot_source(f, text, len, err, errlen);
	case 2:
		return fc_put_machine_config(f, text, len, err, errlen);
	case 3:
		return fc_patch_machine_config(f, text, len, err, errlen);
	case 4:
		return fc_put_drive(f, "x", text, len, err, errlen);
	case 5:
		return fc_put_drive(f, NULL, text, len, err, errlen);
	case 6: {
		static struct fc_drive_patch p; /* parsed only: a PATCH applies to a running VM */

		return fc_patch_drive(f, "x", text, len, &p, err, errlen);
	}
	case 7:
		return fc_put_net(f, NULL, text, len, err, errlen);
	case 8:
		return fc_put_vsock(f, text, len, err, errlen);
	case 9:
		return fc_put_entropy(f, text, len, err, errlen);
	case 10:
		return fc_put_logger(f, text, len, err, errlen);
	default:
		return fc_put_metrics(f, text, len, err, errlen);
	}
}

/* GET /vm/config's text loads back as a config file and reads the same: abort otherwise. */
static void round_trip(const struct fc_vm *f, const char *json)
{
	struct fc_vm *g = malloc(sizeof(*g));
	char err[512], *again;

	if (!g)
		return;
	fc_vm_init(g);
	if (fc_vm_load_config_json(g, json, strlen(json), err, sizeof(err)) != 0)
		abort();
	again = fc_vm_to_json(g);
	if (!again || strcmp(json, again) != 0 || g->cfg.nr_disks != f->cfg.nr_disks || g->cfg.cpus != f->cfg.cpus)
		abort();
	free(again);
	fc_vm_free(g);
	free(g);
}

/*
 * The first byte picks the target (config file or one of the bodies), the
 * rest is its text, copied to a buffer of exactly its size so that ASan sees
 * any read past the end. Invariants beyond "no crash, no sanitizer report":
 * a refusal fills err and leaves the configuration as it was (its GET text
 * is unchanged); an acceptance round-trips through GET /vm/config.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fc_vm *f;
	char err[512], *before, *after;
	char *buf;
	unsigned sel;
	int ret;

	if (size < 1)
		return 0;
	sel = data[0] % 12;
	buf = malloc(size - 1 ? size - 1 : 1);
	f = malloc(sizeof(*f));
	if (!buf || !f) {
		free(buf);
		free(f);
		return 0;
	}
	memcpy(buf, data + 1, size - 1);
	fc_vm_init(f);
	if (sel && fc_vm_load_config_json(f, base, strlen(base), err, sizeof(err)) != 0)
		abort();
	before = fc_vm_to_json(f);
	err[0] = '\0';
	ret = apply(f, sel, buf, size - 1, err, sizeof(err));
	after = fc_vm_to_json(f);
	if (!before || !after)
		abort();
	if (ret != 0 && (!err[0] || strcmp(before, after) != 0 || strchr(err, '\n')))
		abort();
	if (ret == 0)
		round_trip(f, after);
	free(before);
	free(after);
	fc_vm_free(f);
	free(f);
	free(buf);
	return 0;
}
