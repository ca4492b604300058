/*
 * fuzz_vdev.h - what the device harnesses share (fuzz_mmio, fuzz_rng, fuzz_vconsole, fuzz_pio, fuzz_restore): a VM
 * behind a device's context with no KVM and no threads, so that one input always runs the same way.
 *
 * - The I/O event loop is a fake (evloop.c is not linked): evloop_add records the fd, and fuzz_loop_run calls
 *   the callbacks of the readable fds on the harness's thread until none is readable (bounded rounds).
 * - KVM_IOEVENTFD/KVM_IRQFD report -ENOTSUP: QueueNotify writes reach the transport's eventfds through MMIO
 *   exits, interrupts are KVM_IRQ_LINE pulses, counted in fuzz_irqs; exit requests are counted in fuzz_exits.
 * - seccomp_enter is a no-op (the console threads that call it never start here).
 * Include once, in the harness's one file.
 */
#ifndef BRISK_FUZZ_VDEV_H
#define BRISK_FUZZ_VDEV_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include "brisk/bus.h"
#include "brisk/device.h"
#include "brisk/devmgr.h"
#include "brisk/evloop.h"
#include "brisk/log.h"
#include "brisk/mem.h"
#include "brisk/seccomp.h"
#include "brisk/snapshot.h"

/* ---- the event loop, run by hand ---------------------------------------------------------------------- */

#define FUZZ_LOOP_MAX 64

struct evloop {
	unsigned nr;
	struct {
		int fd;
		evloop_fn fn;
		void *arg;
	} w[FUZZ_LOOP_MAX];
};

struct evloop *evloop_create(void)
{
	return calloc(1, sizeof(struct evloop));
}

int evloop_add(struct evloop *l, int fd, uint32_t events, evloop_fn fn, void *arg)
{
	(void)events;
	if (l->nr == FUZZ_LOOP_MAX)
		return -ENOSPC;
	l->w[l->nr].fd = fd;
	l->w[l->nr].fn = fn;
	l->w[l->nr].arg = arg;
	l->nr++;
	return 0;
}

int evloop_start(struct evloop *l)
{
	(void)l;
	return 0;
}

void evloop_stop(struct evloop *l)
{
	(void)l;
}

void evloop_destroy(struct evloop *l)
{
	free(l);
}

/* Runs the callbacks of the readable fds, at most `rounds` times over; returns the callbacks run. */
static inline unsigned fuzz_loop_run(struct evloop *l, unsigned rounds)
{
	unsigned ran = 0;

	for (unsigned r = 0; r < rounds; r++) {
		struct pollfd p[FUZZ_LOOP_MAX];
		int n;

		for (unsigned i = 0; i < l->nr; i++)
			p[i] = (struct pollfd){.fd = l->w[i].fd, .events = POLLIN};
		n = poll(p, l->nr, 0);
		if (n <= 0)
			break;
		for (unsigned i = 0; i < l->nr; i++)
			if (p[i].revents & POLLIN) {
				l->w[i].fn(l->w[i].arg, EPOLLIN);
				ran++;
			}
	}
	return ran;
}

__attribute__((weak)) void seccomp_enter(enum seccomp_role role)
{
	(void)role;
}

/* ---- the VM behind the device's context ----------------------------------------------------------------- */

static struct evloop *fuzz_loop;
static unsigned fuzz_irqs, fuzz_exits;

static void fz_irq_line(void *vm, unsigned irq, int level)
{
	(void)vm, (void)irq;
	fuzz_irqs += level == 1;
}

static void fz_request_exit(void *vm, int code, const char *reason)
{
	(void)vm, (void)code, (void)reason;
	fuzz_exits++;
}

static int fz_ioeventfd(void *vm, uint64_t addr, unsigned len, bool has_match, uint64_t m, int fd, bool assign)
{
	(void)vm, (void)addr, (void)len, (void)has_match, (void)m, (void)fd, (void)assign;
	return -ENOTSUP;
}

static int fz_irqfd(void *vm, unsigned gsi, int fd, bool assign)
{
	(void)vm, (void)gsi, (void)fd, (void)assign;
	return -ENOTSUP;
}

