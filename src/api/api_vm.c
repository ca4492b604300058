/*
 * api_vm.c - the API endpoints that act on the VM and the process (api.h): InstanceStart and the other
 * actions, pause and resume, snapshot create and load, the logger and the metrics.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_impl.h"
#include "brisk/config.h"
#include "brisk/fc_logger.h"
#include "brisk/fc_metrics.h"
#include "brisk/file.h"
#include "brisk/log.h"
#include "brisk/timeline.h"
#include "fc_config_internal.h"

/* Parses a small body (actions, vm state, snapshots) with the checked accessors; 400 on error. */
static json_object *parse_body(const char *what, const char *body, size_t len, const char *const *keys,
			       struct api_reply *r)
{
	char err[512];
	const struct fcj c = {.what = what, .err = err, .errlen = sizeof(err)};
	json_object *o = NULL;

	if (fcj_parse(&c, body, len, &o) || fcj_keys(&c, o, keys)) {
		json_object_put(o);
		api_fault(r, 400, "%s", err);
		return NULL;
	}
	return o;
}

/* What this process decides whatever the API configured: the serial, --timeline, the profiler's hooks, --irqchip. */
static void apply_base(const struct api *a, struct vm_config *cfg)
{
	cfg->serial = a->base.serial;
	cfg->serial_path = a->base.serial_path;
	cfg->timeline = a->base.timeline;
	cfg->hooks = a->base.hooks;
	cfg->console = a->base.console;
	cfg->prefault = a->base.prefault;
	cfg->boot_timer = a->base.boot_timer;
	cfg->irqchip = a->base.irqchip;
}

/* 400 "PREFIX: MSG", MSG (brisk's VM code's, worded for the command line) in the API's field names. */
static void vm_fault(const struct api *a, struct api_reply *r, const char *prefix, const char *msg)
{
	char named[1024];

	api_field_names(&a->fc, msg, named, sizeof(named));
	api_fault(r, 400, "%s: %s", prefix, named);
}

/* 400 "PREFIX: the vCPUs could not be configured: WHY (exit status N)": vm_start's error, logged too. */
static void vcpus_fault(struct api_reply *r, const char *prefix, const struct vm_error *e, int status)
{
	log_error("%s", e->msg);
	api_fault(r, 400, "%s: the vCPUs could not be configured: %s (exit status %d)", prefix, e->msg, status);
}

static void instance_start(struct api *a, struct api_reply *r)
{
	struct vm_error e;
	char err[512];
	int ret;

	if (a->state != API_NOT_STARTED)
		return api_not_after_start(r);
	timeline_mark(TL_API_REQUEST);
	apply_base(a, &a->fc.cfg);
	if (fc_vm_finalize(&a->fc, err, sizeof(err)))
		return vm_fault(a, r, "Start microvm error", err);
	if (a->dry_run)
		return api_fault(r, 400, "Start microvm error: dry run");
	if (vm_create(&a->fc.cfg, &a->vm, &e))
		return vm_fault(a, r, "Start microvm error", e.msg);
	a->state = API_RUNNING;
	ret = vm_start(a->vm, &e);
	if (ret)
		return vcpus_fault(r, "Start microvm error", &e, ret);
	r->status = 204;
}

static void flush_metrics(struct api *a, struct api_reply *r)
{
	int ret;

	if (!fc_metrics_enabled())
		return api_fault(r, 400, "The metrics system is not initialized: PUT /metrics first.");
	ret = api_metrics_flush(a);
	if (ret)
		return api_fault(r, 400, "Cannot flush metrics: %s", strerror(-ret));
	r->status = 204;
}

static void ctrl_alt_del(struct api *a, struct api_reply *r)
{
	int ret;

	if (a->state == API_NOT_STARTED)
		return api_not_before_start(r);
	ret = vm_ctrl_alt_del(a->vm);
	if (ret)
		return api_fault(r, 400, "SendCtrlAltDel: %s", strerror(-ret));
	r->status = 204;
}

