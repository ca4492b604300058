/* config.c - defaults and validation of a VM configuration against brisk's and the host's limits. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "brisk/config.h"
#include "brisk/cpuid.h"
#include "brisk/devkinds.h"
#include "brisk/layout.h"

void config_defaults(struct vm_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->cpus = 1;
	cfg->memory = VM_DEFAULT_MEMORY;
	cfg->serial = SERIAL_STDIO;
}

int config_disk_path(struct vm_disk *d, const char *s, size_t n)
{
	char *p;

	if (n == 0 || n >= VM_DISK_PATH_MAX || memchr(s, 0, n))
		return -EINVAL;
	p = strndup(s, n);
	if (!p)
		return -ENOMEM;
	free(d->path);
	d->path = p;
	return 0;
}

int config_copy(struct vm_config *dst, const struct vm_config *src)
{
	*dst = *src;
	for (unsigned i = 0; i < dst->nr_disks; i++) {
		dst->disk[i].path = src->disk[i].path ? strdup(src->disk[i].path) : NULL;
		if (src->disk[i].path && !dst->disk[i].path) {
			config_release(dst);
			return -ENOMEM;
		}
	}
	return 0;
}

void config_release(struct vm_config *cfg)
{
	for (unsigned i = 0; i < cfg->nr_disks; i++) {
		free(cfg->disk[i].path);
		cfg->disk[i].path = NULL;
	}
	cfg->nr_disks = 0;
}

int config_parse_serial(const char *s, struct vm_config *cfg)
{
	if (strcmp(s, "stdio") == 0) {
		cfg->serial = SERIAL_STDIO;
	} else if (strcmp(s, "none") == 0) {
		cfg->serial = SERIAL_NONE;
	} else if (strncmp(s, "file:", 5) == 0 && s[5] != '\0') {
		cfg->serial = SERIAL_FILE;
		cfg->serial_path = s + 5;
	} else {
		return -EINVAL;
	}
	return 0;
}

int config_parse_topology(const char *s, struct vm_config *cfg)
{
	static const char *const keys[] = {"sockets=", "cores=", "threads="};
	unsigned *fields[] = {&cfg->topology.sockets, &cfg->topology.cores, &cfg->topology.threads};
	unsigned v[3] = {0, 0, 0};
	char buf[128];
	char *save = NULL;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned k;
		unsigned long n;

		for (k = 0; k < 3; k++)
			if (strncmp(tok, keys[k], strlen(keys[k])) == 0)
				break;
		if (k == 3 || v[k] || config_parse_uint(tok + strlen(keys[k]), 1, CONFIG_MAX_CPUS, &n))
			return -EINVAL;
		v[k] = (unsigned)n;
	}
	if (!v[0] && !v[1] && !v[2])
		return -EINVAL;
	for (unsigned k = 0; k < 3; k++)
		*fields[k] = v[k] ? v[k] : 1;
	return 0;
}

/* One ",key[=value]" option of --disk. */
/* A rate: a bare number is per second as is, K/M/G (config_parse_size's suffixes) multiply. 0 or -EINVAL. */
static int parse_rate(const char *s, uint64_t *rate)
{
	if (*s && strspn(s, "0123456789") == strlen(s)) {
		unsigned long n;

		if (config_parse_uint(s, 1, ULONG_MAX, &n))
			return -EINVAL;
		*rate = n;
		return 0;
	}
	return config_parse_size(s, rate) || *rate == 0 ? -EINVAL : 0;
}

/* bw=RATE, iops=N: a bucket of one second's worth refilled in 1000 ms (docs/devices.md, "Rate limiting"). */
static int disk_limit(const char *opt, struct vm_disk *d, char *err, size_t errlen)
{
	bool bw = strncmp(opt, "bw=", 3) == 0;
	uint64_t rate;

	if (parse_rate(opt + (bw ? 3 : 5), &rate)) {
		snprintf(err, errlen, "%s: expected a rate per second such as 10M or 500", opt);
		return -EINVAL;
	}
	*(bw ? &d->rl.bw : &d->rl.ops) = (struct rl_bucket_cfg){rate, 0, 1000};
	return 0;
}

