/* help.c - `brisk help [COMMAND]` and the usage texts of every subcommand. */
#include <string.h>

#include "brisk/cli.h"
#include "brisk/devkinds.h"
#include "brisk/exitcode.h"
#include "brisk/jail.h"
#include "brisk/kernel.h"

static const char overview[] =
    "usage: brisk <command> [options]\n"
    "\n"
    "brisk boots Linux-style guests directly on KVM, as fast as the machine allows,\n"
    "and shows where boot time goes.\n"
    "\n"
    "commands:\n"
    "  run        boot a guest (the built-in demo guest when --kernel is not given)\n"
    "  cpuid      show the CPUID table a vCPU would see, without booting\n"
    "  profile    boot once with every instrument on; report where boot time went\n"
    "  trace      in-kernel exit accounting of another KVM process (QEMU, ...)\n"
    "  bench      boot N times; per phase median, p95, MAD, 95% CI of the median\n"
    "  compare    boot two configurations interleaved; per phase ratio, U test, verdict\n"
    "  acpi       write the ACPI tables a VM would get, one file each, without booting\n"
    "  restore    resume a snapshot (taken through the API) in this process\n"
    "  clone      one VM from a clone server (brisk restore --clone-server) on this terminal\n"
    "  snapshot-editor  merge a Diff snapshot's memory onto its base (Firecracker's command)\n"
    "  jail       run brisk in a chroot, new namespaces and cgroup, as an unprivileged user\n"
    "  jailer     Firecracker's jailer (also as build/brisk-jailer; 'brisk jailer --help')\n"
    "  help       show help for a command\n"
    "\n"
    "options:\n"
    "  --api-sock PATH  Firecracker-compatible API on a Unix socket: configure, start,\n"
    "             pause, snapshot (see 'brisk help api', docs/api.md)\n"
    "  --version  print the version\n"
    "  --help     this text\n"
    "\n"
    "Long options are spelled in full in every command (--kernel, never --kern).\n"
    "See docs/cli.md and docs/exit-codes.md.\n";

/* Up to the device kinds' options. */
static const char run_usage_head[] =
    "usage: brisk run [options]\n"
    "\n"
    "Boot a guest and run it until it powers off, resets or is stopped.\n"
    "\n"
    "  -k, --kernel PATH      bzImage, ELF vmlinux (PVH note or 64-bit entry) or PVH ELF;\n"
    "                         detected by content (default: the built-in demo guest)\n"
    "  -c, --cmdline STR      kernel command line; replaces the default, which is\n"
    "                         \"" KERNEL_LINUX_CMDLINE " " KERNEL_LINUX_ACPI "\"\n"
    "                         for a Linux kernel (with --acpi off \"" KERNEL_LINUX_NOACPI "\"\n"
    "                         in place of \"" KERNEL_LINUX_ACPI "\")\n"
    "                         and \"" KERNEL_OTHER_CMDLINE "\" otherwise\n"
    "  -i, --initrd PATH      initial ramdisk\n"
    "  -p, --cpus N           number of vCPUs, 1..KVM's limit (default 1)\n"
    "      --topology sockets=S,cores=C,threads=T\n"
    "                         CPU topology the guest sees (product must equal --cpus)\n"
    "      --cpu-template NAME|FILE.json\n"
    "                         guest CPUID template: host (default), baseline, Firecracker's\n"
    "                         C3, T2, T2S, T2CL (Intel) or T2A (AMD), or a file\n"
    "  -m, --memory SIZE      guest RAM, e.g. 128M, 2G; a bare number is MiB (default 128M)\n"
    "      --serial MODE      stdio (default), file:PATH, or none\n";

