/* fc_config_internal.h - the checked JSON accessors and per-object appliers behind fc_config.h. */
#ifndef BRISK_FC_CONFIG_INTERNAL_H
#define BRISK_FC_CONFIG_INTERNAL_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/fc_config.h"

/* `o` is an object whose keys are all in the NULL-terminated `allowed`; else "unknown key 'k'". */
__attribute__((warn_unused_result)) int fcj_keys(const struct fcj *c, json_object *o, const char *const *allowed);
/* Member `key` of `o`, or NULL when absent or JSON null (Firecracker's Option fields take null as absent). */
json_object *fcj_get(json_object *o, const char *key);

/*
 * The getters: each returns 1 and sets *out when `key` is present and
 * valid, 0 when absent or null (*out untouched), -EINVAL with a message
 * naming the key when the value has the wrong type or is out of range.
 */
/* A string of min..max bytes without control characters or NUL. */
int fcj_str(const struct fcj *c, json_object *o, const char *key, size_t min, size_t max, const char **out);
/* fcj_str with min 1, but absence is an error ("KEY is required"): returns 1 or -EINVAL. */
int fcj_req_str(const struct fcj *c, json_object *o, const char *key, size_t max, const char **out);
int fcj_bool(const struct fcj *c, json_object *o, const char *key, bool *out);
/* A JSON integer (not 1.0, not a string) in min..max. */
int fcj_uint(const struct fcj *c, json_object *o, const char *key, uint64_t min, uint64_t max, uint64_t *out);
/* One of the NULL-terminated `names` (compared ignoring case when `icase`); *out its index. */
int fcj_enum(const struct fcj *c, json_object *o, const char *key, const char *const *names, bool icase, unsigned *out);
/* `key` must be absent or null: else "KEY is not supported: why". Returns 0 or -EINVAL. */
int fcj_absent(const struct fcj *c, json_object *o, const char *key, const char *why);
/* `s` has no control characters (it may go into a one-line message). */
bool fcj_printable(const char *s);
/*
 * `key` of `o`, a RateLimiterConfig (absent or null: none), into *out; has (may be NULL): whether its
 * bandwidth, ops buckets were given. 0 or -EINVAL.
 */
int fc_rate_limiter(const struct fcj *c, json_object *o, const char *key, struct rl_config *out, bool has[2]);
/* An id: 1..FC_ID_MAX of [A-Za-z0-9_] (Firecracker's checked_id, with a length bound). */
bool fc_id_valid(const char *s);

/* The appliers: the API bodies' work on an already parsed object (fc_config_file.c reuses them). */
int fc_apply_boot_source(struct fc_vm *f, const struct fcj *c, json_object *o);
int fc_apply_machine_config(struct fc_vm *f, const struct fcj *c, json_object *o, bool patch);
int fc_apply_drive(struct fc_vm *f, const struct fcj *c, const char *id, json_object *o);
int fc_apply_net(struct fc_vm *f, const struct fcj *c, const char *id, json_object *o);
int fc_apply_vsock(struct fc_vm *f, const struct fcj *c, json_object *o);
int fc_apply_entropy(struct fc_vm *f, const struct fcj *c, json_object *o);
int fc_apply_logger(struct fc_vm *f, const struct fcj *c, json_object *o);
int fc_apply_metrics(struct fc_vm *f, const struct fcj *c, json_object *o);
int fc_apply_mmds_config(struct fc_vm *f, const struct fcj *c, json_object *o);
/* GET /vm/config's "mmds-config": an object, or NULL (JSON null) when not configured. */
json_object *fc_mmds_config_to_json(const struct fc_vm *f);
/* fc_config_balloon.c: amount_mib, deflate_on_oom (required), stats_polling_interval_s; Firecracker's checks. */
int fc_apply_balloon(struct fc_vm *f, const struct fcj *c, json_object *o);
/* {"amount_mib", "deflate_on_oom", "stats_polling_interval_s"} of `b`, or NULL (out of memory). */
json_object *fc_balloon_json(const struct vm_balloon *b);
/*
 * machine-config's rule with a balloon set: NULL, or Firecracker's message when memory `mem_mib` is below
 * its target or `huge` pages are asked for.
 */
const char *fc_machine_balloon_check(const struct fc_vm *f, uint64_t mem_mib, bool huge);

/* Names for GET: indexed by the enums of fc_config.h. */
extern const char *const fc_cache_names[];
extern const char *const fc_engine_names[];
extern const char *const fc_huge_names[];
extern const char *const fc_level_names[];

#endif
