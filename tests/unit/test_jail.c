/*
 * test_jail.c - brisk jail's argument checks and the RUN-ARGS rewrite to in-jail paths (src/jail/jail_args.c);
 * the loader's list of a helper's shared objects and the PT_INTERP reader (src/jail/jail_libs.c).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/exitcode.h"
#include "brisk/jail.h"
#include "brisk/opts.h"
#include "brisk/run_opts.h"

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
	/* file options are rewritten as two words (Firecracker's command line takes no --opt=value) */
	static const char *const want[] = {"run",
					   "-k",
					   "/kernel",
					   "--initrd",
					   "/initrd",
					   "--disk",
					   "/disk0,ro,id=root",
					   "--disk",
					   "/disk1",
					   "-c",
					   "--kernel x",
					   "--api-sock",
					   "/run/api.sock",
					   "--serial",
					   "file:/logs/serial.log",
					   "--vsock",
					   "cid=3,uds=/run/v.sock"};
	assert_int_equal(cfg.run_argc, (int)(sizeof(want) / sizeof(want[0])));
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_string_equal(cfg.run_argv[i], want[i]); /* "--kernel x": a --cmdline value, untouched */
	assert_int_equal(cfg.nr_out, 3);
	assert_string_equal(cfg.out[0], "/run/api.sock");
	assert_string_equal(cfg.out[1], "/logs/serial.log");
	assert_string_equal(cfg.out[2], "/run/v.sock");
	assert_null(cfg.run_argv[cfg.run_argc]);
	jail_config_free(&cfg);
}

/*
 * `restore`: the snapshot's two files placed as /snapshot.state and /snapshot.mem, each --disk placed as /diskN
 * (where a jailed run names its disks) and left out (brisk restore takes none), --clone-server an output path.
 */