/* After the device kinds' options (devkinds.h: each row's help lines, in table order). */
static const char run_usage_tail[] =
    "      --acpi on|off      ACPI tables (default on): CPUs, interrupts, devices, power off\n"
    "      --irqchip split|kernel\n"
    "                         split (default): the LAPICs in KVM, the I/O APIC in brisk, no PIC or\n"
    "                         PIT; kernel: KVM's PIC, I/O APIC and PIT (a guest that needs a PIT)\n"
    "                         and reset; off: MP table and virtio_mmio.device= words only\n"
    "      --hugepages        back guest RAM with transparent huge pages\n"
    "      --hugetlbfs        back guest RAM with 2 MiB hugetlbfs pages (--memory in 2 MiB\n"
    "                         steps; reserved from /proc/sys/vm/nr_hugepages at start)\n"
    "      --track-dirty-pages  log the pages the guest writes, so that PUT /snapshot/create\n"
    "                         can take Diff snapshots (docs/api.md)\n"
    "      --prefault         populate all guest RAM before boot\n"
    "      --timeline         after the VM ends, print the boot timeline, exit counts\n"
    "                         and KVM ioctl counts to stdout\n"
    "      --boot-timer       Firecracker's boot timer: the guest's byte 123 at 0xd0000000\n"
    "                         logs \"Guest-boot-time = ...\" at info (docs/devices.md)\n"
    "      --report-json FILE after the VM ends, write the boot timeline and exit status\n"
    "                         as JSON (\"brisk-timeline/1\", docs/profiler.md)\n"
    "      --log-level LEVEL  error, warn (default), info or debug; logs go to stderr\n"
    "      --api-sock PATH    also serve the Firecracker-compatible API on PATH (docs/api.md):\n"
    "                         pause, resume, snapshot, metrics of the running VM\n"
    "      --config-file FILE the VM from a Firecracker configuration file instead of the\n"
    "                         VM options above (process options still apply)\n"
    "      --no-api           with --config-file: no API socket (as Firecracker's --no-api)\n"
    "      --seccomp on|off   per-thread seccomp filters (default on; off only to debug):\n"
    "                         a denied system call ends brisk with status 18, naming it\n"
    "                         (without it, BRISK_SECCOMP=off in the environment means off)\n"
    "  -h, --help             this text\n"
    "\n"
    "The console: host stdin goes to the guest's COM1 (hvc0 with --console virtio); Ctrl-A x stops the VM.\n"
    "Exit status: the guest's (0 on power-off/reset, odd values from the debug-exit\n"
    "port), or brisk's own even codes: 2 usage, 4 host, 6 image, 8 triple fault,\n"
    "10 KVM internal error, 12 entry failure, 14 unknown exit, 16 stopped, 18 seccomp.\n";

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
    "                         host (default), baseline, C3, T2, T2S, T2CL, T2A, or a JSON template\n"
    "      --json             JSON instead of the text table\n"
    "      --diff-host        only what differs from this host's own CPUID, and why\n"
    "      --supported        KVM's supported table and MSR list, unmodified (a dump)\n"
    "      --supported-from FILE\n"
    "                         read KVM's table from a recorded dump instead of /dev/kvm\n"
    "      --host             this host's own CPUID instruction output, as a dump\n"
    "  -h, --help             this text\n"
    "\n"
    "Exit status: 0, 2 usage or template error, 4 no usable /dev/kvm. See docs/cpuid.md.\n";

static const char profile_usage[] =
    "usage: brisk profile [report options] RUN-OPTIONS...\n"
    "\n"
    "Boot once with full instrumentation and print a report: timeline, userspace\n"
    "exits by reason/port/address, KVM statistics, in-kernel exits from the kvm\n"
    "tracepoints attributed to guest RIPs and symbols, redundant CPUID/MSR work\n"
    "by call site, findings, KVM ioctls. Tracing needs root and tracefs; without\n"
    "them the rest is reported.\n"
    "\n"
    "      --json FILE          the report as JSON (schema brisk-profile/1)\n"
    "      --trace-out FILE     Chrome trace-event JSON (opens in Perfetto)\n"
    "      --svg FILE           a self-contained SVG timeline chart\n"
    "      --symbols FILE       System.map or vmlinux (default: an ELF kernel's own\n"
    "                           symtab, else the guest kernel's kallsyms from its memory)\n"
    "      --user-symbols FILE  an ELF program of the guest (static, non-PIE): names\n"
    "                           exits in the guest's user half\n"
    "      --no-callers         never patch guest code for the caller probes\n"
    "      --bucket-us N        time bucket of the exit-rate series (default 1000)\n"
    "      --trace-buffer-kb N  trace ring buffer per CPU (default 16384)\n"
    "      --no-trace           skip the kvm tracepoints\n"
    "RUN-OPTIONS are those of brisk run. See docs/profiler.md.\n";

