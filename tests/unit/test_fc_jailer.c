/*
 * test_fc_jailer.c - brisk-jailer's command line (Firecracker's arg_parser rules) and Env::new's checks
 * (src/jail/fcj_args.c): the messages are Firecracker v1.7.0's, the cgroup directories its layout.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/fc_args.h"
#include "brisk/fc_jailer.h"

#define ARGV(...) ((char *[]){"jailer", __VA_ARGS__, NULL})

/* argv's words up to NULL, the program name included. */
static int count(char **argv)
{
	int n = 0;

	while (argv[n])
		n++;
	return n;
}

/* The words after the program (n of them), as fcj_parse_args sees them. */
static int parse(char **argv, int n, struct fcj_args *a, char *err)
{
	return fcj_parse_args(n + 1, argv, a, err, 256);
}

static void test_parse_ok(void **state)
{
	char **v = ARGV("--id", "vm-1", "--exec-file", "/x/firecracker", "--uid", "1", "--gid", "2", "--cgroup",
			"a.b=1", "--cgroup", "c.d=2", "--daemonize", "--", "--api-sock", "/s", "--", "x");
	struct fcj_args a;
	char err[256];

	(void)state;
	assert_int_equal(parse(v, count(v) - 1, &a, err), 0);
	assert_string_equal(a.id, "vm-1");
	assert_string_equal(a.chroot_base, FCJ_DEFAULT_BASE);
	assert_string_equal(a.cgroup_version, "1");
	assert_true(a.daemonize);
	assert_false(a.new_pid_ns);
	assert_int_equal(a.nr_cgroup, 2);
	assert_string_equal(a.cgroup[1], "c.d=2");
	/* Only the first "--" splits: the VMM gets the rest untouched, a second "--" included. */
	assert_int_equal(a.nr_extra, 4);
	assert_string_equal(a.extra[0], "--api-sock");
	assert_string_equal(a.extra[2], "--");
}

static void check_refused(char **argv, int argc, const char *msg)
{
	struct fcj_args a;
	char err[256];

	assert_int_equal(parse(argv, argc, &a, err), -EINVAL);
	assert_string_equal(err, msg);
}

static void test_parse_refused(void **state)
{
	char **v1 = ARGV("--id", "a", "--exec-file", "f", "--uid", "1");
	char **v2 = ARGV("--id", "a", "--id", "b");
	char **v3 = ARGV("--id", "--uid");
	char **v4 = ARGV("--id=a");
	char **v5 = ARGV("id");
	char **v6 = ARGV("--daemonize", "yes");

	(void)state;
	check_refused(v1, 6, "Argument 'gid' required, but not found.");
	check_refused(v2, 4, "The argument 'id' was provided more than once.");
	check_refused(v3, 2, "The argument 'id' requires a value, but none was supplied.");
	check_refused(v4, 1, "Found argument 'id=a' which wasn't expected, or isn't valid in this context.");
	check_refused(v5, 1, "Found argument 'id' which wasn't expected, or isn't valid in this context.");
	check_refused(v6, 2, "Found argument 'yes' which wasn't expected, or isn't valid in this context.");
}

static void test_help_version_win(void **state)
{
	char **v = ARGV("--bogus", "--version", "--help", "--", "--help");
	char **w = ARGV("--bogus", "--", "--version");
	struct fcj_args a;
	char err[256];

	(void)state;
	assert_int_equal(parse(v, 5, &a, err), 0);
	assert_true(a.help);
	/* after "--" it is the VMM's word */
	assert_int_equal(parse(w, 3, &a, err), -EINVAL);
}

