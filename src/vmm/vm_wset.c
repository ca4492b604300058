/*
 * vm_wset.c - a restore's working set (wset.h), as the VM uses it: prefetched from the file beside the memory
 * file, or recorded into it once the guest has run for --working-set record=MS milliseconds or written its boot
 * marker, whichever comes first.
 *
 * The prefetch's reads start early in the restore (MADV_WILLNEED, asynchronous); mapping the pages
 * (MADV_POPULATE_READ, which waits for them) is a thread's, started at the end of the restore, so that the vCPUs
 * run meanwhile rather than after it: a cold page cache makes that wait the length of the reads (about 140 ms for
 * 64 MiB from a 460 MB/s disk, docs/performance.md "Working set"), which the guest's own work then overlaps, and a
 * restore's first KVM_RUN does not wait for it. A page the guest touches before the thread reaches it is faulted
 * in as in a lazy restore (its read already under way); one the thread mapped first costs the guest no fault.
 * `--working-set wait` maps them all before the vCPUs run instead, as brisk did first. The thread is cancelled
 * (between ranges) and joined when the VM ends.
 *
 * Why residency rather than the alternatives (docs/performance.md "Working set"): KVM's dirty log sees writes
 * only, and most of what a restored guest touches first it reads (its code, page tables, page cache); a
 * userfaultfd sees every first touch but costs a round trip to user space per page while recording and owns the
 * memory; /proc/self/pagemap's present bit is read once, at the end, 8 bytes per page (a 256 MiB guest: 512 KiB
 * read, about a millisecond), and is set by the guest's reads and writes alike, KVM's faults included. Its one
 * excess would be fault-around: a read fault on a file mapping also maps the neighbouring pages already in the
 * page cache (up to 16), which would then count as touched; a snapshot just written is all in the page cache. So a
 * recording drops the memory file's clean pages from the page cache first (POSIX_FADV_DONTNEED) and turns
 * readahead off for guest RAM while it records (MADV_RANDOM): the cache then holds only the pages the guest reads,
 * one by one. On a filesystem whose page cache is the file (tmpfs) nothing is dropped, and non-zero neighbours
 * still count. The recording restore pays for it with a 4 KiB read per page; later restores do not.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "brisk/log.h"
#include "brisk/seccomp.h"
#include "brisk/snapshot.h"
#include "brisk/thread.h"
#include "brisk/timeline.h"
#include "vm_impl.h"

static double mib(uint64_t pages)
{
	return (double)pages * WSET_PAGE / (1 << 20);
}

/* A recording: the pagemap (else mincore later), the deadline's timer, the boot marker's eventfd. */
static int prepare_record(struct vm *vm, struct vm_error *e)
{
	struct vm_wset *w = &vm->ws;

	w->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (w->pagemap_fd < 0)
		log_warn("working set: /proc/self/pagemap: %s; recording page-cache residency (mincore) instead",
			 strerror(errno));
	w->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	w->marker_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->timer_fd < 0 || w->marker_fd < 0) {
		int err = errno;

		snprintf(e->msg, sizeof(e->msg), "working set: timerfd/eventfd: %s", strerror(err));
		e->kind = VM_ERR_HOST;
		return -err;
	}
	if (vm->mem_file_fd >= 0) { /* exact: no neighbour cached for fault-around to map (above) */
		int err = posix_fadvise(vm->mem_file_fd, 0, 0, POSIX_FADV_DONTNEED);

		if (err)
			log_warn(
			    "working set: posix_fadvise(DONTNEED): %s; pages cached beside those the guest touches "
			    "may be recorded too",
			    strerror(err));
		w->no_readahead = madvise(vm->mem.base, (size_t)vm->mem.size, MADV_RANDOM) == 0;
	}
	return 0;
}

/* A prefetch: the list beside the memory file, checked; its reads started now, to overlap the restore. */
static void prepare_prefetch(struct vm *vm)
{
	struct vm_wset *w = &vm->ws;
	char err[PATH_MAX + 256];
	int ret = wset_load(w->path, w->crc, vm->mem.size, &w->list, err, sizeof(err));

	if (ret == -ENOENT)
		return;
	if (ret) {
		log_warn("working set: %s; restoring lazily", err);
		return;
	}
	w->prefetching = true;
	wset_prefetch_begin(&vm->mem, &w->list, &w->st);
}

int vm_wset_prepare(struct vm *vm, const char *mem_path, struct vm_error *e)
{
	struct vm_wset *w = &vm->ws;

	if (!vm->cfg.ws_record_ms && (vm->cfg.ws_no_prefetch || vm->cfg.mem_uffd))
		return 0; /* with Uffd, fetching is the page-fault handler's */
	if (vm->mem.hugetlbfs && !vm->cfg.mem_uffd) {
		/* a "2M" snapshot's memory file was read whole into hugetlbfs RAM: every page is there already */
		log_info("working set: hugetlbfs RAM, copied whole at the load: nothing to %s",
			 vm->cfg.ws_record_ms ? "record" : "prefetch");
		return 0;
	}
	if (wset_path(mem_path, w->path, sizeof(w->path))) {
		snprintf(e->msg, sizeof(e->msg), "working set: %s%s: path too long", mem_path, WSET_SUFFIX);
		e->kind = VM_ERR_USAGE;
		return -ENAMETOOLONG;
	}
	w->crc = snap_reader_checksum(vm->snap);
	if (vm->cfg.ws_record_ms)
		return prepare_record(vm, e);
	prepare_prefetch(vm);
	return 0;
}

