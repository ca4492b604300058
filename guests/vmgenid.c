/* vmgenid.c - the VM Generation ID and the VMClock page from inside: found in the DSDT as Linux finds them, read
 * before and after a restore.
 */
#include "guest.h"

#include "brisk/vmclock_abi.h"

/*
 * What Linux's drivers/virt/vmgenid.c and drivers/acpi/evged.c do, in a test guest (docs/acpi.md "VMGenID"):
 * walk RSDP -> XSDT -> FADT -> DSDT, find the device whose _CID is "VM_Gen_Counter" (case-insensitively: ACPICA
 * upper-cases it to the "VM_GEN_COUNTER" Linux matches), read its ADDR package (the 16 bytes' address, low and high
 * halves), find the Generic Event Device (_HID "ACPI0013") and its interrupt in _CRS, and route that GSI through
 * the I/O APIC to a vector of its own. Then it prints the ID and "vmgenid: waiting", and spins until the ID
 * changes, which only a restore does. Then, with the new ID:
 *   vmgenid: CHECK changed: PASS|FAIL (before ID, after ID)
 *   vmgenid: CHECK notified: PASS|FAIL (N interrupts on GSI G)
 * Then what a clone writes stays its own: the new ID is written over CLONE_PAGES pages from CLONE_BASE,
 *   vmgenid: written: N pages from 0x800000
 * (hold=1: then it waits, halted, for a byte on COM1, so that a sibling restored from the same snapshot writes its
 * own ID meanwhile), and each page is read back:
 *   vmgenid: CHECK private: PASS|FAIL (N of N pages hold this generation's ID)
 *   vmgenid: PASS                           (exit status 0, i8042 reset)
 * The VMClock page, as Linux's drivers/ptp/ptp_vmclock.c finds it: the device whose _HID is "AMZNC10C", its one
 * memory resource in _CRS (a Memory32Fixed descriptor, 6.4.3.4), the structure there checked as the driver
 * checks it (magic, version 1, size within the resource) and as Firecracker fills it (no counter, both flags):
 *   vmgenid: vmclock at 0xADDR, N bytes, generation G, disruption marker M, seq S
 *   vmgenid: CHECK vmclock page: PASS|FAIL (magic 0x..., version V, counter C, flags 0x...)
 * and after the restore, with the ID's change:
 *   vmgenid: CHECK vmclock restored: PASS|FAIL (generation G -> G+1, disruption marker M -> M+1, seq S -> S+2)
 * Command-line words: absent=1: expect no VGEN and no VCLK device (--acpi off): PASS when there is none; hold=1:
 * as above.
 * The guest needs 9 MiB of RAM at least.
 */
#define NAME "vmgenid"

#define GED_VECTOR	      0x41
#define COM1_VECTOR	      0x42
#define UART_IER	      1
#define UART_MCR	      4
#define UART_LSR	      5
#define UART_IER_RDI	      0x01
#define UART_LSR_DR	      0x01
#define UART_MCR_DTR_RTS_OUT2 0x0b
#define SPURIOUS_VECTOR	      0xff
#define LAPIC_EOI	      0x0b0
#define IOAPIC_REGSEL	      0x00
#define IOAPIC_WIN	      0x10
#define IOAPIC_REDTBL(pin)    (0x10 + 2 * (pin))
#define FADT_X_DSDT	      140
#define MAX_DEVICES	      64
#define NOTIFY_POLLS	      (1u << 24)
#define CLONE_BASE	      (8ull << 20)
#define CLONE_PAGES	      256u

static volatile uint32_t notified;

static GUEST_ISR void ged_isr(struct interrupt_frame *frame)
{
	(void)frame;
	notified = notified + 1;
	mmio_write32(BRISK_LAPIC_BASE + LAPIC_EOI, 0);
}

static GUEST_ISR void com1_isr(struct interrupt_frame *frame)
{
	(void)frame;
	mmio_write32(BRISK_LAPIC_BASE + LAPIC_EOI, 0);
}

static GUEST_ISR void spurious_isr(struct interrupt_frame *frame)
{
	(void)frame;
}

static int upper(int c)
{
	return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c;
}

