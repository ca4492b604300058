/* seccomp_lists.c - the allow-list of each thread role (include/brisk/seccomp.h, docs/security.md "Seccomp"). */
#include <linux/if_tun.h>
#include <linux/kvm.h>
#include <linux/userfaultfd.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/mount.h> /* BLKGETSIZE64 */
#include <termios.h>

#include "seccomp_impl.h"

/*
 * ioctl is allowed by request number only. The vCPU thread: KVM_RUN, the
 * register dump of an exit that ends the VM, and the device wiring a
 * driver's register write triggers (an IRQ line, a queue's ioeventfd and
 * irqfd, the tap's offloads once the driver chose its features; with the split irqchip, the I/O APIC's message
 * and the routing table a redirection entry rewrites). The main thread: the state a snapshot reads (VM and
 * vCPUs; the memory slots' dirty logs, for a Diff), the same device wiring (a device reset or stopped there;
 * SendCtrlAltDel's interrupt), and the terminal restored at exit; a Uffd-restored VM's memory unregistered from
 * its userfaultfd at teardown (UFFDIO_UNREGISTER: wakes a vCPU waiting for a page its handler never serves).
 * The console input thread: the UART's interrupt when typed input arrives (its receive interrupt enabled, as Linux's
 * 8250 driver has it): KVM_IRQ_LINE with KVM's irqchip, the I/O APIC's KVM_SIGNAL_MSI with the split one.
 * brisk-slirp: libslirp's non-blocking switch and queue
 * size.
 */
static const unsigned long vcpu_ioctls[] = {KVM_RUN,   KVM_GET_REGS,  KVM_GET_SREGS,  KVM_IRQ_LINE,	  KVM_IOEVENTFD,
					    KVM_IRQFD, TUNSETOFFLOAD, KVM_SIGNAL_MSI, KVM_SET_GSI_ROUTING};
static const unsigned long main_ioctls[] = {
    KVM_CHECK_EXTENSION, KVM_GET_CLOCK,	      KVM_GET_IRQCHIP,	 KVM_GET_PIT2,	 KVM_GET_REGS,	  KVM_GET_SREGS,
    KVM_GET_FPU,	 KVM_GET_MSRS,	      KVM_GET_XSAVE,	 KVM_GET_XSAVE2, KVM_GET_XCRS,	  KVM_GET_LAPIC,
    KVM_GET_MP_STATE,	 KVM_GET_VCPU_EVENTS, KVM_GET_DEBUGREGS, KVM_GET_CPUID2, KVM_GET_TSC_KHZ, KVM_IRQ_LINE,
    KVM_SIGNAL_MSI,	 KVM_IOEVENTFD,	      KVM_IRQFD,	 TCSETS,	 TCGETS,	  BLKGETSIZE64,
    UFFDIO_UNREGISTER,	 KVM_GET_DIRTY_LOG};
static const unsigned long in_ioctls[] = {KVM_IRQ_LINE, KVM_SIGNAL_MSI};
static const unsigned long slirp_ioctls[] = {FIONBIO, FIONREAD};

#define IOCTLS(a)                                                                                                      \
	{                                                                                                              \
		a, sizeof(a) / sizeof(a[0])                                                                            \
	}
const struct sc_ioctls sc_role_ioctls[SECCOMP_ROLES] = {
    [SECCOMP_MAIN] = IOCTLS(main_ioctls),
    [SECCOMP_VCPU] = IOCTLS(vcpu_ioctls),
    [SECCOMP_CONSOLE_IN] = IOCTLS(in_ioctls),
    [SECCOMP_SLIRP_HELPER] = IOCTLS(slirp_ioctls),
};

/*
 * Every role: thread exit and the SIGSYS report (exit, exit_group), locks (futex), the allocator (brk, mmap,
 * mprotect: never PROT_EXEC; munmap, madvise; mremap: glibc's realloc of a block it took with mmap, i.e. one
 * of 128 KiB or more, such as a 16-vCPU VM's state file as it is built), signal masks around thread creation and exit,
 * the kick handler's return and a sleep resumed after a stop (restart_syscall), the log line (write; sendto only to fd
 * 2, a socket stderr), clocks where the vDSO falls back to the kernel. sigaltstack and gettid: ASan's runtime at each
 * thread's start and end.
 */
#define BASE_CALLS                                                                                                     \
	SC(exit), SC(exit_group), SC(futex), SC(brk), SC(mmap), SC(mprotect), SC(munmap), SC(madvise), SC(mremap),     \
	    SC(rt_sigprocmask), SC(rt_sigreturn), SC(restart_syscall), SC(sigaltstack), SC(write), SC(sendto),         \
	    SC(clock_gettime), SC(gettid), SANITIZER_THREAD_CALLS

