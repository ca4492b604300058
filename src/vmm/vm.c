/* vm.c - running a built VM (vm_build.c builds it): the vCPU start-up handshake, the services behind the devices'
 * context, the end, the teardown. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "brisk/config.h"
#include "brisk/devices.h"
#include "brisk/devkinds.h"
#include "brisk/errmsg.h"
#include "brisk/exitcode.h"
#include "brisk/fc_metrics.h"
#include "brisk/file.h"
#include "brisk/layout.h"
#include "brisk/log.h"
#include "brisk/snapshot.h"
#include "brisk/thread.h"
#include "brisk/timeline.h"
#include "brisk/virtio_net.h"
#include "vm_impl.h"

#define VCPU_JOIN_TIMEOUT_MS 50
#define VCPU_JOIN_TRIES	     100 /* 5 s of kicking before giving up on a vCPU */
#define VM_PAUSE_KICK_MS     10	 /* a pause re-kicks vCPUs not yet parked this often */
#define VM_PAUSE_TRIES	     200 /* 2 s: a vCPU that does not park by then fails the pause */

int vm_init(struct vm *vm, const struct vm_config *cfg)
{
	int ret = config_copy(&vm->cfg, cfg);

	vm->fd = -1;
	vm->kvm.fd = -1;
	vm->serial_out_fd = -1;
	vm->mem_file_fd = -1;
	vm->uffd_peer.pidfd = -1;
	vm->ws.pagemap_fd = vm->ws.timer_fd = vm->ws.marker_fd = -1;
	vm->wake_fd = -1;
	pthread_mutex_init(&vm->go_lock, NULL);
	pthread_cond_init(&vm->go_cond, NULL);
	pthread_cond_init(&vm->ready_cond, NULL);
	pthread_cond_init(&vm->config_cond, NULL);
	pthread_mutex_init(&vm->pause_lock, NULL);
	pthread_cond_init(&vm->pause_cond, NULL);
	bus_init(&vm->bus);
	return ret;
}

int vm_signals_init(void)
{
	return vcpu_signals_init();
}

int vm_fd(const struct vm *vm)
{
	return vm->fd;
}

const struct vm_config *vm_config(const struct vm *vm)
{
	return &vm->cfg;
}

const char *vm_api_desc(const struct vm *vm)
{
	return vm->api_desc;
}

void vm_config_guard(const struct vm_config *cfg)
{
	file_guard_add_path(cfg->kernel, FILE_GUARD_INPUT, "the kernel image (--kernel)");
	file_guard_add_path(cfg->initrd, FILE_GUARD_INPUT, "the initrd (--initrd)");
	if (!cpuid_template_builtin(cfg->cpu_template))
		file_guard_add_path(cfg->cpu_template, FILE_GUARD_INPUT, "the CPU template (--cpu-template)");
	for (unsigned i = 0; i < cfg->nr_disks; i++)
		file_guard_add_path(cfg->disk[i].path, FILE_GUARD_DISK, "a disk image of this VM");
}

unsigned vm_nr_vcpus(const struct vm *vm)
{
	return vm->nr_vcpus;
}

int vm_vcpu_fd(const struct vm *vm, unsigned i)
{
	return i < vm->nr_vcpus ? vm->vcpus[i].fd : -1;
}

int vm_vcpu_tid(const struct vm *vm, unsigned i)
{
	return i < vm->nr_vcpus ? (int)vm->vcpus[i].tid : -1;
}

struct exit_stats *vm_vcpu_exit_stats(struct vm *vm, unsigned i)
{
	return i < vm->nr_vcpus ? &vm->vcpus[i].stats : NULL;
}

struct kvm_run *vm_vcpu_run(struct vm *vm, unsigned i)
{
	return i < vm->nr_vcpus ? vm->vcpus[i].run : NULL;
}

const struct gmem *vm_gmem(const struct vm *vm)
{
	return &vm->mem;
}

void vm_kernel_range(const struct vm *vm, uint64_t *start, uint64_t *end)
{
	*start = vm->kernel.kernel_start;
	*end = vm->kernel.kernel_end;
}

int vm_vcpu_wait_config(struct vm *vm)
{
	int state;

	pthread_mutex_lock(&vm->go_lock);
	while (vm->config_state == VM_CONFIG_PENDING)
		pthread_cond_wait(&vm->config_cond, &vm->go_lock);
	state = vm->config_state;
	pthread_mutex_unlock(&vm->go_lock);
	return state == VM_CONFIG_PUBLISHED ? 0 : -1;
}

