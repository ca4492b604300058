/* test_virtio_mmio.c - the virtio-mmio transport's registers and state machine, and the device manager. No KVM. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/bus.h"
#include "brisk/devmgr.h"
#include "brisk/evloop.h"
#include "brisk/log.h"
#include "brisk/mem.h"
#include "brisk/snapshot.h"
#include "brisk/virtio.h"
#include "brisk/virtq.h"
#include "fake_vm.h"

/* ---- a fake device: two queues, 8 bytes of config, counts its callbacks ------------------------------------ */

struct fake_dev {
	pthread_mutex_t lock;
	unsigned activations, resets, destroyed;
	unsigned notified[2];
	uint64_t features;
	uint8_t config[8];
};

static void fd_config_read(void *dev, uint32_t off, void *data, unsigned len)
{
	memcpy(data, ((struct fake_dev *)dev)->config + off, len);
}

static int fd_activate(void *dev, uint64_t features)
{
	struct fake_dev *d = dev;

	d->activations++;
	d->features = features;
	return 0;
}

static void fd_notify(void *dev, unsigned q)
{
	struct fake_dev *d = dev;

	pthread_mutex_lock(&d->lock);
	d->notified[q]++;
	pthread_mutex_unlock(&d->lock);
}

static void fd_reset(void *dev)
{
	((struct fake_dev *)dev)->resets++;
}

static void fd_destroy(void *dev)
{
	((struct fake_dev *)dev)->destroyed++;
}

#define FAKE_FEATURE (1ull << 5)

static const struct virtio_dev_ops fake_dev_ops = {
    .name = "virtio-fake",
    .device_id = 42,
    .nr_queues = 2,
    .queue_max = 64,
    .config_size = 8,
    .config_read = fd_config_read,
    .activate = fd_activate,
    .notify = fd_notify,
    .reset = fd_reset,
    .destroy = fd_destroy,
};

/* ---- fixture ------------------------------------------------------------------------------------------- */

struct fx {
	struct gmem mem;
	struct bus bus;
	struct fake_dev dev;
	struct devmgr mgr;
	uint64_t base;
};

static int setup(void **state)
{
	static struct fx f;
	struct devctx ctx = {.ops = &fake_ops};
	const struct devmgr_window *slot;

	memset(&f, 0, sizeof(f));
	pthread_mutex_init(&f.dev.lock, NULL);
	memcpy(f.dev.config, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
	assert_int_equal(gmem_init(&f.mem, 16 << 20, 0), 0);
	ctx.mem = &f.mem;
	loop = evloop_create();
	assert_non_null(loop);
	bus_init(&f.bus);
	slot = devmgr_alloc(&f.mgr, "fake");
	f.base = slot->base;
	assert_int_equal(virtio_mmio_create(&ctx, &f.bus, slot, &fake_dev_ops, &f.dev, FAKE_FEATURE, NULL), 0);
	assert_int_equal(evloop_start(loop), 0);
	irq_pulses = 0;
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	evloop_stop(loop);
	bus_destroy(&f->bus);
	assert_int_equal(f->dev.destroyed, 1);
	evloop_destroy(loop);
	gmem_destroy(&f->mem);
	return 0;
}

static uint32_t rd(struct fx *f, uint64_t off)
{
	uint32_t v = 0xdeadbeef;

	bus_read(&f->bus, BUS_MMIO, f->base + off, &v, 4);
	return v;
}

static void wr(struct fx *f, uint64_t off, uint32_t v)
{
	bus_write(&f->bus, BUS_MMIO, f->base + off, &v, 4);
}

/* The driver's side of 3.1.1 up to FEATURES_OK, offering `features`; returns the status read back. */
static uint32_t negotiate(struct fx *f, uint64_t features)
{
	wr(f, 0x070, VIRTIO_STATUS_ACKNOWLEDGE);
	wr(f, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	wr(f, 0x024, 0);
	wr(f, 0x020, (uint32_t)features);
	wr(f, 0x024, 1);
	wr(f, 0x020, (uint32_t)(features >> 32));
	wr(f, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	return rd(f, 0x070);
}

/* Queue q at guest addresses desc/avail/used, `size` entries, then QueueReady. */
static void setup_queue(struct fx *f, unsigned q, uint32_t size, uint64_t desc)
{
	wr(f, 0x030, q);
	wr(f, 0x038, size);
	wr(f, 0x080, (uint32_t)desc);
	wr(f, 0x084, (uint32_t)(desc >> 32));
	wr(f, 0x090, (uint32_t)(desc + 0x1000));
	wr(f, 0x094, 0);
	wr(f, 0x0a0, (uint32_t)(desc + 0x2000));
	wr(f, 0x0a4, 0);
	wr(f, 0x044, 1);
}

#define STATUS_OK (VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK)
#define V1	  (1ull << VIRTIO_F_VERSION_1)

static void test_identity_registers(void **state)
{
	struct fx *f = *state;
	uint8_t b[8];

	assert_int_equal(rd(f, 0x000), 0x74726976);
	assert_int_equal(rd(f, 0x004), 2);
	assert_int_equal(rd(f, 0x008), 42);
	assert_int_equal(rd(f, 0x00c), VIRTIO_MMIO_VENDOR);
	wr(f, 0x014, 0);
	assert_int_equal(rd(f, 0x010),
			 (uint32_t)(FAKE_FEATURE | (1u << VIRTIO_F_INDIRECT_DESC) | (1u << VIRTIO_F_EVENT_IDX)));
	wr(f, 0x014, 1);
	assert_int_equal(rd(f, 0x010), 1); /* VERSION_1 is bit 32 */
	wr(f, 0x014, 2);
	assert_int_equal(rd(f, 0x010), 0);
	assert_int_equal(rd(f, 0x0b0), 0xffffffff); /* no shared memory region */
	/* config space at any width, inside its 8 bytes only */
	assert_true(bus_read(&f->bus, BUS_MMIO, f->base + 0x102, b, 2));
	assert_int_equal(b[0], 3);
	assert_int_equal(b[1], 4);
	memset(b, 0xee, sizeof(b));
	bus_read(&f->bus, BUS_MMIO, f->base + 0x106, b, 4); /* crosses the end of config: zeroes */
	assert_int_equal(b[0], 0);
}

static void test_features_ok_rules(void **state)
{
	struct fx *f = *state;

	/* without VERSION_1: FEATURES_OK does not stick (3.1.1 step 6: the driver reads it back) */
	assert_int_equal(negotiate(f, FAKE_FEATURE), VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	wr(f, 0x070, 0);
	assert_int_equal(rd(f, 0x070), 0);
	/* a feature not offered: refused */
	assert_int_equal(negotiate(f, V1 | (1ull << 7)), VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	wr(f, 0x070, 0);
	/* a subset with VERSION_1: accepted */
	assert_int_equal(negotiate(f, V1 | FAKE_FEATURE), STATUS_OK);
	/* features cannot change after FEATURES_OK */
	wr(f, 0x024, 0);
	wr(f, 0x020, 0);
	wr(f, 0x070, STATUS_OK | VIRTIO_STATUS_DRIVER_OK);
	assert_int_equal(f->dev.activations, 1);
	assert_int_equal(f->dev.features, V1 | FAKE_FEATURE);
}

static void test_status_only_grows(void **state)
{
	struct fx *f = *state;
	struct virtio_stats st;

	/* DRIVER_OK before FEATURES_OK: refused, the device is not activated */
	wr(f, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_DRIVER_OK);
	assert_int_equal(rd(f, 0x070), VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	assert_int_equal(f->dev.activations, 0);
	/* clearing a bit (other than by reset): ignored and counted */
	wr(f, 0x070, VIRTIO_STATUS_ACKNOWLEDGE);
	assert_int_equal(rd(f, 0x070), VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	/* the driver cannot set DEVICE_NEEDS_RESET */
	wr(f, 0x070, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_DEVICE_NEEDS_RESET);
	assert_int_equal(rd(f, 0x070), VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	virtio_stats(bus_find(&f->bus, BUS_MMIO, f->base, 4)->device->dev, &st);
	assert_true(st.bad_accesses >= 2);
}

static void test_register_widths(void **state)
{
	struct fx *f = *state;
	uint8_t b[8];
	uint16_t w = 1;

	memset(b, 0xee, sizeof(b));
	assert_true(bus_read(&f->bus, BUS_MMIO, f->base + 0x000, b, 2)); /* a 16-bit read of MagicValue */
	assert_int_equal(b[0], 0);
	assert_int_equal(b[1], 0);
	bus_read(&f->bus, BUS_MMIO, f->base + 0x001, b, 4); /* misaligned */
	assert_int_equal(b[0], 0);
	bus_write(&f->bus, BUS_MMIO, f->base + 0x070, &w, 2); /* a 16-bit status write: ignored */
	assert_int_equal(rd(f, 0x070), 0);
	bus_read(&f->bus, BUS_MMIO, f->base + 0x0fc, b, 8); /* 64-bit register read: ignored */
	assert_int_equal(b[0], 0);
}

static void test_queue_registers(void **state)
{
	struct fx *f = *state;

	wr(f, 0x030, 0);
	assert_int_equal(rd(f, 0x034), 64);
	wr(f, 0x030, 1);
	assert_int_equal(rd(f, 0x034), 64);
	wr(f, 0x030, 2); /* no such queue */
	assert_int_equal(rd(f, 0x034), 0);
	wr(f, 0x030, 0xffff);
	assert_int_equal(rd(f, 0x034), 0);
	wr(f, 0x038, 16); /* ignored, not a crash */
	assert_int_equal(negotiate(f, V1), STATUS_OK);
	setup_queue(f, 0, 16, 0x100000);
	wr(f, 0x030, 0);
	assert_int_equal(rd(f, 0x044), 1);
	assert_int_equal(rd(f, 0x070) & VIRTIO_STATUS_DEVICE_NEEDS_RESET, 0);
	/* the ready queue's registers do not change any more */
	wr(f, 0x038, 8);
	wr(f, 0x080, 0x200000);
	wr(f, 0x070, STATUS_OK | VIRTIO_STATUS_DRIVER_OK);
	assert_int_equal(f->dev.activations, 1);
	/* nor after DRIVER_OK for the other queue */
	setup_queue(f, 1, 16, 0x300000);
	wr(f, 0x030, 1);
	assert_int_equal(rd(f, 0x044), 0);
}

/* docs/security.md case 7: queues that cannot be valid raise DEVICE_NEEDS_RESET and stay not ready. */
static void test_bad_queues(void **state)
{
	static const struct {
		uint32_t size;
		uint64_t desc;
	} bad[] = {
	    {0, 0x100000},	       /* size 0 */
	    {12, 0x100000},	       /* not a power of two */
	    {128, 0x100000},	       /* above QueueNumMax */
	    {16, 0x100008},	       /* descriptor table not 16-aligned */
	    {16, (16 << 20) - 0x1000}, /* rings past the end of RAM */
	    {16, 0xd0000000},	       /* in the MMIO hole */
	};
	struct fx *f = *state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(negotiate(f, V1), STATUS_OK);
		setup_queue(f, 0, bad[i].size, bad[i].desc);
		wr(f, 0x030, 0);
		assert_int_equal(rd(f, 0x044), 0);
		assert_true(rd(f, 0x070) & VIRTIO_STATUS_DEVICE_NEEDS_RESET);
		/* DRIVER_OK now does not activate a device that needs a reset */
		wr(f, 0x070, rd(f, 0x070) | VIRTIO_STATUS_DRIVER_OK);
		assert_int_equal(f->dev.activations, 0);
		wr(f, 0x070, 0); /* reset clears it */
		assert_int_equal(rd(f, 0x070), 0);
	}
	assert_int_equal(f->dev.resets, sizeof(bad) / sizeof(bad[0]));
}

static unsigned notified(struct fake_dev *d, unsigned q)
{
	unsigned n;

	pthread_mutex_lock(&d->lock);
	n = d->notified[q];
	pthread_mutex_unlock(&d->lock);
	return n;
}

/* Without KVM_IOEVENTFD a QueueNotify write exits; the transport forwards it to the same event-loop path. */
static void test_notify_and_interrupt(void **state)
{
	struct fx *f = *state;
	struct virtio_mmio *t = bus_find(&f->bus, BUS_MMIO, f->base, 4)->device->dev;
	struct timespec ms = {.tv_nsec = 1000000};

	wr(f, 0x050, 0); /* before DRIVER_OK: not the device's business */
	assert_int_equal(negotiate(f, V1), STATUS_OK);
	setup_queue(f, 1, 16, 0x100000);
	wr(f, 0x070, STATUS_OK | VIRTIO_STATUS_DRIVER_OK);
	wr(f, 0x050, 1);
	wr(f, 0x050, 7); /* no queue 7: ignored */
	for (int i = 0; i < 2000 && notified(&f->dev, 1) == 0; i++)
		nanosleep(&ms, NULL);
	assert_int_equal(notified(&f->dev, 1), 1);
	assert_int_equal(notified(&f->dev, 0), 0);
	/* a config change: generation moves, InterruptStatus bit 1, one pulse on the line (no irqfd) */
	assert_int_equal(rd(f, 0x0fc), 0);
	virtio_config_changed(t);
	assert_int_equal(rd(f, 0x0fc), 1);
	assert_int_equal(rd(f, 0x060), VIRTIO_MMIO_INT_CONFIG);
	assert_int_equal(irq_pulses, 1);
	wr(f, 0x064, VIRTIO_MMIO_INT_CONFIG);
	assert_int_equal(rd(f, 0x060), 0);
	/* NEEDS_RESET from the device: status bit, config interrupt, no more notifications served */
	virtio_needs_reset(t, "test");
	assert_true(rd(f, 0x070) & VIRTIO_STATUS_DEVICE_NEEDS_RESET);
	assert_int_equal(rd(f, 0x060), VIRTIO_MMIO_INT_CONFIG);
	wr(f, 0x050, 1);
	nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
	assert_int_equal(notified(&f->dev, 1), 1);
	/* reset: everything back, interrupt status included */
	wr(f, 0x070, 0);
	assert_int_equal(rd(f, 0x060), 0);
	assert_int_equal(rd(f, 0x070), 0);
	wr(f, 0x030, 1);
	assert_int_equal(rd(f, 0x044), 0);
}

/*
 * ---- snapshot: a tiny in-memory stand-in for snapshot.h's writer and reader (src/snapshot/snapfile.c
 * is not in the library yet; the test's definitions are linked before the library's) ---------------------
 */

#define STUB_SECS 4
#define STUB_SIZE 4096

struct snap_writer {
	uint8_t body[STUB_SECS][STUB_SIZE];
	size_t len[STUB_SECS];
	uint32_t index[STUB_SECS];
	char name[STUB_SECS][SNAP_MAX_NAME];
	uint32_t version[STUB_SECS];
	unsigned n;
	bool open;
};

struct snap_reader {
	struct snap_writer *w; /* the whole file */
	unsigned sec;	       /* a section reader: which one */
	size_t pos;
	bool err;
	struct snap_reader *cur;
};

int snap_section_begin(struct snap_writer *w, enum snap_tag tag, uint32_t index, const char *name)
{
	if (w->open || w->n == STUB_SECS || tag != SNAP_TAG_DEVICE)
		return -EINVAL;
	w->index[w->n] = index;
	snprintf(w->name[w->n], SNAP_MAX_NAME, "%s", name);
	w->len[w->n] = 0;
	w->version[w->n] = 1;
	w->open = true;
	return 0;
}

int snap_set_version(struct snap_writer *w, uint32_t version)
{
	if (!w->open || !version)
		return -EINVAL;
	w->version[w->n] = version;
	return 0;
}

int snap_section_end(struct snap_writer *w)
{
	if (!w->open)
		return -EINVAL;
	w->open = false;
	w->n++;
	return 0;
}

int snap_put(struct snap_writer *w, const void *data, size_t len)
{
	if (!w->open || w->len[w->n] + len > STUB_SIZE)
		return -EINVAL;
	memcpy(w->body[w->n] + w->len[w->n], data, len);
	w->len[w->n] += len;
	return 0;
}

int snap_put_u8(struct snap_writer *w, uint8_t v)
{
	return snap_put(w, &v, 1);
}

int snap_put_u16(struct snap_writer *w, uint16_t v)
{
	return snap_put(w, &v, 2);
}

int snap_put_u32(struct snap_writer *w, uint32_t v)
{
	return snap_put(w, &v, 4);
}

int snap_put_u64(struct snap_writer *w, uint64_t v)
{
	return snap_put(w, &v, 8);
}

unsigned snap_count(const struct snap_reader *r, enum snap_tag tag)
{
	return tag == SNAP_TAG_DEVICE ? r->w->n : 0;
}

static int stub_find(const struct snap_reader *r, uint32_t index)
{
	for (unsigned i = 0; i < r->w->n; i++)
		if (r->w->index[i] == index)
			return (int)i;
	return -1;
}

const char *snap_section_name(const struct snap_reader *r, enum snap_tag tag, uint32_t index)
{
	int i = stub_find(r, index);

	return tag == SNAP_TAG_DEVICE && i >= 0 ? r->w->name[i] : NULL;
}

int snap_section(struct snap_reader *r, enum snap_tag tag, uint32_t index, const char *name, struct snap_reader **sec)
{
	static struct snap_reader s;
	int i = stub_find(r, index);

	if (tag != SNAP_TAG_DEVICE || i < 0)
		return -ENOENT;
	if (name && strcmp(name, r->w->name[i]))
		return -EINVAL;
	s = (struct snap_reader){.w = r->w, .sec = (unsigned)i};
	*sec = &s;
	return 0;
}

int snap_get(struct snap_reader *s, void *data, size_t len)
{
	if (s->err || len > s->w->len[s->sec] - s->pos) {
		s->err = true;
		memset(data, 0, len);
		return -EINVAL;
	}
	memcpy(data, s->w->body[s->sec] + s->pos, len);
	s->pos += len;
	return 0;
}

int snap_get_u8(struct snap_reader *s, uint8_t *v)
{
	return snap_get(s, v, 1);
}

int snap_get_u16(struct snap_reader *s, uint16_t *v)
{
	return snap_get(s, v, 2);
}

int snap_get_u32(struct snap_reader *s, uint32_t *v)
{
	return snap_get(s, v, 4);
}

int snap_get_u64(struct snap_reader *s, uint64_t *v)
{
	return snap_get(s, v, 8);
}

uint32_t snap_version(const struct snap_reader *s)
{
	return s->w->version[s->sec];
}

size_t snap_remaining(const struct snap_reader *s)
{
	return s->w->len[s->sec] - s->pos;
}

bool snap_reader_error(const struct snap_reader *s)
{
	return s->err;
}

/* ---- snapshot ------------------------------------------------------------------------------------------- */

/* Another device like f's on its own bus and the same loop, with a copy of f's guest RAM (a restore). */
static void fresh(struct fx *g, struct fx *f)
{
	struct devctx ctx = {.ops = &fake_ops};
	const struct devmgr_window *slot;

	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->dev.lock, NULL);
	assert_int_equal(gmem_init(&g->mem, 16 << 20, 0), 0);
	memcpy(gmem_ptr(&g->mem, 0, 16 << 20), gmem_ptr(&f->mem, 0, 16 << 20), 16 << 20);
	ctx.mem = &g->mem;
	bus_init(&g->bus);
	slot = devmgr_alloc(&g->mgr, "fake");
	g->base = slot->base;
	assert_int_equal(virtio_mmio_create(&ctx, &g->bus, slot, &fake_dev_ops, &g->dev, FAKE_FEATURE, NULL), 0);
}

static void fresh_destroy(struct fx *g)
{
	bus_destroy(&g->bus);
	gmem_destroy(&g->mem);
}

/* The driver makes one 16-byte writable buffer available on the queue at `desc` (size 16), as chain n. */
static void post(struct fx *f, uint64_t desc, uint16_t n)
{
	uint64_t *d = gmem_ptr(&f->mem, desc + 16u * (n % 16), 16);
	uint16_t *avail = gmem_ptr(&f->mem, desc + 0x1000, 4 + 2 * 16);

	d[0] = 0x400000;
	d[1] = 16 | ((uint64_t)VIRTQ_DESC_F_WRITE << 32);
	avail[2 + n % 16] = n % 16;
	__atomic_store_n(&avail[1], (uint16_t)(n + 1), __ATOMIC_RELEASE);
}

/* The device's side: pops the one chain available on queue q, returns it with 16 bytes, publishes. */
static void serve(struct fx *f, unsigned q)
{
	struct virtio_mmio *t = bus_find(&f->bus, BUS_MMIO, f->base, 4)->device->dev;
	struct virtq *vq = virtio_queue(t, q);
	struct virtq_seg segs[4];
	struct virtq_chain c;

	assert_int_equal(virtq_pop(vq, &c, segs, 4), VIRTQ_CHAIN);
	virtq_push(vq, c.head, 16);
	virtio_queue_done(t, q);
}

static uint16_t used_idx(struct fx *f, uint64_t desc)
{
	return __atomic_load_n((uint16_t *)gmem_ptr(&f->mem, desc + 0x2002, 2), __ATOMIC_ACQUIRE);
}

static int restore_into(struct fx *g, struct snap_writer *w)
{
	struct snap_reader r = {.w = w};
	const char *failed = NULL;
	char err[160] = "";

	return bus_restore(&g->bus, &r, &failed, err, sizeof(err));
}

/* A live device saved, restored into a fresh one: registers, queue and indices carry on where they were. */
static void test_snapshot_round_trip(void **state)
{
	struct fx *f = *state;
	static struct fx g;
	static struct snap_writer w;
	const uint64_t feat = V1 | (1ull << VIRTIO_F_EVENT_IDX) | FAKE_FEATURE;
	const char *failed = NULL;
	struct timespec ms = {.tv_nsec = 1000000};

	assert_int_equal(negotiate(f, feat), STATUS_OK);
	setup_queue(f, 1, 16, 0x100000);
	wr(f, 0x070, STATUS_OK | VIRTIO_STATUS_DRIVER_OK);
	for (uint16_t n = 0; n < 3; n++) {
		post(f, 0x100000, n);
		serve(f, 1);
	}
	assert_int_equal(used_idx(f, 0x100000), 3);
	wr(f, 0x030, 1);
	memset(&w, 0, sizeof(w));
	assert_int_equal(bus_quiesce(&f->bus, &failed), 0);
	assert_int_equal(bus_save(&f->bus, &w, &failed), 0);
	assert_int_equal(w.n, 1);
	assert_string_equal(w.name[0], "virtio-mmio");

	fresh(&g, f);
	assert_int_equal(restore_into(&g, &w), 0);
	assert_int_equal(g.dev.activations, 1);
	assert_true(g.dev.features == feat);
	assert_int_equal(rd(&g, 0x070), STATUS_OK | VIRTIO_STATUS_DRIVER_OK);
	assert_int_equal(rd(&g, 0x030 + 0x14), 1); /* QueueReady of the selected queue 1 */
	/* the next request completes at used index 4, and the restored device is notified */
	post(&g, 0x100000, 3);
	serve(&g, 1);
	assert_int_equal(used_idx(&g, 0x100000), 4);
	wr(&g, 0x050, 1);
	for (int i = 0; i < 2000 && notified(&g.dev, 1) == 0; i++)
		nanosleep(&ms, NULL);
	assert_int_equal(notified(&g.dev, 1), 1);
	fresh_destroy(&g);
}

/* A transport section written by hand (the layout mmio_save writes), queue 1 ready at `desc`. */
static void put_section(struct snap_writer *w, uint32_t status, uint64_t features, uint16_t size, uint64_t desc)
{
	const uint8_t zeros[41] = {0}; /* an unused queue: ready, num, then virtq_save's 38 bytes */

	assert_int_equal(snap_section_begin(w, SNAP_TAG_DEVICE, 0, "virtio-mmio"), 0);
	snap_put_u32(w, 42);
	snap_put_u32(w, 2);
	snap_put_u32(w, status);
	snap_put_u32(w, 0);
	snap_put_u32(w, 0);
	snap_put_u32(w, 0);
	snap_put_u64(w, features);
	snap_put_u32(w, 0);
	snap_put_u32(w, 0);
	snap_put(w, zeros, sizeof(zeros));
	snap_put_u8(w, 1);
	snap_put_u16(w, size);
	snap_put_u16(w, size);
	snap_put_u64(w, desc);
	snap_put_u64(w, desc + 0x1000);
	snap_put_u64(w, desc + 0x2000);
	snap_put_u8(w, 0); /* event_idx */
	snap_put_u8(w, 0); /* indirect */
	snap_put_u8(w, 1); /* activated */
	snap_put_u16(w, 5);
	snap_put_u16(w, 5);
	snap_put_u16(w, 5);
	snap_put_u8(w, 1);
	snap_put_u8(w, 0);
	snap_put_u8(w, 0);
	assert_int_equal(snap_section_end(w), 0);
}

/* Restores `w` into a fresh device: the result, and nothing activated when it failed. */
static int try_restore(struct fx *f, struct snap_writer *w)
{
	static struct fx g;
	int ret;

	fresh(&g, f);
	ret = restore_into(&g, w);
	if (ret) {
		assert_int_equal(g.dev.activations, 0);
		assert_int_equal(rd(&g, 0x070), 0);
		wr(&g, 0x030, 1);
		assert_int_equal(rd(&g, 0x044), 0);
	}
	fresh_destroy(&g);
	return ret;
}

static void test_snapshot_hostile(void **state)
{
	struct fx *f = *state;
	static struct snap_writer w;
	const uint32_t live = STATUS_OK | VIRTIO_STATUS_DRIVER_OK;

#define CASE(status, features, size, desc)                                                                             \
	(memset(&w, 0, sizeof(w)), put_section(&w, status, features, size, desc), try_restore(f, &w))
	assert_int_equal(CASE(live, V1, 16, 0x100000), 0);			    /* the layout itself is right */
	assert_int_equal(CASE(live, V1, 12, 0x100000), -EINVAL);		    /* not a power of two */
	assert_int_equal(CASE(live, V1, 128, 0x100000), -EINVAL);		    /* above QueueNumMax */
	assert_int_equal(CASE(live, V1, 16, 0xfff000), -EINVAL);		    /* rings past the end of RAM */
	assert_int_equal(CASE(live, V1, 16, 0x100008), -EINVAL);		    /* misaligned */
	assert_int_equal(CASE(live, V1 | (1ull << 40), 16, 0x100000), -EINVAL);	    /* not offered */
	assert_int_equal(CASE(live, 0, 16, 0x100000), -EINVAL);			    /* FEATURES_OK without VERSION_1 */
	assert_int_equal(CASE(VIRTIO_STATUS_DRIVER_OK, V1, 16, 0x100000), -EINVAL); /* without FEATURES_OK */
	assert_int_equal(CASE(live | 0x20, V1, 16, 0x100000), -EINVAL);		    /* unknown status bit */
#undef CASE
	/* truncated, too long, a missing device */
	memset(&w, 0, sizeof(w));
	put_section(&w, live, V1, 16, 0x100000);
	w.len[0] -= 3;
	assert_int_equal(try_restore(f, &w), -EINVAL);
	w.len[0] += 4;
	assert_int_equal(try_restore(f, &w), -EINVAL);
	w.n = 0;
	assert_int_equal(try_restore(f, &w), -EINVAL);
	/* another device's section in its place */
	memset(&w, 0, sizeof(w));
	put_section(&w, live, V1, 16, 0x100000);
	snprintf(w.name[0], SNAP_MAX_NAME, "serial8250");
	assert_int_equal(try_restore(f, &w), -EINVAL);
}

static void test_devmgr(void **state)
{
	struct devmgr m = {0};
	char buf[LAYOUT_CMDLINE_MAX];
	const struct devmgr_window *s;
	int n;

	(void)state;
	for (unsigned i = 0; i < LAYOUT_VIRTIO_WINDOWS; i++) {
		s = devmgr_alloc(&m, "x");
		assert_non_null(s);
		assert_int_equal(s->base, LAYOUT_VIRTIO_MMIO + i * 0x1000);
		assert_true(s->irq >= 5 && s->irq <= 23 && s->irq != 8);
		for (unsigned j = 0; j < i; j++)
			assert_int_not_equal(m.win[j].irq, s->irq);
	}
	assert_null(devmgr_alloc(&m, "one too many"));
	m.nr = 2;
	n = devmgr_cmdline(&m, "console=ttyS0", buf, sizeof(buf));
	assert_string_equal(buf, "console=ttyS0 virtio_mmio.device=4K@0xd0001000:5 virtio_mmio.device=4K@0xd0002000:6");
	assert_int_equal(n, (int)strlen(buf));
	n = devmgr_cmdline(&m, "", buf, sizeof(buf));
	assert_string_equal(buf, "virtio_mmio.device=4K@0xd0001000:5 virtio_mmio.device=4K@0xd0002000:6");
	assert_int_equal(devmgr_cmdline(&m, "console=ttyS0", buf, 40), -E2BIG);
	assert_int_equal(devmgr_cmdline(&m, "console=ttyS0", buf, 14), -E2BIG);
	/* the words are the kernel's: before a "--", whose rest is init's */
	m.nr = 1;
	n = devmgr_cmdline(&m, "console=ttyS0 -- init -x", buf, sizeof(buf));
	assert_string_equal(buf, "console=ttyS0 virtio_mmio.device=4K@0xd0001000:5 -- init -x");
	assert_int_equal(n, (int)strlen(buf));
	devmgr_cmdline(&m, "-- a", buf, sizeof(buf));
	assert_string_equal(buf, "virtio_mmio.device=4K@0xd0001000:5 -- a");
	devmgr_cmdline(&m, "a=\"x -- y\" b", buf, sizeof(buf));
	assert_string_equal(buf, "a=\"x -- y\" b virtio_mmio.device=4K@0xd0001000:5");
	assert_int_equal(devmgr_cmdline(&m, "x -- init", buf, 38), -E2BIG);
}

/* Linux's acpi= parameter (arch/x86/kernel/acpi/boot.c parse_acpi), as the kernel reads its words. */
static void test_cmdline_acpi_off(void **state)
{
	static const struct {
		const char *cmdline;
		bool off;
	} cases[] = {
	    {"", false},
	    {"console=ttyS0 reboot=k", false},
	    {"pci=off reboot=k panic=1 iommu=off net.ifnames=0 random.trust_cpu=on acpi=off", true}, /* Kata's fc.go */
	    {"acpi=off", true},
	    {"\tacpi=off\n", true},
	    {"acpi=off acpi=force", false}, /* in order: force enables it again */
	    {"acpi=force acpi=off", true},
	    {"acpi=noirq", false}, /* ACPI still enumerates the devices */
	    {"acpi=strict acpi=off acpi=rsdt", true},
	    {"\"acpi=off\"", true}, /* next_arg strips the quotes */
	    {"acpi=\"off\"", true},
	    {"xacpi=off", false},
	    {"acpi=offx", false},
	    {"acpi=of", false},
	    {"acpi", false},
	    {"root=/dev/vda -- acpi=off", false}, /* init's argument, not the kernel's */
	    {"acpi=off -- acpi=force", true},
	    {"a=\"b acpi=off\"", false}, /* inside another word's quotes */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (devmgr_cmdline_acpi_off(cases[i].cmdline) != cases[i].off)
			fail_msg("'%s': expected %s", cases[i].cmdline, cases[i].off ? "off" : "on");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_identity_registers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_features_ok_rules, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_status_only_grows, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_register_widths, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_queue_registers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_queues, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_notify_and_interrupt, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_snapshot_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_snapshot_hostile, setup, teardown),
	    cmocka_unit_test(test_devmgr),
	    cmocka_unit_test(test_cmdline_acpi_off),
	};

	log_set_level(LOG_ERROR); /* the transport's warnings are expected here */
	return cmocka_run_group_tests_name("virtio_mmio", tests, NULL, NULL);
}
