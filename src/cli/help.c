/* help.c - `brisk help [COMMAND]` and the usage texts of every subcommand. */
#include <string.h>

#include "brisk/cli.h"
#include "brisk/exitcode.h"

static const char overview[] = "usage: brisk <command> [options]\n"
			       "\n"
			       "brisk boots Linux-style guests directly on KVM, as fast as the machine allows,\n"
			       "and shows where boot time goes.\n"
			       "\n"
			       "commands:\n"
			       "  run        boot a guest (the built-in demo guest when --kernel is not given)\n"
			       "  help       show help for a command\n"
			       "\n"
			       "options:\n"
			       "  --version  print the version\n"
			       "  --help     this text\n"
			       "\n"
			       "See docs/cli.md and docs/exit-codes.md.\n";

static const char run_usage[] =
    "usage: brisk run [options]\n"
    "\n"
    "Boot a guest and run it until it powers off, resets or is stopped.\n"
    "\n"
    "  -k, --kernel PATH      PVH ELF kernel (default: the built-in demo guest)\n"
    "  -c, --cmdline STR      kernel command line (default: \"console=ttyS0\")\n"
    "  -i, --initrd PATH      initial ramdisk\n"
    "  -p, --cpus N           number of vCPUs, 1..KVM's limit (default 1)\n"
    "      --topology sockets=S,cores=C,threads=T\n"
    "                         CPU topology the guest sees (product must equal --cpus)\n"
    "      --cpu-template NAME|FILE.json\n"
    "                         guest CPUID template: host (default), baseline, or a file\n"
    "  -m, --memory SIZE      guest RAM, e.g. 128M, 2G; a bare number is MiB (default 128M)\n"
    "      --serial MODE      stdio (default), file:PATH, or none\n"
    "      --hugepages        back guest RAM with transparent huge pages\n"
    "      --prefault         populate all guest RAM before boot\n"
    "      --timeline         after the VM ends, print the boot timeline, exit counts\n"
    "                         and KVM ioctl counts to stdout\n"
    "      --log-level LEVEL  error, warn (default), info or debug; logs go to stderr\n"
    "  -h, --help             this text\n"
    "\n"
    "The console: host stdin is forwarded to the guest's COM1; Ctrl-A x stops the VM.\n"
    "Exit status: the guest's (0 on power-off/reset, odd values from the debug-exit\n"
    "port), or brisk's own even codes: 2 usage, 4 host, 6 image, 8 triple fault,\n"
    "10 KVM internal error, 12 entry failure, 14 unknown exit, 16 stopped.\n";

int cli_usage(FILE *f, const char *command)
{
	if (!command) {
		fputs(overview, f);
		return 0;
	}
	if (strcmp(command, "run") == 0) {
		fputs(run_usage, f);
		return 0;
	}
	if (strcmp(command, "help") == 0) {
		fputs("usage: brisk help [COMMAND]\n", f);
		return 0;
	}
	return -1;
}

int cmd_help(int argc, char **argv)
{
	const char *command = argc > 1 ? argv[1] : NULL;

	if (cli_usage(stdout, command)) {
		fprintf(stderr, "brisk: no such command '%s'; try 'brisk help'\n", command);
		return EXIT_USAGE;
	}
	return 0;
}