/* Wakes the vCPU threads waiting in vm_vcpu_wait_config: the template and entry are ready, or never will be. */
void vm_publish_config(struct vm *vm, int state)
{
	pthread_mutex_lock(&vm->go_lock);
	vm->config_state = state;
	pthread_cond_broadcast(&vm->config_cond);
	pthread_mutex_unlock(&vm->go_lock);
}

void vm_vcpu_ready(struct vm *vm)
{
	pthread_mutex_lock(&vm->go_lock);
	vm->nr_ready++;
	pthread_cond_signal(&vm->ready_cond);
	pthread_mutex_unlock(&vm->go_lock);
}

void vm_vcpu_wait_go(struct vm *vm)
{
	pthread_mutex_lock(&vm->go_lock);
	while (!vm->go)
		pthread_cond_wait(&vm->go_cond, &vm->go_lock);
	pthread_mutex_unlock(&vm->go_lock);
}

void vm_wait_vcpus_ready(struct vm *vm, unsigned started)
{
	pthread_mutex_lock(&vm->go_lock);
	while (vm->nr_ready < started)
		pthread_cond_wait(&vm->ready_cond, &vm->go_lock);
	pthread_mutex_unlock(&vm->go_lock);
}

/* Lets every vCPU thread waiting in vm_vcpu_wait_go run (or see the exit request and stop). */
static void release_vcpus(struct vm *vm)
{
	pthread_mutex_lock(&vm->go_lock);
	vm->go = 1;
	pthread_cond_broadcast(&vm->go_cond);
	pthread_mutex_unlock(&vm->go_lock);
}

void vm_vcpu_park(struct vcpu *v)
{
	struct vm *vm = v->vm;

	pthread_mutex_lock(&vm->pause_lock);
	v->parked = true;
	vm->nr_parked++;
	pthread_cond_broadcast(&vm->pause_cond);
	while (atomic_load(&vm->pause_req) && !atomic_load(&vm->exit_requested))
		pthread_cond_wait(&vm->pause_cond, &vm->pause_lock);
	vm->nr_parked--;
	v->parked = false;
	pthread_mutex_unlock(&vm->pause_lock);
}

/* vCPUs whose thread still runs its loop (a thread that left it cannot park). */
static unsigned live_vcpus(const struct vm *vm)
{
	unsigned n = 0;

	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		n += vm->vcpus[i].started && !atomic_load(&vm->vcpus[i].done);
	return n;
}

int vm_pause(struct vm *vm)
{
	struct timespec ts;
	int tries = 0, ret = 0;

	atomic_store(&vm->pause_req, 1);
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	pthread_mutex_lock(&vm->pause_lock);
	while (vm->nr_parked < live_vcpus(vm) && !atomic_load(&vm->exit_requested)) {
		ts = bthread_deadline(CLOCK_REALTIME, VM_PAUSE_KICK_MS); /* pause_cond's clock */
		if (pthread_cond_timedwait(&vm->pause_cond, &vm->pause_lock, &ts) != ETIMEDOUT)
			continue;
		if (++tries == VM_PAUSE_TRIES) {
			ret = -ETIMEDOUT;
			break;
		}
		/* Without KVM_CAP_IMMEDIATE_EXIT a kick can race with entry: repeat it. */
		for (unsigned i = 0; i < vm->nr_vcpus; i++)
			if (!vm->vcpus[i].parked)
				vcpu_kick(&vm->vcpus[i]);
	}
	pthread_mutex_unlock(&vm->pause_lock);
	if (ret == -ETIMEDOUT && vm->mem.uffd_backed)
		log_error("a vCPU did not stop within 2 s: it may be waiting for the page-fault handler (pid %d) to "
			  "serve a page of guest memory",
			  vm->uffd_peer.pid);
	if (!ret && atomic_load(&vm->exit_requested))
		ret = -ESHUTDOWN;
	if (ret)
		vm_resume(vm);
	return ret;
}

void vm_resume(struct vm *vm)
{
	pthread_mutex_lock(&vm->pause_lock);
	atomic_store(&vm->pause_req, 0);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
}

bool vm_paused(const struct vm *vm)
{
	return atomic_load(&vm->pause_req) != 0;
}

