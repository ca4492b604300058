/*
 * snap_test.h - a snapshot writer's finished file, back as bytes or as a reader, for the unit tests that
 * save state and read it back (the device, KVM-state, memory-layer and field-table tests). The file goes
 * through a tmpfile() and snap_writer_finish, as a real snapshot does; include after cmocka.h.
 */
#ifndef BRISK_TEST_SNAP_TEST_H
#define BRISK_TEST_SNAP_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "brisk/snapshot.h"

/* The bytes of w's finished file (malloc'd, *len its size); w is freed. Fails the test if w cannot finish. */
static inline uint8_t *snap_test_bytes(struct snap_writer *w, size_t *len)
{
	char err[256] = "";
	FILE *f = tmpfile();
	uint8_t *buf;
	long n;

	assert_non_null(w);
	assert_non_null(f);
	if (snap_writer_finish(w, fileno(f), true, err, sizeof(err)))
		fail_msg("snap_writer_finish: %s", err);
	snap_writer_free(w);
	n = lseek(fileno(f), 0, SEEK_END);
	assert_true(n > 0);
	buf = malloc((size_t)n);
	assert_non_null(buf);
	assert_int_equal(pread(fileno(f), buf, (size_t)n, 0), n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* w's finished file opened as a reader (snap_reader_open_mem); w is freed. */
static inline struct snap_reader *snap_test_reader(struct snap_writer *w)
{
	char err[256] = "";
	struct snap_reader *r = NULL;
	size_t len;
	uint8_t *buf = snap_test_bytes(w, &len);

	if (snap_reader_open_mem(buf, len, &r, err, sizeof(err)))
		fail_msg("snap_reader_open_mem: %s", err);
	free(buf);
	return r;
}

#endif
