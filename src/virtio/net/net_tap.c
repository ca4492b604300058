/*
 * net_tap.c - the virtio-net tap backend: /dev/net/tun with IFF_TAP | IFF_NO_PI | IFF_VNET_HDR, so the
 * virtio-net header travels with every frame and the kernel does (or accepts) the offloads it describes.
 *
 * Offloads (docs/devices.md, "virtio-net"): at open, TUNSETOFFLOAD is tried with TUN_F_CSUM, then with
 * TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6; what the tap accepts decides which of CSUM/GUEST_CSUM and
 * HOST_TSO4/6/GUEST_TSO4/6 the device offers. Until the driver has negotiated, the tap is told to send
 * nothing offloaded (flags 0); at activation it gets exactly the guest offloads the driver accepted.
 * The vnet header size is 12 (TUNSETVNETHDRSZ): virtio_net_hdr_v1, num_buffers included, as
 * VIRTIO_F_VERSION_1 lays it out; the kernel fills the first 10 bytes on read and ignores the last 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "brisk/virtio_net.h"

static ssize_t tap_send(struct net_backend *b, const struct virtio_net_hdr *hdr, const struct iovec *iov, unsigned niov)
{
	struct iovec v[NET_MAX_SEGS + 1];
	ssize_t n;

	if (niov > NET_MAX_SEGS)
		return -EINVAL;
	v[0] = (struct iovec){.iov_base = (void *)hdr, .iov_len = NET_HDR_SIZE};
	memcpy(&v[1], iov, niov * sizeof(*iov));
	n = writev(b->fd, v, (int)niov + 1);
	return n < 0 ? -errno : n;
}

static ssize_t tap_recv(struct net_backend *b, uint8_t *buf, size_t len)
{
	ssize_t n = read(b->fd, buf, len);

	if (n < 0)
		return errno == EBADFD ? -EPIPE : -errno; /* EBADFD: the interface was deleted */
	if (n < (ssize_t)NET_HDR_SIZE)
		return n == 0 ? -EPIPE : -EIO;
	return n;
}

/* The guest offloads the driver accepted, as tun flags (TSO needs CSUM: tun refuses it alone). */
static unsigned tun_flags(uint64_t features)
{
	unsigned f = 0;

	if (!(features & VIRTIO_NET_F_GUEST_CSUM))
		return 0;
	f = TUN_F_CSUM;
	if (features & VIRTIO_NET_F_GUEST_TSO4)
		f |= TUN_F_TSO4;
	if (features & VIRTIO_NET_F_GUEST_TSO6)
		f |= TUN_F_TSO6;
	return f;
}

static int tap_set_offload(struct net_backend *b, uint64_t features)
{
	return ioctl(b->fd, TUNSETOFFLOAD, (unsigned long)tun_flags(features)) < 0 ? -errno : 0;
}

static void tap_destroy(struct net_backend *b)
{
	if (b->fd >= 0)
		close(b->fd);
	free(b);
}

static const struct net_backend_ops tap_ops = {
    .send = tap_send,
    .recv = tap_recv,
    .set_offload = tap_set_offload,
    .destroy = tap_destroy,
};

/* What the tap accepts, as device features offered. */
static uint64_t probe_offloads(int fd)
{
	uint64_t f = 0;

	if (ioctl(fd, TUNSETOFFLOAD, (unsigned long)TUN_F_CSUM) == 0)
		f |= VIRTIO_NET_F_CSUM | VIRTIO_NET_F_GUEST_CSUM;
	if (f && ioctl(fd, TUNSETOFFLOAD, (unsigned long)(TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6)) == 0)
		f |=
		    VIRTIO_NET_F_HOST_TSO4 | VIRTIO_NET_F_HOST_TSO6 | VIRTIO_NET_F_GUEST_TSO4 | VIRTIO_NET_F_GUEST_TSO6;
	return f;
}

int net_tap_open(const char *name, struct net_backend **out, char *err, size_t errlen)
{
	struct ifreq ifr = {.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR};
	int hdr_size = NET_HDR_SIZE;
	struct net_backend *b;
	int fd, e;

	if (strlen(name) >= sizeof(ifr.ifr_name)) {
		snprintf(err, errlen, "tap name '%s' longer than %zu bytes", name, sizeof(ifr.ifr_name) - 1);
		return -EINVAL;
	}
	fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "opening /dev/net/tun: %s", strerror(e));
		return -e;
	}
	strcpy(ifr.ifr_name, name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		e = errno;
		snprintf(err, errlen, "TUNSETIFF %s (IFF_TAP|IFF_NO_PI|IFF_VNET_HDR): %s%s", name, strerror(e),
			 e == EBUSY    ? " (in use by another process, or not a tap)"
			 : e == EINVAL ? " (a multi-queue tap? brisk opens one queue, as Firecracker)"
				       : "");
		goto fail;
	}
	/* A name with a '%d' pattern makes the kernel pick another: the device would not be the one named. */
	if (strcmp(ifr.ifr_name, name) != 0) {
		e = EINVAL;
		snprintf(err, errlen, "TUNSETIFF %s: the kernel named the interface %s; give its real name", name,
			 ifr.ifr_name);
		goto fail;
	}
	if (ioctl(fd, TUNSETVNETHDRSZ, &hdr_size) < 0) {
		e = errno;
		snprintf(err, errlen, "TUNSETVNETHDRSZ %d on %s: %s", hdr_size, name, strerror(e));
		goto fail;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		e = ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	*b = (struct net_backend){.ops = &tap_ops, .fd = fd, .features = probe_offloads(fd)};
	snprintf(b->name, sizeof(b->name), "tap %s", name);
	if (ioctl(fd, TUNSETOFFLOAD, 0ul) < 0 && b->features) { /* nothing offloaded until the driver says */
		e = errno;
		snprintf(err, errlen, "TUNSETOFFLOAD 0 on %s: %s", name, strerror(e));
		free(b);
		goto fail;
	}
	*out = b;
	return 0;
fail:
	close(fd);
	return -e;
}

int net_tap_probe(const char *name, char *err, size_t errlen)
{
	struct net_backend *b;
	int ret = net_tap_open(name, &b, err, errlen);

	if (!ret)
		b->ops->destroy(b);
	return ret;
}
