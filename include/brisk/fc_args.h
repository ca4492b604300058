/*
 * fc_args.h - Firecracker's command line (`firecracker [--api-sock PATH] [--id ID] ...`), parsed with the
 * rules of Firecracker v1.7.0's own parser (src/utils/src/arg_parser.rs, src/firecracker/src/main.rs), so
 * that the programs that start Firecracker (Kata, firecracker-containerd, flintlock, the Go SDK, firectl,
 * Firecracker's jailer) start brisk unchanged:
 *
 *   - every word is `--NAME` spelled in full (no `--NAME=VALUE`, no abbreviation, no positional word);
 *   - a flag that takes a value takes the next word, which may not start with "--";
 *   - each flag at most once; `--` ends the flags (the words after it are ignored, as Firecracker does);
 *   - `--help` or `--version` anywhere wins over everything else (nothing else is checked);
 *   - `--no-api` requires `--config-file`; `--seccomp-filter` and `--no-seccomp` exclude each other.
 *
 * Values are checked here where Firecracker checks them at start (the instance id, the numbers);
 * the paths are opened by the parts that use them. brisk's own process options (`--serial`,
 * `--log-level`, ...) are accepted beside Firecracker's through the caller's `extra` table.
 */
#ifndef BRISK_FC_ARGS_H
#define BRISK_FC_ARGS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/api_link.h" /* API_BODY_MAX: Firecracker's default payload limit */

#define FC_DEFAULT_API_SOCK    "/run/firecracker.socket" /* main.rs DEFAULT_API_SOCK_PATH */
#define FC_DEFAULT_INSTANCE_ID "anonymous-instance"	 /* vmm::logger::DEFAULT_INSTANCE_ID */
#define FC_INSTANCE_ID_MAX     64u			 /* utils::validators MAX_INSTANCE_ID_LEN */

struct fc_args {
	const char *api_sock;	    /* --api-sock; NULL when not given (the default applies unless --no-api) */
	const char *id;		    /* --id; FC_DEFAULT_INSTANCE_ID when not given */
	const char *seccomp_filter; /* --seccomp-filter FILE */
	bool no_seccomp;
	bool has_start_time_us, has_start_time_cpu_us, has_parent_cpu_time_us;
	uint64_t start_time_us, start_time_cpu_us, parent_cpu_time_us; /* the jailer's clock hand-over */
	const char *config_file, *metadata;			       /* --config-file, --metadata */
	bool no_api;
	const char *log_path, *level, *module; /* the logger at start */
	bool show_level, show_log_origin;
	const char *metrics_path;
	bool boot_timer;
	bool help, version, snapshot_version;
	const char *describe_snapshot;
	uint64_t http_api_max_payload_size; /* API_BODY_MAX unless given */
	uint64_t mmds_size_limit;	    /* the payload size unless given */
};

/*
 * A brisk option accepted beside Firecracker's: `o` is its row of the caller's table, value its value (NULL
 * for a flag). Returns 0, or an exit status that ends the parse (the callee said why).
 */
typedef int (*fc_args_extra_fn)(void *ctx, const struct option *o, const char *value);

/*
 * Parses argv[1..argc) into *a (zeroed first, then the defaults). `extra` (may be NULL) lists brisk options
 * also accepted, each handed to `fn` in order. Returns 0; or -EINVAL with Firecracker's message for the
 * mistake in err[0..errlen); or the non-zero status `fn` returned (as a positive value).
 */
int fc_args_parse(int argc, char **argv, const struct option *extra, fc_args_extra_fn fn, void *ctx, struct fc_args *a,
		  char *err, size_t errlen);

/* Firecracker's instance id rule: 1..64 bytes of ASCII letters, digits and '-'. 0 or -EINVAL (err says). */
int fc_args_check_id(const char *id, char *err, size_t errlen);

#endif
