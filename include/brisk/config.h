/* config.h - parsing and validating user-supplied values (sizes, counts) into struct vm_config. */
#ifndef BRISK_CONFIG_H
#define BRISK_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "vm.h"

/* brisk's own ceiling on vCPUs: xAPIC IDs and the MP table address 0..254. */
#define CONFIG_MAX_CPUS 254

/*
 * Parses a size: a decimal number with an optional binary suffix K, M, G
 * or T (KiB, MiB, GiB, TiB; "k"/"KiB"/"kb" spellings accepted) or B for
 * bytes; a bare number means MiB, as QEMU's -m. Returns 0 or -EINVAL
 * (not a size) / -ERANGE (overflows 64 bits).
 */
__attribute__((warn_unused_result)) int config_parse_size(const char *s, uint64_t *out);

/* Parses a decimal unsigned integer in [min, max]. Returns 0, -EINVAL or -ERANGE. */
__attribute__((warn_unused_result)) int config_parse_uint(const char *s, unsigned long min, unsigned long max,
							  unsigned long *out);

/* Parses --serial: "stdio", "none" or "file:PATH". Returns 0 or -EINVAL. */
__attribute__((warn_unused_result)) int config_parse_serial(const char *s, struct vm_config *cfg);

/*
 * Parses --topology "sockets=S,cores=C,threads=T" (any order, each key at
 * most once, each 1..CONFIG_MAX_CPUS; a missing key means 1). Returns 0 or
 * -EINVAL. config_validate checks S*C*T == cpus.
 */
__attribute__((warn_unused_result)) int config_parse_topology(const char *s, struct vm_config *cfg);

/*
 * Parses one --disk "PATH[,ro][,id=NAME][,cache=none|writeback]" into the
 * next cfg->disk[]. Returns 0, -EINVAL (with what is wrong in err) or
 * -E2BIG (more than VM_MAX_DISKS).
 */
__attribute__((warn_unused_result)) int config_parse_disk(const char *s, struct vm_config *cfg, char *err,
							  size_t errlen);

/*
 * Parses one --net "tap=NAME[,mac=MAC]" or
 * "user[,net=CIDR][,hostfwd=[tcp|udp]:[HOSTADDR]:HOSTPORT-[GUESTADDR]:GUESTPORT]
 * ...[,mac=MAC]" into the next cfg->net[] (config_net.c). Returns 0, -EINVAL (with what is wrong in err) or
 * -E2BIG (more than VM_MAX_NETS).
 */
__attribute__((warn_unused_result)) int config_parse_net(const char *s, struct vm_config *cfg, char *err,
							 size_t errlen);

/*
 * The MAC of interface `index` (0-based, --net order): n->mac when given, else
 * a stable locally administered unicast address, 02 followed by five bytes of
 * an FNV-1a hash of the index and the backend ("tap:NAME" or "user"): the same
 * on every boot, different per interface (docs/devices.md, "virtio-net").
 */
void config_net_mac(const struct vm_net *n, unsigned index, uint8_t mac[6]);

/*
 * Parses a MAC "xx:xx:xx:xx:xx:xx" (six hex bytes, ':' between) that is a
 * unicast station address, not all zero (config_net.c; --net mac= and the
 * API's guest_mac). Returns 0, or -EINVAL with what is wrong in err.
 */
__attribute__((warn_unused_result)) int config_parse_mac(const char *s, uint8_t mac[6], char *err, size_t errlen);

/*
 * Parses --vsock "cid=N,uds=PATH" (any order, both required, each once; N in 3..0xfffffffe, PATH 1..
 * VM_VSOCK_UDS_MAX bytes) into cfg->vsock. Returns 0 or -EINVAL with what is wrong in err; a second
 * --vsock is -EINVAL too. config_validate checks that PATH's directory exists.
 */
__attribute__((warn_unused_result)) int config_parse_vsock(const char *s, struct vm_config *cfg, char *err,
							   size_t errlen);
/*
 * A restore's vsock device onto socket `uds` (a load's vsock_override, brisk restore --vsock-uds, a clone
 * request's): 0; -ENODEV when cfg has no vsock device; -EINVAL when uds is empty or longer than VM_VSOCK_UDS_MAX.
 * Each caller says it in its own words.
 */
__attribute__((warn_unused_result)) int config_move_vsock(struct vm_config *cfg, const char *uds);
/* config_validate's part for --vsock: PATH's directory exists. Returns 0 or -EINVAL with a message in err. */
__attribute__((warn_unused_result)) int config_vsock_check(const struct vm_config *cfg, char *err, size_t errlen);

/* Parses --rng[=RATE]: NULL = the default rate; RATE a size per second ("1M", "64K"). Returns 0 or -EINVAL. */
__attribute__((warn_unused_result)) int config_parse_rng(const char *s, struct vm_config *cfg);

/* Parses --acpi: "on" or "off". Returns 0 or -EINVAL. */
__attribute__((warn_unused_result)) int config_parse_acpi(const char *s, struct vm_config *cfg);
/*
 * brisk restore --working-set: "record=MS" (MS 1..WSET_RECORD_MAX_MS: record the pages the guest touches in its
 * first MS ms or until its boot marker), "wait" (prefetch a recorded file's pages before the vCPUs run rather than
 * while they run) or "off" (no prefetch from a recorded file). 0 or -EINVAL.
 */
__attribute__((warn_unused_result)) int config_parse_working_set(const char *s, struct vm_config *cfg);
/* --irqchip split|kernel. 0 or -EINVAL. */
__attribute__((warn_unused_result)) int config_parse_irqchip(const char *s, struct vm_config *cfg);

/* Parses --console: "serial" or "virtio". Returns 0 or -EINVAL. */
__attribute__((warn_unused_result)) int config_parse_console(const char *s, struct vm_config *cfg);

/* Defaults: 1 vCPU, VM_DEFAULT_MEMORY, serial on stdio, the built-in guest. Owns nothing yet. */
void config_defaults(struct vm_config *cfg);
/*
 * d->path = a heap copy of the n bytes at s (the old one freed). 0; -EINVAL when n is 0, the copy would not
 * fit VM_DISK_PATH_MAX or s has a NUL within n (d unchanged); -ENOMEM.
 */
__attribute__((warn_unused_result)) int config_disk_path(struct vm_disk *d, const char *s, size_t n);
/* *dst = *src with copies of the disks' paths dst owns (dst's old ones are not freed). 0 or -ENOMEM (dst owns none). */
__attribute__((warn_unused_result)) int config_copy(struct vm_config *dst, const struct vm_config *src);
/* Frees what cfg owns (its disks' paths) and leaves it without disks. Safe to repeat. */
void config_release(struct vm_config *cfg);

/*
 * Checks cross-field and host limits: cpus in 1..max_cpus, the topology
 * (S*C*T == cpus, APIC IDs within xAPIC's 0..254), memory in
 * LAYOUT_MEM_MIN..host_mem and a multiple of 4 KiB, and a --cpu-template
 * file's syntax and structure (cpuid_template_check: reads the file, never
 * blocks on a FIFO, needs no KVM). Call it before /dev/kvm is opened.
 * Returns 0 or -EINVAL with a message naming the option in `err`.
 */
__attribute__((warn_unused_result)) int config_validate(const struct vm_config *cfg, unsigned max_cpus,
							uint64_t host_mem, char *err, size_t errlen);

/* Host memory ceiling for --memory: physical RAM plus swap (sysinfo). */
uint64_t config_host_memory(void);

#endif
