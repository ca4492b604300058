/* report_svg.c - brisk-profile/1 report as a self-contained SVG timeline: phase bars, milestones, exit rates. */
#include <errno.h>
#include <json-c/json.h>
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
 * Layout, top to bottom: a title; "VMM phases" (one bar per phase on its own axis, zoomed to the phases,
 * because they take a few ms of a run that may last seconds); "Run" (the whole run on one axis: milestone
 * labels, then the exits per bucket of every series track with the milestones as vertical lines, then a
 * legend). Everything is inline: no CSS, scripts or fonts beyond the generic "sans-serif" family.
 */
#define WIDTH	     1000.0
#define PLOT_X0	     250.0 /* left of the plots; the label column is to its left */
#define PLOT_X1	     975.0
#define PLOT_W	     (PLOT_X1 - PLOT_X0)
#define ROW_H	     18.0 /* one phase */
#define BAR_H	     12.0
#define AXIS_H	     42.0  /* ticks, tick labels and the axis title */
#define BAND_H	     115.0 /* milestone labels, written upwards */
#define CHART_H	     220.0
#define LEGEND_W     180.0
#define LEGEND_H     16.0
#define NAME_CHARS   30 /* label column: longer names are cut with an ellipsis */
#define MARK_CHARS   20
#define MARK_SPACING 11.0 /* px between two labelled milestones; closer ones keep only their line and tooltip */
#define MAX_TICKS    10

static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
				      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

struct svg {
	FILE *f; /* the body, in memory; the root element is written once the height is known */
	const struct report_input *in;
	double y;      /* top of the next section */
	double t0, t1; /* the µs range of the current axis; t1 > t0 */
};

/* `s` as XML character data or attribute text: escaped, invalid bytes as '?', cut at `max` characters. */
static void put_text(FILE *f, const char *s, size_t max)
{
	for (size_t chars = 0; *s; chars++) {
		size_t n = report_utf8_len(s);

		if (chars == max) {
			fputs("&#8230;", f);
			return;
		}
		if (n == 0 || (n == 1 && (unsigned char)*s < 0x20))
			fputc(n ? ' ' : '?', f);
		else if (n > 1)
			fwrite(s, 1, n, f);
		else if (*s == '&')
			fputs("&amp;", f);
		else if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '"')
			fputs("&quot;", f);
		else if (*s == '\'')
			fputs("&apos;", f);
		else
			fputc(*s, f);
		s += n ? n : 1;
	}
}

/* A duration or time for people: "91.5 µs", "12.34 ms", "3.210 s". */
static void fmt_us(char *buf, size_t len, double us)
{
	if (us < 1000)
		snprintf(buf, len, "%.1f \xc2\xb5s", us);
	else if (us < 1e6)
		snprintf(buf, len, "%.2f ms", us / 1e3);
	else if (us < 1e9)
		snprintf(buf, len, "%.3f s", us / 1e6);
	else
		snprintf(buf, len, "%.4g s", us / 1e6);
}

/* The smallest 1, 2 or 5 x 10^k that cuts `range` into at most `n` steps; range > 0. */
static double nice_step(double range, int n)
{
	double step = pow(10, floor(log10(range / n)));

	if (range / step > n)
		step *= 2;
	if (range / step > n)
		step *= 2.5;
	if (range / step > n)
		step *= 2;
	return step;
}

/* x of time `us` on the current axis, clamped to the plot so that no coordinate runs away. */
static double xpos(const struct svg *s, double us)
{
	double r = (us - s->t0) / (s->t1 - s->t0);

	return PLOT_X0 + (isfinite(r) ? fmin(fmax(r, 0), 1) : 0) * PLOT_W;
}

/* The axis from 0 to t1_us; an empty run gets 1 ms so that the ticks stay readable. */
static void set_range(struct svg *s, double t1_us)
{
	s->t0 = 0;
	s->t1 = isfinite(t1_us) && t1_us > 0 ? t1_us : 1000;
}

static void heading(struct svg *s, const char *text)
{
	fprintf(s->f, "<text x=\"10\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\">", s->y + 14);
	put_text(s->f, text, 80);
	fputs("</text>\n", s->f);
	s->y += 24;
}

