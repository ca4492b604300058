/* test_fc_config.c - Firecracker-compatible configuration: every API body, the config file, finalize, GET round trip.
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

#include "brisk/api.h"
#include "brisk/api_link.h"
#include "brisk/config.h"
#include "brisk/fc_config.h"

#define MiB (1ULL << 20)

static char err[512];

/* Calls a body function with a string literal's text. */
#define PUT(fn, f, json)	fn(f, json, strlen(json), err, sizeof(err))
#define PATCH_BODY(json)	json, strlen(json)
#define PUT_ID(fn, f, id, json) fn(f, id, json, strlen(json), err, sizeof(err))

/* The call fails with -EINVAL, its message contains `want`, and `f` (as GET shows it) did not change. */
#define EXPECT_ERR(f, call, want)                                                                                      \
	do {                                                                                                           \
		char *before_ = fc_vm_to_json(f), *after_;                                                             \
		int r_;                                                                                                \
		err[0] = '\0';                                                                                         \
		r_ = (call);                                                                                           \
		after_ = fc_vm_to_json(f);                                                                             \
		if (r_ != -EINVAL || !strstr(err, want))                                                               \
			fail_msg("line %d: got %d \"%s\", want -EINVAL \"%s\"", __LINE__, r_, err, want);              \
		assert_string_equal(before_, after_);                                                                  \
		free(before_);                                                                                         \
		free(after_);                                                                                          \
	} while (0)

#define EXPECT_OK(call)                                                                                                \
	do {                                                                                                           \
		err[0] = '\0';                                                                                         \
		if ((call) != 0)                                                                                       \
			fail_msg("line %d: failed: %s", __LINE__, err);                                                \
	} while (0)

static int setup(void **state)
{
	struct fc_vm *f = malloc(sizeof(*f));

	if (!f)
		return -1;
	fc_vm_init(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fc_vm_free(*state);
	free(*state);
	return 0;
}

static void test_boot_source(void **state)
{
	struct fc_vm *f = *state;
	char big[5000];

	EXPECT_OK(PUT(fc_put_boot_source, f,
		      "{\"kernel_image_path\": \"/k/vmlinux\", \"boot_args\": \"console=ttyS0 reboot=k\", "
		      "\"initrd_path\": \"/k/initrd\"}"));
	assert_true(f->boot_source_set);
	assert_string_equal(f->cfg.kernel, "/k/vmlinux");
	assert_string_equal(f->cfg.cmdline, "console=ttyS0 reboot=k");
	assert_string_equal(f->cfg.initrd, "/k/initrd");
	/* A PUT replaces: what it does not give is gone. */
	EXPECT_OK(PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k/bzImage\", \"boot_args\": \"\"}"));
	assert_string_equal(f->cfg.kernel, "/k/bzImage");
	assert_string_equal(f->cfg.cmdline, "");
	assert_null(f->cfg.initrd);
	EXPECT_OK(PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k/bzImage\", \"initrd_path\": null}"));
	assert_null(f->cfg.cmdline);

	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"boot_args\": \"x\"}"),
		   "boot-source: kernel_image_path is required");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": 5}"),
		   "boot-source: kernel_image_path: expected a string, got int");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\", \"boot_args\": true}"),
		   "boot_args: expected a string, got boolean");
	/* linux-loader's Cmdline in Firecracker's BootConfig::new: printable ASCII, at most 2047 bytes */
	{
		char cmd[2100];

		snprintf(cmd, sizeof(cmd), "{\"kernel_image_path\": \"/k\", \"boot_args\": \"%02047u\"}", 0u);
		EXPECT_OK(PUT(fc_put_boot_source, f, cmd));
		snprintf(cmd, sizeof(cmd), "{\"kernel_image_path\": \"/k\", \"boot_args\": \"%02048u\"}", 0u);
		EXPECT_ERR(f, PUT(fc_put_boot_source, f, cmd), "boot_args: 2048 bytes, at most 2047");
	}
	EXPECT_OK(PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k/bzImage\"}"));
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\", \"boot_args\": \"x=\u00e9\"}"),
		   "boot_args: The kernel command line is invalid: a character that is not printable ASCII");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\", \"initrd_path\": [\"/i\"]}"),
		   "initrd_path: expected a string, got array");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"\"}"), "kernel_image_path: empty");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\", \"foo\": 1}"),
		   "boot-source: unknown key 'foo'");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\\nx\"}"),
		   "kernel_image_path: control character at offset 2");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\\u0000x\"}"),
		   "kernel_image_path: control character at offset 2");
	memset(big, 'a', sizeof(big));
	memcpy(big, "{\"kernel_image_path\": \"", 23);
	strcpy(big + 4500, "\"}");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, big), "kernel_image_path: 4477 bytes, at most 4095");
	assert_string_equal(f->cfg.kernel, "/k/bzImage");
}

/* What every body shares: the JSON checks before any key is looked at. */
static void test_bad_json(void **state)
{
	struct fc_vm *f = *state;
	static const char nul[] = "{\"kernel_image_path\": \"/k\"}\0";

	/* The text is `len` bytes, not a C string: what follows is not looked at (an HTTP body has no NUL). */
	EXPECT_OK(fc_put_boot_source(f, "{\"kernel_image_path\": \"/k\"}XYZ", 27, err, sizeof(err)));
	EXPECT_ERR(f, fc_put_boot_source(f, "{\"kernel_image_path\": \"/k\"}XYZ", 26, err, sizeof(err)),
		   "the text ends inside an unfinished value");
	EXPECT_ERR(f, fc_put_boot_source(f, "   ", 0, err, sizeof(err)), "empty body");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, ""), "boot-source: empty body");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, " \n"), "empty body");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": "), "bad JSON: the text ends inside");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\" \"/k\"}"), "bad JSON at byte 21");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\"} x"),
		   "bad JSON at byte 28: trailing data after the object");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\"}{}"), "trailing data");
	EXPECT_ERR(f, fc_put_boot_source(f, nul, sizeof(nul), err, sizeof(err)), "bad JSON at byte 27: NUL byte");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "[1]"), "expected a JSON object, got array");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "\"x\""), "expected a JSON object, got string");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\", \"kernel_image_path\": \"/j\"}"),
		   "duplicate key 'kernel_image_path'");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{'kernel_image_path': 1}"), "single-quoted string");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image\\u005fpath\": \"/k\"}"), "escape sequence");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\x01\"}"),
		   "control character in a string");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\xff\"}"), "bad JSON");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\",}"), "bad JSON at byte 27");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{/* c */ \"kernel_image_path\": \"/k\"}"), "bad JSON at byte 1");
	EXPECT_ERR(f, PUT(fc_put_boot_source, f, "{\"a\":[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}"), "bad JSON");
	/* Duplicates are found in nested objects too, and equal keys in sibling objects are fine. */
	EXPECT_ERR(f, PUT(fc_put_entropy, f, "{\"rate_limiter\": {\"ops\": null, \"ops\": null}}"),
		   "duplicate key 'ops'");
	EXPECT_OK(PUT(fc_put_entropy, f,
		      "{\"rate_limiter\": {\"bandwidth\": {\"size\": 1000, \"refill_time\": 1000}, \"ops\": null}}"));
	EXPECT_ERR(f, fc_put_boot_source(f, "{}", FC_JSON_MAX + 1, err, sizeof(err)), "at most 1048576");
	EXPECT_ERR(f,
		   PUT(fc_put_boot_source, f,
		       "{\"a0\":0,\"a1\":0,\"a2\":0,\"a3\":0,\"a4\":0,\"a5\":0,\"a6\":0,\"a7\":0,\"a8\":0,\"a9\":0,"
		       "\"b0\":0,\"b1\":0,\"b2\":0,\"b3\":0,\"b4\":0,\"b5\":0,\"b6\":0,\"b7\":0,\"b8\":0,\"b9\":0,"
		       "\"c0\":0,\"c1\":0,\"c2\":0,\"c3\":0,\"c4\":0,\"c5\":0,\"c6\":0,\"c7\":0,\"c8\":0,\"c9\":0,"
		       "\"d0\":0,\"d1\":0,\"d2\":0}"),
		   "more than 32 members");
}

