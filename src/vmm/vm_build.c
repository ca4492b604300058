/*
 * vm_build.c - the VM build recipe: vm_create, top to bottom, each step a function, unwinding through
 * vm_destroy. The order is chosen by measurement (docs/architecture.md, "Why this order").
 *
 * One error convention: a step returns 0 or -errno and fills `struct vm_error` with the message and
 * whose fault it is (the user's input, the image, the host); only the CLI maps that to an exit status.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/acpi.h"
#include "brisk/config.h"
#include "brisk/cpuid.h"
#include "brisk/devices.h"
#include "brisk/devkinds.h"
#include "brisk/devmgr.h"
#include "brisk/errmsg.h"
#include "brisk/evloop.h"
#include "brisk/file.h"
#include "brisk/kvm_state.h"
#include "brisk/layout.h"
#include "brisk/log.h"
#include "brisk/mptable.h"
#include "brisk/snap_memfile.h"
#include "brisk/snapshot.h"
#include "brisk/thread.h"
#include "brisk/timeline.h"
#include "brisk/virtio_vsock.h"
#include "vm_impl.h"

/* The built-in demo guest, linked in by src/demo_guest.S. */
extern const uint8_t brisk_demo_guest[];
extern const uint8_t brisk_demo_guest_end[];

__attribute__((format(printf, 4, 5))) static int fail(struct vm_error *e, enum vm_error_kind kind, int ret,
						      const char *fmt, ...)
{
	va_list ap;

	e->kind = kind;
	va_start(ap, fmt);
	err_vset(e->msg, sizeof(e->msg), ret, fmt, ap);
	va_end(ap);
	return ret;
}

/* Out of fds or memory is the host's condition, whatever was being opened (docs/exit-codes.md). */
static enum vm_error_kind kind_of(int ret, enum vm_error_kind otherwise)
{
	return ret == -EMFILE || ret == -ENFILE || ret == -ENOMEM ? VM_ERR_HOST : otherwise;
}

/* Step 1: the kernel image (and initrd), detected and validated before anything is created. */
static int load_image(struct vm *vm, struct vm_error *e)
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

	if (ret)
		return fail(e, kind_of(ret, VM_ERR_IMAGE), ret, "%s", err);
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
	/* what the API's idle loop opened (vm_prewarm.c), its outcome kept as this one's would be */
	if (!vm_prewarm_take_kvm(&vm->kvm, &vm->kvm_ret, vm->kvm_err, sizeof(vm->kvm_err)))
		vm->kvm_ret = kvm_open_err(&vm->kvm, "/dev/kvm", vm->kvm_err, sizeof(vm->kvm_err));
	if (!vm->kvm_ret)
		timeline_mark(TL_KVM_OPEN);
}

/* Step 6: what opening /dev/kvm found, and the vCPU count against KVM's own limit. */
/*
 * Step 3c: the device backends that take long to get ready start now, to get ready while KVM is opened, the kernel
 * loaded and the vCPUs and other devices made (each --net user's helper: its exec and libslirp's set-up took
 * 3-4 ms on a kvm_pvm host, more than brisk's whole start; docs/performance.md "User networking's helper").
 * The devices wait for them when they are created (step 11).
 */
static int start_early(struct vm *vm, struct vm_error *e)
{
	enum vm_error_kind kind = VM_ERR_HOST;
	char why[sizeof(e->msg)];
	int ret = devkinds_start_early(&vm->cfg, vm->net_early, why, sizeof(why), &kind);

	return ret ? fail(e, kind, ret, "%s", why) : 0;
}

static int check_kvm(struct vm *vm, struct vm_error *e)
{
	if (vm->kvm_ret)
		return fail(e, VM_ERR_HOST, vm->kvm_ret, "%s", vm->kvm_err);
	if (vm->cfg.cpus > (unsigned)vm->kvm.max_vcpus)
		return fail(e, VM_ERR_USAGE, -ERANGE, "--cpus %u is out of range: KVM on this host allows 1..%d",
			    vm->cfg.cpus, vm->kvm.max_vcpus);
	return 0;
}

/*
 * Step 7: the VM and the pages KVM needs on Intel (api.rst 4.2, 4.43, 4.50).
 * The TSS and identity-map pages can be private memory slots (Intel without
 * unrestricted guest), so they come before the irqchip like guest RAM
 * (docs/architecture.md, "Why this order").
 */
static int create_vm(struct vm *vm, struct vm_error *e)
{
	const char *failed = NULL;

	vm->fd = vm_prewarm_take_vm_fd(); /* made as below while the API idled, or -1 */
	if (vm->fd < 0)
		vm->fd = vm_create_kvm_vm(vm->kvm.fd, &failed);
	if (vm->fd < 0) {
		int err = vm->fd;

		vm->fd = -1;
		return fail(e, VM_ERR_HOST, err, "%s failed: %s", failed, strerror(-err));
	}
	timeline_mark(TL_VM_CREATED);
	return 0;
}

/*
 * Whether the guest finds devices through ACPI: a Linux kernel, unless
 * --acpi off or its `cmdline` turns ACPI off (acpi=off: Kata's fc driver
 * passes it; such a kernel ignores the DSDT). Other kernels (the test
 * guests, unikernels) read the command-line words whether or not the
 * tables are there.
 */
static bool acpi_describes_devices(const struct vm *vm, const char *cmdline)
{
	return !vm->cfg.no_acpi && vm->kernel.is_linux && !devmgr_cmdline_acpi_off(cmdline);
}

/* What follows a Linux kernel's default command line (kernel.h): the words of the ACPI mode; else nothing. */
static const char *mode_words(const struct vm *vm)
{
	if (vm->cfg.cmdline || !vm->kernel.is_linux)
		return "";
	return vm->cfg.no_acpi ? " " KERNEL_LINUX_NOACPI : " " KERNEL_LINUX_ACPI;
}

#define DEVMGR_WORD_MAX 48 /* " virtio_mmio.device=4K@0xd0012000:23": what one device adds, at most */

/*
 * Step 2a: the vCPUs' APIC IDs, once, for the MADT (step 3b) and the vCPU
 * ids (step 10). config_validate checked this topology; KVM's vCPU id is the
 * APIC ID (its LAPIC's initial ID).
 */
static int plan_cpus(struct vm *vm, struct vm_error *e)
{
	char err[256];
	int ret = cpuid_topology_init(&vm->topo, vm->cfg.cpus, vm->cfg.topology.sockets, vm->cfg.topology.cores,
				      vm->cfg.topology.threads, err, sizeof(err));

	return ret ? fail(e, VM_ERR_USAGE, ret, "%s", err) : 0;
}

