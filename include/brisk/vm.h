/* vm.h - the virtual machine: configuration, the build recipe, and the services devices call. */
#ifndef BRISK_VM_H
#define BRISK_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "brisk/rate_limiter.h"

#define VM_DEFAULT_MEMORY (128ULL << 20)

enum serial_mode { SERIAL_STDIO = 0, SERIAL_FILE, SERIAL_NONE };

/* Where the guest's console (stdin/stdout) is: the 8250 UART, or a virtio console (hvc0) with the UART kept for early
 * output. */
enum console_mode { CONSOLE_SERIAL = 0, CONSOLE_VIRTIO };

enum disk_cache { DISK_CACHE_WRITEBACK = 0, DISK_CACHE_NONE };

/*
 * Where the interrupt controllers are (--irqchip; docs/architecture.md "Interrupts"): split (the default): the
 * LAPICs in KVM, the I/O APIC in brisk, no PIC and no PIT (KVM_CAP_SPLIT_IRQCHIP); kernel: KVM's in-kernel
 * PIC, I/O APIC and PIT (KVM_CREATE_IRQCHIP, KVM_CREATE_PIT2), for guests that need a PIT or a PIC.
 */
enum irqchip_mode { IRQCHIP_SPLIT = 0, IRQCHIP_KERNEL };

#define VM_MAX_DISKS	    16	       /* --disk: at most this many, within the virtio windows (layout.h) */
#define VM_DISK_ID_MAX	    20	       /* VIRTIO_BLK_ID_BYTES (virtio 1.2 section 5.2.6) */
#define VM_RNG_DEFAULT_RATE (1u << 20) /* --rng without a rate: 1 MiB/s (docs/security.md case 12) */

/* One --disk PATH[,ro][,id=NAME][,cache=none|writeback]. */
#define VM_DISK_PATH_MAX 4096 /* bytes of a disk's path, its NUL included */

/*
 * A disk's path is held out of line: 16 inline 4 KiB arrays made struct vm_config ~70 KB, and every copy of
 * it touched 17 pages per start (docs/performance.md, "Clones"). A configuration owns its disks' paths:
 * set them with config_disk_path, copy a configuration with config_copy, free them with config_release.
 * A plain struct copy shares them (a move: only one of the two may be released).
 */
struct vm_disk {
	char *path; /* owned, heap, < VM_DISK_PATH_MAX bytes; NULL only while the disk is being filled in */
	bool ro;
	char id[VM_DISK_ID_MAX + 1]; /* empty: derived from the file (devices.md) */
	enum disk_cache cache;
	struct rl_config rl; /* the API's rate_limiter (docs/devices.md, "Rate limiting"); zero: none */
};

/* One --net tap=NAME[,mac=MAC] or --net user[,net=CIDR][,hostfwd=...][,mac=MAC] (docs/devices.md, "virtio-net"). */
#define VM_MAX_NETS	    8		/* --net: at most this many interfaces */
#define VM_NET_MAX_FWDS	    16		/* hostfwd= per user-mode interface */
#define VM_NET_IFNAME_MAX   15		/* IFNAMSIZ - 1 */
#define VM_NET_USER_DEFAULT 0xc0a84c00u /* 192.168.76.0/24: the user-mode network when net= is absent */

enum net_kind { NET_TAP = 0, NET_USER };

struct vm_net_fwd {
	bool udp;
	uint32_t host_addr;  /* host byte order; default 127.0.0.1 */
	uint32_t guest_addr; /* host byte order; 0: the first DHCP address */
	uint16_t host_port, guest_port;
};

struct vm_net {
	enum net_kind kind;
	char tap[VM_NET_IFNAME_MAX + 1]; /* NET_TAP */
	uint8_t mac[6];
	bool has_mac;	      /* false: derived (config_net_mac) */
	uint32_t user_net;    /* NET_USER: network address, host byte order */
	unsigned user_prefix; /* NET_USER: prefix length */
	unsigned nr_fwds;
	struct vm_net_fwd fwd[VM_NET_MAX_FWDS];
	struct rl_config rx_rl, tx_rl; /* the API's rx/tx_rate_limiter; zero: none */
};

/* --vsock cid=N,uds=PATH (docs/devices.md, "virtio-vsock"). */
#define VM_VSOCK_UDS_MAX 96 /* sun_path (108) less "_4294967295" and the NUL: PATH_P always fits */

struct vm_vsock {
	uint32_t cid;			/* --vsock: 3..0xfffffffe; the API: any (as Firecracker) */
	char uds[VM_VSOCK_UDS_MAX + 1]; /* the hybrid-vsock socket brisk listens on; empty: no vsock device */
};

