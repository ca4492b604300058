/*
 * fc_config_dev.c - Firecracker's per-device objects: drives/{id} (PUT, PATCH) and network-interfaces/{id} (PUT)
 * into cfg.disk[] / cfg.net[] and their Firecracker identities (include/brisk/fc_config.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/config.h"
#include "brisk/devices.h"
#include "brisk/virtio_net.h"
#include "fc_config_internal.h"

const char *const fc_cache_names[] = {"Unsafe", "Writeback", NULL};
const char *const fc_engine_names[] = {"Sync", "Async", NULL};

/*
 * The id a body names (drive_id, iface_id): required, and equal to the
 * path's `path_id` when there is one, which must be 1..FC_ID_MAX of
 * [A-Za-z0-9_] (Firecracker v1.7.0 parsed_request.rs checked_id, with its
 * message; Firecracker checks the path's id and compares the body's with
 * it). Without a path (the config file) the body's id is held to the same
 * rule.
 */
static int body_id(const struct fcj *c, json_object *o, const char *key, const char *path_id, const char **out)
{
	if (path_id && !fc_id_valid(path_id))
		return fcj_fail(c,
				"API Resource IDs can only contain alphanumeric characters and underscores "
				"(1..%d of [A-Za-z0-9_])",
				FC_ID_MAX);
	if (fcj_req_str(c, o, key, FC_ID_MAX, out) < 0)
		return -EINVAL;
	if (path_id && strcmp(path_id, *out) != 0)
		return fcj_fail(c, "The id from the path [%s] does not match the id from the body [%s]!", path_id,
				fcj_printable(*out) ? *out : "?");
	if (!fc_id_valid(*out))
		return fcj_fail(c, "%s: '%s' is not 1..%d characters of [A-Za-z0-9_]", key, *out, FC_ID_MAX);
	return 0;
}

static int find_drive(const struct fc_vm *f, const char *id)
{
	for (unsigned i = 0; i < f->cfg.nr_disks; i++)
		if (strcmp(f->drive[i].id, id) == 0)
			return (int)i;
	return -1;
}

/* A partition UUID goes onto the command line as root=PARTUUID=...: no blanks, nothing but what a UUID uses. */
static int partuuid(const struct fcj *c, json_object *o, char *out)
{
	const char *s = NULL;
	int r = fcj_str(c, o, "partuuid", 1, FC_PARTUUID_MAX, &s);

	if (r <= 0)
		return r;
	if (strspn(s, "0123456789abcdefABCDEFghijklmnopqrstuvwxyzGHIJKLMNOPQRSTUVWXYZ-/=") != strlen(s))
		return fcj_fail(c, "partuuid: '%s' has characters other than [A-Za-z0-9-/=]", s);
	strcpy(out, s);
	return 1;
}

/*
 * A token bucket (Firecracker v1.7.0 vmm_config/mod.rs TokenBucketConfig:
 * size and refill_time required, one_time_burst optional, other keys
 * ignored: it has no deny_unknown_fields), any u64 each. Size or refill_time
 * 0 makes no bucket (TokenBucket::new), and so does a refill_time whose
 * nanoseconds overflow u64 (its checked_mul): docs/security.md case 45.
 */
static int bucket_read(const struct fcj *c, json_object *b, struct rl_bucket_cfg *out)
{
	uint64_t size = 0, ms = 0, burst = 0;
	int rs, rt;

	if (!json_object_is_type(b, json_type_object))
		return fcj_fail(c, "expected an object, got %s", json_type_to_name(json_object_get_type(b)));
	if ((rs = fcj_uint(c, b, "size", 0, UINT64_MAX, &size)) < 0 ||
	    (rt = fcj_uint(c, b, "refill_time", 0, UINT64_MAX, &ms)) < 0 ||
	    fcj_uint(c, b, "one_time_burst", 0, UINT64_MAX, &burst) < 0)
		return -EINVAL;
	if (!rs || !rt)
		return fcj_fail(c, "%s is required", rs ? "refill_time" : "size");
	*out = (struct rl_bucket_cfg){size, burst, ms};
	return 0;
}

/*
 * A drive's, interface's or entropy device's rate limiter (RateLimiterConfig: bandwidth and ops, each a
 * bucket or null; unknown keys refused) into *out (zero where absent). *given (may be NULL): whether the
 * limiter itself was given (a PATCH changes nothing without it), has[0], has[1]: whether bandwidth, ops
 * were (a PATCH replaces only those). 0 or -EINVAL.
 */
