/* guest.h - the freestanding runtime shared by brisk's test guests (entry.S, lib.c, idt.c). */
#ifndef BRISK_GUEST_H
#define BRISK_GUEST_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "ap.h"
#include "brisk/abi.h"

/*
 * The guests run at CPL 0 in 64-bit mode on an identity map of the first
 * 4 GiB (entry.S), single-threaded, interrupts off unless a guest enables
 * them. On some hosts every CPL-0 instruction goes through KVM's emulator
 * (docs: ENVIRONMENT.md), so keep loops short and avoid int3, xsave/xrstor,
 * cmpxchg16b and SSE (the build uses -mgeneral-regs-only).
 */

/* Selectors of the GDT loaded by entry.S. */
#define GUEST_CS 0x08
#define GUEST_DS 0x10

/* PVH start of day (xen/include/public/arch-x86/hvm/start_info.h). */
struct hvm_start_info {
	uint32_t magic; /* BRISK_PVH_START_MAGIC */
	uint32_t version;
	uint32_t flags;
	uint32_t nr_modules;
	uint64_t modlist_paddr;
	uint64_t cmdline_paddr;
	uint64_t rsdp_paddr;
	uint64_t memmap_paddr; /* version >= 1 only */
	uint32_t memmap_entries;
	uint32_t reserved;
};

struct hvm_memmap_table_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type; /* 1 RAM, 2 reserved, 3 ACPI, 4 NVS, 5 unusable, ... */
	uint32_t reserved;
};

/* The guest's entry point, called by entry.S with EBX from the PVH boot. */
void guest_main(struct hvm_start_info *si);
/* Entry point of the 64-bit boot protocol guests (entry64.S): RSI = boot_params. */
void guest_main64(uint8_t *boot_params);

/*
 * What the loader handed over, recorded by the first instructions of
 * entry.S / entry64.S (offsets in ap.h). Segment selectors, TR and GDTR as
 * stored by mov/str/sgdt; in 32-bit entry the upper halves are zero.
 */
struct guest_entry_state {
	uint64_t mode;	    /* 32 (PVH) or 64 (64-bit boot protocol) */
	uint64_t boot_info; /* EBX or RSI */
	uint64_t cr0, cr3, cr4, efer, rflags;
	uint16_t cs, ds, es, ss;
	uint16_t tr, pad[3];
	uint8_t gdtr[10];
	uint8_t pad2[6];
};
_Static_assert(sizeof(struct guest_entry_state) == ES_SIZE, "entry state layout (ap.h)");
extern struct guest_entry_state guest_entry_state;

/* ---- port I/O and MMIO ---------------------------------------------------- */

static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline void outw(uint16_t port, uint16_t v)
{
	__asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(port));
}

static inline void outl(uint16_t port, uint32_t v)
{
	__asm__ volatile("outl %0, %1" : : "a"(v), "Nd"(port));
}

