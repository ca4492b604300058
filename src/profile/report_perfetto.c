/* report_perfetto.c - brisk-profile/1 report as Chrome trace-event JSON, the format Perfetto's UI imports. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/file.h"
#include "brisk/profile.h"
#include "report_input.h"

/*
 * Trace-event format (Google's "Trace Event Format" document): a top-level object with "traceEvents";
 * every event has name, ph (event type), ts in microseconds, pid and tid. "X" is a complete event with
 * "dur"; "i" an instant with scope "s" (g, p or t); "C" a counter whose args are the plotted values, one
 * track per (pid, name); "M" metadata naming processes and threads. Other top-level keys ("otherData")
 * are kept as trace metadata.
 *
 * The file is streamed, not built as json-c objects: a long run has one counter event per vCPU and bucket
 * (10^5 and more), and a json-c object costs about a kilobyte.
 */
#define VMM_TID	    0 /* the track the VMM phases and milestones go on */
#define DEFAULT_PID 1 /* when the profile names no process */

struct trace {
	FILE *f;
	const struct report_input *in;
	int64_t pid;
	int nevents; /* events written so far: the separator goes before all but the first */
};

/* `s` as a JSON string (RFC 8259 section 7); bytes that are not valid UTF-8 become '?'. */
static void put_string(FILE *f, const char *s)
{
	fputc('"', f);
	while (*s) {
		size_t n = report_utf8_len(s);

		if (n == 0)
			fputc('?', f);
		else if (n > 1)
			fwrite(s, 1, n, f);
		else if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", (unsigned)(unsigned char)*s);
		else
			fputc(*s, f);
		s += n ? n : 1;
	}
	fputc('"', f);
}

/* A time in µs with ns precision; the reader validated it finite, sums of finite values may not be. */
static void put_us(FILE *f, double us)
{
	fprintf(f, "%.3f", isfinite(us) ? us : 0.0);
}

/* Opens an event with the fields every event has; the caller adds its own and calls end_event(). */
static void begin_event(struct trace *t, const char *name, char ph, const char *cat, int64_t tid)
{
	fputs(t->nevents++ ? ",\n{\"name\":" : "\n{\"name\":", t->f);
	put_string(t->f, name);
	fprintf(t->f, ",\"ph\":\"%c\"", ph);
	if (cat)
		fprintf(t->f, ",\"cat\":\"%s\"", cat);
	fprintf(t->f, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64, t->pid, tid);
}

static void end_event(const struct trace *t)
{
	fputc('}', t->f);
}

/* "M" event: process_name or thread_name `value` for `tid`. */
static void meta(struct trace *t, const char *kind, int64_t tid, const char *value)
{
	begin_event(t, kind, 'M', NULL, tid);
	fputs(",\"args\":{\"name\":", t->f);
	put_string(t->f, value);
	fputc('}', t->f);
	end_event(t);
}

/* ,"args":{"id":id (when there is one) -- left open for more args. */
static void open_args(const struct trace *t, const char *id)
{
	fputs(",\"args\":{", t->f);
	if (id) {
		fputs("\"id\":", t->f);
		put_string(t->f, id);
	}
}

/* One "X" slice on the VMM thread. */
static void phase(struct trace *t, const struct rin_phase *p)
{
	begin_event(t, p->name, 'X', "phase", VMM_TID);
	fputs(",\"ts\":", t->f);
	put_us(t->f, p->start_us);
	fputs(",\"dur\":", t->f);
	put_us(t->f, p->dur_us);
	open_args(t, p->id);
	fputc('}', t->f);
	end_event(t);
}

/* One "i" instant, process-scoped so it marks the whole brisk process; boot markers keep their value. */
static void milestone(struct trace *t, const struct rin_milestone *m)
{
	begin_event(t, m->name, 'i', "milestone", VMM_TID);
	fputs(",\"s\":\"p\",\"ts\":", t->f);
	put_us(t->f, m->us);
	open_args(t, m->id);
	if (m->has_value)
		fprintf(t->f, "%s\"value\":%" PRId64, m->id ? "," : "", m->value);
	fputc('}', t->f);
	end_event(t);
}

/* True when the listed tracks have the same values in buckets a and b. */
static int same_bucket(const struct report_input *in, const size_t *tracks, size_t n, size_t a, size_t b)
{
	for (size_t i = 0; i < n; i++)
		if (in->tracks[tracks[i]].counts[a] != in->tracks[tracks[i]].counts[b])
			return 0;
	return 1;
}

/* Index into tracks[] of the first track with the source of tracks[i]. */
static size_t first_of_source(const struct report_input *in, const size_t *tracks, size_t i)
{
	size_t j = 0;

	while (strcmp(in->tracks[tracks[j]].source, in->tracks[tracks[i]].source))
		j++;
	return j;
}

/* ,"args":{source: count, ...} at bucket b (0 past the end); tracks of one source are summed, keys unique. */
static void counter_args(const struct trace *t, const size_t *tracks, size_t n, size_t b)
{
	const struct report_input *in = t->in;
	int first = 1;

	fputs(",\"args\":{", t->f);
	for (size_t i = 0; i < n; i++) {
		int64_t sum = 0;

		if (first_of_source(in, tracks, i) != i)
			continue;
		for (size_t k = i; k < n && b < in->nbuckets; k++)
			if (first_of_source(in, tracks, k) == i)
				sum += in->tracks[tracks[k]].counts[b];
		fputs(first ? "" : ",", t->f);
		put_string(t->f, in->tracks[tracks[i]].source);
		fprintf(t->f, ":%" PRId64, sum);
		first = 0;
	}
	fputc('}', t->f);
}

