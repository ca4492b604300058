/*
 * net_frame.c - the virtio-net transmit parser (virtio 1.2 section 5.1.6.2): header and frame out of a
 * checked chain, every guest-controlled length and offset validated (docs/security.md case 10). No I/O, no state:
 * the unit tests and tests/fuzz/fuzz_net.c drive it directly.
 */
#include <string.h>

#include "brisk/virtio_net.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "virtio-net header fields are read without byte swapping");

uint32_t net_max_frame(uint64_t features, uint32_t mtu)
{
	if (features & (VIRTIO_NET_F_HOST_TSO4 | VIRTIO_NET_F_HOST_TSO6))
		return NET_GSO_FRAME_MAX;
	return mtu + NET_L2_OVERHEAD;
}

static enum net_tx_result drop(struct net_tx *t, const char *why)
{
	t->why = why;
	return NET_TX_DROP;
}

/* The header's offload requests against what was negotiated (5.1.6.2.1: the driver MUST NOT ask for more). */
static const char *check_hdr(const struct net_limits *l, const struct virtio_net_hdr *h, uint32_t len)
{
	uint8_t gso = h->gso_type & (uint8_t)~VIRTIO_NET_HDR_GSO_ECN;

	if (h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) {
		if (!(l->features & VIRTIO_NET_F_CSUM))
			return "NEEDS_CSUM without VIRTIO_NET_F_CSUM";
		if ((uint32_t)h->csum_start + h->csum_offset + 2u > len)
			return "checksum offset past the end of the frame";
	}
	if (h->gso_type == VIRTIO_NET_HDR_GSO_NONE)
		return NULL;
	if (gso == VIRTIO_NET_HDR_GSO_TCPV4   ? !(l->features & VIRTIO_NET_F_HOST_TSO4)
	    : gso == VIRTIO_NET_HDR_GSO_TCPV6 ? !(l->features & VIRTIO_NET_F_HOST_TSO6)
					      : true)
		return "a segmentation offload that was not negotiated";
	if (h->gso_type & VIRTIO_NET_HDR_GSO_ECN)
		return "GSO_ECN (VIRTIO_NET_F_HOST_ECN is not offered)";
	if (h->gso_size == 0 || !(h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM))
		return "a segmentation request without gso_size or NEEDS_CSUM";
	return NULL;
}

enum net_tx_result net_tx_parse(const struct net_limits *l, const struct virtq_chain *c, struct net_tx *t)
{
	struct virtq_cursor r;
	const char *why;

	t->why = NULL;
	t->niov = 0;
	t->len = 0;
	if (c->nr_in)
		return drop(t, "a writable buffer on the transmit queue");
	if (c->nr_out > NET_MAX_SEGS)
		return drop(t, "more buffers than the device takes");
	if (c->out_bytes < NET_HDR_SIZE)
		return drop(t, "a transmit chain shorter than the 12-byte header");
	if (c->out_bytes == NET_HDR_SIZE)
		return drop(t, "a frame of length 0");
	if (c->out_bytes - NET_HDR_SIZE > l->max_frame)
		return drop(t, "a frame above the negotiated maximum");
	t->len = (uint32_t)(c->out_bytes - NET_HDR_SIZE);
	if (t->len < NET_ETH_MIN)
		return drop(t, "a frame shorter than an Ethernet header");
	virtq_reader(&r, c);
	virtq_cursor_read(&r, &t->hdr, NET_HDR_SIZE); /* once: the guest may rewrite it behind us */
	if ((why = check_hdr(l, &t->hdr, t->len)))
		return drop(t, why);
	t->niov = virtq_cursor_iov(&r, t->len, t->iov, NET_MAX_SEGS, NULL); /* nr_out <= NET_MAX_SEGS: all of it */
	return NET_TX_OK;
}
