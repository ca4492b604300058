/* reset.c - asks the i8042 to pulse the reset line; brisk must end the VM with status 0. */
#include "guest.h"

void guest_main(struct hvm_start_info *si)
{
	(void)si;
	serial_init();
	serial_puts("reset: requesting i8042 reset\n");
	outb(BRISK_I8042_CMD_PORT, BRISK_I8042_CMD_RESET);
	guest_settle();
	guest_fail("reset", "still running after i8042 reset");
}