static inline uint8_t inb(uint16_t port)
{
	uint8_t v;

	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline uint16_t inw(uint16_t port)
{
	uint16_t v;

	__asm__ volatile("inw %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline uint32_t inl(uint16_t port)
{
	uint32_t v;

	__asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

/* One access of exactly the given width: volatile, naturally aligned. */
static inline uint8_t mmio_read8(uintptr_t addr)
{
	return *(volatile uint8_t *)addr;
}

static inline uint16_t mmio_read16(uintptr_t addr)
{
	return *(volatile uint16_t *)addr;
}

static inline uint32_t mmio_read32(uintptr_t addr)
{
	return *(volatile uint32_t *)addr;
}

static inline uint64_t mmio_read64(uintptr_t addr)
{
	return *(volatile uint64_t *)addr;
}

static inline void mmio_write8(uintptr_t addr, uint8_t v)
{
	*(volatile uint8_t *)addr = v;
}

static inline void mmio_write16(uintptr_t addr, uint16_t v)
{
	*(volatile uint16_t *)addr = v;
}

static inline void mmio_write32(uintptr_t addr, uint32_t v)
{
	*(volatile uint32_t *)addr = v;
}

static inline void mmio_write64(uintptr_t addr, uint64_t v)
{
	*(volatile uint64_t *)addr = v;
}

/*
 * Low physical memory (the BDA, the BIOS area, firmware tables). Addresses
 * below 4 KiB are constants to gcc, which then warns (-Warray-bounds) or
 * assumes address 0 is never read: phys_launder hides the value.
 */
static inline uintptr_t phys_launder(uintptr_t p)
{
	__asm__("" : "+r"(p));
	return p;
}

static inline uint8_t phys_read8(uintptr_t p)
{
	return *(const volatile uint8_t *)phys_launder(p);
}

static inline uint16_t phys_read16(uintptr_t p)
{
	return *(const volatile uint16_t *)phys_launder(p);
}

static inline uint32_t phys_read32(uintptr_t p)
{
	return *(const volatile uint32_t *)phys_launder(p);
}

static inline uint64_t phys_read64(uintptr_t p)
{
	return *(const volatile uint64_t *)phys_launder(p);
}

/* ---- CPU --------------------------------------------------------------------- */

static inline void cpuid(uint32_t leaf, uint32_t subleaf, uint32_t *a, uint32_t *b, uint32_t *c, uint32_t *d)
{
	__asm__ volatile("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d) : "a"(leaf), "c"(subleaf));
}

static inline uint64_t rdmsr(uint32_t msr)
{
	uint32_t lo, hi;

	__asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return ((uint64_t)hi << 32) | lo;
}

static inline void wrmsr(uint32_t msr, uint64_t v)
{
	__asm__ volatile("wrmsr" : : "c"(msr), "a"((uint32_t)v), "d"((uint32_t)(v >> 32)) : "memory");
}

static inline uint64_t read_cr0(void)
{
	uint64_t v;

	__asm__ volatile("mov %%cr0, %0" : "=r"(v));
	return v;
}

static inline uint64_t read_cr3(void)
{
	uint64_t v;

	__asm__ volatile("mov %%cr3, %0" : "=r"(v));
	return v;
}

static inline uint64_t read_cr4(void)
{
	uint64_t v;

	__asm__ volatile("mov %%cr4, %0" : "=r"(v));
	return v;
}

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

static inline void cpu_relax(void)
{
	__asm__ volatile("pause" ::: "memory");
}

static inline void irq_enable(void)
{
	__asm__ volatile("sti" ::: "memory");
}

static inline void irq_disable(void)
{
	__asm__ volatile("cli" ::: "memory");
}

/* ---- serial console (8250/16550A at BRISK_COM1_PORT) ---------------------------- */

/* 8N1, divisor 1 (115200 baud), FIFOs on, interrupts off, DTR|RTS. */
void serial_init(void);
/* Wait, bounded, for LSR.THRE: room for one byte, or 16 after serial_init. */
void serial_wait_tx(void);
/* Transmit, waiting (bounded) for THRE; '\n' is sent as is, no CR added. */
void serial_putc(char c);
void serial_puts(const char *s);
/* Like serial_puts for n bytes; after serial_init, one LSR read per 16 bytes. */
void serial_write(const char *buf, size_t n);
/* Next received byte; blocks (polls LSR.DR) until one arrives. */
int serial_getc(void);
/* Next received byte, or -1 when the receiver is empty. */
int serial_trygetc(void);

/*
 * printf subset: %s %c %d %u %x %p with the l and ll length modifiers,
 * a field width, '0' padding and '%%'. Output goes to the serial console.
 */
__attribute__((format(printf, 1, 2))) void gprintf(const char *fmt, ...);
void gvprintf(const char *fmt, va_list ap);

/* ---- boot markers, exit and reset ---------------------------------------------- */

/* Record a boot marker: outl to BRISK_BOOTMARK_PORT. */
void bootmark(uint32_t v);
/* Record a boot marker: 32-bit store to BRISK_BOOTMARK_MMIO. */
void bootmark_mmio(uint32_t v);
/* Write v to the debug-exit port (host status ((v & 0x7f) << 1) | 1); never returns. */
__attribute__((noreturn)) void guest_exit(unsigned int v);
/*
 * Ask the i8042 to pulse reset (brisk exit status 0). Where no i8042 answers
 * (QEMU microvm) fall back to guest_exit(0), status 1. Never returns.
 */
__attribute__((noreturn)) void guest_reset(void);
/* Print "NAME: PASS" and guest_reset(). */
__attribute__((noreturn)) void guest_pass(const char *name);
/* Print "NAME: FAIL: why" and guest_exit(0x7f): host status 255. */
__attribute__((noreturn)) void guest_fail(const char *name, const char *why);
/* A short bounded wait for an asynchronous reset to take effect. */
void guest_settle(void);

/* ---- strings and the command line -------------------------------------------- */

size_t strlen(const char *s);
int strcmp(const char *a, const char *b);
int strncmp(const char *a, const char *b, size_t n);
int memcmp(const void *a, const void *b, size_t n);
void *memcpy(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);

/* The PVH command line, or "" when there is none or si is not a PVH start_info. */
const char *guest_cmdline(const struct hvm_start_info *si);
/*
 * Find the space-separated token "key=N" (N decimal or 0x-prefixed hex) in
 * cmdline. Returns 0 and stores N in *out; -1 when the key is absent or N is
 * malformed or overflows (then *out is unchanged).
 */
int cmdline_get_u64(const char *cmdline, const char *key, uint64_t *out);

/* ---- interrupts (idt.c) ----------------------------------------------------------- */

/* What the CPU pushes for an interrupt without error code (SDM Vol 3A 6.14.2). */
struct interrupt_frame {
	uint64_t rip;
	uint64_t cs;
	uint64_t rflags;
	uint64_t rsp;
	uint64_t ss;
};

/*
 * Handlers are C functions with gcc's interrupt attribute: they save every
 * register they use and return with iretq.
 */
typedef void (*irq_handler_t)(struct interrupt_frame *frame);
#define GUEST_ISR __attribute__((interrupt))

/* Fill vector vec of the runtime's IDT with a 64-bit interrupt gate (DPL 0). */
void idt_set_gate(unsigned int vec, irq_handler_t handler);
/* lidt the runtime's 256-entry IDT. */
void idt_load(void);
/* lidt a zero-limit IDT: every exception then escalates to a triple fault. */
void idt_load_empty(void);

/* ---- local APIC and SMP bring-up (mp.c, ap.S) ------------------------------------ */

/* Software-enable the xAPIC (SVR bit 8, spurious vector 0xff; SDM Vol 3A 10.9). */
void lapic_enable(void);
/* This CPU's xAPIC ID (LAPIC ID register bits 31:24). */
unsigned int lapic_id(void);
/*
 * Start the AP with xAPIC ID apic_id: copy the trampoline to
 * GUEST_AP_TRAMPOLINE, give it stack `slot` (< GUEST_AP_MAX), send
 * INIT-SIPI-SIPI. The AP calls ap_main(its APIC ID) in long mode on the
 * runtime's GDT and page tables, with interrupts off; ap_main must not
 * return (if it does, the AP halts). One AP at a time: wait for it before
 * starting the next, since the stack is handed over in a shared variable.
 * Returns 0, or -1 if the ICR never reported the IPIs as sent.
 */
int smp_start_ap(unsigned int apic_id, unsigned int slot);
/* What an AP reported from long mode (mp.c's ap_main). */
struct ap_arrival {
	unsigned int apic_id; /* its xAPIC ID, read by the trampoline */
	uint64_t efer, cr0;
	int long_mode; /* EFER.LMA and CR0.PG both set */
};
/*
 * smp_start_ap, then wait (bounded) for the AP to report; *a is what it
 * reported. Returns 0, or -1 if the IPIs failed or it never arrived.
 */
int smp_bring_up_ap(unsigned int apic_id, unsigned int slot, struct ap_arrival *a);
/* The AP side of smp_bring_up_ap (mp.c): records its arrival and halts. */
void ap_main(unsigned int apic_id);

/* Sum of the n bytes at physical address p, modulo 256 (MP and ACPI checksums). */
uint8_t phys_sum(uintptr_t p, size_t n);

/* ---- Intel MultiProcessor Specification 1.4 tables (mp.c) ------------------------- */

#define MP_MAX_CPUS 255

/* What mp_parse found; every field is filled as far as parsing got. */
struct mp_info {
	uint64_t fps_addr;	 /* floating pointer structure */
	uint64_t config_addr;	 /* configuration table */
	unsigned int fps_rev;	 /* spec revision in the floating pointer */
	unsigned int config_len; /* base table length */
	unsigned int entries;	 /* base table entry count field */
	unsigned int walked;	 /* entries found walking the base table length */
	uint32_t lapic_addr;
	unsigned int ncpus;
	uint8_t apic_id[MP_MAX_CPUS]; /* enabled processors, table order */
	unsigned int nbsp;	      /* processors flagged BP */
	uint8_t bsp_id;
	unsigned int nbus, nioapic, nlint;
	int isa_bus; /* bus ID of the "ISA" bus, -1 if none */
	uint8_t ioapic_id, ioapic_ver;
	uint32_t ioapic_addr;
	uint32_t isa_irqs; /* bit n: an INT entry routes ISA IRQ n to the I/O APIC */
	uint8_t isa_pin[16];
};

/*
 * Find the MP floating pointer where Linux's default_find_smp_config looks
 * (bottom 1 KiB, 639 KiB, 0xf0000-0xfffff, the EBDA named by the BDA),
 * verify both checksums and walk the base table (bounded by its length). Returns 0, or -1 with *why set to a static
 * string.
 */
int mp_parse(struct mp_info *mp, const char **why);

/* ---- ACPI tables (acpi.c) ---------------------------------------------------------------- */

#define ACPI_RSDP_SCAN	   0xe0000  /* the legacy RSDP scan window (ACPI 6.3 section 5.2.5.1) */
#define ACPI_RSDP_SCAN_END 0x100000 /* ... on 16-byte boundaries, up to 1 MiB */
#define ACPI_RSDP_LEN	   36	    /* revision 2: the extended checksum covers these */
#define ACPI_HEADER_LEN	   36	    /* System Description Table Header (5.2.6) */
#define ACPI_TABLE_MAX	   0x10000  /* a longer table is taken as corrupt */

/*
 * An RSDP at p: "RSD PTR ", bytes 0..19 sum to 0, and for revision 2 and
 * later all ACPI_RSDP_LEN bytes sum to 0. Returns 1 or 0.
 */
int acpi_rsdp_valid(uintptr_t p);
/* The first valid RSDP of the legacy scan, or 0. */
uint64_t acpi_find_rsdp(void);
/* The 4-byte signature at p equals sig. */
int acpi_sig_is(uint64_t p, const char *sig);
/* The header's length when p is nonzero and the table lies below 4 GiB and in [36, ACPI_TABLE_MAX] bytes; else 0. */
uint32_t acpi_table_len(uint64_t p);
/* A table at p with signature sig (NULL: any), a sane length, and all its bytes summing to 0. */
int acpi_table_ok(uint64_t p, const char *sig);
/* Entries of the XSDT at xsdt (0 when its length is not sane), and entry i (64-bit address). */
unsigned int acpi_xsdt_count(uint64_t xsdt);
uint64_t acpi_xsdt_entry(uint64_t xsdt, unsigned int i);
/* The first table the XSDT lists with signature sig, or 0; *count (if not NULL) = how many it lists. */
uint64_t acpi_xsdt_find(uint64_t xsdt, const char *sig, unsigned int *count);

/* A Device (5B 82) found in AML: its last NameSeg and its TermList. */
struct acpi_aml_device {
	char name[5];
	const uint8_t *body;
	size_t len;
};
/*
 * PkgLength at p[0..n) (20.2.4): returns the bytes it takes (1..4), or 0 when
 * malformed; *value is the length it encodes (which counts itself).
 */
size_t acpi_aml_pkglen(const uint8_t *p, size_t n, size_t *value);
/* An integer data object (Zero, One, Ones, Byte/Word/DWord/QWordPrefix): returns its length or 0. */
size_t acpi_aml_int(const uint8_t *p, size_t n, uint64_t *v);
/*
 * Walk the TermList aml[0..len) (a definition block after its header):
 * Name, Scope, Device and Method, into every Scope and Device, every
 * PkgLength within its parent. Devices go into dev[0..max) in AML order.
 * Returns how many Devices there are (may exceed max), or -1 with *why on
 * anything else (an opcode brisk's DSDT does not use, a length overrun).
 */
int acpi_aml_devices(const uint8_t *aml, size_t len, struct acpi_aml_device *dev, unsigned int max, const char **why);
/*
 * The data object of Name(SEG, ...) among the terms of p[0..n) at that level
 * (not inside a Scope or Device), or NULL; *objlen = its encoded length.
 */
const uint8_t *acpi_aml_find_name(const uint8_t *p, size_t n, const char *seg, size_t *objlen);

/* ---- conformance reporting (conf.c) --------------------------------------------------- */

/* Print "NAME: CHECK what: PASS (value)" or "... FAIL (value, expected ...)"; counts failures. */
__attribute__((format(printf, 3, 4))) void conf_check(int ok, const char *what, const char *fmt, ...);
void conf_begin(const char *name);
/* Print the summary line "NAME: N checks, M failed"; returns M. */
unsigned int conf_summary(void);
/* Overall verdict: guest_pass or guest_fail, after the summary line. */
__attribute__((noreturn)) void conf_end(void);
/* FNV-1a, 32 bits (the pytest computes the same over the initrd file). */
uint32_t fnv1a32(const void *p, size_t n);

struct memmap_view {
	uint64_t addr, size;
	uint32_t type;
};
/* Check a memory map: sorted, non-overlapping, nothing in the MMIO hole, RAM total = expected_ram. */
void conf_check_memmap(const struct memmap_view *e, unsigned int n, uint64_t expected_ram);
/* Check the MP table against cpus= (from the command line). */
void conf_check_mptable(unsigned int cpus);
enum conf_seg { CONF_SEG_CODE32, CONF_SEG_CODE64, CONF_SEG_DATA };
/* Check the entry GDT's descriptor for `sel` is a flat segment of `kind` (64-bit code: L=1, no base/limit check). */
void conf_check_segment(const struct guest_entry_state *es, const char *what, uint16_t sel, enum conf_seg kind);
/*
 * Check the RSDP address the loader handed over (PVH start_info.rsdp_paddr,
 * boot_params.acpi_rsdp_addr) against the legacy scan: equal and nonzero;
 * both 0 / not found when the command line has acpi_off=1 (brisk --acpi off).
 */
void conf_check_rsdp(const char *cmdline, uint64_t handed);
/* Check initrd bytes [addr, addr+size) against initrd_size= and initrd_sum= from the command line. */
void conf_check_initrd(const char *cmdline, uint64_t addr, uint64_t size);

#endif
