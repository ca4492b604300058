/*
 * mmds.c - the metadata service's data store, network stack configuration and V2 token authority
 * (include/brisk/mmds.h), as Firecracker v1.7.0's src/vmm/src/mmds/data_store.rs and token.rs.
 *
 * The store is kept with its object keys sorted (a sorted copy is made on every PUT and PATCH), so that
 * every output lists them as Firecracker's serde_json maps do (byte order). Its size is the length of its
 * compact JSON, as Firecracker's to_vec(&data).len(), checked against the limit on PUT and on a PATCH's
 * result (docs/security.md case 51).
 *
 * Tokens (V2): Firecracker encrypts the expiry into the token (AES-GCM, a key of its own); brisk keeps a
 * table of MMDS_TOKENS_MAX random tokens (32 bytes from getrandom, base64) with their expiry instead: as
 * unguessable, checked in constant time, and a flood of PUT /latest/api/token evicts the token that
 * expires first rather than growing memory (docs/security.md case 55).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <json-c/json.h>

#include "brisk/mmds.h"
#include "mmds_impl.h"

#define JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

struct token {
	char text[MMDS_TOKEN_LEN + 1];
	uint64_t expiry_ms; /* CLOCK_MONOTONIC; 0: free slot */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static json_object *store; /* NULL: JSON null */
static bool initialized;
static size_t limit = 51200; /* Firecracker's default payload limit, until mmds_set_limit */
static struct mmds_config live;
static uint32_t live_ifaces, live_ipv4; /* read lock-free by the net devices */
static struct token tokens[MMDS_TOKENS_MAX];

bool mmds_ipv4_valid(uint32_t ip)
{
	unsigned third = (ip >> 8) & 0xff;

	return (ip >> 16) == 0xa9fe && third != 0 && third != 255;
}

void mmds_set_limit(size_t l)
{
	pthread_mutex_lock(&lock);
	limit = l;
	pthread_mutex_unlock(&lock);
}

size_t mmds_limit(void)
{
	return limit;
}

