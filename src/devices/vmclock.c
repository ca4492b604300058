/*
 * vmclock.c - the VMClock device (the UAPI group's VMClock specification; Linux drivers/ptp/ptp_vmclock.c and
 * include/uapi/linux/vmclock-abi.h; Firecracker's devices/acpi/vmclock.rs, QEMU's hw/acpi/vmclock.c): one page of
 * guest memory at LAYOUT_VMCLOCK holding struct vmclock_abi (vmclock_abi.h), named by the DSDT's VCLK device
 * (acpi.c). A guest maps it (Linux: /dev/vmclock0, mmap or read) and learns from two counters that its clock was
 * disrupted and that it was loaded from a snapshot, so that user space can reseed, re-randomise or reconnect.
 *
 * What brisk publishes is what Firecracker does: no clock data (counter_id invalid, clock_status unknown), the
 * flags VM_GEN_COUNTER_PRESENT and NOTIFICATION_PRESENT. A boot writes the page with both counters 0. Every
 * restore advances disruption_marker and vm_generation_counter by one and seq_count by two (an update done:
 * even again), writes the page, and the guest is told by the GED's interrupt, which vmgenid.c's restore raises
 * for both devices (the GED's _EVT notifies VGEN and VCLK, acpi.c). No vCPU runs while devices are restored
 * (device.h), so the guest never sees the page half written and the seqcount's odd phase is never observable;
 * seq_count still moves so that a reader that kept the old value sees a change. Restoring the same snapshot
 * twice gives both VMs the same generation (a counter, not an identity: VMGenID's random ID is that), and a
 * snapshot of a restored VM keeps counting from where that VM was.
 *
 * A device with no register: on the bus only for its snapshot section (its address and the counters, checked)
 * and its restore hook.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/bus.h"
#include "brisk/devices.h"
#include "brisk/layout.h"
#include "brisk/log.h"
#include "brisk/mem_uffd.h"
#include "brisk/snap_fields.h"
#include "brisk/snapshot.h"
#include "brisk/vmclock_abi.h"

#define VMCLOCK_SECTION_VERSION 1u

_Static_assert(sizeof(struct vmclock_abi) <= LAYOUT_VMCLOCK_SIZE, "the structure fits its page");

struct vmclock {
	struct devctx ctx;
	/* saved (vmclock_record) */
	uint64_t gpa;
	uint32_t seq_count;
	uint64_t disruption_marker;
	uint64_t vm_generation_counter;
};

static const struct snap_field vmclock_fields[] = {
    SNAP_UINT(struct vmclock, gpa, 8),
    SNAP_UINT(struct vmclock, seq_count, 4),
    SNAP_UINT(struct vmclock, disruption_marker, 8),
    SNAP_UINT(struct vmclock, vm_generation_counter, 8),
};
static const struct snap_record vmclock_record = SNAP_RECORD("vmclock", vmclock_fields);

/*
 * The saved tables (in the snapshot's memory) name the page at the saved address: another is not this brisk's
 * layout. An odd seq_count is an update brisk never leaves unfinished.
 */
static const char *check_saved(const void *obj)
{
	const struct vmclock *v = obj;

	if (v->gpa != LAYOUT_VMCLOCK)
		return "the page is not where this brisk's tables put it";
	if (v->seq_count & 1)
		return "an odd seq_count (an update left half done)";
	return NULL;
}

static const struct snap_layout vmclock_layout = {
    .version = VMCLOCK_SECTION_VERSION, .record = &vmclock_record, .check = check_saved};

/* The structure into guest memory: the whole page, which holds nothing else (layout.h), so that a Uffd-restored
 * VM's page is placed with UFFDIO_COPY rather than fetched from its handler first (gmem_fill_page). */
static int publish(const struct vmclock *v)
{
	const struct vmclock_abi abi = {
	    .magic = VMCLOCK_MAGIC,
	    .size = LAYOUT_VMCLOCK_SIZE,
	    .version = VMCLOCK_VERSION,
	    .counter_id = VMCLOCK_COUNTER_INVALID,
	    .clock_status = VMCLOCK_STATUS_UNKNOWN,
	    .flags = VMCLOCK_FLAG_VM_GEN_COUNTER_PRESENT | VMCLOCK_FLAG_NOTIFICATION_PRESENT,
	    .seq_count = v->seq_count,
	    .disruption_marker = v->disruption_marker,
	    .vm_generation_counter = v->vm_generation_counter,
	};

	return gmem_fill_page_head(v->ctx.mem, v->gpa, &abi, sizeof(abi));
}

static int vmclock_save(void *dev, struct snap_writer *w)
{
	return snap_layout_save(w, &vmclock_layout, dev);
}

/* A restore is a load from a snapshot: both counters move on, the page is written; the GED's edge tells. */
static int vmclock_restore(void *dev, struct snap_reader *r)
{
	struct vmclock *v = dev, n = {.ctx = v->ctx};
	char why[160];
	int ret = snap_layout_load(r, &vmclock_layout, &n, why, sizeof(why));

	if (!ret && snap_remaining(r)) {
		snprintf(why, sizeof(why), "trailing data after the last field (%zu B)", snap_remaining(r));
		ret = -EINVAL;
	}
	if (ret) {
		log_error("vmclock: snapshot refused: %s", why);
		return ret; /* checked whole before anything is written */
	}
	n.seq_count += 2;
	n.disruption_marker++;
	n.vm_generation_counter++;
	if ((ret = publish(&n)))
		return ret;
	snap_record_copy(&vmclock_record, v, &n);
	log_debug("vmclock: generation %llu, disruption marker %llu", (unsigned long long)v->vm_generation_counter,
		  (unsigned long long)v->disruption_marker);
	return 0;
}

static void vmclock_destroy(void *dev)
{
	free(dev);
}

static const struct dev_ops vmclock_ops = {
    .name = "vmclock",
    .destroy = vmclock_destroy,
    .save = vmclock_save,
    .restore = vmclock_restore,
};

int vmclock_create(const struct devctx *ctx, struct bus *bus, bool restoring)
{
	struct vmclock *v = calloc(1, sizeof(*v));
	int ret;

	if (!v)
		return -ENOMEM;
	*v = (struct vmclock){.ctx = *ctx, .gpa = LAYOUT_VMCLOCK};
	/* A boot's page, both counters 0; a restore writes its own in vmclock_restore. */
	if (!restoring && (ret = publish(v))) {
		free(v);
		return ret;
	}
	if (!bus_add(bus, &vmclock_ops, v)) {
		free(v);
		return -ENOSPC;
	}
	return 0;
}
