/* api_impl.h - what the API's files share (api.c routes, api_vm.c acts on the VM, api_serve.c loops). */
#ifndef BRISK_API_IMPL_H
#define BRISK_API_IMPL_H

#include <json-c/json.h>

#include "brisk/api.h"

/* The Firecracker API level whose shapes brisk follows (GET /version). */
#define API_FIRECRACKER_LEVEL "1.7.0"

/* Sets r to `status` with {"fault_message": printf(fmt, ...)}. */
void api_fault(struct api_reply *r, unsigned status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Sets r to 200 with `o` as its body (takes o). */
void api_json_reply(struct api_reply *r, json_object *o);
void api_not_before_start(struct api_reply *r);
void api_not_after_start(struct api_reply *r);

/* api_vm.c: the endpoints that act on the VM or the process. */
void api_put_actions(struct api *a, const char *body, size_t len, struct api_reply *r);
void api_patch_vm(struct api *a, const char *body, size_t len, struct api_reply *r);
void api_snapshot_create(struct api *a, const char *body, size_t len, struct api_reply *r);
void api_snapshot_load(struct api *a, const char *body, size_t len, struct api_reply *r);
void api_put_logger(struct api *a, const char *body, size_t len, struct api_reply *r);
void api_put_metrics(struct api *a, const char *body, size_t len, struct api_reply *r);

/* api_mmds.c: GET, PUT and PATCH /mmds (and a PUT of an unknown /mmds/ path); false when `p` is none of them. */
bool api_route_mmds(enum api_method m, const char *p, const char *body, size_t len, struct api_reply *r);
/* api_patch.c: PATCH /drives/{id} and /network-interfaces/{id}, post-boot only (Firecracker's rules). */
void api_patch_drive(struct api *a, const char *id, const char *body, size_t len, struct api_reply *r);
void api_patch_net(struct api *a, const char *id, const char *body, size_t len, struct api_reply *r);
/* api_balloon.c: /balloon and /balloon/statistics (PUT pre-boot; PATCH and statistics post-boot). */
void api_put_balloon(struct api *a, const char *body, size_t len, struct api_reply *r);
void api_get_balloon(struct api *a, struct api_reply *r);
void api_patch_balloon(struct api *a, const char *body, size_t len, struct api_reply *r);
void api_get_balloon_stats(struct api *a, struct api_reply *r);
void api_patch_balloon_stats(struct api *a, const char *body, size_t len, struct api_reply *r);

/* api_metrics.c: the periodic line when it is due (fc_metrics_timeout_ms), else nothing. */
void api_metrics_tick(struct api *a);
/*
 * Firecracker's get/put/patch_api_requests: status 0 counts a request as it arrives (before it is handled, as
 * Firecracker's parser: a FlushMetrics line counts its own request), a status >= 400 its refusal.
 */
void api_metrics_count(enum api_method m, const char *path, unsigned status);

#endif
