/*
 * balloon.c - the memory balloon (virtio 1.2 section 5.5), Firecracker v1.7.0's device
 * (src/vmm/src/devices/virtio/balloon/): queue 0 inflate, queue 1 deflate, queue 2 statistics when a polling
 * interval is set (5.5.2: the queue exists only with VIRTIO_BALLOON_F_STATS_VQ); config space num_pages
 * (the host's target) and actual (the driver's count), 8 bytes.
 *
 * Inflate: each buffer is an array of 32-bit PFNs of 4 KiB pages (5.5.6), at most BALLOON_MAX_PFNS_PER_BUF
 * (Firecracker's MAX_PAGES_IN_DESC). Every PFN is checked to name a page wholly inside guest RAM with the
 * checked accessor (gmem_ptr): one in the MMIO hole or past RAM is dropped and counted (docs/security.md case
 * 59, class G); the valid ones are sorted, merged into runs and handed back to the host (gmem_discard:
 * madvise(MADV_DONTNEED), an anonymous mapping over a restored VM's file-backed RAM first, as Firecracker's
 * remove_range). A buffer of the wrong shape is completed empty and counted (case 58). Deflate: the pages
 * are the guest's again on its next touch (the host does nothing, as Firecracker; 5.5.6.1 without
 * VIRTIO_BALLOON_F_MUST_TELL_HOST); the buffer is checked and counted as inflate's.
 *
 * Bounded work (case 60): one callback takes at most BALLOON_CHAINS_PER_ROUND buffers of a queue (at most
 * 256 pages each); more waiting is picked up on the next turn of the event loop (an eventfd the device
 * writes), so other devices and the API run in between.
 *
 * Statistics (5.5.6.3): the driver posts one buffer of {u16 tag, u64 val} entries; the device reads it and
 * keeps the chain; every stats_interval_s a timerfd on the event loop returns it (used length 0), which asks
 * the driver for a fresh report. A second buffer while one is held returns the held one (Firecracker:
 * "driver is not compliant"); unknown tags are skipped and counted (stats_update_fails), at most
 * BALLOON_MAX_STATS entries are read (case 61).
 *
 * Threads: config space is read and written by vCPU threads, the API (virtio_balloon_*) runs on the main
 * thread with the event loop stopped, activate/reset on a vCPU thread under the transport's I/O lock: the
 * device's own mutex covers everything more than one of them touches; it is a leaf lock (nothing that takes
 * another lock is called under it).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "brisk/config.h"
#include "brisk/device.h"
#include "brisk/devices.h"
#include "brisk/errmsg.h"
#include "brisk/fc_metrics.h"
#include "brisk/log.h"
#include "brisk/mem.h"
#include "brisk/snap_fields.h"
#include "brisk/snapshot.h"
#include "brisk/virtio.h"
#include "brisk/virtio_balloon.h"
#include "brisk/vm.h"

#define BALLOON_QUEUE_SIZE	 256 /* Firecracker's FIRECRACKER_MAX_QUEUE_SIZE */
#define BALLOON_INFLATE		 0
#define BALLOON_DEFLATE		 1
#define BALLOON_STATS		 2
#define BALLOON_CHAINS_PER_ROUND 32 /* buffers one callback takes from a queue: 32 * 256 pages = 32 MiB */
#define BALLOON_MAX_SEGS	 16
#define BALLOON_MAX_STATS	 32 /* entries read from one statistics buffer */
#define BALLOON_STAT_SIZE	 10 /* struct virtio_balloon_stat: packed u16 tag, u64 val */

const char *const balloon_stat_names[BALLOON_NR_STATS] = {
    "swap_in",	    "swap_out",		"major_faults", "minor_faults",	       "free_memory",
    "total_memory", "available_memory", "disk_caches",	"hugetlb_allocations", "hugetlb_failures",
};

struct balloon {
	struct virtio_mmio *t;
	const struct gmem *mem;
	pthread_mutex_t lock;
	/* Under lock. The saved state (balloon_fields) is num_pages .. stat. */
	uint32_t num_pages, actual;
	uint16_t stats_interval_s;
	bool stats_held;     /* a statistics chain is kept, to be returned on the next tick */
	uint16_t stats_head; /* its head */
	uint32_t stats_present;
	uint64_t stat[BALLOON_NR_STATS];
	bool active;
	bool deflate_on_oom;
	int timer_fd; /* the statistics tick */
	int kick_fd;  /* eventfd: a round stopped at its budget, come back */
	/* Counters (event loop; read by the API with the loop stopped). */
	uint64_t inflated, deflated, bad_pfns, bad_discards, bad_config;
};

