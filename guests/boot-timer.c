/*
 * boot-timer.c - Firecracker's boot timer signal: writes that must not count (a 4-byte 123, a byte 7, the
 * byte 123 at offset 1), then the byte 123 at offset 0 of the MMIO page, one line, reset.
 */
#include "guest.h"

void guest_main(struct hvm_start_info *si)
{
	(void)si;
	serial_init();
	mmio_write32(BRISK_BOOTMARK_MMIO, 123);	   /* not a byte: ignored by the boot timer */
	mmio_write8(BRISK_BOOTMARK_MMIO, 7);	   /* not the magic value */
	mmio_write8(BRISK_BOOTMARK_MMIO + 1, 123); /* not at offset 0 */
	mmio_write8(BRISK_BOOTMARK_MMIO, 123);	   /* Firecracker's MAGIC_VALUE_SIGNAL_GUEST_BOOT_COMPLETE */
	gprintf("boot-timer: signalled\n");
	guest_reset();
}
