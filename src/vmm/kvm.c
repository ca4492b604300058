/* kvm.c - opening /dev/kvm with actionable errors, and the counted wrapper every KVM ioctl goes through. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/kvm.h"
#include "brisk/log.h"
#include "brisk/timeline.h"

#define MAX_REQUESTS 64

static struct {
	unsigned long req;
	const char *name;
	_Atomic uint64_t count;
	_Atomic uint64_t ns;
} table[MAX_REQUESTS];
static _Atomic unsigned nr_requests;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

/* The row index for `req`, inserted on first use; MAX_REQUESTS when the table is full. */
static unsigned lookup(unsigned long req, const char *name)
{
	unsigned n = atomic_load(&nr_requests);

	for (unsigned i = 0; i < n; i++)
		if (table[i].req == req)
			return i;
	pthread_mutex_lock(&table_lock);
	n = atomic_load(&nr_requests);
	for (unsigned i = 0; i < n; i++) {
		if (table[i].req == req) {
			pthread_mutex_unlock(&table_lock);
			return i;
		}
	}
	if (n < MAX_REQUESTS) {
		table[n].req = req;
		table[n].name = name;
		atomic_store(&nr_requests, n + 1);
	}
	pthread_mutex_unlock(&table_lock);
	return n;
}

int kvm_ioctl(int fd, unsigned long req, const char *name, void *arg)
{
	uint64_t t0 = timeline_now_ns();
	int ret = ioctl(fd, req, arg);
	int saved = errno;
	unsigned i = lookup(req, name);

	if (i < MAX_REQUESTS) {
		atomic_fetch_add_explicit(&table[i].count, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&table[i].ns, timeline_now_ns() - t0, memory_order_relaxed);
	}
	errno = saved;
	return ret;
}

unsigned kvm_ioctl_stats(struct kvm_ioctl_stat *out, unsigned max)
{
	unsigned n = atomic_load(&nr_requests);

	for (unsigned i = 0; i < n && i < max; i++) {
		out[i] = (struct kvm_ioctl_stat){
		    .name = table[i].name,
		    .req = table[i].req,
		    .count = atomic_load(&table[i].count),
		    .ns = atomic_load(&table[i].ns),
		};
	}
	return n;
}

void kvm_ioctl_stats_reset(void)
{
	unsigned n = atomic_load(&nr_requests);

	for (unsigned i = 0; i < n; i++) {
		atomic_store(&table[i].count, 0);
		atomic_store(&table[i].ns, 0);
	}
	atomic_store(&nr_requests, 0);
}

void kvm_ioctl_stats_print(FILE *f)
{
	struct kvm_ioctl_stat s[MAX_REQUESTS];
	unsigned n = kvm_ioctl_stats(s, MAX_REQUESTS);
	uint64_t total = 0;

	fprintf(f, "%-32s %8s %12s\n", "KVM ioctl", "calls", "total us");
	for (unsigned i = 0; i < n; i++) {
		fprintf(f, "%-32s %8llu %12.1f\n", s[i].name, (unsigned long long)s[i].count, (double)s[i].ns / 1e3);
		total += s[i].count;
	}
	fprintf(f, "%-32s %8llu\n", "total", (unsigned long long)total);
}