/*
 * Step 2b: the virtio devices planned (windows and interrupt lines from the
 * device manager, in the order devmgr_plan gives: disks as given, so the first
 * --disk is vda; then network interfaces, vsock, entropy, the console) and the command line: the
 * default or --cmdline, and, unless the ACPI tables describe the devices to
 * a Linux kernel, a virtio_mmio.device= word for each (devmgr.h). Kernels
 * built without CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES (Debian's) see the
 * devices only through ACPI. Its length is the loader's to check (step 5:
 * the kernel's own limit, with a message naming it).
 */
static int plan_devices(struct vm *vm, struct vm_error *e)
{
	const char *user = vm->cfg.cmdline ? vm->cfg.cmdline : kernel_default_cmdline(&vm->kernel);
	const char *extra = vm->cfg.cmdline_append ? vm->cfg.cmdline_append : "";
	const struct devmgr none = {0};
	size_t cap;
	char *base;
	int n;

	devmgr_plan(&vm->devmgr, &vm->cfg);
	cap = strlen(user) + sizeof(KERNEL_LINUX_NOACPI) + strlen(extra) + 1 + vm->devmgr.nr * DEVMGR_WORD_MAX + 1;
	base = malloc(cap);
	vm->cmdline = malloc(cap);
	if (!base || !vm->cmdline) {
		free(base);
		return fail(e, VM_ERR_HOST, -ENOMEM, "out of memory for the command line");
	}
	snprintf(base, cap, "%s%s%s%s", user, mode_words(vm), *extra ? " " : "", extra);
	n = devmgr_cmdline(acpi_describes_devices(vm, base) ? &none : &vm->devmgr, base, vm->cmdline, cap);
	free(base);
	return n < 0 ? fail(e, VM_ERR_HOST, n, "composing the kernel command line failed") : 0;
}

/*
 * Step 3b: the ACPI tables (acpi.h: RSDP, XSDT, FADT, MADT, DSDT at
 * LAYOUT_ACPI, in the reserved legacy window), built from what the VM will
 * be: the vCPUs by APIC ID, the virtio windows, the legacy devices. No KVM
 * needed. The boot structures written in step 5 point at the RSDP.
 */
static int write_acpi(struct vm *vm, struct vm_error *e)
{
	uint32_t ids[CONFIG_MAX_CPUS];
	struct acpi_machine m;
	char err[256];
	int ret;

	if (vm->cfg.no_acpi)
		return 0;
	devmgr_acpi_machine(&vm->devmgr, &vm->cfg, &vm->topo, ids, &m);
	ret = acpi_write(&vm->mem, &m, &vm->kernel.rsdp_addr, err, sizeof(err));
	if (ret)
		return fail(e, ret == -EINVAL ? VM_ERR_USAGE : VM_ERR_HOST, ret, "ACPI tables: %s", err);
	return 0;
}

/*
 * Dirty tracking on (--track-dirty-pages, track_dirty_pages, a load's enable_diff_snapshots): brisk's own writes
 * recorded from now on (the kernel's copy into RAM among them), the vCPUs' by KVM's log (map_memory).
 */
static int start_tracking(struct vm *vm, struct vm_error *e)
{
	int ret = vm->cfg.track_dirty ? gmem_dirty_enable(&vm->mem) : 0;

	return ret ? fail(e, VM_ERR_HOST, ret, "out of memory for the dirty page bitmap") : 0;
}

/* The message of a failed map of hugetlbfs RAM: the pool, which the host's administrator sizes. */
static int hugetlbfs_failed(struct vm_error *e, uint64_t size, int ret)
{
	if (ret == -ENOMEM)
		return fail(e, VM_ERR_HOST, ret,
			    "--hugetlbfs: reserving %llu 2 MiB hugetlbfs pages for %llu MiB of guest RAM failed: the "
			    "host's pool has too few free pages (raise /proc/sys/vm/nr_hugepages)",
			    (unsigned long long)(size / GMEM_HUGE_PAGE), (unsigned long long)(size >> 20));
	return fail(e, VM_ERR_HOST, ret,
		    "--hugetlbfs: a memfd of 2 MiB hugetlbfs pages for %llu MiB of guest RAM failed: %s (a kernel "
		    "without CONFIG_HUGETLBFS, or no 2 MiB page size)",
		    (unsigned long long)(size >> 20), strerror(-ret));
}

/* Step 3: guest RAM, one anonymous mapping (no KVM needed yet); the kernel is copied into it in step 5. */
static int alloc_memory(struct vm *vm, struct vm_error *e)
{
	unsigned flags = (vm->cfg.hugepages ? GMEM_HUGEPAGES : 0) | (vm->cfg.prefault ? GMEM_PREFAULT : 0) |
			 (vm->cfg.hugetlbfs ? GMEM_HUGETLBFS : 0);
	int ret = gmem_init(&vm->mem, vm->cfg.memory, flags);

	if (ret && vm->cfg.hugetlbfs)
		return hugetlbfs_failed(e, vm->cfg.memory, ret);
	if (ret)
		return fail(e, VM_ERR_HOST, ret, "%s %llu bytes of guest RAM failed: %s",
			    vm->cfg.prefault ? "mapping and prefaulting" : "mapping",
			    (unsigned long long)vm->cfg.memory, strerror(-ret));
	return start_tracking(vm, e);
}

/*
 * Step 8: guest RAM registered, one slot per region around the 32-bit MMIO hole; with dirty tracking, KVM logs
 * the guest's writes to each (KVM_MEM_LOG_DIRTY_PAGES, api.rst 4.35: KVM maps the slot with 4 KiB pages then).
 */
static int map_memory(struct vm *vm, struct vm_error *e)
{
	for (unsigned i = 0; i < vm->mem.nr; i++) {
		struct kvm_userspace_memory_region r = {
		    .slot = i,
		    .flags = vm->cfg.track_dirty ? KVM_MEM_LOG_DIRTY_PAGES : 0,
		    .guest_phys_addr = vm->mem.region[i].gpa,
		    .memory_size = vm->mem.region[i].size,
		    .userspace_addr = (uintptr_t)vm->mem.region[i].host,
		};

		if (KVM_IOCTL(vm->fd, KVM_SET_USER_MEMORY_REGION, &r) < 0)
			return fail(e, VM_ERR_HOST, -errno,
				    "KVM_SET_USER_MEMORY_REGION slot %u (0x%llx, %llu bytes) failed: %s", i,
				    (unsigned long long)r.guest_phys_addr, (unsigned long long)r.memory_size,
				    strerror(errno));
	}
	timeline_mark(TL_MEMORY);
	return 0;
}

