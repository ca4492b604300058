/* devkinds.c - the one table of virtio device kinds (include/brisk/devkinds.h): one row per kind. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "brisk/config.h"
#include "brisk/devices.h"
#include "brisk/devkinds.h"
#include "brisk/errmsg.h"
#include "brisk/layout.h"
#include "brisk/virtio.h"
#include "brisk/virtio_balloon.h"
#include "brisk/virtio_net.h"
#include "brisk/virtio_vsock.h"

/* What a device constructor says is wrong, before the row puts the option in front. */
#define REASON_MAX 512

/* ---- --disk: virtio-blk (src/virtio/blk/) ------------------------------------------------------------- */

static unsigned disk_count(const struct vm_config *cfg)
{
	return cfg->nr_disks;
}

static int disk_create(const struct devkind_env *env, const struct devmgr_window *win, unsigned i, void **dev,
		       char *why, size_t whylen)
{
	char reason[REASON_MAX];
	int err = virtio_blk_open(env->ctx, env->bus, win, &env->cfg->disk[i], dev, reason, sizeof(reason));

	return err ? err_set(why, whylen, err, "--disk %s: %s", env->cfg->disk[i].path, reason) : 0;
}

/* The image's fault (missing, locked, read-only, size, kind): usage (2); anything else: host. */
static enum vm_error_kind disk_fault(int err)
{
	return err == -ENOENT || err == -ENOTDIR || err == -EACCES || err == -EPERM || err == -EROFS ||
		       err == -EAGAIN || err == -EINVAL || err == -EISDIR || err == -ELOOP || err == -ENAMETOOLONG ||
		       err == -ENXIO
		   ? VM_ERR_USAGE
		   : VM_ERR_HOST;
}

/* ---- --net: virtio-net (src/virtio/net/) -------------------------------------------------------------- */

static unsigned net_count(const struct vm_config *cfg)
{
	return cfg->nr_nets;
}

static int net_create(const struct devkind_env *env, const struct devmgr_window *win, unsigned i, void **dev, char *why,
		      size_t whylen)
{
	const struct vm_net *n = &env->cfg->net[i];
	char reason[REASON_MAX];
	struct net_backend *early = env->net_early ? env->net_early[i] : NULL;
	int err;

	if (early)
		env->net_early[i] = NULL; /* the device's now, also on failure */
	err = virtio_net_open(env->ctx, env->bus, win, n, i, early, dev, reason, sizeof(reason));

	return err ? err_set(why, whylen, err, "--net %s%s: %s", n->kind == NET_TAP ? "tap=" : "user",
			     n->kind == NET_TAP ? n->tap : "", reason)
		   : 0;
}

/* The backend's fault (tap missing or busy, hostfwd port taken): usage (2); the helper that could not run
 * (-ECHILD) or memory: the host's (4), docs/exit-codes.md. */
static enum vm_error_kind net_fault(int err)
{
	return err == -ENOMEM || err == -ECHILD ? VM_ERR_HOST : VM_ERR_USAGE;
}

int devkinds_start_early(const struct vm_config *cfg, struct net_backend **net_early, char *why, size_t whylen,
			 enum vm_error_kind *kind)
{
	for (unsigned i = 0; i < cfg->nr_nets; i++) {
		char reason[REASON_MAX];
		int err = net_user_start_for(&cfg->net[i], &net_early[i], reason, sizeof(reason));

		if (err) {
			*kind = net_fault(err);
			return err_set(why, whylen, err, "--net user: %s", reason);
		}
	}
	return 0;
}

/* ---- --vsock: virtio-vsock (src/virtio/vsock/) -------------------------------------------------------- */

static unsigned vsock_count(const struct vm_config *cfg)
{
	return cfg->vsock.uds[0] ? 1 : 0;
}

static int vsock_create(const struct devkind_env *env, const struct devmgr_window *win, unsigned i, void **dev,
			char *why, size_t whylen)
{
	const struct vm_vsock *v = &env->cfg->vsock;
	char reason[REASON_MAX];
	int err = virtio_vsock_create(env->ctx, env->bus, win, v->cid, env->vsock_later ? NULL : v->uds, reason,
				      sizeof(reason), (struct virtio_vsock **)dev);

	(void)i;
	return err ? err_set(why, whylen, err, "--vsock uds=%s: %s", v->uds, reason) : 0;
}

