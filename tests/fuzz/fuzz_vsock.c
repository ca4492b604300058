/* fuzz_vsock.c - libFuzzer harness: the virtio-vsock packet parser, credit arithmetic and CONNECT-line parser
 * (vsock_input.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/log.h"
#include "brisk/virtio_vsock.h"
#include "chain_input.h"
#include "vsock_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What vsock_parse promises about a packet it accepts (include/brisk/virtio_vsock.h). */
static void check(const struct virtq_chain *c, uint32_t cid, enum vsock_fault f, const struct virtio_vsock_hdr *h)
{
	if ((unsigned)f >= VSOCK_FAULT__COUNT || !vsock_fault_name(f))
		abort();
	if (f != VSOCK_OK)
		return;
	if (c->nr_in || c->out_bytes < VSOCK_HDR_SIZE || h->len > VSOCK_MAX_PKT ||
	    h->len > c->out_bytes - VSOCK_HDR_SIZE || h->src_cid != cid || h->dst_cid != VSOCK_HOST_CID ||
	    h->type != VSOCK_TYPE_STREAM || h->op < VSOCK_OP_REQUEST || h->op > VSOCK_OP_CREDIT_REQUEST)
		abort();
}

static void check_rest(const uint8_t *p, size_t n)
{
	uint32_t v[3] = {0}, port;

	memcpy(v, p, n < sizeof(v) ? n : sizeof(v));
	if (vsock_credit(v[0], v[1], v[2]) > v[0])
		abort();
	if (vsock_credit_allows(v[0], v[1], v[2], vsock_credit(v[0], v[1], v[2]) + 1u) &&
	    vsock_credit(v[0], v[1], v[2]) != UINT32_MAX)
		abort();
	if (vsock_parse_connect((const char *)p, n, &port) == 0 && (n < 9 || memcmp(p, "CONNECT ", 8) != 0))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t hdr[VF_HDR] = {0};
	struct virtq_seg segs[2 * VF_MAX_SIDE];
	struct virtq_chain c = {.seg = segs};
	struct virtio_vsock_hdr h;
	struct fuzz_input in = fuzz_input_split(data, size, hdr, VF_HDR);
	uint32_t cid;

	log_set_level(LOG_ERROR);
	memcpy(&cid, hdr, 4);
	fuzz_chain_read(&c, hdr[4], VF_MAX_SIDE, 1, VF_LEN_MASK, &in);
	check(&c, cid, vsock_parse(&c, cid, &h), &h);
	check_rest(in.p, in.n);
	fuzz_chain_free(&c);
	return 0;
}