/*
 * Step 9: the interrupt controllers, after every memory slot and before the vCPUs (either call fails once a
 * vCPU exists). Split (the default, api.rst 7.4 KVM_CAP_SPLIT_IRQCHIP): only the LAPICs are KVM's, with 24
 * GSIs reserved for brisk's I/O APIC (src/devices/ioapic.c, step 11); no PIC, no PIT, so KVM's I/O bus holds
 * nothing of them to unregister, one SRCU grace period each, when the VM is destroyed (docs/performance.md
 * "Teardown"). Kernel (--irqchip kernel): KVM's PIC, I/O APIC and PIT (api.rst 4.24, 4.59), after the memory
 * slots: each device they register on KVM's I/O bus leaves an SRCU grace period in flight, and a memory-slot
 * change made after them waits for it (measured: 4-10 ms instead of 0.1 ms; docs/architecture.md).
 */
static int create_irqchip(struct vm *vm, struct vm_error *e)
{
	struct kvm_pit_config pit = {.flags = 0};
	struct kvm_enable_cap split = {.cap = KVM_CAP_SPLIT_IRQCHIP, .args = {LAYOUT_IOAPIC_PINS}};

	if (vm->cfg.irqchip == IRQCHIP_SPLIT) {
		if (KVM_IOCTL(vm->fd, KVM_ENABLE_CAP, &split) < 0)
			return fail(e, VM_ERR_HOST, -errno,
				    "KVM_ENABLE_CAP(KVM_CAP_SPLIT_IRQCHIP) failed: %s (a KVM older than Linux 4.4 "
				    "has no split irqchip: --irqchip kernel uses KVM's own)",
				    strerror(errno));
	} else if (KVM_IOCTL(vm->fd, KVM_CREATE_IRQCHIP, 0) < 0 || KVM_IOCTL(vm->fd, KVM_CREATE_PIT2, &pit) < 0) {
		return fail(e, VM_ERR_HOST, -errno, "KVM_CREATE_IRQCHIP/KVM_CREATE_PIT2 failed: %s", strerror(errno));
	}
	timeline_mark(TL_IRQCHIP);
	return 0;
}

/*
 * Step 2: the serial output file, opened now so that a bad path is a usage
 * error before anything is created; never a file this VM boots from, serves
 * as a disk or was restored from (the guard, include/brisk/file.h:
 * truncating a mapped image would destroy it and fault brisk), never another
 * VM's disk, never a blocking open.
 */
static int open_outputs(struct vm *vm, struct vm_error *e)
{
	char err[512];
	int fd;

	if (vm->kernel.image.mapped)
		file_guard_add(&vm->kernel.image.st, FILE_GUARD_INPUT, "the kernel image (--kernel)");
	if (vm->kernel.initrd.mapped)
		file_guard_add(&vm->kernel.initrd.st, FILE_GUARD_INPUT, "the initrd (--initrd)");
	vm_config_guard(&vm->cfg);
	if (vm->cfg.serial != SERIAL_FILE)
		return 0;
	fd = file_open_output(vm->cfg.serial_path, "--serial file:", FILE_OUT_TRUNCATE, false, err, sizeof(err));
	if (fd < 0)
		return fail(e, kind_of(fd, VM_ERR_USAGE), fd, "%s", err);
	vm->serial_out_fd = fd;
	return 0;
}

/*
 * Step 10: one thread per vCPU, started as soon as the irqchip exists: each
 * creates its vCPU and run page now, in parallel with the rest of the
 * recipe, then waits for the CPUID template and entry state (step 13).
 * Threads left behind by a failing recipe are stopped by vm_destroy.
 */
static int start_vcpus(struct vm *vm, struct vm_error *e)
{
	int ret;

	vm->nr_vcpus = vm->cfg.cpus;
	vm->vcpus = calloc(vm->nr_vcpus, sizeof(*vm->vcpus));
	if (!vm->vcpus)
		return fail(e, VM_ERR_HOST, -ENOMEM, "out of memory for %u vCPUs", vm->nr_vcpus);
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		vm->vcpus[i] = (struct vcpu){.vm = vm, .index = i, .apic_id = cpuid_apic_id(&vm->topo, i), .fd = -1};
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		ret = bthread_create(&v->thread, vcpu_thread, v);
		if (ret)
			return fail(e, VM_ERR_HOST, -ret, "cannot create the thread of vCPU %u: %s", i, strerror(ret));
		v->started = 1;
	}
	return 0;
}

