/* aml.h - a small ACPI Machine Language encoder: the DSDT's names, devices, methods, packages and resource templates.
 */
#ifndef BRISK_AML_H
#define BRISK_AML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The encoder appends to a caller's buffer of fixed capacity and never
 * writes past it. Errors are sticky: the first one is kept in `err`, every
 * later call does nothing, and aml_status() reports it once at the end, so
 * a table is written as straight-line code with one check. Errors:
 *   -ENOSPC  the buffer is full (nothing was written past `cap`)
 *   -EINVAL  a bad name, string, EISA ID, register value or mark
 *   -E2BIG   a package length above 2^28 - 1 or a count above 255
 *
 * Every construct is encoded the way iasl 20200925 encodes the same ASL
 * (integers in their shortest form, names padded with '_', EndTag checksum
 * 0), so a table's bytes can be compared with iasl's; tests/unit/test_aml.c
 * holds those golden bytes with the ASL they came from.
 *
 * Constructs with a PkgLength (ACPI 6.3 section 20.2.4) are opened with an
 * aml_*_begin call, which returns a mark, and closed with the matching end
 * call; what is appended in between is the construct's body. A begin
 * reserves the largest encoding and the end moves the body down to the
 * shortest one, so a buffer must have 4 (Buffer: 9) spare bytes while a
 * construct is open; the bytes freed that way, past `len`, are left zero.
 */
struct aml {
	uint8_t *buf;
	size_t cap; /* bytes of buf */
	size_t len; /* bytes written */
	int err;    /* 0 or the first error */
};

/* Starts an empty encoding into buf[0..cap). */
void aml_init(struct aml *a, void *buf, size_t cap);
/* 0 when everything so far was encoded, else the first error (see above). */
__attribute__((warn_unused_result)) int aml_status(const struct aml *a);

/* Raw bytes (a table header, a hand-made descriptor). */
void aml_bytes(struct aml *a, const void *p, size_t n);

/*
 * A NameString (20.2.2): "\\" for the root, leading '^' for each parent,
 * then NameSegs separated by '.', each 1..4 characters of [A-Z0-9_] not
 * starting with a digit, padded with '_' ("_SB" -> "_SB_"). "\\" alone is
 * the root (RootChar NullName).
 */
void aml_name_string(struct aml *a, const char *path);

/*
 * An integer constant (20.2.3): Zero, One, Ones (all 64 bits set: the DSDT
 * is revision 2), else the shortest of BytePrefix, WordPrefix, DWordPrefix,
 * QWordPrefix.
 */
void aml_int(struct aml *a, uint64_t v);
/* A String (StringPrefix, ASCII 0x01..0x7f, NUL). */
void aml_string(struct aml *a, const char *s);
/*
 * EisaId("PNP0501") (the ASL EISAID macro, ACPI 6.3 section 19.6): three upper-case letters and four
 * upper-case hexadecimal digits compressed into 32 bits, as an integer.
 */
void aml_eisaid(struct aml *a, const char *id);
/* The EISA ID value of `id`, or -EINVAL when `id` is not of that form. */
int64_t aml_eisaid_value(const char *id);

/* Name(path, ...): NameOp and the name; the caller appends the object (aml_int, a package, ...). */
void aml_name(struct aml *a, const char *path);
/* Return(...): ReturnOp; the caller appends the value. */
void aml_return(struct aml *a);

/* Scope(path) { ... } */
size_t aml_scope_begin(struct aml *a, const char *path);
/* Device(path) { ... } */
size_t aml_device_begin(struct aml *a, const char *path);
/* Method(path, nargs 0..7, Serialized or NotSerialized) { ... }, sync level 0. */
size_t aml_method_begin(struct aml *a, const char *path, unsigned nargs, bool serialized);
/* Package(count) { ... }: the caller appends `count` (0..255) elements. */
size_t aml_package_begin(struct aml *a, unsigned count);
/* If (predicate) { ... } (19.6.60): the caller appends the predicate, then the body; closed by aml_end. */
size_t aml_if_begin(struct aml *a);
/* LEqual (x, y) (19.6.69): LEqualOp; the caller appends both operands. */
void aml_lequal(struct aml *a);
/* ArgN, n 0..6 (20.2.6.1). */
void aml_arg(struct aml *a, unsigned n);
/* Notify (object, value) (19.6.92): NotifyOp; the caller appends the object's NameString and the value. */
void aml_notify(struct aml *a);
/* Closes a Scope, Device, Method, If or Package opened at `mark`. */
void aml_end(struct aml *a, size_t mark);

/* Buffer() { bytes }: the size is the number of bytes appended before aml_buffer_end. */
size_t aml_buffer_begin(struct aml *a);
void aml_buffer_end(struct aml *a, size_t mark);
/* ResourceTemplate() { descriptors }: a Buffer closed with an EndTag (aml_resource_end). */
size_t aml_resource_begin(struct aml *a);
void aml_resource_end(struct aml *a, size_t mark);

/* ---- resource descriptors (ACPI 6.3 section 6.4) ---------------------------------------- */

/* IO(Decode16 or Decode10, min, max, align, len) (6.4.2.5). */
void aml_io(struct aml *a, bool decode16, uint16_t min, uint16_t max, uint8_t align, uint8_t len);
/* FixedIO(base, len) (6.4.2.6): base is 10 bits. */
void aml_fixed_io(struct aml *a, uint16_t base, uint8_t len);

/* IRQ descriptor flags (6.4.2.1): the defaults (0) are level-triggered, active-high, exclusive. */
#define AML_IRQ_EDGE	   0x01u
#define AML_IRQ_ACTIVE_LOW 0x08u
#define AML_IRQ_SHARED	   0x10u
#define AML_IRQ_WAKE	   0x20u
/* IRQNoFlags() {irq}: edge, active-high, exclusive by definition; irq 0..15. */
void aml_irq_noflags(struct aml *a, unsigned irq);
/* IRQ(...) {irq} with AML_IRQ_* flags; irq 0..15. */
void aml_irq(struct aml *a, unsigned irq, unsigned flags);

/* Memory32Fixed(ReadWrite or ReadOnly, base, len) (6.4.3.4). */
void aml_memory32_fixed(struct aml *a, bool rw, uint32_t base, uint32_t len);

/* Extended Interrupt descriptor flags (6.4.3.6): 0 is producer, level, active-high, exclusive. */
#define AML_INT_CONSUMER   0x01u
#define AML_INT_EDGE	   0x02u
#define AML_INT_ACTIVE_LOW 0x04u
#define AML_INT_SHARED	   0x08u
#define AML_INT_WAKE	   0x10u
/* Interrupt(...) {gsi}: one interrupt number with AML_INT_* flags. */
void aml_interrupt(struct aml *a, unsigned flags, uint32_t gsi);

#endif
