/*
 * rng.c - virtio entropy device (virtio 1.2 section 5.4): one request queue; each chain's writable
 * buffers are filled from getrandom(2).
 *
 * A guest asking for huge buffers at a high rate must not turn the host into its random-number
 * pump (docs/security.md case 12): at most RNG_MAX_PER_REQUEST bytes per chain, and the device's rate
 * limiter (include/brisk/rate_limiter.h, Firecracker's token buckets): PUT /entropy's rate_limiter, or
 * --rng's `rate` bytes per second (a bucket of `rate` bytes refilled in 1000 ms: a one-second burst).
 * A chain is served what the bandwidth bucket holds, up to what it asks (5.4.6.1 allows fewer bytes),
 * and takes one op. With no tokens the device stops taking chains and the limiter's timerfd on the
 * event loop resumes it; the chains wait in the ring, the guest waits for them. Counted: bytes served,
 * times throttled.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>

#include "brisk/devices.h"
#include "brisk/fc_metrics.h"
#include "brisk/log.h"
#include "brisk/rate_limiter.h"
#include "brisk/snapshot.h"
#include "brisk/virtio.h"

#define RNG_QUEUE_SIZE	    256
#define RNG_MAX_PER_REQUEST 65536 /* bytes filled per chain, at most */
#define RNG_MAX_SEGS	    64	  /* segments per chain we look at; more is refused */

struct rng {
	struct virtio_mmio *t;
	struct rate_limiter rl;
	uint64_t bytes, throttles;
};

/* Fills the chain's writable segments with up to `max` random bytes; returns how many. */
static uint32_t fill(const struct virtq_chain *c, uint64_t max)
{
	struct virtq_cursor w;
	uint64_t done = 0, want;
	uint8_t *p;

	virtq_writer(&w, c);
	while ((want = virtq_cursor_span(&w, max - done, &p)) != 0) {
		for (uint64_t got = 0; got < want;) {
			ssize_t n = getrandom(p + got, (size_t)(want - got), 0);

			if (n <= 0)
				return (uint32_t)(done + got); /* EINTR or worse: serve what we have */
			got += (uint64_t)n;
		}
		done += want;
	}
	return (uint32_t)done;
}

static void throttled(struct rng *r)
{
	r->throttles++;
	fcm_inc(fcm_entropy, FCM_ENTROPY_entropy_rate_limiter_throttled);
}

/*
 * How many bytes chain `c` is served now: what it asks, at most RNG_MAX_PER_REQUEST and what the
 * bandwidth bucket holds, with one op taken. 0: throttled (the limiter's timer is armed), leave it.
 */
static uint64_t grant(struct rng *r, const struct virtq_chain *c)
{
	uint64_t want = c->in_bytes < RNG_MAX_PER_REQUEST ? c->in_bytes : RNG_MAX_PER_REQUEST;
	uint64_t avail = rl_available(&r->rl, RL_BYTES);

	if (avail < want)
		want = avail ? avail : 1; /* nothing there: ask for one, which arms the timer */
	if (!rl_consume(&r->rl, 1, RL_OPS))
		return 0;
	if (!rl_consume(&r->rl, want, RL_BYTES)) {
		rl_replenish(&r->rl, 1, RL_OPS);
		return 0;
	}
	return want;
}

/*
 * One request (5.4.6.1: the driver MUST NOT place driver-readable buffers into the queue). False:
 * throttled; the chain is back in the ring.
 */
static bool serve_one(struct rng *r, struct virtq_iter *it, const struct virtq_chain *c)
{
	uint64_t max;
	uint32_t n;

	if (c->nr_in == 0 || c->nr_out) {
		virtq_drop(it, c,
			   c->nr_out ? "a driver-readable buffer in a request" : "a request with no writable buffer");
		return true;
	}
	if ((max = grant(r, c)) == 0) {
		virtq_unpop(it);
		throttled(r);
		return false;
	}
	n = fill(c, max);
	if (n < max)
		rl_replenish(&r->rl, max - n, RL_BYTES);
	r->bytes += n;
	fcm_add(fcm_entropy, FCM_ENTROPY_entropy_bytes, n);
	virtq_push(it->q, c->head, n);
	return true;
}

