/* counter.c - snapshot/restore guest: counts forever on LAPIC timer ticks, every vCPU, with a memory checksum. */
#include "guest.h"

/*
 * The guest a snapshot is taken of: whatever state crosses the snapshot
 * shows in its output. Each CPU runs its LAPIC timer in periodic mode and
 * halts between ticks (sti; hlt), so the timer, the pending interrupt and the
 * halted state are all in flight at any moment a pause can catch.
 *
 * The BSP prints one line per tick it sees (a tick missed while printing is
 * not a line missed: N counts lines, not ticks):
 *   "count N sum S"                      one vCPU
 *   "count N sum S cpus N,a,b"           with APs: a, b = each AP's own count
 * N = 1, 2, 3, ... with no gap. Line N also writes N into page N % HIST_PAGES
 * of a 256 KiB history and into RAM_PAGES pages spread over all of RAM (the
 * last page of RAM among them); before writing it checks that those pages
 * hold line N-1's (or N-HIST_PAGES's) value, and S is the sum of the history
 * read back: S = N + (N-1) + ... + max(1, N-63). A restored memory image that lost or
 * zeroed a page prints "counter: FAIL: ..." and exits with status 255.
 * Each AP counts its own ticks into its own slot and checks its own page
 * the same way.
 *
 * Command-line words:
 *   period_ms=N   timer period in ms (default 30)
 *   smp=0|1       start the APs the MP table lists (default 1 when it lists
 *                 more than one CPU; smp=1 with one CPU is an error)
 *   stop=N        print "counter: PASS" after line N and reset (default: count forever)
 *   spread=N      RAM pages spread over RAM, written and checked every line (default 8,
 *                 at most 16384): a known number of pages a line dirties (Diff snapshots)
 *   fill=N        RAM pages spread over RAM, written once at boot and checked every line
 *                 (default 0, at most 262144): memory a Diff snapshot leaves to its base
 *   kvmclock=1    read the guest's clock as Linux does (KVM's paravirtual clock: MSR_KVM_SYSTEM_TIME_NEW and its
 *                 pvclock structure, Documentation/virt/kvm/x86/msr.rst) and end each line with " clock MS",
 *                 its milliseconds: what a restore does to the guest's time (clock_realtime) shows there
 */
#define NAME "counter"

#define LAPIC_EOI	 0x0b0
#define LAPIC_LVT_TIMER	 0x320
#define LAPIC_TIMER_INIT 0x380
#define LAPIC_TIMER_DIV	 0x3e0
#define LVT_PERIODIC	 (1u << 17) /* SDM Vol 3A 11.5.4, figure 11-8 */
#define TIMER_DIV_128	 0xa
/* KVM's emulated APIC bus runs at 1 GHz (arch/x86/kvm/lapic.h): 1e9 / 128 counts a second. */
#define TIMER_COUNTS_PER_MS 7813u
#define TIMER_VECTOR	    0x40
#define SPURIOUS_VECTOR	    0xff

#define HIST_PAGES    64      /* history: one page per line, round robin */
#define RAM_PAGES     8	      /* pages spread over RAM by default, the last one at the top */
#define MAX_RAM_PAGES 16384u  /* spread=N at most */
#define MAX_FILL      262144u /* fill=N at most (1 GiB) */
#define FILL_WORD     2	      /* the word of a fill page written (spread pages use word 0: they may share a page) */
#define MAX_CPUS      16      /* slots: the BSP is slot 0 */
#define ARRIVE_POLLS  (1u << 22)
#define PAGE_WORDS    512
#define FAR_RAM_START 0x400000 /* RAM pages: above the image (1 MiB + ~300 KiB) and its stacks */

static volatile uint64_t hist[HIST_PAGES][PAGE_WORDS] __attribute__((aligned(4096)));
static volatile uint64_t ap_page[MAX_CPUS][PAGE_WORDS] __attribute__((aligned(4096)));
static volatile uint64_t *ram_page[MAX_RAM_PAGES];
static unsigned int n_ram_pages;
static uint64_t fill_base, fill_stride, n_fill; /* fill page k: fill_base + k * fill_stride */

static volatile uint32_t ticks[256];	  /* timer interrupts taken, by xAPIC ID */
static volatile uint64_t count[MAX_CPUS]; /* lines (BSP) or ticks seen (APs), by slot */
static volatile unsigned int ncpus = 1, arrived;
static uint32_t timer_count;

static void lapic_write(unsigned int reg, uint32_t v)
{
	mmio_write32(BRISK_LAPIC_BASE + reg, v);
}

static GUEST_ISR void timer_isr(struct interrupt_frame *frame)
{
	(void)frame;
	ticks[lapic_id() & 0xff]++;
	lapic_write(LAPIC_EOI, 0);
}

