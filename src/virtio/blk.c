/*
 * blk.c - virtio block device (virtio 1.2 section 5.2) on a raw image: one request queue, I/O on a bounded
 * pool of worker threads (preadv/pwritev/fdatasync/fallocate), small cached reads served on the event loop.
 *
 * Request flow (docs/devices.md, "virtio-blk"): the event loop pops a chain, blk_parse checks it (the
 * header copied out of guest memory once, ranges overflow-safe, SECURITY.md 8 and 9), and the request
 * goes to a worker, which reads or writes straight between the image and guest RAM. The worker puts it
 * on a done list and signals an eventfd the loop watches (virtio_watch); the loop writes the status byte,
 * pushes the used entry and interrupts. No request runs on a vCPU thread. At most BLK_QUEUE_SIZE requests
 * are in flight: with every slot taken the loop leaves the rest in the ring until one completes.
 *
 * The engine was chosen by measurement (docs/performance.md, "virtio-blk I/O engine", bench/blk_engine.c):
 * against io_uring the pool is as fast where the default cache mode spends its time (page-cache reads at
 * queue depth 1 through the RWF_NOWAIT fast path, buffered writes) and needs no io_uring, which container
 * seccomp profiles and the io_uring_disabled sysctl often forbid.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "brisk/devices.h"
#include "brisk/errmsg.h"
#include "brisk/file.h"
#include "brisk/log.h"
#include "brisk/virtio.h"
#include "brisk/virtio_blk.h"
#include "brisk/vm.h"

#define BLK_WORKERS	  4u	      /* threads per disk, started as requests need them (measured: more hurt) */
#define BLK_INLINE_MAX	  (64u << 10) /* reads up to this size are first tried on the loop, RWF_NOWAIT */
#define BLK_BOUNCE_SIZE	  (1u << 20)  /* cache=none: a worker's aligned buffer for unaligned guest buffers */
#define BLK_RESET_WAIT_MS 3000	      /* a reset waits this long for requests in flight */
#define BLK_DEFAULT_ALIGN 512u	      /* O_DIRECT alignment when statx cannot say */
#define BLK_PROBE_LEN	  4096	      /* bytes past the end of the image the hole-punch probe uses */

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "virtio-blk fields are read without byte swapping");

/* ---- the request parser (include/brisk/virtio_blk.h) ------------------------------------------------ */

struct blk_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};
_Static_assert(sizeof(struct blk_hdr) == VIRTIO_BLK_HDR_SIZE, "virtio_blk_req header is 16 bytes");

struct blk_dwz {
	uint64_t sector;
	uint32_t num_sectors;
	uint32_t flags;
};
_Static_assert(sizeof(struct blk_dwz) == VIRTIO_BLK_DWZ_SIZE, "virtio_blk_discard_write_zeroes is 16 bytes");

/* iov[] := `len` bytes of segments seg[0 .. n) from byte `skip` on; returns how many entries (<= n). */
static unsigned gather(const struct virtq_seg *seg, unsigned n, uint64_t skip, uint64_t len, struct iovec *iov)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n && len; i++) {
		uint64_t l = seg[i].len;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		l -= skip;
		if (l > len)
			l = len;
		if (l)
			iov[k++] = (struct iovec){.iov_base = seg[i].ptr + skip, .iov_len = (size_t)l};
		skip = 0;
		len -= l;
	}
	return k;
}

static enum blk_parse_result done(struct blk_req *r, uint8_t status, const char *why)
{
	r->result = status;
	r->why = why;
	return BLK_REQ_DONE;
}

static bool negotiated(const struct blk_limits *l, unsigned bit)
{
	return l->features & (1ull << bit);
}

/* [sector, sector + n) within the capacity, without overflow. */
static bool in_range(const struct blk_limits *l, uint64_t sector, uint64_t n)
{
	return sector <= l->capacity && n <= l->capacity - sector;
}

/* IN and OUT: the data between header and status, a whole number of sectors inside the disk. */
static enum blk_parse_result parse_rw(const struct blk_limits *l, const struct virtq_chain *c, struct blk_req *r)
{
	bool out = r->type == VIRTIO_BLK_T_OUT;

