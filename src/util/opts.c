/* opts.c - long options spelled in full: abbreviations that getopt_long would accept are refused (opts.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "brisk/errmsg.h"
#include "brisk/opts.h"

/* Length of the option name in "--NAME[=VALUE]" (after the dashes). */
static size_t name_len(const char *word)
{
	return strcspn(word + 2, "=");
}

const struct option *opts_find_exact(const char *word, const struct option *longopts)
{
	size_t n = name_len(word);

	for (const struct option *o = longopts; o->name; o++)
		if (strlen(o->name) == n && strncmp(o->name, word + 2, n) == 0)
			return o;
	return NULL;
}

/* "--NAME..." not exact: -EINVAL naming the options it is a prefix of; 0 when it is no prefix of any. */
static int refuse_prefix(const char *word, const struct option *longopts, char *err, size_t errlen)
{
	size_t n = name_len(word), used = 0, count = 0;
	char names[256] = "";

	for (const struct option *o = longopts; o->name; o++) {
		if (strncmp(o->name, word + 2, n) != 0)
			continue;
		if (used < sizeof(names)) {
			int w = snprintf(names + used, sizeof(names) - used, "%s--%s", count ? ", " : "", o->name);

			used += w > 0 ? (size_t)w : 0;
		}
		count++;
	}
	if (!count)
		return 0;
	return err_set(err, errlen, -EINVAL, "%.*s: an abbreviation of %s: options must be spelled in full",
		       (int)(n + 2), word, names);
}

/* How many of the following words short-option word `w` ("-kVALUE", "-k", "-hk") consumes as its value. */
static int short_value_words(const char *w, const char *optstring)
{
	for (const char *c = w + 1; *c; c++) {
		const char *spec = *c == ':' ? NULL : strchr(optstring, *c);

		if (!spec)
			return 0; /* unknown: getopt_long reports it */
		if (spec[1] == ':')
			return spec[2] != ':' && !c[1]; /* required: the next word, unless attached */
	}
	return 0;
}

int opts_check_exact(int argc, char *const argv[], const char *optstring, const struct option *longopts, char *err,
		     size_t errlen)
{
	bool in_order = optstring[0] == '+' || optstring[0] == '-';

	for (int i = 0; i < argc; i++) {
		const char *w = argv[i];
		const struct option *o;
		int ret;

		if (strcmp(w, "--") == 0)
			return 0;
		if (w[0] != '-' || !w[1]) {
			if (in_order)
				return 0; /* getopt stops at the first operand */
			continue;
		}
		if (w[1] != '-') {
			i += short_value_words(w, optstring);
			continue;
		}
		o = opts_find_exact(w, longopts);
		if (!o) {
			if ((ret = refuse_prefix(w, longopts, err, errlen)))
				return ret;
			continue;
		}
		if (o->has_arg == required_argument && !strchr(w, '='))
			i++;
	}
	return 0;
}
