/*
 * rate_limiter.c - Firecracker's token-bucket rate limiter (include/brisk/rate_limiter.h), the same
 * arithmetic as v1.7.0 src/vmm/src/rate_limiter/mod.rs: integer refill with the fraction of a token
 * carried over in last_ns, the one-time burst spent first, a request larger than the bucket allowed
 * once and paid for by blocking ratio * refill_time.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "brisk/rate_limiter.h"
#include "brisk/snap_fields.h"

#define NS_PER_MS 1000000ull

__extension__ typedef unsigned __int128 u128;

uint64_t rl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t gcd(uint64_t x, uint64_t y)
{
	while (y) {
		uint64_t t = y;

		y = x % y;
		x = t;
	}
	return x;
}

bool rl_bucket_on(const struct rl_bucket_cfg *b)
{
	/* TokenBucket::new: None for size 0, refill 0, or refill_time * 10^6 overflowing (checked_mul) */
	return b->size && b->refill_ms && b->refill_ms <= UINT64_MAX / NS_PER_MS;
}

bool rl_config_limits(const struct rl_config *c)
{
	return rl_bucket_on(&c->bw) || rl_bucket_on(&c->ops);
}

void rl_bucket_init(struct rl_bucket *b, const struct rl_bucket_cfg *cfg, uint64_t now_ns)
{
	uint64_t refill_ns, g;

	memset(b, 0, sizeof(*b));
	if (!rl_bucket_on(cfg))
		return;
	refill_ns = cfg->refill_ms * NS_PER_MS;
	g = gcd(cfg->size, refill_ns);
	*b = (struct rl_bucket){
	    .on = true,
	    .size = cfg->size,
	    .initial_burst = cfg->one_time_burst,
	    .refill_ms = cfg->refill_ms,
	    .burst = cfg->one_time_burst,
	    .budget = cfg->size, /* starts full */
	    .last_ns = now_ns,
	    .cap_p = cfg->size / g,
	    .refill_ns_p = refill_ns / g,
	};
}

void rl_bucket_refill(struct rl_bucket *b, uint64_t now_ns)
{
	uint64_t delta = now_ns > b->last_ns ? now_ns - b->last_ns : 0;
	u128 tokens, adjust;

	if (delta >= b->refill_ms * NS_PER_MS) {
		b->budget = b->size;
		b->last_ns = now_ns;
		return;
	}
	/* delta < refill_ns fits u64 and cap_p <= size: the products fit u128 */
	tokens = (u128)delta * b->cap_p / b->refill_ns_p;
	/* carry the fraction of a token over: last_ns moves by the time the whole tokens took, rounded up */
	adjust = tokens * b->refill_ns_p / b->cap_p;
	if (tokens * b->refill_ns_p % b->cap_p)
		adjust++;
	b->last_ns += (uint64_t)adjust;
	b->budget = b->size - b->budget <= (uint64_t)tokens ? b->size : b->budget + (uint64_t)tokens;
}

enum rl_reduce rl_bucket_reduce(struct rl_bucket *b, uint64_t tokens, uint64_t now_ns, double *ratio)
{
	if (!b->on)
		return RL_OK;
	if (b->burst) {
		if (b->burst >= tokens) {
			b->burst -= tokens;
			b->last_ns = now_ns;
			return RL_OK;
		}
		tokens -= b->burst;
		b->burst = 0;
	}
	if (tokens > b->budget) {
		rl_bucket_refill(b, now_ns);
		if (tokens > b->size) {
			tokens -= b->budget;
			b->budget = 0;
			*ratio = (double)tokens / (double)b->size;
			return RL_OVER;
		}
		if (tokens > b->budget)
			return RL_FAIL;
	}
	b->budget -= tokens;
	return RL_OK;
}

void rl_bucket_replenish(struct rl_bucket *b, uint64_t tokens)
{
	if (!b->on)
		return;
	if (b->burst) {
		b->burst = b->initial_burst - b->burst <= tokens ? b->initial_burst : b->burst + tokens;
		return;
	}
	b->budget = b->size - b->budget <= tokens ? b->size : b->budget + tokens;
}

