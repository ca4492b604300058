/* report_input.h - the timeline parts of a brisk-profile/1 object, validated, for the trace and SVG writers. */
#ifndef BRISK_REPORT_INPUT_H
#define BRISK_REPORT_INPUT_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

/* Strings point into the profile object: valid while the caller holds it. Times are µs since the origin. */
struct rin_phase {
	const char *id; /* NULL when the entry has none */
	const char *name;
	double start_us, dur_us; /* dur_us >= 0 */
};

struct rin_milestone {
	const char *id; /* NULL when the entry has none */
	const char *name;
	double us;
	int has_value; /* boot markers: the value the guest wrote */
	int64_t value;
};

struct rin_track {
	int64_t vcpu, tid;  /* tid -1 when unknown */
	const char *source; /* "kvm" or "userspace" (any string is kept) */
	int64_t *counts;    /* [nbuckets] of the series; a shorter track is padded with zeros */
};

struct report_input {
	const char *command, *time_origin, *generator, *kernel; /* NULL when absent */
	int64_t pid;						/* target.pid, or -1 */
	double duration_us;					/* -1 when absent */
	struct rin_phase *phases;
	size_t nphases;
	struct rin_milestone *milestones;
	size_t nmilestones;
	int has_series; /* 0: the profile has no "series" (or it is null) */
	double bucket_us, start_us;
	struct rin_track *tracks;
	size_t ntracks, nbuckets;
};

/*
 * Reads `phases`, `milestones`, `series` and the identity fields of `profile` (docs/profiler.md) into *in.
 * A missing or null section is empty; a section of the wrong type, or an entry without a field it needs
 * (name or id, times, vcpu, source, integer counts), or a non-finite time, is an error.
 * Returns 0, -EINVAL with `err` naming the field ("profile: phases[2]: missing number \"start_us\""), or
 * -ENOMEM. On error *in holds nothing to free; on success release it with report_input_free().
 */
int report_input_read(struct json_object *profile, struct report_input *in, char *err, size_t errlen);
void report_input_free(struct report_input *in);
/* The end of the run in µs: the latest of duration_us, phase ends, milestones and the series end; >= 0. */
double report_input_end_us(const struct report_input *in);
/*
 * Length (1..4) of the UTF-8 sequence at `s`, or 0 when it is not valid UTF-8 or not a character XML 1.0
 * allows (section 2.2: no surrogates, U+FFFE, U+FFFF); both writers replace such bytes. *s != 0.
 */
size_t report_utf8_len(const char *s);

#endif
