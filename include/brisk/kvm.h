/* kvm.h - /dev/kvm: opening with actionable errors, and the one wrapper every KVM ioctl goes through. */
#ifndef BRISK_KVM_H
#define BRISK_KVM_H

#include <stdint.h>
#include <stdio.h>

/*
 * Every KVM ioctl brisk makes goes through kvm_ioctl(): it counts calls and
 * time per request (the profiler's "host cost"). Returns what ioctl(2)
 * returned, errno preserved.
 */
int kvm_ioctl(int fd, unsigned long req, const char *name, void *arg);
#define KVM_IOCTL(fd, req, arg) kvm_ioctl((fd), (req), #req, (void *)(uintptr_t)(arg))

/* One row of the per-request ioctl accounting. */
struct kvm_ioctl_stat {
	const char *name;
	unsigned long req;
	uint64_t count;
	uint64_t ns;
};
/* Copies up to `max` rows; returns the number of distinct requests seen. */
unsigned kvm_ioctl_stats(struct kvm_ioctl_stat *out, unsigned max);
void kvm_ioctl_stats_print(FILE *f);
/* Forgets every row: a forked process's accounting starts at zero (single-threaded callers only). */
void kvm_ioctl_stats_reset(void);

/* Process-wide facts about /dev/kvm, queried once. */
struct kvm {
	int fd;
	int run_size;	    /* KVM_GET_VCPU_MMAP_SIZE */
	int max_vcpus;	    /* KVM_CAP_MAX_VCPUS (or NR_VCPUS) */
	int immediate_exit; /* KVM_CAP_IMMEDIATE_EXIT */
	int ioeventfd;	    /* KVM_CAP_IOEVENTFD: device notifications without a userspace exit */
	int irqfd;	    /* KVM_CAP_IRQFD: device interrupts from any thread */
};

/*
 * Opens `path` (normally /dev/kvm), checks the API version and every
 * capability brisk requires. Returns 0, or -errno (-ENOENT missing, -EACCES
 * permission, -ENOTTY not a KVM device, -EPROTO version, -ENOTSUP
 * capability, -EMFILE ...) with an actionable message in `err`.
 */
__attribute__((warn_unused_result)) int kvm_open_err(struct kvm *k, const char *path, char *err, size_t errlen);
/* kvm_open_err, logging the message on failure. */
__attribute__((warn_unused_result)) int kvm_open(struct kvm *k, const char *path);
void kvm_close(struct kvm *k);

#endif