	if (out && l->ro)
		return done(r, VIRTIO_BLK_S_IOERR, NULL); /* 5.2.6.2: and no data written */
	r->len = out ? c->out_bytes - VIRTIO_BLK_HDR_SIZE : c->in_bytes - 1;
	if (r->len % VIRTIO_BLK_SECTOR)
		return done(r, VIRTIO_BLK_S_IOERR, "data length not a multiple of 512");
	if (!in_range(l, r->sector, r->len / VIRTIO_BLK_SECTOR))
		return done(r, VIRTIO_BLK_S_IOERR, NULL); /* past the end: the driver's mistake, not malformed */
	if (out)
		r->niov = gather(c->seg, c->nr_out, VIRTIO_BLK_HDR_SIZE, r->len, r->iov);
	else
		r->niov = gather(c->seg + c->nr_out, c->nr_in, 0, r->len, r->iov);
	return BLK_REQ_IO;
}

/* DISCARD and WRITE_ZEROES (5.2.6): one struct virtio_blk_discard_write_zeroes after the header. */
static enum blk_parse_result parse_dwz(const struct blk_limits *l, const struct virtq_chain *c, struct blk_req *r)
{
	bool discard = r->type == VIRTIO_BLK_T_DISCARD;
	struct blk_dwz seg;

	if (!negotiated(l, discard ? VIRTIO_BLK_F_DISCARD : VIRTIO_BLK_F_WRITE_ZEROES))
		return done(r, VIRTIO_BLK_S_UNSUPP, NULL);
	if (l->ro)
		return done(r, VIRTIO_BLK_S_IOERR, NULL);
	if (c->out_bytes - VIRTIO_BLK_HDR_SIZE != VIRTIO_BLK_DWZ_SIZE)
		return done(r, VIRTIO_BLK_S_IOERR, "discard/write-zeroes data is not one 16-byte segment (max_seg 1)");
	if (virtq_copy_from(c, VIRTIO_BLK_HDR_SIZE, &seg, sizeof(seg)) != sizeof(seg))
		return done(r, VIRTIO_BLK_S_IOERR, "discard/write-zeroes segment unreadable");
	r->sector = seg.sector;
	r->nr_sectors = seg.num_sectors;
	r->flags = seg.flags;
	/* 5.2.6.2: unknown flags, and UNMAP on a discard, are UNSUPP. */
	if ((seg.flags & ~VIRTIO_BLK_DWZ_F_UNMAP) || (discard && (seg.flags & VIRTIO_BLK_DWZ_F_UNMAP)))
		return done(r, VIRTIO_BLK_S_UNSUPP, NULL);
	if (seg.num_sectors > BLK_DWZ_MAX || !in_range(l, seg.sector, seg.num_sectors))
		return done(r, VIRTIO_BLK_S_IOERR, NULL);
	return BLK_REQ_IO;
}

/* The status byte: the last byte of the last non-empty writable segment. */
static uint8_t *status_byte(const struct virtq_chain *c)
{
	for (unsigned i = c->nr_out + c->nr_in; i > c->nr_out; i--) {
		const struct virtq_seg *s = &c->seg[i - 1];

		if (s->len)
			return s->ptr + s->len - 1;
	}
	return NULL;
}

enum blk_parse_result blk_parse(const struct blk_limits *l, const struct virtq_chain *c, struct blk_req *r)
{
	struct blk_hdr hdr;

	r->why = NULL;
	r->len = 0;
	r->niov = 0;
	r->status = c->in_bytes ? status_byte(c) : NULL;
	if (!r->status) {
		r->why = "no writable status byte";
		return BLK_REQ_BAD_CHAIN;
	}
	r->used = (uint32_t)c->in_bytes; /* virtq_pop keeps a chain below 4 GiB */
	if (c->out_bytes < VIRTIO_BLK_HDR_SIZE || virtq_copy_from(c, 0, &hdr, sizeof(hdr)) != sizeof(hdr))
		return done(r, VIRTIO_BLK_S_IOERR, "request header shorter than 16 bytes");
	r->type = hdr.type;
	r->sector = hdr.sector;
	switch (hdr.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		return parse_rw(l, c, r);
	case VIRTIO_BLK_T_FLUSH:
		return negotiated(l, VIRTIO_BLK_F_FLUSH) ? BLK_REQ_IO : done(r, VIRTIO_BLK_S_UNSUPP, NULL);
	case VIRTIO_BLK_T_GET_ID:
		r->len = c->in_bytes - 1 < VIRTIO_BLK_ID_BYTES ? c->in_bytes - 1 : VIRTIO_BLK_ID_BYTES;
		r->niov = gather(c->seg + c->nr_out, c->nr_in, 0, r->len, r->iov);
		return BLK_REQ_IO;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		return parse_dwz(l, c, r);
	default:
		return done(r, VIRTIO_BLK_S_UNSUPP, NULL);
	}
}

