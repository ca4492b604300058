/* snap_fields.c - the table-driven encoder and decoder of a saved part's fields (snap_fields.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "brisk/snap_fields.h"
#include "brisk/snapshot.h"

static bool in_version(const struct snap_field *f, uint32_t version)
{
	return f->since <= version;
}

/* An integer of 1, 2, 4 or 8 bytes in memory, zero-extended. */
static uint64_t load_uint(const void *p, uint32_t size)
{
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (size) {
	case 1:
		memcpy(&u8, p, 1);
		return u8;
	case 2:
		memcpy(&u16, p, 2);
		return u16;
	case 4:
		memcpy(&u32, p, 4);
		return u32;
	default:
		memcpy(&u64, p, 8);
		return u64;
	}
}

/* Stores v (which fits) into an integer of `size` bytes. */
static void store_uint(void *p, uint32_t size, uint64_t v)
{
	uint8_t u8 = (uint8_t)v;
	uint16_t u16 = (uint16_t)v;
	uint32_t u32 = (uint32_t)v;

	switch (size) {
	case 1:
		memcpy(p, &u8, 1);
		break;
	case 2:
		memcpy(p, &u16, 2);
		break;
	case 4:
		memcpy(p, &u32, 4);
		break;
	default:
		memcpy(p, &v, 8);
		break;
	}
}

static int put_uint(struct snap_writer *w, uint64_t v, uint32_t wire)
{
	switch (wire) {
	case 1:
		return snap_put_u8(w, (uint8_t)v);
	case 2:
		return snap_put_u16(w, (uint16_t)v);
	case 4:
		return snap_put_u32(w, (uint32_t)v);
	default:
		return snap_put_u64(w, v);
	}
}

static int get_uint(struct snap_reader *sec, uint64_t *v, uint32_t wire)
{
	uint8_t u8 = 0;
	uint16_t u16 = 0;
	uint32_t u32 = 0;
	int ret;

	switch (wire) {
	case 1:
		ret = snap_get_u8(sec, &u8);
		*v = u8;
		return ret;
	case 2:
		ret = snap_get_u16(sec, &u16);
		*v = u16;
		return ret;
	case 4:
		ret = snap_get_u32(sec, &u32);
		*v = u32;
		return ret;
	default:
		return snap_get_u64(sec, v);
	}
}

int snap_record_put(struct snap_writer *w, const struct snap_record *rec, const void *obj, uint32_t version)
{
	const uint8_t *base = obj;

	for (size_t i = 0; i < rec->nr_fields; i++) {
		const struct snap_field *f = &rec->field[i];
		int ret;

		if (!in_version(f, version))
			continue;
		if (f->kind == SNAP_KIND_BYTES)
			ret = snap_put(w, base + f->offset, f->mem_size);
		else
			ret = put_uint(w, load_uint(base + f->offset, f->mem_size), f->wire_size);
		if (ret)
			return ret;
	}
	return 0;
}

/* The value's bounds: the field's max and mask, and what its memory holds. NULL or why not. */
static const char *out_of_bounds(const struct snap_field *f, uint64_t v, char *why, size_t whylen)
{
	uint64_t fits = f->mem_size >= 8 ? UINT64_MAX : (1ull << (8 * f->mem_size)) - 1;

	if (v > f->max || v > fits) {
		snprintf(why, whylen, "field %s %llu, above %llu", f->name, (unsigned long long)v,
			 (unsigned long long)(f->max < fits ? f->max : fits));
		return why;
	}
	if (v & ~f->mask) {
		snprintf(why, whylen, "field %s 0x%llx has bits outside 0x%llx", f->name, (unsigned long long)v,
			 (unsigned long long)f->mask);
		return why;
	}
	return NULL;
}

static int get_field(struct snap_reader *sec, const struct snap_field *f, uint8_t *base, char *why, size_t whylen)
{
	uint64_t v;

	if (f->kind == SNAP_KIND_BYTES) {
		if (!snap_get(sec, base + f->offset, f->mem_size))
			return 0;
	} else if (!get_uint(sec, &v, f->wire_size)) {
		if (out_of_bounds(f, v, why, whylen))
			return -EINVAL;
		store_uint(base + f->offset, f->mem_size, v);
		return 0;
	}
	snprintf(why, whylen, "truncated at field %s", f->name);
	return -EINVAL;
}

int snap_record_get(struct snap_reader *sec, const struct snap_record *rec, void *obj, uint32_t version, char *why,
		    size_t whylen)
{
	for (size_t i = 0; i < rec->nr_fields; i++) {
		int ret;

		if (!in_version(&rec->field[i], version))
			continue;
		ret = get_field(sec, &rec->field[i], obj, why, whylen);
		if (ret)
			return ret;
	}
	return 0;
}

void snap_record_copy(const struct snap_record *rec, void *dst, const void *src)
{
	for (size_t i = 0; i < rec->nr_fields; i++) {
		const struct snap_field *f = &rec->field[i];

		memcpy((uint8_t *)dst + f->offset, (const uint8_t *)src + f->offset, f->mem_size);
	}
}

int snap_version_check(const struct snap_reader *sec, const char *part, uint32_t newest, char *why, size_t whylen)
{
	uint32_t v = snap_version(sec);

	if (v >= 1 && v <= newest)
		return 0;
	snprintf(why, whylen, "section %s is version %u; this brisk reads versions 1 to %u", part, v, newest);
	return -EPROTONOSUPPORT;
}

int snap_layout_save(struct snap_writer *w, const struct snap_layout *l, const void *obj)
{
	int ret = snap_set_version(w, l->version);

	return ret ? ret : snap_record_put(w, l->record, obj, l->version);
}

int snap_layout_load(struct snap_reader *sec, const struct snap_layout *l, void *obj, char *why, size_t whylen)
{
	const char *bad;
	int ret = snap_version_check(sec, l->record->name, l->version, why, whylen);

	if (!ret)
		ret = snap_record_get(sec, l->record, obj, snap_version(sec), why, whylen);
	if (ret || !l->check)
		return ret;
	bad = l->check(obj);
	if (bad) {
		snprintf(why, whylen, "%s", bad);
		return -EINVAL;
	}
	return 0;
}
