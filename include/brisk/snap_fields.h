/*
 * snap_fields.h - a saved part's fields described once, in a table that drives its save, its restore and
 * the commit of what was restored, so that a field cannot be saved and forgotten on restore or the other
 * way round (docs/architecture.md "Pause, snapshot, restore").
 *
 * A record (struct snap_record) lists the fields of one C struct in the order they are in the section:
 * each field's offset and size in memory, its size in the file (little-endian, as snap_put_u* write it),
 * the bounds a restore enforces, and the first section version that holds it. A section is versioned
 * as a whole (snapshot.h: snap_set_version, snap_version): a field added in version 2 has `since` 2, so
 * a version-1 section decodes with that field left as the caller initialised it.
 *
 * The restore path decodes into a scratch copy (never the live device), checks every value, then copies
 * the record's fields into the device (snap_record_copy): a refused section changes nothing. Values are
 * untrusted (docs/security.md): a field's `max` and `mask` are what a guest could have produced; checks
 * across fields go in the layout's `check`.
 */
#ifndef BRISK_SNAP_FIELDS_H
#define BRISK_SNAP_FIELDS_H

#include <stddef.h>
#include <stdint.h>

struct snap_writer;
struct snap_reader;

enum snap_field_kind {
	SNAP_KIND_UINT,	 /* an unsigned integer (or bool, or an int that is never negative) */
	SNAP_KIND_BYTES, /* a byte array, copied as it is */
};

struct snap_field {
	const char *name;  /* for messages: the member as written in the table ("vq.size") */
	size_t offset;	   /* in the struct the record describes */
	uint32_t mem_size; /* UINT: 1, 2, 4 or 8 bytes in memory; BYTES: the array's length */
	uint32_t
	    wire_size; /* UINT: 1, 2, 4 or 8 bytes in the file (save truncates, as a cast would); BYTES: mem_size */
	enum snap_field_kind kind;
	uint32_t since; /* the first section version that holds the field */
	uint64_t max;	/* UINT: a restore refuses a larger value */
	uint64_t mask;	/* UINT: ... or one with a bit outside this */
};

/* The saved fields of one struct, in file order. */
struct snap_record {
	const char *name; /* the part, for messages ("serial8250") */
	const struct snap_field *field;
	size_t nr_fields;
};

/* A section that is one record: its version and the checks across fields. */
struct snap_layout {
	uint32_t version; /* what save writes; restore reads every version from 1 up to it */
	const struct snap_record *record;
	/* After every field is read and in bounds: NULL, or why the values are refused. May be NULL. */
	const char *(*check)(const void *obj);
};

#define SNAP_MEMBER_SIZE(T, m) ((uint32_t)sizeof(((T *)0)->m))
/* The general form: member m of struct T, `wire` bytes in the file, bounds, first version. */
#define SNAP_FIELD(T, m, wire, max_, mask_, since_)                                                                    \
	{                                                                                                              \
		.name = #m, .offset = offsetof(T, m), .mem_size = SNAP_MEMBER_SIZE(T, m), .wire_size = (wire),         \
		.kind = SNAP_KIND_UINT, .since = (since_), .max = (max_), .mask = (mask_)                              \
	}
/* An integer any value of which a restore accepts. */
#define SNAP_UINT(T, m, wire) SNAP_FIELD(T, m, wire, UINT64_MAX, UINT64_MAX, 1)
/* An integer of at most `max`. */
#define SNAP_UINT_MAX(T, m, wire, max) SNAP_FIELD(T, m, wire, max, UINT64_MAX, 1)
/* An integer with no bit outside `mask`. */
#define SNAP_UINT_MASK(T, m, wire, mask) SNAP_FIELD(T, m, wire, UINT64_MAX, mask, 1)
/* A flag: one byte, 0 or 1. */
#define SNAP_FLAG(T, m) SNAP_FIELD(T, m, 1, 1, UINT64_MAX, 1)
/* A byte array, whole. */
#define SNAP_BYTES(T, m)                                                                                               \
	{                                                                                                              \
		.name = #m, .offset = offsetof(T, m), .mem_size = SNAP_MEMBER_SIZE(T, m),                              \
		.wire_size = SNAP_MEMBER_SIZE(T, m), .kind = SNAP_KIND_BYTES, .since = 1, .max = 0, .mask = 0          \
	}
#define SNAP_RECORD(name_, fields)                                                                                     \
	{                                                                                                              \
		.name = (name_), .field = (fields), .nr_fields = sizeof(fields) / sizeof((fields)[0])                  \
	}

/* Appends the fields of `obj` that a section of `version` holds, in table order. 0 or -errno (snap_put). */
int snap_record_put(struct snap_writer *w, const struct snap_record *rec, const void *obj, uint32_t version);
/*
 * Reads the fields a section of `version` holds into `obj` (the others keep their values), each checked
 * against its bounds. 0, or -EINVAL with `why` naming the field ("truncated at field fifo", "field ier
 * 0x80 has bits outside 0xf").
 */
int snap_record_get(struct snap_reader *sec, const struct snap_record *rec, void *obj, uint32_t version, char *why,
		    size_t whylen);
/* Copies every field of the record from `src` to `dst` (the commit of a checked restore; a save's image). */
void snap_record_copy(const struct snap_record *rec, void *dst, const void *src);

/*
 * Whether this brisk reads the section `sec` is positioned on: its version (snap_version) must be 1 up to
 * `newest`. 0, or -EPROTONOSUPPORT with `why` naming the part and the version ("section serial8250 is
 * version 3; this brisk reads versions 1 to 1").
 */
int snap_version_check(const struct snap_reader *sec, const char *part, uint32_t newest, char *why, size_t whylen);

/* The open section's version set to the layout's, then its record. 0 or -errno. */
int snap_layout_save(struct snap_writer *w, const struct snap_layout *l, const void *obj);
/*
 * snap_version_check, then the record at the section's version, then the layout's check. 0, -EINVAL
 * (a field, or the check) or -EPROTONOSUPPORT (the version), with `why` saying which.
 */
int snap_layout_load(struct snap_reader *sec, const struct snap_layout *l, void *obj, char *why, size_t whylen);

#endif
