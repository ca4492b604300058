/*
 * api.c - the router of brisk's Firecracker-compatible API (api.h, docs/api.md): one request in, one
 * reply out, with Firecracker's paths, status codes and {"fault_message": "..."} bodies, and its
 * pre-boot / post-boot rules (configuration only before InstanceStart; pause, resume and snapshot only
 * after; snapshot/load only into an unconfigured process).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "api_impl.h"
#include "brisk/fc_args.h"
#include "brisk/fc_metrics.h"
#include "brisk/log.h"
#include "brisk/mmds.h"

#define ERR_NOT_AFTER_START  "The requested operation is not supported after starting the microVM."
#define ERR_NOT_BEFORE_START "The requested operation is not supported before starting the microVM."

void api_fault(struct api_reply *r, unsigned status, const char *fmt, ...)
{
	char msg[1024];
	json_object *o = json_object_new_object();
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->status = status;
	free(r->body);
	r->body = NULL;
	if (!o)
		return;
	json_object_object_add(o, "fault_message", json_object_new_string(msg));
	r->body = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
}

void api_json_reply(struct api_reply *r, json_object *o)
{
	r->status = 200;
	r->body = o ? strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN)) : NULL;
	json_object_put(o);
	if (!r->body)
		api_fault(r, 500, "out of memory");
}

static const char *state_name(enum api_vm_state s)
{
	static const char *const names[] = {"Not started", "Running", "Paused"};

	return names[s];
}

static char instance_id[FC_INSTANCE_ID_MAX + 1] = FC_DEFAULT_INSTANCE_ID;

void api_set_instance_id(const char *id)
{
	snprintf(instance_id, sizeof(instance_id), "%s", id);
}

const char *api_instance_id(void)
{
	return instance_id;
}

int api_set_mmds_initial(json_object *o)
{
	return mmds_put(o);
}

/* GET /: Firecracker's InstanceInfo. */
static void get_instance(struct api *a, struct api_reply *r)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "id", json_object_new_string(instance_id));
	json_object_object_add(o, "state", json_object_new_string(state_name(a->state)));
	json_object_object_add(o, "vmm_version", json_object_new_string(BRISK_VERSION));
	json_object_object_add(o, "app_name", json_object_new_string("brisk"));
	api_json_reply(r, o);
}

/* GET /version: the Firecracker API level brisk follows, and brisk's own version. */
static void get_version(struct api_reply *r)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "firecracker_version", json_object_new_string(API_FIRECRACKER_LEVEL));
	json_object_object_add(o, "brisk_version", json_object_new_string(BRISK_VERSION));
	api_json_reply(r, o);
}

static void reply_string(struct api_reply *r, char *json)
{
	r->status = json ? 200 : 500;
	r->body = json;
	if (!json)
		api_fault(r, 500, "out of memory");
}

typedef int (*fc_body_fn)(struct fc_vm *f, const char *body, size_t len, char *err, size_t errlen);
typedef int (*fc_id_fn)(struct fc_vm *f, const char *id, const char *body, size_t len, char *err, size_t errlen);

/* A pre-boot configuration body: applied, or 400 with the parser's message. */
static void configure(struct api *a, fc_body_fn fn, const char *body, size_t len, struct api_reply *r)
{
	char err[512];

	if (a->state != API_NOT_STARTED)
		return api_fault(r, 400, ERR_NOT_AFTER_START);
	if (fn(&a->fc, body, len, err, sizeof(err)))
		return api_fault(r, 400, "%s", err);
	a->configured = true;
	r->status = 204;
}

/*
 * PUT /cpu-config: as configure(), but not boot-specific: Firecracker's set_custom_cpu_template leaves
 * boot_path unset, so a snapshot may still be loaded afterwards (its saved CPUID wins).
 */
static void configure_cpu(struct api *a, const char *body, size_t len, struct api_reply *r)
{
	char err[512];

	if (a->state != API_NOT_STARTED)
		return api_fault(r, 400, ERR_NOT_AFTER_START);
	if (fc_put_cpu_config(&a->fc, body, len, err, sizeof(err)))
		return api_fault(r, 400, "%s", err);
	r->status = 204;
}

static void configure_id(struct api *a, fc_id_fn fn, const char *id, const char *body, size_t len, struct api_reply *r)
{
	char err[512];

	if (a->state != API_NOT_STARTED)
		return api_fault(r, 400, ERR_NOT_AFTER_START);
	if (!*id)
		return api_fault(r, 400, "Missing id in the request path.");
	if (fn(&a->fc, id, body, len, err, sizeof(err)))
		return api_fault(r, 400, "%s", err);
	a->configured = true;
	r->status = 204;
}

/* PUT /mmds/config: pre-boot (configure); V1 counts as a deprecated call, as Firecracker's parser. */
static void api_put_mmds_config(struct api *a, const char *body, size_t len, struct api_reply *r)
{
	configure(a, fc_put_mmds_config, body, len, r);
	if (r->status == 204 && a->fc.mmds.version == MMDS_V1)
		fcm_inc(fcm_deprecated_api, FCM_DEPRECATED_API_deprecated_http_api_calls);
}

/* Endpoints Firecracker has and brisk does not: a clear 400, never a silent success. */
static const char *const unsupported[] = {
    "/hotplug", "/snapshot/memory", "/serial", "/pmem", NULL,
};

static bool is_unsupported(const char *path)
{
	for (unsigned i = 0; unsupported[i]; i++) {
		size_t n = strlen(unsupported[i]);

		if (strncmp(path, unsupported[i], n) == 0 && (path[n] == 0 || path[n] == '/'))
			return true;
	}
	return false;
}

