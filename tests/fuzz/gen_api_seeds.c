/*
 * gen_api_seeds.c - writes fuzz_api seeds into a corpus directory (argv[1]): one or more requests, each a method
 * byte (enum api_method), the path, a NUL, the body; a 0xff byte separates chained requests (see fuzz_api.c).
 */
#include <stdio.h>
#include <string.h>

#include "seed_save.h"

/* Methods as enum api_method numbers them. */
#define G   "\x00"
#define P   "\x01"
#define A   "\x02"
#define SEP "\xff"

static const struct {
	const char *name;
	const char *req; /* holds NULs: its length is sizeof the literal, minus its terminating NUL */
	size_t len;
} seeds[] = {
#define S(n, text)                                                                                                     \
	{                                                                                                              \
		n, text, sizeof(text) - 1                                                                              \
	}
    S("get-root", G "/\0"),
    S("get-version", G "/version\0"),
    S("get-machine", G "/machine-config\0"),
    S("get-vm-config", G "/vm/config\0"),
    S("put-boot-source", P "/boot-source\0{\"kernel_image_path\": \"/k\", \"boot_args\": \"console=ttyS0\"}"),
    S("put-machine", P "/machine-config\0{\"vcpu_count\": 2, \"mem_size_mib\": 256, \"smt\": false}"),
    S("patch-machine", A "/machine-config\0{\"mem_size_mib\": 64}"),
    S("put-drive", P "/drives/rootfs\0{\"drive_id\": \"rootfs\", \"path_on_host\": \"/d\", \"is_root_device\": true, "
		     "\"is_read_only\": false}"),
    S("patch-drive", A "/drives/rootfs\0{\"drive_id\": \"rootfs\", \"path_on_host\": \"/e\"}"),
    S("put-net", P "/network-interfaces/eth0\0{\"iface_id\": \"eth0\", \"host_dev_name\": \"tap0\", "
		   "\"guest_mac\": \"06:00:ac:10:00:02\"}"),
    S("patch-net", A "/network-interfaces/eth0\0{\"iface_id\": \"eth0\"}"),
    S("put-vsock", P "/vsock\0{\"guest_cid\": 3, \"uds_path\": \"v.sock\"}"),
    S("put-entropy", P "/entropy\0{\"rate_limiter\": {\"bandwidth\": {\"size\": 1000, \"refill_time\": 100}}}"),
    S("put-cpu-config", P "/cpu-config\0{\"kvm_capabilities\": [\"!7\"], \"cpuid_modifiers\": [{\"leaf\": \"0x1\", "
			  "\"subleaf\": \"0x0\", \"flags\": 0, \"modifiers\": [{\"register\": \"ecx\", \"bitmap\": "
			  "\"0bxxxxxxxxxxxxxxxxxxxxxxxxxxxx_0x01\"}]}], \"msr_modifiers\": [{\"addr\": \"0x10a\", "
			  "\"bitmap\": \"0b1x0\"}]}" SEP G "/machine-config\0"),
    S("machine-template", P "/machine-config\0{\"vcpu_count\": 1, \"mem_size_mib\": 128, \"cpu_template\": "
			    "\"T2A\"}" SEP P "/cpu-config\0{}" SEP A "/machine-config\0{\"cpu_template\": \"None\"}"),
    S("put-logger", P "/logger\0{\"log_path\": \"log\", \"level\": \"Debug\", \"show_level\": true}"),
    S("put-metrics", P "/metrics\0{\"metrics_path\": \"metrics\"}"),
    S("metrics-flush", P "/metrics\0{\"metrics_path\": \"m\"}" SEP P "/actions\0{\"action_type\": \"FlushMetrics\"}"),
    S("start-empty", P "/actions\0{\"action_type\": \"InstanceStart\"}"),
    S("start-configured", P "/boot-source\0{\"kernel_image_path\": \"/k\"}" SEP P
			    "/machine-config\0{\"vcpu_count\": 1, \"mem_size_mib\": 128}" SEP P
			    "/drives/d\0{\"drive_id\": \"d\", \"path_on_host\": \"/d\", \"is_root_device\": true}" SEP P
			    "/actions\0{\"action_type\": \"InstanceStart\"}" SEP G "/vm/config\0"),
    S("ctrl-alt-del", P "/actions\0{\"action_type\": \"SendCtrlAltDel\"}"),
    S("pause", A "/vm\0{\"state\": \"Paused\"}"),
    S("resume", A "/vm\0{\"state\": \"Resumed\"}"),
    S("snapshot-create", P "/snapshot/create\0{\"snapshot_type\": \"Full\", \"snapshot_path\": \"s\", "
			   "\"mem_file_path\": \"m\", \"version\": \"1.0.0\"}"),
    S("snapshot-load", P "/snapshot/load\0{\"snapshot_path\": \"s\", \"mem_backend\": {\"backend_type\": \"File\", "
			 "\"backend_path\": \"m\"}, \"resume_vm\": true}"),
    S("snapshot-load-old", P "/snapshot/load\0{\"snapshot_path\": \"s\", \"mem_file_path\": \"m\", "
			     "\"enable_diff_snapshots\": false, \"network_overrides\": []}"),
    S("configured-load", P "/vsock\0{\"guest_cid\": 3, \"uds_path\": \"v\"}" SEP P
			   "/snapshot/load\0{\"snapshot_path\": \"s\", \"mem_file_path\": \"m\"}"),
    S("mmds", P "/mmds\0{}"),
    S("balloon", G "/balloon/statistics\0"),
    S("delete-unknown", "\x03/nothing\0"),
#undef S
};

int main(int argc, char **argv)
{
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
		bad |= seed_save(argv[1], seeds[i].name, seeds[i].req, seeds[i].len);
	return bad;
}
