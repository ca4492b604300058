/* snap_config.h - the VM configuration section of a snapshot (what a restore rebuilds). */
#ifndef BRISK_SNAP_CONFIG_H
#define BRISK_SNAP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/vm.h"

struct cpuid_fc_template;
struct snap_writer;
struct snap_reader;

/* Storage for the strings a loaded configuration points at, and what it recorded beside the options. */
struct snap_config_strings {
	char cpu_template[4096];
	/*
	 * cpuid_template_digest of the --cpu-template file the snapshot's VM booted with (0: none); a file
	 * written before the field existed has none (has_cpu_template_digest false): nothing to compare.
	 */
	uint64_t cpu_template_digest;
	bool has_cpu_template_digest;
	/* The Firecracker custom template the VM booted with (owned: cpuid_fc_free; cfg->fc_template), or NULL. */
	struct cpuid_fc_template *fc_template;
};

/*
 * Writes the SNAP_TAG_CONFIG section: vCPUs, topology, memory, template, devices (not the kernel, the serial),
 * then cfg->cpu_template_digest (u64), and last, only for a Firecracker custom template, its JSON text
 * (u32 length + bytes: cpuid_fc_to_json).
 */
int snap_config_save(const struct vm_config *cfg, struct snap_writer *w);
/*
 * Reads it back over `cfg` (which holds the defaults and the restore's own options, e.g. the serial),
 * validating every field as config_validate does for options; the template digest, when the file has it,
 * into s. Returns 0 or -EINVAL with `err`.
 */
int snap_config_load(struct snap_reader *r, struct vm_config *cfg, struct snap_config_strings *s, char *err,
		     size_t errlen);

#endif
