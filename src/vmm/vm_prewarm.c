/*
 * vm_prewarm.c - what any VM of this process needs, done while the API waits for its first request.
 *
 * A process started with --api-sock and no configuration idles until its client sends InstanceStart or
 * snapshot/load; everything then happens after that request. Three pieces of that work depend on nothing the
 * client can still choose, so api_serve does them here, one per idle turn of its loop (vm_prewarm_step), before
 * a request arrives (a request that arrives meanwhile is served after the current piece, and the VM does the
 * rest itself):
 *
 *   1. /dev/kvm opened and checked (kvm_open_err: API version, required capabilities, run-page size);
 *   2. KVM's supported CPUID and MSR index list fetched (cpuid_kvm_get's once-per-process cache);
 *   3. a VM created (KVM_CREATE_VM, type 0, the only x86 type brisk makes) with its TSS and identity-map
 *      pages: no memory slot, irqchip or vCPU yet, which the configuration decides.
 *
 * The VM build takes them (vm_prewarm_take_kvm, vm_prewarm_take_vm_fd) as if it had just done them; a failure
 * is kept the same way (vm_build.c's open_kvm), so a missing or foreign /dev/kvm is still reported by the
 * request that needs KVM, with the same message, after the user's inputs are checked (docs/security.md).
 * Used only by the API's main thread: no locking.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "brisk/cpuid.h"
#include "brisk/layout.h"
#include "brisk/timeline.h"
#include "vm_impl.h"

enum stage { PW_NONE, PW_KVM_OPEN, PW_CPUID, PW_VM_CREATED, PW_TAKEN };

static struct {
	enum stage stage;
	struct kvm kvm; /* step 1: open (fd >= 0) or not, kvm_ret saying why */
	int kvm_ret;
	char kvm_err[512];
	int vm_fd; /* step 3: a VM nobody took yet, or -1 */
} pw = {.stage = PW_NONE, .vm_fd = -1};

int vm_create_kvm_vm(int kvm_fd, const char **failed)
{
	int fd = KVM_IOCTL(kvm_fd, KVM_CREATE_VM, 0);
	int err;

	if (fd < 0) {
		*failed = "KVM_CREATE_VM";
		return -errno;
	}
	/* Intel needs three pages for the real-mode TSS and one identity-map page, inside the hole. */
	if (KVM_IOCTL(fd, KVM_SET_TSS_ADDR, LAYOUT_KVM_TSS) < 0) {
		*failed = "KVM_SET_TSS_ADDR";
		goto out;
	}
	if (KVM_IOCTL(fd, KVM_SET_IDENTITY_MAP_ADDR, &(uint64_t){LAYOUT_KVM_IDENTITY_MAP}) < 0) {
		*failed = "KVM_SET_IDENTITY_MAP_ADDR";
		goto out;
	}
	return fd;
out:
	err = -errno;
	close(fd);
	return err;
}

bool vm_prewarm_step(void)
{
	switch (pw.stage) {
	case PW_NONE:
		pw.kvm_ret = kvm_open_err(&pw.kvm, "/dev/kvm", pw.kvm_err, sizeof(pw.kvm_err));
		pw.stage = PW_KVM_OPEN;
		return pw.kvm_ret == 0; /* a failure is kept for the request; nothing more to do */
	case PW_KVM_OPEN:
		(void)cpuid_kvm_get(pw.kvm.fd); /* a failure is the VM's to report, when it asks again */
		pw.stage = PW_CPUID;
		return true;
	case PW_CPUID:
		pw.vm_fd = vm_create_kvm_vm(pw.kvm.fd, &(const char *){NULL}); /* a failure: the VM tries again */
		if (pw.vm_fd < 0)
			pw.vm_fd = -1;
		pw.stage = PW_VM_CREATED;
		timeline_mark(TL_KVM_PREWARMED);
		return false;
	default:
		return false;
	}
}

bool vm_prewarm_take_kvm(struct kvm *k, int *ret, char *err, size_t errlen)
{
	if (pw.stage == PW_NONE || pw.stage == PW_TAKEN) {
		pw.stage = PW_TAKEN; /* a VM opened /dev/kvm itself: nothing more is prepared */
		return false;
	}
	*k = pw.kvm;
	*ret = pw.kvm_ret;
	snprintf(err, errlen, "%s", pw.kvm_err);
	pw.kvm.fd = -1;
	pw.stage = PW_TAKEN;
	return true;
}

int vm_prewarm_take_vm_fd(void)
{
	int fd = pw.vm_fd;

	pw.vm_fd = -1;
	return fd;
}
