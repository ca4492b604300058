/* i8042.c - the PS/2 keyboard controller, as far as Linux probes it and reboots through it, and Ctrl+Alt+Del. */
/*
 * No mouse is attached; the keyboard only ever sends Ctrl+Alt+Del
 * (i8042_ctrl_alt_del, the API's SendCtrlAltDel). What the model does
 * (commands from the IBM PC/AT Technical Reference, "Keyboard Controller";
 * names as Linux drivers/input/serio/i8042.h):
 *
 *   status (read 0x64): OBF when a byte is waiting, SYS (POST passed),
 *     CMD/DATA (last write went to 0x64), KEYLOCK (keyboard not inhibited);
 *     IBF is never set, so a driver never waits to write; AUXDATA never
 *     set (no aux device: every byte is the controller's or the keyboard's).
 *   0x20 read / 0x60 write the command byte (CTR)
 *   0xa7/0xa8, 0xad/0xae disable/enable the aux/kbd port (CTR bits 5/4)
 *   0xa9, 0xab aux/kbd interface test -> 0x00 (passed)
 *   0xaa controller self-test -> 0x55 (Linux retries and sleeps on failure)
 *   0xd0 read / 0xd1 write the output port
 *   0xf0-0xff "pulse output lines": an even command pulses bit 0, the CPU
 *     reset line, so 0xfe (Linux reboot=k) ends the VM with EXIT_GUEST_OK
 *   anything else, and data for the keyboard: ignored
 *
 * Every command that Linux's i8042_command() expects a reply to gets one
 * at once: a missing reply costs the guest a 500 ms poll timeout each.
 * Reads of 0x60 return the pending byte, or 0 when none is pending
 * (as kvmtool and Firecracker).
 *
 * The output buffer holds one byte: a controller reply first, else the
 * oldest of the keyboard's bytes, which wait in a bounded queue (the
 * keyboard's own buffer on real hardware) and stay there while the guest
 * disables the keyboard port (CTR.KBDDIS). As the 8042 drives IRQ 1 from
 * OBF, each keyboard byte that reaches the output buffer while CTR.KBDINT
 * is set gets one edge on ISA IRQ 1, and so does setting KBDINT while one
 * is there: Linux's i8042_interrupt() reads one byte per interrupt.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/abi.h"
#include "brisk/bus.h"
#include "brisk/devices.h"
#include "brisk/exitcode.h"
#include "brisk/fc_metrics.h"
#include "brisk/log.h"
#include "brisk/snap_fields.h"
#include "brisk/snapshot.h"

#define STR_OBF	    0x01 /* output buffer full */
#define STR_SYS	    0x04 /* system flag: self-test passed */
#define STR_CMDDAT  0x08 /* last write was a command */
#define STR_KEYLOCK 0x10 /* keyboard not inhibited */

#define CTR_KBDINT 0x01
#define CTR_SYS	   0x04
#define CTR_KBDDIS 0x10
#define CTR_AUXDIS 0x20
#define CTR_XLATE  0x40

#define CMD_READ_CTR	0x20
#define CMD_WRITE_CTR	0x60
#define CMD_AUX_DISABLE 0xa7
#define CMD_AUX_ENABLE	0xa8
#define CMD_AUX_TEST	0xa9
#define CMD_SELF_TEST	0xaa
#define CMD_KBD_TEST	0xab
#define CMD_KBD_DISABLE 0xad
#define CMD_KBD_ENABLE	0xae
#define CMD_READ_OUTP	0xd0
#define CMD_WRITE_OUTP	0xd1

#define SELF_TEST_OK	0x55
#define OUTP_RESET_HIGH 0x01 /* output port bit 0: CPU reset, active low */

#define KBD_IRQ	  1  /* ISA IRQ 1, edge (the DSDT's PS2K, the MP table's ISA entries) */
#define KBD_QUEUE 16 /* keyboard bytes that may wait: as Linux's I8042_BUFFER_SIZE, Firecracker's BUF_SIZE */

/* The snapshot section (i8042_save): six bytes of controller state, the queue's length, the queue. */
#define SNAP_LEN (7 + KBD_QUEUE)

/*
 * Ctrl, Alt and Delete pressed, then released in reverse order, so that
 * the guest's keyboard state is clean afterwards (an init that handles
 * Ctrl+Alt+Del itself leaves the guest running; Firecracker sends the
 * presses only). Codes from Microsoft's "Keyboard Scan Code Specification"
 * rev. 1.3a, appendix A: set 1 as the controller's translation produces
 * it (breaks = make | 0x80), set 2 as the keyboard sends it (breaks =
 * 0xf0 before the make; Delete is extended: 0xe0 first).
 */
