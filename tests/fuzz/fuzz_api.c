/*
 * fuzz_api.c - libFuzzer harness: the API's router (api.c, api_vm.c, api_metrics.c; api.h) on arbitrary
 * requests, with `dry_run` set so that InstanceStart and snapshot/load never create a VM.
 *
 * Input: byte 0 picks the method (% API_METHOD_COUNT), then the path up to the first NUL byte, then the
 * body (the rest, copied to a buffer of exactly its size plus the NUL api_link_recv adds). A path is given
 * as the helper would hand it: starting with '/', 1..API_PATH_MAX-1 bytes; anything else is skipped.
 * Several requests may be chained on one `struct api` (a 0xff byte after a body's end starts the next), so
 * sequences such as "configure, then InstanceStart" or "PUT /metrics, then FlushMetrics" are reached.
 *
 * FUZZ_API_TRACE=1 prints each request and its reply (fuzz_api -runs=0 CORPUS shows what the seeds reach).
 *
 * Invariants beyond "no crash, no sanitizer report, no leak":
 *   - every reply has a status in 200..599; 200 has a JSON body; 204 none; >= 400 a body that is a JSON
 *     object holding exactly a string "fault_message";
 *   - the router never reaches the VM in a dry run: the vm_* functions below abort when called;
 *   - the state never leaves "Not started" (no VM exists).
 *
 * PUT /logger and PUT /metrics open host files whatever dry_run says (they are not the VM): the harness
 * wraps file_open_output so that every such file lands in a fresh temporary directory, and closes the
 * descriptors they leave behind (log_set_fd keeps the logger's open for the process's life, and a second
 * PUT /logger does not close the first one's).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "brisk/api.h"
#include "brisk/api_link.h"
#include "brisk/config.h"
#include "brisk/file.h"
#include "brisk/log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_REQUESTS 8
#define SEPARATOR    0xff

/* ---- the VM must never be reached in a dry run ----------------------------------------------------------- */

#define NEVER(what)                                                                                                    \
	do {                                                                                                           \
		fprintf(stderr, "fuzz_api: %s called in a dry run\n", what);                                           \
		abort();                                                                                               \
	} while (0)

