/*
 * virtio_balloon.h - the memory balloon (virtio 1.2 section 5.5), as Firecracker v1.7.0's: the inflate and
 * deflate queues, the statistics queue when a polling interval is set, VIRTIO_BALLOON_F_DEFLATE_ON_OOM and
 * VIRTIO_BALLOON_F_STATS_VQ; no free page hinting or reporting (Firecracker v1.7.0 has neither).
 * docs/devices.md, "Balloon".
 */
#ifndef BRISK_VIRTIO_BALLOON_H
#define BRISK_VIRTIO_BALLOON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bus;
struct devctx;
struct devmgr_window;
struct vm_balloon;
struct vm_config;

#define VIRTIO_ID_BALLOON 5 /* section 5.5.1 */

/* Feature bits (section 5.5.3). */
#define VIRTIO_BALLOON_F_STATS_VQ	2u /* bit 1 */
#define VIRTIO_BALLOON_F_DEFLATE_ON_OOM 4u /* bit 2 */

#define BALLOON_PFN_SHIFT	 12   /* section 5.5.6: PFNs are of 4 KiB pages */
#define BALLOON_PAGES_PER_MIB	 256u /* Firecracker's MIB_TO_4K_PAGES */
#define BALLOON_MAX_PFNS_PER_BUF 256u /* Firecracker's MAX_PAGES_IN_DESC: a longer inflate buffer is refused */
#define BALLOON_CONFIG_SIZE	 8u   /* num_pages, actual (section 5.5.4; Firecracker offers no more) */
#define BALLOON_NR_STATS	 10u  /* tags 0..9 (section 5.5.6.3): swap_in .. hugetlb_failures */

/* The statistics' names as Firecracker's GET /balloon/statistics gives them, indexed by tag. */
extern const char *const balloon_stat_names[BALLOON_NR_STATS];

/* What GET /balloon and GET /balloon/statistics report (virtio_balloon_info). */
struct balloon_info {
	uint32_t num_pages;    /* the target, config space */
	uint32_t actual_pages; /* what the driver says it holds, config space */
	bool deflate_on_oom;
	uint16_t stats_interval_s;
	bool active;			 /* the driver set DRIVER_OK and has not reset the device */
	uint32_t stats_present;		 /* bit t: the guest reported tag t */
	uint64_t stat[BALLOON_NR_STATS]; /* by tag */
	uint64_t inflated, deflated;	 /* valid PFNs the guest put in each queue */
	uint64_t bad_pfns, bad_discards; /* PFNs refused (outside RAM), ranges the host failed to discard */
};

/*
 * Creates the balloon in window `win` from cfg->balloon (enabled), added to `bus`; *backend (may be NULL) gets
 * the device for the post-boot calls below (vm_device_call, vm.h). Returns 0 or -errno.
 */
__attribute__((warn_unused_result)) int virtio_balloon_create(const struct devctx *ctx, struct bus *bus,
							      const struct devmgr_window *win,
							      const struct vm_balloon *cfg, void **backend);

/*
 * The post-boot calls, each of the vm_device_call shape fn(dev, arg), on the API thread with the event loop
 * stopped. virtio_balloon_info: *(struct balloon_info *)arg filled, 0. virtio_balloon_set_target: the new
 * target *(const uint32_t *)arg MiB into num_pages and a configuration change interrupt (section 5.5.6.1);
 * -ENOTCONN when the driver has not activated the device (Firecracker's DeviceNotActive), -ERANGE when the
 * pages do not fit 32 bits. virtio_balloon_set_stats_interval: *(const uint16_t *)arg seconds; the same
 * interval is 0; switching statistics on or off (either side 0) is -EPERM (Firecracker's
 * StatisticsStateChange); otherwise the buffer held is returned to the driver now (a fresh report) and the
 * timer re-armed.
 */
int virtio_balloon_info(void *dev, void *arg);
int virtio_balloon_set_target(void *dev, void *arg);
int virtio_balloon_set_stats_interval(void *dev, void *arg);

/*
 * Pure helpers, exported for the unit tests. balloon_compact: sorts pfn[0..n) and merges it into runs of
 * consecutive PFNs, duplicates dropped: start[k], len[k] for k < the count returned (at most n).
 */
unsigned balloon_compact(uint32_t *pfn, unsigned n, uint32_t *start, uint32_t *len);

/*
 * Parses --balloon SIZE[,deflate_on_oom][,stats=SECONDS] into cfg->balloon: SIZE as --memory's (a bare number
 * is MiB), a whole number of MiB whose pages fit 32 bits (the VM's memory bounds it when the device is
 * created); SECONDS 0..65535. 0, or -EINVAL with `err`.
 */
int balloon_parse_option(const char *arg, struct vm_config *cfg, char *err, size_t errlen);

#endif