/*
 * --balloon SIZE[,deflate_on_oom][,stats=SECONDS] or the API's PUT /balloon (docs/devices.md, "Balloon"):
 * Firecracker's balloon device, its target in MiB (at most the VM's memory).
 */
struct vm_balloon {
	bool enabled;
	uint32_t amount_mib;	   /* the target: num_pages = amount_mib * 256 */
	bool deflate_on_oom;	   /* VIRTIO_BALLOON_F_DEFLATE_ON_OOM offered */
	uint16_t stats_interval_s; /* 0: no statistics queue (VIRTIO_BALLOON_F_STATS_VQ not offered) */
};

struct vm;
struct cpuid_fc_template;
struct kvm_run;

/* Callbacks for the profiler (brisk profile); a plain run has none. */
struct vm_hooks {
	/*
	 * NULL, or called on the main thread by vm_start before it waits for
	 * the vCPU threads to finish configuring themselves (so that it
	 * overlaps their KVM_SET_CPUID2 and KVM_SET_MSRS), and before any of
	 * them enters KVM_RUN: the main thread's seccomp filter goes on here.
	 */
	void (*confine)(struct vm *vm, void *ctx);
	/*
	 * Called on the main thread once every vCPU thread exists and is
	 * configured, before any of them enters KVM_RUN (tracing starts here).
	 */
	void (*vcpus_ready)(struct vm *vm, void *ctx);
	/*
	 * NULL, or called on vCPU `vcpu`'s own thread for every exit that
	 * reaches userspace, before brisk handles it: returns 1 when it
	 * consumed the exit (the profiler's caller probes), 0 to let brisk
	 * handle it as usual. `run` is that vCPU's kvm_run.
	 */
	int (*exit)(struct vm *vm, unsigned vcpu, struct kvm_run *run, void *ctx);
	void *ctx;
};

#define WSET_RECORD_MAX_MS 60000u /* --working-set record=MS: at most a minute */

struct vm_config {
	const char *kernel;	    /* path; NULL = the built-in demo guest */
	const char *initrd;	    /* path or NULL */
	const char *cmdline;	    /* NULL = the kernel's default (kernel_default_cmdline) */
	const char *cmdline_append; /* NULL, or words appended after the command line (the API's root= words) */
	unsigned cpus;
	uint64_t memory;
	enum serial_mode serial;
	const char *serial_path; /* SERIAL_FILE */
	bool hugepages;		 /* --hugepages, huge_pages "Transparent": transparent huge pages asked for RAM */
	bool hugetlbfs;		 /* --hugetlbfs, huge_pages "2M": RAM of 2 MiB hugetlbfs pages (mem.h GMEM_HUGETLBFS) */
	bool track_dirty;	 /* --track-dirty-pages, track_dirty_pages: KVM's dirty log on RAM, so Diff snapshots */
	bool prefault;
	bool timeline;
	const char *cpu_template; /* "host", "baseline", Firecracker's "C3".."T2A" or a JSON file; NULL = host */
	const struct cpuid_fc_template *fc_template; /* Firecracker custom template (PUT /cpu-config); NULL: none */
	struct {
		unsigned sockets, cores, threads; /* 0 = derived from cpus */
	} topology;
	unsigned nr_disks;
	struct vm_disk disk[VM_MAX_DISKS];
	unsigned nr_nets;
	struct vm_net net[VM_MAX_NETS]; /* --net, in order */
	struct vm_vsock vsock;		/* --vsock; uds empty: none */
	uint64_t rng_rate;		/* --rng: bytes per second; 0: no entropy device */
	struct rl_config rng_rl;	/* PUT /entropy's rate_limiter; zero: rng_rate's one-second bucket */
	struct vm_balloon balloon;	/* --balloon; enabled false: none */
	enum console_mode console;	/* --console */
	bool no_acpi;			/* --acpi off: no ACPI tables, MP table and command-line words only */
	enum irqchip_mode irqchip;	/* --irqchip */
	bool boot_timer;		/* --boot-timer: Firecracker's boot timer on the boot marker's MMIO page */
	const struct vm_hooks *hooks;	/* NULL: none */
	/*
	 * Restore only: where guest RAM comes from. false: vm_restore's mem_path is the memory file, mapped
	 * MAP_PRIVATE. true: mem_path is the Unix socket of a Firecracker-format page-fault handler (mem_uffd.h;
	 * PUT /snapshot/load's mem_backend Uffd, brisk restore --uffd).
	 */
	bool mem_uffd;
	/*
	 * Restore only: the working set (include/brisk/wset.h). ws_record_ms > 0: record the pages the restored
	 * guest touches in its first ws_record_ms ms, or until it writes its boot marker, into the file beside
	 * the memory file; ws_no_prefetch: do not prefetch the pages such a file lists (lazy, as without one);
	 * ws_prefetch_wait: map them before the vCPUs run (default: a thread maps them while the vCPUs run).
	 */
	unsigned ws_record_ms; /* 1..WSET_RECORD_MAX_MS */
	bool ws_no_prefetch;
	bool ws_prefetch_wait;
	/*
	 * Restore only: KVM_SET_CLOCK with KVM_CLOCK_REALTIME (api.rst 4.30; PUT /snapshot/load's clock_realtime,
	 * Firecracker 1.15): kvmclock advanced by the host's wall-clock time since the snapshot was taken. false:
	 * the guest's clocks resume where they stopped.
	 */
	bool clock_realtime;
	/* Not an option: set when the VM is built, cpuid_template_digest of its --cpu-template file (0: none). */
	uint64_t cpu_template_digest;
	/*
	 * vm_restore only (the base it is given): called once the state file's configuration is read, before any
	 * device is created, with the API's description of the VM (NULL: none) to change what a load may change
	 * (the API's network_overrides: an interface's tap). 0, or -errno with `err`: the load is refused. NULL:
	 * nothing changes.
	 */
	int (*restore_adjust)(struct vm_config *cfg, const char *api_desc, void *ctx, char *err, size_t errlen);
	void *restore_ctx;
};

