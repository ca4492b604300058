/* fc_args.c - Firecracker's command line with its own parser's rules (include/brisk/fc_args.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/errmsg.h"
#include "brisk/fc_args.h"

enum fc_flag {
	F_API_SOCK,
	F_ID,
	F_SECCOMP_FILTER,
	F_NO_SECCOMP,
	F_START_TIME_US,
	F_START_TIME_CPU_US,
	F_PARENT_CPU_TIME_US,
	F_CONFIG_FILE,
	F_METADATA,
	F_NO_API,
	F_LOG_PATH,
	F_LEVEL,
	F_MODULE,
	F_SHOW_LEVEL,
	F_SHOW_LOG_ORIGIN,
	F_METRICS_PATH,
	F_BOOT_TIMER,
	F_SNAPSHOT_VERSION,
	F_DESCRIBE_SNAPSHOT,
	F_HTTP_API_MAX_PAYLOAD_SIZE,
	F_MMDS_SIZE_LIMIT,
	F__COUNT
};

/* Firecracker v1.7.0 src/firecracker/src/main.rs, in its order; `value`: takes a value. */
static const struct {
	const char *name;
	bool value;
} flags[F__COUNT] = {
    [F_API_SOCK] = {"api-sock", true},
    [F_ID] = {"id", true},
    [F_SECCOMP_FILTER] = {"seccomp-filter", true},
    [F_NO_SECCOMP] = {"no-seccomp", false},
    [F_START_TIME_US] = {"start-time-us", true},
    [F_START_TIME_CPU_US] = {"start-time-cpu-us", true},
    [F_PARENT_CPU_TIME_US] = {"parent-cpu-time-us", true},
    [F_CONFIG_FILE] = {"config-file", true},
    [F_METADATA] = {"metadata", true},
    [F_NO_API] = {"no-api", false},
    [F_LOG_PATH] = {"log-path", true},
    [F_LEVEL] = {"level", true},
    [F_MODULE] = {"module", true},
    [F_SHOW_LEVEL] = {"show-level", false},
    [F_SHOW_LOG_ORIGIN] = {"show-log-origin", false},
    [F_METRICS_PATH] = {"metrics-path", true},
    [F_BOOT_TIMER] = {"boot-timer", false},
    [F_SNAPSHOT_VERSION] = {"snapshot-version", false},
    [F_DESCRIBE_SNAPSHOT] = {"describe-snapshot", true},
    [F_HTTP_API_MAX_PAYLOAD_SIZE] = {"http-api-max-payload-size", true},
    [F_MMDS_SIZE_LIMIT] = {"mmds-size-limit", true},
};

static int flag_index(const char *name)
{
	for (int i = 0; i < F__COUNT; i++)
		if (strcmp(flags[i].name, name) == 0)
			return i;
	return -1;
}

int fc_args_check_id(const char *id, char *err, size_t errlen)
{
	size_t n = strlen(id);

	if (n < 1 || n > FC_INSTANCE_ID_MAX)
		return err_set(err, errlen, -EINVAL,
			       "Invalid instance ID: Invalid len (%zu);  the length must be "
			       "between 1 and %u",
			       n, FC_INSTANCE_ID_MAX);
	for (size_t i = 0; i < n; i++)
		if (id[i] != '-' && !isalnum((unsigned char)id[i]))
			return err_set(err, errlen, -EINVAL, "Invalid instance ID: Invalid char (%c) at position %zu",
				       id[i], i);
	return 0;
}

/* A decimal u64 as Rust's str::parse::<u64>() takes it: digits only (a leading '+' too). */
static int parse_u64(const char *flag, const char *s, uint64_t *out, char *err, size_t errlen)
{
	const char *p = *s == '+' ? s + 1 : s;
	char *end;

	if (!*p || !isdigit((unsigned char)*p))
		goto bad;
	errno = 0;
	*out = strtoull(p, &end, 10);
	if (errno == 0 && *end == '\0')
		return 0;
bad:
	return err_set(err, errlen, -EINVAL, "'%s' parameter expected to be of '%s' type, got '%s'", flag,
		       strstr(flag, "size") || strstr(flag, "limit") ? "usize" : "u64", s);
}