/* A spurious interrupt needs no EOI (SDM Vol 3A 11.9). */
static GUEST_ISR void spurious_isr(struct interrupt_frame *frame)
{
	(void)frame;
}

/* This CPU's timer: periodic, TIMER_VECTOR, divide by 128 (SDM Vol 3A 11.5.4). */
static void timer_start(void)
{
	lapic_enable();
	lapic_write(LAPIC_TIMER_DIV, TIMER_DIV_128);
	lapic_write(LAPIC_LVT_TIMER, LVT_PERIODIC | TIMER_VECTOR);
	lapic_write(LAPIC_TIMER_INIT, timer_count);
}

/*
 * Halt until this CPU's tick count moves past *seen. sti takes effect after
 * the next instruction, so no tick falls between the test and the hlt
 * (SDM Vol 2B, STI).
 */
static void wait_tick(unsigned int apic_id, uint32_t *seen)
{
	irq_disable();
	while (ticks[apic_id] == *seen)
		__asm__ volatile("sti; hlt; cli" ::: "memory");
	*seen = ticks[apic_id];
	irq_enable();
}

__attribute__((noreturn)) static void fail(const char *what, unsigned int slot, uint64_t n, uint64_t seen,
					   uint64_t want)
{
	gprintf("%s: FAIL: %s: cpu %u line %llu holds %llu, expected %llu\n", NAME, what, slot, (unsigned long long)n,
		(unsigned long long)seen, (unsigned long long)want);
	guest_fail(NAME, what);
}

/* ---- APs --------------------------------------------------------------------------------------- */

/*
 * The runtime's trampoline (ap.S) ends in "ljmp $0x08, $ap_start64", which
 * calls mp.c's ap_main, an arrival report that halts for good. This guest's
 * APs must run on, so the far jump's target is pointed at counter_ap_start64
 * below (the same steps, then counter_ap_main) before the trampoline is copied.
 * All guest memory is mapped writable, .rodata included.
 */
__asm__(".pushsection .text.counter_ap, \"ax\"\n"
	".code64\n"
	".globl counter_ap_start64\n"
	"counter_ap_start64:\n"
	"	mov $0x10, %eax\n"
	"	mov %eax, %ds\n"
	"	mov %eax, %es\n"
	"	mov %eax, %ss\n"
	"	mov %eax, %fs\n"
	"	mov %eax, %gs\n"
	"	mov ap_stack_top(%rip), %rsp\n"
	"	mov $0xfee00020, %eax\n"
	"	mov (%rax), %edi\n"
	"	shr $24, %edi\n"
	"	call counter_ap_main\n"
	"1:	cli\n"
	"	hlt\n"
	"	jmp 1b\n"
	".popsection\n");

extern const char ap_tramp_start[], ap_tramp_end[];
extern const char counter_ap_start64[];
void counter_ap_main(unsigned int apic_id);

static volatile unsigned int next_slot;

void counter_ap_main(unsigned int apic_id)
{
	unsigned int slot = next_slot;
	uint32_t seen = 0;

	idt_load();
	timer_start();
	seen = ticks[apic_id];
	arrived = arrived + 1;
	for (;;) {
		uint64_t n = count[slot] + 1;

		wait_tick(apic_id, &seen);
		if (ap_page[slot][0] != n - 1)
			fail("AP page", slot, n, ap_page[slot][0], n - 1);
		ap_page[slot][0] = n;
		count[slot] = n;
	}
}

/* Point the trampoline's final far jump (EA imm32 08 00, 32-bit code) at counter_ap_start64. */
static int patch_trampoline(void)
{
	volatile uint8_t *b = (volatile uint8_t *)phys_launder((uintptr_t)ap_tramp_start);
	size_t n = (size_t)(ap_tramp_end - ap_tramp_start);
	uint32_t to = (uint32_t)(uintptr_t)counter_ap_start64;

	for (size_t i = 1; i + 7 <= n; i++) {
		uint32_t at = b[i + 1] | (uint32_t)b[i + 2] << 8 | (uint32_t)b[i + 3] << 16 | (uint32_t)b[i + 4] << 24;

		if (b[i] != 0xea || b[i - 1] == 0x66 || b[i + 5] != GUEST_CS || b[i + 6] != 0)
			continue;
		if (at < BRISK_GUEST_LOAD_ADDR || at >= 0x40000000u)
			continue;
		for (unsigned int k = 0; k < 4; k++)
			b[i + 1 + k] = (uint8_t)(to >> (8 * k));
		return 0;
	}
	return -1;
}

