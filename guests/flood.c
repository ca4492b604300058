/* flood.c - serial throughput: bytes=N (default 262144) of 64-byte lines, then marker 0xf100d. */
#include "guest.h"

#define FLOOD_LINE    64
#define FLOOD_DEFAULT 262144
#define FLOOD_MARKER  0xf100d
#define UART_TX_FIFO  16

/*
 * rep=1 sends each 16-byte FIFO load with one "rep outsb": under KVM that is
 * one KVM_EXIT_IO with count 16 instead of 16 exits (SDM Vol 2B, OUTS), so it
 * also exercises brisk's string-I/O path. The default is plain outb.
 */
static void write_rep(const char *buf, size_t n)
{
	size_t chunk, left;

	for (; n; n -= chunk) {
		chunk = n < UART_TX_FIFO ? n : UART_TX_FIFO;
		left = chunk;
		serial_wait_tx();
		/* rsi advances past the bytes sent; rcx counts down to 0. */
		__asm__ volatile("rep outsb" : "+S"(buf), "+c"(left) : "d"((uint16_t)BRISK_COM1_PORT) : "memory");
	}
}

/* "flood 000123 xxxx...x\n": 6 + 6 + 1 + 50 + 1 bytes. */
static void number_line(char *line, uint32_t nr)
{
	int i;

	for (i = 11; i >= 6; i--) {
		line[i] = (char)('0' + nr % 10);
		nr /= 10;
	}
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	char line[FLOOD_LINE];
	uint64_t bytes = FLOOD_DEFAULT, rep = 0, done, n;
	uint32_t nr = 0;

	serial_init();
	cmdline_get_u64(cmdline, "bytes", &bytes);
	cmdline_get_u64(cmdline, "rep", &rep);
	memcpy(line, "flood 000000 ", 13);
	memset(line + 13, 'x', FLOOD_LINE - 14);
	line[FLOOD_LINE - 1] = '\n';
	for (done = 0; done < bytes; done += n) {
		n = bytes - done < FLOOD_LINE ? bytes - done : FLOOD_LINE;
		number_line(line, nr++);
		if (n < FLOOD_LINE)
			line[n - 1] = '\n';
		if (rep)
			write_rep(line, n);
		else
			serial_write(line, n);
	}
	bootmark(FLOOD_MARKER);
	serial_puts("flood: done\n");
	guest_reset();
}
