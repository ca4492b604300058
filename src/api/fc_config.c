/*
 * fc_config.c - Firecracker's machine-wide objects (boot-source, machine-config, vsock, entropy, logger, metrics)
 * applied to struct fc_vm, and the API bodies' entry points (include/brisk/fc_config.h). Field names, required
 * fields and defaults follow src/firecracker/swagger/firecracker.yaml and src/vmm/src/vmm_config/ *.rs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/config.h"
#include "brisk/cpuid.h"
#include "brisk/file.h"
#include "brisk/layout.h"
#include "fc_config_internal.h"

#define PATH_MAX_BYTES (VM_DISK_PATH_MAX - 1)
#define MEM_MAX_MIB    (16ULL << 20) /* 16 TiB: config_validate holds it to the host's RAM + swap */
#define MODULE_MAX     256
/* Firecracker's x86_64 CMDLINE_MAX_SIZE is 2048 with the NUL: boot_args of at most 2047 bytes. */
#define FC_CMDLINE_MAX 2047

const char *const fc_huge_names[] = {"None", "2M", "Transparent", NULL};
/* "Warn" is Firecracker's other spelling of "Warning" (logger/logging.rs); it is read, never written. */
const char *const fc_level_names[] = {"Error", "Warning", "Info", "Debug", "Trace", "Off", "Warn", NULL};

void fc_vm_init(struct fc_vm *f)
{
	memset(f, 0, sizeof(*f));
	config_defaults(&f->cfg);
	f->logger.level = FC_LOG_INFO;
}

void fc_logger_free(struct fc_logger *l)
{
	free(l->log_path);
	free(l->module);
	l->log_path = l->module = NULL;
}

void fc_metrics_free(struct fc_metrics *m)
{
	free(m->metrics_path);
	*m = (struct fc_metrics){0};
}

void fc_vm_free(struct fc_vm *f)
{
	free(f->kernel);
	free(f->initrd);
	free(f->cmdline);
	free(f->cmdline_append);
	free(f->cpu_template);
	cpuid_fc_free(f->custom_template);
	config_release(&f->cfg);
	fc_logger_free(&f->logger);
	fc_metrics_free(&f->metrics);
	memset(f, 0, sizeof(*f));
}

/* strdup of NULL is NULL; *fail is set when a real string could not be copied. */
static char *dup_opt(const char *s, bool *fail)
{
	char *d = s ? strdup(s) : NULL;

	if (s && !d)
		*fail = true;
	return d;
}

/* linux-loader's Cmdline::insert_str (Firecracker v1.7.0 boot_source.rs BootConfig::new): ' '..'~' only. */
static bool cmdline_ascii(const char *s)
{
	for (; *s; s++)
		if (*s < ' ' || *s > '~')
			return false;
	return true;
}

/* A kernel or initrd a PUT names opens (Firecracker's BootConfig::new opens both at PUT /boot-source). */
static int check_input(const struct fcj *c, const char *key, const char *path)
{
	char why[512];
	int fd;

	if (!path)
		return 0;
	fd = file_open_input(path, key, NULL, why, sizeof(why));
	if (fd < 0)
		return fcj_fail(c, "%s", why);
	close(fd);
	return 0;
}

int fc_apply_boot_source(struct fc_vm *f, const struct fcj *c, json_object *o)
{
	static const char *const keys[] = {"kernel_image_path", "boot_args", "initrd_path", NULL};
	const char *kernel = NULL, *args = NULL, *initrd = NULL;
	char *k, *a, *i;
	bool oom = false;

	if (fcj_keys(c, o, keys) || fcj_req_str(c, o, "kernel_image_path", PATH_MAX_BYTES, &kernel) < 0 ||
	    fcj_str(c, o, "boot_args", 0, FC_CMDLINE_MAX, &args) < 0 ||
	    fcj_str(c, o, "initrd_path", 1, PATH_MAX_BYTES, &initrd) < 0)
		return -EINVAL;
	if (args && !cmdline_ascii(args))
		return fcj_fail(c, "boot_args: The kernel command line is invalid: a character that is not printable "
				   "ASCII");
	if (f->check_files && (check_input(c, "kernel_image_path", kernel) || check_input(c, "initrd_path", initrd)))
		return -EINVAL;
	k = dup_opt(kernel, &oom);
	a = dup_opt(args, &oom);
	i = dup_opt(initrd, &oom);
	if (oom) {
		free(k);
		free(a);
		free(i);
		return -ENOMEM;
	}
	free(f->kernel);
	free(f->cmdline);
	free(f->initrd);
	f->cfg.kernel = f->kernel = k;
	f->cfg.cmdline = f->cmdline = a; /* NULL: the kernel's default command line */
	f->cfg.initrd = f->initrd = i;
	f->boot_source_set = true;
	return 0;
}