/* Vertical grid lines at the ticks of the current axis, from y0 to y1. */
static void grid(const struct svg *s, double y0, double y1)
{
	double step = nice_step((s->t1 - s->t0) / 1e3, MAX_TICKS) * 1e3;

	fputs("<g stroke=\"#e4e4e4\" stroke-width=\"1\">\n", s->f);
	for (double t = 0; t <= s->t1 + step / 1e6; t += step)
		fprintf(s->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", xpos(s, t), y0, xpos(s, t),
			y1);
	fputs("</g>\n", s->f);
}

/* The time axis at s->y: a line, ticks labelled in ms, and the axis title. */
static void axis(struct svg *s)
{
	double step_ms = nice_step((s->t1 - s->t0) / 1e3, MAX_TICKS);
	int decimals = step_ms >= 1 ? 0 : (int)fmin(6, ceil(-log10(step_ms)));
	const char *origin = s->in->time_origin && !strcmp(s->in->time_origin, "trace_start") ? "trace start" : "exec";

	fprintf(s->f,
		"<g font-size=\"10\" text-anchor=\"middle\">\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
		"y2=\"%.1f\" stroke=\"#333\"/>\n",
		PLOT_X0, s->y, PLOT_X1, s->y);
	for (double t = 0; t <= s->t1 / 1e3 + step_ms / 1e6; t += step_ms) {
		double x = xpos(s, t * 1e3);

		fprintf(s->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>", x, s->y, x,
			s->y + 4);
		if (step_ms >= 1e6) /* hours and beyond: 1.2e+07 rather than a dozen digits */
			fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\">%.3g</text>\n", x, s->y + 15, t);
		else
			fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\">%.*f</text>\n", x, s->y + 15, decimals, t);
	}
	fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">ms since %s</text>\n</g>\n", PLOT_X0 + PLOT_W / 2,
		s->y + 32, origin);
	s->y += AXIS_H;
}

/* One phase row: name and duration in the label column, a bar from start to end with a tooltip. */
static void phase_row(const struct svg *s, const struct rin_phase *p, size_t i)
{
	double x0 = xpos(s, p->start_us), x1 = xpos(s, p->start_us + p->dur_us), y = s->y + (double)i * ROW_H;
	char dur[32], start[32];

	fmt_us(dur, sizeof(dur), p->dur_us);
	fmt_us(start, sizeof(start), p->start_us);
	fprintf(s->f, "<text x=\"10\" y=\"%.1f\" font-size=\"11\">", y + 13);
	put_text(s->f, p->name, NAME_CHARS);
	fprintf(s->f, "</text>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n",
		PLOT_X0 - 8, y + 13, dur);
	fprintf(s->f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>", x0,
		y + (ROW_H - BAR_H) / 2, fmax(x1 - x0, 1), BAR_H, i % 2 ? "#6baed6" : "#2171b5");
	put_text(s->f, p->name, SIZE_MAX);
	fprintf(s->f, ": from %s, %s</title></rect>\n", start, dur);
}

static void phases_panel(struct svg *s)
{
	const struct report_input *in = s->in;
	double end = 0;

	heading(s, "VMM phases");
	if (in->nphases == 0) {
		fprintf(s->f,
			"<text x=\"10\" y=\"%.1f\" font-size=\"11\" fill=\"#666\">no VMM phases in this "
			"profile</text>\n",
			s->y + 12);
		s->y += 24;
		return;
	}
	for (size_t i = 0; i < in->nphases; i++)
		end = fmax(end, in->phases[i].start_us + in->phases[i].dur_us);
	set_range(s, end);
	grid(s, s->y, s->y + (double)in->nphases * ROW_H);
	for (size_t i = 0; i < in->nphases; i++)
		phase_row(s, &in->phases[i], i);
	s->y += (double)in->nphases * ROW_H + 4;
	axis(s);
}

