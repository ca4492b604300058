/*
 * blk_io.c - the virtio-blk device's I/O (src/virtio/blk/blk.c has the queue): a bounded pool of worker threads
 * doing preadv/pwritev/fdatasync/fallocate straight between the image and guest RAM, with a bounce buffer
 * for cache=none when guest buffers are not aligned. Completions go back to the event loop through the
 * pool's eventfd. Chosen over io_uring by measurement (docs/performance.md, "virtio-blk I/O engine").
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "blk_impl.h"
#include "brisk/log.h"
#include "brisk/seccomp.h"
#include "brisk/thread.h"

uint8_t blk_host_error(struct blk *b, const char *what, int err)
{
	uint64_t n = atomic_fetch_add(&b->host_errors, 1);

	if (log_ratelimit(n))
		log_warn("virtio-blk %s: %s%s%s (the guest gets IOERR; %llu so far)", b->path, what, err ? ": " : "",
			 err ? strerror(err) : "", (unsigned long long)n + 1);
	return VIRTIO_BLK_S_IOERR;
}

/* ---- I/O (worker threads) ------------------------------------------------------------------------------ */

/*
 * All `len` bytes between the file at `off` and the data under the cursor, through short transfers (the
 * cursor moves past what each call moved). End of file (the image shrank) is -ENODATA. Each round moves
 * at least one byte, so the loop is bounded by `len`.
 */
static int xfer(int fd, bool write, struct virtq_cursor *data, uint64_t off, uint64_t len)
{
	struct iovec iov[BLK_CHAIN_SEGS];
	uint64_t moved = 0;

	while (moved < len) {
		int cnt = (int)virtq_cursor_iov(data, len - moved, iov, BLK_CHAIN_SEGS, NULL);
		ssize_t n =
		    write ? pwritev(fd, iov, cnt, (off_t)(off + moved)) : preadv(fd, iov, cnt, (off_t)(off + moved));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA;
		moved += (uint64_t)n;
		virtq_cursor_skip(data, (uint64_t)n);
	}
	return 0;
}

/* cache=none with guest buffers O_DIRECT cannot take: through the worker's aligned buffer, 1 MiB at a time. */
static int bounced(struct blk *b, struct blk_req *r, bool write, uint8_t **bounce)
{
	uint64_t off = r->sector * VIRTIO_BLK_SECTOR;
	struct virtq_cursor data;

	if (!*bounce && posix_memalign((void **)bounce, 4096, BLK_BOUNCE_SIZE))
		return -ENOMEM;
	virtq_cursor_init(&data, r->seg, r->nseg);
	for (uint64_t pos = 0; pos < r->len; pos += BLK_BOUNCE_SIZE) {
		uint64_t n = r->len - pos < BLK_BOUNCE_SIZE ? r->len - pos : BLK_BOUNCE_SIZE;
		struct virtq_seg one = {.ptr = *bounce, .len = (uint32_t)n};
		struct virtq_cursor buf;
		int err;

		virtq_cursor_init(&buf, &one, 1);
		if (write)
			virtq_cursor_read(&data, *bounce, n);
		err = xfer(b->fd, write, &buf, off + pos, n);
		if (err)
			return err;
		if (!write)
			virtq_cursor_write(&data, *bounce, n);
	}
	return 0;
}

static bool dio_aligned(const struct blk *b, const struct blk_req *r)
{
	for (unsigned i = 0; i < r->nseg; i++) {
		if (((uintptr_t)r->seg[i].ptr | r->seg[i].len) & (b->mem_align - 1))
			return false;
	}
	return true;
}

/* A write must not grow an image that shrank under us (docs/security.md case 21): the guest gets IOERR instead. */
static bool fits(struct blk *b, uint64_t end)
{
	struct stat st;

	if (!b->regular || fstat(b->fd, &st) != 0 || (uint64_t)st.st_size >= end)
		return true;
	blk_host_error(b, "write past the end of the image (truncated while running?)", 0);
	return false;
}

static uint8_t do_rw(struct blk *b, struct blk_inflight *s, uint8_t **bounce)
{
	struct blk_req *r = &s->req;
	bool write = r->type == VIRTIO_BLK_T_OUT;
	uint64_t off = r->sector * VIRTIO_BLK_SECTOR;
	int err;

	if (write && !fits(b, off + r->len))
		return VIRTIO_BLK_S_IOERR;
	if (b->direct && !dio_aligned(b, r)) {
		err = bounced(b, r, write, bounce);
	} else {
		struct virtq_cursor data;

		virtq_cursor_init(&data, r->seg, r->nseg);
		err = xfer(b->fd, write, &data, off, r->len);
	}
	if (err == -ENODATA)
		return blk_host_error(b, "read past the end of the image (truncated while running?)", 0);
	if (err)
		return blk_host_error(b, write ? "pwritev" : "preadv", -err);
	if (write && s->writethrough && fdatasync(b->fd) != 0)
		return blk_host_error(b, "fdatasync", errno);
	return VIRTIO_BLK_S_OK;
}