/* Whether two stats name the same image: one inode, or one block device through two nodes. */
static bool same_image(const struct stat *a, const struct stat *b)
{
	if (S_ISBLK(a->st_mode) && S_ISBLK(b->st_mode))
		return a->st_rdev == b->st_rdev;
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/*
 * One image attached twice, once read-write at least (two devices writing one file corrupt it; the second
 * open would also meet the first one's lock and read as "locked by another process"): refused before any
 * disk is opened. Two read-only views of one image are allowed. A path that cannot be stat'ed is left to
 * the open, which says why.
 */
static int check_disks_distinct(const struct vm *vm, struct vm_error *e)
{
	struct stat st[VM_MAX_DISKS];
	bool ok[VM_MAX_DISKS];
	const struct vm_disk *d = vm->cfg.disk;

	for (unsigned i = 0; i < vm->cfg.nr_disks; i++) {
		ok[i] = stat(d[i].path, &st[i]) == 0;
		for (unsigned j = 0; ok[i] && j < i; j++)
			if (ok[j] && same_image(&st[i], &st[j]) && !(d[i].ro && d[j].ro))
				return fail(e, VM_ERR_USAGE, -EINVAL,
					    "--disk %s: the same image as --disk %s (disk %u) is given twice; a disk "
					    "written by the guest can be attached once",
					    d[i].path, d[j].path, j);
	}
	return 0;
}

/*
 * The virtio devices, in the planned order, each in its window, by its kind's constructor (devkinds.h); the
 * kind says whose fault a failure is. Their work runs on the I/O event loop.
 */
static int create_virtio(struct vm *vm, const struct devctx *ctx, struct vm_error *e)
{
	const struct devkind_env env = {
	    .ctx = ctx, .bus = &vm->bus, .cfg = &vm->cfg, .net_early = vm->net_early, .vsock_later = vm->vsock_later};
	int err;

	if (!vm->devmgr.nr)
		return 0;
	if ((err = check_disks_distinct(vm, e)))
		return err;
	vm->loop = evloop_create();
	if (!vm->loop)
		return fail(e, kind_of(-errno, VM_ERR_HOST), -errno, "creating the I/O event loop failed: %s",
			    strerror(errno));
	for (unsigned i = 0; i < vm->devmgr.nr; i++) {
		const struct devmgr_window *win = &vm->devmgr.win[i];
		char why[sizeof(e->msg)];

		if ((err = win->kind->create(&env, win, win->index, &vm->devs[i], why, sizeof(why))))
			return fail(e, win->kind->fault(err), err, "%s", why);
	}
	return 0;
}

/* The split irqchip's I/O APIC, with the ID the MP table and MADT give it, and the ports of the PIC and PIT it has not.
 */
static int create_ioapic(struct vm *vm, const struct devctx *ctx, struct vm_error *e)
{
	uint32_t ids[MPTABLE_MAX_CPUS];
	char err[256];
	uint8_t id;
	int ret;

	for (unsigned i = 0; i < vm->cfg.cpus && i < MPTABLE_MAX_CPUS; i++)
		ids[i] = cpuid_apic_id(&vm->topo, i);
	if ((ret = mptable_ioapic_id(vm->cfg.cpus, ids, &id, err, sizeof(err))))
		return fail(e, VM_ERR_USAGE, ret, "%s", err);
	if ((ret = ioapic_create(ctx, &vm->bus, id, &vm->ioapic)) || (ret = legacy_absent_create(&vm->bus)))
		return fail(e, VM_ERR_HOST, ret, "creating the I/O APIC failed: %s", strerror(-ret));
	return 0;
}

/*
 * The VM Generation ID with the ACPI tables that describe it; a restore has it only when the snapshot's VM had it
 * (its section next in bus order): a snapshot from before it restores as it was, its DSDT without the device.
 */
/*
 * Whether the VM has the ACPI device `name` (vmgenid, vmclock): every boot with ACPI tables; a restore only when
 * the snapshot's next device section is that device's, so that a snapshot from a brisk before the device (its
 * tables in its memory have none) restores without it.
 */
static bool want_acpi_device(const struct vm *vm, const char *name)
{
	const char *next;

	if (vm->cfg.no_acpi)
		return false;
	if (!vm->restoring)
		return true;
	next = snap_section_name(vm->snap, SNAP_TAG_DEVICE, vm->bus.nr_devices);
	return next && strcmp(next, name) == 0;
}

/* Step 11: the devices, each added to the one bus, which owns them. */
static int create_devices(struct vm *vm, struct vm_error *e)
{
	const struct devctx ctx = {.mem = &vm->mem, .vm = vm, .ops = &vm_devctx_ops};
	struct serial_opts so = {.out_fd = vm->cfg.serial == SERIAL_FILE ? vm->serial_out_fd : -1, .in_fd = -1};
	int err;

	/* With --console virtio, stdin (and the raw terminal) belong to the virtio console; the UART keeps stdout. */
	if (vm->cfg.serial == SERIAL_STDIO) {
		so.out_fd = STDOUT_FILENO;
		so.in_fd = vm->cfg.console == CONSOLE_VIRTIO ? -1 : STDIN_FILENO;
		so.raw_tty = so.in_fd >= 0 && isatty(STDIN_FILENO);
	}
	/* brisk's I/O APIC first: a restore gives it its entries before another device raises a line */
	if (vm->cfg.irqchip == IRQCHIP_SPLIT && (err = create_ioapic(vm, &ctx, e)))
		return err;
	if ((err = serial8250_create(&ctx, &vm->bus, &so, NULL)) || (err = i8042_create(&ctx, &vm->bus)) ||
	    (err = debugexit_create(&ctx, &vm->bus)) ||
	    (err = bootmark_create(&vm->bus, vm->cfg.boot_timer ? &vm->boot_timer : NULL)) ||
	    (err = cmos_create(&vm->bus)) || (!vm->cfg.no_acpi && (err = acpi_pm_create(&ctx, &vm->bus))) ||
	    (want_acpi_device(vm, "vmgenid") && (err = vmgenid_create(&ctx, &vm->bus, vm->restoring))) ||
	    (want_acpi_device(vm, "vmclock") && (err = vmclock_create(&ctx, &vm->bus, vm->restoring))))
		return fail(e, VM_ERR_HOST, err, "creating the platform devices failed: %s", strerror(-err));
	return create_virtio(vm, &ctx, e);
}

/*
 * Step 5: the kernel (and initrd) in guest RAM and its boot structures;
 * every size check (segments and initrd against RAM, command line against
 * the kernel's limit) is here, before KVM is needed. The files are closed
 * after.
 */
static int load_kernel(struct vm *vm, struct vm_error *e)
{
	char err[BOOT_ERR_MAX];
	int ret = kernel_load(&vm->kernel, &vm->mem, vm->cmdline, &vm->entry, err, sizeof(err));

	if (!ret && vm->kernel.initrd.size)
		log_debug("initrd: %zu bytes at 0x%llx", vm->kernel.initrd.size,
			  (unsigned long long)vm->kernel.initrd_addr);
	kernel_close(&vm->kernel);
	/* -E2BIG: the command line is too long for this kernel, an option's fault. */
	if (ret)
		return fail(e, ret == -E2BIG ? VM_ERR_USAGE : VM_ERR_IMAGE, ret, "%s", err);
	timeline_mark(TL_KERNEL_LOADED);
	return 0;
}

/*
 * Step 12: the per-VM CPUID template and boot MSRs, from KVM's tables
 * (fetched once per process). Here, on the main thread, while the vCPU
 * threads create their vCPUs: fetching them on a helper thread during steps
 * 5-9 was measured no faster (docs/performance.md, "Start-up at the floor").
 */
static int prepare_cpuid(struct vm *vm, struct vm_error *e)
{
	const struct cpuid_kvm *k = cpuid_kvm_get(vm->kvm.fd);
	struct cpuid_params p = {
	    .cpus = vm->cfg.cpus,
	    .sockets = vm->cfg.topology.sockets,
	    .cores = vm->cfg.topology.cores,
	    .threads = vm->cfg.topology.threads,
	    .cpu_template = vm->cfg.cpu_template,
	    .fc_template = vm->cfg.fc_template,
	};
	char err[512];
	int ret;

	if (!k)
		return fail(e, VM_ERR_HOST, -EIO, "reading KVM's supported CPUID and MSR tables failed");
	struct cpuid_msr base[CPUID_MAX_MSRS];

	if (cpuid_fc_check_caps(p.fc_template, vm->kvm.fd, err, sizeof(err)))
		return fail(e, VM_ERR_USAGE, -EINVAL, "%s", err);
	/* Firecracker's templates start partly given MSRs from KVM's values (T2CL's IA32_ARCH_CAPABILITIES) */
	p.nr_msr_base = cpuid_fc_read_base(p.fc_template ? p.fc_template : cpuid_fc_static(p.cpu_template), vm->kvm.fd,
					   base, CPUID_MAX_MSRS);
	p.msr_base = base;
	ret = cpuid_vm_init(&vm->cpuid_vm, k, &p, err, sizeof(err));
	if (ret)
		return fail(e, ret == -EINVAL ? VM_ERR_USAGE : VM_ERR_HOST, ret, "%s", err);
	vm->cfg.cpu_template_digest = vm->cpuid_vm.template_digest; /* what a snapshot of this VM records */
	return 0;
}

/*
 * Step 13: firmware-style platform tables: the MP table (MP spec 1.4) naming
 * every vCPU by the APIC ID its CPUID reports, and the I/O APIC.
 */
static int write_platform_tables(struct vm *vm, struct vm_error *e)
{
	char err[BOOT_ERR_MAX];
	uint32_t *ids = calloc(vm->cfg.cpus, sizeof(*ids));
	int ret;

	if (!ids)
		return fail(e, VM_ERR_HOST, -ENOMEM, "out of memory for the MP table");
	for (unsigned i = 0; i < vm->cfg.cpus; i++)
		ids[i] = cpuid_apic_id(&vm->topo, i);
	ret = mptable_write(&vm->mem, vm->cfg.cpus, ids, err, sizeof(err));
	free(ids);
	if (ret)
		return fail(e, ret == -EINVAL ? VM_ERR_USAGE : VM_ERR_HOST, ret, "--cpus %u: %s", vm->cfg.cpus, err);
	/* The vCPU threads may now set their CPUID, MSRs and (vCPU 0) entry registers. */
	vm_publish_config(vm, VM_CONFIG_PUBLISHED);
	return 0;
}

/*
 * Step 14: the devices' start (device.h: what the guest's first access
 * needs, e.g. the serial output thread), while the vCPU threads set their
 * CPUID and registers.
 */
static int start_devices(struct vm *vm, struct vm_error *e)
{
	const char *dev = "?";
	int err = vm->loop ? evloop_start(vm->loop) : 0;

	if (err)
		return fail(e, VM_ERR_HOST, err, "starting the I/O event loop failed: %s", strerror(-err));
	err = bus_start(&vm->bus, &dev);

	if (err)
		return fail(e, VM_ERR_HOST, err, "starting device %s failed: %s", dev, strerror(-err));
	return 0;
}

int vm_create(const struct vm_config *cfg, struct vm **out, struct vm_error *e)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	int ret;

	*e = (struct vm_error){.kind = VM_ERR_HOST};
	if (!vm)
		return fail(e, VM_ERR_HOST, -ENOMEM, "out of memory");
	boot_timer_start(&vm->boot_timer); /* Firecracker's request_ts: the build starts (two clock reads) */
	if (vm_init(vm, cfg)) {
		ret = fail(e, VM_ERR_HOST, -ENOMEM, "out of memory");
		goto fail;
	}
	vm->wake_fd = eventfd(0, EFD_CLOEXEC);
	if (vm->wake_fd < 0) {
		ret = fail(e, kind_of(-errno, VM_ERR_HOST), -errno, "eventfd: %s", strerror(errno));
		goto fail;
	}
	/* Steps 1-5 need no KVM: every input the user gave is checked before KVM is used. */
	if ((ret = load_image(vm, e)) || (ret = open_outputs(vm, e)) || (ret = plan_cpus(vm, e)) ||
	    (ret = plan_devices(vm, e)) || (ret = alloc_memory(vm, e)) || (ret = write_acpi(vm, e)) ||
	    (ret = start_early(vm, e)))
		goto fail;
	open_kvm(vm);
	if ((ret = load_kernel(vm, e)) || (ret = check_kvm(vm, e)) || (ret = create_vm(vm, e)) ||
	    (ret = map_memory(vm, e)) || (ret = create_irqchip(vm, e)) || (ret = start_vcpus(vm, e)) ||
	    (ret = create_devices(vm, e)) || (ret = prepare_cpuid(vm, e)) || (ret = write_platform_tables(vm, e)) ||
	    (ret = start_devices(vm, e)))
		goto fail;
	*out = vm;
	return 0;
fail:
	vm_destroy(vm);
	return ret;
}

