/* mp.c - the test guests' SMP runtime: xAPIC, INIT-SIPI-SIPI, and an MP spec 1.4 table parser. */
#include "guest.h"

/* xAPIC registers, offsets from BRISK_LAPIC_BASE (SDM Vol 3A 10.4.1, table 10-1). */
#define LAPIC_ID     0x020
#define LAPIC_SVR    0x0f0
#define LAPIC_ICR_LO 0x300
#define LAPIC_ICR_HI 0x310

#define SVR_ENABLE	 0x100
#define SVR_VECTOR	 0xff
#define ICR_INIT	 0x00000500
#define ICR_STARTUP	 0x00000600
#define ICR_LEVEL_ASRT	 0x00004000
#define ICR_DELIV_PEND	 0x00001000
#define ICR_POLLS	 100000
#define DELAY_AFTER_INIT 2000 /* pause loops standing in for the SDM's 10 ms */
#define DELAY_AFTER_SIPI 400  /* ... and for its 200 us */

extern const char ap_tramp_start[], ap_tramp_end[];
volatile uint64_t ap_stack_top;
static uint8_t ap_stacks[GUEST_AP_MAX][GUEST_AP_STACK] __attribute__((aligned(16)));

static uint32_t lapic_read(unsigned int reg)
{
	return mmio_read32(BRISK_LAPIC_BASE + reg);
}

static void lapic_write(unsigned int reg, uint32_t v)
{
	mmio_write32(BRISK_LAPIC_BASE + reg, v);
}

void lapic_enable(void)
{
	lapic_write(LAPIC_SVR, (lapic_read(LAPIC_SVR) & ~0xffu) | SVR_ENABLE | SVR_VECTOR);
}

unsigned int lapic_id(void)
{
	return lapic_read(LAPIC_ID) >> 24;
}

static void delay(unsigned int loops)
{
	for (volatile unsigned int i = 0; i < loops; i++)
		cpu_relax();
}

/* Send one IPI and wait, bounded, for the delivery status to clear (SDM Vol 3A 10.6.1). */
static int send_ipi(unsigned int apic_id, uint32_t lo)
{
	lapic_write(LAPIC_ICR_HI, apic_id << 24);
	lapic_write(LAPIC_ICR_LO, lo);
	for (unsigned int i = 0; i < ICR_POLLS; i++) {
		if (!(lapic_read(LAPIC_ICR_LO) & ICR_DELIV_PEND))
			return 0;
		cpu_relax();
	}
	return -1;
}

/*
 * The universal start-up algorithm (SDM Vol 3A 8.4.4.1; MP spec 1.4 B.4):
 * INIT, wait, STARTUP, wait, STARTUP. The second SIPI is ignored by an AP
 * that already left wait-for-SIPI. The waits are short bounded loops: KVM
 * and QEMU need none, and CPL-0 code may run emulated (ENVIRONMENT.md).
 */
int smp_start_ap(unsigned int apic_id, unsigned int slot)
{
	uint32_t sipi = ICR_STARTUP | ICR_LEVEL_ASRT | GUEST_AP_VECTOR;

	if (slot >= GUEST_AP_MAX)
		return -1;
	memcpy((void *)(uintptr_t)GUEST_AP_TRAMPOLINE, ap_tramp_start, (size_t)(ap_tramp_end - ap_tramp_start));
	ap_stack_top = (uintptr_t)ap_stacks[slot] + GUEST_AP_STACK;
	if (send_ipi(apic_id, ICR_INIT | ICR_LEVEL_ASRT))
		return -1;
	delay(DELAY_AFTER_INIT);
	if (send_ipi(apic_id, sipi))
		return -1;
	delay(DELAY_AFTER_SIPI);
	return send_ipi(apic_id, sipi);
}

/* ---- AP arrival ---------------------------------------------------------------------- */

#define ARRIVE_POLLS (1u << 22)
#define EFER_MSR     0xc0000080
#define EFER_LMA     (1ULL << 10)
#define CR0_PG	     (1ULL << 31)

static volatile unsigned int arrived;
static struct ap_arrival last_arrival;

/* Runs on each AP, alone (smp_bring_up_ap starts one at a time), in long mode. */
void ap_main(unsigned int apic_id)
{
	last_arrival.apic_id = apic_id;
	last_arrival.efer = rdmsr(EFER_MSR);
	last_arrival.cr0 = read_cr0();
	last_arrival.long_mode = (last_arrival.efer & EFER_LMA) && (last_arrival.cr0 & CR0_PG);
	__asm__ volatile("" ::: "memory"); /* the report before the count (x86 stores are not reordered) */
	arrived = arrived + 1;
	for (;;)
		__asm__ volatile("cli; hlt");
}