/* Start every AP the MP table lists, one at a time; returns how many now count. */
static unsigned int start_aps(const struct mp_info *mp, unsigned int bsp)
{
	unsigned int slot = 1;

	if (patch_trampoline())
		guest_fail(NAME, "no far jump to patch in the AP trampoline");
	for (unsigned int i = 0; i < mp->ncpus && slot < MAX_CPUS && slot - 1 < GUEST_AP_MAX; i++) {
		unsigned int before = arrived, polls = 0;

		if (mp->apic_id[i] == bsp)
			continue;
		next_slot = slot;
		if (smp_start_ap(mp->apic_id[i], slot - 1))
			guest_fail(NAME, "INIT/SIPI not sent");
		while (arrived == before && ++polls < ARRIVE_POLLS)
			cpu_relax();
		if (arrived == before) {
			gprintf("%s: FAIL: apic id %u did not arrive\n", NAME, mp->apic_id[i]);
			guest_fail(NAME, "AP did not arrive");
		}
		slot++;
	}
	return slot;
}

/* ---- the BSP ------------------------------------------------------------------------------------- */

/* The top of the highest RAM entry of the PVH memory map below 3 GiB that starts at or below FAR_RAM_START; 0: none. */
static uint64_t ram_top(const struct hvm_start_info *si)
{
	const struct hvm_memmap_table_entry *t;
	uint64_t top = 0;

	if (!si || si->magic != BRISK_PVH_START_MAGIC || si->version < 1 || !si->memmap_paddr)
		return 0;
	t = (const void *)(uintptr_t)si->memmap_paddr;
	for (uint32_t i = 0; i < si->memmap_entries && i < 64; i++) {
		uint64_t end = t[i].addr + t[i].size;

		if (t[i].type == 1 && t[i].addr <= FAR_RAM_START && end > top && end <= 0xc0000000ull)
			top = end;
	}
	return top;
}

/*
 * `want` pages between FAR_RAM_START and `top` (ram_top), evenly spread, the last page of RAM the last of
 * them.
 */
static void find_ram_pages(uint64_t top, unsigned int want)
{
	if (top < FAR_RAM_START + (uint64_t)want * 4096)
		return;
	for (unsigned int k = 0; k < want; k++) {
		uint64_t p = FAR_RAM_START + (top - FAR_RAM_START) / want * (k + 1) - 4096;

		ram_page[k] = (volatile uint64_t *)(uintptr_t)(p & ~0xfffull);
		ram_page[k][0] = 0;
	}
	n_ram_pages = want;
	gprintf("%s: history at 0x%llx, %u RAM pages up to 0x%llx\n", NAME, (unsigned long long)(uintptr_t)hist,
		n_ram_pages, (unsigned long long)(uintptr_t)ram_page[want - 1]);
}

/* fill=N: `want` pages from FAR_RAM_START to `top`, evenly spread, each given its own value once. */
static void fill_pages(uint64_t top, uint64_t want)
{
	if (!want)
		return;
	if (top < FAR_RAM_START + want * 4096)
		guest_fail(NAME, "fill= more pages than RAM has above 4 MiB");
	fill_base = FAR_RAM_START;
	fill_stride = (top - FAR_RAM_START) / want & ~0xfffull;
	n_fill = want;
	for (uint64_t k = 0; k < n_fill; k++)
		((volatile uint64_t *)(uintptr_t)(fill_base + k * fill_stride))[FILL_WORD] = ~k;
	gprintf("%s: %llu fill pages every %llu KiB from 0x%llx\n", NAME, (unsigned long long)n_fill,
		(unsigned long long)(fill_stride >> 10), (unsigned long long)fill_base);
}

/* Line n's memory work: check what line n-1 left, write n, return the history's sum. */
static uint64_t step(uint64_t n)
{
	volatile uint64_t *h = hist[n % HIST_PAGES];
	uint64_t old = n > HIST_PAGES ? n - HIST_PAGES : 0, sum = 0;

	if (h[0] != old)
		fail("history page", 0, n, h[0], old);
	h[0] = n;
	h[PAGE_WORDS - 1] = ~n;
	for (unsigned int k = 0; k < n_ram_pages; k++) {
		if (ram_page[k][0] != n - 1)
			fail("RAM page", 0, n, ram_page[k][0], n - 1);
		ram_page[k][0] = n;
	}
	for (uint64_t k = 0; k < n_fill; k++) {
		uint64_t v = ((volatile uint64_t *)(uintptr_t)(fill_base + k * fill_stride))[FILL_WORD];

		if (v != ~k)
			fail("fill page", 0, n, v, ~k);
	}
	for (unsigned int p = 0; p < HIST_PAGES; p++) {
		if (hist[p][0] && hist[p][PAGE_WORDS - 1] != ~hist[p][0])
			fail("history page tail", 0, n, hist[p][PAGE_WORDS - 1], ~hist[p][0]);
		sum += hist[p][0];
	}
	return sum;
}

