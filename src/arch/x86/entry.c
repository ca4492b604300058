/* entry.c - the boot vCPU's entry state: boot GDT, identity page tables, and the registers KVM starts from. */
#include <errno.h>
#include <linux/kvm.h>
#include <string.h>

#include "brisk/boot.h"
#include "brisk/errmsg.h"
#include "brisk/kvm.h"
#include "brisk/layout.h"
#include "brisk/mem.h"
#include "x86_boot.h"

/* Intel SDM Vol. 3A 2.5 (control registers) and 2.2.1 (EFER). */
#define CR0_PE	     (1ULL << 0)
#define CR0_ET	     (1ULL << 4)
#define CR0_PG	     (1ULL << 31)
#define CR4_PAE	     (1ULL << 5)
#define EFER_LME     (1ULL << 8)
#define EFER_LMA     (1ULL << 10)
#define RFLAGS_FIXED 0x2ULL /* bit 1 is always set; IF and VM clear */

/* Page-table entry bits (SDM Vol. 3A 4.5, tables 4-15..4-18). */
#define PTE_P	 (1ULL << 0)
#define PTE_RW	 (1ULL << 1)
#define PTE_PS	 (1ULL << 7)
#define PD_COUNT 4 /* 4 page directories x 512 x 2 MiB = 4 GiB */

_Static_assert(LAYOUT_GDT_SIZE == X86_GDT_ENTRIES * 8, "boot GDT holds X86_GDT_ENTRIES descriptors");
_Static_assert(LAYOUT_PAGETABLES_SIZE == (2 + PD_COUNT) * 0x1000, "PML4 + PDPT + PD_COUNT PDs");

/*
 * A segment descriptor (SDM Vol. 3A 3.4.5): `flags` packs the access byte
 * (bits 0-7) and the G/DB/L/AVL nibble (bits 12-15), as Firecracker's
 * gdt_entry() does.
 */
static uint64_t gdt_desc(uint16_t flags, uint32_t base, uint32_t limit)
{
	return ((uint64_t)(base & 0xff000000u) << 32) | ((uint64_t)(flags & 0xf0ffu) << 40) |
	       ((uint64_t)(limit & 0x000f0000u) << 32) | ((uint64_t)(base & 0x00ffffffu) << 16) | (limit & 0xffffu);
}

uint64_t x86_gdt_entry(enum boot_mode mode, unsigned index)
{
	switch (index) {
	case X86_SEL_TSS / 8:
		return gdt_desc(0x008b, 0, X86_TSS_LIMIT); /* present, busy 32-bit TSS, byte granular */
	case X86_SEL_CS / 8:
		/* present, code exec/read accessed, 4 GiB flat; G+DB (32-bit) or G+L (64-bit) */
		return gdt_desc(mode == BOOT_LONG64 ? 0xa09b : 0xc09b, 0, 0xfffff);
	case X86_SEL_DS / 8:
		return gdt_desc(0xc093, 0, 0xfffff); /* present, data read/write accessed, 4 GiB flat, 32-bit */
	default:
		return 0;
	}
}

int x86_write_gdt(const struct gmem *mem, enum boot_mode mode)
{
	uint64_t gdt[X86_GDT_ENTRIES], idt[LAYOUT_IDT_SIZE / 8] = {0};

	for (unsigned i = 0; i < X86_GDT_ENTRIES; i++)
		gdt[i] = x86_gdt_entry(mode, i);
	if (gmem_write(mem, LAYOUT_GDT, gdt, sizeof(gdt)) || gmem_write(mem, LAYOUT_IDT, idt, sizeof(idt)))
		return -EFAULT;
	return 0;
}

int x86_build_identity_map(const struct gmem *mem)
{
	uint64_t *t = gmem_ptr(mem, LAYOUT_PAGETABLES, LAYOUT_PAGETABLES_SIZE);
	uint64_t *pml4 = t, *pdpt = t + 512, *pd = t + 1024;

	if (!t)
		return -EFAULT;
	gmem_mark_dirty(mem, LAYOUT_PAGETABLES, LAYOUT_PAGETABLES_SIZE);
	memset(t, 0, LAYOUT_PAGETABLES_SIZE);
	pml4[0] = LAYOUT_PDPT | PTE_P | PTE_RW;
	for (unsigned i = 0; i < PD_COUNT; i++)
		pdpt[i] = (LAYOUT_PD + i * 0x1000ULL) | PTE_P | PTE_RW;
	for (unsigned i = 0; i < PD_COUNT * 512; i++)
		pd[i] = ((uint64_t)i << 21) | PTE_P | PTE_RW | PTE_PS;
	return 0;
}

