/* kvm_state.c - a vCPU's and the VM's in-kernel KVM state to and from snapshot sections (brisk/kvm_state.h). */
#include <errno.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/cpuid.h"
#include "brisk/kvm.h"
#include "brisk/kvm_state.h"
#include "brisk/snap_fields.h"
#include "brisk/snapshot.h"

/*
 * vCPU section body, in this order (the order of the KVM_GET_* calls on save):
 *   u32 mp_state                KVM_GET_MP_STATE first: it runs kvm_apic_accept_events(), which may
 *                               change vCPU and LAPIC state the later reads must see (Firecracker's
 *                               save_state, QEMU's kvm_arch_get_registers)
 *   blob regs                   struct kvm_regs (api.rst 4.11)
 *   blob sregs                  struct kvm_sregs (4.13), which holds the APIC base
 *   blob xsave                  KVM_GET_XSAVE2 / KVM_GET_XSAVE (4.134 / 4.42); 0 bytes without KVM_CAP_XSAVE
 *   blob fpu                    struct kvm_fpu, only when xsave is absent (else 0 bytes)
 *   blob xcrs                   struct kvm_xcrs (4.44); 0 bytes without KVM_CAP_XCRS
 *   blob debugregs              struct kvm_debugregs (4.33); 0 bytes without KVM_CAP_DEBUGREGS
 *   blob lapic                  struct kvm_lapic_state (4.57)
 *   u32 n, n x (u32 index, u64 value)   MSRs (4.18), the KVM_GET_MSR_INDEX_LIST ones KVM_GET_MSRS reads
 *   blob events                 struct kvm_vcpu_events (4.31); 0 bytes without KVM_CAP_VCPU_EVENTS.
 *                               Last: the other GET ioctls may change what it reports.
 *   u32 n, n x 7 u32            CPUID (KVM_GET_CPUID2): function, index, flags, eax, ebx, ecx, edx
 *   u32 tsc_khz                 KVM_GET_TSC_KHZ (4.56); 0 when KVM cannot tell (no capability, unstable TSC)
 * A blob is a u32 length and that many bytes: restore checks each length against this host's size.
 *
 * VM section body (version 3; version 2 had no clock flags, realtime or host TSC; version 1 no u32 chips either:
 * its chips were always there):
 *   u32 chips                   1: KVM's in-kernel irqchip and PIT (--irqchip kernel); 0: a split irqchip, whose
 *                               I/O APIC is a device of brisk's with its own section, and no PIT
 *   blob irqchip x3             (chips 1 only) struct kvm_irqchip for KVM_IRQCHIP_PIC_MASTER, _PIC_SLAVE, _IOAPIC
 *                               (4.26)
 *   blob pit                    struct kvm_pit_state2 (4.72); 0 bytes without KVM_CAP_PIT_STATE2 or a PIT
 *   u32 has_clock, u64 clock    KVM_GET_CLOCK's value (4.29); has_clock 0 without KVM_CAP_ADJUST_CLOCK
 *   u32 clock_flags, u64 realtime, u64 host_tsc
 *                               the rest of KVM_GET_CLOCK's answer (Linux 5.16+): KVM_CLOCK_REALTIME when `realtime`
 *                               is the host's wall clock (ns) at `clock`, which a restore with clock_realtime needs
 */

/* KVM refuses KVM_GET_MSRS / KVM_SET_MSRS with nmsrs >= MAX_IO_MSRS (256, arch/x86/kvm/x86.c msr_io). */
#define MSR_CHUNK 255u

/* SDM vol. 4 table 2-2. */
#define MSR_IA32_TSC	      0x10u
#define MSR_IA32_TSC_DEADLINE 0x6e0u

#define KVM_STATE_MAX_XSAVE (1u << 20) /* far above any XSAVE area (AMX: ~11 KiB) */

/* TSC frequencies within 250 ppm are the same clock calibrated twice (Firecracker, after QEMU). */
#define TSC_KHZ_TOLERANCE_PPM 250u

struct msr_chunk {
	struct kvm_msrs hdr;
	struct kvm_msr_entry e[MSR_CHUNK];
};

/* What KVM offers, fetched once per process (x86_state_init), then read-only. */
static struct {
	bool caps_done;
	bool xsave, xsave2, xcrs, debugregs, events, tsc_khz, adjust_clock, pit_state2;
	unsigned xsave_size;
	const uint32_t *listed; /* KVM_GET_MSR_INDEX_LIST (cpuid_kvm_get's cache) */
	unsigned nr_listed;
	uint32_t *msrs; /* the listed MSRs KVM_GET_MSRS can read: probed once, on the first save */
	unsigned nr_msrs;
	bool msrs_probed;
} kst;
static pthread_mutex_t kst_lock = PTHREAD_MUTEX_INITIALIZER;

static int ioctl_err(const char *what, char *err, size_t errlen)
{
	int e = errno ? errno : EIO;

	snprintf(err, errlen, "%s failed: %s", what, strerror(e));
	return -e;
}

static bool cap(int vm_fd, long c)
{
	return KVM_IOCTL(vm_fd, KVM_CHECK_EXTENSION, c) > 0;
}