/* The milestone's tooltip: name, time, and a boot marker's value. */
static void milestone_title(const struct svg *s, const struct rin_milestone *m)
{
	char at[32];

	fmt_us(at, sizeof(at), m->us);
	fputs("<title>", s->f);
	put_text(s->f, m->name, SIZE_MAX);
	fprintf(s->f, " at %s", at);
	if (m->has_value)
		fprintf(s->f, " (value 0x%llx)", (unsigned long long)m->value);
	fputs("</title>", s->f);
}

/* Labels written upwards from the band's bottom; one too close to the previous label is left out. */
static void milestone_labels(struct svg *s)
{
	double last = -1e9, bottom = s->y + BAND_H - 4;
	size_t skipped = 0;

	fputs("<g font-size=\"10\" fill=\"#7b241c\">\n", s->f);
	for (size_t i = 0; i < s->in->nmilestones; i++) {
		const struct rin_milestone *m = &s->in->milestones[i];
		double x = xpos(s, m->us);

		if (x - last < MARK_SPACING) {
			skipped++;
			continue;
		}
		last = x;
		fprintf(s->f, "<text transform=\"translate(%.1f %.1f) rotate(-90)\" x=\"0\" y=\"-3\">", x, bottom);
		put_text(s->f, m->name, MARK_CHARS);
		milestone_title(s, m);
		fputs("</text>\n", s->f);
	}
	if (skipped)
		fprintf(s->f, "<text x=\"10\" y=\"%.1f\">%zu more milestone(s): too close to label</text>\n", bottom,
			skipped);
	fputs("</g>\n", s->f);
	s->y += BAND_H;
}

/* Every milestone as a vertical line from y0 to y1; boot markers grey, the others dark red. */
static void milestone_lines(const struct svg *s, double y0, double y1)
{
	for (size_t i = 0; i < s->in->nmilestones; i++) {
		const struct rin_milestone *m = &s->in->milestones[i];
		int mark = m->id && !strcmp(m->id, "bootmark");
		double x = xpos(s, m->us);

		fprintf(s->f,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
			"stroke-dasharray=\"3 2\">",
			x, y0, x, y1, mark ? "#999" : "#a93226");
		milestone_title(s, m);
		fputs("</line>\n", s->f);
	}
}

/* Buckets merged so that the chart has at most one point per pixel. */
static size_t merge_factor(const struct report_input *in)
{
	size_t k = (size_t)ceil((double)in->nbuckets / PLOT_W);

	return k ? k : 1;
}

static int64_t merged(const struct rin_track *t, size_t nbuckets, size_t k, size_t b)
{
	int64_t sum = 0;

	for (size_t i = b * k; i < (b + 1) * k && i < nbuckets; i++)
		sum += t->counts[i];
	return sum;
}

static int64_t max_count(const struct report_input *in, size_t k)
{
	int64_t max = 0;

	for (size_t i = 0; i < in->ntracks; i++)
		for (size_t b = 0; b * k < in->nbuckets; b++)
			if (merged(&in->tracks[i], in->nbuckets, k, b) > max)
				max = merged(&in->tracks[i], in->nbuckets, k, b);
	return max;
}

/* True when no track before i has track i's vCPU. */
static int first_of_vcpu(const struct report_input *in, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (in->tracks[j].vcpu == in->tracks[i].vcpu)
			return 0;
	return 1;
}

/* Colour of a track: one per vCPU, by the vCPU's rank in order of first appearance. */
static const char *track_colour(const struct report_input *in, size_t i)
{
	size_t first = 0, rank = 0;

	while (in->tracks[first].vcpu != in->tracks[i].vcpu)
		first++;
	for (size_t j = 0; j < first; j++)
		rank += (size_t)first_of_vcpu(in, j);
	return palette[rank % (sizeof(palette) / sizeof(palette[0]))];
}

/* Userspace exits dashed, in-kernel (kvm) ones solid, any other source dotted. */
static const char *track_dash(const struct rin_track *t)
{
	return !strcmp(t->source, "kvm") ? "none" : !strcmp(t->source, "userspace") ? "5 3" : "1 2";
}

