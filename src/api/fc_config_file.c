/*
 * fc_config_file.c - Firecracker's --config-file (one object holding every API body), InstanceStart's checks, and
 * a struct fc_vm made from command-line options (include/brisk/fc_config.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/config.h"
#include "brisk/cpuid.h"
#include "brisk/errmsg.h"
#include "brisk/file.h"
#include "brisk/log.h"
#include "fc_config_internal.h"

/* Sections a Firecracker GET /vm/config has that brisk has no device for: accepted when empty, then ignored. */
static const char *const ignored[] = {"memory-hotplug", "pmem", NULL};

static const char *const sections[] = {
    "boot-source", "drives",  "machine-config", "network-interfaces", "vsock",		"entropy", "logger",
    "metrics",	   "balloon", "mmds-config",	"cpu-config",	      "memory-hotplug", "pmem",	   NULL};

/* An ignored section must be null (pmem: also []); anything else would be configuration brisk drops. */
static int check_ignored(const struct fcj *c, json_object *root)
{
	for (unsigned i = 0; ignored[i]; i++) {
		json_object *v = NULL;

		if (!json_object_object_get_ex(root, ignored[i], &v))
			continue;
		if (v && !(json_object_is_type(v, json_type_array) && json_object_array_length(v) == 0 &&
			   strcmp(ignored[i], "pmem") == 0))
			return fcj_fail(c, "%s: brisk has no such device; only %s is accepted", ignored[i],
					strcmp(ignored[i], "pmem") == 0 ? "null or []" : "null");
		log_debug("config file: ignoring empty \"%s\"", ignored[i]);
	}
	return 0;
}

/* The object section `key`: 1 and *out, 0 when absent or null, -EINVAL when not an object. */
static int section(const struct fcj *c, json_object *root, const char *key, json_object **out)
{
	*out = fcj_get(root, key);
	if (*out && !json_object_is_type(*out, json_type_object))
		return fcj_fail(c, "%s: expected an object, got %s", key,
				json_type_to_name(json_object_get_type(*out)));
	return *out ? 1 : 0;
}

/* "drives" or "network-interfaces": an array of the API bodies, applied in order. */
static int array_section(struct fc_vm *f, const struct fcj *c, json_object *root, const char *key,
			 int (*fn)(struct fc_vm *, const struct fcj *, const char *, json_object *))
{
	json_object *a = fcj_get(root, key);
	char what[256];

	if (!a)
		return 0;
	if (!json_object_is_type(a, json_type_array))
		return fcj_fail(c, "%s: expected an array, got %s", key, json_type_to_name(json_object_get_type(a)));
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *e = json_object_array_get_idx(a, i);
		struct fcj ec = {what, c->err, c->errlen};
		int ret;

		snprintf(what, sizeof(what), "%s: %s[%zu]", c->what, key, i);
		if (!json_object_is_type(e, json_type_object))
			return fcj_fail(&ec, "expected an object, got %s", json_type_to_name(json_object_get_type(e)));
		ret = fn(f, &ec, NULL, e);
		if (ret)
			return ret;
	}
	return 0;
}

/* Applies the object section `key` with `fn`; a missing section leaves the defaults. */
static int object_section(struct fc_vm *f, const struct fcj *c, json_object *root, const char *key,
			  int (*fn)(struct fc_vm *, const struct fcj *, json_object *))
{
	char what[256];
	struct fcj sc = {what, c->err, c->errlen};
	json_object *o;
	int r = section(c, root, key, &o);

	if (r <= 0)
		return r;
	snprintf(what, sizeof(what), "%s: %s", c->what, key);
	return fn(f, &sc, o);
}

static int apply_machine_put(struct fc_vm *f, const struct fcj *c, json_object *o)
{
	return fc_apply_machine_config(f, c, o, false);
}

static char *read_all(int fd, size_t *len, int *ret);

/*
 * "cpu-config": the path of a custom CPU template file (Firecracker's VmmConfig.cpu_config), read and
 * parsed as PUT /cpu-config's body, after machine-config as Firecracker's from_json does (so it replaces
 * machine-config's cpu_template); null: none.
 */
