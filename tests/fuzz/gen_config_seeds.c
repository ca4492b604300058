/*
 * gen_config_seeds.c - writes fuzz_config seeds into a corpus directory (argv[1]): a selector byte (0: config
 * file, 1..11: one API body, see fuzz_config.c) followed by a valid JSON text for it.
 */
#include <stdio.h>
#include <string.h>

#include "seed_save.h"

static const struct {
	unsigned char sel;
	const char *name, *json;
} seeds[] = {
    {0, "seed-config-full",
     "{\"boot-source\": {\"kernel_image_path\": \"/k/vmlinux\", \"boot_args\": \"console=ttyS0\", \"initrd_path\": "
     "\"/k/initrd\"}, \"drives\": [{\"drive_id\": \"rootfs\", \"path_on_host\": \"/d/r.ext4\", \"is_root_device\": "
     "true, \"is_read_only\": true, \"partuuid\": \"abcd-01\", \"cache_type\": \"Writeback\", \"io_engine\": "
     "\"Async\", \"rate_limiter\": null, \"socket\": null}, {\"drive_id\": \"d1\", \"path_on_host\": \"/d/1\", "
     "\"is_root_device\": false}], \"machine-config\": {\"vcpu_count\": 2, \"mem_size_mib\": 256, \"smt\": true, "
     "\"track_dirty_pages\": false, \"cpu_template\": \"None\", \"huge_pages\": \"2M\"}, \"network-interfaces\": "
     "[{\"iface_id\": \"eth0\", \"host_dev_name\": \"tap0\", \"guest_mac\": \"02:00:00:00:00:05\", \"mtu\": null, "
     "\"rx_rate_limiter\": null, \"tx_rate_limiter\": null}], \"vsock\": {\"vsock_id\": \"v\", \"guest_cid\": 7, "
     "\"uds_path\": \"/tmp/v.sock\"}, \"entropy\": {\"rate_limiter\": {\"bandwidth\": {\"size\": 4096, "
     "\"refill_time\": 1000, \"one_time_burst\": 0}, \"ops\": null}}, \"logger\": {\"log_path\": \"/tmp/l\", "
     "\"level\": \"Warning\", \"show_level\": true, \"show_log_origin\": false, \"module\": \"api\"}, \"metrics\": "
     "{\"metrics_path\": \"/tmp/m\", \"emit_id\": true}, \"balloon\": null, \"mmds-config\": null, \"pmem\": [], "
     "\"cpu-config\": null, \"memory-hotplug\": null}"},
    {0, "seed-config-min", "{\"boot-source\": {\"kernel_image_path\": \"/k\"}}"},
    {1, "seed-boot-source", "{\"kernel_image_path\": \"/k\", \"boot_args\": \"reboot=k\", \"initrd_path\": \"/i\"}"},
    {2, "seed-machine-put",
     "{\"vcpu_count\": 4, \"mem_size_mib\": 512, \"smt\": true, \"track_dirty_pages\": false, \"cpu_template\": "
     "\"None\", \"huge_pages\": \"Transparent\"}"},
    {3, "seed-machine-patch", "{\"vcpu_count\": 254, \"mem_size_mib\": 16}"},
    {4, "seed-drive-put",
     "{\"drive_id\": \"x\", \"path_on_host\": \"/d\", \"is_root_device\": true, \"partuuid\": \"0eaa91a0-01\"}"},
    {5, "seed-drive-new", "{\"drive_id\": \"y_2\", \"path_on_host\": \"/e\", \"is_root_device\": false}"},
    {6, "seed-drive-patch", "{\"drive_id\": \"x\", \"path_on_host\": \"/d2\", \"rate_limiter\": null}"},
    {7, "seed-net-put", "{\"iface_id\": \"x\", \"host_dev_name\": \"tap1\", \"guest_mac\": \"aa:fc:00:00:00:02\"}"},
    {8, "seed-vsock", "{\"guest_cid\": 4294967294, \"uds_path\": \"/tmp/v\", \"vsock_id\": \"vs\"}"},
    {9, "seed-entropy", "{\"rate_limiter\": {\"bandwidth\": {\"size\": 1000, \"refill_time\": 100}}}"},
    {10, "seed-logger", "{\"level\": \"trace\", \"log_path\": \"/l\", \"show_log_origin\": true}"},
    {11, "seed-metrics", "{\"metrics_path\": \"/m\"}"},
};

int main(int argc, char **argv)
{
	static char buf[4096];
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		size_t n = strlen(seeds[i].json);

		if (n + 1 > sizeof(buf))
			return 1;
		buf[0] = (char)seeds[i].sel;
		memcpy(buf + 1, seeds[i].json, n);
		bad |= seed_save(argv[1], seeds[i].name, buf, n + 1);
	}
	return bad;
}