struct bus;
struct exit_stats;
struct gmem;

/* Whose fault a failed vm_create is: the CLI maps it to an exit status (docs/exit-codes.md). */
enum vm_error_kind {
	VM_ERR_HOST = 0, /* the host: KVM, memory, fds, threads */
	VM_ERR_USAGE,	 /* an option or configuration value, an output file */
	VM_ERR_IMAGE,	 /* the kernel image or initrd */
};

struct vm_error {
	enum vm_error_kind kind;
	char msg[1024]; /* one line naming the input, the call and the values */
};

/*
 * Builds the VM described by `cfg` (the recipe in vm_build.c, top to
 * bottom). Returns 0 and *out, or -errno with *err filled (nothing is
 * logged); nothing is left behind on failure.
 */
__attribute__((warn_unused_result)) int vm_create(const struct vm_config *cfg, struct vm **out, struct vm_error *err);
/*
 * Runs the VM until it ends; returns the process exit status. `sig_fd` is
 * a signalfd for SIGINT/SIGTERM/SIGHUP (stop the VM cleanly), or -1. A vCPU
 * whose set-up failed is logged (vm_start's error) and ends the VM.
 */
int vm_run(struct vm *vm, int sig_fd);
/*
 * vm_run, and once vm_start has released the vCPUs and started the late devices, one byte ("s") written to
 * `started_fd` and the descriptor closed (a warm clone's word to its server: clone_server.c); -1: none.
 */
int vm_run_notify(struct vm *vm, int sig_fd, int started_fd);
/*
 * vm_run in parts, for a caller that serves other work meanwhile (the API):
 * vm_start releases the vCPUs (returns 0, or the exit status when a vCPU's
 * configuration failed, the exit then already requested, with *e (may be NULL:
 * not wanted) filled: the first failing vCPU's kind and one line naming the
 * call and the values, e.g. the MSR KVM refused; a guest that ended at once
 * is not a failure of vm_start); vm_wake_fd becomes
 * readable once an exit is requested (vm_exit_requested); vm_finish joins
 * the vCPUs, stops the devices and returns the process exit status.
 */
int vm_start(struct vm *vm, struct vm_error *e);
int vm_wake_fd(const struct vm *vm);
bool vm_exit_requested(const struct vm *vm);
int vm_finish(struct vm *vm);
/*
 * When a restore prefetched its working set (wset.h): true, with the pages listed and the microseconds its
 * MADV_WILLNEED and MADV_POPULATE_READ passes took.
 */
bool vm_wset_prefetched(const struct vm *vm, uint64_t *pages, uint64_t *advise_us, uint64_t *populate_us);
/*
 * What the main thread polls beside vm_wake_fd, VM_WATCH_FDS entries (an fd of -1: nothing there): the
 * page-fault handler of a Uffd-restored VM's memory exiting (mem_uffd.h), a working-set recording's window
 * closing (its timer, the guest's boot marker: wset.h), and the devices' main-thread work (device.h,
 * devctx_ops.main_watch: at most VM_MAIN_WATCHES). vm_watch_events handles what poll reported: a handler
 * gone with pages of RAM unserved ends the VM (EXIT_UFFD_HANDLER), else the VM runs on anonymous memory; a
 * window closed records the working set; a device's fd calls its function.
 */