int rl_init(struct rate_limiter *rl, const struct rl_config *cfg)
{
	static const struct rl_config none;
	uint64_t now = rl_now_ns();

	if (!cfg)
		cfg = &none;
	memset(rl, 0, sizeof(*rl));
	rl_bucket_init(&rl->bw, &cfg->bw, now);
	rl_bucket_init(&rl->ops, &cfg->ops, now);
	rl->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	return rl->timer_fd < 0 ? -errno : 0;
}

void rl_destroy(struct rate_limiter *rl)
{
	if (rl->timer_fd >= 0)
		close(rl->timer_fd);
	rl->timer_fd = -1;
}

/* Arms the one-shot timer `ms` from now (at least 1 ms: a zero it_value would disarm it and block forever). */
static void arm(struct rate_limiter *rl, uint64_t ms)
{
	struct itimerspec its = {0};

	if (ms == 0)
		ms = 1;
	if (ms > (uint64_t)INT32_MAX * 1000ull)
		ms = (uint64_t)INT32_MAX * 1000ull; /* a refill_time of years: 68 years is as good */
	its.it_value.tv_sec = (time_t)(ms / 1000);
	its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
	rl->blocked = true;
	rl->throttled++;
	if (rl->timer_fd >= 0)
		timerfd_settime(rl->timer_fd, 0, &its, NULL);
}

bool rl_consume(struct rate_limiter *rl, uint64_t tokens, enum rl_kind kind)
{
	struct rl_bucket *b = kind == RL_BYTES ? &rl->bw : &rl->ops;
	double ratio = 0;

	if (rl->blocked)
		return false;
	if (!b->on)
		return true;
	switch (rl_bucket_reduce(b, tokens, rl_now_ns(), &ratio)) {
	case RL_FAIL:
		arm(rl, RL_REFILL_TIMER_MS);
		return false;
	case RL_OVER: {
		double ms = ratio * (double)b->refill_ms;

		arm(rl, ms >= 1.8e19 ? UINT64_MAX : (uint64_t)ms);
		return true;
	}
	case RL_OK:
		break;
	}
	return true;
}

void rl_replenish(struct rate_limiter *rl, uint64_t tokens, enum rl_kind kind)
{
	rl_bucket_replenish(kind == RL_BYTES ? &rl->bw : &rl->ops, tokens);
}

uint64_t rl_available(struct rate_limiter *rl, enum rl_kind kind)
{
	struct rl_bucket *b = kind == RL_BYTES ? &rl->bw : &rl->ops;

	if (rl->blocked)
		return 0;
	if (!b->on)
		return UINT64_MAX;
	rl_bucket_refill(b, rl_now_ns());
	return UINT64_MAX - b->budget < b->burst ? UINT64_MAX : b->budget + b->burst;
}

bool rl_timer_event(struct rate_limiter *rl)
{
	uint64_t n = 0;

	if (rl->timer_fd < 0 || read(rl->timer_fd, &n, sizeof(n)) != sizeof(n) || n == 0)
		return false;
	rl->blocked = false;
	return true;
}

void rl_update(struct rate_limiter *rl, const struct rl_config *cfg, bool has_bw, bool has_ops)
{
	uint64_t now = rl_now_ns();

	if (has_bw)
		rl_bucket_init(&rl->bw, &cfg->bw, now);
	if (has_ops)
		rl_bucket_init(&rl->ops, &cfg->ops, now);
	if (rl->blocked && (has_bw || has_ops)) {
		rl->throttled--; /* not a new throttle: the device is let go at once under the new buckets */
		arm(rl, 1);
	}
}

static void bucket_cfg(const struct rl_bucket *b, struct rl_bucket_cfg *out)
{
	*out = (struct rl_bucket_cfg){0};
	if (b->on)
		*out = (struct rl_bucket_cfg){b->size, b->initial_burst, b->refill_ms};
}