/* Whether the data object `o` (objlen bytes) is the string `s`, compared as ACPICA's repair leaves _HID/_CID. */
static int is_string(const uint8_t *o, size_t objlen, const char *s)
{
	size_t n = strlen(s);

	if (!o || objlen != n + 2 || o[0] != 0x0d || o[n + 1] != 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (upper(o[1 + i]) != upper(s[i]))
			return 0;
	return 1;
}

/* ADDR: Package (2) { low, high }: the ID's guest-physical address, or 0. */
static uint64_t addr_of(const struct acpi_aml_device *d)
{
	size_t objlen, k, v, at;
	const uint8_t *o = acpi_aml_find_name(d->body, d->len, "ADDR", &objlen);
	uint64_t lo, hi;

	if (!o || o[0] != 0x12 || !(k = acpi_aml_pkglen(o + 1, objlen - 1, &v)) || 1 + k >= objlen || o[1 + k] != 2)
		return 0;
	at = 2 + k;
	if (!(v = acpi_aml_int(o + at, objlen - at, &lo)))
		return 0;
	at += v;
	if (!acpi_aml_int(o + at, objlen - at, &hi) || lo > 0xffffffffu || hi > 0xffffffffu)
		return 0;
	return hi << 32 | lo;
}

/* The GED's _CRS: a Buffer holding one Extended Interrupt descriptor (6.4.3.6); its GSI, or -1. */
static long ged_gsi(const struct acpi_aml_device *d)
{
	size_t objlen, k, v, n;
	const uint8_t *o = acpi_aml_find_name(d->body, d->len, "_CRS", &objlen);
	uint64_t size;

	if (!o || o[0] != 0x11 || !(k = acpi_aml_pkglen(o + 1, objlen - 1, &v)) ||
	    !(n = acpi_aml_int(o + 1 + k, objlen - 1 - k, &size)))
		return -1;
	o += 1 + k + n;
	objlen -= 1 + k + n;
	if (size > objlen || size < 9 || o[0] != 0x89 || o[4] != 1)
		return -1;
	return (long)((uint32_t)o[5] | (uint32_t)o[6] << 8 | (uint32_t)o[7] << 16 | (uint32_t)o[8] << 24);
}

/* VCLK's _CRS: a Buffer holding one Memory32Fixed descriptor (6.4.3.4); its base and length, or 0. */
static uint64_t vmclock_region(const struct acpi_aml_device *d, uint32_t *len)
{
	size_t objlen, k, v, n;
	const uint8_t *o = acpi_aml_find_name(d->body, d->len, "_CRS", &objlen);
	uint64_t size;

	if (!o || o[0] != 0x11 || !(k = acpi_aml_pkglen(o + 1, objlen - 1, &v)) ||
	    !(n = acpi_aml_int(o + 1 + k, objlen - 1 - k, &size)))
		return 0;
	o += 1 + k + n;
	objlen -= 1 + k + n;
	if (size > objlen || size < 12 || o[0] != 0x86 || o[1] != 9 || o[2] != 0)
		return 0;
	*len = (uint32_t)o[8] | (uint32_t)o[9] << 8 | (uint32_t)o[10] << 16 | (uint32_t)o[11] << 24;
	return (uint32_t)o[4] | (uint32_t)o[5] << 8 | (uint32_t)o[6] << 16 | (uint32_t)o[7] << 24;
}

struct vmclock_seen {
	uint32_t seq;
	uint64_t gen, marker, flags;
};

static struct vmclock_seen vmclock_read(uint64_t at)
{
	return (struct vmclock_seen){
	    .seq = phys_read32((uintptr_t)at + offsetof(struct vmclock_abi, seq_count)),
	    .gen = phys_read64((uintptr_t)at + offsetof(struct vmclock_abi, vm_generation_counter)),
	    .marker = phys_read64((uintptr_t)at + offsetof(struct vmclock_abi, disruption_marker)),
	    .flags = phys_read64((uintptr_t)at + offsetof(struct vmclock_abi, flags)),
	};
}

/* What the driver's probe checks and what Firecracker publishes at a boot; the fields it saw. */
static struct vmclock_seen vmclock_boot(uint64_t at, uint32_t len)
{
	uint32_t magic = phys_read32((uintptr_t)at + offsetof(struct vmclock_abi, magic));
	uint32_t size = phys_read32((uintptr_t)at + offsetof(struct vmclock_abi, size));
	uint16_t version = phys_read16((uintptr_t)at + offsetof(struct vmclock_abi, version));
	uint8_t counter = phys_read8((uintptr_t)at + offsetof(struct vmclock_abi, counter_id));
	struct vmclock_seen v = vmclock_read(at);
	int ok = magic == VMCLOCK_MAGIC && version == VMCLOCK_VERSION && size <= len && size >= 4096 &&
		 counter == VMCLOCK_COUNTER_INVALID && !(v.seq & 1) &&
		 v.flags == (VMCLOCK_FLAG_VM_GEN_COUNTER_PRESENT | VMCLOCK_FLAG_NOTIFICATION_PRESENT);

	gprintf("%s: vmclock at 0x%llx, %u bytes, generation %llu, disruption marker %llu, seq %u\n", NAME,
		(unsigned long long)at, len, (unsigned long long)v.gen, (unsigned long long)v.marker, v.seq);
	gprintf("%s: CHECK vmclock page: %s (magic 0x%x, version %u, counter %u, flags 0x%llx)\n", NAME,
		ok ? "PASS" : "FAIL", magic, version, counter, (unsigned long long)v.flags);
	if (!ok)
		guest_fail(NAME, "the VMClock page is not what Linux's driver takes");
	return v;
}

static void vmclock_restored(uint64_t at, struct vmclock_seen was)
{
	struct vmclock_seen now = vmclock_read(at);
	int ok =
	    now.gen == was.gen + 1 && now.marker == was.marker + 1 && now.seq == was.seq + 2 && now.flags == was.flags;

	gprintf("%s: CHECK vmclock restored: %s (generation %llu -> %llu, disruption marker %llu -> %llu, seq %u -> "
		"%u)\n",
		NAME, ok ? "PASS" : "FAIL", (unsigned long long)was.gen, (unsigned long long)now.gen,
		(unsigned long long)was.marker, (unsigned long long)now.marker, was.seq, now.seq);
	if (!ok)
		guest_fail(NAME, "the VMClock counters did not move on by one");
}

static void route(unsigned int gsi, uint8_t vector)
{
	/* Fixed delivery, physical destination this CPU, edge, active high, unmasked (82093AA 3.2.4). */
	mmio_write32(BRISK_IOAPIC_BASE + IOAPIC_REGSEL, IOAPIC_REDTBL(gsi) + 1);
	mmio_write32(BRISK_IOAPIC_BASE + IOAPIC_WIN, lapic_id() << 24);
	mmio_write32(BRISK_IOAPIC_BASE + IOAPIC_REGSEL, IOAPIC_REDTBL(gsi));
	mmio_write32(BRISK_IOAPIC_BASE + IOAPIC_WIN, vector);
}

/*
 * Waits for a byte on COM1 halted, not polling: the UART's received-data interrupt (IER bit 0, OUT2 gating the
 * line as on a PC; PC16550D datasheet) through I/O APIC pin 4 wakes the HLT. So a hundred clones waiting here
 * cost the host nothing. The LSR is checked with interrupts off and "sti; hlt" follows (STI's one-instruction
 * shadow), so a byte that arrives after the check still ends the HLT.
 */
static void wait_byte(void)
{
	outb(BRISK_COM1_PORT + UART_MCR, UART_MCR_DTR_RTS_OUT2);
	outb(BRISK_COM1_PORT + UART_IER, UART_IER_RDI);
	route(BRISK_COM1_IRQ, COM1_VECTOR);
	for (;;) {
		irq_disable();
		if (inb(BRISK_COM1_PORT + UART_LSR) & UART_LSR_DR)
			break;
		__asm__ volatile("sti; hlt" ::: "memory");
	}
	outb(BRISK_COM1_PORT + UART_IER, 0);
	irq_enable();
	(void)inb(BRISK_COM1_PORT);
}

static volatile uint64_t *clone_page(uint32_t i)
{
	return (volatile uint64_t *)(uintptr_t)(CLONE_BASE + (uint64_t)i * 4096);
}

/* Writes id over the clone pages, waits for a byte on COM1 when hold is set, reads them back: the pages that still
 * hold id. */
static uint32_t private_pages(const uint64_t id[2], uint64_t hold)
{
	uint32_t kept = 0;

	for (uint32_t i = 0; i < CLONE_PAGES; i++) {
		clone_page(i)[0] = id[0];
		clone_page(i)[1] = id[1];
	}
	gprintf("%s: written: %u pages from 0x%llx\n", NAME, CLONE_PAGES, (unsigned long long)CLONE_BASE);
	if (hold)
		wait_byte();
	for (uint32_t i = 0; i < CLONE_PAGES; i++)
		kept += clone_page(i)[0] == id[0] && clone_page(i)[1] == id[1];
	return kept;
}

static void read_id(uint64_t addr, uint64_t id[2])
{
	id[0] = phys_read64((uintptr_t)addr);
	id[1] = phys_read64((uintptr_t)addr + 8);
}

void guest_main(struct hvm_start_info *si)
{
	static struct acpi_aml_device dev[MAX_DEVICES];
	const char *cmdline = guest_cmdline(si), *why = "";
	uint64_t rsdp, facp, dsdt, addr = 0, absent = 0, hold = 0, before[2], now[2], clk = 0;
	unsigned int nfacp = 0;
	uint32_t clk_len = 0;
	struct vmclock_seen clk_boot;
	uint32_t kept;
	long gsi = -1;
	int ndev;

	serial_init();
	cmdline_get_u64(cmdline, "absent", &absent);
	cmdline_get_u64(cmdline, "hold", &hold);
	rsdp = acpi_find_rsdp();
	if (!rsdp) {
		if (absent)
			guest_pass(NAME);
		guest_fail(NAME, "no RSDP");
	}
	facp = acpi_xsdt_find(phys_read64((uintptr_t)rsdp + 24), "FACP", &nfacp);
	dsdt = facp ? phys_read64((uintptr_t)facp + FADT_X_DSDT) : 0;
	if (!dsdt || !acpi_table_ok(dsdt, "DSDT"))
		guest_fail(NAME, "no FADT or DSDT");
	ndev =
	    acpi_aml_devices((const uint8_t *)(uintptr_t)dsdt + 36, acpi_table_len(dsdt) - 36, dev, MAX_DEVICES, &why);
	if (ndev < 0)
		guest_fail(NAME, why);
	for (int i = 0; i < ndev && i < MAX_DEVICES; i++) {
		size_t ol;
		const uint8_t *cid = acpi_aml_find_name(dev[i].body, dev[i].len, "_CID", &ol);

		if (is_string(cid, ol, "VM_GEN_COUNTER"))
			addr = addr_of(&dev[i]);
		cid = acpi_aml_find_name(dev[i].body, dev[i].len, "_HID", &ol);
		if (is_string(cid, ol, "ACPI0013"))
			gsi = ged_gsi(&dev[i]);
		if (is_string(cid, ol, "AMZNC10C"))
			clk = vmclock_region(&dev[i], &clk_len);
	}
	if (absent) {
		int none = !addr && gsi < 0 && !clk;

		gprintf("%s: CHECK absent: %s (ADDR 0x%llx, GED GSI %ld, VMClock 0x%llx)\n", NAME,
			none ? "PASS" : "FAIL", (unsigned long long)addr, gsi, (unsigned long long)clk);
		if (!none)
			guest_fail(NAME, "a VM Generation ID or VMClock without ACPI");
		guest_pass(NAME);
	}
	if (!addr || addr % 8 || gsi < 0 || gsi > 23)
		guest_fail(NAME, "no VM_Gen_Counter device with an 8-byte aligned ADDR, or no GED with an interrupt");
	if (!clk || clk % 4096 || clk_len < sizeof(struct vmclock_abi))
		guest_fail(NAME, "no AMZNC10C device with a page in _CRS");
	clk_boot = vmclock_boot(clk, clk_len);

	outb(0x21, 0xff); /* only the GED's interrupt: the legacy PICs masked, as virtio.c does */
	outb(0xa1, 0xff);
	idt_set_gate(GED_VECTOR, ged_isr);
	idt_set_gate(COM1_VECTOR, com1_isr);
	idt_set_gate(SPURIOUS_VECTOR, spurious_isr);
	idt_load();
	lapic_enable();
	route((unsigned int)gsi, GED_VECTOR);
	irq_enable();

	read_id(addr, before);
	gprintf("%s: device at 0x%llx, GED GSI %ld, id %016llx%016llx\n", NAME, (unsigned long long)addr, gsi,
		(unsigned long long)before[1], (unsigned long long)before[0]);
	gprintf("%s: waiting\n", NAME);
	do {
		cpu_relax();
		read_id(addr, now);
	} while (now[0] == before[0] && now[1] == before[1]);
	for (uint32_t i = 0; i < NOTIFY_POLLS && !notified; i++)
		cpu_relax();
	gprintf("%s: CHECK changed: PASS (before %016llx%016llx, after %016llx%016llx)\n", NAME,
		(unsigned long long)before[1], (unsigned long long)before[0], (unsigned long long)now[1],
		(unsigned long long)now[0]);
	gprintf("%s: CHECK notified: %s (%u interrupts on GSI %ld)\n", NAME, notified ? "PASS" : "FAIL", notified, gsi);
	if (!notified)
		guest_fail(NAME, "the ID changed without the GED's interrupt");
	vmclock_restored(clk, clk_boot);
	kept = private_pages(now, hold);
	gprintf("%s: CHECK private: %s (%u of %u pages hold this generation's ID)\n", NAME,
		kept == CLONE_PAGES ? "PASS" : "FAIL", kept, CLONE_PAGES);
	if (kept != CLONE_PAGES)
		guest_fail(NAME, "a page written after the restore changed under the guest");
	guest_pass(NAME);
}
