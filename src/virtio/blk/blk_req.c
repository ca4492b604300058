/*
 * blk_req.c - the virtio block request parser (virtio 1.2 section 5.2.6; include/brisk/virtio_blk.h): one
 * descriptor chain into one request, the header copied out of guest memory once, every range checked
 * overflow-safe (docs/security.md cases 8 and 9). Pure: no file, no thread, no transport; the
 * device (blk.c), the unit tests and the fuzzer call it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "brisk/virtio_blk.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "virtio-blk fields are read without byte swapping");

struct blk_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};
_Static_assert(sizeof(struct blk_hdr) == VIRTIO_BLK_HDR_SIZE, "virtio_blk_req header is 16 bytes");

struct blk_dwz {
	uint64_t sector;
	uint32_t num_sectors;
	uint32_t flags;
};
_Static_assert(sizeof(struct blk_dwz) == VIRTIO_BLK_DWZ_SIZE, "virtio_blk_discard_write_zeroes is 16 bytes");

static enum blk_parse_result done(struct blk_req *r, uint8_t status, const char *why)
{
	r->result = status;
	r->why = why;
	return BLK_REQ_DONE;
}

/* [sector, sector + n) within the capacity, without overflow. */
static bool in_range(const struct blk_limits *l, uint64_t sector, uint64_t n)
{
	return sector <= l->capacity && n <= l->capacity - sector;
}

/* IN and OUT: the data between header (`r`, the reader, is past it) and status, whole sectors inside the disk. */
static enum blk_parse_result parse_rw(const struct blk_limits *l, const struct virtq_chain *c,
				      const struct virtq_cursor *rd, struct blk_req *r)
{
	bool out = r->type == VIRTIO_BLK_T_OUT;
	struct virtq_cursor wr;

	if (out && l->ro)
		return done(r, VIRTIO_BLK_S_IOERR, NULL); /* 5.2.6.2: and no data written */
	r->len = out ? c->out_bytes - VIRTIO_BLK_HDR_SIZE : c->in_bytes - 1;
	if (r->len % VIRTIO_BLK_SECTOR)
		return done(r, VIRTIO_BLK_S_IOERR, "data length not a multiple of 512");
	if (!in_range(l, r->sector, r->len / VIRTIO_BLK_SECTOR))
		return done(r, VIRTIO_BLK_S_IOERR, NULL); /* past the end: the driver's mistake, not malformed */
	virtq_writer(&wr, c);
	r->nseg = virtq_cursor_segs(out ? rd : &wr, r->len, r->seg, BLK_CHAIN_SEGS, NULL);
	return BLK_REQ_IO;
}

/* DISCARD and WRITE_ZEROES (5.2.6): one struct virtio_blk_discard_write_zeroes after the header (`rd` is there). */
static enum blk_parse_result parse_dwz(const struct blk_limits *l, const struct virtq_chain *c, struct virtq_cursor *rd,
				       struct blk_req *r)
{
	bool discard = r->type == VIRTIO_BLK_T_DISCARD;
	struct blk_dwz seg;

	if (!blk_negotiated(l, discard ? VIRTIO_BLK_F_DISCARD : VIRTIO_BLK_F_WRITE_ZEROES))
		return done(r, VIRTIO_BLK_S_UNSUPP, NULL);
	if (l->ro)
		return done(r, VIRTIO_BLK_S_IOERR, NULL);
	if (c->out_bytes - VIRTIO_BLK_HDR_SIZE != VIRTIO_BLK_DWZ_SIZE)
		return done(r, VIRTIO_BLK_S_IOERR, "discard/write-zeroes data is not one 16-byte segment (max_seg 1)");
	if (virtq_cursor_read(rd, &seg, sizeof(seg)) != sizeof(seg))
		return done(r, VIRTIO_BLK_S_IOERR, "discard/write-zeroes segment unreadable");
	r->sector = seg.sector;
	r->nr_sectors = seg.num_sectors;
	r->flags = seg.flags;
	/* 5.2.6.2: unknown flags, and UNMAP on a discard, are UNSUPP. */
	if ((seg.flags & ~VIRTIO_BLK_DWZ_F_UNMAP) || (discard && (seg.flags & VIRTIO_BLK_DWZ_F_UNMAP)))
		return done(r, VIRTIO_BLK_S_UNSUPP, NULL);
	if (seg.num_sectors > BLK_DWZ_MAX || !in_range(l, seg.sector, seg.num_sectors))
		return done(r, VIRTIO_BLK_S_IOERR, NULL);
	return BLK_REQ_IO;
}

/* The status byte: the last byte of the last non-empty writable segment. */
static uint8_t *status_byte(const struct virtq_chain *c)
{
	for (unsigned i = c->nr_out + c->nr_in; i > c->nr_out; i--) {
		const struct virtq_seg *s = &c->seg[i - 1];

		if (s->len)
			return s->ptr + s->len - 1;
	}
	return NULL;
}

enum blk_parse_result blk_parse(const struct blk_limits *l, const struct virtq_chain *c, struct blk_req *r)
{
	struct virtq_cursor rd, wr;
	struct blk_hdr hdr;

	r->why = NULL;
	r->len = 0;
	r->nseg = 0;
	r->status = c->in_bytes ? status_byte(c) : NULL;
	if (!r->status) {
		r->why = "no writable status byte";
		return BLK_REQ_BAD_CHAIN;
	}
	r->used = (uint32_t)c->in_bytes; /* virtq_pop keeps a chain below 4 GiB */
	virtq_reader(&rd, c);
	if (virtq_cursor_read(&rd, &hdr, sizeof(hdr)) != sizeof(hdr))
		return done(r, VIRTIO_BLK_S_IOERR, "request header shorter than 16 bytes");
	r->type = hdr.type;
	r->sector = hdr.sector;
	switch (hdr.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		return parse_rw(l, c, &rd, r);
	case VIRTIO_BLK_T_FLUSH:
		return blk_negotiated(l, VIRTIO_BLK_F_FLUSH) ? BLK_REQ_IO : done(r, VIRTIO_BLK_S_UNSUPP, NULL);
	case VIRTIO_BLK_T_GET_ID:
		r->len = c->in_bytes - 1 < VIRTIO_BLK_ID_BYTES ? c->in_bytes - 1 : VIRTIO_BLK_ID_BYTES;
		virtq_writer(&wr, c);
		r->nseg = virtq_cursor_segs(&wr, r->len, r->seg, BLK_CHAIN_SEGS, NULL);
		return BLK_REQ_IO;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		return parse_dwz(l, c, &rd, r);
	default:
		return done(r, VIRTIO_BLK_S_UNSUPP, NULL);
	}
}