static void test_rewrite_restore(void **state)
{
	char *argv[] = {"jail",
			"--id",
			"c1",
			"--uid",
			"1000",
			"--gid",
			"1000",
			"--",
			"restore",
			"--snapshot",
			"/s/vm.state",
			"--mem=/s/vm.mem",
			"--disk",
			"/d/root.img,ro",
			"--clone-server",
			"/run/c.sock",
			"--clone-pool",
			"2",
			"--report-json",
			"/r.json",
			"--vsock-uds",
			"/run/v.sock",
			"--cpu-template",
			"/t/c.json",
			NULL};
	static const char *const want[] = {"restore",	     "--snapshot",  "/snapshot.state", "--mem", "/snapshot.mem",
					   "--clone-server", "/run/c.sock", "--clone-pool",    "2",	"--report-json",
					   "/r.json",	     "--vsock-uds", "/run/v.sock"};
	struct jail_config cfg;
	char err[256];
	int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;

	(void)state;
	assert_int_equal(jail_parse_args(argc, argv, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.nr_files, 4);
	assert_string_equal(cfg.files[3].name, "cpu-template.json");
	assert_string_equal(cfg.files[3].host, "/t/c.json");
	assert_string_equal(cfg.files[0].name, "snapshot.state");
	assert_string_equal(cfg.files[0].opt, "--snapshot");
	assert_true(cfg.files[0].ro);
	assert_string_equal(cfg.files[1].name, "snapshot.mem");
	assert_string_equal(cfg.files[1].host, "/s/vm.mem");
	assert_true(cfg.files[1].ro);
	assert_string_equal(cfg.files[2].name, "disk0");
	assert_string_equal(cfg.files[2].opt, "--disk");
	assert_true(cfg.files[2].ro);
	assert_int_equal(cfg.run_argc, (int)(sizeof(want) / sizeof(want[0])));
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_string_equal(cfg.run_argv[i], want[i]);
	assert_null(cfg.run_argv[cfg.run_argc]);
	assert_int_equal(cfg.nr_out, 3);
	assert_string_equal(cfg.out[0], "/run/c.sock");
	assert_string_equal(cfg.out[1], "/r.json");
	assert_string_equal(cfg.out[2], "/run/v.sock");
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
	    {"jail", "--id=v", "--uid=1", "--gid=1", "--", "run", "--snapshot", "/s", NULL},
	    {"jail", "--id=v", "--uid=1", "--gid=1", "--", "restore", "--uffd", "/u.sock", NULL},
	    {"jail", "--id=v", "--uid=1", "--gid=1", "--", "restore", "--clone-server", "/../c", NULL},
	    {"jail", "--id=v", "--uid=1", "--gid=1", "--", "run", "--report-json", "../x.json", NULL},
	    {"jail", "--id=v", "--uid=1", "--gid=1", "--", "run", "--kernel", NULL},
	    {"jail", "--id=v", "--uid=1", "--gid=1", "--", "run", "--kern", "/k", NULL},
	    {"jail", "--id=v", "--uid=1", "--gi=1", "--", "run", "--kernel", "/k", NULL},
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

/* opts_check_exact: a long option's prefix is refused; values (even ones that look like options) are skipped. */
static void test_exact_options(void **state)
{
	char *ok[] = {"--kernel", "/k",	   "-c",	 "--kern", "--cmdline=--kern", "-m", "64",
		      "-k/x",	  "--rng", "--timeline", "--",	   "--kern",	       NULL};
	char *bad[][3] = {{"--kern", "/k", NULL},
			  {"--cpu", "2", NULL},
			  {"--time", NULL, NULL},
			  {"-k", "/k", NULL},
			  {"--report=/r", NULL, NULL}};
	const char *why[] = {"--kern: an abbreviation of --kernel", "--cpu: an abbreviation of --cpu-template, --cpus",
			     "--time: an abbreviation of --timeline", NULL,
			     "--report: an abbreviation of --report-json"};
	char err[256];

	(void)state;
	assert_int_equal(opts_check_exact(12, ok, RUN_SHORT_OPTS, run_options(), err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int argc = bad[i][1] ? 2 : 1;
		int ret = opts_check_exact(argc, bad[i], RUN_SHORT_OPTS, run_options(), err, sizeof(err));

		if (!why[i]) {
			assert_int_equal(ret, 0); /* -k is a short option, not an abbreviation */
			continue;
		}
		assert_int_equal(ret, -EINVAL);
		assert_non_null(strstr(err, why[i]));
	}
	assert_non_null(opts_find_exact("--kernel=/k", run_options()));
	assert_null(opts_find_exact("--kern=/k", run_options()));
}

/* ---- jail_ld_list_parse: glibc's `ld.so --list` output ---------------------------------------------------- */

static struct jail_libs *libs_with(const char *text)
{
	struct jail_libs *l = calloc(1, sizeof(*l));

	assert_non_null(l);
	assert_true(strlen(text) < sizeof(l->text));
	strcpy(l->text, text);
	return l;
}

/* Parses text; returns the status with err filled; *out keeps the libs for the caller to free. */
static int parse(const char *text, struct jail_libs **out, char *err, size_t errlen)
{
	struct jail_libs *l = libs_with(text);
	int ret;

	err[0] = '\0';
	ret = jail_ld_list_parse(l->text, l, err, errlen);
	if (out)
		*out = l;
	else
		free(l);
	return ret;
}

static void test_ld_list_normal(void **state)
{
	/* brisk-slirp on Debian 12, glibc 2.36, with one object printed twice (kept once) */
	const char *text = "\tlinux-vdso.so.1 (0x00007ffc5a5f3000)\n"
			   "\tlibslirp.so.0 => /lib/x86_64-linux-gnu/libslirp.so.0 (0x00007f0e1e0a0000)\n"
			   "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0e1dea0000)\n"
			   "\tlibglib-2.0.so.0 => /usr/lib/x86_64-linux-gnu/libglib-2.0.so.0 (0x00007f0e1dd60000)\n"
			   "\t/lib64/ld-linux-x86-64.so.2 (0x00007f0e1e0e0000)\n"
			   "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0e1dea0000)\n";
	struct jail_libs *l;
	char err[256];

	(void)state;
	assert_int_equal(parse(text, &l, err, sizeof(err)), 0);
	assert_int_equal(l->nr, 4);
	assert_string_equal(l->path[0], "/lib/x86_64-linux-gnu/libslirp.so.0");
	assert_string_equal(l->path[1], "/lib/x86_64-linux-gnu/libc.so.6");
	assert_string_equal(l->path[2], "/usr/lib/x86_64-linux-gnu/libglib-2.0.so.0");
	assert_string_equal(l->path[3], "/lib64/ld-linux-x86-64.so.2");
	free(l);
	assert_int_equal(parse("", &l, err, sizeof(err)), 0);
	assert_int_equal(l->nr, 0);
	free(l);
}

static void test_ld_list_vdso(void **state)
{
	/* the vDSO has no file: skipped in today's form, in old glibc's ("=>  (0x...)") and i386's name */
	const char *text = "\tlinux-vdso.so.1 =>  (0x00007ffd1b9f2000)\n"
			   "\tlinux-gate.so.1 (0xf7f1c000)\n"
			   "\tlinux-vdso.so.1 (0x00007ffd1b9f2000)\n"
			   "\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f0e1dea0000)";
	struct jail_libs *l;
	char err[256];

	(void)state;
	assert_int_equal(parse(text, &l, err, sizeof(err)), 0);
	assert_int_equal(l->nr, 1);
	assert_string_equal(l->path[0], "/lib/x86_64-linux-gnu/libm.so.6");
	free(l);
}

static void test_ld_list_not_found(void **state)
{
	char err[256];

	(void)state;
	assert_int_equal(parse("\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1000)\n"
			       "\tlibmicrohttpd.so.12 => not found\n",
			       NULL, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "libmicrohttpd.so.12: not found"));
}

static void test_ld_list_bad_paths(void **state)
{
	static const struct {
		const char *line, *why;
	} bad[] = {
	    {"\tlibx.so.1 => lib/libx.so.1 (0x1000)\n", "not an absolute path"},
	    {"\tlibx.so.1 => ./libx.so.1 (0x1000)\n", "not an absolute path"},
	    {"\tlibx.so.1 => /usr/lib/../../etc/libx.so.1 (0x1000)\n", "'..'"},
	    {"\tlibx.so.1 => /usr/lib/./libx.so.1 (0x1000)\n", "'.'"},
	    {"\tlibx.so.1 => /usr//lib/libx.so.1 (0x1000)\n", "an empty component"},
	    {"\tlibx.so.1 => /libx.so.1 (0x1000)\n", "directly in /"},
	    {"\t/brisk (0x1000)\n", "directly in /"},
	    {"\tlibx.so.1 => /usr/lib/libx.so.1\n", "no load address"},
	    {"\tlibx.so.1 => /usr/lib/libx.so.1 (0x)\n", "no load address"},
	    {"\tlibx.so.1 => /usr/lib/libx.so.1 (0x12zz)\n", "no load address"},
	    {"libx.so.1 => /usr/lib/libx.so.1 (0x1000)\n", "unexpected"},
	    {"./brisk-api: error while loading shared libraries\n", "unexpected"},
	};
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(bad[i].line, NULL, err, sizeof(err)), -EINVAL);
		if (!strstr(err, bad[i].why))
			fail_msg("'%s': '%s' does not say '%s'", bad[i].line, err, bad[i].why);
	}
}

static void test_ld_list_bounds(void **state)
{
	size_t len = (JAIL_MAX_LIBS + 1) * 48 + 1;
	char *text = malloc(len), *long_line = malloc(JAIL_LD_LINE_MAX + 64), err[256];
	struct jail_libs *l;
	size_t at = 0;

	(void)state;
	assert_non_null(text);
	assert_non_null(long_line);
	for (int i = 0; i < JAIL_MAX_LIBS; i++)
		at += (size_t)snprintf(text + at, len - at, "\tlib%d.so => /usr/lib/lib%d.so (0x1000)\n", i, i);
	assert_int_equal(parse(text, &l, err, sizeof(err)), 0); /* exactly JAIL_MAX_LIBS: accepted */
	assert_int_equal(l->nr, JAIL_MAX_LIBS);
	free(l);
	snprintf(text + at, len - at, "\tlibmore.so => /usr/lib/libmore.so (0x1000)\n");
	assert_int_equal(parse(text, NULL, err, sizeof(err)), -E2BIG);
	assert_non_null(strstr(err, "more than 64 shared objects"));
	/* one line over JAIL_LD_LINE_MAX bytes, however well formed otherwise */
	strcpy(long_line, "\tlibx.so => /usr/lib/");
	at = strlen(long_line);
	memset(long_line + at, 'a', JAIL_LD_LINE_MAX);
	strcpy(long_line + at + JAIL_LD_LINE_MAX, " (0x1000)\n");
	assert_int_equal(parse(long_line, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "line 1 of the loader's list: longer than"));
	free(text);
	free(long_line);
}

/* ---- jail_elf_interp: PT_INTERP of an ELF64 file ---------------------------------------------------------- */

/* A minimal ELF64 file: the header, one program header of `type` over interp[0..size) at offset 120. */
static void write_elf(const char *path, uint32_t type, const char *interp, uint64_t size)
{
	unsigned char f[256] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
	uint64_t phoff = 64, off = 120;
	uint16_t phentsize = 56, phnum = 1;
	FILE *fp = fopen(path, "wb");

	assert_non_null(fp);
	memcpy(f + 0x20, &phoff, 8);
	memcpy(f + 0x36, &phentsize, 2);
	memcpy(f + 0x38, &phnum, 2);
	memcpy(f + 64, &type, 4);
	memcpy(f + 64 + 0x08, &off, 8);
	memcpy(f + 64 + 0x20, &size, 8);
	memcpy(f + off, interp, strlen(interp) + 1);
	assert_int_equal(fwrite(f, 1, sizeof(f), fp), sizeof(f));
	fclose(fp);
}

static void test_elf_interp(void **state)
{
	char path[] = "/tmp/brisk-test-jail-XXXXXX", out[64];
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	write_elf(path, 3, "/lib64/ld-linux-x86-64.so.2", 28);
	assert_int_equal(jail_elf_interp(path, out, sizeof(out)), 1);
	assert_string_equal(out, "/lib64/ld-linux-x86-64.so.2");
	assert_int_equal(jail_elf_interp(path, out, 16), -EINVAL); /* longer than out */
	write_elf(path, 3, "/lib64/ld-linux-x86-64.so.2", 10);	   /* not NUL-terminated */
	assert_int_equal(jail_elf_interp(path, out, sizeof(out)), -EINVAL);
	write_elf(path, 3, "/lib64/ld-linux-x86-64.so.2", 1 << 20); /* past the end of the file */
	assert_int_equal(jail_elf_interp(path, out, sizeof(out)), -EINVAL);
	write_elf(path, 1, "/lib64/ld-linux-x86-64.so.2", 28); /* PT_LOAD only: static */
	assert_int_equal(jail_elf_interp(path, out, sizeof(out)), 0);
	assert_int_equal(jail_elf_interp("/proc/self/status", out, sizeof(out)), 0); /* not ELF */
	assert_int_equal(jail_elf_interp("/no/such/file", out, sizeof(out)), 0);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ids),
	    cmocka_unit_test(test_cgroup_keys),
	    cmocka_unit_test(test_rlimits),
	    cmocka_unit_test(test_rewrite),
	    cmocka_unit_test(test_rewrite_restore),
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_exact_options),
	    cmocka_unit_test(test_ld_list_normal),
	    cmocka_unit_test(test_ld_list_vdso),
	    cmocka_unit_test(test_ld_list_not_found),
	    cmocka_unit_test(test_ld_list_bad_paths),
	    cmocka_unit_test(test_ld_list_bounds),
	    cmocka_unit_test(test_elf_interp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