static int cpu_config_section(struct fc_vm *f, const struct fcj *c, json_object *root)
{
	char what[256];
	const struct fcj fc = {what, c->err, c->errlen};
	json_object *v = fcj_get(root, "cpu-config");
	struct cpuid_fc_template *t;
	struct stat st;
	const char *path;
	size_t len;
	char *text;
	int ret, fd;

	if (!v)
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return fcj_fail(c, "cpu-config: expected a path string, got %s",
				json_type_to_name(json_object_get_type(v)));
	path = json_object_get_string(v);
	if (!*path || strlen(path) >= VM_DISK_PATH_MAX || !fcj_printable(path))
		return fcj_fail(c, "cpu-config: a path of 1..%u printable characters", VM_DISK_PATH_MAX - 1);
	snprintf(what, sizeof(what), "%s: cpu-config %s", c->what, path);
	fd = file_open_input(path, "cpu-config", &st, c->err, c->errlen);
	if (fd < 0)
		return fd == -ENOMEM ? fd : -EINVAL;
	if (st.st_size > FC_JSON_MAX) {
		close(fd);
		return fcj_fail(&fc, "%lld bytes: at most %u", (long long)st.st_size, FC_JSON_MAX);
	}
	text = read_all(fd, &len, &ret);
	close(fd);
	if (!text)
		return ret == -ENOMEM ? ret : fcj_fail(&fc, "read: %s", strerror(-ret));
	ret = cpuid_fc_parse(what, text, len, &t, c->err, c->errlen);
	free(text);
	if (!ret)
		fc_set_custom_template(f, t);
	return ret;
}

/* The sections in Firecracker's order (VmResources::from_json): machine, boot source, devices, logger, metrics. */
static int apply_sections(struct fc_vm *f, const struct fcj *c, json_object *root)
{
	json_object *boot;
	int ret;

	if (fcj_keys(c, root, sections) || check_ignored(c, root))
		return -EINVAL;
	if (section(c, root, "boot-source", &boot) == 0)
		return fcj_fail(c, "boot-source is required");
	if ((ret = object_section(f, c, root, "machine-config", apply_machine_put)) ||
	    (ret = cpu_config_section(f, c, root)) ||
	    (ret = object_section(f, c, root, "boot-source", fc_apply_boot_source)) ||
	    (ret = array_section(f, c, root, "drives", fc_apply_drive)) ||
	    (ret = array_section(f, c, root, "network-interfaces", fc_apply_net)) ||
	    (ret = object_section(f, c, root, "vsock", fc_apply_vsock)) ||
	    (ret = object_section(f, c, root, "mmds-config", fc_apply_mmds_config)) ||
	    (ret = object_section(f, c, root, "entropy", fc_apply_entropy)) ||
	    (ret = object_section(f, c, root, "logger", fc_apply_logger)) ||
	    (ret = object_section(f, c, root, "metrics", fc_apply_metrics)) ||
	    (ret = object_section(f, c, root, "balloon", fc_apply_balloon)))
		return ret;
	return 0;
}

/* Loads into a fresh fc_vm, so a failure leaves `f` as it was. */
static int load(struct fc_vm *f, const struct fcj *c, const char *text, size_t len)
{
	struct fc_vm *tmp = malloc(sizeof(*tmp));
	json_object *root = NULL;
	int ret;

	if (!tmp)
		return -ENOMEM;
	fc_vm_init(tmp);
	ret = fcj_parse(c, text, len, &root);
	if (!ret)
		ret = apply_sections(tmp, c, root);
	json_object_put(root);
	if (ret) {
		fc_vm_free(tmp);
	} else {
		fc_vm_free(f);
		memcpy(f, tmp, sizeof(*f)); /* cfg points at heap strings only: the move keeps them valid */
	}
	free(tmp);
	return ret;
}

int fc_vm_load_config_json(struct fc_vm *f, const char *text, size_t len, char *err, size_t errlen)
{
	const struct fcj c = {"config", err, errlen};

	return load(f, &c, text, len);
}

/* The file's bytes, at most FC_JSON_MAX + 1 of them (one more tells it is too large). */
static char *read_all(int fd, size_t *len, int *ret)
{
	char *buf = malloc(FC_JSON_MAX + 1);
	size_t n = 0;

	*ret = buf ? 0 : -ENOMEM;
	while (buf && n <= FC_JSON_MAX) {
		ssize_t got = read(fd, buf + n, FC_JSON_MAX + 1 - n);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			*ret = got < 0 ? -errno : 0;
			break;
		}
		n += (size_t)got;
	}
	*len = n;
	if (*ret) {
		free(buf);
		return NULL;
	}
	return buf;
}

