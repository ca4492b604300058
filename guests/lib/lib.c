/* lib.c - the test guests' runtime: serial console, printf, exit paths, strings, command line. */
#include "guest.h"

/* 8250/16550A registers, offsets from BRISK_COM1_PORT (PC16550D datasheet, table 2). */
#define UART_RBR 0 /* receive buffer (read, DLAB=0) */
#define UART_THR 0 /* transmit holding (write, DLAB=0) */
#define UART_DLL 0 /* divisor latch low (DLAB=1) */
#define UART_IER 1
#define UART_DLM 1 /* divisor latch high (DLAB=1) */
#define UART_FCR 2
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5

#define UART_LCR_8N1	      0x03
#define UART_LCR_DLAB	      0x80
#define UART_FCR_ENABLE_CLEAR 0x07 /* FIFO enable, clear RX and TX FIFOs */
#define UART_MCR_DTR_RTS      0x03
#define UART_LSR_DR	      0x01
#define UART_LSR_THRE	      0x20
#define UART_TX_FIFO	      16 /* a 16550A takes 16 bytes once THRE is set with FIFOs on */

/*
 * How many LSR polls before giving up on THRE and transmitting anyway. brisk
 * reports THRE at once; QEMU may hold it clear while its chardev is full.
 */
#define THRE_POLLS (1u << 22)

static int serial_fifo;

void serial_init(void)
{
	outb(BRISK_COM1_PORT + UART_IER, 0);
	outb(BRISK_COM1_PORT + UART_LCR, UART_LCR_DLAB);
	outb(BRISK_COM1_PORT + UART_DLL, 1);
	outb(BRISK_COM1_PORT + UART_DLM, 0);
	outb(BRISK_COM1_PORT + UART_LCR, UART_LCR_8N1);
	outb(BRISK_COM1_PORT + UART_FCR, UART_FCR_ENABLE_CLEAR);
	outb(BRISK_COM1_PORT + UART_MCR, UART_MCR_DTR_RTS);
	serial_fifo = 1;
}

void serial_wait_tx(void)
{
	unsigned int i;

	for (i = 0; i < THRE_POLLS; i++) {
		if (inb(BRISK_COM1_PORT + UART_LSR) & UART_LSR_THRE)
			return;
		cpu_relax();
	}
}

void serial_putc(char c)
{
	serial_wait_tx();
	outb(BRISK_COM1_PORT + UART_THR, (uint8_t)c);
}

void serial_write(const char *buf, size_t n)
{
	size_t burst = serial_fifo ? UART_TX_FIFO : 1;
	size_t i = 0;

	while (i < n) {
		size_t end = n - i < burst ? n : i + burst;

		serial_wait_tx();
		for (; i < end; i++)
			outb(BRISK_COM1_PORT + UART_THR, (uint8_t)buf[i]);
	}
}

void serial_puts(const char *s)
{
	serial_write(s, strlen(s));
}

int serial_trygetc(void)
{
	if (!(inb(BRISK_COM1_PORT + UART_LSR) & UART_LSR_DR))
		return -1;
	return inb(BRISK_COM1_PORT + UART_RBR);
}

int serial_getc(void)
{
	int c;

	while ((c = serial_trygetc()) < 0)
		cpu_relax();
	return c;
}

/* ---- gprintf: formats into a small buffer, flushed in FIFO-sized bursts ---- */

struct pbuf {
	char buf[128];
	size_t len;
};

static void pb_putc(struct pbuf *pb, char c)
{
	if (pb->len == sizeof(pb->buf)) {
		serial_write(pb->buf, pb->len);
		pb->len = 0;
	}
	pb->buf[pb->len++] = c;
}

