/* bus.c - the port I/O and MMIO bus: sorted ranges per address space, binary search dispatch. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/bus.h"
#include "brisk/log.h"
#include "brisk/snapshot.h"

static const char *const space_names[] = {[BUS_PIO] = "port", [BUS_MMIO] = "MMIO address"};

void bus_init(struct bus *b)
{
	memset(b, 0, sizeof(*b));
	pthread_mutex_init(&b->lock, NULL);
}

void bus_destroy(struct bus *b)
{
	bus_stop(b);
	for (unsigned i = b->nr_devices; i-- > 0;)
		if (b->device[i].ops->destroy)
			b->device[i].ops->destroy(b->device[i].dev);
	for (int s = BUS_PIO; s <= BUS_MMIO; s++)
		free(b->range[s]);
	pthread_mutex_destroy(&b->lock);
	memset(b, 0, sizeof(*b));
}

struct bus_device *bus_add(struct bus *b, const struct dev_ops *ops, void *dev)
{
	struct bus_device *d;

	if (b->nr_devices == BUS_MAX_DEVICES) {
		if (ops->destroy)
			ops->destroy(dev); /* owned from here on, even when refused */
		return NULL;
	}
	d = &b->device[b->nr_devices++];
	*d = (struct bus_device){.ops = ops, .dev = dev};
	return d;
}

