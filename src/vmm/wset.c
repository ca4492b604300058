/* wset.c - a restored VM's working set: the file, recording it from residency, and prefetching it (wset.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "brisk/file.h"
#include "brisk/snapshot.h"
#include "brisk/wset.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

#define PAGEMAP_PRESENT (1ull << 63)
#define PAGEMAP_SWAPPED (1ull << 62)

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

void wset_free(struct wset *w)
{
	free(w->range);
	w->range = NULL;
	w->nr = 0;
	w->pages = 0;
}

/* The header's fixed fields, before the ranges are looked at. */
static int parse_header(const uint8_t *b, size_t len, uint32_t *nr, char *err, size_t errlen)
{
	if (len < WSET_HEADER_SIZE + 8 || memcmp(b, WSET_MAGIC, 8) != 0) {
		snprintf(err, errlen, "not a working-set file (%zu bytes, no %s header)", len, WSET_MAGIC);
		return -EINVAL;
	}
	if (le32(b + 8) != WSET_VERSION) {
		snprintf(err, errlen, "version %u; this brisk reads version %u", le32(b + 8), WSET_VERSION);
		return -EINVAL;
	}
	if (le32(b + 12) != WSET_PAGE || le32(b + 36) != 0) {
		snprintf(err, errlen, "page size %u, reserved 0x%x: expected 4096 and 0", le32(b + 12), le32(b + 36));
		return -EINVAL;
	}
	*nr = le32(b + 32);
	if ((uint64_t)*nr * 16 != len - WSET_HEADER_SIZE - 8) {
		snprintf(err, errlen, "%u ranges in %zu bytes (a file of %llu bytes expected)", *nr, len,
			 (unsigned long long)*nr * 16 + WSET_HEADER_SIZE + 8);
		return -EINVAL;
	}
	if (le64(b + len - 8) != snap_crc64(0, b, len - 8)) {
		snprintf(err, errlen, "checksum mismatch (file corrupt)");
		return -EINVAL;
	}
	return 0;
}

/* Each range inside RAM, not empty, after the previous one: overflow-safe. */
static int parse_ranges(const uint8_t *b, struct wset *w, uint64_t npages, char *err, size_t errlen)
{
	uint64_t next = 0;

	for (uint32_t i = 0; i < w->nr; i++) {
		uint64_t first = le64(b + WSET_HEADER_SIZE + 16 * (size_t)i),
			 n = le64(b + WSET_HEADER_SIZE + 16 * (size_t)i + 8);

		if (n == 0 || first < next || first >= npages || n > npages - first) {
			snprintf(
			    err, errlen,
			    "range %u (page %llu, %llu pages) is empty, out of order or past the %llu pages of RAM", i,
			    (unsigned long long)first, (unsigned long long)n, (unsigned long long)npages);
			return -EINVAL;
		}
		w->range[i] = (struct wset_range){.first = first, .count = n};
		w->pages += n;
		next = first + n;
	}
	return 0;
}

int wset_parse(const void *buf, size_t len, uint64_t crc, uint64_t mem_size, struct wset *out, char *err, size_t errlen)
{
	const uint8_t *b = buf;
	uint32_t nr;
	int ret = parse_header(b, len, &nr, err, errlen);

	memset(out, 0, sizeof(*out));
	if (ret)
		return ret;
	if (le64(b + 16) != crc || le64(b + 24) != mem_size) {
		snprintf(err, errlen,
			 "recorded for another snapshot (state file CRC-64 0x%016llx, %llu bytes of RAM; this one: "
			 "0x%016llx, %llu)",
			 (unsigned long long)le64(b + 16), (unsigned long long)le64(b + 24), (unsigned long long)crc,
			 (unsigned long long)mem_size);
		return -ESTALE;
	}
	out->snapshot_crc = crc;
	out->mem_size = mem_size;
	out->nr = nr;
	out->range = calloc(nr ? nr : 1, sizeof(*out->range));
	if (!out->range)
		return -ENOMEM;
	ret = parse_ranges(b, out, mem_size / WSET_PAGE, err, errlen);
	if (ret)
		wset_free(out);
	return ret;
}

int wset_encode(const struct wset *w, uint8_t **buf, size_t *len)
{
	size_t n = WSET_HEADER_SIZE + 16 * (size_t)w->nr + 8;
	uint8_t *b = calloc(1, n);

	if (!b)
		return -ENOMEM;
	memcpy(b, WSET_MAGIC, 8);
	put32(b + 8, WSET_VERSION);
	put32(b + 12, WSET_PAGE);
	put64(b + 16, w->snapshot_crc);
	put64(b + 24, w->mem_size);
	put32(b + 32, w->nr);
	for (uint32_t i = 0; i < w->nr; i++) {
		put64(b + WSET_HEADER_SIZE + 16 * (size_t)i, w->range[i].first);
		put64(b + WSET_HEADER_SIZE + 16 * (size_t)i + 8, w->range[i].count);
	}
	put64(b + n - 8, snap_crc64(0, b, n - 8));
	*buf = b;
	*len = n;
	return 0;
}

int wset_from_present(const uint8_t *present, uint64_t npages, struct wset *w)
{
	uint32_t nr = 0, cap = 64;
	struct wset_range *r = malloc(cap * sizeof(*r));

	if (!r)
		return -ENOMEM;
	w->pages = 0;
	for (uint64_t i = 0; i < npages; i++) {
		if (!(present[i] & 1))
			continue;
		if (nr && r[nr - 1].first + r[nr - 1].count == i) {
			r[nr - 1].count++;
		} else {
			if (nr == cap) {
				struct wset_range *g = realloc(r, 2 * (size_t)cap * sizeof(*r));

				if (!g) {
					free(r);
					return -ENOMEM;
				}
				r = g;
				cap *= 2;
			}
			r[nr++] = (struct wset_range){.first = i, .count = 1};
		}
		w->pages++;
	}
	w->range = r;
	w->nr = nr;
	return 0;
}

