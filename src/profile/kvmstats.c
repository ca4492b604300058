/* kvmstats.c - KVM's binary statistics (KVM_GET_STATS_FD): descriptors parsed from the header, values per snapshot. */
#include <errno.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/kvm.h"
#include "brisk/profile.h"

/*
 * Documentation/virt/kvm/api.rst 4.134 (KVM_GET_STATS_FD): the fd holds a
 * header (struct kvm_stats_header), an id string, descriptors (each
 * sizeof(struct kvm_stats_desc) + header.name_size bytes) at desc_offset,
 * and the values at data_offset + desc.offset, desc.size u64s each. The
 * layout is read from the header every time, never assumed.
 */
#define KSTATS_MAX_DESC	 4096	     /* a vCPU has ~50; anything near this is not KVM */
#define KSTATS_MAX_NAME	 4096	     /* header.name_size bound */
#define KSTATS_MAX_BYTES (64u << 20) /* bound on the descriptor block read */

static int read_exact(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = pread(fd, buf, len, (off_t)off);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static int stats_fail(char *err, size_t errlen, int ret, const char *what)
{
	snprintf(err, errlen, "KVM binary stats: %s", what);
	return ret;
}

/* Keeps descriptor `d` (named `name`) when it is a single value; histograms are skipped. */
static void keep_desc(struct kstats *k, const struct kvm_stats_desc *d, const char *name)
{
	uint32_t type = d->flags & KVM_STATS_TYPE_MASK;
	struct kstat_desc *o;

	if (d->size != 1 || type > KVM_STATS_TYPE_PEAK)
		return;
	o = &k->desc[k->n++];
	snprintf(o->name, sizeof(o->name), "%s", name);
	o->flags = d->flags;
	o->offset = d->offset;
}

static int parse_descs(struct kstats *k, const struct kvm_stats_header *h, char *err, size_t errlen)
{
	size_t one = sizeof(struct kvm_stats_desc) + h->name_size;
	size_t total = one * h->num_desc;
	uint8_t *buf;
	int ret;

	if (h->num_desc > KSTATS_MAX_DESC || h->name_size > KSTATS_MAX_NAME || total > KSTATS_MAX_BYTES)
		return stats_fail(err, errlen, -EINVAL, "implausible header (descriptor count or name size)");
	buf = malloc(total ? total : 1);
	k->desc = calloc(h->num_desc ? h->num_desc : 1, sizeof(*k->desc));
	if (!buf || !k->desc) {
		free(buf);
		return stats_fail(err, errlen, -ENOMEM, "out of memory");
	}
	ret = read_exact(k->fd, buf, total, h->desc_offset);
	for (uint32_t i = 0; !ret && i < h->num_desc; i++) {
		struct kvm_stats_desc d;
		char name[KSTATS_NAME_MAX];
		size_t nlen = h->name_size < sizeof(name) - 1 ? h->name_size : sizeof(name) - 1;

		memcpy(&d, buf + i * one, sizeof(d));
		memcpy(name, buf + i * one + sizeof(d), nlen);
		name[nlen] = '\0';
		keep_desc(k, &d, name);
	}
	free(buf);
	return ret ? stats_fail(err, errlen, ret, "short read of the descriptors") : 0;
}

int kstats_init_fd(struct kstats *k, int stats_fd, char *err, size_t errlen)
{
	struct kvm_stats_header h;
	int ret;

	memset(k, 0, sizeof(*k));
	k->fd = stats_fd;
	ret = read_exact(stats_fd, &h, sizeof(h), 0);
	if (ret) {
		kstats_close(k);
		return stats_fail(err, errlen, ret, "cannot read the header");
	}
	k->data_offset = h.data_offset;
	ret = parse_descs(k, &h, err, errlen);
	if (ret)
		kstats_close(k);
	return ret;
}

int kstats_open(struct kstats *k, int kvm_fd, char *err, size_t errlen)
{
	int fd = KVM_IOCTL(kvm_fd, KVM_GET_STATS_FD, 0);

	if (fd < 0) {
		memset(k, 0, sizeof(*k));
		k->fd = -1;
		snprintf(err, errlen, "KVM_GET_STATS_FD failed: %s (needs Linux 5.14+, KVM_CAP_BINARY_STATS_FD)",
			 strerror(errno));
		return -errno;
	}
	return kstats_init_fd(k, fd, err, errlen);
}

int kstats_snapshot(struct kstats *k)
{
	uint64_t *v;

	if (k->fd < 0)
		return -EBADF;
	if (k->nsnap >= KSTATS_MAX_SNAPSHOTS)
		return -ENOSPC;
	v = calloc(k->n ? k->n : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	/* One pread per value: offsets need not be contiguous (api.rst: "offset" per descriptor). */
	for (unsigned i = 0; i < k->n; i++) {
		int ret = read_exact(k->fd, &v[i], sizeof(v[i]), k->data_offset + k->desc[i].offset);

		if (ret) {
			free(v);
			return ret;
		}
	}
	k->values[k->nsnap++] = v;
	return 0;
}

int kstats_find(const struct kstats *k, const char *name)
{
	for (unsigned i = 0; i < k->n; i++)
		if (strcmp(k->desc[i].name, name) == 0)
			return (int)i;
	return -1;
}

const char *kstats_kind(uint32_t flags)
{
	switch (flags & KVM_STATS_TYPE_MASK) {
	case KVM_STATS_TYPE_CUMULATIVE:
		return "cumulative";
	case KVM_STATS_TYPE_INSTANT:
		return "instant";
	case KVM_STATS_TYPE_PEAK:
		return "peak";
	default:
		return "other";
	}
}

void kstats_close(struct kstats *k)
{
	if (k->fd >= 0)
		close(k->fd);
	for (unsigned s = 0; s < k->nsnap; s++)
		free(k->values[s]);
	free(k->desc);
	memset(k, 0, sizeof(*k));
	k->fd = -1;
}
