/*
 * devkinds.h - the one table of virtio device kinds (src/vmm/devkinds.c). Every loop over "the virtio
 * devices a configuration asks for" iterates it, in its order: the device manager's plan (windows and
 * lines, devmgr.c), the build recipe's constructors (vm_build.c create_virtio, also for a restore),
 * config_validate's window count, the run options (run_opts.c: one getopt entry per kind), `brisk help run`,
 * and the classifier that refuses VM options to `brisk restore` (src/cli/run.c). Adding a device is its
 * own files plus one row here (docs/architecture.md, "Adding a device").
 */
#ifndef BRISK_DEVKINDS_H
#define BRISK_DEVKINDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/vm.h"

struct bus;
struct devctx;
struct devmgr_window;

/* What a kind's constructor gets: the device context, the bus that will own the device, the configuration. */
struct devkind_env {
	const struct devctx *ctx;
	struct bus *bus;
	const struct vm_config *cfg;
	/* per --net: its backend started early (devkinds_start_early), which the device takes (the slot set to
	 * NULL); NULL, or a NULL slot: the device opens its own */
	struct net_backend **net_early;
	/* the vsock device listens later, where vm_restore_clone is told (a clone server's clone); else on cfg's uds */
	bool vsock_later;
};

struct devkind {
	const char *name;   /* "virtio-blk": the device manager's label for its windows, in logs */
	const char *option; /* "disk": the command-line option that asks for one, without the dashes */
	int has_arg;	    /* getopt_long's required_argument or optional_argument */
	const char *asks;   /* how config_validate names that option in its count: "--disk", "--console virtio" */
	const char *help;   /* its lines in `brisk help run`, each ending in a newline */
	/*
	 * The option is a process option where the VM comes from elsewhere: next to --config-file or
	 * `brisk --api-sock` it stays the command line's (Firecracker's configuration has no such device).
	 * `brisk restore` refuses it all the same: the snapshot holds the device.
	 */
	bool process_option;
	uint32_t snap_id; /* VIRTIO_ID_*: the device ID its virtio-mmio section in a state file starts with */
	/* The option's value (NULL for an optional one left out) into cfg. 0, or -errno with err. */
	int (*parse)(const char *arg, struct vm_config *cfg, char *err, size_t errlen);
	/* How many devices of this kind cfg asks for. */
	unsigned (*count)(const struct vm_config *cfg);
	/*
	 * Creates device i (0..count-1) of this kind in window `win`, added to env->bus. 0, or -errno with
	 * `why` naming the option and its value ("--disk PATH: ..."). *dev (NULL on entry) may be set to the
	 * device's backend, which vm_device/vm_device_call (vm.h) then hand to the kind's own post-boot
	 * functions (a disk swap, a rate limiter's update); a kind with none leaves it NULL.
	 */
	int (*create)(const struct devkind_env *env, const struct devmgr_window *win, unsigned i, void **dev, char *why,
		      size_t whylen);
	/* Whose fault create's -errno is (docs/exit-codes.md): the option's value (usage) or the host's. */
	enum vm_error_kind (*fault)(int err);
};

/* The table, in plan order: disks, nets, vsock, entropy, console, balloon; devkinds_nr rows, at most DEVKINDS_MAX. */
#define DEVKINDS_MAX 16
extern const struct devkind devkinds[];
extern const unsigned devkinds_nr;

/* The getopt_long value of row k's option (run_opts.h): DEVKIND_OPT_BASE + k. */
#define DEVKIND_OPT_BASE 0x1000

/* The row whose option has getopt value `val`, or NULL when `val` is no device kind's. */
const struct devkind *devkind_by_opt(int val);

struct net_backend;
/*
 * Starts the backends that take long to be ready and need nothing of KVM, so that they get ready while the VM
 * is built (vm_create calls it once every input is checked, before the kernel is loaded): each --net user's
 * brisk-slirp helper (net_user_start_for), into net_early[i] (VM_MAX_NETS slots; NULL for a tap). The devices
 * take them (devkind_env.net_early) and wait for them then. 0, or -errno with `why` ("--net user: ...") and
 * *kind; the backends started before a failure stay in net_early for the caller to destroy.
 */
int devkinds_start_early(const struct vm_config *cfg, struct net_backend **net_early, char *why, size_t whylen,
			 enum vm_error_kind *kind);

/* The number of virtio devices cfg asks for, over every kind. */
unsigned devkinds_total(const struct vm_config *cfg);

/*
 * At most LAYOUT_VIRTIO_WINDOWS devices: 0, or -EINVAL with "N virtio devices (--disk, ...): at most M" in
 * err (config_validate's check).
 */
int devkinds_check_windows(const struct vm_config *cfg, char *err, size_t errlen);

#endif