static const char trace_usage[] = "usage: brisk trace [--json FILE] [--symbols FILE] (--pid PID | -- COMMAND ARGS...)\n"
				  "\n"
				  "In-kernel exit accounting and redundant-work detection (as brisk profile)\n"
				  "for another KVM process and all its threads, until it exits (--pid: or until\n"
				  "Ctrl-C). Needs root and tracefs. See docs/profiler.md.\n"
				  "\n"
				  "      --json FILE          the report as JSON (schema brisk-profile/1)\n"
				  "      --symbols FILE       System.map or vmlinux of the traced guest (default:\n"
				  "                           its kallsyms, read from the process's memory)\n"
				  "      --user-symbols FILE  an ELF program of the guest (static, non-PIE)\n"
				  "      --bucket-us N        time bucket of the exit-rate series (default 1000)\n"
				  "      --trace-buffer-kb N  trace ring buffer per CPU (default 16384)\n"
				  "\n"
				  "SIGINT/SIGTERM/SIGHUP are passed on to COMMAND. Exit status: COMMAND's; 128+N\n"
				  "when signal N killed it; 127 not found, 126 not executable; 2 usage; 4 when\n"
				  "tracing itself failed. See docs/cli.md.\n";

static const char bench_usage[] = "usage: brisk bench -n N [options] [--] RUN-OPTIONS...\n"
				  "\n"
				  "Boot `brisk run RUN-OPTIONS` N times in a row (child processes; --serial none\n"
				  "unless RUN-OPTIONS has --serial) and print, per timeline phase and boot marker,\n"
				  "n, median, p95, MAD, the 95% bootstrap CI of the median, min and max (us since\n"
				  "exec), plus \"wall (parent)\": fork to reaped, as the parent measured it.\n"
				  "\n"
				  "  -n, --runs N           boots measured, 1..100000 (required)\n"
				  "      --warmup W         boots run first and not counted (default 1)\n"
				  "      --expect-status S  the status a good boot exits with (default: the first\n"
				  "                         boot's); other boots are reported and excluded\n"
				  "      --json FILE        also write the results as JSON (\"brisk-bench/1\")\n"
				  "      --resamples B      bootstrap resamples (default 2000)\n"
				  "      --seed S           bootstrap seed (default 1)\n"
				  "  -h, --help             this text\n"
				  "\n"
				  "bench options come first; the first other argument (or the one after --)\n"
				  "starts RUN-OPTIONS. Exit status: 0; 2 usage (or brisk run rejected\n"
				  "RUN-OPTIONS); 4 when a boot failed or could not be started; 16 stopped by\n"
				  "SIGINT/SIGTERM/SIGHUP (the boot running is stopped, nothing is left behind).\n"
				  "See docs/profiler.md.\n";

static const char compare_usage[] = "usage: brisk compare -n N --a 'RUN-OPTIONS' --b 'RUN-OPTIONS' [options]\n"
				    "\n"
				    "Boot configurations A and B N times each, interleaved (A B A B ...), and print\n"
				    "per phase the medians, the ratio B/A with its bootstrap CI, the two-sided\n"
				    "Mann-Whitney U p-value and a verdict: B faster, B slower or no significant\n"
				    "difference (p < alpha and the CI on one side of 1). Option strings are split\n"
				    "into words like a shell (quotes, backslash), without expansions.\n"
				    "\n"
				    "  -n, --runs N           pairs measured, 1..100000 (required)\n"
				    "      --a OPTIONS        brisk run options of A (required)\n"
				    "      --b OPTIONS        brisk run options of B (required)\n"
				    "      --alpha A          significance level, in (0, 0.5) (default 0.05);\n"
				    "                         the ratio CI is at level 1 - A\n"
				    "      --warmup W         pairs run first and not counted (default 1)\n"
				    "      --shuffle          random order within each pair (seeded by --seed)\n"
				    "      --expect-status S  the status a good boot exits with (default: each\n"
				    "                         side's first boot's); other boots are excluded\n"
				    "      --json FILE        also write the results as JSON (\"brisk-compare/1\")\n"
				    "      --resamples B      bootstrap resamples (default 2000)\n"
				    "      --seed S           bootstrap and shuffle seed (default 1)\n"
				    "  -h, --help             this text\n"
				    "\n"
				    "Exit status: 0; 2 usage (or brisk run rejected the options); 4 when a boot\n"
				    "failed or could not be started; 16 stopped by SIGINT/SIGTERM/SIGHUP (the boot\n"
				    "running is stopped, nothing is left behind). See docs/profiler.md.\n";

