/* run.c - `brisk run`: options into a vm_config, then build, run and report. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/cli.h"
#include "brisk/config.h"
#include "brisk/devices.h"
#include "brisk/exitcode.h"
#include "brisk/file.h"
#include "brisk/log.h"
#include "brisk/timeline.h"
#include "brisk/timeline_json.h"
#include "brisk/vm.h"

enum {
	OPT_SERIAL = 256,
	OPT_HUGEPAGES,
	OPT_PREFAULT,
	OPT_TIMELINE,
	OPT_LOG_LEVEL,
	OPT_TOPOLOGY,
	OPT_CPU_TEMPLATE,
	OPT_REPORT_JSON,
	OPT_DISK,
	OPT_NET,
	OPT_VSOCK,
	OPT_RNG,
	OPT_CONSOLE,
	OPT_ACPI
};

static const struct option options[] = {
    {"kernel", required_argument, NULL, 'k'},
    {"cmdline", required_argument, NULL, 'c'},
    {"initrd", required_argument, NULL, 'i'},
    {"topology", required_argument, NULL, OPT_TOPOLOGY},
    {"cpu-template", required_argument, NULL, OPT_CPU_TEMPLATE},
    {"cpus", required_argument, NULL, 'p'},
    {"memory", required_argument, NULL, 'm'},
    {"serial", required_argument, NULL, OPT_SERIAL},
    {"hugepages", no_argument, NULL, OPT_HUGEPAGES},
    {"prefault", no_argument, NULL, OPT_PREFAULT},
    {"timeline", no_argument, NULL, OPT_TIMELINE},
    {"report-json", required_argument, NULL, OPT_REPORT_JSON},
    {"disk", required_argument, NULL, OPT_DISK},
    {"net", required_argument, NULL, OPT_NET},
    {"vsock", required_argument, NULL, OPT_VSOCK},
    {"rng", optional_argument, NULL, OPT_RNG},
    {"console", required_argument, NULL, OPT_CONSOLE},
    {"acpi", required_argument, NULL, OPT_ACPI},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* --report-json FILE: where the timeline goes when the VM ends (brisk bench reads it). */
static const char *report_json;

static int bad_value(const char *opt, const char *value, const char *expected)
{
	fprintf(stderr, "brisk run: invalid %s '%s': expected %s\n", opt, value, expected);
	return EXIT_USAGE;
}

static int disk_option_arg(const char *arg, struct vm_config *cfg)
{
	char err[256];

	if (parse_disk(arg, cfg, err, sizeof(err))) {
		fprintf(stderr, "brisk run: invalid --disk '%s': %s\n", arg, err);
		return EXIT_USAGE;
	}
	return 0;
}

static int net_option_arg(const char *arg, struct vm_config *cfg)
{
	char err[256];

	if (parse_net(arg, cfg, err, sizeof(err))) {
		fprintf(stderr, "brisk run: invalid --net '%s': %s\n", arg, err);
		return EXIT_USAGE;
	}
	return 0;
}

static int vsock_option_arg(const char *arg, struct vm_config *cfg)
{
	char err[256];

	if (parse_vsock(arg, cfg, err, sizeof(err))) {
		fprintf(stderr, "brisk run: invalid --vsock '%s': %s\n", arg, err);
		return EXIT_USAGE;
	}
	return 0;
}

/* One option into `cfg`. Returns 0, EXIT_USAGE, or -1 for --help. */
static int apply_option(int c, const char *arg, struct vm_config *cfg)
{
	unsigned long n;
	enum log_level level;

	switch (c) {
	case 'k':
		cfg->kernel = arg;
		return 0;
	case 'c':
		cfg->cmdline = arg;
		return 0;
	case 'i':
		cfg->initrd = arg;
		return 0;
	case OPT_TOPOLOGY:
		if (parse_topology(arg, cfg))
			return bad_value("--topology", arg, "sockets=S,cores=C,threads=T (each 1..254)");
		return 0;
	case OPT_CPU_TEMPLATE:
		cfg->cpu_template = arg;
		return 0;
	case 'p':
		if (parse_uint(arg, 1, CONFIG_MAX_CPUS, &n))
			return bad_value("--cpus", arg, "a number of vCPUs from 1 to 254");
		cfg->cpus = (unsigned)n;
		return 0;
	case 'm':
		if (parse_size(arg, &cfg->memory))
			return bad_value("--memory", arg, "a size such as 512M or 2G");
		return 0;
	case OPT_SERIAL:
		return parse_serial(arg, cfg) ? bad_value("--serial", arg, "stdio, none or file:PATH") : 0;
	case OPT_HUGEPAGES:
		cfg->hugepages = true;
		return 0;
	case OPT_PREFAULT:
		cfg->prefault = true;
		return 0;
	case OPT_TIMELINE:
		cfg->timeline = true;
		return 0;
	case OPT_REPORT_JSON:
		report_json = arg;
		return 0;
	case OPT_DISK:
		return disk_option_arg(arg, cfg);
	case OPT_NET:
		return net_option_arg(arg, cfg);
	case OPT_VSOCK:
		return vsock_option_arg(arg, cfg);
	case OPT_RNG:
		return parse_rng(arg, cfg) ? bad_value("--rng", arg, "a rate in bytes per second such as 1M or 65536")
					   : 0;
	case OPT_CONSOLE:
		return parse_console(arg, cfg) ? bad_value("--console", arg, "serial or virtio") : 0;
	case OPT_ACPI:
		return parse_acpi(arg, cfg) ? bad_value("--acpi", arg, "on or off") : 0;
	case OPT_LOG_LEVEL:
		if (log_parse_level(arg, &level))
			return bad_value("--log-level", arg, "error, warn, info or debug");
		log_set_level(level);
		return 0;
	case 'h':
		return -1;
	default:
		fprintf(stderr, "Try 'brisk help run'.\n");
		return EXIT_USAGE;
	}
}