/* machine-config's values before they are committed. */
struct machine {
	uint64_t cpus, memory;
	bool smt, dirty; /* track_dirty_pages: KVM's dirty log on RAM, so Diff snapshots (cfg.track_dirty) */
	unsigned huge;
	const char *tmpl; /* cpu_template given: a static name or "None"; NULL: keep */
};

/* StaticCpuTemplate's variants, in Firecracker's order (serde's "expected one of" lists them so). */
static const char *const fc_template_names[] = {"C3", "T2", "T2S", "None", "T2CL", "T2A", NULL};

/*
 * cpu_template: one of Firecracker's static templates, or "None" (no template: the custom one of PUT
 * /cpu-config goes too); absent keeps the current template, as Firecracker's VmConfig::update.
 * *name is fc_template_names' entry. The vendor check is at InstanceStart, as Firecracker's.
 */
static int cpu_template(const struct fcj *c, json_object *o, const char **name)
{
	json_object *v = fcj_get(o, "cpu_template");
	const char *s;

	if (!v)
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return fcj_fail(c, "cpu_template: expected a string, got %s",
				json_type_to_name(json_object_get_type(v)));
	s = json_object_get_string(v);
	for (unsigned i = 0; fc_template_names[i]; i++)
		if (strcmp(s, fc_template_names[i]) == 0) {
			*name = fc_template_names[i];
			return 1;
		}
	if (!fcj_printable(s) || strlen(s) > 32)
		return fcj_fail(c, "cpu_template: unknown variant, expected one of `C3`, `T2`, `T2S`, `None`, `T2CL`, "
				   "`T2A`");
	return fcj_fail(
	    c, "cpu_template: unknown variant `%s`, expected one of `C3`, `T2`, `T2S`, `None`, `T2CL`, `T2A`", s);
}

/* Sets the VM's CPU template to static template `name` ("None": none), dropping a custom one. */
static int set_static_template(struct fc_vm *f, const char *name)
{
	char *s = strcmp(name, "None") == 0 ? NULL : strdup(name);

	if (strcmp(name, "None") != 0 && !s)
		return -ENOMEM;
	free(f->cpu_template);
	f->cfg.cpu_template = f->cpu_template = s;
	cpuid_fc_free(f->custom_template);
	f->custom_template = NULL;
	f->cfg.fc_template = NULL;
	return 0;
}

/* Reads the members into *m; returns how many were given, or -EINVAL. */
static int machine_read(const struct fcj *c, json_object *o, struct machine *m, bool patch)
{
	static const char *const keys[] = {"vcpu_count",   "mem_size_mib", "smt", "track_dirty_pages",
					   "cpu_template", "huge_pages",   NULL};
	int given = 0, r[6];
	uint64_t mib = m->memory >> 20;

	if (fcj_keys(c, o, keys))
		return -EINVAL;
	r[0] = fcj_uint(c, o, "vcpu_count", 1, CONFIG_MAX_CPUS, &m->cpus);
	r[1] = r[0] < 0 ? -EINVAL : fcj_uint(c, o, "mem_size_mib", LAYOUT_MEM_MIN >> 20, MEM_MAX_MIB, &mib);
	r[2] = r[1] < 0 ? -EINVAL : fcj_bool(c, o, "smt", &m->smt);
	r[3] = r[2] < 0 ? -EINVAL : fcj_bool(c, o, "track_dirty_pages", &m->dirty);
	r[4] = r[3] < 0 ? -EINVAL : cpu_template(c, o, &m->tmpl);
	r[5] = r[4] < 0 ? -EINVAL : fcj_enum(c, o, "huge_pages", fc_huge_names, false, &m->huge);
	for (unsigned i = 0; i < 6; i++) {
		if (r[i] < 0)
			return -EINVAL;
		given += r[i];
	}
	if (!patch && r[0] == 0)
		return fcj_fail(c, "vcpu_count is required");
	if (!patch && r[1] == 0)
		return fcj_fail(c, "mem_size_mib is required");
	if (r[1])
		m->memory = mib << 20;
	return given;
}

/*
 * Cross-field checks, as Firecracker's MachineConfig: SMT needs 1 or an
 * even number of vCPUs (two threads per core); huge pages need a whole
 * number of 2 MiB pages.
 */