/* The hidden part of a segment register, decoded from the descriptor the GDT holds. */
static struct kvm_segment seg_from_desc(uint64_t d, uint16_t selector)
{
	uint32_t limit = (uint32_t)((d & 0xffff) | ((d >> 32) & 0xf0000));
	uint8_t g = (d >> 55) & 1;

	return (struct kvm_segment){
	    .base = ((d >> 16) & 0xffffff) | (((d >> 56) & 0xff) << 24),
	    .limit = g ? (limit << 12) | 0xfff : limit,
	    .selector = selector,
	    .type = (d >> 40) & 0xf,
	    .s = (d >> 44) & 1,
	    .dpl = (d >> 45) & 3,
	    .present = (d >> 47) & 1,
	    .avl = (d >> 52) & 1,
	    .l = (d >> 53) & 1,
	    .db = (d >> 54) & 1,
	    .g = g,
	    .unusable = !((d >> 47) & 1),
	};
}

/*
 * Segments, descriptor tables and control registers for `mode`.
 * BOOT_PVH32 follows the PVH ABI (Xen docs/misc/pvh.pandoc): CR0.PE=1,
 * PG=0, CR4=0, flat 32-bit CS/DS/ES/SS, a 32-bit TSS in TR. BOOT_LONG64
 * follows boot.rst "64-bit Boot Protocol": long mode, identity paging
 * (x86_build_identity_map), __BOOT_CS/__BOOT_DS flat.
 */
static void set_sregs(struct kvm_sregs *s, enum boot_mode mode)
{
	s->cs = seg_from_desc(x86_gdt_entry(mode, X86_SEL_CS / 8), X86_SEL_CS);
	s->ds = seg_from_desc(x86_gdt_entry(mode, X86_SEL_DS / 8), X86_SEL_DS);
	s->es = s->fs = s->gs = s->ss = s->ds;
	s->tr = seg_from_desc(x86_gdt_entry(mode, X86_SEL_TSS / 8), X86_SEL_TSS);
	s->ldt = (struct kvm_segment){.type = 2, .unusable = 1}; /* no LDT */
	s->gdt = (struct kvm_dtable){.base = LAYOUT_GDT, .limit = LAYOUT_GDT_SIZE - 1};
	s->idt = (struct kvm_dtable){.base = LAYOUT_IDT, .limit = LAYOUT_IDT_SIZE - 1};
	if (mode == BOOT_LONG64) {
		s->cr0 = CR0_PE | CR0_ET | CR0_PG;
		s->cr3 = LAYOUT_PML4;
		s->cr4 = CR4_PAE;
		s->efer = EFER_LME | EFER_LMA;
	} else {
		s->cr0 = CR0_PE | CR0_ET;
		s->cr3 = 0;
		s->cr4 = 0;
		s->efer = 0;
	}
}

static int vcpu_ioctl_failed(const char *name, int vcpu_fd, char *err, size_t errlen)
{
	return err_set(err, errlen, -errno, "%s on vCPU fd %d failed: %s", name, vcpu_fd, strerror(errno));
}

int x86_vcpu_set_entry(int vcpu_fd, const struct boot_entry *entry, char *err, size_t errlen)
{
	struct kvm_sregs sregs;
	struct kvm_regs regs;

	if (entry->mode != BOOT_PVH32 && entry->mode != BOOT_LONG64)
		return err_set(err, errlen, -EINVAL, "entry mode %d is neither PVH nor 64-bit", (int)entry->mode);
	if (KVM_IOCTL(vcpu_fd, KVM_GET_SREGS, &sregs) < 0)
		return vcpu_ioctl_failed("KVM_GET_SREGS", vcpu_fd, err, errlen);
	set_sregs(&sregs, entry->mode);
	if (KVM_IOCTL(vcpu_fd, KVM_SET_SREGS, &sregs) < 0)
		return vcpu_ioctl_failed("KVM_SET_SREGS", vcpu_fd, err, errlen);
	memset(&regs, 0, sizeof(regs));
	regs.rflags = RFLAGS_FIXED;
	regs.rip = entry->rip;
	regs.rsp = LAYOUT_BOOT_STACK_TOP; /* not required by either protocol; handy for test guests */
	if (entry->mode == BOOT_PVH32)
		regs.rbx = entry->boot_info;
	else
		regs.rsi = entry->boot_info;
	if (KVM_IOCTL(vcpu_fd, KVM_SET_REGS, &regs) < 0)
		return vcpu_ioctl_failed("KVM_SET_REGS", vcpu_fd, err, errlen);
	return 0;
}
