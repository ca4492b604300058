/*
 * blk.c - virtio block device (virtio 1.2 section 5.2) on a raw image: one request queue, I/O on a bounded
 * pool of worker threads (preadv/pwritev/fdatasync/fallocate), small cached reads served on the event loop.
 *
 * Request flow (docs/devices.md, "virtio-blk"): the event loop pops a chain, blk_parse checks it (the
 * header copied out of guest memory once, ranges overflow-safe, docs/security.md case 8 and 9), and the request
 * goes to a worker, which reads or writes straight between the image and guest RAM. The worker puts it
 * on a done list and signals an eventfd the loop watches (virtio_watch); the loop writes the status byte,
 * pushes the used entry and interrupts. No request runs on a vCPU thread. At most BLK_QUEUE_SIZE requests
 * are in flight: with every in-flight entry taken the loop leaves the rest in the ring until one completes.
 *
 * The engine was chosen by measurement (docs/performance.md, "virtio-blk I/O engine", bench/blk_engine.c):
 * against io_uring the pool is as fast where the default cache mode spends its time (page-cache reads at
 * queue depth 1 through the RWF_NOWAIT fast path, buffered writes) and needs no io_uring, which container
 * seccomp profiles and the io_uring_disabled sysctl often forbid.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "blk_impl.h"
#include "brisk/devices.h"
#include "brisk/devmgr.h"
#include "brisk/errmsg.h"
#include "brisk/fc_metrics.h"
#include "brisk/file.h"
#include "brisk/log.h"
#include "brisk/snapshot.h"
#include "brisk/thread.h"
#include "brisk/virtio.h"
#include "brisk/virtio_blk.h"
#include "brisk/vm.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "virtio-blk fields are read without byte swapping");

/* ---- the queue (event loop, under the transport's I/O lock) ---------------------------------------------- */

static void put_inflight(struct blk *b, struct blk_inflight *s)
{
	s->next = b->free;
	b->free = s;
}

/* A completed request, in brisk's counts and Firecracker's (block_<id>: read/write/flush counts and bytes). */
static void count(struct blk *b, const struct blk_req *r, uint8_t status)
{
	if (status == VIRTIO_BLK_S_IOERR) {
		b->n.ioerr++;
		fcm_inc(b->fcm, FCM_BLOCK_execute_fails);
	} else if (status == VIRTIO_BLK_S_UNSUPP) {
		b->n.unsupp++;
		fcm_inc(b->fcm, FCM_BLOCK_invalid_reqs_count);
	} else if (r->type == VIRTIO_BLK_T_IN) {
		b->n.reads++;
		fcm_inc(b->fcm, FCM_BLOCK_read_count);
		fcm_add(b->fcm, FCM_BLOCK_read_bytes, r->len);
	} else if (r->type == VIRTIO_BLK_T_OUT) {
		b->n.writes++;
		fcm_inc(b->fcm, FCM_BLOCK_write_count);
		fcm_add(b->fcm, FCM_BLOCK_write_bytes, r->len);
	} else if (r->type == VIRTIO_BLK_T_FLUSH) {
		b->n.flushes++;
		fcm_inc(b->fcm, FCM_BLOCK_flush_count);
	} else {
		b->n.other++;
	}
}

/* Writes the status byte and returns the chain (the transport interrupts at virtio_queue_done). */
static void complete(struct blk *b, struct virtq *q, uint16_t head, const struct blk_req *r, uint8_t status)
{
	__atomic_store_n(r->status, status, __ATOMIC_RELAXED);
	virtq_push(q, head, r->used);
	count(b, r, status);
}

/* A read the page cache holds entirely, done here without a thread hop (preadv2 RWF_NOWAIT never blocks). */
static bool read_inline(struct blk *b, struct blk_req *r)
{
	ssize_t n;

	struct iovec iov[BLK_CHAIN_SEGS];
	struct virtq_cursor data;
	int cnt;

	if (!b->nowait || r->type != VIRTIO_BLK_T_IN || r->len > BLK_INLINE_MAX)
		return false;
	virtq_cursor_init(&data, r->seg, r->nseg);
	cnt = (int)virtq_cursor_iov(&data, r->len, iov, BLK_CHAIN_SEGS, NULL);
	n = preadv2(b->fd, iov, cnt, (off_t)(r->sector * VIRTIO_BLK_SECTOR), RWF_NOWAIT);
	if (n < 0 && errno == EOPNOTSUPP)
		b->nowait = false;
	if (n != (ssize_t)r->len)
		return false; /* not all cached, or at the end of a shrunk image: a worker does it properly */
	b->n.inline_reads++;
	return true;
}

