/* aml.c - the AML encoder (include/brisk/aml.h): ACPI 6.3 section 20 byte encodings, bounded and sticky on error. */
#include <errno.h>
#include <string.h>

#include "brisk/aml.h"

/* Opcodes and prefixes (ACPI 6.3 section 20.2, "AML Grammar Definition"). */
#define ZERO_OP		  0x00
#define ONE_OP		  0x01
#define NAME_OP		  0x08
#define BYTE_PREFIX	  0x0a
#define WORD_PREFIX	  0x0b
#define DWORD_PREFIX	  0x0c
#define STRING_PREFIX	  0x0d
#define QWORD_PREFIX	  0x0e
#define SCOPE_OP	  0x10
#define BUFFER_OP	  0x11
#define PACKAGE_OP	  0x12
#define METHOD_OP	  0x14
#define DUAL_NAME_PREFIX  0x2e
#define MULTI_NAME_PREFIX 0x2f
#define EXT_OP_PREFIX	  0x5b
#define DEVICE_OP	  0x82 /* after EXT_OP_PREFIX */
#define ROOT_CHAR	  0x5c
#define PARENT_PREFIX	  0x5e
#define RETURN_OP	  0xa4
#define IF_OP		  0xa0
#define LEQUAL_OP	  0x93
#define NOTIFY_OP	  0x86
#define ARG0_OP		  0x68
#define ONES_OP		  0xff
#define NULL_NAME	  0x00

/* Resource descriptor tags (6.4.2 small, 6.4.3 large). */
#define RES_IRQ_NOFLAGS	  0x22 /* small item 0x04, length 2 */
#define RES_IRQ		  0x23 /* small item 0x04, length 3 */
#define RES_IO		  0x47 /* small item 0x08, length 7 */
#define RES_FIXED_IO	  0x4b /* small item 0x09, length 3 */
#define RES_END_TAG	  0x79 /* small item 0x0f, length 1 */
#define RES_MEMORY32FIXED 0x86
#define RES_EXT_INTERRUPT 0x89

#define PKGLEN_MAX	   0x0fffffffu /* 28 bits (20.2.4) */
#define PKGLEN_RESERVE	   4	       /* the longest PkgLength */
#define BUFSIZE_RESERVE	   5	       /* DWordPrefix + 4: the longest BufferSize a buffer here needs */
#define NAMESEG_LEN	   4
#define IRQ_FLAGS_VALID	   (AML_IRQ_EDGE | AML_IRQ_ACTIVE_LOW | AML_IRQ_SHARED | AML_IRQ_WAKE)
#define INT_FLAGS_VALID	   (AML_INT_CONSUMER | AML_INT_EDGE | AML_INT_ACTIVE_LOW | AML_INT_SHARED | AML_INT_WAKE)
#define FIXED_IO_BASE_MASK 0x3ffu /* 10-bit decode (6.4.2.6) */

void aml_init(struct aml *a, void *buf, size_t cap)
{
	*a = (struct aml){.buf = buf, .cap = cap};
}

int aml_status(const struct aml *a)
{
	return a->err;
}

/* Records the first error; later calls see it and do nothing. */
static void aml_fail(struct aml *a, int err)
{
	if (!a->err)
		a->err = err;
}

/* Room for n more bytes? Sets -ENOSPC otherwise. */
static bool room(struct aml *a, size_t n)
{
	if (a->err)
		return false;
	if (n > a->cap - a->len) {
		aml_fail(a, -ENOSPC);
		return false;
	}
	return true;
}

void aml_bytes(struct aml *a, const void *p, size_t n)
{
	if (!room(a, n))
		return;
	memcpy(a->buf + a->len, p, n);
	a->len += n;
}

static void put8(struct aml *a, uint8_t b)
{
	aml_bytes(a, &b, 1);
}

