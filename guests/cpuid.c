/* cpuid.c - checks, at CPL 0 where KVM's table answers, the CPUID brisk gave this vCPU: KVM leaves, topology, XSAVE,
 * hiding, templates. */
#include "guest.h"

/*
 * The command line says what to expect: cpus=N sockets=S cores=C threads=T
 * (tests/integration/test_cpuid.py passes all four) and baseline=1 for
 * --cpu-template baseline. kvm_htt=0|1 is passed only when the host's KVM
 * was seen to replace leaf 1 EDX[28] at KVM_SET_CPUID2 (kvm_pvm ORs in the
 * host's bit, docs/cpuid.md): HTT is then KVM's, not brisk's, and the check
 * expects KVM's value. A CPU template's effects (Firecracker's T2A or a
 * custom one, docs/cpuid.md) come as up to four register checks
 * wN_leaf=L wN_sub=S wN_reg=0..3 (eax..edx) wN_mask=M wN_val=V, N 0..3:
 * (register & M) must be V; and m0_idx=MSR m0_mask=M m0_val=V: (rdmsr(MSR) & M)
 * must be V (the MSR a template changes; it must exist). Every check prints "cpuid: PASS|FAIL|SKIP name
 * values"; the guest ends with guest_pass or guest_fail. check_vcpu() takes
 * the expected APIC ID so that APs can run it once they are started.
 */

/* KVM paravirt features brisk may advertise (src/arch/x86/cpuid_template.c, docs/cpuid.md). */
#define BRISK_KVM_FEATURES 0x01002aebu

#define KVM_HTT_BRISK 2

struct want {
	uint64_t cpus, sockets, cores, threads, baseline;
	uint64_t kvm_htt; /* 0 or 1: HTT as the host's KVM sets it; KVM_HTT_BRISK: from the topology */
	unsigned thread_bits, core_bits;
};

static unsigned failures;

struct regs {
	uint32_t a, b, c, d;
};

static struct regs cpuid_of(uint32_t leaf, uint32_t sub)
{
	struct regs r;

	cpuid(leaf, sub, &r.a, &r.b, &r.c, &r.d);
	return r;
}

static void result(int ok, const char *name, const char *fmt_values, uint32_t v1, uint32_t v2)
{
	gprintf("cpuid: %s %s ", ok ? "PASS" : "FAIL", name);
	gprintf(fmt_values, v1, v2);
	serial_puts("\n");
	if (!ok)
		failures++;
}

static void skip(const char *name, const char *why)
{
	gprintf("cpuid: SKIP %s (%s)\n", name, why);
}

static unsigned bits_for(uint64_t n)
{
	unsigned b = 0;

	while ((1ull << b) < n)
		b++;
	return b;
}

static void check_kvm_leaves(void)
{
	struct regs s = cpuid_of(0x40000000, 0), f;

	result(cpuid_of(1, 0).c >> 31, "hypervisor-bit", "leaf1.ecx[31]=%u want %u", cpuid_of(1, 0).c >> 31, 1);
	result(s.b == 0x4b4d564b && s.c == 0x564b4d56 && s.d == 0x4d, "kvm-signature", "ebx=0x%x ecx=0x%x", s.b, s.c);
	result(s.a >= 0x40000001, "kvm-max-leaf", "eax=0x%x want >= 0x%x", s.a, 0x40000001);
	f = cpuid_of(0x40000001, 0);
	result(!(f.a & ~BRISK_KVM_FEATURES) && f.d == 0, "kvm-features", "eax=0x%x edx=0x%x", f.a, f.d);
}

static void check_topology_leaf(uint32_t leaf, const struct want *w, uint32_t apic_id)
{
	struct regs smt = cpuid_of(leaf, 0), core = cpuid_of(leaf, 1), end = cpuid_of(leaf, 2);
	int ok = smt.a == w->thread_bits && smt.b == w->threads && ((smt.c >> 8) & 0xff) == 1 &&
		 core.a == w->thread_bits + w->core_bits && core.b == w->cores * w->threads &&
		 ((core.c >> 8) & 0xff) == 2 && ((end.c >> 8) & 0xff) == 0;

	gprintf("cpuid: INFO leaf 0x%x smt eax=%u ebx=%u ecx=0x%x core eax=%u ebx=%u ecx=0x%x\n", leaf, smt.a, smt.b,
		smt.c, core.a, core.b, core.c);
	result(ok, leaf == 0xb ? "leaf-0xb-levels" : "leaf-0x1f-levels", "threads=%u per-package=%u", smt.b, core.b);
	result(smt.d == apic_id && core.d == apic_id, leaf == 0xb ? "leaf-0xb-x2apic-id" : "leaf-0x1f-x2apic-id",
	       "edx=%u want %u", smt.d, apic_id);
}