/* The GET_ID answer: up to 20 bytes, NUL-padded (5.2.6), into the chain's writable part before the status. */
static void get_id(const struct blk *b, const struct blk_req *r, const struct virtq_chain *c)
{
	struct virtq_cursor w;

	virtq_writer(&w, c);
	virtq_cursor_write(&w, b->id, r->len); /* r->len <= 20, below the status byte (blk_parse) */
}

/*
 * Firecracker's Request::rate_limit: one op for every request, its data bytes for IN and OUT; a refused
 * bytes consume gives the op back. True: throttled (the limiter's timer is armed, the chain goes back).
 */
static bool limited(struct blk *b, const struct blk_req *r)
{
	bool data = r->type == VIRTIO_BLK_T_IN || r->type == VIRTIO_BLK_T_OUT;

#ifdef BRISK_BLK_NO_LIMITER /* bench/blk-limiter.sh: the code path absent, for its cost (docs/performance.md) */
	(void)data;
	return false;
#endif
	if (!rl_active(&b->rl) && !b->rl.blocked)
		return false; /* no limit: one branch on the hot path */
	if (rl_consume(&b->rl, 1, RL_OPS)) {
		if (!data || rl_consume(&b->rl, r->len, RL_BYTES))
			return false;
		rl_replenish(&b->rl, 1, RL_OPS);
	}
	fcm_inc(b->fcm, FCM_BLOCK_rate_limiter_throttled_events);
	return true;
}

/*
 * One popped chain: parsed into the free in-flight entry `s`, then completed at once or handed to the pool.
 * False: the rate limiter refused it; it is back in the ring and the round stops.
 */
static bool start(struct blk *b, struct virtq_iter *it, struct blk_inflight *s, const struct virtq_chain *c)
{
	struct blk_req *r = &s->req;
	struct virtq *q = it->q;

	switch (blk_parse(&b->lim, c, r)) {
	case BLK_REQ_BAD_CHAIN:
		virtq_drop(it, c, r->why); /* counted in b->n.bad by process */
		return true;
	case BLK_REQ_DONE:
		if (r->why) {
			virtio_bad_request(b->t, r->why);
			b->n.bad++;
		}
		complete(b, q, c->head, r, r->result);
		return true;
	case BLK_REQ_IO:
		break;
	}
	if (limited(b, r)) {
		virtq_unpop(it);
		return false;
	}
	if (r->type == VIRTIO_BLK_T_GET_ID) {
		get_id(b, r, c);
		complete(b, q, c->head, r, VIRTIO_BLK_S_OK);
	} else if (read_inline(b, r)) {
		complete(b, q, c->head, r, VIRTIO_BLK_S_OK);
	} else {
		b->free = s->next;
		s->head = c->head;
		s->gen = b->gen;
		s->writethrough = !blk_negotiated(&b->lim, VIRTIO_BLK_F_FLUSH);
		if (blk_submit(b, s) == 0)
			return true;
		put_inflight(b, s);
		blk_host_error(b, "no I/O thread could be started", 0);
		complete(b, q, c->head, r, VIRTIO_BLK_S_IOERR);
	}
	return true;
}

/*
 * The free in-flight entry for the next chain, or NULL with all BLK_QUEUE_SIZE in flight. An entry is carved from the
 * array the first time one is needed: a disk's 1 MiB of entries is not faulted in at start-up, only as deep
 * as the guest's queue ever gets.
 */
static struct blk_inflight *take_inflight(struct blk *b)
{
	if (!b->free && b->carved < BLK_QUEUE_SIZE)
		put_inflight(b, &b->inflight[b->carved++]);
	return b->free;
}

/* A free in-flight entry for the next chain; with none, the device is stalled until a completion frees one. */
static bool slot_free(struct blk *b)
{
	if (take_inflight(b))
		return true;
	b->stalled = true; /* a completion frees an entry and calls us again */
	return false;
}

/* Takes chains while an in-flight entry is free; what completed here is published with one interrupt at most. */
static void process(struct blk *b)
{
	struct virtq_seg segs[BLK_CHAIN_SEGS];
	struct virtq_chain c;
	struct virtq_iter it;

	b->stalled = false;
	if (b->rl.blocked || !virtio_iter(b->t, 0, &it, segs, BLK_CHAIN_SEGS, VIRTQ_NO_BUDGET))
		return; /* throttled: the limiter's timer comes back (rl_fired) */
	while (slot_free(b) && virtq_next(&it, &c) && start(b, &it, b->free, &c))
		;
	b->n.bad += it.bad; /* malformed chains: the iterator's and blk_parse's */
	fcm_add(b->fcm, FCM_BLOCK_invalid_reqs_count, it.bad);
	if (virtq_iter_pushed(&it))
		virtio_queue_done(b->t, 0);
}

