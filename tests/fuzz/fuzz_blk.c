/* fuzz_blk.c - libFuzzer harness: the virtio-blk request parser on hostile headers and chains (blk_input.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blk_input.h"
#include "brisk/log.h"
#include "brisk/virtio.h"
#include "brisk/virtio_blk.h"
#include "chain_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct blk_req req;

/* Every data byte the parser hands out lies in a segment of the right direction, and is touched. */
static void check_iov(const struct virtq_chain *c, bool device_writes)
{
	unsigned from = device_writes ? c->nr_out : 0, to = device_writes ? c->nr_out + c->nr_in : c->nr_out;
	uint64_t total = 0;
	uint8_t sum = 0;

	if (req.nseg > BLK_CHAIN_SEGS)
		abort();
	for (unsigned i = 0; i < req.nseg; i++) {
		uint8_t *p = req.seg[i].ptr;

		if (req.seg[i].len == 0 || fuzz_seg_holder(c, from, to, p, req.seg[i].len) < 0)
			abort();
		if (device_writes && p <= req.status && req.status < p + req.seg[i].len)
			abort(); /* data never overlaps the status byte */
		for (size_t j = 0; j < req.seg[i].len; j++) {
			if (device_writes)
				p[j] = 0xa5;
			else
				sum = (uint8_t)(sum ^ p[j]);
		}
		total += req.seg[i].len;
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
	if (fuzz_seg_holder(c, c->nr_out, c->nr_out + c->nr_in, req.status, 1) < 0 || req.used != c->in_bytes)
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
	struct fuzz_input in = fuzz_input_split(data, size, hdr, BF_HDR);

	log_set_level(LOG_ERROR);
	l.ro = hdr[0] & BF_RO;
	l.features = (hdr[0] & BF_FLUSH ? 1ull << VIRTIO_BLK_F_FLUSH : 0) |
		     (hdr[0] & BF_DISCARD ? 1ull << VIRTIO_BLK_F_DISCARD : 0) |
		     (hdr[0] & BF_WRITE_ZEROS ? 1ull << VIRTIO_BLK_F_WRITE_ZEROES : 0);
	memcpy(&l.capacity, hdr + 1, 8);
	fuzz_chain_read(&c, hdr[9], BF_MAX_SIDE, 0, BF_LEN_MASK, &in);
	check(&l, &c, blk_parse(&l, &c, &req));
	fuzz_chain_free(&c);
	return 0;
}
