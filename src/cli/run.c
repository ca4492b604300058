/* run.c - `brisk run`: options into a vm_config, then build, run and report. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/api.h"
#include "brisk/api_link.h"
#include "brisk/cli.h"
#include "brisk/clone.h"
#include "brisk/config.h"
#include "brisk/devices.h"
#include "brisk/devkinds.h"
#include "brisk/errmsg.h"
#include "brisk/exitcode.h"
#include "brisk/fc_args.h"
#include "brisk/fc_config.h"
#include "brisk/fc_metrics.h"
#include "brisk/file.h"
#include "brisk/log.h"
#include "brisk/opts.h"
#include "brisk/run_opts.h"
#include "brisk/seccomp.h"
#include "brisk/timeline.h"
#include "brisk/timeline_json.h"
#include "brisk/vm.h"

/* --report-json FILE: where the timeline goes when the VM ends (brisk bench reads it). */
static const char *report_json;
/* --api-sock, --config-file, --no-api: the Firecracker-compatible API and configuration (docs/api.md). */
static const char *api_sock, *config_file;
static bool no_api;
/* Firecracker's --http-api-max-payload-size (0: the default, 51,200 bytes) */
static size_t api_max_payload;
/*
 * brisk restore: --snapshot STATE --mem MEM [--paused]; the first VM-shaping option seen (refused with a
 * config file, the API or a snapshot), and the first option a snapshot brings (refused by restore).
 */
static const char *snapshot_path, *mem_path, *vm_option, *snapshot_option;
static bool paused;
static bool clock_realtime; /* --clock-realtime (also set in vm_config) */
/* brisk restore --vsock-uds PATH: the snapshot's vsock device listens on PATH (the load's vsock_override). */
static const char *vsock_uds;
/* brisk restore --working-set SPEC (--uffd SOCK sets mem_path and vm_config's mem_uffd). */
static const char *working_set;
/* brisk restore --clone-server SOCK: one prepared snapshot, a forked VM per request (clone.h). */
static const char *clone_sock;
static unsigned clone_pool; /* --clone-pool N: warm clones */
static bool clone_pool_given;
/*
 * --seccomp on|off: the per-thread filters (docs/security.md, "Seccomp"); off is for debugging. Without the
 * option, BRISK_SECCOMP=off in the environment means off (to compare runs without changing command lines).
 */
static bool seccomp_off, seccomp_given;
/* vm_config.restore_adjust for --vsock-uds: the snapshot's vsock device on another path (ctx: the path). */
static int restore_vsock_uds(struct vm_config *cfg, const char *api_desc, void *ctx, char *err, size_t errlen)
{
	const char *path = ctx;

	(void)api_desc;
	return config_move_vsock(cfg, path) /* its length checked when parsed: only -ENODEV is left */
		   ? err_set(err, errlen, -ENODEV, "--vsock-uds %s: the snapshot's VM has no vsock device", path)
		   : 0;
}

static int bad_value(const char *opt, const char *value, const char *expected)
{
	fprintf(stderr, "brisk run: invalid %s '%s': expected %s\n", opt, value, expected);
	return EXIT_USAGE;
}

