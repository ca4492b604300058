/* blk_impl.h - the virtio-blk device's state, shared by blk.c (queue, transport callbacks, opening) and blk_io.c (the
 * I/O). */
#ifndef BRISK_VIRTIO_BLK_IMPL_H
#define BRISK_VIRTIO_BLK_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "brisk/fc_metrics.h"
#include "brisk/rate_limiter.h"
#include "brisk/virtio.h"
#include "brisk/virtio_blk.h"

#define BLK_WORKERS	    4u		/* threads per disk, started as requests need them (measured: more hurt) */
#define BLK_INLINE_MAX	    (64u << 10) /* reads up to this size are first tried on the loop, RWF_NOWAIT */
#define BLK_BOUNCE_SIZE	    (1u << 20)	/* cache=none: a worker's aligned buffer for unaligned guest buffers */
#define BLK_RESET_WAIT_MS   3000	/* a reset waits this long for requests in flight */
#define BLK_QUIESCE_WAIT_MS 5000	/* a snapshot's quiesce waits this long for them */
#define BLK_DEFAULT_ALIGN   512u	/* O_DIRECT alignment when statx cannot say */
#define BLK_PROBE_LEN	    4096	/* bytes past the end of the image the hole-punch probe uses */

/* A request in flight: owned by the loop while on the free list or being parsed, by the pool in between. */
struct blk_inflight {
	struct blk_req req;
	uint16_t head;
	unsigned gen;	   /* the device generation it was started in: stale after a reset */
	bool writethrough; /* FLUSH not negotiated: a write is synced before it completes (5.2.5) */
	struct blk_inflight *next;
};

/* The worker pool: a FIFO of requests to do and one of requests done, under one mutex. */
struct pool {
	pthread_mutex_t mu;
	pthread_cond_t work; /* a request was queued, or stop */
	pthread_cond_t idle; /* running dropped to 0 */
	struct blk_inflight *todo, *todo_tail, *done, *done_tail;
	unsigned queued, running, waiting, threads;
	bool stop;
	pthread_t th[BLK_WORKERS];
	int efd; /* written when `done` becomes non-empty; watched by the loop */
};

struct blk {
	struct virtio_mmio *t;
	uint64_t features; /* the device-specific bits this disk offers (fixed at creation) */
	char *path;
	int fd;
	bool direct;	    /* cache=none: O_DIRECT */
	bool nowait;	    /* RWF_NOWAIT reads work on this file */
	bool zero_range;    /* FALLOC_FL_ZERO_RANGE works (else write-zeroes punches a hole) */
	bool regular;	    /* a regular file (its size can shrink under us) */
	uint32_t mem_align; /* cache=none: guest buffers aligned so go straight to the file */
	uint8_t id[VIRTIO_BLK_ID_BYTES];
	uint8_t config[VIRTIO_BLK_CFG_SIZE];
	struct blk_limits lim;
	/* loop thread (or reset, under the transport's I/O lock) */
	struct blk_inflight *inflight, *free;
	unsigned carved; /* inflight[0..carved) have been on the free list; the rest were never touched (4 KiB each) */
	unsigned gen;
	bool stalled;		/* every entry in flight: chains wait in the ring */
	struct rate_limiter rl; /* the drive's rate_limiter: a throttled chain waits in the ring for its timer */
	dev_t dev;		/* the image's st_dev, st_ino: a swap to the same file re-reads its size */
	ino_t ino;
	struct pool pool;
	struct {
		uint64_t reads, inline_reads, writes, flushes, other, ioerr, unsupp, bad;
	} n;
	_Atomic uint64_t host_errors;
	uint64_t *fcm; /* Firecracker's block_<id> counters (fc_metrics.h), or fcm_own */
	uint64_t fcm_own[FCM_BLOCK_N];
};

/* blk_io.c: hands in-flight entry `s` to the worker pool (starting a worker if none is idle). Returns 0 or -errno. */
int blk_submit(struct blk *b, struct blk_inflight *s);
/* blk_io.c: stops and joins the workers: each finishes the request it is doing; queued ones are abandoned. */
void blk_pool_stop(struct pool *p);
/* blk_io.c: a host-side failure of one request: logged rate-limited, the guest gets IOERR. err 0: no errno. */
uint8_t blk_host_error(struct blk *b, const char *what, int err);

#endif