/* ---- the device ------------------------------------------------------------------------------------- */

/* A request in flight: owned by the loop while on the free list or being parsed, by the pool in between. */
struct slot {
	struct blk_req req;
	uint16_t head;
	unsigned gen;	   /* the device generation it was started in: stale after a reset */
	bool writethrough; /* FLUSH not negotiated: a write is synced before it completes (5.2.5) */
	struct slot *next;
};

/* The worker pool: a FIFO of requests to do and one of requests done, under one mutex. */
struct pool {
	pthread_mutex_t mu;
	pthread_cond_t work; /* a request was queued, or stop */
	pthread_cond_t idle; /* running dropped to 0 */
	struct slot *todo, *todo_tail, *done, *done_tail;
	unsigned queued, running, waiting, threads;
	bool stop;
	pthread_t th[BLK_WORKERS];
	int efd; /* written when `done` becomes non-empty; watched by the loop */
};

struct blk {
	struct virtio_mmio *t;
	struct virtio_dev_ops ops; /* blk_ops with this disk's features (fixed at creation) */
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
	struct slot *slots, *free;
	unsigned gen;
	bool stalled; /* every slot in flight: chains wait in the ring */
	struct pool pool;
	struct {
		uint64_t reads, inline_reads, writes, flushes, other, ioerr, unsupp, bad;
	} n;
	_Atomic uint64_t host_errors;
};

static bool should_log(uint64_t n)
{
	return n < 8 || (n & (n - 1)) == 0;
}

/* A host-side failure of one request (worker thread): logged rate-limited, the guest gets IOERR. err 0: no errno. */
static uint8_t host_error(struct blk *b, const char *what, int err)
{
	uint64_t n = atomic_fetch_add(&b->host_errors, 1);

	if (should_log(n))
		log_warn("virtio-blk %s: %s%s%s (the guest gets IOERR; %llu so far)", b->path, what, err ? ": " : "",
			 err ? strerror(err) : "", (unsigned long long)n + 1);
	return VIRTIO_BLK_S_IOERR;
}

/* ---- I/O (worker threads) ------------------------------------------------------------------------------ */

/* Drops the first `n` bytes of the vector. */
static void advance(struct iovec **iov, unsigned *cnt, size_t n)
{
	while (*cnt && n >= (*iov)->iov_len) {
		n -= (*iov)->iov_len;
		(*iov)++;
		(*cnt)--;
	}
	if (*cnt && n) {
		(*iov)->iov_base = (uint8_t *)(*iov)->iov_base + n;
		(*iov)->iov_len -= n;
	}
}

/*
 * All `len` bytes between the file at `off` and the vector, through short
 * transfers. End of file (the image shrank) is -ENODATA. Each round moves
 * at least one byte, so the loop is bounded by `len`.
 */
static int xfer(int fd, bool write, struct iovec *iov, unsigned cnt, uint64_t off, uint64_t len)
{
	uint64_t moved = 0;

	while (moved < len) {
		ssize_t n = write ? pwritev(fd, iov, (int)cnt, (off_t)(off + moved))
				  : preadv(fd, iov, (int)cnt, (off_t)(off + moved));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA;
		moved += (uint64_t)n;
		advance(&iov, &cnt, (size_t)n);
	}
	return 0;
}

/* Copies between the vector from byte `off` on and buf[0 .. len), either way. */
static void iov_copy(const struct iovec *iov, unsigned cnt, uint64_t off, uint8_t *buf, uint64_t len, bool to_iov)
{
	for (unsigned i = 0; i < cnt && len; i++) {
		uint64_t l = iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		l -= off;
		if (l > len)
			l = len;
		if (to_iov)
			memcpy((uint8_t *)iov[i].iov_base + off, buf, l);
		else
			memcpy(buf, (uint8_t *)iov[i].iov_base + off, l);
		buf += l;
		len -= l;
		off = 0;
	}
}

