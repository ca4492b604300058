/*
 * vmgenid.c - the VM Generation ID (Microsoft's "Virtual Machine Generation ID" specification; Linux
 * drivers/virt/vmgenid.c; QEMU hw/acpi/vmgenid.c; Firecracker 1.9 devices/acpi/vmgenid.rs): 16 random bytes in
 * guest memory at LAYOUT_VMGENID, a new value every time the VM starts from a snapshot, announced by the GED's
 * interrupt (GSI LAYOUT_GED_GSI), whose _EVT notifies the VGEN device (acpi.c). A Linux guest then mixes the new
 * ID into its RNG (add_vmfork_randomness), so two VMs restored from one snapshot do not draw the same numbers.
 *
 * A device with no register: on the bus only for its snapshot section (the address and the GSI, checked on
 * restore against what this brisk's tables say) and its restore hook, which writes the new ID and raises the
 * interrupt once the vCPUs hold their saved state (device.h: devices are restored after the vCPUs).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "brisk/bus.h"
#include "brisk/devices.h"
#include "brisk/layout.h"
#include "brisk/log.h"
#include "brisk/mem_uffd.h"
#include "brisk/snapshot.h"

#define VMGENID_SECTION_VERSION 1u

struct vmgenid {
	struct devctx ctx;
	uint64_t gpa;
	uint32_t gsi;
	uint8_t id[LAYOUT_VMGENID_SIZE]; /* the current generation */
};

static int new_id(uint8_t id[LAYOUT_VMGENID_SIZE])
{
	size_t got = 0;

	while (got < LAYOUT_VMGENID_SIZE) {
		ssize_t n = getrandom(id + got, LAYOUT_VMGENID_SIZE - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		got += (size_t)n;
	}
	return 0;
}

/*
 * The ID into guest memory: the whole page, which holds nothing else (layout.h), so that a Uffd-restored VM's
 * page is placed with UFFDIO_COPY rather than waited for from its handler (gmem_fill_page).
 */
static int publish(struct vmgenid *g)
{
	return gmem_fill_page_head(g->ctx.mem, g->gpa, g->id, sizeof(g->id));
}

static int vmgenid_save(void *dev, struct snap_writer *w)
{
	const struct vmgenid *g = dev;
	int ret = snap_set_version(w, VMGENID_SECTION_VERSION);

	if (!ret)
		ret = snap_put_u64(w, g->gpa);
	if (!ret)
		ret = snap_put_u32(w, g->gsi);
	return ret;
}

/* A restore is a new generation: a new ID, written, then the guest told (an edge on the GED's line). */
static int vmgenid_restore(void *dev, struct snap_reader *r)
{
	struct vmgenid *g = dev;
	uint64_t gpa;
	uint32_t gsi;
	int ret;

	if (snap_version(r) != VMGENID_SECTION_VERSION)
		return -EPROTONOSUPPORT;
	if (snap_get_u64(r, &gpa) || snap_get_u32(r, &gsi) || snap_remaining(r))
		return -EINVAL; /* all checked before anything is written or raised */
	/* The saved tables (in the snapshot's memory) point here: another address or line is not this brisk's. */
	if (gpa != g->gpa || gsi != g->gsi) {
		log_error("vmgenid: the snapshot's device is at 0x%llx on GSI %u; this brisk's at 0x%llx on GSI %u",
			  (unsigned long long)gpa, gsi, (unsigned long long)g->gpa, g->gsi);
		return -EINVAL;
	}
	if ((ret = new_id(g->id)) || (ret = publish(g)))
		return ret;
	dev_irq_line(&g->ctx, g->gsi, 1);
	dev_irq_line(&g->ctx, g->gsi, 0);
	log_debug("vmgenid: new generation %02x%02x%02x%02x..., GSI %u raised", g->id[0], g->id[1], g->id[2], g->id[3],
		  g->gsi);
	return 0;
}

static void vmgenid_destroy(void *dev)
{
	free(dev);
}

static const struct dev_ops vmgenid_ops = {
    .name = "vmgenid",
    .destroy = vmgenid_destroy,
    .save = vmgenid_save,
    .restore = vmgenid_restore,
};

int vmgenid_create(const struct devctx *ctx, struct bus *bus, bool restoring)
{
	struct vmgenid *g = calloc(1, sizeof(*g));
	int ret;

	if (!g)
		return -ENOMEM;
	*g = (struct vmgenid){.ctx = *ctx, .gpa = LAYOUT_VMGENID, .gsi = LAYOUT_GED_GSI};
	/* A boot's first generation; a restore writes its own in vmgenid_restore. */
	if (!restoring && ((ret = new_id(g->id)) || (ret = publish(g)))) {
		free(g);
		return ret;
	}
	if (!bus_add(bus, &vmgenid_ops, g)) {
		free(g);
		return -ENOSPC;
	}
	return 0;
}