void api_put_actions(struct api *a, const char *body, size_t len, struct api_reply *r)
{
	static const char *const keys[] = {"action_type", NULL};
	static const char *const actions[] = {"InstanceStart", "SendCtrlAltDel", "FlushMetrics", NULL};
	char err[512];
	const struct fcj c = {.what = "actions", .err = err, .errlen = sizeof(err)};
	json_object *o = parse_body("actions", body, len, keys, r);
	unsigned act = 0;
	int got;

	if (!o)
		return;
	got = fcj_enum(&c, o, "action_type", actions, false, &act);
	json_object_put(o);
	if (got <= 0)
		return api_fault(r, 400, "%s", got ? err : "actions: action_type is required");
	if (act == 0)
		instance_start(a, r);
	else if (act == 1)
		ctrl_alt_del(a, r);
	else
		flush_metrics(a, r);
}

/* Microseconds on the monotonic clock, for latencies_us (Firecracker measures them so). */
static uint64_t now_us(void)
{
	return (uint64_t)timeline_now_ns() / 1000u;
}

/* latencies_us slot `i` holds the time since t0_us (a SharedStoreMetric: the last one). */
static void store_latency(unsigned i, uint64_t t0_us)
{
	fcm_store(fcm_latencies, i, now_us() - t0_us);
}

/*
 * Pause and resume, timed as Firecracker v1.7.0 times them: latencies_us.vmm_pause_vm / vmm_resume_vm around
 * the VMM's part (src/vmm/src/rpc_interface.rs), pause_vm / resume_vm around the whole request
 * (src/firecracker/src/api_server/mod.rs).
 */
static int pause_or_resume(struct api *a, unsigned want, uint64_t t0_us)
{
	uint64_t t1_us = now_us();
	int ret = 0;

	if (want == 0 && a->state == API_RUNNING) {
		ret = vm_pause(a->vm);
		if (ret)
			return ret;
		a->state = API_PAUSED;
		store_latency(FCM_LATENCIES_vmm_pause_vm, t1_us);
		store_latency(FCM_LATENCIES_pause_vm, t0_us);
	} else if (want == 1 && a->state == API_PAUSED) {
		vm_resume(a->vm);
		a->state = API_RUNNING;
		store_latency(FCM_LATENCIES_vmm_resume_vm, t1_us);
		store_latency(FCM_LATENCIES_resume_vm, t0_us);
	}
	return 0;
}

void api_patch_vm(struct api *a, const char *body, size_t len, struct api_reply *r)
{
	uint64_t t0_us = now_us();
	static const char *const keys[] = {"state", NULL};
	static const char *const states[] = {"Paused", "Resumed", NULL};
	char err[512];
	const struct fcj c = {.what = "vm", .err = err, .errlen = sizeof(err)};
	json_object *o = parse_body("vm", body, len, keys, r);
	unsigned want = 0;
	int got, ret;

	if (!o)
		return;
	got = fcj_enum(&c, o, "state", states, false, &want);
	json_object_put(o);
	if (got <= 0)
		return api_fault(r, 400, "%s", got ? err : "vm: state is required");
	if (a->state == API_NOT_STARTED)
		return api_not_before_start(r);
	ret = pause_or_resume(a, want, t0_us);
	if (ret)
		return api_fault(r, 400, "Failed to pause the microVM: %s", strerror(-ret));
	r->status = 204;
}

/*
 * The snapshot, Full or Diff, with GET /vm/config's description of the VM inside (its ids come back after a
 * load); timed in latencies_us as Firecracker times each kind.
 */