int fc_vm_load_config_file(struct fc_vm *f, const char *path, char *err, size_t errlen)
{
	char what[256];
	const struct fcj c = {what, err, errlen};
	struct stat st;
	size_t len;
	char *text;
	int ret, fd = file_open_input(path, "--config-file", &st, err, errlen);

	if (fd < 0)
		return fd;
	file_guard_add(&st, FILE_GUARD_INPUT, "the config file (--config-file)");
	snprintf(what, sizeof(what), "--config-file %s", path);
	if (st.st_size > FC_JSON_MAX) {
		close(fd);
		return fcj_fail(&c, "%lld bytes: at most %u", (long long)st.st_size, FC_JSON_MAX);
	}
	text = read_all(fd, &len, &ret);
	close(fd);
	if (!text)
		return ret == -ENOMEM ? ret : fcj_fail(&c, "read: %s", strerror(-ret));
	ret = load(f, &c, text, len); /* more than FC_JSON_MAX bytes (it grew) is refused there */
	free(text);
	return ret;
}

/* Firecracker's append_root_device_cmdline (boot_source.rs): "root=/dev/vda" or "root=PARTUUID=<uuid>", ro|rw. */
static int root_words(struct fc_vm *f)
{
	char words[32 + FC_PARTUUID_MAX];
	char *s = NULL;

	if (f->cfg.nr_disks && f->drive[0].is_root_device) {
		if (f->drive[0].partuuid[0])
			snprintf(words, sizeof(words), "root=PARTUUID=%s %s", f->drive[0].partuuid,
				 f->cfg.disk[0].ro ? "ro" : "rw");
		else
			snprintf(words, sizeof(words), "root=/dev/vda %s", f->cfg.disk[0].ro ? "ro" : "rw");
		s = strdup(words);
		if (!s)
			return -ENOMEM;
	}
	free(f->cmdline_append);
	f->cfg.cmdline_append = f->cmdline_append = s;
	return 0;
}

int fc_vm_finalize(struct fc_vm *f, char *err, size_t errlen)
{
	int ret;

	if (!f->boot_source_set) {
		snprintf(err, errlen, "InstanceStart: no boot source: PUT /boot-source with kernel_image_path first");
		return -EINVAL;
	}
	ret = root_words(f);
	if (ret) {
		snprintf(err, errlen, "InstanceStart: out of memory");
		return ret;
	}
	ret = config_validate(&f->cfg, CONFIG_MAX_CPUS, config_host_memory(), err, errlen);
	if (!ret && f->mmds.set)
		mmds_set_config(&f->mmds); /* the interfaces answer MMDS from the VM's first frame */
	return ret;
}

/* The owned copies of cfg's strings. */
static int own_strings(struct fc_vm *f, const struct vm_config *cfg)
{
	const char *src[] = {cfg->kernel, cfg->initrd, cfg->cmdline, cfg->cmdline_append, cfg->cpu_template};
	char **dst[] = {&f->kernel, &f->initrd, &f->cmdline, &f->cmdline_append, &f->cpu_template};

	for (unsigned i = 0; i < 5; i++) {
		*dst[i] = src[i] ? strdup(src[i]) : NULL;
		if (src[i] && !*dst[i])
			return -ENOMEM;
	}
	f->cfg.kernel = f->kernel;
	f->cfg.initrd = f->initrd;
	f->cfg.cmdline = f->cmdline;
	f->cfg.cmdline_append = f->cmdline_append;
	f->cfg.cpu_template = f->cpu_template;
	/* A restored VM's custom template (its snapshot's), copied so that GET shows it as Firecracker would. */
	f->cfg.fc_template = NULL;
	if (cpuid_fc_dup(cfg->fc_template, &f->custom_template))
		return -ENOMEM;
	f->cfg.fc_template = f->custom_template;
	return 0;
}

