/* cpuid.h - the guest CPUID table and boot MSRs: KVM's facts fetched once per process, a per-VM template, a per-vCPU
 * patch.
 */
#ifndef BRISK_CPUID_H
#define BRISK_CPUID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct kvm_cpuid2;
struct kvm_cpuid_entry2;

/* ---- once per process: what KVM supports (cpuid.c) ----------------------------------- */

/*
 * Everything brisk asks KVM about CPUID and MSRs, fetched once per process
 * (seed 003: QEMU once called KVM_GET_SUPPORTED_CPUID 5,922 times for one
 * guest) and never changed afterwards: safe to read from any thread.
 */
struct cpuid_kvm {
	const struct kvm_cpuid2 *supported; /* KVM_GET_SUPPORTED_CPUID */
	const uint32_t *msrs;		    /* KVM_GET_MSR_INDEX_LIST */
	unsigned nr_msrs;
	bool tsc_deadline; /* KVM_CAP_TSC_DEADLINE_TIMER (not in the supported table, api.rst 4.46) */
};

/*
 * The process-wide facts, fetched on the first call with one
 * KVM_GET_SUPPORTED_CPUID (buffer large enough the first time, grown only on
 * E2BIG), one KVM_GET_MSR_INDEX_LIST (likewise) and one KVM_CHECK_EXTENSION.
 * Later calls return the cache whatever `kvm_fd` is. NULL on failure (logged,
 * nothing cached, so a later call retries).
 */
const struct cpuid_kvm *cpuid_kvm_get(int kvm_fd);

/*
 * Installs a recorded dump (the format cpuid_dump_write prints) as the
 * process cache instead of asking KVM: `brisk cpuid --supported-from` and the
 * unit tests. The file is opened with file_open_input (a FIFO or directory
 * is refused without blocking); at most 4096 CPUID entries, 16384 MSRs and
 * 255 characters a line, as from KVM. Returns 0, or -EINVAL / -errno of the
 * open / -ENOMEM with "--supported-from PATH[:LINE]: what is wrong" in `err`.
 */
__attribute__((warn_unused_result)) int cpuid_kvm_load(const char *path, char *err, size_t errlen);

/* Forgets the cache (tests only). */
void cpuid_kvm_reset(void);

/*
 * Every KVM ioctl of this module goes through this pointer, which is
 * kvm_ioctl (counted, brisk/kvm.h) unless a unit test replaces it.
 */
extern int (*cpuid_ioctl)(int fd, unsigned long req, const char *name, void *arg);

/* Writes the facts as a dump: "# comment", "cpuid LEAF SUB FLAGS EAX EBX ECX EDX", "msr INDEX", "cap NAME 0|1". */
void cpuid_dump_write(FILE *f, const struct cpuid_kvm *k);

/* ---- CPUID tables (cpuid.c) ------------------------------------------------------------ */

/* A zeroed table with room for `nent` entries (nent set). NULL when out of memory. Caller frees. */
struct kvm_cpuid2 *cpuid_table_alloc(unsigned nent);
/* Bytes of `t` (header + nent entries). */
uint64_t cpuid_table_size(const struct kvm_cpuid2 *t);
/* The entry for (leaf, subleaf), or NULL. Subleaf is ignored for entries without KVM_CPUID_FLAG_SIGNIFCANT_INDEX. */
struct kvm_cpuid_entry2 *cpuid_find(const struct kvm_cpuid2 *t, uint32_t leaf, uint32_t subleaf);
/* The host's own CPUID (the instruction at CPL 3), for the leaves in `like`. Caller frees. */
struct kvm_cpuid2 *cpuid_host_table(const struct kvm_cpuid2 *like);
/*
 * The host's own CPUID enumerated like KVM_GET_SUPPORTED_CPUID would
 * (all basic and extended leaves, subleaves of 4, 7, 0xB, 0xD, 0x1F,
 * 0x8000001D): how tests/unit/fixtures/host-*.txt were made. Caller frees.
 */
struct kvm_cpuid2 *cpuid_host_enumerate(void);

/* ---- topology (cpuid_topology.c) -------------------------------------------------------- */

/*
 * Sockets x cores x threads, and the APIC ID layout every table agrees on
 * (SDM vol. 3A 10.12.8 / AMD APM vol. 2 16.12 ApicIdSize): thread in the low
 * thread_bits, core above it, socket above that, each field ceil(log2(count))
 * bits wide. vCPU index i is (socket, core, thread) in that order, thread
 * fastest. Without --topology: 1 socket, N cores, 1 thread: APIC ID = index.
 */