/* cache=none with guest buffers O_DIRECT cannot take: through the worker's aligned buffer, 1 MiB at a time. */
static int bounced(struct blk *b, struct blk_req *r, bool write, uint8_t **bounce)
{
	uint64_t off = r->sector * VIRTIO_BLK_SECTOR;

	if (!*bounce && posix_memalign((void **)bounce, 4096, BLK_BOUNCE_SIZE))
		return -ENOMEM;
	for (uint64_t pos = 0; pos < r->len; pos += BLK_BOUNCE_SIZE) {
		uint64_t n = r->len - pos < BLK_BOUNCE_SIZE ? r->len - pos : BLK_BOUNCE_SIZE;
		struct iovec one = {.iov_base = *bounce, .iov_len = (size_t)n};
		int err;

		if (write)
			iov_copy(r->iov, r->niov, pos, *bounce, n, false);
		err = xfer(b->fd, write, &one, 1, off + pos, n);
		if (err)
			return err;
		if (!write)
			iov_copy(r->iov, r->niov, pos, *bounce, n, true);
	}
	return 0;
}

static bool dio_aligned(const struct blk *b, const struct blk_req *r)
{
	for (unsigned i = 0; i < r->niov; i++) {
		if (((uintptr_t)r->iov[i].iov_base | r->iov[i].iov_len) & (b->mem_align - 1))
			return false;
	}
	return true;
}

/* A write must not grow an image that shrank under us (SECURITY.md 21): the guest gets IOERR instead. */
static bool fits(struct blk *b, uint64_t end)
{
	struct stat st;

	if (!b->regular || fstat(b->fd, &st) != 0 || (uint64_t)st.st_size >= end)
		return true;
	host_error(b, "write past the end of the image (truncated while running?)", 0);
	return false;
}

static uint8_t do_rw(struct blk *b, struct slot *s, uint8_t **bounce)
{
	struct blk_req *r = &s->req;
	bool write = r->type == VIRTIO_BLK_T_OUT;
	uint64_t off = r->sector * VIRTIO_BLK_SECTOR;
	int err;

	if (write && !fits(b, off + r->len))
		return VIRTIO_BLK_S_IOERR;
	if (b->direct && !dio_aligned(b, r))
		err = bounced(b, r, write, bounce);
	else
		err = xfer(b->fd, write, r->iov, r->niov, off, r->len);
	if (err == -ENODATA)
		return host_error(b, "read past the end of the image (truncated while running?)", 0);
	if (err)
		return host_error(b, write ? "pwritev" : "preadv", -err);
	if (write && s->writethrough && fdatasync(b->fd) != 0)
		return host_error(b, "fdatasync", errno);
	return VIRTIO_BLK_S_OK;
}

/* DISCARD: punch a hole. WRITE_ZEROES: zero the range, or punch (reads give zeroes) when UNMAP allows. */
static uint8_t do_dwz(struct blk *b, struct slot *s)
{
	const struct blk_req *r = &s->req;
	bool punch = r->type == VIRTIO_BLK_T_DISCARD || (r->flags & VIRTIO_BLK_DWZ_F_UNMAP) || !b->zero_range;
	int mode = FALLOC_FL_KEEP_SIZE | (punch ? FALLOC_FL_PUNCH_HOLE : FALLOC_FL_ZERO_RANGE);

	if (r->nr_sectors == 0)
		return VIRTIO_BLK_S_OK;
	if (fallocate(b->fd, mode, (off_t)(r->sector * VIRTIO_BLK_SECTOR),
		      (off_t)((uint64_t)r->nr_sectors * VIRTIO_BLK_SECTOR)) != 0)
		return host_error(b, punch ? "fallocate(PUNCH_HOLE)" : "fallocate(ZERO_RANGE)", errno);
	if (s->writethrough && fdatasync(b->fd) != 0)
		return host_error(b, "fdatasync", errno);
	return VIRTIO_BLK_S_OK;
}

static uint8_t execute(struct blk *b, struct slot *s, uint8_t **bounce)
{
	switch (s->req.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		return do_rw(b, s, bounce);
	case VIRTIO_BLK_T_FLUSH:
		/* "No acknowledged write is lost": the FLUSH completes only once fdatasync has returned. */
		return fdatasync(b->fd) == 0 ? VIRTIO_BLK_S_OK : host_error(b, "fdatasync", errno);
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

	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		struct slot *s = p->todo;

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
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&p->th[p->threads], NULL, worker, b);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	p->threads++;
	return 0;
}

/* Queues `s` for a worker, starting one while all are busy and fewer than BLK_WORKERS run. Returns 0 or -errno. */
static int submit(struct blk *b, struct slot *s)
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
static void pool_stop(struct pool *p)
{
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->threads; i++)
		pthread_join(p->th[i], NULL);
	p->threads = 0;
}

