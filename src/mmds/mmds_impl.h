/* mmds_impl.h - what the store (mmds.c) shares with the HTTP responder (mmds_http.c): all under mmds_lock. */
#ifndef BRISK_MMDS_IMPL_H
#define BRISK_MMDS_IMPL_H

#include <json-c/json.h>

#include "brisk/mmds.h"

void mmds_lock(void);
void mmds_unlock(void);
/* The store (NULL: JSON null) and the live configuration; valid while the lock is held. */
json_object *mmds_store_locked(void);
const struct mmds_config *mmds_config_locked(void);
/* The keys of object `o`, sorted (byte order), malloc'd; *n of them. NULL when empty or out of memory. */
const char **mmds_sorted_keys(json_object *o, size_t *n);
/* A new V2 token valid for `ttl` seconds (1..MMDS_TOKEN_TTL_MAX, checked by the caller) into out. 0 or -EIO. */
int mmds_token_new_locked(uint32_t ttl, char out[MMDS_TOKEN_LEN + 1]);
/* Whether `t` (len bytes) is a live token. */
bool mmds_token_valid_locked(const char *t, size_t len);

#endif
