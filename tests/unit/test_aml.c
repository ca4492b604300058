/* test_aml.c - the AML encoder against iasl's bytes for the same ASL, its bounds and its errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "brisk/aml.h"

/*
 * Golden bytes: each ASL fragment below was compiled by iasl 20200925
 * (Debian 12 acpica-tools) inside
 *   DefinitionBlock ("x.aml", "DSDT", 2, "BRISK ", "BRISKVM ", 1) { ... }
 * with its default options (names with -on, see test_names), and the bytes
 * after the 36-byte table header copied here.
 */

/*
 *  Name (INT0, Zero)  Name (INT1, One)  Name (INT2, 0x05)  Name (INT3, 0xFF)
 *  Name (INT4, 0x0100)  Name (INT5, 0xFFFF)  Name (INT6, 0x00010000)
 *  Name (INT7, 0xFFFFFFFF)  Name (INT8, 0x0000000100000000)
 *  Name (INT9, 0xFFFFFFFFFFFFFFFE)  Name (INTA, Ones)
 */
static const uint8_t gold_ints[] = {
    0x08, 0x49, 0x4e, 0x54, 0x30, 0x00, 0x08, 0x49, 0x4e, 0x54, 0x31, 0x01, 0x08, 0x49, 0x4e, 0x54,
    0x32, 0x0a, 0x05, 0x08, 0x49, 0x4e, 0x54, 0x33, 0x0a, 0xff, 0x08, 0x49, 0x4e, 0x54, 0x34, 0x0b,
    0x00, 0x01, 0x08, 0x49, 0x4e, 0x54, 0x35, 0x0b, 0xff, 0xff, 0x08, 0x49, 0x4e, 0x54, 0x36, 0x0c,
    0x00, 0x00, 0x01, 0x00, 0x08, 0x49, 0x4e, 0x54, 0x37, 0x0c, 0xff, 0xff, 0xff, 0xff, 0x08, 0x49,
    0x4e, 0x54, 0x38, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x08, 0x49, 0x4e, 0x54,
    0x39, 0x0e, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x08, 0x49, 0x4e, 0x54, 0x41, 0xff,
};

/* Name (STR0, "LNRO0005")  Name (STR1, "") */
static const uint8_t gold_strings[] = {
    0x08, 0x53, 0x54, 0x52, 0x30, 0x0d, 0x4c, 0x4e, 0x52, 0x4f, 0x30,
    0x30, 0x30, 0x35, 0x00, 0x08, 0x53, 0x54, 0x52, 0x31, 0x0d, 0x00,
};

/*
 * Name (EIS0, EisaId ("PNP0501"))  Name (EIS1, EisaId ("PNP0303"))
 * Name (EIS2, EisaId ("PNP0B00"))  Name (EIS3, EisaId ("PNP0000"))
 * Name (EIS4, EisaId ("ZZZFFFF"))
 * EIS3 fits 16 bits, so iasl writes it with WordPrefix.
 */
static const uint8_t gold_eisaid[] = {
    0x08, 0x45, 0x49, 0x53, 0x30, 0x0c, 0x41, 0xd0, 0x05, 0x01, 0x08, 0x45, 0x49, 0x53, 0x31, 0x0c,
    0x41, 0xd0, 0x03, 0x03, 0x08, 0x45, 0x49, 0x53, 0x32, 0x0c, 0x41, 0xd0, 0x0b, 0x00, 0x08, 0x45,
    0x49, 0x53, 0x33, 0x0b, 0x41, 0xd0, 0x08, 0x45, 0x49, 0x53, 0x34, 0x0c, 0x6b, 0x5a, 0xff, 0xff,
};

/*
 * Compiled with iasl -on (no name optimisation, which would drop the root
 * prefixes at the root):
 *   Scope (\_SB) { Device (PCI0) { Device (LPC) { } } }
 *   Name (\_SB.X, One)
 *   Name (\_SB.PCI0.LPC.Y, One)
 *   Scope (\_SB.PCI0) { Name (^Z, One) }
 *   Scope (\) { Name (W, Zero) }
 */
