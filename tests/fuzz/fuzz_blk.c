/* fuzz_blk.c - libFuzzer harness: the virtio-blk request parser on hostile headers and chains (blk_input.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blk_input.h"
#include "brisk/log.h"
#include "brisk/virtio.h"
#include "brisk/virtio_blk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct blk_req req;

/* The segment holding [p, p + len), searched among seg[from .. to); -1 if none holds all of it. */
static int holder(const struct virtq_chain *c, unsigned from, unsigned to, const uint8_t *p, uint64_t len)
{
	for (unsigned i = from; i < to; i++) {
		const uint8_t *s = c->seg[i].ptr;

		if (p >= s && p <= s + c->seg[i].len && len <= (uint64_t)(s + c->seg[i].len - p))
			return (int)i;
	}
	return -1;
}

/* Every data byte the parser hands out lies in a segment of the right direction, and is touched. */
static void check_iov(const struct virtq_chain *c, bool device_writes)
{
	unsigned from = device_writes ? c->nr_out : 0, to = device_writes ? c->nr_out + c->nr_in : c->nr_out;
	uint64_t total = 0;
	uint8_t sum = 0;

	if (req.niov > BLK_CHAIN_SEGS)
		abort();
	for (unsigned i = 0; i < req.niov; i++) {
		uint8_t *p = req.iov[i].iov_base;

		if (req.iov[i].iov_len == 0 || holder(c, from, to, p, req.iov[i].iov_len) < 0)
			abort();
		if (device_writes && p <= req.status && req.status < p + req.iov[i].iov_len)
			abort(); /* data never overlaps the status byte */
		for (size_t j = 0; j < req.iov[i].iov_len; j++) {
			if (device_writes)
				p[j] = 0xa5;
			else
				sum = (uint8_t)(sum ^ p[j]);
		}
		total += req.iov[i].iov_len;
	}
	__asm__ __volatile__("" : : "r"(sum)); /* the reads count */
	if (total != req.len)
		abort();
}

static void check(const struct blk_limits *l, const struct virtq_chain *c, enum blk_parse_result res)
{
	if (res == BLK_REQ_BAD_CHAIN) {
		if (c->in_bytes || !req.why)
			abort();
		return;
	}
	if (holder(c, c->nr_out, c->nr_out + c->nr_in, req.status, 1) < 0 || req.used != c->in_bytes)
		abort();
	*req.status = 0; /* writable */
	if (res == BLK_REQ_DONE) {
		if (req.result != VIRTIO_BLK_S_IOERR && req.result != VIRTIO_BLK_S_UNSUPP)
			abort();
		return;
	}
	switch (req.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		if (req.len % 512 || req.sector > l->capacity || req.len / 512 > l->capacity - req.sector ||
		    (l->ro && req.type == VIRTIO_BLK_T_OUT))
			abort();
		check_iov(c, req.type == VIRTIO_BLK_T_IN);
		break;
	case VIRTIO_BLK_T_GET_ID:
		if (req.len > VIRTIO_BLK_ID_BYTES)
			abort();
		check_iov(c, true);
		break;
	case VIRTIO_BLK_T_FLUSH:
		if (!(l->features & (1ull << VIRTIO_BLK_F_FLUSH)))
			abort();
		break;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		if (l->ro || req.flags > VIRTIO_BLK_DWZ_F_UNMAP || req.sector > l->capacity ||
		    req.nr_sectors > l->capacity - req.sector)
			abort();
		break;
	default:
		abort(); /* an unknown type is never handed to the I/O engine */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t hdr[BF_HDR] = {0};
	struct virtq_seg segs[2 * BF_MAX_SIDE];
	struct virtq_chain c = {.seg = segs};
	struct blk_limits l = {0};
	const uint8_t *p;
	size_t n;
	unsigned total;

	log_set_level(LOG_ERROR);
	memcpy(hdr, data, size < BF_HDR ? size : BF_HDR);
	p = data + (size < BF_HDR ? size : BF_HDR);
	n = size < BF_HDR ? 0 : size - BF_HDR;
	l.ro = hdr[0] & BF_RO;
	l.features = (hdr[0] & BF_FLUSH ? 1ull << VIRTIO_BLK_F_FLUSH : 0) |
		     (hdr[0] & BF_DISCARD ? 1ull << VIRTIO_BLK_F_DISCARD : 0) |
		     (hdr[0] & BF_WRITE_ZEROS ? 1ull << VIRTIO_BLK_F_WRITE_ZEROES : 0);
	memcpy(&l.capacity, hdr + 1, 8);
	c.nr_out = (hdr[9] & 0xf) % (BF_MAX_SIDE + 1);
	c.nr_in = (hdr[9] >> 4) % (BF_MAX_SIDE + 1);
	total = c.nr_out + c.nr_in;
	for (unsigned i = 0; i < total; i++) {
		uint16_t len = 0;

		if (n >= 2) {
			memcpy(&len, p, 2);
			p += 2;
			n -= 2;
		}
		segs[i].len = len & BF_LEN_MASK;
		segs[i].ptr = malloc(segs[i].len ? segs[i].len : 1);
		if (i < c.nr_out) {
			size_t take = n < segs[i].len ? n : segs[i].len;

			memset(segs[i].ptr, 0, segs[i].len);
			memcpy(segs[i].ptr, p, take);
			p += take;
			n -= take;
			c.out_bytes += segs[i].len;
		} else {
			c.in_bytes += segs[i].len;
		}
	}
	check(&l, &c, blk_parse(&l, &c, &req));
	for (unsigned i = 0; i < total; i++)
		free(segs[i].ptr);
	return 0;
}
