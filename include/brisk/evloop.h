/*
 * evloop.h - the VM's I/O event loop: one thread that waits on file descriptors (epoll) and runs device
 * work (virtqueue notifications from ioeventfds, disk completions, ...), so that no device work runs on
 * a vCPU thread.
 */
#ifndef BRISK_EVLOOP_H
#define BRISK_EVLOOP_H

#include <stdint.h>

struct evloop;

/* Called on the loop thread with the epoll events that fired (EPOLLIN, ...). */
typedef void (*evloop_fn)(void *arg, uint32_t events);

/* A loop, not yet running. Returns NULL (errno set) on failure. */
struct evloop *evloop_create(void);
/*
 * Watches `fd` for `events` (EPOLLIN, level-triggered): `fn(arg, ...)` runs
 * on the loop thread while it is readable. Callable before or while the
 * loop runs; `fd` and `arg` must live until evloop_destroy (a device adds
 * its fds once, when created, and checks its own state in `fn`). Returns 0
 * or -errno.
 */
int evloop_add(struct evloop *l, int fd, uint32_t events, evloop_fn fn, void *arg);
/* Starts the loop thread (every signal blocked in it); after evloop_stop, wakes the same thread. 0 or -errno. */
int evloop_start(struct evloop *l);
/* Stops the loop thread (it waits, parked): no callback runs after it returns (until evloop_start). Idempotent. */
void evloop_stop(struct evloop *l);
/* Stops the loop if running and frees it (not the watched fds). NULL is fine. */
void evloop_destroy(struct evloop *l);

#endif