struct cpuid_topology {
	unsigned sockets, cores, threads;
	unsigned thread_bits, core_bits; /* package shift = thread_bits + core_bits */
};

/* Largest APIC ID brisk hands out: xAPIC IDs 0..254, 255 is broadcast (SDM vol. 3A 10.6.2.1). */
#define CPUID_MAX_APIC_ID 254

/*
 * Fills `t` for `cpus` vCPUs; sockets = 0 means 1 socket, `cpus` cores, 1
 * thread. Returns 0, or -EINVAL with a message in `err` (product != cpus,
 * an APIC ID beyond CPUID_MAX_APIC_ID).
 */
__attribute__((warn_unused_result)) int cpuid_topology_init(struct cpuid_topology *t, unsigned cpus, unsigned sockets,
							    unsigned cores, unsigned threads, char *err, size_t errlen);
/*
 * The APIC ID (initial xAPIC ID = x2APIC ID) of vCPU `index`. The MP table
 * and anything else naming a vCPU by APIC ID must use this.
 */
uint32_t cpuid_apic_id(const struct cpuid_topology *t, unsigned index);

/* ---- per VM (cpuid_template.c) ----------------------------------------------------------- */

enum cpuid_vendor { CPUID_VENDOR_OTHER = 0, CPUID_VENDOR_INTEL, CPUID_VENDOR_AMD };

/* One boot MSR (msr.c). */
struct cpuid_msr {
	uint32_t index;
	uint64_t value;
};
#define CPUID_MAX_MSRS 32

/* What the VM asks for. */
struct cpuid_params {
	unsigned cpus;
	unsigned sockets, cores, threads; /* 0 = 1 socket, cpus cores, 1 thread */
	const char *cpu_template; /* "host" (NULL), "baseline", a Firecracker static name ("T2A"...) or a JSON file */
	bool pmu;		  /* keep the PMU leaf 0xA (default: hidden) */
	const struct cpuid_fc_template *fc_template; /* a Firecracker custom template (PUT /cpu-config); NULL: none */
	/* KVM's values of the MSRs a Firecracker template changes only in part (cpuid_fc_read_base); NULL: 0 */
	const struct cpuid_msr *msr_base;
	unsigned nr_msr_base;
};

/*
 * The per-VM result: the template every vCPU copies, and the boot MSRs. Built
 * once, read-only afterwards (the vCPU threads read it in parallel).
 */
struct cpuid_vm {
	struct kvm_cpuid2 *tmpl; /* owned; vCPU-independent fields final */
	struct cpuid_topology topo;
	enum cpuid_vendor vendor;
	unsigned nr_msrs;
	struct cpuid_msr msrs[CPUID_MAX_MSRS];
	uint64_t template_digest; /* cpuid_template_digest of a --cpu-template file; 0: host or baseline */
	/* cpuid_params' msr_base, during cpuid_vm_init only (NULL afterwards) */
	const struct cpuid_msr *msr_base;
	unsigned nr_msr_base;
};

/*
 * Builds the template from KVM's facts `k`, in this order: brisk's rules
 * (hypervisor bit, KVM leaves, TSC-deadline, PMU/VMX/SVM hidden), the CPU
 * template, then the derived leaves (XSAVE sizes, topology). Returns 0;
 * -EINVAL with a message naming the leaf/register/bit or MSR in `err` for a
 * bad template or topology (a usage error); -ENOMEM.
 */
__attribute__((warn_unused_result)) int cpuid_vm_init(struct cpuid_vm *vm, const struct cpuid_kvm *k,
						      const struct cpuid_params *p, char *err, size_t errlen);
void cpuid_vm_destroy(struct cpuid_vm *vm);

/* Vendor from leaf 0's signature. */
enum cpuid_vendor cpuid_vendor(const struct kvm_cpuid2 *t);

/* ---- per vCPU (cpuid_topology.c, msr.c) ----------------------------------------------------- */

/*
 * vCPU `index`'s table: a copy of the template with the per-vCPU fields
 * patched (leaf 1 EBX[31:24], 0xB/0x1F EDX, 0x8000001E). `out` has room for
 * vm->tmpl->nent entries. No ioctl.
 */
void cpuid_vcpu_table(const struct cpuid_vm *vm, unsigned index, struct kvm_cpuid2 *out);

/*
 * Configures one vCPU: one KVM_SET_CPUID2 (vCPU `index`'s table built in
 * `scratch`, sized like vm->tmpl) and one KVM_SET_MSRS (the boot MSRs).
 * Thread-safe for distinct vCPUs. Returns 0, or -errno with one line in `err`
 * naming the call, the vCPU and the values: the MSR and value KVM refused, or
 * the CPUID table's size (the fields KVM checks in a table it refused are
 * logged, the whole table at debug level).
 */