static void blk_notify(void *dev, unsigned q)
{
	struct blk *b = dev;

	(void)q;
	fcm_inc(b->fcm, FCM_BLOCK_queue_event_count);
	if (b->rl.blocked) { /* Firecracker's process_queue_event: the limiter's timer resumes the queue */
		fcm_inc(b->fcm, FCM_BLOCK_rate_limiter_throttled_events);
		return;
	}
	process(b);
}

/* The rate limiter's timer (loop thread, I/O lock held): tokens are back, serve the chains that waited. */
static void rl_fired(void *arg, uint32_t events)
{
	struct blk *b = arg;

	(void)events;
	fcm_inc(b->fcm, FCM_BLOCK_rate_limiter_event_count);
	if (rl_timer_event(&b->rl) && b->lim.features)
		process(b);
}

/* The workers' done list (loop thread, I/O lock held): completions of this generation go to the guest. */
static void completed(void *arg, uint32_t events)
{
	struct blk *b = arg;
	struct virtq *q = virtio_queue(b->t, 0);
	struct blk_inflight *s, *next;
	bool pushed = false;
	uint64_t n;

	(void)events;
	if (read(b->pool.efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn("virtio-blk %s: completion eventfd: %s", b->path, strerror(errno));
	pthread_mutex_lock(&b->pool.mu);
	s = b->pool.done;
	b->pool.done = b->pool.done_tail = NULL;
	pthread_mutex_unlock(&b->pool.mu);
	for (; s; s = next) {
		next = s->next;
		if (s->gen == b->gen && q) {
			complete(b, q, s->head, &s->req, s->req.result);
			pushed = true;
		}
		put_inflight(b, s);
	}
	if (pushed)
		virtio_queue_done(b->t, 0);
	if (b->stalled)
		process(b);
}

/* ---- transport callbacks ------------------------------------------------------------------------------------ */

static void blk_config_read(void *dev, uint32_t offset, void *data, unsigned len)
{
	const struct blk *b = dev;

	memcpy(data, b->config + offset, len); /* the transport checked offset + len <= config_size */
}

static int blk_activate(void *dev, uint64_t features)
{
	struct blk *b = dev;

	b->lim.features = features;
	return 0;
}

/* Frees a list of in-flight entries the pool gave back. */
static void put_list(struct blk *b, struct blk_inflight *s)
{
	while (s) {
		struct blk_inflight *next = s->next;

		put_inflight(b, s);
		s = next;
	}
}

/*
 * Device reset during I/O (vCPU thread, I/O lock held, so no loop callback
 * runs): queued requests are dropped, running ones waited for, at most
 * BLK_RESET_WAIT_MS, since they read into and write from guest RAM the
 * driver may reuse. One that outlives the wait completes into nothing: its
 * generation is stale, its entry comes back, no status or used entry is written.
 */
static void blk_reset(void *dev)
{
	struct blk *b = dev;
	struct pool *p = &b->pool;
	struct blk_inflight *todo, *finished;
	struct timespec until = bthread_deadline(CLOCK_MONOTONIC, BLK_RESET_WAIT_MS);
	unsigned left;

	b->gen++;
	pthread_mutex_lock(&p->mu);
	todo = p->todo;
	p->todo = p->todo_tail = NULL;
	p->queued = 0;
	while (p->running && pthread_cond_timedwait(&p->idle, &p->mu, &until) != ETIMEDOUT)
		;
	left = p->running;
	finished = p->done;
	p->done = p->done_tail = NULL;
	pthread_mutex_unlock(&p->mu);
	put_list(b, todo);
	put_list(b, finished);
	b->stalled = false;
	b->lim.features = 0;
	if (left)
		log_warn("virtio-blk %s: reset: %u requests still running after %d ms; their completions are dropped",
			 b->path, left, BLK_RESET_WAIT_MS);
}

/* Requests queued, running, or done and not yet taken back by the loop. */
static unsigned in_flight(struct pool *p)
{
	unsigned n;

	pthread_mutex_lock(&p->mu);
	n = p->queued + p->running + (p->done != NULL);
	pthread_mutex_unlock(&p->mu);
	return n;
}

/* Waits until no request is queued or running, at most until `until`. Returns 0 or -ETIMEDOUT. */
static int wait_idle(struct pool *p, const struct timespec *until)
{
	int err = 0;

	pthread_mutex_lock(&p->mu);
	while ((p->queued || p->running) && err != ETIMEDOUT)
		err = pthread_cond_timedwait(&p->idle, &p->mu, until);
	err = p->queued || p->running ? -ETIMEDOUT : 0;
	pthread_mutex_unlock(&p->mu);
	return err;
}

/*
 * Snapshot quiesce (vCPUs paused, the event loop stopped: no loop callback, the limiter's timer included,
 * runs until after blk_save): every request in the pool finishes and is put on the used ring and published,
 * as `completed` does, and so are the chains the driver made available before its vCPUs stopped (a pending
 * notify then finds nothing new), unless the limiter holds them: they stay in the ring, and the restored
 * limiter (blocked, its timer armed again) serves them. Each round either empties the device or waits for
 * the pool; all rounds together at most BLK_QUIESCE_WAIT_MS.
 */
static int blk_quiesce(void *dev)
{
	struct blk *b = dev;
	struct timespec until = bthread_deadline(CLOCK_MONOTONIC, BLK_QUIESCE_WAIT_MS);

	for (;;) {
		if (wait_idle(&b->pool, &until)) {
			log_warn("virtio-blk %s: quiesce: requests still in flight after %d ms", b->path,
				 BLK_QUIESCE_WAIT_MS);
			return -ETIMEDOUT;
		}
		completed(b, 0);
		if (b->lim.features) /* activated: the queue is the driver's to serve */
			process(b);
		if (in_flight(&b->pool) == 0)
			return 0;
	}
}

/* The disk's own state is its rate limiter (the image is reopened from the configuration); refuses if busy. */
static int blk_save(void *dev, struct snap_writer *w)
{
	struct blk *b = dev;

	if (in_flight(&b->pool)) {
		log_warn("virtio-blk %s: save with requests in flight (quiesce first)", b->path);
		return -EBUSY;
	}
	return rl_save(&b->rl, w);
}

/* A version-1 section has no limiter: the disk keeps the one its configuration made. */
static int blk_restore(void *dev, struct snap_reader *r)
{
	struct blk *b = dev;
	char why[160];

	if (snap_version(r) < RL_SNAP_SINCE)
		return 0;
	if (rl_restore(&b->rl, r, why, sizeof(why))) {
		log_error("virtio-blk %s: restore: %s", b->path, why);
		return -EINVAL;
	}
	return 0;
}

static void blk_stop(void *dev)
{
	struct blk *b = dev;

	blk_pool_stop(&b->pool);
	log_info("virtio-blk %s: %llu reads (%llu from the page cache on the loop), %llu writes, %llu flushes, "
		 "%llu other, %llu IOERR, %llu UNSUPP, %llu malformed, %llu host errors",
		 b->path, (unsigned long long)b->n.reads, (unsigned long long)b->n.inline_reads,
		 (unsigned long long)b->n.writes, (unsigned long long)b->n.flushes, (unsigned long long)b->n.other,
		 (unsigned long long)b->n.ioerr, (unsigned long long)b->n.unsupp, (unsigned long long)b->n.bad,
		 (unsigned long long)atomic_load(&b->host_errors));
}

static void blk_destroy(void *dev)
{
	struct blk *b = dev;

	blk_pool_stop(&b->pool);
	if (b->fd >= 0)
		close(b->fd); /* also drops the OFD lock */
	if (b->pool.efd >= 0)
		close(b->pool.efd);
	pthread_mutex_destroy(&b->pool.mu);
	pthread_cond_destroy(&b->pool.work);
	pthread_cond_destroy(&b->pool.idle);
	rl_destroy(&b->rl);
	free(b->inflight);
	free(b->path);
	free(b);
}

static const struct virtio_dev_ops blk_ops = {
    .name = "virtio-blk",
    .device_id = VIRTIO_ID_BLOCK,
    .nr_queues = 1,
    .queue_max = BLK_QUEUE_SIZE,
    .config_size = VIRTIO_BLK_CFG_SIZE,
    .config_read = blk_config_read,
    .activate = blk_activate,
    .notify = blk_notify,
    .reset = blk_reset,
    .quiesce = blk_quiesce,
    .save = blk_save,
    .restore = blk_restore,
    .stop = blk_stop,
    .destroy = blk_destroy,
};

/* ---- opening the image (docs/security.md case 21: every refusal a clear message, before the guest runs) -----------
 */

/* Opens the image without blocking on a FIFO. A read-write open of a read-only file says so. */
static int open_file(const struct vm_disk *d, char *err, size_t errlen)
{
	int fd = open(d->path, (d->ro ? O_RDONLY : O_RDWR) | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	int e = errno;

	if (fd >= 0)
		return fd;
	if (!d->ro && e == EROFS)
		return err_set(err, errlen, -EROFS,
			       "the image is on a read-only file system; add ,ro to use it read-only");
	if (!d->ro && (e == EACCES || e == EPERM) && access(d->path, R_OK) == 0)
		return err_set(err, errlen, -e,
			       "the image is read-only (no write permission); add ,ro to use it read-only");
	return err_set(err, errlen, -e, "cannot open the image: %s", file_open_reason(e));
}

/*
 * The kernel's own interfaces that show up as regular files (/proc/self/mem, /proc/kcore, sysfs attributes):
 * never a disk image, whatever size they claim. Returns the file system's name, or NULL.
 */
static const char *pseudo_fs(int fd)
{
	static const struct {
		long magic;
		const char *name;
	} kinds[] = {
	    {PROC_SUPER_MAGIC, "procfs"},     {SYSFS_MAGIC, "sysfs"},		{DEBUGFS_MAGIC, "debugfs"},
	    {TRACEFS_MAGIC, "tracefs"},	      {SECURITYFS_MAGIC, "securityfs"}, {CGROUP_SUPER_MAGIC, "cgroupfs"},
	    {CGROUP2_SUPER_MAGIC, "cgroup2"}, {BPF_FS_MAGIC, "bpffs"},		{EFIVARFS_MAGIC, "efivarfs"},
	    {PSTOREFS_MAGIC, "pstore"},
	};
	struct statfs sfs;

	if (fstatfs(fd, &sfs))
		return NULL;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if ((long)sfs.f_type == kinds[i].magic)
			return kinds[i].name;
	return NULL;
}

/*
 * Size in bytes of a regular file or block device that can back a disk: not on a kernel pseudo file system.
 * Any size, as Firecracker (v1.7.0 devices/virtio/block/virtio/device.rs file_size): an empty file is a
 * disk of 0 sectors (Kata's placeholder drives, swapped for real ones after boot), and the bytes past the
 * last whole sector are not reachable (a warning says so). Anything else is refused (-EINVAL) with err
 * saying why.
 */
static int image_size(int fd, const struct vm_disk *d, const struct stat *st, uint64_t *size, char *err, size_t errlen)
{
	const char *fs = pseudo_fs(fd);

	if (fs)
		return err_set(err, errlen, -EINVAL, "the file is on %s, a kernel interface, not a disk image", fs);
	if (S_ISREG(st->st_mode)) {
		/* root opens a file without write permission read-write all the same: honour the file's mode */
		if (!d->ro && !(st->st_mode & 0222))
			return err_set(err, errlen, -EACCES,
				       "the image is read-only (mode %04o); add ,ro to use it read-only",
				       (unsigned)(st->st_mode & 07777));
		*size = (uint64_t)st->st_size;
	} else if (S_ISBLK(st->st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, size) != 0)
			return err_set(err, errlen, -errno, "BLKGETSIZE64 on the block device failed: %s",
				       strerror(errno));
	} else {
		return err_set(err, errlen, -EINVAL, "the image is %s, not a regular file or block device",
			       S_ISDIR(st->st_mode)    ? "a directory"
			       : S_ISFIFO(st->st_mode) ? "a FIFO"
			       : S_ISSOCK(st->st_mode) ? "a socket"
						       : "a character device");
	}
	if (*size % VIRTIO_BLK_SECTOR)
		log_warn("disk %s: its size, %llu bytes, is not a multiple of 512; the last %llu bytes are not "
			 "reachable",
			 d->path, (unsigned long long)*size, (unsigned long long)(*size % VIRTIO_BLK_SECTOR));
	return 0;
}

/*
 * An OFD lock on the whole image (F_OFD_SETLK: it belongs to this open file,
 * not the process, and conflicts with QEMU's and lockf's POSIX locks):
 * exclusive read-write, shared read-only. A file system without locks is
 * used unlocked, with a warning.
 */
static int lock_image(int fd, const struct vm_disk *d, char *err, size_t errlen)
{
	struct flock fl = {.l_type = d->ro ? F_RDLCK : F_WRLCK, .l_whence = SEEK_SET};

	if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
		return 0;
	if (errno == EAGAIN || errno == EACCES)
		return err_set(err, errlen, -EAGAIN, "the image is locked by another process (%s)",
			       d->ro ? "it is open read-write elsewhere" : "another VM or tool has it open");
	log_warn("virtio-blk %s: cannot lock the image (%s): another user is not kept out", d->path, strerror(errno));
	return 0;
}

/* cache=none: O_DIRECT, and the alignments it needs (statx STATX_DIOALIGN where the kernel tells). */
static int set_flags(struct blk *b, const struct vm_disk *d, uint32_t *offset_align, char *err, size_t errlen)
{
	int fl = fcntl(b->fd, F_GETFL);

	b->mem_align = *offset_align = BLK_DEFAULT_ALIGN;
	fl &= ~O_NONBLOCK;
	if (d->cache == DISK_CACHE_NONE)
		fl |= O_DIRECT;
	if (fcntl(b->fd, F_SETFL, fl) != 0)
		return err_set(err, errlen, -EINVAL,
			       "cache=none: the file system does not support O_DIRECT (%s); "
			       "use cache=writeback",
			       strerror(errno));
	b->direct = d->cache == DISK_CACHE_NONE;
#ifdef STATX_DIOALIGN
	if (b->direct) {
		struct statx stx;

		if (statx(b->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN) &&
		    stx.stx_dio_offset_align) {
			b->mem_align = stx.stx_dio_mem_align ? stx.stx_dio_mem_align : BLK_DEFAULT_ALIGN;
			*offset_align = stx.stx_dio_offset_align;
		}
	}
#endif
	return 0;
}

/*
 * DISCARD and WRITE_ZEROES are offered only where hole punching works:
 * probed just past the end of the image (no data touched; FALLOC_FL_KEEP_SIZE
 * keeps the size), ZERO_RANGE likewise and its blocks punched away again.
 */
static void probe_holes(struct blk *b, uint64_t size, bool *punch)
{
	int keep = FALLOC_FL_KEEP_SIZE;

	*punch = b->regular && fallocate(b->fd, keep | FALLOC_FL_PUNCH_HOLE, (off_t)size, BLK_PROBE_LEN) == 0;
	b->zero_range = *punch && fallocate(b->fd, keep | FALLOC_FL_ZERO_RANGE, (off_t)size, BLK_PROBE_LEN) == 0;
	if (b->zero_range && fallocate(b->fd, keep | FALLOC_FL_PUNCH_HOLE, (off_t)size, BLK_PROBE_LEN) != 0)
		log_warn("virtio-blk %s: blocks allocated past the end by the ZERO_RANGE probe stay", b->path);
}

static void put32(uint8_t *cfg, unsigned off, uint32_t v)
{
	memcpy(cfg + off, &v, 4);
}

/* Features and config space (section 5.2.3, 5.2.4); fixed for the device's life. */
static void describe(struct blk *b, uint64_t size, uint32_t blk_size, bool punch)
{
	uint64_t f = (1ull << VIRTIO_BLK_F_FLUSH) | (1ull << VIRTIO_BLK_F_SEG_MAX) | (1ull << VIRTIO_BLK_F_SIZE_MAX) |
		     (1ull << VIRTIO_BLK_F_BLK_SIZE);
	uint64_t capacity = size / VIRTIO_BLK_SECTOR;

	if (b->lim.ro)
		f |= 1ull << VIRTIO_BLK_F_RO;
	else if (punch)
		f |= (1ull << VIRTIO_BLK_F_DISCARD) | (1ull << VIRTIO_BLK_F_WRITE_ZEROES);
	b->lim.capacity = capacity;
	b->features = f;
	memcpy(b->config + VIRTIO_BLK_CFG_CAPACITY, &capacity, 8);
	put32(b->config, VIRTIO_BLK_CFG_SIZE_MAX, BLK_SIZE_MAX);
	put32(b->config, VIRTIO_BLK_CFG_SEG_MAX, BLK_SEG_MAX);
	put32(b->config, VIRTIO_BLK_CFG_BLK_SIZE, blk_size);
	if (f & (1ull << VIRTIO_BLK_F_DISCARD)) {
		put32(b->config, VIRTIO_BLK_CFG_MAX_DISCARD_SECTORS, BLK_DWZ_MAX);
		put32(b->config, VIRTIO_BLK_CFG_MAX_DISCARD_SEG, 1);
		put32(b->config, VIRTIO_BLK_CFG_DISCARD_ALIGN, 4096 / VIRTIO_BLK_SECTOR);
		put32(b->config, VIRTIO_BLK_CFG_MAX_WZ_SECTORS, BLK_DWZ_MAX);
		put32(b->config, VIRTIO_BLK_CFG_MAX_WZ_SEG, 1);
		b->config[VIRTIO_BLK_CFG_WZ_MAY_UNMAP] = 1;
	}
}

/* GET_ID: id= as given, else "DEV-INO" of the image in hex (stable while the file lives; docs/devices.md). */
static void make_id(struct blk *b, const struct vm_disk *d, const struct stat *st)
{
	char s[64];

	if (d->id[0])
		snprintf(s, sizeof(s), "%s", d->id);
	else
		snprintf(s, sizeof(s), "%llx-%llx", (unsigned long long)st->st_dev, (unsigned long long)st->st_ino);
	/* NUL-padded, not terminated at 20 bytes (5.2.6); b->id starts zeroed */
	memcpy(b->id, s, strnlen(s, VIRTIO_BLK_ID_BYTES));
}

static int open_image(struct blk *b, const struct vm_disk *d, char *err, size_t errlen)
{
	uint32_t offset_align;
	uint64_t size;
	struct stat st;
	bool punch;
	int ret;

	b->fd = open_file(d, err, errlen);
	if (b->fd < 0)
		return b->fd;
	if (fstat(b->fd, &st) != 0)
		return err_set(err, errlen, -errno, "fstat of the image failed: %s", strerror(errno));
	b->regular = S_ISREG(st.st_mode);
	b->dev = st.st_dev;
	b->ino = st.st_ino;
	if ((ret = image_size(b->fd, d, &st, &size, err, errlen)) || (ret = lock_image(b->fd, d, err, errlen)) ||
	    (ret = set_flags(b, d, &offset_align, err, errlen)))
		return ret;
	b->lim.ro = d->ro;
	b->nowait = !b->direct;
	probe_holes(b, size, &punch);
	punch = punch && !d->ro;
	/* cache=none on a file system with bigger direct-I/O blocks: the guest is told to use them */
	describe(b, size, b->direct && offset_align > 512 && offset_align <= 4096 ? offset_align : 512, punch);
	make_id(b, d, &st);
	log_debug("virtio-blk %s: %llu sectors%s%s%s, id \"%.20s\"", b->path, (unsigned long long)b->lim.capacity,
		  d->ro ? ", read-only" : "", b->direct ? ", O_DIRECT" : "", punch ? ", discard" : "", (char *)b->id);
	return 0;
}

int virtio_blk_probe(const struct vm_disk *d, char *err, size_t errlen)
{
	int fd = open_file(d, err, errlen), ret;
	uint64_t size;
	struct stat st;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) != 0)
		ret = err_set(err, errlen, -errno, "fstat of the image failed: %s", strerror(errno));
	else if (!(ret = image_size(fd, d, &st, &size, err, errlen)))
		ret = lock_image(fd, d, err, errlen);
	close(fd); /* the lock goes with it */
	return ret;
}

