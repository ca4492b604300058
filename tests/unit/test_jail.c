/* test_jail.c - brisk jail's argument checks and the RUN-ARGS rewrite to in-jail paths (src/jail/jail_args.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "brisk/exitcode.h"
#include "brisk/jail.h"

static void test_ids(void **state)
{
	char long_id[JAIL_ID_MAX + 2];

	(void)state;
	assert_true(jail_id_valid("vm-1"));
	assert_true(jail_id_valid("A"));
	assert_false(jail_id_valid(""));
	assert_false(jail_id_valid("a_b"));
	assert_false(jail_id_valid("../x"));
	assert_false(jail_id_valid("a b"));
	memset(long_id, 'a', sizeof(long_id));
	long_id[JAIL_ID_MAX] = '\0';
	assert_true(jail_id_valid(long_id));
	long_id[JAIL_ID_MAX] = 'a';
	long_id[JAIL_ID_MAX + 1] = '\0';
	assert_false(jail_id_valid(long_id));
}

static void test_cgroup_keys(void **state)
{
	const char *bad[] = {"cpu.max", "=1",	 "pids.max=",	   "../cpu.max=1",     "cpu/max=1",	 "cpu..max=1",
			     ".x=1",	"max=1", "cgroup.procs=1", "cgroup.threads=1", "memory.max=1\n2"};
	struct jail_cgroup_kv kv;
	char arg[64], err[256];

	(void)state;
	strcpy(arg, "cpu.max=50000 100000");
	assert_int_equal(jail_parse_cgroup(arg, &kv, err, sizeof(err)), 0);
	assert_string_equal(kv.key, "cpu.max");
	assert_string_equal(kv.value, "50000 100000");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		strcpy(arg, bad[i]);
		assert_int_equal(jail_parse_cgroup(arg, &kv, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "--cgroup"));
	}
}

static void test_rlimits(void **state)
{
	struct jail_config cfg = {0};
	char err[256];

	(void)state;
	assert_int_equal(jail_parse_rlimit("no-file=1024", &cfg, err, sizeof(err)), 0);
	assert_true(cfg.has_nofile);
	assert_int_equal(cfg.nofile, 1024);
	assert_int_equal(jail_parse_rlimit("fsize=0", &cfg, err, sizeof(err)), 0);
	assert_true(cfg.has_fsize);
	assert_int_equal(jail_parse_rlimit("fsize", &cfg, err, sizeof(err)), -EINVAL);
	assert_int_equal(jail_parse_rlimit("fsize=-1", &cfg, err, sizeof(err)), -EINVAL);
	assert_int_equal(jail_parse_rlimit("fsize=1k", &cfg, err, sizeof(err)), -EINVAL);
	assert_int_equal(jail_parse_rlimit("nproc=1", &cfg, err, sizeof(err)), -EINVAL);
	assert_int_equal(jail_parse_rlimit("no-file=99999999999999999999", &cfg, err, sizeof(err)), -EINVAL);
}

static void test_rewrite(void **state)
{
	char *argv[] = {"jail",
			"--id",
			"v1",
			"--uid",
			"1000",
			"--gid=1000",
			"--",
			"run",
			"-k",
			"/b/vmlinux",
			"--initrd=/b/initrd.img",
			"--disk",
			"/d/root.img,ro,id=root",
			"--disk=/d/data.img",
			"-c",
			"--kernel x",
			"--api-sock",
			"/run/api.sock",
			"--serial",
			"file:/logs/serial.log",
			"--vsock",
			"cid=3,uds=/run/v.sock",
			NULL};
	struct jail_config cfg;
	char err[256];
	int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;

	(void)state;
	assert_int_equal(jail_parse_args(argc, argv, &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.id, "v1");
	assert_int_equal(cfg.uid, 1000);
	assert_int_equal(cfg.gid, 1000);
	assert_string_equal(cfg.chroot_base, JAIL_DEFAULT_BASE);
	assert_int_equal(cfg.nr_files, 4);
	assert_string_equal(cfg.files[0].name, "kernel");
	assert_string_equal(cfg.files[0].host, "/b/vmlinux");
	assert_string_equal(cfg.files[1].name, "initrd");
	assert_string_equal(cfg.files[2].name, "disk0");
	assert_string_equal(cfg.files[2].host, "/d/root.img");
	assert_true(cfg.files[2].ro);
	assert_string_equal(cfg.files[3].name, "disk1");
	assert_false(cfg.files[3].ro);
	assert_int_equal(cfg.run_argc, 11);
	assert_string_equal(cfg.run_argv[0], "run");
	assert_string_equal(cfg.run_argv[1], "-k");
	assert_string_equal(cfg.run_argv[2], "/kernel");
	assert_string_equal(cfg.run_argv[3], "--initrd=/initrd");
	assert_string_equal(cfg.run_argv[4], "--disk=/disk0,ro,id=root");
	assert_string_equal(cfg.run_argv[5], "--disk=/disk1");
	assert_string_equal(cfg.run_argv[7], "--kernel x"); /* a --cmdline value, untouched */
	assert_string_equal(cfg.run_argv[8], "--api-sock=/run/api.sock");
	assert_string_equal(cfg.run_argv[9], "--serial=file:/logs/serial.log");
	assert_int_equal(cfg.nr_out, 3);
	assert_string_equal(cfg.out[0], "/run/api.sock");
	assert_string_equal(cfg.out[1], "/logs/serial.log");
	assert_string_equal(cfg.out[2], "/run/v.sock");
	assert_null(cfg.run_argv[cfg.run_argc]);
	jail_config_free(&cfg);
}

static void test_refused(void **state)
{
	char *cases[][8] = {
	    {"jail", "--id", "v", "--uid", "1", "--gid", "1", NULL}, /* no RUN-ARGS */
	    {"jail", "--id", "v", "--uid", "1", "--bogus", "1", NULL},
	    {"jail", "--id", "v", "--uid", "1", "--", "run", NULL}, /* no --gid */
	    {"jail", "--id", "v", "--uid", "-1", "--gid", "1", NULL},
	};
	char *more[][10] = {
	    {"jail", "--id=v", "--uid=1", "--gid=1", "--", "run", "--config-file", "/x.json", NULL},
	    {"jail", "--id=v", "--uid=1", "--gid=1", "--", "restore", "--snapshot", "/s", NULL},
	    {"jail", "--id=v", "--uid=1", "--gid=1", "--", "run", "--report-json", "../x.json", NULL},
	    {"jail", "--id=v", "--uid=1", "--gid=1", "--", "run", "--kernel", NULL},
	};
	struct jail_config cfg;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int argc = 0;

		while (cases[i][argc])
			argc++;
		assert_int_equal(jail_parse_args(argc, cases[i], &cfg, err, sizeof(err)), EXIT_USAGE);
		jail_config_free(&cfg);
	}
	for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
		int argc = 0;

		while (more[i][argc])
			argc++;
		assert_int_equal(jail_parse_args(argc, more[i], &cfg, err, sizeof(err)), EXIT_USAGE);
		jail_config_free(&cfg);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ids),	    cmocka_unit_test(test_cgroup_keys), cmocka_unit_test(test_rlimits),
	    cmocka_unit_test(test_rewrite), cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
