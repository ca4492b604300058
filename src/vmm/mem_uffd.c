/* mem_uffd.c - guest RAM served by a Firecracker-format page-fault handler over a userfaultfd (mem_uffd.h). */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "brisk/fdpass.h"
#include "brisk/log.h"
#include "brisk/mem_uffd.h"
#include "brisk/thread.h"

#define PAGE_4K 4096u

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

/*
 * A userfaultfd, O_CLOEXEC | O_NONBLOCK, not UFFD_USER_MODE_ONLY (KVM's faults on guest RAM are the kernel's).
 * /dev/userfaultfd first (Linux 6.1+, where Firecracker's documentation creates it: its permissions decide, not
 * vm.unprivileged_userfaultfd), else the system call. -errno of the system call when both fail.
 */
static int uffd_create(void)
{
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC), fd;

	if (dev >= 0) {
		fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
		close(dev);
		if (fd >= 0)
			return fd;
	}
	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	return fd >= 0 ? fd : -errno;
}

/* UFFDIO_API with the features asked for, then each region registered for missing pages. */
static int uffd_setup(const struct gmem *m, int fd, bool remove_events, char *err, size_t errlen)
{
	struct uffdio_api api = {.api = UFFD_API, .features = remove_events ? UFFD_FEATURE_EVENT_REMOVE : 0};

	if (ioctl(fd, UFFDIO_API, &api) < 0) {
		int e = errno;

		snprintf(err, errlen, "UFFDIO_API (features 0x%llx) failed: %s", (unsigned long long)api.features,
			 strerror(e));
		return -e;
	}
	for (unsigned i = 0; i < m->nr; i++) {
		const struct gmem_region *r = &m->region[i];
		struct uffdio_register reg = {
		    .range = {.start = (uintptr_t)r->host, .len = r->size},
		    .mode = UFFDIO_REGISTER_MODE_MISSING,
		};

		if (ioctl(fd, UFFDIO_REGISTER, &reg) < 0) {
			int e = errno;

			snprintf(err, errlen, "UFFDIO_REGISTER of guest RAM [0x%llx, +0x%llx) failed: %s",
				 (unsigned long long)r->gpa, (unsigned long long)r->size, strerror(e));
			return -e;
		}
		if (!(reg.ioctls & (1ull << _UFFDIO_COPY))) {
			snprintf(err, errlen, "the kernel offers no UFFDIO_COPY on guest RAM (ioctls 0x%llx)",
				 (unsigned long long)reg.ioctls);
			return -ENOTSUP;
		}
	}
	return 0;
}

char *gmem_uffd_mappings_json(const struct gmem *m)
{
	json_object *a = json_object_new_array();
	char *s = NULL;

	if (!a)
		return NULL;
	for (unsigned i = 0; i < m->nr; i++) {
		const struct gmem_region *r = &m->region[i];
		json_object *o = json_object_new_object();

		/* serde's order: the struct's field order (persist.rs GuestRegionUffdMapping). */
		if (!o || json_object_array_add(a, o)) {
			json_object_put(o);
			goto out;
		}
		json_object_object_add(o, "base_host_virt_addr", json_object_new_int64((int64_t)(uintptr_t)r->host));
		json_object_object_add(o, "size", json_object_new_int64((int64_t)r->size));
		json_object_object_add(o, "offset", json_object_new_int64((int64_t)(r->host - m->base)));
		json_object_object_add(o, "page_size_kib", json_object_new_int64(m->hugetlbfs ? 2048 : PAGE_4K / 1024));
	}
	s = strdup(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN));
out:
	json_object_put(a);
	return s;
}

/* A stream socket connected to `path`, connect and send bounded by UFFD_HANDSHAKE_TIMEOUT_MS. */
static int connect_handler(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = UFFD_HANDSHAKE_TIMEOUT_MS / 1000,
			     .tv_usec = (UFFD_HANDSHAKE_TIMEOUT_MS % 1000) * 1000};
	int fd, e;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "mem_backend backend_path %s: longer than a Unix socket path may be (%zu bytes)",
			 path, sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "socket(AF_UNIX) failed: %s", strerror(e));
		return -e;
	}
	/* A Unix connect waits while the listener's backlog is full, for as long as SO_SNDTIMEO (af_unix.c). */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0 &&
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return fd;
	e = errno == EAGAIN || errno == EINPROGRESS ? ETIMEDOUT : errno;
	close(fd);
	snprintf(err, errlen, "mem_backend backend_path %s: cannot connect to the page-fault handler: %s", path,
		 strerror(e));
	return -e;
}