static void test_machine_config_put(void **state)
{
	struct fc_vm *f = *state;

	EXPECT_OK(PUT(fc_put_machine_config, f,
		      "{\"vcpu_count\": 4, \"mem_size_mib\": 512, \"smt\": true, \"track_dirty_pages\": false, "
		      "\"cpu_template\": \"None\", \"huge_pages\": \"2M\"}"));
	assert_int_equal(f->cfg.cpus, 4);
	assert_int_equal(f->cfg.memory, 512 * MiB);
	assert_true(f->smt);
	assert_int_equal(f->cfg.topology.sockets, 1);
	assert_int_equal(f->cfg.topology.cores, 2);
	assert_int_equal(f->cfg.topology.threads, 2);
	assert_true(f->cfg.hugetlbfs); /* "2M": hugetlbfs pages, as Firecracker */
	assert_false(f->cfg.hugepages);
	assert_null(f->cfg.cpu_template);
	/* PUT replaces: smt and huge_pages back to their defaults. */
	EXPECT_OK(PUT(fc_put_machine_config, f, "{\"vcpu_count\": 3, \"mem_size_mib\": 129}"));
	assert_int_equal(f->cfg.cpus, 3);
	assert_int_equal(f->cfg.memory, 129 * MiB);
	assert_false(f->smt);
	assert_int_equal(f->cfg.topology.threads, 0);
	assert_false(f->cfg.hugepages);
	assert_false(f->cfg.hugetlbfs);
	EXPECT_OK(PUT(fc_put_machine_config, f, "{\"vcpu_count\": 1, \"mem_size_mib\": 128, \"smt\": true}"));
	assert_int_equal(f->cfg.topology.threads, 0); /* one vCPU: nothing to pair */
	EXPECT_OK(PUT(fc_put_machine_config, f,
		      "{\"vcpu_count\": 254, \"mem_size_mib\": 16, \"huge_pages\": "
		      "\"Transparent\"}"));
	assert_true(f->cfg.hugepages); /* "Transparent": brisk's THP request */
	assert_false(f->cfg.hugetlbfs);

	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"mem_size_mib\": 128}"),
		   "machine-config: vcpu_count is required");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": 2}"), "machine-config: mem_size_mib is required");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": 0, \"mem_size_mib\": 128}"),
		   "machine-config: vcpu_count: 0 is out of range 1..254");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": 255, \"mem_size_mib\": 128}"),
		   "vcpu_count: 255 is out of range 1..254");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": -1, \"mem_size_mib\": 128}"),
		   "vcpu_count: -1 is out of range");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": 2.0, \"mem_size_mib\": 128}"),
		   "vcpu_count: expected an integer, got double");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": \"2\", \"mem_size_mib\": 128}"),
		   "vcpu_count: expected an integer, got string");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": 99999999999999999999, \"mem_size_mib\": 128}"),
		   "vcpu_count: 18446744073709551615 is out of range");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": 1, \"mem_size_mib\": 15}"),
		   "mem_size_mib: 15 is out of range 16..16777216");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": 1, \"mem_size_mib\": 16777217}"),
		   "mem_size_mib: 16777217 is out of range");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": 1, \"mem_size_mib\": 9223372036854775807}"),
		   "mem_size_mib: 9223372036854775807 is out of range");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": 3, \"mem_size_mib\": 128, \"smt\": true}"),
		   "smt: true needs vcpu_count 1 or an even number, got 3");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": 2, \"mem_size_mib\": 128, \"smt\": 1}"),
		   "smt: expected true or false, got int");
	/* track_dirty_pages: KVM's dirty log on the VM's RAM (cfg.track_dirty), kept for GET, as Firecracker */
	EXPECT_OK(
	    PUT(fc_put_machine_config, f, "{\"vcpu_count\": 2, \"mem_size_mib\": 128, \"track_dirty_pages\": true}"));
	assert_true(f->track_dirty_pages);
	assert_true(f->cfg.track_dirty);
	EXPECT_OK(PUT(fc_put_machine_config, f, "{\"vcpu_count\": 2, \"mem_size_mib\": 128}"));
	assert_false(f->track_dirty_pages);
	assert_false(f->cfg.track_dirty);
	EXPECT_ERR(f,
		   PUT(fc_put_machine_config, f,
		       "{\"vcpu_count\": 2, \"mem_size_mib\": 128, \"cpu_template\": "
		       "\"T9\"}"),
		   "cpu_template: unknown variant `T9`");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": 2, \"mem_size_mib\": 128, \"cpu_template\": 1}"),
		   "cpu_template: expected a string");
	EXPECT_ERR(f,
		   PUT(fc_put_machine_config, f, "{\"vcpu_count\": 2, \"mem_size_mib\": 128, \"huge_pages\": \"1G\"}"),
		   "huge_pages: \"1G\" is not one of \"None\", \"2M\", \"Transparent\"");
	EXPECT_ERR(f,
		   PUT(fc_put_machine_config, f, "{\"vcpu_count\": 2, \"mem_size_mib\": 129, \"huge_pages\": \"2M\"}"),
		   "huge_pages: \"2M\" needs an even mem_size_mib, got 129");
	EXPECT_ERR(f, PUT(fc_put_machine_config, f, "{\"vcpu_count\": 2, \"mem_size_mib\": 128, \"vcpus\": 2}"),
		   "machine-config: unknown key 'vcpus'");
}

static void test_machine_config_patch(void **state)
{
	struct fc_vm *f = *state;
	char *json;

	EXPECT_OK(PUT(fc_put_machine_config, f,
		      "{\"vcpu_count\": 2, \"mem_size_mib\": 256, \"smt\": true, "
		      "\"huge_pages\": \"2M\"}"));
	EXPECT_OK(PUT(fc_patch_machine_config, f, "{\"vcpu_count\": 6}"));
	assert_int_equal(f->cfg.cpus, 6);
	assert_int_equal(f->cfg.memory, 256 * MiB);
	assert_true(f->smt);
	assert_int_equal(f->cfg.topology.cores, 3);
	assert_true(f->cfg.hugetlbfs);
	EXPECT_OK(PUT(fc_patch_machine_config, f, "{\"mem_size_mib\": 1024, \"smt\": false}"));
	assert_int_equal(f->cfg.cpus, 6);
	assert_int_equal(f->cfg.memory, 1024 * MiB);
	assert_int_equal(f->cfg.topology.threads, 0);
	EXPECT_ERR(f, PUT(fc_patch_machine_config, f, "{}"), "machine-config: empty PATCH request");
	EXPECT_ERR(f, PUT(fc_patch_machine_config, f, "{\"smt\": null}"), "empty PATCH request");
	EXPECT_OK(PUT(fc_patch_machine_config, f, "{\"vcpu_count\": 5}"));
	EXPECT_ERR(f, PUT(fc_patch_machine_config, f, "{\"smt\": true}"), "smt: true needs vcpu_count 1 or an even");
	EXPECT_ERR(f, PUT(fc_patch_machine_config, f, "{\"mem_size_mib\": 1023}"), "needs an even mem_size_mib");
	json = fc_machine_config_json(f);
	assert_non_null(json);
	assert_non_null(strstr(json, "\"vcpu_count\":5"));
	assert_non_null(strstr(json, "\"mem_size_mib\":1024"));
	assert_non_null(strstr(json, "\"huge_pages\":\"2M\""));
	assert_non_null(strstr(json, "\"track_dirty_pages\":false"));
	free(json);
}

#define DRIVE(id, path, root) "{\"drive_id\": \"" id "\", \"path_on_host\": \"" path "\", \"is_root_device\": " root "}"

static void test_drives(void **state)
{
	struct fc_vm *f = *state;

	EXPECT_OK(PUT_ID(fc_put_drive, f, "data1", DRIVE("data1", "/d/1.img", "false")));
	EXPECT_OK(PUT_ID(fc_put_drive, f, "data2", DRIVE("data2", "/d/2.img", "false")));
	EXPECT_OK(PUT_ID(fc_put_drive, f, "rootfs",
			 "{\"drive_id\": \"rootfs\", \"path_on_host\": \"/d/root.ext4\", \"is_root_device\": true, "
			 "\"is_read_only\": true, \"partuuid\": null, \"cache_type\": \"Writeback\", \"io_engine\": "
			 "\"Async\", \"rate_limiter\": null, \"socket\": null}"));
	/* The root device goes first (/dev/vda); the others keep their order. */
	assert_int_equal(f->cfg.nr_disks, 3);
	assert_string_equal(f->drive[0].id, "rootfs");
	assert_string_equal(f->cfg.disk[0].path, "/d/root.ext4");
	assert_true(f->cfg.disk[0].ro);
	assert_int_equal(f->cfg.disk[0].cache, DISK_CACHE_WRITEBACK);
	assert_int_equal(f->drive[0].cache_type, FC_CACHE_WRITEBACK);
	assert_int_equal(f->drive[0].io_engine, FC_IO_ASYNC);
	assert_string_equal(f->drive[1].id, "data1");
	assert_string_equal(f->drive[2].id, "data2");
	assert_false(f->cfg.disk[1].ro);
	assert_int_equal(f->drive[1].cache_type, FC_CACHE_UNSAFE);
	assert_string_equal(f->cfg.disk[1].id, ""); /* the virtio-blk serial stays derived from the file */

	/* Replacing keeps the place; a replaced root device may stop being root. */
	EXPECT_OK(PUT_ID(fc_put_drive, f, "data1", DRIVE("data1", "/d/1b.img", "false")));
	assert_string_equal(f->cfg.disk[1].path, "/d/1b.img");
	assert_int_equal(f->cfg.nr_disks, 3);
	EXPECT_ERR(f, PUT_ID(fc_put_drive, f, "data2", DRIVE("data2", "/d/2.img", "true")),
		   "drives: is_root_device: drive 'rootfs' is already the root device");
	EXPECT_OK(PUT_ID(fc_put_drive, f, "rootfs", DRIVE("rootfs", "/d/root.ext4", "false")));
	EXPECT_OK(PUT_ID(fc_put_drive, f, "data2", DRIVE("data2", "/d/2.img", "true")));
	assert_string_equal(f->drive[0].id, "data2");
	assert_string_equal(f->drive[1].id, "rootfs");
	assert_string_equal(f->drive[2].id, "data1");

	/* PATCH parses (the API applies it after boot): path_on_host and/or rate_limiter of an existing drive. */
	{
		struct fc_drive_patch p;

		EXPECT_OK(fc_patch_drive(f, "data1",
					 PATCH_BODY("{\"drive_id\": \"data1\", \"path_on_host\": \"/d/1c.img\"}"), &p,
					 err, sizeof(err)));
		assert_int_equal(p.index, 2);
		assert_string_equal(p.path, "/d/1c.img");
		assert_false(p.has_rl);
		assert_string_equal(f->cfg.disk[2].path, "/d/1b.img"); /* f unchanged */
		EXPECT_ERR(f,
			   fc_patch_drive(f, "nope", PATCH_BODY("{\"drive_id\": \"nope\", \"path_on_host\": \"/x\"}"),
					  &p, err, sizeof(err)),
			   "drives: drive_id: no drive 'nope'");
		EXPECT_ERR(f, fc_patch_drive(f, "data1", PATCH_BODY("{\"drive_id\": \"data1\"}"), &p, err, sizeof(err)),
			   "give path_on_host or rate_limiter");
		EXPECT_ERR(f,
			   fc_patch_drive(f, "data1", PATCH_BODY("{\"drive_id\": \"data1\", \"is_read_only\": true}"),
					  &p, err, sizeof(err)),
			   "unknown key 'is_read_only'");
		/* {} is a limiter that changes nothing (Kata sends it); a bucket given replaces, an absent one stays */
		EXPECT_OK(fc_patch_drive(f, "data1", PATCH_BODY("{\"drive_id\": \"data1\", \"rate_limiter\": {}}"), &p,
					 err, sizeof(err)));
		assert_true(p.has_rl);
		assert_false(p.has[0] || p.has[1]);
		assert_string_equal(p.path, "");
		EXPECT_OK(
		    fc_patch_drive(f, "data1",
				   PATCH_BODY("{\"drive_id\": \"data1\", \"rate_limiter\": {\"ops\": {\"size\": 1, "
					      "\"refill_time\": 1, \"one_time_burst\": 5}, \"bandwidth\": null}}"),
				   &p, err, sizeof(err)));
		assert_true(p.has[1] && !p.has[0]);
		assert_int_equal(p.rl.ops.size, 1);
		assert_int_equal(p.rl.ops.one_time_burst, 5);
		fc_rl_update(&f->cfg.disk[2].rl, &p.rl, p.has);
		assert_int_equal(f->cfg.disk[2].rl.ops.refill_ms, 1);
		EXPECT_ERR(
		    f,
		    fc_patch_drive(f, "data1",
				   PATCH_BODY("{\"drive_id\": \"data1\", \"rate_limiter\": {\"ops\": {\"size\": 1}}}"),
				   &p, err, sizeof(err)),
		    "drives: rate_limiter.ops: refill_time is required");
	}
}