static int machine_check(const struct fcj *c, const struct machine *m)
{
	if (m->smt && m->cpus > 1 && m->cpus % 2)
		return fcj_fail(c, "smt: true needs vcpu_count 1 or an even number, got %llu",
				(unsigned long long)m->cpus);
	if (m->huge != FC_HUGE_NONE && (m->memory >> 20) % 2)
		return fcj_fail(c, "huge_pages: \"%s\" needs an even mem_size_mib, got %llu", fc_huge_names[m->huge],
				(unsigned long long)(m->memory >> 20));
	return 0;
}

int fc_apply_machine_config(struct fc_vm *f, const struct fcj *c, json_object *o, bool patch)
{
	/* PUT starts from Firecracker's defaults (smt false, huge_pages None); PATCH from what is set. */
	struct machine m = {f->cfg.cpus,
			    f->cfg.memory,
			    patch && f->smt,
			    patch && f->track_dirty_pages,
			    patch ? (unsigned)f->huge_pages : 0,
			    NULL};
	int given = machine_read(c, o, &m, patch);

	if (given < 0)
		return given;
	if (patch && given == 0)
		return fcj_fail(c, "empty PATCH request: give at least one field");
	if (machine_check(c, &m))
		return -EINVAL;
	if (fc_machine_balloon_check(f, m.memory >> 20, m.huge != FC_HUGE_NONE))
		return fcj_fail(c, "%s", fc_machine_balloon_check(f, m.memory >> 20, m.huge != FC_HUGE_NONE));
	if (m.tmpl && set_static_template(f, m.tmpl))
		return -ENOMEM;
	f->cfg.cpus = (unsigned)m.cpus;
	f->cfg.memory = m.memory;
	f->smt = m.smt;
	f->track_dirty_pages = m.dirty;
	f->cfg.track_dirty = m.dirty;
	f->huge_pages = (enum fc_huge_pages)m.huge;
	/* "2M": hugetlbfs pages, as Firecracker (mem.c GMEM_HUGETLBFS); "Transparent": brisk's THP request. */
	f->cfg.hugetlbfs = m.huge == FC_HUGE_2M;
	f->cfg.hugepages = m.huge == FC_HUGE_TRANSPARENT;
	f->cfg.topology.sockets = m.smt && m.cpus > 1 ? 1 : 0;
	f->cfg.topology.cores = m.smt && m.cpus > 1 ? (unsigned)m.cpus / 2 : 0;
	f->cfg.topology.threads = m.smt && m.cpus > 1 ? 2 : 0;
	return 0;
}

/*
 * Firecracker v1.7.0 VsockDeviceConfig: guest_cid a required u32 with no
 * other check (0..2 are taken too, at PUT and at boot: Vsock::new stores
 * it), uds_path required, vsock_id deprecated and any string. brisk keeps
 * vsock_id for GET /vm/config when it fits (FC_ID_MAX printable bytes).
 */
int fc_apply_vsock(struct fc_vm *f, const struct fcj *c, json_object *o)
{
	static const char *const keys[] = {"guest_cid", "uds_path", "vsock_id", NULL};
	const char *uds = NULL, *id = NULL;
	uint64_t cid = 0;
	int r;

	if (fcj_keys(c, o, keys) || (r = fcj_uint(c, o, "guest_cid", 0, UINT32_MAX, &cid)) < 0)
		return -EINVAL;
	if (r == 0)
		return fcj_fail(c, "guest_cid is required");
	if (fcj_req_str(c, o, "uds_path", VM_VSOCK_UDS_MAX, &uds) < 0)
		return -EINVAL;
	if (json_object_is_type(fcj_get(o, "vsock_id"), json_type_string))
		id = json_object_get_string(fcj_get(o, "vsock_id"));
	else if (fcj_get(o, "vsock_id"))
		return fcj_fail(c, "vsock_id: expected a string");
	f->cfg.vsock = (struct vm_vsock){.cid = (uint32_t)cid};
	snprintf(f->cfg.vsock.uds, sizeof(f->cfg.vsock.uds), "%s", uds);
	snprintf(f->vsock_id, sizeof(f->vsock_id), "%s", id && strlen(id) <= FC_ID_MAX && fcj_printable(id) ? id : "");
	return 0;
}

