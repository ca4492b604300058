/* run_opts.c - the getopt_long table of `brisk run` (include/brisk/run_opts.h). */
#include <stddef.h>

#include "brisk/devkinds.h"
#include "brisk/run_opts.h"

/* The options before the device kinds' and after them, in `brisk help run`'s order. */
static const struct option head[] = {
    {"kernel", required_argument, NULL, 'k'},
    {"cmdline", required_argument, NULL, 'c'},
    {"initrd", required_argument, NULL, 'i'},
    {"topology", required_argument, NULL, OPT_TOPOLOGY},
    {"cpu-template", required_argument, NULL, OPT_CPU_TEMPLATE},
    {"cpus", required_argument, NULL, 'p'},
    {"memory", required_argument, NULL, 'm'},
    {"serial", required_argument, NULL, OPT_SERIAL},
    {"hugepages", no_argument, NULL, OPT_HUGEPAGES},
    {"hugetlbfs", no_argument, NULL, OPT_HUGETLBFS},
    {"track-dirty-pages", no_argument, NULL, OPT_TRACK_DIRTY},
    {"prefault", no_argument, NULL, OPT_PREFAULT},
    {"timeline", no_argument, NULL, OPT_TIMELINE},
    {"boot-timer", no_argument, NULL, OPT_BOOT_TIMER},
    {"report-json", required_argument, NULL, OPT_REPORT_JSON},
};

static const struct option tail[] = {
    {"acpi", required_argument, NULL, OPT_ACPI},
    {"irqchip", required_argument, NULL, OPT_IRQCHIP},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"api-sock", required_argument, NULL, OPT_API_SOCK},
    {"config-file", required_argument, NULL, OPT_CONFIG_FILE},
    {"no-api", no_argument, NULL, OPT_NO_API},
    {"snapshot", required_argument, NULL, OPT_SNAPSHOT},
    {"mem", required_argument, NULL, OPT_MEM},
    {"paused", no_argument, NULL, OPT_PAUSED},
    {"uffd", required_argument, NULL, OPT_UFFD},
    {"working-set", required_argument, NULL, OPT_WORKING_SET},
    {"clock-realtime", no_argument, NULL, OPT_CLOCK_REALTIME},
    {"vsock-uds", required_argument, NULL, OPT_VSOCK_UDS},
    {"clone-server", required_argument, NULL, OPT_CLONE_SERVER},
    {"clone-pool", required_argument, NULL, OPT_CLONE_POOL},
    {"seccomp", required_argument, NULL, OPT_SECCOMP},
    {"help", no_argument, NULL, 'h'},
};

#define NR(a) (sizeof(a) / sizeof((a)[0]))

const struct option *run_options(void)
{
	static struct option all[NR(head) + DEVKINDS_MAX + NR(tail) + 1];
	size_t n = 0;

	if (all[0].name)
		return all;
	for (size_t i = 0; i < NR(head); i++)
		all[n++] = head[i];
	for (unsigned k = 0; k < devkinds_nr; k++)
		all[n++] = (struct option){devkinds[k].option, devkinds[k].has_arg, NULL, DEVKIND_OPT_BASE + (int)k};
	for (size_t i = 0; i < NR(tail); i++)
		all[n++] = tail[i];
	return all;
}
