/* virtq_input.h - the input format of fuzz_virtq, shared by the harness and its seed generator (gen_virtq_seeds.c). */
#ifndef BRISK_TESTS_VIRTQ_INPUT_H
#define BRISK_TESTS_VIRTQ_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "brisk/layout.h"

/*
 * An input is, in order (missing bytes read as zero):
 *   6 bytes     header: cfg, max_segs, start (le16), later (le16)
 *   16 * size   the descriptor table, laid at VF_DESC
 *   6 + 2*size  the driver area (flags, idx, ring[size], used_event), at VF_AVAIL;
 *               idx counts from `start`: the harness writes start + idx
 *   the rest    indirect tables and buffers, laid at VF_REST up to VF_LAID
 * The queue begins as if it had already used `start` chains (last_avail =
 * used_idx = start), so the 16-bit indices wrap. With VF_LATER, after the
 * first pop the driver moves avail.idx to start + later (more work, or a jump).
 */
/*
 * Guest RAM as brisk maps it for --memory 4G: [0, 3 GiB) and [4 GiB, 5 GiB)
 * around the MMIO hole (MAP_NORESERVE, so untouched pages cost nothing), so
 * that buffers can cross the hole, point at MMIO, or add up past 4 GiB.
 * The input is laid into the first VF_LAID bytes.
 */
#define VF_RAM	   (LAYOUT_MMIO_HOLE + (1ULL << 30))
#define VF_RAM_END (LAYOUT_RAM_ABOVE_4G + (1ULL << 30)) /* first guest-physical byte past RAM */
#define VF_LAID	   0x40000u
#define VF_DESC	   0x0u
#define VF_AVAIL   0x1000u
#define VF_USED	   0x2000u
#define VF_REST	   0x3000u
#define VF_HDR	   6u

#define VF_SIZE_MASK 0x0fu /* log2 of the queue size, modulo 9: 1..256 */
#define VF_EVENT_IDX 0x10u
#define VF_INDIRECT  0x20u
#define VF_TOGGLE    0x40u /* notifications off and on between pops */
#define VF_LATER     0x80u

#define VF_MAX_SEGS 64u /* the device's segment array; max_segs is the header byte modulo 65 */

static inline unsigned vf_size(uint8_t cfg)
{
	return 1u << ((cfg & VF_SIZE_MASK) % 9u);
}

static inline size_t vf_desc_len(unsigned size)
{
	return 16u * size;
}

static inline size_t vf_avail_len(unsigned size)
{
	return 6u + 2u * size;
}

#endif
