/*
 * test_api_vcpu.c - a vCPU set-up failure reaches the API's reply: InstanceStart and snapshot/load answer
 * 400 with the vm_error vm_start filled (the call and the values KVM refused), not only an exit status.
 *
 * The VM is faked: this file defines the vm_* functions the API calls (include/brisk/vm.h), so the
 * library's vm.c and vm_build.c are not linked; vm_start fails as a vCPU thread whose KVM_SET_MSRS was
 * refused would make it. (From outside, no API request can give a VM a template whose MSR KVM refuses:
 * the API takes no --cpu-template, and a restore compares the template's digest first.)
 */
#include <errno.h>
#include <poll.h>
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
#include "brisk/exitcode.h"
#include "brisk/log.h"
#include "brisk/vm.h"

#define REFUSED "KVM_SET_MSRS for vCPU 0: KVM refused MSR 0x4b564d02 = 0x30 (10 of 11 set)"

/* ---- the fake VM ------------------------------------------------------------------------------------------ */

static struct vm_config fake_cfg;
static int fake_vm; /* what a created VM points at */
static unsigned starts, exits;

int vm_create(const struct vm_config *cfg, struct vm **out, struct vm_error *err)
{
	(void)err;
	fake_cfg = *cfg;
	*out = (struct vm *)&fake_vm;
	return 0;
}

int vm_restore(const struct vm_config *base, const char *state_path, const char *mem_path, bool resume, struct vm **out,
	       struct vm_error *err)
{
	(void)state_path, (void)mem_path, (void)resume, (void)err;
	fake_cfg = *base;
	*out = (struct vm *)&fake_vm;
	return 0;
}

/* As vm.c's when vCPU 0's thread recorded a refused MSR: the exit requested, the error handed over. */
int vm_start(struct vm *vm, struct vm_error *e)
{
	(void)vm;
	starts++;
	if (e) {
		e->kind = VM_ERR_HOST;
		snprintf(e->msg, sizeof(e->msg), "%s", REFUSED);
	}
	return EXIT_HOST;
}

int vm_pause(struct vm *vm)
{
	(void)vm;
	return -ESHUTDOWN;
}

void vm_resume(struct vm *vm)
{
	(void)vm;
}

int vm_snapshot_create(struct vm *vm, const char *state_path, const char *mem_path, const char *api_desc, char *err,
		       size_t errlen)
{
	(void)vm, (void)state_path, (void)mem_path, (void)api_desc, (void)err, (void)errlen;
	return -EBUSY;
}

int vm_snapshot_create_diff(struct vm *vm, const char *state_path, const char *mem_path, const char *api_desc,
			    uint64_t *dirty_pages, char *err, size_t errlen)
{
	(void)dirty_pages;
	return vm_snapshot_create(vm, state_path, mem_path, api_desc, err, errlen);
}

const char *vm_api_desc(const struct vm *vm)
{
	(void)vm;
	return NULL;
}

void vm_config_guard(const struct vm_config *cfg)
{
	(void)cfg;
}

int vm_ctrl_alt_del(struct vm *vm)
{
	(void)vm;
	return 0;
}

int vm_disk_swap(struct vm *vm, unsigned index, const char *path, char *err, size_t errlen)
{
	(void)vm, (void)index, (void)path, (void)err, (void)errlen;
	return -ENODEV;
}

int vm_device_call(struct vm *vm, const char *option, unsigned index, int (*fn)(void *dev, void *arg), void *arg)
{
	(void)vm, (void)option, (void)index, (void)fn, (void)arg;
	return -ENODEV;
}

const struct vm_config *vm_config(const struct vm *vm)
{
	(void)vm;
	return &fake_cfg;
}

unsigned vm_nr_vcpus(const struct vm *vm)
{
	(void)vm;
	return 0;
}

struct exit_stats *vm_vcpu_exit_stats(struct vm *vm, unsigned i)
{
	(void)vm, (void)i;
	return NULL;
}

int vm_wake_fd(const struct vm *vm)
{
	(void)vm;
	return -1;
}

bool vm_exit_requested(const struct vm *vm)
{
	(void)vm;
	return true;
}

int vm_finish(struct vm *vm)
{
	(void)vm;
	return EXIT_HOST;
}

void vm_watch_fds(const struct vm *vm, struct pollfd *p)
{
	(void)vm;
	for (unsigned i = 0; i < VM_WATCH_FDS; i++)
		p[i] = (struct pollfd){.fd = -1};
}

void vm_watch_events(struct vm *vm, const struct pollfd *p)
{
	(void)vm;
	(void)p;
}

void vm_print_report(struct vm *vm, FILE *f)
{
	(void)vm, (void)f;
}

void vm_destroy(struct vm *vm)
{
	(void)vm;
}

void vm_request_exit(struct vm *vm, int code, const char *reason)
{
	(void)vm, (void)code, (void)reason;
	exits++;
}

/* ---- the API ---------------------------------------------------------------------------------------------- */

static void request(struct api *a, enum api_method m, const char *path, const char *body, struct api_reply *r)
{
	*r = (struct api_reply){0};
	api_handle(a, m, path, body, body ? strlen(body) : 0, r);
}

/* The reply is 400 and its fault_message says what the vCPU's set-up said, with the exit status. */
static void assert_vcpu_fault(const struct api_reply *r, const char *prefix)
{
	char want[512];

	assert_int_equal(r->status, 400);
	assert_non_null(r->body);
	snprintf(want, sizeof(want),
		 "{\"fault_message\":\"%s: the vCPUs could not be configured: %s (exit status %d)\"}", prefix, REFUSED,
		 EXIT_HOST);
	assert_string_equal(r->body, want);
}

static void test_instance_start(void **state)
{
	char kernel[] = "/tmp/brisk-test-kernel-XXXXXX", boot[256];
	int fd = mkstemp(kernel);
	struct vm_config base;
	struct api_reply r;
	struct api a;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	config_defaults(&base);
	api_init(&a, &base);
	snprintf(boot, sizeof(boot), "{\"kernel_image_path\": \"%s\"}", kernel);
	request(&a, API_PUT, "/boot-source", boot, &r);
	assert_int_equal(r.status, 204);
	free(r.body);
	starts = 0;
	request(&a, API_PUT, "/actions", "{\"action_type\": \"InstanceStart\"}", &r);
	assert_int_equal(starts, 1);
	assert_vcpu_fault(&r, "Start microvm error");
	free(r.body);
	api_free(&a);
	unlink(kernel);
}

static void test_snapshot_load(void **state)
{
	struct vm_config base;
	struct api_reply r;
	struct api a;

	(void)state;
	config_defaults(&base);
	api_init(&a, &base);
	starts = 0;
	request(&a, API_PUT, "/snapshot/load", "{\"snapshot_path\": \"/s\", \"mem_file_path\": \"/m\"}", &r);
	assert_int_equal(starts, 1);
	assert_vcpu_fault(&r, "Load snapshot error");
	free(r.body);
	api_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_instance_start),
	    cmocka_unit_test(test_snapshot_load),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
