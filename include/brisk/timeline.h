/* timeline.h - boot timeline: host CLOCK_MONOTONIC timestamps of VMM phases and guest milestones. */
#ifndef BRISK_TIMELINE_H
#define BRISK_TIMELINE_H

#include <stdint.h>
#include <stdio.h>

/* Phases in the order they happen; each is recorded once (first wins). */
enum tl_event {
	TL_EXEC = 0,	   /* process start, estimated (see timeline.c) */
	TL_MAIN,	   /* main() entered */
	TL_KVM_PREWARMED,  /* API: KVM opened, its CPUID fetched and an empty VM made while idle (vm_prewarm.c) */
	TL_API_REQUEST,	   /* the API request that starts the guest arrived (InstanceStart, snapshot/load) */
	TL_SNAPSHOT_READ,  /* restore: the state file read and checked, guest memory mapped from its file */
	TL_KVM_OPEN,	   /* /dev/kvm opened and checked (the CPUID fetch starts) */
	TL_KERNEL_LOADED,  /* guest RAM allocated, kernel image in it, boot structures built */
	TL_VM_CREATED,	   /* KVM_CREATE_VM, TSS and identity-map pages */
	TL_MEMORY,	   /* guest RAM registered with KVM (memory slots) */
	TL_IRQCHIP,	   /* in-kernel irqchip and PIT created (after the memory slots) */
	TL_VCPUS_READY,	   /* every vCPU created and configured */
	TL_STATE_RESTORED, /* restore: the irqchip, PIT, clock, devices and every vCPU hold the saved state */
	TL_FIRST_RUN,	   /* first KVM_RUN entered */
	TL_FIRST_EXIT,	   /* first exit to userspace */
	TL_FIRST_SERIAL,   /* first byte the guest wrote to the UART */
	TL_GUEST_END,	   /* the guest ended (or was stopped) */
	TL_EXIT,	   /* brisk is about to exit */
	TL__COUNT
};

#define TL_MAX_MARKERS 256

/* Call first thing in main(). */
void timeline_init(void);
uint64_t timeline_now_ns(void);
/*
 * Starts the timeline over in a forked process that is to build its own VM (brisk restore --clone-server's
 * clones): every phase and marker forgotten, "process start" and "main entered" both t0_ns (CLOCK_MONOTONIC
 * ns, the request's arrival), so each phase reads as time since the request. Single-threaded callers only.
 */
void timeline_restart(uint64_t t0_ns);
/* Records `ev` now unless already recorded. Thread-safe, lock-free. */
void timeline_mark(enum tl_event ev);
/* Records a boot-marker value now; beyond TL_MAX_MARKERS values are counted only. */
void timeline_bootmark(uint32_t value);
/*
 * Has timeline_bootmark, after recording, write 1 to eventfd `fd` too (-1: nothing), from the vCPU thread that
 * wrote the marker: how a working-set recording learns the guest said it is done (wset.h). One per process.
 */
void timeline_bootmark_notify(int fd);
/* ns since TL_EXEC of event `ev`, or -1 when it did not happen. */
int64_t timeline_get(enum tl_event ev);
const char *timeline_name(enum tl_event ev);
unsigned timeline_nr_markers(void);
/* Marker i: value and ns since TL_EXEC. Returns 0 or -1 if out of range. */
int timeline_marker(unsigned i, uint32_t *value, int64_t *ns);
/* The aligned text table (µs since exec) for brisk run --timeline. */
void timeline_print(FILE *f);

#endif
