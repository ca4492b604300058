/* idt.c - a 256-entry 64-bit IDT for the test guests that take interrupts or exceptions. */
#include "guest.h"

/* 64-bit IDT gate descriptor (SDM Vol 3A 6.14.1, figure 6-8). */
struct idt_gate {
	uint16_t offset_lo;
	uint16_t selector;
	uint8_t ist;
	uint8_t type_attr; /* P, DPL, type */
	uint16_t offset_mid;
	uint32_t offset_hi;
	uint32_t reserved;
} __attribute__((packed));

struct idt_ptr {
	uint16_t limit;
	uint64_t base;
} __attribute__((packed));

#define GATE_INTERRUPT_DPL0 0x8e /* present, DPL 0, 64-bit interrupt gate (IF cleared on entry) */

static struct idt_gate idt[256] __attribute__((aligned(16)));

void idt_set_gate(unsigned int vec, irq_handler_t handler)
{
	uintptr_t a = (uintptr_t)handler;
	struct idt_gate *g = &idt[vec & 0xff];

	g->offset_lo = (uint16_t)a;
	g->selector = GUEST_CS;
	g->ist = 0;
	g->type_attr = GATE_INTERRUPT_DPL0;
	g->offset_mid = (uint16_t)(a >> 16);
	g->offset_hi = (uint32_t)(a >> 32);
	g->reserved = 0;
}

static void lidt(uint16_t limit, const void *base)
{
	struct idt_ptr p = {.limit = limit, .base = (uintptr_t)base};

	__asm__ volatile("lidt %0" : : "m"(p) : "memory");
}

void idt_load(void)
{
	lidt(sizeof(idt) - 1, idt);
}

/*
 * Limit 0 means no vector is inside the IDT: an exception then raises #GP,
 * which cannot be delivered either, so #DF, and a fault while delivering #DF
 * shuts the processor down (SDM Vol 3A 6.15, "Interrupt 8").
 */
void idt_load_empty(void)
{
	lidt(0, idt);
}
