/*
 * fc_config_json.c - untrusted JSON in: strict parsing with json-c, a duplicate-key scan json-c cannot do, and
 * member getters that check type, range and length and name the key in every message (fc_config_internal.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "fc_config_internal.h"

int fcj_fail(const struct fcj *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->err && c->errlen)
		snprintf(c->err, c->errlen, "%s: %s", c->what, msg);
	return -EINVAL;
}

/* One object's keys seen so far (offsets into the text), for the duplicate check. */
struct frame {
	bool obj, want_key;
	unsigned n;
	uint32_t off[FC_MAX_MEMBERS], len[FC_MAX_MEMBERS];
};

/* Index of the quote that closes the string opening at t[i]; the text was parsed, so it exists. */
static size_t string_end(const char *t, size_t i, size_t end)
{
	for (i++; i < end && t[i] != '"'; i++)
		if (t[i] == '\\')
			i++;
	return i;
}

/* A raw control character inside a string: JSON forbids them (RFC 8259 section 7), json-c lets them through. */
static int check_string(const struct fcj *c, const char *t, size_t i, size_t e)
{
	for (size_t k = i + 1; k < e; k++)
		if ((unsigned char)t[k] < 0x20)
			return fcj_fail(c, "bad JSON at byte %zu: control character in a string", k);
	return 0;
}

/* The key in t[i+1..e) of object `f`: no escapes (every valid key is plain ASCII), not seen before. */
static int check_key(const struct fcj *c, struct frame *f, const char *t, size_t i, size_t e)
{
	uint32_t off = (uint32_t)(i + 1), len = (uint32_t)(e - i - 1);

	if (memchr(t + off, '\\', len))
		return fcj_fail(c, "bad JSON at byte %zu: a key with an escape sequence", i);
	if (f->n == FC_MAX_MEMBERS)
		return fcj_fail(c, "bad JSON at byte %zu: an object with more than %d members", i, FC_MAX_MEMBERS);
	for (unsigned k = 0; k < f->n; k++)
		if (f->len[k] == len && memcmp(t + f->off[k], t + off, len) == 0)
			return fcj_fail(c, "bad JSON at byte %zu: duplicate key '%.*s'", i, (int)(len > 64 ? 64 : len),
					t + off);
	f->off[f->n] = off;
	f->len[f->n++] = len;
	return 0;
}

/*
 * json-c keeps the last of duplicate keys without telling: a proxy that
 * checked the first value and brisk that uses the last would disagree. So
 * the already parsed text (well-formed, nesting within FC_JSON_DEPTH) is
 * walked once more, recording each object's keys.
 */
static int scan_keys(const struct fcj *c, const char *t, size_t end)
{
	struct frame st[FC_JSON_DEPTH];
	int top = -1;

	for (size_t i = 0; i < end; i++) {
		if (t[i] == '\'') /* json-c accepts single quotes even when strict */
			return fcj_fail(c, "bad JSON at byte %zu: single-quoted string", i);
		if (t[i] == '"') {
			size_t e = string_end(t, i, end);
			int ret = check_string(c, t, i, e);

			if (!ret && top >= 0 && st[top].obj && st[top].want_key) {
				st[top].want_key = false;
				ret = check_key(c, &st[top], t, i, e);
			}
			if (ret)
				return ret;
			i = e;
		} else if (t[i] == '{' || t[i] == '[') {
			if (top + 1 == FC_JSON_DEPTH)
				return fcj_fail(c, "bad JSON at byte %zu: nested deeper than %d", i, FC_JSON_DEPTH);
			st[++top] = (struct frame){.obj = t[i] == '{', .want_key = t[i] == '{'};
		} else if ((t[i] == '}' || t[i] == ']') && top >= 0) {
			top--;
		} else if (t[i] == ',' && top >= 0 && st[top].obj) {
			st[top].want_key = true;
		}
	}
	return 0;
}

/* White space from text[i] on, within len: the text need not be NUL-terminated (an HTTP body). */
static size_t ws_end(const char *text, size_t i, size_t len)
{
	while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'))
		i++;
	return i;
}

/* json-c's reason, except for "continue": the text ended inside a value. */
static int bad_json(const struct fcj *c, json_tokener *tok)
{
	enum json_tokener_error je = json_tokener_get_error(tok);

	if (je == json_tokener_success || je == json_tokener_continue)
		return fcj_fail(c, "bad JSON: the text ends inside an unfinished value (a missing '}', ']' or '\"'?)");
	return fcj_fail(c, "bad JSON at byte %zu: %s", json_tokener_get_parse_end(tok), json_tokener_error_desc(je));
}

/* The tokenizer's part: one value, then only white space. */
static int tokenize(const struct fcj *c, const char *text, size_t len, json_object **out)
{
	json_tokener *tok = json_tokener_new_ex(FC_JSON_DEPTH);
	json_object *root;
	size_t end;
	int ret = 0;

	if (!tok)
		return -ENOMEM;
	/* Trailing characters are allowed here only to be refused below with a message that says so. */
	json_tokener_set_flags(tok,
			       JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS | JSON_TOKENER_VALIDATE_UTF8);
	root = json_tokener_parse_ex(tok, text, (int)len);
	end = json_tokener_get_parse_end(tok);
	if (!root || json_tokener_get_error(tok) != json_tokener_success)
		ret = bad_json(c, tok);
	else if (ws_end(text, end, len) < len)
		ret = fcj_fail(c, "bad JSON at byte %zu: trailing data after the object", end);
	json_tokener_free(tok);
	if (!ret && !json_object_is_type(root, json_type_object))
		ret = fcj_fail(c, "expected a JSON object, got %s", json_type_to_name(json_object_get_type(root)));
	if (!ret)
		ret = scan_keys(c, text, end);
	if (ret)
		json_object_put(root);
	else
		*out = root;
	return ret;
}

