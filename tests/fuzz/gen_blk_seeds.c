/* gen_blk_seeds.c - writes fuzz_blk inputs (blk_input.h) into a corpus directory (argv[1]): each request type,
 * well framed and oddly framed, at and past the end of the disk. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "blk_input.h"
#include "seed_save.h"

static uint8_t buf[256];
static unsigned len;

static void begin(uint8_t flags, uint64_t capacity, unsigned nr_out, unsigned nr_in)
{
	memset(buf, 0, sizeof(buf));
	buf[0] = flags;
	memcpy(buf + 1, &capacity, 8);
	buf[9] = (uint8_t)(nr_out | nr_in << 4);
	len = BF_HDR;
}

static void put(const void *p, unsigned n)
{
	memcpy(buf + len, p, n);
	len += n;
}

static void seg(uint16_t n)
{
	put(&n, 2);
}

static void header(uint32_t type, uint64_t sector)
{
	uint32_t reserved = 0;

	put(&type, 4);
	put(&reserved, 4);
	put(&sector, 8);
}

/* header | data (`data` bytes: readable for OUT-like types, writable otherwise) | status */
static int simple(const char *dir, const char *name, uint8_t flags, uint32_t type, uint64_t sector, uint16_t data)
{
	int out = type == 1 || type == 11 || type == 13;

	begin(flags, 64, out ? 2 : 1, out ? 1 : 2);
	seg(16);
	seg(data);
	seg(1);
	header(type, sector);
	return seed_save(dir, name, buf, len);
}

int main(int argc, char **argv)
{
	uint64_t dwz[2] = {8, 16};
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	bad |= simple(argv[1], "read", BF_FLUSH, 0, 3, 1024);
	bad |= simple(argv[1], "read-last", 0, 0, 63, 512);
	bad |= simple(argv[1], "read-past-end", 0, 0, 63, 1024);
	bad |= simple(argv[1], "read-overflow", 0, 0, 1ull << 55, 512);
	bad |= simple(argv[1], "read-odd-length", 0, 0, 0, 100);
	bad |= simple(argv[1], "write", BF_FLUSH, 1, 2, 512);
	bad |= simple(argv[1], "write-ro", BF_RO, 1, 2, 512);
	bad |= simple(argv[1], "flush", BF_FLUSH, 4, 0, 0);
	bad |= simple(argv[1], "get-id", 0, 8, 0, 20);
	bad |= simple(argv[1], "unknown", 0, 0xff, 0, 512);
	begin(BF_DISCARD | BF_WRITE_ZEROS, 64, 2, 1);
	seg(16);
	seg(16);
	seg(1);
	header(11, 0);
	put(dwz, 16);
	bad |= seed_save(argv[1], "discard", buf, len);
	buf[BF_HDR + 6] = 13;
	bad |= seed_save(argv[1], "write-zeroes", buf, len);
	/* header split 5 + 11, data and status in one writable segment */
	begin(0, 64, 2, 1);
	seg(5);
	seg(11);
	seg(513);
	header(0, 1);
	bad |= seed_save(argv[1], "split-header", buf, len);
	/* no writable status */
	begin(0, 64, 1, 0);
	seg(16);
	header(4, 0);
	bad |= seed_save(argv[1], "no-status", buf, len);
	return bad;
}
