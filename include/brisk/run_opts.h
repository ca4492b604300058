/*
 * run_opts.h - the options of `brisk run` (and `brisk restore`, `brisk --api-sock`, the RUN-OPTIONS of
 * profile, bench and acpi): one getopt_long table, shared by the command (src/cli/run.c) and by
 * `brisk jail`, which reads RUN-ARGS with it (src/jail/jail_args.c).
 */
#ifndef BRISK_RUN_OPTS_H
#define BRISK_RUN_OPTS_H

#include <getopt.h>

/* getopt_long's short options of brisk run. */
#define RUN_SHORT_OPTS "k:c:i:p:m:h"

/* The values of the long options without a short form; a device kind's option is DEVKIND_OPT_BASE + its row
 * (devkinds.h). */
enum run_opt {
	OPT_SERIAL = 256,
	OPT_HUGEPAGES,
	OPT_PREFAULT,
	OPT_TIMELINE,
	OPT_LOG_LEVEL,
	OPT_TOPOLOGY,
	OPT_CPU_TEMPLATE,
	OPT_REPORT_JSON,
	OPT_ACPI,
	OPT_API_SOCK,
	OPT_CONFIG_FILE,
	OPT_NO_API,
	OPT_SNAPSHOT,
	OPT_MEM,
	OPT_PAUSED,
	OPT_SECCOMP,
	OPT_BOOT_TIMER,
	OPT_IRQCHIP,
	OPT_UFFD,
	OPT_WORKING_SET,
	OPT_HUGETLBFS,
	OPT_TRACK_DIRTY,
	OPT_CLONE_SERVER,
	OPT_CLONE_POOL,
	OPT_CLOCK_REALTIME,
	OPT_VSOCK_UDS
};

/*
 * The long options, ending with a zero entry: the fixed ones and one per device kind (devkinds.h), built
 * on the first call (main thread: the option parsers of run and jail), the same array every call.
 */
const struct option *run_options(void);

#endif
