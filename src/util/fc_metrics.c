/*
 * fc_metrics.c - Firecracker's metrics line (fc_metrics.h): the schema's names, the counters, the flush that
 * turns counts into the deltas Firecracker reports, and the sink.
 *
 * The line is built as Firecracker v1.7.0 serialises its FirecrackerMetrics (src/vmm/src/logger/metrics.rs):
 * utc_timestamp_ms, api_server, balloon, block_<id>... then the aggregate block, deprecated_api,
 * get_api_requests, i8042, uart (legacy devices; "rtc" is aarch64-only there), latencies_us, logger, mmds,
 * net_<id>... then net, patch_api_requests, put_api_requests, seccomp, vcpu, vmm, signals, vsock, entropy
 * (vhost_user_<id> entries: none, brisk has no vhost-user device), then brisk's own group.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/fc_metrics.h"
#include "brisk/file.h"
#include "brisk/vm.h"

enum fcm_kind { FCM_KIND_INC, FCM_KIND_STORE, FCM_KIND_AGG };

struct fcm_field {
	const char *name;
	enum fcm_kind kind;
};

#define FCM_FIELD(g, n, k) {#n, FCM_KIND_##k},

#define FCM_TABLE(name, X) static const struct fcm_field name[] = {X(FCM_FIELD){NULL, 0}}

FCM_TABLE(f_api_server, FCM_API_SERVER);
FCM_TABLE(f_balloon, FCM_BALLOON);
FCM_TABLE(f_block, FCM_BLOCK);
FCM_TABLE(f_deprecated_api, FCM_DEPRECATED_API);
FCM_TABLE(f_get_api, FCM_GET_API);
FCM_TABLE(f_i8042, FCM_I8042);
FCM_TABLE(f_uart, FCM_UART);
FCM_TABLE(f_latencies, FCM_LATENCIES);
FCM_TABLE(f_logger, FCM_LOGGER);
FCM_TABLE(f_mmds, FCM_MMDS);
FCM_TABLE(f_net, FCM_NET);
FCM_TABLE(f_patch_api, FCM_PATCH_API);
FCM_TABLE(f_put_api, FCM_PUT_API);
FCM_TABLE(f_seccomp, FCM_SECCOMP);
FCM_TABLE(f_vcpu, FCM_VCPU);
FCM_TABLE(f_vmm, FCM_VMM);
FCM_TABLE(f_signals, FCM_SIGNALS);
FCM_TABLE(f_vsock, FCM_VSOCK);
FCM_TABLE(f_entropy, FCM_ENTROPY);

uint64_t fcm_api_server[FCM_API_SERVER_N], fcm_deprecated_api[FCM_DEPRECATED_API_N], fcm_get_api[FCM_GET_API_N],
    fcm_i8042[FCM_I8042_N], fcm_uart[FCM_UART_N], fcm_latencies[FCM_LATENCIES_N], fcm_logger[FCM_LOGGER_N],
    fcm_patch_api[FCM_PATCH_API_N], fcm_put_api[FCM_PUT_API_N], fcm_seccomp[FCM_SECCOMP_N], fcm_vmm[FCM_VMM_N],
    fcm_signals[FCM_SIGNALS_N], fcm_vsock[FCM_VSOCK_N], fcm_entropy[FCM_ENTROPY_N], fcm_mmds[FCM_MMDS_N],
    fcm_balloon[FCM_BALLOON_N];

/* A group as the flush sees it: its live slots and what the previous line reported of each. */
struct fcm_group {
	const char *key;
	const struct fcm_field *fields;
	const uint64_t *live;
	uint64_t *prev;
	unsigned n;
};

/* The per-device groups: a slot per --disk / --net position, named when the device attaches. */
#define FCM_ID_MAX    72
#define FCM_DEV_SLOTS ((int)FCM_BLOCK_N > (int)FCM_NET_N ? (int)FCM_BLOCK_N : (int)FCM_NET_N)
struct fcm_dev {
	bool used;
	char id[FCM_ID_MAX];
	uint64_t live[FCM_DEV_SLOTS];
	uint64_t prev[FCM_DEV_SLOTS];
};

static struct fcm_dev block_dev[VM_MAX_DISKS], net_dev[VM_MAX_NETS];

