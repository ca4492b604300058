/* errmsg.c - err_set: fill an error buffer and return the status (include/brisk/errmsg.h). */
#include <stdio.h>

#include "brisk/errmsg.h"

int err_vset(char *err, size_t errlen, int ret, const char *fmt, va_list ap)
{
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	return ret;
}

int err_set(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err_vset(err, errlen, ret, fmt, ap);
	va_end(ap);
	return ret;
}
