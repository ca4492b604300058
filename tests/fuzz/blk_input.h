/* blk_input.h - the input format of fuzz_blk, shared by the harness and its seed generator (gen_blk_seeds.c). */
#ifndef BRISK_TESTS_BLK_INPUT_H
#define BRISK_TESTS_BLK_INPUT_H

/*
 * An input is, in order (missing bytes read as zero):
 *   1 byte      BF_* flags: read-only disk, features negotiated
 *   8 bytes     capacity in sectors (le64): any value, 0 and 2^64-1 included
 *   1 byte      segments: readable ones in the low nibble, writable in the high (each modulo BF_MAX_SIDE + 1)
 *   2 * n       each segment's length (le16, masked with BF_LEN_MASK), readable ones first
 *   the rest    the readable segments' bytes, one after the other (header, data, discard segments)
 * Each segment is its own heap block of exactly its length, so a byte read or written outside one is an
 * AddressSanitizer report. virtq_pop never hands out empty segments; the harness does, to be harsher.
 */
#define BF_RO	       0x01u
#define BF_FLUSH       0x02u
#define BF_DISCARD     0x04u
#define BF_WRITE_ZEROS 0x08u
#define BF_MAX_SIDE    8u
#define BF_LEN_MASK    0x1fffu
#define BF_HDR	       10u /* flags, capacity, segments */

#endif