static const uint8_t gold_names[] = {
    0x10, 0x14, 0x5c, 0x5f, 0x53, 0x42, 0x5f, 0x5b, 0x82, 0x0c, 0x50, 0x43, 0x49, 0x30, 0x5b, 0x82, 0x05,
    0x4c, 0x50, 0x43, 0x5f, 0x08, 0x5c, 0x2e, 0x5f, 0x53, 0x42, 0x5f, 0x58, 0x5f, 0x5f, 0x5f, 0x01, 0x08,
    0x5c, 0x2f, 0x04, 0x5f, 0x53, 0x42, 0x5f, 0x50, 0x43, 0x49, 0x30, 0x4c, 0x50, 0x43, 0x5f, 0x59, 0x5f,
    0x5f, 0x5f, 0x01, 0x10, 0x12, 0x5c, 0x2e, 0x5f, 0x53, 0x42, 0x5f, 0x50, 0x43, 0x49, 0x30, 0x08, 0x5e,
    0x5a, 0x5f, 0x5f, 0x5f, 0x01, 0x10, 0x09, 0x5c, 0x00, 0x08, 0x57, 0x5f, 0x5f, 0x5f, 0x00,
};

/*
 * Device (COM1)
 * {
 *     Name (_HID, EisaId ("PNP0501"))
 *     Name (_UID, One)
 *     Name (_CRS, ResourceTemplate ()
 *     {
 *         IO (Decode16, 0x03F8, 0x03F8, 0x00, 0x08)
 *         IRQNoFlags () {4}
 *     })
 * }
 */
static const uint8_t gold_com1[] = {
    0x5b, 0x82, 0x2b, 0x43, 0x4f, 0x4d, 0x31, 0x08, 0x5f, 0x48, 0x49, 0x44, 0x0c, 0x41, 0xd0,
    0x05, 0x01, 0x08, 0x5f, 0x55, 0x49, 0x44, 0x01, 0x08, 0x5f, 0x43, 0x52, 0x53, 0x11, 0x10,
    0x0a, 0x0d, 0x47, 0x01, 0xf8, 0x03, 0xf8, 0x03, 0x00, 0x08, 0x22, 0x10, 0x00, 0x79, 0x00,
};

/*
 * Method (_STA, 0, NotSerialized) { Return (0x0F) }
 * Method (MPKG, 2, Serialized) { Return (Package (0x02) { One, "X" }) }
 */
static const uint8_t gold_method[] = {
    0x14, 0x09, 0x5f, 0x53, 0x54, 0x41, 0x00, 0xa4, 0x0a, 0x0f, 0x14, 0x0e, 0x4d,
    0x50, 0x4b, 0x47, 0x0a, 0xa4, 0x12, 0x06, 0x02, 0x01, 0x0d, 0x58, 0x00,
};

/* Name (PKG, Package (0x03) { 0x05, Package (0x01) { "A" }, Zero }) */
static const uint8_t gold_package[] = {
    0x08, 0x50, 0x4b, 0x47, 0x5f, 0x12, 0x0b, 0x03, 0x0a, 0x05, 0x12, 0x05, 0x01, 0x0d, 0x41, 0x00, 0x00,
};

/* Name (BUF, Buffer (0x03) { 0x01, 0x02, 0x03 }) */
static const uint8_t gold_buffer[] = {
    0x08, 0x42, 0x55, 0x46, 0x5f, 0x11, 0x06, 0x0a, 0x03, 0x01, 0x02, 0x03,
};

/*
 * Name (_CRS, ResourceTemplate ()
 * {
 *     IO (Decode16, 0x03F8, 0x03F8, 0x00, 0x08)
 *     IO (Decode10, 0x0070, 0x0071, 0x01, 0x02)
 *     FixedIO (0x0060, 0x01)
 *     IRQNoFlags () {4}
 *     IRQ (Level, ActiveLow, Shared) {9}
 *     IRQ (Edge, ActiveHigh, Exclusive) {15}
 *     Memory32Fixed (ReadWrite, 0xD0001000, 0x00001000)
 *     Memory32Fixed (ReadOnly, 0xFEC00000, 0x00001000)
 *     Interrupt (ResourceConsumer, Edge, ActiveHigh, Exclusive, ,, ) {5}
 *     Interrupt (ResourceConsumer, Level, ActiveLow, Shared, ,, ) {23}
 * })
 * 75 bytes of buffer: a two-byte PkgLength (0x4f 0x04).
 */
