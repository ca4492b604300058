/* exits.c - per-vCPU userspace exit counters: by reason, by port/MMIO address (bounded table), and over time. */
#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>

#include "brisk/exits.h"

const char *exit_reason_name(unsigned reason)
{
	static const char *const names[] = {
	    [KVM_EXIT_IO] = "io",
	    [KVM_EXIT_MMIO] = "mmio",
	    [KVM_EXIT_INTR] = "intr",
	    [KVM_EXIT_SHUTDOWN] = "shutdown",
	    [KVM_EXIT_HLT] = "hlt",
	    [KVM_EXIT_INTERNAL_ERROR] = "internal_error",
	    [KVM_EXIT_FAIL_ENTRY] = "fail_entry",
	    [KVM_EXIT_SYSTEM_EVENT] = "system_event",
	    [KVM_EXIT_IOAPIC_EOI] = "ioapic_eoi",
	};

	return reason < sizeof(names) / sizeof(names[0]) && names[reason] ? names[reason] : "other";
}

/* Fibonacci hashing of (address, kind, direction) into the slot range. */
static unsigned slot_of(enum exit_addr_kind kind, uint64_t addr, int write)
{
	uint64_t h = (addr ^ ((uint64_t)kind << 62) ^ ((uint64_t)(write != 0) << 61)) * 0x9e3779b97f4a7c15ull;

	return (unsigned)(h >> 58) & (EXIT_ADDR_SLOTS - 1);
}

/* The slot of (kind, addr, write), claimed if free; NULL when the table is full. */
static struct exit_addr *addr_slot(struct exit_stats *s, enum exit_addr_kind kind, uint64_t addr, int write)
{
	unsigned i = slot_of(kind, addr, write);

	for (unsigned probe = 0; probe < EXIT_ADDR_SLOTS; probe++, i = (i + 1) & (EXIT_ADDR_SLOTS - 1)) {
		struct exit_addr *e = &s->addr[i];

		if (e->kind == EXIT_ADDR_NONE) {
			*e = (struct exit_addr){.addr = addr, .kind = (uint8_t)kind, .write = (uint8_t)(write != 0)};
			return e;
		}
		if (e->kind == kind && e->addr == addr && e->write == (write != 0))
			return e;
	}
	return NULL;
}

static void series_add(struct exit_series *s, uint64_t t_ns)
{
	uint64_t i;

	if (!s->buckets)
		return;
	if (t_ns < s->start_ns || (i = (t_ns - s->start_ns) / s->bucket_ns) >= s->nr) {
		s->outside++;
		return;
	}
	s->buckets[i]++;
}

void exit_stats_add(struct exit_stats *s, uint32_t reason, enum exit_addr_kind kind, uint64_t addr, int write,
		    uint64_t t0_ns, uint64_t t1_ns)
{
	unsigned r = reason < EXIT_REASONS ? reason : EXIT_REASONS - 1;
	uint64_t ns = t1_ns - t0_ns;

	s->exits[r]++;
	s->ns[r] += ns;
	series_add(&s->series, t0_ns);
	if (kind != EXIT_ADDR_NONE) {
		struct exit_addr *e = addr_slot(s, kind, addr, write);

		if (!e) {
			s->addr_overflow++;
			return;
		}
		e->count++;
		e->ns += ns;
	}
}

/*
 * Firecracker's count and latency of one I/O or MMIO exit (v1.7.0 src/vmm/src/vstate/vcpu/mod.rs: exit_io_in
 * and exit_io_in_agg, ...). One writer, the vCPU's thread: a plain add published with a relaxed store.
 */
static void fc_account(struct exit_stats *s, unsigned count, unsigned agg, uint64_t ns)
{
	__atomic_store_n(&s->fc[count], s->fc[count] + 1, __ATOMIC_RELAXED);
	fcm_latency(s->fc, agg, ns / 1000);
}

void exit_stats_account(struct exit_stats *s, const struct kvm_run *run, uint64_t t0_ns, uint64_t t1_ns)
{
	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		exit_stats_add(s, KVM_EXIT_IO, EXIT_ADDR_PIO, run->io.port, run->io.direction == KVM_EXIT_IO_OUT, t0_ns,
			       t1_ns);
		if (run->io.direction == KVM_EXIT_IO_OUT)
			fc_account(s, FCM_VCPU_exit_io_out, FCM_VCPU_exit_io_out_agg, t1_ns - t0_ns);
		else
			fc_account(s, FCM_VCPU_exit_io_in, FCM_VCPU_exit_io_in_agg, t1_ns - t0_ns);
		return;
	case KVM_EXIT_MMIO:
		exit_stats_add(s, KVM_EXIT_MMIO, EXIT_ADDR_MMIO, run->mmio.phys_addr, run->mmio.is_write, t0_ns, t1_ns);
		if (run->mmio.is_write)
			fc_account(s, FCM_VCPU_exit_mmio_write, FCM_VCPU_exit_mmio_write_agg, t1_ns - t0_ns);
		else
			fc_account(s, FCM_VCPU_exit_mmio_read, FCM_VCPU_exit_mmio_read_agg, t1_ns - t0_ns);
		return;
	default:
		exit_stats_add(s, run->exit_reason, EXIT_ADDR_NONE, 0, 0, t0_ns, t1_ns);
	}
}

int exit_series_alloc(struct exit_series *s, uint64_t start_ns, uint64_t bucket_ns, uint32_t nr)
{
	if (!bucket_ns || !nr)
		return -EINVAL;
	s->buckets = calloc(nr, sizeof(*s->buckets));
	if (!s->buckets)
		return -ENOMEM;
	s->nr = nr;
	s->start_ns = start_ns;
	s->bucket_ns = bucket_ns;
	s->outside = 0;
	return 0;
}

void exit_series_free(struct exit_series *s)
{
	free(s->buckets);
	*s = (struct exit_series){0};
}

void exit_stats_print_addrs(const struct exit_stats *s, unsigned vcpu, FILE *f)
{
	for (unsigned i = 0; i < EXIT_ADDR_SLOTS; i++) {
		const struct exit_addr *e = &s->addr[i];

		if (e->kind == EXIT_ADDR_NONE || !e->count)
			continue;
		fprintf(f, "%-6u %-4s %-5s 0x%-12llx %10llu %12.1f\n", vcpu, e->kind == EXIT_ADDR_PIO ? "pio" : "mmio",
			e->write ? "write" : "read", (unsigned long long)e->addr, (unsigned long long)e->count,
			(double)e->ns / 1e3);
	}
	if (s->addr_overflow)
		fprintf(f, "%-6u (%llu exits at addresses beyond the table's %d slots)\n", vcpu,
			(unsigned long long)s->addr_overflow, EXIT_ADDR_SLOTS);
}