/* ---- post-boot changes (the API's PATCH /drives, through vm_device_call: the event loop is stopped) ------------ */

/* The new image, opened and checked as at creation into `n`; the same file as now: only its size re-read. */
static int open_swap(struct blk *b, const struct vm_disk *d, struct blk *n, char *err, size_t errlen)
{
	struct stat st;
	int fd = open_file(d, err, errlen);

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) == 0 && st.st_dev == b->dev && st.st_ino == b->ino) {
		uint64_t size;
		int ret = image_size(fd, d, &st, &size, err, errlen);

		close(fd); /* the file we have open (and locked) already */
		n->fd = -1;
		n->lim.capacity = size / VIRTIO_BLK_SECTOR;
		return ret;
	}
	close(fd);
	return open_image(n, d, err, errlen);
}

/* Waits for every request in flight to finish and gives them to the guest (I/O lock held). 0 or -ETIMEDOUT. */
static int drain(struct blk *b)
{
	struct timespec until = bthread_deadline(CLOCK_MONOTONIC, BLK_QUIESCE_WAIT_MS);

	if (wait_idle(&b->pool, &until))
		return -ETIMEDOUT;
	completed(b, 0);
	return 0;
}

/* Takes the opened image `n` in place of the current one (I/O lock held, nothing in flight). */
static void take_image(struct blk *b, struct blk *n, char *path)
{
	if (n->fd >= 0) {
		close(b->fd); /* its lock goes with it */
		b->fd = n->fd;
		b->regular = n->regular;
		b->nowait = n->nowait;
		b->mem_align = n->mem_align;
		b->zero_range = n->zero_range;
		b->dev = n->dev;
		b->ino = n->ino;
		memcpy(b->id, n->id, sizeof(b->id));
	}
	free(b->path);
	b->path = path;
	b->lim.capacity = n->lim.capacity;
	memcpy(b->config + VIRTIO_BLK_CFG_CAPACITY, &n->lim.capacity, 8);
}

