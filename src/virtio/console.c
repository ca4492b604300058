/* console.c - PLACEHOLDER being replaced by the virtio-console implementation (in progress, not committed). */
#include <errno.h>

#include "brisk/devices.h"

int virtio_console_create(const struct devctx *ctx, struct bus *bus, const struct devmgr_slot *slot)
{
	(void)ctx, (void)bus, (void)slot;
	return -ENOSYS;
}
