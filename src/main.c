/* main.c - brisk's entry point: dispatch to a subcommand; the only place the process exits. */
#include <stdio.h>
#include <string.h>

#include "brisk/cli.h"
#include "brisk/exitcode.h"
#include "brisk/timeline.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
    {"run", cmd_run},	  {"cpuid", cmd_cpuid},	    {"profile", cmd_profile}, {"trace", cmd_trace},
    {"bench", cmd_bench}, {"compare", cmd_compare}, {"help", cmd_help},
};

int main(int argc, char **argv)
{
	timeline_init();
	if (argc < 2) {
		cli_usage(stderr, NULL);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
		printf("brisk %s\n", BRISK_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		cli_usage(stdout, NULL);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "brisk: unknown command '%s'; try 'brisk help'\n", argv[1]);
	return EXIT_USAGE;
}