/* Serves chains while the limiter lets it (event loop, I/O lock held). */
static void serve(struct rng *r)
{
	struct virtq_seg segs[RNG_MAX_SEGS];
	struct virtq_chain c;
	struct virtq_iter it;

	if (!virtio_iter(r->t, 0, &it, segs, RNG_MAX_SEGS, VIRTQ_NO_BUDGET))
		return;
	while (virtq_next(&it, &c) && serve_one(r, &it, &c))
		;
	if (virtq_iter_pushed(&it))
		virtio_queue_done(r->t, 0);
}

static void rng_notify(void *dev, unsigned q)
{
	struct rng *r = dev;

	(void)q;
	fcm_inc(fcm_entropy, FCM_ENTROPY_entropy_event_count);
	if (r->rl.blocked) { /* throttled: the timer resumes, a notification changes nothing */
		fcm_inc(fcm_entropy, FCM_ENTROPY_entropy_rate_limiter_throttled);
		return;
	}
	serve(r);
}

static void timer_fired(void *arg, uint32_t events)
{
	struct rng *r = arg;

	(void)events;
	fcm_inc(fcm_entropy, FCM_ENTROPY_rate_limiter_event_count);
	if (rl_timer_event(&r->rl))
		serve(r);
}

/*
 * The limiter is the device's, not the driver's session's: a reset and DRIVER_OK again must not refill
 * it (a guest looping over bring-up and reset would otherwise get a fresh burst each time); a timer
 * armed before a reset fires into an inactive queue and changes nothing.
 */
static int rng_activate(void *dev, uint64_t features)
{
	(void)dev;
	(void)features;
	return 0;
}

static void rng_reset(void *dev)
{
	(void)dev;
}

/* The device's own state: its rate limiter (a version-1 section has none: the configuration's stays). */
static int rng_save(void *dev, struct snap_writer *w)
{
	return rl_save(&((struct rng *)dev)->rl, w);
}

static int rng_restore(void *dev, struct snap_reader *r)
{
	struct rng *rg = dev;
	char why[160];

	if (snap_version(r) < RL_SNAP_SINCE)
		return 0;
	if (rl_restore(&rg->rl, r, why, sizeof(why))) {
		log_error("virtio-rng: restore: %s", why);
		return -EINVAL;
	}
	return 0;
}

static void rng_stop(void *dev)
{
	struct rng *r = dev;

	log_info("virtio-rng: %llu bytes served, throttled %llu times", (unsigned long long)r->bytes,
		 (unsigned long long)r->throttles);
}

static void rng_destroy(void *dev)
{
	struct rng *r = dev;

	rl_destroy(&r->rl);
	free(r);
}

static const struct virtio_dev_ops rng_ops = {
    .name = "virtio-rng",
    .device_id = VIRTIO_ID_RNG,
    .nr_queues = 1,
    .queue_max = RNG_QUEUE_SIZE,
    .config_size = 0, /* section 5.4.4: no configuration */
    .activate = rng_activate,
    .notify = rng_notify,
    .reset = rng_reset,
    .save = rng_save,
    .restore = rng_restore,
    .stop = rng_stop,
    .destroy = rng_destroy,
};

int virtio_rng_create(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win,
		      uint64_t bytes_per_sec)
{
	return virtio_rng_open(ctx, bus, win, bytes_per_sec, NULL, NULL);
}

int virtio_rng_open(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win, uint64_t bytes_per_sec,
		    const struct rl_config *limit, void **dev)
{
	struct rl_config rl = limit ? *limit : (struct rl_config){0};
	struct rng *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	if (!rl_bucket_on(&rl.bw)) /* always a byte limit: `rate`, one second's burst, once per VM */
		rl.bw = (struct rl_bucket_cfg){bytes_per_sec, 0, 1000};
	if ((err = rl_init(&r->rl, &rl)) != 0) {
		free(r);
		return err;
	}
	err = virtio_mmio_create(ctx, bus, win, &rng_ops, r, 0, &r->t); /* owns r from here on */
	if (!err)
		err = virtio_watch(r->t, rl_timer_fd(&r->rl), EPOLLIN, timer_fired, r);
	if (!err && dev)
		*dev = r;
	return err;
}