int vm_create(const struct vm_config *cfg, struct vm **out, struct vm_error *err)
{
	(void)cfg, (void)out, (void)err;
	NEVER("vm_create");
}
int vm_restore(const struct vm_config *base, const char *state_path, const char *mem_path, bool resume, struct vm **out,
	       struct vm_error *err)
{
	(void)base, (void)state_path, (void)mem_path, (void)resume, (void)out, (void)err;
	NEVER("vm_restore");
}
int vm_start(struct vm *vm, struct vm_error *e)
{
	(void)vm, (void)e;
	NEVER("vm_start");
}
int vm_pause(struct vm *vm)
{
	(void)vm;
	NEVER("vm_pause");
}
void vm_resume(struct vm *vm)
{
	(void)vm;
	NEVER("vm_resume");
}
int vm_snapshot_create(struct vm *vm, const char *state_path, const char *mem_path, const char *api_desc, char *err,
		       size_t errlen)
{
	(void)vm, (void)state_path, (void)mem_path, (void)api_desc, (void)err, (void)errlen;
	NEVER("vm_snapshot_create");
}
int vm_snapshot_create_diff(struct vm *vm, const char *state_path, const char *mem_path, const char *api_desc,
			    uint64_t *dirty_pages, char *err, size_t errlen)
{
	(void)vm, (void)state_path, (void)mem_path, (void)api_desc, (void)dirty_pages, (void)err, (void)errlen;
	NEVER("vm_snapshot_create_diff");
}
const char *vm_api_desc(const struct vm *vm)
{
	(void)vm;
	NEVER("vm_api_desc");
}
/* The guard of the API's configured files (vm.c): the paths are the fuzzer's, nothing to protect here. */
void vm_config_guard(const struct vm_config *cfg)
{
	(void)cfg;
}
int vm_ctrl_alt_del(struct vm *vm)
{
	(void)vm;
	NEVER("vm_ctrl_alt_del");
}
int vm_disk_swap(struct vm *vm, unsigned index, const char *path, char *err, size_t errlen)
{
	(void)vm, (void)index, (void)path, (void)err, (void)errlen;
	NEVER("vm_disk_swap");
}
int vm_device_call(struct vm *vm, const char *option, unsigned index, int (*fn)(void *dev, void *arg), void *arg)
{
	(void)vm, (void)option, (void)index, (void)fn, (void)arg;
	NEVER("vm_device_call");
}
const struct vm_config *vm_config(const struct vm *vm)
{
	(void)vm;
	NEVER("vm_config");
}
unsigned vm_nr_vcpus(const struct vm *vm)
{
	(void)vm;
	NEVER("vm_nr_vcpus");
}
struct exit_stats *vm_vcpu_exit_stats(struct vm *vm, unsigned i)
{
	(void)vm, (void)i;
	NEVER("vm_vcpu_exit_stats");
}
const char *exit_reason_name(unsigned reason)
{
	(void)reason;
	NEVER("exit_reason_name");
}
/* api_serve.c's loop (not fuzzed here; linked for api_init and api_free). */
int vm_wake_fd(const struct vm *vm)
{
	(void)vm;
	NEVER("vm_wake_fd");
}
bool vm_exit_requested(const struct vm *vm)
{
	(void)vm;
	NEVER("vm_exit_requested");
}
int vm_finish(struct vm *vm)
{
	(void)vm;
	NEVER("vm_finish");
}
void vm_print_report(struct vm *vm, FILE *f)
{
	(void)vm, (void)f;
	NEVER("vm_print_report");
}
void vm_destroy(struct vm *vm)
{
	(void)vm;
	NEVER("vm_destroy");
}
void vm_watch_fds(const struct vm *vm, struct pollfd *p)
{
	(void)vm, (void)p;
	NEVER("vm_watch_fds");
}
void vm_watch_events(struct vm *vm, const struct pollfd *p)
{
	(void)vm, (void)p;
	NEVER("vm_watch_events");
}
void vm_request_exit(struct vm *vm, int code, const char *reason)
{
	(void)vm, (void)code, (void)reason;
	NEVER("vm_request_exit");
}
int api_link_fd(const struct api_link *l)
{
	(void)l;
	NEVER("api_link_fd");
}
int api_link_recv(struct api_link *l, struct api_request *req, char *err, size_t errlen)
{
	(void)l, (void)req, (void)err, (void)errlen;
	NEVER("api_link_recv");
}
int api_link_reply(struct api_link *l, unsigned status, const char *json_body)
{
	(void)l, (void)status, (void)json_body;
	NEVER("api_link_reply");
}
void api_link_lost(struct api_link *l, char *why, size_t whylen)
{
	(void)l, (void)why, (void)whylen;
	NEVER("api_link_lost");
}
const char *api_link_path(const struct api_link *l)
{
	(void)l;
	NEVER("api_link_path");
}

/* ---- host files: a scratch directory, and no descriptor left behind ------------------------------------- */

static int devnull = -1;
static bool trace; /* FUZZ_API_TRACE=1: each request and its reply on stderr (to look at the seeds) */
static unsigned char baseline[4096 / 8]; /* the descriptors open before the first input */

static void scan_fds(unsigned char *set)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);

		if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && fd < 4096 && fd != dirfd(d))
			set[fd / 8] |= (unsigned char)(1u << (fd % 8));
	}
	closedir(d);
}

static void close_new_fds(void)
{
	unsigned char now[sizeof(baseline)] = {0};

	scan_fds(now);
	for (int fd = 0; fd < 4096; fd++)
		if ((now[fd / 8] & (1u << (fd % 8))) && !(baseline[fd / 8] & (1u << (fd % 8))))
			close(fd);
}

static char scratch[] = "/tmp/fuzz_api.XXXXXX";

/* At exit: the scratch directory and what the logger and metrics wrote in it. */
static void remove_scratch(void)
{
	DIR *d = opendir(scratch);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	rmdir(scratch);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	if (!mkdtemp(scratch)) {
		perror("fuzz_api: scratch directory");
		abort();
	}
	atexit(remove_scratch);
	trace = getenv("FUZZ_API_TRACE") != NULL;
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (devnull < 0)
		abort();
	return 0;
}

