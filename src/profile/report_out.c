/* report_out.c - what brisk profile and brisk trace share: report options, symbol loading, writing the outputs. */
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/file.h"
#include "brisk/profile.h"

#define MAX_BUCKET_US 10000000ul
#define MAX_BUFFER_KB (4ul << 20)
#define MIN_BUFFER_KB 64ul

void report_opts_defaults(struct report_opts *o)
{
	*o =
	    (struct report_opts){.bucket_ns = REPORT_DEFAULT_BUCKET_US * 1000ull, .buffer_kb = TRACE_DEFAULT_BUFFER_KB};
}

/* "--name VALUE" or "--name=VALUE" at argv[*i]: the value (advancing *i), or NULL. */
static const char *value_of(const char *name, int argc, char **argv, int *i, int *matched)
{
	size_t n = strlen(name);

	*matched = 0;
	if (strncmp(argv[*i], name, n) != 0)
		return NULL;
	if (argv[*i][n] == '=') {
		*matched = 1;
		return argv[*i] + n + 1;
	}
	if (argv[*i][n] != '\0')
		return NULL;
	*matched = 1;
	if (*i + 1 >= argc)
		return NULL;
	return argv[++*i];
}

static int number(const char *cmd, const char *opt, const char *v, unsigned long lo, unsigned long hi,
		  unsigned long *out)
{
	char *end;

	errno = 0;
	*out = v ? strtoul(v, &end, 10) : 0;
	if (!v || errno || end == v || *end || *out < lo || *out > hi) {
		fprintf(stderr, "brisk %s: invalid %s '%s': expected %lu..%lu\n", cmd, opt, v ? v : "", lo, hi);
		return -1;
	}
	return 0;
}

int report_opts_take(struct report_opts *o, int argc, char **argv, int *i, const char *cmd)
{
	static const char *const files[] = {"--json", "--trace-out", "--svg", "--symbols", "--user-symbols"};
	const char **dst[] = {&o->json, &o->trace_out, &o->svg, &o->symbols, &o->user_symbols};
	unsigned long n;
	int m;
	const char *v;

	if (strcmp(argv[*i], "--no-trace") == 0) {
		o->no_trace = 1;
		return 1;
	}
	if (strcmp(argv[*i], "--no-callers") == 0) {
		o->no_callers = 1;
		return 1;
	}
	for (size_t k = 0; k < sizeof(files) / sizeof(files[0]); k++) {
		v = value_of(files[k], argc, argv, i, &m);
		if (!m)
			continue;
		if (!v || !*v) {
			fprintf(stderr, "brisk %s: %s needs a file name\n", cmd, files[k]);
			return -1;
		}
		*dst[k] = v;
		return 1;
	}
	v = value_of("--bucket-us", argc, argv, i, &m);
	if (m) {
		if (number(cmd, "--bucket-us", v, 1, MAX_BUCKET_US, &n))
			return -1;
		o->bucket_ns = n * 1000ull;
		return 1;
	}
	v = value_of("--trace-buffer-kb", argc, argv, i, &m);
	if (m) {
		if (number(cmd, "--trace-buffer-kb", v, MIN_BUFFER_KB, MAX_BUFFER_KB, &n))
			return -1;
		o->buffer_kb = (unsigned)n;
		return 1;
	}
	return 0;
}

/* 1 when `path` is a regular file that starts with the ELF magic (a FIFO is refused without blocking). */
int report_kernel_is_elf(const char *path)
{
	uint8_t m[4];
	int fd = file_open_input(path, "kernel", NULL, NULL, 0), elf;

	if (fd < 0)
		return 0;
	elf = read(fd, m, sizeof(m)) == (ssize_t)sizeof(m) && symtab_is_elf(m, sizeof(m));
	close(fd);
	return elf;
}

int report_load_symbols(struct symtab *t, const char *symbols, const char *kernel, char *err, size_t errlen, char *why,
			size_t whylen)
{
	char e[512];

	memset(t, 0, sizeof(*t));
	why[0] = '\0';
	if (symbols)
		return symtab_load(t, symbols, err, errlen);
	if (!kernel) {
		snprintf(why, whylen, "no symbols: pass --symbols System.map|vmlinux to name guest functions");
		return 0;
	}
	if (!report_kernel_is_elf(kernel)) {
		snprintf(why, whylen, "no symbols: %s is not an ELF file; pass --symbols System.map|vmlinux", kernel);
		return 0;
	}
	if (symtab_load(t, kernel, e, sizeof(e)))
		snprintf(why, whylen, "no symbols from the kernel's own ELF symtab: %s", e);
	return 0;
}

const struct symtab *report_merge_symbols(const struct symtab *kernel, const struct symtab *user, struct symtab *out)
{
	size_t cap = 0;

	if (!user || !user->n)
		return kernel;
	memset(out, 0, sizeof(*out));
	snprintf(out->source, sizeof(out->source), "%s", kernel && kernel->n ? kernel->source : user->source);
	for (int k = 0; k < 2; k++) {
		const struct symtab *t = k ? user : kernel;

		for (size_t i = 0; t && i < t->n; i++)
			if (symtab_add(out, &cap, t->s[i].addr, t->s[i].size, t->s[i].name, strlen(t->s[i].name))) {
				symtab_free(out);
				return NULL;
			}
	}
	symtab_sort(out);
	return out;
}

int report_emit(struct json_object *report, const struct report_opts *o, const char *cmd)
{
	char err[512];
	int ret = 0;

	report_text_print(report, stdout);
	fflush(stdout);
	if (o->json && report_json_write(report, o->json, err, sizeof(err))) {
		fprintf(stderr, "brisk %s: %s\n", cmd, err);
		ret = -1;
	}
	if (o->trace_out && report_perfetto_write(report, o->trace_out, err, sizeof(err))) {
		fprintf(stderr, "brisk %s: %s\n", cmd, err);
		ret = -1;
	}
	if (o->svg && report_svg_write(report, o->svg, err, sizeof(err))) {
		fprintf(stderr, "brisk %s: %s\n", cmd, err);
		ret = -1;
	}
	return ret;
}
