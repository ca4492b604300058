/*
 * thread.c - brisk's threads on stacks of their own, kept from transparent huge pages.
 *
 * glibc maps each thread's stack (8 MiB) below the lowest mapping, and writes the thread's control block at its
 * top before the thread runs. When that top falls on a 2 MiB boundary (the mapping above starts there: guest RAM,
 * which brisk aligns for KVM's huge pages, or a 64 MiB-aligned malloc arena), a kernel with transparent huge pages
 * "always" backs the stack's top 2 MiB with one huge page at that first write: 2 MiB of memory for a few KiB of
 * stack. bench/clones.py saw it in every restored clone (the vCPU's stack right below guest RAM: 2,048 of its 3,444
 * KiB of private memory) and, with guest RAM moved 64 KiB further up as a trial, still in one clone of 20. Linux 6.8
 * stopped it for every MAP_STACK mapping (mm: VM_NOHUGEPAGE for MAP_STACK); brisk runs on older kernels too, so
 * it maps its threads' stacks itself, MADV_NOHUGEPAGE, and hands them to pthread_attr_setstack. glibc neither
 * frees nor caches a stack it was given: the list below remembers each one until its thread is joined.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "brisk/thread.h"

struct stack {
	pthread_t thread;
	void *map; /* the guard page, then the stack */
	size_t len;
	struct stack *next;
};

static pthread_mutex_t stacks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stack *stacks;

static size_t page_size(void)
{
	long p = sysconf(_SC_PAGESIZE);

	return p > 0 ? (size_t)p : 4096;
}

/* A stack of BTHREAD_STACK bytes above a guard page of `guard` bytes, never a huge page; NULL with errno. */
static void *map_stack(size_t guard, size_t *len)
{
	void *map;

	*len = BTHREAD_STACK + guard;
	map = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (map == MAP_FAILED)
		return NULL;
	/* EINVAL: a kernel without THP; nothing to keep away */
	if ((madvise(map, *len, MADV_NOHUGEPAGE) != 0 && errno != EINVAL) || mprotect(map, guard, PROT_NONE) != 0) {
		int e = errno;

		munmap(map, *len);
		errno = e;
		return NULL;
	}
	return map;
}

int bthread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
	struct stack *s = malloc(sizeof(*s));
	size_t guard = page_size();
	pthread_attr_t attr;
	int err;

	if (!s)
		return ENOMEM;
	s->map = map_stack(guard, &s->len);
	if (!s->map) {
		err = errno;
		free(s);
		return err;
	}
	err = pthread_attr_init(&attr);
	if (!err) {
		err = pthread_attr_setstack(&attr, (char *)s->map + guard, s->len - guard);
		if (!err)
			err = pthread_create(t, &attr, fn, arg);
		pthread_attr_destroy(&attr);
	}
	if (err) {
		munmap(s->map, s->len);
		free(s);
		return err;
	}
	s->thread = *t;
	pthread_mutex_lock(&stacks_lock);
	s->next = stacks;
	stacks = s;
	pthread_mutex_unlock(&stacks_lock);
	return 0;
}

int bthread_create_masked(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits the mask */
	err = bthread_create(t, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

/* After t was joined: its stack unmapped and forgotten. */
static void release(pthread_t t)
{
	struct stack **p, *s = NULL;

	pthread_mutex_lock(&stacks_lock);
	for (p = &stacks; *p; p = &(*p)->next) {
		if (pthread_equal((*p)->thread, t)) {
			s = *p;
			*p = s->next;
			break;
		}
	}
	pthread_mutex_unlock(&stacks_lock);
	if (s) {
		munmap(s->map, s->len);
		free(s);
	}
}

int bthread_join(pthread_t t, void **ret)
{
	int err = pthread_join(t, ret);

	if (!err)
		release(t);
	return err;
}

struct timespec bthread_after(struct timespec t, unsigned ms)
{
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

struct timespec bthread_deadline(clockid_t clk, unsigned ms)
{
	struct timespec now;

	clock_gettime(clk, &now);
	return bthread_after(now, ms);
}

int bthread_timedjoin(pthread_t t, void **ret, const struct timespec *abstime)
{
	int err = pthread_timedjoin_np(t, ret, abstime);

	if (!err)
		release(t);
	return err;
}