static void test_drive_errors(void **state)
{
	struct fc_vm *f = *state;
	char id[8], body[128];

	EXPECT_ERR(f, PUT_ID(fc_put_drive, f, "a", DRIVE("b", "/x", "false")),
		   "drives: The id from the path [a] does not match the id from the body [b]!");
	EXPECT_ERR(f, PUT_ID(fc_put_drive, f, "a-b", DRIVE("a-b", "/x", "false")),
		   "API Resource IDs can only contain alphanumeric characters and underscores");
	EXPECT_ERR(f, PUT_ID(fc_put_drive, f, NULL, DRIVE("a b", "/x", "false")),
		   "drive_id: 'a b' is not 1..64 characters");
	EXPECT_ERR(f,
		   PUT_ID(fc_put_drive, f, NULL,
			  DRIVE("a123456789a123456789a123456789a123456789a123456789a123456789abcde", "/x", "false")),
		   "drive_id: 65 bytes, at most 64");
	EXPECT_ERR(f, PUT_ID(fc_put_drive, f, "a", "{\"path_on_host\": \"/x\", \"is_root_device\": false}"),
		   "drive_id is required");
	EXPECT_ERR(f, PUT_ID(fc_put_drive, f, "a", "{\"drive_id\": \"a\", \"is_root_device\": false}"),
		   "drives: path_on_host is required");
	EXPECT_ERR(f, PUT_ID(fc_put_drive, f, "a", "{\"drive_id\": \"a\", \"path_on_host\": \"/x\"}"),
		   "drives: is_root_device is required");
	EXPECT_ERR(f, PUT_ID(fc_put_drive, f, "a", DRIVE("a", "/x", "\"yes\"")),
		   "is_root_device: expected true or false, got string");
	EXPECT_ERR(
	    f,
	    PUT_ID(fc_put_drive, f, "a",
		   "{\"drive_id\": \"a\", \"path_on_host\": \"/x\", \"is_root_device\": false, \"is_read_only\": 0}"),
	    "is_read_only: expected true or false");
	EXPECT_ERR(f,
		   PUT_ID(fc_put_drive, f, "a",
			  "{\"drive_id\": \"a\", \"path_on_host\": \"/x\", \"is_root_device\": false, \"cache_type\": "
			  "\"writeback\"}"),
		   "cache_type: \"writeback\" is not one of \"Unsafe\", \"Writeback\"");
	EXPECT_ERR(f,
		   PUT_ID(fc_put_drive, f, "a",
			  "{\"drive_id\": \"a\", \"path_on_host\": \"/x\", \"is_root_device\": false, \"io_engine\": "
			  "\"Uring\"}"),
		   "io_engine: \"Uring\" is not one of \"Sync\", \"Async\"");
	EXPECT_OK(
	    PUT_ID(fc_put_drive, f, "d0",
		   "{\"drive_id\": \"d0\", \"path_on_host\": \"/x\", \"is_root_device\": false, \"rate_limiter\": "
		   "{\"bandwidth\": {\"size\": 1, \"refill_time\": 1}}}"));
	assert_int_equal(f->cfg.disk[f->cfg.nr_disks - 1].rl.bw.size, 1);
	EXPECT_ERR(
	    f,
	    PUT_ID(fc_put_drive, f, "a",
		   "{\"drive_id\": \"a\", \"path_on_host\": \"/x\", \"is_root_device\": false, \"rate_limiter\": "
		   "{\"bandwidth\": {\"size\": -1, \"refill_time\": 1}}}"),
	    "drives: rate_limiter.bandwidth: size");
	EXPECT_ERR(f,
		   PUT_ID(fc_put_drive, f, "a", "{\"drive_id\": \"a\", \"is_root_device\": false, \"socket\": \"/s\"}"),
		   "socket is not supported: vhost-user");
	EXPECT_ERR(f,
		   PUT_ID(fc_put_drive, f, "a",
			  "{\"drive_id\": \"a\", \"path_on_host\": \"/x\", \"is_root_device\": true, \"partuuid\": "
			  "\"x y\"}"),
		   "partuuid: 'x y' has characters other than");
	EXPECT_ERR(f,
		   PUT_ID(fc_put_drive, f, "a",
			  "{\"drive_id\": \"a\", \"path_on_host\": \"/x\", \"is_root_device\": "
			  "false, \"foo\": 1}"),
		   "drives: unknown key 'foo'");
	for (unsigned i = 0; i < VM_MAX_DISKS; i++) {
		snprintf(id, sizeof(id), "d%u", i);
		snprintf(body, sizeof(body), DRIVE("%s", "/x", "false"), id);
		EXPECT_OK(fc_put_drive(f, id, body, strlen(body), err, sizeof(err)));
	}
	EXPECT_ERR(f, PUT_ID(fc_put_drive, f, "d16", DRIVE("d16", "/x", "false")),
		   "'d16' would be drive 17: at most 16");
	EXPECT_OK(PUT_ID(fc_put_drive, f, "d3", DRIVE("d3", "/y", "false"))); /* a replacement still fits */
	assert_int_equal(f->cfg.nr_disks, VM_MAX_DISKS);
}

/* InstanceStart: the boot source is needed, and the root device's words go on the command line. */
static void test_finalize_root(void **state)
{
	struct fc_vm *f = *state;

	EXPECT_ERR(f, fc_vm_finalize(f, err, sizeof(err)), "no boot source");
	EXPECT_OK(PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\", \"boot_args\": \"console=ttyS0\"}"));
	EXPECT_OK(fc_vm_finalize(f, err, sizeof(err)));
	assert_null(f->cfg.cmdline_append);
	EXPECT_OK(PUT_ID(fc_put_drive, f, "data", DRIVE("data", "/d", "false")));
	EXPECT_OK(fc_vm_finalize(f, err, sizeof(err)));
	assert_null(f->cfg.cmdline_append);
	EXPECT_OK(PUT_ID(fc_put_drive, f, "root", DRIVE("root", "/r", "true")));
	EXPECT_OK(fc_vm_finalize(f, err, sizeof(err)));
	assert_string_equal(f->cfg.cmdline_append, "root=/dev/vda rw");
	assert_string_equal(f->cfg.cmdline, "console=ttyS0");
	EXPECT_OK(
	    PUT_ID(fc_put_drive, f, "root",
		   "{\"drive_id\": \"root\", \"path_on_host\": \"/r\", \"is_root_device\": true, \"is_read_only\": "
		   "true, \"partuuid\": \"0eaa91a0-01\"}"));
	EXPECT_OK(fc_vm_finalize(f, err, sizeof(err)));
	assert_string_equal(f->cfg.cmdline_append, "root=PARTUUID=0eaa91a0-01 ro");
	EXPECT_OK(PUT_ID(fc_put_drive, f, "root", DRIVE("root", "/r", "false")));
	EXPECT_OK(fc_vm_finalize(f, err, sizeof(err)));
	assert_null(f->cfg.cmdline_append);
	/* config_validate's checks come last: a vsock socket in a directory that does not exist. */
	EXPECT_OK(PUT(fc_put_vsock, f, "{\"guest_cid\": 3, \"uds_path\": \"/nonexistent-dir/v.sock\"}"));
	assert_int_equal(fc_vm_finalize(f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "its directory does not exist"));
}

