/*
 * chain_input.h - the part of the input format that fuzz_blk, fuzz_net and fuzz_vsock share (see blk_input.h,
 * net_input.h, vsock_input.h): after a fixed header, a segment-count byte, then each segment's le16 length, then
 * the readable segments' bytes; read here into a struct virtq_chain of hostile shape. Also the check that a byte
 * range a parser hands back lies inside one segment.
 */
#ifndef BRISK_TESTS_CHAIN_INPUT_H
#define BRISK_TESTS_CHAIN_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/virtq.h"

/* What is left of the input to read. */
struct fuzz_input {
	const uint8_t *p;
	size_t n;
};

/* hdr[0 .. hdr_len) := the input's first bytes (those it lacks stay as the caller zeroed them); returns the rest. */
static inline struct fuzz_input fuzz_input_split(const uint8_t *data, size_t size, uint8_t *hdr, size_t hdr_len)
{
	size_t h = size < hdr_len ? size : hdr_len;

	memcpy(hdr, data, h);
	return (struct fuzz_input){.p = data + h, .n = size - h};
}

/*
 * c->seg[0 .. nr_out + nr_in) from `counts` (readable segments in the low nibble, writable in the high, each modulo
 * max_side + 1; c->seg must hold 2 * max_side) and the input: one le16 length per segment (0 once the input runs
 * out), widened to (len << shift) & mask; then the readable segments' bytes, in order. Each segment is its own
 * zeroed heap block of exactly its length (one byte when empty), so a byte touched outside one is an
 * AddressSanitizer report. Sets nr_out, nr_in, out_bytes and in_bytes; free with fuzz_chain_free.
 */
static inline void fuzz_chain_read(struct virtq_chain *c, uint8_t counts, unsigned max_side, unsigned shift,
				   uint32_t mask, struct fuzz_input *in)
{
	c->nr_out = (counts & 0xf) % (max_side + 1);
	c->nr_in = (counts >> 4) % (max_side + 1);
	c->out_bytes = c->in_bytes = 0;
	for (unsigned i = 0; i < c->nr_out + c->nr_in; i++) {
		struct virtq_seg *s = &c->seg[i];
		uint16_t len = 0;

		if (in->n >= 2) {
			memcpy(&len, in->p, 2);
			in->p += 2;
			in->n -= 2;
		}
		s->len = ((uint32_t)len << shift) & mask;
		s->ptr = malloc(s->len ? s->len : 1);
		memset(s->ptr, 0, s->len);
		if (i < c->nr_out) {
			size_t take = in->n < s->len ? in->n : s->len;

			memcpy(s->ptr, in->p, take);
			in->p += take;
			in->n -= take;
			c->out_bytes += s->len;
		} else {
			c->in_bytes += s->len;
		}
	}
}

static inline void fuzz_chain_free(struct virtq_chain *c)
{
	for (unsigned i = 0; i < c->nr_out + c->nr_in; i++)
		free(c->seg[i].ptr);
}

/* The segment among c->seg[from .. to) holding all of [p, p + len), or -1. */
static inline int fuzz_seg_holder(const struct virtq_chain *c, unsigned from, unsigned to, const uint8_t *p,
				  uint64_t len)
{
	for (unsigned i = from; i < to; i++) {
		const uint8_t *s = c->seg[i].ptr;

		if (p >= s && p <= s + c->seg[i].len && len <= (uint64_t)(s + c->seg[i].len - p))
			return (int)i;
	}
	return -1;
}

#endif