void vm_irq_line(struct vm *vm, unsigned irq, int level)
{
	struct kvm_irq_level l = {.irq = irq, .level = (uint32_t)level};

	if (vm->ioapic) {
		ioapic_set_irq(vm->ioapic, irq, level);
		return;
	}
	if (KVM_IOCTL(vm->fd, KVM_IRQ_LINE, &l) < 0)
		log_warn("KVM_IRQ_LINE irq %u level %d failed: %s", irq, level, strerror(errno));
}

void vm_request_exit(struct vm *vm, int code, const char *reason)
{
	int expected = 0;
	uint64_t one = 1;

	if (!atomic_compare_exchange_strong(&vm->exit_requested, &expected, 1))
		return;
	timeline_mark(TL_GUEST_END);
	vm->exit_code = code;
	snprintf(vm->exit_reason, sizeof(vm->exit_reason), "%s", reason);
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	/* Parked vCPUs leave their wait and see the exit. */
	pthread_mutex_lock(&vm->pause_lock);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
	if (write(vm->wake_fd, &one, sizeof(one)) < 0)
		log_warn("waking the main thread failed: %s", strerror(errno));
}

int vm_ctrl_alt_del(struct vm *vm)
{
	return i8042_ctrl_alt_del(&vm->bus); /* the bus's devices are fixed once built: no lock needed to find it */
}

void *vm_device(struct vm *vm, const char *option, unsigned index)
{
	for (unsigned i = 0; i < vm->devmgr.nr; i++) {
		const struct devmgr_window *w = &vm->devmgr.win[i];

		if (w->kind && w->index == index && strcmp(w->kind->option, option) == 0)
			return vm->devs[i];
	}
	return NULL;
}

int vm_device_call(struct vm *vm, const char *option, unsigned index, int (*fn)(void *dev, void *arg), void *arg)
{
	void *dev = vm_device(vm, option, index);
	int ret, lret;

	if (!dev)
		return -ENODEV;
	evloop_stop(vm->loop); /* a device with a backend has virtio queues, so the loop exists */
	ret = fn(dev, arg);
	if ((lret = evloop_start(vm->loop)))
		log_error("restarting the I/O event loop after a device change failed: %s", strerror(-lret));
	return ret;
}

struct swap_arg {
	const char *path;
	char *err;
	size_t errlen;
};

static int swap_call(void *dev, void *arg)
{
	struct swap_arg *s = arg;

	return virtio_blk_swap(dev, s->path, s->err, s->errlen);
}

int vm_disk_swap(struct vm *vm, unsigned index, const char *path, char *err, size_t errlen)
{
	struct swap_arg s = {path, err, errlen};
	struct vm_disk d = {0}; /* its path: the new one, vm->cfg's once the device took the image */
	int ret;

	if (index >= vm->cfg.nr_disks || config_disk_path(&d, path, strlen(path)))
		return err_set(err, errlen, -EINVAL, "no disk %u, or a path of %zu bytes", index, strlen(path));
	ret = vm_device_call(vm, "disk", index, swap_call, &s);
	if (ret == -ENODEV)
		err_set(err, errlen, ret, "disk %u has no device", index);
	if (ret) {
		free(d.path);
		return ret;
	}
	free(vm->cfg.disk[index].path);
	vm->cfg.disk[index].path = d.path; /* what a snapshot records, and the guard keeps from outputs */
	file_guard_add_path(path, FILE_GUARD_DISK, "a disk image of this VM");
	return 0;
}

/* The services a device may use (device.h), for this VM. */
static void ctx_irq_line(void *vm, unsigned irq, int level)
{
	vm_irq_line(vm, irq, level);
}

static void ctx_request_exit(void *vm, int code, const char *reason)
{
	vm_request_exit(vm, code, reason);
}

static int ctx_ioeventfd(void *vm, uint64_t addr, unsigned len, bool has_match, uint64_t datamatch, int fd, bool assign)
{
	struct kvm_ioeventfd e = {
	    .datamatch = datamatch,
	    .addr = addr,
	    .len = len,
	    .fd = fd,
	    .flags = (has_match ? KVM_IOEVENTFD_FLAG_DATAMATCH : 0) | (assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN),
	};

	if (!((struct vm *)vm)->kvm.ioeventfd)
		return -ENOTSUP;
	return KVM_IOCTL(((struct vm *)vm)->fd, KVM_IOEVENTFD, &e) < 0 ? -errno : 0;
}

