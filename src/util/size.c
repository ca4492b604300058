/* size.c - parsing of sizes ("128M", "2G") and bounded unsigned integers from the command line. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "brisk/config.h"

static int suffix_shift(const char *s, unsigned *shift)
{
	static const struct {
		const char *name;
		unsigned shift;
	} units[] = {
	    {"", 20},	 {"b", 0},  {"k", 10},	{"kb", 10},  {"kib", 10}, {"m", 20},  {"mb", 20},
	    {"mib", 20}, {"g", 30}, {"gb", 30}, {"gib", 30}, {"t", 40},	  {"tb", 40}, {"tib", 40},
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(s, units[i].name) == 0) {
			*shift = units[i].shift;
			return 0;
		}
	}
	return -EINVAL;
}

int config_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift;

	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (suffix_shift(end, &shift))
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

int config_parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (*end != '\0')
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}
