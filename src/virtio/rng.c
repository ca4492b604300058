/*
 * rng.c - virtio entropy device (virtio 1.2 section 5.4): one request queue; each chain's writable
 * buffers are filled from getrandom(2).
 *
 * A guest asking for huge buffers at a high rate must not turn the host into its random-number
 * pump (docs/security.md case 12): at most RNG_MAX_PER_REQUEST bytes per chain, and a token bucket of
 * `rate` bytes per second (a one-second burst). When the bucket is empty the device stops taking
 * chains and a timerfd on the event loop resumes it once enough tokens have accrued; the chains wait
 * in the ring, the guest waits for them. Counted: bytes served, times throttled.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "brisk/devices.h"
#include "brisk/fc_metrics.h"
#include "brisk/log.h"
#include "brisk/virtio.h"

#define RNG_QUEUE_SIZE	    256
#define RNG_MAX_PER_REQUEST 65536     /* bytes filled per chain, at most */
#define RNG_MAX_SEGS	    64	      /* segments per chain we look at; more is refused */
#define RNG_RETRY_NS	    10000000L /* after throttling: try again in 10 ms */

struct rng {
	struct virtio_mmio *t;
	uint64_t rate; /* bytes per second */
	double tokens; /* bytes that may be served now (<= rate: a one-second burst) */
	uint64_t last_ns;
	int timer_fd; /* resumes a throttled queue */
	bool throttled;
	uint64_t bytes, throttles;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void refill(struct rng *r)
{
	uint64_t now = mono_ns();

	r->tokens += (double)(now - r->last_ns) * (double)r->rate / 1e9;
	if (r->tokens > (double)r->rate)
		r->tokens = (double)r->rate;
	r->last_ns = now;
}

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

static void throttle(struct rng *r)
{
	struct itimerspec its = {.it_value = {.tv_nsec = RNG_RETRY_NS}};

	if (!r->throttled)
		r->throttles++, fcm_inc(fcm_entropy, FCM_ENTROPY_entropy_rate_limiter_throttled);
	r->throttled = true;
	if (timerfd_settime(r->timer_fd, 0, &its, NULL) < 0)
		log_warn("virtio-rng: timerfd_settime: %s", strerror(errno));
}

/* Whether another chain may be taken now: tokens left, else the timer is armed to come back. */
static bool has_tokens(struct rng *r)
{
	if (r->tokens >= 1.0)
		return true;
	throttle(r);
	return false;
}

/* One request (5.4.6.1: the driver MUST NOT place driver-readable buffers into the queue). */
static void serve_one(struct rng *r, struct virtq_iter *it, const struct virtq_chain *c)
{
	uint64_t max = (uint64_t)r->tokens < RNG_MAX_PER_REQUEST ? (uint64_t)r->tokens : RNG_MAX_PER_REQUEST;
	uint32_t n;

	if (c->nr_in == 0 || c->nr_out) {
		virtq_drop(it, c,
			   c->nr_out ? "a driver-readable buffer in a request" : "a request with no writable buffer");
		return;
	}
	n = fill(c, max);
	r->tokens -= n;
	r->bytes += n;
	fcm_add(fcm_entropy, FCM_ENTROPY_entropy_bytes, n);
	virtq_push(it->q, c->head, n);
}

/* Serves chains while tokens last (event loop, I/O lock held). */
static void serve(struct rng *r)
{
	struct virtq_seg segs[RNG_MAX_SEGS];
	struct virtq_chain c;
	struct virtq_iter it;

	refill(r);
	if (!virtio_iter(r->t, 0, &it, segs, RNG_MAX_SEGS, VIRTQ_NO_BUDGET))
		return;
	while (has_tokens(r) && virtq_next(&it, &c))
		serve_one(r, &it, &c);
	if (virtq_iter_pushed(&it))
		virtio_queue_done(r->t, 0);
}

static void rng_notify(void *dev, unsigned q)
{
	struct rng *r = dev;

	(void)q;
	fcm_inc(fcm_entropy, FCM_ENTROPY_entropy_event_count);
	if (!r->throttled) /* throttled: the timer resumes, a notification changes nothing */
		serve(r);
}

static void timer_fired(void *arg, uint32_t events)
{
	struct rng *r = arg;
	uint64_t n;

	(void)events;
	if (read(r->timer_fd, &n, sizeof(n)) != sizeof(n))
		return;
	r->throttled = false;
	serve(r);
}

/*
 * The token bucket is the device's, not the driver's session's: a reset and
 * DRIVER_OK again must not refill it (a guest looping over bring-up and reset
 * would otherwise get a fresh burst each time).
 */
static int rng_activate(void *dev, uint64_t features)
{
	struct rng *r = dev;

	(void)features;
	r->throttled = false;
	return 0;
}

static void rng_reset(void *dev)
{
	struct rng *r = dev;
	struct itimerspec off = {0};

	timerfd_settime(r->timer_fd, 0, &off, NULL);
	r->throttled = false;
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

	if (r->timer_fd >= 0)
		close(r->timer_fd);
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
    .stop = rng_stop,
    .destroy = rng_destroy,
};

int virtio_rng_create(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win,
		      uint64_t bytes_per_sec)
{
	struct rng *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	r->rate = bytes_per_sec;
	r->tokens = (double)bytes_per_sec; /* one second's burst, once per VM */
	r->last_ns = mono_ns();
	r->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (r->timer_fd < 0) {
		err = -errno;
		free(r);
		return err;
	}
	err = virtio_mmio_create(ctx, bus, win, &rng_ops, r, 0, &r->t); /* owns r from here on */
	if (!err)
		err = virtio_watch(r->t, r->timer_fd, EPOLLIN, timer_fired, r);
	return err;
}
