/* fc_config.h - Firecracker-compatible configuration: the API's JSON bodies and --config-file, into struct vm_config.
 */
#ifndef BRISK_FC_CONFIG_H
#define BRISK_FC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/json_strict.h"
#include "brisk/mmds.h"

#include "vm.h"

/*
 * Shapes follow Firecracker's API (src/firecracker/swagger/firecracker.yaml,
 * src/vmm/src/vmm_config/ *.rs): the same object and field names, required
 * fields and defaults. What brisk cannot do (vhost-user
 * drives) is refused with a message rather than ignored. Every value is untrusted: type, range and
 * length are checked, unknown and duplicate keys refused.
 */

#define FC_ID_MAX	64 /* drive_id, iface_id: 1..64 of [A-Za-z0-9_]; vsock_id kept for GET up to 64 */
#define FC_PARTUUID_MAX 64 /* partuuid: 1..64 of [A-Za-z0-9-/=] (it lands on the command line) */

/* Drive cache_type: both map to brisk's writeback cache (struct fc_drive). */
enum fc_cache_type { FC_CACHE_UNSAFE = 0, FC_CACHE_WRITEBACK };
/* Drive io_engine: kept for GET; brisk's block backend is the same for both. */
enum fc_io_engine { FC_IO_SYNC = 0, FC_IO_ASYNC };
/* machine-config huge_pages: "2M" is cfg.hugetlbfs (2 MiB hugetlbfs pages), "Transparent" cfg.hugepages (THP). */
enum fc_huge_pages { FC_HUGE_NONE = 0, FC_HUGE_2M, FC_HUGE_TRANSPARENT };
/* logger level, in Firecracker's spelling. */
enum fc_log_level { FC_LOG_ERROR = 0, FC_LOG_WARNING, FC_LOG_INFO, FC_LOG_DEBUG, FC_LOG_TRACE, FC_LOG_OFF };

/* Firecracker's identity and settings of drive i; cfg.disk[i] holds the rest. */
struct fc_drive {
	char id[FC_ID_MAX + 1];
	bool is_root_device;
	char partuuid[FC_PARTUUID_MAX + 1]; /* empty: none */
	enum fc_cache_type cache_type;
	enum fc_io_engine io_engine;
};

/* Firecracker's identity of network interface i; cfg.net[i] holds the rest. */
struct fc_net {
	char id[FC_ID_MAX + 1];
};

/* PUT /logger, stored; the API server wires the output. */
struct fc_logger {
	bool configured;
	char *log_path; /* NULL: none */
	enum fc_log_level level;
	bool show_level, show_log_origin;
	char *module; /* NULL: none */
};

/* PUT /metrics, stored; the API server wires the output. */
struct fc_metrics {
	bool configured;
	char *metrics_path;
	bool emit_id;
};

/*
 * Everything the API accumulates before InstanceStart. cfg's strings point
 * at the heap strings below, never into the struct, so a struct fc_vm may be
 * moved with memcpy; it may not be copied (both copies would own them).
 */
struct fc_vm {
	struct vm_config cfg;
	bool boot_source_set;
	char *kernel, *initrd, *cmdline, *cmdline_append, *cpu_template; /* owned; what cfg points at */
	/* PUT /cpu-config or --config-file's "cpu-config" (owned, cfg.fc_template); NULL: none. At most one of it
	 * and a static template in cpu_template is set: the last one given wins, as in Firecracker. */
	struct cpuid_fc_template *custom_template;
	bool smt, track_dirty_pages; /* track_dirty_pages: as given (GET); cfg.track_dirty */
	enum fc_huge_pages huge_pages;
	struct fc_drive drive[VM_MAX_DISKS]; /* parallel to cfg.disk[], the root device first */
	struct fc_net net[VM_MAX_NETS];	     /* parallel to cfg.net[] */
	char vsock_id[FC_ID_MAX + 1];	     /* empty: not given (deprecated in Firecracker, kept for GET) */
	uint64_t rng_size, rng_refill_ms;    /* entropy bandwidth bucket as given; 0: none given */
	struct fc_logger logger;
	struct fc_metrics metrics;
	struct mmds_config mmds; /* PUT /mmds/config; made live (mmds_set_config) by fc_vm_finalize */
	/*
	 * Open what a body names (kernel, initrd, drive file, tap) and refuse it there when it cannot be, as
	 * Firecracker's PUTs do: set for the API's configuration; a config file's is checked when the VM is built,
	 * a snapshot's saved description never.
	 */
	bool check_files;
};