static int ctx_irqfd(void *vm, unsigned gsi, int fd, bool assign)
{
	struct kvm_irqfd e = {.fd = (uint32_t)fd, .gsi = gsi, .flags = assign ? 0 : KVM_IRQFD_FLAG_DEASSIGN};

	if (!((struct vm *)vm)->kvm.irqfd)
		return -ENOTSUP;
	return KVM_IOCTL(((struct vm *)vm)->fd, KVM_IRQFD, &e) < 0 ? -errno : 0;
}

static struct evloop *ctx_loop(void *vm)
{
	return ((struct vm *)vm)->loop;
}

/* KVM_SIGNAL_MSI (api.rst 4.71): > 0 delivered, 0 blocked by the guest, -errno. */
static int ctx_msi(void *vm, uint64_t addr, uint32_t data)
{
	struct kvm_msi m = {.address_lo = (uint32_t)addr, .address_hi = (uint32_t)(addr >> 32), .data = data};
	int ret = KVM_IOCTL(((struct vm *)vm)->fd, KVM_SIGNAL_MSI, &m);

	return ret < 0 ? -errno : ret;
}

/* KVM_SET_GSI_ROUTING (api.rst 4.52): the whole table at once, MSI routes only (a split irqchip has no others). */
static int ctx_msi_routes(void *vm, const struct devctx_msi *r, unsigned n)
{
	struct {
		struct kvm_irq_routing hdr;
		struct kvm_irq_routing_entry e[LAYOUT_IOAPIC_PINS];
	} t;

	if (n > LAYOUT_IOAPIC_PINS)
		return -E2BIG;
	memset(&t, 0, sizeof(t));
	t.hdr.nr = n;
	for (unsigned i = 0; i < n; i++) {
		t.e[i].gsi = r[i].gsi;
		t.e[i].type = KVM_IRQ_ROUTING_MSI;
		t.e[i].u.msi.address_lo = (uint32_t)r[i].addr;
		t.e[i].u.msi.address_hi = (uint32_t)(r[i].addr >> 32);
		t.e[i].u.msi.data = r[i].data;
	}
	return KVM_IOCTL(((struct vm *)vm)->fd, KVM_SET_GSI_ROUTING, &t) < 0 ? -errno : 0;
}

static int ctx_main_watch(void *vm_, int fd, void (*fn)(void *arg), void *arg)
{
	struct vm *vm = vm_;

	if (vm->nr_main_watch == VM_MAIN_WATCHES)
		return -ENOSPC;
	vm->main_watch[vm->nr_main_watch].fd = fd;
	vm->main_watch[vm->nr_main_watch].fn = fn;
	vm->main_watch[vm->nr_main_watch].arg = arg;
	vm->nr_main_watch++;
	return 0;
}

const struct devctx_ops vm_devctx_ops = {
    .irq_line = ctx_irq_line,
    .request_exit = ctx_request_exit,
    .ioeventfd = ctx_ioeventfd,
    .irqfd = ctx_irqfd,
    .loop = ctx_loop,
    .msi = ctx_msi,
    .msi_routes = ctx_msi_routes,
    .main_watch = ctx_main_watch,
};

/* Blocks until an exit is requested or SIGINT/SIGTERM/SIGHUP arrives. */
static void wait_for_exit(struct vm *vm, int sig_fd)
{
	struct pollfd p[2 + VM_WATCH_FDS] = {{.fd = vm->wake_fd, .events = POLLIN}, {.fd = sig_fd, .events = POLLIN}};

	while (!atomic_load(&vm->exit_requested)) {
		vm_watch_fds(vm, p + 2);
		if (poll(p, 2 + VM_WATCH_FDS, -1) < 0) {
			if (errno != EINTR)
				break;
			continue;
		}
		vm_watch_events(vm, p + 2);
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sig_fd, &si, sizeof(si)) == sizeof(si)) {
				fc_metrics_signal((int)si.ssi_signo); /* Firecracker's "signals" group */
				log_warn("stopping on %s", strsignal((int)si.ssi_signo));
			}
			vm_request_exit(vm, EXIT_STOPPED, "stopped by signal");
		}
	}
}

