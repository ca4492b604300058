/*
 * fc_cli.c - `brisk --api-sock ...` / `firecracker ...`: Firecracker's command line (fc_args.h) with
 * brisk's process options beside it, and the flags that print and exit (docs/cli.md, "Firecracker's
 * command line").
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/api.h"
#include "brisk/cli.h"
#include "brisk/config.h"
#include "brisk/exitcode.h"
#include "brisk/fc_args.h"
#include "brisk/fc_logger.h"
#include "brisk/fc_metrics.h"
#include "brisk/file.h"
#include "brisk/log.h"
#include "brisk/mmds.h"
#include "brisk/run_opts.h"
#include "brisk/snapshot.h"

#define API_LEVEL "1.7.0" /* the Firecracker API level brisk serves (api_impl.h API_FIRECRACKER_LEVEL) */

void cli_print_version(FILE *f)
{
	/*
	 * Kata reads the second word of the first line, strips a 'v' and needs a semver >= 0.21.1 (fc.go
	 * parseVersion); the first word says this is not Firecracker itself, the parenthesis what it is.
	 */
	fprintf(f, "Firecracker-compatible v%s (brisk %s)\n", API_LEVEL, BRISK_VERSION);
}

/* brisk run's process options, the ones Firecracker's mode takes beside its flags (built once). */
static const struct option *extra_options(void)
{
	static struct option extra[64];
	size_t n = 0;

	if (extra[0].name)
		return extra;
	for (const struct option *o = run_options(); o->name && n + 1 < sizeof(extra) / sizeof(extra[0]); o++)
		if (cli_is_process_option(o->val))
			extra[n++] = *o;
	return extra;
}

static int apply_extra(void *ctx, const struct option *o, const char *value)
{
	int ret = cli_apply_process_option(o->val, value, ctx);

	return ret < 0 ? EXIT_USAGE : ret;
}

/* --describe-snapshot FILE: the data format version of a state file (main.rs print_snapshot_data_format). */
static int describe_snapshot(const char *path)
{
	struct snap_reader *r;
	char err[512];
	int fd = file_open_input(path, "--describe-snapshot", NULL, err, sizeof(err)), ret;

	if (fd < 0) {
		fprintf(stderr, "brisk: %s\n", err);
		return EXIT_USAGE;
	}
	ret = snap_reader_open(fd, &r, err, sizeof(err));
	close(fd);
	if (ret) {
		fprintf(stderr, "brisk: --describe-snapshot %s: %s\n", path, err);
		return EXIT_USAGE;
	}
	snap_reader_free(r);
	printf("v%u.0.0\n", SNAP_VERSION);
	return -1;
}

/*
 * --metadata FILE: JSON for the metadata service's store, within --mmds-size-limit (main.rs reads it at
 * start and a bad file ends the process). Checked here; held for the store (api.h api_set_mmds_initial).
 */
static int load_metadata(const struct fc_args *fa)
{
	char err[512], *buf = NULL;
	struct stat st;
	int fd = file_open_input(fa->metadata, "--metadata", &st, err, sizeof(err)), ret = EXIT_USAGE;
	json_object *o = NULL;

	if (fd < 0) {
		fprintf(stderr, "brisk: %s\n", err);
		return EXIT_USAGE;
	}
	if ((uint64_t)st.st_size > fa->mmds_size_limit) {
		fprintf(stderr,
			"brisk: --metadata %s: %lld bytes, above the data store's limit of %llu (--mmds-size-limit)\n",
			fa->metadata, (long long)st.st_size, (unsigned long long)fa->mmds_size_limit);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf || read(fd, buf, (size_t)st.st_size) != st.st_size) {
		fprintf(stderr, "brisk: --metadata %s: cannot read it\n", fa->metadata);
		goto out;
	}
	buf[st.st_size] = '\0';
	o = json_tokener_parse(buf);
	if (!o || !json_object_is_type(o, json_type_object)) {
		fprintf(stderr, "brisk: --metadata %s: not a JSON object\n", fa->metadata);
		goto out;
	}
	ret = api_set_mmds_initial(o);
	if (ret)
		fprintf(stderr, "brisk: --metadata %s: Populating MMDS from file failed: %s\n", fa->metadata,
			ret == -EFBIG ? "DataStoreLimitExceeded" : strerror(-ret));
	ret = ret == -EFBIG ? EXIT_USAGE : ret ? EXIT_HOST : 0;
	o = NULL;
out:
	json_object_put(o);
	free(buf);
	close(fd);
	return ret;
}

/* Firecracker's LevelFilter::from_str (v1.7.0 logger/logging.rs): any case, "warn" or "warning". */
static int parse_level(const char *s, enum fc_log_level *out)
{
	static const struct {
		const char *name;
		enum fc_log_level level;
	} names[] = {{"off", FC_LOG_OFF},    {"trace", FC_LOG_TRACE},  {"debug", FC_LOG_DEBUG},
		     {"info", FC_LOG_INFO},  {"warn", FC_LOG_WARNING}, {"warning", FC_LOG_WARNING},
		     {"error", FC_LOG_ERROR}};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcasecmp(s, names[i].name) == 0)
			return *out = names[i].level, 0;
	return -EINVAL;
}