/* ---- the queue (event loop, under the transport's I/O lock) ---------------------------------------------- */

static void put_slot(struct blk *b, struct slot *s)
{
	s->next = b->free;
	b->free = s;
}

static void count(struct blk *b, const struct blk_req *r, uint8_t status)
{
	if (status == VIRTIO_BLK_S_IOERR)
		b->n.ioerr++;
	else if (status == VIRTIO_BLK_S_UNSUPP)
		b->n.unsupp++;
	else if (r->type == VIRTIO_BLK_T_IN)
		b->n.reads++;
	else if (r->type == VIRTIO_BLK_T_OUT)
		b->n.writes++;
	else if (r->type == VIRTIO_BLK_T_FLUSH)
		b->n.flushes++;
	else
		b->n.other++;
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

	if (!b->nowait || r->type != VIRTIO_BLK_T_IN || r->len > BLK_INLINE_MAX)
		return false;
	n = preadv2(b->fd, r->iov, (int)r->niov, (off_t)(r->sector * VIRTIO_BLK_SECTOR), RWF_NOWAIT);
	if (n < 0 && errno == EOPNOTSUPP)
		b->nowait = false;
	if (n != (ssize_t)r->len)
		return false; /* not all cached, or at the end of a shrunk image: a worker does it properly */
	b->n.inline_reads++;
	return true;
}

/* The GET_ID answer: up to 20 bytes, NUL-padded (5.2.6). */
static void get_id(const struct blk *b, struct blk_req *r)
{
	uint8_t id[VIRTIO_BLK_ID_BYTES];
	struct virtq_chain c = {.nr_in = r->niov};
	struct virtq_seg segs[BLK_CHAIN_SEGS];

	memcpy(id, b->id, sizeof(id));
	for (unsigned i = 0; i < r->niov; i++)
		segs[i] = (struct virtq_seg){.ptr = r->iov[i].iov_base, .len = (uint32_t)r->iov[i].iov_len};
	c.seg = segs;
	virtq_copy_to(&c, 0, id, r->len);
}

/* One popped chain: parsed into the free slot `s`, then completed at once or handed to the pool. */
static void start(struct blk *b, struct virtq *q, struct slot *s, const struct virtq_chain *c)
{
	struct blk_req *r = &s->req;

	switch (blk_parse(&b->lim, c, r)) {
	case BLK_REQ_BAD_CHAIN:
		virtio_bad_request(b->t, r->why);
		b->n.bad++;
		virtq_push(q, c->head, 0);
		return;
	case BLK_REQ_DONE:
		if (r->why) {
			virtio_bad_request(b->t, r->why);
			b->n.bad++;
		}
		complete(b, q, c->head, r, r->result);
		return;
	case BLK_REQ_IO:
		break;
	}
	if (r->type == VIRTIO_BLK_T_GET_ID) {
		get_id(b, r);
		complete(b, q, c->head, r, VIRTIO_BLK_S_OK);
	} else if (read_inline(b, r)) {
		complete(b, q, c->head, r, VIRTIO_BLK_S_OK);
	} else {
		b->free = s->next;
		s->head = c->head;
		s->gen = b->gen;
		s->writethrough = !negotiated(&b->lim, VIRTIO_BLK_F_FLUSH);
		if (submit(b, s) == 0)
			return;
		put_slot(b, s);
		host_error(b, "no I/O thread could be started", 0);
		complete(b, q, c->head, r, VIRTIO_BLK_S_IOERR);
	}
}

/* Takes chains while a slot is free; what completed here is published with one interrupt at most. */
static void process(struct blk *b)
{
	struct virtq *q = virtio_queue(b->t, 0);
	struct virtq_seg segs[BLK_CHAIN_SEGS];
	uint16_t used = q ? q->used_idx : 0;

	b->stalled = false;
	while (q && !q->broken) {
		struct virtq_chain c;
		enum virtq_pop_result res;

		if (!b->free) {
			b->stalled = true; /* a completion frees a slot and calls us again */
			break;
		}
		res = virtq_pop(q, &c, segs, BLK_CHAIN_SEGS);
		if (res == VIRTQ_EMPTY)
			break;
		if (res == VIRTQ_BROKEN) {
			virtio_needs_reset(b->t, "request queue corrupt");
			break;
		}
		if (res == VIRTQ_BAD_CHAIN) {
			virtio_bad_request(b->t, "malformed descriptor chain");
			b->n.bad++;
			virtq_push(q, c.head, 0);
			continue;
		}
		start(b, q, b->free, &c);
	}
	if (q && q->used_idx != used)
		virtio_queue_done(b->t, 0);
}

