/* vsock_input.h - the input format of fuzz_vsock, shared by the harness and its seed generator (gen_vsock_seeds.c). */
#ifndef BRISK_TESTS_VSOCK_INPUT_H
#define BRISK_TESTS_VSOCK_INPUT_H

/*
 * An input is, in order (missing bytes read as zero):
 *   4 bytes     the guest's CID (le32)
 *   1 byte      segments: readable ones in the low nibble, writable in the high (each modulo VF_MAX_SIDE + 1)
 *   2 * n       each segment's length (le16, masked with VF_LEN_MASK), readable ones first
 *   the rest    the readable segments' bytes, one after the other (the 44-byte header, then data); what is
 *               left after them is also fed to the CONNECT-line parser and, 12 bytes of it, to the credit
 *               arithmetic
 * Each segment is its own heap block of exactly its length, so a byte read outside one is an
 * AddressSanitizer report.
 */
#define VF_MAX_SIDE 8u
#define VF_LEN_MASK 0x1ffffu /* lengths above 64 KiB reach the len checks (the le16 is shifted left once) */
#define VF_HDR	    5u	     /* cid, segments */

#endif
