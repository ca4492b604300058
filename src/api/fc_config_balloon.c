/*
 * fc_config_balloon.c - Firecracker's balloon object (swagger Balloon; src/vmm/src/vmm_config/balloon.rs
 * BalloonDeviceConfig): PUT /balloon's body and --config-file's "balloon", into cfg.balloon, and its JSON for
 * GET /balloon and GET /vm/config.
 */
#include <errno.h>
#include <stdio.h>

#include "brisk/virtio_balloon.h"
#include "fc_config_internal.h"

/* Firecracker's messages (VmmActionError::BalloonConfig of BalloonConfigError), word for word. */
#define FC_BALLOON_TOO_LARGE "Balloon config error: Amount of pages requested is too large."
#define FC_BALLOON_HUGE_PAGES                                                                                          \
	"Balloon config error: Firecracker's huge pages support is incompatible with memory ballooning."

int fc_apply_balloon(struct fc_vm *f, const struct fcj *c, json_object *o)
{
	static const char *const keys[] = {"amount_mib", "deflate_on_oom", "stats_polling_interval_s", NULL};
	uint64_t mib = 0, interval = 0;
	bool oom = false;
	int rm, ro;

	if (fcj_keys(c, o, keys) || (rm = fcj_uint(c, o, "amount_mib", 0, UINT32_MAX, &mib)) < 0 ||
	    (ro = fcj_bool(c, o, "deflate_on_oom", &oom)) < 0 ||
	    fcj_uint(c, o, "stats_polling_interval_s", 0, UINT16_MAX, &interval) < 0)
		return -EINVAL;
	if (!rm || !ro)
		return fcj_fail(c, "%s is required", rm ? "deflate_on_oom" : "amount_mib");
	/* VmResources::set_balloon_device: the target fits the memory, and no huge pages. */
	if (mib > f->cfg.memory >> 20) {
		snprintf(c->err, c->errlen, FC_BALLOON_TOO_LARGE);
		return -EINVAL;
	}
	if (f->huge_pages != FC_HUGE_NONE) {
		snprintf(c->err, c->errlen, FC_BALLOON_HUGE_PAGES);
		return -EINVAL;
	}
	f->cfg.balloon = (struct vm_balloon){
	    .enabled = true,
	    .amount_mib = (uint32_t)mib,
	    .deflate_on_oom = oom,
	    .stats_interval_s = (uint16_t)interval,
	};
	return 0;
}

int fc_put_balloon(struct fc_vm *f, const char *text, size_t len, char *err, size_t errlen)
{
	const struct fcj c = {"balloon", err, errlen};
	json_object *o;
	int ret = fcj_parse(&c, text, len, &o);

	if (!ret)
		ret = fc_apply_balloon(f, &c, o);
	json_object_put(o);
	return ret;
}

json_object *fc_balloon_json(const struct vm_balloon *b)
{
	json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "amount_mib", json_object_new_int64(b->amount_mib));
	json_object_object_add(o, "deflate_on_oom", json_object_new_boolean(b->deflate_on_oom));
	json_object_object_add(o, "stats_polling_interval_s", json_object_new_int64(b->stats_interval_s));
	return o;
}

const char *fc_machine_balloon_check(const struct fc_vm *f, uint64_t mem_mib, bool huge)
{
	if (!f->cfg.balloon.enabled)
		return NULL;
	/* VmResources::update_vm_config: VmConfigError::IncompatibleBalloonSize, BalloonAndHugePages. */
	if (mem_mib < f->cfg.balloon.amount_mib)
		return "The memory size (MiB) is smaller than the previously set balloon device target size.";
	if (huge)
		return "Firecracker's huge pages support is incompatible with memory ballooning.";
	return NULL;
}
