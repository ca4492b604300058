/* cli.h - the subcommands of the brisk command line. Each returns the process exit status. */
#ifndef BRISK_CLI_H
#define BRISK_CLI_H

#include <stdbool.h>
#include <stdio.h>

int cmd_run(int argc, char **argv);
/* `brisk --api-sock PATH [RUN-OPTIONS]`: Firecracker's mode, the VM configured through the API (docs/api.md). */
int cmd_api(int argc, char **argv);
/* `brisk restore --snapshot STATE --mem MEM`: a snapshot resumed in this process (docs/api.md). */
int cmd_restore(int argc, char **argv);
/* `brisk snapshot-editor edit-memory rebase --memory-path BASE --diff-path LAYER` (memlayer.h). */
int cmd_snapshot_editor(int argc, char **argv);
int cmd_help(int argc, char **argv);
int cmd_cpuid(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_trace(int argc, char **argv);

struct vm_config;
/*
 * The options of brisk run (argv[0] is skipped) into cfg, validated. Returns
 * 0, EXIT_USAGE (after a message), or -1 for --help (the caller prints its command's usage).
 */
int cli_parse_run_options(int argc, char **argv, struct vm_config *cfg);
/*
 * Firecracker's mode: its command line (fc_args.h) and brisk's process options into *fa and cfg (defaults
 * first, validated after). Returns 0; -1 when it printed what was asked (--help, --version,
 * --snapshot-version, --describe-snapshot) and the process ends with 0; or an exit status after a message.
 */
struct fc_args;
int fc_cli_parse(int argc, char **argv, struct vm_config *cfg, struct fc_args *fa);
/* Whether brisk run's option `c` is the process's (accepted in Firecracker's mode), and applies one. */
bool cli_is_process_option(int c);
int cli_apply_process_option(int c, const char *arg, struct vm_config *cfg);
/* The first line of --version: Firecracker's API level as its version checks read it, and brisk's. */
void cli_print_version(FILE *f);
/*
 * Blocks SIGINT/SIGTERM/SIGHUP/SIGXCPU in every thread and returns a
 * signalfd for them (or -1); SIGPIPE and SIGXFSZ are counted and survived.
 */
int cli_setup_signals(void);
/*
 * vm_create, then, on failure, its message logged and the exit status its
 * kind maps to (docs/exit-codes.md: usage 2, host 4, image 6). Returns 0
 * and *vm, or that status.
 */
struct vm;
struct vm_config;
int cli_vm_create(const struct vm_config *cfg, struct vm **vm);
/* A failed build's message logged; the exit status its kind maps to (usage 2, image 6, else host 4). */
struct vm_error;
int cli_vm_failed(const struct vm_error *e);
/* cli_vm_create, or the restore of the snapshot the parsed options name (--snapshot, --mem): brisk profile's. */
int cli_vm_build(const struct vm_config *cfg, struct vm **vm);
int cmd_bench(int argc, char **argv);
int cmd_compare(int argc, char **argv);
/* brisk acpi --dump DIR [RUN-OPTIONS]: the ACPI tables of that machine, one file each (src/cli/acpi.c). */
int cmd_acpi(int argc, char **argv);
/* brisk jail --id ID --uid U --gid G [...] -- RUN-ARGS: brisk run confined (src/cli/jail.c, docs/security.md). */
int cmd_jail(int argc, char **argv);

/* Prints the usage of `command` (NULL: the overview). Returns -1 if unknown. */
int cli_usage(FILE *f, const char *command);

#endif