static struct evloop *fz_loop(void *vm)
{
	(void)vm;
	return fuzz_loop;
}

static const struct devctx_ops fuzz_ctx_ops = {
    .irq_line = fz_irq_line,
    .request_exit = fz_request_exit,
    .ioeventfd = fz_ioeventfd,
    .irqfd = fz_irqfd,
    .loop = fz_loop,
};

#define FUZZ_MMIO_BASE 0xd0000000ull /* the virtio window: any address the bus can map */

struct fuzz_vm {
	struct gmem mem;
	struct bus bus;
	struct devctx ctx;
	struct devmgr_window win;
};

/* RAM of `ram` bytes, a fresh loop and an empty bus, logs to /dev/null; aborts when the host cannot give them. */
static inline void fuzz_vm_open(struct fuzz_vm *v, uint64_t ram)
{
	static int quiet = -1;

	if (quiet < 0) { /* a refusal logs an error line per input: kept out of the fuzzer's log */
		quiet = open("/dev/null", O_WRONLY | O_CLOEXEC);
		log_set_fd(quiet);
	}
	memset(v, 0, sizeof(*v));
	if (gmem_init(&v->mem, ram, 0))
		abort();
	fuzz_loop = evloop_create();
	if (!fuzz_loop)
		abort();
	bus_init(&v->bus);
	v->ctx = (struct devctx){.mem = &v->mem, .ops = &fuzz_ctx_ops};
	v->win = (struct devmgr_window){.base = FUZZ_MMIO_BASE, .irq = 5, .what = "fuzz"};
}

static inline void fuzz_vm_close(struct fuzz_vm *v)
{
	bus_destroy(&v->bus);
	evloop_destroy(fuzz_loop);
	fuzz_loop = NULL;
	gmem_destroy(&v->mem);
}

static inline uint32_t fuzz_rd(struct fuzz_vm *v, uint64_t off)
{
	uint32_t x = 0;

	bus_read(&v->bus, BUS_MMIO, FUZZ_MMIO_BASE + off, &x, 4);
	return x;
}

static inline void fuzz_wr(struct fuzz_vm *v, uint64_t off, uint32_t x)
{
	bus_write(&v->bus, BUS_MMIO, FUZZ_MMIO_BASE + off, &x, 4);
}

/* Section 3.1.1 up to FEATURES_OK with VERSION_1 and the transport bits in `features`. */
static inline void fuzz_negotiate(struct fuzz_vm *v, uint64_t features)
{
	features |= 1ull << 32;
	fuzz_wr(v, 0x070, 1);
	fuzz_wr(v, 0x070, 3);
	fuzz_wr(v, 0x024, 0);
	fuzz_wr(v, 0x020, (uint32_t)features);
	fuzz_wr(v, 0x024, 1);
	fuzz_wr(v, 0x020, (uint32_t)(features >> 32));
	fuzz_wr(v, 0x070, 11);
}

/* Queue q of `size` entries: descriptor table at `desc`, driver area at +0x1000, device area at +0x2000; ready. */
static inline void fuzz_queue(struct fuzz_vm *v, unsigned q, uint32_t size, uint64_t desc)
{
	fuzz_wr(v, 0x030, q);
	fuzz_wr(v, 0x038, size);
	fuzz_wr(v, 0x080, (uint32_t)desc);
	fuzz_wr(v, 0x084, (uint32_t)(desc >> 32));
	fuzz_wr(v, 0x090, (uint32_t)(desc + 0x1000));
	fuzz_wr(v, 0x094, (uint32_t)((desc + 0x1000) >> 32));
	fuzz_wr(v, 0x0a0, (uint32_t)(desc + 0x2000));
	fuzz_wr(v, 0x0a4, (uint32_t)((desc + 0x2000) >> 32));
	fuzz_wr(v, 0x044, 1);
}

/* ---- snapshots in memory -------------------------------------------------------------------------------- */

