/*
 * api_balloon.c - Firecracker's balloon endpoints (docs/api.md): PUT /balloon before InstanceStart; GET
 * /balloon before and after; PATCH /balloon, GET and PATCH /balloon/statistics after, on the device through
 * vm_device_call. Status codes and messages are Firecracker v1.7.0's (rpc_interface.rs, vmm/src/lib.rs):
 * a post-boot BalloonError reaches the client as "Balloon config error: Error creating the balloon device:
 * <variant>" (its BalloonConfigError::CreateFailure, printed with {:?}).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api_impl.h"
#include "brisk/virtio_balloon.h"
#include "fc_config_internal.h"

#define BALLOON_ERR	  "Balloon config error: Error creating the balloon device: "
#define BALLOON_NOT_FOUND "Balloon config error: No balloon device found."

/* A post-boot call's -errno as Firecracker's BalloonError variant. */
static void post_boot_fault(struct api_reply *r, int err)
{
	const char *v = err == -ENODEV	   ? "DeviceNotFound"
			: err == -ENOTCONN ? "DeviceNotActive"
			: err == -ERANGE   ? "TooManyPagesRequested"
			: err == -EPERM	   ? "StatisticsStateChange"
			: err == -ENOENT   ? "StatisticsDisabled"
					   : NULL;

	if (v)
		api_fault(r, 400, BALLOON_ERR "%s", v);
	else
		api_fault(r, 400, BALLOON_ERR "%s", strerror(-err));
}

static bool started(const struct api *a)
{
	return a->state != API_NOT_STARTED && a->vm;
}

static int info(struct api *a, struct balloon_info *bi)
{
	return vm_device_call(a->vm, "balloon", 0, virtio_balloon_info, bi);
}

void api_put_balloon(struct api *a, const char *body, size_t len, struct api_reply *r)
{
	char err[512];

	if (a->state != API_NOT_STARTED)
		return api_not_after_start(r);
	if (fc_put_balloon(&a->fc, body, len, err, sizeof(err)))
		return api_fault(r, 400, "%s", err);
	a->configured = true;
	r->status = 204;
}

void api_get_balloon(struct api *a, struct api_reply *r)
{
	struct balloon_info bi;
	struct vm_balloon b;
	int err;

	if (!started(a)) {
		if (!a->fc.cfg.balloon.enabled)
			return api_fault(r, 400, BALLOON_NOT_FOUND);
		return api_json_reply(r, fc_balloon_json(&a->fc.cfg.balloon));
	}
	if ((err = info(a, &bi)))
		return post_boot_fault(r, err);
	b = (struct vm_balloon){.enabled = true,
				.amount_mib = bi.num_pages / BALLOON_PAGES_PER_MIB,
				.deflate_on_oom = bi.deflate_on_oom,
				.stats_interval_s = bi.stats_interval_s};
	api_json_reply(r, fc_balloon_json(&b));
}

/* A body of one u32/u16 member `key` (deny_unknown_fields), as BalloonUpdateConfig/BalloonUpdateStatsConfig. */
static int one_field(const char *body, size_t len, const char *key, uint64_t max, uint64_t *v, char *err, size_t errlen)
{
	const char *const keys[] = {key, NULL};
	const struct fcj c = {"balloon", err, errlen};
	json_object *o;
	int ret = fcj_parse(&c, body, len, &o);

	if (!ret && (fcj_keys(&c, o, keys) || (ret = fcj_uint(&c, o, key, 0, max, v)) < 0))
		ret = -EINVAL;
	else if (!ret || ret == 1)
		ret = ret == 1 ? 0 : fcj_fail(&c, "%s is required", key);
	json_object_put(o);
	return ret;
}

void api_patch_balloon(struct api *a, const char *body, size_t len, struct api_reply *r)
{
	char err[512];
	uint64_t mib;
	uint32_t m;
	int ret;

	if (one_field(body, len, "amount_mib", UINT32_MAX, &mib, err, sizeof(err)))
		return api_fault(r, 400, "%s", err);
	if (!started(a))
		return api_not_before_start(r);
	/* Vmm::update_balloon_config: no more than the guest's memory, checked first. */
	if (mib > vm_config(a->vm)->memory >> 20)
		return post_boot_fault(r, -ERANGE);
	m = (uint32_t)mib;
	if ((ret = vm_device_call(a->vm, "balloon", 0, virtio_balloon_set_target, &m)))
		return post_boot_fault(r, ret);
	a->fc.cfg.balloon.amount_mib = m; /* GET /vm/config */
	r->status = 204;
}

static void stat_u64(json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_uint64(v));
}

void api_get_balloon_stats(struct api *a, struct api_reply *r)
{
	struct balloon_info bi;
	json_object *o;
	int err;

	if (!started(a))
		return api_not_before_start(r);
	if ((err = info(a, &bi)))
		return post_boot_fault(r, err);
	if (!bi.stats_interval_s)
		return post_boot_fault(r, -ENOENT);
	o = json_object_new_object();
	if (!o)
		return api_fault(r, 500, "out of memory");
	/* BalloonStats's order: the four sizes, then the guest's statistics it reported, by tag. */
	stat_u64(o, "target_pages", bi.num_pages);
	stat_u64(o, "actual_pages", bi.actual_pages);
	stat_u64(o, "target_mib", bi.num_pages / BALLOON_PAGES_PER_MIB);
	stat_u64(o, "actual_mib", bi.actual_pages / BALLOON_PAGES_PER_MIB);
	for (unsigned t = 0; t < BALLOON_NR_STATS; t++)
		if (bi.stats_present & (1u << t))
			stat_u64(o, balloon_stat_names[t], bi.stat[t]);
	api_json_reply(r, o);
}

void api_patch_balloon_stats(struct api *a, const char *body, size_t len, struct api_reply *r)
{
	char err[512];
	uint64_t s;
	uint16_t v;
	int ret;

	if (one_field(body, len, "stats_polling_interval_s", UINT16_MAX, &s, err, sizeof(err)))
		return api_fault(r, 400, "%s", err);
	if (!started(a))
		return api_not_before_start(r);
	v = (uint16_t)s;
	if ((ret = vm_device_call(a->vm, "balloon", 0, virtio_balloon_set_stats_interval, &v)))
		return post_boot_fault(r, ret);
	a->fc.cfg.balloon.stats_interval_s = v;
	r->status = 204;
}
