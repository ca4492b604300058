/*
 * api.h - brisk's Firecracker-compatible control API (docs/api.md): the router from one request (method,
 * path, body) to the VM's configuration, its lifecycle (InstanceStart, pause, resume) and snapshots,
 * and the loop that serves it next to a running VM.
 *
 * One request at a time, on the thread that owns the VM (as Firecracker's VMM thread): a request never
 * waits on a vCPU except a pause, which is bounded (vm_pause: 2 s).
 */
#ifndef BRISK_API_H
#define BRISK_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/api_link.h"
#include "brisk/fc_config.h"
#include "brisk/vm.h"

enum api_vm_state { API_NOT_STARTED = 0, API_RUNNING, API_PAUSED };

/* A reply: HTTP status and a malloc'd JSON body (NULL: none, as 204). */
struct api_reply {
	unsigned status;
	char *body;
};

struct api {
	struct fc_vm fc;       /* the configuration before InstanceStart (and GET /vm/config after) */
	struct vm_config base; /* what a restore keeps from this process: serial, timeline, hooks */
	struct vm *vm;	       /* NULL until InstanceStart or snapshot/load */
	enum api_vm_state state;
	bool configured;	   /* a pre-boot resource was set (then snapshot/load is refused, as Firecracker) */
	uint64_t requests, errors; /* counted for the metrics */
	/* Test-only builds: fuzzing the router must not create VMs. */
	bool dry_run;
};

/* An API over `base` (config_defaults plus the process's own options); no VM yet. */
/*
 * The process's instance id (Firecracker's --id; "anonymous-instance" until set): GET / reports it. `id` is
 * checked by the caller (fc_args_check_id) and copied.
 */
void api_set_instance_id(const char *id);
const char *api_instance_id(void);
/*
 * The metadata service's initial store (Firecracker's --metadata): a JSON value, taken (mmds_put). Returns 0,
 * -EFBIG over --mmds-size-limit, -ENOMEM.
 */
struct json_object;
int api_set_mmds_initial(struct json_object *o);

void api_init(struct api *a, const struct vm_config *base);
/*
 * Opens what a->fc's logger and metrics sections name (a config file's: the API's PUTs open their own).
 * Returns 0 or -errno with `err` naming the section and path.
 */
int api_apply_sinks(struct api *a, char *err, size_t errlen);
/* Adopts `vm`, already created (and started unless `paused`) from the command line or a config file. */
int api_adopt_vm(struct api *a, struct vm *vm, const struct vm_config *cfg, bool started);
void api_free(struct api *a);

/* Routes one request. The reply is always set (status and body owned by the caller: free(r->body)). */
void api_handle(struct api *a, enum api_method method, const char *path, const char *body, size_t body_len,
		struct api_reply *r);

/*
 * Serves the API on `link` until the VM ends (returns its exit status) or a signal on `sig_fd` stops
 * brisk (EXIT_STOPPED). With no VM yet, waits for InstanceStart or snapshot/load.
 */
int api_serve(struct api *a, struct api_link *link, int sig_fd);

/*
 * msg, an error of brisk's VM code worded for the command line ("--disk PATH: ...", "--memory 8 MiB is too
 * small"), in the API's words ("drives[ID]: path_on_host PATH: ...", "machine-config: mem_size_mib 8 MiB is
 * too small"): every option brisk's VM code names becomes the API field or object it comes from, with the
 * ids `f` gives. Writes out[0..cap), NUL-terminated, cut to fit.
 */
void api_field_names(const struct fc_vm *f, const char *msg, char *out, size_t cap);

/* Writes one metrics line now (FlushMetrics, the periodic flush, the end). 0 or -errno (-ENODEV: no sink). */
int api_metrics_flush(struct api *a);

#endif
