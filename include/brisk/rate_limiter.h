/*
 * rate_limiter.h - Firecracker's I/O rate limiter (v1.7.0 src/vmm/src/rate_limiter/mod.rs): two token
 * buckets, bandwidth (bytes) and ops (requests), each `size` tokens refilled in `refill_time` ms with an
 * optional `one_time_burst` spent first, and a timerfd that wakes the device once tokens are back.
 * Used by virtio-blk, virtio-net (rx and tx) and virtio-rng (docs/devices.md, "Rate limiting").
 *
 * A device asks rl_consume before it takes a request; a refusal leaves the request in the ring
 * (virtq_unpop) and arms the timer; the device watches rl_timer_fd on its event loop and, when it
 * fires, calls rl_timer_event and serves its queue again. While the timer is armed every consume is
 * refused, so a blocked queue neither spins nor serves.
 */
#ifndef BRISK_RATE_LIMITER_H
#define BRISK_RATE_LIMITER_H

#include <stdbool.h>
#include <stdint.h>

#define RL_REFILL_TIMER_MS 100u /* a refused consume retries after this (Firecracker's REFILL_TIMER_INTERVAL_MS) */

/* One bucket as configured (TokenBucketConfig): size or refill_ms 0 means no bucket. */
struct rl_bucket_cfg {
	uint64_t size;		 /* tokens when full */
	uint64_t one_time_burst; /* extra tokens spent before the budget, once (0: none) */
	uint64_t refill_ms;	 /* time to refill an empty bucket */
};

/* A limiter as configured (RateLimiterConfig). All zero: no limit. */
struct rl_config {
	struct rl_bucket_cfg bw, ops;
};

/* Whether `b` makes a bucket: TokenBucket::new's rule (size, refill_ms non-zero, refill_ms * 10^6 fits u64). */
bool rl_bucket_on(const struct rl_bucket_cfg *b);
/* Whether `c` limits anything (either bucket on). */
bool rl_config_limits(const struct rl_config *c);

/* A live token bucket (TokenBucket). */
struct rl_bucket {
	bool on;
	uint64_t size, initial_burst, refill_ms;
	uint64_t burst;		     /* one_time_burst left */
	uint64_t budget;	     /* tokens now, <= size */
	uint64_t last_ns;	     /* CLOCK_MONOTONIC of the last update */
	uint64_t cap_p, refill_ns_p; /* size and refill time in ns, divided by their gcd */
};

enum rl_reduce { RL_FAIL = 0, RL_OK, RL_OVER };

/* Starts `b` full from `cfg` at time `now_ns` (off when cfg makes no bucket). */
void rl_bucket_init(struct rl_bucket *b, const struct rl_bucket_cfg *cfg, uint64_t now_ns);
/*
 * TokenBucket::reduce at `now_ns`: spends `tokens` from the burst, then the budget (refilled by the
 * time passed when short). RL_FAIL: not enough, nothing spent from the budget. RL_OVER: more than the
 * bucket's size was asked: the budget is emptied and *ratio is what was left over / size (the caller
 * blocks for ratio * refill_ms). An off bucket always succeeds.
 */
enum rl_reduce rl_bucket_reduce(struct rl_bucket *b, uint64_t tokens, uint64_t now_ns, double *ratio);
/* TokenBucket::force_replenish: gives `tokens` back (to the burst while one is left), capped. */
void rl_bucket_replenish(struct rl_bucket *b, uint64_t tokens);
/* TokenBucket::auto_replenish at `now_ns` (exposed for tests and snapshots). */
void rl_bucket_refill(struct rl_bucket *b, uint64_t now_ns);

enum rl_kind { RL_BYTES = 0, RL_OPS };

struct rate_limiter {
	struct rl_bucket bw, ops;
	int timer_fd;	    /* CLOCK_MONOTONIC, non-blocking; -1 when rl_init failed or not called */
	bool blocked;	    /* the timer is armed: every consume fails until rl_timer_event */
	uint64_t throttled; /* consumes refused (or over-consumptions that armed the timer) */
};

/*
 * Sets `rl` up from `cfg` (NULL: no limit) with its timerfd, made even when nothing limits so that
 * a later rl_update can (Firecracker creates it always, seccomp may forbid it later). 0 or -errno.
 */
int rl_init(struct rate_limiter *rl, const struct rl_config *cfg);
/* Closes the timerfd. Idempotent. */
void rl_destroy(struct rate_limiter *rl);
/* Whether any bucket is on: an unlimited limiter's consume is a branch, never a clock read. */
static inline bool rl_active(const struct rate_limiter *rl)
{
	return rl->bw.on || rl->ops.on;
}
/*
 * RateLimiter::consume: false (blocked) while the timer is armed; else reduces the bucket of `kind`:
 * RL_FAIL arms the timer for RL_REFILL_TIMER_MS and returns false; RL_OVER succeeds and arms it for
 * ratio * refill_ms (at least 1 ms); RL_OK succeeds. A kind without a bucket always succeeds.
 */
bool rl_consume(struct rate_limiter *rl, uint64_t tokens, enum rl_kind kind);
/* RateLimiter::manual_replenish: gives back tokens a request took but did not use (its ops after a bytes refusal). */
void rl_replenish(struct rate_limiter *rl, uint64_t tokens, enum rl_kind kind);
/*
 * The tokens of `kind` a consume could take now without blocking (burst and budget, refilled to now):
 * 0 while blocked, UINT64_MAX without a bucket. For a device that may serve less than asked (virtio-rng).
 */
uint64_t rl_available(struct rate_limiter *rl, enum rl_kind kind);
/* The fd a device watches (EPOLLIN) to resume; -1 if none. */
static inline int rl_timer_fd(const struct rate_limiter *rl)
{
	return rl->timer_fd;
}
/* The timer fired (device's loop callback): reads the timerfd; true if it had expired (blocked cleared). */
bool rl_timer_event(struct rate_limiter *rl);
/*
 * RateLimiter::update_buckets with a PATCH's config (vmm_config RateLimiterUpdate): `has_bw`/`has_ops` say
 * whether the body gave that bucket; a given bucket replaces the live one (started full; size or
 * refill_time 0 disables it), an absent one stays as it is.
 */
void rl_update(struct rate_limiter *rl, const struct rl_config *cfg, bool has_bw, bool has_ops);
/* The limiter's configuration now (GET /vm/config): an off bucket reads back as zeroes. */
void rl_get_config(const struct rate_limiter *rl, struct rl_config *out);
struct snap_writer;
struct snap_reader;
/*
 * Snapshots (a device's own state in its virtio-mmio section, version 2 on): each bucket's
 * configuration and state (its budget refilled to now, the one-time burst left), and whether the
 * limiter was blocked. rl_restore reads and checks that (budget <= size, burst <= the initial burst, a
 * bucket's configuration one TokenBucket::new makes) into `rl` only when all of it is valid; a blocked
 * limiter resumes on its timer RL_REFILL_TIMER_MS later. 0 or -errno (-EINVAL with `why`).
 */
int rl_save(struct rate_limiter *rl, struct snap_writer *w);
int rl_restore(struct rate_limiter *rl, struct snap_reader *r, char *why, size_t whylen);
/* The virtio-mmio section version from which a device's section holds its limiters. */
#define RL_SNAP_SINCE 2u

/* CLOCK_MONOTONIC in ns. */
uint64_t rl_now_ns(void);

#endif
