/*
 * api_metrics.c - the API's metrics line (docs/api.md, "Metrics"): Firecracker's groups (fc_metrics.h) with the
 * vCPU counters summed over this VM's vCPUs and the drives and interfaces named by their API ids, plus
 * brisk's own group: the boot timeline, exits by reason, the KVM ioctls and the API's request counts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_impl.h"
#include "brisk/exits.h"
#include "brisk/fc_metrics.h"
#include "brisk/kvm.h"
#include "brisk/timeline.h"

#define METRICS_IOCTLS 64

static json_object *u64(uint64_t v)
{
	return json_object_new_uint64(v);
}

static uint64_t load(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* The aggregate at slot i of `out` takes vCPU `s`'s: the smallest non-zero min, the largest max, the sums. */
static void sum_agg(uint64_t *out, const uint64_t *s, unsigned i)
{
	uint64_t min = load(&s[i]), max = load(&s[i + 1]);

	if (min && (!out[i] || min < out[i]))
		out[i] = min;
	if (max > out[i + 1])
		out[i + 1] = max;
	out[i + 2] += load(&s[i + 2]);
}

/* Firecracker's vcpu group over this VM's vCPUs (racy reads of counters the vCPUs move: a moment's view). */
static void vcpu_sum(struct api *a, uint64_t out[FCM_VCPU_N])
{
	static const unsigned counts[] = {FCM_VCPU_exit_io_in, FCM_VCPU_exit_io_out, FCM_VCPU_exit_mmio_read,
					  FCM_VCPU_exit_mmio_write, FCM_VCPU_failures};
	static const unsigned aggs[] = {FCM_VCPU_exit_io_in_agg, FCM_VCPU_exit_io_out_agg, FCM_VCPU_exit_mmio_read_agg,
					FCM_VCPU_exit_mmio_write_agg};

	memset(out, 0, FCM_VCPU_N * sizeof(out[0]));
	for (unsigned i = 0; a->vm && i < vm_nr_vcpus(a->vm); i++) {
		const uint64_t *s = vm_vcpu_exit_stats(a->vm, i)->fc;

		for (unsigned k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
			out[counts[k]] += load(&s[counts[k]]);
		for (unsigned k = 0; k < sizeof(aggs) / sizeof(aggs[0]); k++)
			sum_agg(out, s, aggs[k]);
	}
}

/* Exits by reason, summed over the vCPUs. */
static json_object *exits_by_reason(struct api *a)
{
	uint64_t sum[EXIT_REASONS] = {0};
	json_object *o = json_object_new_object();

	for (unsigned i = 0; a->vm && i < vm_nr_vcpus(a->vm); i++) {
		const struct exit_stats *s = vm_vcpu_exit_stats(a->vm, i);

		for (unsigned rsn = 0; rsn < EXIT_REASONS; rsn++)
			sum[rsn] += load(&s->exits[rsn]);
	}
	for (unsigned rsn = 0; rsn < EXIT_REASONS; rsn++)
		if (sum[rsn])
			json_object_object_add(o, exit_reason_name(rsn), u64(sum[rsn]));
	return o;
}

static json_object *brisk_metrics(struct api *a)
{
	struct kvm_ioctl_stat st[METRICS_IOCTLS];
	unsigned n = kvm_ioctl_stats(st, METRICS_IOCTLS);
	json_object *o = json_object_new_object(), *tl = json_object_new_object(), *io = json_object_new_object(),
		    *api = json_object_new_object();

	for (int ev = 0; ev < TL__COUNT; ev++) {
		int64_t ns = timeline_get((enum tl_event)ev);

		if (ns >= 0)
			json_object_object_add(tl, timeline_name((enum tl_event)ev), u64((uint64_t)ns / 1000));
	}
	for (unsigned i = 0; i < n && i < METRICS_IOCTLS; i++)
		json_object_object_add(io, st[i].name, u64(st[i].count));
	json_object_object_add(api, "requests", u64(a->requests));
	json_object_object_add(api, "errors", u64(a->errors));
	json_object_object_add(o, "timeline_us", tl);
	json_object_object_add(o, "exits", exits_by_reason(a));
	json_object_object_add(o, "kvm_ioctls", io);
	json_object_object_add(o, "api", api);
	return o;
}

/* The drives and interfaces carry their API ids in the line ("block_rootfs", "net_eth0"). */
static void name_devices(const struct api *a)
{
	if (!a->vm)
		return; /* before InstanceStart there are no devices (Firecracker allocates their metrics then) */
	for (unsigned i = 0; i < a->fc.cfg.nr_disks; i++)
		if (a->fc.drive[i].id[0])
			fcm_block(i, a->fc.drive[i].id);
	for (unsigned i = 0; i < a->fc.cfg.nr_nets; i++)
		if (a->fc.net[i].id[0])
			fcm_net(i, a->fc.net[i].id);
}

/*
 * Firecracker's per-endpoint request counters (v1.7.0 src/firecracker/src/api_server/request/, one file per endpoint):
 * a request to the endpoint counts `count`; one refused (4xx/5xx) counts `fails` too. Firecracker counts its parse
 * failures there; brisk counts every refusal of the request.
 */
struct req_counter {
	enum api_method method;
	const char *path; /* exact, or a prefix when it ends with '/' */
	uint64_t *group;
	int count, fails; /* fails -1: none (GET) */
};

static const struct req_counter req_counters[] = {
    {API_GET, "/", fcm_get_api, FCM_GET_API_instance_info_count, -1},
    {API_GET, "/machine-config", fcm_get_api, FCM_GET_API_machine_cfg_count, -1},
    {API_GET, "/mmds", fcm_get_api, FCM_GET_API_mmds_count, -1},
    {API_GET, "/version", fcm_get_api, FCM_GET_API_vmm_version_count, -1},
    {API_PUT, "/actions", fcm_put_api, FCM_PUT_API_actions_count, FCM_PUT_API_actions_fails},
    {API_PUT, "/boot-source", fcm_put_api, FCM_PUT_API_boot_source_count, FCM_PUT_API_boot_source_fails},
    {API_PUT, "/drives/", fcm_put_api, FCM_PUT_API_drive_count, FCM_PUT_API_drive_fails},
    {API_PUT, "/logger", fcm_put_api, FCM_PUT_API_logger_count, FCM_PUT_API_logger_fails},
    {API_PUT, "/machine-config", fcm_put_api, FCM_PUT_API_machine_cfg_count, FCM_PUT_API_machine_cfg_fails},
    {API_PUT, "/cpu-config", fcm_put_api, FCM_PUT_API_cpu_cfg_count, FCM_PUT_API_cpu_cfg_fails},
    {API_PUT, "/metrics", fcm_put_api, FCM_PUT_API_metrics_count, FCM_PUT_API_metrics_fails},
    {API_PUT, "/network-interfaces/", fcm_put_api, FCM_PUT_API_network_count, FCM_PUT_API_network_fails},
    {API_PUT, "/mmds", fcm_put_api, FCM_PUT_API_mmds_count, FCM_PUT_API_mmds_fails},
    {API_PUT, "/mmds/config", fcm_put_api, FCM_PUT_API_mmds_count, FCM_PUT_API_mmds_fails},
    {API_PUT, "/vsock", fcm_put_api, FCM_PUT_API_vsock_count, FCM_PUT_API_vsock_fails},
    {API_PATCH, "/drives/", fcm_patch_api, FCM_PATCH_API_drive_count, FCM_PATCH_API_drive_fails},
    {API_PATCH, "/network-interfaces/", fcm_patch_api, FCM_PATCH_API_network_count, FCM_PATCH_API_network_fails},
    {API_PATCH, "/machine-config", fcm_patch_api, FCM_PATCH_API_machine_cfg_count, FCM_PATCH_API_machine_cfg_fails},
    {API_PATCH, "/mmds", fcm_patch_api, FCM_PATCH_API_mmds_count, FCM_PATCH_API_mmds_fails},
};

static bool req_matches(const struct req_counter *c, enum api_method m, const char *path)
{
	size_t n = strlen(c->path);

	if (c->method != m)
		return false;
	return n > 1 && c->path[n - 1] == '/' ? strncmp(path, c->path, n) == 0 && path[n] : strcmp(path, c->path) == 0;
}

static const struct req_counter *req_counter(enum api_method m, const char *path)
{
	for (unsigned i = 0; i < sizeof(req_counters) / sizeof(req_counters[0]); i++)
		if (req_matches(&req_counters[i], m, path))
			return &req_counters[i];
	return NULL;
}

void api_metrics_count(enum api_method m, const char *path, unsigned status)
{
	const struct req_counter *c = req_counter(m, path);

	if (!c)
		return;
	if (status == 0)
		fcm_inc(c->group, (unsigned)c->count);
	else if (status >= 400 && c->fails >= 0)
		fcm_inc(c->group, (unsigned)c->fails);
}

int api_metrics_flush(struct api *a)
{
	uint64_t vcpu[FCM_VCPU_N];

	if (!fc_metrics_enabled())
		return -ENODEV;
	name_devices(a);
	vcpu_sum(a, vcpu);
	return fc_metrics_flush(vcpu, brisk_metrics(a));
}

void api_metrics_tick(struct api *a)
{
	if (fc_metrics_timeout_ms() != 0)
		return;
	api_metrics_flush(a);
	fc_metrics_periodic_done();
}