static void put_le(struct aml *a, uint64_t v, unsigned bytes)
{
	uint8_t b[8];

	for (unsigned i = 0; i < bytes; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	aml_bytes(a, b, bytes);
}

/* ---- names (20.2.2) -------------------------------------------------------------------- */

static bool lead_char(char c)
{
	return (c >= 'A' && c <= 'Z') || c == '_';
}

static bool name_char(char c)
{
	return lead_char(c) || (c >= '0' && c <= '9');
}

/* Length of the NameSeg at s (up to '.' or NUL), or 0 when it is not 1..4 valid characters. */
static size_t seg_len(const char *s)
{
	size_t n = 0;

	if (!lead_char(s[0]))
		return 0;
	while (s[n] && s[n] != '.') {
		if (n == NAMESEG_LEN || !name_char(s[n]))
			return 0;
		n++;
	}
	return n;
}

/* Number of NameSegs in a dotted path (0 for ""), or -1 when one is malformed or there are more than 255. */
static int count_segs(const char *p)
{
	int n = 0;

	if (!*p)
		return 0;
	for (;;) {
		size_t len = seg_len(p);

		if (!len || ++n > 255)
			return -1;
		p += len;
		if (!*p)
			return n;
		p++; /* the '.' */
	}
}

static void put_seg(struct aml *a, const char *s)
{
	char seg[NAMESEG_LEN] = {'_', '_', '_', '_'};
	size_t len = seg_len(s);

	memcpy(seg, s, len);
	aml_bytes(a, seg, NAMESEG_LEN);
}

void aml_name_string(struct aml *a, const char *path)
{
	const char *p = path;
	bool root = *p == '\\';
	int segs;

	if (root)
		p++;
	while (!root && *p == '^')
		p++;
	segs = count_segs(p);
	/* A NullName only after the root: "^" alone or "" name nothing a table here needs. */
	if (segs < 0 || (segs == 0 && !root)) {
		aml_fail(a, -EINVAL);
		return;
	}
	aml_bytes(a, path, (size_t)(p - path)); /* '\\' and '^' are ROOT_CHAR and PARENT_PREFIX themselves */
	if (segs == 0)
		put8(a, NULL_NAME);
	else if (segs == 2)
		put8(a, DUAL_NAME_PREFIX);
	else if (segs > 2) {
		put8(a, MULTI_NAME_PREFIX);
		put8(a, (uint8_t)segs);
	}
	for (int i = 0; i < segs; i++) {
		put_seg(a, p);
		p += seg_len(p) + 1;
	}
}

/* ---- data objects (20.2.3) ------------------------------------------------------------- */

/* The shortest encoding of v into out[0..9); returns its length. */
static size_t encode_int(uint64_t v, uint8_t out[9])
{
	unsigned bytes;

	if (v == 0 || v == 1 || v == UINT64_MAX) {
		out[0] = v == 0 ? ZERO_OP : v == 1 ? ONE_OP : ONES_OP;
		return 1;
	}
	if (v <= 0xff) {
		out[0] = BYTE_PREFIX;
		bytes = 1;
	} else if (v <= 0xffff) {
		out[0] = WORD_PREFIX;
		bytes = 2;
	} else if (v <= 0xffffffff) {
		out[0] = DWORD_PREFIX;
		bytes = 4;
	} else {
		out[0] = QWORD_PREFIX;
		bytes = 8;
	}
	for (unsigned i = 0; i < bytes; i++)
		out[1 + i] = (uint8_t)(v >> (8 * i));
	return 1 + bytes;
}

void aml_int(struct aml *a, uint64_t v)
{
	uint8_t b[9];

	aml_bytes(a, b, encode_int(v, b));
}

void aml_string(struct aml *a, const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] > 0x7f) {
			aml_fail(a, -EINVAL);
			return;
		}
	put8(a, STRING_PREFIX);
	aml_bytes(a, s, n + 1);
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * EISA ID (the ASL EISAID macro, ACPI 6.3 section 19.6): "UUUNNNN", three
 * letters of 5 bits each ('A' = 1) and four hex digits, packed big-endian
 * into 32 bits and stored as a little-endian integer, i.e. byte-swapped.
 */
int64_t aml_eisaid_value(const char *id)
{
	uint32_t be = 0;

	if (strlen(id) != 7)
		return -EINVAL;
	for (int i = 0; i < 3; i++) {
		if (id[i] < 'A' || id[i] > 'Z')
			return -EINVAL;
		be |= (uint32_t)(id[i] - 0x40) << (26 - 5 * i);
	}
	for (int i = 3; i < 7; i++) {
		int d = hex_digit(id[i]);

		if (d < 0)
			return -EINVAL;
		be |= (uint32_t)d << (4 * (6 - i));
	}
	return (int64_t)__builtin_bswap32(be);
}

void aml_eisaid(struct aml *a, const char *id)
{
	int64_t v = aml_eisaid_value(id);

	if (v < 0) {
		aml_fail(a, (int)v);
		return;
	}
	aml_int(a, (uint64_t)v);
}

void aml_name(struct aml *a, const char *path)
{
	put8(a, NAME_OP);
	aml_name_string(a, path);
}

void aml_return(struct aml *a)
{
	put8(a, RETURN_OP);
}