/* A device kind's option (devkinds.h) into `cfg`: its row parses it. */
static int device_option_arg(const struct devkind *k, const char *arg, struct vm_config *cfg)
{
	char err[256];

	if (k->parse(arg, cfg, err, sizeof(err))) {
		fprintf(stderr, "brisk run: invalid --%s '%s': %s\n", k->option, arg, err);
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
		if (config_parse_topology(arg, cfg))
			return bad_value("--topology", arg, "sockets=S,cores=C,threads=T (each 1..254)");
		return 0;
	case OPT_CPU_TEMPLATE:
		cfg->cpu_template = arg;
		return 0;
	case 'p':
		if (config_parse_uint(arg, 1, CONFIG_MAX_CPUS, &n))
			return bad_value("--cpus", arg, "a number of vCPUs from 1 to 254");
		cfg->cpus = (unsigned)n;
		return 0;
	case 'm':
		if (config_parse_size(arg, &cfg->memory))
			return bad_value("--memory", arg, "a size such as 512M or 2G");
		return 0;
	case OPT_SERIAL:
		return config_parse_serial(arg, cfg) ? bad_value("--serial", arg, "stdio, none or file:PATH") : 0;
	case OPT_HUGEPAGES:
		cfg->hugepages = true;
		return 0;
	case OPT_HUGETLBFS:
		cfg->hugetlbfs = true;
		return 0;
	case OPT_TRACK_DIRTY:
		cfg->track_dirty = true;
		return 0;
	case OPT_PREFAULT:
		cfg->prefault = true;
		return 0;
	case OPT_TIMELINE:
		cfg->timeline = true;
		return 0;
	case OPT_BOOT_TIMER:
		cfg->boot_timer = true;
		return 0;
	case OPT_REPORT_JSON:
		report_json = arg;
		return 0;
	case OPT_ACPI:
		return config_parse_acpi(arg, cfg) ? bad_value("--acpi", arg, "on or off") : 0;
	case OPT_IRQCHIP:
		return config_parse_irqchip(arg, cfg) ? bad_value("--irqchip", arg, "split or kernel") : 0;
	case OPT_API_SOCK:
		api_sock = arg;
		return 0;
	case OPT_CONFIG_FILE:
		config_file = arg;
		return 0;
	case OPT_NO_API:
		no_api = true;
		return 0;
	case OPT_SNAPSHOT:
		snapshot_path = arg;
		return 0;
	case OPT_MEM:
	case OPT_UFFD:
		if (mem_path) {
			fprintf(stderr, "brisk restore: --mem and --uffd are exclusive, and each is given once\n");
			return EXIT_USAGE;
		}
		mem_path = arg;
		cfg->mem_uffd = c == OPT_UFFD;
		return 0;
	case OPT_WORKING_SET:
		if (config_parse_working_set(arg, cfg))
			return bad_value("--working-set", arg, "record=MS (1..60000), wait or off");
		working_set = arg;
		return 0;
	case OPT_CLOCK_REALTIME: /* the load's clock_realtime */
		clock_realtime = cfg->clock_realtime = true;
		return 0;
	case OPT_VSOCK_UDS: /* the load's vsock_override */
		if (!arg[0] || strlen(arg) > VM_VSOCK_UDS_MAX)
			return bad_value("--vsock-uds", arg, "a socket path of 1 to 96 bytes");
		vsock_uds = arg;
		cfg->restore_adjust = restore_vsock_uds;
		cfg->restore_ctx = (void *)arg;
		return 0;
	case OPT_PAUSED:
		paused = true;
		return 0;
	case OPT_CLONE_SERVER:
		clone_sock = arg;
		return 0;
	case OPT_CLONE_POOL:
		if (config_parse_uint(arg, 0, CLONE_POOL_MAX, &n))
			return bad_value("--clone-pool", arg, "a number of warm clones from 0 to 64");
		clone_pool = (unsigned)n;
		clone_pool_given = true;
		return 0;
	case OPT_SECCOMP:
		if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0)
			return bad_value("--seccomp", arg, "on or off");
		seccomp_off = strcmp(arg, "off") == 0;
		seccomp_given = true;
		return 0;
	case OPT_LOG_LEVEL:
		if (log_parse_level(arg, &level))
			return bad_value("--log-level", arg, "error, warn, info or debug");
		log_set_level(level);
		return 0;
	case 'h':
		return -1;
	default:
		if (devkind_by_opt(c))
			return device_option_arg(devkind_by_opt(c), arg, cfg);
		fprintf(stderr, "Try 'brisk help run'.\n");
		return EXIT_USAGE;
	}
}

/*
 * Options that shape the VM (a snapshot or a config file brings its own), as opposed to the process's; a
 * device kind's option is one unless its row says it stays the process's next to a config file or the API.
 */
static bool is_vm_option(int c)
{
	switch (c) {
	case 'k':
	case 'c':
	case 'i':
	case 'p':
	case 'm':
	case OPT_TOPOLOGY:
	case OPT_CPU_TEMPLATE:
	case OPT_ACPI:
	case OPT_HUGEPAGES:
	case OPT_HUGETLBFS:
	case OPT_TRACK_DIRTY:
		return true;
	default:
		return devkind_by_opt(c) && !devkind_by_opt(c)->process_option;
	}
}

/*
 * What `brisk restore` refuses: a VM option, any device kind's option (the snapshot holds every device), and
 * --irqchip (the snapshot's VM had one kind of irqchip; a config file or the API's VM takes the process's).
 */
