/* demo_guest.S - embeds the built-in demo guest (build/guests/demo.elf) in the brisk binary. */
	.section .rodata
	.balign 64
	.globl brisk_demo_guest
	.globl brisk_demo_guest_end
brisk_demo_guest:
	.incbin DEMO_GUEST
brisk_demo_guest_end:
	.section .note.GNU-stack,"",@progbits
