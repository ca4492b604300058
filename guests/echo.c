/* echo.c - serial input test: echoes received bytes up to and including the first newline. */
#include "guest.h"

#define ECHO_MAX 4096 /* a line longer than this is a test failure, not a hang */

void guest_main(struct hvm_start_info *si)
{
	unsigned int n;
	int c;

	(void)si;
	serial_init();
	serial_puts("echo: ready\n");
	for (n = 0; n < ECHO_MAX; n++) {
		c = serial_getc();
		serial_putc((char)c);
		if (c == '\n') {
			serial_puts("echo: done\n");
			guest_reset();
		}
	}
	guest_fail("echo", "no newline within 4096 bytes");
}
