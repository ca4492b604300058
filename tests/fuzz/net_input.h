/* net_input.h - the input format of fuzz_net, shared by the harness and its seed generator (gen_net_seeds.c). */
#ifndef BRISK_TESTS_NET_INPUT_H
#define BRISK_TESTS_NET_INPUT_H

/*
 * An input is, in order (missing bytes read as zero):
 *   1 byte      NF_* flags: the features negotiated (they decide the maximum frame and the offloads allowed)
 *   1 byte      segments: readable ones in the low nibble, writable in the high (each modulo NF_MAX_SIDE + 1)
 *   2 * n       each segment's length (le16, the whole range: a TSO frame is up to 65553 bytes), readable first
 *   the rest    the readable segments' bytes, one after the other (header, then frame)
 * Each segment is its own heap block of exactly its length, so a byte read outside one is an
 * AddressSanitizer report. virtq_pop never hands out empty segments; the harness does, to be harsher.
 */
#define NF_CSUM	     0x01u
#define NF_HOST_TSO4 0x02u
#define NF_HOST_TSO6 0x04u
#define NF_MAX_SIDE  8u
#define NF_HDR	     2u /* flags, segments */

#endif