static void fetch_caps(int vm_fd)
{
	int x2 = KVM_IOCTL(vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);

	kst.xsave = cap(vm_fd, KVM_CAP_XSAVE);
	/* KVM_CAP_XSAVE2 on the VM fd is the buffer size, at least 4096 (api.rst 4.134). */
	kst.xsave2 = kst.xsave && x2 >= (int)sizeof(struct kvm_xsave);
	kst.xsave_size = kst.xsave2 ? (unsigned)x2 : kst.xsave ? (unsigned)sizeof(struct kvm_xsave) : 0;
	kst.xcrs = cap(vm_fd, KVM_CAP_XCRS);
	kst.debugregs = cap(vm_fd, KVM_CAP_DEBUGREGS);
	kst.events = cap(vm_fd, KVM_CAP_VCPU_EVENTS);
	kst.tsc_khz = cap(vm_fd, KVM_CAP_GET_TSC_KHZ);
	kst.adjust_clock = cap(vm_fd, KVM_CAP_ADJUST_CLOCK);
	kst.pit_state2 = cap(vm_fd, KVM_CAP_PIT_STATE2);
	kst.caps_done = true;
}

int x86_state_init(int kvm_fd, int vm_fd, char *err, size_t errlen)
{
	const struct cpuid_kvm *k;
	int ret = 0;

	pthread_mutex_lock(&kst_lock);
	if (!kst.listed) {
		k = cpuid_kvm_get(kvm_fd);
		if (k) {
			kst.listed = k->msrs;
			kst.nr_listed = k->nr_msrs;
		} else {
			snprintf(err, errlen, "KVM's MSR index list is not available (KVM_GET_MSR_INDEX_LIST failed)");
			ret = -EIO;
		}
	}
	if (!ret && !kst.caps_done)
		fetch_caps(vm_fd);
	pthread_mutex_unlock(&kst_lock);
	return ret;
}

void x86_state_reset(void)
{
	pthread_mutex_lock(&kst_lock);
	free(kst.msrs);
	memset(&kst, 0, sizeof(kst));
	pthread_mutex_unlock(&kst_lock);
}

static int need_init(char *err, size_t errlen)
{
	bool ok;

	pthread_mutex_lock(&kst_lock);
	ok = kst.caps_done && kst.listed;
	pthread_mutex_unlock(&kst_lock);
	if (!ok)
		snprintf(err, errlen, "x86_state_init has not run (save or restore the VM section first)");
	return ok ? 0 : -EINVAL;
}

/* ---- section fields ------------------------------------------------------------------------------------ */

/*
 * The sections' versions (snapshot.h): a change to what a section holds bumps its version, and the
 * restore keeps reading the older ones. Both are hand-serialised (blobs of KVM's structs, lists whose
 * length KVM decides), not field tables.
 */
#define KVM_VM_SNAP_VERSION   3u
#define KVM_VCPU_SNAP_VERSION 1u

/* A section of a version this brisk reads: 0, or -EINVAL with `err` naming it. */
static int check_version(const struct snap_reader *sec, const char *part, uint32_t newest, char *err, size_t errlen)
{
	return snap_version_check(sec, part, newest, err, errlen) ? -EINVAL : 0;
}

static int put_blob(struct snap_writer *w, const void *p, size_t len)
{
	int ret = snap_put_u32(w, (uint32_t)len);

	return ret ? ret : snap_put(w, p, len);
}

/*
 * Reads a blob that must be `want` bytes, or 0 bytes when `optional` (then *present is false and `p`
 * untouched). A file from a host with other sizes is refused, naming the field and both sizes.
 */
static int get_blob(struct snap_reader *sec, const char *what, void *p, size_t want, bool optional, bool *present,
		    char *err, size_t errlen)
{
	uint32_t len;

	if (snap_get_u32(sec, &len))
		goto truncated;
	*present = len != 0;
	if (len == 0 && optional)
		return 0;
	if (len != want) {
		snprintf(err, errlen, "snapshot %s is %u bytes, this host's KVM uses %zu", what, len, want);
		return -EINVAL;
	}
	if (snap_get(sec, p, len))
		goto truncated;
	return 0;
truncated:
	snprintf(err, errlen, "truncated vCPU/VM section (reading %s)", what);
	return -EINVAL;
}

/* ---- MSRs -------------------------------------------------------------------------------------------- */

/*
 * The listed MSRs KVM_GET_MSRS can read on this vCPU. KVM_GET_MSRS stops at the first MSR it cannot
 * read and returns how many it read (api.rst 4.18), so each refusal costs one more call: done once
 * per process, on the first save. MSR_IA32_TSC_DEADLINE is moved last (see restore_msrs).
 */
static int probe_msrs(int vcpu_fd, char *err, size_t errlen)
{
	struct msr_chunk c;
	uint32_t *ok = malloc(((size_t)kst.nr_listed + 1) * sizeof(*ok));
	unsigned n = 0, i = 0;
	bool deadline = false;

	if (!ok)
		return snprintf(err, errlen, "out of memory for the MSR list"), -ENOMEM;
	while (i < kst.nr_listed) {
		unsigned cnt = kst.nr_listed - i < MSR_CHUNK ? kst.nr_listed - i : MSR_CHUNK;
		int got;

		memset(&c, 0, sizeof(c));
		c.hdr.nmsrs = cnt;
		for (unsigned j = 0; j < cnt; j++)
			c.e[j].index = kst.listed[i + j];
		got = KVM_IOCTL(vcpu_fd, KVM_GET_MSRS, &c);
		if (got < 0) {
			free(ok);
			return ioctl_err("KVM_GET_MSRS (probing KVM's MSR list)", err, errlen);
		}
		for (unsigned j = 0; j < (unsigned)got && j < cnt; j++) {
			if (kst.listed[i + j] == MSR_IA32_TSC_DEADLINE)
				deadline = true;
			else
				ok[n++] = kst.listed[i + j];
		}
		i += (unsigned)got < cnt ? (unsigned)got + 1 : cnt; /* skip the one it refused */
	}
	if (deadline)
		ok[n++] = MSR_IA32_TSC_DEADLINE;
	kst.msrs = ok;
	kst.nr_msrs = n;
	kst.msrs_probed = true;
	return 0;
}