/* Starts `f` empty: config_defaults, no boot source, no devices. */
void fc_vm_init(struct fc_vm *f);
/* Frees what `f` owns; `f` may be fc_vm_init'ed again. */
void fc_vm_free(struct fc_vm *f);

/*
 * The API bodies. Each parses `len` bytes of JSON text (one object, nothing
 * but white space after it) and applies it to `f`. Returns 0; or -EINVAL
 * (-ENOMEM) with `f` unchanged and a one-line message in `err` naming the
 * object and the key ("machine-config: vcpu_count: 0 is out of range
 * 1..254", "drives: unknown key 'foo'", "boot-source: bad JSON at byte 17:
 * ...").
 */
/* PUT /boot-source: kernel_image_path (required), boot_args, initrd_path; replaces the boot source. */
__attribute__((warn_unused_result)) int fc_put_boot_source(struct fc_vm *f, const char *body, size_t len, char *err,
							   size_t errlen);
/*
 * PUT /machine-config replaces (vcpu_count and mem_size_mib required, the
 * rest back to defaults); PATCH updates the given fields (at least one).
 * vcpu_count 1..CONFIG_MAX_CPUS; smt: topology threads=2 (vcpu_count 1 or
 * even); track_dirty_pages (cfg.track_dirty); cpu_template one of Firecracker's
 * static templates (C3, T2, T2S, T2CL, T2A: cfg.cpu_template, checked
 * against the host at InstanceStart) or "None" (no template, a custom one
 * dropped), absent: kept; huge_pages "None", "2M" (cfg.hugetlbfs) or
 * "Transparent" (cfg.hugepages); either needs an even mem_size_mib.
 */
__attribute__((warn_unused_result)) int fc_put_machine_config(struct fc_vm *f, const char *body, size_t len, char *err,
							      size_t errlen);
__attribute__((warn_unused_result)) int fc_patch_machine_config(struct fc_vm *f, const char *body, size_t len,
								char *err, size_t errlen);
/*
 * PUT /drives/{id}: adds drive `id`, or replaces the drive with that id in
 * place. `id` is the path's id; NULL takes the body's drive_id (the config
 * file). At most one root device, always cfg.disk[0] (/dev/vda); at most
 * VM_MAX_DISKS drives. rate_limiter into cfg.disk[].rl (a bucket that limits nothing
 * reads back as none).
 */
__attribute__((warn_unused_result)) int fc_put_drive(struct fc_vm *f, const char *id, const char *body, size_t len,
						     char *err, size_t errlen);
/* A PATCH /drives/{id} body, parsed (the API applies it to the running VM, then to `f`). */
struct fc_drive_patch {
	unsigned index;		     /* the drive's position in cfg.disk[] */
	char path[VM_DISK_PATH_MAX]; /* path_on_host; empty: not given */
	bool has_rl;		     /* rate_limiter given (not null) */
	bool has[2];		     /* its bandwidth, ops given: those replace the live buckets */
	struct rl_config rl;
};
/*
 * PATCH /drives/{id} (Firecracker's BlockDeviceUpdateConfig, post-boot only): drive_id (required, the
 * path's), path_on_host and/or rate_limiter; the drive must exist. Parses into *p; `f` is unchanged.
 */
__attribute__((warn_unused_result)) int fc_patch_drive(struct fc_vm *f, const char *id, const char *body, size_t len,
						       struct fc_drive_patch *p, char *err, size_t errlen);
