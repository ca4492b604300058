/* ap.S - AP trampoline: real mode at the SIPI vector -> protected mode -> long mode -> ap_main(apic_id). */
#include "brisk/abi.h"
#include "ap.h"

#define X86_CR0_PE (1 << 0)
#define X86_CR0_PG (1 << 31)
#define X86_CR4_PAE (1 << 5)
#define MSR_EFER 0xc0000080
#define EFER_LME (1 << 8)
#define LAPIC_ID 0x20

/*
 * An AP leaves wait-for-SIPI in real mode at CS = vector << 8, IP = 0
 * (SDM Vol 3A 8.4.4.1 "Typical BSP Initialization Sequence", 9.1.4). The
 * code between ap_tramp_start and ap_tramp_end is copied by the BSP to
 * GUEST_AP_TRAMPOLINE and runs only there, so every address inside it is
 * computed from GUEST_AP_TRAMPOLINE; everything it reaches outside (GDT,
 * page tables, ap_start64) is the BSP's, above 1 MiB.
 *
 * Steps, as for the BSP in entry.S (SDM Vol 3A 9.9.1, 10.8.5): lgdt the
 * runtime's GDT, CR0.PE and a far jump to 32-bit code, PAE + CR3 + EFER.LME
 * + CR0.PG, a far jump to 64-bit code. The stack is the one the BSP put in
 * ap_stack_top before sending the SIPI (mp.c starts one AP at a time).
 */
	.section .rodata.ap_tramp, "a"
	.code16
	.globl ap_tramp_start, ap_tramp_end
ap_tramp_start:
	cli
	cld
	mov %cs, %ax
	mov %ax, %ds
	lgdtl tramp_gdt_desc - ap_tramp_start
	mov %cr0, %eax
	or $X86_CR0_PE, %eax
	mov %eax, %cr0
	ljmpl $GUEST_CS32, $(GUEST_AP_TRAMPOLINE + tramp32 - ap_tramp_start)

	.code32
tramp32:
	mov $0x10, %eax
	mov %eax, %ds
	mov %eax, %es
	mov %eax, %ss
	mov %cr4, %eax
	or $X86_CR4_PAE, %eax
	mov %eax, %cr4
	mov $guest_pml4, %eax
	mov %eax, %cr3
	mov $MSR_EFER, %ecx
	rdmsr
	or $EFER_LME, %eax
	wrmsr
	mov %cr0, %eax
	or $(X86_CR0_PG | X86_CR0_PE), %eax
	mov %eax, %cr0
	ljmp $0x08, $ap_start64

	.balign 8
	.word 0
tramp_gdt_desc:
	.word GUEST_GDT_SIZE - 1
	.long guest_gdt
ap_tramp_end:

	.text
	.code64
	.weak ap_main
ap_start64:
	mov $0x10, %eax
	mov %eax, %ds
	mov %eax, %es
	mov %eax, %ss
	mov %eax, %fs
	mov %eax, %gs
	mov ap_stack_top(%rip), %rsp
	mov $(BRISK_LAPIC_BASE + LAPIC_ID), %eax	/* zero-extended: the 0xfee00020 MMIO */
	mov (%rax), %edi
	shr $24, %edi				/* xAPIC ID, bits 31:24 (SDM Vol 3A 10.4.6) */
	call ap_main
1:	cli
	hlt
	jmp 1b

	.section .note.GNU-stack, "", @progbits