/* Maps the listed pages (the thread's, or the restore's with --working-set wait) and says how it went. */
static void populate(struct vm *vm, const atomic_bool *cancel)
{
	struct vm_wset *w = &vm->ws;

	wset_prefetch_end(&vm->mem, &w->list, &w->st, cancel);
	if (w->st.error)
		log_warn("working set: madvise: %s; the rest of %s loads lazily", strerror(-w->st.error), w->path);
	if (w->st.cancelled)
		log_info("working set: the VM ended after %llu of %llu listed pages were mapped (%.3f ms)",
			 (unsigned long long)w->st.mapped, (unsigned long long)w->st.pages,
			 (double)w->st.ns_populate / 1e6);
	else
		log_info("working set: %llu pages (%.1f MiB) in %llu ranges from %s: reads started in %.3f ms, mapped "
			 "in %.3f ms%s",
			 (unsigned long long)w->st.pages, mib(w->st.pages), (unsigned long long)w->list.nr, w->path,
			 (double)w->st.ns_advise / 1e6, (double)w->st.ns_populate / 1e6,
			 cancel ? " while the vCPUs ran" : " before the vCPUs ran");
}

static void *populate_thread(void *arg)
{
	struct vm *vm = arg;

	prctl(PR_SET_NAME, "brisk_prefetch", 0, 0, 0);
	seccomp_enter(SECCOMP_PREFETCH);
	populate(vm, &vm->ws.cancel);
	return NULL;
}

void vm_wset_restored(struct vm *vm)
{
	struct vm_wset *w = &vm->ws;
	int err;

	if (!w->prefetching)
		return;
	if (!vm->cfg.ws_prefetch_wait) {
		if (!(err = bthread_create_masked(&w->thread, populate_thread, vm))) {
			w->populating = true;
			return;
		}
		log_warn("working set: no thread to map the pages (%s): mapping them before the vCPUs run",
			 strerror(err));
	}
	populate(vm, NULL);
	wset_free(&w->list);
}

void vm_wset_join(struct vm *vm)
{
	struct vm_wset *w = &vm->ws;

	if (!w->populating)
		return;
	atomic_store(&w->cancel, true);
	bthread_join(w->thread, NULL);
	w->populating = false;
	wset_free(&w->list);
}

void vm_wset_started(struct vm *vm)
{
	struct vm_wset *w = &vm->ws;
	struct itimerspec its = {.it_value = {.tv_sec = vm->cfg.ws_record_ms / 1000,
					      .tv_nsec = (long)(vm->cfg.ws_record_ms % 1000) * 1000000L}};

	if (w->timer_fd < 0)
		return;
	w->t0_ns = timeline_now_ns();
	timeline_bootmark_notify(w->marker_fd);
	if (timerfd_settime(w->timer_fd, 0, &its, NULL) < 0)
		log_warn("working set: timerfd_settime: %s; recording at the boot marker only", strerror(errno));
}

void vm_wset_record(struct vm *vm, bool at_marker)
{
	struct vm_wset *w = &vm->ws;
	uint64_t npages = vm->mem.size / WSET_PAGE, ms = (timeline_now_ns() - w->t0_ns) / 1000000u;
	uint8_t *present = malloc((size_t)npages);
	struct wset list = {.snapshot_crc = w->crc, .mem_size = vm->mem.size};
	char err[PATH_MAX + 256];
	int ret = present ? wset_residency(&vm->mem, w->pagemap_fd, present) : -ENOMEM;

	/* Once: the timer and the marker stop here (the marker's eventfd stays open until the vCPUs are gone). */
	timeline_bootmark_notify(-1);
	close(w->timer_fd);
	w->timer_fd = -1;
	w->recorded = true;
	if (w->pagemap_fd >= 0)
		close(w->pagemap_fd);
	w->pagemap_fd = -1;
	if (w->no_readahead) /* the VM's own reads from now on with readahead again */
		(void)madvise(vm->mem.base, (size_t)vm->mem.size, MADV_NORMAL);
	w->no_readahead = false;
	if (!ret)
		ret = wset_from_present(present, npages, &list);
	free(present);
	if (ret) {
		log_error("working set: reading the pages touched failed: %s; nothing recorded", strerror(-ret));
		return;
	}
	ret = wset_save(w->path, &list, err, sizeof(err));
	if (ret)
		log_error("working set: %s; nothing recorded", err);
	else
		log_info("working set: %llu pages (%.1f MiB) in %u ranges touched in the first %llu ms (%s) recorded "
			 "in %s",
			 (unsigned long long)list.pages, mib(list.pages), list.nr, (unsigned long long)ms,
			 at_marker ? "until the boot marker" : "the whole window", w->path);
	wset_free(&list);
}

void vm_wset_destroy(struct vm *vm)
{
	struct vm_wset *w = &vm->ws;

	vm_wset_join(vm); /* before guest RAM goes */
	if (w->marker_fd >= 0) {
		timeline_bootmark_notify(-1);
		close(w->marker_fd);
	}
	if (w->timer_fd >= 0)
		close(w->timer_fd);
	if (w->pagemap_fd >= 0)
		close(w->pagemap_fd);
	w->marker_fd = w->timer_fd = w->pagemap_fd = -1;
	wset_free(&w->list);
}

bool vm_wset_prefetched(const struct vm *vm, uint64_t *pages, uint64_t *advise_us, uint64_t *populate_us)
{
	const struct vm_wset *w = &vm->ws;

	*pages = w->st.pages;
	*advise_us = w->st.ns_advise / 1000u;
	*populate_us = w->st.ns_populate / 1000u;
	return w->prefetching;
}