/*
 * main.rs before the VM: the instance id into the logs, the logger (--log-path, --level, --show-level,
 * --show-log-origin, --module) and the metrics (--metrics-path) started, the jailer's times kept, the boot
 * timer asked for. Outputs go through the guard (file.h) with the config file in it.
 */
static int apply_process_flags(const struct fc_args *fa, struct vm_config *cfg)
{
	struct fc_logger l = {.configured = true, .level = FC_LOG_INFO};
	char err[512];

	log_set_instance_id(fa->id);
	api_set_instance_id(fa->id);
	file_guard_add_path(fa->config_file, FILE_GUARD_INPUT, "the config file (--config-file)");
	if (fa->level && parse_level(fa->level, &l.level)) {
		fprintf(stderr,
			"brisk: Invalid value for logger level: %s.Possible values: [Error, Warning, Info, "
			"Debug]\n",
			fa->level);
		return EXIT_USAGE;
	}
	l.log_path = (char *)fa->log_path;
	l.module = (char *)fa->module;
	l.show_level = fa->show_level;
	l.show_log_origin = fa->show_log_origin;
	if ((fa->log_path || fa->level || fa->module || fa->show_level || fa->show_log_origin) &&
	    fc_logger_configure(&l, true, err, sizeof(err))) {
		fprintf(stderr, "brisk: --log-path: %s\n", err);
		return EXIT_USAGE;
	}
	if (fa->metrics_path && fc_metrics_configure(fa->metrics_path, err, sizeof(err))) {
		fprintf(stderr, "brisk: --metrics-path: %s\n", err);
		return EXIT_USAGE;
	}
	fc_metrics_set_process_times(fa->has_start_time_us ? fa->start_time_us : UINT64_MAX,
				     fa->has_start_time_cpu_us ? fa->start_time_cpu_us : UINT64_MAX,
				     fa->has_parent_cpu_time_us ? fa->parent_cpu_time_us : UINT64_MAX);
	cfg->boot_timer = fa->boot_timer;
	return 0;
}

/* What Firecracker checks at start, after the parse: the id, the seccomp choice, the metadata. */
static int check_args(const struct fc_args *fa)
{
	char err[256];

	if (fc_args_check_id(fa->id, err, sizeof(err))) {
		fprintf(stderr, "brisk: --id '%s': %s\n", fa->id, err);
		return EXIT_USAGE;
	}
	if (fa->seccomp_filter) {
		fprintf(stderr,
			"brisk: --seccomp-filter %s: brisk does not load Firecracker's compiled filters "
			"(seccompiler-bin output, written for Firecracker's own system calls); its filters are built "
			"in, one "
			"per thread role (docs/security.md, \"Seccomp\"): omit the flag to use them, or --no-seccomp\n",
			fa->seccomp_filter);
		return EXIT_USAGE;
	}
	if (fa->http_api_max_payload_size == 0 || fa->http_api_max_payload_size > API_BODY_LIMIT_MAX) {
		fprintf(stderr,
			"brisk: --http-api-max-payload-size %llu: expected 1..%u bytes (a request is one message to "
			"the monitor)\n",
			(unsigned long long)fa->http_api_max_payload_size, API_BODY_LIMIT_MAX);
		return EXIT_USAGE;
	}
	mmds_set_limit(fa->mmds_size_limit);
	return fa->metadata ? load_metadata(fa) : 0;
}

/* A brisk VM option (--kernel, --cpus, ...) in Firecracker's mode: the API or the config file describe the VM. */
static int refuse_vm_options(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) /* --help and --version win (fc_args.h) */
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "--version") == 0)
			return 0;
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const struct option *o = strncmp(argv[i], "--", 2) == 0 ? run_options() : NULL;

		for (; o && o->name; o++) {
			if (strcmp(o->name, argv[i] + 2) != 0 || cli_is_process_option(o->val) || o->val == 'h' ||
			    o->val == OPT_API_SOCK || o->val == OPT_CONFIG_FILE || o->val == OPT_NO_API)
				continue;
			fprintf(stderr,
				"brisk: %s: a VM option; in Firecracker's mode the API or --config-file describe "
				"the VM, and only process options may be added (or use 'brisk run')\n",
				argv[i]);
			return EXIT_USAGE;
		}
	}
	return 0;
}

int fc_cli_parse(int argc, char **argv, struct vm_config *cfg, struct fc_args *fa)
{
	char err[512];
	int ret;

	config_defaults(cfg);
	if ((ret = refuse_vm_options(argc, argv)))
		return ret;
	ret = fc_args_parse(argc, argv, extra_options(), apply_extra, cfg, fa, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "brisk: Arguments parsing error: %s (try 'brisk help api')\n", err);
		return EXIT_USAGE;
	}
	if (ret)
		return ret;
	if (fa->help)
		return cli_usage(stdout, "api"), -1;
	if (fa->version)
		return cli_print_version(stdout), -1;
	if (fa->snapshot_version)
		return printf("v%u.0.0\n", SNAP_VERSION), -1;
	if (fa->describe_snapshot)
		return describe_snapshot(fa->describe_snapshot);
	if ((ret = check_args(fa)) || (ret = apply_process_flags(fa, cfg)))
		return ret;
	if (config_validate(cfg, CONFIG_MAX_CPUS, config_host_memory(), err, sizeof(err))) {
		fprintf(stderr, "brisk: %s\n", err);
		return EXIT_USAGE;
	}
	return 0;
}