static const uint8_t gold_resources[] = {
    0x08, 0x5f, 0x43, 0x52, 0x53, 0x11, 0x4f, 0x04, 0x0a, 0x4b, 0x47, 0x01, 0xf8, 0x03, 0xf8, 0x03, 0x00,
    0x08, 0x47, 0x00, 0x70, 0x00, 0x71, 0x00, 0x01, 0x02, 0x4b, 0x60, 0x00, 0x01, 0x22, 0x10, 0x00, 0x23,
    0x00, 0x02, 0x18, 0x23, 0x00, 0x80, 0x01, 0x86, 0x09, 0x00, 0x01, 0x00, 0x10, 0x00, 0xd0, 0x00, 0x10,
    0x00, 0x00, 0x86, 0x09, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xfe, 0x00, 0x10, 0x00, 0x00, 0x89, 0x06, 0x00,
    0x03, 0x01, 0x05, 0x00, 0x00, 0x00, 0x89, 0x06, 0x00, 0x0d, 0x01, 0x17, 0x00, 0x00, 0x00, 0x79, 0x00,
};

#define BUF_MAX 4096

static uint8_t out[BUF_MAX];

static void expect(const struct aml *a, const uint8_t *gold, size_t len)
{
	assert_int_equal(aml_status(a), 0);
	assert_int_equal(a->len, len);
	assert_memory_equal(a->buf, gold, len);
}

static void name_int(struct aml *a, const char *name, uint64_t v)
{
	aml_name(a, name);
	aml_int(a, v);
}

static void test_ints(void **state)
{
	struct aml a;

	(void)state;
	aml_init(&a, out, sizeof(out));
	name_int(&a, "INT0", 0);
	name_int(&a, "INT1", 1);
	name_int(&a, "INT2", 5);
	name_int(&a, "INT3", 0xff);
	name_int(&a, "INT4", 0x100);
	name_int(&a, "INT5", 0xffff);
	name_int(&a, "INT6", 0x10000);
	name_int(&a, "INT7", 0xffffffff);
	name_int(&a, "INT8", 0x100000000ULL);
	name_int(&a, "INT9", 0xfffffffffffffffeULL);
	name_int(&a, "INTA", UINT64_MAX);
	expect(&a, gold_ints, sizeof(gold_ints));
}

static void test_strings(void **state)
{
	struct aml a;

	(void)state;
	aml_init(&a, out, sizeof(out));
	aml_name(&a, "STR0");
	aml_string(&a, "LNRO0005");
	aml_name(&a, "STR1");
	aml_string(&a, "");
	expect(&a, gold_strings, sizeof(gold_strings));
}

static void test_eisaid(void **state)
{
	static const char *const ids[] = {"PNP0501", "PNP0303", "PNP0B00", "PNP0000", "ZZZFFFF"};
	static const char *const bad[] = {"pnp0501", "PNP050", "PNP05011", "PNP05G1", "PN@0501", "", "PNP050f"};
	struct aml a;
	char name[5];

	(void)state;
	aml_init(&a, out, sizeof(out));
	for (unsigned i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "EIS%u", i);
		aml_name(&a, name);
		aml_eisaid(&a, ids[i]);
	}
	expect(&a, gold_eisaid, sizeof(gold_eisaid));
	assert_int_equal(aml_eisaid_value("PNP0501"), 0x0105d041);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(aml_eisaid_value(bad[i]), -EINVAL);
		aml_init(&a, out, sizeof(out));
		aml_eisaid(&a, bad[i]);
		assert_int_equal(aml_status(&a), -EINVAL);
		assert_int_equal(a.len, 0);
	}
}

static void test_names(void **state)
{
	struct aml a;
	size_t sb, pci, lpc, s;

	(void)state;
	aml_init(&a, out, sizeof(out));
	sb = aml_scope_begin(&a, "\\_SB");
	pci = aml_device_begin(&a, "PCI0");
	lpc = aml_device_begin(&a, "LPC");
	aml_end(&a, lpc);
	aml_end(&a, pci);
	aml_end(&a, sb);
	name_int(&a, "\\_SB.X", 1);
	name_int(&a, "\\_SB.PCI0.LPC.Y", 1);
	s = aml_scope_begin(&a, "\\_SB.PCI0");
	name_int(&a, "^Z", 1);
	aml_end(&a, s);
	s = aml_scope_begin(&a, "\\");
	name_int(&a, "W", 0);
	aml_end(&a, s);
	expect(&a, gold_names, sizeof(gold_names));
}