/* ---- PkgLength constructs (20.2.4) ------------------------------------------------------- */

/* Reserves `n` zero bytes and returns where they start. */
static size_t reserve(struct aml *a, size_t n)
{
	size_t mark = a->len;

	if (!room(a, n))
		return 0;
	memset(a->buf + a->len, 0, n);
	a->len += n;
	return mark;
}

/*
 * PkgLength for a body of `body` bytes: the count includes the PkgLength
 * itself. One byte holds up to 63; with 2..4 bytes, the lead byte's bits
 * 7-6 say how many follow, its bits 3-0 are the count's low nibble and each
 * following byte the next 8 bits. Returns its length, 0 when too large.
 */
static size_t encode_pkglen(size_t body, uint8_t out[PKGLEN_RESERVE])
{
	size_t n, total;

	for (n = 1; n <= PKGLEN_RESERVE; n++) {
		total = body + n;
		if (total <= (n == 1 ? 0x3fu : n == 2 ? 0xfffu : n == 3 ? 0xfffffu : PKGLEN_MAX))
			break;
	}
	if (n > PKGLEN_RESERVE)
		return 0;
	if (n == 1) {
		out[0] = (uint8_t)total;
		return 1;
	}
	out[0] = (uint8_t)((n - 1) << 6 | (total & 0xf));
	for (size_t i = 1; i < n; i++)
		out[i] = (uint8_t)(total >> (4 + 8 * (i - 1)));
	return n;
}

/*
 * Closes the construct whose `reserved` bytes start at `mark`: writes
 * PkgLength and `head` (head_len bytes that belong after it, in the body)
 * there and moves the rest of the body down behind them.
 */
static void close_at(struct aml *a, size_t mark, size_t reserved, const uint8_t *head, size_t head_len)
{
	uint8_t pl[PKGLEN_RESERVE];
	size_t tail, n;

	if (a->err)
		return;
	if (mark > a->len || reserved > a->len - mark) {
		aml_fail(a, -EINVAL); /* not a mark of an open construct */
		return;
	}
	tail = a->len - mark - reserved;
	n = encode_pkglen(head_len + tail, pl);
	if (!n) {
		aml_fail(a, -E2BIG);
		return;
	}
	if (n + head_len > reserved) {
		aml_fail(a, -EINVAL);
		return;
	}
	memcpy(a->buf + mark, pl, n);
	if (head_len) /* head is NULL for the plain PkgLength constructs */
		memcpy(a->buf + mark + n, head, head_len);
	memmove(a->buf + mark + n + head_len, a->buf + mark + reserved, tail);
	/* The bytes the body moved off are zeroed: scratch past len never holds stale AML. */
	memset(a->buf + mark + n + head_len + tail, 0, reserved - n - head_len);
	a->len = mark + n + head_len + tail;
}

static size_t open_named(struct aml *a, const uint8_t *op, size_t op_len, const char *path)
{
	size_t mark;

	aml_bytes(a, op, op_len);
	mark = reserve(a, PKGLEN_RESERVE);
	aml_name_string(a, path);
	return mark;
}

size_t aml_scope_begin(struct aml *a, const char *path)
{
	static const uint8_t op[] = {SCOPE_OP};

	return open_named(a, op, sizeof(op), path);
}

size_t aml_device_begin(struct aml *a, const char *path)
{
	static const uint8_t op[] = {EXT_OP_PREFIX, DEVICE_OP};

	return open_named(a, op, sizeof(op), path);
}

/* MethodFlags (20.2.5.2): bits 0-2 ArgCount, bit 3 SerializeFlag, bits 4-7 SyncLevel (0 here). */
size_t aml_method_begin(struct aml *a, const char *path, unsigned nargs, bool serialized)
{
	static const uint8_t op[] = {METHOD_OP};
	size_t mark;

	if (nargs > 7) {
		aml_fail(a, -EINVAL);
		return 0;
	}
	mark = open_named(a, op, sizeof(op), path);
	put8(a, (uint8_t)(nargs | (serialized ? 0x08u : 0)));
	return mark;
}

size_t aml_package_begin(struct aml *a, unsigned count)
{
	size_t mark;

	if (count > 255) {
		aml_fail(a, -E2BIG);
		return 0;
	}
	put8(a, PACKAGE_OP);
	mark = reserve(a, PKGLEN_RESERVE);
	put8(a, (uint8_t)count); /* NumElements */
	return mark;
}

void aml_end(struct aml *a, size_t mark)
{
	close_at(a, mark, PKGLEN_RESERVE, NULL, 0);
}

