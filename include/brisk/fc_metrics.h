/*
 * fc_metrics.h - Firecracker's metrics (Firecracker v1.7.0 src/vmm/src/logger/metrics.rs, docs/metrics.md):
 * every group and counter name of its JSON line, the counters brisk's devices, vCPUs and API move, and the
 * process's one metrics sink (a file or FIFO: one line per flush, one write() each).
 *
 * Two kinds of value, as Firecracker's: an INC counter (SharedIncMetric) reports what it counted since the
 * previous line; a STORE value (SharedStoreMetric) reports what it holds. A latency aggregate
 * (LatencyAggregateMetrics) is three slots: min_us and max_us (STORE), sum_us (INC).
 *
 * Counting is a relaxed atomic add on a slot of a global array (fcm_inc): no lock, safe from any thread, cheap
 * enough for a device's request path. The vCPU group is the exception: each vCPU thread counts into its own
 * struct exit_stats (exits.h) and a flush sums them (fcm_flush's `vcpu`). What each group holds in brisk, and
 * what is always 0: docs/api.md, "Metrics".
 */
#ifndef BRISK_FC_METRICS_H
#define BRISK_FC_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the schema: one X(GROUP, name, KIND) per field, in Firecracker's serialisation order ------------- */

#define FCM_API_SERVER(X)                                                                                              \
	X(API_SERVER, process_startup_time_us, STORE)                                                                  \
	X(API_SERVER, process_startup_time_cpu_us, STORE)                                                              \
	X(API_SERVER, sync_response_fails, INC)                                                                        \
	X(API_SERVER, sync_vmm_send_timeout_count, INC)

#define FCM_BALLOON(X)                                                                                                 \
	X(BALLOON, activate_fails, INC)                                                                                \
	X(BALLOON, inflate_count, INC)                                                                                 \
	X(BALLOON, stats_updates_count, INC)                                                                           \
	X(BALLOON, stats_update_fails, INC)                                                                            \
	X(BALLOON, deflate_count, INC)                                                                                 \
	X(BALLOON, event_fails, INC)

#define FCM_BLOCK(X)                                                                                                   \
	X(BLOCK, activate_fails, INC)                                                                                  \
	X(BLOCK, cfg_fails, INC)                                                                                       \
	X(BLOCK, no_avail_buffer, INC)                                                                                 \
	X(BLOCK, event_fails, INC)                                                                                     \
	X(BLOCK, execute_fails, INC)                                                                                   \
	X(BLOCK, invalid_reqs_count, INC)                                                                              \
	X(BLOCK, flush_count, INC)                                                                                     \
	X(BLOCK, queue_event_count, INC)                                                                               \
	X(BLOCK, rate_limiter_event_count, INC)                                                                        \
	X(BLOCK, update_count, INC)                                                                                    \
	X(BLOCK, update_fails, INC)                                                                                    \
	X(BLOCK, read_bytes, INC)                                                                                      \
	X(BLOCK, write_bytes, INC)                                                                                     \
	X(BLOCK, read_count, INC)                                                                                      \
	X(BLOCK, write_count, INC)                                                                                     \
	X(BLOCK, read_agg, AGG)                                                                                        \
	X(BLOCK, write_agg, AGG)                                                                                       \
	X(BLOCK, rate_limiter_throttled_events, INC)                                                                   \
	X(BLOCK, io_engine_throttled_events, INC)                                                                      \
	X(BLOCK, remaining_reqs_count, INC)

#define FCM_DEPRECATED_API(X)                                                                                          \
	X(DEPRECATED_API, deprecated_http_api_calls, INC)                                                              \
	X(DEPRECATED_API, deprecated_cmd_line_api_calls, INC)

#define FCM_GET_API(X)                                                                                                 \
	X(GET_API, instance_info_count, INC)                                                                           \
	X(GET_API, machine_cfg_count, INC)                                                                             \
	X(GET_API, mmds_count, INC)                                                                                    \
	X(GET_API, vmm_version_count, INC)

#define FCM_I8042(X)                                                                                                   \
	X(I8042, error_count, INC)                                                                                     \
	X(I8042, missed_read_count, INC)                                                                               \
	X(I8042, missed_write_count, INC)                                                                              \
	X(I8042, read_count, INC)                                                                                      \
	X(I8042, reset_count, INC)                                                                                     \
	X(I8042, write_count, INC)

#define FCM_UART(X)                                                                                                    \
	X(UART, error_count, INC)                                                                                      \
	X(UART, flush_count, INC)                                                                                      \
	X(UART, missed_read_count, INC)                                                                                \
	X(UART, missed_write_count, INC)                                                                               \
	X(UART, read_count, INC)                                                                                       \
	X(UART, write_count, INC)

