/*
 * fake_vm.h - a VM behind a device's context (include/brisk/device.h) for the unit tests of devices: no
 * KVM, so KVM_IOEVENTFD/KVM_IRQFD report -ENOTSUP and the virtio transport falls back to MMIO-exit
 * notifications and KVM_IRQ_LINE pulses, which are counted here; a real I/O event loop (`loop`, created
 * and started by the test); exit requests recorded. Include once, in one test file.
 */
#ifndef BRISK_TEST_FAKE_VM_H
#define BRISK_TEST_FAKE_VM_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "brisk/device.h"
#include "brisk/evloop.h"

static struct evloop *loop;
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned irq_pulses; /* rising edges on any line */
static unsigned exit_calls;
static int exit_code = -1;

static void fake_irq_line(void *vm, unsigned irq, int level)
{
	(void)vm, (void)irq;
	pthread_mutex_lock(&fake_lock);
	irq_pulses += level == 1;
	pthread_mutex_unlock(&fake_lock);
}

static void fake_request_exit(void *vm, int code, const char *reason)
{
	(void)vm, (void)reason;
	pthread_mutex_lock(&fake_lock);
	exit_code = code;
	exit_calls++;
	pthread_mutex_unlock(&fake_lock);
}

static int no_ioeventfd(void *vm, uint64_t addr, unsigned len, bool has_match, uint64_t m, int fd, bool assign)
{
	(void)vm, (void)addr, (void)len, (void)has_match, (void)m, (void)fd, (void)assign;
	return -ENOTSUP;
}

static int no_irqfd(void *vm, unsigned gsi, int fd, bool assign)
{
	(void)vm, (void)gsi, (void)fd, (void)assign;
	return -ENOTSUP;
}

static struct evloop *fake_loop(void *vm)
{
	(void)vm;
	return loop;
}

static const struct devctx_ops fake_ops = {
    .irq_line = fake_irq_line,
    .request_exit = fake_request_exit,
    .ioeventfd = no_ioeventfd,
    .irqfd = no_irqfd,
    .loop = fake_loop,
};

#endif
