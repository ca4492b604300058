/*
 * api_metrics.c - PUT /metrics: one JSON line per flush (FlushMetrics, every 60 s, and when the VM
 * ends), as Firecracker's metrics, with brisk's own extras: the boot timeline, exits by reason and the
 * KVM ioctls counted so far (docs/api.md, "Metrics").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api_impl.h"
#include "brisk/exits.h"
#include "brisk/kvm.h"
#include "brisk/timeline.h"

#define METRICS_PERIOD_MS 60000 /* Firecracker's periodic flush */
#define METRICS_IOCTLS	  64

struct api_metrics {
	int fd;
	uint64_t next_ns; /* CLOCK_MONOTONIC of the next periodic flush */
	uint64_t flushes, failed;
};

int api_metrics_open(struct api *a, int fd)
{
	a->metrics = calloc(1, sizeof(*a->metrics));
	if (!a->metrics)
		return -ENOMEM;
	a->metrics->fd = fd;
	a->metrics->next_ns = timeline_now_ns() + METRICS_PERIOD_MS * 1000000ull;
	return 0;
}

void api_metrics_close(struct api *a)
{
	if (!a->metrics)
		return;
	close(a->metrics->fd);
	free(a->metrics);
	a->metrics = NULL;
}

int api_metrics_timeout_ms(const struct api *a)
{
	uint64_t now = timeline_now_ns();

	if (!a->metrics)
		return -1;
	return a->metrics->next_ns <= now ? 0 : (int)((a->metrics->next_ns - now) / 1000000 + 1);
}

static json_object *u64(uint64_t v)
{
	return json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t)v);
}

/* Exits by reason, summed over the vCPUs (racy reads of counters the vCPUs update: a snapshot in time). */
static json_object *vcpu_metrics(struct api *a)
{
	uint64_t sum[EXIT_REASONS] = {0};
	json_object *o = json_object_new_object();

	for (unsigned i = 0; a->vm && i < vm_nr_vcpus(a->vm); i++) {
		const struct exit_stats *s = vm_vcpu_exit_stats(a->vm, i);

		for (unsigned rsn = 0; rsn < EXIT_REASONS; rsn++)
			sum[rsn] += __atomic_load_n(&s->exits[rsn], __ATOMIC_RELAXED);
	}
	for (unsigned rsn = 0; rsn < EXIT_REASONS; rsn++)
		if (sum[rsn])
			json_object_object_add(o, exit_reason_name(rsn), u64(sum[rsn]));
	return o;
}

static json_object *brisk_metrics(void)
{
	struct kvm_ioctl_stat st[METRICS_IOCTLS];
	unsigned n = kvm_ioctl_stats(st, METRICS_IOCTLS);
	json_object *o = json_object_new_object(), *tl = json_object_new_object(), *io = json_object_new_object();

	for (int ev = 0; ev < TL__COUNT; ev++) {
		int64_t ns = timeline_get((enum tl_event)ev);

		if (ns >= 0)
			json_object_object_add(tl, timeline_name((enum tl_event)ev), u64((uint64_t)ns / 1000));
	}
	for (unsigned i = 0; i < n && i < METRICS_IOCTLS; i++)
		json_object_object_add(io, st[i].name, u64(st[i].count));
	json_object_object_add(o, "timeline_us", tl);
	json_object_object_add(o, "kvm_ioctls", io);
	return o;
}

int api_metrics_flush(struct api *a)
{
	struct timespec ts;
	json_object *o = json_object_new_object(), *api = json_object_new_object();
	const char *line;
	size_t len;
	ssize_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	json_object_object_add(o, "utc_timestamp_ms", u64((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000));
	json_object_object_add(api, "requests", u64(a->requests));
	json_object_object_add(api, "errors", u64(a->errors));
	json_object_object_add(o, "api_server", api);
	json_object_object_add(o, "vcpu", vcpu_metrics(a));
	json_object_object_add(o, "brisk", brisk_metrics());
	line = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	len = strlen(line);
	/* One write per line: a FIFO reader sees whole lines; a stalled reader costs a dropped line, never a wait. */
	char *buf = malloc(len + 1);

	if (!buf) {
		json_object_put(o);
		return -ENOMEM;
	}
	memcpy(buf, line, len);
	buf[len] = '\n';
	n = write(a->metrics->fd, buf, len + 1);
	free(buf);
	json_object_put(o);
	a->metrics->next_ns = timeline_now_ns() + METRICS_PERIOD_MS * 1000000ull;
	if (n != (ssize_t)(len + 1)) {
		a->metrics->failed++;
		return n < 0 ? -errno : -EIO;
	}
	a->metrics->flushes++;
	return 0;
}
