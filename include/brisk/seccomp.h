/* seccomp.h - per-thread seccomp allow-lists: one per thread role (docs/security.md, "Seccomp"). */
#ifndef BRISK_SECCOMP_H
#define BRISK_SECCOMP_H

#include <stdbool.h>

/*
 * The thread roles. A thread installs its role's filter once its set-up is
 * done and before it handles guest-controlled input; the filter stays for the
 * thread's life and is inherited by threads it creates later (which then obey
 * both filters: that is why the event loop's list covers the block workers it
 * starts, and the main thread's covers the event loop it restarts after a
 * snapshot and the console input thread it starts last).
 */
/* A process one of whose threads made a denied call exits with EXIT_SECCOMP (exitcode.h, docs/exit-codes.md). */
enum seccomp_role {
	SECCOMP_MAIN = 0,     /* the main thread once the VM runs: waits, the API, pause, snapshot, teardown */
	SECCOMP_VCPU,	      /* a vCPU thread: KVM_RUN and exit dispatch (device registers) */
	SECCOMP_IO,	      /* the I/O event loop: every virtio device's work */
	SECCOMP_BLK,	      /* a virtio-blk worker: file I/O on the disk image */
	SECCOMP_CONSOLE_OUT,  /* a console's output thread: ring to stdout or the file */
	SECCOMP_CONSOLE_IN,   /* a console's input thread: stdin to the ring */
	SECCOMP_PREFETCH,     /* a restore's working-set thread: madvise over guest RAM while the vCPUs run */
	SECCOMP_API_HELPER,   /* the brisk-api process (all its threads) */
	SECCOMP_SLIRP_HELPER, /* the brisk-slirp process */
	SECCOMP_ROLES
};

/*
 * Turns filtering on or off for this process (default off: unit tests and the
 * profiler run unfiltered; `brisk run` turns it on unless --seccomp off).
 * Turning it on installs the SIGSYS handler that reports a denied call and
 * reads BRISK_SECCOMP_SELFTEST (docs/security.md). Main thread, before any
 * other thread exists. Returns 0, or -errno (the kernel has no seccomp filters).
 */
__attribute__((warn_unused_result)) int seccomp_configure(bool on);
/*
 * In a forked child that attaches filters of its own (the clone server's clones): the tgkill rules name this
 * process, not the parent that ran seccomp_configure. Single-threaded, before any filter is attached.
 */
void seccomp_forked(void);
bool seccomp_on(void);
/* For brisk-api and brisk-slirp: whether the brisk that started them filters (it passes --seccomp off on). */
bool seccomp_helper_wanted(void);

/*
 * Installs `role`'s allow-list on the calling thread (the helper roles: on
 * every thread of the process, TSYNC), when filtering is on; else does
 * nothing. A thread that cannot be confined must not run unconfined: failure
 * writes one line naming the role and the error and exits the process with
 * status 4 (EXIT_HOST). Idempotent per thread for the same role.
 */
void seccomp_enter(enum seccomp_role role);

#endif