static int readable_msrs(int vcpu_fd, char *err, size_t errlen)
{
	int ret = 0;

	pthread_mutex_lock(&kst_lock);
	if (!kst.msrs_probed)
		ret = probe_msrs(vcpu_fd, err, errlen);
	pthread_mutex_unlock(&kst_lock);
	return ret;
}

/*
 * A TSC deadline read as 0 while the timer was armed would leave the vCPU without its next timer
 * interrupt after restore; Firecracker (fix_zero_tsc_deadline_msr) replaces 0 by the TSC, which
 * fires the timer at once on resume. A spurious tick is harmless; KVM ignores the write when the
 * LAPIC timer is not in TSC-deadline mode.
 */
static void fix_zero_deadline(struct kvm_msr_entry *e, unsigned n, uint64_t tsc, bool have_tsc)
{
	for (unsigned i = 0; i < n && have_tsc; i++)
		if (e[i].index == MSR_IA32_TSC_DEADLINE && e[i].data == 0)
			e[i].data = tsc;
}

static int save_msrs(int vcpu_fd, struct snap_writer *w, char *err, size_t errlen)
{
	struct msr_chunk c;
	uint64_t tsc = 0;
	bool have_tsc = false;
	int ret = readable_msrs(vcpu_fd, err, errlen) ?: snap_put_u32(w, kst.nr_msrs);

	for (unsigned i = 0, cnt; !ret && i < kst.nr_msrs; i += cnt) {
		cnt = kst.nr_msrs - i < MSR_CHUNK ? kst.nr_msrs - i : MSR_CHUNK;
		memset(&c, 0, sizeof(c));
		c.hdr.nmsrs = cnt;
		for (unsigned j = 0; j < cnt; j++)
			c.e[j].index = kst.msrs[i + j];
		if (KVM_IOCTL(vcpu_fd, KVM_GET_MSRS, &c) != (int)cnt) {
			snprintf(err, errlen, "KVM_GET_MSRS read fewer MSRs than the probe found readable");
			return -EIO;
		}
		for (unsigned j = 0; j < cnt; j++)
			if (c.e[j].index == MSR_IA32_TSC)
				tsc = c.e[j].data, have_tsc = true;
		fix_zero_deadline(c.e, cnt, tsc, have_tsc); /* the deadline is last, after the TSC */
		for (unsigned j = 0; !ret && j < cnt; j++)
			ret = snap_put_u32(w, c.e[j].index) ?: snap_put_u64(w, c.e[j].data);
	}
	return ret;
}

static int set_chunk(int vcpu_fd, struct msr_chunk *c, char *err, size_t errlen)
{
	int n;

	if (c->hdr.nmsrs == 0)
		return 0;
	n = KVM_IOCTL(vcpu_fd, KVM_SET_MSRS, c);
	if (n < 0)
		return ioctl_err("KVM_SET_MSRS", err, errlen);
	if ((unsigned)n < c->hdr.nmsrs) {
		/* KVM stops at the first MSR it refuses (api.rst 4.19): that is entry n. */
		snprintf(err, errlen, "this host's KVM refused snapshot MSR 0x%x = 0x%llx", c->e[n].index,
			 (unsigned long long)c->e[n].data);
		return -EINVAL;
	}
	c->hdr.nmsrs = 0;
	return 0;
}

/* The saved MSRs, bounded and length-checked before anything is allocated. Caller frees *out. */
static int read_msrs(struct snap_reader *sec, struct kvm_msr_entry **out, uint32_t *nout, char *err, size_t errlen)
{
	struct kvm_msr_entry *e;
	uint32_t n;

	*out = NULL;
	if (snap_get_u32(sec, &n) || n > KVM_STATE_MAX_MSRS || (uint64_t)n * 12 > snap_remaining(sec)) {
		snprintf(err, errlen, "snapshot MSR count %u is over the limit of %u or past the section's end", n,
			 KVM_STATE_MAX_MSRS);
		return -EINVAL;
	}
	e = calloc(n ? n : 1, sizeof(*e));
	if (!e)
		return snprintf(err, errlen, "out of memory for %u MSRs", n), -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t v = 0;

		snap_get_u32(sec, &e[i].index); /* in bounds: checked above */
		snap_get_u64(sec, &v);
		e[i].data = v;
	}
	*out = e;
	*nout = n;
	return 0;
}

/*
 * KVM_SET_MSRS in chunks. MSR_IA32_TSC_DEADLINE goes last, after MSR_IA32_TSC, whatever order the
 * file has: KVM interprets the deadline against the guest TSC (QEMU writes it after the TSC too),
 * and after KVM_SET_LAPIC, which the caller did.
 */
static int restore_msrs(int vcpu_fd, const struct kvm_msr_entry *e, uint32_t n, char *err, size_t errlen)
{
	struct msr_chunk c = {0};
	int ret = 0;

	for (int pass = 0; pass < 2 && !ret; pass++) {
		for (uint32_t i = 0; i < n && !ret; i++) {
			if ((e[i].index == MSR_IA32_TSC_DEADLINE) != (pass == 1))
				continue;
			c.e[c.hdr.nmsrs++] = (struct kvm_msr_entry){.index = e[i].index, .data = e[i].data};
			if (c.hdr.nmsrs == MSR_CHUNK)
				ret = set_chunk(vcpu_fd, &c, err, errlen);
		}
		if (!ret)
			ret = set_chunk(vcpu_fd, &c, err, errlen);
	}
	return ret;
}