static int cmp_keys(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The keys of object `o`, sorted, in a malloc'd array of *n (NULL when empty or out of memory: *n says). */
const char **mmds_sorted_keys(json_object *o, size_t *n)
{
	size_t len = (size_t)json_object_object_length(o), i = 0;
	const char **keys = len ? malloc(len * sizeof(*keys)) : NULL;

	*n = keys ? len : 0;
	if (!keys)
		return NULL;
	json_object_object_foreach(o, k, v)
	{
		(void)v;
		keys[i++] = k;
	}
	qsort(keys, len, sizeof(*keys), cmp_keys);
	return keys;
}

/* A deep copy of `v` with every object's keys in sorted order. *ok false when out of memory. */
static json_object *sorted_copy(json_object *v, bool *ok)
{
	json_object *out = NULL;
	size_t n;
	const char **keys;

	if (json_object_is_type(v, json_type_array)) {
		size_t len = json_object_array_length(v);

		out = json_object_new_array_ext((int)len);
		for (size_t i = 0; out && i < len; i++)
			json_object_array_add(out, sorted_copy(json_object_array_get_idx(v, i), ok));
	} else if (json_object_is_type(v, json_type_object)) {
		out = json_object_new_object();
		keys = mmds_sorted_keys(v, &n);
		if (!keys && json_object_object_length(v))
			*ok = false;
		for (size_t i = 0; out && i < n; i++)
			json_object_object_add(out, keys[i], sorted_copy(json_object_object_get(v, keys[i]), ok));
		free(keys);
	} else if (v && json_object_deep_copy(v, &out, NULL) != 0) {
		out = NULL;
	}
	if (v && !out)
		*ok = false;
	return out;
}

/* The compact JSON length of v ("null" for NULL), or SIZE_MAX when out of memory. */
static size_t json_size(json_object *v)
{
	size_t len = 4;

	if (v && !json_object_to_json_string_length(v, JSON_FLAGS, &len))
		return SIZE_MAX;
	return len;
}

/* Takes `v`: sorted, size-checked, made the store. Called with the lock held. */
static int replace(json_object *v)
{
	bool ok = true;
	json_object *s = sorted_copy(v, &ok);

	json_object_put(v);
	if (!ok) {
		json_object_put(s);
		return -ENOMEM;
	}
	if (json_size(s) > limit) {
		json_object_put(s);
		return -EFBIG;
	}
	json_object_put(store);
	store = s;
	initialized = true;
	return 0;
}

int mmds_put(json_object *v)
{
	int ret;

	pthread_mutex_lock(&lock);
	ret = replace(v);
	pthread_mutex_unlock(&lock);
	return ret;
}

/* RFC 7396 section 2, MergePatch(target, patch): takes `target`, borrows `patch`, returns the result. */
static json_object *merge(json_object *target, json_object *patch, bool *ok)
{
	json_object *copy = NULL;

	if (!json_object_is_type(patch, json_type_object)) {
		json_object_put(target);
		if (patch && json_object_deep_copy(patch, &copy, NULL) != 0)
			*ok = false;
		return copy;
	}
	if (!json_object_is_type(target, json_type_object)) {
		json_object_put(target);
		target = json_object_new_object();
		if (!target) {
			*ok = false;
			return NULL;
		}
	}
	json_object_object_foreach(patch, k, v)
	{
		if (!v) {
			json_object_object_del(target, k);
		} else {
			json_object *cur = json_object_get(json_object_object_get(target, k));

			json_object_object_add(target, k, merge(cur, v, ok));
		}
	}
	return target;
}

int mmds_patch(json_object *patch)
{
	json_object *copy = NULL;
	bool ok = true;
	int ret;

	pthread_mutex_lock(&lock);
	if (!initialized) {
		ret = -ENODATA;
	} else if (store && json_object_deep_copy(store, &copy, NULL) != 0) {
		ret = -ENOMEM;
	} else {
		copy = merge(copy, patch, &ok);
		ret = ok ? replace(copy) : (json_object_put(copy), -ENOMEM);
	}
	pthread_mutex_unlock(&lock);
	json_object_put(patch);
	return ret;
}

char *mmds_get_json(void)
{
	char *s;

	pthread_mutex_lock(&lock);
	s = strdup(store ? json_object_to_json_string_ext(store, JSON_FLAGS) : "{}");
	pthread_mutex_unlock(&lock);
	return s;
}

void mmds_reset(void)
{
	pthread_mutex_lock(&lock);
	json_object_put(store);
	store = NULL;
	initialized = false;
	pthread_mutex_unlock(&lock);
}

void mmds_set_config(const struct mmds_config *c)
{
	pthread_mutex_lock(&lock);
	if (c->version != MMDS_V2)
		memset(tokens, 0, sizeof(tokens));
	live = *c;
	__atomic_store_n(&live_ipv4, c->ipv4, __ATOMIC_RELAXED);
	__atomic_store_n(&live_ifaces, c->set ? c->ifaces : 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lock);
}

bool mmds_iface(unsigned index, uint32_t *ipv4)
{
	uint32_t m = __atomic_load_n(&live_ifaces, __ATOMIC_ACQUIRE);

	if (index >= 32 || !(m & (1u << index)))
		return false;
	*ipv4 = __atomic_load_n(&live_ipv4, __ATOMIC_RELAXED);
	return true;
}

/* ---- what the HTTP responder (mmds_http.c) reads, under the lock -------------------------------------- */

void mmds_lock(void)
{
	pthread_mutex_lock(&lock);
}

void mmds_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

json_object *mmds_store_locked(void)
{
	return store;
}

const struct mmds_config *mmds_config_locked(void)
{
	return &live;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void base64(const uint8_t *in, size_t n, char *out)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v =
		    (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);

		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? tab[v & 63] : '=';
	}
	out[o] = 0;
}

int mmds_token_new_locked(uint32_t ttl, char out[MMDS_TOKEN_LEN + 1])
{
	uint8_t raw[32];
	uint64_t now = now_ms();
	struct token *slot = &tokens[0];

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return -EIO;
	for (unsigned i = 0; i < MMDS_TOKENS_MAX; i++) {
		if (tokens[i].expiry_ms <= now) {
			slot = &tokens[i];
			break;
		}
		if (tokens[i].expiry_ms < slot->expiry_ms)
			slot = &tokens[i];
	}
	base64(raw, sizeof(raw), slot->text);
	slot->expiry_ms = now + (uint64_t)ttl * 1000u;
	memcpy(out, slot->text, MMDS_TOKEN_LEN + 1);
	return 0;
}

/* Compares all MMDS_TOKEN_LEN bytes whatever differs first: the time says nothing of the token. */
static bool same_token(const char *a, const char *b)
{
	unsigned char d = 0;

	for (unsigned i = 0; i < MMDS_TOKEN_LEN; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

bool mmds_token_valid_locked(const char *t, size_t len)
{
	uint64_t now = now_ms();
	bool ok = false;

	if (len != MMDS_TOKEN_LEN)
		return false;
	for (unsigned i = 0; i < MMDS_TOKENS_MAX; i++)
		ok |= tokens[i].expiry_ms > now && same_token(tokens[i].text, t);
	return ok;
}
