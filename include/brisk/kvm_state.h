/*
 * kvm_state.h - saving and restoring the in-kernel KVM state of a vCPU (registers, FPU/XSAVE, MSRs,
 * LAPIC, events, CPUID, TSC frequency) and of the VM (PICs, IOAPIC, PIT, kvmclock) into snapshot
 * sections (brisk/snapshot.h).
 *
 * Each function writes into, or reads from, the section the snapshot framework opened for the part
 * (SNAP_TAG_VCPU / SNAP_TAG_VM); the field order of each body is documented in kvm_state.c. KVM
 * structures are stored as the kernel's x86 ABI lays them out (little-endian), each preceded by its
 * u32 length; a length of 0 records "this host's KVM lacked it" (a capability KVM_CHECK_EXTENSION
 * denied), so restore knows what is absent rather than guessing.
 */
#ifndef BRISK_KVM_STATE_H
#define BRISK_KVM_STATE_H

#include <stdbool.h>
#include <stddef.h>

struct snap_writer;
struct snap_reader;

/* Bounds on counts read from a state file (KVM reports ~40-250 MSRs and ~50-200 CPUID entries). */
#define KVM_STATE_MAX_MSRS  1024u
#define KVM_STATE_MAX_CPUID 4096u

/*
 * Fetches, once per process, what saving and restoring need to know about KVM: the MSR index list
 * (cpuid_kvm_get's cache: KVM_GET_MSR_INDEX_LIST is made at most once per process) and the
 * capabilities (XSAVE and the KVM_CAP_XSAVE2 buffer size, asked on the VM fd as api.rst 4.134 says;
 * XCRS, DEBUGREGS, VCPU_EVENTS, GET_TSC_KHZ). Later calls return 0 at once whatever the fds are.
 * x86_vm_save and x86_vm_restore call it with kvm_fd = -1 (the MSR list then comes from the cache
 * cpuid_kvm_get filled while the VM was built), so a snapshot that handles the VM section before
 * the vCPU sections (as it must: the VM section comes first) needs no explicit call. Thread-safe.
 * Returns 0, or -errno with `err` filled.
 */
__attribute__((warn_unused_result)) int x86_state_init(int kvm_fd, int vm_fd, char *err, size_t errlen);

/* Forgets the cache (tests only). */
void x86_state_reset(void);

/*
 * Appends vCPU `vcpu_fd`'s state to the open section of `w`. Preconditions: x86_state_init ran
 * (directly or through x86_vm_save); the vCPU is not in KVM_RUN (its thread parked), and if its last exit was
 * KVM_EXIT_IO or KVM_EXIT_MMIO it re-entered KVM_RUN with immediate_exit set since (api.rst 5, kvm_run: those
 * operations complete only on the next KVM_RUN; brisk's pause does that); every other vCPU is
 * stopped too (KVM_GET_VCPU_EVENTS is unsafe while others run). The first save in the process also
 * probes which listed MSRs KVM_GET_MSRS can read (once). Returns 0 or -errno with `err` naming the
 * ioctl.
 */
__attribute__((warn_unused_result)) int x86_vcpu_save(int vcpu_fd, struct snap_writer *w, char *err, size_t errlen);

/*
 * Restores a vCPU from the section `sec` (positioned at its start). Preconditions: x86_state_init
 * ran (directly or through x86_vm_restore); the vCPU was created and configured by brisk's normal per-vCPU set-up
 * (KVM_SET_CPUID2 with the table brisk computes for this host and configuration) and has not run. First refuses
 * (-EINVAL) a CPUID differing from the saved one, naming the leaf, subleaf, register and both
 * values; then matches the TSC frequency (KVM_SET_TSC_KHZ when it differs by more than 250 ppm);
 * then sets the state. Every length and count is validated before use. Returns 0 or -errno with
 * `err` filled; on failure the vCPU is half-restored and must not run.
 */
__attribute__((warn_unused_result)) int x86_vcpu_restore(int vcpu_fd, struct snap_reader *sec, char *err,
							 size_t errlen);

/*
 * Appends the VM-wide state to the open section of `w`: with `kernel_irqchip` (KVM's, --irqchip kernel)
 * KVM_GET_IRQCHIP for PIC master, PIC slave, IOAPIC and KVM_GET_PIT2; KVM_GET_CLOCK. Its vCPUs are stopped.
 * Returns 0 or -errno with `err` naming the ioctl.
 */
__attribute__((warn_unused_result)) int x86_vm_save(int vm_fd, bool kernel_irqchip, struct snap_writer *w, char *err,
						    size_t errlen);

/*
 * Restores the VM-wide state into a VM created like the saved one (with `kernel_irqchip`: irqchip and PIT2
 * created; a section of the other kind is refused). kvmclock resumes at the saved value: the guest does not
 * see the paused time; with `clock_realtime` it is advanced by the host's wall-clock time since the save, which
 * needs the saved wall-clock reading (see kvm_state.c): -ENODATA when the snapshot has none. Returns 0 or -errno
 * with `err` filled.
 */
__attribute__((warn_unused_result)) int x86_vm_restore(int vm_fd, bool kernel_irqchip, bool clock_realtime,
						       struct snap_reader *sec, char *err, size_t errlen);

#endif