/* ---- CPUID ------------------------------------------------------------------------------------------- */

/* KVM_GET_CPUID2 (api.rst 4.87): E2BIG means a larger table. Caller frees. */
/*
 * Drops the entries KVM_GET_CPUID2 did not fill: kernels before 6.4 ("KVM: x86: Update number of entries
 * for KVM_GET_CPUID2 on success, not failure") leave nent as the caller's on success, so the zeroed tail
 * of the buffer reads as entries. No real entry is all zeros (leaf 0's EAX is the highest leaf).
 */
static void trim_unfilled(struct kvm_cpuid2 *t)
{
	static const struct kvm_cpuid_entry2 zero;
	unsigned n = 0;

	for (unsigned i = 0; i < t->nent; i++)
		if (memcmp(&t->entries[i], &zero, sizeof(zero)) != 0)
			t->entries[n++] = t->entries[i];
	t->nent = n;
}

static struct kvm_cpuid2 *get_cpuid(int vcpu_fd, char *err, size_t errlen)
{
	for (unsigned nent = 128; nent <= KVM_STATE_MAX_CPUID; nent *= 2) {
		struct kvm_cpuid2 *t = cpuid_table_alloc(nent);

		if (!t)
			return snprintf(err, errlen, "out of memory for the CPUID table"), NULL;
		if (KVM_IOCTL(vcpu_fd, KVM_GET_CPUID2, t) == 0) {
			trim_unfilled(t);
			return t;
		}
		free(t);
		if (errno != E2BIG)
			return ioctl_err("KVM_GET_CPUID2", err, errlen), NULL;
	}
	snprintf(err, errlen, "KVM_GET_CPUID2: more than %u entries", KVM_STATE_MAX_CPUID);
	return NULL;
}

static int save_cpuid(int vcpu_fd, struct snap_writer *w, char *err, size_t errlen)
{
	struct kvm_cpuid2 *t = get_cpuid(vcpu_fd, err, errlen);
	int ret;

	if (!t)
		return -EIO;
	ret = snap_put_u32(w, t->nent);
	for (unsigned i = 0; !ret && i < t->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &t->entries[i];
		const uint32_t f[7] = {e->function, e->index, e->flags, e->eax, e->ebx, e->ecx, e->edx};

		for (unsigned j = 0; !ret && j < 7; j++)
			ret = snap_put_u32(w, f[j]);
	}
	free(t);
	return ret;
}

/*
 * Bits KVM rewrites from the vCPU's run-time state (arch/x86/kvm/cpuid.c, kvm_update_cpuid_runtime):
 * leaf 1 ECX OSXSAVE (CR4.OSXSAVE) and MONITOR (IA32_MISC_ENABLE, quirk), EDX APIC (APIC base
 * enable), leaf 7.0 ECX OSPKE (CR4.PKE), leaf 0xD.0/0xD.1 EBX (XSAVE size for the XCR0/XSS in use).
 * A guest that ran differs from a fresh vCPU there; restoring sregs/XCRs/MSRs recomputes them.
 */
static uint32_t runtime_mask(uint32_t leaf, uint32_t sub, unsigned reg)
{
	if (leaf == 1 && reg == 2)
		return 1u << 27 | 1u << 3;
	if (leaf == 1 && reg == 3)
		return 1u << 9;
	if (leaf == 7 && sub == 0 && reg == 2)
		return 1u << 4;
	if (leaf == 0xd && sub <= 1 && reg == 1)
		return ~0u;
	return 0;
}

static const char *const reg_names[4] = {"eax", "ebx", "ecx", "edx"};

static int cpuid_entry_check(const struct kvm_cpuid2 *host, const uint32_t f[7], char *err, size_t errlen)
{
	const struct kvm_cpuid_entry2 *e = cpuid_find(host, f[0], f[1]);
	const uint32_t mine[4] = {e ? e->eax : 0, e ? e->ebx : 0, e ? e->ecx : 0, e ? e->edx : 0};

	if (!e) {
		snprintf(err, errlen,
			 "snapshot CPUID leaf 0x%x.%u is not in this vCPU's CPUID: the snapshot was taken on another "
			 "CPU or with another --cpu-template",
			 f[0], f[1]);
		return -EINVAL;
	}
	for (unsigned r = 0; r < 4; r++) {
		uint32_t keep = ~runtime_mask(f[0], f[1], r);

		if ((f[3 + r] & keep) != (mine[r] & keep)) {
			snprintf(err, errlen,
				 "snapshot CPUID leaf 0x%x.%u %s 0x%08x differs from this host's 0x%08x: the snapshot "
				 "was taken on another CPU or with another --cpu-template",
				 f[0], f[1], reg_names[r], f[3 + r], mine[r]);
			return -EINVAL;
		}
	}
	return 0;
}

/* The saved table, bounded and length-checked: n entries of 7 u32. Caller frees *out. */
static int read_cpuid(struct snap_reader *sec, uint32_t (**out)[7], uint32_t *nout, char *err, size_t errlen)
{
	uint32_t n, (*t)[7];

	*out = NULL;
	if (snap_get_u32(sec, &n) || n > KVM_STATE_MAX_CPUID || (uint64_t)n * 28 > snap_remaining(sec)) {
		snprintf(err, errlen, "snapshot CPUID entry count %u is over the limit of %u or past the section's end",
			 n, KVM_STATE_MAX_CPUID);
		return -EINVAL;
	}
	t = calloc(n ? n : 1, sizeof(*t));
	if (!t)
		return snprintf(err, errlen, "out of memory for %u CPUID entries", n), -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		for (unsigned j = 0; j < 7; j++)
			snap_get_u32(sec, &t[i][j]); /* in bounds: checked above */
	*out = t;
	*nout = n;
	return 0;
}