/* The API's description of the VM, when the state file has one (SNAP_TAG_API): kept for vm_api_desc. */
static int read_api_desc(struct vm *vm)
{
	struct snap_reader *sec = NULL;
	size_t n;
	int ret = snap_section(vm->snap, SNAP_TAG_API, 0, "api-config", &sec);

	if (ret == -ENOENT)
		return 0;
	if (ret)
		return -EINVAL;
	if (snap_version(sec) != 1) /* the section's version (snapshot.h): 1 is the only one */
		return -EPROTONOSUPPORT;
	n = snap_remaining(sec);
	vm->api_desc = malloc(n + 1);
	if (!vm->api_desc)
		return -ENOMEM;
	if (snap_get(sec, vm->api_desc, n))
		return -EINVAL;
	vm->api_desc[n] = 0;
	if (strlen(vm->api_desc) != n) { /* no NUL inside: it is JSON text */
		free(vm->api_desc);
		vm->api_desc = NULL;
		return -EINVAL;
	}
	return 0;
}

/*
 * Restore step R1: the state file read and checked whole (framing, version, checksum:
 * snapshot.h), and the configuration it holds over the caller's base.
 */
static int read_snapshot(struct vm *vm, const char *path, struct vm_error *e)
{
	char err[512];
	struct stat st;
	int fd = file_open_input(path, "snapshot_path", &st, err, sizeof(err));
	int ret;

	if (fd < 0)
		return fail(e, kind_of(fd, VM_ERR_USAGE), fd, "%s", err);
	file_guard_add(&st, FILE_GUARD_SNAPSHOT, "the state file this VM was restored from");
	ret = snap_reader_open(fd, &vm->snap, err, sizeof(err));
	close(fd);
	if (ret)
		return fail(e, kind_of(ret, VM_ERR_USAGE), ret, "snapshot_path %s: %s", path, err);
	ret = snap_config_load(vm->snap, &vm->cfg, &vm->snap_strings, err, sizeof(err));
	if (ret)
		return fail(e, VM_ERR_USAGE, ret, "snapshot_path %s: %s", path, err);
	ret = read_api_desc(vm);
	if (ret == -EPROTONOSUPPORT)
		return fail(e, VM_ERR_USAGE, -EINVAL,
			    "snapshot_path %s: section api-config is version %u; this brisk "
			    "reads version 1",
			    path, snap_section_version(vm->snap, SNAP_TAG_API, 0));
	if (ret)
		return fail(e, kind_of(ret, VM_ERR_USAGE), ret, "snapshot_path %s: a malformed api-config section",
			    path);
	return 0;
}