/*
 * Linked with -Wl,--wrap=file_open_output: the logger's and the metrics' files land in the scratch directory
 * whatever path the body names (its '/' become '_'), so the fuzzer writes nothing else on the host.
 */
int __real_file_open_output(const char *path, const char *what, enum file_out_mode mode, bool nonblock, char *err,
			    size_t errlen);
int __wrap_file_open_output(const char *path, const char *what, enum file_out_mode mode, bool nonblock, char *err,
			    size_t errlen);
int __wrap_file_open_output(const char *path, const char *what, enum file_out_mode mode, bool nonblock, char *err,
			    size_t errlen)
{
	char mapped[4096 + sizeof(scratch) + 1];
	size_t n = (size_t)snprintf(mapped, sizeof(mapped), "%s/", scratch);

	for (const char *p = path; *p && n + 1 < sizeof(mapped); p++)
		mapped[n++] = *p == '/' ? '_' : *p;
	mapped[n] = 0;
	return __real_file_open_output(mapped, what, mode, nonblock, err, errlen);
}

/* ---- the reply's shape ----------------------------------------------------------------------------------- */

static void check_reply(const char *path, const struct api_reply *r)
{
	json_object *o, *m;
	/* GET /mmds[/key] answers with the stored value, any JSON (the store outlives an input: mmds.c's) */
	bool any = r->status == 200 && strncmp(path, "/mmds", 5) == 0;

	if (r->status < 200 || r->status > 599)
		abort();
	if (r->status == 204) {
		if (r->body)
			abort();
		return;
	}
	if (!r->body)
		abort();
	o = json_tokener_parse(r->body);
	if (!o && any && strcmp(r->body, "null") == 0)
		return;
	if (!o || (!any && !json_object_is_type(o, json_type_object)))
		abort();
	if (r->status >= 400) {
		if (json_object_object_length(o) != 1 || !json_object_object_get_ex(o, "fault_message", &m) ||
		    !json_object_is_type(m, json_type_string) || json_object_get_string_len(m) == 0)
			abort();
	}
	json_object_put(o);
}

/* One request: method byte, path up to NUL, body up to the separator (or the end). Returns the bytes used. */
static size_t one_request(struct api *a, const uint8_t *data, size_t size)
{
	const uint8_t *nul, *end;
	enum api_method m;
	size_t plen, blen, used;
	char path[API_PATH_MAX], *body;
	struct api_reply r;

	if (size < 2)
		return size;
	m = (enum api_method)(data[0] % API_METHOD_COUNT);
	nul = memchr(data + 1, 0, size - 1);
	if (!nul)
		return size;
	plen = (size_t)(nul - (data + 1));
	end = memchr(nul + 1, SEPARATOR, size - plen - 2);
	blen = end ? (size_t)(end - (nul + 1)) : size - plen - 2;
	used = plen + 2 + blen + (end ? 1 : 0);
	if (plen == 0 || plen >= API_PATH_MAX || data[1] != '/')
		return used;
	memcpy(path, data + 1, plen);
	path[plen] = 0;
	body = malloc(blen + 1);
	if (!body)
		return used;
	memcpy(body, nul + 1, blen);
	body[blen] = 0;
	api_handle(a, m, path, body, blen, &r);
	if (trace)
		fprintf(stderr, "%s %s %.*s -> %u %s\n", api_method_name(m), path, (int)blen, body, r.status,
			r.body ? r.body : "");
	check_reply(path, &r);
	if (a->vm || a->state != API_NOT_STARTED)
		abort();
	free(r.body);
	free(body);
	return used;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool started;
	struct vm_config base;
	struct api *a = malloc(sizeof(*a));

	if (!a)
		return 0;
	if (!started) {
		scan_fds(baseline);
		started = true;
	}
	log_set_fd(devnull);
	log_set_level(LOG_ERROR);
	config_defaults(&base);
	api_init(a, &base);
	a->dry_run = true;
	a->fc.check_files = false; /* no taps made nor files opened for the fuzzer's bodies */
	for (unsigned i = 0; i < MAX_REQUESTS && size; i++) {
		size_t used = one_request(a, data, size);

		data += used;
		size -= used;
	}
	api_free(a);
	free(a);
	log_set_fd(devnull);
	close_new_fds();
	return 0;
}