/* DefBuffer := BufferOp PkgLength BufferSize ByteList; BufferSize is an integer term, written at the end. */
size_t aml_if_begin(struct aml *a)
{
	put8(a, IF_OP);
	return reserve(a, PKGLEN_RESERVE);
}

void aml_lequal(struct aml *a)
{
	put8(a, LEQUAL_OP);
}

void aml_arg(struct aml *a, unsigned n)
{
	if (n > 6) {
		aml_fail(a, -EINVAL);
		return;
	}
	put8(a, (uint8_t)(ARG0_OP + n));
}

void aml_notify(struct aml *a)
{
	put8(a, NOTIFY_OP);
}

size_t aml_buffer_begin(struct aml *a)
{
	put8(a, BUFFER_OP);
	return reserve(a, PKGLEN_RESERVE + BUFSIZE_RESERVE);
}

void aml_buffer_end(struct aml *a, size_t mark)
{
	uint8_t size[9];
	size_t data;

	if (a->err)
		return;
	if (mark > a->len || PKGLEN_RESERVE + BUFSIZE_RESERVE > a->len - mark) {
		aml_fail(a, -EINVAL);
		return;
	}
	data = a->len - mark - PKGLEN_RESERVE - BUFSIZE_RESERVE;
	if (data > UINT32_MAX) {
		aml_fail(a, -E2BIG);
		return;
	}
	close_at(a, mark, PKGLEN_RESERVE + BUFSIZE_RESERVE, size, encode_int(data, size));
}

size_t aml_resource_begin(struct aml *a)
{
	return aml_buffer_begin(a);
}

/*
 * End Tag (6.4.2.9): checksum 0, which "is treated as if the checksum
 * operation succeeded" — what iasl writes, and what Linux expects (it never
 * checks it).
 */
void aml_resource_end(struct aml *a, size_t mark)
{
	static const uint8_t end[] = {RES_END_TAG, 0};

	aml_bytes(a, end, sizeof(end));
	aml_buffer_end(a, mark);
}

/* ---- resource descriptors (6.4) ---------------------------------------------------------- */

/* I/O Port Descriptor (6.4.2.5): information bit 0 set = 16-bit decode. */
void aml_io(struct aml *a, bool decode16, uint16_t min, uint16_t max, uint8_t align, uint8_t len)
{
	put8(a, RES_IO);
	put8(a, decode16 ? 1 : 0);
	put_le(a, min, 2);
	put_le(a, max, 2);
	put8(a, align);
	put8(a, len);
}

void aml_fixed_io(struct aml *a, uint16_t base, uint8_t len)
{
	if (base & ~FIXED_IO_BASE_MASK) {
		aml_fail(a, -EINVAL);
		return;
	}
	put8(a, RES_FIXED_IO);
	put_le(a, base, 2);
	put8(a, len);
}

/* IRQ Descriptor (6.4.2.1): a 16-bit mask of ISA IRQs, then (3-byte form) the flags. */
void aml_irq_noflags(struct aml *a, unsigned irq)
{
	if (irq > 15) {
		aml_fail(a, -EINVAL);
		return;
	}
	put8(a, RES_IRQ_NOFLAGS);
	put_le(a, 1u << irq, 2);
}

void aml_irq(struct aml *a, unsigned irq, unsigned flags)
{
	if (irq > 15 || (flags & ~IRQ_FLAGS_VALID)) {
		aml_fail(a, -EINVAL);
		return;
	}
	put8(a, RES_IRQ);
	put_le(a, 1u << irq, 2);
	put8(a, (uint8_t)flags);
}

/* 32-Bit Fixed Memory Range Descriptor (6.4.3.4): length 9, information bit 0 = read-write. */
void aml_memory32_fixed(struct aml *a, bool rw, uint32_t base, uint32_t len)
{
	put8(a, RES_MEMORY32FIXED);
	put_le(a, 9, 2);
	put8(a, rw ? 1 : 0);
	put_le(a, base, 4);
	put_le(a, len, 4);
}

/* Extended Interrupt Descriptor (6.4.3.6): flags, table length 1, one 32-bit interrupt number, no source. */
void aml_interrupt(struct aml *a, unsigned flags, uint32_t gsi)
{
	if (flags & ~INT_FLAGS_VALID) {
		aml_fail(a, -EINVAL);
		return;
	}
	put8(a, RES_EXT_INTERRUPT);
	put_le(a, 6, 2);
	put8(a, (uint8_t)flags);
	put8(a, 1);
	put_le(a, gsi, 4);
}
