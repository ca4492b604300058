/* test_profile_json.c - the brisk-profile/1 report: every documented field present with its type; KVM stats parsing. */
#include <json-c/json.h>
#include <linux/kvm.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/profile.h"

#define EMULATE "tests/unit/fixtures/trace-emulate-synthetic.txt"

typedef struct json_object jo;

static jo *need(jo *o, const char *key, enum json_type type)
{
	jo *v = NULL;

	if (!json_object_object_get_ex(o, key, &v))
		fail_msg("missing \"%s\"", key);
	if (!json_object_is_type(v, type))
		fail_msg("\"%s\" is %s, not %s", key, json_type_to_name(json_object_get_type(v)),
			 json_type_to_name(type));
	return v;
}

/* A number: JSON int or double. */
static void need_number(jo *o, const char *key)
{
	jo *v = NULL;

	assert_true(json_object_object_get_ex(o, key, &v));
	assert_true(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double));
}

/* ---- a synthetic KVM_GET_STATS_FD file: header, id, 3 descriptors (one a histogram), data ---- */

#define NAME_SIZE 48
struct fake_desc {
	struct kvm_stats_desc d;
	char name[NAME_SIZE];
};

static int fake_stats_fd(uint64_t exits, uint64_t halts)
{
	struct kvm_stats_header h = {.name_size = NAME_SIZE, .num_desc = 3, .id_offset = sizeof(h)};
	struct fake_desc d[3] = {
	    {{.flags = KVM_STATS_TYPE_CUMULATIVE, .size = 1, .offset = 0}, "exits"},
	    {{.flags = KVM_STATS_TYPE_LOG_HIST, .size = 4, .offset = 8}, "halt_wait_hist"},
	    {{.flags = KVM_STATS_TYPE_CUMULATIVE, .size = 1, .offset = 40}, "halt_exits"},
	};
	uint64_t data[6] = {exits, 1, 2, 3, 4, halts};
	int fd = memfd_create("stats", 0);

	h.desc_offset = h.id_offset + 16;
	h.data_offset = h.desc_offset + (uint32_t)sizeof(d);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), sizeof(h));
	assert_int_equal(pwrite(fd, "kvm-1234\0\0\0\0\0\0\0", 16, h.id_offset), 16);
	assert_int_equal(pwrite(fd, d, sizeof(d), h.desc_offset), sizeof(d));
	assert_int_equal(pwrite(fd, data, sizeof(data), h.data_offset), sizeof(data));
	return fd;
}

static void kstats_descriptors(void **state)
{
	struct kstats k;
	char err[256];
	int fd = fake_stats_fd(10, 2);
	uint64_t v = 25;

	(void)state;
	assert_int_equal(kstats_init_fd(&k, fd, err, sizeof(err)), 0);
	assert_int_equal(k.n, 2); /* the histogram is skipped */
	assert_int_equal(kstats_find(&k, "exits"), 0);
	assert_int_equal(kstats_find(&k, "halt_exits"), 1);
	assert_int_equal(kstats_find(&k, "halt_wait_hist"), -1);
	assert_int_equal(kstats_snapshot(&k), 0);
	/* The offsets come from the header, not from assumptions. */
	assert_int_equal(pwrite(fd, &v, sizeof(v), k.data_offset), sizeof(v));
	assert_int_equal(kstats_snapshot(&k), 0);
	assert_int_equal(k.values[0][0], 10);
	assert_int_equal(k.values[1][0], 25);
	assert_int_equal(k.values[1][1], 2);
	kstats_close(&k);
}

static void kstats_garbage(void **state)
{
	struct kstats k;
	char err[256];
	struct kvm_stats_header h = {.name_size = 1u << 30, .num_desc = 3};
	int fd = memfd_create("bad", 0);

	(void)state;
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), sizeof(h));
	assert_int_not_equal(kstats_init_fd(&k, fd, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "KVM binary stats"));
	assert_int_equal(k.fd, -1);
}

/* ---- the whole report ---- */