int fc_rate_limiter(const struct fcj *c, json_object *o, const char *key, struct rl_config *out, bool has[2])
{
	static const char *const keys[] = {"bandwidth", "ops", NULL};
	static const char *const buckets[] = {"bandwidth", "ops"};
	json_object *rl = fcj_get(o, key);
	char what[160];
	struct fcj bc = {what, c->err, c->errlen};

	*out = (struct rl_config){0};
	if (has)
		has[0] = has[1] = false;
	if (!rl)
		return 0;
	if (!json_object_is_type(rl, json_type_object))
		return fcj_fail(c, "%s: expected an object, got %s", key, json_type_to_name(json_object_get_type(rl)));
	snprintf(what, sizeof(what), "%s: %s", c->what, key);
	if (fcj_keys(&bc, rl, keys))
		return -EINVAL;
	for (unsigned i = 0; i < 2; i++) {
		json_object *b = fcj_get(rl, buckets[i]);

		snprintf(what, sizeof(what), "%s: %s.%s", c->what, key, buckets[i]);
		if (b && bucket_read(&bc, b, i ? &out->ops : &out->bw))
			return -EINVAL;
		if (has)
			has[i] = b != NULL;
	}
	return 0;
}

/* A configured limiter as the device keeps it: a bucket that makes none reads back as none. */
static void rl_normalise(struct rl_config *rl)
{
	if (!rl_bucket_on(&rl->bw))
		rl->bw = (struct rl_bucket_cfg){0};
	if (!rl_bucket_on(&rl->ops))
		rl->ops = (struct rl_bucket_cfg){0};
}

void fc_rl_update(struct rl_config *cur, const struct rl_config *upd, const bool has[2])
{
	if (has[0])
		cur->bw = upd->bw;
	if (has[1])
		cur->ops = upd->ops;
	rl_normalise(cur);
}

/* The members of a drive body that say what the disk is; the drive's id is already read. */
static int drive_read(const struct fcj *c, json_object *o, struct vm_disk *d, struct fc_drive *fd)
{
	const char *path = NULL;
	unsigned cache = FC_CACHE_UNSAFE, engine = FC_IO_SYNC;
	int r;

	if (fcj_absent(c, o, "socket", "vhost-user drives are not supported") ||
	    fc_rate_limiter(c, o, "rate_limiter", &d->rl, NULL) ||
	    fcj_req_str(c, o, "path_on_host", VM_DISK_PATH_MAX - 1, &path) < 0 ||
	    (r = fcj_bool(c, o, "is_root_device", &fd->is_root_device)) < 0)
		return -EINVAL;
	if (r == 0)
		return fcj_fail(c, "is_root_device is required");
	if (fcj_bool(c, o, "is_read_only", &d->ro) < 0 || partuuid(c, o, fd->partuuid) < 0 ||
	    fcj_enum(c, o, "cache_type", fc_cache_names, false, &cache) < 0 ||
	    fcj_enum(c, o, "io_engine", fc_engine_names, false, &engine) < 0)
		return -EINVAL;
	if (config_disk_path(d, path, strlen(path)))
		return fcj_fail(c, "path_on_host: out of memory");
	rl_normalise(&d->rl);
	/*
	 * Both cache types are brisk's writeback: the host page cache, and
	 * VIRTIO_BLK_F_FLUSH offered, so a guest FLUSH reaches fsync. "Unsafe"
	 * in Firecracker offers no flush; brisk flushes on FLUSH either way.
	 */
	d->cache = DISK_CACHE_WRITEBACK;
	fd->cache_type = (enum fc_cache_type)cache;
	fd->io_engine = (enum fc_io_engine)engine;
	return 0;
}

/* Moves drive `pos` to the front, keeping the others' order: the root device is /dev/vda. */
static void drive_to_front(struct fc_vm *f, unsigned pos)
{
	struct vm_disk d = f->cfg.disk[pos];
	struct fc_drive fd = f->drive[pos];

	memmove(&f->cfg.disk[1], &f->cfg.disk[0], pos * sizeof(f->cfg.disk[0]));
	memmove(&f->drive[1], &f->drive[0], pos * sizeof(f->drive[0]));
	f->cfg.disk[0] = d;
	f->drive[0] = fd;
}

/* The drive file opens as the device will open it (Firecracker's Block::new at PUT /drives). */
static int check_drive(const struct fcj *c, const struct vm_disk *d)
{
	char why[512];

	return virtio_blk_probe(d, why, sizeof(why)) ? fcj_fail(c, "path_on_host %s: %s", d->path, why) : 0;
}

