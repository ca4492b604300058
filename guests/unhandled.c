/* unhandled.c - accesses where no device sits: writes are dropped, reads return all ones. */
#include "guest.h"

#define NOBODY_PORT 0x200	 /* no device on brisk's port bus (nor on QEMU microvm's) */
#define NOBODY_MMIO 0xd0100000UL /* MMIO hole; virtio slot 255 (layout.h), which brisk never fills */

void guest_main(struct hvm_start_info *si)
{
	uint8_t b;
	uint32_t l, m;
	int i;

	(void)si;
	serial_init();
	for (i = 0; i < 3; i++)
		outb(NOBODY_PORT, (uint8_t)(0x5a + i));
	b = inb(NOBODY_PORT);
	l = inl(NOBODY_PORT);
	m = mmio_read32(NOBODY_MMIO);
	gprintf("unhandled: inb(0x%x)=0x%02x inl(0x%x)=0x%08x mmio[0x%lx]=0x%08x\n", NOBODY_PORT, b, NOBODY_PORT, l,
		NOBODY_MMIO, m);
	if (b != 0xff)
		guest_fail("unhandled", "inb of an unhandled port is not 0xff");
	if (l != 0xffffffffu)
		guest_fail("unhandled", "inl of an unhandled port is not 0xffffffff");
	if (m != 0xffffffffu)
		guest_fail("unhandled", "read of unhandled MMIO is not 0xffffffff");
	guest_pass("unhandled");
}
