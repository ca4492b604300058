/* test_config.c - option validation: --serial parsing, cpus and memory ranges against host limits, CPU template files.
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

#include "brisk/config.h"
#include "brisk/devkinds.h"
#include "brisk/devmgr.h"
#include "brisk/layout.h"
#include "brisk/run_opts.h"
#include "brisk/virtio.h"

#define MiB (1ULL << 20)

static void test_defaults(void **state)
{
	struct vm_config c;
	char err[256];

	(void)state;
	config_defaults(&c);
	assert_int_equal(c.cpus, 1);
	assert_int_equal(c.memory, 128 * MiB);
	assert_int_equal(c.serial, SERIAL_STDIO);
	assert_null(c.kernel);
	assert_int_equal(config_validate(&c, 2, 1ULL << 34, err, sizeof(err)), 0);
}

static void test_serial(void **state)
{
	struct vm_config c;

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_parse_serial("none", &c), 0);
	assert_int_equal(c.serial, SERIAL_NONE);
	assert_int_equal(config_parse_serial("file:/tmp/x", &c), 0);
	assert_int_equal(c.serial, SERIAL_FILE);
	assert_string_equal(c.serial_path, "/tmp/x");
	assert_int_equal(config_parse_serial("stdio", &c), 0);
	assert_int_equal(c.serial, SERIAL_STDIO);
	assert_int_equal(config_parse_serial("file:", &c), -EINVAL);
	assert_int_equal(config_parse_serial("tcp:1234", &c), -EINVAL);
	assert_int_equal(config_parse_serial("", &c), -EINVAL);
}

/* --working-set (and the load's working_set): record=MS, wait or off; the last one given decides off/wait. */
static void test_working_set(void **state)
{
	struct vm_config c;

	(void)state;
	config_defaults(&c);
	assert_false(c.ws_no_prefetch || c.ws_prefetch_wait || c.ws_record_ms); /* prefetch on a thread */
	assert_int_equal(config_parse_working_set("wait", &c), 0);
	assert_true(c.ws_prefetch_wait && !c.ws_no_prefetch);
	assert_int_equal(config_parse_working_set("off", &c), 0);
	assert_true(c.ws_no_prefetch && !c.ws_prefetch_wait);
	assert_int_equal(config_parse_working_set("record=250", &c), 0);
	assert_int_equal(c.ws_record_ms, 250);
	assert_int_equal(config_parse_working_set("record=60001", &c), -EINVAL);
	assert_int_equal(config_parse_working_set("wait=1", &c), -EINVAL);
	assert_int_equal(config_parse_working_set("waiting", &c), -EINVAL);
	assert_int_equal(config_parse_working_set("", &c), -EINVAL);
}