/* KVM's pvclock structure (msr.rst, "MSR_KVM_SYSTEM_TIME_NEW"; Linux's struct pvclock_vcpu_time_info). */
struct pvclock {
	uint32_t version; /* odd while KVM updates it */
	uint32_t pad0;
	uint64_t tsc_timestamp;
	uint64_t system_time; /* ns at tsc_timestamp */
	uint32_t tsc_to_system_mul;
	int8_t tsc_shift;
	uint8_t flags;
	uint8_t pad[2];
};
#define MSR_KVM_SYSTEM_TIME_NEW 0x4b564d01u

static volatile struct pvclock pvclock __attribute__((aligned(64)));
static int use_kvmclock;

/* The guest's time in ns: system_time + (TSC - tsc_timestamp) scaled (pvclock_scale_delta), read under version. */
static uint64_t kvmclock_ns(void)
{
	uint32_t v;
	uint64_t ns;

	do {
		v = pvclock.version;
		__asm__ volatile("" ::: "memory");
		uint64_t delta = rdtsc() - pvclock.tsc_timestamp;
		int shift = pvclock.tsc_shift;

		delta = shift < 0 ? delta >> -shift : delta << shift;
		ns = pvclock.system_time + (uint64_t)(((unsigned __int128)delta * pvclock.tsc_to_system_mul) >> 32);
		__asm__ volatile("" ::: "memory");
	} while ((v & 1) || v != pvclock.version);
	return ns;
}

static void print_line(uint64_t n, uint64_t sum)
{
	gprintf("count %llu sum %llu", (unsigned long long)n, (unsigned long long)sum);
	if (use_kvmclock)
		gprintf(" clock %llu", (unsigned long long)(kvmclock_ns() / 1000000u));
	if (ncpus > 1) {
		gprintf(" cpus %llu", (unsigned long long)n);
		for (unsigned int s = 1; s < ncpus; s++)
			gprintf(",%llu", (unsigned long long)count[s]);
	}
	serial_putc('\n');
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	uint64_t period = 30, smp = 2, stop = 0, spread = RAM_PAGES, fill = 0, kvmclock = 0;
	unsigned int bsp;
	uint32_t seen;
	struct mp_info mp;
	const char *why = "";

	serial_init();
	cmdline_get_u64(cmdline, "period_ms", &period);
	cmdline_get_u64(cmdline, "smp", &smp);
	cmdline_get_u64(cmdline, "stop", &stop);
	cmdline_get_u64(cmdline, "spread", &spread);
	cmdline_get_u64(cmdline, "fill", &fill);
	cmdline_get_u64(cmdline, "kvmclock", &kvmclock);
	if (kvmclock) { /* the structure's guest-physical address, bit 0 enables (identity-mapped RAM) */
		wrmsr(MSR_KVM_SYSTEM_TIME_NEW, (uint64_t)(uintptr_t)&pvclock | 1);
		use_kvmclock = 1;
	}
	if (period < 1 || period > 500)
		guest_fail(NAME, "period_ms= out of 1..500");
	if (spread < 1 || spread > MAX_RAM_PAGES)
		guest_fail(NAME, "spread= out of 1..16384");
	if (fill > MAX_FILL)
		guest_fail(NAME, "fill= out of 0..262144");
	timer_count = (uint32_t)period * TIMER_COUNTS_PER_MS;
	uint64_t top = ram_top(si);

	find_ram_pages(top, (unsigned int)spread);
	fill_pages(top, fill);

	/* Only the LAPIC timer interrupts: the legacy PICs masked, as virtio.c does. */
	outb(0x21, 0xff);
	outb(0xa1, 0xff);
	idt_set_gate(TIMER_VECTOR, timer_isr);
	idt_set_gate(SPURIOUS_VECTOR, spurious_isr);
	idt_load();
	lapic_enable();
	bsp = lapic_id();

	if (smp && mp_parse(&mp, &why) == 0 && mp.ncpus > 1)
		ncpus = start_aps(&mp, bsp);
	else if (smp == 1)
		guest_fail(NAME, "smp=1 but the MP table lists one CPU or none");
	gprintf("%s: %u cpus, period %llu ms\n", NAME, ncpus, (unsigned long long)period);

	timer_start();
	seen = ticks[bsp];
	for (uint64_t n = 1;; n++) {
		wait_tick(bsp, &seen);
		print_line(n, step(n));
		count[0] = n;
		if (stop && n >= stop)
			guest_pass(NAME);
	}
}
