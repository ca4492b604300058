/* snapedit.c - `brisk snapshot-editor edit-memory rebase`: Firecracker's command, a Diff layer merged onto its base. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "brisk/cli.h"
#include "brisk/exitcode.h"
#include "brisk/memlayer.h"

/* Firecracker's clap definition (src/snapshot-editor/src/edit_memory.rs): -m/--memory-path, -d/--diff-path. */
static const struct option opts[] = {
    {"memory-path", required_argument, NULL, 'm'},
    {"diff-path", required_argument, NULL, 'd'},
    {"help", no_argument, NULL, 'h'},
    {0, 0, 0, 0},
};

static int usage_error(const char *why)
{
	fprintf(stderr, "brisk snapshot-editor: %s; try 'brisk help snapshot-editor'\n", why);
	return EXIT_USAGE;
}

int cmd_snapshot_editor(int argc, char **argv)
{
	const char *base = NULL, *layer = NULL;
	char err[1024];
	uint64_t copied = 0;
	int c, ret;

	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
		return cli_usage(stdout, "snapshot-editor"), 0;
	if (argc < 3 || strcmp(argv[1], "edit-memory") != 0 || strcmp(argv[2], "rebase") != 0)
		return usage_error("the command is 'edit-memory rebase'");
	optind = 1;
	while ((c = getopt_long(argc - 2, argv + 2, "m:d:h", opts, NULL)) != -1) {
		if (c == 'm')
			base = optarg;
		else if (c == 'd')
			layer = optarg;
		else if (c == 'h')
			return cli_usage(stdout, "snapshot-editor"), 0;
		else
			return usage_error("unknown option");
	}
	if (optind < argc - 2)
		return usage_error("unexpected argument");
	if (!base || !layer)
		return usage_error("--memory-path and --diff-path are required");
	ret = memlayer_rebase(base, layer, &copied, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "brisk snapshot-editor: %s\n", err);
		return ret == -EINVAL || ret == -EBUSY || ret == -ENOENT || ret == -EACCES ? EXIT_USAGE : EXIT_HOST;
	}
	return 0;
}
