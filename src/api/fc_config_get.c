/*
 * fc_config_get.c - GET /vm/config and GET /machine-config: struct fc_vm back into Firecracker's shapes
 * (FullVmConfiguration, MachineConfiguration in src/firecracker/swagger/firecracker.yaml).
 */
#include <stdlib.h>
#include <string.h>

#include "brisk/cpuid.h"
#include "fc_config_internal.h"

/* json-c returns NULL when out of memory: every add goes through these, and a failure sticks in *bad. */
static void add_field(json_object *o, const char *key, json_object *v, bool *bad)
{
	if (json_object_object_add(o, key, v) != 0) {
		json_object_put(v);
		*bad = true;
	}
}

/* A string member, or null when `s` is NULL. */
static void put_str(json_object *o, const char *key, const char *s, bool *bad)
{
	json_object *v = s ? json_object_new_string(s) : NULL;

	if (s && !v)
		*bad = true;
	add_field(o, key, v, bad);
}

static void put_bool(json_object *o, const char *key, bool b, bool *bad)
{
	json_object *v = json_object_new_boolean(b);

	if (!v)
		*bad = true;
	add_field(o, key, v, bad);
}

static void put_u64(json_object *o, const char *key, uint64_t n, bool *bad)
{
	json_object *v = json_object_new_uint64(n);

	if (!v)
		*bad = true;
	add_field(o, key, v, bad);
}

/* A new object added to `o` as `key`, or NULL (with *bad) when out of memory. */
static json_object *put_obj(json_object *o, const char *key, bool *bad)
{
	json_object *v = json_object_new_object();

	if (!v) {
		*bad = true;
		return NULL;
	}
	add_field(o, key, v, bad);
	return *bad ? NULL : v;
}

static void boot_source(const struct fc_vm *f, json_object *root, bool *bad)
{
	json_object *o;

	if (!f->boot_source_set) {
		add_field(root, "boot-source", NULL, bad);
		return;
	}
	o = put_obj(root, "boot-source", bad);
	if (!o)
		return;
	put_str(o, "kernel_image_path", f->cfg.kernel, bad);
	put_str(o, "initrd_path", f->cfg.initrd, bad);
	put_str(o, "boot_args", f->cfg.cmdline, bad);
}

/*
 * MachineConfig's fields. cpu_template as Firecracker's From<&VmConfig>: a static template's name, "None"
 * for a custom one (PUT /cpu-config), left out without a template (brisk's own --cpu-template files and
 * "baseline" have no Firecracker name either).
 */
static void machine(const struct fc_vm *f, json_object *o, bool *bad)
{
	const char *tmpl = f->custom_template ? "None" : cpuid_fc_name(cpuid_fc_static(f->cfg.cpu_template));

	put_u64(o, "vcpu_count", f->cfg.cpus, bad);
	put_u64(o, "mem_size_mib", f->cfg.memory >> 20, bad);
	put_bool(o, "smt", f->smt, bad);
	if (tmpl)
		put_str(o, "cpu_template", tmpl, bad);
	put_bool(o, "track_dirty_pages", f->track_dirty_pages, bad);
	put_str(o, "huge_pages", fc_huge_names[f->huge_pages], bad);
}

/* A TokenBucketConfig as Firecracker serialises it: one_time_burst null when 0 (From<&TokenBucket>). */
static void bucket(json_object *o, const char *key, const struct rl_bucket_cfg *b, bool *bad)
{
	json_object *bo;

	if (!b->size) { /* off (normalised when configured) */
		add_field(o, key, NULL, bad);
		return;
	}
	if (!(bo = put_obj(o, key, bad)))
		return;
	put_u64(bo, "size", b->size, bad);
	if (b->one_time_burst)
		put_u64(bo, "one_time_burst", b->one_time_burst, bad);
	else
		add_field(bo, "one_time_burst", NULL, bad);
	put_u64(bo, "refill_time", b->refill_ms, bad);
}

