/* json_strict.h - untrusted JSON text in, strictly (src/api/fc_config_json.c): API bodies, config files, templates. */
#ifndef BRISK_JSON_STRICT_H
#define BRISK_JSON_STRICT_H

#include <json-c/json.h>
#include <stddef.h>

#define FC_JSON_MAX    (1u << 20) /* a body, a --config-file or a --cpu-template: at most 1 MiB */
#define FC_JSON_DEPTH  16	  /* nesting of objects and arrays json_tokener accepts */
#define FC_MAX_MEMBERS 32	  /* members an object may have: bounds the duplicate-key check */

/* Where a value comes from, for messages: `what` is "drives", "config file: drives[1]", ... */
struct fcj {
	const char *what;
	char *err;
	size_t errlen;
};

/* Fills c->err with "WHAT: message" and returns -EINVAL. */
int fcj_fail(const struct fcj *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Parses `len` bytes of untrusted JSON text into *out (the caller puts it):
 * at most FC_JSON_MAX bytes, no NUL byte, strict JSON (json_tokener,
 * JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8, depth FC_JSON_DEPTH),
 * one object and only white space after it, no object with a duplicate key,
 * a key with an escape sequence or more than FC_MAX_MEMBERS members.
 * Returns 0, -EINVAL (message from `c`) or -ENOMEM.
 */
__attribute__((warn_unused_result)) int fcj_parse(const struct fcj *c, const char *text, size_t len, json_object **out);

#endif