/*
 * ASan+UBSan builds only, every thread: the sanitizer runtime's internal spin locks (its allocator, its thread
 * registry) call sched_yield while another thread holds them, e.g. a vCPU thread while main runs the exit's leak check
 * (seen: test_data_loss.py's 16-disk configuration, a vCPU ending with "denied syscall sched_yield"). The plain build
 * never yields.
 */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZER_THREAD_CALLS SC(sched_yield)
#else
#define SANITIZER_THREAD_CALLS SC(exit)
#endif

/* Ending the VM from this thread kicks every vCPU: pthread_kill is getpid + tgkill (to this process only). */
#define KICK_CALLS SC(getpid), SC(tgkill)

/* Starting a thread: clone (threads only; clone3 answers ENOSYS so glibc falls back to clone) and what the new
 * thread does before and while it adds its own filter (set_robust_list, rseq; sched_getaffinity: ASan's
 * runtime reads its new thread's attributes; prctl PR_SET_NO_NEW_PRIVS and
 * seccomp SECCOMP_SET_MODE_FILTER only: a filter can only narrow what is allowed). */
#define SPAWN_CALLS SC(clone), SC(clone3), SC(set_robust_list), SC(rseq), SC(sched_getaffinity), SC(prctl), SC(seccomp)

/* A virtio-blk worker's file I/O (src/virtio/blk/blk_io.c): vectored reads and writes, flushes, holes, and the
 * image's size (a file truncated under the VM). */
#define BLK_CALLS SC(preadv), SC(pwritev), SC(fdatasync), SC(fallocate), SC(newfstatat)

/*
 * The I/O event loop: every virtio device's queues (eventfds, the tap, brisk-slirp's socketpair, vsock's Unix
 * sockets: a guest's connect is a socket + connect here, a host's an accept4), a disk read the page cache holds
 * (preadv2 RWF_NOWAIT), the entropy (getrandom), rate-limit and retry timers (timerfd), the block workers it
 * starts, ending the VM on a device fault.
 */
#define IO_CALLS                                                                                                       \
	SC(epoll_wait), SC(epoll_ctl), SC(read), SC(readv), SC(writev), SC(close), SC(eventfd2), SC(socket),           \
	    SC(connect), SC(accept4), SC(shutdown), SC(recvfrom), SC(sendmsg), SC(timerfd_settime), SC(getrandom),     \
	    SC(preadv2)

static const struct sc_call vcpu_calls[] = {BASE_CALLS,
					    KICK_CALLS,
					    SC(ioctl),
					    SC(gettid),
					    /* a driver's register writes on this thread activate or reset a virtio
					     * device: its eventfds, watches and timers, the tap's offloads */
					    SC(eventfd2),
					    SC(epoll_ctl),
					    SC(close),
					    SC(read),
					    SC(timerfd_settime),
					    /* its own page faults and kernel time, once, as it ends (exits.h) */
					    SC(getrusage),
					    {0, NULL}};
static const struct sc_call io_calls[] = {BASE_CALLS, KICK_CALLS, IO_CALLS, BLK_CALLS, SPAWN_CALLS, {0, NULL}};
static const struct sc_call blk_calls[] = {BASE_CALLS, BLK_CALLS, {0, NULL}};
static const struct sc_call out_calls[] = {BASE_CALLS, SC(poll), SC(read), {0, NULL}};
static const struct sc_call in_calls[] = {BASE_CALLS, KICK_CALLS, SC(poll), SC(read), SC(ioctl), {0, NULL}};
/* madvise(MADV_POPULATE_READ) over guest RAM and the log line: the base list holds both. */
static const struct sc_call prefetch_calls[] = {BASE_CALLS, {0, NULL}};
/*
 * ASan+UBSan builds only (main and the helpers): LeakSanitizer's check when a process exits stops the world the way a
 * debugger does: a tracer task cloned from the main thread (not a thread: CLONE_UNTRACED) attaches to every thread with
 * ptrace and reads /proc/self/task (open, getdents: its raw calls). The plain build allows none of this (seccomp.c
 * relaxes prctl and clone to match in sanitizer builds only).
 */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZER_EXIT_CALLS                                                                                           \
	SC(ptrace), SC(open), SC(getdents), SC(getdents64), SC(lseek), SC(sched_yield), SC(rt_sigaction), SC(waitid),  \
	    SC(wait4), SC(getppid), SC(readlink), SC(nanosleep), SC(prctl), SC(clone)
#else
#define SANITIZER_EXIT_CALLS SC(exit)
#endif