static int disk_option(const char *opt, struct vm_disk *d, char *err, size_t errlen)
{
	if (strncmp(opt, "bw=", 3) == 0 || strncmp(opt, "iops=", 5) == 0)
		return disk_limit(opt, d, err, errlen);
	if (strcmp(opt, "ro") == 0) {
		d->ro = true;
	} else if (strncmp(opt, "id=", 3) == 0) {
		size_t n = strlen(opt + 3);

		if (n == 0 || n > VM_DISK_ID_MAX) {
			snprintf(err, errlen, "id= must be 1..%d bytes (the virtio-blk ID field), got %zu",
				 VM_DISK_ID_MAX, n);
			return -EINVAL;
		}
		memcpy(d->id, opt + 3, n + 1);
	} else if (strcmp(opt, "cache=none") == 0) {
		d->cache = DISK_CACHE_NONE;
	} else if (strcmp(opt, "cache=writeback") == 0) {
		d->cache = DISK_CACHE_WRITEBACK;
	} else {
		snprintf(err, errlen,
			 "unknown option '%s' (expected ro, id=NAME, cache=none, cache=writeback, bw=RATE or iops=N)",
			 opt);
		return -EINVAL;
	}
	return 0;
}

/* The options after a --disk PATH: ",ro,id=NAME,...". 0 or -EINVAL with err. */
static int disk_options(const char *s, const char *comma, struct vm_disk *d, char *err, size_t errlen)
{
	char opt[64];

	while (comma) {
		const char *next = strchr(comma + 1, ',');
		size_t n = next ? (size_t)(next - comma - 1) : strlen(comma + 1);

		if (n == 0 || n >= sizeof(opt)) {
			snprintf(err, errlen, "empty or overlong option after '%.*s'", (int)(comma - s), s);
			return -EINVAL;
		}
		memcpy(opt, comma + 1, n);
		opt[n] = '\0';
		if (disk_option(opt, d, err, errlen))
			return -EINVAL;
		comma = next;
	}
	return 0;
}

int config_parse_disk(const char *s, struct vm_config *cfg, char *err, size_t errlen)
{
	struct vm_disk *d = &cfg->disk[cfg->nr_disks];
	const char *comma = strchr(s, ',');
	size_t plen = comma ? (size_t)(comma - s) : strlen(s);

	if (cfg->nr_disks == VM_MAX_DISKS) {
		snprintf(err, errlen, "at most %d disks", VM_MAX_DISKS);
		return -E2BIG;
	}
	if (plen == 0 || plen >= VM_DISK_PATH_MAX) {
		snprintf(err, errlen, plen ? "PATH longer than %d bytes" : "a disk needs a PATH", VM_DISK_PATH_MAX - 1);
		return -EINVAL;
	}
	*d = (struct vm_disk){.cache = DISK_CACHE_WRITEBACK};
	if (disk_options(s, comma, d, err, errlen))
		return -EINVAL;
	if (config_disk_path(d, s, plen)) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	cfg->nr_disks++;
	return 0;
}

int config_parse_rng(const char *s, struct vm_config *cfg)
{
	uint64_t rate;

	if (!s) {
		cfg->rng_rate = VM_RNG_DEFAULT_RATE;
		return 0;
	}
	/* A bare number is bytes per second here (config_parse_size's bare unit is MiB). */
	if (parse_rate(s, &rate))
		return -EINVAL;
	cfg->rng_rate = rate;
	return 0;
}

int config_parse_acpi(const char *s, struct vm_config *cfg)
{
	if (strcmp(s, "on") == 0)
		cfg->no_acpi = false;
	else if (strcmp(s, "off") == 0)
		cfg->no_acpi = true;
	else
		return -EINVAL;
	return 0;
}

int config_parse_working_set(const char *s, struct vm_config *cfg)
{
	char *end;
	unsigned long ms;

	if (strcmp(s, "off") == 0 || strcmp(s, "wait") == 0) {
		cfg->ws_no_prefetch = s[0] == 'o';
		cfg->ws_prefetch_wait = s[0] == 'w';
		return 0;
	}
	if (strncmp(s, "record=", 7) != 0 || s[7] < '0' || s[7] > '9')
		return -EINVAL;
	errno = 0;
	ms = strtoul(s + 7, &end, 10);
	if (errno || *end || ms == 0 || ms > WSET_RECORD_MAX_MS)
		return -EINVAL;
	cfg->ws_record_ms = (unsigned)ms;
	return 0;
}

int config_parse_irqchip(const char *s, struct vm_config *cfg)
{
	if (strcmp(s, "split") == 0)
		cfg->irqchip = IRQCHIP_SPLIT;
	else if (strcmp(s, "kernel") == 0)
		cfg->irqchip = IRQCHIP_KERNEL;
	else
		return -EINVAL;
	return 0;
}

