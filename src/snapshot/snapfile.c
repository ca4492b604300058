/* snapfile.c - the snapshot state file (include/brisk/snapshot.h): an in-memory writer, a validating reader. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/snapshot.h"

#define HEADER_SIZE  24u /* magic 8, version 4, flags 4, payload length 8 */
#define TRAILER_SIZE 8u	 /* the checksum */
#define FRAME_SIZE   20u /* a section's tag 4, index 4, name length 4 and (after the name) body length 8 */
#define VERSION_SIZE 4u	 /* a section's version, after its index, when the header has SNAP_FLAG_SECTION_VERSIONS */
#define MAX_PAYLOAD  ((size_t)SNAP_MAX_FILE - HEADER_SIZE - TRAILER_SIZE)

/* ---- CRC-64 ------------------------------------------------------------------------------------------- */

/*
 * The checksum Firecracker's snapshot files carry (its snapshot/crc.rs uses the `crc64` crate, a port of
 * Redis's crc64.c): CRC-64/Jones, polynomial 0xad93d23594c935a9, reflected in and out, initial value 0,
 * no final xor; check("123456789") = 0xe9c6d914c4b8d9ca. Firecracker's own test vectors
 * (crc64([1,2,3,4,5]) = 0xfb0460de06383654) hold, see tests/unit/test_snapfile.c. With no pre- or
 * post-inversion, a checksum continues across calls by passing the previous result as `crc`.
 */
#define CRC64_JONES_REFLECTED 0x95ac9329ac4bc9b5ull /* 0xad93d23594c935a9 bit-reversed */

static uint64_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_table_init(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint64_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ CRC64_JONES_REFLECTED : c >> 1;
		crc_table[i] = c;
	}
}

uint64_t snap_crc64(uint64_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;

	pthread_once(&crc_once, crc_table_init);
	for (size_t i = 0; i < len; i++)
		crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return crc;
}

/* ---- little-endian helpers ---------------------------------------------------------------------------- */