#define FCM_LATENCIES(X)                                                                                               \
	X(LATENCIES, full_create_snapshot, STORE)                                                                      \
	X(LATENCIES, diff_create_snapshot, STORE)                                                                      \
	X(LATENCIES, load_snapshot, STORE)                                                                             \
	X(LATENCIES, pause_vm, STORE)                                                                                  \
	X(LATENCIES, resume_vm, STORE)                                                                                 \
	X(LATENCIES, vmm_full_create_snapshot, STORE)                                                                  \
	X(LATENCIES, vmm_diff_create_snapshot, STORE)                                                                  \
	X(LATENCIES, vmm_load_snapshot, STORE)                                                                         \
	X(LATENCIES, vmm_pause_vm, STORE)                                                                              \
	X(LATENCIES, vmm_resume_vm, STORE)

#define FCM_LOGGER(X)                                                                                                  \
	X(LOGGER, missed_metrics_count, INC)                                                                           \
	X(LOGGER, metrics_fails, INC)                                                                                  \
	X(LOGGER, missed_log_count, INC)                                                                               \
	X(LOGGER, log_fails, INC)

#define FCM_MMDS(X)                                                                                                    \
	X(MMDS, rx_accepted, INC)                                                                                      \
	X(MMDS, rx_accepted_err, INC)                                                                                  \
	X(MMDS, rx_accepted_unusual, INC)                                                                              \
	X(MMDS, rx_bad_eth, INC)                                                                                       \
	X(MMDS, rx_count, INC)                                                                                         \
	X(MMDS, tx_bytes, INC)                                                                                         \
	X(MMDS, tx_count, INC)                                                                                         \
	X(MMDS, tx_errors, INC)                                                                                        \
	X(MMDS, tx_frames, INC)                                                                                        \
	X(MMDS, connections_created, INC)                                                                              \
	X(MMDS, connections_destroyed, INC)

#define FCM_NET(X)                                                                                                     \
	X(NET, activate_fails, INC)                                                                                    \
	X(NET, cfg_fails, INC)                                                                                         \
	X(NET, mac_address_updates, INC)                                                                               \
	X(NET, no_rx_avail_buffer, INC)                                                                                \
	X(NET, no_tx_avail_buffer, INC)                                                                                \
	X(NET, event_fails, INC)                                                                                       \
	X(NET, rx_queue_event_count, INC)                                                                              \
	X(NET, rx_event_rate_limiter_count, INC)                                                                       \
	X(NET, rx_partial_writes, INC)                                                                                 \
	X(NET, rx_rate_limiter_throttled, INC)                                                                         \
	X(NET, rx_tap_event_count, INC)                                                                                \
	X(NET, rx_bytes_count, INC)                                                                                    \
	X(NET, rx_packets_count, INC)                                                                                  \
	X(NET, rx_fails, INC)                                                                                          \
	X(NET, rx_count, INC)                                                                                          \
	X(NET, tap_read_fails, INC)                                                                                    \
	X(NET, tap_write_fails, INC)                                                                                   \
	X(NET, tap_write_agg, AGG)                                                                                     \
	X(NET, tx_bytes_count, INC)                                                                                    \
	X(NET, tx_malformed_frames, INC)                                                                               \
	X(NET, tx_fails, INC)                                                                                          \
	X(NET, tx_count, INC)                                                                                          \
	X(NET, tx_packets_count, INC)                                                                                  \
	X(NET, tx_partial_reads, INC)                                                                                  \
	X(NET, tx_queue_event_count, INC)                                                                              \
	X(NET, tx_rate_limiter_event_count, INC)                                                                       \
	X(NET, tx_rate_limiter_throttled, INC)                                                                         \
	X(NET, tx_spoofed_mac_count, INC)                                                                              \
	X(NET, tx_remaining_reqs_count, INC)

#define FCM_PATCH_API(X)                                                                                               \
	X(PATCH_API, drive_count, INC)                                                                                 \
	X(PATCH_API, drive_fails, INC)                                                                                 \
	X(PATCH_API, network_count, INC)                                                                               \
	X(PATCH_API, network_fails, INC)                                                                               \
	X(PATCH_API, machine_cfg_count, INC)                                                                           \
	X(PATCH_API, machine_cfg_fails, INC)                                                                           \
	X(PATCH_API, mmds_count, INC)                                                                                  \
	X(PATCH_API, mmds_fails, INC)