/*
 * Restore step R1b, once the CPUID template is rebuilt from the snapshot's --cpu-template file: that file
 * must still ask for what it asked for when the snapshot's VM booted. KVM_GET_CPUID2 cannot tell (a KVM may
 * report bits the template cleared), so the template's own requests are compared (cpuid_template_digest).
 * A state file written before the digest existed has none: not compared.
 */
static int check_cpu_template(struct vm *vm, const char *path, struct vm_error *e)
{
	const struct snap_config_strings *s = &vm->snap_strings;

	if (!s->has_cpu_template_digest || s->cpu_template_digest == vm->cfg.cpu_template_digest)
		return 0;
	return fail(e, VM_ERR_USAGE, -EINVAL,
		    "snapshot_path %s: --cpu-template %s changed since the snapshot: it asks for other CPUID bits "
		    "or MSRs than the template the snapshot's VM booted with (digest 0x%016llx then, 0x%016llx now); "
		    "restore it as it was",
		    path, vm->cfg.cpu_template ? vm->cfg.cpu_template : "host",
		    (unsigned long long)s->cpu_template_digest, (unsigned long long)vm->cfg.cpu_template_digest);
}

/*
 * hugetlbfs RAM cannot be a private mapping of a regular file: it is reserved and filled from the memory
 * file's data extents now (Firecracker refuses such a load with a File backend: "Cannot restore hugetlbfs
 * backed snapshot by mapping the memory file. Please use uffd."; docs/api.md says why brisk copies).
 */
static int load_hugetlbfs(struct vm *vm, int fd, const char *path, struct vm_error *e)
{
	int ret = gmem_init(&vm->mem, vm->cfg.memory, GMEM_HUGETLBFS);

	if (ret)
		return hugetlbfs_failed(e, vm->cfg.memory, ret);
	ret = gmem_load_file(&vm->mem, fd);
	if (ret)
		return fail(e, VM_ERR_HOST, ret, "reading mem_file_path %s into hugetlbfs RAM failed: %s", path,
			    strerror(-ret));
	return 0;
}

/*
 * Restore step R2: guest RAM mapped privately from the memory file the state file names (snap_memfile.h:
 * an interrupted create is completed, the previous snapshot's memory refused; a Diff's memory checked against
 * its samples: a layer without its base is refused): no page is read until touched (hugetlbfs RAM: copied).
 * The file stays open with its mapped-lock (file.h) so that no brisk's output overwrites it.
 */
static int map_snapshot_memory(struct vm *vm, const char *path, struct vm_error *e)
{
	char err[768];
	struct snap_memfile m;
	struct stat st;
	bool present;
	int fd, ret = snap_memfile_load(vm->snap, &m, &present);

	if (ret == -EPROTONOSUPPORT)
		return fail(e, VM_ERR_USAGE, -EINVAL,
			    "the state file's section memfile is version %u; this brisk reads versions 1 to 2",
			    snap_section_version(vm->snap, SNAP_TAG_MEMFILE, 0));
	if (ret)
		return fail(e, VM_ERR_USAGE, ret, "the state file's memfile section is malformed");
	fd = snap_memfile_open(present ? &m : NULL, path, &st, err, sizeof(err));
	if (fd < 0)
		return fail(e, kind_of(fd, VM_ERR_USAGE), fd, "%s", err);
	if ((uint64_t)st.st_size != vm->cfg.memory) {
		close(fd);
		return fail(e, VM_ERR_USAGE, -ERANGE, "mem_file_path %s: %lld bytes, but the snapshot's guest has %llu",
			    path, (long long)st.st_size, (unsigned long long)vm->cfg.memory);
	}
	if (present && (ret = snap_memfile_check_samples(&m, fd, path, err, sizeof(err)))) {
		close(fd);
		return fail(e, kind_of(ret, VM_ERR_USAGE), ret, "%s", err);
	}
	if (vm->cfg.hugetlbfs && (ret = load_hugetlbfs(vm, fd, path, e))) {
		close(fd);
		return ret;
	}
	if (!vm->cfg.hugetlbfs && (ret = gmem_init_file(&vm->mem, fd, vm->cfg.memory))) {
		close(fd);
		return fail(e, kind_of(ret, VM_ERR_HOST), ret, "mapping mem_file_path %s failed: %s", path,
			    strerror(-ret));
	}
	file_guard_add(&st, FILE_GUARD_SNAPSHOT, "the memory file this VM was restored from");
	(void)file_lock_mapped(fd); /* a file system without locks: the guard still protects it in this process */
	vm->mem_file_fd = fd;
	timeline_mark(TL_SNAPSHOT_READ);
	return start_tracking(vm, e);
}

/* Restore step R1c: what the load may change in the saved configuration (the API's network_overrides). */
static int adjust_config(struct vm *vm, struct vm_error *e)
{
	char err[512] = "";
	int ret;

	if (!vm->cfg.restore_adjust)
		return 0;
	ret = vm->cfg.restore_adjust(&vm->cfg, vm->api_desc, vm->cfg.restore_ctx, err, sizeof(err));
	vm->cfg.restore_adjust = NULL; /* the caller's context is not the VM's to keep */
	vm->cfg.restore_ctx = NULL;
	if (ret)
		return fail(e, kind_of(ret, VM_ERR_USAGE), ret, "%s", err);
	return config_validate(&vm->cfg, CONFIG_MAX_CPUS, 0, err, sizeof(err))
		   ? fail(e, VM_ERR_USAGE, -EINVAL, "%s", err)
		   : 0;
}

