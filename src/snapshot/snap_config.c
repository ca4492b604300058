/*
 * snap_config.c - the VM's configuration in a snapshot (SNAP_TAG_CONFIG): what `brisk restore` rebuilds
 * before the saved state is loaded into it. Explicit fixed-width fields, strings as u32 length + bytes;
 * every value read back is validated as an option would be (config_validate), the file being untrusted.
 * Hand-serialised, not a field table (snap_fields.h): strings and lists whose length the file says.
 */
#define SNAP_CONFIG_VERSION 1u /* the section's (snapshot.h); a change to its layout bumps it */
/* The tags of the optional fields after the CPU template digest (get_template_digest). */
#define SNAP_OPT_FC_TEMPLATE 0x10u
#define SNAP_OPT_BALLOON     0x11u
#define SNAP_OPT_IRQCHIP     0x12u /* absent: KVM's in-kernel irqchip, the only one before brisk's I/O APIC */
#define SNAP_OPT_HUGETLBFS   0x13u /* RAM of 2 MiB hugetlbfs pages (huge_pages "2M"); absent: not */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/config.h"
#include "brisk/cpuid.h"
#include "brisk/json_strict.h"
#include "brisk/snap_config.h"
#include "brisk/snap_fields.h"
#include "brisk/snapshot.h"

static int put_str(struct snap_writer *w, const char *s)
{
	size_t len = s ? strlen(s) : 0;
	int ret = snap_put_u32(w, (uint32_t)len);

	return ret ? ret : snap_put(w, s ? s : "", len);
}

/* A string of at most cap-1 bytes into buf (NUL-terminated, no embedded NUL). */
static int get_str(struct snap_reader *r, char *buf, size_t cap)
{
	uint32_t len;

	if (snap_get_u32(r, &len) || len >= cap || snap_get(r, buf, len))
		return -EINVAL;
	buf[len] = 0;
	return strlen(buf) == len ? 0 : -EINVAL;
}

static int put_disk(struct snap_writer *w, const struct vm_disk *d)
{
	int ret = put_str(w, d->path);

	if (!ret)
		ret = snap_put_u8(w, d->ro);
	if (!ret)
		ret = put_str(w, d->id);
	return ret ? ret : snap_put_u8(w, (uint8_t)d->cache);
}

static int put_net(struct snap_writer *w, const struct vm_net *n)
{
	int ret = snap_put_u8(w, (uint8_t)n->kind) || put_str(w, n->tap) || snap_put(w, n->mac, 6) ||
		  snap_put_u8(w, n->has_mac) || snap_put_u32(w, n->user_net) || snap_put_u32(w, n->user_prefix) ||
		  snap_put_u32(w, n->nr_fwds);

	for (unsigned i = 0; !ret && i < n->nr_fwds; i++) {
		const struct vm_net_fwd *f = &n->fwd[i];

		ret = snap_put_u8(w, f->udp) || snap_put_u32(w, f->host_addr) || snap_put_u32(w, f->guest_addr) ||
		      snap_put_u16(w, f->host_port) || snap_put_u16(w, f->guest_port);
	}
	return ret ? -ENOMEM : 0;
}

/* After the digest, only for a VM with a Firecracker custom template: its JSON text (cpuid_fc_to_json). */
static int put_fc_template(struct snap_writer *w, const struct cpuid_fc_template *t)
{
	char *text;
	int ret;

	if (!t || cpuid_fc_name(t))
		return 0;
	text = cpuid_fc_to_json(t);
	if (!text)
		return -ENOMEM;
	ret = put_str(w, text);
	free(text);
	return ret;
}