static const char api_usage[] =
    "usage: brisk [FIRECRACKER-FLAGS] [PROCESS-OPTIONS]   (or a link to brisk named firecracker)\n"
    "\n"
    "Firecracker's way of running a VM, with Firecracker v1.7.0's command line: brisk listens on the\n"
    "Unix socket --api-sock (default /run/firecracker.socket) and the VM is configured, started,\n"
    "paused and snapshotted with HTTP requests (Firecracker's API), or comes whole from --config-file.\n"
    "\n"
    "FIRECRACKER-FLAGS (each --NAME VALUE, spelled in full, at most once; -- ends them):\n"
    "  --api-sock PATH  --id ID  --config-file FILE  --no-api  --no-seccomp  --seccomp-filter FILE\n"
    "  --start-time-us N  --start-time-cpu-us N  --parent-cpu-time-us N  --log-path PATH  --level L\n"
    "  --module M  --show-level  --show-log-origin  --metrics-path PATH  --boot-timer\n"
    "  --http-api-max-payload-size N  --mmds-size-limit N  --metadata FILE  --snapshot-version\n"
    "  --describe-snapshot FILE  --version  --help\n"
    "PROCESS-OPTIONS: --serial, --console, --acpi, --irqchip, --timeline, --report-json, --log-level,\n"
    "--seccomp\n"
    "(see 'brisk help run'). The socket is removed when brisk exits. docs/cli.md has each flag's\n"
    "meaning, docs/api.md every endpoint.\n";

static const char restore_usage[] =
    "usage: brisk restore --snapshot STATE (--mem MEM | --uffd SOCK) [--working-set record=MS|wait|off]\n"
    "                     [--clock-realtime] [--vsock-uds PATH] [--paused] [--api-sock PATH]\n"
    "                     [PROCESS-OPTIONS]\n"
    "\n"
    "Resume a snapshot taken with PUT /snapshot/create in this new process: the VM's configuration\n"
    "comes from STATE, guest memory is mapped from MEM (privately: pages load on first touch, the\n"
    "file never changes). A corrupt, truncated or foreign snapshot, or a memory file of the wrong\n"
    "size, is refused before anything runs (exit status 2).\n"
    "\n"
    "      --snapshot STATE   the state file (snapshot_path)\n"
    "      --mem MEM          the guest memory file (mem_file_path)\n"
    "      --uffd SOCK        guest memory from a page-fault handler listening on SOCK\n"
    "                         (Firecracker's Uffd backend and handshake)\n"
    "      --working-set record=MS|wait|off\n"
    "                         record=MS: record the pages the guest touches in its first MS ms (or\n"
    "                         until its boot marker) into MEM.ws; later restores fetch them, mapped\n"
    "                         by a thread while the vCPUs run (wait: before they run); off: lazily\n"
    "      --paused           stay paused until PATCH /vm {\"state\": \"Resumed\"} (needs --api-sock)\n"
    "      --api-sock PATH    serve the Firecracker-compatible API beside the VM\n"
    "      --track-dirty-pages  log the pages the guest writes from now on, for Diff snapshots\n"
    "                         (the API's enable_diff_snapshots)\n"
    "      --clock-realtime   advance the guest's kvmclock by the wall-clock time since the snapshot\n"
    "                         (the API's clock_realtime; default: its clocks resume where they stopped)\n"
    "      --vsock-uds PATH   the snapshot's vsock device listens on PATH, not where it did (the API's\n"
    "                         vsock_override; with --clone-server, where a request names none)\n"
    "      --clone-server SOCK  keep the snapshot prepared (read, checked, memory mapped, /dev/kvm\n"
    "                         open) and fork one VM per request on the Unix socket SOCK, each\n"
    "                         confined as brisk restore's ('brisk help clone', docs/cli.md); ends\n"
    "                         on SIGTERM, stopping its clones (exit status 16)\n"
    "      --clone-pool N     with --clone-server: keep N clones (0-64, default 0) built ahead\n"
    "                         (KVM VM, vCPUs, devices), so a request only restores the state\n"
    "A Diff snapshot's MEM holds only the pages it changed: merge it onto its base first\n"
    "('brisk help snapshot-editor') and give the merged file here.\n"
    "PROCESS-OPTIONS: --serial, --timeline, --report-json, --log-level, --seccomp (see 'brisk help run');\n"
    "the snapshot holds the devices, so every device option (--console too) is refused (exit status 2).\n";