/* One message: the mappings' JSON with the userfaultfd as SCM_RIGHTS (Firecracker's send_with_fd). */
static int send_mappings(int sock, const char *json, int uffd, const char *path, char *err, size_t errlen)
{
	int ret = fdpass_send(sock, json, strlen(json), &uffd, 1);

	if (!ret)
		return 0;
	ret = ret == -EAGAIN ? -ETIMEDOUT : ret;
	snprintf(err, errlen,
		 "mem_backend backend_path %s: sending the guest memory mappings and the userfaultfd to the "
		 "page-fault handler failed: %s",
		 path, ret == -EPIPE ? "a short write" : strerror(-ret));
	return ret;
}

/* The handler's process, from the connected socket: watched through a pidfd (Linux 5.3+), else not at all. */
static void watch_peer(int sock, struct uffd_peer *peer)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	*peer = (struct uffd_peer){.pidfd = -1};
	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid <= 0) {
		log_warn("the page-fault handler's process is not visible (SO_PEERCRED); brisk cannot notice it exit");
		return;
	}
	peer->pid = cred.pid;
	peer->pidfd = (int)syscall(SYS_pidfd_open, cred.pid, 0);
	if (peer->pidfd < 0)
		log_warn("pidfd_open(%d) of the page-fault handler failed: %s; brisk cannot notice it exit", cred.pid,
			 strerror(errno));
}

static int handshake(struct gmem *m, const char *path, struct uffd_peer *peer, char *err, size_t errlen)
{
	char *json = gmem_uffd_mappings_json(m);
	int sock, ret;

	if (!json) {
		snprintf(err, errlen, "out of memory for the guest memory mappings");
		return -ENOMEM;
	}
	sock = connect_handler(path, err, errlen);
	if (sock < 0) {
		free(json);
		return sock;
	}
	watch_peer(sock, peer);
	ret = send_mappings(sock, json, m->uffd, path, err, errlen);
	log_debug("uffd: sent %s to %s (handler pid %d)", json, path, peer->pid);
	free(json);
	close(sock); /* as Firecracker: after the message nothing more is said on the socket */
	if (ret && peer->pidfd >= 0) {
		close(peer->pidfd);
		peer->pidfd = -1;
	}
	return ret;
}

int gmem_init_uffd(struct gmem *m, uint64_t size, bool hugetlbfs, const char *sock_path, bool remove_events,
		   struct uffd_peer *peer, char *err, size_t errlen)
{
	int ret = gmem_init(m, size, hugetlbfs ? GMEM_HUGETLBFS : 0), fd;

	*peer = (struct uffd_peer){.pidfd = -1};
	if (ret) {
		snprintf(err, errlen, "mapping %llu bytes of %sguest RAM failed: %s%s", (unsigned long long)size,
			 hugetlbfs ? "hugetlbfs " : "", strerror(-ret),
			 hugetlbfs && ret == -ENOMEM ? " (the host's pool of 2 MiB pages: /proc/sys/vm/nr_hugepages)"
						     : "");
		return ret;
	}
	/*
	 * page_size_kib 4: the handler copies 4 KiB pages; no transparent huge page is made behind its back.
	 * hugetlbfs RAM (the snapshot's VM had huge_pages "2M"): page_size_kib 2048, as Firecracker's.
	 */
	if (!m->hugetlbfs)
		(void)madvise(m->base, (size_t)m->size, MADV_NOHUGEPAGE);
	fd = uffd_create();
	if (fd < 0) {
		snprintf(err, errlen, "creating a userfaultfd failed (/dev/userfaultfd and the system call): %s",
			 strerror(-fd));
		gmem_destroy(m);
		return fd;
	}
	m->uffd = fd;
	m->uffd_backed = true;
	ret = uffd_setup(m, fd, remove_events, err, errlen);
	if (!ret)
		ret = handshake(m, sock_path, peer, err, errlen);
	if (ret)
		gmem_destroy(m);
	return ret;
}

int gmem_fill_page(const struct gmem *m, uint64_t gpa, const void *page)
{
	uint8_t *p = gmem_ptr(m, gpa, PAGE_4K);
	struct uffdio_copy c;

	if (!p || (gpa & (PAGE_4K - 1)))
		return -EINVAL;
	gmem_mark_dirty(m, gpa, PAGE_4K); /* brisk's own write, which KVM's dirty log does not see (a Diff's) */
	/*
	 * hugetlbfs RAM is filled 2 MiB at a time (UFFDIO_COPY of a whole huge page), and the rest of this one is
	 * the handler's: the write faults and waits for it to serve the page, as every write of Firecracker's does.
	 */
	if (!m->uffd_backed || m->hugetlbfs) {
		memcpy(p, page, PAGE_4K);
		return 0;
	}
	c = (struct uffdio_copy){.dst = (uintptr_t)p, .src = (uintptr_t)page, .len = PAGE_4K};
	if (ioctl(m->uffd, UFFDIO_COPY, &c) == 0)
		return 0;
	if (errno != EEXIST) /* EEXIST: the handler served it already, so touching it cannot wait */
		return -errno;
	memcpy(p, page, PAGE_4K);
	return 0;
}