/* A RateLimiterConfig, or null when it limits nothing (RateLimiterConfig::into_option). */
static void rate_limiter(json_object *o, const char *key, const struct rl_config *rl, bool *bad)
{
	json_object *ro;

	if (!rl_config_limits(rl)) {
		add_field(o, key, NULL, bad);
		return;
	}
	if (!(ro = put_obj(o, key, bad)))
		return;
	bucket(ro, "bandwidth", &rl->bw, bad);
	bucket(ro, "ops", &rl->ops, bad);
}

static void drive(const struct fc_vm *f, unsigned i, json_object *a, bool *bad)
{
	json_object *o = json_object_new_object();

	if (!o || json_object_array_add(a, o) != 0) {
		json_object_put(o);
		*bad = true;
		return;
	}
	put_str(o, "drive_id", f->drive[i].id, bad);
	put_str(o, "partuuid", f->drive[i].partuuid[0] ? f->drive[i].partuuid : NULL, bad);
	put_bool(o, "is_root_device", f->drive[i].is_root_device, bad);
	put_str(o, "cache_type", fc_cache_names[f->drive[i].cache_type], bad);
	put_bool(o, "is_read_only", f->cfg.disk[i].ro, bad);
	put_str(o, "path_on_host", f->cfg.disk[i].path, bad);
	rate_limiter(o, "rate_limiter", &f->cfg.disk[i].rl, bad);
	put_str(o, "io_engine", fc_engine_names[f->drive[i].io_engine], bad);
	add_field(o, "socket", NULL, bad);
}

/* "aa:bb:cc:dd:ee:ff" into buf[18]. */
static const char *mac_text(const uint8_t *m, char *buf)
{
	static const char hex[] = "0123456789abcdef";

	for (unsigned i = 0; i < 6; i++) {
		buf[3 * i] = hex[m[i] >> 4];
		buf[3 * i + 1] = hex[m[i] & 15];
		buf[3 * i + 2] = i < 5 ? ':' : '\0';
	}
	return buf;
}

static void net(const struct fc_vm *f, unsigned i, json_object *a, bool *bad)
{
	const struct vm_net *n = &f->cfg.net[i];
	json_object *o;
	char mac[18];

	if (n->kind != NET_TAP) /* --net user has no Firecracker shape */
		return;
	o = json_object_new_object();
	if (!o || json_object_array_add(a, o) != 0) {
		json_object_put(o);
		*bad = true;
		return;
	}
	put_str(o, "iface_id", f->net[i].id, bad);
	put_str(o, "host_dev_name", n->tap, bad);
	put_str(o, "guest_mac", n->has_mac ? mac_text(n->mac, mac) : NULL, bad);
	rate_limiter(o, "rx_rate_limiter", &n->rx_rl, bad);
	rate_limiter(o, "tx_rate_limiter", &n->tx_rl, bad);
}

/* An array member filled by `fn` for each of `n` items. */
static void put_array(const struct fc_vm *f, json_object *root, const char *key, unsigned n,
		      void (*fn)(const struct fc_vm *, unsigned, json_object *, bool *), bool *bad)
{
	json_object *a = json_object_new_array();

	if (!a) {
		*bad = true;
		return;
	}
	add_field(root, key, a, bad);
	for (unsigned i = 0; i < n && !*bad; i++)
		fn(f, i, a, bad);
}

static void vsock(const struct fc_vm *f, json_object *root, bool *bad)
{
	json_object *o;

	if (!f->cfg.vsock.uds[0]) {
		add_field(root, "vsock", NULL, bad);
		return;
	}
	o = put_obj(root, "vsock", bad);
	if (!o)
		return;
	if (f->vsock_id[0])
		put_str(o, "vsock_id", f->vsock_id, bad);
	put_u64(o, "guest_cid", f->cfg.vsock.cid, bad);
	put_str(o, "uds_path", f->cfg.vsock.uds, bad);
}

