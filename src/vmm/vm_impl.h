/* vm_impl.h - the VM and vCPU structures, private to vm.c and vcpu.c. */
#ifndef BRISK_VM_IMPL_H
#define BRISK_VM_IMPL_H

#include <limits.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <stdatomic.h>

#include "brisk/boot.h"
#include "brisk/bus.h"
#include "brisk/cpuid.h"
#include "brisk/device.h"
#include "brisk/devices.h"
#include "brisk/devmgr.h"
#include "brisk/evloop.h"
#include "brisk/exits.h"
#include "brisk/kernel.h"
#include "brisk/kvm.h"
#include "brisk/mem.h"
#include "brisk/mem_uffd.h"
#include "brisk/snap_config.h"
#include "brisk/vm.h"
#include "brisk/wset.h"

enum vm_config_state { VM_CONFIG_PENDING = 0, VM_CONFIG_PUBLISHED, VM_CONFIG_ABORTED };

struct vcpu {
	struct vm *vm;
	unsigned index;
	uint32_t apic_id; /* KVM_CREATE_VCPU's id: KVM gives the vCPU's LAPIC this initial ID (api.rst 4.7) */
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	int started;	  /* thread created */
	_Atomic int done; /* thread left its loop */
	bool parked;	  /* in vcpu_park, out of KVM_RUN with its state consistent (under vm->pause_lock) */
	int setup_error;  /* brisk exit status if configuration failed */
	/* Why it failed (kind and one line naming the call and the values), when setup_error is set. */
	struct vm_error setup_why;
	pid_t tid; /* the thread's id (gettid), for the profiler's trace filter */
	/* Cheap exit counters, always on (brisk run --timeline, brisk profile). */
	struct exit_stats stats;
};

/* A restore's working set (wset.h, vm_wset.c). */
struct vm_wset {
	char path[PATH_MAX]; /* the memory file's + ".ws" */
	uint64_t crc;	     /* the state file's CRC-64 */
	/* recording (cfg.ws_record_ms): */
	int pagemap_fd;	   /* /proc/self/pagemap, or -1: mincore */
	int timer_fd;	   /* the window's end; -1 once recorded */
	int marker_fd;	   /* eventfd the boot marker writes (timeline_bootmark_notify) */
	uint64_t t0_ns;	   /* the vCPUs released */
	bool no_readahead; /* MADV_RANDOM on guest RAM while recording (vm_wset.c) */
	bool recorded;
	/* prefetching: */
	bool prefetching;
	struct wset list;
	struct wset_prefetch_stats st;
	pthread_t thread;   /* mapping the list while the vCPUs run (vm_wset.c), when populating */
	bool populating;    /* the thread runs or has not been joined */
	atomic_bool cancel; /* the VM ended: the thread stops before its next range */
};