static void test_net(void **state)
{
	struct fc_vm *f = *state;
	char id[8], body[160];

	EXPECT_OK(PUT_ID(
	    fc_put_net, f, "eth0",
	    "{\"iface_id\": \"eth0\", \"host_dev_name\": \"tap0\", \"guest_mac\": \"AA:FC:00:00:00:01\", "
	    "\"rx_rate_limiter\": {}, \"tx_rate_limiter\": {\"bandwidth\": {\"size\": 0, \"refill_time\": 100}}}"));
	EXPECT_OK(PUT_ID(fc_put_net, f, "eth1", "{\"iface_id\": \"eth1\", \"host_dev_name\": \"tap1\"}"));
	assert_int_equal(f->cfg.nr_nets, 2);
	assert_int_equal(f->cfg.net[0].kind, NET_TAP);
	assert_string_equal(f->cfg.net[0].tap, "tap0");
	assert_true(f->cfg.net[0].has_mac);
	assert_memory_equal(f->cfg.net[0].mac, "\xaa\xfc\x00\x00\x00\x01", 6);
	assert_false(f->cfg.net[1].has_mac);
	assert_string_equal(f->net[1].id, "eth1");
	/* A replacement keeps its place; its own MAC is not a conflict. */
	EXPECT_OK(
	    PUT_ID(fc_put_net, f, "eth0",
		   "{\"iface_id\": \"eth0\", \"host_dev_name\": \"tap9\", \"guest_mac\": \"aa:fc:00:00:00:01\"}"));
	assert_string_equal(f->cfg.net[0].tap, "tap9");
	assert_string_equal(f->net[0].id, "eth0");

	EXPECT_ERR(
	    f,
	    PUT_ID(fc_put_net, f, "eth1",
		   "{\"iface_id\": \"eth1\", \"host_dev_name\": \"tap1\", \"guest_mac\": \"aa:fc:00:00:00:01\"}"),
	    "network-interfaces: The MAC address is already in use: aa:fc:00:00:00:01 (interface 'eth0')");
	/* any six hex bytes, as Firecracker's MacAddr (a multicast address is the guest's business) */
	EXPECT_OK(
	    PUT_ID(fc_put_net, f, "eth2",
		   "{\"iface_id\": \"eth2\", \"host_dev_name\": \"tap2\", \"guest_mac\": \"01:00:00:00:00:01\"}"));
	assert_memory_equal(f->cfg.net[2].mac, "\x01\x00\x00\x00\x00\x01", 6);
	EXPECT_ERR(f,
		   PUT_ID(fc_put_net, f, "eth2",
			  "{\"iface_id\": \"eth2\", \"host_dev_name\": \"tap2\", \"guest_mac\": \"aa:bb:cc:dd:ee\"}"),
		   "guest_mac: 'aa:bb:cc:dd:ee' is not six hex bytes");
	EXPECT_ERR(
	    f,
	    PUT_ID(fc_put_net, f, "eth2",
		   "{\"iface_id\": \"eth2\", \"host_dev_name\": \"tap2\", \"guest_mac\": \"aa:bb:cc:dd:ee:ff:00\"}"),
	    "is not six hex bytes");
	EXPECT_ERR(
	    f,
	    PUT_ID(fc_put_net, f, "eth2",
		   "{\"iface_id\": \"eth2\", \"host_dev_name\": \"tap2\", \"guest_mac\": \"aa-bb-cc-dd-ee-ff\"}"),
	    "is not six hex bytes");
	EXPECT_ERR(f, PUT_ID(fc_put_net, f, "eth2", "{\"iface_id\": \"eth2\", \"host_dev_name\": \"a/b\"}"),
		   "host_dev_name: 'a/b' is not an interface name");
	EXPECT_ERR(f, PUT_ID(fc_put_net, f, "eth2", "{\"iface_id\": \"eth2\", \"host_dev_name\": \"..\"}"),
		   "is not an interface name");
	EXPECT_ERR(f,
		   PUT_ID(fc_put_net, f, "eth2", "{\"iface_id\": \"eth2\", \"host_dev_name\": \"tap0123456789abc\"}"),
		   "host_dev_name: 16 bytes, at most 15");
	EXPECT_ERR(f, PUT_ID(fc_put_net, f, "eth2", "{\"iface_id\": \"eth2\"}"), "host_dev_name is required");
	EXPECT_ERR(f, PUT_ID(fc_put_net, f, "eth2", "{\"host_dev_name\": \"tap2\"}"), "iface_id is required");
	EXPECT_ERR(f, PUT_ID(fc_put_net, f, "eth3", "{\"iface_id\": \"eth2\", \"host_dev_name\": \"tap2\"}"),
		   "The id from the path [eth3] does not match the id from the body [eth2]!");
	/* v1.7.0's NetworkInterfaceConfig has no mtu: an unknown field (deny_unknown_fields) */
	EXPECT_ERR(
	    f, PUT_ID(fc_put_net, f, "eth2", "{\"iface_id\": \"eth2\", \"host_dev_name\": \"tap2\", \"mtu\": null}"),
	    "unknown key 'mtu'");
	EXPECT_OK(PUT_ID(fc_put_net, f, "eth2",
			 "{\"iface_id\": \"eth2\", \"host_dev_name\": \"tap2\", \"tx_rate_limiter\": {\"bandwidth\": "
			 "{\"size\": 10, \"refill_time\": 100}}}"));
	assert_int_equal(f->cfg.net[f->cfg.nr_nets - 1].tx_rl.bw.size, 10);
	assert_int_equal(f->cfg.net[f->cfg.nr_nets - 1].rx_rl.bw.size, 0);
	EXPECT_ERR(f,
		   PUT_ID(fc_put_net, f, "eth2",
			  "{\"iface_id\": \"eth2\", \"host_dev_name\": \"tap2\", \"tx_rate_limiter\": {\"burst\": 1}}"),
		   "tx_rate_limiter: unknown key 'burst'");
	EXPECT_ERR(f,
		   PUT_ID(fc_put_net, f, "eth2",
			  "{\"iface_id\": \"eth2\", \"host_dev_name\": \"tap2\", \"rx_rate_limiter\": {\"ops\": "
			  "{\"size\": 0}}}"),
		   "rx_rate_limiter.ops: refill_time is required");
	EXPECT_ERR(f, PUT_ID(fc_put_net, f, "eth2", "{\"iface_id\": \"eth2\", \"host_dev_name\": 7}"),
		   "host_dev_name: expected a string, got int");
	EXPECT_ERR(f, PUT_ID(fc_put_net, f, "eth2", "{\"iface_id\": \"eth2\", \"host_dev_name\": \"t\", \"x\": 1}"),
		   "network-interfaces: unknown key 'x'");
	for (unsigned i = 3; i < VM_MAX_NETS; i++) { /* eth0, eth1, eth2 */
		snprintf(id, sizeof(id), "n%u", i);
		snprintf(body, sizeof(body), "{\"iface_id\": \"%s\", \"host_dev_name\": \"tap%u\"}", id, i);
		EXPECT_OK(fc_put_net(f, id, body, strlen(body), err, sizeof(err)));
	}
	EXPECT_ERR(f, PUT_ID(fc_put_net, f, "n8", "{\"iface_id\": \"n8\", \"host_dev_name\": \"tap8\"}"),
		   "'n8' would be interface 9: at most 8");
}

static void test_vsock(void **state)
{
	struct fc_vm *f = *state;
	char body[200];

	EXPECT_OK(PUT(fc_put_vsock, f, "{\"vsock_id\": \"vsock0\", \"guest_cid\": 3, \"uds_path\": \"/tmp/v.sock\"}"));
	assert_int_equal(f->cfg.vsock.cid, 3);
	assert_string_equal(f->cfg.vsock.uds, "/tmp/v.sock");
	assert_string_equal(f->vsock_id, "vsock0");
	EXPECT_OK(PUT(fc_put_vsock, f, "{\"guest_cid\": 4294967294, \"uds_path\": \"v.sock\"}"));
	assert_int_equal(f->cfg.vsock.cid, 0xfffffffe);
	assert_string_equal(f->vsock_id, "");

	/* any u32, as Firecracker's VsockDeviceConfig (no check at PUT or boot); an absent one is refused */
	for (unsigned cid = 0; cid < 3; cid++) {
		snprintf(body, sizeof(body), "{\"guest_cid\": %u, \"uds_path\": \"/v\"}", cid);
		EXPECT_OK(PUT(fc_put_vsock, f, body));
		assert_int_equal(f->cfg.vsock.cid, cid);
		assert_string_equal(f->cfg.vsock.uds, "/v");
	}
	EXPECT_OK(PUT(fc_put_vsock, f, "{\"guest_cid\": 4294967295, \"uds_path\": \"/v\"}"));
	EXPECT_ERR(f, PUT(fc_put_vsock, f, "{\"guest_cid\": 4294967296, \"uds_path\": \"/v\"}"),
		   "guest_cid: 4294967296 is out of range");
	EXPECT_ERR(f, PUT(fc_put_vsock, f, "{\"guest_cid\": -1, \"uds_path\": \"/v\"}"),
		   "guest_cid: -1 is out of range");
	EXPECT_ERR(f, PUT(fc_put_vsock, f, "{\"uds_path\": \"/v\"}"), "vsock: guest_cid is required");
	EXPECT_ERR(f, PUT(fc_put_vsock, f, "{\"guest_cid\": 3}"), "vsock: uds_path is required");
	EXPECT_ERR(f, PUT(fc_put_vsock, f, "{\"guest_cid\": \"3\", \"uds_path\": \"/v\"}"),
		   "guest_cid: expected an integer, got string");
	/* vsock_id: deprecated and not checked by Firecracker (flintlock's have '-'); kept for GET when it fits */
	EXPECT_OK(PUT(fc_put_vsock, f, "{\"guest_cid\": 3, \"uds_path\": \"/v\", \"vsock_id\": \"vm-1.a b\"}"));
	assert_string_equal(f->vsock_id, "vm-1.a b");
	EXPECT_ERR(f, PUT(fc_put_vsock, f, "{\"guest_cid\": 3, \"uds_path\": \"/v\", \"vsock_id\": 1}"),
		   "vsock_id: expected a string");
	snprintf(body, sizeof(body), "{\"guest_cid\": 3, \"uds_path\": \"/%096d\"}", 0);
	EXPECT_ERR(f, PUT(fc_put_vsock, f, body), "uds_path: 97 bytes, at most 96");
	EXPECT_ERR(f, PUT(fc_put_vsock, f, "{\"guest_cid\": 3, \"uds_path\": \"/v\", \"cid\": 3}"),
		   "vsock: unknown key 'cid'");
}

static void test_entropy(void **state)
{
	struct fc_vm *f = *state;

	EXPECT_OK(PUT(fc_put_entropy, f, "{}"));
	assert_int_equal(f->cfg.rng_rate, VM_RNG_DEFAULT_RATE);
	EXPECT_OK(
	    PUT(fc_put_entropy, f,
		"{\"rate_limiter\": {\"bandwidth\": {\"size\": 1000, \"refill_time\": 100, \"one_time_burst\": 0}}}"));
	assert_int_equal(f->cfg.rng_rate, 10000);
	EXPECT_OK(PUT(fc_put_entropy, f, "{\"rate_limiter\": null}"));
	assert_int_equal(f->cfg.rng_rate, VM_RNG_DEFAULT_RATE);
	EXPECT_OK(PUT(fc_put_entropy, f, "{\"rate_limiter\": {\"bandwidth\": null, \"ops\": null}}"));
	assert_int_equal(f->cfg.rng_rate, VM_RNG_DEFAULT_RATE);
	EXPECT_OK(PUT(fc_put_entropy, f,
		      "{\"rate_limiter\": {\"bandwidth\": {\"size\": 18446744073709551, \"refill_time\": 1}}}"));
	assert_int_equal(f->cfg.rng_rate, 18446744073709551000ULL);

	/* Firecracker's TokenBucketConfig: any u64; size or refill_time 0 is no bucket, which here is brisk's
	 * default rate (the device is always throttled, docs/security.md case 12) */
	EXPECT_OK(PUT(fc_put_entropy, f, "{\"rate_limiter\": {\"bandwidth\": {\"size\": 0, \"refill_time\": 1}}}"));
	assert_int_equal(f->cfg.rng_rate, VM_RNG_DEFAULT_RATE);
	assert_false(rl_config_limits(&f->cfg.rng_rl));
	EXPECT_OK(PUT(fc_put_entropy, f, "{\"rate_limiter\": {\"bandwidth\": {\"size\": 5, \"refill_time\": 0}}}"));
	assert_int_equal(f->cfg.rng_rate, VM_RNG_DEFAULT_RATE);
	EXPECT_OK(PUT(fc_put_entropy, f,
		      "{\"rate_limiter\": {\"bandwidth\": {\"size\": 18446744073709551615, \"refill_time\": 1}}}"));
	assert_int_equal(f->cfg.rng_rate, UINT64_MAX);
	/* a refill_time whose nanoseconds overflow u64: no bucket, as TokenBucket::new's checked_mul */
	EXPECT_OK(PUT(fc_put_entropy, f,
		      "{\"rate_limiter\": {\"bandwidth\": {\"size\": 1, \"refill_time\": 18446744073709551615}}}"));
	assert_int_equal(f->cfg.rng_rate, VM_RNG_DEFAULT_RATE);
	EXPECT_OK(PUT(fc_put_entropy, f, "{\"rate_limiter\": {\"bandwidth\": {\"size\": 1, \"refill_time\": 2000}}}"));
	assert_int_equal(f->cfg.rng_rate, 1); /* below 1 byte/s: the snapshot's rate rounds up */
	EXPECT_OK(PUT(fc_put_entropy, f,
		      "{\"rate_limiter\": {\"bandwidth\": {\"size\": 1, \"refill_time\": 1, \"one_time_burst\": 5}, "
		      "\"ops\": {\"size\": 1, \"refill_time\": 1}}}"));
	assert_int_equal(f->cfg.rng_rl.bw.one_time_burst, 5);
	assert_int_equal(f->cfg.rng_rl.ops.size, 1);
	EXPECT_ERR(f, PUT(fc_put_entropy, f, "{\"rate_limiter\": {\"bandwidth\": {\"size\": -1, \"refill_time\": 1}}}"),
		   "size");
	EXPECT_ERR(f, PUT(fc_put_entropy, f, "{\"rate_limiter\": {\"bandwidth\": {\"size\": 5}}}"),
		   "rate_limiter.bandwidth: refill_time is required");
	EXPECT_ERR(f, PUT(fc_put_entropy, f, "{\"rate_limiter\": {\"bandwidth\": {\"refill_time\": 5}}}"),
		   "bandwidth: size is required");
	EXPECT_ERR(f, PUT(fc_put_entropy, f, "{\"rate_limiter\": {\"bw\": {}}}"), "rate_limiter: unknown key 'bw'");
	EXPECT_ERR(f, PUT(fc_put_entropy, f, "{\"rate_limiter\": 5}"),
		   "entropy: rate_limiter: expected an object, got int");
	EXPECT_ERR(f, PUT(fc_put_entropy, f, "{\"rate_limiter\": {\"bandwidth\": []}}"),
		   "bandwidth: expected an object, got array");
	EXPECT_ERR(f, PUT(fc_put_entropy, f, "{\"rate_limiter\": {\"bw\": {}}}"), "rate_limiter: unknown key 'bw'");
	EXPECT_ERR(f, PUT(fc_put_entropy, f, "{\"rate\": 5}"), "entropy: unknown key 'rate'");
}