static bool is_snapshot_option(int c)
{
	if (c == OPT_TRACK_DIRTY) /* the load's choice, as the API's enable_diff_snapshots */
		return false;
	return is_vm_option(c) || devkind_by_opt(c) || c == OPT_IRQCHIP;
}

/* A brisk option that Firecracker's mode accepts beside its own flags: the process's, not the VM's (cli.h). */
bool cli_is_process_option(int c)
{
	switch (c) {
	case OPT_API_SOCK: /* Firecracker's own flags, parsed by fc_args.c */
	case OPT_CONFIG_FILE:
	case OPT_NO_API:
	case OPT_SNAPSHOT: /* brisk restore's */
	case OPT_MEM:
	case OPT_UFFD:
	case OPT_WORKING_SET:
	case OPT_CLOCK_REALTIME:
	case OPT_VSOCK_UDS:
	case OPT_PAUSED:
	case OPT_CLONE_SERVER:
	case OPT_CLONE_POOL:
	case 'h':
		return false;
	case OPT_IRQCHIP:
		return true;
	case OPT_TRACK_DIRTY: /* machine-config's track_dirty_pages in that mode */
		return false;
	default:
		return !is_snapshot_option(c);
	}
}

int cli_apply_process_option(int c, const char *arg, struct vm_config *cfg)
{
	return apply_option(c, arg, cfg);
}

static const char *option_name(int c)
{
	for (const struct option *o = run_options(); o->name; o++)
		if (o->val == c)
			return o->name;
	return "?";
}

/* The subcommand whose options argv[0] starts ("run", "restore", ...), or NULL for `brisk --api-sock`. */
static const char *command_name(const char *argv0)
{
	static const char *const names[] = {"run", "restore", "profile", "acpi"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(argv0, names[i]) == 0)
			return names[i];
	return NULL;
}

/* Parses argv into cfg (cli.h: also brisk profile's RUN-OPTIONS). */
int cli_parse_run_options(int argc, char **argv, struct vm_config *cfg)
{
	char err[256];
	int c, ret;

	config_defaults(cfg);
	if (opts_check_exact(argc - 1, argv + 1, RUN_SHORT_OPTS, run_options(), err, sizeof(err))) {
		const char *cmd = command_name(argv[0]);

		fprintf(stderr, "brisk%s%s: %s; try 'brisk help %s'\n", cmd ? " " : "", cmd ? cmd : "", err,
			cmd ? cmd : "api");
		return EXIT_USAGE;
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, RUN_SHORT_OPTS, run_options(), NULL)) != -1) {
		if (!vm_option && is_vm_option(c))
			vm_option = option_name(c);
		if (!snapshot_option && is_snapshot_option(c))
			snapshot_option = option_name(c);
		ret = apply_option(c, optarg, cfg);
		if (ret < 0)
			return -1; /* --help: the caller prints its command's usage */
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

/* A signal brisk carries on after (SIGPIPE, SIGXFSZ): counted in Firecracker's metrics group "signals". */
static void count_signal(int sig)
{
	fc_metrics_signal(sig);
}

/*
 * As Firecracker v1.7.0 (src/vmm/src/signal_handler.rs), SIGPIPE is caught,
 * counted and survived: the write fails with EPIPE, its caller's business
 * (a closed stdout is the serial device's). SIGXFSZ (a write past
 * RLIMIT_FSIZE, e.g. brisk jail --resource-limit fsize=) too: the write fails with
 * EFBIG, a guest's disk write becomes an I/O error; Firecracker exits 151
 * there instead (docs/exit-codes.md says why brisk does not).
 */
static void catch_survivable(void)
{
	struct sigaction sa = {.sa_handler = count_signal, .sa_flags = SA_RESTART};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);
	sigaction(SIGXFSZ, &sa, NULL);
}

/*
 * SIGINT/SIGTERM/SIGHUP and SIGXCPU (RLIMIT_CPU's soft limit, sent to the
 * process) are blocked in every thread and read from a signalfd by the
 * main thread, which stops the VM cleanly.
 */
int cli_setup_signals(void)
{
	sigset_t set;

	catch_survivable();
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGXCPU);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL))
		return -1;
	return signalfd(-1, &set, SFD_CLOEXEC);
}

