/* exits.h - the cheap, always-on userspace exit counters of one vCPU: by reason, by port/MMIO address, over time. */
#ifndef BRISK_EXITS_H
#define BRISK_EXITS_H

#include <stdint.h>
#include <stdio.h>

#include "brisk/fc_metrics.h"

struct kvm_run;

#define EXIT_REASONS	64 /* KVM_EXIT_* values; larger ones are counted in the last slot */
#define EXIT_ADDR_SLOTS 64 /* distinct (kind, address, direction) per vCPU; a power of two */

enum exit_addr_kind { EXIT_ADDR_NONE = 0, EXIT_ADDR_PIO, EXIT_ADDR_MMIO };

/* One row of the address table: exits for one port or MMIO address in one direction. */
struct exit_addr {
	uint64_t addr;
	uint8_t kind;  /* enum exit_addr_kind; EXIT_ADDR_NONE = free slot */
	uint8_t write; /* 1 = OUT / MMIO write */
	uint64_t count;
	uint64_t ns;
};

/*
 * Exits over time: bucket i counts exits in [start_ns + i*bucket_ns, ...).
 * Only `brisk profile` allocates buckets (buckets == NULL: not kept); exits
 * before start or past the last bucket are counted in `outside`.
 */
struct exit_series {
	uint32_t *buckets;
	uint32_t nr;
	uint64_t start_ns; /* CLOCK_MONOTONIC */
	uint64_t bucket_ns;
	uint64_t outside;
};

/* Everything one vCPU thread counts; written by that thread only. */
struct exit_stats {
	uint64_t exits[EXIT_REASONS];
	uint64_t ns[EXIT_REASONS]; /* time in userspace handling each reason */
	uint64_t pio_unhandled;
	struct exit_addr addr[EXIT_ADDR_SLOTS]; /* open addressing, linear probing */
	uint64_t addr_overflow;			/* exits whose address found no free slot */
	struct exit_series series;
	/*
	 * Firecracker's vcpu group (fc_metrics.h, FCM_VCPU_*): I/O and MMIO exits by direction with their
	 * handling latency in us, and failures. Stored with relaxed atomics: the metrics flush reads them.
	 */
	uint64_t fc[FCM_VCPU_N];
	/*
	 * The vCPU thread's own rusage as it ended (getrusage RUSAGE_THREAD): page faults, minor and major (KVM's
	 * faults on guest RAM for this vCPU among them: get_user_pages counts them to the task), and kernel CPU
	 * time. ru_valid 0: not ended yet, or the call failed.
	 */
	uint64_t ru_minflt, ru_majflt, ru_stime_us;
	int ru_valid;
};

/*
 * Counts one exit that KVM_RUN returned with `run` and that brisk handled
 * from t0_ns to t1_ns (CLOCK_MONOTONIC). O(1) in the common case, bounded by
 * EXIT_ADDR_SLOTS probes; never allocates.
 */
void exit_stats_account(struct exit_stats *s, const struct kvm_run *run, uint64_t t0_ns, uint64_t t1_ns);

/* Counts an exit with an explicit reason and address (what exit_stats_account does; for tests). */
void exit_stats_add(struct exit_stats *s, uint32_t reason, enum exit_addr_kind kind, uint64_t addr, int write,
		    uint64_t t0_ns, uint64_t t1_ns);

/* "io", "mmio", ... for a KVM_EXIT_* value; "other" for the rest. */
const char *exit_reason_name(unsigned reason);

/*
 * Allocates `nr` buckets of `bucket_ns` from `start_ns`. Returns 0 or
 * -ENOMEM. exit_series_free releases them.
 */
int exit_series_alloc(struct exit_series *s, uint64_t start_ns, uint64_t bucket_ns, uint32_t nr);
void exit_series_free(struct exit_series *s);

/* Prints the address table of vCPU `vcpu` (rows with a count), aligned. */
void exit_stats_print_addrs(const struct exit_stats *s, unsigned vcpu, FILE *f);

#endif