int fc_vm_set_from_config(struct fc_vm *f, const struct vm_config *cfg)
{
	struct fc_vm *tmp = malloc(sizeof(*tmp));

	if (!tmp)
		return -ENOMEM;
	fc_vm_init(tmp);
	/* serial_path and hooks stay the caller's */
	if (config_copy(&tmp->cfg, cfg) || own_strings(tmp, cfg)) {
		fc_vm_free(tmp);
		free(tmp);
		return -ENOMEM;
	}
	tmp->boot_source_set = cfg->kernel != NULL; /* NULL: the built-in demo guest, no boot source */
	tmp->smt = cfg->topology.threads > 1;
	tmp->huge_pages = cfg->hugetlbfs ? FC_HUGE_2M : cfg->hugepages ? FC_HUGE_TRANSPARENT : FC_HUGE_NONE;
	tmp->track_dirty_pages = cfg->track_dirty; /* a restored VM's: the load's, as Firecracker */
	for (unsigned i = 0; i < cfg->nr_disks && i < VM_MAX_DISKS; i++) {
		snprintf(tmp->drive[i].id, sizeof(tmp->drive[i].id), "drive%u", i);
		tmp->drive[i].cache_type = FC_CACHE_WRITEBACK; /* brisk's writeback flushes on FLUSH */
	}
	for (unsigned i = 0; i < cfg->nr_nets && i < VM_MAX_NETS; i++)
		snprintf(tmp->net[i].id, sizeof(tmp->net[i].id), "net%u", i);
	fc_vm_free(f);
	memcpy(f, tmp, sizeof(*f));
	free(tmp);
	return 0;
}

/* Whether the description's devices are the restored VM's, in the same order (nothing else is taken from it). */
static bool same_devices(const struct vm_config *desc, const struct vm_config *cfg)
{
	unsigned taps = 0;

	if (desc->cpus != cfg->cpus || desc->memory != cfg->memory || desc->nr_disks != cfg->nr_disks)
		return false;
	for (unsigned i = 0; i < cfg->nr_disks; i++)
		if (strcmp(desc->disk[i].path, cfg->disk[i].path) != 0 || desc->disk[i].ro != cfg->disk[i].ro)
			return false;
	/* User-mode interfaces have no Firecracker shape (fc_vm_to_json leaves them out): taps are compared. */
	for (unsigned i = 0; i < cfg->nr_nets; i++) {
		if (cfg->net[i].kind != NET_TAP)
			continue;
		if (taps >= desc->nr_nets || strcmp(desc->net[taps].tap, cfg->net[i].tap) != 0)
			return false;
		taps++;
	}
	return taps == desc->nr_nets;
}

/* Firecracker's identities from `d` (the snapshot's description) onto `f` (made from the restored cfg). */
static int take_identities(struct fc_vm *f, struct fc_vm *d)
{
	const struct vm_config *cfg = &f->cfg;
	unsigned tap = 0;

	for (unsigned i = 0; i < cfg->nr_disks; i++) {
		f->drive[i] = d->drive[i];
		f->cfg.disk[i].rl = d->cfg.disk[i].rl; /* GET reads the limiters back as the snapshot's VM had them */
	}
	for (unsigned i = 0; i < cfg->nr_nets; i++)
		if (cfg->net[i].kind == NET_TAP)
			f->net[i] = d->net[tap++];
	memcpy(f->vsock_id, d->vsock_id, sizeof(f->vsock_id));
	f->smt = d->smt; /* track_dirty_pages and huge_pages: the restored VM's (its load, its snapshot's RAM) */
	f->cfg.rng_rl = d->cfg.rng_rl;
	f->rng_size = d->rng_size;
	f->rng_refill_ms = d->rng_refill_ms;
	f->boot_source_set = d->boot_source_set;
	f->mmds = d->mmds; /* Firecracker keeps the MMDS network stack and version in its snapshot, not the store */
	if (f->mmds.set)
		mmds_set_config(&f->mmds);
	/* The boot source: what the snapshot's VM was booted from (the restored cfg has no kernel). */
	free(f->kernel), free(f->initrd), free(f->cmdline);
	f->cfg.kernel = f->kernel = d->kernel, d->kernel = NULL;
	f->cfg.initrd = f->initrd = d->initrd, d->initrd = NULL;
	f->cfg.cmdline = f->cmdline = d->cmdline, d->cmdline = NULL;
	return 0;
}

