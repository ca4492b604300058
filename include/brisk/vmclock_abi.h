/*
 * vmclock_abi.h - the VMClock page as the guest reads it: Linux's include/uapi/linux/vmclock-abi.h (v7.0, with
 * vm_generation_counter; the UAPI group's VMClock specification), the layout Firecracker's devices/acpi/vmclock.rs
 * and QEMU's hw/acpi/vmclock.c write. Shared by brisk (src/devices/vmclock.c) and its test guests: fixed-width
 * integers only, little-endian in guest memory (x86).
 */
#ifndef BRISK_VMCLOCK_ABI_H
#define BRISK_VMCLOCK_ABI_H

#include <stddef.h>
#include <stdint.h>

#define VMCLOCK_MAGIC		0x4b4c4356u /* "VCLK" */
#define VMCLOCK_VERSION		1u
#define VMCLOCK_COUNTER_INVALID 0xffu
#define VMCLOCK_STATUS_UNKNOWN	0u
/* the hypervisor bumps vm_generation_counter on every load from a snapshot */
#define VMCLOCK_FLAG_VM_GEN_COUNTER_PRESENT (1ull << 8)
/* the hypervisor notifies the guest whenever seq_count becomes a new even number */
#define VMCLOCK_FLAG_NOTIFICATION_PRESENT (1ull << 9)

struct vmclock_abi {
	/* constant */
	uint32_t magic;
	uint32_t size; /* of the region holding the structure */
	uint16_t version;
	uint8_t counter_id;
	uint8_t time_type;
	/* under the seqcount: odd while the hypervisor writes */
	uint32_t seq_count;
	uint64_t disruption_marker; /* a new value when the counter is disrupted (migration, restore) */
	uint64_t flags;
	uint8_t pad[2];
	uint8_t clock_status;
	uint8_t leap_second_smearing_hint;
	uint16_t tai_offset_sec;
	uint8_t leap_indicator;
	uint8_t counter_period_shift;
	uint64_t counter_value;
	uint64_t counter_period_frac_sec;
	uint64_t counter_period_esterror_rate_frac_sec;
	uint64_t counter_period_maxerror_rate_frac_sec;
	uint64_t time_sec;
	uint64_t time_frac_sec;
	uint64_t time_esterror_nanosec;
	uint64_t time_maxerror_nanosec;
	uint64_t vm_generation_counter; /* a new value on every load from a snapshot */
};

/* The offsets Linux's header and Firecracker's bindings (generated/vmclock_abi.rs) assert. */
_Static_assert(offsetof(struct vmclock_abi, seq_count) == 12, "vmclock_abi.seq_count");
_Static_assert(offsetof(struct vmclock_abi, disruption_marker) == 16, "vmclock_abi.disruption_marker");
_Static_assert(offsetof(struct vmclock_abi, flags) == 24, "vmclock_abi.flags");
_Static_assert(offsetof(struct vmclock_abi, clock_status) == 34, "vmclock_abi.clock_status");
_Static_assert(offsetof(struct vmclock_abi, counter_value) == 40, "vmclock_abi.counter_value");
_Static_assert(offsetof(struct vmclock_abi, time_maxerror_nanosec) == 96, "vmclock_abi.time_maxerror_nanosec");
_Static_assert(offsetof(struct vmclock_abi, vm_generation_counter) == 104, "vmclock_abi.vm_generation_counter");
_Static_assert(sizeof(struct vmclock_abi) == 112, "vmclock_abi size");

#endif
