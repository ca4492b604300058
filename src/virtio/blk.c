/* blk.c - PLACEHOLDER being replaced by the virtio-blk implementation (in progress, not committed). */
#include <errno.h>
#include <stdio.h>

#include "brisk/devices.h"

int virtio_blk_create(const struct devctx *ctx, struct bus *bus, const struct devmgr_slot *slot,
		      const struct vm_disk *d, char *err, size_t errlen)
{
	(void)ctx, (void)bus, (void)slot, (void)d;
	snprintf(err, errlen, "virtio-blk is not built yet");
	return -ENOSYS;
}
