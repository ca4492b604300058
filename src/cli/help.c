/* help.c - `brisk help [COMMAND]` and the usage texts of every subcommand. */
#include <string.h>

#include "brisk/cli.h"
#include "brisk/exitcode.h"
#include "brisk/kernel.h"

static const char overview[] = "usage: brisk <command> [options]\n"
			       "\n"
			       "brisk boots Linux-style guests directly on KVM, as fast as the machine allows,\n"
			       "and shows where boot time goes.\n"
			       "\n"
			       "commands:\n"
			       "  run        boot a guest (the built-in demo guest when --kernel is not given)\n"
			       "  cpuid      show the CPUID table a vCPU would see, without booting\n"
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
    "  -k, --kernel PATH      bzImage, ELF vmlinux (PVH note or 64-bit entry) or PVH ELF;\n"
    "                         detected by content (default: the built-in demo guest)\n"
    "  -c, --cmdline STR      kernel command line; replaces the default, which is\n"
    "                         \"" KERNEL_LINUX_CMDLINE "\"\n"
    "                         for a Linux kernel and \"" KERNEL_OTHER_CMDLINE "\" otherwise\n"
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

static const char cpuid_usage[] =
    "usage: brisk cpuid [options]\n"
    "\n"
    "Print the CPUID table (and boot MSRs) vCPU K would get, without booting.\n"
    "\n"
    "  -p, --cpus N           number of vCPUs (default 1)\n"
    "      --topology sockets=S,cores=C,threads=T\n"
    "                         CPU topology (product must equal --cpus)\n"
    "      --vcpu K           the vCPU to show, 0..N-1 (default 0)\n"
    "      --cpu-template NAME|FILE.json\n"
    "                         host (default), baseline, or a JSON template\n"
    "      --json             JSON instead of the text table\n"
    "      --diff-host        only what differs from this host's own CPUID, and why\n"
    "      --supported        KVM's supported table and MSR list, unmodified (a dump)\n"
    "      --supported-from FILE\n"
    "                         read KVM's table from a recorded dump instead of /dev/kvm\n"
    "      --host             this host's own CPUID instruction output, as a dump\n"
    "  -h, --help             this text\n"
    "\n"
    "Exit status: 0, 2 usage or template error, 4 no usable /dev/kvm. See docs/cpuid.md.\n";

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
	if (strcmp(command, "cpuid") == 0) {
		fputs(cpuid_usage, f);
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