int config_parse_console(const char *s, struct vm_config *cfg)
{
	if (strcmp(s, "serial") == 0)
		cfg->console = CONSOLE_SERIAL;
	else if (strcmp(s, "virtio") == 0)
		cfg->console = CONSOLE_VIRTIO;
	else
		return -EINVAL;
	return 0;
}

uint64_t config_host_memory(void)
{
	struct sysinfo si;

	if (sysinfo(&si) != 0)
		return 0;
	return ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
}

/* The APIC ID layout (cpuid_topology_init): a shape whose IDs pass 254 is refused here, before KVM. */
static int check_topology(const struct vm_config *cfg, char *err, size_t errlen)
{
	struct cpuid_topology t;
	char why[192];

	if (cpuid_topology_init(&t, cfg->cpus, cfg->topology.sockets, cfg->topology.cores, cfg->topology.threads, why,
				sizeof(why)) == 0)
		return 0;
	snprintf(err, errlen, "--%s", why);
	return -EINVAL;
}

/*
 * Firecracker's rules for huge_pages "2M" (v1.7.0 vmm_config/machine_config.rs, resources.rs): the memory a whole
 * number of 2 MiB pages, no balloon (its 4 KiB page reports cannot give a huge page back); and not with
 * transparent huge pages asked as well.
 */
static int check_hugetlbfs(const struct vm_config *cfg, char *err, size_t errlen)
{
	if (cfg->memory % (2ull << 20)) {
		snprintf(err, errlen, "--hugetlbfs needs --memory in whole 2 MiB pages, got %llu KiB",
			 (unsigned long long)(cfg->memory >> 10));
		return -EINVAL;
	}
	if (cfg->balloon.enabled) {
		snprintf(err, errlen,
			 "--hugetlbfs and --balloon are exclusive: huge pages support is incompatible with "
			 "memory ballooning");
		return -EINVAL;
	}
	if (cfg->hugepages) {
		snprintf(err, errlen, "--hugetlbfs and --hugepages are exclusive: hugetlbfs pages or transparent ones");
		return -EINVAL;
	}
	return 0;
}

int config_validate(const struct vm_config *cfg, unsigned max_cpus, uint64_t host_mem, char *err, size_t errlen)
{
	if (cfg->cpus < 1 || cfg->cpus > max_cpus) {
		snprintf(err, errlen, "--cpus %u is out of range: this host allows 1..%u", cfg->cpus, max_cpus);
		return -EINVAL;
	}
	if (cfg->topology.sockets) {
		unsigned long product =
		    (unsigned long)cfg->topology.sockets * cfg->topology.cores * cfg->topology.threads;

		if (product != cfg->cpus) {
			snprintf(err, errlen,
				 "--topology sockets=%u,cores=%u,threads=%u makes %lu vCPUs but --cpus is %u",
				 cfg->topology.sockets, cfg->topology.cores, cfg->topology.threads, product, cfg->cpus);
			return -EINVAL;
		}
	}
	if (check_topology(cfg, err, errlen))
		return -EINVAL;
	if (cfg->memory < LAYOUT_MEM_MIN) {
		snprintf(err, errlen, "--memory %llu MiB is too small: at least %llu MiB",
			 (unsigned long long)(cfg->memory >> 20), (unsigned long long)(LAYOUT_MEM_MIN >> 20));
		return -EINVAL;
	}
	if (host_mem && cfg->memory > host_mem) {
		snprintf(err, errlen, "--memory %llu MiB exceeds this host's RAM + swap (%llu MiB)",
			 (unsigned long long)(cfg->memory >> 20), (unsigned long long)(host_mem >> 20));
		return -EINVAL;
	}
	if (cfg->memory & 0xfff) {
		snprintf(err, errlen, "--memory %llu bytes is not a multiple of 4 KiB",
			 (unsigned long long)cfg->memory);
		return -EINVAL;
	}
	if (cfg->hugetlbfs && check_hugetlbfs(cfg, err, errlen))
		return -EINVAL;
	if (devkinds_check_windows(cfg, err, errlen))
		return -EINVAL;
	if (config_vsock_check(cfg, err, errlen))
		return -EINVAL;
	/* The template file's syntax and structure; what needs KVM's tables is checked when the VM is built. */
	if (cpuid_template_check(cfg->cpu_template, err, errlen))
		return -EINVAL;
	return 0;
}