static void check_topology(const struct want *w, uint32_t apic_id)
{
	uint32_t max = cpuid_of(0, 0).a;
	struct regs l1 = cpuid_of(1, 0);
	uint32_t per_pkg = 1u << (w->thread_bits + w->core_bits);

	result(l1.b >> 24 == apic_id, "initial-apic-id", "leaf1.ebx[31:24]=%u want %u", l1.b >> 24, apic_id);
	result(((l1.b >> 16) & 0xff) == (per_pkg > 255 ? 255 : per_pkg), "leaf1-logical-count", "ebx[23:16]=%u want %u",
	       (l1.b >> 16) & 0xff, per_pkg);
	if (w->kvm_htt == KVM_HTT_BRISK)
		result(!!(l1.d & (1u << 28)) == (w->cores * w->threads > 1), "leaf1-htt", "edx[28]=%u cores*threads=%u",
		       (l1.d >> 28) & 1, (uint32_t)(w->cores * w->threads));
	else /* KVM overrides brisk's bit; the test checked brisk's table itself */
		result(((l1.d >> 28) & 1) == w->kvm_htt, "leaf1-htt-as-kvm-sets-it", "edx[28]=%u want %u",
		       (l1.d >> 28) & 1, (uint32_t)w->kvm_htt);
	if (max >= 0xb)
		check_topology_leaf(0xb, w, apic_id);
	else
		skip("leaf-0xb-levels", "max basic leaf below 0xb");
	if (max >= 0x1f)
		check_topology_leaf(0x1f, w, apic_id);
}

static void check_xsave(void)
{
	struct regs l1 = cpuid_of(1, 0), d0, d1;

	if (!(l1.c & (1u << 26))) {
		d0 = cpuid_of(0xd, 0);
		result(d0.a == 0 && d0.c == 0, "xsave-absent-leaf-0xd-zero", "eax=0x%x ecx=%u", d0.a, d0.c);
		return;
	}
	d0 = cpuid_of(0xd, 0);
	d1 = cpuid_of(0xd, 1);
	gprintf("cpuid: INFO leaf 0xd.0 xcr0=0x%x:%x ebx=%u ecx=%u; 0xd.1 eax=0x%x ebx=%u\n", d0.d, d0.a, d0.b, d0.c,
		d1.a, d1.b);
	result((d0.a & 3) == 3, "xsave-x87-sse", "xcr0-low=0x%x want bits 0x%x", d0.a, 3);
	result(d0.b <= d0.c && d0.b >= 576, "xsave-ebx-le-ecx", "ebx=%u ecx=%u", d0.b, d0.c);
	result(d0.c >= 576, "xsave-ecx-ge-576", "ecx=%u want >= %u", d0.c, 576);
	/* YMM state exactly when AVX (SDM vol. 1 13.2). */
	result(!!(d0.a & 4) == !!(l1.c & (1u << 28)), "xsave-ymm-iff-avx", "xcr0.ymm=%u avx=%u", (d0.a >> 2) & 1,
	       (l1.c >> 28) & 1);
}

static void check_hidden(void)
{
	struct regs l1 = cpuid_of(1, 0), pmu = cpuid_of(0xa, 0);
	uint32_t ext = cpuid_of(0x80000000, 0).a;

	if (cpuid_of(0, 0).a >= 0xa)
		result((pmu.a | pmu.b | pmu.c | pmu.d) == 0, "pmu-leaf-0xa-zero", "eax=0x%x edx=0x%x", pmu.a, pmu.d);
	result(!(l1.c & (1u << 5)), "vmx-hidden", "leaf1.ecx[5]=%u want %u", (l1.c >> 5) & 1, 0);
	if (ext >= 0x80000001)
		result(!(cpuid_of(0x80000001, 0).c & (1u << 2)), "svm-hidden", "0x80000001.ecx[2]=%u want %u",
		       (cpuid_of(0x80000001, 0).c >> 2) & 1, 0);
	gprintf("cpuid: INFO tsc-deadline=%u x2apic=%u\n", (l1.c >> 24) & 1, (l1.c >> 21) & 1);
}

static void check_template(const struct want *w)
{
	struct regs l1 = cpuid_of(1, 0), l7 = cpuid_of(7, 0);

	if (!w->baseline) {
		gprintf("cpuid: INFO template host avx=%u avx2=%u\n", (l1.c >> 28) & 1, (l7.b >> 5) & 1);
		return;
	}
	result(!(l1.c & (1u << 28)), "baseline-no-avx", "leaf1.ecx[28]=%u want %u", (l1.c >> 28) & 1, 0);
	result(!(l7.b & (1u << 5)), "baseline-no-avx2", "leaf7.ebx[5]=%u want %u", (l7.b >> 5) & 1, 0);
	result(!!(l1.c & (1u << 20)), "baseline-sse4.2", "leaf1.ecx[20]=%u want %u", (l1.c >> 20) & 1, 1);
}

