/* ap.h - constants shared by the AP trampoline (ap.S), the entry code and the C runtime (mp.c). */
#ifndef BRISK_GUEST_AP_H
#define BRISK_GUEST_AP_H

/*
 * Where the BSP copies the AP trampoline: SIPI vector 0x10 starts an AP in
 * real mode at CS:IP = 0x1000:0000 (SDM Vol 3A 8.4.4.1, 10.6.1). 0x10000 is
 * plain low RAM in brisk's layout (below the command line at 0x20000, above
 * the start info, zero page, boot stack and page tables at 0x6000..0xefff,
 * none of which a running test guest needs again except start_info) and is
 * free under QEMU's PVH boot as well.
 */
#define GUEST_AP_TRAMPOLINE 0x10000
#define GUEST_AP_VECTOR	    (GUEST_AP_TRAMPOLINE >> 12)
#define GUEST_AP_MAX	    64	 /* APs the runtime gives a stack */
#define GUEST_AP_STACK	    4096 /* bytes of stack per AP */
#define GUEST_CS32	    0x18 /* 32-bit flat code in the runtime's GDT (entry.S) */
#define GUEST_GDT_SIZE	    32	 /* the runtime's GDT: 4 descriptors */

/* struct guest_entry_state (guest.h): offsets for the entry code. */
#define ES_MODE	     0 /* 32: PVH entry, 64: 64-bit boot protocol entry */
#define ES_BOOT_INFO 8 /* EBX (PVH) or RSI (64-bit) */
#define ES_CR0	     16
#define ES_CR3	     24
#define ES_CR4	     32
#define ES_EFER	     40
#define ES_RFLAGS    48
#define ES_CS	     56
#define ES_DS	     58
#define ES_ES	     60
#define ES_SS	     62
#define ES_TR	     64
#define ES_GDTR	     72 /* sgdt: 2-byte limit, then the base (4 bytes in 32-bit code, 8 in 64-bit) */
#define ES_SIZE	     88

#endif
