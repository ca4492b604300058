/* thread.h - brisk's threads: pthreads whose stacks transparent huge pages never back (src/util/thread.c). */
#ifndef BRISK_THREAD_H
#define BRISK_THREAD_H

#include <pthread.h>
#include <time.h>

#define BTHREAD_STACK (8u << 20) /* glibc's default under `ulimit -s 8192`; only touched pages cost memory */

/*
 * pthread_create on a stack of BTHREAD_STACK bytes mapped here with MADV_NOHUGEPAGE and a PROT_NONE guard page
 * below it. Returns 0 or an error number, as pthread_create. The stack is unmapped by bthread_join or
 * bthread_timedjoin once the thread is joined; a thread never joined (detached: a vCPU stuck in the kernel) keeps it.
 */
int bthread_create(pthread_t *t, void *(*fn)(void *), void *arg);
/* bthread_create with every signal blocked in the new thread: SIGINT/SIGTERM and the vCPU kick are others'. */
int bthread_create_masked(pthread_t *t, void *(*fn)(void *), void *arg);
int bthread_join(pthread_t t, void **ret);
int bthread_timedjoin(pthread_t t, void **ret, const struct timespec *abstime);

/*
 * The absolute time ms milliseconds from now on clock clk, for pthread_cond_timedwait (the condition's clock) or
 * bthread_timedjoin (CLOCK_REALTIME: pthread_timedjoin_np measures that clock).
 */
struct timespec bthread_deadline(clockid_t clk, unsigned ms);
/* t plus ms milliseconds. */
struct timespec bthread_after(struct timespec t, unsigned ms);

#endif
