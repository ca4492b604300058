/* evloop.c - the I/O event loop: one epoll thread running device callbacks (include/brisk/evloop.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "brisk/evloop.h"
#include "brisk/fc_metrics.h"
#include "brisk/log.h"
#include "brisk/seccomp.h"
#include "brisk/thread.h"

#define EVLOOP_MAX_WATCH 256 /* fds: a few per device; bounded so a registration cannot grow forever */
#define EVLOOP_BATCH	 32  /* events taken per epoll_wait */

struct watch {
	int fd;
	evloop_fn fn;
	void *arg;
};

/*
 * The thread is started once and lives until evloop_destroy: evloop_stop parks it (a snapshot stops the
 * loop) and evloop_start wakes it, so that no thread is created after the main thread confined itself
 * (a thread inherits its creator's seccomp filter: docs/security.md, "Seccomp").
 */
struct evloop {
	int epfd;
	int stop_fd; /* eventfd: leave the loop (park, or end with `quit`) */
	pthread_t thread;
	bool started;	     /* the thread exists (until joined by evloop_destroy) */
	bool running;	     /* started and not stopped */
	bool parked, resume; /* under park_lock: the thread waits in park(); evloop_start lets it go */
	bool quit, ended;    /* under park_lock: evloop_destroy ends it; the thread has returned */
	pthread_mutex_t park_lock;
	pthread_cond_t park_cond;
	pthread_mutex_t lock; /* nr / watch[] against concurrent evloop_add */
	unsigned nr;
	struct watch watch[EVLOOP_MAX_WATCH];
};

struct evloop *evloop_create(void)
{
	struct evloop *l = calloc(1, sizeof(*l));
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};

	if (!l)
		return NULL;
	pthread_mutex_init(&l->lock, NULL);
	pthread_mutex_init(&l->park_lock, NULL);
	pthread_cond_init(&l->park_cond, NULL);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->epfd < 0 || l->stop_fd < 0 || epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->stop_fd, &ev) < 0) {
		int err = errno;

		evloop_destroy(l);
		errno = err;
		return NULL;
	}
	return l;
}

int evloop_add(struct evloop *l, int fd, uint32_t events, evloop_fn fn, void *arg)
{
	struct epoll_event ev = {.events = events};
	struct watch *w;

	pthread_mutex_lock(&l->lock);
	if (l->nr == EVLOOP_MAX_WATCH) {
		pthread_mutex_unlock(&l->lock);
		return -ENOSPC;
	}
	w = &l->watch[l->nr];
	*w = (struct watch){.fd = fd, .fn = fn, .arg = arg};
	ev.data.ptr = w;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int err = errno;

		pthread_mutex_unlock(&l->lock);
		return -err;
	}
	l->nr++;
	pthread_mutex_unlock(&l->lock);
	return 0;
}

/* The stop eventfd fired: waits until evloop_start (returns false) or evloop_destroy (true). */
static bool park(struct evloop *l)
{
	uint64_t stale;
	bool quit;

	if (read(l->stop_fd, &stale, sizeof(stale)) < 0 && errno != EAGAIN)
		log_warn("I/O event loop: reading its stop eventfd: %s", strerror(errno));
	pthread_mutex_lock(&l->park_lock);
	l->parked = true;
	pthread_cond_broadcast(&l->park_cond);
	while (!l->resume && !l->quit)
		pthread_cond_wait(&l->park_cond, &l->park_lock);
	l->parked = l->resume = false;
	pthread_cond_broadcast(&l->park_cond); /* evloop_start waits for this */
	quit = l->quit;
	pthread_mutex_unlock(&l->park_lock);
	return quit;
}

static void run(struct evloop *l)
{
	struct epoll_event ev[EVLOOP_BATCH];

	for (;;) {
		int n = epoll_wait(l->epfd, ev, EVLOOP_BATCH, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("I/O event loop: epoll_wait: %s", strerror(errno));
			return;
		}
		for (int i = 0; i < n; i++) {
			const struct watch *w = ev[i].data.ptr;

			if (!w) { /* the stop eventfd: the rest of the batch is reported again after the park */
				if (park(l))
					return;
				break;
			}
			fcm_inc(fcm_vmm, FCM_VMM_device_events); /* Firecracker's vmm.device_events: one per event */
			w->fn(w->arg, ev[i].events);
		}
	}
}

static void *loop_thread(void *arg)
{
	struct evloop *l = arg;

	prctl(PR_SET_NAME, "brisk_io", 0, 0, 0);
	log_set_thread_name("brisk_io"); /* Firecracker handles device events on its VMM thread; brisk here */
	seccomp_enter(SECCOMP_IO);
	run(l);
	pthread_mutex_lock(&l->park_lock);
	l->ended = true;
	pthread_cond_broadcast(&l->park_cond);
	pthread_mutex_unlock(&l->park_lock);
	return NULL;
}

int evloop_start(struct evloop *l)
{
	int err;

	uint64_t stale;

	if (l->running)
		return 0;
	if (l->started) { /* parked by evloop_stop: let it go */
		pthread_mutex_lock(&l->park_lock);
		l->resume = true;
		pthread_cond_broadcast(&l->park_cond);
		/*
		 * Until the thread has left park(): else a quick evloop_stop would see `parked` still set,
		 * return at once (the loop then runs during its caller's work) and leave a stale resume
		 * behind, so that the park its wake-up causes waits for an evloop_start that never comes.
		 */
		while (l->resume && !l->ended)
			pthread_cond_wait(&l->park_cond, &l->park_lock);
		pthread_mutex_unlock(&l->park_lock);
		l->running = true;
		return 0;
	}
	if (read(l->stop_fd, &stale, sizeof(stale)) < 0 && errno != EAGAIN)
		return -errno;
	err = bthread_create_masked(&l->thread, loop_thread, l);
	if (err)
		return -err;
	l->started = l->running = true;
	return 0;
}

static void wake(struct evloop *l)
{
	uint64_t one = 1;

	if (write(l->stop_fd, &one, sizeof(one)) < 0)
		log_warn("I/O event loop: waking it to stop failed: %s", strerror(errno));
}

void evloop_stop(struct evloop *l)
{
	if (!l || !l->running)
		return;
	wake(l);
	pthread_mutex_lock(&l->park_lock);
	while (!l->parked && !l->ended)
		pthread_cond_wait(&l->park_cond, &l->park_lock);
	pthread_mutex_unlock(&l->park_lock);
	l->running = false;
}

void evloop_destroy(struct evloop *l)
{
	if (!l)
		return;
	if (l->started) {
		pthread_mutex_lock(&l->park_lock);
		l->quit = true;
		pthread_cond_broadcast(&l->park_cond);
		pthread_mutex_unlock(&l->park_lock);
		wake(l);
		bthread_join(l->thread, NULL);
		l->started = l->running = false;
	}
	if (l->epfd >= 0)
		close(l->epfd);
	if (l->stop_fd >= 0)
		close(l->stop_fd);
	pthread_mutex_destroy(&l->lock);
	pthread_mutex_destroy(&l->park_lock);
	pthread_cond_destroy(&l->park_cond);
	free(l);
}