static const uint8_t cad_set1[] = {0x1d, 0x38, 0xe0, 0x53, 0xe0, 0xd3, 0xb8, 0x9d};
static const uint8_t cad_set2[] = {0x14, 0x11, 0xe0, 0x71, 0xe0, 0xf0, 0x71, 0xf0, 0x11, 0xf0, 0x14};
_Static_assert(sizeof(cad_set2) <= KBD_QUEUE && sizeof(cad_set1) <= KBD_QUEUE, "one sequence fits the queue");

struct i8042 {
	struct devctx ctx;
	pthread_mutex_t lock;
	uint8_t ctr;
	uint8_t outp;
	uint8_t obuf; /* a controller reply, */
	bool obf;     /* waiting in the output buffer ahead of the keyboard's bytes */
	bool last_was_cmd;
	uint8_t pending;	/* command awaiting a data byte on 0x60, or 0 */
	uint8_t kbd[KBD_QUEUE]; /* the keyboard's bytes, oldest at kbd_head */
	unsigned kbd_head;
	unsigned kbd_len;
	bool irq_sent; /* IRQ 1 was pulsed for the keyboard byte in the output buffer */
};

static void reply(struct i8042 *k, uint8_t v)
{
	k->obuf = v;
	k->obf = true;
}

/* Whether the output buffer holds a keyboard byte: no reply ahead of it, the port enabled. */
static bool kbd_byte_out(const struct i8042 *k)
{
	return !k->obf && k->kbd_len && !(k->ctr & CTR_KBDDIS);
}

/*
 * One edge on IRQ 1 per keyboard byte that reaches the output buffer while
 * KBDINT is set, or when KBDINT is set with one there (the 8042's IRQ 1
 * output is OBF with a keyboard byte, gated by KBDINT; the IOAPIC pin is
 * edge-triggered). Called after every change, under the lock, so pulses
 * follow the state in order.
 */
static void update_irq(struct i8042 *k)
{
	bool want = kbd_byte_out(k) && (k->ctr & CTR_KBDINT);

	if (want && !k->irq_sent) {
		dev_irq_line(&k->ctx, KBD_IRQ, 1);
		dev_irq_line(&k->ctx, KBD_IRQ, 0);
	}
	k->irq_sent = want;
}

static uint8_t read_status(const struct i8042 *k)
{
	bool full = k->obf || kbd_byte_out(k);

	return (uint8_t)((full ? STR_OBF : 0) | STR_SYS | (k->last_was_cmd ? STR_CMDDAT : 0) | STR_KEYLOCK);
}

static uint8_t read_data(struct i8042 *k)
{
	uint8_t v;

	if (k->obf) {
		k->obf = false;
		return k->obuf;
	}
	if (!kbd_byte_out(k))
		return 0;
	v = k->kbd[k->kbd_head];
	k->kbd_head = (k->kbd_head + 1) % KBD_QUEUE;
	k->kbd_len--;
	k->irq_sent = false; /* the next byte, if any, is a new one */
	return v;
}

static void write_data(struct i8042 *k, uint8_t v)
{
	if (k->pending == CMD_WRITE_CTR)
		k->ctr = v;
	else if (k->pending == CMD_WRITE_OUTP)
		k->outp = v | OUTP_RESET_HIGH; /* a reset through the output port is not modelled */
	k->pending = 0;
	k->last_was_cmd = false;
}

/* Returns true when the command pulses the CPU reset line. */
static bool write_cmd(struct i8042 *k, uint8_t cmd)
{
	k->last_was_cmd = true;
	k->pending = 0;
	switch (cmd) {
	case CMD_READ_CTR:
		reply(k, k->ctr);
		break;
	case CMD_WRITE_CTR:
	case CMD_WRITE_OUTP:
		k->pending = cmd;
		break;
	case CMD_AUX_DISABLE:
		k->ctr |= CTR_AUXDIS;
		break;
	case CMD_AUX_ENABLE:
		k->ctr &= (uint8_t)~CTR_AUXDIS;
		break;
	case CMD_KBD_DISABLE:
		k->ctr |= CTR_KBDDIS;
		break;
	case CMD_KBD_ENABLE:
		k->ctr &= (uint8_t)~CTR_KBDDIS;
		break;
	case CMD_AUX_TEST:
	case CMD_KBD_TEST:
		reply(k, 0x00);
		break;
	case CMD_SELF_TEST:
		reply(k, SELF_TEST_OK);
		break;
	case CMD_READ_OUTP:
		reply(k, k->outp);
		break;
	default:
		return (cmd & 0xf0) == 0xf0 && !(cmd & OUTP_RESET_HIGH);
	}
	return false;
}