/*
 * PUT /entropy: Firecracker's EntropyDeviceConfig, its rate_limiter any RateLimiterConfig. The device is
 * always throttled all the same (docs/security.md case 12): without a bandwidth bucket (none given, or one
 * of size or refill_time 0) its bytes are held to VM_RNG_DEFAULT_RATE (Firecracker's would be unlimited).
 * cfg.rng_rate: the bucket's bytes per second (at least 1), what a snapshot keeps.
 */
int fc_apply_entropy(struct fc_vm *f, const struct fcj *c, json_object *o)
{
	static const char *const keys[] = {"rate_limiter", NULL};
	struct rl_config rl;

	if (fcj_keys(c, o, keys) || fc_rate_limiter(c, o, "rate_limiter", &rl, NULL))
		return -EINVAL;
	if (!rl_bucket_on(&rl.bw))
		rl.bw = (struct rl_bucket_cfg){0};
	if (!rl_bucket_on(&rl.ops))
		rl.ops = (struct rl_bucket_cfg){0};
	f->cfg.rng_rl = rl;
	if (rl.bw.size) {
		unsigned __int128 rate = (unsigned __int128)rl.bw.size * 1000 / rl.bw.refill_ms;

		f->cfg.rng_rate = rate > UINT64_MAX ? UINT64_MAX : rate ? (uint64_t)rate : 1;
	} else {
		f->cfg.rng_rate = VM_RNG_DEFAULT_RATE;
	}
	f->rng_size = rl.bw.size;
	f->rng_refill_ms = rl.bw.refill_ms;
	return 0;
}

/* The logger's string members, copied; NULL where not given. */
static int logger_strings(const struct fcj *c, json_object *o, char **path, char **module)
{
	const char *p = NULL, *m = NULL;
	bool oom = false;

	if (fcj_str(c, o, "log_path", 1, PATH_MAX_BYTES, &p) < 0 || fcj_str(c, o, "module", 1, MODULE_MAX, &m) < 0)
		return -EINVAL;
	*path = dup_opt(p, &oom);
	*module = dup_opt(m, &oom);
	if (oom) {
		free(*path);
		free(*module);
		return -ENOMEM;
	}
	return 0;
}

/* Firecracker's LOGGER.update on a copy: *out is `cur` with the given fields changed (its strings its own). */
static int logger_update(const struct fc_logger *cur, const struct fcj *c, json_object *o, struct fc_logger *out,
			 bool *new_path)
{
	static const char *const keys[] = {"log_path", "level", "show_level", "show_log_origin", "module", NULL};
	struct fc_logger l = *cur;
	unsigned level = l.level;
	char *path, *module;
	bool oom = false;
	int ret;

	if (fcj_keys(c, o, keys) || fcj_enum(c, o, "level", fc_level_names, true, &level) < 0 ||
	    fcj_bool(c, o, "show_level", &l.show_level) < 0 ||
	    fcj_bool(c, o, "show_log_origin", &l.show_log_origin) < 0)
		return -EINVAL;
	ret = logger_strings(c, o, &path, &module);
	if (ret)
		return ret;
	*new_path = path != NULL;
	l.log_path = path ? path : dup_opt(cur->log_path, &oom);
	l.module = module ? module : dup_opt(cur->module, &oom);
	if (oom) {
		fc_logger_free(&l);
		return -ENOMEM;
	}
	l.level = level == 6 ? FC_LOG_WARNING : (enum fc_log_level)level;
	l.configured = true;
	*out = l;
	return 0;
}

int fc_apply_logger(struct fc_vm *f, const struct fcj *c, json_object *o)
{
	struct fc_logger l;
	bool new_path;
	int ret = logger_update(&f->logger, c, o, &l, &new_path);

	if (ret)
		return ret;
	fc_logger_free(&f->logger);
	f->logger = l;
	return 0;
}

/* PUT /metrics's body into *out (its path its own). */
static int metrics_parse(const struct fcj *c, json_object *o, struct fc_metrics *out)
{
	static const char *const keys[] = {"metrics_path", "emit_id", "properties", NULL};
	const char *path = NULL;
	bool emit_id = false;
	char *p;

	if (fcj_keys(c, o, keys) || fcj_req_str(c, o, "metrics_path", PATH_MAX_BYTES, &path) < 0 ||
	    fcj_bool(c, o, "emit_id", &emit_id) < 0 ||
	    fcj_absent(c, o, "properties", "brisk's metrics carry no operator-defined properties"))
		return -EINVAL;
	p = strdup(path);
	if (!p)
		return -ENOMEM;
	*out = (struct fc_metrics){.configured = true, .metrics_path = p, .emit_id = emit_id};
	return 0;
}

