/* kbd.c - the i8042 keyboard as Linux drives it: Ctrl+Alt+Del (the API's SendCtrlAltDel) on IRQ 1, or polled. */
/*
 * Command line (PVH): xlate=0|1 (default 1) is the command byte's XLATE,
 * which picks scan code set 1 or set 2; kbdint=0|1 (default 1) its KBDINT.
 *
 * kbdint=1: IRQ 1 is routed as the MP table says (ISA IRQ 1 -> its I/O APIC
 * pin), and each interrupt reads one byte, after checking OBF and AUXDATA,
 * as Linux's i8042_interrupt(). After "kbd: ready" the guest halts until
 * the whole sequence (Ctrl, Alt, Delete pressed, then released) has come,
 * prints "kbd: PASS ctrl-alt-del" and resets (status 0), or FAIL with the
 * bytes it saw (status 255).
 *
 * kbdint=0: nothing may interrupt. After "kbd: ready" the guest waits for
 * a byte on its serial input (the host's go, once its keys are queued),
 * then polls the status port and reads every waiting byte: they must be
 * whole sequences, at least one ("kbd: PASS polled N sequences").
 */
#include "guest.h"

#define NAME		"kbd"
#define KBD_VECTOR	0x31
#define SPURIOUS_VECTOR 0xff
#define MAX_BYTES	64

/* i8042 (Linux drivers/input/serio/i8042.h names). */
#define STR_OBF	       0x01
#define STR_AUXDATA    0x20
#define CTR_KBDINT     0x01
#define CTR_SYS	       0x04
#define CTR_XLATE      0x40
#define CMD_READ_CTR   0x20
#define CMD_WRITE_CTR  0x60
#define I8042_BUF_SIZE 16 /* a flush reads at most this many bytes, as Linux's i8042_flush() */

/* xAPIC and IOAPIC registers (SDM Vol 3A 12.4.1; 82093AA datasheet 3.1, 3.2.4). */
#define LAPIC_EOI	   0x0b0
#define IOAPIC_REGSEL	   0x00
#define IOAPIC_WIN	   0x10
#define IOAPIC_REDTBL(pin) (0x10 + 2 * (pin))

/* Ctrl, Alt, Delete pressed then released (Microsoft Keyboard Scan Code Specification 1.3a, appendix A). */
static const uint8_t set1[] = {0x1d, 0x38, 0xe0, 0x53, 0xe0, 0xd3, 0xb8, 0x9d};
static const uint8_t set2[] = {0x14, 0x11, 0xe0, 0x71, 0xe0, 0xf0, 0x71, 0xf0, 0x11, 0xf0, 0x14};

static volatile uint8_t got[MAX_BYTES];
static volatile unsigned int nr_got, nr_irqs, nr_empty, nr_aux;

static void ioapic_write(uint32_t base, uint32_t reg, uint32_t v)
{
	mmio_write32(base + IOAPIC_REGSEL, reg);
	mmio_write32(base + IOAPIC_WIN, v);
}

/* One byte from the output buffer, if it holds one: OBF checked first, AUXDATA must be clear. */
static int take_byte(void)
{
	uint8_t st = inb(BRISK_I8042_CMD_PORT), b;

	if (!(st & STR_OBF))
		return 0;
	if (st & STR_AUXDATA)
		nr_aux = nr_aux + 1;
	b = inb(BRISK_I8042_DATA_PORT);
	if (nr_got < MAX_BYTES)
		got[nr_got] = b;
	nr_got = nr_got + 1;
	return 1;
}

static GUEST_ISR void kbd_isr(struct interrupt_frame *frame)
{
	(void)frame;
	nr_irqs = nr_irqs + 1;
	if (!take_byte())
		nr_empty = nr_empty + 1;
	mmio_write32(BRISK_LAPIC_BASE + LAPIC_EOI, 0);
}

static GUEST_ISR void spurious_isr(struct interrupt_frame *frame)
{
	(void)frame;
}

static __attribute__((noreturn)) void fail_with_bytes(const char *why)
{
	unsigned int n = nr_got < MAX_BYTES ? nr_got : MAX_BYTES;

	gprintf("%s: saw %u bytes:", NAME, nr_got);
	for (unsigned int i = 0; i < n; i++)
		gprintf(" %02x", got[i]);
	gprintf(" (%u interrupts, %u without data, %u with AUXDATA)\n", nr_irqs, nr_empty, nr_aux);
	guest_fail(NAME, why);
}