/*
 * Restore step R2 with mem_backend Uffd: anonymous guest RAM registered with a userfaultfd that the
 * page-fault handler at `sock` gets, Firecracker's handshake (mem_uffd.h); the handler reads the memory file.
 * UFFD_FEATURE_EVENT_REMOVE when the snapshot's VM has a balloon, as Firecracker (persist.rs). A "2M" snapshot's
 * RAM is hugetlbfs here too, served 2 MiB at a time (page_size_kib 2048: Firecracker's guest_memory_from_uffd);
 * dirty tracking as with a File backend.
 */
static int map_uffd_memory(struct vm *vm, const char *sock, struct vm_error *e)
{
	char err[768];
	int ret = gmem_init_uffd(&vm->mem, vm->cfg.memory, vm->cfg.hugetlbfs, sock, vm->cfg.balloon.enabled,
				 &vm->uffd_peer, err, sizeof(err));

	if (ret) {
		bool user = ret == -ENOENT || ret == -ECONNREFUSED || ret == -ENAMETOOLONG || ret == -ENOTSOCK ||
			    ret == -EPIPE || ret == -ECONNRESET || ret == -ETIMEDOUT || ret == -EACCES;

		return fail(e, user ? VM_ERR_USAGE : VM_ERR_HOST, ret, "%s", err);
	}
	log_info("guest RAM%s served by the page-fault handler at %s (pid %d)", vm->mem.hugetlbfs ? " (hugetlbfs)" : "",
		 sock, vm->uffd_peer.pid);
	timeline_mark(TL_SNAPSHOT_READ);
	return start_tracking(vm, e); /* a load's dirty tracking, with this backend too (Firecracker's) */
}

/* Restore step R3: the VM-wide KVM state (irqchip, PIT, clock), before the vCPUs get theirs. */
static int restore_kvm_vm(struct vm *vm, struct vm_error *e)
{
	struct snap_reader *sec;
	char err[512] = "";
	int ret = snap_section(vm->snap, SNAP_TAG_VM, 0, "kvm-vm", &sec);

	if (ret)
		return fail(e, VM_ERR_USAGE, -EINVAL, "the state file has no VM section");
	ret = x86_vm_restore(vm->fd, vm->cfg.irqchip == IRQCHIP_KERNEL, vm->cfg.clock_realtime, sec, err, sizeof(err));
	if (!ret && (snap_remaining(sec) || snap_reader_error(sec)))
		ret = -EINVAL, snprintf(err, sizeof(err), "malformed VM section");
	if (ret == -ENODATA) /* clock_realtime without the reading: Firecracker's error chain, word for word */
		return fail(e, VM_ERR_USAGE, ret,
			    "Failed to restore from snapshot: Failed to build microVM from snapshot: Failed to restore "
			    "microVM state: %s",
			    err);
	if (ret)
		return fail(e, ret == -EINVAL ? VM_ERR_USAGE : VM_ERR_HOST, ret, "restoring the VM state: %s", err);
	return 0;
}

/*
 * Restore step R5: every device, after the vCPUs: a device may raise its interrupt as it is restored (the
 * UART's level, vsock's transport-reset event), and KVM_SET_LAPIC replaces a LAPIC's pending interrupts
 * wholesale, so an interrupt delivered before the vCPUs' state would be lost. The event loop starts after.
 */
static int restore_devices(struct vm *vm, struct vm_error *e)
{
	const char *dev = "?";
	char err[512] = "";
	int ret = bus_restore(&vm->bus, vm->snap, &dev, err, sizeof(err));

	if (ret)
		return fail(e, VM_ERR_USAGE, ret, "restoring device %s: %s", dev, err);
	timeline_mark(TL_STATE_RESTORED);
	return 0;
}

/* Restore step R4: the vCPU threads configured (CPUID, MSRs), then each vCPU's saved state. */
static int restore_vcpus(struct vm *vm, struct vm_error *e)
{
	char err[512] = "";
	int ret;

	vm_wait_vcpus_ready(vm, vm->nr_vcpus);
	timeline_mark(TL_VCPUS_READY);
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		if (vm->vcpus[i].setup_error)
			return fail(e, VM_ERR_HOST, -EIO, "configuring vCPU %u failed: %s", i,
				    vm->vcpus[i].setup_why.msg);
	ret = vm_restore_vcpus(vm, vm->snap, err, sizeof(err));
	if (ret)
		return fail(e, ret == -EINVAL ? VM_ERR_USAGE : VM_ERR_HOST, ret, "restoring the vCPUs: %s", err);
	return 0;
}

/*
 * Restore steps R1-R2: the state file read and checked, the configuration adjusted, guest RAM mapped from the
 * memory file (or served by the Uffd handler), the working set's reads started. Nothing here is per process but
 * the mappings and the memory file's descriptor, which a fork copies (vm_restore_prepare: `for_forks`, which
 * refuses a hugetlbfs snapshot before its RAM is copied: that copy is a shared memfd every fork would write).
 */
static int restore_read(struct vm *vm, const struct vm_config *base, const char *state_path, const char *mem_path,
			bool for_forks, struct vm_error *e)
{
	int ret;

	if (vm_init(vm, base))
		return fail(e, VM_ERR_HOST, -ENOMEM, "out of memory");
	vm->restoring = true;
	if ((ret = read_snapshot(vm, state_path, e)) || (ret = adjust_config(vm, e)))
		return ret;
	if (for_forks && vm->cfg.hugetlbfs)
		return fail(e, VM_ERR_USAGE, -EINVAL,
			    "snapshot_path %s: a hugetlbfs (\"2M\") snapshot's RAM is copied whole into hugetlbfs "
			    "pages, which forks share: restore it once per process",
			    state_path);
	if ((ret = (vm->cfg.mem_uffd ? map_uffd_memory : map_snapshot_memory)(vm, mem_path, e)))
		return ret;
	/* huge_pages "Transparent" (the snapshot's or the load's), whichever backend: a Uffd handler still copies
	 * 4 KiB pages, which khugepaged may collapse later */
	if (vm->cfg.hugepages)
		gmem_request_thp(&vm->mem);
	return vm_wset_prepare(vm, mem_path, e);
}

/*
 * Restore step R3 on a VM restore_read filled: its own wake eventfd and outputs, then the KVM VM, its memory
 * slot, irqchip, vCPU threads and devices, the CPUID template; no saved state yet. /dev/kvm is opened unless it
 * is already (a prepared VM's). The same recipe as a boot, less the kernel, ACPI and MP tables: they are in the
 * saved memory.
 */