/* The saved table against the one brisk gave this vCPU: same entries, same values (runtime bits aside). */
static int check_cpuid(int vcpu_fd, const uint32_t (*saved)[7], uint32_t n, char *err, size_t errlen)
{
	struct kvm_cpuid2 *host = get_cpuid(vcpu_fd, err, errlen);
	int ret = 0;

	if (!host)
		return -EIO;
	for (uint32_t i = 0; !ret && i < n; i++)
		ret = cpuid_entry_check(host, saved[i], err, errlen);
	if (!ret && n != host->nent) {
		snprintf(err, errlen,
			 "snapshot CPUID has %u entries, this vCPU's %u: the snapshot was taken on another CPU or with "
			 "another --cpu-template",
			 n, host->nent);
		ret = -EINVAL;
	}
	free(host);
	return ret;
}

/* ---- TSC frequency ----------------------------------------------------------------------------------- */

static uint32_t get_tsc_khz(int vcpu_fd)
{
	int khz = kst.tsc_khz ? KVM_IOCTL(vcpu_fd, KVM_GET_TSC_KHZ, 0) : -1;

	return khz > 0 ? (uint32_t)khz : 0; /* -EIO: unstable host TSC, KVM cannot tell */
}

/* api.rst 4.55: a frequency off by more than the tolerance needs TSC scaling, or the guest's time drifts. */
static int match_tsc_khz(int vcpu_fd, uint32_t saved, char *err, size_t errlen)
{
	uint32_t mine = get_tsc_khz(vcpu_fd);
	uint64_t diff = mine > saved ? mine - saved : saved - mine;

	if (saved == 0 || diff * 1000000u <= (uint64_t)saved * TSC_KHZ_TOLERANCE_PPM)
		return 0;
	if (KVM_IOCTL(vcpu_fd, KVM_SET_TSC_KHZ, (unsigned long)saved) == 0)
		return 0;
	snprintf(err, errlen,
		 "snapshot TSC frequency %u kHz differs from this host's %u kHz and KVM_SET_TSC_KHZ failed (%s): "
		 "this host cannot scale the guest's TSC",
		 saved, mine, strerror(errno));
	return -EINVAL;
}

/* ---- vCPU save ----------------------------------------------------------------------------------------- */

struct vcpu_regs {
	struct kvm_mp_state mp;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_fpu fpu;
	struct kvm_xcrs xcrs;
	struct kvm_debugregs dbg;
	struct kvm_lapic_state lapic;
	struct kvm_vcpu_events events;
};

/* The fixed-size state before the MSRs, read in the documented order. */
static int get_fixed(int fd, struct vcpu_regs *s, struct kvm_xsave *xs, char *err, size_t errlen)
{
	if (KVM_IOCTL(fd, KVM_GET_MP_STATE, &s->mp))
		return ioctl_err("KVM_GET_MP_STATE", err, errlen);
	if (KVM_IOCTL(fd, KVM_GET_REGS, &s->regs))
		return ioctl_err("KVM_GET_REGS", err, errlen);
	if (KVM_IOCTL(fd, KVM_GET_SREGS, &s->sregs))
		return ioctl_err("KVM_GET_SREGS", err, errlen);
	if (kst.xsave2 && KVM_IOCTL(fd, KVM_GET_XSAVE2, xs))
		return ioctl_err("KVM_GET_XSAVE2", err, errlen);
	if (kst.xsave && !kst.xsave2 && KVM_IOCTL(fd, KVM_GET_XSAVE, xs))
		return ioctl_err("KVM_GET_XSAVE", err, errlen);
	if (!kst.xsave && KVM_IOCTL(fd, KVM_GET_FPU, &s->fpu))
		return ioctl_err("KVM_GET_FPU", err, errlen);
	if (kst.xcrs && KVM_IOCTL(fd, KVM_GET_XCRS, &s->xcrs))
		return ioctl_err("KVM_GET_XCRS", err, errlen);
	if (kst.debugregs && KVM_IOCTL(fd, KVM_GET_DEBUGREGS, &s->dbg))
		return ioctl_err("KVM_GET_DEBUGREGS", err, errlen);
	if (KVM_IOCTL(fd, KVM_GET_LAPIC, &s->lapic))
		return ioctl_err("KVM_GET_LAPIC", err, errlen);
	return 0;
}

static int put_fixed(struct snap_writer *w, const struct vcpu_regs *s, const struct kvm_xsave *xs)
{
	return snap_put_u32(w, s->mp.mp_state) ?: put_blob(w, &s->regs, sizeof(s->regs))
		?: put_blob(w, &s->sregs, sizeof(s->sregs)) ?: put_blob(w, xs, kst.xsave ? kst.xsave_size : 0)
		?: put_blob(w, &s->fpu, kst.xsave ? 0 : sizeof(s->fpu))
		?: put_blob(w, &s->xcrs, kst.xcrs ? sizeof(s->xcrs) : 0)
		?: put_blob(w, &s->dbg, kst.debugregs ? sizeof(s->dbg) : 0)
		?: put_blob(w, &s->lapic, sizeof(s->lapic));
}