__attribute__((warn_unused_result)) int cpuid_vcpu_configure(int vcpu_fd, const struct cpuid_vm *vm, unsigned index,
							     struct kvm_cpuid2 *scratch, char *err, size_t errlen);

/* ---- templates (cpuid_template.c, cpuid_json.c) ---------------------------------------------- */

/*
 * A JSON CPU template file, loaded and checked without KVM: JSON syntax,
 * keys, types, number ranges, `value` within `mask`, array sizes, at most
 * CPUID_MAX_MSRS distinct MSRs. What depends on the host (a leaf KVM does
 * not report, a feature bit KVM lacks, an MSR KVM does not list) is checked
 * by cpuid_template_apply.
 */
struct cpuid_template;

/*
 * Loads template file `path` (opened with file_open_input: a FIFO or
 * directory is refused without blocking; at most 1 MiB). Returns 0 and
 * *out (free with cpuid_template_free), or -EINVAL / -errno of the open /
 * -ENOMEM with "--cpu-template PATH: what is wrong" in `err`. Needs no KVM.
 */
__attribute__((warn_unused_result)) int cpuid_template_load(const char *path, struct cpuid_template **out, char *err,
							    size_t errlen);
void cpuid_template_free(struct cpuid_template *t);

/* Bumped whenever what cpuid_template_digest covers changes (old digests then never match new ones). */
#define CPUID_TEMPLATE_DIGEST_VERSION 1u
/*
 * What a loaded template asks for, as a 64-bit FNV-1a digest, never 0: every
 * cpuid item (leaf, subleaf, register, mask, value) and every MSR (index,
 * value), in file order. Not the file's bytes: spacing, key order and the
 * spelling of numbers do not change it; any request does. A snapshot keeps
 * it, and a restore refuses a template file that now asks for something
 * else (docs/cli.md, "brisk restore").
 */
uint64_t cpuid_template_digest(const struct cpuid_template *t);

/* True for the built-in template names: NULL, "host", "baseline", Firecracker's static names (not files). */
bool cpuid_template_builtin(const char *name);

/*
 * Everything about --cpu-template `name` that can be checked before
 * /dev/kvm is opened: 0 for a built-in name, else cpuid_template_load's
 * verdict on the file (loaded and freed). config_validate calls it, so
 * `brisk run` and `brisk cpuid` refuse a bad template with exit 2 even on
 * a host without KVM (docs/cli.md: checkable errors come first).
 */
__attribute__((warn_unused_result)) int cpuid_template_check(const char *name, char *err, size_t errlen);

/*
 * Applies a loaded template to `t` (in each masked register, bits in `mask`
 * take `value`) and its MSRs to `vm`, refusing (-EINVAL, message naming
 * `path` and the item in `err`) a leaf/subleaf KVM does not report, a
 * feature bit `k` does not support, an MSR not in KVM's list.
 */
__attribute__((warn_unused_result)) int cpuid_template_apply(const char *path, const struct cpuid_template *tmpl,
							     const struct cpuid_kvm *k, struct kvm_cpuid2 *t,
							     struct cpuid_vm *vm, char *err, size_t errlen);

/*
 * Loads and applies a JSON template file to `t` and appends its MSRs to `vm`:
 * {"cpuid": [{"leaf": "0x7", "subleaf": 0, "register": "ebx", "mask": "0x20",
 * "value": "0x0"}], "msrs": [{"index": "0x1a0", "value": "0x1"}]}: in each
 * masked register, bits in `mask` take `value`. cpuid_template_load, then
 * cpuid_template_apply: refuses whatever either refuses.
 */
__attribute__((warn_unused_result)) int cpuid_json_apply(const char *path, const struct cpuid_kvm *k,
							 struct kvm_cpuid2 *t, struct cpuid_vm *vm, char *err,
							 size_t errlen);

/*
 * True when (leaf, subleaf, reg) is a feature-flag register, where a bit
 * means "the CPU has X" and a template may only clear bits KVM does not
 * report. `reg` is 0..3 for EAX..EDX.
 */
bool cpuid_is_feature_register(uint32_t leaf, uint32_t subleaf, unsigned reg);

/* ---- Firecracker's CPU templates (cpuid_fc.c, cpuid_fc_static.c) ----------------------------------------- */

/*
 * Firecracker v1.7.0's CustomCpuTemplate: cpuid_modifiers (leaf, subleaf, flags, register bitmaps),
 * msr_modifiers (addr, 64-bit bitmap) and kvm_capabilities. The static templates C3, T2, T2S, T2CL
 * (Intel) and T2A (AMD) are such templates with a name and a host check; docs/cpuid.md.
 */