/* A PATCH /network-interfaces/{id} body, parsed. */
struct fc_net_patch {
	unsigned index; /* the interface's position in cfg.net[] */
	bool rx_has[2], tx_has[2];
	struct rl_config rx, tx;
};
/* PATCH /network-interfaces/{id} (NetworkInterfaceUpdateConfig, post-boot only): iface_id, rx/tx_rate_limiter. */
__attribute__((warn_unused_result)) int fc_patch_net(struct fc_vm *f, const char *id, const char *body, size_t len,
						     struct fc_net_patch *p, char *err, size_t errlen);
/*
 * Firecracker's update_buckets on a configuration: a bucket given (has[0] bandwidth, has[1] ops)
 * replaces the one in `cur`, an absent one stays; a bucket that limits nothing reads back as none.
 */
void fc_rl_update(struct rl_config *cur, const struct rl_config *upd, const bool has[2]);
/*
 * PUT /network-interfaces/{id}: a tap device (host_dev_name) with an
 * optional guest_mac, unique among the interfaces; replaces the interface
 * with that id in place. `id` as for fc_put_drive. At most VM_MAX_NETS.
 * rx_rate_limiter, tx_rate_limiter into cfg.net[].rx_rl, tx_rl.
 */
__attribute__((warn_unused_result)) int fc_put_net(struct fc_vm *f, const char *id, const char *body, size_t len,
						   char *err, size_t errlen);
/*
 * PUT /cpu-config: Firecracker's custom CPU template (cpuid_fc_parse, messages prefixed "cpu-config: "),
 * replacing a static template or an earlier custom one. fc_set_custom_template installs a parsed one
 * (taking ownership).
 */
__attribute__((warn_unused_result)) int fc_put_cpu_config(struct fc_vm *f, const char *body, size_t len, char *err,
							  size_t errlen);
void fc_set_custom_template(struct fc_vm *f, struct cpuid_fc_template *t);
/* PUT /vsock: guest_cid 0..0xffffffff (as Firecracker), uds_path 1..VM_VSOCK_UDS_MAX bytes, vsock_id any string;
 * replaces. */
__attribute__((warn_unused_result)) int fc_put_vsock(struct fc_vm *f, const char *body, size_t len, char *err,
						     size_t errlen);
/*
 * PUT /entropy: rate_limiter any RateLimiterConfig, into cfg.rng_rl (bandwidth and ops buckets, one-time
 * burst); without a bandwidth bucket the device keeps VM_RNG_DEFAULT_RATE's. cfg.rng_rate: the bucket's
 * bytes per second (at least 1), or VM_RNG_DEFAULT_RATE.
 */
__attribute__((warn_unused_result)) int fc_put_entropy(struct fc_vm *f, const char *body, size_t len, char *err,
						       size_t errlen);
/*
 * PUT /mmds/config (fc_config_mmds.c): network_interfaces (required, ids of interfaces configured before),
 * version "V1"/"V2", ipv4_address (link-local, Firecracker's check), imds_compat; replaces f->mmds. The
 * semantic errors are Firecracker's messages ("MMMDS config error: ...").
 */
__attribute__((warn_unused_result)) int fc_put_mmds_config(struct fc_vm *f, const char *body, size_t len, char *err,
							   size_t errlen);
/*
 * PUT /balloon (pre-boot): amount_mib (at most mem_size_mib) and deflate_on_oom required,
 * stats_polling_interval_s 0..65535 (0: no statistics); refused with huge pages; replaces (cfg.balloon).
 */
__attribute__((warn_unused_result)) int fc_put_balloon(struct fc_vm *f, const char *body, size_t len, char *err,
						       size_t errlen);
/* PUT /logger: updates the given fields of f->logger (level case-insensitive, as Firecracker). */
__attribute__((warn_unused_result)) int fc_put_logger(struct fc_vm *f, const char *body, size_t len, char *err,
						      size_t errlen);
/* PUT /metrics: metrics_path (required), emit_id; replaces f->metrics. */
__attribute__((warn_unused_result)) int fc_put_metrics(struct fc_vm *f, const char *body, size_t len, char *err,
						       size_t errlen);