static void do_create(struct api *a, const char *state, const char *mem, bool diff, struct api_reply *r, uint64_t t0_us)
{
	char err[1024];
	char *desc = fc_vm_to_json(&a->fc);
	uint64_t t1_us = now_us();
	int ret;

	if (!desc)
		return api_fault(r, 400, "Create snapshot error: out of memory");
	ret = diff ? vm_snapshot_create_diff(a->vm, state, mem, desc, NULL, err, sizeof(err))
		   : vm_snapshot_create(a->vm, state, mem, desc, err, sizeof(err));
	if (ret) {
		api_fault(r, 400, "Create snapshot error: %s", err);
	} else {
		r->status = 204;
		store_latency(diff ? FCM_LATENCIES_vmm_diff_create_snapshot : FCM_LATENCIES_vmm_full_create_snapshot,
			      t1_us);
		store_latency(diff ? FCM_LATENCIES_diff_create_snapshot : FCM_LATENCIES_full_create_snapshot, t0_us);
	}
	free(desc);
}

void api_snapshot_create(struct api *a, const char *body, size_t len, struct api_reply *r)
{
	static const char *const keys[] = {"snapshot_type", "snapshot_path", "mem_file_path", "version", NULL};
	static const char *const types[] = {"Full", "Diff", NULL};
	char err[1024];
	const struct fcj c = {.what = "snapshot/create", .err = err, .errlen = sizeof(err)};
	json_object *o = parse_body("snapshot/create", body, len, keys, r);
	const char *state = NULL, *mem = NULL, *version = NULL;
	unsigned type = 0;
	uint64_t t0_us = now_us();

	if (!o)
		return;
	if (fcj_enum(&c, o, "snapshot_type", types, false, &type) < 0 ||
	    fcj_req_str(&c, o, "snapshot_path", 4095, &state) < 0 ||
	    fcj_req_str(&c, o, "mem_file_path", 4095, &mem) < 0 || fcj_str(&c, o, "version", 1, 64, &version) < 0)
		api_fault(r, 400, "%s", err);
	else if (a->state == API_NOT_STARTED)
		api_not_before_start(r);
	else if (type == 1 && !vm_config(a->vm)->track_dirty) /* v1.7.0 rpc_interface.rs create_snapshot */
		api_fault(r, 400,
			  "The requested operation is not supported: Diff snapshots are not allowed on uVMs with dirty "
			  "page tracking disabled.");
	else if (a->state != API_PAUSED)
		api_fault(
		    r, 400,
		    "Create snapshot error: the microVM must be paused first (PATCH /vm {\"state\": \"Paused\"})");
	else
		do_create(a, state, mem, type == 1, r, t0_us);
	json_object_put(o);
}

/*
 * snapshot/load's memory: mem_backend {backend_type File, backend_path} or the older mem_file_path (a memory
 * file), or mem_backend {backend_type Uffd, backend_path} (a page-fault handler's socket: *uffd set).
 */
static int load_mem_path(const struct fcj *c, json_object *o, const char **mem, bool *uffd)
{
	static const char *const keys[] = {"backend_type", "backend_path", NULL};
	static const char *const types[] = {"File", "Uffd", NULL};
	json_object *b = fcj_get(o, "mem_backend");
	int has_file = fcj_str(c, o, "mem_file_path", 1, 4095, mem);
	unsigned type = 0;

	*uffd = false;
	if (has_file < 0)
		return -EINVAL;
	if (!b)
		return has_file ? 0 : fcj_fail(c, "mem_backend or mem_file_path is required");
	if (has_file)
		return fcj_fail(c, "mem_backend and mem_file_path are exclusive");
	if (!json_object_is_type(b, json_type_object))
		return fcj_fail(c, "mem_backend: expected an object");
	if (fcj_keys(c, b, keys) || fcj_enum(c, b, "backend_type", types, false, &type) <= 0)
		return fcj_fail(c, "mem_backend: backend_type File or Uffd is required");
	*uffd = type == 1;
	return fcj_req_str(c, b, "backend_path", 4095, mem) < 0 ? -EINVAL : 0;
}

/*
 * What a load asks besides the files: the Uffd backend, resume_vm, dirty tracking, network_overrides, brisk's
 * working_set (wset.h).
 */
struct load_opts {
	bool uffd, resume, track;
	struct vm_config ws; /* only ws_record_ms, ws_no_prefetch and ws_prefetch_wait */
	bool clock_realtime;
	struct fc_load_overrides ov;
};

