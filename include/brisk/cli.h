/* cli.h - the subcommands of the brisk command line. Each returns the process exit status. */
#ifndef BRISK_CLI_H
#define BRISK_CLI_H

#include <stdio.h>

int cmd_run(int argc, char **argv);
int cmd_help(int argc, char **argv);
int cmd_cpuid(int argc, char **argv);

/* Prints the usage of `command` (NULL: the overview). Returns -1 if unknown. */
int cli_usage(FILE *f, const char *command);

#endif
