/* exitcode.h - brisk's process exit statuses (documented in docs/exit-codes.md). */
#ifndef BRISK_EXITCODE_H
#define BRISK_EXITCODE_H

/*
 * Odd statuses 1..255 belong to the guest's debug-exit port
 * (((V & 0x7f) << 1) | 1, as QEMU's isa-debug-exit), so every status brisk
 * chooses itself is even.
 */
enum brisk_exit {
	EXIT_GUEST_OK = 0,	  /* guest powered off or requested a reset */
	EXIT_USAGE = 2,		  /* bad command line, option or value (E) */
	EXIT_HOST = 4,		  /* host failure: /dev/kvm, an ioctl, memory (E) */
	EXIT_IMAGE = 6,		  /* kernel/initrd image rejected (E) */
	EXIT_TRIPLE_FAULT = 8,	  /* KVM_EXIT_SHUTDOWN: guest triple fault (K) */
	EXIT_INTERNAL_ERROR = 10, /* KVM_EXIT_INTERNAL_ERROR (K) */
	EXIT_FAIL_ENTRY = 12,	  /* KVM_EXIT_FAIL_ENTRY (K) */
	EXIT_UNKNOWN_EXIT = 14,	  /* an exit reason brisk does not handle (K) */
	EXIT_STOPPED = 16,	  /* SIGINT, SIGTERM or Ctrl-A x from the host (K) */
	EXIT_SECCOMP = 18,	  /* a thread made a syscall its seccomp filter denies (K; include/brisk/seccomp.h) */
	EXIT_UFFD_HANDLER = 20,	  /* the page-fault handler serving guest RAM exited with pages unserved (K) */
};

#endif