/*
 * enable_diff_snapshots (v1.7.0) and track_dirty_pages (its name from Firecracker 1.13, which keeps the old one
 * as deprecated): either turns dirty tracking on, as 1.13's parse_put_snapshot_load ors them; network_overrides
 * (Firecracker 1.12); vsock_override, clock_realtime and huge_pages (Firecracker 1.15).
 */
static int load_options(const struct fcj *c, json_object *o, struct load_opts *l)
{
	bool diff = false, track = false;

	if (fcj_bool(c, o, "resume_vm", &l->resume) < 0 || fcj_bool(c, o, "enable_diff_snapshots", &diff) < 0 ||
	    fcj_bool(c, o, "track_dirty_pages", &track) < 0 ||
	    fcj_bool(c, o, "clock_realtime", &l->clock_realtime) < 0 ||
	    fc_parse_net_overrides(c, fcj_get(o, "network_overrides"), &l->ov) || fc_parse_load_overrides(c, o, &l->ov))
		return -EINVAL;
	l->track = diff || track;
	return 0;
}

/* vm_config.restore_adjust: the overrides onto the snapshot's configuration. */
static int adjust_config(struct vm_config *cfg, const char *desc, void *ctx, char *err, size_t errlen)
{
	return fc_apply_load_overrides(cfg, desc, ctx, err, errlen);
}

static void do_load(struct api *a, const char *state, const char *mem, const struct load_opts *l, struct api_reply *r,
		    uint64_t t0_us)
{
	struct vm_config base = a->base;
	struct vm_error e;
	uint64_t t1_us = now_us();
	int ret;

	timeline_mark(TL_API_REQUEST);
	if (a->dry_run)
		return api_fault(r, 400, "Load snapshot error: dry run");
	base.mem_uffd = l->uffd;
	base.ws_record_ms = l->ws.ws_record_ms;
	base.ws_no_prefetch = l->ws.ws_no_prefetch;
	base.ws_prefetch_wait = l->ws.ws_prefetch_wait;
	base.track_dirty = l->track;
	base.clock_realtime = l->clock_realtime;
	base.restore_adjust = fc_load_overrides_any(&l->ov) ? adjust_config : NULL;
	base.restore_ctx = (void *)&l->ov;
	if (vm_restore(&base, state, mem, l->resume, &a->vm, &e))
		return vm_fault(a, r, "Load snapshot error", e.msg);
	if (fc_vm_set_from_restore_ov(&a->fc, vm_config(a->vm), vm_api_desc(a->vm), &l->ov))
		log_warn("GET /vm/config will not describe the restored VM: out of memory");
	a->state = l->resume ? API_RUNNING : API_PAUSED;
	ret = vm_start(a->vm, &e);
	if (ret)
		return vcpus_fault(r, "Load snapshot error", &e, ret);
	r->status = 204;
	store_latency(FCM_LATENCIES_vmm_load_snapshot, t1_us);
	store_latency(FCM_LATENCIES_load_snapshot, t0_us);
}

