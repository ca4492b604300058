/* acpi.c - the test guests' ACPI reader: the RSDP by the legacy scan, table checksums, the XSDT, an AML walker. */
#include "guest.h"

/*
 * Everything here reads guest-physical memory below 4 GiB through the
 * identity map (phys_read*), bounded by the lengths the tables give and by
 * ACPI_TABLE_MAX. Nothing is initialised in static data: conf-bzimage's
 * payload is position-independent and has no relocations (guests.mk).
 */

#define RSDP_SIG_LO	0x20445352 /* "RSD " */
#define RSDP_SIG_HI	0x20525450 /* "PTR " */
#define RSDP_V1_LEN	20	   /* the ACPI 1.0 part, covered by the first checksum */
#define RSDP_REVISION	15
#define XSDT_ENTRY_SIZE 8
#define FOUR_GIB	0x100000000ULL

/* AML opcodes and name prefixes (ACPI 6.3 sections 20.2.2-20.2.5). */
#define AML_ZERO       0x00
#define AML_ONE	       0x01
#define AML_NAME       0x08
#define AML_BYTE       0x0a
#define AML_WORD       0x0b
#define AML_DWORD      0x0c
#define AML_STRING     0x0d
#define AML_QWORD      0x0e
#define AML_SCOPE      0x10
#define AML_BUFFER     0x11
#define AML_PACKAGE    0x12
#define AML_METHOD     0x14
#define AML_DUAL_NAME  0x2e
#define AML_MULTI_NAME 0x2f
#define AML_EXT	       0x5b
#define AML_ROOT       0x5c /* '\' */
#define AML_PARENT     0x5e /* '^' */
#define AML_DEVICE     0x82 /* after AML_EXT */
#define AML_ONES       0xff
#define AML_MAX_DEPTH  8 /* Scope/Device nesting followed */
#define NAME_SEG_LEN   4

int acpi_rsdp_valid(uintptr_t p)
{
	if (phys_read32(p) != RSDP_SIG_LO || phys_read32(p + 4) != RSDP_SIG_HI || phys_sum(p, RSDP_V1_LEN))
		return 0;
	/* Revision 2 and later: the extended checksum over the 36-byte structure (Linux acpi_tb_validate_rsdp). */
	return phys_read8(p + RSDP_REVISION) < 2 || phys_sum(p, ACPI_RSDP_LEN) == 0;
}

uint64_t acpi_find_rsdp(void)
{
	for (uintptr_t p = ACPI_RSDP_SCAN; p < ACPI_RSDP_SCAN_END; p += 16)
		if (acpi_rsdp_valid(p))
			return p;
	return 0;
}

int acpi_sig_is(uint64_t p, const char *sig)
{
	for (unsigned int i = 0; i < NAME_SEG_LEN; i++)
		if (phys_read8((uintptr_t)p + i) != (uint8_t)sig[i])
			return 0;
	return 1;
}

uint32_t acpi_table_len(uint64_t p)
{
	uint32_t len;

	if (!p || p + ACPI_HEADER_LEN > FOUR_GIB)
		return 0;
	len = phys_read32((uintptr_t)p + 4);
	return len >= ACPI_HEADER_LEN && len <= ACPI_TABLE_MAX && p + len <= FOUR_GIB ? len : 0;
}

int acpi_table_ok(uint64_t p, const char *sig)
{
	uint32_t len = acpi_table_len(p);

	return len && (!sig || acpi_sig_is(p, sig)) && phys_sum((uintptr_t)p, len) == 0;
}

unsigned int acpi_xsdt_count(uint64_t xsdt)
{
	uint32_t len = acpi_table_len(xsdt);

	return len ? (len - ACPI_HEADER_LEN) / XSDT_ENTRY_SIZE : 0;
}

uint64_t acpi_xsdt_entry(uint64_t xsdt, unsigned int i)
{
	return phys_read64((uintptr_t)xsdt + ACPI_HEADER_LEN + i * XSDT_ENTRY_SIZE);
}

