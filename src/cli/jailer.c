/* jailer.c - `brisk-jailer ARGS` (or `brisk jailer ARGS`): Firecracker v1.7.0's jailer, src/jailer/src/main.rs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../api/api_impl.h"
#include "brisk/fc_jailer.h"

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif

static const char help_text[] =
    "required arguments:\n"
    "  --exec-file <exec-file>             File path to exec into.\n"
    "  --gid <gid>                         The group identifier the jailer switches to after exec.\n"
    "  --id <id>                           Jail ID.\n"
    "  --uid <uid>                         The user identifier the jailer switches to after exec.\n"
    "\n"
    "optional arguments:\n"
    "  --cgroup <cgroup>                   Cgroup and value to be set by the jailer. It must follow this "
    "format: <cgroup_file>=<value> (e.g cpu.shares=10). This argument can be used multiple times to add "
    "multiple cgroups.\n"
    "  --cgroup-version <cgroup-version>   Select the cgroup version used by the jailer. [default: 1]\n"
    "  --chroot-base-dir <chroot-base-dir> The base folder where chroot jails are located. [default: "
    "/srv/jailer]\n"
    "  --daemonize                         Daemonize the jailer before exec, by invoking setsid(), and "
    "redirecting the standard I/O file descriptors to /dev/null.\n"
    "  --netns <netns>                     Path to the network namespace this microVM should join.\n"
    "  --new-pid-ns                        Exec into a new PID namespace.\n"
    "  --parent-cgroup <parent-cgroup>     Parent cgroup in which the cgroup of this microvm will be placed.\n"
    "  --resource-limit <resource-limit>   Resource limit values to be set by the jailer. It must follow this "
    "format: <resource>=<value> (e.g no-file=1024). This argument can be used multiple times to add "
    "multiple resource limits. Current available resource values are:\n"
    "\t\tfsize: The maximum size in bytes for files created by the process.\n"
    "\t\tno-file: Specifies a value one greater than the maximum file descriptor number that can be opened "
    "by this process.\n"
    "  --version                           Print the binary version number.\n";

/*
 * sanitize_process: every inherited fd above 2 closed (close_range, else each fd up to the limit) and the
 * environment emptied, before the arguments are even read.
 */
static void sanitize(void)
{
	long max;

	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_UNSHARE) != 0) {
		max = sysconf(_SC_OPEN_MAX);
		for (long fd = 3; fd < (max > 0 && max < 1L << 20 ? max : 1L << 20); fd++)
			close((int)fd);
	}
	clearenv();
}

int cmd_jailer(int argc, char **argv)
{
	struct fcj_args a;
	struct fcj_env *e;
	char err[1024];

	sanitize();
	if (fcj_parse_args(argc, argv, &a, err, sizeof(err))) {
		fprintf(stderr, "Failed to parse arguments: %s\n", err);
		return FCJ_EXIT_ARGS;
	}
	if (a.help) {
		printf("Jailer v%s\n\n%s\n\nAny arguments after the -- separator will be supplied to the jailed "
		       "binary.\n\n",
		       API_FIRECRACKER_LEVEL, help_text);
		return 0;
	}
	if (a.version) {
		printf("Jailer v%s\n\n", API_FIRECRACKER_LEVEL);
		return 0;
	}
	e = malloc(sizeof(*e));
	if (!e) {
		fprintf(stderr, "Jailer error: out of memory\n");
		return FCJ_EXIT_JAILER;
	}
	if (fcj_env_new(&a, FCJ_PROC_MOUNTS, e, err, sizeof(err))) {
		fprintf(stderr, "Jailer error: %s\n", err);
		free(e);
		return FCJ_EXIT_JAILER;
	}
	fcj_run(e, err, sizeof(err)); /* returns only on failure, perhaps inside the chroot (no /proc there) */
	fprintf(stderr, "Jailer error: %s\n", err);
	fflush(NULL);
	_exit(FCJ_EXIT_JAILER); /* so nothing runs at exit where the host's files are gone (a sanitizer's leak check) */
}