static const char clone_usage[] =
    "usage: brisk clone --server SOCK [--vsock-uds PATH] [--report-json FILE] [--log-level LEVEL]\n"
    "\n"
    "Ask the clone server at SOCK (brisk restore --snapshot STATE --mem MEM --clone-server SOCK) for\n"
    "one VM restored from its snapshot, with this process's stdin, stdout and stderr as its console\n"
    "and log. The exit status is the clone's (docs/exit-codes.md); SIGINT or SIGTERM stops the clone\n"
    "(16). Each clone gets a new VM Generation ID; its memory writes are its own.\n"
    "\n"
    "      --server SOCK        the clone server's socket\n"
    "      --vsock-uds PATH     the clone's vsock device listens on PATH (its guest's connections go to\n"
    "                           PATH_PORT), not on the snapshot's path: many vsock clones at once\n"
    "      --report-json FILE   the clone's timeline as JSON (brisk restore's --report-json)\n"
    "      --log-level LEVEL    this command's messages: error, warn, info or debug\n";

static const char snapshot_editor_usage[] =
    "usage: brisk snapshot-editor edit-memory rebase --memory-path BASE --diff-path LAYER\n"
    "\n"
    "Firecracker's snapshot-editor command: writes every page a Diff snapshot's memory file LAYER\n"
    "holds (its data; its holes are the pages it left to its base) into BASE, in place. Merge the\n"
    "layers onto the base in the order they were taken, then load the last layer's state file with\n"
    "BASE. Refused, BASE untouched: files of different sizes, BASE mapped by a running VM restored\n"
    "from it. A merge that stopped half way can be run again. Exit status 0, 2 (refused), 4 (I/O).\n";

static const char acpi_usage[] =
    "usage: brisk acpi --dump DIR [RUN-OPTIONS...]\n"
    "\n"
    "Write the ACPI tables (hardware-reduced, ACPI 6.3) a VM started with the same\n"
    "brisk run options would get, without booting and without /dev/kvm: DIR/rsdp.dat,\n"
    "xsdt.dat, facp.dat, apic.dat and dsdt.dat, as the guest sees them at 0xe0000.\n"
    "The options that shape them: --cpus, --topology (APIC IDs), --disk, --net, --vsock,\n"
    "--rng and --console virtio (one virtio-mmio device each, in that order); the others are\n"
    "checked and ignored (--acpi off, which gives no tables, is refused). DIR is\n"
    "created when missing. Check the tables with\n"
    "'iasl -d DIR/*.dat' (Debian: acpica-tools).\n"
    "\n"
    "      --dump DIR         the directory the tables go to (required)\n"
    "  -h, --help             this text\n"
    "\n"
    "Exit status: 0; 2 usage (bad options, DIR not writable); 4 host (a write\n"
    "failed). See docs/acpi.md.\n";