uint64_t acpi_xsdt_find(uint64_t xsdt, const char *sig, unsigned int *count)
{
	unsigned int n = acpi_xsdt_count(xsdt), seen = 0;
	uint64_t found = 0;

	for (unsigned int i = 0; i < n; i++) {
		uint64_t t = acpi_xsdt_entry(xsdt, i);

		if (acpi_table_len(t) && acpi_sig_is(t, sig)) {
			if (!seen++)
				found = t;
		}
	}
	if (count)
		*count = seen;
	return found;
}

/* ---- AML ------------------------------------------------------------------------------- */

size_t acpi_aml_pkglen(const uint8_t *p, size_t n, size_t *value)
{
	size_t follow, v;

	if (!n)
		return 0;
	follow = p[0] >> 6;
	if (!follow) {
		*value = p[0] & 0x3f;
		return 1;
	}
	/* With following bytes, bits 5:4 of the lead byte are reserved (20.2.4). */
	if (n < 1 + follow || (p[0] & 0x30))
		return 0;
	v = p[0] & 0x0f;
	for (size_t i = 0; i < follow; i++)
		v |= (size_t)p[1 + i] << (4 + 8 * i);
	*value = v;
	return 1 + follow;
}

size_t acpi_aml_int(const uint8_t *p, size_t n, uint64_t *v)
{
	size_t len;

	if (!n)
		return 0;
	switch (p[0]) {
	case AML_ZERO:
	case AML_ONE:
		*v = p[0];
		return 1;
	case AML_ONES:
		*v = ~0ULL;
		return 1;
	case AML_BYTE:
		len = 1;
		break;
	case AML_WORD:
		len = 2;
		break;
	case AML_DWORD:
		len = 4;
		break;
	case AML_QWORD:
		len = 8;
		break;
	default:
		return 0;
	}
	if (n < 1 + len)
		return 0;
	*v = 0;
	for (size_t i = len; i > 0; i--)
		*v = *v << 8 | p[i];
	return 1 + len;
}

/* A NameString (20.2.2): root or parent prefixes, then a NullName, one NameSeg, a dual or a multi name. */
static size_t name_len(const uint8_t *p, size_t n)
{
	size_t i = 0, segs = 1;

	if (i < n && p[i] == AML_ROOT)
		i++;
	else
		while (i < n && p[i] == AML_PARENT)
			i++;
	if (i >= n)
		return 0;
	if (p[i] == 0)
		return i + 1;
	if (p[i] == AML_DUAL_NAME) {
		segs = 2;
		i++;
	} else if (p[i] == AML_MULTI_NAME) {
		if (i + 1 >= n)
			return 0;
		segs = p[i + 1];
		i += 2;
	}
	return segs && i + NAME_SEG_LEN * segs <= n ? i + NAME_SEG_LEN * segs : 0;
}

/* A DataRefObject as Name() holds it: an integer, a string, a buffer or a package. */
static size_t data_len(const uint8_t *p, size_t n)
{
	uint64_t v;
	size_t k, len;

	if (!n)
		return 0;
	if (p[0] == AML_STRING) {
		for (size_t i = 1; i < n; i++)
			if (p[i] == 0)
				return i + 1;
		return 0;
	}
	if (p[0] == AML_BUFFER || p[0] == AML_PACKAGE) {
		k = acpi_aml_pkglen(p + 1, n - 1, &len);
		return k && len >= k && len <= n - 1 ? 1 + len : 0;
	}
	return acpi_aml_int(p, n, &v);
}

struct aml_walk {
	struct acpi_aml_device *dev;
	unsigned int max, found;
	const char *why;
};

static size_t walk_fail(struct aml_walk *w, const char *why)
{
	if (!w->why)
		w->why = why;
	return 0;
}

