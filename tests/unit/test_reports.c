/* test_reports.c - the Perfetto trace and SVG writers on small brisk-profile/1 objects, good and malformed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/profile.h"

/*
 * The SVG is checked with the small strict XML well-formedness checker below (XML 1.0 section 2: one root
 * element, matched tags, quoted attributes, only the predefined and numeric entities, valid UTF-8, no
 * control characters) rather than with libxml2, so the unit tests need no new dependency.
 */

static char dir[] = "/tmp/brisk-test-reports-XXXXXX";

/* ---- building profiles ------------------------------------------------------------------------------- */

static json_object *phase(const char *id, const char *name, double start, double end)
{
	json_object *p = json_object_new_object();

	json_object_object_add(p, "id", json_object_new_string(id));
	json_object_object_add(p, "name", json_object_new_string(name));
	json_object_object_add(p, "start_us", json_object_new_double(start));
	json_object_object_add(p, "end_us", json_object_new_double(end));
	json_object_object_add(p, "dur_us", json_object_new_double(end - start));
	return p;
}

static json_object *milestone(const char *id, const char *name, double us, int64_t value)
{
	json_object *m = json_object_new_object();

	json_object_object_add(m, "id", json_object_new_string(id));
	json_object_object_add(m, "name", json_object_new_string(name));
	json_object_object_add(m, "us", json_object_new_double(us));
	if (value >= 0)
		json_object_object_add(m, "value", json_object_new_int64(value));
	return m;
}

static json_object *track(int vcpu, int tid, const char *source, const int64_t *counts, size_t n)
{
	json_object *t = json_object_new_object(), *c = json_object_new_array();

	for (size_t i = 0; i < n; i++)
		json_object_array_add(c, json_object_new_int64(counts[i]));
	json_object_object_add(t, "vcpu", json_object_new_int(vcpu));
	json_object_object_add(t, "tid", json_object_new_int(tid));
	json_object_object_add(t, "source", json_object_new_string(source));
	json_object_object_add(t, "counts", c);
	return t;
}

static json_object *series(double bucket_us, double start_us)
{
	json_object *s = json_object_new_object();

	json_object_object_add(s, "bucket_us", json_object_new_double(bucket_us));
	json_object_object_add(s, "start_us", json_object_new_double(start_us));
	json_object_object_add(s, "tracks", json_object_new_array());
	return s;
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;

	json_object_object_get_ex(o, key, &v);
	return v;
}

/* A profile of two vCPUs as docs/profiler.md shows it: 8 phases, 6 milestones (one hostile name), 3 tracks. */
static json_object *sample_profile(void)
{
	static const char *const ids[] = {"exec",   "main",	     "kvm_open",    "vm_created",
					  "memory", "kernel_loaded", "vcpus_ready", "first_run"};
	static const double at[] = {0, 350.5, 812.0, 903.5, 1100.0, 1900.25, 2050.0, 2100.0};
	static const int64_t kvm0[] = {0, 812, 900, 12, 0, 3}, user0[] = {1, 0, 0, 3, 0, 1}, kvm1[] = {0, 0, 40, 41};
	json_object *p = json_object_new_object(), *phases = json_object_new_array(), *ms = json_object_new_array();
	json_object *s = series(1000, 2100);

	json_object_object_add(p, "schema", json_object_new_string(PROFILE_SCHEMA));
	json_object_object_add(p, "generator", json_object_new_string("brisk 0.1.0"));
	json_object_object_add(p, "command", json_object_new_string("profile"));
	json_object_object_add(p, "time_origin", json_object_new_string("exec"));
	json_object_object_add(p, "duration_us", json_object_new_double(8400));
	for (size_t i = 0; i < 8; i++)
		json_object_array_add(phases, phase(ids[i], ids[i], i ? at[i - 1] : 0, at[i]));
	json_object_object_add(p, "phases", phases);
	json_object_array_add(ms, milestone("first_exit", "first exit", 2150, -1));
	json_object_array_add(ms, milestone("first_serial", "first serial byte", 2600, -1));
	json_object_array_add(ms, milestone("bootmark", "boot marker 0x10", 4000, 16));
	json_object_array_add(ms, milestone("bootmark", "<a & \"b\" 'c'>", 4001, 17));
	json_object_array_add(ms, milestone("guest_end", "guest ended", 8000, -1));
	json_object_array_add(ms, milestone("exit", "exit", 8400, -1));
	json_object_object_add(p, "milestones", ms);
	json_object_array_add(get(s, "tracks"), track(0, 1236, "kvm", kvm0, 6));
	json_object_array_add(get(s, "tracks"), track(0, 1236, "userspace", user0, 6));
	json_object_array_add(get(s, "tracks"), track(1, 1237, "kvm", kvm1, 4)); /* shorter: padded */
	json_object_array_add(get(s, "tracks"), track(1, 1238, "kvm", kvm1, 3)); /* same vCPU and source: summed */
	json_object_object_add(p, "series", s);
	return p;
}