#define FCM_PUT_API(X)                                                                                                 \
	X(PUT_API, actions_count, INC)                                                                                 \
	X(PUT_API, actions_fails, INC)                                                                                 \
	X(PUT_API, boot_source_count, INC)                                                                             \
	X(PUT_API, boot_source_fails, INC)                                                                             \
	X(PUT_API, drive_count, INC)                                                                                   \
	X(PUT_API, drive_fails, INC)                                                                                   \
	X(PUT_API, logger_count, INC)                                                                                  \
	X(PUT_API, logger_fails, INC)                                                                                  \
	X(PUT_API, machine_cfg_count, INC)                                                                             \
	X(PUT_API, machine_cfg_fails, INC)                                                                             \
	X(PUT_API, cpu_cfg_count, INC)                                                                                 \
	X(PUT_API, cpu_cfg_fails, INC)                                                                                 \
	X(PUT_API, metrics_count, INC)                                                                                 \
	X(PUT_API, metrics_fails, INC)                                                                                 \
	X(PUT_API, network_count, INC)                                                                                 \
	X(PUT_API, network_fails, INC)                                                                                 \
	X(PUT_API, mmds_count, INC)                                                                                    \
	X(PUT_API, mmds_fails, INC)                                                                                    \
	X(PUT_API, vsock_count, INC)                                                                                   \
	X(PUT_API, vsock_fails, INC)

#define FCM_SECCOMP(X) X(SECCOMP, num_faults, STORE)

#define FCM_VCPU(X)                                                                                                    \
	X(VCPU, exit_io_in, INC)                                                                                       \
	X(VCPU, exit_io_out, INC)                                                                                      \
	X(VCPU, exit_mmio_read, INC)                                                                                   \
	X(VCPU, exit_mmio_write, INC)                                                                                  \
	X(VCPU, failures, INC)                                                                                         \
	X(VCPU, exit_io_in_agg, AGG)                                                                                   \
	X(VCPU, exit_io_out_agg, AGG)                                                                                  \
	X(VCPU, exit_mmio_read_agg, AGG)                                                                               \
	X(VCPU, exit_mmio_write_agg, AGG)

#define FCM_VMM(X)                                                                                                     \
	X(VMM, device_events, INC)                                                                                     \
	X(VMM, panic_count, STORE)

/* Deadly signals are STORE (0 or 1), SIGPIPE an INC counter: Firecracker's SignalMetrics. */
#define FCM_SIGNALS(X)                                                                                                 \
	X(SIGNALS, sigbus, STORE)                                                                                      \
	X(SIGNALS, sigsegv, STORE)                                                                                     \
	X(SIGNALS, sigxfsz, STORE)                                                                                     \
	X(SIGNALS, sigxcpu, STORE)                                                                                     \
	X(SIGNALS, sigpipe, INC)                                                                                       \
	X(SIGNALS, sighup, STORE)                                                                                      \
	X(SIGNALS, sigill, STORE)

#define FCM_VSOCK(X)                                                                                                   \
	X(VSOCK, activate_fails, INC)                                                                                  \
	X(VSOCK, cfg_fails, INC)                                                                                       \
	X(VSOCK, rx_queue_event_fails, INC)                                                                            \
	X(VSOCK, tx_queue_event_fails, INC)                                                                            \
	X(VSOCK, ev_queue_event_fails, INC)                                                                            \
	X(VSOCK, muxer_event_fails, INC)                                                                               \
	X(VSOCK, conn_event_fails, INC)                                                                                \
	X(VSOCK, rx_queue_event_count, INC)                                                                            \
	X(VSOCK, tx_queue_event_count, INC)                                                                            \
	X(VSOCK, rx_bytes_count, INC)                                                                                  \
	X(VSOCK, tx_bytes_count, INC)                                                                                  \
	X(VSOCK, rx_packets_count, INC)                                                                                \
	X(VSOCK, tx_packets_count, INC)                                                                                \
	X(VSOCK, conns_added, INC)                                                                                     \
	X(VSOCK, conns_killed, INC)                                                                                    \
	X(VSOCK, conns_removed, INC)                                                                                   \
	X(VSOCK, killq_resync, INC)                                                                                    \
	X(VSOCK, tx_flush_fails, INC)                                                                                  \
	X(VSOCK, tx_write_fails, INC)                                                                                  \
	X(VSOCK, rx_read_fails, INC)

#define FCM_ENTROPY(X)                                                                                                 \
	X(ENTROPY, activate_fails, INC)                                                                                \
	X(ENTROPY, entropy_event_fails, INC)                                                                           \
	X(ENTROPY, entropy_event_count, INC)                                                                           \
	X(ENTROPY, entropy_bytes, INC)                                                                                 \
	X(ENTROPY, host_rng_fails, INC)                                                                                \
	X(ENTROPY, entropy_rate_limiter_throttled, INC)                                                                \
	X(ENTROPY, rate_limiter_event_count, INC)