/*
 * Both ports are one byte wide; wider reads fill the upper bytes with 0,
 * wider writes use byte 0. The two ports are not adjacent (0x61, between
 * them, is port B of the PIT/NMI logic, handled by KVM's in-kernel PIT): one
 * device, two one-byte ranges, told apart by the absolute port.
 */
static void i8042_read(void *dev, const struct bus_access *a, void *data)
{
	struct i8042 *k = dev;
	uint8_t v;

	memset(data, 0, a->len);
	pthread_mutex_lock(&k->lock);
	if (a->addr == BRISK_I8042_CMD_PORT) {
		v = read_status(k);
	} else {
		v = read_data(k);
		update_irq(k);
	}
	pthread_mutex_unlock(&k->lock);
	((uint8_t *)data)[0] = v;
	fcm_add(fcm_i8042, FCM_I8042_read_count, a->len); /* Firecracker v1.7.0 i8042.rs: bytes read */
}

static void i8042_write(void *dev, const struct bus_access *a, const void *data)
{
	struct i8042 *k = dev;
	uint8_t v = ((const uint8_t *)data)[0];
	bool reset = false;

	pthread_mutex_lock(&k->lock);
	if (a->addr == BRISK_I8042_CMD_PORT)
		reset = write_cmd(k, v);
	else
		write_data(k, v);
	update_irq(k);
	pthread_mutex_unlock(&k->lock);
	fcm_inc(fcm_i8042, FCM_I8042_write_count);
	if (reset) {
		fcm_inc(fcm_i8042, FCM_I8042_reset_count);
		dev_request_exit(&k->ctx, EXIT_GUEST_OK, "guest requested reset (i8042)");
	}
}

static void reset_locked(struct i8042 *k)
{
	k->ctr = CTR_KBDINT | CTR_SYS | CTR_XLATE;
	k->outp = OUTP_RESET_HIGH;
	k->obf = false;
	k->obuf = 0;
	k->last_was_cmd = false;
	k->pending = 0;
	k->kbd_head = 0;
	k->kbd_len = 0;
	k->irq_sent = false;
}

static void i8042_reset(void *dev)
{
	struct i8042 *k = dev;

	pthread_mutex_lock(&k->lock);
	reset_locked(k);
	pthread_mutex_unlock(&k->lock);
}

static void i8042_destroy(void *dev)
{
	struct i8042 *k = dev;

	pthread_mutex_destroy(&k->lock);
	free(k);
}

/*
 * Snapshot (device.h), SNAP_LEN bytes in version I8042_SNAP_VERSION, one record over struct i8042: the
 * command byte, the output port, the reply and its flag, the command state (as before the keyboard),
 * then the number of waiting keyboard bytes and KBD_QUEUE bytes holding them, oldest first, zero-filled
 * (saved from an image with kbd_head 0). Whether IRQ 1 was pulsed for the byte in the output buffer is
 * not saved: it always was when KBDINT is set (update_irq runs after every change), and a pending edge
 * is the irqchip's state.
 */
#define I8042_SNAP_VERSION 1u

static const struct snap_field i8042_fields[] = {
    SNAP_UINT(struct i8042, ctr, 1),
    SNAP_UINT(struct i8042, outp, 1),
    SNAP_UINT(struct i8042, obuf, 1),
    SNAP_FLAG(struct i8042, obf),
    SNAP_FLAG(struct i8042, last_was_cmd),
    SNAP_UINT(struct i8042, pending, 1),
    SNAP_UINT_MAX(struct i8042, kbd_len, 1, KBD_QUEUE),
    SNAP_BYTES(struct i8042, kbd),
};
static const struct snap_record i8042_record = SNAP_RECORD("i8042", i8042_fields);
_Static_assert(SNAP_LEN == 7 + sizeof(((struct i8042 *)0)->kbd), "the record is SNAP_LEN bytes");