/*
 * Firecracker's BlockBuilder::insert: a drive with a known id is replaced
 * where it is, a new one goes last, and a root device goes first. Unlike
 * Firecracker (which swaps it with drive 0), the others keep their order.
 */
int fc_apply_drive(struct fc_vm *f, const struct fcj *c, const char *id, json_object *o)
{
	static const char *const keys[] = {"drive_id",	 "path_on_host", "is_root_device", "is_read_only", "partuuid",
					   "cache_type", "io_engine",	 "rate_limiter",   "socket",	   NULL};
	struct vm_disk d = {.cache = DISK_CACHE_WRITEBACK};
	struct fc_drive fd = {.cache_type = FC_CACHE_UNSAFE};
	const char *drive_id;
	int pos, ret = -EINVAL;

	if (fcj_keys(c, o, keys) || body_id(c, o, "drive_id", id, &drive_id) || drive_read(c, o, &d, &fd))
		goto out;
	pos = find_drive(f, drive_id);
	if (fd.is_root_device && f->cfg.nr_disks && f->drive[0].is_root_device && pos != 0) {
		fcj_fail(c, "is_root_device: drive '%s' is already the root device", f->drive[0].id);
		goto out;
	}
	if (pos < 0 && f->cfg.nr_disks == VM_MAX_DISKS) {
		fcj_fail(c, "'%s' would be drive %d: at most %d", drive_id, VM_MAX_DISKS + 1, VM_MAX_DISKS);
		goto out;
	}
	if (f->check_files && check_drive(c, &d))
		goto out;
	strcpy(fd.id, drive_id);
	if (pos < 0)
		pos = (int)f->cfg.nr_disks++;
	else
		free(f->cfg.disk[pos].path); /* the replaced drive's */
	f->cfg.disk[pos] = d;
	d.path = NULL; /* f owns it now */
	f->drive[pos] = fd;
	if (fd.is_root_device)
		drive_to_front(f, (unsigned)pos);
	ret = 0;
out:
	free(d.path);
	return ret;
}

/* PATCH /drives/{id} (after boot): Firecracker's BlockDeviceUpdateConfig, deny_unknown_fields. */
static int patch_drive(struct fc_vm *f, const struct fcj *c, const char *id, json_object *o, struct fc_drive_patch *p)
{
	static const char *const keys[] = {"drive_id", "path_on_host", "rate_limiter", NULL};
	const char *drive_id, *path = NULL;
	int pos;

	if (fcj_keys(c, o, keys) || body_id(c, o, "drive_id", id, &drive_id) ||
	    fc_rate_limiter(c, o, "rate_limiter", &p->rl, p->has) ||
	    fcj_str(c, o, "path_on_host", 1, VM_DISK_PATH_MAX - 1, &path) < 0)
		return -EINVAL;
	p->has_rl = fcj_get(o, "rate_limiter") != NULL;
	pos = find_drive(f, drive_id);
	if (pos < 0)
		return fcj_fail(c, "drive_id: no drive '%s'", drive_id);
	if (!path && !p->has_rl)
		return fcj_fail(c, "give path_on_host or rate_limiter (brisk has no vhost-user drives to update)");
	p->index = (unsigned)pos;
	p->path[0] = 0;
	if (path)
		strcpy(p->path, path);
	return 0;
}

static int find_net(const struct fc_vm *f, const char *id)
{
	for (unsigned i = 0; i < f->cfg.nr_nets; i++)
		if (strcmp(f->net[i].id, id) == 0)
			return (int)i;
	return -1;
}