/* A track as a step line: each merged bucket a horizontal segment at its count. */
static void track_line(const struct svg *s, size_t i, size_t k, double ymax, double ybase)
{
	const struct report_input *in = s->in;
	const struct rin_track *t = &in->tracks[i];

	fprintf(s->f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"%s\" points=\"",
		track_colour(in, i), track_dash(t));
	for (size_t b = 0; b * k < in->nbuckets; b++) {
		double y = ybase - (double)merged(t, in->nbuckets, k, b) / ymax * CHART_H;
		double a = in->start_us + (double)(b * k) * in->bucket_us;
		double z = in->start_us + (double)fmin((double)((b + 1) * k), (double)in->nbuckets) * in->bucket_us;

		fprintf(s->f, "%.1f,%.1f %.1f,%.1f ", xpos(s, a), y, xpos(s, z), y);
	}
	fputs("\"/>\n", s->f);
}

/* The y axis: gridlines and counts in the label column, and what one bucket is. */
static void count_axis(const struct svg *s, double ymax, double ystep, size_t k)
{
	char bucket[32];

	fputs("<g font-size=\"10\" text-anchor=\"end\">\n", s->f);
	for (double v = 0; v <= ymax + ystep / 2; v += ystep) {
		double y = s->y + CHART_H - v / ymax * CHART_H;

		fprintf(s->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", PLOT_X0, y,
			PLOT_X1, y);
		fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\">%.0f</text>\n", PLOT_X0 - 6, y + 3, v);
	}
	fmt_us(bucket, sizeof(bucket), s->in->bucket_us * (double)k);
	fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">exits per %s</text>\n</g>\n", PLOT_X0 - 40,
		s->y + CHART_H / 2, bucket);
}

/* The exit chart with the milestone lines over it; a note instead when the profile has no series. */
static void exit_chart(struct svg *s)
{
	const struct report_input *in = s->in;
	size_t k = merge_factor(in);
	double ymax = (double)max_count(in, k), ystep;

	if (!in->has_series || in->ntracks == 0 || in->nbuckets == 0) {
		fprintf(s->f,
			"<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#666\">no exit series in this "
			"profile</text>\n",
			PLOT_X0, s->y + CHART_H / 2);
		milestone_lines(s, s->y - BAND_H, s->y + CHART_H);
		s->y += CHART_H;
		return;
	}
	ystep = nice_step(ymax > 0 ? ymax : 1, 5);
	ymax = ceil((ymax > 0 ? ymax : 1) / ystep) * ystep;
	grid(s, s->y, s->y + CHART_H);
	count_axis(s, ymax, ystep, k);
	for (size_t i = 0; i < in->ntracks; i++)
		track_line(s, i, k, ymax, s->y + CHART_H);
	milestone_lines(s, s->y - BAND_H, s->y + CHART_H);
	s->y += CHART_H;
}

static void legend(struct svg *s)
{
	const size_t per_row = (size_t)((WIDTH - PLOT_X0) / LEGEND_W);

	for (size_t i = 0; i < s->in->ntracks; i++) {
		const struct rin_track *t = &s->in->tracks[i];
		double x = PLOT_X0 + (double)(i % per_row) * LEGEND_W, y = s->y + (double)(i / per_row) * LEGEND_H;
		int64_t total = 0;

		for (size_t b = 0; b < s->in->nbuckets; b++)
			total += t->counts[b];
		fprintf(s->f,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\" "
			"stroke-dasharray=\"%s\"/>",
			x, y + 8, x + 22, y + 8, track_colour(s->in, i), track_dash(t));
		fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">vCPU %lld ", x + 27, y + 11,
			(long long)t->vcpu);
		put_text(s->f, t->source, 12);
		fprintf(s->f, " (%lld)</text>\n", (long long)total);
	}
	s->y += (double)((s->in->ntracks + per_row - 1) / per_row) * LEGEND_H + 6;
}