static void test_bad_names(void **state)
{
	static const char *const bad[] = {"",	  "^",	 "com1",  "1ABC", "ABCDE",	 "A..B",
					  "A.",	  ".A",	 "\\\\A", "\\^A", "A^",		 "A-B",
					  "_SB.", "\\.", "^^\\A", "A B",  "\\_SB.ABCDE", "\\_SB..X"};
	struct aml a;

	(void)state;
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		aml_init(&a, out, sizeof(out));
		aml_name_string(&a, bad[i]);
		assert_int_equal(aml_status(&a), -EINVAL);
		assert_int_equal(a.len, 0);
	}
	/* 255 segments are the most a MultiNamePath counts. */
	{
		static char path[256 * 5 + 1];
		size_t n = 0;

		for (unsigned i = 0; i < 256; i++)
			n += (size_t)snprintf(path + n, sizeof(path) - n, "%sA", i ? "." : "");
		aml_init(&a, out, sizeof(out));
		aml_name_string(&a, path);
		assert_int_equal(aml_status(&a), -EINVAL);
		path[n - 2] = '\0'; /* 255 segments */
		aml_init(&a, out, sizeof(out));
		aml_name_string(&a, path);
		assert_int_equal(aml_status(&a), 0);
		assert_int_equal(a.len, 2 + 255 * 4);
		assert_int_equal(out[0], 0x2f);
		assert_int_equal(out[1], 255);
	}
}

/* The COM1 device of the DSDT, as acpi.c writes it. */
static void put_com1(struct aml *a)
{
	size_t dev = aml_device_begin(a, "COM1"), res;

	aml_name(a, "_HID");
	aml_eisaid(a, "PNP0501");
	aml_name(a, "_UID");
	aml_int(a, 1);
	aml_name(a, "_CRS");
	res = aml_resource_begin(a);
	aml_io(a, true, 0x3f8, 0x3f8, 0, 8);
	aml_irq_noflags(a, 4);
	aml_resource_end(a, res);
	aml_end(a, dev);
}

static void test_device(void **state)
{
	struct aml a;

	(void)state;
	aml_init(&a, out, sizeof(out));
	put_com1(&a);
	expect(&a, gold_com1, sizeof(gold_com1));
}

static void test_method(void **state)
{
	struct aml a;
	size_t m, p;

	(void)state;
	aml_init(&a, out, sizeof(out));
	m = aml_method_begin(&a, "_STA", 0, false);
	aml_return(&a);
	aml_int(&a, 0x0f);
	aml_end(&a, m);
	m = aml_method_begin(&a, "MPKG", 2, true);
	aml_return(&a);
	p = aml_package_begin(&a, 2);
	aml_int(&a, 1);
	aml_string(&a, "X");
	aml_end(&a, p);
	aml_end(&a, m);
	expect(&a, gold_method, sizeof(gold_method));
}

/*
 *  Method (_EVT, 1, Serialized) { If ((Arg0 == 0x03)) { Notify (VGEN, 0x80) } }
 * (inside Device (GED) beside Device (VGEN) in \_SB: iasl writes the relative VGEN)
 */
static const uint8_t gold_if_notify[] = {
    0x14, 0x13, 0x5f, 0x45, 0x56, 0x54, 0x09, 0xa0, 0x0c, 0x93,
    0x68, 0x0a, 0x03, 0x86, 0x56, 0x47, 0x45, 0x4e, 0x0a, 0x80,
};

static void test_if_notify(void **state)
{
	struct aml a;
	size_t m, c;

	(void)state;
	aml_init(&a, out, sizeof(out));
	m = aml_method_begin(&a, "_EVT", 1, true);
	c = aml_if_begin(&a);
	aml_lequal(&a);
	aml_arg(&a, 0);
	aml_int(&a, 3);
	aml_notify(&a);
	aml_name_string(&a, "VGEN");
	aml_int(&a, 0x80);
	aml_end(&a, c);
	aml_end(&a, m);
	expect(&a, gold_if_notify, sizeof(gold_if_notify));
	aml_init(&a, out, sizeof(out));
	aml_arg(&a, 7); /* Arg0..Arg6 only */
	assert_int_equal(aml_status(&a), -EINVAL);
}

static void test_package(void **state)
{
	struct aml a;
	size_t p, q;

	(void)state;
	aml_init(&a, out, sizeof(out));
	aml_name(&a, "PKG");
	p = aml_package_begin(&a, 3);
	aml_int(&a, 5);
	q = aml_package_begin(&a, 1);
	aml_string(&a, "A");
	aml_end(&a, q);
	aml_int(&a, 0);
	aml_end(&a, p);
	expect(&a, gold_package, sizeof(gold_package));
}