int fc_apply_metrics(struct fc_vm *f, const struct fcj *c, json_object *o)
{
	struct fc_metrics m;
	int ret = metrics_parse(c, o, &m);

	if (ret)
		return ret;
	fc_metrics_free(&f->metrics);
	f->metrics = m;
	return 0;
}

int fc_parse_logger(const struct fc_logger *cur, const char *text, size_t len, struct fc_logger *out, bool *new_path,
		    char *err, size_t errlen)
{
	const struct fcj c = {"logger", err, errlen};
	json_object *o;
	int ret = fcj_parse(&c, text, len, &o);

	if (!ret)
		ret = logger_update(cur, &c, o, out, new_path);
	json_object_put(o);
	return ret;
}

int fc_parse_metrics(const char *text, size_t len, struct fc_metrics *out, char *err, size_t errlen)
{
	const struct fcj c = {"metrics", err, errlen};
	json_object *o;
	int ret = fcj_parse(&c, text, len, &o);

	if (!ret)
		ret = metrics_parse(&c, o, out);
	json_object_put(o);
	return ret;
}

/* ---- the API bodies: parse, then apply ---------------------------------------------------------------- */

/* Which applier a body goes to. */
enum body_kind { B_BOOT, B_MACHINE_PUT, B_MACHINE_PATCH, B_VSOCK, B_ENTROPY, B_LOGGER, B_METRICS };

static int apply(struct fc_vm *f, const struct fcj *c, enum body_kind k, json_object *o)
{
	switch (k) {
	case B_BOOT:
		return fc_apply_boot_source(f, c, o);
	case B_MACHINE_PUT:
	case B_MACHINE_PATCH:
		return fc_apply_machine_config(f, c, o, k == B_MACHINE_PATCH);
	case B_VSOCK:
		return fc_apply_vsock(f, c, o);
	case B_ENTROPY:
		return fc_apply_entropy(f, c, o);
	case B_LOGGER:
		return fc_apply_logger(f, c, o);
	case B_METRICS:
		return fc_apply_metrics(f, c, o);
	}
	return -EINVAL;
}

static int body(struct fc_vm *f, const char *what, enum body_kind k, const char *text, size_t len, char *err,
		size_t errlen)
{
	const struct fcj c = {what, err, errlen};
	json_object *o;
	int ret = fcj_parse(&c, text, len, &o);

	if (!ret)
		ret = apply(f, &c, k, o);
	json_object_put(o);
	return ret;
}

int fc_put_boot_source(struct fc_vm *f, const char *text, size_t len, char *err, size_t errlen)
{
	return body(f, "boot-source", B_BOOT, text, len, err, errlen);
}

int fc_put_machine_config(struct fc_vm *f, const char *text, size_t len, char *err, size_t errlen)
{
	return body(f, "machine-config", B_MACHINE_PUT, text, len, err, errlen);
}

int fc_patch_machine_config(struct fc_vm *f, const char *text, size_t len, char *err, size_t errlen)
{
	return body(f, "machine-config", B_MACHINE_PATCH, text, len, err, errlen);
}

int fc_put_cpu_config(struct fc_vm *f, const char *text, size_t len, char *err, size_t errlen)
{
	struct cpuid_fc_template *t;
	int ret = cpuid_fc_parse("cpu-config", text, len, &t, err, errlen);

	if (ret)
		return ret;
	fc_set_custom_template(f, t);
	return 0;
}

void fc_set_custom_template(struct fc_vm *f, struct cpuid_fc_template *t)
{
	free(f->cpu_template);
	f->cfg.cpu_template = f->cpu_template = NULL;
	cpuid_fc_free(f->custom_template);
	f->cfg.fc_template = f->custom_template = t;
}

int fc_put_vsock(struct fc_vm *f, const char *text, size_t len, char *err, size_t errlen)
{
	return body(f, "vsock", B_VSOCK, text, len, err, errlen);
}

int fc_put_entropy(struct fc_vm *f, const char *text, size_t len, char *err, size_t errlen)
{
	return body(f, "entropy", B_ENTROPY, text, len, err, errlen);
}

int fc_put_logger(struct fc_vm *f, const char *text, size_t len, char *err, size_t errlen)
{
	return body(f, "logger", B_LOGGER, text, len, err, errlen);
}

int fc_put_metrics(struct fc_vm *f, const char *text, size_t len, char *err, size_t errlen)
{
	return body(f, "metrics", B_METRICS, text, len, err, errlen);
}