int virtio_blk_swap(void *dev, const char *path, char *err, size_t errlen)
{
	struct blk *b = dev, n = {.fd = -1};
	char *copy = strdup(path);
	/* d borrows the copy, which take_image hands to b (or which is freed on failure) */
	struct vm_disk d = {.path = copy, .ro = b->lim.ro, .cache = b->direct ? DISK_CACHE_NONE : DISK_CACHE_WRITEBACK};
	int ret;

	if (!copy)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	n.path = copy; /* for open_image's messages */
	virtio_io_lock(b->t);
	ret = open_swap(b, &d, &n, err, errlen);
	if (!ret && (ret = drain(b)) != 0)
		err_set(err, errlen, ret, "requests to the old image still in flight after %d ms", BLK_QUIESCE_WAIT_MS);
	if (ret) {
		if (n.fd >= 0)
			close(n.fd);
		free(copy);
		virtio_io_unlock(b->t);
		fcm_inc(b->fcm, FCM_BLOCK_update_fails);
		return ret;
	}
	log_info("virtio-blk %s: now %s, %llu sectors", b->path, path, (unsigned long long)n.lim.capacity);
	take_image(b, &n, copy);
	/* Firecracker's update_disk_image: new config space, a config interrupt (virtio 1.2 section 4.2.2.1) */
	virtio_config_changed(b->t);
	virtio_io_unlock(b->t);
	fcm_inc(b->fcm, FCM_BLOCK_update_count);
	return 0;
}

