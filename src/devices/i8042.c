/* i8042.c - the PS/2 keyboard controller, only as far as Linux probes it and reboots through it. */
/*
 * No keyboard or mouse is attached and no IRQ is raised. What the model
 * does (commands from the IBM PC/AT Technical Reference, "Keyboard
 * Controller"; names as Linux drivers/input/serio/i8042.h):
 *
 *   status (read 0x64): OBF when a reply is waiting, SYS (POST passed),
 *     CMD/DATA (last write went to 0x64), KEYLOCK (keyboard not inhibited);
 *     IBF is never set, so a driver never waits to write.
 *   0x20 read / 0x60 write the command byte (CTR)
 *   0xa7/0xa8, 0xad/0xae disable/enable the aux/kbd port (CTR bits 5/4)
 *   0xa9, 0xab aux/kbd interface test -> 0x00 (passed)
 *   0xaa controller self-test -> 0x55 (Linux retries and sleeps on failure)
 *   0xd0 read / 0xd1 write the output port
 *   0xf0-0xff "pulse output lines": an even command pulses bit 0, the CPU
 *     reset line, so 0xfe (Linux reboot=k) ends the VM with EXIT_GUEST_OK
 *   anything else, and data for the (absent) keyboard: ignored
 *
 * Every command that Linux's i8042_command() expects a reply to gets one
 * at once: a missing reply costs the guest a 500 ms poll timeout each.
 * Reads of 0x60 return the pending reply, or 0 when none is pending
 * (as kvmtool and Firecracker).
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
#include "brisk/log.h"
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

struct i8042 {
	struct devctx ctx;
	pthread_mutex_t lock;
	uint8_t ctr;
	uint8_t outp;
	uint8_t obuf;
	bool obf;
	bool last_was_cmd;
	uint8_t pending; /* command awaiting a data byte on 0x60, or 0 */
};

static void reply(struct i8042 *k, uint8_t v)
{
	k->obuf = v;
	k->obf = true;
}

static uint8_t read_status(const struct i8042 *k)
{
	return (uint8_t)((k->obf ? STR_OBF : 0) | STR_SYS | (k->last_was_cmd ? STR_CMDDAT : 0) | STR_KEYLOCK);
}

static uint8_t read_data(struct i8042 *k)
{
	if (!k->obf)
		return 0;
	k->obf = false;
	return k->obuf;
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
	v = a->addr == BRISK_I8042_CMD_PORT ? read_status(k) : read_data(k);
	pthread_mutex_unlock(&k->lock);
	((uint8_t *)data)[0] = v;
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
	pthread_mutex_unlock(&k->lock);
	if (reset)
		dev_request_exit(&k->ctx, EXIT_GUEST_OK, "guest requested reset (i8042)");
}

static void reset_locked(struct i8042 *k)
{
	k->ctr = CTR_KBDINT | CTR_SYS | CTR_XLATE;
	k->outp = OUTP_RESET_HIGH;
	k->obf = false;
	k->obuf = 0;
	k->last_was_cmd = false;
	k->pending = 0;
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

/* Snapshot (device.h): the command byte, the output port, the output buffer and the command state. */
static int i8042_save(void *dev, struct snap_writer *w)
{
	struct i8042 *k = dev;
	uint8_t v[6];

	pthread_mutex_lock(&k->lock);
	v[0] = k->ctr;
	v[1] = k->outp;
	v[2] = k->obuf;
	v[3] = k->obf;
	v[4] = k->last_was_cmd;
	v[5] = k->pending;
	pthread_mutex_unlock(&k->lock);
	return snap_put(w, v, sizeof(v));
}

/* Refuses what no guest can produce: flags other than 0/1, a pending command that takes no data. */
static int i8042_restore(void *dev, struct snap_reader *r)
{
	struct i8042 *k = dev;
	uint8_t v[6] = {0};

	if (snap_get(r, v, sizeof(v)))
		return -EINVAL;
	if (v[3] > 1 || v[4] > 1 || (v[5] && v[5] != CMD_WRITE_CTR && v[5] != CMD_WRITE_OUTP) ||
	    !(v[1] & OUTP_RESET_HIGH)) {
		log_error("i8042: snapshot refused: flags %u/%u, pending command 0x%02x, output port 0x%02x", v[3],
			  v[4], v[5], v[1]);
		return -EINVAL;
	}
	pthread_mutex_lock(&k->lock);
	k->ctr = v[0];
	k->outp = v[1];
	k->obuf = v[2];
	k->obf = v[3];
	k->last_was_cmd = v[4];
	k->pending = v[5];
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