/* Capabilities brisk cannot run without, with what each is for. */
static const struct {
	int cap;
	const char *name;
	const char *why;
} required[] = {
    {KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY", "guest RAM"},
    {KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP", "the in-kernel interrupt controller"},
    {KVM_CAP_PIT2, "KVM_CAP_PIT2", "the in-kernel PIT"},
    {KVM_CAP_SET_TSS_ADDR, "KVM_CAP_SET_TSS_ADDR", "the TSS pages KVM needs on Intel"},
    {KVM_CAP_SET_IDENTITY_MAP_ADDR, "KVM_CAP_SET_IDENTITY_MAP_ADDR", "the identity-map page KVM needs on Intel"},
    {KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID", "the guest CPUID table"},
};

static int open_error(const char *path, int e, char *err, size_t errlen)
{
	switch (e) {
	case ENOENT:
		return err_set(
		    err, errlen, -e,
		    "%s does not exist: KVM is not available on this host. Load kvm_intel or kvm_amd, enable "
		    "virtualization (VT-x/AMD-V) in the firmware, or on a cloud VM enable nested virtualization",
		    path);
	case EACCES:
	case EPERM:
		return err_set(err, errlen, -e,
			       "permission denied opening %s: add your user to the group owning it "
			       "(usually 'kvm': sudo usermod -aG kvm $USER, then log in again) or run as root",
			       path);
	case EMFILE:
	case ENFILE:
		return err_set(err, errlen, -e, "cannot open %s: too many open files (raise the limit: ulimit -n)",
			       path);
	default:
		return err_set(err, errlen, -e, "cannot open %s: %s", path, strerror(e));
	}
}

static int check_caps(struct kvm *k, const char *path, char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
		if (KVM_IOCTL(k->fd, KVM_CHECK_EXTENSION, required[i].cap) <= 0)
			return err_set(err, errlen, -ENOTSUP, "%s lacks %s (%s), which brisk requires", path,
				       required[i].name, required[i].why);
	return 0;
}

/* KVM_GET_API_VERSION (api.rst 4.1): a non-KVM device fails the ioctl itself. */
static int check_version(struct kvm *k, const char *path, char *err, size_t errlen)
{
	int v = KVM_IOCTL(k->fd, KVM_GET_API_VERSION, 0);

	if (v < 0)
		return err_set(err, errlen, -ENOTTY, "%s is not a KVM device: KVM_GET_API_VERSION failed: %s", path,
			       strerror(errno));
	if (v != KVM_API_VERSION)
		return err_set(err, errlen, -EPROTO, "%s speaks KVM API version %d; brisk needs version %d", path, v,
			       KVM_API_VERSION);
	return 0;
}

int kvm_open_err(struct kvm *k, const char *path, char *err, size_t errlen)
{
	int ret;

	memset(k, 0, sizeof(*k));
	k->fd = open(path, O_RDWR | O_CLOEXEC);
	if (k->fd < 0)
		return open_error(path, errno, err, errlen);
	ret = check_version(k, path, err, errlen);
	if (!ret)
		ret = check_caps(k, path, err, errlen);
	if (ret)
		goto fail;
	k->run_size = KVM_IOCTL(k->fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (k->run_size < (int)sizeof(struct kvm_run)) {
		ret = err_set(err, errlen, -EPROTO, "KVM_GET_VCPU_MMAP_SIZE on %s returned %d: %s", path, k->run_size,
			      strerror(errno));
		goto fail;
	}
	/* api.rst 4.4: MAX_VCPUS, falling back to NR_VCPUS, falling back to 4. */
	k->max_vcpus = KVM_IOCTL(k->fd, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);
	if (k->max_vcpus <= 0)
		k->max_vcpus = KVM_IOCTL(k->fd, KVM_CHECK_EXTENSION, KVM_CAP_NR_VCPUS);
	if (k->max_vcpus <= 0)
		k->max_vcpus = 4;
	k->immediate_exit = KVM_IOCTL(k->fd, KVM_CHECK_EXTENSION, KVM_CAP_IMMEDIATE_EXIT) > 0;
	k->ioeventfd = KVM_IOCTL(k->fd, KVM_CHECK_EXTENSION, KVM_CAP_IOEVENTFD) > 0;
	k->irqfd = KVM_IOCTL(k->fd, KVM_CHECK_EXTENSION, KVM_CAP_IRQFD) > 0;
	return 0;
fail:
	close(k->fd);
	k->fd = -1;
	return ret;
}

int kvm_open(struct kvm *k, const char *path)
{
	char err[512];
	int ret = kvm_open_err(k, path, err, sizeof(err));

	if (ret)
		log_error("%s", err);
	return ret;
}

void kvm_close(struct kvm *k)
{
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
}
