/* run_opts.c - the getopt_long table of `brisk run` (include/brisk/run_opts.h). */
#include <stddef.h>

#include "brisk/run_opts.h"

const struct option run_options[] = {
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
    {"api-sock", required_argument, NULL, OPT_API_SOCK},
    {"config-file", required_argument, NULL, OPT_CONFIG_FILE},
    {"no-api", no_argument, NULL, OPT_NO_API},
    {"snapshot", required_argument, NULL, OPT_SNAPSHOT},
    {"mem", required_argument, NULL, OPT_MEM},
    {"paused", no_argument, NULL, OPT_PAUSED},
    {"seccomp", required_argument, NULL, OPT_SECCOMP},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};