int cli_vm_failed(const struct vm_error *e)
{
	log_error("%s", e->msg);
	switch (e->kind) {
	case VM_ERR_USAGE:
		return EXIT_USAGE;
	case VM_ERR_IMAGE:
		return EXIT_IMAGE;
	default:
		return EXIT_HOST;
	}
}

int cli_vm_create(const struct vm_config *cfg, struct vm **vm)
{
	struct vm_error e;

	return vm_create(cfg, vm, &e) == 0 ? 0 : cli_vm_failed(&e);
}

int cli_vm_build(const struct vm_config *cfg, struct vm **vm)
{
	struct vm_error e;

	if (!snapshot_path)
		return cli_vm_create(cfg, vm);
	if (vm_restore(cfg, snapshot_path, mem_path, true, vm, &e) == 0)
		return 0;
	return cli_vm_failed(&e);
}

/*
 * --report-json is opened before the VM is built, so that a bad path is a
 * usage error that costs nothing, and so that it cannot block (a FIFO with
 * no reader is refused) or overwrite a file the VM boots from or serves as a
 * disk, or another VM's disk (the guard, include/brisk/file.h).
 */
static int open_report(const struct vm_config *cfg)
{
	char err[512];
	int fd;

	vm_config_guard(cfg);
	file_guard_add_path(snapshot_path, FILE_GUARD_SNAPSHOT, "the state file this VM is restored from");
	file_guard_add_path(mem_path, FILE_GUARD_SNAPSHOT, "the memory file this VM is restored from");
	file_guard_add_path(config_file, FILE_GUARD_INPUT, "the config file (--config-file)");
	fd = file_open_output(report_json, "--report-json", FILE_OUT_TRUNCATE, true, err, sizeof(err));
	if (fd < 0)
		fprintf(stderr, "brisk run: %s\n", err);
	return fd;
}

/* --config-file: Firecracker's configuration replaces the VM options; the process options (serial, console,
 * timeline, ACPI mode) stay the command line's. */
static int load_config_file(struct fc_vm *fc, const struct vm_config *opts)
{
	char err[1024];

	if (fc_vm_load_config_file(fc, config_file, err, sizeof(err))) {
		fprintf(stderr, "brisk run: %s\n", err);
		return EXIT_USAGE;
	}
	fc->cfg.serial = opts->serial;
	fc->cfg.serial_path = opts->serial_path;
	fc->cfg.console = opts->console;
	fc->cfg.timeline = opts->timeline;
	fc->cfg.no_acpi = opts->no_acpi;
	fc->cfg.irqchip = opts->irqchip;
	fc->cfg.prefault = opts->prefault;
	fc->cfg.boot_timer = opts->boot_timer;
	fc->cfg.hooks = opts->hooks;
	if (fc_vm_finalize(fc, err, sizeof(err))) {
		fprintf(stderr, "brisk run: --config-file %s: %s\n", config_file, err);
		return EXIT_USAGE;
	}
	return 0;
}

static int start_api(struct api_link **link)
{
	enum api_link_fault fault;
	char err[512];
	int ret = api_link_start(api_sock, api_max_payload, link, &fault, err, sizeof(err));

	if (ret)
		log_error("--api-sock %s: %s", api_sock, err);
	/* the path is the user's mistake (2); a helper that is missing or cannot start is the host's (4) */
	return !ret ? 0 : fault == API_LINK_FAULT_PATH ? EXIT_USAGE : EXIT_HOST;
}

/*
 * The API state for a VM about to be built: a config file's (moved into it, with its logger and metrics
 * opened) or a description of the command line's. Returns 0 or EXIT_USAGE (a logger/metrics path).
 */
static int prepare_api(struct api *a, const struct vm_config *cfg, struct fc_vm *fc)
{
	char err[512];

	api_init(a, cfg);
	if (!fc)
		return 0;
	fc_vm_free(&a->fc);
	a->fc = *fc; /* moved (fc_config.h): GET /vm/config then describes the file's VM, ids and all */
	fc_vm_init(fc);
	if (api_apply_sinks(a, err, sizeof(err))) {
		fprintf(stderr, "brisk: --config-file %s: %s\n", config_file, err);
		return EXIT_USAGE;
	}
	return 0;
}

/* Releases the vCPUs; a vCPU whose set-up failed is said (the VM then ends with its exit status). */
static void start_logged(struct vm *vm)
{
	struct vm_error e;

	if (vm_start(vm, &e))
		log_error("%s", e.msg);
}

