/* fuzz_net.c - libFuzzer harness: the virtio-net transmit parser on hostile headers and chains (net_input.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/log.h"
#include "brisk/virtio_net.h"
#include "chain_input.h"
#include "net_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct net_tx tx;

/* What an accepted frame must be: within the limits, its bytes all in readable segments, after the header. */
static void check_ok(const struct net_limits *l, const struct virtq_chain *c)
{
	uint64_t total = 0;
	uint8_t sum = 0, first[NET_HDR_SIZE];

	if (c->nr_in || tx.len < NET_ETH_MIN || tx.len > l->max_frame || tx.len != c->out_bytes - NET_HDR_SIZE ||
	    tx.niov > NET_MAX_SEGS)
		abort();
	virtq_copy_from(c, 0, first, NET_HDR_SIZE);
	if (memcmp(first, &tx.hdr, NET_HDR_SIZE))
		abort();
	if ((tx.hdr.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) &&
	    (!(l->features & VIRTIO_NET_F_CSUM) || (uint32_t)tx.hdr.csum_start + tx.hdr.csum_offset + 2 > tx.len))
		abort();
	if (tx.hdr.gso_type != VIRTIO_NET_HDR_GSO_NONE &&
	    !(l->features & (VIRTIO_NET_F_HOST_TSO4 | VIRTIO_NET_F_HOST_TSO6)))
		abort();
	for (unsigned i = 0; i < tx.niov; i++) {
		const uint8_t *p = tx.iov[i].iov_base;

		if (tx.iov[i].iov_len == 0 || fuzz_seg_holder(c, 0, c->nr_out, p, tx.iov[i].iov_len) < 0)
			abort();
		for (size_t j = 0; j < tx.iov[i].iov_len; j++)
			sum = (uint8_t)(sum ^ p[j]);
		total += tx.iov[i].iov_len;
	}
	__asm__ __volatile__("" : : "r"(sum)); /* the reads count */
	if (total != tx.len)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t hdr[NF_HDR] = {0};
	struct virtq_seg segs[2 * NF_MAX_SIDE];
	struct virtq_chain c = {.seg = segs};
	struct net_limits l = {0};
	struct fuzz_input in = fuzz_input_split(data, size, hdr, NF_HDR);

	log_set_level(LOG_ERROR);
	l.features = (hdr[0] & NF_CSUM ? VIRTIO_NET_F_CSUM : 0) | (hdr[0] & NF_HOST_TSO4 ? VIRTIO_NET_F_HOST_TSO4 : 0) |
		     (hdr[0] & NF_HOST_TSO6 ? VIRTIO_NET_F_HOST_TSO6 : 0);
	l.max_frame = net_max_frame(l.features, NET_MTU);
	fuzz_chain_read(&c, hdr[1], NF_MAX_SIDE, 0, 0xffff, &in);
	if (net_tx_parse(&l, &c, &tx) == NET_TX_OK)
		check_ok(&l, &c);
	else if (!tx.why)
		abort();
	fuzz_chain_free(&c);
	return 0;
}