static void test_logger_metrics(void **state)
{
	struct fc_vm *f = *state;

	EXPECT_OK(
	    PUT(fc_put_logger, f,
		"{\"log_path\": \"/tmp/fc.log\", \"level\": \"Debug\", \"show_level\": true, \"show_log_origin\": "
		"true, \"module\": \"api_server::request\"}"));
	assert_true(f->logger.configured);
	assert_string_equal(f->logger.log_path, "/tmp/fc.log");
	assert_int_equal(f->logger.level, FC_LOG_DEBUG);
	assert_true(f->logger.show_level);
	assert_true(f->logger.show_log_origin);
	assert_string_equal(f->logger.module, "api_server::request");
	/* Firecracker updates the given fields; level is case-insensitive and "warn" means Warning. */
	EXPECT_OK(PUT(fc_put_logger, f, "{\"level\": \"warn\"}"));
	assert_int_equal(f->logger.level, FC_LOG_WARNING);
	assert_string_equal(f->logger.log_path, "/tmp/fc.log");
	EXPECT_OK(PUT(fc_put_logger, f, "{\"level\": \"OFF\", \"log_path\": \"/tmp/b.log\"}"));
	assert_int_equal(f->logger.level, FC_LOG_OFF);
	assert_string_equal(f->logger.log_path, "/tmp/b.log");
	EXPECT_ERR(f, PUT(fc_put_logger, f, "{\"level\": \"Verbose\"}"), "logger: level: \"Verbose\" is not one of");
	EXPECT_ERR(f, PUT(fc_put_logger, f, "{\"level\": \"\\u0007\"}"), "level: a value with control characters");
	EXPECT_ERR(f, PUT(fc_put_logger, f, "{\"show_level\": \"yes\"}"), "show_level: expected true or false");
	EXPECT_ERR(f, PUT(fc_put_logger, f, "{\"log_path\": 1}"), "log_path: expected a string");
	EXPECT_ERR(f, PUT(fc_put_logger, f, "{\"path\": \"/x\"}"), "logger: unknown key 'path'");

	EXPECT_OK(PUT(fc_put_metrics, f, "{\"metrics_path\": \"/tmp/m.fifo\", \"emit_id\": true}"));
	assert_true(f->metrics.configured);
	assert_string_equal(f->metrics.metrics_path, "/tmp/m.fifo");
	assert_true(f->metrics.emit_id);
	EXPECT_OK(PUT(fc_put_metrics, f, "{\"metrics_path\": \"/tmp/n\"}"));
	assert_false(f->metrics.emit_id);
	EXPECT_ERR(f, PUT(fc_put_metrics, f, "{}"), "metrics: metrics_path is required");
	EXPECT_ERR(f, PUT(fc_put_metrics, f, "{\"metrics_path\": \"/m\", \"properties\": {\"a\": \"b\"}}"),
		   "properties is not supported");
	EXPECT_ERR(f, PUT(fc_put_metrics, f, "{\"metrics_path\": \"/m\", \"x\": 1}"), "metrics: unknown key 'x'");
}

/* A config file with every section. */
static const char full_config[] =
    "{\n"
    "  \"boot-source\": {\"kernel_image_path\": \"/k/vmlinux\", \"boot_args\": \"console=ttyS0\", \"initrd_path\": "
    "\"/k/initrd\"},\n"
    "  \"drives\": [\n"
    "    {\"drive_id\": \"scratch\", \"path_on_host\": \"/d/s.img\", \"is_root_device\": false, \"cache_type\": "
    "\"Writeback\"},\n"
    "    {\"drive_id\": \"rootfs\", \"path_on_host\": \"/d/root.ext4\", \"is_root_device\": true, \"is_read_only\": "
    "true, \"partuuid\": \"abcd-01\", \"io_engine\": \"Async\"}\n"
    "  ],\n"
    "  \"machine-config\": {\"vcpu_count\": 2, \"mem_size_mib\": 256, \"smt\": true, \"huge_pages\": \"2M\"},\n"
    "  \"network-interfaces\": [{\"iface_id\": \"eth0\", \"host_dev_name\": \"tap0\", \"guest_mac\": "
    "\"02:00:00:00:00:05\"}, {\"iface_id\": \"eth1\", \"host_dev_name\": \"tap1\"}],\n"
    "  \"vsock\": {\"vsock_id\": \"v\", \"guest_cid\": 7, \"uds_path\": \"/tmp/fc-test-v.sock\"},\n"
    "  \"entropy\": {\"rate_limiter\": {\"bandwidth\": {\"size\": 4096, \"refill_time\": 1000}}},\n"
    "  \"logger\": {\"log_path\": \"/tmp/l\", \"level\": \"Trace\", \"show_level\": true},\n"
    "  \"metrics\": {\"metrics_path\": \"/tmp/m\"},\n"
    "  \"balloon\": null,\n"
    "  \"mmds-config\": null\n"
    "}\n";

#define CFG(json) fc_vm_load_config_json(f, json, strlen(json), err, sizeof(err))
#define BOOT	  "\"boot-source\": {\"kernel_image_path\": \"/k\"}"

static void test_config_file_sections(void **state)
{
	struct fc_vm *f = *state;

	EXPECT_OK(fc_vm_load_config_json(f, full_config, strlen(full_config), err, sizeof(err)));
	assert_string_equal(f->cfg.kernel, "/k/vmlinux");
	assert_string_equal(f->cfg.initrd, "/k/initrd");
	assert_string_equal(f->cfg.cmdline, "console=ttyS0");
	assert_int_equal(f->cfg.nr_disks, 2);
	assert_string_equal(f->drive[0].id, "rootfs");
	assert_string_equal(f->drive[1].id, "scratch");
	assert_int_equal(f->cfg.cpus, 2);
	assert_int_equal(f->cfg.memory, 256 * MiB);
	assert_int_equal(f->cfg.topology.threads, 2);
	assert_true(f->cfg.hugetlbfs);
	assert_int_equal(f->cfg.nr_nets, 2);
	assert_string_equal(f->net[1].id, "eth1");
	assert_int_equal(f->cfg.vsock.cid, 7);
	assert_int_equal(f->cfg.rng_rate, 4096);
	assert_int_equal(f->logger.level, FC_LOG_TRACE);
	assert_string_equal(f->metrics.metrics_path, "/tmp/m");
	EXPECT_OK(fc_vm_finalize(f, err, sizeof(err)));
	assert_string_equal(f->cfg.cmdline_append, "root=PARTUUID=abcd-01 ro");
	/* Only boot-source is required; a load replaces everything. */
	EXPECT_OK(CFG("{" BOOT ", \"drives\": []}"));
	assert_int_equal(f->cfg.nr_disks, 0);
	assert_int_equal(f->cfg.vsock.cid, 0);
	assert_false(f->logger.configured);
	assert_int_equal(f->cfg.cpus, 1);
}