/* Slot indexes: FCM_<GROUP>_<name>; an AGG field takes three (min_us at its index, then max_us, sum_us). */
#define FCM_SLOT_INC(g, n)   FCM_##g##_##n,
#define FCM_SLOT_STORE(g, n) FCM_##g##_##n,
#define FCM_SLOT_AGG(g, n)   FCM_##g##_##n, FCM_##g##_##n##_max_us, FCM_##g##_##n##_sum_us,
#define FCM_SLOT(g, n, k)    FCM_SLOT_##k(g, n)

/* clang-format off */
enum { FCM_API_SERVER(FCM_SLOT) FCM_API_SERVER_N };
enum { FCM_BALLOON(FCM_SLOT) FCM_BALLOON_N };
enum { FCM_BLOCK(FCM_SLOT) FCM_BLOCK_N };
enum { FCM_DEPRECATED_API(FCM_SLOT) FCM_DEPRECATED_API_N };
enum { FCM_GET_API(FCM_SLOT) FCM_GET_API_N };
enum { FCM_I8042(FCM_SLOT) FCM_I8042_N };
enum { FCM_UART(FCM_SLOT) FCM_UART_N };
enum { FCM_LATENCIES(FCM_SLOT) FCM_LATENCIES_N };
enum { FCM_LOGGER(FCM_SLOT) FCM_LOGGER_N };
enum { FCM_MMDS(FCM_SLOT) FCM_MMDS_N };
enum { FCM_NET(FCM_SLOT) FCM_NET_N };
enum { FCM_PATCH_API(FCM_SLOT) FCM_PATCH_API_N };
enum { FCM_PUT_API(FCM_SLOT) FCM_PUT_API_N };
enum { FCM_SECCOMP(FCM_SLOT) FCM_SECCOMP_N };
enum { FCM_VCPU(FCM_SLOT) FCM_VCPU_N };
enum { FCM_VMM(FCM_SLOT) FCM_VMM_N };
enum { FCM_SIGNALS(FCM_SLOT) FCM_SIGNALS_N };
enum { FCM_VSOCK(FCM_SLOT) FCM_VSOCK_N };
enum { FCM_ENTROPY(FCM_SLOT) FCM_ENTROPY_N };
/* clang-format on */

/* ---- the counters --------------------------------------------------------------------------------------- */

/* The process-wide groups (Firecracker's are statics too). Block and net are per device: fcm_block/fcm_net. */
extern uint64_t fcm_api_server[FCM_API_SERVER_N], fcm_deprecated_api[FCM_DEPRECATED_API_N], fcm_get_api[FCM_GET_API_N],
    fcm_i8042[FCM_I8042_N], fcm_uart[FCM_UART_N], fcm_latencies[FCM_LATENCIES_N], fcm_logger[FCM_LOGGER_N],
    fcm_patch_api[FCM_PATCH_API_N], fcm_put_api[FCM_PUT_API_N], fcm_seccomp[FCM_SECCOMP_N], fcm_vmm[FCM_VMM_N],
    fcm_signals[FCM_SIGNALS_N], fcm_vsock[FCM_VSOCK_N], fcm_entropy[FCM_ENTROPY_N], fcm_mmds[FCM_MMDS_N],
    fcm_balloon[FCM_BALLOON_N];

/* Adds n to slot i of group g (a relaxed atomic add: any thread, no lock). */
static inline void fcm_add(uint64_t *g, unsigned i, uint64_t n)
{
	__atomic_fetch_add(&g[i], n, __ATOMIC_RELAXED);
}

static inline void fcm_inc(uint64_t *g, unsigned i)
{
	fcm_add(g, i, 1);
}

static inline void fcm_store(uint64_t *g, unsigned i, uint64_t v)
{
	__atomic_store_n(&g[i], v, __ATOMIC_RELAXED);
}

/*
 * Records one latency of `us` microseconds in the aggregate at slot i of g: sum_us grows, min_us and max_us
 * follow Firecracker's LatencyMetricsRecorder (a min or max of 0 is "none yet"). For one writer per group
 * (a device's loop thread, one vCPU); concurrent writers may lose a min/max update, never the sum.
 */
void fcm_latency(uint64_t *g, unsigned i, uint64_t us);

