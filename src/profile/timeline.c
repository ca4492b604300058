/* timeline.c - boot timeline: lock-free first-wins timestamps of phases and a bounded list of boot markers. */
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "brisk/timeline.h"

static const char *const names[TL__COUNT] = {
    [TL_EXEC] = "process start",
    [TL_MAIN] = "main entered",
    [TL_KVM_PREWARMED] = "KVM prewarmed",
    [TL_API_REQUEST] = "API start request",
    [TL_SNAPSHOT_READ] = "snapshot read",
    [TL_STATE_RESTORED] = "state restored",
    [TL_KVM_OPEN] = "/dev/kvm opened",
    [TL_VM_CREATED] = "VM created",
    [TL_MEMORY] = "memory mapped",
    [TL_IRQCHIP] = "irqchip created",
    [TL_KERNEL_LOADED] = "kernel loaded",
    [TL_VCPUS_READY] = "vCPUs ready",
    [TL_FIRST_RUN] = "first KVM_RUN",
    [TL_FIRST_EXIT] = "first exit",
    [TL_FIRST_SERIAL] = "first serial byte",
    [TL_GUEST_END] = "guest ended",
    [TL_EXIT] = "exit",
};

/* Absolute CLOCK_MONOTONIC ns; 0 = not recorded. */
static _Atomic uint64_t stamp[TL__COUNT];
static _Atomic unsigned nr_markers; /* values recorded or attempted */
static _Atomic int notify_fd = -1;  /* timeline_bootmark_notify's eventfd */
static struct {
	_Atomic uint64_t ns; /* written after value; 0 while being filled */
	uint32_t value;
} markers[TL_MAX_MARKERS];

uint64_t timeline_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cputime_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void timeline_init(void)
{
	uint64_t now = timeline_now_ns();
	uint64_t cpu = cputime_ns();

	/*
	 * There is no exec timestamp with better than clock-tick resolution
	 * (/proc/self/stat starttime). Exec to main() is pure CPU work (loader,
	 * relocations, libc init) in this one thread, so the CPU time consumed
	 * so far is a close estimate of the wall time since exec.
	 */
	atomic_store(&stamp[TL_EXEC], now - (cpu < now ? cpu : 0));
	atomic_store(&stamp[TL_MAIN], now);
}

void timeline_restart(uint64_t t0_ns)
{
	for (unsigned i = 0; i < TL__COUNT; i++)
		atomic_store(&stamp[i], 0);
	for (unsigned i = 0; i < TL_MAX_MARKERS; i++)
		atomic_store(&markers[i].ns, 0);
	atomic_store(&nr_markers, 0);
	atomic_store(&stamp[TL_EXEC], t0_ns);
	atomic_store(&stamp[TL_MAIN], t0_ns);
}

void timeline_mark(enum tl_event ev)
{
	uint64_t zero = 0;

	if (ev >= TL__COUNT)
		return;
	atomic_compare_exchange_strong(&stamp[ev], &zero, timeline_now_ns());
}

void timeline_bootmark(uint32_t value)
{
	uint64_t now = timeline_now_ns(), one = 1;
	unsigned i = atomic_fetch_add(&nr_markers, 1);
	int fd = atomic_load(&notify_fd);

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) /* a full eventfd was notified already */
		(void)0;

	if (i >= TL_MAX_MARKERS) {
		/* Keep the counter from wrapping under a hostile flood. */
		atomic_store(&nr_markers, TL_MAX_MARKERS + 1);
		return;
	}
	markers[i].value = value;
	atomic_store(&markers[i].ns, now);
}

void timeline_bootmark_notify(int fd)
{
	atomic_store(&notify_fd, fd);
}

int64_t timeline_get(enum tl_event ev)
{
	uint64_t t, t0;

	if (ev >= TL__COUNT)
		return -1;
	t = atomic_load(&stamp[ev]);
	t0 = atomic_load(&stamp[TL_EXEC]);
	if (t == 0 || t < t0)
		return -1;
	return (int64_t)(t - t0);
}

const char *timeline_name(enum tl_event ev)
{
	return ev < TL__COUNT ? names[ev] : "?";
}

unsigned timeline_nr_markers(void)
{
	unsigned n = atomic_load(&nr_markers);

	return n < TL_MAX_MARKERS ? n : TL_MAX_MARKERS;
}

int timeline_marker(unsigned i, uint32_t *value, int64_t *ns)
{
	uint64_t t, t0 = atomic_load(&stamp[TL_EXEC]);

	if (i >= timeline_nr_markers())
		return -1;
	t = atomic_load(&markers[i].ns);
	if (t == 0)
		return -1;
	*value = markers[i].value;
	*ns = t >= t0 ? (int64_t)(t - t0) : 0;
	return 0;
}

void timeline_print(FILE *f)
{
	int64_t prev = 0;
	unsigned nm = atomic_load(&nr_markers);

	fprintf(f, "%-22s %12s %12s\n", "phase", "us", "+us");
	for (int ev = 0; ev < TL__COUNT; ev++) {
		int64_t t = timeline_get((enum tl_event)ev);

		if (ev == TL_GUEST_END) {
			/* Boot markers belong between the guest's first output and its end. */
			for (unsigned i = 0; i < timeline_nr_markers(); i++) {
				uint32_t v;
				int64_t mt;

				if (timeline_marker(i, &v, &mt) == 0)
					fprintf(f, "boot marker 0x%-8x %12.1f\n", v, (double)mt / 1e3);
			}
			if (nm > TL_MAX_MARKERS)
				fprintf(f, "(more boot markers than %d; later ones not recorded)\n", TL_MAX_MARKERS);
		}
		if (t < 0) {
			fprintf(f, "%-22s %12s\n", names[ev], "-");
			continue;
		}
		fprintf(f, "%-22s %12.1f %12.1f\n", names[ev], (double)t / 1e3, (double)(t - prev) / 1e3);
		prev = t;
	}
}