/* DISCARD: punch a hole. WRITE_ZEROES: zero the range, or punch (reads give zeroes) when UNMAP allows. */
static uint8_t do_dwz(struct blk *b, struct blk_inflight *s)
{
	const struct blk_req *r = &s->req;
	bool punch = r->type == VIRTIO_BLK_T_DISCARD || (r->flags & VIRTIO_BLK_DWZ_F_UNMAP) || !b->zero_range;
	int mode = FALLOC_FL_KEEP_SIZE | (punch ? FALLOC_FL_PUNCH_HOLE : FALLOC_FL_ZERO_RANGE);

	if (r->nr_sectors == 0)
		return VIRTIO_BLK_S_OK;
	if (fallocate(b->fd, mode, (off_t)(r->sector * VIRTIO_BLK_SECTOR),
		      (off_t)((uint64_t)r->nr_sectors * VIRTIO_BLK_SECTOR)) != 0)
		return blk_host_error(b, punch ? "fallocate(PUNCH_HOLE)" : "fallocate(ZERO_RANGE)", errno);
	if (s->writethrough && fdatasync(b->fd) != 0)
		return blk_host_error(b, "fdatasync", errno);
	return VIRTIO_BLK_S_OK;
}

static uint8_t execute(struct blk *b, struct blk_inflight *s, uint8_t **bounce)
{
	switch (s->req.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		return do_rw(b, s, bounce);
	case VIRTIO_BLK_T_FLUSH:
		/* "No acknowledged write is lost": the FLUSH completes only once fdatasync has returned. */
		return fdatasync(b->fd) == 0 ? VIRTIO_BLK_S_OK : blk_host_error(b, "fdatasync", errno);
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		return do_dwz(b, s);
	default:
		return VIRTIO_BLK_S_UNSUPP;
	}
}

/* ---- the worker pool ----------------------------------------------------------------------------------- */

static void *worker(void *arg)
{
	struct blk *b = arg;
	struct pool *p = &b->pool;
	uint8_t *bounce = NULL;
	uint64_t one = 1;

	prctl(PR_SET_NAME, "brisk_blk", 0, 0, 0);
	seccomp_enter(SECCOMP_BLK);
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		struct blk_inflight *s = p->todo;

		if (!s) {
			p->waiting++;
			pthread_cond_wait(&p->work, &p->mu);
			p->waiting--;
			continue;
		}
		p->todo = s->next;
		p->queued--;
		p->running++;
		pthread_mutex_unlock(&p->mu);
		s->req.result = execute(b, s, &bounce);
		pthread_mutex_lock(&p->mu);
		s->next = NULL;
		if (p->done) {
			p->done_tail->next = s;
		} else {
			p->done = s; /* the loop is told once per batch: it takes the whole list */
			if (write(p->efd, &one, sizeof(one)) < 0)
				log_warn("virtio-blk %s: completion eventfd: %s", b->path, strerror(errno));
		}
		p->done_tail = s;
		if (--p->running == 0)
			pthread_cond_broadcast(&p->idle);
	}
	pthread_mutex_unlock(&p->mu);
	free(bounce);
	return NULL;
}

/* Another worker, with every signal blocked (vCPU kicks and SIGINT belong to other threads). p->mu held. */
static int spawn(struct blk *b)
{
	struct pool *p = &b->pool;
	int err = bthread_create_masked(&p->th[p->threads], worker, b);

	if (err)
		return -err;
	p->threads++;
	return 0;
}

/* Queues `s` for a worker, starting one while all are busy and fewer than BLK_WORKERS run. Returns 0 or -errno. */
int blk_submit(struct blk *b, struct blk_inflight *s)
{
	struct pool *p = &b->pool;
	int err = 0;

	pthread_mutex_lock(&p->mu);
	if (p->queued + 1 > p->waiting && p->threads < BLK_WORKERS)
		err = spawn(b);
	if (err && p->threads == 0) {
		pthread_mutex_unlock(&p->mu);
		return err;
	}
	s->next = NULL;
	if (p->todo)
		p->todo_tail->next = s;
	else
		p->todo = s;
	p->todo_tail = s;
	p->queued++;
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

/* Stops and joins the workers: each finishes the request it is doing; queued ones are abandoned. */
void blk_pool_stop(struct pool *p)
{
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->threads; i++)
		bthread_join(p->th[i], NULL);
	p->threads = 0;
}
