/* gen_net_seeds.c - writes fuzz_net inputs (net_input.h) into a corpus directory (argv[1]): frames well and oddly
 * framed, at and past the size limits, with and without the checksum and segmentation offloads. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_input.h"
#include "seed_save.h"

#define HDR 12u

static uint8_t buf[NF_HDR + 2 * 2 * NF_MAX_SIDE + HDR + 65600];
static unsigned len;

static void begin(uint8_t flags, unsigned nr_out, unsigned nr_in)
{
	memset(buf, 0, sizeof(buf));
	buf[0] = flags;
	buf[1] = (uint8_t)(nr_out | nr_in << 4);
	len = NF_HDR;
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

/* The 12-byte header: flags, gso_type, hdr_len, gso_size, csum_start, csum_offset, num_buffers. */
static void header(uint8_t flags, uint8_t gso, uint16_t gso_size, uint16_t start, uint16_t off)
{
	uint16_t h[6] = {(uint16_t)(flags | gso << 8), 54, gso_size, start, off, 0};

	put(h, HDR);
}

static void frame(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		buf[len++] = (uint8_t)(i * 13);
}

int main(int argc, char **argv)
{
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	begin(0, 1, 0); /* an ARP request, header and frame in one buffer */
	seg(HDR + 42);
	header(0, 0, 0, 0, 0);
	frame(42);
	bad |= seed_save(argv[1], "arp", buf, len);
	begin(0, 2, 0); /* header and full-size frame in two buffers */
	seg(HDR);
	seg(1518);
	header(0, 0, 0, 0, 0);
	frame(1518);
	bad |= seed_save(argv[1], "max-two-buffers", buf, len);
	begin(0, 3, 0); /* the header split over buffers */
	seg(5);
	seg(9);
	seg(60);
	header(0, 0, 0, 0, 0);
	frame(62);
	bad |= seed_save(argv[1], "split-header", buf, len);
	begin(0, 1, 0); /* zero-length frame */
	seg(HDR);
	header(0, 0, 0, 0, 0);
	bad |= seed_save(argv[1], "empty", buf, len);
	begin(NF_CSUM, 1, 0); /* checksum offload */
	seg(HDR + 100);
	header(1, 0, 0, 34, 16);
	frame(100);
	bad |= seed_save(argv[1], "csum", buf, len);
	begin(NF_CSUM | NF_HOST_TSO4, 2, 0); /* a TSO frame of 64 KiB */
	seg(HDR);
	seg(65535);
	header(1, 1, 1448, 34, 16);
	frame(65535);
	bad |= seed_save(argv[1], "tso4", buf, len);
	begin(0, 1, 1); /* a writable buffer on the transmit queue */
	seg(HDR + 60);
	seg(64);
	header(0, 0, 0, 0, 0);
	frame(60);
	bad |= seed_save(argv[1], "writable", buf, len);
	return bad;
}