int wset_path(const char *mem_path, char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "%s%s", mem_path, WSET_SUFFIX);

	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

int wset_load(const char *path, uint64_t crc, uint64_t mem_size, struct wset *out, char *err, size_t errlen)
{
	char why[256];
	struct stat st;
	uint8_t *buf;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), ret;

	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > WSET_MAX_FILE) {
		close(fd);
		snprintf(err, errlen, "%s: not a regular file of at most %u bytes", path, WSET_MAX_FILE);
		return -EINVAL;
	}
	buf = malloc((size_t)st.st_size + 1);
	n = buf ? pread(fd, buf, (size_t)st.st_size + 1, 0) : -1;
	close(fd);
	if (n != st.st_size) {
		free(buf);
		snprintf(err, errlen, "%s: read %zd of %lld bytes", path, n, (long long)st.st_size);
		return buf ? -EIO : -ENOMEM;
	}
	ret = wset_parse(buf, (size_t)n, crc, mem_size, out, why, sizeof(why));
	free(buf);
	if (ret)
		snprintf(err, errlen, "%s: %s", path, why);
	return ret;
}

int wset_save(const char *path, const struct wset *w, char *err, size_t errlen)
{
	struct file_replace r;
	uint8_t *buf;
	size_t len, done = 0;
	int ret = wset_encode(w, &buf, &len);

	if (ret) {
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	ret = file_replace_open(&r, path, "the working-set file", FILE_REPLACE_REGULAR, err, errlen);
	while (!ret && done < len) {
		ssize_t n = write(r.fd, buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			snprintf(err, errlen, "%s: write: %s", path, strerror(-ret));
			file_replace_abort(&r);
			break;
		}
		done += (size_t)n;
	}
	free(buf);
	if (!ret && (ret = file_replace_commit(&r, true, err, errlen)))
		file_replace_abort(&r);
	return ret;
}

/* /proc/self/pagemap: 8 bytes per page of the mapping, present or swapped means touched. */
static int residency_pagemap(const struct gmem *m, int fd, uint8_t *present)
{
	uint64_t vec[512], npages = m->size / WSET_PAGE, base = (uintptr_t)m->base / WSET_PAGE;

	for (uint64_t i = 0; i < npages;) {
		uint64_t n = npages - i < 512 ? npages - i : 512;
		ssize_t got;

		/* lseek + read rather than pread: the main thread's seccomp list has both (security.md). */
		if (lseek(fd, (off_t)((base + i) * 8), SEEK_SET) < 0)
			return -errno;
		got = read(fd, vec, (size_t)n * 8);
		if (got <= 0 || got % 8)
			return got < 0 ? -errno : -EIO;
		for (uint64_t k = 0; k < (uint64_t)got / 8; k++)
			present[i + k] = (vec[k] & (PAGEMAP_PRESENT | PAGEMAP_SWAPPED)) != 0;
		i += (uint64_t)got / 8;
	}
	return 0;
}

int wset_residency(const struct gmem *m, int pagemap_fd, uint8_t *present)
{
	if (pagemap_fd >= 0)
		return residency_pagemap(m, pagemap_fd, present);
	return mincore(m->base, (size_t)m->size, present) ? -errno : 0;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/*
 * madvise(advice) over every range inside RAM, ranges less than `gap` pages apart joined into one call (0: each
 * range alone); the first error stops it, as does `cancel` (may be NULL) once true. Counts st->ranges, st->mapped.
 */
static void advise_all(const struct gmem *m, const struct wset *w, int advice, uint64_t gap,
		       struct wset_prefetch_stats *st, const atomic_bool *cancel)
{
	uint64_t npages = m->size / WSET_PAGE, first = 0, end = 0;

	st->ranges = 0;
	st->mapped = 0;
	for (uint32_t i = 0; i <= w->nr && !st->error; i++) {
		const struct wset_range *r = i < w->nr ? &w->range[i] : NULL;

		if (r && (r->first >= npages || r->count > npages - r->first))
			continue; /* wset_parse refused these; a list built for another size is skipped */
		if (r && end && r->first - end < gap) { /* sorted: r->first >= end */
			end = r->first + r->count;
			continue;
		}
		if (end && cancel && atomic_load_explicit(cancel, memory_order_relaxed)) {
			st->cancelled = true;
			return;
		}
		if (end) {
			if (madvise(m->base + first * WSET_PAGE, (size_t)((end - first) * WSET_PAGE), advice) < 0)
				st->error = -errno;
			st->ranges++;
			st->mapped += end - first;
		}
		if (r) {
			first = r->first;
			end = r->first + r->count;
		}
	}
}

void wset_prefetch_begin(const struct gmem *m, const struct wset *w, struct wset_prefetch_stats *st)
{
	uint64_t t0 = now_ns();

	memset(st, 0, sizeof(*st));
	st->pages = w->pages;
	advise_all(m, w, MADV_WILLNEED, WSET_ADVISE_GAP, st, NULL);
	st->ns_advise = now_ns() - t0;
}

void wset_prefetch_end(const struct gmem *m, const struct wset *w, struct wset_prefetch_stats *st,
		       const atomic_bool *cancel)
{
	uint64_t t0 = now_ns();

	if (!st->error)
		advise_all(m, w, MADV_POPULATE_READ, 0, st, cancel);
	st->ns_populate = now_ns() - t0;
}