int snap_config_save(const struct vm_config *cfg, struct snap_writer *w)
{
	int ret = snap_section_begin(w, SNAP_TAG_CONFIG, 0, "config") ?: snap_set_version(w, SNAP_CONFIG_VERSION);

	if (ret)
		return ret;
	ret = snap_put_u32(w, cfg->cpus) || snap_put_u64(w, cfg->memory) || snap_put_u32(w, cfg->topology.sockets) ||
	      snap_put_u32(w, cfg->topology.cores) || snap_put_u32(w, cfg->topology.threads) ||
	      put_str(w, cfg->cpu_template) || snap_put_u8(w, cfg->hugepages) || snap_put_u8(w, cfg->no_acpi) ||
	      snap_put_u8(w, (uint8_t)cfg->console) || snap_put_u64(w, cfg->rng_rate) ||
	      snap_put_u32(w, cfg->vsock.cid) || put_str(w, cfg->vsock.uds) || snap_put_u32(w, cfg->nr_disks);
	for (unsigned i = 0; !ret && i < cfg->nr_disks; i++)
		ret = put_disk(w, &cfg->disk[i]);
	if (!ret)
		ret = snap_put_u32(w, cfg->nr_nets);
	for (unsigned i = 0; !ret && i < cfg->nr_nets; i++)
		ret = put_net(w, &cfg->net[i]);
	/* Last, so that a file without it (written before it existed) still reads: see snap_config_load. */
	if (!ret)
		ret = snap_put_u64(w, cfg->cpu_template_digest);
	/*
	 * After it, tagged optional fields, each only when the VM has it (a configuration with neither is the
	 * same bytes as before they existed): a Firecracker custom CPU template's JSON, a balloon's configuration
	 * (the live target and interval are in the device's own section).
	 */
	if (!ret && cfg->fc_template && !cpuid_fc_name(cfg->fc_template))
		ret = snap_put_u8(w, SNAP_OPT_FC_TEMPLATE) || put_fc_template(w, cfg->fc_template);
	if (!ret && cfg->balloon.enabled)
		ret = snap_put_u8(w, SNAP_OPT_BALLOON) || snap_put_u32(w, cfg->balloon.amount_mib) ||
		      snap_put_u8(w, cfg->balloon.deflate_on_oom) || snap_put_u16(w, cfg->balloon.stats_interval_s);
	if (!ret && cfg->irqchip != IRQCHIP_KERNEL)
		ret = snap_put_u8(w, SNAP_OPT_IRQCHIP) || snap_put_u8(w, (uint8_t)cfg->irqchip);
	/* a snapshot of hugetlbfs RAM restores onto hugetlbfs RAM (Firecracker: no flipping page sizes on load) */
	if (!ret && cfg->hugetlbfs)
		ret = snap_put_u8(w, SNAP_OPT_HUGETLBFS);
	if (ret)
		return -ENOMEM;
	return snap_section_end(w);
}

static int get_bool(struct snap_reader *r, bool *b)
{
	uint8_t v;

	if (snap_get_u8(r, &v) || v > 1)
		return -EINVAL;
	*b = v;
	return 0;
}

/* A disk's path into d->path: its bytes, then config_disk_path's rule (1..VM_DISK_PATH_MAX-1 bytes, no NUL). */
static int get_path(struct snap_reader *r, struct vm_disk *d)
{
	uint32_t len;
	char *p;
	int ret;

	if (snap_get_u32(r, &len) || len >= VM_DISK_PATH_MAX || len > snap_remaining(r))
		return -EINVAL;
	p = malloc((size_t)len + 1);
	if (!p)
		return -ENOMEM;
	ret = snap_get(r, p, len) ? -EINVAL : config_disk_path(d, p, len);
	free(p);
	return ret;
}

static int get_disk(struct snap_reader *r, struct vm_disk *d)
{
	uint8_t cache;

	if (get_path(r, d) || get_bool(r, &d->ro) || get_str(r, d->id, sizeof(d->id)) || snap_get_u8(r, &cache) ||
	    cache > DISK_CACHE_NONE)
		return -EINVAL;
	d->cache = (enum disk_cache)cache;
	return 0;
}

static int get_net(struct snap_reader *r, struct vm_net *n)
{
	uint8_t kind;

	if (snap_get_u8(r, &kind) || kind > NET_USER || get_str(r, n->tap, sizeof(n->tap)) || snap_get(r, n->mac, 6) ||
	    get_bool(r, &n->has_mac) || snap_get_u32(r, &n->user_net) || snap_get_u32(r, &n->user_prefix) ||
	    n->user_prefix > 30 || snap_get_u32(r, &n->nr_fwds) || n->nr_fwds > VM_NET_MAX_FWDS)
		return -EINVAL;
	n->kind = (enum net_kind)kind;
	for (unsigned i = 0; i < n->nr_fwds; i++) {
		struct vm_net_fwd *f = &n->fwd[i];

		if (get_bool(r, &f->udp) || snap_get_u32(r, &f->host_addr) || snap_get_u32(r, &f->guest_addr) ||
		    snap_get_u16(r, &f->host_port) || snap_get_u16(r, &f->guest_port))
			return -EINVAL;
	}
	return 0;
}

static int get_devices(struct snap_reader *r, struct vm_config *cfg)
{
	uint32_t n;

	config_release(cfg); /* the snapshot's disks, not the base's */
	if (snap_get_u32(r, &n) || n > VM_MAX_DISKS)
		return -EINVAL;
	while (cfg->nr_disks < n) {
		struct vm_disk *d = &cfg->disk[cfg->nr_disks++]; /* counted first: config_release frees its path */

		*d = (struct vm_disk){0};
		if (get_disk(r, d))
			return -EINVAL;
	}
	if (snap_get_u32(r, &cfg->nr_nets) || cfg->nr_nets > VM_MAX_NETS)
		return -EINVAL;
	for (unsigned i = 0; i < cfg->nr_nets; i++)
		if (get_net(r, &cfg->net[i]))
			return -EINVAL;
	return 0;
}