int fcj_parse(const struct fcj *c, const char *text, size_t len, json_object **out)
{
	const char *nul;

	*out = NULL;
	if (len > FC_JSON_MAX)
		return fcj_fail(c, "%zu bytes of JSON: at most %u", len, FC_JSON_MAX);
	nul = memchr(text, '\0', len);
	if (nul)
		return fcj_fail(c, "bad JSON at byte %zu: NUL byte", (size_t)(nul - text));
	if (ws_end(text, 0, len) == len)
		return fcj_fail(c, "empty body: expected a JSON object");
	return tokenize(c, text, len, out);
}

bool fc_id_valid(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= FC_ID_MAX &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

int fcj_keys(const struct fcj *c, json_object *o, const char *const *allowed)
{
	json_object_object_foreach(o, key, val)
	{
		unsigned i;

		(void)val;
		for (i = 0; allowed[i] && strcmp(allowed[i], key) != 0; i++)
			;
		if (!allowed[i])
			return fcj_fail(c, "unknown key '%.64s'", key);
	}
	return 0;
}

json_object *fcj_get(json_object *o, const char *key)
{
	json_object *v = NULL;

	if (!json_object_object_get_ex(o, key, &v))
		return NULL;
	return v; /* NULL for JSON null */
}

/* "expected a string, got int". */
static int wrong_type(const struct fcj *c, const char *key, const char *want, json_object *v)
{
	return fcj_fail(c, "%s: expected %s, got %s", key, want, json_type_to_name(json_object_get_type(v)));
}

int fcj_str(const struct fcj *c, json_object *o, const char *key, size_t min, size_t max, const char **out)
{
	json_object *v = fcj_get(o, key);
	const char *s;
	size_t n;

	if (!v)
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return wrong_type(c, key, "a string", v);
	s = json_object_get_string(v);
	n = (size_t)json_object_get_string_len(v);
	if (n == 0 && min)
		return fcj_fail(c, "%s: empty", key);
	if (n < min)
		return fcj_fail(c, "%s: %zu bytes, at least %zu", key, n, min);
	if (n > max)
		return fcj_fail(c, "%s: %zu bytes, at most %zu", key, n, max);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) /* \u0000 included: it would cut the string */
			return fcj_fail(c, "%s: control character at offset %zu", key, i);
	*out = s;
	return 1;
}

int fcj_req_str(const struct fcj *c, json_object *o, const char *key, size_t max, const char **out)
{
	int ret = fcj_str(c, o, key, 1, max, out);

	return ret == 0 ? fcj_fail(c, "%s is required", key) : ret;
}

int fcj_bool(const struct fcj *c, json_object *o, const char *key, bool *out)
{
	json_object *v = fcj_get(o, key);

	if (!v)
		return 0;
	if (!json_object_is_type(v, json_type_boolean))
		return wrong_type(c, key, "true or false", v);
	*out = json_object_get_boolean(v);
	return 1;
}

/*
 * json-c keeps integers as int64 or uint64 and saturates what is larger,
 * so get_int64 is INT64_MAX for anything past it: out of every range here.
 */
int fcj_uint(const struct fcj *c, json_object *o, const char *key, uint64_t min, uint64_t max, uint64_t *out)
{
	json_object *v = fcj_get(o, key);
	int64_t n;
	uint64_t u;

	if (!v)
		return 0;
	if (!json_object_is_type(v, json_type_int))
		return wrong_type(c, key, "an integer", v);
	n = json_object_get_int64(v);
	/* json-c keeps 2^63..2^64-1 as a uint64 (its get_int64 then clamps to INT64_MAX): a bucket's u64 */
	u = n == INT64_MAX ? json_object_get_uint64(v) : (uint64_t)n;
	if (n < 0 || u < min || u > max)
		return fcj_fail(c, "%s: %.32s is out of range %llu..%llu", key,
				json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN), (unsigned long long)min,
				(unsigned long long)max);
	*out = u;
	return 1;
}

bool fcj_printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

int fcj_enum(const struct fcj *c, json_object *o, const char *key, const char *const *names, bool icase, unsigned *out)
{
	json_object *v = fcj_get(o, key);
	char list[256] = "";
	const char *s;

	if (!v)
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return wrong_type(c, key, "a string", v);
	s = json_object_get_string(v);
	for (unsigned i = 0; names[i]; i++) {
		if ((icase ? strcasecmp(s, names[i]) : strcmp(s, names[i])) == 0 &&
		    strlen(s) == (size_t)json_object_get_string_len(v)) {
			*out = i;
			return 1;
		}
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s\"%s\"", i ? ", " : "", names[i]);
	}
	if (!fcj_printable(s))
		return fcj_fail(c, "%s: a value with control characters is not one of %s", key, list);
	return fcj_fail(c, "%s: \"%.64s\" is not one of %s", key, s, list);
}

int fcj_absent(const struct fcj *c, json_object *o, const char *key, const char *why)
{
	if (!fcj_get(o, key))
		return 0;
	return fcj_fail(c, "%s is not supported: %s", key, why);
}