/* What the previous line reported of each process-wide group's slot (the flush's thread only). */
static struct {
	uint64_t api[FCM_API_SERVER_N], bal[FCM_BALLOON_N], dep[FCM_DEPRECATED_API_N], get[FCM_GET_API_N],
	    i8042[FCM_I8042_N], uart[FCM_UART_N], lat[FCM_LATENCIES_N], log[FCM_LOGGER_N], mmds[FCM_MMDS_N],
	    patch[FCM_PATCH_API_N], put[FCM_PUT_API_N], sec[FCM_SECCOMP_N], vcpu[FCM_VCPU_N], vmm[FCM_VMM_N],
	    sig[FCM_SIGNALS_N], vsock[FCM_VSOCK_N], ent[FCM_ENTROPY_N];
} last;
static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER; /* naming vs the flush: never on a count */

static struct {
	int fd; /* -1: none */
	bool fifo;
	char *rest; /* a FIFO took part of the last line: the rest, written before any new line */
	size_t rest_len, rest_off;
	bool periodic;
	uint64_t next_ns;
	bool times_set;
	uint64_t start_us, start_cpu_us, parent_cpu_us;
} sink = {.fd = -1};

static uint64_t clock_us(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void fcm_latency(uint64_t *g, unsigned i, uint64_t us)
{
	uint64_t min = __atomic_load_n(&g[i], __ATOMIC_RELAXED), max = __atomic_load_n(&g[i + 1], __ATOMIC_RELAXED);

	fcm_add(g, i + 2, us);
	if (min == 0 || min > us)
		fcm_store(g, i, us);
	if (max == 0 || max < us)
		fcm_store(g, i + 1, us);
}

static uint64_t *dev_attach(struct fcm_dev *tab, unsigned max, unsigned index, const char *id, const char *dflt)
{
	if (index >= max)
		return NULL;
	pthread_mutex_lock(&dev_lock);
	tab[index].used = true;
	if (id && *id)
		snprintf(tab[index].id, sizeof(tab[index].id), "%s", id);
	else if (!tab[index].id[0])
		snprintf(tab[index].id, sizeof(tab[index].id), "%s%u", dflt, index);
	pthread_mutex_unlock(&dev_lock);
	return tab[index].live;
}

uint64_t *fcm_block(unsigned index, const char *id)
{
	return dev_attach(block_dev, VM_MAX_DISKS, index, id, "drive");
}

uint64_t *fcm_net(unsigned index, const char *id)
{
	return dev_attach(net_dev, VM_MAX_NETS, index, id, "eth");
}

void fc_metrics_signal(int signo)
{
	switch (signo) {
	case SIGBUS:
		fcm_store(fcm_signals, FCM_SIGNALS_sigbus, 1);
		break;
	case SIGSEGV:
		fcm_store(fcm_signals, FCM_SIGNALS_sigsegv, 1);
		break;
	case SIGXFSZ:
		fcm_store(fcm_signals, FCM_SIGNALS_sigxfsz, 1);
		break;
	case SIGXCPU:
		fcm_store(fcm_signals, FCM_SIGNALS_sigxcpu, 1);
		break;
	case SIGPIPE:
		fcm_inc(fcm_signals, FCM_SIGNALS_sigpipe);
		break;
	case SIGHUP:
		fcm_store(fcm_signals, FCM_SIGNALS_sighup, 1);
		break;
	case SIGILL:
		fcm_store(fcm_signals, FCM_SIGNALS_sigill, 1);
		break;
	default:
		break;
	}
}

void fc_metrics_process_times(uint64_t start_time_us, uint64_t start_time_cpu_us, uint64_t parent_cpu_time_us)
{
	uint64_t now = clock_us(CLOCK_MONOTONIC), cpu = clock_us(CLOCK_PROCESS_CPUTIME_ID);

	/* Firecracker v1.7.0 src/vmm/src/logger/metrics.rs, ProcessTimeReporter: a start in the future reads 0. */
	if (start_time_us != UINT64_MAX)
		fcm_store(fcm_api_server, FCM_API_SERVER_process_startup_time_us,
			  now > start_time_us ? now - start_time_us : 0);
	if (start_time_cpu_us != UINT64_MAX)
		fcm_store(fcm_api_server, FCM_API_SERVER_process_startup_time_cpu_us,
			  (cpu > start_time_cpu_us ? cpu - start_time_cpu_us : 0) +
			      (parent_cpu_time_us == UINT64_MAX ? 0 : parent_cpu_time_us));
}

void fc_metrics_set_process_times(uint64_t start_time_us, uint64_t start_time_cpu_us, uint64_t parent_cpu_time_us)
{
	sink.times_set = true;
	sink.start_us = start_time_us;
	sink.start_cpu_us = start_time_cpu_us;
	sink.parent_cpu_us = parent_cpu_time_us;
}

void fc_metrics_report_process_times(void)
{
	if (sink.times_set)
		fc_metrics_process_times(sink.start_us, sink.start_cpu_us, sink.parent_cpu_us);
}

/* ---- the line ------------------------------------------------------------------------------------------- */

static json_object *u64(uint64_t v)
{
	return json_object_new_uint64(v);
}

/* An INC slot's count since the previous line (a counter that restarted, a new VM's, counts from 0). */
static uint64_t take_delta(const uint64_t *live, uint64_t *prev, unsigned i)
{
	uint64_t cur = __atomic_load_n(&live[i], __ATOMIC_RELAXED), d = cur >= prev[i] ? cur - prev[i] : cur;

	prev[i] = cur;
	return d;
}

/*
 * One group's object. `sum` (NULL: none) accumulates each INC slot's delta (the aggregate "block"/"net");
 * an aggregate's min/max are not aggregated (Firecracker's BlockDeviceMetrics::aggregate: 0).
 */
static json_object *group_object(const struct fcm_field *f, const uint64_t *live, uint64_t *prev, uint64_t *sum)
{
	json_object *o = json_object_new_object();

	for (unsigned i = 0; f->name; f++) {
		if (f->kind == FCM_KIND_AGG) {
			json_object *a = json_object_new_object();
			uint64_t s = take_delta(live, prev, i + 2);

			json_object_object_add(a, "min_us", u64(__atomic_load_n(&live[i], __ATOMIC_RELAXED)));
			json_object_object_add(a, "max_us", u64(__atomic_load_n(&live[i + 1], __ATOMIC_RELAXED)));
			json_object_object_add(a, "sum_us", u64(s));
			json_object_object_add(o, f->name, a);
			if (sum)
				sum[i + 2] += s;
			i += 3;
			continue;
		}
		uint64_t v =
		    f->kind == FCM_KIND_INC ? take_delta(live, prev, i) : __atomic_load_n(&live[i], __ATOMIC_RELAXED);

		if (sum && f->kind == FCM_KIND_INC)
			sum[i] += v;
		json_object_object_add(o, f->name, u64(v));
		i++;
	}
	return o;
}

static int dev_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct fcm_dev *const *)a)->id, (*(const struct fcm_dev *const *)b)->id);
}

