/* markers.c - boot markers 1..5 through the port and 6 through MMIO, in order. */
#include "guest.h"

void guest_main(struct hvm_start_info *si)
{
	uint32_t i;

	(void)si;
	serial_init();
	for (i = 1; i <= 5; i++) {
		bootmark(i);
		gprintf("markers: %u\n", i);
	}
	bootmark_mmio(6);
	gprintf("markers: %u\n", 6u);
	guest_reset();
}