/* Parses argv into cfg (cli.h: also brisk profile's RUN-OPTIONS). */
int cli_parse_run_options(int argc, char **argv, struct vm_config *cfg)
{
	char err[256];
	int c, ret;

	config_defaults(cfg);
	optind = 1;
	while ((c = getopt_long(argc, argv, "k:c:i:p:m:h", options, NULL)) != -1) {
		ret = apply_option(c, optarg, cfg);
		if (ret < 0) {
			cli_usage(stdout, "run");
			return -1;
		}
		if (ret)
			return ret;
	}
	if (optind < argc) {
		fprintf(stderr, "brisk run: unexpected argument '%s'; try 'brisk help run'\n", argv[optind]);
		return EXIT_USAGE;
	}
	/* Everything checkable without KVM is checked before /dev/kvm is opened. */
	if (config_validate(cfg, CONFIG_MAX_CPUS, config_host_memory(), err, sizeof(err))) {
		fprintf(stderr, "brisk run: %s\n", err);
		return EXIT_USAGE;
	}
	return 0;
}

/*
 * SIGINT/SIGTERM/SIGHUP are blocked in every thread and read from a
 * signalfd by the main thread, which stops the VM cleanly. SIGPIPE is
 * ignored: a closed stdout is the serial device's business, not fatal.
 */
int cli_setup_signals(void)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL))
		return -1;
	return signalfd(-1, &set, SFD_CLOEXEC);
}

int cli_vm_create(const struct vm_config *cfg, struct vm **vm)
{
	struct vm_error e;

	if (vm_create(cfg, vm, &e) == 0)
		return 0;
	log_error("%s", e.msg);
	switch (e.kind) {
	case VM_ERR_USAGE:
		return EXIT_USAGE;
	case VM_ERR_IMAGE:
		return EXIT_IMAGE;
	default:
		return EXIT_HOST;
	}
}

/*
 * --report-json is opened before the VM is built, so that a bad path is a
 * usage error that costs nothing, and so that it cannot block (a FIFO with
 * no reader is refused) or overwrite the kernel or initrd being booted.
 */
static int open_report(const struct vm_config *cfg)
{
	struct stat kst, ist;
	const struct file_avoid avoid[] = {
	    {cfg->kernel && stat(cfg->kernel, &kst) == 0 ? &kst : NULL, "the kernel image (--kernel)"},
	    {cfg->initrd && stat(cfg->initrd, &ist) == 0 ? &ist : NULL, "the initrd (--initrd)"},
	};
	char err[512];
	int fd = file_open_output(report_json, "--report-json", avoid, 2, 1, err, sizeof(err));

	if (fd < 0)
		fprintf(stderr, "brisk run: %s\n", err);
	return fd;
}

int cmd_run(int argc, char **argv)
{
	struct vm_config cfg;
	struct vm *vm = NULL;
	int ret = cli_parse_run_options(argc, argv, &cfg);
	int sig_fd, report_fd = -1;

	if (ret)
		return ret < 0 ? 0 : ret;
	if (report_json && (report_fd = open_report(&cfg)) < 0)
		return report_fd == -EMFILE || report_fd == -ENFILE ? EXIT_HOST : EXIT_USAGE;
	sig_fd = cli_setup_signals();
	if (sig_fd < 0)
		log_warn("signalfd: %s; SIGINT/SIGTERM will not stop the VM cleanly", strerror(errno));
	atexit(serial8250_restore_tty);
	if (vm_signals_init() != 0)
		log_warn("cannot install the vCPU kick signal handler");
	ret = cli_vm_create(&cfg, &vm);
	if (ret == 0) {
		ret = vm_run(vm, sig_fd);
		timeline_mark(TL_EXIT);
		if (cfg.timeline)
			vm_print_report(vm, stdout);
		vm_destroy(vm);
	}
	if (report_fd >= 0) {
		if (timeline_write_json(report_fd, report_json, ret))
			ret = ret ? ret : EXIT_HOST;
		close(report_fd);
	}
	if (sig_fd >= 0)
		close(sig_fd);
	return ret;
}