static void test_ids(void **state)
{
	char err[256], long_id[66];

	(void)state;
	assert_int_equal(fc_args_check_id("551e7604-e35c-42b3-b825-416853441234", err, sizeof(err)), 0);
	assert_int_equal(fc_args_check_id("", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "Invalid instance ID: Invalid len (0);  the length must be between 1 and 64");
	assert_int_equal(fc_args_check_id("a.b", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "Invalid instance ID: Invalid char (.) at position 1");
	memset(long_id, 'x', 64);
	long_id[64] = '\0';
	assert_int_equal(fc_args_check_id(long_id, err, sizeof(err)), 0);
	long_id[64] = 'x';
	long_id[65] = '\0';
	assert_int_equal(fc_args_check_id(long_id, err, sizeof(err)), -EINVAL);
}

static void test_relative_paths(void **state)
{
	(void)state;
	assert_true(fcj_relative_path_ok("firecracker"));
	assert_true(fcj_relative_path_ok("all_uvms/external_uvms"));
	assert_false(fcj_relative_path_ok("/abs"));
	assert_false(fcj_relative_path_ok("a/../b"));
	assert_false(fcj_relative_path_ok("./a"));
	assert_false(fcj_relative_path_ok(".."));
}

static void test_mount_lines(void **state)
{
	char dir[4096], opts[1024];

	(void)state;
	assert_int_equal(fcj_mount_line("cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nsdelegate 0 0\n", dir, sizeof(dir),
					opts, sizeof(opts)),
			 2);
	assert_string_equal(dir, "/sys/fs/cgroup/unified");
	assert_int_equal(fcj_mount_line("cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0\n", dir,
					sizeof(dir), opts, sizeof(opts)),
			 1);
	assert_string_equal(opts, "rw,relatime,cpu,cpuacct");
	assert_int_equal(fcj_mount_line("proc /proc proc rw 0 0\n", dir, sizeof(dir), opts, sizeof(opts)), 0);
}

/* A fake /proc/mounts and v2 root in a temporary directory; the exec file a file named firecracker there. */
struct fixture {
	char dir[64], mounts[128], exec[128], unified[128];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char path[256];
	FILE *m;

	strcpy(f->dir, "/tmp/fcj-unit-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->mounts, sizeof(f->mounts), "%s/mounts", f->dir);
	snprintf(f->exec, sizeof(f->exec), "%s/my-firecracker", f->dir);
	snprintf(f->unified, sizeof(f->unified), "%s/unified", f->dir);
	m = fopen(f->mounts, "w");
	fprintf(m,
		"cgroup %s/cpuset cgroup rw,cpuset 0 0\ncgroup %s/cpu cgroup rw,cpu,cpuacct 0 0\n"
		"cgroup2 %s cgroup2 rw 0 0\n",
		f->dir, f->dir, f->unified);
	fclose(m);
	fclose(fopen(f->exec, "w"));
	mkdir(f->unified, 0755);
	snprintf(path, sizeof(path), "%s/cgroup.controllers", f->unified);
	m = fopen(path, "w");
	fputs("cpuset cpu io memory pids\n", m);
	fclose(m);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* Env::new on "--id vm1 --exec-file F --uid 1 --gid 2 --chroot-base-dir DIR EXTRA..." */
static int env_new(struct fixture *f, struct fcj_env *e, char *err, int n, const char **extra)
{
	char *v[40] = {"jailer", "--id",  "vm1", "--exec-file",	      f->exec, "--uid",
		       "1",	 "--gid", "2",	 "--chroot-base-dir", f->dir};
	int argc = 11;
	struct fcj_args a;

	for (int i = 0; i < n; i++)
		v[argc++] = (char *)extra[i];
	assert_int_equal(fcj_parse_args(argc, v, &a, err, 512), 0);
	return fcj_env_new(&a, f->mounts, e, err, 512);
}

static void test_env_v1(void **state)
{
	struct fixture *f = *state;
	const char *x[] = {"--cgroup", "cpuset.cpus=0", "--cgroup", "cpuacct.usage=0", "--parent-cgroup", "a/b"};
	struct fcj_env e;
	char err[512], want[256];

	assert_int_equal(env_new(f, &e, err, 6, x), 0);
	snprintf(want, sizeof(want), "%s/my-firecracker/vm1/root", f->dir);
	assert_string_equal(e.chroot_dir, want);
	assert_string_equal(e.exec_name, "my-firecracker");
	assert_int_equal(e.uid, 1);
	assert_int_equal(e.gid, 2);
	assert_int_equal(e.nofile, FCJ_DEFAULT_NOFILE);
	assert_false(e.has_fsize);
	assert_int_equal(e.nr_cg, 2);
	snprintf(want, sizeof(want), "%s/cpuset/a/b/vm1", f->dir);
	assert_string_equal(e.cg[0].dir, want);
	assert_int_equal(e.cg[0].parent_depth, 2);
	/* cpuacct shares the cpu,cpuacct mount */
	snprintf(want, sizeof(want), "%s/cpu/a/b/vm1", f->dir);
	assert_string_equal(e.cg[1].dir, want);
}

static void test_env_v2_and_limits(void **state)
{
	struct fixture *f = *state;
	const char *x[] = {"--cgroup-version", "2",	    "--cgroup",		"memory.max=1G",
			   "--resource-limit", "fsize=100", "--resource-limit", "no-file=64"};
	struct fcj_env e;
	char err[512], want[256];

	assert_int_equal(env_new(f, &e, err, 8, x), 0);
	snprintf(want, sizeof(want), "%s/my-firecracker/vm1", f->unified);
	assert_string_equal(e.cg[0].dir, want); /* the parent cgroup defaults to the exec file's name */
	assert_true(e.has_fsize);
	assert_int_equal(e.fsize, 100);
	assert_int_equal(e.nofile, 64);
}

static void test_env_refused(void **state)
{
	static const struct {
		const char *opt, *val, *msg;
	} cases[] = {
	    {"--cgroup", "hugetlb.max=1", "Controller hugetlb is unavailable"},
	    {"--cgroup", "cpu.shares", "Invalid format for cgroups: cpu.shares"},
	    {"--cgroup", "cpu.shares=1=2", "Invalid format for cgroups: cpu.shares=1=2"},
	    {"--cgroup", "cpushares=1", "Cgroup invalid file: cpushares=1"},
	    {"--cgroup", "cpu/x.y=1", "Cgroup invalid file: cpu/x.y=1"},
	    {"--cgroup-version", "300", "300 is an invalid cgroup version specifier"},
	    {"--parent-cgroup", "/abs",
	     "Parent cgroup path is invalid. Path should not be absolute or contain '..' or '.'"},
	    {"--resource-limit", "fsize", "Invalid format for resources limits: fsize"},
	    {"--resource-limit",
	     "fsize=", "Invalid limit value for resource: : cannot parse integer from empty string"},
	    {"--resource-limit", "fsize=99999999999999999999",
	     "Invalid limit value for resource: 99999999999999999999: number too large to fit in target type"},
	    {"--resource-limit", "nproc=1", "Invalid resource argument: nproc"},
	};
	struct fixture *f = *state;
	struct fcj_env e;
	char err[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *x[] = {cases[i].opt, cases[i].val};

		assert_true(env_new(f, &e, err, 2, x) < 0);
		assert_string_equal(err, cases[i].msg);
	}
}

static void test_cgroup_version_alone(void **state)
{
	struct fixture *f = *state;
	const char *ok[] = {"--cgroup-version", "3"};
	const char *bad[] = {"--cgroup-version", "3", "--cgroup", "cpu.shares=1"};
	struct fcj_env e;
	char err[512];

	/* As Firecracker: no hierarchy is consulted without --cgroup (and version != 2), so 3 passes there. */
	assert_int_equal(env_new(f, &e, err, 2, ok), 0);
	assert_true(env_new(f, &e, err, 4, bad) < 0);
	assert_string_equal(err, "3 is an invalid cgroup version specifier");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_ok),
	    cmocka_unit_test(test_parse_refused),
	    cmocka_unit_test(test_help_version_win),
	    cmocka_unit_test(test_ids),
	    cmocka_unit_test(test_relative_paths),
	    cmocka_unit_test(test_mount_lines),
	    cmocka_unit_test_setup_teardown(test_env_v1, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_env_v2_and_limits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_env_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cgroup_version_alone, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
