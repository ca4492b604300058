/* entry.S - PVH entry of the test guests: 32-bit protected mode to 64-bit long mode, then guest_main(). */
#include "brisk/abi.h"
#include "ap.h"

/*
 * PVH boot (xen/include/public/arch-x86/hvm/start_info.h, Linux
 * Documentation/x86/boot.rst "PVH"): we are entered at the address in the
 * XEN_ELFNOTE_PHYS32_ENTRY note in 32-bit protected mode, paging off, flat
 * CS/DS/ES/SS, interrupts off, EBX = physical address of struct
 * hvm_start_info, ESP undefined.
 *
 * Only the BSP comes here. Other vCPUs stay in wait-for-SIPI until a guest
 * starts them through the AP trampoline (ap.S), which reuses the GDT and
 * page tables below.
 *
 * The first instructions record the state the loader handed over
 * (guest_entry_state, guest.h) before anything changes it: the conformance
 * guests check it against the PVH ABI. Setting ESP first changes no flag.
 *
 * Nothing here loops: on hosts where KVM emulates every CPL-0 instruction
 * each one costs ~0.5 us, so the page tables are built by the assembler
 * (.data) rather than by a fill loop, and .bss is left to the loader, which
 * zero-fills p_memsz beyond p_filesz (ELF gABI, "Program Loading"; brisk
 * and QEMU both do).
 */

#define XEN_ELFNOTE_PHYS32_ENTRY 18

#define X86_CR0_PE (1 << 0)
#define X86_CR0_PG (1 << 31)
#define X86_CR4_PAE (1 << 5)
#define MSR_EFER 0xc0000080
#define EFER_LME (1 << 8)

/* Page-table entry bits (SDM Vol 3A 4.5, tables 4-15 to 4-18). */
#define PTE_P 0x001
#define PTE_RW 0x002
#define PTE_PWT 0x008
#define PTE_PCD 0x010
#define PTE_PS 0x080

/* The note QEMU's and brisk's ELF loaders look for (8-byte desc, as Linux's). */
	.pushsection .note.Xen, "a", @note
	.balign 4
	.long 4				/* namesz */
	.long 8				/* descsz */
	.long XEN_ELFNOTE_PHYS32_ENTRY
	.asciz "Xen"
	.balign 4
	.quad pvh_start
	.balign 4
	.popsection

	.section .text.entry, "ax"
	.code32
	.globl pvh_start
	.type pvh_start, @function
pvh_start:
	mov $stack_top, %esp
	pushfl
	popl guest_entry_state + ES_RFLAGS
	movl $32, guest_entry_state + ES_MODE
	movl %ebx, guest_entry_state + ES_BOOT_INFO
	mov %cr0, %eax
	movl %eax, guest_entry_state + ES_CR0
	mov %cr3, %eax
	movl %eax, guest_entry_state + ES_CR3
	mov %cr4, %eax
	movl %eax, guest_entry_state + ES_CR4
	mov $MSR_EFER, %ecx
	rdmsr
	movl %eax, guest_entry_state + ES_EFER
	movw %cs, guest_entry_state + ES_CS
	movw %ds, guest_entry_state + ES_DS
	movw %es, guest_entry_state + ES_ES
	movw %ss, guest_entry_state + ES_SS
	str guest_entry_state + ES_TR
	sgdtl guest_entry_state + ES_GDTR

	cld
	lgdt gdt_desc

	/* Long mode: PAE, CR3, EFER.LME, then paging (SDM Vol 3A 10.8.5). */
	mov %cr4, %eax
	or $X86_CR4_PAE, %eax
	mov %eax, %cr4
	mov $pml4, %eax
	mov %eax, %cr3
	mov $MSR_EFER, %ecx
	rdmsr
	or $EFER_LME, %eax
	wrmsr
	mov %cr0, %eax
	or $(X86_CR0_PG | X86_CR0_PE), %eax
	mov %eax, %cr0

	/* Compatibility mode now; a far jump to the L=1 code segment enters 64-bit mode. */
	ljmp $0x08, $start64

	.code64
start64:
	mov $0x10, %eax
	mov %eax, %ds
	mov %eax, %es
	mov %eax, %ss
	mov %eax, %fs
	mov %eax, %gs
	mov $stack_top, %esp
	mov %ebx, %edi			/* zero-extends: rdi = struct hvm_start_info * */
	call guest_main

	mov $name_entry, %edi
	mov $why_returned, %esi
	call guest_fail
1:	cli
	hlt
	jmp 1b
	.size pvh_start, . - pvh_start

	.section .rodata.entry, "a"
name_entry:
	.asciz "guest"
why_returned:
	.asciz "guest_main returned"

	/*
	 * null, 64-bit code (0x08), flat data (0x10), 32-bit code (0x18, for
	 * the AP trampoline's protected-mode step): SDM Vol 3A 3.4.5, 5.2.1.
	 */
	.balign 16
	.globl guest_gdt, guest_gdt_end
guest_gdt:
gdt:
	.quad 0
	.quad 0x00af9a000000ffff
	.quad 0x00cf92000000ffff
	.quad 0x00cf9a000000ffff
guest_gdt_end:
gdt_end:
	.if gdt_end - gdt != GUEST_GDT_SIZE
	.error "GUEST_GDT_SIZE (ap.h) does not match the GDT"
	.endif
	.balign 8
	.word 0				/* pad: the base below lands 4-byte aligned */
gdt_desc:
	.word gdt_end - gdt - 1
	.long gdt

/*
 * Identity map of 0..4 GiB with 2 MiB pages: PML4 -> one PDPT -> four PDs.
 * 3..4 GiB (the MMIO hole: boot marker, IOAPIC, LAPIC) is mapped uncached
 * (PCD|PWT, SDM Vol 3A 13.12.3), the rest write-back.
 */
	.section .data.pagetables, "aw"
	.balign 4096
	.globl guest_pml4
guest_pml4:
pml4:
	.quad pdpt + PTE_P + PTE_RW
	.fill 511, 8, 0
pdpt:
	.quad pd + 0x0000 + PTE_P + PTE_RW
	.quad pd + 0x1000 + PTE_P + PTE_RW
	.quad pd + 0x2000 + PTE_P + PTE_RW
	.quad pd + 0x3000 + PTE_P + PTE_RW
	.fill 508, 8, 0
pd:
	.set i, 0
	.rept 1536
	.quad (i << 21) + PTE_P + PTE_RW + PTE_PS
	.set i, i + 1
	.endr
	.rept 512
	.quad (i << 21) + PTE_P + PTE_RW + PTE_PS + PTE_PCD + PTE_PWT
	.set i, i + 1
	.endr

	/* In .data, not .bss: written before anything could zero .bss. */
	.section .data.entry_state, "aw"
	.balign 8
	.globl guest_entry_state
guest_entry_state:
	.skip ES_SIZE

	.section .bss.stack, "aw", @nobits
	.balign 16
stack:
	.skip 16384
stack_top:
