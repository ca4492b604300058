/*
 * blk_engine.c - which I/O engine for virtio-blk: io_uring (liburing) or a bounded pool of threads doing
 * preadv/pwritev, measured in the shape the device uses them (docs/performance.md, "virtio-blk I/O engine").
 *
 * One "event loop" thread, as brisk's: it keeps DEPTH requests in flight against a file, learns of
 * completions through an eventfd it waits on with epoll (io_uring's registered eventfd, or one the
 * workers write), and submits the next request from the completion handler. Reported per engine and
 * workload: requests per second, MB/s, mean latency (submit -> handled on the loop) and the process's
 * CPU time per request (user + system, every thread; io_uring's io-wq workers are threads of the process).
 *
 *   blk_engine FILE [SECONDS_PER_ROW]    FILE: a scratch file (created, 256 MiB, deleted after)
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define FILE_SIZE    (256ull << 20)
#define MAX_DEPTH    64
#define POOL_DEFAULT 4

enum op { OP_READ, OP_WRITE, OP_FLUSH, OP_DRAINED };

struct req {
	enum op op;
	uint64_t off;
	struct iovec iov;
	uint64_t t0;
	ssize_t res;
	struct req *next; /* pool queues */
};

struct workload {
	const char *name;
	enum op op;
	uint32_t size;
	int random, direct, depth;
};

struct engine;
struct engine_ops {
	const char *name;
	int (*init)(struct engine *e, int fd, int depth);
	void (*submit)(struct engine *e, struct req *r);
	void (*flush_submits)(struct engine *e);
	struct req *(*reap)(struct engine *e); /* one completed request or NULL */
	void (*fini)(struct engine *e);
	int efd;
};

struct engine {
	const struct engine_ops *ops;
	int fd, efd;
	/* io_uring */
	struct io_uring ring;
	/* pool */
	pthread_t th[32];
	int nthreads, stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct req *todo, *todo_tail, *done;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* ---- io_uring -------------------------------------------------------------------------------------------- */

static int ur_init(struct engine *e, int fd, int depth)
{
	int err = io_uring_queue_init((unsigned)depth, &e->ring, 0);

	if (err)
		return err;
	e->fd = fd;
	e->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return io_uring_register_eventfd(&e->ring, e->efd);
}

static void ur_submit(struct engine *e, struct req *r)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);

	if (r->op == OP_READ)
		io_uring_prep_readv(sqe, e->fd, &r->iov, 1, r->off);
	else if (r->op == OP_WRITE)
		io_uring_prep_writev(sqe, e->fd, &r->iov, 1, r->off);
	else
		io_uring_prep_fsync(sqe, e->fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data(sqe, r);
}

static void ur_flush(struct engine *e)
{
	io_uring_submit(&e->ring);
}

static struct req *ur_reap(struct engine *e)
{
	struct io_uring_cqe *cqe;
	struct req *r;

	if (io_uring_peek_cqe(&e->ring, &cqe))
		return NULL;
	r = io_uring_cqe_get_data(cqe);
	r->res = cqe->res;
	io_uring_cqe_seen(&e->ring, cqe);
	return r;
}

static void ur_fini(struct engine *e)
{
	io_uring_queue_exit(&e->ring);
	close(e->efd);
}

static const struct engine_ops uring_ops = {"io_uring", ur_init, ur_submit, ur_flush, ur_reap, ur_fini, 0};

/* ---- worker pool ----------------------------------------------------------------------------------------- */

static void *worker(void *arg)
{
	struct engine *e = arg;
	uint64_t one = 1;

	pthread_mutex_lock(&e->mu);
	for (;;) {
		struct req *r;
		int was_empty;

		while (!e->todo && !e->stop)
			pthread_cond_wait(&e->cv, &e->mu);
		if (e->stop)
			break;
		r = e->todo;
		e->todo = r->next;
		pthread_mutex_unlock(&e->mu);
		if (r->op == OP_READ)
			r->res = preadv(e->fd, &r->iov, 1, (off_t)r->off);
		else if (r->op == OP_WRITE)
			r->res = pwritev(e->fd, &r->iov, 1, (off_t)r->off);
		else
			r->res = fdatasync(e->fd);
		if (r->res < 0)
			r->res = -errno;
		pthread_mutex_lock(&e->mu);
		was_empty = !e->done;
		r->next = e->done;
		e->done = r;
		if (was_empty && write(e->efd, &one, sizeof(one)) < 0)
			abort();
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

static int pool_threads = POOL_DEFAULT;

static int pool_init(struct engine *e, int fd, int depth)
{
	(void)depth;
	e->fd = fd;
	e->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	e->nthreads = pool_threads;
	for (int i = 0; i < e->nthreads; i++)
		pthread_create(&e->th[i], NULL, worker, e);
	return 0;
}

static void pool_submit(struct engine *e, struct req *r)
{
	pthread_mutex_lock(&e->mu);
	r->next = NULL;
	if (e->todo)
		e->todo_tail->next = r;
	else
		e->todo = r;
	e->todo_tail = r;
	pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

static void pool_flush(struct engine *e)
{
	(void)e;
}

static struct req *pool_reap(struct engine *e)
{
	struct req *r;

	pthread_mutex_lock(&e->mu);
	r = e->done;
	if (r)
		e->done = r->next;
	pthread_mutex_unlock(&e->mu);
	return r;
}

static void pool_fini(struct engine *e)
{
	pthread_mutex_lock(&e->mu);
	e->stop = 1;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	for (int i = 0; i < e->nthreads; i++)
		pthread_join(e->th[i], NULL);
	close(e->efd);
}

static const struct engine_ops pool_ops = {"pool", pool_init, pool_submit, pool_flush, pool_reap, pool_fini, 0};

/*
 * The pool with a fast path on the loop thread: a read of at most NOWAIT_MAX bytes is first tried with
 * preadv2(RWF_NOWAIT), which returns at once with the data when it is all in the page cache and EAGAIN
 * (or a short count) when it would wait for the disk; only then does it go to a worker.
 */
#define NOWAIT_MAX (64u << 10)

static void hybrid_submit(struct engine *e, struct req *r)
{
	uint64_t one = 1;

	if (r->op == OP_READ && r->iov.iov_len <= NOWAIT_MAX) {
		ssize_t n = preadv2(e->fd, &r->iov, 1, (off_t)r->off, RWF_NOWAIT);

		if (n == (ssize_t)r->iov.iov_len) {
			r->res = n;
			pthread_mutex_lock(&e->mu);
			r->next = e->done;
			e->done = r;
			pthread_mutex_unlock(&e->mu);
			if (write(e->efd, &one, sizeof(one)) < 0)
				abort();
			return;
		}
	}
	pool_submit(e, r);
}

static const struct engine_ops hybrid_ops = {"pool+nw", pool_init, hybrid_submit, pool_flush, pool_reap, pool_fini, 0};

/* ---- the loop ---------------------------------------------------------------------------------------------- */

static uint64_t rng_state = 88172645463325252ull;

static uint64_t xorshift(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void prepare(struct req *r, const struct workload *w, uint64_t *seq)
{
	uint64_t blocks = FILE_SIZE / (w->size ? w->size : 1);

	r->op = w->op;
	r->off = w->random ? (xorshift() % blocks) * w->size : (*seq)++ % blocks * w->size;
	r->iov.iov_len = w->size;
	r->t0 = now_ns();
}

static void run(const struct engine_ops *ops, const char *path, const struct workload *w, double seconds)
{
	struct engine e = {.ops = ops};
	struct req reqs[MAX_DEPTH];
	struct epoll_event ev = {.events = EPOLLIN};
	uint64_t seq = 0, n = 0, lat = 0, t_end, t0;
	double c0;
	int fd = open(path, (w->op == OP_READ ? O_RDONLY : O_RDWR) | (w->direct ? O_DIRECT : 0) | O_CLOEXEC);
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (fd < 0 || ops->init(&e, fd, w->depth)) {
		perror("init");
		exit(1);
	}
	epoll_ctl(ep, EPOLL_CTL_ADD, e.efd, &ev);
	for (int i = 0; i < w->depth; i++) {
		if (posix_memalign(&reqs[i].iov.iov_base, 4096, w->size))
			exit(1);
		memset(reqs[i].iov.iov_base, 0x5a, w->size);
		prepare(&reqs[i], w, &seq);
		ops->submit(&e, &reqs[i]);
	}
	ops->flush_submits(&e);
	t0 = now_ns();
	c0 = cpu_s();
	t_end = t0 + (uint64_t)(seconds * 1e9);
	for (;;) {
		uint64_t cnt;
		struct req *r;
		int more = now_ns() < t_end, pending = 0;

		if (epoll_wait(ep, &ev, 1, -1) != 1)
			continue;
		if (read(e.efd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
			exit(1);
		while ((r = ops->reap(&e))) {
			if (r->res < 0 || (r->op != OP_FLUSH && (size_t)r->res != r->iov.iov_len)) {
				fprintf(stderr, "%s: request failed: %zd\n", ops->name, r->res);
				exit(1);
			}
			n++;
			lat += now_ns() - r->t0;
			more = more && now_ns() < t_end;
			if (more) {
				prepare(r, w, &seq);
				ops->submit(&e, r);
				pending = 1;
			} else {
				r->op = OP_DRAINED;
			}
		}
		if (pending)
			ops->flush_submits(&e);
		if (!more) {
			int out = 0;

			for (int i = 0; i < w->depth; i++)
				out += reqs[i].op != OP_DRAINED;
			if (!out)
				break;
		}
	}
	{
		double el = (double)(now_ns() - t0) / 1e9, cpu = cpu_s() - c0;

		printf("| %-26s | %-8s | %9.0f | %8.1f | %9.1f | %9.2f |\n", w->name, ops->name, (double)n / el,
		       (double)n * w->size / el / 1e6, (double)lat / (double)n / 1e3, cpu / (double)n * 1e6);
		fflush(stdout);
	}
	ops->fini(&e);
	for (int i = 0; i < w->depth; i++)
		free(reqs[i].iov.iov_base);
	close(ep);
	close(fd);
}

static void make_file(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	static char buf[1 << 20];

	memset(buf, 0xa5, sizeof(buf));
	for (uint64_t off = 0; off < FILE_SIZE; off += sizeof(buf))
		if (pwrite(fd, buf, sizeof(buf), (off_t)off) != (ssize_t)sizeof(buf)) {
			perror("pwrite");
			exit(1);
		}
	fsync(fd);
	close(fd);
}

int main(int argc, char **argv)
{
	static const struct workload rows[] = {
	    {"4k rand read, cached, qd1", OP_READ, 4096, 1, 0, 1},
	    {"4k rand read, cached, qd16", OP_READ, 4096, 1, 0, 16},
	    {"1M seq read, cached, qd4", OP_READ, 1 << 20, 0, 0, 4},
	    {"1M seq write, writeback, qd4", OP_WRITE, 1 << 20, 0, 0, 4},
	    {"4k rand write, writeback, qd16", OP_WRITE, 4096, 1, 0, 16},
	    {"4k rand read, O_DIRECT, qd1", OP_READ, 4096, 1, 1, 1},
	    {"4k rand read, O_DIRECT, qd16", OP_READ, 4096, 1, 1, 16},
	    {"1M seq read, O_DIRECT, qd4", OP_READ, 1 << 20, 0, 1, 4},
	    {"4k rand write, O_DIRECT, qd16", OP_WRITE, 4096, 1, 1, 16},
	    {"fdatasync, qd1", OP_FLUSH, 0, 0, 0, 1},
	};
	double seconds = argc > 2 ? atof(argv[2]) : 2.0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s SCRATCH_FILE [SECONDS_PER_ROW]\n", argv[0]);
		return 2;
	}
	if (getenv("POOL_THREADS"))
		pool_threads = atoi(getenv("POOL_THREADS"));
	make_file(argv[1]);
	printf("| workload                   | engine   | req/s     | MB/s     | mean µs   | CPU µs/req |\n");
	printf("|---|---|---:|---:|---:|---:|\n");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		run(&uring_ops, argv[1], &rows[i], seconds);
		run(&pool_ops, argv[1], &rows[i], seconds);
		run(&hybrid_ops, argv[1], &rows[i], seconds);
	}
	unlink(argv[1]);
	return 0;
}
