/* serialirq.c - the UART THRE interrupt must arrive via IOAPIC pin 4 and the LAPIC, as Linux 8250 expects. */
#include "guest.h"

#define SERIAL_VECTOR	0x24
#define SPURIOUS_VECTOR 0xff
#define WAIT_LOOPS	1000000

/* 8250 registers (PC16550D datasheet). */
#define UART_IER	      1
#define UART_IIR	      2
#define UART_MCR	      4
#define UART_IER_THRI	      0x02
#define UART_MCR_DTR_RTS_OUT2 0x0b /* OUT2 gates the IRQ line on PCs; Linux sets it */

/* xAPIC registers (SDM Vol 3A 12.4.1, table 12-1). */
#define LAPIC_ID	 0x020
#define LAPIC_EOI	 0x0b0
#define LAPIC_SVR	 0x0f0
#define LAPIC_SVR_ENABLE 0x100

/* IOAPIC (82093AA datasheet 3.1, 3.2.4). */
#define IOAPIC_REGSEL	   0x00
#define IOAPIC_WIN	   0x10
#define IOAPIC_REDTBL(pin) (0x10 + 2 * (pin))

static volatile uint32_t irq_count;
static volatile uint8_t irq_iir;

static uint32_t lapic_read(uint32_t reg)
{
	return mmio_read32(BRISK_LAPIC_BASE + reg);
}

static void lapic_write(uint32_t reg, uint32_t v)
{
	mmio_write32(BRISK_LAPIC_BASE + reg, v);
}

static void ioapic_write(uint32_t reg, uint32_t v)
{
	mmio_write32(BRISK_IOAPIC_BASE + IOAPIC_REGSEL, reg);
	mmio_write32(BRISK_IOAPIC_BASE + IOAPIC_WIN, v);
}

static GUEST_ISR void serial_isr(struct interrupt_frame *frame)
{
	(void)frame;
	/* Reading IIR while THRE is the pending source clears it (PC16550D, table 4). */
	irq_iir = inb(BRISK_COM1_PORT + UART_IIR);
	outb(BRISK_COM1_PORT + UART_IER, 0);
	irq_count = irq_count + 1;
	lapic_write(LAPIC_EOI, 0);
}

/* A spurious interrupt needs no EOI (SDM Vol 3A 12.9). */
static GUEST_ISR void spurious_isr(struct interrupt_frame *frame)
{
	(void)frame;
}

void guest_main(struct hvm_start_info *si)
{
	uint32_t apic_id, i;

	(void)si;
	serial_init();
	idt_set_gate(SERIAL_VECTOR, serial_isr);
	idt_set_gate(SPURIOUS_VECTOR, spurious_isr);
	idt_load();

	/* The legacy PICs stay masked so that only the IOAPIC routes pin 4. */
	outb(0x21, 0xff);
	outb(0xa1, 0xff);
	lapic_write(LAPIC_SVR, LAPIC_SVR_ENABLE | SPURIOUS_VECTOR);
	apic_id = lapic_read(LAPIC_ID) >> 24;
	/* Fixed delivery, physical destination, active high, edge, unmasked: high half first. */
	ioapic_write(IOAPIC_REDTBL(BRISK_COM1_IRQ) + 1, apic_id << 24);
	ioapic_write(IOAPIC_REDTBL(BRISK_COM1_IRQ), SERIAL_VECTOR);

	outb(BRISK_COM1_PORT + UART_MCR, UART_MCR_DTR_RTS_OUT2);
	outb(BRISK_COM1_PORT + UART_IER, UART_IER_THRI);
	irq_enable();
	for (i = 0; i < WAIT_LOOPS && !irq_count; i++)
		cpu_relax();
	irq_disable();
	outb(BRISK_COM1_PORT + UART_IER, 0);

	gprintf("serialirq: apic id %u, interrupts %u after %u polls, iir 0x%02x\n", apic_id, irq_count, i, irq_iir);
	if (!irq_count)
		guest_fail("serialirq", "no interrupt on vector 0x24");
	if ((irq_iir & 0x0f) != 0x02)
		guest_fail("serialirq", "IIR does not report THR empty");
	guest_pass("serialirq");
}
