/* acpi.c - `brisk acpi --dump DIR [RUN-OPTIONS]`: the ACPI tables a VM would get, one file per table, without booting.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/acpi.h"
#include "brisk/cli.h"
#include "brisk/config.h"
#include "brisk/cpuid.h"
#include "brisk/devmgr.h"
#include "brisk/exitcode.h"
#include "brisk/file.h"
#include "brisk/vm.h"

/* Takes --dump DIR / --dump=DIR and --help out of argv; the rest are RUN-OPTIONS. Returns 0, EXIT_USAGE or -1. */
static int split_args(int argc, char **argv, const char **dir, char **run_argv, int *run_argc)
{
	*run_argc = 0;
	run_argv[(*run_argc)++] = argv[0];
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--dump") == 0) {
			if (i + 1 == argc) {
				fprintf(stderr, "brisk acpi: --dump needs a directory\n");
				return EXIT_USAGE;
			}
			*dir = argv[++i];
		} else if (strncmp(argv[i], "--dump=", 7) == 0) {
			*dir = argv[i] + 7;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			return -1;
		} else {
			run_argv[(*run_argc)++] = argv[i];
		}
	}
	run_argv[*run_argc] = NULL;
	if (!*dir || !**dir) {
		fprintf(stderr, "brisk acpi: --dump DIR is required; try 'brisk help acpi'\n");
		return EXIT_USAGE;
	}
	return 0;
}

/* Writes buf[0..len) to DIR/NAME.dat. Returns 0 or an exit status after a message. */
static int write_table(const char *dir, const char *name, const uint8_t *buf, size_t len)
{
	char path[PATH_MAX], err[512];
	int fd;
	size_t done = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s.dat", dir, name) >= sizeof(path)) {
		fprintf(stderr, "brisk acpi: --dump %s: the path is too long\n", dir);
		return EXIT_USAGE;
	}
	fd = file_open_output(path, "--dump", FILE_OUT_TRUNCATE, false, err, sizeof(err));
	if (fd < 0) {
		fprintf(stderr, "brisk acpi: %s\n", err);
		return fd == -EMFILE || fd == -ENFILE ? EXIT_HOST : EXIT_USAGE;
	}
	while (done < len) {
		ssize_t n = write(fd, buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "brisk acpi: writing %s: %s\n", path, n < 0 ? strerror(errno) : "short write");
			close(fd);
			return EXIT_HOST;
		}
		done += (size_t)n;
	}
	if (close(fd)) {
		fprintf(stderr, "brisk acpi: closing %s: %s\n", path, strerror(errno));
		return EXIT_HOST;
	}
	return 0;
}

/* The machine `cfg` describes, built and dumped. */
static int dump(const struct vm_config *cfg, const char *dir)
{
	static uint8_t buf[LAYOUT_ACPI_SIZE];
	uint32_t ids[CONFIG_MAX_CPUS];
	struct cpuid_topology topo;
	struct devmgr dm;
	struct acpi_machine m;
	struct acpi_layout l;
	char err[512];
	int ret;

	if (cpuid_topology_init(&topo, cfg->cpus, cfg->topology.sockets, cfg->topology.cores, cfg->topology.threads,
				err, sizeof(err))) {
		fprintf(stderr, "brisk acpi: %s\n", err);
		return EXIT_USAGE;
	}
	devmgr_plan(&dm, cfg);
	devmgr_acpi_machine(&dm, cfg, &topo, ids, &m);
	ret = acpi_build(&m, LAYOUT_ACPI, buf, sizeof(buf), &l, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "brisk acpi: %s\n", err);
		return ret == -EINVAL ? EXIT_USAGE : EXIT_HOST;
	}
	if (mkdir(dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "brisk acpi: --dump %s: %s\n", dir, strerror(errno));
		return EXIT_USAGE;
	}
	for (unsigned t = 0; t < ACPI_NR_TABLES; t++)
		if ((ret = write_table(dir, acpi_table_name(t), buf + l.off[t], l.len[t])))
			return ret;
	return 0;
}

int cmd_acpi(int argc, char **argv)
{
	char **run_argv = calloc((size_t)argc + 1, sizeof(*run_argv));
	const char *dir = NULL;
	struct vm_config *cfg = calloc(1, sizeof(*cfg));
	int run_argc, ret;

	if (!run_argv || !cfg) {
		fprintf(stderr, "brisk acpi: out of memory\n");
		ret = EXIT_HOST;
		goto out;
	}
	ret = split_args(argc, argv, &dir, run_argv, &run_argc);
	if (ret < 0) {
		cli_usage(stdout, "acpi");
		ret = 0;
		goto out;
	}
	if (ret)
		goto out;
	ret = cli_parse_run_options(run_argc, run_argv, cfg);
	if (ret == 0 && cfg->no_acpi) {
		fprintf(stderr, "brisk acpi: --acpi off: a VM started with these options gets no ACPI tables\n");
		ret = EXIT_USAGE;
	} else if (ret == 0)
		ret = dump(cfg, dir);
	else if (ret < 0)
		ret = 0;
out:
	if (cfg)
		config_release(cfg);
	free(cfg);
	free(run_argv);
	return ret;
}