/* The socket path's fault (not a socket, in use, no permission): usage (2). */
static enum vm_error_kind vsock_fault(int err)
{
	return err == -ENOMEM ? VM_ERR_HOST : VM_ERR_USAGE;
}

/* ---- --rng: virtio entropy (src/virtio/rng.c) --------------------------------------------------------- */

static int rng_parse(const char *arg, struct vm_config *cfg, char *err, size_t errlen)
{
	if (config_parse_rng(arg, cfg))
		return err_set(err, errlen, -EINVAL, "expected a rate in bytes per second such as 1M or 65536");
	return 0;
}

static unsigned rng_count(const struct vm_config *cfg)
{
	return cfg->rng_rate ? 1 : 0;
}

static int rng_create(const struct devkind_env *env, const struct devmgr_window *win, unsigned i, void **dev, char *why,
		      size_t whylen)
{
	int err = virtio_rng_open(env->ctx, env->bus, win, env->cfg->rng_rate, &env->cfg->rng_rl, dev);

	(void)i;
	return err ? err_set(why, whylen, err, "creating the virtio entropy device failed: %s", strerror(-err)) : 0;
}

/* ---- --console virtio: virtio console (src/virtio/console.c) ------------------------------------------ */

static int console_parse(const char *arg, struct vm_config *cfg, char *err, size_t errlen)
{
	return config_parse_console(arg, cfg) ? err_set(err, errlen, -EINVAL, "expected serial or virtio") : 0;
}

static unsigned console_count(const struct vm_config *cfg)
{
	return cfg->console == CONSOLE_VIRTIO ? 1 : 0;
}

static int console_create(const struct devkind_env *env, const struct devmgr_window *win, unsigned i, void **dev,
			  char *why, size_t whylen)
{
	int err = virtio_console_create(env->ctx, env->bus, win);

	(void)dev;
	(void)i;
	return err ? err_set(why, whylen, err, "creating the virtio console failed: %s", strerror(-err)) : 0;
}

/* ---- --balloon: the memory balloon (src/virtio/balloon.c) --------------------------------------------- */

static unsigned balloon_count(const struct vm_config *cfg)
{
	return cfg->balloon.enabled ? 1 : 0;
}

static int balloon_create(const struct devkind_env *env, const struct devmgr_window *win, unsigned i, void **dev,
			  char *why, size_t whylen)
{
	const struct vm_balloon *bc = &env->cfg->balloon;
	int err;

	(void)i;
	/* Firecracker's rule: the target cannot be more than the guest's memory. */
	if ((uint64_t)bc->amount_mib > env->cfg->memory >> 20)
		return err_set(why, whylen, -EINVAL, "--balloon %u MiB: more than the VM's memory (%llu MiB)",
			       bc->amount_mib, (unsigned long long)(env->cfg->memory >> 20));
	err = virtio_balloon_create(env->ctx, env->bus, win, bc, dev);
	return err ? err_set(why, whylen, err, "creating the balloon device failed: %s", strerror(-err)) : 0;
}

/* The target's fault: usage (2); anything else: the host's. */
static enum vm_error_kind balloon_fault(int err)
{
	return err == -EINVAL || err == -ERANGE ? VM_ERR_USAGE : VM_ERR_HOST;
}

/* A constructor whose every failure is the host's (memory, eventfds, threads). */
static enum vm_error_kind host_fault(int err)
{
	(void)err;
	return VM_ERR_HOST;
}

/* ---- the table ---------------------------------------------------------------------------------------- */