/* Whether got[] holds exactly `reps` copies of seq. */
static int got_sequences(const uint8_t *seq, unsigned int len, unsigned int reps)
{
	if (nr_got != len * reps)
		return 0;
	for (unsigned int i = 0; i < nr_got; i++)
		if (got[i] != seq[i % len])
			return 0;
	return 1;
}

/* The command byte through 0x64/0x60, read back; drains what was waiting first (bounded, as Linux). */
static void set_ctr(uint8_t ctr)
{
	for (unsigned int i = 0; i < I8042_BUF_SIZE && (inb(BRISK_I8042_CMD_PORT) & STR_OBF); i++)
		(void)inb(BRISK_I8042_DATA_PORT);
	outb(BRISK_I8042_CMD_PORT, CMD_WRITE_CTR);
	outb(BRISK_I8042_DATA_PORT, ctr);
	outb(BRISK_I8042_CMD_PORT, CMD_READ_CTR);
	if (!(inb(BRISK_I8042_CMD_PORT) & STR_OBF) || inb(BRISK_I8042_DATA_PORT) != ctr)
		guest_fail(NAME, "command byte did not read back");
}

/* ISA IRQ 1 -> its I/O APIC pin (MP table), fixed, physical, edge, active high, to this CPU. */
static void route_irq1(void)
{
	struct mp_info mp;
	const char *why = "";

	if (mp_parse(&mp, &why) != 0)
		guest_fail(NAME, why);
	if (!(mp.isa_irqs & (1u << 1)))
		guest_fail(NAME, "the MP table does not route ISA IRQ 1");
	outb(0x21, 0xff); /* legacy PICs masked: only the I/O APIC delivers */
	outb(0xa1, 0xff);
	lapic_enable();
	ioapic_write(mp.ioapic_addr, IOAPIC_REDTBL(mp.isa_pin[1]) + 1, lapic_id() << 24);
	ioapic_write(mp.ioapic_addr, IOAPIC_REDTBL(mp.isa_pin[1]), KBD_VECTOR);
	gprintf("%s: ISA IRQ 1 on I/O APIC pin %u, vector 0x%x\n", NAME, mp.isa_pin[1], KBD_VECTOR);
}

static __attribute__((noreturn)) void run_irq(const uint8_t *seq, unsigned int len)
{
	gprintf("%s: ready\n", NAME);
	irq_disable();
	while (nr_got < len) /* each interrupt wakes the hlt; sti's shadow closes the race */
		__asm__ volatile("sti; hlt; cli" ::: "memory");
	if (inb(BRISK_I8042_CMD_PORT) & STR_OBF)
		fail_with_bytes("more bytes than the sequence");
	if (!got_sequences(seq, len, 1) || nr_empty || nr_aux || nr_irqs != len)
		fail_with_bytes("not the Ctrl+Alt+Del sequence, one byte per interrupt");
	gprintf("%s: PASS ctrl-alt-del (%u bytes, %u interrupts)\n", NAME, nr_got, nr_irqs);
	guest_reset();
}

static __attribute__((noreturn)) void run_polled(const uint8_t *seq, unsigned int len)
{
	gprintf("%s: ready\n", NAME);
	irq_enable(); /* an IRQ 1 now would be counted: none may come */
	(void)serial_getc();
	for (unsigned int i = 0; i < MAX_BYTES && take_byte(); i++)
		;
	irq_disable();
	if (nr_irqs)
		fail_with_bytes("an interrupt although KBDINT is clear");
	for (unsigned int reps = 1; reps * len <= MAX_BYTES; reps++) {
		if (got_sequences(seq, len, reps) && !nr_aux) {
			gprintf("%s: PASS polled %u sequences\n", NAME, reps);
			guest_reset();
		}
	}
	fail_with_bytes("not whole Ctrl+Alt+Del sequences");
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	uint64_t xlate = 1, kbdint = 1;

	serial_init();
	cmdline_get_u64(cmdline, "xlate", &xlate);
	cmdline_get_u64(cmdline, "kbdint", &kbdint);
	idt_set_gate(KBD_VECTOR, kbd_isr);
	idt_set_gate(SPURIOUS_VECTOR, spurious_isr);
	idt_load();
	route_irq1();
	set_ctr((uint8_t)(CTR_SYS | (xlate ? CTR_XLATE : 0) | (kbdint ? CTR_KBDINT : 0)));
	gprintf("%s: xlate=%u kbdint=%u\n", NAME, (unsigned int)!!xlate, (unsigned int)!!kbdint);
	if (kbdint)
		run_irq(xlate ? set1 : set2, xlate ? sizeof(set1) : sizeof(set2));
	run_polled(xlate ? set1 : set2, xlate ? sizeof(set1) : sizeof(set2));
}
