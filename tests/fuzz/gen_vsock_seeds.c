/* gen_vsock_seeds.c - writes fuzz_vsock inputs (vsock_input.h) into a corpus directory (argv[1]): each op, well
 * framed and split, and the malformed packets the device must refuse. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "brisk/virtio_vsock.h"
#include "seed_save.h"
#include "vsock_input.h"

static uint8_t buf[512];
static unsigned len;

static void put(const void *p, unsigned n)
{
	memcpy(buf + len, p, n);
	len += n;
}

/* A packet from guest 3 in `nseg` readable segments (the header cut at 20 when 2), `data` bytes of payload. */
static int packet(const char *dir, const char *name, uint16_t op, uint32_t hlen, uint16_t type, uint64_t src_cid,
		  uint16_t data, unsigned nseg, const char *rest)
{
	struct virtio_vsock_hdr h = {.src_cid = src_cid,
				     .dst_cid = VSOCK_HOST_CID,
				     .src_port = 1024,
				     .dst_port = 52,
				     .len = hlen,
				     .type = type,
				     .op = op,
				     .buf_alloc = 65536};
	uint32_t cid = 3;
	uint16_t seg[2];

	len = 0;
	put(&cid, 4);
	buf[len++] = (uint8_t)nseg;
	if (nseg == 2) {
		seg[0] = 20 / 2;
		seg[1] = (uint16_t)((VSOCK_HDR_SIZE - 20 + data + 1) / 2);
	} else {
		seg[0] = (uint16_t)((VSOCK_HDR_SIZE + data + 1) / 2);
	}
	put(seg, 2 * nseg);
	put(&h, VSOCK_HDR_SIZE);
	for (unsigned i = 0; i < data; i++)
		buf[len++] = (uint8_t)i;
	put(rest, (unsigned)strlen(rest));
	return seed_save(dir, name, buf, len);
}

int main(int argc, char **argv)
{
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	bad |= packet(argv[1], "request", VSOCK_OP_REQUEST, 0, 1, 3, 0, 1, "CONNECT 52\n");
	bad |= packet(argv[1], "response-split", VSOCK_OP_RESPONSE, 0, 1, 3, 0, 2, "CONNECT 4294967295");
	bad |= packet(argv[1], "rw", VSOCK_OP_RW, 64, 1, 3, 64, 1, "");
	bad |= packet(argv[1], "rw-split", VSOCK_OP_RW, 32, 1, 3, 32, 2, "");
	bad |= packet(argv[1], "shutdown", VSOCK_OP_SHUTDOWN, 0, 1, 3, 0, 1, "");
	bad |= packet(argv[1], "credit-request", VSOCK_OP_CREDIT_REQUEST, 0, 1, 3, 0, 1, "");
	bad |= packet(argv[1], "len-past-data", VSOCK_OP_RW, 1000, 1, 3, 10, 1, "");
	bad |= packet(argv[1], "len-too-big", VSOCK_OP_RW, 70000, 1, 3, 10, 1, "");
	bad |= packet(argv[1], "bad-cid", VSOCK_OP_RW, 4, 1, 4, 4, 1, "");
	bad |= packet(argv[1], "seqpacket", VSOCK_OP_RW, 4, 2, 3, 4, 1, "");
	bad |= packet(argv[1], "bad-op", 99, 0, 1, 3, 0, 1, "HELLO\n");
	return bad;
}