/* The flag's value into *a. Returns 0 or -EINVAL (err says). */
static int store(struct fc_args *a, int f, const char *v, char *err, size_t errlen)
{
	switch (f) {
	case F_API_SOCK:
		a->api_sock = v;
		return 0;
	case F_ID:
		a->id = v;
		return 0;
	case F_SECCOMP_FILTER:
		a->seccomp_filter = v;
		return 0;
	case F_NO_SECCOMP:
		a->no_seccomp = true;
		return 0;
	case F_START_TIME_US:
		a->has_start_time_us = true;
		return parse_u64(flags[f].name, v, &a->start_time_us, err, errlen);
	case F_START_TIME_CPU_US:
		a->has_start_time_cpu_us = true;
		return parse_u64(flags[f].name, v, &a->start_time_cpu_us, err, errlen);
	case F_PARENT_CPU_TIME_US:
		a->has_parent_cpu_time_us = true;
		return parse_u64(flags[f].name, v, &a->parent_cpu_time_us, err, errlen);
	case F_CONFIG_FILE:
		a->config_file = v;
		return 0;
	case F_METADATA:
		a->metadata = v;
		return 0;
	case F_NO_API:
		a->no_api = true;
		return 0;
	case F_LOG_PATH:
		a->log_path = v;
		return 0;
	case F_LEVEL:
		a->level = v;
		return 0;
	case F_MODULE:
		a->module = v;
		return 0;
	case F_SHOW_LEVEL:
		a->show_level = true;
		return 0;
	case F_SHOW_LOG_ORIGIN:
		a->show_log_origin = true;
		return 0;
	case F_METRICS_PATH:
		a->metrics_path = v;
		return 0;
	case F_BOOT_TIMER:
		a->boot_timer = true;
		return 0;
	case F_SNAPSHOT_VERSION:
		a->snapshot_version = true;
		return 0;
	case F_DESCRIBE_SNAPSHOT:
		a->describe_snapshot = v;
		return 0;
	case F_HTTP_API_MAX_PAYLOAD_SIZE:
		return parse_u64(flags[f].name, v, &a->http_api_max_payload_size, err, errlen);
	default: /* F_MMDS_SIZE_LIMIT */
		return parse_u64(flags[f].name, v, &a->mmds_size_limit, err, errlen);
	}
}

static const struct option *extra_find(const struct option *extra, const char *name)
{
	for (const struct option *o = extra; o && o->name; o++)
		if (strcmp(o->name, name) == 0)
			return o;
	return NULL;
}

/* arg_parser.rs validate_requirements: `requires` and `forbids`. */
static int check_requirements(const struct fc_args *a, char *err, size_t errlen)
{
	if (a->no_api && !a->config_file)
		return err_set(err, errlen, -EINVAL, "Argument 'config-file' required, but not found.");
	if (a->seccomp_filter && a->no_seccomp)
		return err_set(err, errlen, -EINVAL,
			       "Argument 'no-seccomp' cannot be used together with argument 'seccomp-filter'.");
	return 0;
}

static bool present(int argc, char **argv, const char *word)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], word) == 0)
			return true;
	return false;
}

int fc_args_parse(int argc, char **argv, const struct option *extra, fc_args_extra_fn fn, void *ctx, struct fc_args *a,
		  char *err, size_t errlen)
{
	bool seen[F__COUNT] = {false};
	bool mmds_given = false;

	*a = (struct fc_args){.id = FC_DEFAULT_INSTANCE_ID, .http_api_max_payload_size = API_BODY_MAX};
	/* arg_parser.rs parse(): --help, then --version, anywhere before `--`, skip everything else */
	if ((a->help = present(argc, argv, "--help")) || (a->version = present(argc, argv, "--version")))
		return 0;
	for (int i = 1; i < argc; i++) {
		const char *w = argv[i], *v = NULL;
		const struct option *o;
		int f, ret;

		if (strcmp(w, "--") == 0)
			break;
		if (strncmp(w, "--", 2) != 0)
			return err_set(err, errlen, -EINVAL,
				       "Found argument '%s' which wasn't expected, or isn't valid in this context.", w);
		f = flag_index(w + 2);
		o = f < 0 ? extra_find(extra, w + 2) : NULL;
		if (f < 0 && !o)
			return err_set(err, errlen, -EINVAL,
				       "Found argument '%s' which wasn't expected, or isn't valid in this context.",
				       w + 2);
		if (f >= 0 && seen[f])
			return err_set(err, errlen, -EINVAL, "The argument '%s' was provided more than once.", w + 2);
		if (f >= 0 ? flags[f].value : o->has_arg != no_argument) {
			if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0)
				return err_set(err, errlen, -EINVAL,
					       "The argument '%s' requires a value, but none was supplied.", w + 2);
			v = argv[++i];
		}
		if (f < 0) {
			if ((ret = fn(ctx, o, v)))
				return ret;
			continue;
		}
		seen[f] = true;
		mmds_given |= f == F_MMDS_SIZE_LIMIT;
		if ((ret = store(a, f, v, err, errlen)))
			return ret;
	}
	if (!mmds_given)
		a->mmds_size_limit = a->http_api_max_payload_size; /* main.rs: defaults to the payload limit */
	return check_requirements(a, err, errlen);
}
