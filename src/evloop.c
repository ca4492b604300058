/* evloop.c - the I/O event loop: one epoll thread running device callbacks (include/brisk/evloop.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "brisk/evloop.h"
#include "brisk/log.h"

#define EVLOOP_MAX_WATCH 256 /* fds: a few per device; bounded so a registration cannot grow forever */
#define EVLOOP_BATCH	 32  /* events taken per epoll_wait */

struct watch {
	int fd;
	evloop_fn fn;
	void *arg;
};

struct evloop {
	int epfd;
	int stop_fd; /* eventfd: leave the loop */
	pthread_t thread;
	bool running;
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

static void *loop_thread(void *arg)
{
	struct evloop *l = arg;
	struct epoll_event ev[EVLOOP_BATCH];

	for (;;) {
		int n = epoll_wait(l->epfd, ev, EVLOOP_BATCH, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("I/O event loop: epoll_wait: %s", strerror(errno));
			return NULL;
		}
		for (int i = 0; i < n; i++) {
			const struct watch *w = ev[i].data.ptr;

			if (!w)
				return NULL; /* the stop eventfd */
			w->fn(w->arg, ev[i].events);
		}
	}
}

int evloop_start(struct evloop *l)
{
	sigset_t all, old;
	int err;

	uint64_t stale;

	if (l->running)
		return 0;
	/* A loop stopped before (a snapshot pauses it) starts again: forget that stop request. */
	if (read(l->stop_fd, &stale, sizeof(stale)) < 0 && errno != EAGAIN)
		return -errno;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&l->thread, NULL, loop_thread, l);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	l->running = true;
	return 0;
}

void evloop_stop(struct evloop *l)
{
	uint64_t one = 1;

	if (!l || !l->running)
		return;
	if (write(l->stop_fd, &one, sizeof(one)) < 0)
		log_warn("I/O event loop: waking it to stop failed: %s", strerror(errno));
	pthread_join(l->thread, NULL);
	l->running = false;
}

void evloop_destroy(struct evloop *l)
{
	if (!l)
		return;
	evloop_stop(l);
	if (l->epfd >= 0)
		close(l->epfd);
	if (l->stop_fd >= 0)
		close(l->stop_fd);
	pthread_mutex_destroy(&l->lock);
	free(l);
}
