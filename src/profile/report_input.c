/* report_input.c - reads and validates the timeline parts of a brisk-profile/1 object for the chart writers. */
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_input.h"

/* A profile's series is bounded by the run: 10^7 buckets is ~3 hours at 1 ms; more is a broken producer. */
#define MAX_BUCKETS 10000000u

struct rctx {
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 2, 3))) static int fail(const struct rctx *c, const char *fmt, ...)
{
	va_list ap;

	if (c->errlen == 0)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(c->err, c->errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static struct json_object *field(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;

	return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static const char *opt_string(struct json_object *o, const char *key)
{
	struct json_object *v = field(o, key);

	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static int is_number(struct json_object *v)
{
	return v && (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int));
}

/* Finite number `key` of `what`[i] (i < 0: of `what` itself) into *out, or -EINVAL naming the field. */
static int number(const struct rctx *c, struct json_object *o, const char *what, long i, const char *key, double *out)
{
	struct json_object *v = field(o, key);
	char at[96];

	if (i >= 0)
		snprintf(at, sizeof(at), "%s[%ld]", what, i);
	else
		snprintf(at, sizeof(at), "%s", what);
	if (!is_number(v))
		return fail(c, "profile: %s: missing number \"%s\"", at, key);
	*out = json_object_get_double(v);
	if (!isfinite(*out))
		return fail(c, "profile: %s.%s is not finite", at, key);
	return 0;
}

/* Entry `what`[i]: its "name" (or "id" when it has no name) and its optional "id". */
static int names(const struct rctx *c, struct json_object *o, const char *what, size_t i, const char **id,
		 const char **name)
{
	*id = opt_string(o, "id");
	*name = opt_string(o, "name");
	if (!*name)
		*name = *id;
	if (!*name)
		return fail(c, "profile: %s[%zu]: missing string \"name\"", what, i);
	return 0;
}

/* Array `key` of `o`: its length and *arr (NULL, length 0 when absent or null), or -EINVAL. */
static int array(const struct rctx *c, struct json_object *o, const char *what, const char *key,
		 struct json_object **arr, size_t *n)
{
	*arr = field(o, key);
	*n = 0;
	if (*arr && json_object_is_type(*arr, json_type_null))
		*arr = NULL;
	if (*arr && !json_object_is_type(*arr, json_type_array))
		return fail(c, "profile: %s\"%s\" is not an array", what, key);
	*n = *arr ? json_object_array_length(*arr) : 0;
	return 0;
}

static int read_phase(const struct rctx *c, struct json_object *o, size_t i, struct rin_phase *p)
{
	double end;
	int ret = names(c, o, "phases", i, &p->id, &p->name);

	if (!ret)
		ret = number(c, o, "phases", (long)i, "start_us", &p->start_us);
	if (!ret && field(o, "dur_us"))
		ret = number(c, o, "phases", (long)i, "dur_us", &p->dur_us);
	else if (!ret && !(ret = number(c, o, "phases", (long)i, "end_us", &end)))
		p->dur_us = end - p->start_us;
	if (!ret && p->dur_us < 0)
		p->dur_us = 0;
	return ret;
}

static int read_milestone(const struct rctx *c, struct json_object *o, size_t i, struct rin_milestone *m)
{
	struct json_object *v = field(o, "value");
	int ret = names(c, o, "milestones", i, &m->id, &m->name);

	if (!ret)
		ret = number(c, o, "milestones", (long)i, "us", &m->us);
	m->has_value = v && json_object_is_type(v, json_type_int);
	m->value = m->has_value ? json_object_get_int64(v) : 0;
	return ret;
}

static int read_phases(const struct rctx *c, struct json_object *profile, struct report_input *in)
{
	struct json_object *arr;
	int ret = array(c, profile, "", "phases", &arr, &in->nphases);

	if (ret || in->nphases == 0)
		return ret;
	in->phases = calloc(in->nphases, sizeof(*in->phases));
	if (!in->phases)
		return -ENOMEM;
	for (size_t i = 0; i < in->nphases && !ret; i++)
		ret = read_phase(c, json_object_array_get_idx(arr, i), i, &in->phases[i]);
	return ret;
}

static int read_milestones(const struct rctx *c, struct json_object *profile, struct report_input *in)
{
	struct json_object *arr;
	int ret = array(c, profile, "", "milestones", &arr, &in->nmilestones);

	if (ret || in->nmilestones == 0)
		return ret;
	in->milestones = calloc(in->nmilestones, sizeof(*in->milestones));
	if (!in->milestones)
		return -ENOMEM;
	for (size_t i = 0; i < in->nmilestones && !ret; i++)
		ret = read_milestone(c, json_object_array_get_idx(arr, i), i, &in->milestones[i]);
	return ret;
}

/* Track i's scalar fields; its counts are copied by copy_counts() once the longest track is known. */
static int read_track(const struct rctx *c, struct json_object *o, size_t i, struct rin_track *t, size_t *nb)
{
	struct json_object *v = field(o, "vcpu"), *tid = field(o, "tid"), *counts = field(o, "counts");

	if (!v || !json_object_is_type(v, json_type_int))
		return fail(c, "profile: series.tracks[%zu]: missing integer \"vcpu\"", i);
	t->vcpu = json_object_get_int64(v);
	t->tid = tid && json_object_is_type(tid, json_type_int) ? json_object_get_int64(tid) : -1;
	t->source = opt_string(o, "source");
	if (!t->source)
		return fail(c, "profile: series.tracks[%zu]: missing string \"source\"", i);
	if (!counts || !json_object_is_type(counts, json_type_array))
		return fail(c, "profile: series.tracks[%zu]: missing array \"counts\"", i);
	if (json_object_array_length(counts) > MAX_BUCKETS)
		return fail(c, "profile: series.tracks[%zu]: more than %u buckets", i, MAX_BUCKETS);
	if (json_object_array_length(counts) > *nb)
		*nb = json_object_array_length(counts);
	return 0;
}

static int copy_counts(const struct rctx *c, struct json_object *o, size_t i, struct rin_track *t, size_t nb)
{
	struct json_object *counts = field(o, "counts");

	t->counts = calloc(nb ? nb : 1, sizeof(*t->counts));
	if (!t->counts)
		return -ENOMEM;
	for (size_t k = 0; k < json_object_array_length(counts); k++) {
		struct json_object *v = json_object_array_get_idx(counts, k);

		if (!v || !json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
			return fail(c, "profile: series.tracks[%zu].counts[%zu] is not a count", i, k);
		t->counts[k] = json_object_get_int64(v);
	}
	return 0;
}

static int read_tracks(const struct rctx *c, struct json_object *arr, struct report_input *in)
{
	int ret = 0;

	in->tracks = calloc(in->ntracks ? in->ntracks : 1, sizeof(*in->tracks));
	if (!in->tracks)
		return -ENOMEM;
	for (size_t i = 0; i < in->ntracks && !ret; i++)
		ret = read_track(c, json_object_array_get_idx(arr, i), i, &in->tracks[i], &in->nbuckets);
	for (size_t i = 0; i < in->ntracks && !ret; i++)
		ret = copy_counts(c, json_object_array_get_idx(arr, i), i, &in->tracks[i], in->nbuckets);
	return ret;
}

static int read_series(const struct rctx *c, struct json_object *profile, struct report_input *in)
{
	struct json_object *s = field(profile, "series"), *arr;
	int ret;

	if (!s || json_object_is_type(s, json_type_null))
		return 0;
	if (!json_object_is_type(s, json_type_object))
		return fail(c, "profile: \"series\" is not an object");
	if ((ret = number(c, s, "series", -1, "bucket_us", &in->bucket_us)) ||
	    (ret = number(c, s, "series", -1, "start_us", &in->start_us)))
		return ret;
	if (in->bucket_us <= 0)
		return fail(c, "profile: series.bucket_us is not positive");
	if ((ret = array(c, s, "series.", "tracks", &arr, &in->ntracks)))
		return ret;
	in->has_series = 1;
	return read_tracks(c, arr, in);
}

static void read_identity(struct json_object *profile, struct report_input *in)
{
	struct json_object *target = field(profile, "target"), *pid = field(target, "pid");
	struct json_object *dur = field(profile, "duration_us");

	in->command = opt_string(profile, "command");
	in->time_origin = opt_string(profile, "time_origin");
	in->generator = opt_string(profile, "generator");
	in->kernel = opt_string(target, "kernel");
	in->pid = pid && json_object_is_type(pid, json_type_int) ? json_object_get_int64(pid) : -1;
	in->duration_us = is_number(dur) && isfinite(json_object_get_double(dur)) && json_object_get_double(dur) >= 0
			      ? json_object_get_double(dur)
			      : -1;
}

int report_input_read(struct json_object *profile, struct report_input *in, char *err, size_t errlen)
{
	struct rctx c = {.err = err, .errlen = errlen};
	int ret;

	memset(in, 0, sizeof(*in));
	if (errlen)
		err[0] = '\0';
	if (!profile || !json_object_is_type(profile, json_type_object))
		return fail(&c, "profile: not a JSON object");
	read_identity(profile, in);
	if ((ret = read_phases(&c, profile, in)) || (ret = read_milestones(&c, profile, in)) ||
	    (ret = read_series(&c, profile, in))) {
		if (ret == -ENOMEM && errlen)
			snprintf(err, errlen, "profile: out of memory");
		report_input_free(in);
	}
	return ret;
}

void report_input_free(struct report_input *in)
{
	for (size_t i = 0; in->tracks && i < in->ntracks; i++)
		free(in->tracks[i].counts);
	free(in->tracks);
	free(in->phases);
	free(in->milestones);
	memset(in, 0, sizeof(*in));
}

size_t report_utf8_len(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = s[0] < 0x80 ? 1 : s[0] < 0xc2 ? 0 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : s[0] < 0xf5 ? 4 : 0;

	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((n == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (n == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
	    (n == 4 && s[0] == 0xf0 && s[1] < 0x90) || (n == 4 && s[0] == 0xf4 && s[1] >= 0x90))
		return 0; /* overlong, surrogate, beyond U+10FFFF */
	if (n == 3 && s[0] == 0xef && s[1] == 0xbf && s[2] >= 0xbe)
		return 0; /* U+FFFE, U+FFFF */
	return n;
}

double report_input_end_us(const struct report_input *in)
{
	double end = in->duration_us > 0 ? in->duration_us : 0;

	for (size_t i = 0; i < in->nphases; i++)
		end = fmax(end, in->phases[i].start_us + in->phases[i].dur_us);
	for (size_t i = 0; i < in->nmilestones; i++)
		end = fmax(end, in->milestones[i].us);
	if (in->has_series)
		end = fmax(end, in->start_us + (double)in->nbuckets * in->bucket_us);
	return isfinite(end) ? end : 0;
}
