/* hello.c - the start-up benchmark guest: one serial line and boot marker 1, then reset. */
#include "guest.h"

/*
 * As little work as possible before the line: serial_init (7 port writes)
 * pays for itself by enabling the FIFO, so the 28 bytes need 2 LSR reads
 * rather than 28.
 */
void guest_main(struct hvm_start_info *si)
{
	static const char line[] = "Hello from brisk test guest\n";

	(void)si;
	serial_init();
	serial_write(line, sizeof(line) - 1);
	bootmark(1);
	guest_reset();
}