void rl_get_config(const struct rate_limiter *rl, struct rl_config *out)
{
	bucket_cfg(&rl->bw, &out->bw);
	bucket_cfg(&rl->ops, &out->ops);
}

/* ---- snapshots -------------------------------------------------------------------------------- */

struct rl_bucket_image {
	uint8_t on;
	uint64_t size, initial_burst, refill_ms, burst, budget;
};

struct rl_image {
	struct rl_bucket_image bw, ops;
	uint8_t blocked;
};

#define RL_BUCKET_FIELDS(b)                                                                                            \
	SNAP_FLAG(struct rl_image, b.on), SNAP_UINT(struct rl_image, b.size, 8),                                       \
	    SNAP_UINT(struct rl_image, b.initial_burst, 8), SNAP_UINT(struct rl_image, b.refill_ms, 8),                \
	    SNAP_UINT(struct rl_image, b.burst, 8), SNAP_UINT(struct rl_image, b.budget, 8)

static const struct snap_field rl_fields[] = {RL_BUCKET_FIELDS(bw), RL_BUCKET_FIELDS(ops),
					      SNAP_FLAG(struct rl_image, blocked)};
static const struct snap_record rl_record = SNAP_RECORD("rate limiter", rl_fields);

static void bucket_image(struct rl_bucket *b, uint64_t now, struct rl_bucket_image *img)
{
	*img = (struct rl_bucket_image){0};
	if (!b->on)
		return;
	rl_bucket_refill(b, now);
	*img = (struct rl_bucket_image){1, b->size, b->initial_burst, b->refill_ms, b->burst, b->budget};
}

int rl_save(struct rate_limiter *rl, struct snap_writer *w)
{
	uint64_t now = rl_now_ns();
	struct rl_image img = {.blocked = rl->blocked};

	bucket_image(&rl->bw, now, &img.bw);
	bucket_image(&rl->ops, now, &img.ops);
	return snap_record_put(w, &rl_record, &img, 1);
}

/* A saved bucket: off and all zero, or one TokenBucket::new makes with its state in bounds. */
static const char *bucket_bad(const struct rl_bucket_image *b)
{
	struct rl_bucket_cfg cfg = {b->size, b->initial_burst, b->refill_ms};

	if (!b->on)
		return b->size || b->initial_burst || b->refill_ms || b->burst || b->budget
			   ? "an off bucket with values"
			   : NULL;
	if (!rl_bucket_on(&cfg))
		return "a bucket of size or refill_time 0 (or a refill_time past u64 nanoseconds)";
	if (b->budget > b->size)
		return "a budget above the bucket's size";
	if (b->burst > b->initial_burst)
		return "a one-time burst above its initial value";
	return NULL;
}

static void bucket_from(struct rl_bucket *b, const struct rl_bucket_image *img, uint64_t now)
{
	rl_bucket_init(b, &(struct rl_bucket_cfg){img->size, img->initial_burst, img->refill_ms}, now);
	if (b->on) {
		b->burst = img->burst;
		b->budget = img->budget;
	}
}

int rl_restore(struct rate_limiter *rl, struct snap_reader *r, char *why, size_t whylen)
{
	struct rl_image img = {0};
	const char *bad;
	uint64_t now = rl_now_ns();

	if (snap_record_get(r, &rl_record, &img, 1, why, whylen))
		return -EINVAL;
	if ((bad = bucket_bad(&img.bw)) != NULL || (bad = bucket_bad(&img.ops)) != NULL) {
		snprintf(why, whylen, "rate limiter: %s", bad);
		return -EINVAL;
	}
	bucket_from(&rl->bw, &img.bw, now);
	bucket_from(&rl->ops, &img.ops, now);
	rl->blocked = false;
	if (img.blocked) {
		arm(rl, RL_REFILL_TIMER_MS); /* the chains that waited are served when it fires */
		rl->throttled--;
	}
	return 0;
}
