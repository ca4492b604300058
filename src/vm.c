/* vm.c - the VM build recipe (top to bottom, unwinding with goto), running it, and the services devices call. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "brisk/cpuid.h"
#include "brisk/devices.h"
#include "brisk/exitcode.h"
#include "brisk/file.h"
#include "brisk/layout.h"
#include "brisk/log.h"
#include "brisk/mptable.h"
#include "brisk/timeline.h"
#include "vm_impl.h"

/* The built-in demo guest, linked in by src/demo_guest.S. */
extern const uint8_t brisk_demo_guest[];
extern const uint8_t brisk_demo_guest_end[];

#define VCPU_JOIN_TIMEOUT_MS 50
#define VCPU_JOIN_TRIES	     100 /* 5 s of kicking before giving up on a vCPU */

int vm_signals_init(void)
{
	return vcpu_signals_init();
}

int vm_fd(const struct vm *vm)
{
	return vm->fd;
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
static void publish_config(struct vm *vm, int state)
{
	pthread_mutex_lock(&vm->go_lock);
	vm->config_state = state;
	pthread_cond_broadcast(&vm->config_cond);
	pthread_mutex_unlock(&vm->go_lock);
}

void vm_vcpu_ready_wait_go(struct vm *vm)
{
	pthread_mutex_lock(&vm->go_lock);
	vm->nr_ready++;
	pthread_cond_signal(&vm->ready_cond);
	while (!vm->go)
		pthread_cond_wait(&vm->go_cond, &vm->go_lock);
	pthread_mutex_unlock(&vm->go_lock);
}

/* Waits until the first `started` vCPU threads are configured. */
static void wait_vcpus_ready(struct vm *vm, unsigned started)
{
	pthread_mutex_lock(&vm->go_lock);
	while (vm->nr_ready < started)
		pthread_cond_wait(&vm->ready_cond, &vm->go_lock);
	pthread_mutex_unlock(&vm->go_lock);
}

/* Lets every vCPU thread waiting in vm_vcpu_ready_wait_go run (or see the exit request and stop). */
static void release_vcpus(struct vm *vm)
{
	pthread_mutex_lock(&vm->go_lock);
	vm->go = 1;
	pthread_cond_broadcast(&vm->go_cond);
	pthread_mutex_unlock(&vm->go_lock);
}

void vm_irq_line(struct vm *vm, unsigned irq, int level)
{
	struct kvm_irq_level l = {.irq = irq, .level = (uint32_t)level};

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
	if (write(vm->wake_fd, &one, sizeof(one)) < 0)
		log_warn("waking the main thread failed: %s", strerror(errno));
}

/* Step 1: the kernel image (and initrd), detected and validated before anything is created. */
static int load_image(struct vm *vm)
{
	char err[BOOT_ERR_MAX];
	const struct kernel_files f = {
	    .kernel = vm->cfg.kernel,
	    .kernel_data = brisk_demo_guest,
	    .kernel_size = (size_t)(brisk_demo_guest_end - brisk_demo_guest),
	    .kernel_name = "built-in demo guest",
	    .initrd = vm->cfg.initrd,
	};

	int ret = kernel_open(&vm->kernel, &f, err, sizeof(err));

	if (ret) {
		log_error("%s", err);
		/* Out of fds or memory is the host's condition, not the image's (docs/exit-codes.md). */
		return ret == -EMFILE || ret == -ENFILE || ret == -ENOMEM ? EXIT_HOST : EXIT_IMAGE;
	}
	log_debug("%s: %s%s", vm->kernel.name, kernel_format_name(vm->kernel.format),
		  vm->kernel.is_linux ? " (Linux)" : "");
	return 0;
}

/*
 * Step 4: /dev/kvm. A failure is recorded, not reported yet: the user's own
 * inputs are checked first (step 5), so a bad image gets its own exit
 * status on a host without KVM too.
 */
static void open_kvm(struct vm *vm)
{
	vm->kvm_ret = kvm_open_err(&vm->kvm, "/dev/kvm", vm->kvm_err, sizeof(vm->kvm_err));
	if (!vm->kvm_ret)
		timeline_mark(TL_KVM_OPEN);
}

/* Step 6: what opening /dev/kvm found, and the vCPU count against KVM's own limit. */
static int check_kvm(struct vm *vm)
{
	if (vm->kvm_ret) {
		log_error("%s", vm->kvm_err);
		return EXIT_HOST;
	}
	if (vm->cfg.cpus > (unsigned)vm->kvm.max_vcpus) {
		log_error("--cpus %u is out of range: KVM on this host allows 1..%d", vm->cfg.cpus, vm->kvm.max_vcpus);
		return EXIT_USAGE;
	}
	return 0;
}

/*
 * Step 7: the VM and the pages KVM needs on Intel (api.rst 4.2, 4.43, 4.50).
 * The TSS and identity-map pages can be private memory slots (Intel without
 * unrestricted guest), so they come before the irqchip like guest RAM
 * (docs/architecture.md, "Why this order").
 */
static int create_vm(struct vm *vm)
{
	vm->fd = KVM_IOCTL(vm->kvm.fd, KVM_CREATE_VM, 0);
	if (vm->fd < 0) {
		log_error("KVM_CREATE_VM failed: %s", strerror(errno));
		return EXIT_HOST;
	}
	/* Intel needs three pages for the real-mode TSS and one identity-map page, inside the hole. */
	if (KVM_IOCTL(vm->fd, KVM_SET_TSS_ADDR, LAYOUT_KVM_TSS) < 0 ||
	    KVM_IOCTL(vm->fd, KVM_SET_IDENTITY_MAP_ADDR, &(uint64_t){LAYOUT_KVM_IDENTITY_MAP}) < 0) {
		log_error("KVM_SET_TSS_ADDR/KVM_SET_IDENTITY_MAP_ADDR failed: %s", strerror(errno));
		return EXIT_HOST;
	}
	timeline_mark(TL_VM_CREATED);
	return 0;
}

/* Step 3: guest RAM, one anonymous mapping (no KVM needed yet); the kernel is copied into it in step 5. */
static int alloc_memory(struct vm *vm)
{
	unsigned flags = (vm->cfg.hugepages ? GMEM_HUGEPAGES : 0) | (vm->cfg.prefault ? GMEM_PREFAULT : 0);

	return gmem_init(&vm->mem, vm->cfg.memory, flags) ? EXIT_HOST : 0;
}

/* Step 8: guest RAM registered, one slot per region around the 32-bit MMIO hole. */
static int map_memory(struct vm *vm)
{
	for (unsigned i = 0; i < vm->mem.nr; i++) {
		struct kvm_userspace_memory_region r = {
		    .slot = i,
		    .guest_phys_addr = vm->mem.region[i].gpa,
		    .memory_size = vm->mem.region[i].size,
		    .userspace_addr = (uintptr_t)vm->mem.region[i].host,
		};

		if (KVM_IOCTL(vm->fd, KVM_SET_USER_MEMORY_REGION, &r) < 0) {
			log_error("KVM_SET_USER_MEMORY_REGION slot %u (0x%llx, %llu bytes) failed: %s", i,
				  (unsigned long long)r.guest_phys_addr, (unsigned long long)r.memory_size,
				  strerror(errno));
			return EXIT_HOST;
		}
	}
	timeline_mark(TL_MEMORY);
	return 0;
}

/*
 * Step 9: the in-kernel irqchip and PIT (api.rst 4.24, 4.59), after every
 * memory slot: each device they register on KVM's I/O bus leaves an SRCU
 * grace period in flight, and a memory-slot change made after them waits
 * for it (measured: 4-10 ms instead of 0.1 ms; docs/architecture.md). They
 * must precede the vCPUs (KVM_CREATE_IRQCHIP fails once a vCPU exists).
 */
static int create_irqchip(struct vm *vm)
{
	struct kvm_pit_config pit = {.flags = 0};

	if (KVM_IOCTL(vm->fd, KVM_CREATE_IRQCHIP, 0) < 0 || KVM_IOCTL(vm->fd, KVM_CREATE_PIT2, &pit) < 0) {
		log_error("KVM_CREATE_IRQCHIP/KVM_CREATE_PIT2 failed: %s", strerror(errno));
		return EXIT_HOST;
	}
	timeline_mark(TL_IRQCHIP);
	return 0;
}

/*
 * Step 2: the serial output file, opened now so that a bad path is a usage
 * error before anything is created; never the kernel or initrd being booted
 * (truncating a mapped image would destroy it and fault brisk), never a
 * blocking open (include/brisk/file.h).
 */
static int open_outputs(struct vm *vm)
{
	const struct file_avoid avoid[] = {
	    {vm->kernel.image.mapped ? &vm->kernel.image.st : NULL, "the kernel image (--kernel)"},
	    {vm->kernel.initrd.mapped ? &vm->kernel.initrd.st : NULL, "the initrd (--initrd)"},
	};
	char err[512];
	int fd;

	if (vm->cfg.serial != SERIAL_FILE)
		return 0;
	fd = file_open_output(vm->cfg.serial_path, "--serial file:", avoid, 2, 0, err, sizeof(err));
	if (fd < 0) {
		log_error("%s", err);
		return fd == -EMFILE || fd == -ENFILE ? EXIT_HOST : EXIT_USAGE;
	}
	vm->serial_out_fd = fd;
	return 0;
}

/*
 * Step 10: one thread per vCPU, started as soon as the irqchip exists: each
 * creates its vCPU and run page now, in parallel with the rest of the
 * recipe, then waits for the CPUID template and entry state (step 13).
 * Threads left behind by a failing recipe are stopped by vm_destroy.
 */
static int start_vcpus(struct vm *vm)
{
	struct cpuid_topology topo;
	char err[256];

	/* config_validate checked this topology; KVM's vCPU id is the APIC ID (its LAPIC's initial ID). */
	if (cpuid_topology_init(&topo, vm->cfg.cpus, vm->cfg.topology.sockets, vm->cfg.topology.cores,
				vm->cfg.topology.threads, err, sizeof(err))) {
		log_error("%s", err);
		return EXIT_USAGE;
	}
	vm->nr_vcpus = vm->cfg.cpus;
	vm->vcpus = calloc(vm->nr_vcpus, sizeof(*vm->vcpus));
	if (!vm->vcpus) {
		log_error("out of memory for %u vCPUs", vm->nr_vcpus);
		return EXIT_HOST;
	}
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		vm->vcpus[i] = (struct vcpu){.vm = vm, .index = i, .apic_id = cpuid_apic_id(&topo, i), .fd = -1};
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		int e = pthread_create(&v->thread, NULL, vcpu_thread, v);

		if (e) {
			log_error("cannot create the thread of vCPU %u: %s", i, strerror(e));
			return EXIT_HOST;
		}
		v->started = 1;
	}
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

static const struct devctx_ops vm_devctx_ops = {
    .irq_line = ctx_irq_line,
    .request_exit = ctx_request_exit,
    .ioeventfd = ctx_ioeventfd,
    .irqfd = ctx_irqfd,
    .loop = ctx_loop,
};

/* Step 11: the devices, each added to the one bus, which owns them. */
static int create_devices(struct vm *vm)
{
	const struct devctx ctx = {.mem = &vm->mem, .vm = vm, .ops = &vm_devctx_ops};
	struct serial_opts so = {.out_fd = vm->cfg.serial == SERIAL_FILE ? vm->serial_out_fd : -1, .in_fd = -1};
	int err;

	if (vm->cfg.serial == SERIAL_STDIO) {
		so.out_fd = STDOUT_FILENO;
		so.in_fd = STDIN_FILENO;
		so.raw_tty = isatty(STDIN_FILENO);
	}
	if ((err = serial8250_create(&ctx, &vm->bus, &so, NULL)) || (err = i8042_create(&ctx, &vm->bus)) ||
	    (err = debugexit_create(&ctx, &vm->bus)) || (err = bootmark_create(&vm->bus)) ||
	    (err = cmos_create(&vm->bus))) {
		log_error("creating the platform devices failed: %s", strerror(-err));
		return EXIT_HOST;
	}
	return 0;
}

/*
 * Step 5: the kernel (and initrd) in guest RAM and its boot structures;
 * every size check (segments and initrd against RAM, command line against
 * the kernel's limit) is here, before KVM is needed. The files are closed
 * after.
 */
static int load_kernel(struct vm *vm)
{
	char err[BOOT_ERR_MAX];
	int ret = kernel_load(&vm->kernel, &vm->mem, vm->cfg.cmdline, &vm->entry, err, sizeof(err));

	if (!ret && vm->kernel.initrd.size)
		log_debug("initrd: %zu bytes at 0x%llx", vm->kernel.initrd.size,
			  (unsigned long long)vm->kernel.initrd_addr);
	kernel_close(&vm->kernel);
	if (ret) {
		log_error("%s", err);
		/* -E2BIG: the command line is too long for this kernel, an option's fault. */
		return ret == -E2BIG ? EXIT_USAGE : EXIT_IMAGE;
	}
	timeline_mark(TL_KERNEL_LOADED);
	return 0;
}

/*
 * Step 12: the per-VM CPUID template and boot MSRs, from KVM's tables
 * (fetched once per process). Here, on the main thread, while the vCPU
 * threads create their vCPUs: fetching them on a helper thread during steps
 * 5-9 was measured no faster (docs/performance.md, "Start-up at the floor").
 */
static int prepare_cpuid(struct vm *vm)
{
	const struct cpuid_kvm *k = cpuid_kvm_get(vm->kvm.fd);
	struct cpuid_params p = {
	    .cpus = vm->cfg.cpus,
	    .sockets = vm->cfg.topology.sockets,
	    .cores = vm->cfg.topology.cores,
	    .threads = vm->cfg.topology.threads,
	    .cpu_template = vm->cfg.cpu_template,
	};
	char err[512];
	int ret;

	if (!k)
		return EXIT_HOST;
	ret = cpuid_vm_init(&vm->cpuid_vm, k, &p, err, sizeof(err));
	if (ret) {
		log_error("%s", err);
		return ret == -EINVAL ? EXIT_USAGE : EXIT_HOST;
	}
	return 0;
}

/*
 * Step 13: firmware-style platform tables: the MP table (MP spec 1.4) naming
 * every vCPU by the APIC ID its CPUID reports, and the I/O APIC.
 */
static int write_platform_tables(struct vm *vm)
{
	char err[BOOT_ERR_MAX];
	uint32_t *ids = calloc(vm->cfg.cpus, sizeof(*ids));
	int ret;

	if (!ids)
		return EXIT_HOST;
	for (unsigned i = 0; i < vm->cfg.cpus; i++)
		ids[i] = cpuid_apic_id(&vm->cpuid_vm.topo, i);
	ret = mptable_write(&vm->mem, vm->cfg.cpus, ids, err, sizeof(err));
	free(ids);
	if (ret) {
		log_error("--cpus %u: %s", vm->cfg.cpus, err);
		return ret == -EINVAL ? EXIT_USAGE : EXIT_HOST;
	}
	/* The vCPU threads may now set their CPUID, MSRs and (vCPU 0) entry registers. */
	publish_config(vm, VM_CONFIG_PUBLISHED);
	return 0;
}

/*
 * Step 14: the devices' start (device.h: what the guest's first access
 * needs, e.g. the serial output thread), while the vCPU threads set their
 * CPUID and registers.
 */
static int start_devices(struct vm *vm)
{
	const char *dev = "?";
	int err = bus_start(&vm->bus, &dev);

	if (err) {
		log_error("starting device %s failed: %s", dev, strerror(-err));
		return EXIT_HOST;
	}
	return 0;
}

int vm_create(const struct vm_config *cfg, struct vm **out)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	int ret;

	if (!vm)
		return EXIT_HOST;
	vm->cfg = *cfg;
	vm->fd = -1;
	vm->kvm.fd = -1;
	vm->serial_out_fd = -1;
	pthread_mutex_init(&vm->go_lock, NULL);
	pthread_cond_init(&vm->go_cond, NULL);
	pthread_cond_init(&vm->ready_cond, NULL);
	pthread_cond_init(&vm->config_cond, NULL);
	bus_init(&vm->bus);
	vm->wake_fd = eventfd(0, EFD_CLOEXEC);
	if (vm->wake_fd < 0) {
		log_error("eventfd: %s", strerror(errno));
		ret = EXIT_HOST;
		goto fail;
	}
	/* Steps 1-5 need no KVM: every input the user gave is checked before KVM is used. */
	if ((ret = load_image(vm)) || (ret = open_outputs(vm)) || (ret = alloc_memory(vm)))
		goto fail;
	open_kvm(vm);
	if ((ret = load_kernel(vm)) || (ret = check_kvm(vm)) || (ret = create_vm(vm)) || (ret = map_memory(vm)) ||
	    (ret = create_irqchip(vm)) || (ret = start_vcpus(vm)) || (ret = create_devices(vm)) ||
	    (ret = prepare_cpuid(vm)) || (ret = write_platform_tables(vm)) || (ret = start_devices(vm)))
		goto fail;
	*out = vm;
	return 0;
fail:
	vm_destroy(vm);
	return ret;
}

