/* fuzz_virtq.c - libFuzzer harness: a hostile driver's descriptor table, avail ring and indirect tables, popped dry. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "brisk/log.h"
#include "brisk/mem.h"
#include "brisk/virtq.h"
#include "virtq_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define COPY_MAX 256u /* bytes copied per chain each way: keeps an execution cheap */

/* Pops can only continue while avail.idx is ahead: at most two windows of the queue size. */
#define MAX_POPS (2u * VIRTQ_MAX_SIZE + 4u)

static struct gmem mem; /* created once */

/* Copies up to `len` bytes of the input into guest RAM at `gpa` and moves past them. */
static void lay(const uint8_t **p, size_t *n, uint64_t gpa, size_t len)
{
	size_t take = *n < len ? *n : len;

	memcpy(mem.base + gpa, *p, take);
	*p += take;
	*n -= take;
}

static uint64_t fault_sum(const struct virtq *q)
{
	uint64_t s = 0;

	for (int i = 0; i < VIRTQ_FAULT__COUNT; i++)
		s += q->faults[i];
	return s;
}

/* A segment must lie in guest RAM: the walker never hands out anything else. */
static void check_seg(const struct virtq_seg *s)
{
	if (s->len == 0 || s->ptr < mem.base || s->ptr > mem.base + mem.size || s->len > mem.base + mem.size - s->ptr)
		abort();
}

/* The chain's bookkeeping adds up. */
static void check_chain(const struct virtq *q, const struct virtq_chain *c, const struct virtq_seg *segs,
			unsigned max_segs)
{
	uint64_t out = 0, in = 0;

	if (c->seg != segs || c->head >= q->size || c->nr_out + c->nr_in > max_segs)
		abort();
	for (unsigned i = 0; i < c->nr_out + c->nr_in; i++) {
		check_seg(&segs[i]);
		*(i < c->nr_out ? &out : &in) += segs[i].len;
	}
	if (out != c->out_bytes || in != c->in_bytes || out + in > UINT32_MAX)
		abort();
}

/* virtq_copy_from the slow way: whole segments skipped, then byte by byte. */
static void ref_copy_from(const struct virtq_chain *c, uint64_t off, uint8_t *dst, uint64_t len)
{
	for (unsigned i = 0; i < c->nr_out && len; i++) {
		if (off >= c->seg[i].len) {
			off -= c->seg[i].len;
			continue;
		}
		for (uint64_t j = off; j < c->seg[i].len && len; j++, len--)
			*dst++ = c->seg[i].ptr[j];
		off = 0;
	}
}

/* Copies from the end of the readable bytes and into the writable ones; checks the counts and bytes. */
static uint32_t exercise_copies(const struct virtq_chain *c)
{
	static uint8_t buf[COPY_MAX], ref[COPY_MAX];
	uint64_t want = c->out_bytes < COPY_MAX ? c->out_bytes : COPY_MAX;
	uint64_t off = c->out_bytes - want;

	if (virtq_copy_from(c, off, buf, COPY_MAX) != want)
		abort();
	ref_copy_from(c, off, ref, want);
	if (memcmp(buf, ref, want) != 0)
		abort();
	want = c->in_bytes < COPY_MAX ? c->in_bytes : COPY_MAX;
	memset(buf, 0xa5, sizeof(buf));
	if (virtq_copy_to(c, 0, buf, COPY_MAX) != want || virtq_copy_to(c, c->in_bytes, buf, 1) != 0)
		abort();
	return (uint32_t)want;
}

/* One pop and its completion. Returns false once the queue is empty or broken. */
static bool step(struct virtq *q, unsigned max_segs)
{
	static struct virtq_seg segs[VF_MAX_SEGS];
	struct virtq_chain c;
	uint64_t before = fault_sum(q);
	enum virtq_pop_result r = virtq_pop(q, &c, segs, max_segs);

	switch (r) {
	case VIRTQ_EMPTY:
		if (fault_sum(q) != before)
			abort();
		return false;
	case VIRTQ_BROKEN:
		if (!q->broken || fault_sum(q) > before + 1)
			abort();
		return false;
	case VIRTQ_BAD_CHAIN:
		if (fault_sum(q) != before + 1 || c.head >= q->size || c.nr_out + c.nr_in != 0)
			abort();
		virtq_push(q, c.head, 0);
		break;
	case VIRTQ_CHAIN:
		if (fault_sum(q) != before)
			abort();
		check_chain(q, &c, segs, max_segs);
		virtq_push(q, c.head, exercise_copies(&c));
		break;
	default:
		abort();
	}
	virtq_publish(q);
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct virtq q;
	const uint8_t *p;
	size_t n;
	unsigned qsize, max_segs, pops = 0;
	uint16_t start, later, idx;
	bool toggle;

	if (!mem.base) {
		log_set_level(LOG_ERROR);
		if (gmem_init(&mem, VF_RAM, 0))
			abort();
	}
	if (size < VF_HDR)
		return 0;
	/* Zero pages again wherever the last input had the device write: runs stay independent and RSS bounded. */
	if (madvise(mem.base, mem.size, MADV_DONTNEED) != 0)
		abort();
	p = data + VF_HDR;
	n = size - VF_HDR;
	qsize = vf_size(data[0]);
	max_segs = data[1] % (VF_MAX_SEGS + 1);
	start = (uint16_t)(data[2] | data[3] << 8);
	later = (uint16_t)(data[4] | data[5] << 8);
	toggle = data[0] & VF_TOGGLE;
	lay(&p, &n, VF_DESC, vf_desc_len(qsize));
	lay(&p, &n, VF_AVAIL, vf_avail_len(qsize));
	lay(&p, &n, VF_REST, VF_LAID - VF_REST);
	memcpy(&idx, mem.base + VF_AVAIL + 2, 2);
	idx = (uint16_t)(idx + start);
	memcpy(mem.base + VF_AVAIL + 2, &idx, 2);

	virtq_reset(&q);
	q.size = (uint16_t)qsize;
	q.desc = VF_DESC;
	q.avail = VF_AVAIL;
	q.used = VF_USED;
	q.event_idx = data[0] & VF_EVENT_IDX;
	q.indirect = data[0] & VF_INDIRECT;
	if (virtq_activate(&q, &mem) != 0)
		abort();
	q.last_avail = q.used_idx = q.signalled = start; /* as if `start` chains had gone before */

	while (step(&q, max_segs)) {
		if (++pops == MAX_POPS)
			abort(); /* the walker kept finding work: a spin */
		if (toggle)
			virtq_notifications(&q, pops & 1);
		if (pops == 1 && (data[0] & VF_LATER)) {
			idx = (uint16_t)(start + later);
			memcpy(mem.base + VF_AVAIL + 2, &idx, 2);
		}
	}
	return 0;
}