void api_snapshot_load(struct api *a, const char *body, size_t len, struct api_reply *r)
{
	static const char *const keys[] = {
	    "snapshot_path",
	    "mem_file_path",
	    "mem_backend",
	    "enable_diff_snapshots",
	    "track_dirty_pages",
	    "resume_vm",
	    "network_overrides",
	    "vsock_override",
	    "clock_realtime",
	    "huge_pages",
	    "working_set", /* brisk's: "record=MS", "wait" or "off", as brisk restore --working-set */
	    NULL};
	char err[1024];
	const struct fcj c = {.what = "snapshot/load", .err = err, .errlen = sizeof(err)};
	json_object *o = parse_body("snapshot/load", body, len, keys, r);
	const char *state = NULL, *mem = NULL, *ws = NULL;
	struct load_opts *l = malloc(sizeof(*l)); /* 64 overrides: ~6 KiB, off the stack */
	uint64_t t0_us = now_us();

	if (!o || !l) {
		free(l);
		if (o)
			api_fault(r, 400, "Load snapshot error: out of memory");
		json_object_put(o);
		return;
	}
	memset(l, 0, sizeof(*l));
	if (fcj_req_str(&c, o, "snapshot_path", 4095, &state) < 0 || load_mem_path(&c, o, &mem, &l->uffd) ||
	    load_options(&c, o, l) || fcj_str(&c, o, "working_set", 1, 32, &ws) < 0)
		api_fault(r, 400, "%s", err);
	else if (ws && config_parse_working_set(ws, &l->ws))
		api_fault(r, 400, "snapshot/load: working_set '%s': expected record=MS (1..%u), wait or off", ws,
			  WSET_RECORD_MAX_MS);
	else if (a->state != API_NOT_STARTED)
		api_not_after_start(r);
	else if (a->configured)
		api_fault(r, 400, "Loading a microVM snapshot not allowed after configuring boot-specific resources.");
	else
		do_load(a, state, mem, l, r, t0_us);
	free(l);
	json_object_put(o);
}

/*
 * Before a logger or metrics destination opens (a file appended, never truncated, or a FIFO read-write;
 * never blocking): the VM's files join the guard, so it is never a file the VM boots from, serves as a disk
 * or was restored from, nor another VM's disk (include/brisk/file.h; a configured VM's files are added
 * before it is built).
 */
static void guard_vm_files(const struct api *a)
{
	vm_config_guard(a->vm ? vm_config(a->vm) : &a->fc.cfg);
}

/* A config file's logger in a->fc takes effect: its file, its level and Firecracker's line format. */
static int apply_logger(struct api *a, char *err, size_t errlen)
{
	guard_vm_files(a);
	return fc_logger_configure(&a->fc.logger, true, err, errlen);
}

/* Opens m's path and starts the metrics on it (fc_metrics_configure, after the guard). 0 or -errno with err. */
static int start_metrics(struct api *a, const struct fc_metrics *m, char *err, size_t errlen)
{
	guard_vm_files(a);
	return fc_metrics_configure(m->metrics_path, err, errlen);
}

int api_apply_sinks(struct api *a, char *err, size_t errlen)
{
	int ret = a->fc.logger.configured ? apply_logger(a, err, errlen) : 0;

	if (!ret && a->fc.metrics.configured && !fc_metrics_enabled())
		ret = start_metrics(a, &a->fc.metrics, err, errlen);
	return ret;
}

/*
 * PUT /logger: the body's fields over the current ones; a log_path it names is opened first, and only once
 * that worked does anything change (the level, the stored settings, the log's file). A path that is not
 * named again is not reopened.
 */
void api_put_logger(struct api *a, const char *body, size_t len, struct api_reply *r)
{
	struct fc_logger l;
	bool new_path;
	char err[512];

	if (fc_parse_logger(&a->fc.logger, body, len, &l, &new_path, err, sizeof(err)))
		return api_fault(r, 400, "%s", err);
	guard_vm_files(a);
	if (fc_logger_configure(&l, new_path, err, sizeof(err))) {
		fc_logger_free(&l);
		return api_fault(r, 400, "%s", err);
	}
	fc_logger_free(&a->fc.logger);
	a->fc.logger = l;
	r->status = 204;
}

/* PUT /metrics: once; the configuration records it only when its path could be opened. */
void api_put_metrics(struct api *a, const char *body, size_t len, struct api_reply *r)
{
	struct fc_metrics m;
	char err[512];

	if (fc_metrics_enabled())
		return api_fault(r, 400, "Reinitialization of metrics not allowed.");
	if (fc_parse_metrics(body, len, &m, err, sizeof(err)))
		return api_fault(r, 400, "%s", err);
	if (start_metrics(a, &m, err, sizeof(err))) {
		fc_metrics_free(&m);
		return api_fault(r, 400, "%s", err);
	}
	fc_metrics_free(&a->fc.metrics);
	a->fc.metrics = m;
	r->status = 204;
}