void virtio_blk_set_limiter(void *dev, const struct rl_config *cfg, bool has_bw, bool has_ops)
{
	struct blk *b = dev;

	virtio_io_lock(b->t);
	rl_update(&b->rl, cfg, has_bw, has_ops);
	virtio_io_unlock(b->t);
}

uint64_t virtio_blk_capacity(void *dev)
{
	return ((struct blk *)dev)->lim.capacity;
}

static struct blk *blk_new(const struct vm_disk *d)
{
	struct blk *b = calloc(1, sizeof(*b));
	pthread_condattr_t ca;

	if (!b)
		return NULL;
	b->fd = b->pool.efd = b->rl.timer_fd = -1;
	b->path = strdup(d->path);
	b->inflight = calloc(BLK_QUEUE_SIZE, sizeof(*b->inflight));
	pthread_mutex_init(&b->pool.mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the reset's deadline */
	pthread_cond_init(&b->pool.work, NULL);
	pthread_cond_init(&b->pool.idle, &ca);
	pthread_condattr_destroy(&ca);
	if (!b->path || !b->inflight) {
		blk_destroy(b);
		return NULL;
	}
	return b; /* the entries go on the free list as requests first need them (take_inflight) */
}

int virtio_blk_create(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win,
		      const struct vm_disk *d, char *err, size_t errlen)
{
	return virtio_blk_open(ctx, bus, win, d, NULL, err, errlen);
}

int virtio_blk_open(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win, const struct vm_disk *d,
		    void **dev, char *err, size_t errlen)
{
	struct blk *b = blk_new(d);
	int ret;

	if (!b)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	b->fcm = fcm_block(win->index, d->id); /* NULL past VM_MAX_DISKS cannot happen: the plan caps the disks */
	if (!b->fcm)
		b->fcm = b->fcm_own;
	ret = open_image(b, d, err, errlen);
	if (!ret && (b->pool.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		ret = err_set(err, errlen, -errno, "eventfd: %s", strerror(errno));
	if (!ret && (ret = rl_init(&b->rl, &d->rl)) != 0)
		ret = err_set(err, errlen, ret, "timerfd: %s", strerror(-ret));
	if (ret) {
		blk_destroy(b);
		return ret;
	}
	ret = virtio_mmio_create(ctx, bus, win, &blk_ops, b, b->features, &b->t); /* owns b from here on */
	if (!ret)
		ret = virtio_watch(b->t, b->pool.efd, EPOLLIN, completed, b);
	if (!ret)
		ret = virtio_watch(b->t, rl_timer_fd(&b->rl), EPOLLIN, rl_fired, b);
	if (ret)
		return err_set(err, errlen, ret, "setting up the virtio-mmio device failed: %s", strerror(-ret));
	if (dev)
		*dev = b;
	return 0;
}
