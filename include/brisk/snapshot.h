/*
 * snapshot.h - the snapshot state file: a versioned, checksummed sequence of sections, one per saved
 * part of the VM (the VM-wide KVM state, each vCPU, each device), and the field-level writer/reader
 * every part uses to save and restore itself. Guest memory is a separate file (docs/api.md).
 *
 * File layout (all integers little-endian):
 *   header   "BRISKSNP" (8), u32 version (SNAP_VERSION: the framing's), u32 flags, u64 payload length
 *   payload  sections, each: u32 tag (SNAP_TAG_*), u32 index, [u32 section version,] u32 name length,
 *            name bytes (no NUL), u64 body length, body bytes
 *   trailer  u64 CRC-64 of header and payload (snap_crc64)
 *
 * Each section has a version of its own, the layout of its body (a device's change bumps its section's
 * version only, snap_fields.h). flags bit 0 (SNAP_FLAG_SECTION_VERSIONS) says every frame carries it; a
 * file without the flag has none in its frames and every section is version 1 — the files brisk wrote
 * before sections had versions, and still writes, byte for byte, while every section is at version 1.
 * The reader accepts any section version >= 1; the part that decodes a section refuses one it does not
 * know (snap_version_check), naming the section and the version.
 *
 * A part saves itself with snap_put* inside the section the framework opened for it, and restores itself
 * with snap_get* from a reader bounded to that section: reading past its end fails (-EINVAL) and
 * sets the reader's error, so a part may read all its fields and check once (snap_reader_error).
 * The reader validates the header, version, lengths and checksum before any section is handed out;
 * every value a part reads is still untrusted (a crafted file with a valid checksum): the part
 * checks ranges (queue sizes, guest addresses) as it would for a guest.
 */
#ifndef BRISK_SNAPSHOT_H
#define BRISK_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SNAP_MAGIC		   "BRISKSNP"
#define SNAP_VERSION		   1u /* the header and framing; sections have their own (snap_version) */
#define SNAP_FLAG_SECTION_VERSIONS 0x1u
#define SNAP_MAX_FILE		   (64u << 20) /* a state file larger than this is refused */
#define SNAP_MAX_NAME		   64u
#define SNAP_MAX_SECTIONS	   4096u

/* Section tags. */
enum snap_tag {
	SNAP_TAG_CONFIG = 1,  /* the VM's configuration (what `brisk restore` rebuilds) */
	SNAP_TAG_VM = 2,      /* VM-wide KVM state: irqchip (PICs, IOAPIC), PIT, KVM clock */
	SNAP_TAG_VCPU = 3,    /* one vCPU (index = vCPU index) */
	SNAP_TAG_DEVICE = 4,  /* one bus device (index = bus order, name = dev_ops name) */
	SNAP_TAG_MEMFILE = 5, /* the memory file this state belongs to (snap_memfile.h); optional */
	SNAP_TAG_API = 6,     /* the API's description of the VM (ids, root device, boot source); optional */
};

struct snap_writer;
struct snap_reader;

/* Writer: the whole file is built in memory, then written at once by snap_writer_finish. */
struct snap_writer *snap_writer_new(void);
/* Opens a section; the next snap_put* calls fill its body until snap_section_end. Returns 0 or -errno. */
int snap_section_begin(struct snap_writer *w, enum snap_tag tag, uint32_t index, const char *name);
int snap_section_end(struct snap_writer *w);
/*
 * Sets the open section's version (>= 1; a section not given one is version 1). Returns 0, or -EINVAL
 * (no open section, version 0). The file carries versions only when one is not 1 (see above).
 */
int snap_set_version(struct snap_writer *w, uint32_t version);
/* Appends `len` bytes to the open section. Returns 0 or -errno (-ENOMEM, -EINVAL: no open section). */
int snap_put(struct snap_writer *w, const void *data, size_t len);
int snap_put_u8(struct snap_writer *w, uint8_t v);
int snap_put_u16(struct snap_writer *w, uint16_t v);
int snap_put_u32(struct snap_writer *w, uint32_t v);
int snap_put_u64(struct snap_writer *w, uint64_t v);
/*
 * Writes the header, the sections and the checksum to `fd` (a regular file, from offset 0, then
 * fsync unless `nosync`). Returns 0 or -errno with `err` filled.
 */
int snap_writer_finish(struct snap_writer *w, int fd, bool nosync, char *err, size_t errlen);
void snap_writer_free(struct snap_writer *w);

/*
 * Reader: reads and validates the whole file (size <= SNAP_MAX_FILE, magic, version, lengths, section
 * framing, checksum). Returns 0 and *out, or -errno with `err` naming what is wrong ("truncated",
 * "checksum mismatch", "version 7, this brisk reads 1").
 */
int snap_reader_open(int fd, struct snap_reader **out, char *err, size_t errlen);
/* The same from a buffer (unit tests, the fuzz target); the buffer is copied. */
int snap_reader_open_mem(const void *buf, size_t len, struct snap_reader **out, char *err, size_t errlen);
void snap_reader_free(struct snap_reader *r);
/* The file's CRC-64 trailer (checked by snap_reader_open): which snapshot this is, e.g. for wset.h. */
uint64_t snap_reader_checksum(const struct snap_reader *r);
/* Number of sections with `tag`. */
unsigned snap_count(const struct snap_reader *r, enum snap_tag tag);
/*
 * Positions a section reader (returned in *sec, owned by `r`, valid until the next snap_section or
 * snap_reader_free) on the section (tag, index); `name` must match when not NULL. Returns 0,
 * -ENOENT (no such section) or -EINVAL (name differs).
 */
int snap_section(struct snap_reader *r, enum snap_tag tag, uint32_t index, const char *name, struct snap_reader **sec);
/* The name of section (tag, index), or NULL. */
const char *snap_section_name(const struct snap_reader *r, enum snap_tag tag, uint32_t index);
/* The version of section (tag, index) (>= 1), or 0 when there is none. */
uint32_t snap_section_version(const struct snap_reader *r, enum snap_tag tag, uint32_t index);
/* Reads `len` bytes of the current section. Returns 0, or -EINVAL past its end (and sets the error). */
int snap_get(struct snap_reader *sec, void *data, size_t len);
int snap_get_u8(struct snap_reader *sec, uint8_t *v);
int snap_get_u16(struct snap_reader *sec, uint16_t *v);
int snap_get_u32(struct snap_reader *sec, uint32_t *v);
int snap_get_u64(struct snap_reader *sec, uint64_t *v);
/* The version of the section `sec` is positioned on: 1 in a file without SNAP_FLAG_SECTION_VERSIONS. */
uint32_t snap_version(const struct snap_reader *sec);
/* Bytes left in the current section. */
size_t snap_remaining(const struct snap_reader *sec);
/* Whether any snap_get on this section ran past its end. */
bool snap_reader_error(const struct snap_reader *sec);

/*
 * CRC-64 for the trailer, the variant Firecracker's snapshot files use (its `crc64` crate, Redis's
 * crc64): CRC-64/Jones, poly 0xad93d23594c935a9 reflected, init 0, no final xor; check("123456789") =
 * 0xe9c6d914c4b8d9ca. Start with crc = 0; pass the previous result to continue over more data.
 */
uint64_t snap_crc64(uint64_t crc, const void *data, size_t len);

#endif