/* ---- pure helpers ------------------------------------------------------------------------------------ */

/* Shell sort (Ciura's gaps): at most 256 PFNs, and no qsort, which may call sysinfo (the I/O thread's seccomp). */
static void sort_u32(uint32_t *v, unsigned n)
{
	static const unsigned gaps[] = {132, 57, 23, 10, 4, 1};

	for (unsigned g = 0; g < sizeof(gaps) / sizeof(gaps[0]); g++)
		for (unsigned i = gaps[g]; i < n; i++) {
			uint32_t x = v[i];
			unsigned j = i;

			for (; j >= gaps[g] && v[j - gaps[g]] > x; j -= gaps[g])
				v[j] = v[j - gaps[g]];
			v[j] = x;
		}
}

unsigned balloon_compact(uint32_t *pfn, unsigned n, uint32_t *start, uint32_t *len)
{
	unsigned runs = 0;

	if (!n)
		return 0;
	sort_u32(pfn, n);
	start[0] = pfn[0];
	len[0] = 1;
	for (unsigned i = 1; i < n; i++) {
		if (pfn[i] == pfn[i - 1])
			continue; /* a duplicate (Firecracker: "Skipping duplicate PFN") */
		if (pfn[i] == start[runs] + len[runs]) {
			len[runs]++;
			continue;
		}
		runs++;
		start[runs] = pfn[i];
		len[runs] = 1;
	}
	return runs + 1;
}

/* Whether PFN `pfn` names a 4 KiB page wholly inside guest RAM (never the MMIO hole, never past RAM). */
static bool pfn_in_ram(const struct gmem *m, uint32_t pfn)
{
	return gmem_ptr(m, (uint64_t)pfn << BALLOON_PFN_SHIFT, 1u << BALLOON_PFN_SHIFT) != NULL;
}

/* ---- inflate and deflate ----------------------------------------------------------------------------- */

