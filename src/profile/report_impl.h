/* report_impl.h - what the brisk-profile/1 builders share: JSON value helpers and the sections' builders. */
#ifndef BRISK_REPORT_IMPL_H
#define BRISK_REPORT_IMPL_H

#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>

#include "brisk/profile.h"

/* A 64-bit guest address as a "0x..." string (JSON numbers lose precision above 2^53). */
static inline struct json_object *rj_hex(uint64_t v)
{
	char b[24];

	snprintf(b, sizeof(b), "0x%llx", (unsigned long long)v);
	return json_object_new_string(b);
}

static inline struct json_object *rj_u64(uint64_t v)
{
	return json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t)v);
}

/* "function+0xoff", or JSON null. */
static inline struct json_object *rj_sym(const struct symtab *syms, uint64_t addr)
{
	char b[600];

	return addr != TRACE_NO_RIP && symtab_lookup(syms, addr, b, sizeof(b)) ? json_object_new_string(b) : NULL;
}

/* report_sites.c: where the symbols came from and how many exits they name; the top exit sites. */
struct json_object *report_symbols_json(const struct profile_inputs *in);
struct json_object *report_exit_sites_json(const struct profile_inputs *in);
/* report_sites.c: the probes (sites, hits, matching) and a call site's stack [{addr, symbol}]. */
struct json_object *report_probes_json(const struct profile_inputs *in);
struct json_object *report_stack_json(const struct profile_inputs *in, uint64_t callsite);
/* report_sites.c: exits in the guest's user half by address space (CR3), with their top sites. */
struct json_object *report_user_json(const struct profile_inputs *in);
/* report_findings.c: what the report states on its own (page sizes, nested page faults, MSR storms, ...). */
struct json_object *report_findings_json(const struct profile_inputs *in);

#endif
