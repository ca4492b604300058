/*
 * mem_uffd.h - guest RAM served by an external page-fault handler: Firecracker's `mem_backend` of type Uffd
 * (v1.7.0 src/vmm/src/persist.rs guest_memory_from_uffd, docs/snapshotting/handling-page-faults-on-snapshot-
 * resume.md), so that a handler written for Firecracker serves brisk unchanged.
 *
 * The handshake, as Firecracker's: brisk maps guest RAM anonymous (MAP_PRIVATE | MAP_NORESERVE), creates a
 * userfaultfd (/dev/userfaultfd when it exists, else the userfaultfd system call; O_CLOEXEC | O_NONBLOCK, not
 * user-mode-only: KVM's own accesses must fault to the handler too), enables UFFD_FEATURE_EVENT_REMOVE when the
 * snapshot's VM has a balloon (its inflate is madvise(MADV_DONTNEED), which the handler must see), registers every
 * RAM region in MISSING mode, connects to the handler's Unix stream socket and sends, in one message, the JSON array
 * of GuestRegionUffdMapping (`[{"base_host_virt_addr":N,"size":N,"offset":N,"page_size_kib":4}]`: the region's host
 * address, its size, its offset in the memory file, 4 KiB pages) with the userfaultfd as SCM_RIGHTS; then it closes
 * the socket. Nothing is read back: Firecracker reads nothing either.
 *
 * Where brisk goes further (docs/security.md cases 80-82): the connect and the send are bounded (5 s,
 * SO_SNDTIMEO), and the handler's process (SO_PEERCRED at connect) is watched through a pidfd, so that one that
 * exits leaves no vCPU waiting for ever: the VM is ended (status 20) instead. A snapshot create fetches the pages
 * not served yet on a thread of its own and gives up when none comes for UFFD_FETCH_STALL_MS
 * (gmem_uffd_fetch_all). At teardown the regions are unregistered first, which wakes every thread waiting for a
 * page the handler never served.
 */
#ifndef BRISK_MEM_UFFD_H
#define BRISK_MEM_UFFD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/mem.h"

/* How long connect() and sendmsg() to the handler's socket may block (a handler that never accepts). */
#define UFFD_HANDSHAKE_TIMEOUT_MS 5000
/* How long gmem_uffd_fetch_all waits for the handler to serve one more page before it gives up. */
#define UFFD_FETCH_STALL_MS 5000

/* The handler's process as brisk watches it. */
struct uffd_peer {
	int pid;   /* SO_PEERCRED's pid at connect (0: not visible, e.g. another pid namespace) */
	int pidfd; /* pidfd_open(pid), readable once it exited; -1: not watched */
};

/*
 * Guest RAM of `size` bytes (gmem_init's mapping and alignment, no huge pages: 4 KiB pages, page_size_kib 4;
 * `hugetlbfs`: GMEM_HUGETLBFS's memfd, page_size_kib 2048, as Firecracker for a "2M" snapshot) whose missing
 * pages are served by the handler listening on `sock_path`; `remove_events`: ask for UFFD_FEATURE_EVENT_REMOVE (the VM
 * has a balloon). On success m->uffd holds brisk's copy of the userfaultfd and `peer` the handler's process. On failure
 * nothing is left mapped or open, and `err` names the step, the path and the reason
 * (-ENOENT/-ECONNREFUSED/-ENAMETOOLONG/-EPIPE/-ETIMEDOUT: the socket, the user's input; others: the host). Returns 0 or
 * -errno.
 */
__attribute__((warn_unused_result)) int gmem_init_uffd(struct gmem *m, uint64_t size, bool hugetlbfs,
						       const char *sock_path, bool remove_events,
						       struct uffd_peer *peer, char *err, size_t errlen);

/*
 * The JSON brisk sends for `m` (Firecracker's serde_json::to_string of Vec<GuestRegionUffdMapping>): one object
 * per region, its offset in the memory file being its offset in the mapping. Returns a malloc'd string (the
 * caller frees it) or NULL when out of memory.
 */
char *gmem_uffd_mappings_json(const struct gmem *m);

/*
 * Fills the whole page at `gpa` (4 KiB aligned, inside RAM) with `page`: UFFDIO_COPY when the handler has not
 * served it yet (so brisk never waits for the handler), a plain copy when it is there. For memory without a
 * userfaultfd, a plain copy. 0 or -errno (-EINVAL: not a page of RAM).
 */
__attribute__((warn_unused_result)) int gmem_fill_page(const struct gmem *m, uint64_t gpa, const void *page);
/*
 * gmem_fill_page with a page of `len` bytes of `data` followed by zeros (len at most 4 KiB, else -EINVAL): a
 * device's page that holds its structure alone (the VM Generation ID's, the VMClock's). The page is built on the
 * caller's stack, so no process keeps a 4 KiB buffer for it.
 */
__attribute__((warn_unused_result)) int gmem_fill_page_head(const struct gmem *m, uint64_t gpa, const void *data,
							    size_t len);

/*
 * Unregisters every region from the userfaultfd (UFFDIO_UNREGISTER), which wakes every thread waiting for a
 * page the handler has not served: they then see anonymous memory. For teardown only. Idempotent; nothing for
 * memory without a userfaultfd.
 */
void gmem_uffd_release(struct gmem *m);

/* The pages of RAM not in this process yet (mincore), i.e. still the handler's to serve. */
uint64_t gmem_uffd_missing(const struct gmem *m);

/*
 * A thread that brings every page of a Uffd-backed RAM into this process (MADV_POPULATE_READ: each missing page
 * a fault the handler serves), for a snapshot create, which reads all of RAM: the thread waits for the handler
 * so that brisk's main thread does not (docs/security.md case 82).
 */
struct uffd_fetcher {
	pthread_t thread;
	bool started;	   /* a thread exists (joined by gmem_uffd_fetcher_join) */
	_Atomic bool done; /* it returned: every page is there, or `error` */
	int error;	   /* its -errno */
	const struct gmem *m;
};

/*
 * Every page of `m` (Uffd-backed) present before this returns 0: at once when none is missing, else the
 * fetcher's thread (started here, or the one an earlier call left waiting) populates RAM while this thread
 * watches the number missing; the handler serving no page for `stall_ms` gives -ETIMEDOUT with `err` saying how
 * many are missing. The thread then stays waiting (a later call picks it up) until gmem_uffd_release wakes it.
 * 0 or -errno.
 */
__attribute__((warn_unused_result)) int gmem_uffd_fetch_all(const struct gmem *m, struct uffd_fetcher *f,
							    unsigned stall_ms, char *err, size_t errlen);
/* After gmem_uffd_release (which wakes it), before the memory is unmapped: the fetcher's thread joined. */
void gmem_uffd_fetcher_join(struct uffd_fetcher *f);

#endif