static void test_buffer(void **state)
{
	static const uint8_t data[] = {1, 2, 3};
	struct aml a;
	size_t b;

	(void)state;
	aml_init(&a, out, sizeof(out));
	aml_name(&a, "BUF");
	b = aml_buffer_begin(&a);
	aml_bytes(&a, data, sizeof(data));
	aml_buffer_end(&a, b);
	expect(&a, gold_buffer, sizeof(gold_buffer));
}

static void test_resources(void **state)
{
	struct aml a;
	size_t r;

	(void)state;
	aml_init(&a, out, sizeof(out));
	aml_name(&a, "_CRS");
	r = aml_resource_begin(&a);
	aml_io(&a, true, 0x3f8, 0x3f8, 0, 8);
	aml_io(&a, false, 0x70, 0x71, 1, 2);
	aml_fixed_io(&a, 0x60, 1);
	aml_irq_noflags(&a, 4);
	aml_irq(&a, 9, AML_IRQ_ACTIVE_LOW | AML_IRQ_SHARED);
	aml_irq(&a, 15, AML_IRQ_EDGE);
	aml_memory32_fixed(&a, true, 0xd0001000, 0x1000);
	aml_memory32_fixed(&a, false, 0xfec00000, 0x1000);
	aml_interrupt(&a, AML_INT_CONSUMER | AML_INT_EDGE, 5);
	aml_interrupt(&a, AML_INT_CONSUMER | AML_INT_ACTIVE_LOW | AML_INT_SHARED, 23);
	aml_resource_end(&a, r);
	expect(&a, gold_resources, sizeof(gold_resources));
}

/*
 * PkgLength at each encoding boundary (ACPI 6.3 section 20.2.4): iasl's
 * Name (Bxxx, Buffer () { 0xAA x N }) starts with these bytes (NameOp and
 * the name skipped): N = 60 is the longest with a one-byte PkgLength,
 * 4090 the longest with two. The 4-byte form is checked by decoding.
 */
static void buffer_of(struct aml *a, size_t n)
{
	static uint8_t fill[8192];
	size_t b = aml_buffer_begin(a);

	memset(fill, 0xaa, sizeof(fill));
	while (n) {
		size_t k = n < sizeof(fill) ? n : sizeof(fill);

		aml_bytes(a, fill, k);
		n -= k;
	}
	aml_buffer_end(a, b);
}

static void test_pkglen_boundaries(void **state)
{
	static const struct {
		size_t n, len;
		uint8_t head[6];
	} cases[] = {
	    {60, 64, {0x11, 0x3f, 0x0a, 0x3c, 0xaa, 0xaa}},
	    {61, 66, {0x11, 0x41, 0x04, 0x0a, 0x3d, 0xaa}},
	    {4090, 4096, {0x11, 0x4f, 0xff, 0x0b, 0xfa, 0x0f}},
	    {4091, 4098, {0x11, 0x81, 0x00, 0x01, 0x0b, 0xfb}},
	};
	size_t cap = (1u << 21) + 64;
	uint8_t *big = malloc(cap);
	struct aml a;
	uint32_t total;

	(void)state;
	assert_non_null(big);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		aml_init(&a, big, cap);
		buffer_of(&a, cases[i].n);
		assert_int_equal(aml_status(&a), 0);
		assert_int_equal(a.len, cases[i].len);
		assert_memory_equal(big, cases[i].head, sizeof(cases[i].head));
	}
	/* 2 MiB: BufferOp, a 4-byte PkgLength (0xc0 | low nibble, then 3 bytes), DWordPrefix size, data. */
	aml_init(&a, big, cap);
	buffer_of(&a, 1u << 21);
	assert_int_equal(aml_status(&a), 0);
	assert_int_equal(a.len, 1 + 4 + 5 + (1u << 21));
	assert_int_equal(big[1] >> 6, 3);
	total = (uint32_t)(big[1] & 0xf) | (uint32_t)big[2] << 4 | (uint32_t)big[3] << 12 | (uint32_t)big[4] << 20;
	assert_int_equal(total, 4 + 5 + (1u << 21));
	assert_int_equal(big[5], 0x0c);
	assert_int_equal(big[6] | big[7] << 8 | big[8] << 16 | (uint32_t)big[9] << 24, 1u << 21);
	free(big);
}