static void le_put(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t le_get(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* A name a section may have: at most SNAP_MAX_NAME printable ASCII characters (no NUL, no escapes in messages). */
static bool name_ok(const uint8_t *s, size_t len)
{
	if (len > SNAP_MAX_NAME)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return false;
	return true;
}

static bool tag_ok(uint32_t tag)
{
	return tag >= SNAP_TAG_CONFIG && tag <= SNAP_TAG_API;
}

/* ---- writer ------------------------------------------------------------------------------------------- */

struct snap_key {
	uint32_t tag, index;
	uint32_t version; /* the section's (snap_set_version); 1 unless set */
	size_t frame_at;  /* where its frame starts in the payload (without version words) */
};

struct snap_writer {
	uint8_t *buf; /* the payload */
	size_t len, cap;
	size_t body_len_at; /* offset of the open section's body length field; SIZE_MAX: none open */
	struct snap_key *keys;
	unsigned nkeys, cap_keys;
	int error; /* the first failed put: snap_writer_finish refuses to write a file with a hole */
};

struct snap_writer *snap_writer_new(void)
{
	struct snap_writer *w = calloc(1, sizeof(*w));

	if (w)
		w->body_len_at = SIZE_MAX;
	return w;
}

void snap_writer_free(struct snap_writer *w)
{
	if (!w)
		return;
	free(w->buf);
	free(w->keys);
	free(w);
}

static int fail_w(struct snap_writer *w, int ret)
{
	if (!w->error)
		w->error = ret;
	return ret;
}

/* Room for `n` more payload bytes: -EFBIG past what a state file may hold, -ENOMEM. */
static int reserve(struct snap_writer *w, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (n > MAX_PAYLOAD - w->len)
		return fail_w(w, -EFBIG);
	if (w->len + n <= w->cap)
		return 0;
	cap = w->cap ? w->cap : 4096;
	while (cap < w->len + n)
		cap = cap > MAX_PAYLOAD / 2 ? MAX_PAYLOAD : cap * 2;
	p = realloc(w->buf, cap);
	if (!p)
		return fail_w(w, -ENOMEM);
	w->buf = p;
	w->cap = cap;
	return 0;
}

static void append(struct snap_writer *w, const void *data, size_t len)
{
	if (len)
		memcpy(w->buf + w->len, data, len);
	w->len += len;
}

static int add_key(struct snap_writer *w, uint32_t tag, uint32_t index)
{
	for (unsigned i = 0; i < w->nkeys; i++)
		if (w->keys[i].tag == tag && w->keys[i].index == index)
			return -EEXIST;
	if (w->nkeys == SNAP_MAX_SECTIONS)
		return -ENOSPC;
	if (w->nkeys == w->cap_keys) {
		unsigned cap = w->cap_keys ? w->cap_keys * 2 : 16;
		struct snap_key *k = realloc(w->keys, cap * sizeof(*k));

		if (!k)
			return -ENOMEM;
		w->keys = k;
		w->cap_keys = cap;
	}
	w->keys[w->nkeys++] = (struct snap_key){.tag = tag, .index = index, .version = 1, .frame_at = w->len};
	return 0;
}

int snap_section_begin(struct snap_writer *w, enum snap_tag tag, uint32_t index, const char *name)
{
	size_t nlen = name ? strlen(name) : 0;
	uint8_t frame[FRAME_SIZE];
	int ret;

	if (w->body_len_at != SIZE_MAX || !tag_ok(tag) || !name_ok((const uint8_t *)name, nlen))
		return fail_w(w, -EINVAL);
	ret = reserve(w, FRAME_SIZE + nlen);
	if (ret)
		return ret;
	ret = add_key(w, tag, index);
	if (ret)
		return fail_w(w, ret);
	le_put(frame, tag, 4);
	le_put(frame + 4, index, 4);
	le_put(frame + 8, nlen, 4);
	append(w, frame, 12);
	append(w, name, nlen);
	w->body_len_at = w->len;
	memset(frame, 0, 8);
	append(w, frame, 8); /* the body length, filled by snap_section_end */
	return 0;
}

int snap_set_version(struct snap_writer *w, uint32_t version)
{
	if (w->body_len_at == SIZE_MAX || version == 0)
		return fail_w(w, -EINVAL);
	w->keys[w->nkeys - 1].version = version;
	return 0;
}

int snap_section_end(struct snap_writer *w)
{
	if (w->body_len_at == SIZE_MAX)
		return fail_w(w, -EINVAL);
	le_put(w->buf + w->body_len_at, w->len - w->body_len_at - 8, 8);
	w->body_len_at = SIZE_MAX;
	return 0;
}

int snap_put(struct snap_writer *w, const void *data, size_t len)
{
	int ret;

	if (w->body_len_at == SIZE_MAX)
		return fail_w(w, -EINVAL);
	ret = reserve(w, len);
	if (ret)
		return ret;
	append(w, data, len);
	return 0;
}

static int put_le(struct snap_writer *w, uint64_t v, unsigned n)
{
	uint8_t b[8];

	le_put(b, v, n);
	return snap_put(w, b, n);
}

int snap_put_u8(struct snap_writer *w, uint8_t v)
{
	return put_le(w, v, 1);
}

int snap_put_u16(struct snap_writer *w, uint16_t v)
{
	return put_le(w, v, 2);
}

int snap_put_u32(struct snap_writer *w, uint32_t v)
{
	return put_le(w, v, 4);
}

int snap_put_u64(struct snap_writer *w, uint64_t v)
{
	return put_le(w, v, 8);
}

static int pwrite_all(int fd, const void *data, size_t len, off_t off)
{
	const uint8_t *p = data;

	while (len) {
		ssize_t n = pwrite(fd, p, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

static void make_header(uint8_t *h, uint32_t flags, size_t payload_len)
{
	memcpy(h, SNAP_MAGIC, 8);
	le_put(h + 8, SNAP_VERSION, 4);
	le_put(h + 12, flags, 4);
	le_put(h + 16, payload_len, 8);
}

static bool all_version_1(const struct snap_writer *w)
{
	for (unsigned i = 0; i < w->nkeys; i++)
		if (w->keys[i].version != 1)
			return false;
	return true;
}

/*
 * The payload with a version word after each section's index (SNAP_FLAG_SECTION_VERSIONS), built from the
 * unversioned one: into *out (malloc'd), or -EFBIG / -ENOMEM.
 */
static int versioned_payload(const struct snap_writer *w, uint8_t **out, size_t *len)
{
	size_t n = w->len + (size_t)w->nkeys * VERSION_SIZE, at = 0;
	uint8_t *p;

	if (w->len > MAX_PAYLOAD || n > MAX_PAYLOAD)
		return -EFBIG;
	p = malloc(n ? n : 1);
	if (!p)
		return -ENOMEM;
	for (unsigned i = 0; i < w->nkeys; i++) {
		size_t from = w->keys[i].frame_at, to = i + 1 < w->nkeys ? w->keys[i + 1].frame_at : w->len;

		memcpy(p + at, w->buf + from, 8); /* tag, index */
		le_put(p + at + 8, w->keys[i].version, 4);
		memcpy(p + at + 12, w->buf + from + 8, to - from - 8);
		at += to - from + VERSION_SIZE;
	}
	*out = p;
	*len = n;
	return 0;
}

/* The header, payload and checksum to fd. */
static int write_state(int fd, uint32_t flags, const uint8_t *payload, size_t len)
{
	uint8_t h[HEADER_SIZE], t[TRAILER_SIZE];
	int ret;

	make_header(h, flags, len);
	le_put(t, snap_crc64(snap_crc64(0, h, sizeof(h)), payload, len), 8);
	ret = pwrite_all(fd, h, sizeof(h), 0);
	if (!ret)
		ret = pwrite_all(fd, payload, len, HEADER_SIZE);
	if (!ret)
		ret = pwrite_all(fd, t, sizeof(t), (off_t)(HEADER_SIZE + len));
	/* A longer file being overwritten must not keep a stale tail: the reader refuses trailing bytes. */
	if (!ret && ftruncate(fd, (off_t)(HEADER_SIZE + len + TRAILER_SIZE)))
		ret = -errno;
	return ret;
}

int snap_writer_finish(struct snap_writer *w, int fd, bool nosync, char *err, size_t errlen)
{
	uint8_t *payload = w->buf, *versioned = NULL;
	size_t len = w->len;
	uint32_t flags = 0;
	int ret;

	if (w->error || w->body_len_at != SIZE_MAX) {
		ret = w->error ? w->error : -EINVAL;
		snprintf(err, errlen, "the snapshot state is incomplete: %s",
			 w->error ? strerror(-w->error) : "a section was left open");
		return ret;
	}
	/* Every section at version 1: the file as brisk wrote it before sections had versions. */
	ret = all_version_1(w) ? 0 : versioned_payload(w, &versioned, &len);
	if (versioned) {
		payload = versioned;
		flags = SNAP_FLAG_SECTION_VERSIONS;
	}
	if (!ret)
		ret = write_state(fd, flags, payload, len);
	free(versioned);
	if (!ret && !nosync && fsync(fd))
		ret = -errno;
	if (ret)
		snprintf(err, errlen, "writing the snapshot state (%zu bytes) failed: %s",
			 HEADER_SIZE + len + TRAILER_SIZE, strerror(-ret));
	return ret;
}

/* ---- reader ------------------------------------------------------------------------------------------- */

struct snap_sec {
	uint32_t tag, index, version;
	char name[SNAP_MAX_NAME + 1];
	size_t off, len; /* the body within the file buffer */
};

struct snap_reader {
	/* a section reader: the cursor over one body */
	const uint8_t *p;
	size_t pos, end;
	uint32_t version;
	bool error;
	/* the file reader */
	uint8_t *buf;
	size_t size;
	struct snap_sec *secs; /* sorted by (tag, index) */
	unsigned nsecs;
	struct snap_reader *cur; /* the section reader handed out by snap_section */
};

uint64_t snap_reader_checksum(const struct snap_reader *r)
{
	uint64_t v = 0;

	for (int i = 7; r->size >= 8 && i >= 0; i--)
		v = v << 8 | r->buf[r->size - 8 + (size_t)i];
	return v;
}

void snap_reader_free(struct snap_reader *r)
{
	if (!r)
		return;
	free(r->buf);
	free(r->secs);
	free(r->cur);
	free(r);
}

/*
 * Parses the section framing at *pos (which is < end): fills `s` (may be NULL) and advances *pos past
 * the body. `vw` is the size of the version word after the index (VERSION_SIZE, or 0: every section is
 * version 1). Every length is checked against the bytes left before it is used. Returns 0 or -EINVAL
 * with the reason in `err`.
 */
static int parse_section(const uint8_t *buf, size_t *pos, size_t end, size_t vw, struct snap_sec *s, unsigned nr,
			 char *err, size_t errlen)
{
	size_t at = *pos, left = end - at, hl = 12 + vw; /* tag, index, [version,] name length */
	uint32_t tag, index, version = 1, nlen;
	uint64_t blen;

	if (left < hl)
		goto truncated;
	tag = (uint32_t)le_get(buf + at, 4);
	index = (uint32_t)le_get(buf + at + 4, 4);
	if (vw)
		version = (uint32_t)le_get(buf + at + 8, 4);
	nlen = (uint32_t)le_get(buf + at + 8 + vw, 4);
	if (!tag_ok(tag)) {
		snprintf(err, errlen, "section %u at offset %zu: unknown tag %u", nr, at, tag);
		return -EINVAL;
	}
	if (!version) {
		snprintf(err, errlen, "section %u at offset %zu: version 0 (versions start at 1)", nr, at);
		return -EINVAL;
	}
	if (nlen > SNAP_MAX_NAME || !name_ok(buf + at + hl, nlen > left - hl ? 0 : nlen)) {
		snprintf(err, errlen, "section %u at offset %zu: name of %u bytes (at most %u printable characters)",
			 nr, at, nlen, SNAP_MAX_NAME);
		return -EINVAL;
	}
	if (left - hl < (size_t)nlen + 8)
		goto truncated;
	blen = le_get(buf + at + hl + nlen, 8);
	if (blen > left - hl - nlen - 8)
		goto truncated;
	if (s) {
		*s = (struct snap_sec){
		    .tag = tag, .index = index, .version = version, .off = at + hl + nlen + 8, .len = (size_t)blen};
		memcpy(s->name, buf + at + hl, nlen);
		s->name[nlen] = '\0';
	}
	*pos = at + hl + nlen + 8 + (size_t)blen;
	return 0;
truncated:
	snprintf(err, errlen, "section %u at offset %zu runs past the end of the payload", nr, at);
	return -EINVAL;
}

static int cmp_sec(const void *a, const void *b)
{
	const struct snap_sec *x = a, *y = b;

	if (x->tag != y->tag)
		return x->tag < y->tag ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* Walks the payload twice: count (and validate), then fill; sorts and refuses duplicate (tag, index). */
static int parse_sections(struct snap_reader *r, size_t start, size_t end, char *err, size_t errlen)
{
	size_t vw = le_get(r->buf + 12, 4) & SNAP_FLAG_SECTION_VERSIONS ? VERSION_SIZE : 0;
	unsigned n = 0;
	int ret;

	for (size_t pos = start; pos < end; n++) {
		if (n == SNAP_MAX_SECTIONS) {
			snprintf(err, errlen, "more than %u sections", SNAP_MAX_SECTIONS);
			return -EINVAL;
		}
		ret = parse_section(r->buf, &pos, end, vw, NULL, n, err, errlen);
		if (ret)
			return ret;
	}
	r->secs = calloc(n ? n : 1, sizeof(*r->secs));
	if (!r->secs) {
		snprintf(err, errlen, "out of memory for %u sections", n);
		return -ENOMEM;
	}
	for (size_t pos = start; r->nsecs < n; r->nsecs++)
		parse_section(r->buf, &pos, end, vw, &r->secs[r->nsecs], r->nsecs, err, errlen);
	qsort(r->secs, n, sizeof(*r->secs), cmp_sec);
	for (unsigned i = 1; i < n; i++) {
		if (!cmp_sec(&r->secs[i - 1], &r->secs[i])) {
			snprintf(err, errlen, "two sections with tag %u index %u", r->secs[i].tag, r->secs[i].index);
			return -EINVAL;
		}
	}
	return 0;
}

/* Header, version, length and checksum, in that order: a newer file gets the version message. */
static int check_envelope(const uint8_t *b, size_t size, char *err, size_t errlen)
{
	uint64_t plen, stored, crc;
	uint32_t version, flags;

	if (size > SNAP_MAX_FILE) {
		snprintf(err, errlen, "%zu bytes, more than the %u a state file may have", size, SNAP_MAX_FILE);
		return -EFBIG;
	}
	if (size >= 8 && memcmp(b, SNAP_MAGIC, 8) != 0) {
		snprintf(err, errlen, "not a brisk snapshot state file (no \"%s\" magic)", SNAP_MAGIC);
		return -EINVAL;
	}
	if (size < HEADER_SIZE + TRAILER_SIZE) {
		snprintf(err, errlen, "truncated: %zu bytes, shorter than the %u-byte header and checksum", size,
			 HEADER_SIZE + TRAILER_SIZE);
		return -EINVAL;
	}
	version = (uint32_t)le_get(b + 8, 4);
	flags = (uint32_t)le_get(b + 12, 4);
	plen = le_get(b + 16, 8);
	if (version != SNAP_VERSION) {
		snprintf(err, errlen, "version %u, this brisk reads %u", version, SNAP_VERSION);
		return -EINVAL;
	}
	if (flags & ~SNAP_FLAG_SECTION_VERSIONS) {
		snprintf(err, errlen, "header flags 0x%x, this brisk knows 0x%x only", flags,
			 SNAP_FLAG_SECTION_VERSIONS);
		return -EINVAL;
	}
	if (plen != size - HEADER_SIZE - TRAILER_SIZE) {
		snprintf(err, errlen, "%s: the header says %llu payload bytes, the file holds %zu",
			 plen > size - HEADER_SIZE - TRAILER_SIZE ? "truncated" : "trailing bytes",
			 (unsigned long long)plen, size - HEADER_SIZE - TRAILER_SIZE);
		return -EINVAL;
	}
	stored = le_get(b + size - TRAILER_SIZE, 8);
	crc = snap_crc64(0, b, size - TRAILER_SIZE);
	if (stored != crc) {
		snprintf(err, errlen, "checksum mismatch: the file says 0x%016llx, its contents give 0x%016llx",
			 (unsigned long long)stored, (unsigned long long)crc);
		return -EINVAL;
	}
	return 0;
}

/* Takes ownership of `buf` (freed on failure too). */
static int open_owned(uint8_t *buf, size_t size, struct snap_reader **out, char *err, size_t errlen)
{
	struct snap_reader *r;
	int ret;

	*out = NULL;
	ret = check_envelope(buf, size, err, errlen);
	if (ret) {
		free(buf);
		return ret;
	}
	r = calloc(1, sizeof(*r));
	if (r) {
		r->buf = buf;
		r->size = size;
		r->cur = calloc(1, sizeof(*r->cur));
	}
	if (!r || !r->cur) {
		if (!r)
			free(buf);
		snap_reader_free(r);
		snprintf(err, errlen, "out of memory reading the snapshot state");
		return -ENOMEM;
	}
	ret = parse_sections(r, HEADER_SIZE, size - TRAILER_SIZE, err, errlen);
	if (ret) {
		snap_reader_free(r);
		return ret;
	}
	*out = r;
	return 0;
}

int snap_reader_open_mem(const void *buf, size_t len, struct snap_reader **out, char *err, size_t errlen)
{
	uint8_t *copy;

	*out = NULL;
	if (len > SNAP_MAX_FILE)
		return check_envelope(buf, len, err, errlen);
	copy = malloc(len ? len : 1);
	if (!copy) {
		snprintf(err, errlen, "out of memory for a %zu-byte state file", len);
		return -ENOMEM;
	}
	if (len)
		memcpy(copy, buf, len);
	return open_owned(copy, len, out, err, errlen);
}

/* Reads all of `fd`, at most SNAP_MAX_FILE + 1 bytes (one more says "too large"). */
static int read_bounded(int fd, uint8_t **out, size_t *size)
{
	size_t cap = 0, len = 0;
	uint8_t *buf = NULL;

	for (;;) {
		ssize_t n;

		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 65536;
			uint8_t *nb;

			if (ncap > (size_t)SNAP_MAX_FILE + 1)
				ncap = (size_t)SNAP_MAX_FILE + 1;
			if (ncap == cap)
				break; /* SNAP_MAX_FILE + 1 bytes read: enough to refuse it */
			nb = realloc(buf, ncap);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap = ncap;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			free(buf);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	*out = buf;
	*size = len;
	return 0;
}

int snap_reader_open(int fd, struct snap_reader **out, char *err, size_t errlen)
{
	struct stat st;
	uint8_t *buf = NULL;
	size_t size = 0;
	int ret;

	*out = NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > SNAP_MAX_FILE) {
		snprintf(err, errlen, "%lld bytes, more than the %u a state file may have", (long long)st.st_size,
			 SNAP_MAX_FILE);
		return -EFBIG;
	}
	ret = read_bounded(fd, &buf, &size);
	if (ret) {
		snprintf(err, errlen, "reading the state file failed: %s", strerror(-ret));
		return ret;
	}
	if (size > SNAP_MAX_FILE) {
		free(buf);
		snprintf(err, errlen, "more than the %u bytes a state file may have", SNAP_MAX_FILE);
		return -EFBIG;
	}
	return open_owned(buf, size, out, err, errlen);
}

static const struct snap_sec *find(const struct snap_reader *r, uint32_t tag, uint32_t index)
{
	struct snap_sec key = {.tag = tag, .index = index};

	return r->secs ? bsearch(&key, r->secs, r->nsecs, sizeof(*r->secs), cmp_sec) : NULL;
}

unsigned snap_count(const struct snap_reader *r, enum snap_tag tag)
{
	unsigned n = 0;

	for (unsigned i = 0; i < r->nsecs; i++)
		n += r->secs[i].tag == (uint32_t)tag;
	return n;
}

int snap_section(struct snap_reader *r, enum snap_tag tag, uint32_t index, const char *name, struct snap_reader **sec)
{
	const struct snap_sec *s = find(r, tag, index);

	*sec = NULL;
	if (!s)
		return -ENOENT;
	if (name && strcmp(name, s->name) != 0)
		return -EINVAL;
	*r->cur = (struct snap_reader){.p = r->buf + s->off, .pos = 0, .end = s->len, .version = s->version};
	*sec = r->cur;
	return 0;
}

const char *snap_section_name(const struct snap_reader *r, enum snap_tag tag, uint32_t index)
{
	const struct snap_sec *s = find(r, tag, index);

	return s ? s->name : NULL;
}

uint32_t snap_section_version(const struct snap_reader *r, enum snap_tag tag, uint32_t index)
{
	const struct snap_sec *s = find(r, tag, index);

	return s ? s->version : 0;
}

int snap_get(struct snap_reader *sec, void *data, size_t len)
{
	if (len > sec->end - sec->pos) {
		/* Zeroed, so a part that reads every field and checks once never sees stale bytes. */
		if (len)
			memset(data, 0, len);
		sec->error = true;
		return -EINVAL;
	}
	if (len)
		memcpy(data, sec->p + sec->pos, len);
	sec->pos += len;
	return 0;
}

static int get_le(struct snap_reader *sec, uint64_t *v, unsigned n)
{
	uint8_t b[8];
	int ret = snap_get(sec, b, n);

	*v = ret ? 0 : le_get(b, n);
	return ret;
}

int snap_get_u8(struct snap_reader *sec, uint8_t *v)
{
	uint64_t x;
	int ret = get_le(sec, &x, 1);

	*v = (uint8_t)x;
	return ret;
}

int snap_get_u16(struct snap_reader *sec, uint16_t *v)
{
	uint64_t x;
	int ret = get_le(sec, &x, 2);

	*v = (uint16_t)x;
	return ret;
}

int snap_get_u32(struct snap_reader *sec, uint32_t *v)
{
	uint64_t x;
	int ret = get_le(sec, &x, 4);

	*v = (uint32_t)x;
	return ret;
}

int snap_get_u64(struct snap_reader *sec, uint64_t *v)
{
	return get_le(sec, v, 8);
}

uint32_t snap_version(const struct snap_reader *sec)
{
	return sec->version;
}

size_t snap_remaining(const struct snap_reader *sec)
{
	return sec->end - sec->pos;
}

bool snap_reader_error(const struct snap_reader *sec)
{
	return sec->error;
}
