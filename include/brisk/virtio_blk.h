/*
 * virtio_blk.h - the virtio block device's request format (virtio 1.2 section 5.2) and its request parser,
 * exposed for the unit tests and the fuzzer; the device itself is src/virtio/blk/blk.c (constructor in devices.h).
 */
#ifndef BRISK_VIRTIO_BLK_H
#define BRISK_VIRTIO_BLK_H

#include <stdbool.h>
#include <stdint.h>

#include "brisk/virtq.h"

/* Feature bits (section 5.2.3). */
#define VIRTIO_BLK_F_SIZE_MAX	  1
#define VIRTIO_BLK_F_SEG_MAX	  2
#define VIRTIO_BLK_F_RO		  5
#define VIRTIO_BLK_F_BLK_SIZE	  6
#define VIRTIO_BLK_F_FLUSH	  9
#define VIRTIO_BLK_F_DISCARD	  13
#define VIRTIO_BLK_F_WRITE_ZEROES 14

/* Request types and status values (section 5.2.6). */
#define VIRTIO_BLK_T_IN		  0
#define VIRTIO_BLK_T_OUT	  1
#define VIRTIO_BLK_T_FLUSH	  4
#define VIRTIO_BLK_T_GET_ID	  8
#define VIRTIO_BLK_T_DISCARD	  11
#define VIRTIO_BLK_T_WRITE_ZEROES 13
#define VIRTIO_BLK_S_OK		  0
#define VIRTIO_BLK_S_IOERR	  1
#define VIRTIO_BLK_S_UNSUPP	  2

#define VIRTIO_BLK_ID_BYTES    20 /* GET_ID answer: NUL-terminated only when shorter */
#define VIRTIO_BLK_SECTOR      512u
#define VIRTIO_BLK_DWZ_F_UNMAP 1u  /* struct virtio_blk_discard_write_zeroes flags */
#define VIRTIO_BLK_HDR_SIZE    16u /* le32 type, le32 reserved, le64 sector */
#define VIRTIO_BLK_DWZ_SIZE    16u /* le64 sector, le32 num_sectors, le32 flags */

/* struct virtio_blk_config (section 5.2.4): offsets of the fields brisk fills. */
#define VIRTIO_BLK_CFG_CAPACITY		   0
#define VIRTIO_BLK_CFG_SIZE_MAX		   8
#define VIRTIO_BLK_CFG_SEG_MAX		   12
#define VIRTIO_BLK_CFG_BLK_SIZE		   20
#define VIRTIO_BLK_CFG_MAX_DISCARD_SECTORS 36
#define VIRTIO_BLK_CFG_MAX_DISCARD_SEG	   40
#define VIRTIO_BLK_CFG_DISCARD_ALIGN	   44
#define VIRTIO_BLK_CFG_MAX_WZ_SECTORS	   48
#define VIRTIO_BLK_CFG_MAX_WZ_SEG	   52
#define VIRTIO_BLK_CFG_WZ_MAY_UNMAP	   56
#define VIRTIO_BLK_CFG_SIZE		   60 /* through unused1[3]: no secure erase, no zoned fields */

/* The device's limits (docs/devices.md, "virtio-blk"). */
#define BLK_QUEUE_SIZE 256u				/* QueueNumMax, and the most requests in flight */
#define BLK_SEG_MAX    (BLK_QUEUE_SIZE - 2u)		/* seg_max: data segments per request, as QEMU's */
#define BLK_CHAIN_SEGS (BLK_SEG_MAX + 2u)		/* what a chain may hold: header, data, status */
#define BLK_SIZE_MAX   (1u << 20)			/* size_max: bytes of one data segment (advertised) */
#define BLK_DWZ_MAX    (UINT32_MAX / VIRTIO_BLK_SECTOR) /* max_discard/write_zeroes_sectors */

/* What the parser needs to know about the disk and the negotiation. */
struct blk_limits {
	uint64_t capacity; /* in 512-byte sectors */
	bool ro;	   /* VIRTIO_BLK_F_RO offered: every write is IOERR (5.2.6.2) */
	uint64_t features; /* negotiated device feature bits (FLUSH, DISCARD, WRITE_ZEROES decide) */
};

/* Whether feature `bit` was negotiated. */
static inline bool blk_negotiated(const struct blk_limits *l, unsigned bit)
{
	return l->features & (1ull << bit);
}

/* One parsed request: everything the I/O engine needs, copied out of or pointing into guest RAM. */
struct blk_req {
	uint32_t type;
	uint64_t sector;
	uint64_t len;		    /* data bytes (IN, OUT, GET_ID) */
	uint8_t *status;	    /* the status byte: the chain's last writable byte (guest RAM) */
	uint32_t used;		    /* used-ring length when the status is written: every writable byte (as QEMU) */
	uint8_t result;		    /* VIRTIO_BLK_S_* when blk_parse returned BLK_REQ_DONE */
	const char *why;	    /* BLK_REQ_BAD_CHAIN / a malformed BLK_REQ_DONE: what was wrong; NULL otherwise */
	uint32_t nr_sectors, flags; /* DISCARD, WRITE_ZEROES: the one segment */
	unsigned nseg;
	struct virtq_seg seg[BLK_CHAIN_SEGS]; /* the data, in guest RAM (a virtq_cursor walks it) */
};

enum blk_parse_result {
	BLK_REQ_BAD_CHAIN, /* no writable status byte: complete the chain with 0 bytes and count it (docs/security.md
			      case 8) */
	BLK_REQ_DONE,	   /* decided without I/O: write r->result to *r->status, used length r->used */
	BLK_REQ_IO,	   /* a valid request of r->type for the device to carry out */
};

/*
 * Parses the chain `c` (already walked and checked by virtq_pop) as a
 * virtio-blk request (section 5.2.6), independent of how the driver framed
 * it (2.6.4): the 16-byte header is copied out of guest memory before any
 * field is used, the status is the last writable byte, the data is what
 * lies between. Validation (docs/security.md case 8, 9): a header shorter than 16
 * bytes, a data length not a multiple of 512, a sector range past the
 * capacity (overflow-safe) or a write to a read-only disk -> IOERR; an
 * unknown or unnegotiated type -> UNSUPP; DISCARD / WRITE_ZEROES with other
 * than exactly one 16-byte segment, an unknown flag, UNMAP on a discard or a
 * range past the end -> IOERR or UNSUPP as section 5.2.6.2 says. Never reads
 * outside the chain's segments.
 */
enum blk_parse_result blk_parse(const struct blk_limits *l, const struct virtq_chain *c, struct blk_req *r);

#endif