static void blk_notify(void *dev, unsigned q)
{
	(void)q;
	process(dev);
}

/* The workers' done list (loop thread, I/O lock held): completions of this generation go to the guest. */
static void completed(void *arg, uint32_t events)
{
	struct blk *b = arg;
	struct virtq *q = virtio_queue(b->t, 0);
	struct slot *s, *next;
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
		put_slot(b, s);
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

/* Frees a list of slots the pool gave back. */
static void put_list(struct blk *b, struct slot *s)
{
	while (s) {
		struct slot *next = s->next;

		put_slot(b, s);
		s = next;
	}
}

/*
 * Device reset during I/O (vCPU thread, I/O lock held, so no loop callback
 * runs): queued requests are dropped, running ones waited for, at most
 * BLK_RESET_WAIT_MS, since they read into and write from guest RAM the
 * driver may reuse. One that outlives the wait completes into nothing: its
 * generation is stale, its slot comes back, no status or used entry is written.
 */
static void blk_reset(void *dev)
{
	struct blk *b = dev;
	struct pool *p = &b->pool;
	struct slot *todo, *finished;
	struct timespec until;
	unsigned left;

	b->gen++;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += BLK_RESET_WAIT_MS / 1000;
	until.tv_nsec += (BLK_RESET_WAIT_MS % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
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

static void blk_stop(void *dev)
{
	struct blk *b = dev;

	pool_stop(&b->pool);
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

	pool_stop(&b->pool);
	if (b->fd >= 0)
		close(b->fd); /* also drops the OFD lock */
	if (b->pool.efd >= 0)
		close(b->pool.efd);
	pthread_mutex_destroy(&b->pool.mu);
	pthread_cond_destroy(&b->pool.work);
	pthread_cond_destroy(&b->pool.idle);
	free(b->slots);
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
    .stop = blk_stop,
    .destroy = blk_destroy,
};

/* ---- opening the image (SECURITY.md 21: every refusal a clear message, before the guest runs) ----------- */

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

/* Size in bytes of a regular file or block device; anything else is refused. */
static int image_size(int fd, const struct vm_disk *d, const struct stat *st, uint64_t *size, char *err, size_t errlen)
{
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
		return err_set(err, errlen, -EINVAL, "the image's size, %llu bytes, is not a multiple of 512",
			       (unsigned long long)*size);
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
	b->ops = blk_ops;
	b->ops.features = f;
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

static struct blk *blk_new(const struct vm_disk *d)
{
	struct blk *b = calloc(1, sizeof(*b));
	pthread_condattr_t ca;

	if (!b)
		return NULL;
	b->fd = b->pool.efd = -1;
	b->path = strdup(d->path);
	b->slots = calloc(BLK_QUEUE_SIZE, sizeof(*b->slots));
	pthread_mutex_init(&b->pool.mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the reset's deadline */
	pthread_cond_init(&b->pool.work, NULL);
	pthread_cond_init(&b->pool.idle, &ca);
	pthread_condattr_destroy(&ca);
	if (!b->path || !b->slots) {
		blk_destroy(b);
		return NULL;
	}
	for (unsigned i = BLK_QUEUE_SIZE; i > 0; i--)
		put_slot(b, &b->slots[i - 1]);
	return b;
}

int virtio_blk_create(const struct devctx *ctx, struct bus *bus, const struct devmgr_slot *slot,
		      const struct vm_disk *d, char *err, size_t errlen)
{
	struct blk *b = blk_new(d);
	int ret;

	if (!b)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	ret = open_image(b, d, err, errlen);
	if (!ret && (b->pool.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		ret = err_set(err, errlen, -errno, "eventfd: %s", strerror(errno));
	if (ret) {
		blk_destroy(b);
		return ret;
	}
	ret = virtio_mmio_create(ctx, bus, slot, &b->ops, b, &b->t); /* owns b from here on */
	if (!ret)
		ret = virtio_watch(b->t, b->pool.efd, EPOLLIN, completed, b);
	if (ret)
		return err_set(err, errlen, ret, "setting up the virtio-mmio device failed: %s", strerror(-ret));
	return 0;
}