/* The load's overrides applied to the description too (interfaces by id), as to the configuration. */
static void override_desc(struct fc_vm *d, const struct fc_load_overrides *o)
{
	for (unsigned k = 0; o && k < o->nr; k++)
		for (unsigned i = 0; i < d->cfg.nr_nets; i++)
			if (!o->ov[k].unknown && strcmp(d->net[i].id, o->ov[k].iface_id) == 0)
				snprintf(d->cfg.net[i].tap, sizeof(d->cfg.net[i].tap), "%s", o->ov[k].host_dev_name);
	if (o && o->vsock_uds[0] && d->cfg.vsock.uds[0])
		snprintf(d->cfg.vsock.uds, sizeof(d->cfg.vsock.uds), "%s", o->vsock_uds);
}

int fc_vm_set_from_restore(struct fc_vm *f, const struct vm_config *cfg, const char *desc)
{
	return fc_vm_set_from_restore_ov(f, cfg, desc, NULL);
}

int fc_vm_set_from_restore_ov(struct fc_vm *f, const struct vm_config *cfg, const char *desc,
			      const struct fc_load_overrides *o)
{
	struct fc_vm *d;
	char err[512];
	int ret = fc_vm_set_from_config(f, cfg);

	if (ret || !desc)
		return ret;
	d = malloc(sizeof(*d));
	if (!d)
		return -ENOMEM;
	fc_vm_init(d);
	ret = fc_vm_load_config_json(d, desc, strlen(desc), err, sizeof(err));
	if (ret == -ENOMEM)
		goto out;
	override_desc(d, o);
	if (ret)
		log_warn("GET /vm/config: the snapshot's description of the VM is not readable (%s): ids are "
			 "derived",
			 err);
	else if (!same_devices(&d->cfg, cfg))
		log_warn("GET /vm/config: the snapshot's description of the VM does not match its configuration: ids "
			 "are derived");
	else
		take_identities(f, d);
	ret = 0;
out:
	fc_vm_free(d);
	free(d);
	return ret;
}

/* The network_overrides: each onto the interface the description names with its id. */
static int apply_net_overrides(struct vm_config *cfg, const char *desc, const struct fc_load_overrides *o, char *err,
			       size_t errlen)
{
	struct fc_vm *v;
	int ret = 0;

	if (!o->nr)
		return 0;
	v = malloc(sizeof(*v));
	if (!v)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	fc_vm_init(v);
	/* the ids a client sees for this snapshot's interfaces: the ones GET /vm/config gives after the load */
	if (fc_vm_set_from_restore(v, cfg, desc)) {
		ret = err_set(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	for (unsigned k = 0; k < o->nr && !ret; k++) {
		const struct fc_net_override *ov = &o->ov[k];
		unsigned i = 0;

		while (i < cfg->nr_nets && (ov->unknown || strcmp(v->net[i].id, ov->iface_id) != 0))
			i++;
		if (i == cfg->nr_nets)
			ret =
			    err_set(err, errlen, -ENODEV,
				    "Failed to restore from snapshot: Failed to get snapshot state from file: Unknown "
				    "Network Device.");
		else if (cfg->net[i].kind != NET_TAP)
			ret = err_set(err, errlen, -EINVAL,
				      "network_overrides: interface %s uses brisk's user-mode network, not a tap",
				      ov->iface_id);
		else
			snprintf(cfg->net[i].tap, sizeof(cfg->net[i].tap), "%s", ov->host_dev_name);
	}
out:
	fc_vm_free(v);
	free(v);
	return ret;
}

int fc_apply_load_overrides(struct vm_config *cfg, const char *desc, const struct fc_load_overrides *o, char *err,
			    size_t errlen)
{
	int ret;

	if (!fc_load_overrides_any(o))
		return 0;
	if ((ret = apply_net_overrides(cfg, desc, o, err, errlen)))
		return ret;
	if (o->vsock_uds[0] && config_move_vsock(cfg, o->vsock_uds)) /* parsed to fit: only -ENODEV is left */
		return err_set(err, errlen, -ENODEV,
			       "Failed to restore from snapshot: Failed to get snapshot state from file: Unknown Vsock "
			       "Device.");
	/* SnapshotLoadHugePageConfig::resolve: Snapshot keeps the snapshot's, the others are machine-config's values */
	if (o->huge != FC_LOAD_HUGE_SNAPSHOT) {
		cfg->hugetlbfs = o->huge == FC_LOAD_HUGE_2M;
		cfg->hugepages = o->huge == FC_LOAD_HUGE_TRANSPARENT;
	}
	return 0;
}