static int walk_list(struct aml_walk *w, const uint8_t *p, size_t n, unsigned int depth);

/* Scope or Device: `op` opcode bytes, PkgLength, NameString, TermList; a Device is recorded. */
static size_t walk_nested(struct aml_walk *w, const uint8_t *p, size_t n, size_t op, unsigned int depth)
{
	size_t k, v, nl, end;

	if (depth >= AML_MAX_DEPTH)
		return walk_fail(w, "Scope/Device nested too deep");
	k = acpi_aml_pkglen(p + op, n - op, &v);
	if (!k || v < k || v > n - op)
		return walk_fail(w, "Scope/Device PkgLength outside its parent");
	end = op + v;
	nl = name_len(p + op + k, end - op - k);
	if (!nl)
		return walk_fail(w, "Scope/Device without a NameString");
	if (op == 2) {
		if (w->found < w->max) {
			struct acpi_aml_device *d = &w->dev[w->found];

			memset(d->name, 0, sizeof(d->name));
			if (nl >= NAME_SEG_LEN)
				memcpy(d->name, p + op + k + nl - NAME_SEG_LEN, NAME_SEG_LEN);
			d->body = p + op + k + nl;
			d->len = end - (op + k + nl);
		}
		w->found++;
	}
	return walk_list(w, p + op + k + nl, end - (op + k + nl), depth + 1) ? 0 : end;
}

/* One term of a TermList: its length, or 0 (w->why says why). Only what brisk's DSDT holds is known. */
static size_t walk_term(struct aml_walk *w, const uint8_t *p, size_t n, unsigned int depth)
{
	size_t k, v, nl, d;

	switch (p[0]) {
	case AML_NAME:
		nl = name_len(p + 1, n - 1);
		d = nl ? data_len(p + 1 + nl, n - 1 - nl) : 0;
		return d ? 1 + nl + d : walk_fail(w, "Name with a malformed name or data object");
	case AML_METHOD: /* code: skipped whole */
		k = acpi_aml_pkglen(p + 1, n - 1, &v);
		return k && v >= k && v <= n - 1 ? 1 + v : walk_fail(w, "Method PkgLength outside its parent");
	case AML_SCOPE:
		return walk_nested(w, p, n, 1, depth);
	case AML_EXT:
		if (n >= 2 && p[1] == AML_DEVICE)
			return walk_nested(w, p, n, 2, depth);
		return walk_fail(w, "an extended opcode other than Device");
	default:
		return walk_fail(w, "an opcode other than Name, Scope, Device or Method");
	}
}

static int walk_list(struct aml_walk *w, const uint8_t *p, size_t n, unsigned int depth)
{
	size_t at = 0, used;

	while (at < n) {
		used = walk_term(w, p + at, n - at, depth);
		if (!used)
			return -1;
		at += used;
	}
	return 0;
}

int acpi_aml_devices(const uint8_t *aml, size_t len, struct acpi_aml_device *dev, unsigned int max, const char **why)
{
	struct aml_walk w;

	memset(&w, 0, sizeof(w));
	w.dev = dev;
	w.max = max;
	if (walk_list(&w, aml, len, 0)) {
		*why = w.why;
		return -1;
	}
	return (int)w.found;
}

const uint8_t *acpi_aml_find_name(const uint8_t *p, size_t n, const char *seg, size_t *objlen)
{
	struct aml_walk w;
	size_t at = 0, used;

	memset(&w, 0, sizeof(w));
	while (at < n) {
		used = walk_term(&w, p + at, n - at, 0);
		if (!used)
			return NULL;
		if (p[at] == AML_NAME && name_len(p + at + 1, n - at - 1) == NAME_SEG_LEN &&
		    !memcmp(p + at + 1, seg, NAME_SEG_LEN)) {
			*objlen = used - 1 - NAME_SEG_LEN;
			return p + at + 1 + NAME_SEG_LEN;
		}
		at += used;
	}
	return NULL;
}