/*
 * PUT /logger and PUT /metrics without touching the configuration, for the API, which opens the path first
 * and keeps the result only when that worked (a refused request changes nothing). fc_parse_logger: *out is
 * `cur` with the body's fields changed, its strings its own; *new_path tells whether the body named a
 * log_path. fc_parse_metrics: *out from the body alone. Both return 0, -EINVAL or -ENOMEM with `err` as the
 * fc_put_ functions; on error *out is untouched. Free *out with fc_logger_free / fc_metrics_free.
 */
__attribute__((warn_unused_result)) int fc_parse_logger(const struct fc_logger *cur, const char *body, size_t len,
							struct fc_logger *out, bool *new_path, char *err,
							size_t errlen);
__attribute__((warn_unused_result)) int fc_parse_metrics(const char *body, size_t len, struct fc_metrics *out,
							 char *err, size_t errlen);
/* Frees the strings of *l / *m and clears them (a cleared one may be freed again). */
void fc_logger_free(struct fc_logger *l);
void fc_metrics_free(struct fc_metrics *m);

/*
 * Firecracker's --config-file text: one object with "boot-source"
 * (required), "drives" and "network-interfaces" (arrays of the API bodies),
 * "machine-config", "vsock", "entropy", "logger", "metrics", "balloon", "mmds-config"
 * (after the interfaces it names); "cpu-config",
 * "memory-hotplug" null and "pmem" [] are ignored (what GET /vm/config of Firecracker returns). On success `f` is
 * replaced by the file's configuration (its old contents freed); on error
 * `f` is unchanged and `err` names the section and key ("drives[1]:
 * is_root_device: ..."). Returns 0, -EINVAL or -ENOMEM.
 */
__attribute__((warn_unused_result)) int fc_vm_load_config_json(struct fc_vm *f, const char *text, size_t len, char *err,
							       size_t errlen);
/*
 * fc_vm_load_config_json on the file `path`: a regular file (opened
 * without blocking, file_open_input) of at most FC_JSON_MAX bytes. Errors
 * start with "--config-file PATH: ".
 */
__attribute__((warn_unused_result)) int fc_vm_load_config_file(struct fc_vm *f, const char *path, char *err,
							       size_t errlen);

/*
 * InstanceStart's checks: a boot source is configured; the root device's
 * "root=/dev/vda ro|rw" or "root=PARTUUID=<uuid> ro|rw" becomes
 * cfg.cmdline_append; then config_validate(&f->cfg, CONFIG_MAX_CPUS,
 * config_host_memory(), ...). On success f->cfg is ready for vm_create (and
 * stays valid while `f` lives). Returns 0, -EINVAL or -ENOMEM.
 */
__attribute__((warn_unused_result)) int fc_vm_finalize(struct fc_vm *f, char *err, size_t errlen);

/*
 * Describes a VM configured from the command line (brisk run --api-sock),
 * so GET /vm/config can answer: `f` (initialised) is replaced by a copy of
 * `cfg` with owned strings, drives "drive0".., interfaces "net0"..; no root
 * device (the command line is the user's). Returns 0 or -ENOMEM (`f`
 * unchanged).
 */
__attribute__((warn_unused_result)) int fc_vm_set_from_config(struct fc_vm *f, const struct vm_config *cfg);
/*
 * Describes a restored VM: fc_vm_set_from_config of the restored `cfg`, then, when `desc` (the API's
 * description saved with the snapshot, GET /vm/config's JSON, or NULL) is readable and names the same
 * devices in the same order, its drive and interface ids, root device, partuuid, cache type, I/O
 * engine, vsock_id, smt, huge_pages, entropy bucket and boot source, so that clients address the
 * devices by the ids they gave them. The logger and metrics are the new process's, never the
 * snapshot's. An unreadable or mismatched `desc` is logged and ignored. Returns 0 or -ENOMEM.
 */
__attribute__((warn_unused_result)) int fc_vm_set_from_restore(struct fc_vm *f, const struct vm_config *cfg,
							       const char *desc);