/*
 * The bucket as given; a rate from --rng as size bytes per 1000 ms. brisk's
 * default rate (no bucket given) reads back as no rate_limiter.
 */
static void entropy(const struct fc_vm *f, json_object *root, bool *bad)
{
	uint64_t rate = f->cfg.rng_rate, size = f->rng_size, ms = f->rng_refill_ms;
	json_object *o;

	if (!rate) {
		add_field(root, "entropy", NULL, bad);
		return;
	}
	o = put_obj(root, "entropy", bad);
	if (!o)
		return;
	if (rl_config_limits(&f->cfg.rng_rl)) {
		rate_limiter(o, "rate_limiter", &f->cfg.rng_rl, bad);
		return;
	}
	if (!size && rate == VM_RNG_DEFAULT_RATE) {
		add_field(o, "rate_limiter", NULL, bad);
		return;
	}
	if (!size) {
		size = rate <= UINT64_MAX / 1000 ? rate : rate / 1000;
		ms = rate <= UINT64_MAX / 1000 ? 1000 : 1;
	}
	rate_limiter(o, "rate_limiter", &(struct rl_config){.bw = {size, 0, ms}}, bad);
}

static void logger(const struct fc_vm *f, json_object *root, bool *bad)
{
	json_object *o;

	if (!f->logger.configured) {
		add_field(root, "logger", NULL, bad);
		return;
	}
	o = put_obj(root, "logger", bad);
	if (!o)
		return;
	put_str(o, "log_path", f->logger.log_path, bad);
	put_str(o, "level", fc_level_names[f->logger.level], bad);
	put_bool(o, "show_level", f->logger.show_level, bad);
	put_bool(o, "show_log_origin", f->logger.show_log_origin, bad);
	put_str(o, "module", f->logger.module, bad);
}

static void metrics(const struct fc_vm *f, json_object *root, bool *bad)
{
	json_object *o;

	if (!f->metrics.configured) {
		add_field(root, "metrics", NULL, bad);
		return;
	}
	o = put_obj(root, "metrics", bad);
	if (!o)
		return;
	put_str(o, "metrics_path", f->metrics.metrics_path, bad);
	put_bool(o, "emit_id", f->metrics.emit_id, bad);
}

/* The text of `o` (consumed), malloc'd; NULL when anything failed. */
static char *finish(json_object *o, bool bad)
{
	const char *s =
	    bad || !o ? NULL
		      : json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	char *out = s ? strdup(s) : NULL;

	json_object_put(o);
	return out;
}

static void machine_section(const struct fc_vm *f, json_object *root, bool *bad)
{
	json_object *o = put_obj(root, "machine-config", bad);

	if (o)
		machine(f, o, bad);
}

char *fc_vm_to_json(const struct fc_vm *f)
{
	json_object *root = json_object_new_object();
	bool bad = !root;

	if (!bad) {
		add_field(root, "balloon", f->cfg.balloon.enabled ? fc_balloon_json(&f->cfg.balloon) : NULL, &bad);
		put_array(f, root, "drives", f->cfg.nr_disks, drive, &bad);
		boot_source(f, root, &bad);
		logger(f, root, &bad);
		add_field(root, "cpu-config", NULL, &bad); /* as Firecracker: never the custom template's path */
		machine_section(f, root, &bad);
		metrics(f, root, &bad);
		add_field(root, "mmds-config", fc_mmds_config_to_json(f), &bad);
		put_array(f, root, "network-interfaces", f->cfg.nr_nets, net, &bad);
		vsock(f, root, &bad);
		entropy(f, root, &bad);
	}
	return finish(root, bad);
}

char *fc_machine_config_json(const struct fc_vm *f)
{
	json_object *o = json_object_new_object();
	bool bad = !o;

	if (!bad)
		machine(f, o, &bad);
	return finish(o, bad);
}