/* A VM without the API: run to its end (started_fd: vm_run_notify), its --timeline report printed, destroyed. */
static int run_alone(struct vm *vm, const struct vm_config *cfg, int sig_fd, int started_fd)
{
	int ret = vm_run_notify(vm, sig_fd, started_fd);

	timeline_mark(TL_EXIT);
	if (cfg->timeline)
		vm_print_report(vm, stdout);
	vm_destroy(vm);
	return ret;
}

/*
 * run_vm with the API beside the VM. Not inlined: its `struct api` (14 KB) would sit in run_vm's frame and
 * push every frame of a plain `brisk run` 14 KB further down the stack, onto pages it then faults in.
 */
static __attribute__((noinline)) int run_vm_api(const struct vm_config *cfg, struct fc_vm *fc, struct api_link *link,
						int sig_fd)
{
	struct vm *vm = NULL;
	struct api a;
	int ret;

	if (!(ret = prepare_api(&a, cfg, fc)) && !(ret = cli_vm_create(fc ? &a.fc.cfg : cfg, &vm))) {
		if (!fc && api_adopt_vm(&a, vm, cfg, true))
			log_warn("GET /vm/config will not describe this VM: out of memory");
		a.vm = vm;
		a.state = API_RUNNING;
		start_logged(vm);
		ret = api_serve(&a, link, sig_fd); /* ends the VM and prints the report */
	}
	api_free(&a);
	api_link_close(link);
	return ret;
}

/*
 * The VM runs; the API (unless --no-api) serves beside it until it ends. A config file's VM goes through
 * the API's loop even without a socket: its logger and metrics are the API's.
 */
static int run_vm(const struct vm_config *cfg, struct fc_vm *fc, int sig_fd)
{
	struct api_link *link = NULL;
	struct vm *vm = NULL;
	int ret = api_sock && !no_api ? start_api(&link) : 0;

	if (ret)
		return ret;
	if (!link && !fc) {
		if ((ret = cli_vm_create(cfg, &vm)))
			return ret;
		return run_alone(vm, cfg, sig_fd, -1);
	}
	return run_vm_api(cfg, fc, link, sig_fd);
}

/*
 * The main thread's filter goes on once the VM is built, while its vCPU threads configure themselves and before
 * any enters KVM_RUN (vm.h's confine): the same point for a VM from options, a config file, a restore, or the
 * API's InstanceStart or snapshot load (the API's base configuration carries these hooks).
 */
static void confine_main(struct vm *vm, void *ctx)
{
	(void)vm, (void)ctx;
	seccomp_enter(SECCOMP_MAIN);
}

static const struct vm_hooks seccomp_hooks = {.confine = confine_main};

static int setup_seccomp(struct vm_config *cfg)
{
	const char *env = getenv("BRISK_SECCOMP");
	int ret;

	if (!seccomp_given && env && strcmp(env, "off") == 0)
		seccomp_off = true;
	ret = seccomp_configure(!seccomp_off);

	if (ret) {
		fprintf(stderr, "brisk: seccomp filters unavailable: %s; --seccomp off runs without them\n",
			strerror(-ret));
		return EXIT_HOST;
	}
	if (!seccomp_off && !cfg->hooks)
		cfg->hooks = &seccomp_hooks;
	return 0;
}

/* A restored VM with the API beside it. Not inlined, for the reason run_vm_api is not. */
static __attribute__((noinline)) int serve_restored(struct vm *vm, const struct vm_config *base, struct api_link *link,
						    int sig_fd)
{
	struct api a;
	int ret;

	api_init(&a, base);
	if (api_adopt_vm(&a, vm, vm_config(vm), !paused))
		log_warn("GET /vm/config will not describe this VM: out of memory");
	start_logged(vm);
	ret = api_serve(&a, link, sig_fd);
	api_free(&a);
	api_link_close(link);
	return ret;
}

/* brisk restore: the snapshot's VM, resumed unless --paused, with the API beside it when --api-sock. */
static int restore_vm(const struct vm_config *base, int sig_fd)
{
	struct api_link *link = NULL;
	struct vm *vm = NULL;
	struct vm_error e;
	int ret = api_sock && !no_api ? start_api(&link) : 0;

	if (ret)
		return ret;
	if (vm_restore(base, snapshot_path, mem_path, !paused, &vm, &e)) {
		api_link_close(link);
		return cli_vm_failed(&e);
	}
	if (!link)
		return run_alone(vm, base, sig_fd, -1);
	return serve_restored(vm, base, link, sig_fd);
}