static jo *build(struct trace_agg *a, struct kstats *k, struct symtab *syms)
{
	static const char map[] = "100000 T pvh_start\n1000d0 T probe_hypervisor\n200000 T probe_msrs\n";
	static const char *const snaps[] = {"vcpus_ready", "end"};
	static const uint64_t snap_ns[] = {100000000000ull, 100000100000ull};
	static const char *const warnings[] = {"a warning"};
	char err[256];
	struct profile_inputs in = {
	    .command = "trace",
	    .pid = 42,
	    .origin_ns = 100000000000ull,
	    .end_ns = 100000200000ull,
	    .vm_stats = k,
	    .snapshot_ids = snaps,
	    .snapshot_ns = snap_ns,
	    .tracing = 1,
	    .trace_instance = "brisk-42",
	    .agg = a,
	    .lost = 7,
	    .syms = syms,
	    .warnings = warnings,
	    .nwarnings = 1,
	    .bucket_ns = 10000,
	};
	FILE *f = fopen(EMULATE, "r");
	char line[1024];

	assert_int_equal(symtab_load_mem(syms, (const uint8_t *)map, sizeof(map) - 1, "map", err, sizeof(err)), 0);
	trace_agg_init(a, in.origin_ns, in.bucket_ns, 64);
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		trace_agg_line(a, line);
	}
	fclose(f);
	assert_int_equal(kstats_init_fd(k, fake_stats_fd(10, 2), err, sizeof(err)), 0);
	assert_int_equal(kstats_snapshot(k), 0);
	assert_int_equal(kstats_snapshot(k), 0);
	return report_json_build(&in);
}

static void top_level(jo *r)
{
	assert_string_equal(json_object_get_string(need(r, "schema", json_type_string)), "brisk-profile/1");
	need(r, "generator", json_type_string);
	assert_string_equal(json_object_get_string(need(r, "command", json_type_string)), "trace");
	assert_int_equal(json_object_get_int(need(need(r, "target", json_type_object), "pid", json_type_int)), 42);
	assert_string_equal(json_object_get_string(need(r, "time_origin", json_type_string)), "trace_start");
	need_number(r, "duration_us");
	need(r, "phases", json_type_array);
	need(r, "milestones", json_type_array);
	need(need(r, "exits", json_type_object), "by_reason", json_type_array);
	need(need(r, "exits", json_type_object), "by_address", json_type_array);
	need(r, "ioctls", json_type_object);
	need(r, "ioctls_us", json_type_object);
	assert_int_equal(json_object_array_length(need(r, "warnings", json_type_array)), 1);
}

static void tracing_section(jo *r)
{
	jo *t = need(r, "tracing", json_type_object);

	assert_true(json_object_get_boolean(need(t, "available", json_type_boolean)));
	assert_string_equal(json_object_get_string(need(t, "rip_event", json_type_string)), "kvm_emulate_insn");
	assert_int_equal(json_object_get_int(need(t, "lost_events", json_type_int)), 7);
	assert_int_equal(json_object_get_int(need(need(t, "events", json_type_object), "kvm_cpuid", json_type_int)), 6);
	assert_int_equal(json_object_array_length(need(t, "threads", json_type_array)), 2);
	need(t, "pio", json_type_array);
}

static void cpuid_and_redundant(jo *r)
{
	jo *cpuid = need(r, "cpuid", json_type_array), *c0 = json_object_array_get_idx(cpuid, 0), *rip0;
	jo *red = need(r, "redundant", json_type_array), *x = json_object_array_get_idx(red, 0);

	assert_int_equal(json_object_array_length(cpuid), 3);
	assert_int_equal(json_object_get_int64(need(c0, "leaf", json_type_int)), 0x40000000);
	assert_int_equal(json_object_get_int(need(c0, "subleaf", json_type_int)), 0);
	assert_int_equal(json_object_get_int(need(c0, "count", json_type_int)), 2);
	rip0 = json_object_array_get_idx(need(c0, "rips", json_type_array), 0);
	assert_string_equal(json_object_get_string(need(rip0, "rip", json_type_string)), "0x100103");
	assert_string_equal(json_object_get_string(need(rip0, "symbol", json_type_string)), "probe_hypervisor+0x33");
	need(rip0, "count", json_type_int);
	assert_int_equal(json_object_array_length(need(r, "msr", json_type_array)), 1);
	assert_string_equal(json_object_get_string(need(x, "kind", json_type_string)), "cpuid");
	assert_string_equal(json_object_get_string(need(x, "rip", json_type_string)), "0x100103");
	assert_string_equal(json_object_get_string(need(x, "symbol", json_type_string)), "probe_hypervisor+0x33");
	assert_int_equal(json_object_get_int(need(x, "count", json_type_int)), 6);
	assert_int_equal(json_object_get_int(need(x, "distinct_inputs", json_type_int)), 3);
	assert_int_equal(json_object_get_int(need(x, "distinct_results", json_type_int)), 2);
	need_number(x, "cost_us");
	need(x, "deterministic", json_type_boolean);
}

