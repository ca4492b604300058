/* gen_snapshot_seeds.c - writes valid snapshot state files (the writer's own output) into a corpus directory (argv[1]).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "brisk/snapshot.h"
#include "seed_save.h"

/* Copies what snap_writer_finish wrote to a temporary file into DIR/NAME. */
static int save_writer(struct snap_writer *w, const char *dir, const char *name)
{
	char err[256];
	FILE *f = tmpfile();
	long n;
	char *buf;
	int bad;

	if (!f || snap_writer_finish(w, fileno(f), true, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", name, f ? err : "tmpfile failed");
		return 1;
	}
	n = lseek(fileno(f), 0, SEEK_END);
	buf = malloc(n > 0 ? (size_t)n : 1);
	bad = !buf || n <= 0 || pread(fileno(f), buf, (size_t)n, 0) != n || seed_save(dir, name, buf, (size_t)n);
	free(buf);
	fclose(f);
	return bad;
}

int main(int argc, char **argv)
{
	struct snap_writer *w;
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	w = snap_writer_new();
	bad |= !w || save_writer(w, argv[1], "seed-empty");
	snap_writer_free(w);

	w = snap_writer_new();
	bad |= !w || snap_section_begin(w, SNAP_TAG_CONFIG, 0, "config") || snap_put(w, "{\"cpus\":2}", 10) ||
	       snap_section_end(w) || snap_section_begin(w, SNAP_TAG_VM, 0, "kvm") || snap_put_u32(w, 3) ||
	       snap_put_u64(w, 0x1122334455667788ull) || snap_section_end(w);
	for (uint32_t i = 0; i < 2 && !bad; i++)
		bad |= snap_section_begin(w, SNAP_TAG_VCPU, i, "vcpu") || snap_put_u8(w, 1) || snap_put_u16(w, 2) ||
		       snap_put_u32(w, i) || snap_put_u64(w, i) || snap_section_end(w);
	bad |= bad || snap_section_begin(w, SNAP_TAG_DEVICE, 0, "serial8250") || snap_put(w, "\x01\x02\x03", 3) ||
	       snap_section_end(w) || save_writer(w, argv[1], "seed-vm");
	/* the optional sections: the memory file's record (snap_memfile.h), the API's description */
	bad |= bad || snap_section_begin(w, SNAP_TAG_MEMFILE, 0, "memfile") || snap_put_u64(w, 64769) ||
	       snap_put_u64(w, 1234567) || snap_put_u64(w, 1 << 27) || snap_put_u64(w, 1700000000000000000ull) ||
	       snap_put_u32(w, 12) || snap_put(w, ".vm.mem.AbC1", 12) || snap_section_end(w) ||
	       snap_section_begin(w, SNAP_TAG_API, 0, "api-config") || snap_put(w, "{\"drives\": []}", 14) ||
	       snap_section_end(w) || save_writer(w, argv[1], "seed-links");
	snap_writer_free(w);

	/* Sections with versions of their own (snapshot.h: SNAP_FLAG_SECTION_VERSIONS and a word per frame). */
	w = snap_writer_new();
	bad |= !w || snap_section_begin(w, SNAP_TAG_CONFIG, 0, "config") || snap_put_u32(w, 1) || snap_section_end(w) ||
	       snap_section_begin(w, SNAP_TAG_DEVICE, 0, "serial8250") || snap_set_version(w, 2) ||
	       snap_put(w, "\x01\x02\x03", 3) || snap_section_end(w) ||
	       snap_section_begin(w, SNAP_TAG_DEVICE, 1, "i8042") || snap_set_version(w, 0x10000) ||
	       snap_section_end(w) || save_writer(w, argv[1], "seed-versions");
	snap_writer_free(w);
	return bad;
}