static int finish_report(int report_fd, int ret)
{
	if (report_fd >= 0) {
		if (timeline_write_json(report_fd, report_json, ret))
			ret = ret ? ret : EXIT_HOST;
		close(report_fd);
	}
	return ret;
}

/*
 * One clone, in the clone server's forked child: the prepared VM built (vm_restore_clone), run and reported
 * as brisk restore's would be; its --report-json and vsock socket path are the request's. Returns the child's
 * exit status.
 */
static int run_clone(struct vm *vm, const struct clone_req *req, int sig_fd, void *ctx)
{
	const struct vm_config *base = ctx;
	struct vm_error e;
	int report_fd = -1;

	if (req->report_json[0]) {
		report_json = req->report_json;
		if ((report_fd = open_report(base)) < 0) {
			vm_destroy(vm);
			return report_fd == -EMFILE || report_fd == -ENFILE ? EXIT_HOST : EXIT_USAGE;
		}
	}
	if (vm_restore_clone(vm, true, req->vsock_uds, &e)) {
		vm_destroy(vm);
		return finish_report(report_fd, cli_vm_failed(&e));
	}
	return finish_report(report_fd, run_alone(vm, base, sig_fd, req->started_fd));
}

/* brisk restore --clone-server SOCK: the snapshot prepared once, then clone_serve until a signal. */
static int serve_clones(const struct vm_config *base, int sig_fd)
{
	struct vm *vm = NULL;
	struct vm_error e;
	int ret;

	if (vm_restore_prepare(base, snapshot_path, mem_path, &vm, &e)) {
		return cli_vm_failed(&e);
	}
	ret = clone_serve(vm, clone_sock, clone_pool, sig_fd, run_clone, (void *)base);
	vm_destroy(vm);
	return ret;
}

/* brisk --api-sock PATH: no VM until the API configures one (InstanceStart) or loads a snapshot. */
static int serve_unconfigured(const struct vm_config *base, int sig_fd)
{
	struct api_link *link = NULL;
	struct api a;
	int ret = start_api(&link);

	if (ret)
		return ret;
	api_init(&a, base);
	ret = api_serve(&a, link, sig_fd);
	api_free(&a);
	api_link_close(link);
	return ret;
}

/* --config-file's VM. Not inlined, for the reason run_vm_api is not: its `struct fc_vm` is 15 KB. */
static __attribute__((noinline)) int run_config_file(int sig_fd, const struct vm_config *cfg)
{
	struct fc_vm fc;
	int ret;

	fc_vm_init(&fc);
	ret = load_config_file(&fc, cfg);
	if (!ret)
		ret = run_vm(&fc.cfg, &fc, sig_fd);
	fc_vm_free(&fc);
	return ret;
}

static int run_selected(int sig_fd, const struct vm_config *cfg, bool wait_for_api)
{
	if (clone_sock)
		return serve_clones(cfg, sig_fd);
	if (snapshot_path)
		return restore_vm(cfg, sig_fd);
	if (config_file)
		return run_config_file(sig_fd, cfg);
	if (wait_for_api && api_sock && !no_api)
		return serve_unconfigured(cfg, sig_fd);
	return run_vm(cfg, NULL, sig_fd);
}

enum run_mode { MODE_RUN, MODE_API, MODE_RESTORE };