int x86_vcpu_save(int vcpu_fd, struct snap_writer *w, char *err, size_t errlen)
{
	struct vcpu_regs s;
	struct kvm_xsave *xs;
	int ret = need_init(err, errlen) ?: snap_set_version(w, KVM_VCPU_SNAP_VERSION);

	if (ret)
		return ret;
	memset(&s, 0, sizeof(s));
	xs = calloc(1, kst.xsave_size ? kst.xsave_size : 1);
	if (!xs)
		return snprintf(err, errlen, "out of memory for the XSAVE area"), -ENOMEM;
	ret = get_fixed(vcpu_fd, &s, xs, err, errlen);
	if (!ret && (ret = put_fixed(w, &s, xs)))
		snprintf(err, errlen, "writing the vCPU state: %s", strerror(-ret));
	free(xs);
	if (!ret)
		ret = save_msrs(vcpu_fd, w, err, errlen);
	if (!ret && kst.events && KVM_IOCTL(vcpu_fd, KVM_GET_VCPU_EVENTS, &s.events))
		ret = ioctl_err("KVM_GET_VCPU_EVENTS", err, errlen);
	if (!ret)
		ret = put_blob(w, &s.events, kst.events ? sizeof(s.events) : 0);
	if (!ret)
		ret = save_cpuid(vcpu_fd, w, err, errlen);
	if (!ret)
		ret = snap_put_u32(w, get_tsc_khz(vcpu_fd));
	if (ret && !err[0])
		snprintf(err, errlen, "writing the vCPU state: %s", strerror(-ret));
	return ret;
}

/* ---- vCPU restore -------------------------------------------------------------------------------------- */

/* Which optional parts the file has. */
struct present {
	bool xsave, fpu, xcrs, dbg, events;
};

/* Reads the fixed-size fields before the MSRs, checking every length; nothing is set yet. */
static int read_fixed(struct snap_reader *sec, struct vcpu_regs *s, struct kvm_xsave *xs, struct present *p, char *err,
		      size_t errlen)
{
	bool must;

	if (snap_get_u32(sec, &s->mp.mp_state))
		return snprintf(err, errlen, "truncated vCPU section"), -EINVAL;
	return get_blob(sec, "kvm_regs", &s->regs, sizeof(s->regs), false, &must, err, errlen)
		?: get_blob(sec, "kvm_sregs", &s->sregs, sizeof(s->sregs), false, &must, err, errlen)
		?: get_blob(sec, "XSAVE area", xs, kst.xsave_size, true, &p->xsave, err, errlen)
		?: get_blob(sec, "kvm_fpu", &s->fpu, sizeof(s->fpu), true, &p->fpu, err, errlen)
		?: get_blob(sec, "kvm_xcrs", &s->xcrs, sizeof(s->xcrs), true, &p->xcrs, err, errlen)
		?: get_blob(sec, "kvm_debugregs", &s->dbg, sizeof(s->dbg), true, &p->dbg, err, errlen)
		?: get_blob(sec, "kvm_lapic_state", &s->lapic, sizeof(s->lapic), false, &must, err, errlen);
}

/* A part the file has and this host's KVM lacks cannot be restored; one it lacks stays at reset. */
static int check_present(const struct present *p, char *err, size_t errlen)
{
	const char *missing = p->xsave && !kst.xsave	 ? "XSAVE state (KVM_CAP_XSAVE)"
			      : p->xcrs && !kst.xcrs	 ? "XCRs (KVM_CAP_XCRS)"
			      : p->dbg && !kst.debugregs ? "debug registers (KVM_CAP_DEBUGREGS)"
							 : NULL;

	if (missing) {
		snprintf(err, errlen, "the snapshot has %s, which this host's KVM lacks", missing);
		return -EINVAL;
	}
	if (!p->xsave && !p->fpu) {
		snprintf(err, errlen, "the snapshot has no FPU state");
		return -EINVAL;
	}
	return 0;
}

/*
 * The order, after QEMU's kvm_arch_put_registers and Firecracker's restore_state:
 *   regs, then sregs (the APIC base MSR, CR0/CR4/EFER the FPU state depends on), XSAVE, XCRs;
 *   LAPIC after sregs, which set the APIC base it depends on;
 *   MSRs after the LAPIC: MSR_IA32_TSC_DEADLINE is only accepted with the LAPIC configured;
 *   mp_state after the LAPIC (KVM_SET_MP_STATE's SIPI_RECEIVED marks a pending LAPIC event);
 *   vcpu events after regs (KVM_SET_REGS clears pending exceptions that the events restore);
 *   debug registers last (independent).
 */
static int set_fixed(int fd, const struct vcpu_regs *s, struct kvm_xsave *xs, const struct present *p, char *err,
		     size_t errlen)
{
	if (KVM_IOCTL(fd, KVM_SET_REGS, &s->regs))
		return ioctl_err("KVM_SET_REGS", err, errlen);
	if (KVM_IOCTL(fd, KVM_SET_SREGS, &s->sregs))
		return ioctl_err("KVM_SET_SREGS", err, errlen);
	if (p->xsave && KVM_IOCTL(fd, KVM_SET_XSAVE, xs))
		return ioctl_err("KVM_SET_XSAVE", err, errlen);
	if (!p->xsave && KVM_IOCTL(fd, KVM_SET_FPU, &s->fpu))
		return ioctl_err("KVM_SET_FPU", err, errlen);
	if (p->xcrs && KVM_IOCTL(fd, KVM_SET_XCRS, &s->xcrs))
		return ioctl_err("KVM_SET_XCRS", err, errlen);
	if (KVM_IOCTL(fd, KVM_SET_LAPIC, &s->lapic))
		return ioctl_err("KVM_SET_LAPIC", err, errlen);
	return 0;
}

