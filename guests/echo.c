/*
 * echo.c - serial input test: echoes received bytes up to and including the first newline.
 * linux=1: first does to the UART what Linux's 8250 driver does before a program opens the tty (with host
 * input already waiting): the console's DTR, autoconfig's loopback test, FIFO resets and the reads "for luck"
 * of serial8250_do_startup(); input sent that early must still all arrive (docs/devices.md, "Receive").
 */
#include "guest.h"

#define ECHO_MAX   4096 /* a line longer than this is a test failure, not a hang */
#define BOOT_POLLS 2000 /* LSR reads standing in for a kernel's boot: host input arrives meanwhile */

#define RBR 0
#define FCR 2
#define IIR 2
#define MCR 4
#define LSR 5
#define MSR 6

static void linux_setup(void)
{
	for (unsigned int i = 0; i < BOOT_POLLS; i++)
		(void)inb(BRISK_COM1_PORT + LSR);
	outb(BRISK_COM1_PORT + MCR, 0x01); /* uart_set_options: DTR */
	outb(BRISK_COM1_PORT + MCR, 0x1a); /* autoconfig: LOOP | OUT2 | RTS */
	outb(BRISK_COM1_PORT + RBR, 'L');
	(void)inb(BRISK_COM1_PORT + RBR);
	outb(BRISK_COM1_PORT + MCR, 0x01);
	outb(BRISK_COM1_PORT + FCR, 0x07); /* serial8250_clear_fifos */
	outb(BRISK_COM1_PORT + FCR, 0x00);
	for (int i = 0; i < 2; i++) {
		(void)inb(BRISK_COM1_PORT + LSR);
		(void)inb(BRISK_COM1_PORT + RBR);
		(void)inb(BRISK_COM1_PORT + IIR);
		(void)inb(BRISK_COM1_PORT + MSR);
	}
}

void guest_main(struct hvm_start_info *si)
{
	unsigned int n;
	int c;

	uint64_t like_linux = 0;

	cmdline_get_u64(guest_cmdline(si), "linux", &like_linux);
	if (like_linux)
		linux_setup();
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