/*
 * What PUT /snapshot/load may change in the snapshot's configuration (Firecracker's LoadSnapshotParams):
 * - network_overrides (1.12's NetworkOverride: {iface_id, host_dev_name}, both required strings; other keys
 *   ignored, as serde without deny_unknown_fields): each gives the interface with that id in the snapshot
 *   another tap;
 * - vsock_override (1.15's VsockOverride: {uds_path}, the same rules): the vsock device's socket elsewhere;
 * - huge_pages (1.15's SnapshotLoadHugePageConfig): "Snapshot" (the default: as the snapshot's VM had it),
 *   "None", "Transparent" or "2M".
 */
#define FC_MAX_NET_OVERRIDES 64u
struct fc_net_override {
	char iface_id[FC_ID_MAX + 1];
	bool unknown; /* an iface_id longer than any id can be: it names no interface */
	char host_dev_name[VM_NET_IFNAME_MAX + 1];
};
enum fc_load_huge { FC_LOAD_HUGE_SNAPSHOT = 0, FC_LOAD_HUGE_NONE, FC_LOAD_HUGE_TRANSPARENT, FC_LOAD_HUGE_2M };
struct fc_load_overrides {
	unsigned nr;
	struct fc_net_override ov[FC_MAX_NET_OVERRIDES];
	char vsock_uds[VM_VSOCK_UDS_MAX + 1]; /* empty: no vsock_override */
	enum fc_load_huge huge;
};
/*
 * Parses the array `arr` (NULL: none) into out->nr and out->ov: at most FC_MAX_NET_OVERRIDES entries,
 * host_dev_name a tap name as PUT /network-interfaces takes it. 0 or -EINVAL with c's message.
 */
int fc_parse_net_overrides(const struct fcj *c, json_object *arr, struct fc_load_overrides *out);
/*
 * Parses the load body `o`'s vsock_override (absent or null: none; uds_path 1..VM_VSOCK_UDS_MAX bytes, as
 * PUT /vsock takes it) and huge_pages into out. 0 or -EINVAL with c's message.
 */
int fc_parse_load_overrides(const struct fcj *c, json_object *o, struct fc_load_overrides *out);
/* Whether a load with `o` changes anything in the snapshot's configuration (o NULL: no). */
bool fc_load_overrides_any(const struct fc_load_overrides *o);
/*
 * Applies them to a snapshot's configuration `cfg` (vm_config.restore_adjust). Network overrides name the
 * interfaces by the ids the snapshot's API description `desc` (may be NULL: brisk's net0, net1, ...) gives them,
 * in order (a later override of one interface wins, as Firecracker's loop). An id no interface has: -ENODEV,
 * "Unknown Network Device." (Firecracker's SnapshotStateFromFileError::UnknownNetworkDevice); an interface of
 * brisk's user-mode network (no tap): -EINVAL. A vsock_override without a vsock device in the snapshot: -ENODEV,
 * "Unknown Vsock Device." (UnknownVsockDevice). huge_pages sets cfg's hugetlbfs and hugepages as the machine
 * configuration's values do. 0, or -errno with `err`.
 */
int fc_apply_load_overrides(struct vm_config *cfg, const char *desc, const struct fc_load_overrides *o, char *err,
			    size_t errlen);
/* fc_vm_set_from_restore for a VM loaded with overrides `o` (NULL: none): its description read with them too. */
__attribute__((warn_unused_result)) int fc_vm_set_from_restore_ov(struct fc_vm *f, const struct vm_config *cfg,
								  const char *desc, const struct fc_load_overrides *o);

/*
 * GET /vm/config: {"balloon", "drives", "boot-source", "logger",
 * "machine-config", "metrics", "mmds-config", "network-interfaces",
 * "vsock", "entropy"}, null where absent; fc_vm_load_config_json accepts
 * it back and yields the same cfg. User-mode (--net user) interfaces have
 * no Firecracker shape and are left out. Returns a malloc'd string, or NULL
 * when out of memory.
 */
char *fc_vm_to_json(const struct fc_vm *f);
/* GET /machine-config: {"vcpu_count", "mem_size_mib", "smt", "track_dirty_pages", "huge_pages"}. Malloc'd or NULL. */
char *fc_machine_config_json(const struct fc_vm *f);

#endif
