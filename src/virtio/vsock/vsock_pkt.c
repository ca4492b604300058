/*
 * vsock_pkt.c - the virtio-vsock packet parser, credit arithmetic and hybrid connect-line parser
 * (virtio 1.2 section 5.10.6; include/brisk/virtio_vsock.h). Pure: no socket, no thread, no transport; the
 * device (vsock.c), the unit tests and the fuzzer call it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "brisk/virtio_vsock.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "virtio-vsock fields are read without byte swapping");

enum vsock_fault vsock_parse(const struct virtq_chain *c, uint64_t guest_cid, struct virtio_vsock_hdr *h)
{
	memset(h, 0, sizeof(*h));
	/* 5.10.6.2: transmit buffers are driver-readable only. */
	if (c->nr_in)
		return VSOCK_BAD_CHAIN;
	if (c->out_bytes < VSOCK_HDR_SIZE)
		return VSOCK_SHORT;
	/* One copy of the header (no double fetch); it may span segments (2.7.4: no framing assumed). */
	if (virtq_copy_from(c, 0, h, VSOCK_HDR_SIZE) != VSOCK_HDR_SIZE)
		return VSOCK_SHORT;
	if (h->len > VSOCK_MAX_PKT)
		return VSOCK_LEN_TOO_BIG;
	if (h->len > c->out_bytes - VSOCK_HDR_SIZE)
		return VSOCK_LEN_PAST_DATA;
	if (h->src_cid != guest_cid)
		return VSOCK_BAD_SRC_CID;
	if (h->dst_cid != VSOCK_HOST_CID)
		return VSOCK_BAD_DST_CID;
	if (h->type != VSOCK_TYPE_STREAM)
		return VSOCK_BAD_TYPE;
	if (h->op < VSOCK_OP_REQUEST || h->op > VSOCK_OP_CREDIT_REQUEST)
		return VSOCK_BAD_OP;
	return VSOCK_OK;
}

const char *vsock_fault_name(enum vsock_fault f)
{
	static const char *const names[VSOCK_FAULT__COUNT] = {
	    [VSOCK_OK] = "ok",
	    [VSOCK_BAD_CHAIN] = "malformed or writable transmit chain",
	    [VSOCK_SHORT] = "packet shorter than its 44-byte header",
	    [VSOCK_LEN_TOO_BIG] = "len above 64 KiB",
	    [VSOCK_LEN_PAST_DATA] = "len past the data the chain carries",
	    [VSOCK_BAD_SRC_CID] = "src_cid is not the guest's CID",
	    [VSOCK_BAD_DST_CID] = "dst_cid is not the host",
	    [VSOCK_BAD_TYPE] = "type is not STREAM",
	    [VSOCK_BAD_OP] = "unknown op",
	};

	return (unsigned)f < VSOCK_FAULT__COUNT ? names[f] : "?";
}

uint32_t vsock_credit(uint32_t buf_alloc, uint32_t fwd_cnt, uint32_t tx_cnt)
{
	uint32_t in_flight = tx_cnt - fwd_cnt; /* modulo 2^32, as the counters (5.10.6.3) */

	return in_flight > buf_alloc ? 0 : buf_alloc - in_flight;
}

bool vsock_credit_allows(uint32_t buf_alloc, uint32_t fwd_cnt, uint32_t rx_cnt, uint32_t len)
{
	return len <= vsock_credit(buf_alloc, fwd_cnt, rx_cnt);
}

int vsock_parse_connect(const char *line, size_t n, uint32_t *port)
{
	static const char verb[] = "CONNECT ";
	uint64_t v = 0;
	size_t i = sizeof(verb) - 1;

	if (n && line[n - 1] == '\r')
		n--;
	if (n <= i || memcmp(line, verb, i) != 0)
		return -1;
	for (; i < n; i++) {
		if (line[i] < '0' || line[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(line[i] - '0');
		if (v > UINT32_MAX)
			return -1;
	}
	*port = (uint32_t)v;
	return 0;
}