static const char jail_usage[] =
    "usage: brisk jail --id ID --uid U --gid G [options] -- RUN-ARGS...\n"
    "\n"
    "Run brisk confined, as Firecracker's jailer does: a chroot at BASE/brisk/ID/root holding\n"
    "only a copy of brisk and its helpers (with the shared libraries they load), the files\n"
    "RUN-ARGS name and /dev/kvm, /dev/net/tun, /dev/urandom, /dev/null; new mount and PID\n"
    "namespaces (brisk is PID 1); a cgroup v2 of its own; rlimits; every fd above 2 closed,\n"
    "every capability dropped, no_new_privs; then /brisk RUN-ARGS as U:G. Needs root.\n"
    "\n"
    "      --id ID            the VM's name: 1..64 of A-Z a-z 0-9 -; BASE/brisk/ID must not exist\n"
    "      --uid U, --gid G   the user and group brisk runs as (0 is allowed, with a warning)\n"
    "      --chroot-base DIR  BASE (default " JAIL_DEFAULT_BASE "): root's, not world-writable unless sticky\n"
    "      --netns PATH       join this network namespace (e.g. /var/run/netns/NAME)\n"
    "      --cgroup KEY=VALUE write VALUE to KEY of <cgroup2>/brisk/ID (cpu.max, memory.max,\n"
    "                         pids.max, ...; repeatable)\n"
    "      --resource-limit no-file=N|fsize=N\n"
    "                         RLIMIT_NOFILE / RLIMIT_FSIZE of brisk (repeatable)\n"
    "      --daemonize        new session, stdio on /dev/null; return 0 once brisk runs\n"
    "  -h, --help             this text\n"
    "\n"
    "RUN-ARGS: 'run OPTIONS', 'restore OPTIONS' or '--api-sock PATH [PROCESS-OPTIONS]', options spelled\n"
    "in full. --kernel, --initrd, --disk and a --cpu-template file (symlinks resolved) are hard-linked\n"
    "(bind-mounted across file systems) into the jail as /kernel, /initrd, /disk0.. and passed so;\n"
    "restore's --snapshot and --mem as /snapshot.state and /snapshot.mem, its --disk PATH and a\n"
    "--cpu-template file placed only (the snapshot names them). --api-sock, --serial file:,\n"
    "--report-json, --vsock uds=, --vsock-uds and --clone-server paths are inside the jail (on the\n"
    "host: BASE/brisk/ID/root/PATH). --config-file and --uffd are refused. BASE/brisk/ID/brisk.pid holds\n"
    "brisk's pid; the jail's files stay when it ends, its cgroup goes (a reaper process removes it\n"
    "when the jail was killed or --daemonize returned; an empty one left behind is reused).\n"
    "\n"
    "Exit status: brisk's (128+N when signal N ended it); 2 a missing or unsafe input;\n"
    "4 a host call failed (mount, mknod, cgroup write, ...). See docs/security.md.\n";

int cli_usage(FILE *f, const char *command)
{
	if (!command) {
		fputs(overview, f);
		return 0;
	}
	if (strcmp(command, "run") == 0) {
		fputs(run_usage_head, f);
		for (unsigned k = 0; k < devkinds_nr; k++)
			fputs(devkinds[k].help, f);
		fputs(run_usage_tail, f);
		return 0;
	}
	if (strcmp(command, "cpuid") == 0) {
		fputs(cpuid_usage, f);
		return 0;
	}
	if (strcmp(command, "profile") == 0) {
		fputs(profile_usage, f);
		return 0;
	}
	if (strcmp(command, "trace") == 0) {
		fputs(trace_usage, f);
		return 0;
	}
	if (strcmp(command, "bench") == 0) {
		fputs(bench_usage, f);
		return 0;
	}
	if (strcmp(command, "compare") == 0) {
		fputs(compare_usage, f);
		return 0;
	}
	if (strcmp(command, "api") == 0) {
		fputs(api_usage, f);
		return 0;
	}
	if (strcmp(command, "restore") == 0) {
		fputs(restore_usage, f);
		return 0;
	}
	if (strcmp(command, "clone") == 0) {
		fputs(clone_usage, f);
		return 0;
	}
	if (strcmp(command, "acpi") == 0) {
		fputs(acpi_usage, f);
		return 0;
	}
	if (strcmp(command, "snapshot-editor") == 0) {
		fputs(snapshot_editor_usage, f);
		return 0;
	}
	if (strcmp(command, "jail") == 0) {
		fputs(jail_usage, f);
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