/* Refuses what no guest can produce: a pending command that takes no data, the CPU held in reset. */
static const char *check_saved(const void *obj)
{
	const struct i8042 *n = obj;

	if (n->pending && n->pending != CMD_WRITE_CTR && n->pending != CMD_WRITE_OUTP)
		return "a pending command that takes no data byte";
	if (!(n->outp & OUTP_RESET_HIGH))
		return "an output port holding the CPU in reset";
	return NULL;
}

static const struct snap_layout i8042_layout = {
    .version = I8042_SNAP_VERSION, .record = &i8042_record, .check = check_saved};

static int i8042_save(void *dev, struct snap_writer *w)
{
	struct i8042 *k = dev;
	struct i8042 img = {0};

	pthread_mutex_lock(&k->lock);
	snap_record_copy(&i8042_record, &img, k);
	memset(img.kbd, 0, sizeof(img.kbd));
	for (unsigned i = 0; i < k->kbd_len; i++)
		img.kbd[i] = k->kbd[(k->kbd_head + i) % KBD_QUEUE];
	pthread_mutex_unlock(&k->lock);
	return snap_layout_save(w, &i8042_layout, &img);
}

static int i8042_restore(void *dev, struct snap_reader *r)
{
	struct i8042 *k = dev;
	struct i8042 n = {0};
	char why[160];
	int err = snap_layout_load(r, &i8042_layout, &n, why, sizeof(why));

	if (err) {
		log_error("i8042: snapshot refused: %s", why);
		return err;
	}
	pthread_mutex_lock(&k->lock);
	snap_record_copy(&i8042_record, k, &n);
	k->kbd_head = 0;
	k->irq_sent = kbd_byte_out(k) && (k->ctr & CTR_KBDINT);
	pthread_mutex_unlock(&k->lock);
	return 0;
}

static const struct dev_ops i8042_ops = {
    .name = "i8042",
    .read = i8042_read,
    .write = i8042_write,
    .reset = i8042_reset,
    .destroy = i8042_destroy,
    .save = i8042_save,
    .restore = i8042_restore,
};

int i8042_create(const struct devctx *ctx, struct bus *bus)
{
	struct i8042 *k = calloc(1, sizeof(*k));
	struct bus_device *d;
	int err;

	if (!k)
		return -ENOMEM;
	k->ctx = *ctx;
	pthread_mutex_init(&k->lock, NULL);
	reset_locked(k);
	d = bus_add(bus, &i8042_ops, k); /* the bus owns k from here on */
	if (!d)
		return -ENOSPC;
	err = bus_map(bus, d, BUS_PIO, BRISK_I8042_CMD_PORT, 1);
	return err ? err : bus_map(bus, d, BUS_PIO, BRISK_I8042_DATA_PORT, 1);
}

/*
 * The scan code set follows the command byte the guest last wrote, read at
 * the moment of the press: with CTR.XLATE the controller translates the
 * keyboard's set 2 into set 1 (IBM PS/2 Hardware Interface Technical
 * Reference, "Keyboard/Auxiliary Device Controller", command byte bit 6),
 * and Linux then decodes set 1 (its port is SERIO_8042_XL; Linux keeps
 * the XLATE its firmware left, which here is brisk's reset value); without
 * it the keyboard's set 2 passes through raw (SERIO_8042, i8042.direct or
 * a firmware that cleared XLATE). Deciding at the press, not per byte as
 * the guest reads, is a simplification: a guest that flips XLATE while
 * keys wait sees them in the old set (Linux only sets it at probe, with
 * the port disabled).
 */
int i8042_ctrl_alt_del(struct bus *bus)
{
	const struct bus_range *r = bus_find(bus, BUS_PIO, BRISK_I8042_DATA_PORT, 1);
	const uint8_t *seq;
	struct i8042 *k;
	size_t n;
	int ret = 0;

	if (!r || r->device->ops != &i8042_ops)
		return -ENODEV;
	k = r->device->dev;
	pthread_mutex_lock(&k->lock);
	seq = (k->ctr & CTR_XLATE) ? cad_set1 : cad_set2;
	n = (k->ctr & CTR_XLATE) ? sizeof(cad_set1) : sizeof(cad_set2);
	if (KBD_QUEUE - k->kbd_len < n) {
		ret = -EBUSY; /* all of the sequence or none: half a key press would stay stuck */
	} else {
		for (size_t i = 0; i < n; i++)
			k->kbd[(k->kbd_head + k->kbd_len++) % KBD_QUEUE] = seq[i];
		update_irq(k);
	}
	pthread_mutex_unlock(&k->lock);
	return ret;
}