const struct devkind devkinds[] = {
    {
	.name = "virtio-blk",
	.option = "disk",
	.has_arg = required_argument,
	.asks = "--disk",
	.help = "      --disk PATH[,ro][,id=NAME][,cache=none|writeback][,bw=RATE][,iops=N]\n"
		"                         a virtio-blk disk backed by a raw image (repeatable: vda, vdb, ...);\n"
		"                         bw=, iops=: at most RATE bytes, N requests per second\n",
	.snap_id = VIRTIO_ID_BLOCK,
	.parse = config_parse_disk,
	.count = disk_count,
	.create = disk_create,
	.fault = disk_fault,
    },
    {
	.name = "virtio-net",
	.option = "net",
	.has_arg = required_argument,
	.asks = "--net",
	.help = "      --net tap=NAME[,mac=MAC]\n"
		"                         a virtio-net interface on an existing or new tap (repeatable)\n"
		"      --net user[,net=CIDR][,hostfwd=RULE]...[,mac=MAC]\n"
		"                         a virtio-net interface with user-mode networking (libslirp):\n"
		"                         no root, no tap; guest network 192.168.76.0/24 unless net= says;\n"
		"                         RULE: [tcp|udp]:[HOSTADDR]:PORT-[GUESTADDR]:PORT (host 127.0.0.1)\n",
	.snap_id = VIRTIO_ID_NET,
	.parse = config_parse_net,
	.count = net_count,
	.create = net_create,
	.fault = net_fault,
    },
    {
	.name = "virtio-vsock",
	.option = "vsock",
	.has_arg = required_argument,
	.asks = "--vsock",
	.help = "      --vsock cid=N,uds=PATH\n"
		"                         a virtio-vsock device, guest CID N (3..4294967294), bridged to\n"
		"                         AF_UNIX sockets: host clients connect to PATH and send\n"
		"                         \"CONNECT <port>\\n\"; guest connections to CID 2 port P reach PATH_P\n",
	.snap_id = VIRTIO_ID_VSOCK,
	.parse = config_parse_vsock,
	.count = vsock_count,
	.create = vsock_create,
	.fault = vsock_fault,
    },
    {
	.name = "virtio-rng",
	.option = "rng",
	.has_arg = optional_argument,
	.asks = "--rng",
	.help = "      --rng[=RATE]       a virtio entropy device, at most RATE bytes/s (default 1M)\n",
	.snap_id = VIRTIO_ID_RNG,
	.parse = rng_parse,
	.count = rng_count,
	.create = rng_create,
	.fault = host_fault,
    },
    {
	.name = "virtio-console",
	.option = "console",
	.has_arg = required_argument,
	.asks = "--console virtio",
	.help = "      --console MODE     serial (default) or virtio: the guest's console on hvc0\n",
	.process_option = true,
	.snap_id = VIRTIO_ID_CONSOLE,
	.parse = console_parse,
	.count = console_count,
	.create = console_create,
	.fault = host_fault,
    },
    {
	.name = "virtio-balloon",
	.option = "balloon",
	.has_arg = required_argument,
	.asks = "--balloon",
	.help = "      --balloon SIZE[,deflate_on_oom][,stats=SECONDS]\n"
		"                         a memory balloon with a target of SIZE MiB (PATCH /balloon moves it);\n"
		"                         stats=: the guest's memory statistics every SECONDS s\n",
	.snap_id = VIRTIO_ID_BALLOON,
	.parse = balloon_parse_option,
	.count = balloon_count,
	.create = balloon_create,
	.fault = balloon_fault,
    },
};

const unsigned devkinds_nr = sizeof(devkinds) / sizeof(devkinds[0]);
_Static_assert(sizeof(devkinds) / sizeof(devkinds[0]) <= DEVKINDS_MAX, "more device kinds than DEVKINDS_MAX");

const struct devkind *devkind_by_opt(int val)
{
	if (val < DEVKIND_OPT_BASE || val >= DEVKIND_OPT_BASE + (int)devkinds_nr)
		return NULL;
	return &devkinds[val - DEVKIND_OPT_BASE];
}

unsigned devkinds_total(const struct vm_config *cfg)
{
	unsigned n = 0;

	for (unsigned k = 0; k < devkinds_nr; k++)
		n += devkinds[k].count(cfg);
	return n;
}

int devkinds_check_windows(const struct vm_config *cfg, char *err, size_t errlen)
{
	char names[256] = "";
	size_t len = 0;
	unsigned n = devkinds_total(cfg);

	if (n <= LAYOUT_VIRTIO_WINDOWS)
		return 0;
	for (unsigned k = 0; k < devkinds_nr && len < sizeof(names); k++)
		len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", k ? ", " : "", devkinds[k].asks);
	return err_set(err, errlen, -EINVAL, "%u virtio devices (%s): at most %d", n, names, LAYOUT_VIRTIO_WINDOWS);
}