static void pb_num(struct pbuf *pb, uint64_t v, unsigned int base, int neg, unsigned int width, char pad)
{
	char tmp[24];
	unsigned int n = 0;

	do {
		tmp[n++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	if (neg && pad == '0')
		pb_putc(pb, '-');
	for (; width > n + (neg ? 1u : 0u); width--)
		pb_putc(pb, pad);
	if (neg && pad != '0')
		pb_putc(pb, '-');
	while (n)
		pb_putc(pb, tmp[--n]);
}

static uint64_t arg_unsigned(va_list *ap, int lng)
{
	if (lng >= 2)
		return va_arg(*ap, unsigned long long);
	if (lng == 1)
		return va_arg(*ap, unsigned long);
	return va_arg(*ap, unsigned int);
}

static int64_t arg_signed(va_list *ap, int lng)
{
	if (lng >= 2)
		return va_arg(*ap, long long);
	if (lng == 1)
		return va_arg(*ap, long);
	return va_arg(*ap, int);
}

/* One conversion starting at *fmt (just past '%'); returns the next format character. */
static const char *pb_conv(struct pbuf *pb, const char *fmt, va_list *ap)
{
	unsigned int width = 0;
	char pad = ' ';
	int lng = 0;
	const char *s;
	int64_t sv;

	if (*fmt == '0')
		pad = '0';
	while (*fmt >= '0' && *fmt <= '9' && width < 64)
		width = width * 10 + (unsigned int)(*fmt++ - '0');
	while (*fmt == 'l' && lng < 2) {
		lng++;
		fmt++;
	}
	switch (*fmt) {
	case 'd':
		sv = arg_signed(ap, lng);
		pb_num(pb, sv < 0 ? -(uint64_t)sv : (uint64_t)sv, 10, sv < 0, width, pad);
		break;
	case 'u':
		pb_num(pb, arg_unsigned(ap, lng), 10, 0, width, pad);
		break;
	case 'x':
		pb_num(pb, arg_unsigned(ap, lng), 16, 0, width, pad);
		break;
	case 'p':
		pb_putc(pb, '0');
		pb_putc(pb, 'x');
		pb_num(pb, (uintptr_t)va_arg(*ap, void *), 16, 0, width, pad);
		break;
	case 'c':
		pb_putc(pb, (char)va_arg(*ap, int));
		break;
	case 's':
		s = va_arg(*ap, const char *);
		for (s = s ? s : "(null)"; *s; s++)
			pb_putc(pb, *s);
		break;
	case '%':
		pb_putc(pb, '%');
		break;
	case '\0':
		return fmt;
	default:
		pb_putc(pb, '%');
		pb_putc(pb, *fmt);
		break;
	}
	return fmt + 1;
}

void gvprintf(const char *fmt, va_list ap)
{
	struct pbuf pb;
	va_list aq;

	pb.len = 0;
	va_copy(aq, ap);
	while (*fmt) {
		if (*fmt != '%')
			pb_putc(&pb, *fmt++);
		else
			fmt = pb_conv(&pb, fmt + 1, &aq);
	}
	va_end(aq);
	serial_write(pb.buf, pb.len);
}

void gprintf(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	gvprintf(fmt, ap);
	va_end(ap);
}

/* ---- boot markers, exit, reset -------------------------------------------------- */

void bootmark(uint32_t v)
{
	outl(BRISK_BOOTMARK_PORT, v);
}

void bootmark_mmio(uint32_t v)
{
	mmio_write32(BRISK_BOOTMARK_MMIO, v);
}

static __attribute__((noreturn)) void halt_forever(void)
{
	for (;;)
		__asm__ volatile("cli; hlt" ::: "memory");
}

void guest_exit(unsigned int v)
{
	outl(BRISK_DEBUG_EXIT_PORT, v);
	halt_forever();
}

/*
 * Under KVM the port write that asks for a reset exits to the VMM, which
 * does not resume the vCPU. QEMU's TCG acts on the request at the next
 * translation-block boundary (every backward jump is one), so a few
 * iterations suffice; kept short because on hosts where KVM emulates CPL-0
 * code each instruction costs ~0.5 us.
 */
void guest_settle(void)
{
	volatile unsigned int i;

	for (i = 0; i < 16; i++)
		cpu_relax();
}

void guest_reset(void)
{
	outb(BRISK_I8042_CMD_PORT, BRISK_I8042_CMD_RESET);
	guest_settle();
	guest_exit(0);
}

void guest_pass(const char *name)
{
	gprintf("%s: PASS\n", name);
	guest_reset();
}

void guest_fail(const char *name, const char *why)
{
	gprintf("%s: FAIL: %s\n", name, why);
	guest_exit(0x7f);
}

/* ---- strings ---------------------------------------------------------------------- */

/*
 * gcc may emit calls to memcpy/memset/memcmp even with -ffreestanding; the
 * build passes -fno-tree-loop-distribute-patterns so that these loops are not
 * turned back into calls to themselves.
 */
size_t strlen(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

int strncmp(const char *a, const char *b, size_t n)
{
	for (; n; n--, a++, b++) {
		if (*a != *b)
			return (unsigned char)*a - (unsigned char)*b;
		if (!*a)
			return 0;
	}
	return 0;
}

int strcmp(const char *a, const char *b)
{
	return strncmp(a, b, (size_t)-1);
}

int memcmp(const void *a, const void *b, size_t n)
{
	const unsigned char *p = a, *q = b;

	for (; n; n--, p++, q++) {
		if (*p != *q)
			return *p - *q;
	}
	return 0;
}

void *memcpy(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	while (n--)
		*d++ = *s++;
	return dst;
}

void *memset(void *dst, int c, size_t n)
{
	unsigned char *d = dst;

	while (n--)
		*d++ = (unsigned char)c;
	return dst;
}

/* ---- command line ------------------------------------------------------------------- */

const char *guest_cmdline(const struct hvm_start_info *si)
{
	if (!si || si->magic != BRISK_PVH_START_MAGIC || !si->cmdline_paddr)
		return "";
	return (const char *)(uintptr_t)si->cmdline_paddr;
}

static int digit_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return 99;
}

/* Parse [p, end) as decimal or 0x hex; -1 if empty, malformed or over 64 bits. */
static int parse_u64(const char *p, const char *end, uint64_t *out)
{
	unsigned int base = 10;
	uint64_t v = 0;
	int d;

	if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
	}
	if (p == end)
		return -1;
	for (; p < end; p++) {
		d = digit_value(*p);
		if (d >= (int)base || v > (UINT64_MAX - (uint64_t)d) / base)
			return -1;
		v = v * base + (uint64_t)d;
	}
	*out = v;
	return 0;
}

int cmdline_get_u64(const char *cmdline, const char *key, uint64_t *out)
{
	size_t klen = strlen(key);
	const char *p = cmdline, *end;

	while (*p) {
		while (*p == ' ')
			p++;
		for (end = p; *end && *end != ' '; end++)
			;
		if ((size_t)(end - p) > klen && !strncmp(p, key, klen) && p[klen] == '=')
			return parse_u64(p + klen + 1, end, out);
		p = end;
	}
	return -1;
}