struct vm {
	struct vm_config cfg;
	struct kvm kvm;
	int kvm_ret;	   /* kvm_open_err's result, reported after the user's inputs are checked */
	char kvm_err[512]; /* its message */
	int fd;
	struct gmem mem;
	struct bus bus;
	struct kernel kernel; /* opened by load_image; its files are closed by load_kernel */
	struct boot_entry entry;
	int serial_out_fd;		   /* --serial file:PATH, closed by vm_destroy after the bus */
	struct devmgr devmgr;		   /* the virtio windows and lines handed out (vm_build.c step 3) */
	void *devs[LAYOUT_VIRTIO_WINDOWS]; /* per window, the backend its kind's constructor gave (or NULL) */
	/* per --net: the backend start_early started, until its device takes it (then NULL) */
	struct net_backend *net_early[VM_MAX_NETS];
	struct cpuid_topology topo;   /* the vCPUs' APIC IDs, computed once (step 2b) for ACPI and the vCPUs */
	struct boot_timer boot_timer; /* --boot-timer's start (vm_create's first step); read by the boot marker */
	char *cmdline;		      /* the kernel command line with the devices' words, or NULL: cfg.cmdline */
	struct evloop *loop;	      /* the I/O event loop (evloop.h), NULL until a device needs one */
	struct ioapic *ioapic;	      /* brisk's I/O APIC (split irqchip, owned by the bus), or NULL */
	struct cpuid_vm cpuid_vm;     /* the per-VM template, topology, vendor, boot MSRs */
	unsigned nr_vcpus;
	struct vcpu *vcpus;
	/*
	 * Start-up handshake, all under go_lock: each vCPU thread creates its
	 * vCPU, waits until the recipe publishes the CPUID template and entry
	 * state (config_state), configures its vCPU, counts itself in nr_ready
	 * and waits for `go`; the main thread waits until every started thread
	 * is ready, runs the hooks, then sets `go`. A failing recipe publishes
	 * VM_CONFIG_ABORTED instead.
	 */
	pthread_mutex_t go_lock;
	pthread_cond_t config_cond;
	pthread_cond_t ready_cond;
	pthread_cond_t go_cond;
	int config_state; /* enum vm_config_state */
	unsigned nr_ready;
	int go;
	/*
	 * Pause (vm_pause/vm_resume): the controller sets pause_req and kicks
	 * every vCPU; each thread parks itself only where api.rst says its state
	 * is consistent (KVM_RUN returned EINTR, so a pending MMIO/PIO read is
	 * complete, or before its first entry), counts itself in nr_parked and
	 * waits on pause_cond until pause_req is cleared or the VM ends.
	 */
	pthread_mutex_t pause_lock;
	pthread_cond_t pause_cond;
	_Atomic int pause_req;
	unsigned nr_parked;
	int wake_fd; /* eventfd: an exit was requested */
	/* Restore (vm_restore): the state file being loaded, and what its configuration's strings point at. */
	struct snap_reader *snap;
	struct snap_config_strings snap_strings;
	char *api_desc;			/* the state file's api-config section (JSON text), or NULL */
	int mem_file_fd;		/* the memory file a restore maps, open for its mapped-lock (file.h); -1 */
	bool restoring;			/* the vCPUs get the saved state, not the boot entry state */
	char *state_path;		/* vm_restore_prepare's state file, for vm_restore_clone's messages */
	bool clone_built;		/* restore_build done: the KVM VM, vCPUs and devices exist */
	bool vsock_later;		/* a prepared VM's vsock device listens at vm_restore_clone, not at its build */
	struct uffd_peer uffd_peer;	/* with cfg.mem_uffd: the page-fault handler's process (mem_uffd.h) */
	struct uffd_fetcher uffd_fetch; /* with cfg.mem_uffd: a snapshot create's fetch of all of RAM */
	struct vm_wset ws;
	struct {
		int fd;
		void (*fn)(void *arg);
		void *arg;
	} main_watch[VM_MAIN_WATCHES]; /* devctx_ops.main_watch's, nr_main_watch of them */
	unsigned nr_main_watch;
	/*
	 * Whether a Diff has a base: the VM was restored, or a snapshot of it was taken. A VM booted with dirty
	 * tracking and never snapshotted has none (its Diff holds every page it wrote: a complete memory file).
	 */
	bool has_base;
	_Atomic int exit_requested;
	int exit_code;
	char exit_reason[128];
};

/* The dirty pages a snapshot took (vm_dirty.c): each slot's KVM log (indexed by the slot's page) and brisk's own
 * writes (gmem's bitmap, indexed by file page). */
struct vm_dirty {
	uint64_t *kvm[2];
	uint64_t *vmm;
	bool taken;
};

/*
 * vm_dirty.c, with every vCPU parked and the I/O loop stopped: takes (and so clears) each slot's KVM dirty log
 * and brisk's bitmap into *d. 0, or -errno with `err` (nothing lost: what was taken is given back).
 */
int vm_dirty_take(struct vm *vm, struct vm_dirty *d, char *err, size_t errlen);
/* Gives the pages of `d` back to brisk's bitmap (a snapshot that failed): the next take sees them again. */
void vm_dirty_giveback(struct vm *vm, const struct vm_dirty *d);
void vm_dirty_free(struct vm_dirty *d);
/* Writes the pages of `d` to `fd` at their file offsets (pwrite, runs coalesced). 0 or -errno; *pages counted. */
int vm_dirty_write(struct vm *vm, const struct vm_dirty *d, int fd, uint64_t *pages);
struct snap_memfile;
/* Samples of pages not in `d` into m->sample (snap_memfile.h): what a load checks its memory file against. */
void vm_dirty_samples(const struct vm *vm, const struct vm_dirty *d, struct snap_memfile *m);