static void test_config_file_errors(void **state)
{
	struct fc_vm *f = *state;

	EXPECT_OK(CFG("{" BOOT ", \"vsock\": {\"guest_cid\": 9, \"uds_path\": \"/tmp/x\"}}"));
	EXPECT_ERR(f, CFG("{\"drives\": []}"), "config: boot-source is required");
	EXPECT_ERR(f, CFG("{\"boot-source\": null}"), "config: boot-source is required");
	EXPECT_ERR(f, CFG("{\"boot-source\": []}"), "config: boot-source: expected an object, got array");
	EXPECT_ERR(f, CFG("{" BOOT ", \"bootsource\": {}}"), "config: unknown key 'bootsource'");
	EXPECT_ERR(f, CFG("{" BOOT ", \"balloon\": {\"amount_mib\": 1}}"),
		   "config: balloon: deflate_on_oom is required");
	EXPECT_ERR(f, CFG("{" BOOT ", \"balloon\": {\"amount_mib\": 129, \"deflate_on_oom\": true}}"),
		   "Balloon config error: Amount of pages requested is too large.");
	EXPECT_OK(CFG("{" BOOT ", \"balloon\": {\"amount_mib\": 128, \"deflate_on_oom\": true}}"));
	assert_true(f->cfg.balloon.enabled && f->cfg.balloon.amount_mib == 128);
	EXPECT_ERR(f, CFG("{" BOOT ", \"pmem\": [{}]}"), "pmem: brisk has no such device; only null or [] is accepted");
	EXPECT_OK(CFG("{" BOOT ", \"pmem\": [], \"cpu-config\": null, \"memory-hotplug\": null, \"mmds-config\": null, "
		      "\"vsock\": {\"guest_cid\": 9, \"uds_path\": \"/tmp/x\"}}"));
	EXPECT_ERR(f, CFG("{\"boot-source\": {\"kernel_image_path\": \"/k\", \"x\": 1}}"),
		   "config: boot-source: unknown key 'x'");
	EXPECT_ERR(f, CFG("{" BOOT ", \"drives\": {}}"), "config: drives: expected an array, got object");
	EXPECT_ERR(f, CFG("{" BOOT ", \"drives\": [5]}"), "config: drives[0]: expected an object, got int");
	EXPECT_ERR(f,
		   CFG("{" BOOT ", \"drives\": [" DRIVE("a", "/a", "true") ", {\"drive_id\": \"b\", \"path_on_host\": "
									   "\"/b\", \"is_root_device\": \"no\"}]}"),
		   "config: drives[1]: is_root_device: expected true or false, got string");
	EXPECT_ERR(f, CFG("{" BOOT ", \"drives\": [" DRIVE("a", "/a", "true") ", " DRIVE("b", "/b", "true") "]}"),
		   "config: drives[1]: is_root_device: drive 'a' is already the root device");
	EXPECT_ERR(f, CFG("{" BOOT ", \"network-interfaces\": [{\"iface_id\": \"e\"}]}"),
		   "config: network-interfaces[0]: host_dev_name is required");
	EXPECT_ERR(f, CFG("{" BOOT ", \"machine-config\": {\"vcpu_count\": 1}}"),
		   "config: machine-config: mem_size_mib is required");
	EXPECT_ERR(f, CFG("{" BOOT ", \"vsock\": {\"guest_cid\": 1}}"), "config: vsock: uds_path is required");
	EXPECT_ERR(f, CFG("{" BOOT ", \"entropy\": {\"rate_limiter\": {\"ops\": {}}}}"),
		   "config: entropy: rate_limiter.ops: size is required");
	EXPECT_ERR(f, CFG("{" BOOT ", \"logger\": {\"level\": 1}}"), "config: logger: level: expected a string");
	EXPECT_ERR(f, CFG("{" BOOT ", \"metrics\": {}}"), "config: metrics: metrics_path is required");
	EXPECT_ERR(f, CFG("{" BOOT ", \"metrics\": \"/m\"}"), "config: metrics: expected an object, got string");
	EXPECT_ERR(f, CFG("{" BOOT "} trailing"), "config: bad JSON at byte 45: trailing data");
	EXPECT_ERR(f, CFG("{" BOOT ", \"boot-source\": {\"kernel_image_path\": \"/j\"}}"),
		   "duplicate key 'boot-source'");
	assert_int_equal(f->cfg.vsock.cid, 9); /* every failure above left the first load alone */
}

