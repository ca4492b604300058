/* errmsg.h - the one way a function fills its caller's error buffer: "-errno plus a message". */
#ifndef BRISK_ERRMSG_H
#define BRISK_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>

/*
 * Formats the message into err[0..errlen) (nothing when err is NULL or
 * errlen 0) and returns `ret`, so a failing path reads
 * `return err_set(err, errlen, -EINVAL, "what %s", why);`.
 */
int err_set(char *err, size_t errlen, int ret, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* err_set with a va_list, for wrappers such as boot_fail. */
int err_vset(char *err, size_t errlen, int ret, const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

#endif