/* The command line's wN_* register checks (a CPU template's bits, as the test computed them). */
static void check_wanted_bits(const char *cmdline)
{
	static const char *const keys[4][5] = {{"w0_leaf", "w0_sub", "w0_reg", "w0_mask", "w0_val"},
					       {"w1_leaf", "w1_sub", "w1_reg", "w1_mask", "w1_val"},
					       {"w2_leaf", "w2_sub", "w2_reg", "w2_mask", "w2_val"},
					       {"w3_leaf", "w3_sub", "w3_reg", "w3_mask", "w3_val"}};
	static const char *const names[4] = {"template-w0", "template-w1", "template-w2", "template-w3"};

	for (unsigned i = 0; i < 4; i++) {
		uint64_t v[5] = {0, 0, 0, 0, 0};
		struct regs r;
		uint32_t got;

		if (cmdline_get_u64(cmdline, keys[i][0], &v[0]))
			continue;
		for (unsigned k = 1; k < 5; k++)
			cmdline_get_u64(cmdline, keys[i][k], &v[k]);
		r = cpuid_of((uint32_t)v[0], (uint32_t)v[1]);
		got = (v[2] == 0 ? r.a : v[2] == 1 ? r.b : v[2] == 2 ? r.c : r.d) & (uint32_t)v[3];
		gprintf("cpuid: INFO %s leaf 0x%x", names[i], (uint32_t)v[0]);
		gprintf(".%u reg %u", (uint32_t)v[1], (uint32_t)v[2]);
		gprintf(" mask 0x%x\n", (uint32_t)v[3]);
		result(got == (uint32_t)v[4], names[i], "value=0x%x want 0x%x", got, (uint32_t)v[4]);
	}
}

/* The command line's m0_* MSR check (64-bit values: printed in two halves). */
static void check_wanted_msr(const char *cmdline)
{
	uint64_t idx, mask = ~0ull, val = 0, got;

	if (cmdline_get_u64(cmdline, "m0_idx", &idx))
		return;
	cmdline_get_u64(cmdline, "m0_mask", &mask);
	cmdline_get_u64(cmdline, "m0_val", &val);
	got = rdmsr((uint32_t)idx) & mask;
	gprintf("cpuid: INFO template-m0 msr 0x%x mask 0x%x", (uint32_t)idx, (uint32_t)(mask >> 32));
	gprintf("%08x\n", (uint32_t)mask);
	result((uint32_t)(got >> 32) == (uint32_t)(val >> 32), "template-m0-high", "value=0x%x want 0x%x",
	       (uint32_t)(got >> 32), (uint32_t)(val >> 32));
	result((uint32_t)got == (uint32_t)val, "template-m0-low", "value=0x%x want 0x%x", (uint32_t)got, (uint32_t)val);
}

/* Every check for the vCPU this runs on, expecting APIC ID `apic_id`. */
static void check_vcpu(const struct want *w, uint32_t apic_id)
{
	check_kvm_leaves();
	check_topology(w, apic_id);
	check_xsave();
	check_hidden();
	check_template(w);
}

static void read_want(const char *cmdline, struct want *w)
{
	*w = (struct want){.cpus = 1, .sockets = 1, .threads = 1, .kvm_htt = KVM_HTT_BRISK};
	cmdline_get_u64(cmdline, "cpus", &w->cpus);
	w->cores = w->cpus;
	cmdline_get_u64(cmdline, "sockets", &w->sockets);
	cmdline_get_u64(cmdline, "cores", &w->cores);
	cmdline_get_u64(cmdline, "threads", &w->threads);
	cmdline_get_u64(cmdline, "baseline", &w->baseline);
	cmdline_get_u64(cmdline, "kvm_htt", &w->kvm_htt);
	w->thread_bits = bits_for(w->threads);
	w->core_bits = bits_for(w->cores);
}

void guest_main(struct hvm_start_info *si)
{
	struct want w;

	serial_init();
	read_want(guest_cmdline(si), &w);
	gprintf("cpuid: cpus=%u sockets=%u cores=%u threads=%u baseline=%u\n", (unsigned)w.cpus, (unsigned)w.sockets,
		(unsigned)w.cores, (unsigned)w.threads, (unsigned)w.baseline);
	check_vcpu(&w, 0); /* the BSP: vCPU 0, APIC ID 0 */
	check_wanted_bits(guest_cmdline(si));
	check_wanted_msr(guest_cmdline(si));
	if (failures) {
		gprintf("cpuid: %u checks failed\n", failures);
		guest_fail("cpuid", "see the FAIL lines");
	}
	guest_pass("cpuid");
}