static void test_config_file_on_disk(void **state)
{
	struct fc_vm *f = *state;
	char path[64];
	FILE *fp;

	snprintf(path, sizeof(path), "/tmp/brisk-test-fc-%d.json", (int)getpid());
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(full_config, fp);
	fclose(fp);
	EXPECT_OK(fc_vm_load_config_file(f, path, err, sizeof(err)));
	assert_int_equal(f->cfg.nr_disks, 2);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("{\"boot-source\": {}}", fp);
	fclose(fp);
	assert_int_equal(fc_vm_load_config_file(f, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--config-file /tmp/brisk-test-fc-"));
	assert_non_null(strstr(err, ".json: boot-source: kernel_image_path is required"));
	assert_int_equal(truncate(path, FC_JSON_MAX + 1), 0);
	assert_int_equal(fc_vm_load_config_file(f, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "1048577 bytes: at most 1048576"));
	unlink(path);
	assert_int_equal(fc_vm_load_config_file(f, path, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no such file"));
	assert_true(fc_vm_load_config_file(f, "/tmp", err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "a directory"));
	assert_int_equal(f->cfg.nr_disks, 2);
}

/* The fields GET shows, compared between two configurations. */
static void assert_same_cfg(const struct fc_vm *a, const struct fc_vm *b)
{
	assert_string_equal(a->cfg.kernel, b->cfg.kernel);
	assert_true(!a->cfg.initrd == !b->cfg.initrd && (!a->cfg.initrd || !strcmp(a->cfg.initrd, b->cfg.initrd)));
	assert_true(!a->cfg.cmdline == !b->cfg.cmdline && (!a->cfg.cmdline || !strcmp(a->cfg.cmdline, b->cfg.cmdline)));
	assert_int_equal(a->cfg.cpus, b->cfg.cpus);
	assert_int_equal(a->cfg.memory, b->cfg.memory);
	assert_memory_equal(&a->cfg.topology, &b->cfg.topology, sizeof(a->cfg.topology));
	assert_int_equal(a->cfg.hugepages, b->cfg.hugepages);
	assert_int_equal(a->cfg.hugetlbfs, b->cfg.hugetlbfs);
	assert_int_equal(a->cfg.track_dirty, b->cfg.track_dirty);
	assert_int_equal(a->cfg.nr_disks, b->cfg.nr_disks);
	for (unsigned i = 0; i < a->cfg.nr_disks; i++) {
		assert_string_equal(a->cfg.disk[i].path, b->cfg.disk[i].path);
		assert_int_equal(a->cfg.disk[i].ro, b->cfg.disk[i].ro);
		assert_string_equal(a->cfg.disk[i].id, b->cfg.disk[i].id);
		assert_int_equal(a->cfg.disk[i].cache, b->cfg.disk[i].cache);
		assert_memory_equal(&a->cfg.disk[i].rl, &b->cfg.disk[i].rl, sizeof(a->cfg.disk[i].rl));
	}
	assert_memory_equal(a->drive, b->drive, sizeof(a->drive[0]) * a->cfg.nr_disks);
	assert_int_equal(a->cfg.nr_nets, b->cfg.nr_nets);
	assert_memory_equal(a->cfg.net, b->cfg.net, sizeof(a->cfg.net[0]) * a->cfg.nr_nets);
	assert_memory_equal(a->net, b->net, sizeof(a->net[0]) * a->cfg.nr_nets);
	assert_memory_equal(&a->cfg.vsock, &b->cfg.vsock, sizeof(a->cfg.vsock));
	assert_string_equal(a->vsock_id, b->vsock_id);
	assert_int_equal(a->cfg.rng_rate, b->cfg.rng_rate);
	assert_int_equal(a->logger.configured, b->logger.configured);
	assert_int_equal(a->logger.level, b->logger.level);
	assert_int_equal(a->metrics.configured, b->metrics.configured);
}

/* GET /vm/config, fed back as a config file, gives the same configuration and the same text. */
static void round_trip(const struct fc_vm *f)
{
	struct fc_vm *g = malloc(sizeof(*g));
	char *json = fc_vm_to_json(f), *again;

	assert_non_null(g);
	assert_non_null(json);
	fc_vm_init(g);
	if (fc_vm_load_config_json(g, json, strlen(json), err, sizeof(err)))
		fail_msg("reloading GET's text failed: %s\n%s", err, json);
	assert_same_cfg(f, g);
	again = fc_vm_to_json(g);
	assert_string_equal(json, again);
	free(json);
	free(again);
	fc_vm_free(g);
	free(g);
}

static void test_round_trip(void **state)
{
	struct fc_vm *f = *state;
	char *json;

	EXPECT_OK(fc_vm_load_config_json(f, full_config, strlen(full_config), err, sizeof(err)));
	round_trip(f);
	json = fc_vm_to_json(f);
	assert_non_null(strstr(json, "\"balloon\":null"));
	assert_non_null(strstr(json, "\"partuuid\":\"abcd-01\""));
	assert_non_null(strstr(json, "\"guest_mac\":\"02:00:00:00:00:05\""));
	assert_non_null(strstr(json, "\"size\":4096"));
	free(json);
	EXPECT_OK(PUT(fc_put_entropy, f, "{}"));
	EXPECT_OK(PUT(fc_put_machine_config, f, "{\"vcpu_count\": 1, \"mem_size_mib\": 64}"));
	round_trip(f);
	/* Nothing configured but the boot source: every optional section is null. */
	fc_vm_free(f);
	fc_vm_init(f);
	EXPECT_OK(PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\"}"));
	round_trip(f);
	json = fc_vm_to_json(f);
	assert_non_null(strstr(json, "\"vsock\":null"));
	assert_non_null(strstr(json, "\"entropy\":null"));
	assert_non_null(strstr(json, "\"logger\":null"));
	assert_non_null(strstr(json, "\"drives\":["));
	free(json);
}

/* PUT /snapshot/load's network_overrides: parsed as Firecracker 1.12's NetworkOverride, every bad shape refused. */
static void test_net_overrides_parse(void **state)
{
	struct fc_load_overrides *o = calloc(1, sizeof(*o));
	const struct fcj c = {"snapshot/load", err, sizeof(err)};
	static const char *const bad[][2] = {
	    {"{}", "network_overrides: expected an array"},
	    {"[1]", "network_overrides[0]: expected an object"},
	    {"[{\"host_dev_name\": \"tap0\"}]", "network_overrides[0]: iface_id is required"},
	    {"[{\"iface_id\": \"eth0\"}]", "network_overrides[0]: host_dev_name is required"},
	    {"[{\"iface_id\": \"eth0\", \"host_dev_name\": \"a/b\"}]", "is not an interface name"},
	    {"[{\"iface_id\": \"eth0\", \"host_dev_name\": \"sixteen-chars-xx\"}]", "host_dev_name"},
	    {"[{\"iface_id\": 7, \"host_dev_name\": \"tap0\"}]", "iface_id"},
	};
	json_object *a;

	(void)state;
	assert_non_null(o);
	assert_int_equal(fc_parse_net_overrides(&c, NULL, o), 0);
	assert_int_equal(o->nr, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a = json_tokener_parse(bad[i][0]);
		err[0] = 0;
		assert_int_equal(fc_parse_net_overrides(&c, a, o), -EINVAL);
		if (!strstr(err, bad[i][1]))
			fail_msg("%s: got \"%s\", expected \"%s\"", bad[i][0], err, bad[i][1]);
		json_object_put(a);
	}
	/* other keys ignored (no deny_unknown_fields in Firecracker's struct); an over-long id names nothing */
	a = json_tokener_parse("[{\"iface_id\": \"eth0\", \"host_dev_name\": \"tap9\", \"x\": 1}, "
			       "{\"iface_id\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\", "
			       "\"host_dev_name\": \"tap8\"}]");
	assert_int_equal(fc_parse_net_overrides(&c, a, o), 0);
	json_object_put(a);
	assert_int_equal(o->nr, 2);
	assert_string_equal(o->ov[0].iface_id, "eth0");
	assert_string_equal(o->ov[0].host_dev_name, "tap9");
	assert_true(o->ov[1].unknown);
	/* at most FC_MAX_NET_OVERRIDES */
	a = json_object_new_array();
	for (unsigned i = 0; i <= FC_MAX_NET_OVERRIDES; i++)
		json_object_array_add(a, json_tokener_parse("{\"iface_id\": \"eth0\", \"host_dev_name\": \"t\"}"));
	assert_int_equal(fc_parse_net_overrides(&c, a, o), -EINVAL);
	assert_non_null(strstr(err, "at most 64"));
	json_object_put(a);
	free(o);
}

/*
 * The overrides onto a snapshot's configuration: the interface named by the id its API description gives it gets
 * the new tap; an unknown id is Firecracker's "Unknown Network Device."; the restored VM's GET /vm/config keeps the
 * ids (the description read with the same overrides).
 */
static void test_net_overrides_apply(void **state)
{
	struct fc_vm *f = *state, *r = calloc(1, sizeof(*r));
	struct fc_load_overrides o = {.nr = 1};
	struct vm_config cfg;
	char *desc, why[256];

	assert_non_null(r);
	EXPECT_OK(PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\"}"));
	EXPECT_OK(PUT(fc_put_machine_config, f, "{\"vcpu_count\": 1, \"mem_size_mib\": 64}"));
	EXPECT_OK(PUT_ID(fc_put_net, f, "eth0", "{\"iface_id\": \"eth0\", \"host_dev_name\": \"tap0\"}"));
	EXPECT_OK(PUT_ID(fc_put_net, f, "wan", "{\"iface_id\": \"wan\", \"host_dev_name\": \"tap1\"}"));
	desc = fc_vm_to_json(f);
	assert_non_null(desc);
	cfg = f->cfg;
	o.ov[0] = (struct fc_net_override){.iface_id = "wan", .host_dev_name = "tapB"};
	assert_int_equal(fc_apply_load_overrides(&cfg, desc, &o, why, sizeof(why)), 0);
	assert_string_equal(cfg.net[0].tap, "tap0");
	assert_string_equal(cfg.net[1].tap, "tapB");
	fc_vm_init(r);
	assert_int_equal(fc_vm_set_from_restore_ov(r, &cfg, desc, &o), 0);
	assert_string_equal(r->net[1].id, "wan"); /* the description still matches: ids kept */
	assert_string_equal(r->cfg.net[1].tap, "tapB");
	fc_vm_free(r);
	/* an id the snapshot has not: Firecracker's message, the configuration unchanged */
	o.ov[0] = (struct fc_net_override){.iface_id = "eth1", .host_dev_name = "tapC"};
	assert_int_equal(fc_apply_load_overrides(&cfg, desc, &o, why, sizeof(why)), -ENODEV);
	assert_string_equal(why, "Failed to restore from snapshot: Failed to get snapshot state from file: Unknown "
				 "Network Device.");
	o.ov[0] = (struct fc_net_override){.unknown = true, .host_dev_name = "tapC"};
	assert_int_equal(fc_apply_load_overrides(&cfg, desc, &o, why, sizeof(why)), -ENODEV);
	/* no description (a VM of brisk's options): the ids GET /vm/config gives, net0, net1, ... */
	o.ov[0] = (struct fc_net_override){.iface_id = "net0", .host_dev_name = "tapD"};
	assert_int_equal(fc_apply_load_overrides(&cfg, NULL, &o, why, sizeof(why)), 0);
	assert_string_equal(cfg.net[0].tap, "tapD");
	/* an interface of the user-mode network has no tap to change */
	cfg.net[0].kind = NET_USER;
	assert_int_equal(fc_apply_load_overrides(&cfg, NULL, &o, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "user-mode network"));
	free(r);
	free(desc);
}

/*
 * The load's vsock_override and huge_pages (Firecracker 1.15): parsed as its VsockOverride and
 * SnapshotLoadHugePageConfig (unknown keys of the override ignored, every bad shape refused), applied onto a
 * snapshot's configuration: the socket moves; a snapshot without vsock is Firecracker's "Unknown Vsock Device.";
 * "Snapshot" keeps the snapshot's pages, the others set them as machine-config's values do.
 */
static void test_load_overrides(void **state)
{
	struct fc_load_overrides *o = calloc(1, sizeof(*o));
	const struct fcj c = {"snapshot/load", err, sizeof(err)};
	static const char *const bad[][2] = {
	    {"{\"vsock_override\": \"/s\"}", "vsock_override: expected an object"},
	    {"{\"vsock_override\": {}}", "uds_path is required"},
	    {"{\"vsock_override\": {\"uds_path\": \"\"}}", "uds_path: empty"},
	    {"{\"vsock_override\": {\"uds_path\": 5}}", "uds_path: expected a string"},
	    {"{\"vsock_override\": {\"uds_path\": "
	     "\"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}}",
	     "at most 96"},
	    {"{\"huge_pages\": \"2m\"}",
	     "huge_pages: \"2m\" is not one of \"Snapshot\", \"None\", \"Transparent\", \"2M\""},
	    {"{\"huge_pages\": true}", "huge_pages: expected a string"},
	};
	struct vm_config cfg = {0};
	char why[256];
	json_object *b;

	(void)state;
	assert_non_null(o);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = json_tokener_parse(bad[i][0]);
		assert_non_null(b);
		err[0] = 0;
		assert_int_equal(fc_parse_load_overrides(&c, b, o), -EINVAL);
		if (!strstr(err, bad[i][1]))
			fail_msg("%s: got \"%s\", expected \"%s\"", bad[i][0], err, bad[i][1]);
		json_object_put(b);
	}
	b = json_tokener_parse("{\"vsock_override\": null}");
	assert_int_equal(fc_parse_load_overrides(&c, b, o), 0);
	json_object_put(b);
	assert_false(fc_load_overrides_any(o)); /* null is absent; Snapshot is the default */
	b = json_tokener_parse(
	    "{\"vsock_override\": {\"uds_path\": \"/run/v2.sock\", \"x\": 1}, \"huge_pages\": \"None\"}");
	assert_int_equal(fc_parse_load_overrides(&c, b, o), 0);
	json_object_put(b);
	assert_string_equal(o->vsock_uds, "/run/v2.sock");
	assert_int_equal(o->huge, FC_LOAD_HUGE_NONE);
	assert_true(fc_load_overrides_any(o));

	/* no vsock device in the snapshot */
	assert_int_equal(fc_apply_load_overrides(&cfg, NULL, o, why, sizeof(why)), -ENODEV);
	assert_string_equal(why, "Failed to restore from snapshot: Failed to get snapshot state from file: Unknown "
				 "Vsock Device.");
	/* the socket moves; a 2M snapshot loaded as None, Transparent, 2M, Snapshot */
	strcpy(cfg.vsock.uds, "/run/v1.sock");
	cfg.vsock.cid = 3;
	cfg.hugetlbfs = true;
	assert_int_equal(fc_apply_load_overrides(&cfg, NULL, o, why, sizeof(why)), 0);
	assert_string_equal(cfg.vsock.uds, "/run/v2.sock");
	assert_int_equal(cfg.vsock.cid, 3);
	assert_false(cfg.hugetlbfs);
	assert_false(cfg.hugepages);
	o->vsock_uds[0] = 0;
	o->huge = FC_LOAD_HUGE_TRANSPARENT;
	assert_int_equal(fc_apply_load_overrides(&cfg, NULL, o, why, sizeof(why)), 0);
	assert_true(cfg.hugepages && !cfg.hugetlbfs);
	o->huge = FC_LOAD_HUGE_2M;
	assert_int_equal(fc_apply_load_overrides(&cfg, NULL, o, why, sizeof(why)), 0);
	assert_true(cfg.hugetlbfs && !cfg.hugepages);
	o->huge = FC_LOAD_HUGE_SNAPSHOT;
	assert_int_equal(fc_apply_load_overrides(&cfg, NULL, o, why, sizeof(why)), 0);
	assert_true(cfg.hugetlbfs && !cfg.hugepages);
	free(o);
}

/* brisk run --api-sock: GET /vm/config describes the command line's VM. */
/*
 * A restored VM's GET /vm/config: the snapshot's description gives back the ids, the root device, each
 * drive's cache type and I/O engine and smt (the restored cfg alone knows none of them); track_dirty_pages is
 * the load's (enable_diff_snapshots), as Firecracker's restore sets it, whatever the snapshot's VM had.
 */
static void test_set_from_restore(void **state)
{
	struct fc_vm *f = *state, *r = calloc(1, sizeof(*r));
	struct vm_config cfg;
	char *desc;

	assert_non_null(r);
	EXPECT_OK(PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\"}"));
	EXPECT_OK(PUT(fc_put_machine_config, f,
		      "{\"vcpu_count\": 2, \"mem_size_mib\": 64, \"smt\": true, \"track_dirty_pages\": true}"));
	EXPECT_OK(PUT_ID(fc_put_drive, f, "data",
			 "{\"drive_id\": \"data\", \"path_on_host\": \"/d/b.img\", \"is_root_device\": false, "
			 "\"cache_type\": \"Writeback\", \"io_engine\": \"Async\"}"));
	EXPECT_OK(PUT_ID(fc_put_drive, f, "rootfs", DRIVE("rootfs", "/d/a.img", "true")));
	desc = fc_vm_to_json(f);
	assert_non_null(desc);
	cfg = f->cfg; /* what the state file's configuration section gives back */
	fc_vm_init(r);
	assert_int_equal(fc_vm_set_from_restore(r, &cfg, desc), 0);
	assert_string_equal(r->drive[0].id, "rootfs");
	assert_true(r->drive[0].is_root_device);
	assert_int_equal(r->drive[0].cache_type, FC_CACHE_UNSAFE);
	assert_string_equal(r->drive[1].id, "data");
	assert_false(r->drive[1].is_root_device);
	assert_int_equal(r->drive[1].cache_type, FC_CACHE_WRITEBACK);
	assert_int_equal(r->drive[1].io_engine, FC_IO_ASYNC);
	assert_true(r->smt);
	assert_true(r->track_dirty_pages);
	fc_vm_free(r);
	cfg.track_dirty = false; /* loaded without enable_diff_snapshots */
	fc_vm_init(r);
	assert_int_equal(fc_vm_set_from_restore(r, &cfg, desc), 0);
	assert_false(r->track_dirty_pages);
	fc_vm_free(r);
	free(r);
	free(desc);
}

