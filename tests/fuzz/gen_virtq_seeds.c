/* gen_virtq_seeds.c - writes fuzz_virtq inputs (virtq_input.h) into a corpus directory (argv[1]): good and bad rings.
 */
#include <stdio.h>
#include <string.h>

#include "seed_save.h"
#include "virtq_input.h"

#define F_NEXT	1u
#define F_WRITE 2u
#define F_IND	4u

#define REST_LEN 0x1000u /* bytes of the input laid at VF_REST: tables and buffer contents */

/* One input under construction. */
struct seed {
	uint8_t buf[VF_HDR + 16u * 256u + 6u + 2u * 256u + REST_LEN];
	unsigned size;
	uint16_t nr_avail;
};

static struct seed s;

static void begin(uint8_t cfg, uint8_t max_segs, uint16_t start, uint16_t later)
{
	memset(&s, 0, sizeof(s));
	s.buf[0] = cfg;
	s.buf[1] = max_segs;
	memcpy(s.buf + 2, &start, 2);
	memcpy(s.buf + 4, &later, 2);
	s.size = vf_size(cfg);
}

static uint8_t *avail_area(void)
{
	return s.buf + VF_HDR + vf_desc_len(s.size);
}

static uint8_t *rest(void)
{
	return avail_area() + vf_avail_len(s.size);
}

static void put_desc(uint8_t *table, unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	memcpy(table + 16u * i, &addr, 8);
	memcpy(table + 16u * i + 8, &len, 4);
	memcpy(table + 16u * i + 12, &flags, 2);
	memcpy(table + 16u * i + 14, &next, 2);
}

/* Descriptor `i` of the queue's own table. */
static void desc(unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	put_desc(s.buf + VF_HDR, i, addr, len, flags, next);
}

/* Entry `i` of an indirect table at VF_REST + off (it lies in the input's rest). */
static void ind(unsigned off, unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	put_desc(rest() + off, i, addr, len, flags, next);
}

/* Offers `head` (the idx field counts from the header's start). */
static void offer(uint16_t head)
{
	uint8_t *a = avail_area();

	memcpy(a + 4 + 2u * (s.nr_avail % s.size), &head, 2);
	s.nr_avail++;
	memcpy(a + 2, &s.nr_avail, 2);
}

static int save(const char *dir, const char *name)
{
	return seed_save(dir, name, s.buf, (size_t)(rest() - s.buf) + REST_LEN);
}

/* log2 sizes */
#define SZ8   3u
#define SZ16  4u
#define SZ256 8u
#define BUF   (VF_REST + 0x2000u) /* buffers, past the tables */

static int good_seeds(const char *dir)
{
	int bad = 0;

	begin(SZ8, 8, 0, 0); /* one readable buffer */
	desc(0, BUF, 64, 0, 0);
	offer(0);
	bad |= save(dir, "seed-simple");
	begin(SZ8, 8, 0, 0); /* a block request: header, data, status */
	desc(0, BUF, 16, F_NEXT, 1);
	desc(1, BUF + 0x200, 512, F_NEXT | F_WRITE, 2);
	desc(2, BUF + 0x1000, 1, F_WRITE, 0);
	offer(0);
	bad |= save(dir, "seed-out-in");
	begin(SZ8 | VF_INDIRECT, 16, 0, 0); /* the same through an indirect table */
	desc(3, VF_REST, 48, F_IND, 0);
	ind(0, 0, BUF, 16, F_NEXT, 1);
	ind(0, 1, BUF + 0x200, 512, F_NEXT | F_WRITE, 2);
	ind(0, 2, BUF + 0x1000, 1, F_WRITE, 0);
	offer(3);
	bad |= save(dir, "seed-indirect");
	begin(SZ16 | VF_EVENT_IDX | VF_TOGGLE, 4, 0xfffe, 0); /* event_idx, indices wrapping past 65535 */
	for (unsigned i = 0; i < 16; i++) {
		desc(i, BUF + 64u * i, 64, (uint16_t)(i & 1 ? F_WRITE : 0), 0);
		offer((uint16_t)i);
	}
	memcpy(avail_area() + 4 + 2u * s.size, &(uint16_t){3}, 2); /* used_event */
	bad |= save(dir, "seed-full-ring-wrap");
	begin(SZ8 | VF_LATER, 8, 0, 3); /* more work arrives after the first pop */
	desc(0, BUF, 8, 0, 0);
	desc(1, BUF + 8, 8, F_WRITE, 0);
	offer(0);
	offer(1);
	offer(0);
	bad |= save(dir, "seed-later");
	begin(SZ256 | VF_INDIRECT, 64, 100, 0); /* a chain of the whole queue: direct, then a table */
	for (unsigned i = 0; i < 200; i++)	/* every 8th one a buffer, the others empty: 32 segments */
		desc(i, BUF + i, i % 8 ? 0 : 1, F_NEXT, (uint16_t)(i + 1));
	desc(200, VF_REST, 16u * 56u, F_IND, 0);
	for (unsigned i = 0; i < 56; i++)
		ind(0, i, BUF + 0x100 + i, i % 8 ? 0 : 1, (uint16_t)(i < 55 ? F_NEXT | F_WRITE : F_WRITE),
		    (uint16_t)(i + 1));
	offer(0);
	bad |= save(dir, "seed-long-chain");
	return bad;
}

static int bad_seeds(const char *dir)
{
	int bad = 0;

	begin(SZ8, 8, 0, 0); /* A -> B -> A */
	desc(0, BUF, 8, F_NEXT, 1);
	desc(1, BUF, 8, F_NEXT, 0);
	offer(0);
	desc(2, BUF, 8, F_NEXT, 9); /* next out of range */
	offer(2);
	desc(3, BUF, 8, F_WRITE | F_NEXT, 4); /* readable after writable */
	desc(4, BUF, 8, 0, 0);
	offer(3);
	desc(5, VF_RAM_END - 8, 16, 0, 0); /* past the end of RAM */
	offer(5);
	bad |= save(dir, "seed-bad-chains");
	begin(SZ8 | VF_INDIRECT, 8, 0, 0); /* nested table, table length 24 */
	desc(0, VF_REST, 32, F_IND, 0);
	ind(0, 0, BUF, 8, F_NEXT, 1);
	ind(0, 1, VF_REST + 0x100, 16, F_IND, 0);
	offer(0);
	desc(1, VF_REST, 24, F_IND, 0);
	offer(1);
	bad |= save(dir, "seed-bad-indirect");
	begin(SZ8, 8, 0, 0); /* buffers into and across the hole, at MMIO, over 4 GiB in all */
	desc(0, LAYOUT_MMIO_HOLE - 8, 16, 0, 0);
	offer(0);
	desc(1, LAYOUT_VIRTIO_MMIO, 0x100, F_WRITE, 0);
	offer(1);
	desc(2, 0, 0xc0000000u, F_NEXT, 3);
	desc(3, 0, 0xc0000000u, F_WRITE, 0);
	offer(2);
	desc(4, LAYOUT_MMIO_HOLE - 16, 16, F_NEXT, 5); /* both sides of the hole: fine */
	desc(5, LAYOUT_RAM_ABOVE_4G, 0x1000, F_WRITE, 0);
	offer(4);
	bad |= save(dir, "seed-hole-total");
	begin(SZ8 | VF_LATER, 8, 0, 20); /* avail.idx jumps by more than the queue size */
	desc(0, BUF, 8, 0, 0);
	offer(0);
	bad |= save(dir, "seed-jump");
	return bad;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	return good_seeds(argv[1]) | bad_seeds(argv[1]);
}