#define VM_MAIN_WATCHES 2 /* the UART's console and one more */
#define VM_WATCH_FDS	(3 + VM_MAIN_WATCHES)
struct pollfd;
void vm_watch_fds(const struct vm *vm, struct pollfd *p);
void vm_watch_events(struct vm *vm, const struct pollfd *p);
/*
 * Pauses every vCPU: each leaves KVM_RUN at a point where its state is
 * consistent (api.rst 4.10) and waits. Returns 0 once all are parked,
 * -ETIMEDOUT (a vCPU did not park within 2 s: the VM is resumed), or
 * -ESHUTDOWN (the VM is ending). Main/API thread only.
 */
int vm_pause(struct vm *vm);
/* Lets paused vCPUs run again. Idempotent. */
void vm_resume(struct vm *vm);
/* Whether a pause is in effect (requested and not resumed). */
bool vm_paused(const struct vm *vm);
/*
 * Snapshot of a paused VM (docs/api.md, "Snapshots"): the VM's state to `state_path`, guest memory to
 * `mem_path`, both regular files replaced whole (written beside, synced, renamed into place: a failure
 * leaves the previous files), never one of the VM's disks, kernel or initrd, another VM's disk, or the
 * same file twice. `api_desc` (NULL: none) is the API's description of the VM (GET /vm/config's JSON),
 * kept for the restored VM's API. In-flight device I/O completes first. The VM stays paused. Returns 0
 * or -errno with `err` (-EBUSY: not paused).
 */
int vm_snapshot_create(struct vm *vm, const char *state_path, const char *mem_path, const char *api_desc, char *err,
		       size_t errlen);
/*
 * A Diff snapshot (docs/api.md "Diff snapshots"): as vm_snapshot_create, but the memory file holds only the pages
 * written since the previous snapshot of this VM (or since it booted or was restored), at their offsets, holes
 * elsewhere; an existing memory file of the guest's size at `mem_path` is taken as the previous snapshot's and
 * the pages are merged onto a copy of it (Firecracker's snapshot_memory_to_file), else the file is the layer
 * alone. -EOPNOTSUPP when the VM does not track dirty pages (vm_config.track_dirty). The pages are counted
 * in *dirty_pages (may be NULL).
 */
int vm_snapshot_create_diff(struct vm *vm, const char *state_path, const char *mem_path, const char *api_desc,
			    uint64_t *dirty_pages, char *err, size_t errlen);
/*
 * Builds a VM from a snapshot: the configuration saved in `state_path` over `base` (which gives what a
 * snapshot does not hold: the serial, hooks, --timeline), guest memory mapped privately from
 * `mem_path` (loaded on first touch), then the irqchip, PIT, clock, devices and vCPUs restored.
 * Every check (file framing and checksum, configuration, memory file size, CPUID and MSRs against
 * this host) happens before any vCPU runs. The VM starts paused unless `resume`; vm_start runs it.
 * Returns 0 and *out, or -errno with *err (VM_ERR_USAGE: the files or a mismatch).
 */
__attribute__((warn_unused_result)) int vm_restore(const struct vm_config *base, const char *state_path,
						   const char *mem_path, bool resume, struct vm **out,
						   struct vm_error *err);
/*
 * A restore in two halves, for a process that forks one VM per request from one snapshot (brisk restore
 * --clone-server): vm_restore_prepare does, once, what every such VM shares: the state file read and checked,
 * guest RAM mapped privately from `mem_path` (a fork's pages stay copy-on-write against the file), /dev/kvm
 * opened and KVM's CPUID and MSR tables fetched. It refuses what forks cannot share: a Uffd backend, a
 * working-set recording, a hugetlbfs snapshot (VM_ERR_USAGE). The prepared VM is never run; the caller
 * keeps it single-threaded and vm_destroy()s it at the end.
 * vm_restore_clone, in a forked child, builds the prepared copy as vm_restore would from there on (its own
 * eventfd, outputs, KVM VM, memory slot, irqchip, vCPUs and devices) and gives it the saved state (a new VM
 * Generation ID), once per child. vm_restore_clone_build does only the first half, ahead of a request (a warm
 * clone: vm_restore_clone then only restores the state). A prepared VM's vsock device listens only in
 * vm_restore_clone: on `vsock_uds` when it is neither NULL nor empty (the request's vsock_override; a snapshot
 * without vsock refuses one), else on the snapshot's path. On failure the child vm_destroy()s it. Each
 * returns 0 or -errno with *err.
 */