/* A tap interface name: 1..IFNAMSIZ-1 bytes that Linux accepts (dev_valid_name: no '/', ':' or blank). */
static int tap_name(const struct fcj *c, json_object *o, char *out)
{
	const char *s;

	if (fcj_req_str(c, o, "host_dev_name", VM_NET_IFNAME_MAX, &s) < 0)
		return -EINVAL;
	if (strpbrk(s, "/: ") || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return fcj_fail(c, "host_dev_name: '%s' is not an interface name (no '/', ':' or blank; not . or ..)",
				s);
	strcpy(out, s);
	return 0;
}

/* One NetworkOverride: {iface_id, host_dev_name}, other keys ignored (no deny_unknown_fields in Firecracker). */
static int net_override(const struct fcj *c, json_object *o, struct fc_net_override *ov)
{
	const char *id;

	if (!json_object_is_type(o, json_type_object))
		return fcj_fail(c, "expected an object {\"iface_id\", \"host_dev_name\"}");
	if (fcj_req_str(c, o, "iface_id", 4095, &id) < 0 || tap_name(c, o, ov->host_dev_name))
		return -EINVAL;
	ov->unknown = strlen(id) > FC_ID_MAX;
	snprintf(ov->iface_id, sizeof(ov->iface_id), "%s", ov->unknown ? "" : id);
	return 0;
}

int fc_parse_net_overrides(const struct fcj *c, json_object *arr, struct fc_load_overrides *out)
{
	char err[512];

	out->nr = 0;
	if (!arr || json_object_is_type(arr, json_type_null))
		return 0;
	if (!json_object_is_type(arr, json_type_array))
		return fcj_fail(c, "network_overrides: expected an array");
	if (json_object_array_length(arr) > FC_MAX_NET_OVERRIDES)
		return fcj_fail(c, "network_overrides: %zu entries, at most %u", json_object_array_length(arr),
				FC_MAX_NET_OVERRIDES);
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		char what[48];
		const struct fcj e = {.what = what, .err = err, .errlen = sizeof(err)};

		snprintf(what, sizeof(what), "network_overrides[%zu]", i);
		if (net_override(&e, json_object_array_get_idx(arr, i), &out->ov[i]))
			return fcj_fail(c, "%s", err);
		out->nr++;
	}
	return 0;
}

/* VsockOverride: {uds_path}, other keys ignored (no deny_unknown_fields in Firecracker); uds_path as PUT /vsock. */
static int vsock_override(const struct fcj *c, json_object *v, char out[VM_VSOCK_UDS_MAX + 1])
{
	const char *uds;

	if (!json_object_is_type(v, json_type_object))
		return fcj_fail(c, "vsock_override: expected an object {\"uds_path\"}");
	if (fcj_req_str(c, v, "uds_path", VM_VSOCK_UDS_MAX, &uds) < 0)
		return -EINVAL;
	strcpy(out, uds);
	return 0;
}

int fc_parse_load_overrides(const struct fcj *c, json_object *o, struct fc_load_overrides *out)
{
	static const char *const huge[] = {"Snapshot", "None", "Transparent", "2M", NULL};
	json_object *v = fcj_get(o, "vsock_override");
	unsigned h = FC_LOAD_HUGE_SNAPSHOT;
	char err[512];
	const struct fcj e = {.what = "vsock_override", .err = err, .errlen = sizeof(err)};

	out->vsock_uds[0] = '\0';
	if (v && vsock_override(&e, v, out->vsock_uds))
		return fcj_fail(c, "%s", err);
	if (fcj_enum(c, o, "huge_pages", huge, false, &h) < 0)
		return -EINVAL;
	out->huge = (enum fc_load_huge)h;
	return 0;
}

bool fc_load_overrides_any(const struct fc_load_overrides *o)
{
	return o && (o->nr || o->vsock_uds[0] || o->huge != FC_LOAD_HUGE_SNAPSHOT);
}

/* Firecracker's MacAddr::from_str (v1.7.0 src/utils/src/net/mac.rs): six ':'-separated pairs of hex digits. */
static bool fc_mac(const char *s, uint8_t mac[6])
{
	static const char hex[] = "0123456789abcdef";

	if (strlen(s) != 17)
		return false;
	for (unsigned i = 0; i < 6; i++) {
		const char *p = s + 3 * i;
		const char *hi = p[0] ? strchr(hex, p[0] | 0x20) : NULL, *lo = p[1] ? strchr(hex, p[1] | 0x20) : NULL;

		if (!hi || !lo || (i < 5 && p[2] != ':'))
			return false;
		mac[i] = (uint8_t)((hi - hex) << 4 | (lo - hex));
	}
	return true;
}

/*
 * guest_mac: any six hex bytes, as Firecracker (a multicast or all-zero
 * address is the guest's business: Linux's virtio_net picks a random one),
 * not used by another interface (NetBuilder::build's check).
 */
static int guest_mac(const struct fc_vm *f, const struct fcj *c, json_object *o, const char *id, struct vm_net *n)
{
	const char *s = NULL;
	int r = fcj_str(c, o, "guest_mac", 0, 64, &s);

	if (r <= 0)
		return r;
	if (!fc_mac(s, n->mac))
		return fcj_fail(c, "guest_mac: '%s' is not six hex bytes separated by ':' (06:00:ac:10:00:02)", s);
	n->has_mac = true;
	for (unsigned i = 0; i < f->cfg.nr_nets; i++)
		if (f->cfg.net[i].has_mac && memcmp(f->cfg.net[i].mac, n->mac, 6) == 0 && strcmp(f->net[i].id, id))
			return fcj_fail(c, "The MAC address is already in use: %s (interface '%s')", s, f->net[i].id);
	return 1;
}