/*
 * The main thread from just before the first KVM_RUN: waiting (poll, the
 * signalfd), the API link (recvfrom; sendto), pause (kicks), the
 * console input thread it starts last (SPAWN_CALLS), snapshot create (files
 * replaced whole, include/brisk/file.h: openat, newfstatat, fcntl (locks),
 * fchmod, ftruncate, pwrite64, fsync, renameat, unlinkat of a temporary
 * file; readlink: realpath of a symbolic link target; a restored VM's RAM
 * saved without faulting in its memory file's holes: lseek SEEK_DATA, mincore;
 * the VM's and vCPUs'
 * state ioctls), a load completing an interrupted create (renameat), the
 * profile's reports (dup for stdio), metrics and logger files, SendCtrlAltDel, the end (joins,
 * devices stopped: close, unlink of the vsock socket, the helpers reaped:
 * wait4, kill, clock_nanosleep; the terminal restored: TCSETS), json-c's hash seed
 * (getrandom, on the first JSON the API builds); PATCH /drives after boot (a new image opened and
 * checked as at PUT: fstatfs, statx, fallocate's hole probe, BLKGETSIZE64; the rate limiter's timer
 * re-armed: timerfd_settime); PATCH /balloon/statistics (the balloon's statistics timer: timerfd_settime). The I/O
 * loop's thread is parked and woken around a snapshot, not recreated.
 */
static const struct sc_call main_calls[] = {
    BASE_CALLS,
    KICK_CALLS,
    SPAWN_CALLS,
    SC(poll),
    SC(read),
    SC(close),
    SC(ioctl),
    SC(recvfrom),
    SC(timerfd_settime),
    SC(openat),
    SC(newfstatat),
    SC(fcntl),
    SC(ftruncate),
    SC(pwrite64),
    SC(fsync),
    SC(unlink),
    SC(unlinkat),
    SC(rename),
    SC(renameat),
    SC(renameat2),
    SC(fchmod),
    SC(dup),
    SC(readlink),
    SC(readlinkat),
    SC(lseek),
    SC(mincore),
    SC(wait4),
    SC(kill),
    SC(clock_nanosleep),
    SC(gettid),
    SC(getrandom),
    SC(fstatfs),
    SC(statx),
    SC(fallocate),
    SC(timerfd_settime),
    /* a Diff snapshot merged onto the memory file at its path: the copy (memlayer.c) */
    SC(copy_file_range),
    SANITIZER_EXIT_CALLS,
    {0, NULL}};
/* brisk-api (src/api/api_http.c), once it serves: one thread polling the listening socket, the link to brisk and
 * its clients' connections (recv/send are recvfrom/sendto); getpid and tgkill for abort. */
static const struct sc_call api_calls[] = {BASE_CALLS,	 SC(poll),   SC(accept4), SC(recvfrom),		SC(close),
					   SC(shutdown), SC(getpid), SC(tgkill),  SANITIZER_EXIT_CALLS, {0, NULL}};
/*
 * brisk-slirp: libslirp's sockets for the guest's connections (IPv4/IPv6 only), resolv.conf read-only. Found by
 * the real-kernel tier: a hostfwd connection is libslirp's accept(2), not accept4.
 */
static const struct sc_call slirp_calls[] = {BASE_CALLS,
					     SC(poll),
					     SC(ppoll),
					     SC(read),
					     SC(readv),
					     SC(writev),
					     SC(recvfrom),
					     SC(recvmsg),
					     SC(sendmsg),
					     SC(socket),
					     SC(connect),
					     SC(accept),
					     SC(accept4),
					     SC(bind),
					     SC(listen),
					     SC(shutdown),
					     SC(close),
					     SC(fcntl),
					     SC(ioctl),
					     SC(setsockopt),
					     SC(getsockopt),
					     SC(getsockname),
					     SC(getpeername),
					     SC(openat),
					     SC(newfstatat),
					     SC(lseek),
					     SC(getrandom),
					     SC(gettid),
					     SC(getpid),
					     SC(tgkill),
					     SANITIZER_EXIT_CALLS,
					     {0, NULL}};

const struct sc_role sc_roles[SECCOMP_ROLES] = {
    [SECCOMP_MAIN] = {"main", main_calls},
    [SECCOMP_VCPU] = {"vcpu", vcpu_calls},
    [SECCOMP_IO] = {"io", io_calls},
    [SECCOMP_BLK] = {"blk", blk_calls},
    [SECCOMP_CONSOLE_OUT] = {"console-out", out_calls},
    [SECCOMP_CONSOLE_IN] = {"console-in", in_calls},
    [SECCOMP_PREFETCH] = {"prefetch", prefetch_calls},
    [SECCOMP_API_HELPER] = {"brisk-api", api_calls},
    [SECCOMP_SLIRP_HELPER] = {"brisk-slirp", slirp_calls},
};
