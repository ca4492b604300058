/* fuzz_snapshot.c - libFuzzer harness: snap_reader_open_mem on arbitrary bytes, then every section read at every width.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/snap_memfile.h"
#include "brisk/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Reads one section to its end with width `w` (0: u8, 1: u16, 2: u32, 3: u64, 4: snap_get of 3 bytes).
 * Invariants beyond "no crash, no sanitizer report": remaining bytes shrink by exactly the width until a
 * read fails, a failed read sets the error and consumes nothing.
 */
static void walk(struct snap_reader *sec, unsigned w)
{
	static const size_t width[] = {1, 2, 4, 8, 3};
	uint8_t b8, buf[3];
	uint16_t b16;
	uint32_t b32;
	uint64_t b64;

	for (;;) {
		size_t before = snap_remaining(sec);
		int ret = w == 0   ? snap_get_u8(sec, &b8)
			  : w == 1 ? snap_get_u16(sec, &b16)
			  : w == 2 ? snap_get_u32(sec, &b32)
			  : w == 3 ? snap_get_u64(sec, &b64)
				   : snap_get(sec, buf, sizeof(buf));

		if (ret) {
			if (before >= width[w] || !snap_reader_error(sec) || snap_remaining(sec) != before)
				abort();
			return;
		}
		if (snap_remaining(sec) != before - width[w])
			abort();
	}
}

static void walk_tag(struct snap_reader *r, enum snap_tag tag)
{
	unsigned n = snap_count(r, tag), seen = 0;
	struct snap_reader *sec;

	/* Indices are arbitrary u32s: probe the small ones, which is where valid files put them. */
	for (uint32_t i = 0; i < 64 && seen < n; i++) {
		const char *name = snap_section_name(r, tag, i);

		if (!name)
			continue;
		seen++;
		if (strlen(name) > SNAP_MAX_NAME || snap_section_version(r, tag, i) == 0)
			abort(); /* a section's version is 1 (no versions in the frames) or what its frame says, >= 1 */
		for (unsigned w = 0; w < 5; w++) {
			if (snap_section(r, tag, i, name, &sec) != 0 ||
			    snap_version(sec) != snap_section_version(r, tag, i))
				abort();
			walk(sec, w);
		}
	}
}

/*
 * The memfile record (snap_memfile.h): accepted only as a bare name in the memory file's directory; a Diff's
 * kind known, at most SNAP_MEMFILE_SAMPLES samples, each a whole page inside the file.
 */
static void check_memfile(struct snap_reader *r)
{
	struct snap_memfile m;
	bool present;

	if (snap_memfile_load(r, &m, &present) != 0 || !present)
		return;
	if (!m.tmp[0] || strchr(m.tmp, '/') || strlen(m.tmp) > NAME_MAX || strcmp(m.tmp, "..") == 0)
		abort();
	if (m.kind > SNAP_MEM_MERGED || m.nr_samples > SNAP_MEMFILE_SAMPLES)
		abort();
	for (unsigned i = 0; i < m.nr_samples; i++)
		if (m.sample[i].off % 4096 || m.size < 4096 || m.sample[i].off > m.size - 4096)
			abort();
}

static void try_open(const uint8_t *data, size_t size)
{
	struct snap_reader *r;
	char err[256];

	if (snap_reader_open_mem(data, size, &r, err, sizeof(err)) != 0) {
		if (r || !err[0])
			abort(); /* a refusal returns nothing and says why */
		return;
	}
	for (enum snap_tag t = SNAP_TAG_CONFIG; t <= SNAP_TAG_API; t++)
		walk_tag(r, t);
	check_memfile(r);
	snap_reader_free(r);
}

/*
 * The input as is, then with its envelope repaired (payload length and checksum made to match), so that
 * mutations reach the section framing instead of dying at the checksum. The copy is exactly `size`
 * bytes, so ASan sees any read past the end.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf;
	uint64_t crc;

	try_open(data, size);
	if (size < 32 || size > 1u << 20)
		return 0;
	buf = malloc(size);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	for (unsigned i = 0; i < 8; i++)
		buf[16 + i] = (uint8_t)((uint64_t)(size - 32) >> (8 * i));
	crc = snap_crc64(0, buf, size - 8);
	for (unsigned i = 0; i < 8; i++)
		buf[size - 8 + i] = (uint8_t)(crc >> (8 * i));
	try_open(buf, size);
	free(buf);
	return 0;
}