/*
 * The "C" events of one vCPU from its tracks (indices into in->tracks), one arg per source. A counter is
 * a step function, so an event is written only where a value changes, and a last all-zero one at the end
 * of the series closes the final bucket.
 */
static void counter(struct trace *t, int64_t vcpu, const size_t *tracks, size_t n)
{
	const struct report_input *in = t->in;
	char name[48];

	snprintf(name, sizeof(name), "vcpu %" PRId64 " exits", vcpu);
	for (size_t b = 0; b <= in->nbuckets; b++) {
		if (b > 0 && b < in->nbuckets && same_bucket(in, tracks, n, b - 1, b))
			continue;
		begin_event(t, name, 'C', "exits", VMM_TID);
		fputs(",\"ts\":", t->f);
		put_us(t->f, in->start_us + (double)b * in->bucket_us);
		counter_args(t, tracks, n, b);
		end_event(t);
	}
}

/* The tracks of track `first`'s vCPU into tracks[]; how many, or 0 when an earlier track had that vCPU. */
static size_t vcpu_tracks(const struct report_input *in, size_t first, size_t *tracks)
{
	int64_t vcpu = in->tracks[first].vcpu;
	size_t n = 0;

	for (size_t i = 0; i < in->ntracks; i++) {
		if (in->tracks[i].vcpu != vcpu)
			continue;
		if (i < first)
			return 0;
		tracks[n++] = i;
	}
	return n;
}

/* Per vCPU: a name for its thread (when the series knows the thread) and one counter. */
static int series(struct trace *t)
{
	const struct report_input *in = t->in;
	size_t *tracks = calloc(in->ntracks ? in->ntracks : 1, sizeof(*tracks));

	if (!tracks)
		return -ENOMEM;
	for (size_t i = 0; i < in->ntracks; i++) {
		const struct rin_track *tr = &in->tracks[i];
		size_t n = vcpu_tracks(in, i, tracks);
		char tname[32];

		if (n == 0)
			continue;
		snprintf(tname, sizeof(tname), "vCPU %" PRId64, tr->vcpu);
		if (tr->tid > 0)
			meta(t, "thread_name", tr->tid, tname);
		counter(t, tr->vcpu, tracks, n);
	}
	free(tracks);
	return 0;
}

/* The profile's identity, kept as trace metadata so that a trace file says what it came from. */
static void other_data(const struct trace *t)
{
	const struct report_input *in = t->in;

	fputs("\"otherData\":{\"schema\":\"" PROFILE_SCHEMA "\"", t->f);
	if (in->generator) {
		fputs(",\"generator\":", t->f);
		put_string(t->f, in->generator);
	}
	if (in->command) {
		fputs(",\"command\":", t->f);
		put_string(t->f, in->command);
	}
	if (in->time_origin) {
		fputs(",\"time_origin\":", t->f);
		put_string(t->f, in->time_origin);
	}
	if (in->has_series) {
		fputs(",\"bucket_us\":", t->f);
		put_us(t->f, in->bucket_us);
	}
	fputs("},\n", t->f);
}

/* The whole document, in a fixed order: metadata, names, phases, milestones, counters. */
static int trace_write(struct trace *t)
{
	int ret;

	fputs("{\"displayTimeUnit\":\"ms\",", t->f);
	other_data(t);
	fputs("\"traceEvents\":[", t->f);
	meta(t, "process_name", VMM_TID, "brisk");
	meta(t, "thread_name", VMM_TID, "VMM");
	for (size_t i = 0; i < t->in->nphases; i++)
		phase(t, &t->in->phases[i]);
	for (size_t i = 0; i < t->in->nmilestones; i++)
		milestone(t, &t->in->milestones[i]);
	ret = series(t);
	fputs("\n]}\n", t->f);
	return ret;
}

/*
 * Contract (declared in brisk/profile.h): writes `profile` (brisk-profile/1, only read) to `path` as Chrome
 * trace-event JSON: phases as "X" slices on the "VMM" thread (tid 0), milestones as process-scoped "i"
 * instants, one "C" counter "vcpu N exits" per vCPU with one value per series source. Missing sections are
 * left out. Returns 0; -EINVAL when the profile is malformed (err names the field); -ENOMEM; or -errno of
 * the file (err names it). On error the file at `path` is as it was (file_replace).
 */
int report_perfetto_write(struct json_object *profile, const char *path, char *err, size_t errlen)
{
	struct report_input in;
	struct trace t = {.in = &in};
	struct file_replace r;
	int ret = report_input_read(profile, &in, err, errlen);

	if (ret)
		return ret;
	t.pid = in.pid > 0 ? in.pid : DEFAULT_PID;
	ret = file_replace_open(&r, path, "--trace-out", 0, err, errlen);
	if (ret)
		goto out;
	t.f = fdopen(dup(r.fd), "we");
	if (!t.f) {
		ret = -errno;
	} else {
		errno = 0;
		ret = trace_write(&t);
		if (!ret && ferror(t.f))
			ret = errno ? -errno : -EIO;
		if (fclose(t.f) != 0 && !ret)
			ret = errno ? -errno : -EIO;
	}
	if (ret && errlen)
		snprintf(err, errlen, "--trace-out %s: %s", path, strerror(-ret));
	if (!ret)
		ret = file_replace_commit(&r, false, err, errlen);
	if (ret)
		file_replace_abort(&r);
out:
	report_input_free(&in);
	return ret;
}