/*
 * The counters of block device `index` (its --disk / drives position: devmgr_window.index), named
 * "block_<id>" in the line from now on; `id` NULL or empty keeps an earlier name (else "drive<index>").
 * Returns the slot array (FCM_BLOCK_N), or NULL when index >= VM_MAX_DISKS. The net twin: "net_<id>".
 */
uint64_t *fcm_block(unsigned index, const char *id);
uint64_t *fcm_net(unsigned index, const char *id);

/*
 * Counts signal `signo` (SIGBUS, SIGSEGV, SIGXFSZ, SIGXCPU, SIGHUP: set to 1; SIGPIPE: +1; SIGILL: 1; others
 * ignored). Async-signal-safe: one atomic operation.
 */
void fc_metrics_signal(int signo);

/*
 * Firecracker's api_server.process_startup_time_us / process_startup_time_cpu_us (its ProcessTimeReporter):
 * the monotonic time since `start_time_us` (--start-time-us) and the process CPU time since
 * `start_time_cpu_us` (--start-time-cpu-us) plus `parent_cpu_time_us` (--parent-cpu-time-us), measured now.
 * A value the jailer did not give is UINT64_MAX: its metric stays 0 (parent_cpu_time_us: counted as 0).
 * Firecracker calls it when its API server starts; brisk's API calls it when it starts serving.
 */
void fc_metrics_process_times(uint64_t start_time_us, uint64_t start_time_cpu_us, uint64_t parent_cpu_time_us);
/* Calls fc_metrics_process_times with the values last given to fc_metrics_set_process_times (none: nothing). */
void fc_metrics_report_process_times(void);
void fc_metrics_set_process_times(uint64_t start_time_us, uint64_t start_time_cpu_us, uint64_t parent_cpu_time_us);

/* ---- the line and its sink -------------------------------------------------------------------------------- */

struct json_object;

/*
 * Starts the metrics on `path` (PUT /metrics, the config file's "metrics", --metrics-path): opened for
 * appending, never blocking (a FIFO read-write, so it needs no reader yet, as Firecracker's
 * O_RDWR|O_NONBLOCK), through the output guard (file.h: the caller adds the VM's files first,
 * vm_config_guard). Once per process, as Firecracker's: a second call fails with -EALREADY and
 * "Reinitialization of metrics not allowed.". Returns 0 or -errno with `err`.
 */
int fc_metrics_configure(const char *path, char *err, size_t errlen);
bool fc_metrics_enabled(void);

/*
 * Builds one metrics line (no newline) into a malloc'd string: every group, each INC counter's count since the
 * previous line (which this call consumes: it is the flush), each STORE value; `vcpu` (FCM_VCPU_N absolute
 * values summed over the vCPUs, NULL: none) and `brisk` (brisk's own group, taken; NULL: none) added.
 * Returns NULL when out of memory (nothing consumed then).
 */
char *fc_metrics_render(const uint64_t *vcpu, struct json_object *brisk);

/*
 * Renders and writes one line to the sink with one write(), never waiting. A FIFO whose reader lags: a line
 * it cannot take at all is dropped and counted in logger.missed_metrics_count (-EAGAIN); one it takes in part
 * (its room is in pages) is finished by the next flush before anything new, and until then new lines are
 * dropped and counted, so a reader only ever sees whole lines. A failed write counts logger.metrics_fails.
 * A line not written gives its INC counts back: the next line written reports them (Firecracker's loses them).
 * Returns 0, -ENODEV (no sink), or -errno.
 */
int fc_metrics_flush(const uint64_t *vcpu, struct json_object *brisk);

/*
 * The sink's fd while a FIFO holds part of a line (-1: nothing pending): poll it for POLLOUT and call
 * fc_metrics_write_rest, which writes what it can of the rest without waiting.
 */
int fc_metrics_rest_fd(void);
void fc_metrics_write_rest(void);

/*
 * The periodic flush (Firecracker's 60 s timer), started once the VM is built (InstanceStart, a snapshot
 * load, a config file's VM) with a line due at once, as Firecracker's PeriodicMetrics::start; with no sink
 * yet the timer runs all the same (a later PUT /metrics gets its first periodic line at the next tick).
 */
#define FC_METRICS_PERIOD_MS 60000
/* Returns true on the call that started it (the caller then writes that first line: api_metrics_tick). */
bool fc_metrics_start_periodic(void);
/* Milliseconds until the next periodic flush is due (0: now), or -1 (no sink or not started). */
int fc_metrics_timeout_ms(void);
/* The periodic line was written (or dropped): the next is FC_METRICS_PERIOD_MS away. */
void fc_metrics_periodic_done(void);

/* Tests only: closes the sink and forgets every count and name. */
void fc_metrics_reset(void);

#endif