/*
 * Firecracker's NetBuilder::build: a known id is replaced (here in place,
 * so the guest's eth order stays; Firecracker moves it last), a new one
 * goes last.
 */
int fc_apply_net(struct fc_vm *f, const struct fcj *c, const char *id, json_object *o)
{
	static const char *const keys[] = {"iface_id",	      "host_dev_name",	 "guest_mac",
					   "rx_rate_limiter", "tx_rate_limiter", NULL};
	struct vm_net n = {.kind = NET_TAP};
	const char *iface_id;
	char why[512];
	int pos;

	if (fcj_keys(c, o, keys) || body_id(c, o, "iface_id", id, &iface_id) || tap_name(c, o, n.tap) ||
	    guest_mac(f, c, o, iface_id, &n) < 0 || fc_rate_limiter(c, o, "rx_rate_limiter", &n.rx_rl, NULL) ||
	    fc_rate_limiter(c, o, "tx_rate_limiter", &n.tx_rl, NULL))
		return -EINVAL;
	rl_normalise(&n.rx_rl);
	rl_normalise(&n.tx_rl);
	pos = find_net(f, iface_id);
	if (pos < 0 && f->cfg.nr_nets == VM_MAX_NETS)
		return fcj_fail(c, "'%s' would be interface %d: at most %d", iface_id, VM_MAX_NETS + 1, VM_MAX_NETS);
	if (f->check_files && net_tap_probe(n.tap, why, sizeof(why))) /* Tap::open_named at the PUT */
		return fcj_fail(c, "host_dev_name %s: %s", n.tap, why);
	if (pos < 0)
		pos = (int)f->cfg.nr_nets++;
	f->cfg.net[pos] = n;
	snprintf(f->net[pos].id, sizeof(f->net[pos].id), "%s", iface_id);
	return 0;
}

/* The id-carrying bodies: parse, then apply. */
static int id_body(struct fc_vm *f, const char *what, const char *id, const char *text, size_t len, char *err,
		   size_t errlen, int (*fn)(struct fc_vm *, const struct fcj *, const char *, json_object *))
{
	const struct fcj c = {what, err, errlen};
	json_object *o;
	int ret = fcj_parse(&c, text, len, &o);

	if (!ret)
		ret = fn(f, &c, id, o);
	json_object_put(o);
	return ret;
}

int fc_put_drive(struct fc_vm *f, const char *id, const char *text, size_t len, char *err, size_t errlen)
{
	return id_body(f, "drives", id, text, len, err, errlen, fc_apply_drive);
}

/* PATCH /network-interfaces/{id} (after boot): Firecracker's NetworkInterfaceUpdateConfig. */
static int patch_net(struct fc_vm *f, const struct fcj *c, const char *id, json_object *o, struct fc_net_patch *p)
{
	static const char *const keys[] = {"iface_id", "rx_rate_limiter", "tx_rate_limiter", NULL};
	const char *iface_id;
	int pos;

	if (fcj_keys(c, o, keys) || body_id(c, o, "iface_id", id, &iface_id) ||
	    fc_rate_limiter(c, o, "rx_rate_limiter", &p->rx, p->rx_has) ||
	    fc_rate_limiter(c, o, "tx_rate_limiter", &p->tx, p->tx_has))
		return -EINVAL;
	pos = find_net(f, iface_id);
	if (pos < 0)
		return fcj_fail(c, "iface_id: no network interface '%s'", iface_id);
	p->index = (unsigned)pos;
	return 0;
}

int fc_patch_drive(struct fc_vm *f, const char *id, const char *text, size_t len, struct fc_drive_patch *p, char *err,
		   size_t errlen)
{
	const struct fcj c = {"drives", err, errlen};
	json_object *o;
	int ret = fcj_parse(&c, text, len, &o);

	if (!ret)
		ret = patch_drive(f, &c, id, o, p);
	json_object_put(o);
	return ret;
}

int fc_patch_net(struct fc_vm *f, const char *id, const char *text, size_t len, struct fc_net_patch *p, char *err,
		 size_t errlen)
{
	const struct fcj c = {"network-interfaces", err, errlen};
	json_object *o;
	int ret = fcj_parse(&c, text, len, &o);

	if (!ret)
		ret = patch_net(f, &c, id, o, p);
	json_object_put(o);
	return ret;
}

int fc_put_net(struct fc_vm *f, const char *id, const char *text, size_t len, char *err, size_t errlen)
{
	return id_body(f, "network-interfaces", id, text, len, err, errlen, fc_apply_net);
}