/* "<prefix>_<id>" for each attached device, in id order (Firecracker's BTreeMap), then the aggregate. */
static void add_devices(json_object *o, const char *prefix, struct fcm_dev *tab, unsigned max,
			const struct fcm_field *f)
{
	struct fcm_dev *order[VM_MAX_DISKS > VM_MAX_NETS ? VM_MAX_DISKS : VM_MAX_NETS];
	uint64_t sum[FCM_DEV_SLOTS] = {0}, zero[sizeof(sum) / sizeof(sum[0])];
	unsigned k = 0;
	char key[FCM_ID_MAX + 16];

	for (unsigned i = 0; i < max; i++)
		if (tab[i].used)
			order[k++] = &tab[i];
	qsort(order, k, sizeof(order[0]), dev_cmp);
	for (unsigned i = 0; i < k; i++) {
		snprintf(key, sizeof(key), "%s_%s", prefix, order[i]->id);
		json_object_object_add(o, key, group_object(f, order[i]->live, order[i]->prev, sum));
	}
	memset(zero, 0, sizeof(zero));
	json_object_object_add(o, prefix, group_object(f, sum, zero, NULL));
}

static void add_group(json_object *o, const struct fcm_group *g)
{
	json_object_object_add(o, g->key, group_object(g->fields, g->live, g->prev, NULL));
}