static int set_late(int fd, const struct vcpu_regs *s, const struct present *p, char *err, size_t errlen)
{
	if (KVM_IOCTL(fd, KVM_SET_MP_STATE, &s->mp))
		return ioctl_err("KVM_SET_MP_STATE", err, errlen);
	if (p->events && KVM_IOCTL(fd, KVM_SET_VCPU_EVENTS, &s->events))
		return ioctl_err("KVM_SET_VCPU_EVENTS", err, errlen);
	if (p->dbg && KVM_IOCTL(fd, KVM_SET_DEBUGREGS, &s->dbg))
		return ioctl_err("KVM_SET_DEBUGREGS", err, errlen);
	return 0;
}

/* Everything a vCPU section holds, read and validated before any of it is set. */
struct vcpu_file {
	struct vcpu_regs s;
	struct kvm_xsave *xs;
	struct present p;
	struct kvm_msr_entry *msrs;
	uint32_t nr_msrs;
	uint32_t (*cpuid)[7];
	uint32_t nr_cpuid;
	uint32_t tsc_khz;
};

static int read_tsc_khz(struct snap_reader *sec, uint32_t *khz, char *err, size_t errlen)
{
	if (snap_get_u32(sec, khz))
		return snprintf(err, errlen, "truncated vCPU section (TSC frequency)"), -EINVAL;
	return 0;
}

static int read_vcpu(struct snap_reader *sec, struct vcpu_file *f, char *err, size_t errlen)
{
	f->xs = calloc(1, kst.xsave_size ? kst.xsave_size : 1);
	if (!f->xs)
		return snprintf(err, errlen, "out of memory for the XSAVE area"), -ENOMEM;
	return read_fixed(sec, &f->s, f->xs, &f->p, err, errlen) ?: check_present(&f->p, err, errlen)
		?: read_msrs(sec, &f->msrs, &f->nr_msrs, err, errlen)
		?: get_blob(sec, "kvm_vcpu_events", &f->s.events, sizeof(f->s.events), true, &f->p.events, err, errlen)
		?: read_cpuid(sec, &f->cpuid, &f->nr_cpuid, err, errlen) ?: read_tsc_khz(sec, &f->tsc_khz, err, errlen);
}

int x86_vcpu_restore(int vcpu_fd, struct snap_reader *sec, char *err, size_t errlen)
{
	struct vcpu_file f;
	int ret = need_init(err, errlen) ?: check_version(sec, "vcpu", KVM_VCPU_SNAP_VERSION, err, errlen);

	if (ret)
		return ret;
	memset(&f, 0, sizeof(f));
	/* Checks first (CPUID, then TSC frequency before the TSC MSR is written), then the state. */
	ret = read_vcpu(sec, &f, err, errlen) ?: check_cpuid(vcpu_fd, (const uint32_t(*)[7])f.cpuid, f.nr_cpuid, err, errlen)
		?: match_tsc_khz(vcpu_fd, f.tsc_khz, err, errlen)
		?: set_fixed(vcpu_fd, &f.s, f.xs, &f.p, err, errlen)
		?: restore_msrs(vcpu_fd, f.msrs, f.nr_msrs, err, errlen)
		?: set_late(vcpu_fd, &f.s, &f.p, err, errlen);
	free(f.xs);
	free(f.msrs);
	free(f.cpuid);
	return ret;
}

/* ---- VM ------------------------------------------------------------------------------------------------ */

static const struct {
	uint32_t id;
	const char *name;
} chips[] = {
    {KVM_IRQCHIP_PIC_MASTER, "PIC master"},
    {KVM_IRQCHIP_PIC_SLAVE, "PIC slave"},
    {KVM_IRQCHIP_IOAPIC, "IOAPIC"},
};

static int save_chips(int vm_fd, struct snap_writer *w, char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(chips) / sizeof(chips[0]); i++) {
		struct kvm_irqchip c = {.chip_id = chips[i].id};
		int ret;

		if (KVM_IOCTL(vm_fd, KVM_GET_IRQCHIP, &c)) {
			int e = errno;

			snprintf(err, errlen, "KVM_GET_IRQCHIP (%s) failed: %s", chips[i].name, strerror(e));
			return -e;
		}
		ret = put_blob(w, &c, sizeof(c));
		if (ret)
			return ret;
	}
	return 0;
}

int x86_vm_save(int vm_fd, bool kernel_irqchip, struct snap_writer *w, char *err, size_t errlen)
{
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clock;
	bool has_pit = kernel_irqchip && kst.pit_state2;
	int ret = x86_state_init(-1, vm_fd, err, errlen) ?: snap_set_version(w, KVM_VM_SNAP_VERSION)
		  ?: snap_put_u32(w, kernel_irqchip);

	if (!ret && kernel_irqchip)
		ret = save_chips(vm_fd, w, err, errlen);
	memset(&pit, 0, sizeof(pit));
	memset(&clock, 0, sizeof(clock));
	if (!ret && has_pit && KVM_IOCTL(vm_fd, KVM_GET_PIT2, &pit))
		ret = ioctl_err("KVM_GET_PIT2", err, errlen);
	if (!ret && kst.adjust_clock && KVM_IOCTL(vm_fd, KVM_GET_CLOCK, &clock))
		ret = ioctl_err("KVM_GET_CLOCK", err, errlen);
	clock.flags &= KVM_CLOCK_REALTIME | KVM_CLOCK_HOST_TSC | KVM_CLOCK_TSC_STABLE;
	if (!ret && (ret = put_blob(w, &pit, has_pit ? sizeof(pit) : 0) ?: snap_put_u32(w, kst.adjust_clock)
			   ?: snap_put_u64(w, clock.clock) ?: snap_put_u32(w, clock.flags) ?: snap_put_u64(w, clock.realtime)
			   ?: snap_put_u64(w, clock.host_tsc)))
		snprintf(err, errlen, "writing the VM state: %s", strerror(-ret));
	return ret;
}