struct cpuid_fc_template;

/* The static template called `name` (exactly "C3", "T2", "T2S", "T2CL" or "T2A"), or NULL. */
const struct cpuid_fc_template *cpuid_fc_static(const char *name);
/* A static template's name; NULL for a custom one (and for NULL). */
const char *cpuid_fc_name(const struct cpuid_fc_template *t);

/*
 * Parses `len` bytes of a custom template's JSON text as Firecracker does (serde's rules: unknown
 * top-level fields refused, unknown fields of the items ignored, leaf/subleaf/addr strings "0x.." or
 * "0b..", flags a u32 number, bitmaps of at most 32 (CPUID) or 64 (MSR) characters 0/1/x with '_'
 * skipped) with Firecracker's messages, "WHAT: " before them. At most 1024 cpuid_modifiers, 4096
 * register modifiers, 1024 msr_modifiers and 256 kvm_capabilities. Needs no KVM. Returns 0 and *out
 * (free with cpuid_fc_free), -EINVAL or -ENOMEM with the message in `err`.
 */
__attribute__((warn_unused_result)) int cpuid_fc_parse(const char *what, const char *text, size_t len,
						       struct cpuid_fc_template **out, char *err, size_t errlen);
/* Frees a parsed template; NULL and static templates are left alone. */
void cpuid_fc_free(struct cpuid_fc_template *t);
/*
 * The template as Firecracker serializes a CustomCpuTemplate (leaf/subleaf/addr "0x..", bitmaps "0b" and
 * 32 or 64 characters of 0/1/x): cpuid_fc_parse reads it back to the same template. Malloc'd; NULL when
 * out of memory. A snapshot keeps a custom template so.
 */
char *cpuid_fc_to_json(const struct cpuid_fc_template *t);
/* A copy of custom template `t` the caller owns (cpuid_fc_free); NULL and a static template are returned as
 * they are. Returns 0 or -ENOMEM. */
__attribute__((warn_unused_result)) int cpuid_fc_dup(const struct cpuid_fc_template *t, struct cpuid_fc_template **out);

/*
 * Applies `t` to table `tab` and to vm->msrs as Firecracker's CpuConfiguration::apply_template:
 * a static template is refused on a host whose vendor (from KVM's leaf 0) it was not made for, T2CL
 * below Cascade Lake; each (leaf, subleaf) must be in `tab` exactly, and takes the template's flags
 * and, in each register, (value & ~filter) | bits; each MSR must be in KVM's list and starts from
 * brisk's boot value, else vm->msr_base's (KVM's), else 0. Returns 0 or -EINVAL with Firecracker's message.
 */
__attribute__((warn_unused_result)) int cpuid_fc_apply(const struct cpuid_fc_template *t, const struct cpuid_kvm *k,
						       struct kvm_cpuid2 *tab, struct cpuid_vm *vm, char *err,
						       size_t errlen);
/*
 * The starting values Firecracker would read from vCPU 0 for the MSRs `t` (NULL: none) changes only in
 * part: one KVM_GET_MSRS on the system fd `kvm_fd` per such MSR (feature MSRs, api.rst 4.18; a fresh
 * vCPU's IA32_ARCH_CAPABILITIES is KVM's feature value). MSRs KVM does not read there are left out (they
 * start from 0). Returns how many were put in out[0..max).
 */
unsigned cpuid_fc_read_base(const struct cpuid_fc_template *t, int kvm_fd, struct cpuid_msr *out, unsigned max);

/*
 * The template's kvm_capabilities: each "N" must be reported by KVM_CHECK_EXTENSION on `kvm_fd`
 * ("Missing KVM capabilities: N" in hex, as Firecracker); "!N" removes nothing (brisk's own
 * requirements are fixed). NULL: 0.
 */
__attribute__((warn_unused_result)) int cpuid_fc_check_caps(const struct cpuid_fc_template *t, int kvm_fd, char *err,
							    size_t errlen);

/* ---- boot MSRs (msr.c) ------------------------------------------------------------------------- */

/* Appends brisk's boot MSR set (those in KVM's index list) to vm->msrs. */
void cpuid_msrs_default(struct cpuid_vm *vm, const struct cpuid_kvm *k);
/* Sets or replaces MSR `index` in vm->msrs. Returns 0 or -ENOSPC. */
int cpuid_msr_set(struct cpuid_vm *vm, uint32_t index, uint64_t value);
/* True when `index` is in KVM's MSR index list. */
bool cpuid_kvm_has_msr(const struct cpuid_kvm *k, uint32_t index);

#endif