static void test_limits(void **state)
{
	struct vm_config c;
	char err[256];

	(void)state;
	config_defaults(&c);
	c.cpus = 0;
	assert_int_equal(config_validate(&c, 2, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--cpus 0"));
	c.cpus = 3;
	assert_int_equal(config_validate(&c, 2, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "1..2"));
	c.cpus = 2;
	assert_int_equal(config_validate(&c, 2, 0, err, sizeof(err)), 0);
	c.memory = LAYOUT_MEM_MIN - 4096;
	assert_int_equal(config_validate(&c, 2, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "too small"));
	c.memory = LAYOUT_MEM_MIN;
	assert_int_equal(config_validate(&c, 2, 0, err, sizeof(err)), 0);
	c.memory = 8ULL << 30;
	assert_int_equal(config_validate(&c, 2, 4ULL << 30, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "exceeds"));
	c.memory = 128 * MiB + 1;
	assert_int_equal(config_validate(&c, 2, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "4 KiB"));
	assert_true(config_host_memory() > 0);
}

/* The APIC ID layout is known without KVM: socket 2 of 3 x 65 cores starts at APIC ID 256 (docs/cpuid.md). */
static void test_topology_apic_ids(void **state)
{
	struct vm_config c;
	char err[256];

	(void)state;
	config_defaults(&c);
	c.cpus = 195;
	c.topology.sockets = 3;
	c.topology.cores = 65;
	c.topology.threads = 1;
	assert_int_equal(config_validate(&c, 254, 0, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--topology sockets=3,cores=65,threads=1 needs APIC ID 320 (7+0 bits per socket); "
				 "xAPIC IDs end at 254");
	c.topology.sockets = 0; /* 195 cores in one socket: IDs 0..194 */
	assert_int_equal(config_validate(&c, 254, 0, err, sizeof(err)), 0);
}

static char tmpl_path[64];

static const char *write_tmpl(const char *text)
{
	FILE *f;

	snprintf(tmpl_path, sizeof(tmpl_path), "/tmp/brisk-test-config-%d.json", (int)getpid());
	f = fopen(tmpl_path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return tmpl_path;
}

/* Validates cfg with template `name`; returns the status, message in err. */
static int validate_template(const char *name, char *err, size_t errlen)
{
	struct vm_config c;

	config_defaults(&c);
	c.cpu_template = name;
	err[0] = '\0';
	return config_validate(&c, 2, 0, err, errlen);
}

/*
 * A template file's syntax and structure are checked by
 * config_validate, which `brisk run` and `brisk cpuid` call before /dev/kvm
 * is opened, so a bad template is exit 2 even on a host without KVM. What
 * needs KVM's tables (a leaf or feature bit KVM lacks) is checked later.
 */
static void test_cpu_template_checked_before_kvm(void **state)
{
	static const struct {
		const char *json, *want;
	} bad[] = {
	    {"", "the file is empty"},
	    {"{\"cpuid\": [", "bad JSON: the text ends inside an unfinished value"},
	    {"{\"cpuid\": [{\"leaf\": 1, \"register\": \"ecx\", \"mask\": 1}]}", "cpuid[0]: missing key \"value\""},
	    {"{\"cpuid\": [], \"cpus\": 2}", "the top level: unknown key \"cpus\""},
	    {"{\"msrs\": [{\"index\": \"0x1a0\", \"value\": -1}]}", "msrs[0]: value -1 is out of range"},
	};
	char err[512], fifo[64];

	(void)state;
	assert_int_equal(validate_template(NULL, err, sizeof(err)), 0);
	assert_int_equal(validate_template("host", err, sizeof(err)), 0);
	assert_int_equal(validate_template("baseline", err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(validate_template(write_tmpl(bad[i].json), err, sizeof(err)), -EINVAL);
		if (!strstr(err, bad[i].want) || !strstr(err, tmpl_path))
			fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, bad[i].want);
	}
	/* Well-formed, but naming a leaf no KVM reports: only KVM's table can refuse it, later. */
	assert_int_equal(
	    validate_template(write_tmpl("{\"cpuid\": [{\"leaf\": \"0x1234\", \"register\": \"eax\", \"mask\": 1, "
					 "\"value\": 1}]}"),
			      err, sizeof(err)),
	    0);
	unlink(tmpl_path);
	assert_int_equal(validate_template("/nonexistent/t.json", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--cpu-template /nonexistent/t.json: no such file");
	assert_int_equal(validate_template("basline", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "built-in templates are \"host\", \"baseline\" and Firecracker's C3"));
	assert_int_equal(validate_template("/", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--cpu-template /: a directory, not a regular file");
	/* A FIFO is refused without waiting for a writer (alarm: a hang fails the test instead of stalling it). */
	snprintf(fifo, sizeof(fifo), "/tmp/brisk-test-config-fifo-%d", (int)getpid());
	assert_int_equal(mkfifo(fifo, 0600), 0);
	alarm(10);
	assert_int_equal(validate_template(fifo, err, sizeof(err)), -EINVAL);
	alarm(0);
	unlink(fifo);
	assert_non_null(strstr(err, "a FIFO, not a regular file"));
}

/* The kinds table drives the plan: kinds in table order, each kind's devices as given, the window count. */
static void test_devkinds_plan(void **state)
{
	static const char *const want[] = {"virtio-blk", "virtio-blk", "virtio-net", "virtio-rng", "virtio-console"};
	static const unsigned index[] = {0, 1, 0, 0, 0};
	struct vm_config cfg;
	struct devmgr m;
	char err[256], want_msg[256];

	(void)state;
	config_defaults(&cfg);
	assert_int_equal(config_parse_console("virtio", &cfg), 0);
	assert_int_equal(config_parse_rng(NULL, &cfg), 0);
	assert_int_equal(config_parse_net("user", &cfg, err, sizeof(err)), 0);
	assert_int_equal(config_parse_disk("a.img", &cfg, err, sizeof(err)), 0);
	assert_int_equal(config_parse_disk("b.img", &cfg, err, sizeof(err)), 0);
	assert_int_equal(devkinds_total(&cfg), 5);
	devmgr_plan(&m, &cfg);
	assert_int_equal(m.nr, 5);
	for (unsigned i = 0; i < m.nr; i++) {
		assert_string_equal(m.win[i].kind->name, want[i]);
		assert_string_equal(m.win[i].what, want[i]);
		assert_int_equal(m.win[i].index, index[i]);
	}
	assert_int_equal(devkinds_check_windows(&cfg, err, sizeof(err)), 0);
	config_release(&cfg);
	cfg.nr_disks = LAYOUT_VIRTIO_WINDOWS; /* counted only: no paths */
	assert_int_equal(devkinds_check_windows(&cfg, err, sizeof(err)), -EINVAL);
	snprintf(want_msg, sizeof(want_msg),
		 "%d virtio devices (--disk, --net, --vsock, --rng, --console virtio, --balloon): at most %d",
		 LAYOUT_VIRTIO_WINDOWS + 3, LAYOUT_VIRTIO_WINDOWS);
	assert_string_equal(err, want_msg);
}

/*
 * --disk PATH[,opts]: the path held out of line, owned by the configuration; a refused option or path leaves
 * nothing allocated (the ASan build's leak check fails otherwise); config_copy owns copies; config_release
 * frees them.
 */
static void test_disk_paths(void **state)
{
	struct vm_config cfg, copy;
	char err[256], *longest = malloc(VM_DISK_PATH_MAX + 1);

	(void)state;
	assert_non_null(longest);
	config_defaults(&cfg);
	assert_true(sizeof(cfg) < 8192); /* no inline path arrays: a copy touches two pages, not 17 */
	assert_int_equal(config_parse_disk("/d/a.img,ro,id=root", &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.disk[0].path, "/d/a.img");
	assert_true(cfg.disk[0].ro);
	assert_string_equal(cfg.disk[0].id, "root");
	assert_int_equal(config_parse_disk("/d/b.img,bogus", &cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unknown option 'bogus'"));
	assert_int_equal(config_parse_disk(",ro", &cfg, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "a disk needs a PATH");
	memset(longest, 'p', VM_DISK_PATH_MAX);
	longest[VM_DISK_PATH_MAX] = 0;
	assert_int_equal(config_parse_disk(longest, &cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "PATH longer than 4095 bytes"));
	longest[VM_DISK_PATH_MAX - 1] = 0; /* 4095 bytes: the longest accepted */
	assert_int_equal(config_parse_disk(longest, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.nr_disks, 2);
	assert_int_equal(strlen(cfg.disk[1].path), VM_DISK_PATH_MAX - 1);
	assert_int_equal(config_disk_path(&cfg.disk[1], "x\0y", 3), -EINVAL); /* an embedded NUL */
	assert_int_equal(config_disk_path(&cfg.disk[1], "", 0), -EINVAL);
	assert_int_equal(strlen(cfg.disk[1].path), VM_DISK_PATH_MAX - 1); /* unchanged by a refusal */
	assert_int_equal(config_disk_path(&cfg.disk[1], "/d/c.img,ro", 8), 0);
	assert_string_equal(cfg.disk[1].path, "/d/c.img");
	assert_int_equal(config_copy(&copy, &cfg), 0);
	assert_ptr_not_equal(copy.disk[0].path, cfg.disk[0].path);
	config_release(&cfg);
	assert_int_equal(cfg.nr_disks, 0);
	assert_null(cfg.disk[0].path);
	config_release(&cfg); /* again: nothing to free */
	assert_string_equal(copy.disk[0].path, "/d/a.img");
	assert_string_equal(copy.disk[1].path, "/d/c.img");
	config_release(&copy);
	free(longest);
}

/* Every kind has its run option (getopt value DEVKIND_OPT_BASE + row), a distinct name and snapshot device ID. */
static void test_devkinds_options(void **state)
{
	(void)state;
	assert_true(devkinds_nr <= DEVKINDS_MAX);
	for (unsigned k = 0; k < devkinds_nr; k++) {
		const struct option *o = run_options();

		while (o->name && strcmp(o->name, devkinds[k].option) != 0)
			o++;
		assert_non_null(o->name);
		assert_int_equal(o->val, DEVKIND_OPT_BASE + (int)k);
		assert_int_equal(o->has_arg, devkinds[k].has_arg);
		assert_ptr_equal(devkind_by_opt(o->val), &devkinds[k]);
		assert_non_null(strstr(devkinds[k].help, devkinds[k].option));
		for (unsigned j = 0; j < k; j++) {
			assert_string_not_equal(devkinds[j].name, devkinds[k].name);
			assert_int_not_equal(devkinds[j].snap_id, devkinds[k].snap_id);
		}
	}
	assert_null(devkind_by_opt(DEVKIND_OPT_BASE - 1));
	assert_null(devkind_by_opt(DEVKIND_OPT_BASE + (int)devkinds_nr));
	assert_int_equal(devkinds[0].snap_id, VIRTIO_ID_BLOCK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),	      cmocka_unit_test(test_serial),
	    cmocka_unit_test(test_working_set),	      cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_topology_apic_ids), cmocka_unit_test(test_cpu_template_checked_before_kvm),
	    cmocka_unit_test(test_devkinds_plan),     cmocka_unit_test(test_disk_paths),
	    cmocka_unit_test(test_devkinds_options),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