int smp_bring_up_ap(unsigned int apic_id, unsigned int slot, struct ap_arrival *a)
{
	unsigned int before = arrived;

	if (smp_start_ap(apic_id, slot))
		return -1;
	for (unsigned int i = 0; i < ARRIVE_POLLS; i++) {
		if (arrived != before) {
			__asm__ volatile("" ::: "memory");
			*a = last_arrival;
			return 0;
		}
		cpu_relax();
	}
	return -1;
}

/* ---- MP table ----------------------------------------------------------------------- */

uint8_t phys_sum(uintptr_t p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s = (uint8_t)(s + phys_read8(p++));
	return s;
}

/* A floating pointer in [start, start+len) on a 16-byte boundary (MP spec 1.4, 4.1), or 0. */
static uintptr_t scan(uintptr_t start, size_t len)
{
	for (uintptr_t p = start; p + 16 <= start + len; p += 16) {
		if (phys_read32(p) == 0x5f504d5f /* "_MP_" */ && phys_read8(p + 8) == 1 && phys_sum(p, 16) == 0)
			return p;
	}
	return 0;
}

static uintptr_t find_fps(void)
{
	uintptr_t ebda = (uintptr_t)phys_read16(0x40e) << 4, p;

	if ((p = scan(0, 0x400)) || (p = scan(639 * 0x400, 0x400)) || (p = scan(0xf0000, 0x10000)))
		return p;
	return ebda ? scan(ebda, 0x400) : 0;
}

/* One base-table entry at p (type already known to fit); returns its size or 0 on an unknown type. */
static unsigned int entry(struct mp_info *mp, uintptr_t p)
{
	const volatile uint8_t *e = (const volatile uint8_t *)p;

	switch (e[0]) {
	case 0: /* processor (4.3.1) */
		if ((e[3] & 1) && mp->ncpus < MP_MAX_CPUS)
			mp->apic_id[mp->ncpus++] = e[1];
		if (e[3] & 2) {
			mp->nbsp++;
			mp->bsp_id = e[1];
		}
		return 20;
	case 1: /* bus (4.3.2) */
		mp->nbus++;
		if (!memcmp((const void *)(p + 2), "ISA   ", 6))
			mp->isa_bus = e[1];
		return 8;
	case 2: /* I/O APIC (4.3.3) */
		mp->nioapic++;
		mp->ioapic_id = e[1];
		mp->ioapic_ver = e[2];
		mp->ioapic_addr = phys_read32(p + 4);
		return 8;
	case 3: /* I/O interrupt assignment (4.3.4): INT from the ISA bus to this I/O APIC */
		if (e[1] == 0 && (int)e[4] == mp->isa_bus && e[5] < 16 && e[6] == mp->ioapic_id) {
			mp->isa_irqs |= 1u << e[5];
			mp->isa_pin[e[5]] = e[7];
		}
		return 8;
	case 4: /* local interrupt assignment (4.3.5) */
		mp->nlint++;
		return 8;
	default:
		return 0;
	}
}

int mp_parse(struct mp_info *mp, const char **why)
{
	uintptr_t fps, cfg, p, end;

	memset(mp, 0, sizeof(*mp));
	mp->isa_bus = -1;
	fps = find_fps();
	if (!fps)
		return *why = "no \"_MP_\" floating pointer with a valid checksum", -1;
	mp->fps_addr = fps;
	mp->fps_rev = *(const volatile uint8_t *)(fps + 9);
	cfg = phys_read32(fps + 4);
	mp->config_addr = cfg;
	if (!cfg || cfg >= 0x100000)
		return *why = "configuration table pointer 0 or above 1 MiB", -1;
	if (phys_read32(cfg) != 0x504d4350 /* "PCMP" */)
		return *why = "no \"PCMP\" signature", -1;
	mp->config_len = phys_read16(cfg + 4);
	mp->entries = phys_read16(cfg + 34);
	mp->lapic_addr = phys_read32(cfg + 36);
	if (mp->config_len < 44 || cfg + mp->config_len > 0x100000)
		return *why = "configuration table length out of range", -1;
	if (phys_sum(cfg, mp->config_len))
		return *why = "configuration table checksum", -1;
	/*
	 * Walk by the length, as Linux's smp_read_mpc() does (it ignores the
	 * entry count; QEMU's qboot leaves it 0). The count is kept for checks.
	 */
	end = cfg + mp->config_len;
	for (p = cfg + 44; p < end;) {
		unsigned int size = *(const volatile uint8_t *)p == 0 ? 20 : 8;

		if (p + size > end || entry(mp, p) != size)
			return *why = "entry out of the table or of unknown type", -1;
		p += size;
		mp->walked++;
	}
	return 0;
}