/* The combinations each mode refuses, before anything is opened. */
static int check_mode(enum run_mode mode)
{
	const char *me = mode == MODE_RESTORE ? "brisk restore" : mode == MODE_API ? "brisk" : "brisk run";

	if (mode == MODE_API && !api_sock && !config_file) {
		fprintf(stderr, "%s: --api-sock PATH or --config-file FILE is required; try 'brisk help api'\n", me);
		return EXIT_USAGE;
	}
	if (mode == MODE_RESTORE && (!snapshot_path || !mem_path)) {
		fprintf(stderr,
			"%s: --snapshot STATE and --mem MEM (or --uffd SOCK) are required; try 'brisk help restore'\n",
			me);
		return EXIT_USAGE;
	}
	if (mode == MODE_RESTORE && (snapshot_option || config_file)) {
		fprintf(stderr, "%s: --%s: the snapshot holds the VM's configuration; only process options apply\n", me,
			config_file ? "config-file" : snapshot_option);
		return EXIT_USAGE;
	}
	if (paused && (!api_sock || no_api)) {
		fprintf(stderr, "%s: --paused needs --api-sock: nothing else could resume the VM\n", me);
		return EXIT_USAGE;
	}
	if (clone_pool_given && !clone_sock) {
		fprintf(stderr, "%s: --clone-pool belongs to --clone-server\n", me);
		return EXIT_USAGE;
	}
	if (clone_sock && (api_sock || paused || report_json)) {
		fprintf(stderr,
			"%s: --clone-server: not with --%s (clones have no API; a request names each clone's "
			"report_json)\n",
			me,
			api_sock ? "api-sock"
			: paused ? "paused"
				 : "report-json");
		return EXIT_USAGE;
	}
	if (mode != MODE_RESTORE &&
	    (snapshot_path || mem_path || paused || working_set || clone_sock || clock_realtime || vsock_uds)) {
		fprintf(stderr,
			"%s: --snapshot, --mem, --uffd, --working-set, --clock-realtime, --vsock-uds, --paused and "
			"--clone-server belong to 'brisk restore'\n",
			me);
		return EXIT_USAGE;
	}
	if (mode == MODE_API && !config_file && vm_option) {
		fprintf(stderr,
			"%s: --%s: with --api-sock the API configures the VM (or use 'brisk run ... --api-sock')\n", me,
			vm_option);
		return EXIT_USAGE;
	}
	if (config_file && vm_option) {
		fprintf(stderr, "%s: --%s: --config-file describes the VM; only process options may be added\n", me,
			vm_option);
		return EXIT_USAGE;
	}
	return 0;
}

/* The VM the parsed options describe, in `mode`: confined, its signals read, its report written. */
static int run_parsed(struct vm_config *cfg, enum run_mode mode)
{
	int ret, sig_fd, report_fd = -1;

	if ((ret = check_mode(mode)) || (ret = setup_seccomp(cfg)))
		return ret;
	if (report_json && (report_fd = open_report(cfg)) < 0)
		return report_fd == -EMFILE || report_fd == -ENFILE ? EXIT_HOST : EXIT_USAGE;
	sig_fd = cli_setup_signals();
	if (sig_fd < 0)
		log_warn("signalfd: %s; SIGINT/SIGTERM will not stop the VM cleanly", strerror(errno));
	atexit(serial8250_restore_tty);
	if (vm_signals_init() != 0)
		log_warn("cannot install the vCPU kick signal handler");
	ret = run_selected(sig_fd, cfg, mode == MODE_API);
	ret = finish_report(report_fd, ret);
	if (sig_fd >= 0)
		close(sig_fd);
	return ret;
}

/* `brisk run` (the options describe the VM), `brisk restore` (a snapshot). */
static int run_command(int argc, char **argv, enum run_mode mode)
{
	struct vm_config cfg;
	int ret = cli_parse_run_options(argc, argv, &cfg);

	if (ret < 0)
		cli_usage(stdout, mode == MODE_RESTORE ? "restore" : "run");
	ret = ret ? (ret < 0 ? 0 : ret) : run_parsed(&cfg, mode);
	config_release(&cfg);
	return ret;
}

int cmd_run(int argc, char **argv)
{
	return run_command(argc, argv, MODE_RUN);
}

/* Firecracker's mode: its command line (fc_cli.c) into the same run. */
int cmd_api(int argc, char **argv)
{
	struct vm_config cfg;
	struct fc_args fa;
	int ret = fc_cli_parse(argc, argv, &cfg, &fa);

	if (ret) {
		config_release(&cfg);
		return ret < 0 ? 0 : ret;
	}
	api_sock = fa.no_api ? NULL : fa.api_sock ? fa.api_sock : FC_DEFAULT_API_SOCK;
	config_file = fa.config_file;
	no_api = fa.no_api;
	api_max_payload = (size_t)fa.http_api_max_payload_size;
	if (fa.no_seccomp)
		seccomp_off = seccomp_given = true;
	ret = run_parsed(&cfg, MODE_API);
	config_release(&cfg);
	return ret;
}

int cmd_restore(int argc, char **argv)
{
	return run_command(argc, argv, MODE_RESTORE);
}