char *fc_metrics_render(const uint64_t *vcpu, json_object *brisk)
{
	static const uint64_t no_vcpu[FCM_VCPU_N];
	const struct fcm_group head[] = {
	    {"api_server", f_api_server, fcm_api_server, last.api, FCM_API_SERVER_N},
	    {"balloon", f_balloon, fcm_balloon, last.bal, FCM_BALLOON_N},
	};
	const struct fcm_group mid[] = {
	    {"deprecated_api", f_deprecated_api, fcm_deprecated_api, last.dep, FCM_DEPRECATED_API_N},
	    {"get_api_requests", f_get_api, fcm_get_api, last.get, FCM_GET_API_N},
	    {"i8042", f_i8042, fcm_i8042, last.i8042, FCM_I8042_N},
	    {"uart", f_uart, fcm_uart, last.uart, FCM_UART_N},
	    {"latencies_us", f_latencies, fcm_latencies, last.lat, FCM_LATENCIES_N},
	    {"logger", f_logger, fcm_logger, last.log, FCM_LOGGER_N},
	    {"mmds", f_mmds, fcm_mmds, last.mmds, FCM_MMDS_N},
	};
	const struct fcm_group tail[] = {
	    {"patch_api_requests", f_patch_api, fcm_patch_api, last.patch, FCM_PATCH_API_N},
	    {"put_api_requests", f_put_api, fcm_put_api, last.put, FCM_PUT_API_N},
	    {"seccomp", f_seccomp, fcm_seccomp, last.sec, FCM_SECCOMP_N},
	    {"vcpu", f_vcpu, vcpu ? vcpu : no_vcpu, last.vcpu, FCM_VCPU_N},
	    {"vmm", f_vmm, fcm_vmm, last.vmm, FCM_VMM_N},
	    {"signals", f_signals, fcm_signals, last.sig, FCM_SIGNALS_N},
	    {"vsock", f_vsock, fcm_vsock, last.vsock, FCM_VSOCK_N},
	    {"entropy", f_entropy, fcm_entropy, last.ent, FCM_ENTROPY_N},
	};
	json_object *o = json_object_new_object();
	char *line;

	if (!o) {
		json_object_put(brisk);
		return NULL;
	}
	json_object_object_add(o, "utc_timestamp_ms", u64(clock_us(CLOCK_REALTIME) / 1000));
	for (unsigned i = 0; i < sizeof(head) / sizeof(head[0]); i++)
		add_group(o, &head[i]);
	pthread_mutex_lock(&dev_lock);
	add_devices(o, "block", block_dev, VM_MAX_DISKS, f_block);
	for (unsigned i = 0; i < sizeof(mid) / sizeof(mid[0]); i++)
		add_group(o, &mid[i]);
	add_devices(o, "net", net_dev, VM_MAX_NETS, f_net);
	pthread_mutex_unlock(&dev_lock);
	for (unsigned i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
		add_group(o, &tail[i]);
	if (brisk)
		json_object_object_add(o, "brisk", brisk);
	line = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return line;
}

/* ---- the sink ------------------------------------------------------------------------------------------- */

/* What the previous line reported, kept across a line that is then dropped: its counts go into the next. */
static struct {
	typeof(last) last;
	uint64_t block[VM_MAX_DISKS][FCM_DEV_SLOTS], net[VM_MAX_NETS][FCM_DEV_SLOTS];
} saved;

static void save_prev(void)
{
	saved.last = last;
	for (unsigned i = 0; i < VM_MAX_DISKS; i++)
		memcpy(saved.block[i], block_dev[i].prev, sizeof(saved.block[i]));
	for (unsigned i = 0; i < VM_MAX_NETS; i++)
		memcpy(saved.net[i], net_dev[i].prev, sizeof(saved.net[i]));
}

/* The line was not written: what it counted is counted again in the next (Firecracker's would be lost). */
static void restore_prev(void)
{
	last = saved.last;
	for (unsigned i = 0; i < VM_MAX_DISKS; i++)
		memcpy(block_dev[i].prev, saved.block[i], sizeof(saved.block[i]));
	for (unsigned i = 0; i < VM_MAX_NETS; i++)
		memcpy(net_dev[i].prev, saved.net[i], sizeof(saved.net[i]));
}

int fc_metrics_configure(const char *path, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	if (sink.fd >= 0)
		return err_set(err, errlen, -EALREADY, "Reinitialization of metrics not allowed.");
	fd = file_open_output(path, "metrics: metrics_path", FILE_OUT_APPEND, true, err, errlen);
	if (fd < 0)
		return fd;
	sink.fifo = fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
	sink.fd = fd;
	return 0;
}

bool fc_metrics_enabled(void)
{
	return sink.fd >= 0;
}

/*
 * A FIFO takes a write larger than PIPE_BUF in part when it is nearly full (its room is counted in pages, not
 * bytes), so a line it took in part is finished first, before any new line: a reader sees whole lines only.
 * Returns true when nothing of an earlier line is left to write.
 */
static bool finish_rest(void)
{
	ssize_t n;

	while (sink.rest && sink.rest_off < sink.rest_len) {
		n = write(sink.fd, sink.rest + sink.rest_off, sink.rest_len - sink.rest_off);
		if (n <= 0)
			return false;
		sink.rest_off += (size_t)n;
	}
	free(sink.rest);
	sink.rest = NULL;
	return true;
}

int fc_metrics_flush(const uint64_t *vcpu, json_object *brisk)
{
	char *line;
	size_t len;
	ssize_t n;

	if (sink.fd < 0) {
		json_object_put(brisk);
		return -ENODEV;
	}
	pthread_mutex_lock(&dev_lock);
	save_prev();
	pthread_mutex_unlock(&dev_lock);
	line = fc_metrics_render(vcpu, brisk);
	if (!line) {
		fcm_inc(fcm_logger, FCM_LOGGER_metrics_fails);
		return -ENOMEM;
	}
	len = strlen(line) + 1;
	line[len - 1] = '\n'; /* strdup's NUL becomes the newline: one write per line */
	if (!finish_rest()) {
		free(line); /* the reader lags: this line is dropped whole, never a wait */
		restore_prev();
		fcm_inc(fcm_logger, FCM_LOGGER_missed_metrics_count);
		return -EAGAIN;
	}
	n = write(sink.fd, line, len);
	if (n > 0 && (size_t)n < len && sink.fifo) {
		sink.rest = line; /* finished by the next flush: see finish_rest */
		sink.rest_len = len;
		sink.rest_off = (size_t)n;
		return 0;
	}
	free(line);
	if (n == (ssize_t)len)
		return 0;
	restore_prev();
	if (n < 0 && errno == EAGAIN) {
		fcm_inc(fcm_logger, FCM_LOGGER_missed_metrics_count);
		return -EAGAIN;
	}
	fcm_inc(fcm_logger, FCM_LOGGER_metrics_fails);
	return n < 0 ? -errno : -EIO;
}

int fc_metrics_rest_fd(void)
{
	return sink.rest ? sink.fd : -1;
}

void fc_metrics_write_rest(void)
{
	finish_rest();
}

bool fc_metrics_start_periodic(void)
{
	if (sink.periodic)
		return false;
	sink.periodic = true;
	sink.next_ns = clock_us(CLOCK_MONOTONIC) * 1000u;
	return true;
}

int fc_metrics_timeout_ms(void)
{
	uint64_t now = clock_us(CLOCK_MONOTONIC) * 1000u;

	if (sink.fd < 0 || !sink.periodic)
		return -1;
	return sink.next_ns <= now ? 0 : (int)((sink.next_ns - now) / 1000000u + 1);
}

void fc_metrics_periodic_done(void)
{
	sink.next_ns = clock_us(CLOCK_MONOTONIC) * 1000u + FC_METRICS_PERIOD_MS * 1000000ull;
}

void fc_metrics_reset(void)
{
	if (sink.fd >= 0)
		close(sink.fd);
	free(sink.rest);
	sink = (typeof(sink)){.fd = -1};
	memset(block_dev, 0, sizeof(block_dev));
	memset(net_dev, 0, sizeof(net_dev));
	memset(&last, 0, sizeof(last));
#define FCM_ZERO(a) memset(a, 0, sizeof(a))
	FCM_ZERO(fcm_api_server), FCM_ZERO(fcm_deprecated_api), FCM_ZERO(fcm_get_api), FCM_ZERO(fcm_i8042);
	FCM_ZERO(fcm_uart), FCM_ZERO(fcm_latencies), FCM_ZERO(fcm_logger), FCM_ZERO(fcm_patch_api);
	FCM_ZERO(fcm_put_api), FCM_ZERO(fcm_seccomp), FCM_ZERO(fcm_vmm), FCM_ZERO(fcm_signals);
	FCM_ZERO(fcm_vsock), FCM_ZERO(fcm_entropy), FCM_ZERO(fcm_balloon), FCM_ZERO(fcm_mmds);
#undef FCM_ZERO
}