static int restore_build(struct vm *vm, const char *state_path, struct vm_error *e)
{
	int ret;

	vm->wake_fd = eventfd(0, EFD_CLOEXEC);
	if (vm->wake_fd < 0)
		return fail(e, kind_of(-errno, VM_ERR_HOST), -errno, "eventfd: %s", strerror(errno));
	if ((ret = open_outputs(vm, e)) || (ret = plan_cpus(vm, e)))
		return ret;
	devmgr_plan(&vm->devmgr, &vm->cfg);
	if ((ret = start_early(vm, e)))
		return ret;
	if (vm->kvm.fd < 0)
		open_kvm(vm);
	if ((ret = check_kvm(vm, e)) || (ret = create_vm(vm, e)) || (ret = map_memory(vm, e)) ||
	    (ret = create_irqchip(vm, e)) || (ret = start_vcpus(vm, e)) || (ret = create_devices(vm, e)) ||
	    (ret = prepare_cpuid(vm, e)) || (ret = check_cpu_template(vm, state_path, e)))
		return ret;
	/*
	 * The vCPU threads configure themselves now (KVM_SET_CPUID2, the boot MSRs): nothing in them waits for the
	 * saved VM-wide state, and a warm clone (vm_restore_clone_build) is then configured before its request.
	 */
	vm_publish_config(vm, VM_CONFIG_PUBLISHED);
	vm->clone_built = true;
	return 0;
}

/* Restore steps R4-R6: the VM-wide KVM state, the vCPUs' and the devices' saved state; the devices started. */
static int restore_state(struct vm *vm, bool resume, struct vm_error *e)
{
	int ret;

	if ((ret = restore_kvm_vm(vm, e)))
		return ret;
	if ((ret = restore_vcpus(vm, e)) || (ret = restore_devices(vm, e)) || (ret = start_devices(vm, e)))
		return ret;
	snap_reader_free(vm->snap);
	vm->snap = NULL;
	vm_wset_restored(vm); /* the listed pages mapped while (or, --working-set wait, before) the vCPUs run */
	vm->has_base = true;
	if (!resume)
		atomic_store(&vm->pause_req, 1);
	return 0;
}

int vm_restore(const struct vm_config *base, const char *state_path, const char *mem_path, bool resume, struct vm **out,
	       struct vm_error *e)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	int ret;

	*e = (struct vm_error){.kind = VM_ERR_HOST};
	if (!vm)
		return fail(e, VM_ERR_HOST, -ENOMEM, "out of memory");
	if ((ret = restore_read(vm, base, state_path, mem_path, false, e)) ||
	    (ret = restore_build(vm, state_path, e)) || (ret = restore_state(vm, resume, e))) {
		vm_destroy(vm);
		return ret;
	}
	*out = vm;
	return 0;
}

int vm_restore_prepare(const struct vm_config *base, const char *state_path, const char *mem_path, struct vm **out,
		       struct vm_error *e)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	int ret;

	*e = (struct vm_error){.kind = VM_ERR_HOST};
	if (!vm)
		return fail(e, VM_ERR_HOST, -ENOMEM, "out of memory");
	if (base->mem_uffd || base->ws_record_ms) {
		ret = fail(e, VM_ERR_USAGE, -EINVAL,
			   "%s: a prepared restore serves many VMs: one page-fault handler or one recording cannot",
			   base->mem_uffd ? "--uffd" : "--working-set record");
		goto fail;
	}
	if ((ret = restore_read(vm, base, state_path, mem_path, true, e)))
		goto fail;
	vm->vsock_later = true; /* each clone's own path: a warm clone is built before it knows it */
	open_kvm(vm);
	if ((ret = check_kvm(vm, e)))
		goto fail;
	if (!cpuid_kvm_get(vm->kvm.fd)) { /* fetched once here: a fork inherits the tables (Do the work once) */
		ret = fail(e, VM_ERR_HOST, -EIO, "reading KVM's supported CPUID and MSR tables failed");
		goto fail;
	}
	if (!(vm->state_path = strdup(state_path))) {
		ret = fail(e, VM_ERR_HOST, -ENOMEM, "out of memory");
		goto fail;
	}
	*out = vm;
	return 0;
fail:
	vm_destroy(vm);
	return ret;
}

int vm_restore_clone_build(struct vm *prepared, struct vm_error *e)
{
	int ret;

	*e = (struct vm_error){.kind = VM_ERR_HOST};
	if (prepared->clone_built)
		return 0;
	if ((ret = restore_build(prepared, prepared->state_path, e)))
		return ret;
	vm_wait_vcpus_ready(prepared, prepared->nr_vcpus); /* built means configured: a warm clone is then ready */
	return 0;
}

/*
 * A clone's vsock device listens now: on `uds` (the request's vsock_override), or where the snapshot's VM did.
 * The VM's configuration says where (a snapshot of the clone records it).
 */
static int clone_vsock_listen(struct vm *vm, const char *uds, struct vm_error *e)
{
	struct vm_vsock *v = &vm->cfg.vsock;
	struct virtio_vsock *dev;
	char err[512];
	int ret = uds && uds[0] ? config_move_vsock(&vm->cfg, uds) : 0;

	if (ret == -ENODEV)
		return fail(e, VM_ERR_USAGE, ret, "vsock_override %s: the snapshot's VM has no vsock device", uds);
	if (ret)
		return fail(e, VM_ERR_USAGE, ret, "vsock_override %s: longer than %d bytes", uds, VM_VSOCK_UDS_MAX);
	if (!v->uds[0])
		return 0;
	dev = vm_device(vm, "vsock", 0);
	if (!dev)
		return fail(e, VM_ERR_HOST, -ENODEV, "the vsock device is missing");
	if ((ret = virtio_vsock_listen(dev, v->uds, err, sizeof(err))))
		return fail(e, ret == -ENOMEM ? VM_ERR_HOST : VM_ERR_USAGE, ret, "--vsock uds=%s: %s", v->uds, err);
	return 0;
}

int vm_restore_clone(struct vm *prepared, bool resume, const char *vsock_uds, struct vm_error *e)
{
	int ret = vm_restore_clone_build(prepared, e);

	if (!ret && prepared->vsock_later)
		ret = clone_vsock_listen(prepared, vsock_uds, e);
	return ret ? ret : restore_state(prepared, resume, e);
}