__attribute__((warn_unused_result)) int vm_restore_prepare(const struct vm_config *base, const char *state_path,
							   const char *mem_path, struct vm **out, struct vm_error *err);
__attribute__((warn_unused_result)) int vm_restore_clone_build(struct vm *prepared, struct vm_error *err);
__attribute__((warn_unused_result)) int vm_restore_clone(struct vm *prepared, bool resume, const char *vsock_uds,
							 struct vm_error *err);
/*
 * For a process that waits for its API's first request (src/vmm/vm_prewarm.c): does the next piece of the
 * work every VM needs whatever its configuration (/dev/kvm opened and checked, KVM's CPUID and MSR tables,
 * an empty VM), which the next vm_create or vm_restore then takes instead of doing it. Returns true while
 * pieces remain. A failure is kept for the VM to report, as if it had opened /dev/kvm itself. Main thread only.
 */
bool vm_prewarm_step(void);
/* The --timeline report: phases, exit counters, KVM ioctls. */
void vm_print_report(struct vm *vm, FILE *f);
void vm_destroy(struct vm *vm);

/* Installs the signal handler that kicks vCPUs out of KVM_RUN (once per process). */
int vm_signals_init(void);

/*
 * For the profiler: the VM fd, and per vCPU its fd, thread id and exit
 * counters. Valid from the vcpus_ready hook; the counters are final once
 * vm_run has returned.
 */
int vm_fd(const struct vm *vm);
/* The configuration the VM was built with (a restore's: the one in its state file). */
const struct vm_config *vm_config(const struct vm *vm);
/* The API's description of the VM a restore read from its state file (JSON text), or NULL. */
const char *vm_api_desc(const struct vm *vm);
/*
 * Adds the files `cfg` names (kernel, initrd, CPU template file, disks) to the process's guard
 * (file.h), so that no output opened from now on overwrites one, even before they are opened.
 */
void vm_config_guard(const struct vm_config *cfg);
unsigned vm_nr_vcpus(const struct vm *vm);
int vm_vcpu_fd(const struct vm *vm, unsigned i);
int vm_vcpu_tid(const struct vm *vm, unsigned i);
struct exit_stats *vm_vcpu_exit_stats(struct vm *vm, unsigned i);
/* The profiler's view: vCPU i's kvm_run (NULL if none; set its kvm_valid_regs before the vCPUs run), guest RAM. */
struct kvm_run *vm_vcpu_run(struct vm *vm, unsigned i);
const struct gmem *vm_gmem(const struct vm *vm);
/* The guest-physical range the kernel was loaded into ([0, 0) for a restore: nothing was loaded). */
void vm_kernel_range(const struct vm *vm, uint64_t *start, uint64_t *end);

/* Services behind the devices' context (device.h), callable from any thread. */
/* Sets interrupt line `irq` (an I/O APIC pin): brisk's I/O APIC (split irqchip) or KVM_IRQ_LINE. */
void vm_irq_line(struct vm *vm, unsigned irq, int level);
/*
 * Ends the VM with process status `code`; the first request wins, later
 * ones are ignored. Wakes every vCPU out of KVM_RUN.
 */
void vm_request_exit(struct vm *vm, int code, const char *reason);
/*
 * Post-boot device changes (the API's PATCH /drives, rate limiter updates, the balloon): the backend of
 * device `index` (0: the first) of the kind whose option is `option` ("disk", "net", "rng", ...:
 * devkinds.h), as its constructor gave it, or NULL (no such device, or a kind with no post-boot calls).
 */
void *vm_device(struct vm *vm, const char *option, unsigned index);
/*
 * Runs fn(dev, arg) on that backend with the I/O event loop stopped, so that no device callback runs
 * meanwhile (the vCPUs still may: a device locks what its register handlers share), then lets the loop
 * run again. Main/API thread only. Returns fn's result, or -ENODEV when there is no such device.
 */
int vm_device_call(struct vm *vm, const char *option, unsigned index, int (*fn)(void *dev, void *arg), void *arg);
/*
 * PATCH /drives path_on_host after boot: disk `index` now on `path` (virtio_blk_swap, devices.h), and
 * the VM's configuration says so (a snapshot records the new path; the file is guarded from outputs).
 * Main/API thread only. 0 or -errno with `err`; on failure the old image stays in use.
 */
int vm_disk_swap(struct vm *vm, unsigned index, const char *path, char *err, size_t errlen);
/* Presses Ctrl+Alt+Del on the guest's keyboard (the API's SendCtrlAltDel). 0 or -errno (-ENODEV: no i8042, -EBUSY: its
 * queue is full). */
int vm_ctrl_alt_del(struct vm *vm);

#endif