static void stats_and_series(jo *r)
{
	jo *k = need(r, "kvm_stats", json_type_object), *s = need(r, "series", json_type_object), *st, *tr;

	assert_true(json_object_get_boolean(need(k, "available", json_type_boolean)));
	assert_int_equal(json_object_array_length(need(k, "snapshots", json_type_array)), 2);
	st = json_object_array_get_idx(need(k, "vm", json_type_array), 0);
	assert_string_equal(json_object_get_string(need(st, "name", json_type_string)), "exits");
	assert_int_equal(json_object_array_length(need(st, "deltas", json_type_array)), 1);
	need(k, "vcpus", json_type_array);
	need_number(s, "bucket_us");
	need_number(s, "start_us");
	tr = json_object_array_get_idx(need(s, "tracks", json_type_array), 0);
	assert_string_equal(json_object_get_string(need(tr, "source", json_type_string)), "kvm");
	need(tr, "vcpu", json_type_int);
	/* Tracks are trimmed to the last non-empty bucket: RIP events up to 90 us, 10 us buckets. */
	assert_int_equal(json_object_array_length(need(tr, "counts", json_type_array)), 10);
}

static void report_schema(void **state)
{
	struct trace_agg *a = calloc(1, sizeof(*a));
	struct kstats k;
	struct symtab syms;
	jo *r, *back;
	char path[] = "/tmp/brisk-profile-XXXXXX", err[256];
	int fd = mkstemp(path);

	(void)state;
	r = build(a, &k, &syms);
	assert_non_null(r);
	top_level(r);
	tracing_section(r);
	cpuid_and_redundant(r);
	stats_and_series(r);
	/* Written and read back, the file is the same object. */
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(report_json_write(r, path, err, sizeof(err)), 0);
	back = json_object_from_file(path);
	assert_non_null(back);
	assert_true(json_object_equal(r, back));
	unlink(path);
	json_object_put(back);
	json_object_put(r);
	kstats_close(&k);
	symtab_free(&syms);
	trace_agg_free(a);
	free(a);
}

/*
 * brisk profile's "page_faults": the process's counts, one row per vCPU whose counts were read (0 skipped), and a
 * restore's working-set prefetch (null without one).
 */
static void page_faults(void **state)
{
	static const struct profile_fault_vcpu vcpus[2] = {{.minor = 120, .major = 3, .system_us = 4500, .ok = 1},
							   {.ok = 0}};
	struct profile_faults faults = {.minor = 5000, .major = 7, .vcpu = vcpus};
	struct profile_inputs in = {
	    .command = "profile", .origin_ns = 1000, .end_ns = 2000, .nr_vcpus = 2, .faults = &faults};
	jo *r, *pf, *v, *v0;

	(void)state;
	r = report_json_build(&in);
	assert_non_null(r);
	pf = need(r, "page_faults", json_type_object);
	assert_int_equal(json_object_get_int64(need(pf, "minor", json_type_int)), 5000);
	assert_int_equal(json_object_get_int64(need(pf, "major", json_type_int)), 7);
	v = need(pf, "vcpus", json_type_array);
	assert_int_equal(json_object_array_length(v), 1);
	v0 = json_object_array_get_idx(v, 0);
	assert_int_equal(json_object_get_int(need(v0, "vcpu", json_type_int)), 0);
	assert_int_equal(json_object_get_int64(need(v0, "minor", json_type_int)), 120);
	assert_int_equal(json_object_get_int64(need(v0, "major", json_type_int)), 3);
	assert_int_equal(json_object_get_int64(need(v0, "system_us", json_type_int)), 4500);
	assert_true(json_object_object_get_ex(pf, "working_set", &v) && v == NULL); /* no prefetch: null */
	json_object_put(r);
	/* A restore that prefetched its working set: how much and how long. */
	faults.prefetched = 1;
	faults.wset_pages = 1024;
	faults.wset_advise_us = 80;
	faults.wset_populate_us = 2500;
	r = report_json_build(&in);
	assert_non_null(r);
	v = need(need(r, "page_faults", json_type_object), "working_set", json_type_object);
	assert_int_equal(json_object_get_int64(need(v, "pages", json_type_int)), 1024);
	assert_int_equal(json_object_get_int64(need(v, "advise_us", json_type_int)), 80);
	assert_int_equal(json_object_get_int64(need(v, "populate_us", json_type_int)), 2500);
	json_object_put(r);
	/* brisk trace has none: the member is null. */
	in.faults = NULL;
	r = report_json_build(&in);
	assert_non_null(r);
	assert_true(json_object_object_get_ex(r, "page_faults", &pf) && pf == NULL);
	json_object_put(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(kstats_descriptors),
	    cmocka_unit_test(kstats_garbage),
	    cmocka_unit_test(report_schema),
	    cmocka_unit_test(page_faults),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