static void join_vcpus(struct vm *vm)
{
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		struct timespec ts;
		int tries = 0;

		if (!v->started)
			continue;
		/* Without KVM_CAP_IMMEDIATE_EXIT a kick can race with entry: repeat it. */
		for (;;) {
			ts = bthread_deadline(CLOCK_REALTIME, VCPU_JOIN_TIMEOUT_MS);
			if (bthread_timedjoin(v->thread, NULL, &ts) == 0)
				break;
			if (++tries == VCPU_JOIN_TRIES) {
				log_error("vCPU %u does not stop; exiting without it", i);
				pthread_detach(v->thread);
				break;
			}
			vcpu_kick(v);
		}
		v->started = 0;
	}
}

/*
 * The devices' late start (device.h: e.g. the serial input thread, not
 * needed before the guest reads input), after the vCPUs are released, so it
 * overlaps the guest's first instructions.
 */
static void late_start_devices(struct vm *vm)
{
	const char *dev = "?";
	int err = bus_late_start(&vm->bus, &dev);

	if (err) {
		log_error("starting device %s failed: %s", dev, strerror(-err));
		vm_request_exit(vm, EXIT_HOST, "device start failed");
	}
}

int vm_start(struct vm *vm, struct vm_error *e)
{
	/* Every vCPU is configured (in parallel, by its thread) before any runs. */
	int failed = 0;

	if (vm->cfg.hooks && vm->cfg.hooks->confine && !atomic_load(&vm->exit_requested))
		vm->cfg.hooks->confine(vm, vm->cfg.hooks->ctx); /* while the vCPU threads still configure */
	vm_wait_vcpus_ready(vm, vm->nr_vcpus);
	timeline_mark(TL_VCPUS_READY);
	for (unsigned i = 0; i < vm->nr_vcpus && !failed; i++) {
		failed = vm->vcpus[i].setup_error;
		if (failed && e)
			*e = vm->vcpus[i].setup_why;
	}
	if (failed)
		vm_request_exit(vm, failed, "vCPU configuration failed");
	if (vm->cfg.hooks && vm->cfg.hooks->vcpus_ready && !atomic_load(&vm->exit_requested))
		vm->cfg.hooks->vcpus_ready(vm, vm->cfg.hooks->ctx);
	release_vcpus(vm);
	vm_wset_started(vm);
	late_start_devices(vm);
	/* Only a set-up failure: a guest may well have ended already, which is its own business. */
	return failed;
}

int vm_wake_fd(const struct vm *vm)
{
	return vm->wake_fd;
}

bool vm_exit_requested(const struct vm *vm)
{
	return atomic_load(&vm->exit_requested) != 0;
}

void vm_watch_fds(const struct vm *vm, struct pollfd *p)
{
	p[0] = (struct pollfd){.fd = vm->uffd_peer.pidfd, .events = POLLIN};
	p[1] = (struct pollfd){.fd = vm->ws.timer_fd, .events = POLLIN};
	p[2] = (struct pollfd){.fd = vm->ws.recorded ? -1 : vm->ws.marker_fd, .events = POLLIN};
	for (unsigned i = 0; i < VM_MAIN_WATCHES; i++)
		p[3 + i] = (struct pollfd){.fd = i < vm->nr_main_watch ? vm->main_watch[i].fd : -1, .events = POLLIN};
}

static void handler_exited(struct vm *vm)
{
	int pid = vm->uffd_peer.pid;

	close(vm->uffd_peer.pidfd);
	vm->uffd_peer.pidfd = -1;
	if (gmem_uffd_missing(&vm->mem) == 0) {
		/* Nothing is left for it to serve: later faults (after a balloon's discard) are anonymous zero pages.
		 */
		gmem_uffd_release(&vm->mem);
		log_info("the page-fault handler (pid %d) exited after serving every page; the VM runs on", pid);
		return;
	}
	log_error("the page-fault handler (pid %d) serving this VM's memory exited with pages unserved; a vCPU "
		  "touching one would wait for ever: ending the VM",
		  pid);
	vm_request_exit(vm, EXIT_UFFD_HANDLER, "the page-fault handler exited");
}

void vm_watch_events(struct vm *vm, const struct pollfd *p)
{
	if (p[0].fd >= 0 && (p[0].revents & POLLIN))
		handler_exited(vm);
	if ((p[1].fd >= 0 && (p[1].revents & POLLIN)) || (p[2].fd >= 0 && (p[2].revents & POLLIN)))
		vm_wset_record(vm, p[2].revents & POLLIN);
	for (unsigned i = 0; i < vm->nr_main_watch; i++)
		if (p[3 + i].fd >= 0 && (p[3 + i].revents & POLLIN))
			vm->main_watch[i].fn(vm->main_watch[i].arg);
}