/* vcpu.c */
void *vcpu_thread(void *arg);
/* Kicks the vCPU out of KVM_RUN (immediate_exit + signal). */
void vcpu_kick(struct vcpu *v);
/* Installs the no-op handler of the kick signal (once per process). */
int vcpu_signals_init(void);
void vcpu_print_stats(const struct vm *vm, FILE *f);

/*
 * vm.c: a zeroed VM's fds at -1, locks and bus initialised, vm->cfg a copy of cfg (config_copy; vm_destroy
 * releases it). vm_build.c calls it first. 0, or -ENOMEM (the VM has no disks then; vm_destroy is safe).
 */
__attribute__((warn_unused_result)) int vm_init(struct vm *vm, const struct vm_config *cfg);
/* vm.c: wakes the vCPU threads waiting for the template (VM_CONFIG_PUBLISHED) or tells them to stop (ABORTED). */
void vm_publish_config(struct vm *vm, int state);
/* vm.c: the services behind every device's context (device.h) for this VM. */
extern const struct devctx_ops vm_devctx_ops;

/*
 * vm.c: called by each vCPU thread after creating its vCPU: waits until the
 * template and entry state are published. Returns 0, or -1 when the recipe
 * failed (the thread then only counts itself ready and stops).
 */
int vm_vcpu_wait_config(struct vm *vm);
/* vm.c: called by each vCPU thread once its vCPU is configured: counts it ready; then it waits for go. */
void vm_vcpu_ready(struct vm *vm);
void vm_vcpu_wait_go(struct vm *vm);
/* vm.c: waits until the first `started` vCPU threads are configured (counted in nr_ready). */
void vm_wait_vcpus_ready(struct vm *vm, unsigned started);
/* vm_snapshot.c: every vCPU's saved state into its vCPU (threads configured, not released). 0 or -errno + err. */
int vm_restore_vcpus(struct vm *vm, struct snap_reader *r, char *err, size_t errlen);
/* vm.c: called by a vCPU thread whose state is consistent while a pause is requested: waits until resumed. */
void vm_vcpu_park(struct vcpu *v);

/*
 * The working set (vm_wset.c). prepare: restore step R2b, after guest RAM is mapped (the state file still
 * open): with --working-set record=MS the pagemap, timer and marker eventfd; else, unless off or Uffd, the list
 * beside the memory file checked and its reads started (a bad list: a warning, a lazy restore). 0 or -errno
 * with e. restored: the end of the restore, the listed pages' mapping started on a thread (--working-set wait:
 * done). started: the vCPUs released, the window opens. record: the window closed (the main thread, from
 * vm_watch_events). join: the VM ended, the mapping thread stopped and joined (vm_finish; idempotent). destroy:
 * after the vCPUs stopped.
 */
int vm_wset_prepare(struct vm *vm, const char *mem_path, struct vm_error *e);
void vm_wset_restored(struct vm *vm);
void vm_wset_join(struct vm *vm);
void vm_wset_started(struct vm *vm);
void vm_wset_record(struct vm *vm, bool at_marker);
void vm_wset_destroy(struct vm *vm);

/*
 * vm_prewarm.c (for vm_build.c's create_vm too): KVM_CREATE_VM on kvm_fd, then the real-mode TSS and identity-map pages
 * Intel needs inside the hole. Returns the VM's fd, or -errno with *failed naming the ioctl that failed (nothing is
 * left open).
 */
int vm_create_kvm_vm(int kvm_fd, const char **failed);

/* vm_prewarm.c: what vm_prewarm_step prepared, taken once. take_kvm returns false (and stops the prewarm) when
 * nothing was opened, else moves the handle (fd -1 when kvm_open_err failed: *ret, err say why). */
bool vm_prewarm_take_kvm(struct kvm *k, int *ret, char *err, size_t errlen);
/* The prepared VM's fd (KVM_CREATE_VM, TSS and identity map set), or -1; only after take_kvm returned true. */
int vm_prewarm_take_vm_fd(void);

#endif