/* The state file `w` makes (freed here), in a malloc'd buffer of *len bytes; aborts when the writer refuses. */
static inline uint8_t *fuzz_snap_bytes(struct snap_writer *w, size_t *len)
{
	static int fd = -1;
	char err[256];
	uint8_t *buf;
	off_t end;

	if (fd < 0)
		fd = memfd_create("fuzz-snap", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, 0) < 0 || snap_writer_finish(w, fd, true, err, sizeof(err)))
		abort();
	snap_writer_free(w);
	end = lseek(fd, 0, SEEK_END);
	buf = malloc(end > 0 ? (size_t)end : 1);
	if (end <= 0 || !buf || pread(fd, buf, (size_t)end, 0) != end)
		abort();
	*len = (size_t)end;
	return buf;
}

/*
 * Saves every device of `from`, restores that into `to` (fresh devices built the same way) and saves `to`:
 * a state a guest could reach must restore, and come back as the same bytes. Aborts otherwise.
 */
static inline void fuzz_snap_round_trip(struct bus *from, struct bus *to)
{
	struct snap_writer *w = snap_writer_new();
	struct snap_reader *r = NULL;
	const char *failed = "?";
	uint8_t *one, *two;
	size_t n1, n2;
	char err[256];

	if (!w || bus_save(from, w, &failed))
		abort();
	one = fuzz_snap_bytes(w, &n1);
	if (snap_reader_open_mem(one, n1, &r, err, sizeof(err)) || bus_restore(to, r, &failed, err, sizeof(err))) {
		fprintf(stderr, "fuzz: a reachable state does not restore: %s: %s\n", failed, err);
		abort();
	}
	snap_reader_free(r);
	w = snap_writer_new();
	if (!w || bus_save(to, w, &failed))
		abort();
	two = fuzz_snap_bytes(w, &n2);
	if (n1 != n2 || memcmp(one, two, n1))
		abort();
	free(one);
	free(two);
}

/* ---- a split queue laid out from the input (fuzz_rng, fuzz_vconsole) ------------------------------------ */

/*
 * One queue's part of an input (missing bytes read as zero):
 *   1 byte    log2 of QueueNum (mod 10: 1 .. 512, the larger ones refused by the device)
 *   1 byte    descriptors n (written raw: any address, length, flags and next)
 *   1 byte    avail ring entries m
 *   2 bytes   avail.idx (le16): any value, a jump by more than the queue size included
 *   2 bytes   used_event (le16, the avail ring's last entry, with EVENT_IDX)
 *   16 * n    the descriptors, from entry 0
 *   2 * m     the avail ring, from entry 0
 * The queue lives at FUZZ_Q(q); everything left of the input after all queues lands at FUZZ_BUF, where
 * the descriptors may point (data, indirect tables).
 */
#define FUZZ_VDEV_RAM (1u << 20)
#define FUZZ_Q(q)     (0x10000ull + 0x4000ull * (q))
#define FUZZ_BUF      0x40000ull

struct fuzz_bytes {
	const uint8_t *p;
	size_t n;
};

static inline void fuzz_take(struct fuzz_bytes *in, void *out, size_t len)
{
	size_t k = in->n < len ? in->n : len;

	memset(out, 0, len);
	memcpy(out, in->p, k);
	in->p += k;
	in->n -= k;
}

struct fuzz_vq {
	uint32_t size;
	uint16_t avail_idx;
};

/* Reads one queue's part into guest RAM (before the queue is set up: the device reads it on notify). */
static inline void fuzz_vq_read(struct fuzz_vm *v, unsigned q, struct fuzz_bytes *in, struct fuzz_vq *out)
{
	uint8_t h[7];
	uint8_t *desc = gmem_ptr(&v->mem, FUZZ_Q(q), 0x3000);
	uint16_t *avail = (uint16_t *)(desc + 0x1000);
	uint16_t used_event;

	fuzz_take(in, h, sizeof(h));
	out->size = 1u << (h[0] % 10);
	memcpy(&out->avail_idx, h + 3, 2);
	memcpy(&used_event, h + 5, 2);
	fuzz_take(in, desc, 16u * h[1]);
	avail[0] = 0; /* flags */
	avail[1] = out->avail_idx;
	fuzz_take(in, avail + 2, 2u * h[2]);
	if (out->size <= 512)
		avail[2 + out->size] = used_event;
}

#endif
