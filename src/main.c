/* main.c - brisk's entry point: dispatch to a subcommand; the only place the process exits. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "brisk/cli.h"
#include "brisk/clone.h"
#include "brisk/exitcode.h"
#include "brisk/fc_jailer.h"
#include "brisk/log.h"
#include "brisk/timeline.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
    {"run", cmd_run},	  {"cpuid", cmd_cpuid},	    {"profile", cmd_profile}, {"trace", cmd_trace},
    {"bench", cmd_bench}, {"compare", cmd_compare}, {"acpi", cmd_acpi},	      {"restore", cmd_restore},
    {"jail", cmd_jail},	  {"jailer", cmd_jailer},   {"help", cmd_help},	      {"snapshot-editor", cmd_snapshot_editor},
    {"clone", cmd_clone},
};

/*
 * fds 0-2 must be open before brisk creates anything: a closed stdin would
 * otherwise be reused by the next fd opened (the signalfd, say) and read as
 * console input by the serial thread. Closed ones get /dev/null.
 */
static void ensure_std_fds(void)
{
	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		/* open() returns the lowest free fd: this one, since the lower ones are open. */
		if (open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd)
			_exit(EXIT_HOST);
	}
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

int main(int argc, char **argv)
{
	/*
	 * One malloc arena for every thread. glibc gives a thread its own arena at its first allocation: a 64 MiB
	 * reservation (mmap, two munmaps, mprotect) and two page faults, which the vCPU thread paid between the
	 * CPUID template's publication and its KVM_SET_CPUID2, on the way to the guest's first instruction.
	 * brisk's threads allocate little and rarely at once; sharing the main arena costs them nothing measurable.
	 */
	mallopt(M_ARENA_MAX, 1);
	timeline_init();
	ensure_std_fds();
	/* build/brisk-jailer (a link to brisk): Firecracker's jailer, before brisk opens anything it would close. */
	if (strstr(base_name(argv[0]), "jailer"))
		return cmd_jailer(argc, argv);
	log_init_nonblocking();
	/* Started as `firecracker` (a link to brisk under Firecracker's name): its command line, whatever it is. */
	if (strcmp(base_name(argv[0]), "firecracker") == 0)
		return cmd_api(argc, argv);
	if (argc < 2) {
		cli_usage(stderr, NULL);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
		cli_print_version(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		cli_usage(stdout, NULL);
		return 0;
	}
	/* Firecracker's command line: a flag first (`brisk --id X --api-sock PATH ...`); it names a bad one. */
	if (strncmp(argv[1], "--", 2) == 0)
		return cmd_api(argc, argv);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "brisk: unknown command '%s'; try 'brisk help'\n", argv[1]);
	return EXIT_USAGE;
}
