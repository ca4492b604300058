/* entry64.S - 64-bit boot protocol entry of the conf-elf64 / conf-bzimage guests: record the state, then guest_main64(). */
#include "ap.h"

#define MSR_EFER 0xc0000080

/*
 * Linux Documentation/arch/x86/boot.rst, "64-bit Boot Protocol": entered in
 * 64-bit mode with paging on and an identity map of the kernel, boot_params,
 * command line and initrd; CS = __BOOT_CS (0x10), DS/ES/SS = __BOOT_DS
 * (0x18); interrupts off; RSI = boot_params. Everything below is
 * RIP-relative: the bzImage variant runs wherever the loader put it. We
 * keep the loader's GDT and page tables (no runtime GDT/IDT/AP support in
 * these guests) and zero our own .bss, which a bzImage loader does not.
 */
	.section .text.entry, "ax"
	.code64
	.globl entry64
	.type entry64, @function
entry64:
	lea stack_top(%rip), %rsp
	pushfq
	popq guest_entry_state + ES_RFLAGS(%rip)
	movq $64, guest_entry_state + ES_MODE(%rip)
	mov %rsi, guest_entry_state + ES_BOOT_INFO(%rip)
	mov %cr0, %rax
	mov %rax, guest_entry_state + ES_CR0(%rip)
	mov %cr3, %rax
	mov %rax, guest_entry_state + ES_CR3(%rip)
	mov %cr4, %rax
	mov %rax, guest_entry_state + ES_CR4(%rip)
	mov $MSR_EFER, %ecx
	rdmsr
	mov %eax, guest_entry_state + ES_EFER(%rip)
	mov %edx, guest_entry_state + ES_EFER + 4(%rip)
	movw %cs, guest_entry_state + ES_CS(%rip)
	movw %ds, guest_entry_state + ES_DS(%rip)
	movw %es, guest_entry_state + ES_ES(%rip)
	movw %ss, guest_entry_state + ES_SS(%rip)
	str guest_entry_state + ES_TR(%rip)
	sgdt guest_entry_state + ES_GDTR(%rip)

	cld
	lea __bss_start(%rip), %rdi
	lea __bss_end(%rip), %rcx
	sub %rdi, %rcx
	xor %eax, %eax
	rep stosb
	mov guest_entry_state + ES_BOOT_INFO(%rip), %rdi
	call guest_main64
1:	cli
	hlt
	jmp 1b
	.size entry64, . - entry64

	/* 32-bit entry (code32_start) of the bzImage payload: not supported, halt. */
	.section .text.head32, "ax"
	.code32
1:	cli
	hlt
	jmp 1b

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

	.section .note.GNU-stack, "", @progbits