/* Index of the first range whose base is > addr. */
static size_t upper_bound(const struct bus_range *r, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r[mid].base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int grow(struct bus *b, enum bus_space space)
{
	size_t cap = b->cap[space] ? b->cap[space] * 2 : 8;
	struct bus_range *n = realloc(b->range[space], cap * sizeof(*n));

	if (!n)
		return -ENOMEM;
	b->range[space] = n;
	b->cap[space] = cap;
	return 0;
}

int bus_map(struct bus *b, struct bus_device *d, enum bus_space space, uint64_t base, uint64_t len)
{
	struct bus_range *r;
	size_t i;

	if (len == 0 || base + len - 1 < base || !d)
		return -EINVAL;
	if (b->nr[space] == b->cap[space] && grow(b, space))
		return -ENOMEM;
	r = b->range[space];
	i = upper_bound(r, b->nr[space], base);
	/* Ranges are disjoint and sorted: only the neighbours can overlap. */
	if (i > 0 && r[i - 1].base + r[i - 1].len - 1 >= base)
		return -EEXIST;
	if (i < b->nr[space] && base + len - 1 >= r[i].base)
		return -EEXIST;
	memmove(&r[i + 1], &r[i], (b->nr[space] - i) * sizeof(*r));
	r[i] = (struct bus_range){.base = base, .len = len, .device = d};
	b->nr[space]++;
	return 0;
}

const struct bus_range *bus_find(const struct bus *b, enum bus_space space, uint64_t addr, unsigned len)
{
	const struct bus_range *r = b->range[space];
	size_t i = upper_bound(r, b->nr[space], addr);

	if (i == 0 || len == 0)
		return NULL;
	r = &r[i - 1];
	/* [addr, addr+len) must lie inside [base, base+len): overflow-safe. */
	if (addr - r->base >= r->len || len > r->len - (addr - r->base))
		return NULL;
	return r;
}

/*
 * Port ranges Linux probes on every boot, where brisk deliberately has no
 * device (Firecracker and QEMU's microvm have none there either). An access
 * is the guest looking, not a problem a user can act on: logged at debug
 * level, counted like any other (brisk profile shows them).
 */
static const struct {
	uint16_t lo, hi;
	const char *what;
} linux_probes[] = {
    {0x2e, 0x2f, "Super I/O config (LPC)"},
    {0x4e, 0x4f, "Super I/O config (LPC)"},
    {0x80, 0x80, "POST / io_delay"},
    {0x87, 0x87, "DMA page register"},
    {0x2e8, 0x2ef, "COM4"},
    {0x2f8, 0x2ff, "COM2"},
    {0x3e8, 0x3ef, "COM3"},
    {0xcf8, 0xcff, "PCI configuration mechanism 1 (pci=off still probes it)"},
};

static const char *probe_name(enum bus_space space, uint64_t addr)
{
	if (space != BUS_PIO)
		return NULL;
	for (size_t i = 0; i < sizeof(linux_probes) / sizeof(linux_probes[0]); i++)
		if (addr >= linux_probes[i].lo && addr <= linux_probes[i].hi)
			return linux_probes[i].what;
	return NULL;
}

static void log_unhandled(struct bus *b, enum bus_space space, uint64_t addr, unsigned len, int write)
{
	const char *probe = probe_name(space, addr);
	unsigned i;

	pthread_mutex_lock(&b->lock);
	b->unhandled[space]++;
	for (i = 0; i < b->nr_logged[space]; i++)
		if (b->logged[space][i] == addr)
			break;
	if (i == b->nr_logged[space] && i < BUS_UNHANDLED_LOG_MAX) {
		b->logged[space][b->nr_logged[space]++] = addr;
		log_msg(probe ? LOG_DEBUG : LOG_WARN, "unhandled %s %s 0x%llx (%u bytes)%s%s%s",
			write ? "write to" : "read from", space_names[space], (unsigned long long)addr, len,
			probe ? ": a probe of " : "", probe ? probe : "",
			i + 1 == BUS_UNHANDLED_LOG_MAX ? "; further new addresses are not logged" : "");
	}
	pthread_mutex_unlock(&b->lock);
}

static struct bus_access access_at(const struct bus_range *r, enum bus_space space, uint64_t addr, unsigned len)
{
	return (struct bus_access){.space = space, .addr = addr, .offset = addr - r->base, .base = r->base, .len = len};
}

bool bus_read(struct bus *b, enum bus_space space, uint64_t addr, void *data, unsigned len)
{
	const struct bus_range *r = bus_find(b, space, addr, len);
	struct bus_access a;

	if (!r || !r->device->ops->read) {
		memset(data, 0xff, len);
		log_unhandled(b, space, addr, len, 0);
		return false;
	}
	a = access_at(r, space, addr, len);
	r->device->ops->read(r->device->dev, &a, data);
	return true;
}

bool bus_write(struct bus *b, enum bus_space space, uint64_t addr, const void *data, unsigned len)
{
	const struct bus_range *r = bus_find(b, space, addr, len);
	struct bus_access a;

	if (!r || !r->device->ops->write) {
		log_unhandled(b, space, addr, len, 1);
		return false;
	}
	a = access_at(r, space, addr, len);
	r->device->ops->write(r->device->dev, &a, data);
	return true;
}

int bus_start(struct bus *b, const char **failed)
{
	for (unsigned i = 0; i < b->nr_devices; i++) {
		struct bus_device *d = &b->device[i];
		int err = d->ops->start ? d->ops->start(d->dev) : 0;

		d->started = true; /* a failed start may have started something: stop is still due */
		if (err) {
			*failed = d->ops->name;
			return err;
		}
	}
	return 0;
}

int bus_late_start(struct bus *b, const char **failed)
{
	for (unsigned i = 0; i < b->nr_devices; i++) {
		struct bus_device *d = &b->device[i];
		int err = d->ops->late_start ? d->ops->late_start(d->dev) : 0;

		if (err) {
			*failed = d->ops->name;
			return err;
		}
	}
	return 0;
}

void bus_stop(struct bus *b)
{
	for (unsigned i = b->nr_devices; i-- > 0;) {
		struct bus_device *d = &b->device[i];

		if (d->started && d->ops->stop)
			d->ops->stop(d->dev);
		d->started = false;
	}
}

void bus_reset(struct bus *b)
{
	for (unsigned i = 0; i < b->nr_devices; i++)
		if (b->device[i].ops->reset)
			b->device[i].ops->reset(b->device[i].dev);
}

/* ---- snapshot (device.h, snapshot.h) -------------------------------------------------------------------- */

int dev_save_stateless(void *dev, struct snap_writer *w)
{
	(void)dev, (void)w;
	return 0;
}

int dev_restore_stateless(void *dev, struct snap_reader *r)
{
	(void)dev;
	return snap_version(r) == 1 ? 0 : -EPROTONOSUPPORT;
}

int bus_quiesce(struct bus *b, const char **failed)
{
	for (unsigned i = 0; i < b->nr_devices; i++) {
		struct bus_device *d = &b->device[i];
		int err = d->ops->quiesce ? d->ops->quiesce(d->dev) : 0;

		if (err) {
			*failed = d->ops->name;
			return err;
		}
	}
	return 0;
}

static int save_one(struct bus_device *d, unsigned index, struct snap_writer *w)
{
	int err;

	if (!d->ops->save)
		return -ENOTSUP;
	err = snap_section_begin(w, SNAP_TAG_DEVICE, index, d->ops->name);
	if (!err)
		err = d->ops->save(d->dev, w);
	if (!err)
		err = snap_section_end(w);
	return err;
}

int bus_save(struct bus *b, struct snap_writer *w, const char **failed)
{
	for (unsigned i = 0; i < b->nr_devices; i++) {
		int err = save_one(&b->device[i], i, w);

		if (err) {
			*failed = b->device[i].ops->name;
			return err;
		}
	}
	return 0;
}

static int restore_one(struct bus_device *d, unsigned index, struct snap_reader *r, char *err, size_t errlen)
{
	const char *name = snap_section_name(r, SNAP_TAG_DEVICE, index);
	struct snap_reader *sec;
	int ret;

	if (!name) {
		snprintf(err, errlen, "device %u (%s): no section in the snapshot", index, d->ops->name);
		return -EINVAL;
	}
	if (strcmp(name, d->ops->name) != 0 || snap_section(r, SNAP_TAG_DEVICE, index, d->ops->name, &sec)) {
		snprintf(err, errlen, "device %u: the snapshot has %.*s where this VM has %s", index,
			 (int)SNAP_MAX_NAME, name, d->ops->name);
		return -EINVAL;
	}
	if (!d->ops->restore) {
		snprintf(err, errlen, "device %u (%s) cannot be restored", index, d->ops->name);
		return -ENOTSUP;
	}
	ret = d->ops->restore(d->dev, sec);
	if (!ret && (snap_reader_error(sec) || snap_remaining(sec) != 0)) {
		snprintf(err, errlen, "device %u (%s): section %s (%zu bytes left)", index, d->ops->name,
			 snap_reader_error(sec) ? "truncated" : "too long", snap_remaining(sec));
		return -EINVAL;
	}
	if (ret == -EPROTONOSUPPORT)
		snprintf(err, errlen, "device %u (%s): its section is version %u, which this brisk does not read",
			 index, d->ops->name, snap_version(sec));
	else if (ret)
		snprintf(err, errlen, "device %u (%s): %s", index, d->ops->name, strerror(-ret));
	return ret;
}

int bus_restore(struct bus *b, struct snap_reader *r, const char **failed, char *err, size_t errlen)
{
	unsigned n = snap_count(r, SNAP_TAG_DEVICE);

	if (n != b->nr_devices) {
		*failed = "bus";
		snprintf(err, errlen, "the snapshot has %u devices, this VM %u", n, b->nr_devices);
		return -EINVAL;
	}
	for (unsigned i = 0; i < b->nr_devices; i++) {
		int ret = restore_one(&b->device[i], i, r, err, errlen);

		if (ret) {
			*failed = b->device[i].ops->name;
			return ret;
		}
	}
	return 0;
}
