/* config.c - defaults and validation of a VM configuration against brisk's and the host's limits. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "brisk/config.h"
#include "brisk/cpuid.h"
#include "brisk/layout.h"

void config_defaults(struct vm_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->cpus = 1;
	cfg->memory = VM_DEFAULT_MEMORY;
	cfg->serial = SERIAL_STDIO;
}

int parse_serial(const char *s, struct vm_config *cfg)
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

int parse_topology(const char *s, struct vm_config *cfg)
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
		if (k == 3 || v[k] || parse_uint(tok + strlen(keys[k]), 1, CONFIG_MAX_CPUS, &n))
			return -EINVAL;
		v[k] = (unsigned)n;
	}
	if (!v[0] && !v[1] && !v[2])
		return -EINVAL;
	for (unsigned k = 0; k < 3; k++)
		*fields[k] = v[k] ? v[k] : 1;
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
	/* The template file's syntax and structure; what needs KVM's tables is checked when the VM is built. */
	if (cpuid_template_check(cfg->cpu_template, err, errlen))
		return -EINVAL;
	return 0;
}