static void kick(struct balloon *b)
{
	uint64_t one = 1;

	if (write(b->kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("virtio-balloon: eventfd write: %s", strerror(errno));
}

/*
 * A buffer's PFNs into pfn[] (at most BALLOON_MAX_PFNS_PER_BUF), those outside RAM dropped and counted.
 * Returns the count kept, or -1 (the buffer is malformed: dropped, case 58).
 */
static int read_pfns(struct balloon *b, struct virtq_iter *it, const struct virtq_chain *c, uint32_t *pfn)
{
	unsigned n, kept = 0;

	if (c->nr_in || !c->nr_out || c->out_bytes % 4 || c->out_bytes > BALLOON_MAX_PFNS_PER_BUF * 4) {
		virtq_drop(it, c,
			   c->nr_in ? "a device-writable buffer in a PFN array"
				    : "a PFN array of a length that is not 4..1024 bytes in 4-byte PFNs");
		fcm_inc(fcm_balloon, FCM_BALLOON_event_fails);
		return -1;
	}
	n = (unsigned)(c->out_bytes / 4);
	if (virtq_copy_from(c, 0, pfn, c->out_bytes) != c->out_bytes)
		return -1; /* cannot happen: out_bytes is what the segments hold */
	for (unsigned i = 0; i < n; i++) {
		if (pfn_in_ram(b->mem, pfn[i])) {
			pfn[kept++] = pfn[i];
			continue;
		}
		if (log_ratelimit(b->bad_pfns))
			log_warn("virtio-balloon: PFN 0x%x (guest-physical 0x%llx) is not in guest RAM: dropped "
				 "(%llu so far)",
				 pfn[i], (unsigned long long)pfn[i] << BALLOON_PFN_SHIFT,
				 (unsigned long long)b->bad_pfns + 1);
		b->bad_pfns++;
	}
	return (int)kept;
}

/* Gives the host back the pages of one inflate buffer. */
static void inflate_one(struct balloon *b, struct virtq_iter *it, const struct virtq_chain *c)
{
	uint32_t pfn[BALLOON_MAX_PFNS_PER_BUF], start[BALLOON_MAX_PFNS_PER_BUF], len[BALLOON_MAX_PFNS_PER_BUF];
	int n = read_pfns(b, it, c, pfn);
	unsigned runs;

	if (n < 0)
		return;
	runs = balloon_compact(pfn, (unsigned)n, start, len);
	for (unsigned r = 0; r < runs; r++) {
		int err = gmem_discard(b->mem, (uint64_t)start[r] << BALLOON_PFN_SHIFT,
				       (uint64_t)len[r] << BALLOON_PFN_SHIFT);

		if (err && log_ratelimit(b->bad_discards++))
			log_warn("virtio-balloon: discarding %u pages at PFN 0x%x failed: %s", len[r], start[r],
				 strerror(-err));
	}
	b->inflated += (unsigned)n;
	virtq_push(it->q, c->head, 0);
}

static void deflate_one(struct balloon *b, struct virtq_iter *it, const struct virtq_chain *c)
{
	uint32_t pfn[BALLOON_MAX_PFNS_PER_BUF];
	int n = read_pfns(b, it, c, pfn);

	if (n < 0)
		return;
	b->deflated += (unsigned)n;
	virtq_push(it->q, c->head, 0);
}

/* One bounded round on queue q (event loop, I/O lock held). */
static void serve_pfns(struct balloon *b, unsigned q)
{
	struct virtq_seg segs[BALLOON_MAX_SEGS];
	struct virtq_chain c;
	struct virtq_iter it;

	fcm_inc(fcm_balloon, q == BALLOON_INFLATE ? FCM_BALLOON_inflate_count : FCM_BALLOON_deflate_count);
	if (!virtio_iter(b->t, q, &it, segs, BALLOON_MAX_SEGS, BALLOON_CHAINS_PER_ROUND))
		return;
	while (virtq_next(&it, &c))
		(q == BALLOON_INFLATE ? inflate_one : deflate_one)(b, &it, &c);
	if (virtq_iter_pushed(&it))
		virtio_queue_done(b->t, q);
	if (it.more)
		kick(b);
}

static void serve_stats(struct balloon *b);

/*
 * The eventfd: a round that stopped at its budget, or the activation (the driver may make buffers available
 * before DRIVER_OK, 3.1.1 step 7, and Linux's virtio_balloon primes the statistics queue then: those
 * notifications came while the device was not active and are served now).
 */
static void kicked(void *arg, uint32_t events)
{
	struct balloon *b = arg;
	uint64_t n;

	(void)events;
	if (read(b->kick_fd, &n, sizeof(n)) != sizeof(n))
		return;
	serve_pfns(b, BALLOON_INFLATE);
	serve_pfns(b, BALLOON_DEFLATE);
	if (b->stats_interval_s)
		serve_stats(b);
}

/* ---- statistics ---------------------------------------------------------------------------------------- */

/* The entries of one statistics buffer into b->stat (lock held). */
static void read_stats(struct balloon *b, const struct virtq_chain *c)
{
	uint64_t n = c->out_bytes / BALLOON_STAT_SIZE;

	if (n > BALLOON_MAX_STATS)
		n = BALLOON_MAX_STATS;
	for (uint64_t i = 0; i < n; i++) {
		uint8_t e[BALLOON_STAT_SIZE];
		uint16_t tag;
		uint64_t val;

		if (virtq_copy_from(c, i * BALLOON_STAT_SIZE, e, sizeof(e)) != sizeof(e))
			break;
		memcpy(&tag, e, 2);
		memcpy(&val, e + 2, 8);
		if (tag >= BALLOON_NR_STATS) {
			fcm_inc(fcm_balloon, FCM_BALLOON_stats_update_fails);
			continue;
		}
		b->stat[tag] = val;
		b->stats_present |= 1u << tag;
	}
}

static void serve_stats(struct balloon *b)
{
	struct virtq_seg segs[BALLOON_MAX_SEGS];
	struct virtq_chain c;
	struct virtq_iter it;

	if (!virtio_iter(b->t, BALLOON_STATS, &it, segs, BALLOON_MAX_SEGS, BALLOON_CHAINS_PER_ROUND))
		return;
	while (virtq_next(&it, &c)) {
		fcm_inc(fcm_balloon, FCM_BALLOON_stats_updates_count);
		if (c.nr_in) {
			virtq_drop(&it, &c, "a device-writable buffer on the statistics queue");
			continue;
		}
		pthread_mutex_lock(&b->lock);
		if (b->stats_held) {
			log_warn("virtio-balloon: driver is not compliant, more than one stats buffer received");
			virtq_push(it.q, b->stats_head, 0);
		}
		read_stats(b, &c);
		b->stats_held = true;
		b->stats_head = c.head;
		pthread_mutex_unlock(&b->lock);
	}
	if (virtq_iter_pushed(&it))
		virtio_queue_done(b->t, BALLOON_STATS);
	if (it.more)
		kick(b);
}

/* The tick: the held buffer goes back to the driver, which refills it (5.5.6.3). */
static void stats_tick(void *arg, uint32_t events)
{
	struct balloon *b = arg;
	struct virtq *q;
	uint64_t n;
	bool give;

	(void)events;
	if (read(b->timer_fd, &n, sizeof(n)) != sizeof(n))
		return;
	pthread_mutex_lock(&b->lock);
	give = b->active && b->stats_held;
	q = give ? virtio_queue(b->t, BALLOON_STATS) : NULL;
	if (q)
		virtq_push(q, b->stats_head, 0);
	if (give)
		b->stats_held = false;
	pthread_mutex_unlock(&b->lock);
	if (q)
		virtio_queue_done(b->t, BALLOON_STATS);
}

/* Arms the tick: first in `first_ns`, then every stats_interval_s; 0 disarms (lock held). */
static void arm_timer(struct balloon *b, long first_ns)
{
	struct itimerspec its = {0};

	if (b->stats_interval_s && b->active) {
		its.it_interval.tv_sec = b->stats_interval_s;
		if (first_ns)
			its.it_value.tv_nsec = first_ns;
		else
			its.it_value.tv_sec = b->stats_interval_s;
	}
	if (timerfd_settime(b->timer_fd, 0, &its, NULL) < 0)
		log_warn("virtio-balloon: timerfd_settime: %s", strerror(errno));
}

/* ---- the virtio device -------------------------------------------------------------------------------- */

static void balloon_notify(void *dev, unsigned q)
{
	struct balloon *b = dev;

	if (q == BALLOON_STATS)
		serve_stats(b);
	else
		serve_pfns(b, q);
}

static void balloon_config_read(void *dev, uint32_t offset, void *data, unsigned len)
{
	struct balloon *b = dev;
	uint32_t cfg[2];

	pthread_mutex_lock(&b->lock);
	cfg[0] = b->num_pages;
	cfg[1] = b->actual;
	pthread_mutex_unlock(&b->lock);
	memcpy(data, (uint8_t *)cfg + offset, len); /* offset + len <= 8: the transport checked */
}

/* Only `actual` is the driver's (5.5.4); a write to num_pages is refused and counted. */
static void balloon_config_write(void *dev, uint32_t offset, const void *data, unsigned len)
{
	struct balloon *b = dev;

	pthread_mutex_lock(&b->lock);
	if (offset >= 4) {
		uint32_t actual = b->actual;

		memcpy((uint8_t *)&actual + (offset - 4), data, len);
		b->actual = actual;
	} else if (log_ratelimit(b->bad_config++)) {
		log_warn("virtio-balloon: driver write to num_pages (config offset %u, %u bytes) ignored", offset, len);
	}
	pthread_mutex_unlock(&b->lock);
}

static int balloon_activate(void *dev, uint64_t features)
{
	struct balloon *b = dev;

	(void)features;
	pthread_mutex_lock(&b->lock);
	b->active = true;
	arm_timer(b, 0);
	pthread_mutex_unlock(&b->lock);
	kick(b); /* buffers made available before DRIVER_OK */
	return 0;
}

static void balloon_reset(void *dev)
{
	struct balloon *b = dev;

	pthread_mutex_lock(&b->lock);
	b->active = false;
	b->stats_held = false;
	arm_timer(b, 0);
	pthread_mutex_unlock(&b->lock);
}

/* ---- snapshot ------------------------------------------------------------------------------------------- */

static const struct snap_field balloon_fields[] = {
    SNAP_UINT(struct balloon, num_pages, 4),
    SNAP_UINT(struct balloon, actual, 4),
    SNAP_UINT(struct balloon, stats_interval_s, 2),
    SNAP_FLAG(struct balloon, stats_held),
    SNAP_UINT_MAX(struct balloon, stats_head, 2, BALLOON_QUEUE_SIZE - 1),
    SNAP_UINT_MASK(struct balloon, stats_present, 4, (1u << BALLOON_NR_STATS) - 1),
    SNAP_BYTES(struct balloon, stat),
};
static const struct snap_record balloon_record = SNAP_RECORD("virtio-balloon", balloon_fields);

static int balloon_save(void *dev, struct snap_writer *w)
{
	struct balloon *b = dev;
	int err;

	pthread_mutex_lock(&b->lock);
	err = snap_record_put(w, &balloon_record, b, 1);
	pthread_mutex_unlock(&b->lock);
	return err;
}

/* The saved target, count, interval and held statistics buffer; statistics on or off as this device is. */
static int balloon_restore(void *dev, struct snap_reader *r)
{
	struct balloon *b = dev, n = {0};
	char why[160];

	if (snap_record_get(r, &balloon_record, &n, snap_version(r), why, sizeof(why))) {
		log_error("virtio-balloon: snapshot refused: %s", why);
		return -EINVAL;
	}
	if (!n.stats_interval_s != !b->stats_interval_s || (n.stats_held && !n.stats_interval_s)) {
		log_error("virtio-balloon: snapshot refused: statistics interval %u s, this device's %u s",
			  n.stats_interval_s, b->stats_interval_s);
		return -EINVAL;
	}
	pthread_mutex_lock(&b->lock);
	snap_record_copy(&balloon_record, b, &n);
	pthread_mutex_unlock(&b->lock);
	return 0;
}

static void balloon_stop(void *dev)
{
	struct balloon *b = dev;

	log_info("virtio-balloon: %llu pages inflated, %llu deflated, %llu PFNs outside RAM dropped, %llu discards "
		 "failed",
		 (unsigned long long)b->inflated, (unsigned long long)b->deflated, (unsigned long long)b->bad_pfns,
		 (unsigned long long)b->bad_discards);
}

static void balloon_destroy(void *dev)
{
	struct balloon *b = dev;

	if (b->timer_fd >= 0)
		close(b->timer_fd);
	if (b->kick_fd >= 0)
		close(b->kick_fd);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

#define BALLOON_OPS(nq)                                                                                                \
	{                                                                                                              \
		.name = "virtio-balloon", .device_id = VIRTIO_ID_BALLOON, .nr_queues = (nq),                           \
		.queue_max = BALLOON_QUEUE_SIZE, .config_size = BALLOON_CONFIG_SIZE,                                   \
		.config_read = balloon_config_read, .config_write = balloon_config_write,                              \
		.activate = balloon_activate, .notify = balloon_notify, .reset = balloon_reset, .save = balloon_save,  \
		.restore = balloon_restore, .stop = balloon_stop, .destroy = balloon_destroy,                          \
	}

static const struct virtio_dev_ops balloon_ops = BALLOON_OPS(2), balloon_stats_ops = BALLOON_OPS(3);

/* ---- the API's calls (vm_device_call) -------------------------------------------------------------------- */

int virtio_balloon_info(void *dev, void *arg)
{
	struct balloon *b = dev;
	struct balloon_info *i = arg;

	pthread_mutex_lock(&b->lock);
	*i = (struct balloon_info){
	    .num_pages = b->num_pages,
	    .actual_pages = b->actual,
	    .deflate_on_oom = b->deflate_on_oom,
	    .stats_interval_s = b->stats_interval_s,
	    .active = b->active,
	    .stats_present = b->stats_present,
	    .inflated = b->inflated,
	    .deflated = b->deflated,
	    .bad_pfns = b->bad_pfns,
	    .bad_discards = b->bad_discards,
	};
	memcpy(i->stat, b->stat, sizeof(i->stat));
	pthread_mutex_unlock(&b->lock);
	return 0;
}

int virtio_balloon_set_target(void *dev, void *arg)
{
	struct balloon *b = dev;
	uint32_t mib = *(const uint32_t *)arg;
	int err = 0;

	if (mib > UINT32_MAX / BALLOON_PAGES_PER_MIB)
		return -ERANGE;
	pthread_mutex_lock(&b->lock);
	if (b->active)
		b->num_pages = mib * BALLOON_PAGES_PER_MIB;
	else
		err = -ENOTCONN;
	pthread_mutex_unlock(&b->lock);
	if (!err)
		virtio_config_changed(b->t); /* 5.5.6.1: the driver re-reads num_pages */
	return err;
}

int virtio_balloon_set_stats_interval(void *dev, void *arg)
{
	struct balloon *b = dev;
	uint16_t s = *(const uint16_t *)arg;
	int err = 0;

	pthread_mutex_lock(&b->lock);
	if (s == b->stats_interval_s)
		;
	else if (!s || !b->stats_interval_s)
		err = -EPERM;
	else {
		b->stats_interval_s = s;
		arm_timer(b, 1); /* the held buffer goes back at once: a fresh report, then every s seconds */
	}
	pthread_mutex_unlock(&b->lock);
	return err;
}

/* ---- construction --------------------------------------------------------------------------------------- */

int virtio_balloon_create(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win,
			  const struct vm_balloon *cfg, void **backend)
{
	struct balloon *b = calloc(1, sizeof(*b));
	uint64_t features = (cfg->deflate_on_oom ? VIRTIO_BALLOON_F_DEFLATE_ON_OOM : 0) |
			    (cfg->stats_interval_s ? VIRTIO_BALLOON_F_STATS_VQ : 0);
	int err;

	if (!b)
		return -ENOMEM;
	if (cfg->amount_mib > UINT32_MAX / BALLOON_PAGES_PER_MIB) {
		free(b);
		return -ERANGE;
	}
	pthread_mutex_init(&b->lock, NULL);
	b->mem = ctx->mem;
	b->num_pages = cfg->amount_mib * BALLOON_PAGES_PER_MIB;
	b->deflate_on_oom = cfg->deflate_on_oom;
	b->stats_interval_s = cfg->stats_interval_s;
	b->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	b->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (b->timer_fd < 0 || b->kick_fd < 0) {
		err = -errno;
		balloon_destroy(b);
		return err;
	}
	err = virtio_mmio_create(ctx, bus, win, cfg->stats_interval_s ? &balloon_stats_ops : &balloon_ops, b, features,
				 &b->t); /* owns b from here on */
	if (!err)
		err = virtio_watch(b->t, b->timer_fd, EPOLLIN, stats_tick, b);
	if (!err)
		err = virtio_watch(b->t, b->kick_fd, EPOLLIN, kicked, b);
	if (!err && backend)
		*backend = b;
	return err;
}

/* ---- --balloon SIZE[,deflate_on_oom][,stats=SECONDS] ---------------------------------------------------- */

static int balloon_word(const char *w, struct vm_balloon *bc, char *err, size_t errlen)
{
	unsigned long s;

	if (strcmp(w, "deflate_on_oom") == 0) {
		bc->deflate_on_oom = true;
		return 0;
	}
	if (strncmp(w, "stats=", 6) == 0) {
		if (config_parse_uint(w + 6, 0, UINT16_MAX, &s))
			return err_set(err, errlen, -EINVAL, "stats=%s: expected seconds 0..65535", w + 6);
		bc->stats_interval_s = (uint16_t)s;
		return 0;
	}
	return err_set(err, errlen, -EINVAL, "unknown option '%s' (deflate_on_oom, stats=SECONDS)", w);
}

int balloon_parse_option(const char *arg, struct vm_config *cfg, char *err, size_t errlen)
{
	struct vm_balloon bc = {.enabled = true};
	char buf[128], *save = NULL, *w;
	uint64_t size;

	if (!arg || strlen(arg) >= sizeof(buf))
		return err_set(err, errlen, -EINVAL, "expected SIZE[,deflate_on_oom][,stats=SECONDS]");
	snprintf(buf, sizeof(buf), "%s", arg);
	w = strtok_r(buf, ",", &save);
	if (!w || config_parse_size(w, &size) || size % (1u << 20) ||
	    size / (1u << 20) > UINT32_MAX / BALLOON_PAGES_PER_MIB)
		return err_set(err, errlen, -EINVAL, "SIZE %s: expected a whole number of MiB such as 64 or 256M",
			       w ? w : "");
	bc.amount_mib = (uint32_t)(size >> 20);
	while ((w = strtok_r(NULL, ",", &save)))
		if (balloon_word(w, &bc, err, errlen))
			return -EINVAL;
	cfg->balloon = bc;
	return 0;
}