int vm_finish(struct vm *vm)
{
	gmem_uffd_release(&vm->mem); /* a vCPU waiting for a page nobody serves can stop */
	join_vcpus(vm);
	vm_wset_join(vm);      /* a working set still being mapped: stopped */
	evloop_stop(vm->loop); /* no device callback runs while the devices stop */
	bus_stop(&vm->bus);
	log_info("VM ended: %s (exit status %d)", vm->exit_reason, vm->exit_code);
	if (log_dropped())
		log_warn("%llu log messages were dropped: stderr was not being read",
			 (unsigned long long)log_dropped());
	return vm->exit_code;
}

int vm_run_notify(struct vm *vm, int sig_fd, int started_fd)
{
	struct vm_error e;

	if (vm_start(vm, &e))
		log_error("%s", e.msg);
	if (started_fd >= 0) {
		if (write(started_fd, "s", 1) != 1) /* the server gone: its own end stops this clone */
			log_debug("telling the clone server the guest runs: %s", strerror(errno));
		close(started_fd);
	}
	wait_for_exit(vm, sig_fd);
	return vm_finish(vm);
}

int vm_run(struct vm *vm, int sig_fd)
{
	return vm_run_notify(vm, sig_fd, -1);
}

void vm_print_report(struct vm *vm, FILE *f)
{
	timeline_print(f);
	fputc('\n', f);
	vcpu_print_stats(vm, f);
	fputc('\n', f);
	kvm_ioctl_stats_print(f);
}

/* A recipe that failed after step 6: its vCPU threads are told so, released and joined. */
static void stop_vcpu_threads(struct vm *vm)
{
	unsigned started = 0;

	for (unsigned i = 0; vm->vcpus && i < vm->nr_vcpus; i++)
		started += (unsigned)vm->vcpus[i].started;
	if (!started)
		return;
	atomic_store(&vm->exit_requested, 1);
	vm_publish_config(vm, VM_CONFIG_ABORTED);
	vm_wait_vcpus_ready(vm, started);
	release_vcpus(vm);
	join_vcpus(vm);
}

void vm_destroy(struct vm *vm)
{
	if (!vm)
		return;
	gmem_uffd_release(&vm->mem);
	gmem_uffd_fetcher_join(&vm->uffd_fetch); /* woken by the release: it returns with zero pages */
	if (!vm->go)
		stop_vcpu_threads(vm);
	for (unsigned i = 0; vm->vcpus && i < vm->nr_vcpus; i++) {
		if (vm->vcpus[i].run)
			munmap(vm->vcpus[i].run, (size_t)vm->kvm.run_size);
		if (vm->vcpus[i].fd >= 0)
			close(vm->vcpus[i].fd);
		exit_series_free(&vm->vcpus[i].stats.series);
	}
	free(vm->vcpus);
	cpuid_vm_destroy(&vm->cpuid_vm);
	evloop_stop(vm->loop);
	bus_destroy(&vm->bus);
	evloop_destroy(vm->loop);
	for (unsigned i = 0; i < VM_MAX_NETS; i++) {
		if (vm->net_early[i]) /* started, never taken: the build failed before its device */
			vm->net_early[i]->ops->destroy(vm->net_early[i]);
	}
	free(vm->cmdline);
	snap_reader_free(vm->snap);
	cpuid_fc_free(vm->snap_strings.fc_template);
	config_release(&vm->cfg);
	vm_wset_destroy(vm);
	gmem_destroy(&vm->mem);
	if (vm->mem_file_fd >= 0)
		close(vm->mem_file_fd);
	free(vm->api_desc);
	free(vm->state_path);
	if (vm->uffd_peer.pidfd >= 0)
		close(vm->uffd_peer.pidfd);
	if (vm->fd >= 0)
		close(vm->fd);
	kvm_close(&vm->kvm);
	kernel_close(&vm->kernel);
	if (vm->serial_out_fd >= 0)
		close(vm->serial_out_fd);
	if (vm->wake_fd >= 0)
		close(vm->wake_fd);
	pthread_cond_destroy(&vm->go_cond);
	pthread_cond_destroy(&vm->ready_cond);
	pthread_cond_destroy(&vm->config_cond);
	pthread_mutex_destroy(&vm->go_lock);
	pthread_cond_destroy(&vm->pause_cond);
	pthread_mutex_destroy(&vm->pause_lock);
	free(vm);
}