/*
 * Every capacity below what the COM1 device needs fails with -ENOSPC and
 * writes nothing past the capacity; the smallest that works is the final
 * length plus what the open constructs reserve (device 4 - 1, buffer
 * 9 - 3: at most 9 bytes).
 */
static void test_enospc(void **state)
{
	uint8_t buf[128];
	struct aml a;
	size_t need = 0;

	(void)state;
	for (size_t cap = 0; cap < 80; cap++) {
		memset(buf, 0x5a, sizeof(buf));
		aml_init(&a, buf, cap);
		put_com1(&a);
		for (size_t i = cap; i < sizeof(buf); i++)
			assert_int_equal(buf[i], 0x5a);
		if (aml_status(&a) == 0) {
			need = cap;
			break;
		}
		assert_int_equal(aml_status(&a), -ENOSPC);
		assert_true(a.len <= cap);
	}
	assert_true(need >= sizeof(gold_com1) && need <= sizeof(gold_com1) + 9);
	assert_memory_equal(buf, gold_com1, sizeof(gold_com1));
}

static void test_bad_args(void **state)
{
	struct aml a;

	(void)state;
#define BAD(call, want)                                                                                                \
	do {                                                                                                           \
		aml_init(&a, out, sizeof(out));                                                                        \
		call;                                                                                                  \
		assert_int_equal(aml_status(&a), want);                                                                \
	} while (0)
	BAD(aml_irq_noflags(&a, 16), -EINVAL);
	BAD(aml_irq(&a, 16, 0), -EINVAL);
	BAD(aml_irq(&a, 3, 0x02), -EINVAL);
	BAD(aml_interrupt(&a, 0x20, 5), -EINVAL);
	BAD(aml_fixed_io(&a, 0x400, 1), -EINVAL);
	BAD(aml_method_begin(&a, "MTH", 8, false), -EINVAL);
	BAD(aml_package_begin(&a, 256), -E2BIG);
	BAD(aml_string(&a, "caf\xc3\xa9"), -EINVAL);
	BAD(aml_device_begin(&a, "dev"), -EINVAL);
	/* A mark that is not an open construct's. */
	BAD(aml_end(&a, 1), -EINVAL);
	BAD((aml_int(&a, 5), aml_buffer_end(&a, 0)), -EINVAL);
#undef BAD
	/* The edges that are allowed. */
	aml_init(&a, out, sizeof(out));
	aml_irq_noflags(&a, 15);
	aml_irq(&a, 0, AML_IRQ_EDGE | AML_IRQ_ACTIVE_LOW | AML_IRQ_SHARED | AML_IRQ_WAKE);
	aml_fixed_io(&a, 0x3ff, 0xff);
	aml_interrupt(&a, 0x1f, UINT32_MAX);
	aml_end(&a, aml_package_begin(&a, 255));
	aml_end(&a, aml_method_begin(&a, "M", 7, true));
	assert_int_equal(aml_status(&a), 0);
}

/* After the first error nothing more is written and the first error is the one reported. */
static void test_sticky(void **state)
{
	struct aml a;
	size_t len;

	(void)state;
	aml_init(&a, out, sizeof(out));
	aml_name(&a, "OK");
	aml_int(&a, 7);
	aml_name(&a, "bad");
	assert_int_equal(aml_status(&a), -EINVAL);
	len = a.len;
	put_com1(&a);
	aml_irq(&a, 99, 0);
	aml_bytes(&a, "xyz", 3);
	assert_int_equal(a.len, len);
	assert_int_equal(aml_status(&a), -EINVAL);

	aml_init(&a, out, 2);
	aml_int(&a, 0x12345678); /* 5 bytes into 2 */
	assert_int_equal(aml_status(&a), -ENOSPC);
	assert_int_equal(a.len, 0);
	aml_int(&a, 1); /* would fit, but the encoding already failed */
	assert_int_equal(a.len, 0);
	assert_int_equal(aml_status(&a), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ints),   cmocka_unit_test(test_strings),   cmocka_unit_test(test_eisaid),
	    cmocka_unit_test(test_names),  cmocka_unit_test(test_bad_names), cmocka_unit_test(test_device),
	    cmocka_unit_test(test_method), cmocka_unit_test(test_if_notify), cmocka_unit_test(test_package),
	    cmocka_unit_test(test_buffer), cmocka_unit_test(test_resources), cmocka_unit_test(test_pkglen_boundaries),
	    cmocka_unit_test(test_enospc), cmocka_unit_test(test_bad_args),  cmocka_unit_test(test_sticky),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