/* ---- reading results --------------------------------------------------------------------------------- */

static char *path_of(const char *name)
{
	static char buf[4][256];
	static unsigned next;
	char *p = buf[next++ % 4];

	snprintf(p, sizeof(buf[0]), "%s/%s", dir, name);
	return p;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static json_object *parse_file(const char *path)
{
	char *text = slurp(path);
	json_tokener *tok = json_tokener_new();
	json_object *o = json_tokener_parse_ex(tok, text, (int)strlen(text));

	assert_int_equal(json_tokener_get_error(tok), json_tokener_success);
	assert_non_null(o);
	json_tokener_free(tok);
	free(text);
	return o;
}

static size_t count_substr(const char *s, const char *needle)
{
	size_t n = 0;

	for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* ---- the XML well-formedness checker ----------------------------------------------------------------- */

struct xml {
	const char *p;
	const char *stack[64];
	size_t stack_len[64];
	int depth, roots;
};

static int name_char(char c, int first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && ((c >= '0' && c <= '9') || c == '-' || c == '.'));
}

static size_t xml_name(const char *p)
{
	size_t n = 0;

	while (name_char(p[n], n == 0))
		n++;
	return n;
}

/* An entity reference at p ('&'): its length, or 0 when it is not one XML predefines or a numeric one. */
static size_t xml_entity(const char *p)
{
	static const char *const named[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
	size_t n = 2;

	for (size_t i = 0; i < 5; i++)
		if (!strncmp(p, named[i], strlen(named[i])))
			return strlen(named[i]);
	if (p[1] != '#')
		return 0;
	if (p[2] == 'x')
		while (strchr("0123456789abcdefABCDEF", p[++n]) && p[n])
			;
	else
		while (p[n] >= '0' && p[n] <= '9')
			n++;
	return p[n] == ';' && n > 2 + (p[2] == 'x') ? n + 1 : 0;
}

/* Character data up to the next '<' (or the end); 0 or -1. Outside the root only whitespace. */
static int xml_text(struct xml *x)
{
	for (; *x->p && *x->p != '<'; x->p++) {
		unsigned char c = (unsigned char)*x->p;

		if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
			return -1;
		if (x->depth == 0 && !strchr(" \t\r\n", c))
			return -1;
		if (c == '>' || (c == '&' && !xml_entity(x->p)))
			return -1;
	}
	return 0;
}

/* Attributes of a start tag up to '>' or '/>'; 0 or -1. */
static int xml_attrs(struct xml *x)
{
	for (;;) {
		size_t n;
		char q;

		while (strchr(" \t\r\n", *x->p) && *x->p)
			x->p++;
		if (*x->p == '>' || (x->p[0] == '/' && x->p[1] == '>'))
			return 0;
		n = xml_name(x->p);
		if (!n || x->p[n] != '=' || (x->p[n + 1] != '"' && x->p[n + 1] != '\''))
			return -1;
		q = x->p[n + 1];
		for (x->p += n + 2; *x->p != q; x->p++)
			if (!*x->p || *x->p == '<' || (*x->p == '&' && !xml_entity(x->p)))
				return -1;
		x->p++;
		if (!strchr(" \t\r\n/>", *x->p))
			return -1;
	}
}

static int xml_start_tag(struct xml *x)
{
	size_t n = xml_name(++x->p);

	if (!n || x->depth == 64 || (x->depth == 0 && x->roots++ > 0))
		return -1;
	if (x->depth == 0 && (n != 3 || strncmp(x->p, "svg", 3)))
		return -1;
	x->stack[x->depth] = x->p;
	x->stack_len[x->depth] = n;
	x->p += n;
	if (xml_attrs(x))
		return -1;
	if (*x->p == '/') {
		x->p += 2;
		return 0;
	}
	x->depth++;
	x->p++;
	return 0;
}

static int xml_end_tag(struct xml *x)
{
	size_t n = xml_name(x->p + 2);

	if (x->depth == 0 || n != x->stack_len[x->depth - 1] || strncmp(x->p + 2, x->stack[x->depth - 1], n) ||
	    x->p[2 + n] != '>')
		return -1;
	x->depth--;
	x->p += n + 3;
	return 0;
}

/* 0 when `doc` is a well-formed XML document whose one root element is <svg>. */
static int xml_check(const char *doc)
{
	struct xml x = {.p = doc};

	if (!strncmp(x.p, "<?xml ", 6)) {
		x.p = strstr(x.p, "?>");
		if (!x.p)
			return -1;
		x.p += 2;
	}
	while (*x.p) {
		int ret;

		if (x.p[0] != '<')
			ret = xml_text(&x);
		else if (!strncmp(x.p, "<!--", 4))
			ret = (x.p = strstr(x.p, "-->")) ? (x.p += 3, 0) : -1;
		else if (x.p[1] == '/')
			ret = xml_end_tag(&x);
		else
			ret = xml_start_tag(&x);
		if (ret)
			return -1;
	}
	return x.depth == 0 && x.roots == 1 ? 0 : -1;
}

/* Valid UTF-8 throughout (the writer replaces bad bytes). */
static int utf8_ok(const unsigned char *s)
{
	while (*s) {
		size_t n = *s < 0x80		 ? 1
			   : (*s & 0xe0) == 0xc0 ? 2
			   : (*s & 0xf0) == 0xe0 ? 3
			   : (*s & 0xf8) == 0xf0 ? 4
						 : 0;

		if (!n)
			return 0;
		for (size_t i = 1; i < n; i++)
			if ((s[i] & 0xc0) != 0x80)
				return 0;
		s += n;
	}
	return 1;
}

static void test_xml_checker(void **state)
{
	(void)state;
	assert_int_equal(xml_check("<svg a=\"1\"><g><text>a &amp; b &#8230;</text></g><line/></svg>\n"), 0);
	assert_int_equal(xml_check("<?xml version=\"1.0\"?>\n<svg/>"), 0);
	assert_int_equal(xml_check("<svg><g></svg>"), -1);     /* unclosed */
	assert_int_equal(xml_check("<svg></svg><svg/>"), -1);  /* two roots */
	assert_int_equal(xml_check("<svg>a & b</svg>"), -1);   /* raw ampersand */
	assert_int_equal(xml_check("<svg>a < b</svg>"), -1);   /* raw less-than */
	assert_int_equal(xml_check("<svg a=\"<\"/>"), -1);     /* less-than in an attribute */
	assert_int_equal(xml_check("<svg a=1/>"), -1);	       /* unquoted */
	assert_int_equal(xml_check("<html/>"), -1);	       /* not svg */
	assert_int_equal(xml_check("<svg><a></b></svg>"), -1); /* mismatched */
	assert_int_equal(xml_check("<svg>&nbsp;</svg>"), -1);  /* not predefined */
	assert_int_equal(xml_check("text<svg/>"), -1);	       /* text outside the root */
	assert_int_equal(xml_check("<svg>\x01</svg>"), -1);    /* control character */
}

/* ---- Perfetto ------------------------------------------------------------------------------------------ */

static json_object *events_of(json_object *trace, const char *ph, const char *name)
{
	json_object *ev = get(trace, "traceEvents"), *out = json_object_new_array();

	assert_non_null(ev);
	assert_true(json_object_is_type(ev, json_type_array));
	for (size_t i = 0; i < json_object_array_length(ev); i++) {
		json_object *e = json_object_array_get_idx(ev, i);

		assert_non_null(get(e, "ph"));
		assert_non_null(get(e, "pid"));
		assert_non_null(get(e, "tid"));
		if (!strcmp(json_object_get_string(get(e, "ph")), ph) &&
		    (!name || !strcmp(json_object_get_string(get(e, "name")), name)))
			json_object_array_add(out, json_object_get(e));
	}
	return out;
}

static void check_phase_slices(json_object *trace)
{
	json_object *x = events_of(trace, "X", NULL), *kvm;

	assert_int_equal(json_object_array_length(x), 8);
	for (size_t i = 0; i < 8; i++) {
		json_object *e = json_object_array_get_idx(x, i);

		assert_string_equal(json_object_get_string(get(e, "cat")), "phase");
		assert_int_equal(json_object_get_int(get(e, "tid")), 0);
		assert_true(json_object_get_double(get(e, "dur")) >= 0);
	}
	kvm = json_object_array_get_idx(x, 2);
	assert_string_equal(json_object_get_string(get(kvm, "name")), "kvm_open");
	assert_true(json_object_get_double(get(kvm, "ts")) == 350.5);
	assert_true(json_object_get_double(get(kvm, "dur")) == 461.5);
	json_object_put(x);
}

static void check_instants(json_object *trace)
{
	json_object *i = events_of(trace, "i", NULL), *mark;

	assert_int_equal(json_object_array_length(i), 6);
	mark = json_object_array_get_idx(i, 3);
	assert_string_equal(json_object_get_string(get(mark, "name")), "<a & \"b\" 'c'>");
	assert_string_equal(json_object_get_string(get(mark, "s")), "p");
	assert_int_equal(json_object_get_int(get(get(mark, "args"), "value")), 17);
	assert_true(json_object_get_double(get(mark, "ts")) == 4001);
	json_object_put(i);
}

static void check_counters(json_object *trace)
{
	json_object *c0 = events_of(trace, "C", "vcpu 0 exits"), *c1 = events_of(trace, "C", "vcpu 1 exits");
	json_object *second = json_object_array_get_idx(c0, 1), *last;

	/* vCPU 0: buckets 0..5 all differ from their predecessor, plus the closing zero: 7 events. */
	assert_int_equal(json_object_array_length(c0), 7);
	assert_true(json_object_get_double(get(second, "ts")) == 3100);
	assert_int_equal(json_object_get_int(get(get(second, "args"), "kvm")), 812);
	assert_int_equal(json_object_get_int(get(get(second, "args"), "userspace")), 0);
	/* vCPU 1, two kvm tracks summed: 0, 0 (unchanged, left out), 80, 41, 0 (padding), 0 (left out), the
	 * closing zero at 8100. */
	assert_int_equal(json_object_array_length(c1), 5);
	assert_int_equal(json_object_get_int(get(get(json_object_array_get_idx(c1, 1), "args"), "kvm")), 80);
	assert_int_equal(json_object_object_length(get(json_object_array_get_idx(c1, 1), "args")), 1);
	last = json_object_array_get_idx(c1, 4);
	assert_true(json_object_get_double(get(last, "ts")) == 2100 + 6 * 1000);
	assert_int_equal(json_object_get_int(get(get(last, "args"), "kvm")), 0);
	json_object_put(c0);
	json_object_put(c1);
}

static void test_perfetto(void **state)
{
	json_object *p = sample_profile(), *trace, *meta;
	char err[256];

	(void)state;
	assert_int_equal(report_perfetto_write(p, path_of("trace.json"), err, sizeof(err)), 0);
	trace = parse_file(path_of("trace.json"));
	assert_string_equal(json_object_get_string(get(trace, "displayTimeUnit")), "ms");
	assert_string_equal(json_object_get_string(get(get(trace, "otherData"), "schema")), PROFILE_SCHEMA);
	meta = events_of(trace, "M", "thread_name");
	assert_int_equal(json_object_array_length(meta), 3); /* VMM, vCPU 0, vCPU 1 (its first thread) */
	json_object_put(meta);
	check_phase_slices(trace);
	check_instants(trace);
	check_counters(trace);
	json_object_put(trace);
	json_object_put(p);
}

/* ---- SVG ----------------------------------------------------------------------------------------------- */

/* Writes the SVG of `p`, checks it is well-formed with finite numbers, and returns its text. */
static char *svg_of(json_object *p, const char *name)
{
	char err[256];
	char *text;

	assert_int_equal(report_svg_write(p, path_of(name), err, sizeof(err)), 0);
	text = slurp(path_of(name));
	assert_int_equal(xml_check(text), 0);
	assert_true(utf8_ok((const unsigned char *)text));
	assert_null(strstr(text, "nan"));
	assert_null(strstr(text, "inf"));
	return text;
}

static void test_svg(void **state)
{
	json_object *p = sample_profile();
	char *svg = svg_of(p, "chart.svg");

	(void)state;
	assert_non_null(strstr(svg, "xmlns=\"http://www.w3.org/2000/svg\""));
	assert_int_equal(count_substr(svg, "<polyline"), 4);	/* one per track */
	assert_int_equal(count_substr(svg, "<rect x="), 8 + 1); /* the phase bars and the shaded phase span */
	assert_non_null(strstr(svg, "&lt;a &amp; &quot;b&quot; &apos;c&apos;&gt;"));
	assert_non_null(strstr(svg, "kvm_open"));
	assert_non_null(strstr(svg, "ms since exec"));
	assert_null(strstr(svg, "href")); /* self-contained */
	assert_null(strstr(svg, "<script"));
	assert_null(strstr(svg, "<style"));
	free(svg);
	json_object_put(p);
}

/* {}: every section missing; a single phase; no series: both writers still produce their files. */
static void test_sparse_profiles(void **state)
{
	json_object *empty = json_object_new_object(), *one = json_object_new_object(), *arr = json_object_new_array();
	json_object *trace;
	char err[256];
	char *svg;

	(void)state;
	svg = svg_of(empty, "empty.svg");
	assert_non_null(strstr(svg, "no VMM phases"));
	assert_non_null(strstr(svg, "no exit series"));
	free(svg);
	assert_int_equal(report_perfetto_write(empty, path_of("empty.json"), err, sizeof(err)), 0);
	trace = parse_file(path_of("empty.json"));
	assert_int_equal(json_object_array_length(get(trace, "traceEvents")), 2); /* the two names */
	json_object_put(trace);
	json_object_array_add(arr, phase("exec", "process start", 0, 0));
	json_object_object_add(one, "phases", arr);
	json_object_object_add(one, "series", json_object_new_null());
	free(svg_of(one, "one.svg"));
	assert_int_equal(report_perfetto_write(one, path_of("one.json"), err, sizeof(err)), 0);
	json_object_put(one);
	json_object_put(empty);
}

/* Hours of 1 ms buckets, absurd times and hostile bytes: a bounded, finite, valid SVG and valid JSON. */
static void test_extremes(void **state)
{
	enum { N = 200000 };
	int64_t *counts = calloc(N, sizeof(*counts));
	json_object *p = sample_profile(), *s = series(1000, 0), *ms = get(p, "milestones"), *trace, *inst;
	char err[256];
	char *svg;

	(void)state;
	for (size_t i = 0; i < N; i++)
		counts[i] = (int64_t)(i % 97);
	json_object_array_add(get(s, "tracks"), track(3, 99, "kvm", counts, N));
	json_object_array_add(get(s, "tracks"), track(4, 100, "strange \x01\xff source", counts, 10));
	json_object_object_add(p, "series", s);
	json_object_array_add(ms, milestone("bootmark", "bad utf-8 \xc3\x28 and \xed\xa0\x80", 1e300, 1));
	json_object_array_add(ms, milestone("bootmark", "", -5, 2));
	json_object_array_add(ms, milestone("bootmark", "tab\tquote\" backslash\\ nl\n", 7, 3));
	svg = svg_of(p, "long.svg");
	assert_int_equal(count_substr(svg, "<polyline"), 2);
	assert_true(strlen(svg) < 200000); /* 200000 buckets merged to one point pair per pixel */
	free(svg);
	assert_int_equal(report_perfetto_write(p, path_of("long.json"), err, sizeof(err)), 0);
	trace = parse_file(path_of("long.json"));
	inst = events_of(trace, "i", NULL);
	assert_string_equal(json_object_get_string(get(json_object_array_get_idx(inst, 8), "name")),
			    "tab\tquote\" backslash\\ nl\n");
	assert_string_equal(json_object_get_string(get(json_object_array_get_idx(inst, 6), "name")),
			    "bad utf-8 ?( and ???");
	json_object_put(inst);
	json_object_put(trace);
	free(counts);
	json_object_put(p);
}

/* A malformed profile: -EINVAL naming the field, and no file left behind. */
static void expect_einval(json_object *p, const char *field)
{
	char err[256];

	assert_int_equal(report_perfetto_write(p, path_of("bad.json"), err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, field));
	assert_int_equal(report_svg_write(p, path_of("bad.svg"), err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, field));
	assert_int_equal(access(path_of("bad.json"), F_OK), -1);
	assert_int_equal(access(path_of("bad.svg"), F_OK), -1);
	json_object_put(p);
}

static void test_malformed(void **state)
{
	json_object *p = json_object_new_array();
	char err[64];

	(void)state;
	assert_int_equal(report_perfetto_write(NULL, path_of("x.json"), err, sizeof(err)), -EINVAL);
	assert_int_equal(report_svg_write(p, path_of("x.svg"), err, 0), -EINVAL);
	json_object_put(p);
	expect_einval(json_object_new_array(), "not a JSON object");
	p = sample_profile();
	json_object_object_add(p, "phases", json_object_new_string("soon"));
	expect_einval(p, "\"phases\" is not an array");
	p = sample_profile();
	json_object_object_del(json_object_array_get_idx(get(p, "phases"), 3), "start_us");
	expect_einval(p, "phases[3]: missing number \"start_us\"");
	p = sample_profile();
	json_object_object_add(json_object_array_get_idx(get(p, "milestones"), 0), "us", json_object_new_double(NAN));
	expect_einval(p, "milestones[0].us is not finite");
	p = sample_profile();
	json_object_object_del(json_object_array_get_idx(get(p, "milestones"), 1), "name");
	json_object_object_del(json_object_array_get_idx(get(p, "milestones"), 1), "id");
	expect_einval(p, "milestones[1]: missing string \"name\"");
	p = sample_profile();
	json_object_object_add(get(p, "series"), "bucket_us", json_object_new_int(0));
	expect_einval(p, "series.bucket_us");
	p = sample_profile();
	json_object_array_put_idx(get(json_object_array_get_idx(get(get(p, "series"), "tracks"), 2), "counts"), 1,
				  json_object_new_string("x"));
	expect_einval(p, "series.tracks[2].counts[1]");
	p = sample_profile();
	json_object_object_del(json_object_array_get_idx(get(get(p, "series"), "tracks"), 0), "vcpu");
	expect_einval(p, "series.tracks[0]: missing integer \"vcpu\"");
}

static void test_unwritable(void **state)
{
	json_object *p = sample_profile();
	char err[256];

	(void)state;
	assert_int_equal(report_perfetto_write(p, "/nonexistent-dir/t.json", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent-dir/t.json"));
	assert_int_equal(report_svg_write(p, "/nonexistent-dir/t.svg", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent-dir/t.svg"));
	json_object_put(p);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

/* Removes the directory and what the tests wrote there, unless BRISK_KEEP_REPORTS is set (to look at them). */
static int teardown(void **state)
{
	DIR *d;
	struct dirent *e;

	(void)state;
	if (getenv("BRISK_KEEP_REPORTS")) {
		printf("reports kept in %s\n", dir);
		return 0;
	}
	d = opendir(dir);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	return rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_xml_checker),	    cmocka_unit_test(test_perfetto), cmocka_unit_test(test_svg),
	    cmocka_unit_test(test_sparse_profiles), cmocka_unit_test(test_extremes), cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_unwritable),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