static int restore_chips(int vm_fd, struct snap_reader *sec, char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(chips) / sizeof(chips[0]); i++) {
		struct kvm_irqchip c;
		bool present;
		int ret = get_blob(sec, chips[i].name, &c, sizeof(c), false, &present, err, errlen);

		if (ret)
			return ret;
		if (c.chip_id != chips[i].id) {
			snprintf(err, errlen, "snapshot %s state has chip id %u, not %u", chips[i].name, c.chip_id,
				 chips[i].id);
			return -EINVAL;
		}
		if (KVM_IOCTL(vm_fd, KVM_SET_IRQCHIP, &c)) {
			int e = errno;

			snprintf(err, errlen, "KVM_SET_IRQCHIP (%s) failed: %s", chips[i].name, strerror(e));
			return -e;
		}
	}
	return 0;
}

/*
 * kvmclock: KVM_SET_CLOCK with the saved value and no flags (api.rst 4.30): as Firecracker does by default, the
 * guest's clocks resume where they stopped; the paused time is invisible, and the guest's wall clock is behind
 * until it resynchronises (NTP, a kvm-ptp or RTC read, the VMClock page's disruption marker telling it to).
 * With `realtime` (the load's clock_realtime, Firecracker 1.15) KVM_CLOCK_REALTIME and the saved wall-clock
 * reading: KVM adds the host's wall-clock time elapsed since the save, so the guest's monotonic clock jumps by
 * it. The snapshot must have that reading (KVM_GET_CLOCK gives it from Linux 5.16, on a host whose clocksource
 * is the TSC), else the load is refused with Firecracker's words. A KVM without a master clock ignores the flag
 * (x86.c kvm_vm_ioctl_set_clock): the clock then resumes where it stopped.
 */
static int restore_clock(int vm_fd, struct snap_reader *sec, bool realtime, char *err, size_t errlen)
{
	struct kvm_clock_data clock;
	uint32_t has, flags = 0;
	uint64_t value, real = 0, host_tsc = 0;

	if (snap_get_u32(sec, &has) || snap_get_u64(sec, &value) || has > 1 ||
	    (snap_version(sec) >= 3 &&
	     (snap_get_u32(sec, &flags) || snap_get_u64(sec, &real) || snap_get_u64(sec, &host_tsc))))
		return snprintf(err, errlen, "truncated or malformed VM section (kvmclock)"), -EINVAL;
	if (realtime && (!has || !(flags & KVM_CLOCK_REALTIME)))
		return snprintf(err, errlen, "clock_realtime requested but not present in the snapshot state"),
		       -ENODATA;
	if (!has)
		return 0;
	if (!kst.adjust_clock)
		return snprintf(err, errlen, "the snapshot has a kvmclock, this host's KVM lacks KVM_CAP_ADJUST_CLOCK"),
		       -EINVAL;
	memset(&clock, 0, sizeof(clock));
	clock.clock = value;
	if (realtime) {
		clock.flags = KVM_CLOCK_REALTIME;
		clock.realtime = real;
	}
	return KVM_IOCTL(vm_fd, KVM_SET_CLOCK, &clock) ? ioctl_err("KVM_SET_CLOCK", err, errlen) : 0;
}

/* Whether the section's VM had KVM's in-kernel irqchip (version 1: always), which must be the one this VM has. */
static int check_chips(struct snap_reader *sec, bool kernel_irqchip, char *err, size_t errlen)
{
	uint32_t in_kernel = 1;

	if (snap_version(sec) >= 2 && (snap_get_u32(sec, &in_kernel) || in_kernel > 1))
		return snprintf(err, errlen, "truncated or malformed VM section (irqchip)"), -EINVAL;
	if (in_kernel != kernel_irqchip)
		return snprintf(err, errlen, "the VM section is of %s irqchip, the configuration says %s",
				in_kernel ? "KVM's in-kernel" : "a split", kernel_irqchip ? "KVM's" : "a split one"),
		       -EINVAL;
	return 0;
}

int x86_vm_restore(int vm_fd, bool kernel_irqchip, bool clock_realtime, struct snap_reader *sec, char *err,
		   size_t errlen)
{
	struct kvm_pit_state2 pit;
	bool present;
	int ret = x86_state_init(-1, vm_fd, err, errlen) ?: check_version(sec, "kvm-vm", KVM_VM_SNAP_VERSION, err, errlen)
		  ?: check_chips(sec, kernel_irqchip, err, errlen);

	if (!ret && kernel_irqchip)
		ret = restore_chips(vm_fd, sec, err, errlen);
	if (!ret)
		ret = get_blob(sec, "kvm_pit_state2", &pit, sizeof(pit), true, &present, err, errlen);
	if (ret)
		return ret;
	if (present && !kernel_irqchip)
		return snprintf(err, errlen, "the snapshot has PIT state, but its VM had no PIT (split irqchip)"),
		       -EINVAL;
	if (present && !kst.pit_state2)
		return snprintf(err, errlen, "the snapshot has PIT state, this host's KVM lacks KVM_CAP_PIT_STATE2"),
		       -EINVAL;
	if (present && KVM_IOCTL(vm_fd, KVM_SET_PIT2, &pit))
		return ioctl_err("KVM_SET_PIT2", err, errlen);
	return restore_clock(vm_fd, sec, clock_realtime, err, errlen);
}