static void test_set_from_config(void **state)
{
	struct fc_vm *f = *state;
	struct vm_config c;
	char cl_err[128], *json;

	config_defaults(&c);
	c.kernel = "/k/vmlinux";
	c.cmdline = "console=ttyS0";
	c.cpus = 4;
	c.memory = 512 * MiB;
	c.cpu_template = "baseline";
	assert_int_equal(config_parse_disk("/d/a.img,ro", &c, cl_err, sizeof(cl_err)), 0);
	assert_int_equal(config_parse_disk("/d/b.img", &c, cl_err, sizeof(cl_err)), 0);
	assert_int_equal(config_parse_net("tap=tap0,mac=02:00:00:00:00:07", &c, cl_err, sizeof(cl_err)), 0);
	assert_int_equal(config_parse_rng("64K", &c), 0);
	assert_int_equal(fc_vm_set_from_config(f, &c), 0);
	assert_ptr_not_equal(f->cfg.kernel, c.kernel); /* owned copies */
	assert_ptr_not_equal(f->cfg.disk[0].path, c.disk[0].path);
	assert_string_equal(f->cfg.disk[0].path, "/d/a.img");
	assert_string_equal(f->cfg.kernel, "/k/vmlinux");
	assert_string_equal(f->cfg.cpu_template, "baseline");
	assert_string_equal(f->drive[0].id, "drive0");
	assert_string_equal(f->drive[1].id, "drive1");
	assert_string_equal(f->net[0].id, "net0");
	json = fc_vm_to_json(f);
	assert_non_null(json);
	assert_non_null(strstr(json, "\"drive_id\":\"drive0\""));
	assert_non_null(strstr(json, "\"is_read_only\":true"));
	assert_non_null(strstr(json, "\"iface_id\":\"net0\""));
	assert_non_null(strstr(json, "\"vcpu_count\":4"));
	assert_non_null(strstr(json, "\"size\":65536"));
	free(json);
	round_trip(f);
	config_release(&c); /* f keeps its own */
	assert_string_equal(f->cfg.disk[1].path, "/d/b.img");
	/* The demo guest: no boot source. */
	config_defaults(&c);
	assert_int_equal(fc_vm_set_from_config(f, &c), 0);
	json = fc_vm_to_json(f);
	assert_non_null(strstr(json, "\"boot-source\":null"));
	free(json);
}

/* A JSON string literal of n '"' characters ("\"\"..."), malloc'd: each doubles again in GET's reply. */
static char *quotes(size_t n)
{
	char *s = malloc(2 * n + 3), *p = s;

	assert_non_null(s);
	*p++ = '"';
	for (size_t i = 0; i < n; i++, p += 2)
		memcpy(p, "\\\"", 2);
	*p++ = '"';
	*p = '\0';
	return s;
}

/* Formats a body around the string literals given (freed here) and applies it with fn or fn_id. */
static void put_body(struct fc_vm *f, int (*fn)(struct fc_vm *, const char *, size_t, char *, size_t),
		     int (*fn_id)(struct fc_vm *, const char *, const char *, size_t, char *, size_t), const char *id,
		     char *body)
{
	int r = fn ? fn(f, body, strlen(body), err, sizeof(err)) : fn_id(f, id, body, strlen(body), err, sizeof(err));

	if (r)
		fail_msg("%s", err);
	free(body);
}

static char *fmt(const char *format, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *format, ...)
{
	va_list ap;
	char *s;

	va_start(ap, format);
	assert_true(vasprintf(&s, format, ap) >= 0);
	va_end(ap);
	return s;
}

/*
 * The largest configuration brisk accepts, every string at its length limit and made of the one character
 * JSON escapes into two: GET /vm/config's reply must fit API_REPLY_MAX (it used to exceed the 128 KiB of
 * then and hang the request), for the API's bodies and a config file alike (both use these appliers).
 */
static void test_largest_config_is_describable(void **state)
{
	struct fc_vm *f = *state;
	char *path = quotes(VM_DISK_PATH_MAX - 1), *args = fmt("\"%02047u\"", 0u), *uds = quotes(VM_VSOCK_UDS_MAX);
	char *module = quotes(256), *json, id[FC_ID_MAX + 1];
	size_t len;

	put_body(f, fc_put_boot_source, NULL, NULL,
		 fmt("{\"kernel_image_path\": %s, \"initrd_path\": %s, \"boot_args\": %s}", path, path, args));
	for (unsigned i = 0; i < VM_MAX_DISKS; i++) {
		snprintf(id, sizeof(id), "%02u%062u", i, 0u);
		put_body(
		    f, NULL, fc_put_drive, id,
		    fmt("{\"drive_id\": \"%s\", \"path_on_host\": %s, \"is_root_device\": %s, \"partuuid\": \"%064u\","
			" \"cache_type\": \"Writeback\", \"io_engine\": \"Async\"}",
			id, path, i ? "false" : "true", 0u));
	}
	for (unsigned i = 0; i < VM_MAX_NETS; i++) {
		snprintf(id, sizeof(id), "%02u%062u", i, 0u);
		put_body(f, NULL, fc_put_net, id,
			 fmt("{\"iface_id\": \"%s\", \"host_dev_name\": \"tap%012u\", \"guest_mac\": "
			     "\"aa:bb:cc:dd:ee:%02x\"}",
			     id, i, i));
	}
	put_body(f, fc_put_vsock, NULL, NULL,
		 fmt("{\"vsock_id\": \"%064u\", \"guest_cid\": 4294967294, \"uds_path\": %s}", 0u, uds));
	put_body(f, fc_put_entropy, NULL, NULL,
		 fmt("{\"rate_limiter\": {\"bandwidth\": {\"size\": 18446744073709551, \"refill_time\": 1}}}"));
	put_body(f, fc_put_logger, NULL, NULL,
		 fmt("{\"log_path\": %s, \"module\": %s, \"level\": \"Warning\", \"show_level\": true}", path, module));
	put_body(f, fc_put_metrics, NULL, NULL, fmt("{\"metrics_path\": %s, \"emit_id\": true}", path));
	free(path);
	free(args);
	free(uds);
	free(module);
	json = fc_vm_to_json(f);
	assert_non_null(json);
	len = strlen(json);
	print_message("largest GET /vm/config: %zu bytes (limit %d)\n", len, API_REPLY_MAX);
	assert_true(len <= API_REPLY_MAX);
	assert_true(len > 128 * 1024); /* the largest: over the old limit of 128 KiB */
	free(json);
}

/* msg through api_field_names: the API's words come out, and no command-line option is left in it. */
static void expect_named(const struct fc_vm *f, const char *msg, const char *want)
{
	char out[1024];

	api_field_names(f, msg, out, sizeof(out));
	if (!strstr(out, want) || strstr(out, "--"))
		fail_msg("\"%s\" became \"%s\", want \"%s\" and no option", msg, out, want);
}

/*
 * The VM code's errors an API client can cause, worded for the command line, in the API's field names:
 * config_validate's own messages (so that a new one naming an option is caught here), and the forms the
 * device and KVM steps use, with the ids of the configuration.
 */
static void test_api_field_names(void **state)
{
	struct fc_vm *f = *state;

	EXPECT_OK(PUT(fc_put_boot_source, f, "{\"kernel_image_path\": \"/k\"}"));
	EXPECT_OK(PUT_ID(fc_put_drive, f, "rootfs",
			 "{\"drive_id\": \"rootfs\", \"path_on_host\": \"/img\", \"is_root_device\": true}"));
	EXPECT_OK(PUT_ID(fc_put_drive, f, "data",
			 "{\"drive_id\": \"data\", \"path_on_host\": \"/img.data\", \"is_root_device\": false}"));
	EXPECT_OK(PUT_ID(fc_put_net, f, "eth0", "{\"iface_id\": \"eth0\", \"host_dev_name\": \"tap7\"}"));
	expect_named(f, "--disk /img.data: cannot open the image: no such file",
		     "drives[data]: path_on_host /img.data: cannot open");
	expect_named(f, "--disk /img: is a directory", "drives[rootfs]: path_on_host /img: is a directory");
	expect_named(f, "--net tap=tap7: busy", "network-interfaces[eth0]: host_dev_name tap7: busy");
	expect_named(f, "--vsock uds=/v.sock: in use", "vsock: uds_path /v.sock: in use");
	expect_named(f, "--cpus 300 is out of range: KVM on this host allows 1..240",
		     "machine-config: vcpu_count 300 is out of range");
	expect_named(f, "--cpus 3: the topology", "machine-config: vcpu_count 3");
	f->cfg.memory = 4096;
	assert_int_equal(config_validate(&f->cfg, 8, 0, err, sizeof(err)), -EINVAL);
	expect_named(f, err, "machine-config: mem_size_mib 0 MiB is too small");
	f->cfg.memory = 64ULL << 30;
	assert_int_equal(config_validate(&f->cfg, 8, 1ULL << 30, err, sizeof(err)), -EINVAL);
	expect_named(f, err, "machine-config: mem_size_mib 65536 MiB exceeds");
	f->cfg.memory = 128 * MiB;
	f->cfg.cpus = 9;
	assert_int_equal(config_validate(&f->cfg, 8, 0, err, sizeof(err)), -EINVAL);
	expect_named(f, err, "machine-config: vcpu_count 9 is out of range");
	f->cfg.cpus = 3;
	f->cfg.topology.sockets = 1, f->cfg.topology.cores = 1, f->cfg.topology.threads = 2;
	assert_int_equal(config_validate(&f->cfg, 8, 0, err, sizeof(err)), -EINVAL);
	expect_named(f, err, "but vcpu_count is 3");
	f->cfg.cpus = 1;
	f->cfg.topology.sockets = 0;
	f->cfg.nr_nets = 8;
	f->cfg.nr_disks = 16;
	assert_int_equal(config_validate(&f->cfg, 8, 0, err, sizeof(err)), -EINVAL);
	expect_named(f, err, "(drives, network-interfaces, vsock, entropy, a virtio console, balloon)");
	f->cfg.nr_nets = 1;
	f->cfg.nr_disks = 2;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_boot_source, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_json, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_machine_config_put, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_machine_config_patch, setup, teardown),
	    cmocka_unit_test(test_net_overrides_parse),
	    cmocka_unit_test(test_load_overrides),
	    cmocka_unit_test_setup_teardown(test_net_overrides_apply, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_drives, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_drive_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_finalize_root, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_net, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_vsock, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_entropy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_logger_metrics, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_config_file_sections, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_config_file_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_config_file_on_disk, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_set_from_config, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_set_from_restore, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_largest_config_is_describable, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_api_field_names, setup, teardown),
	};

	return cmocka_run_group_tests_name("fc_config", tests, NULL, NULL);
}