/* Blocks until an exit is requested or SIGINT/SIGTERM/SIGHUP arrives. */
static void wait_for_exit(struct vm *vm, int sig_fd)
{
	struct pollfd p[2] = {{.fd = vm->wake_fd, .events = POLLIN}, {.fd = sig_fd, .events = POLLIN}};

	while (!atomic_load(&vm->exit_requested)) {
		if (poll(p, sig_fd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sig_fd, &si, sizeof(si)) == sizeof(si))
				log_warn("stopping on %s", strsignal((int)si.ssi_signo));
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
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += VCPU_JOIN_TIMEOUT_MS * 1000000L;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			if (pthread_timedjoin_np(v->thread, NULL, &ts) == 0)
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

int vm_run(struct vm *vm, int sig_fd)
{
	/* Every vCPU is configured (in parallel, by its thread) before any runs. */
	wait_vcpus_ready(vm, vm->nr_vcpus);
	timeline_mark(TL_VCPUS_READY);
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		if (vm->vcpus[i].setup_error)
			vm_request_exit(vm, vm->vcpus[i].setup_error, "vCPU configuration failed");
	if (vm->cfg.hooks && vm->cfg.hooks->vcpus_ready && !atomic_load(&vm->exit_requested))
		vm->cfg.hooks->vcpus_ready(vm, vm->cfg.hooks->ctx);
	release_vcpus(vm);
	late_start_devices(vm);
	wait_for_exit(vm, sig_fd);
	join_vcpus(vm);
	bus_stop(&vm->bus);
	log_info("VM ended: %s (exit status %d)", vm->exit_reason, vm->exit_code);
	if (log_dropped())
		log_warn("%llu log messages were dropped: stderr was not being read",
			 (unsigned long long)log_dropped());
	return vm->exit_code;
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
	publish_config(vm, VM_CONFIG_ABORTED);
	wait_vcpus_ready(vm, started);
	release_vcpus(vm);
	join_vcpus(vm);
}

void vm_destroy(struct vm *vm)
{
	if (!vm)
		return;
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
	bus_destroy(&vm->bus);
	gmem_destroy(&vm->mem);
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
	free(vm);
}
