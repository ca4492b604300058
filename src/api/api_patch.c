/*
 * api_patch.c - the post-boot device updates (Firecracker v1.7.0 rpc_interface.rs UpdateBlockDevice,
 * UpdateNetworkInterface): PATCH /drives/{id} swaps a drive's backing file and/or updates its rate
 * limiter, PATCH /network-interfaces/{id} updates an interface's rx/tx limiters. Before boot both are
 * Firecracker's OperationNotSupportedPreBoot. The running devices change through vm_device_call (the
 * event loop stopped meanwhile); then the API's configuration (GET /vm/config) follows.
 */
#include <errno.h>
#include <string.h>

#include "api_impl.h"
#include "brisk/config.h"
#include "brisk/devices.h"
#include "brisk/log.h"
#include "brisk/vm.h"

struct limiter_arg {
	const struct rl_config *cfg;
	const bool *has;
};

static int blk_limiter_call(void *dev, void *arg)
{
	const struct limiter_arg *l = arg;

	virtio_blk_set_limiter(dev, l->cfg, l->has[0], l->has[1]);
	return 0;
}

void api_patch_drive(struct api *a, const char *id, const char *body, size_t len, struct api_reply *r)
{
	struct fc_drive_patch p;
	char err[1024];
	int ret;

	if (a->state == API_NOT_STARTED || !a->vm)
		return api_not_before_start(r);
	if (!*id)
		return api_fault(r, 400, "Missing id in the request path.");
	if (fc_patch_drive(&a->fc, id, body, len, &p, err, sizeof(err)))
		return api_fault(r, 400, "%s", err);
	if (p.path[0]) {
		if ((ret = vm_disk_swap(a->vm, p.index, p.path, err, sizeof(err))) != 0)
			return api_fault(
			    r, 400,
			    "Unable to patch the block device: path_on_host %s: %s Please verify the request "
			    "arguments.",
			    p.path, err);
		if (config_disk_path(&a->fc.cfg.disk[p.index], p.path, strlen(p.path)))
			log_warn("GET /vm/config will not show drive '%s''s new path: out of memory", id);
	}
	if (p.has_rl) {
		struct limiter_arg l = {&p.rl, p.has};

		if (vm_device_call(a->vm, "disk", p.index, blk_limiter_call, &l))
			return api_fault(r, 400, "Unable to patch the block device: no device for drive '%s'.", id);
		fc_rl_update(&a->fc.cfg.disk[p.index].rl, &p.rl, p.has);
	}
	r->status = 204;
}

static int net_limiter_call(void *dev, void *arg)
{
	const struct fc_net_patch *p = arg;

	virtio_net_set_limiters(dev, &p->rx, p->rx_has[0], p->rx_has[1], &p->tx, p->tx_has[0], p->tx_has[1]);
	return 0;
}

void api_patch_net(struct api *a, const char *id, const char *body, size_t len, struct api_reply *r)
{
	struct fc_net_patch p;
	char err[1024];

	if (a->state == API_NOT_STARTED || !a->vm)
		return api_not_before_start(r);
	if (!*id)
		return api_fault(r, 400, "Missing id in the request path.");
	if (fc_patch_net(&a->fc, id, body, len, &p, err, sizeof(err)))
		return api_fault(r, 400, "%s", err);
	if (vm_device_call(a->vm, "net", p.index, net_limiter_call, &p))
		return api_fault(r, 400, "Unable to update the net device: no device for interface '%s'.", id);
	fc_rl_update(&a->fc.cfg.net[p.index].rx_rl, &p.rx, p.rx_has);
	fc_rl_update(&a->fc.cfg.net[p.index].tx_rl, &p.tx, p.tx_has);
	r->status = 204;
}