/* A Firecracker custom template's text (at most FC_JSON_MAX bytes), parsed as PUT /cpu-config's body. */
static int get_fc_template(struct snap_reader *sec, struct snap_config_strings *s)
{
	char err[512];
	uint32_t len;
	char *text;
	int ret;

	if (snap_get_u32(sec, &len) || len > FC_JSON_MAX || len > snap_remaining(sec))
		return -EINVAL;
	text = malloc((size_t)len + 1);
	if (!text)
		return -ENOMEM;
	ret = snap_get(sec, text, len) ? -EINVAL : 0;
	text[len] = 0;
	if (!ret)
		ret = cpuid_fc_parse("snapshot cpu-config", text, len, &s->fc_template, err, sizeof(err));
	free(text);
	return ret ? -EINVAL : 0;
}

/* The balloon's configuration (vm.h struct vm_balloon), checked as --balloon is: pages in 32 bits. */
static int get_balloon(struct snap_reader *r, struct vm_balloon *b)
{
	b->enabled = true;
	if (snap_get_u32(r, &b->amount_mib) || get_bool(r, &b->deflate_on_oom) ||
	    snap_get_u16(r, &b->stats_interval_s) || b->amount_mib > UINT32_MAX / 256)
		return -EINVAL;
	return 0;
}

/* The irqchip tag's value: brisk's split irqchip (the only other kind than the absent tag's). */
static int get_irqchip(struct snap_reader *sec, struct vm_config *cfg, bool *seen)
{
	uint8_t v;

	if (*seen || snap_get_u8(sec, &v) || v != IRQCHIP_SPLIT)
		return -EINVAL;
	cfg->irqchip = IRQCHIP_SPLIT;
	*seen = true;
	return 0;
}

/*
 * The optional last fields: what the --cpu-template file asked for (snap_config.h); after it the tagged
 * ones, each at most once: a custom CPU template, a balloon's configuration, the irqchip, hugetlbfs RAM. An unknown
 * tag: malformed.
 */
static int get_template_digest(struct snap_reader *sec, struct snap_config_strings *s, struct vm_config *cfg)
{
	bool irqchip = false;

	cfg->irqchip = IRQCHIP_KERNEL;
	cfg->hugetlbfs = false;
	s->has_cpu_template_digest = snap_remaining(sec) != 0;
	s->cpu_template_digest = 0;
	s->fc_template = NULL;
	if (s->has_cpu_template_digest && snap_get_u64(sec, &s->cpu_template_digest))
		return -EINVAL;
	while (snap_remaining(sec)) {
		uint8_t tag;

		if (snap_get_u8(sec, &tag))
			return -EINVAL;
		if (tag == SNAP_OPT_FC_TEMPLATE && !s->fc_template && !get_fc_template(sec, s))
			continue;
		if (tag == SNAP_OPT_BALLOON && !cfg->balloon.enabled && !get_balloon(sec, &cfg->balloon))
			continue;
		if (tag == SNAP_OPT_IRQCHIP && !get_irqchip(sec, cfg, &irqchip))
			continue;
		if (tag == SNAP_OPT_HUGETLBFS && !cfg->hugetlbfs) {
			cfg->hugetlbfs = true;
			continue;
		}
		return -EINVAL;
	}
	return 0;
}

int snap_config_load(struct snap_reader *r, struct vm_config *cfg, struct snap_config_strings *s, char *err,
		     size_t errlen)
{
	struct snap_reader *sec;
	uint8_t console;
	bool no_acpi;

	if (snap_section(r, SNAP_TAG_CONFIG, 0, "config", &sec)) {
		snprintf(err, errlen, "the state file has no configuration section");
		return -EINVAL;
	}
	if (snap_version_check(sec, "config", SNAP_CONFIG_VERSION, err, errlen))
		return -EINVAL;
	if (snap_get_u32(sec, &cfg->cpus) || snap_get_u64(sec, &cfg->memory) ||
	    snap_get_u32(sec, &cfg->topology.sockets) || snap_get_u32(sec, &cfg->topology.cores) ||
	    snap_get_u32(sec, &cfg->topology.threads) || get_str(sec, s->cpu_template, sizeof(s->cpu_template)) ||
	    get_bool(sec, &cfg->hugepages) || get_bool(sec, &no_acpi) || snap_get_u8(sec, &console) ||
	    console > CONSOLE_VIRTIO || snap_get_u64(sec, &cfg->rng_rate) || snap_get_u32(sec, &cfg->vsock.cid) ||
	    get_str(sec, cfg->vsock.uds, sizeof(cfg->vsock.uds)) || get_devices(sec, cfg) ||
	    get_template_digest(sec, s, cfg)) {
		snprintf(err, errlen, "the state file's configuration section is malformed");
		return -EINVAL;
	}
	cfg->no_acpi = no_acpi;
	cfg->console = (enum console_mode)console;
	cfg->cpu_template = s->cpu_template[0] ? s->cpu_template : NULL;
	cfg->fc_template = s->fc_template;
	if (config_validate(cfg, CONFIG_MAX_CPUS, config_host_memory(), err, errlen))
		return -EINVAL;
	return 0;
}