/* The whole run: the phases' span shaded, milestone labels, the exit chart, its axis and legend. */
static void run_panel(struct svg *s)
{
	double end = 0;

	heading(s, "Run: milestones and exits per vCPU");
	set_range(s, report_input_end_us(s->in));
	for (size_t i = 0; i < s->in->nphases; i++)
		end = fmax(end, s->in->phases[i].start_us + s->in->phases[i].dur_us);
	if (end > 0)
		fprintf(s->f,
			"<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f2f2f2\">"
			"<title>VMM phases (zoomed above)</title></rect>\n",
			PLOT_X0, s->y, fmax(xpos(s, end) - PLOT_X0, 1), BAND_H + CHART_H);
	if (xpos(s, end) - PLOT_X0 >= 70)
		fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#888\">VMM phases</text>\n",
			PLOT_X0 + 4, s->y + 12);
	milestone_labels(s);
	exit_chart(s);
	axis(s);
	legend(s);
}

static void title(struct svg *s)
{
	const struct report_input *in = s->in;
	char dur[32];

	fmt_us(dur, sizeof(dur), report_input_end_us(in));
	fputs("<text x=\"10\" y=\"20\" font-size=\"15\" font-weight=\"bold\">brisk ", s->f);
	put_text(s->f, in->command ? in->command : "profile", 16);
	if (in->kernel) {
		fputs(": ", s->f);
		put_text(s->f, in->kernel, 70);
	}
	fprintf(s->f,
		"</text>\n<text x=\"10\" y=\"36\" font-size=\"11\" fill=\"#555\">%zu phases, %zu milestones, "
		"%s in all",
		in->nphases, in->nmilestones, dur);
	if (in->generator) {
		fputs(" \xe2\x80\x94 ", s->f);
		put_text(s->f, in->generator, 40);
	}
	fputs("</text>\n", s->f);
	s->y = 50;
}

/*
 * The root element (its height known only now), the body, the end tag: into `path`, replaced whole
 * (file_replace: a failure leaves what was there).
 */
static int write_svg(const char *path, const char *body, size_t len, double height, char *err, size_t errlen)
{
	struct file_replace r;
	FILE *f;
	int ret = file_replace_open(&r, path, "--svg", 0, err, errlen);

	if (ret)
		return ret;
	f = fdopen(dup(r.fd), "we");
	if (!f) {
		ret = -errno;
		file_replace_abort(&r);
		return err_set(err, errlen, ret, "--svg %s: %s", path, strerror(-ret));
	}
	errno = 0;
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
		"width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
		WIDTH, height, WIDTH, height);
	if (fwrite(body, 1, len, f) != len || fputs("</svg>\n", f) == EOF || ferror(f))
		ret = errno ? -errno : -EIO;
	if (fclose(f) != 0 && !ret)
		ret = errno ? -errno : -EIO;
	if (!ret)
		ret = file_replace_commit(&r, false, err, errlen);
	else
		err_set(err, errlen, ret, "--svg %s: %s", path, strerror(-ret));
	if (ret)
		file_replace_abort(&r);
	return ret;
}

/*
 * Contract (declared in brisk/profile.h): writes `profile` (brisk-profile/1, only read) to `path` as a
 * self-contained SVG, WIDTH px wide: title, "VMM phases" (bars on an axis zoomed to the phases), "Run"
 * (milestone lines and labels, exits per bucket per series track, legend). Missing sections get a note
 * instead of their chart. Returns 0; -EINVAL when the profile is malformed (err names the field);
 * -ENOMEM; or -errno of the file (err names it). On error the file at `path` is as it was.
 */
int report_svg_write(struct json_object *profile, const char *path, char *err, size_t errlen)
{
	struct report_input in;
	struct svg s = {.in = &in};
	char *body = NULL;
	size_t len = 0;
	int ret = report_input_read(profile, &in, err, errlen);

	if (ret)
		return ret;
	s.f = open_memstream(&body, &len);
	if (!s.f) {
		ret = -errno;
	} else {
		title(&s);
		phases_panel(&s);
		run_panel(&s);
		ret = fclose(s.f) == 0 ? write_svg(path, body, len, ceil(s.y + 10), err, errlen) : -ENOMEM;
		if (ret == -ENOMEM && errlen)
			snprintf(err, errlen, "--svg %s: out of memory", path);
	}
	free(body);
	report_input_free(&in);
	return ret;
}