int gmem_fill_page_head(const struct gmem *m, uint64_t gpa, const void *data, size_t len)
{
	uint8_t page[PAGE_4K];

	if (len > sizeof(page))
		return -EINVAL;
	memcpy(page, data, len);
	memset(page + len, 0, sizeof(page) - len);
	return gmem_fill_page(m, gpa, page);
}

void gmem_uffd_release(struct gmem *m)
{
	struct uffdio_range r = {.start = (uintptr_t)m->base, .len = m->size};

	if (!m->uffd_backed || !m->base)
		return;
	if (ioctl(m->uffd, UFFDIO_UNREGISTER, &r) < 0 && errno != EINVAL)
		log_warn("UFFDIO_UNREGISTER of guest RAM failed: %s", strerror(errno));
}

uint64_t gmem_uffd_missing(const struct gmem *m)
{
	unsigned char vec[1024];
	const uint64_t span = sizeof(vec) * PAGE_4K;
	uint64_t missing = 0;

	for (uint64_t off = 0; off < m->size; off += span) {
		size_t len = (size_t)(m->size - off < span ? m->size - off : span);

		if (mincore(m->base + off, len, vec) < 0)
			return m->size / PAGE_4K; /* cannot tell: as if nothing were there */
		for (size_t i = 0; i < (len + PAGE_4K - 1) / PAGE_4K; i++)
			missing += !(vec[i] & 1);
	}
	return missing;
}

/* The fetcher's thread: all of RAM populated, each missing page a read fault the handler serves. */
static void *fetch_thread(void *arg)
{
	struct uffd_fetcher *f = arg;
	const struct gmem *m = f->m;
	int ret;

	do
		ret = madvise(m->base, (size_t)m->size, MADV_POPULATE_READ) ? -errno : 0;
	while (ret == -EINTR);
	if (ret == -EINVAL) { /* a kernel before 5.14: a read of each page faults it in the same way */
		ret = 0;
		for (uint64_t off = 0; off < m->size; off += PAGE_4K)
			(void)*(volatile const uint8_t *)(m->base + off);
	}
	f->error = ret;
	atomic_store(&f->done, true);
	return NULL;
}

static uint64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

int gmem_uffd_fetch_all(const struct gmem *m, struct uffd_fetcher *f, unsigned stall_ms, char *err, size_t errlen)
{
	const struct timespec tick = {.tv_nsec = 20 * 1000000L};
	uint64_t missing = gmem_uffd_missing(m), now, deadline;
	int ret;

	if (!m->uffd_backed || (!missing && !f->started))
		return 0;
	if (!f->started) {
		f->m = m;
		f->error = 0;
		atomic_store(&f->done, false);
		ret = -bthread_create(&f->thread, fetch_thread, f);
		if (ret) {
			snprintf(err, errlen, "starting a thread to fetch guest memory from the page-fault handler: %s",
				 strerror(-ret));
			return ret;
		}
		f->started = true;
	}
	deadline = mono_ms() + stall_ms;
	while (!atomic_load(&f->done)) {
		uint64_t left;

		(void)clock_nanosleep(CLOCK_MONOTONIC, 0, &tick, NULL);
		left = gmem_uffd_missing(m);
		now = mono_ms();
		if (left < missing) { /* progress: the handler serves */
			missing = left;
			deadline = now + stall_ms;
		} else if (now >= deadline && !atomic_load(&f->done)) {
			snprintf(
			    err, errlen,
			    "the page-fault handler served no page of guest memory in %u ms; %llu pages (%.1f MiB) of "
			    "%llu are still missing, and a snapshot needs all of them",
			    stall_ms, (unsigned long long)missing, (double)missing * PAGE_4K / (1 << 20),
			    (unsigned long long)(m->size / PAGE_4K));
			return -ETIMEDOUT;
		}
	}
	bthread_join(f->thread, NULL);
	f->started = false;
	if (f->error) {
		snprintf(err, errlen, "fetching guest memory from the page-fault handler: madvise: %s",
			 strerror(-f->error));
		return f->error;
	}
	return 0;
}

void gmem_uffd_fetcher_join(struct uffd_fetcher *f)
{
	if (!f->started)
		return;
	bthread_join(f->thread, NULL);
	f->started = false;
}