/* `path` is PREFIX/ID: *id the rest, which must not contain another '/'. */
static bool match_id(const char *path, const char *prefix, const char **id)
{
	size_t n = strlen(prefix);

	if (strncmp(path, prefix, n) != 0 || strchr(path + n, '/'))
		return false;
	*id = path + n;
	return true;
}

static bool route_config(struct api *a, enum api_method m, const char *p, const char *body, size_t len,
			 struct api_reply *r)
{
	const char *id;

	if (strcmp(p, "/boot-source") == 0 && m == API_PUT)
		configure(a, fc_put_boot_source, body, len, r);
	else if (strcmp(p, "/machine-config") == 0 && m == API_PUT)
		configure(a, fc_put_machine_config, body, len, r);
	else if (strcmp(p, "/machine-config") == 0 && m == API_PATCH)
		configure(a, fc_patch_machine_config, body, len, r);
	else if (strcmp(p, "/machine-config") == 0 && m == API_GET)
		reply_string(r, fc_machine_config_json(&a->fc));
	else if (match_id(p, "/drives/", &id) && m == API_PUT)
		configure_id(a, fc_put_drive, id, body, len, r);
	else if (match_id(p, "/drives/", &id) && m == API_PATCH)
		api_patch_drive(a, id, body, len, r);
	else if (match_id(p, "/network-interfaces/", &id) && m == API_PUT)
		configure_id(a, fc_put_net, id, body, len, r);
	else if (match_id(p, "/network-interfaces/", &id) && m == API_PATCH)
		api_patch_net(a, id, body, len, r);
	else if (strcmp(p, "/mmds/config") == 0 && m == API_PUT)
		api_put_mmds_config(a, body, len, r);
	else if (strcmp(p, "/vsock") == 0 && m == API_PUT)
		configure(a, fc_put_vsock, body, len, r);
	else if (strcmp(p, "/entropy") == 0 && m == API_PUT)
		configure(a, fc_put_entropy, body, len, r);
	else if (strcmp(p, "/cpu-config") == 0 && m == API_PUT)
		configure_cpu(a, body, len, r);
	else
		return false;
	return true;
}

/* /balloon and /balloon/statistics (api_balloon.c). */
static bool route_balloon(struct api *a, enum api_method m, const char *p, const char *body, size_t len,
			  struct api_reply *r)
{
	if (strcmp(p, "/balloon") == 0 && m == API_PUT)
		api_put_balloon(a, body, len, r);
	else if (strcmp(p, "/balloon") == 0 && m == API_GET)
		api_get_balloon(a, r);
	else if (strcmp(p, "/balloon") == 0 && m == API_PATCH)
		api_patch_balloon(a, body, len, r);
	else if (strcmp(p, "/balloon/statistics") == 0 && m == API_GET)
		api_get_balloon_stats(a, r);
	else if (strcmp(p, "/balloon/statistics") == 0 && m == API_PATCH)
		api_patch_balloon_stats(a, body, len, r);
	else
		return false;
	return true;
}

static bool route(struct api *a, enum api_method m, const char *p, const char *body, size_t len, struct api_reply *r)
{
	if (strcmp(p, "/") == 0 && m == API_GET)
		get_instance(a, r);
	else if (strcmp(p, "/version") == 0 && m == API_GET)
		get_version(r);
	else if (strcmp(p, "/vm/config") == 0 && m == API_GET)
		reply_string(r, fc_vm_to_json(&a->fc));
	else if (route_config(a, m, p, body, len, r) || api_route_mmds(m, p, body, len, r))
		;
	else if (strcmp(p, "/logger") == 0 && m == API_PUT)
		api_put_logger(a, body, len, r);
	else if (strcmp(p, "/metrics") == 0 && m == API_PUT)
		api_put_metrics(a, body, len, r);
	else if (strcmp(p, "/actions") == 0 && m == API_PUT)
		api_put_actions(a, body, len, r);
	else if (strcmp(p, "/vm") == 0 && m == API_PATCH)
		api_patch_vm(a, body, len, r);
	else if (route_balloon(a, m, p, body, len, r))
		;
	else if (strcmp(p, "/snapshot/create") == 0 && m == API_PUT)
		api_snapshot_create(a, body, len, r);
	else if (strcmp(p, "/snapshot/load") == 0 && m == API_PUT)
		api_snapshot_load(a, body, len, r);
	else
		return false;
	return true;
}

void api_handle(struct api *a, enum api_method method, const char *path, const char *body, size_t body_len,
		struct api_reply *r)
{
	*r = (struct api_reply){0};
	a->requests++;
	api_metrics_count(method, path, 0);
	if (!route(a, method, path, body, body_len, r)) {
		if (is_unsupported(path))
			api_fault(r, 400, "%s %s: brisk does not implement this Firecracker endpoint (docs/api.md)",
				  api_method_name(method), path);
		else
			api_fault(r, 400, "Invalid request method and/or path: %s %s.", api_method_name(method), path);
	}
	api_metrics_count(method, path, r->status);
	if (r->status >= 400) {
		a->errors++;
		log_debug("API %s %s -> %u %s", api_method_name(method), path, r->status, r->body ? r->body : "");
	}
}

void api_not_before_start(struct api_reply *r)
{
	api_fault(r, 400, ERR_NOT_BEFORE_START);
}

void api_not_after_start(struct api_reply *r)
{
	api_fault(r, 400, ERR_NOT_AFTER_START);
}
