/*
 * setup_order.c - which order of the VM set-up ioctls is cheapest on THIS host?
 *
 * KVM's set-up calls are not independent: on some kernels one step leaves
 * work in flight that a later step waits for (e.g. the in-kernel irqchip's
 * I/O-bus registrations leave SRCU grace periods pending, and a memory-slot
 * change made after them waits for those; docs/architecture.md). This probe
 * re-asks the question on any KVM instead of trusting a table measured
 * elsewhere:
 *
 *   1. pairs: for every pair of set-up steps (A, B) that may legally come in
 *      either order, a fresh VM runs "A then B" and another "B then A"; each
 *      step is timed on its own. Orders alternate round by round (AB BA BA AB
 *      ...), so host drift hits both alike. Reported: the median cost of each
 *      step in each order, and which order is cheaper in total.
 *   2. recipes: whole set-up sequences (brisk's order, the pre-2026-11 order
 *      with the irqchip first, and the floor program's minimal one), each step
 *      timed, interleaved, medians: the per-ioctl cost table of
 *      docs/performance.md.
 *
 * No guest runs; nothing is left behind. Needs /dev/kvm (read-write).
 * Usage: setup_order [-n ROUNDS] [-m MEMORY_MIB] [--json FILE] [-q]
 * Exit status: 0, 1 on a KVM error, 2 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUID_ENTRIES 256
#define MAX_SEQ		  12
#define MAX_ROUNDS	  1000
#define SETTLE_US	  20000 /* between VMs: let the previous VM's deferred teardown finish */

/* The same addresses brisk uses (include/brisk/layout.h). */
#define TSS_ADDR	  0xfeffd000u
#define IDENTITY_MAP_ADDR 0xfeffc000ull
#define IOEVENTFD_ADDR	  0xd0001050ull /* a virtio-mmio QueueNotify register */

enum step { S_TSS, S_MEM, S_IRQCHIP, S_PIT, S_VCPU, S_CPUID, S_MSRS, S_REGS, S_IOEVENTFD, S_IRQFD, S_SPLIT, S__COUNT };

static const struct {
	const char *name;
	const char *ioctls;
} steps[S__COUNT] = {
    [S_TSS] = {"tss", "KVM_SET_TSS_ADDR + KVM_SET_IDENTITY_MAP_ADDR"},
    [S_MEM] = {"memory", "KVM_SET_USER_MEMORY_REGION"},
    [S_IRQCHIP] = {"irqchip", "KVM_CREATE_IRQCHIP"},
    [S_PIT] = {"pit", "KVM_CREATE_PIT2"},
    [S_VCPU] = {"vcpu", "KVM_CREATE_VCPU + mmap(kvm_run)"},
    [S_CPUID] = {"cpuid", "KVM_SET_CPUID2"},
    [S_MSRS] = {"msrs", "KVM_SET_MSRS"},
    [S_REGS] = {"regs", "KVM_GET_SREGS + KVM_SET_SREGS + KVM_SET_REGS"},
    [S_IOEVENTFD] = {"ioeventfd", "KVM_IOEVENTFD"},
    [S_IRQFD] = {"irqfd", "KVM_IRQFD"},
    [S_SPLIT] = {"split", "KVM_ENABLE_CAP(KVM_CAP_SPLIT_IRQCHIP)"},
};

/* Steps a step needs before it (KVM's rules: api.rst). */
static int needs(enum step s, enum step before)
{
	switch (s) {
	case S_PIT:   /* the PIT feeds the in-kernel PIC/IOAPIC */
	case S_IRQFD: /* irqfd routes to the in-kernel irqchip */
		return before == S_IRQCHIP;
	case S_CPUID:
	case S_MSRS:
	case S_REGS:
		return before == S_VCPU;
	default:
		return 0;
	}
}

/*
 * KVM_CREATE_IRQCHIP and KVM_SET_IDENTITY_MAP_ADDR fail with EINVAL once a
 * vCPU exists (x86.c: kvm->created_vcpus), so both must precede every vCPU.
 */
static int forbidden_after(enum step s, enum step after)
{
	return (s == S_IRQCHIP || s == S_TSS || s == S_SPLIT) && after == S_VCPU;
}

struct seq {
	const char *name;
	const char *why;
	int n;
	enum step s[MAX_SEQ];
};

static int kvm_fd, quiet;
static uint64_t mem_size = 128ull << 20;
static void *mem;
static struct kvm_cpuid2 *cpuid;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "setup_order: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* One VM's fds, closed after each sequence. */
struct vmctx {
	int vm, vcpu, efd, ifd;
	void *run;
	size_t run_size;
};

static void do_regs(struct vmctx *c)
{
	struct kvm_sregs sr;
	struct kvm_regs r = {.rflags = 2, .rip = 0x100000};

	if (ioctl(c->vcpu, KVM_GET_SREGS, &sr) < 0)
		die("KVM_GET_SREGS");
	sr.cs.base = 0;
	sr.cs.selector = 0x10;
	sr.cr0 |= 1;
	if (ioctl(c->vcpu, KVM_SET_SREGS, &sr) < 0)
		die("KVM_SET_SREGS");
	if (ioctl(c->vcpu, KVM_SET_REGS, &r) < 0)
		die("KVM_SET_REGS");
}

static void do_msrs(struct vmctx *c)
{
	struct {
		struct kvm_msrs h;
		struct kvm_msr_entry e[4];
	} m = {.h.nmsrs = 4, .e = {{.index = 0x174}, {.index = 0x175}, {.index = 0x176}, {.index = 0xc0000102}}};

	if (ioctl(c->vcpu, KVM_SET_MSRS, &m) != 4)
		die("KVM_SET_MSRS");
}

static void do_step(struct vmctx *c, enum step s)
{
	struct kvm_userspace_memory_region r = {.memory_size = mem_size, .userspace_addr = (uintptr_t)mem};
	struct kvm_pit_config pit = {.flags = 0};
	struct kvm_ioeventfd io = {.addr = IOEVENTFD_ADDR, .len = 4};
	struct kvm_irqfd irqfd = {.gsi = 5};
	struct kvm_enable_cap split = {.cap = KVM_CAP_SPLIT_IRQCHIP, .args = {24}};

	switch (s) {
	case S_TSS:
		if (ioctl(c->vm, KVM_SET_TSS_ADDR, TSS_ADDR) < 0 ||
		    ioctl(c->vm, KVM_SET_IDENTITY_MAP_ADDR, &(uint64_t){IDENTITY_MAP_ADDR}) < 0)
			die("KVM_SET_TSS_ADDR/KVM_SET_IDENTITY_MAP_ADDR");
		break;
	case S_MEM:
		if (ioctl(c->vm, KVM_SET_USER_MEMORY_REGION, &r) < 0)
			die("KVM_SET_USER_MEMORY_REGION");
		break;
	case S_IRQCHIP:
		if (ioctl(c->vm, KVM_CREATE_IRQCHIP, 0) < 0)
			die("KVM_CREATE_IRQCHIP");
		break;
	case S_PIT:
		if (ioctl(c->vm, KVM_CREATE_PIT2, &pit) < 0)
			die("KVM_CREATE_PIT2");
		break;
	case S_VCPU:
		c->vcpu = ioctl(c->vm, KVM_CREATE_VCPU, 0);
		if (c->vcpu < 0)
			die("KVM_CREATE_VCPU");
		c->run = mmap(NULL, c->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, c->vcpu, 0);
		if (c->run == MAP_FAILED)
			die("mmap(kvm_run)");
		break;
	case S_CPUID:
		if (ioctl(c->vcpu, KVM_SET_CPUID2, cpuid) < 0)
			die("KVM_SET_CPUID2");
		break;
	case S_MSRS:
		do_msrs(c);
		break;
	case S_REGS:
		do_regs(c);
		break;
	case S_IOEVENTFD:
		io.fd = c->efd;
		if (ioctl(c->vm, KVM_IOEVENTFD, &io) < 0)
			die("KVM_IOEVENTFD");
		break;
	case S_IRQFD:
		irqfd.fd = (uint32_t)c->ifd;
		if (ioctl(c->vm, KVM_IRQFD, &irqfd) < 0)
			die("KVM_IRQFD");
		break;
	case S_SPLIT:
		if (ioctl(c->vm, KVM_ENABLE_CAP, &split) < 0)
			die("KVM_ENABLE_CAP(KVM_CAP_SPLIT_IRQCHIP)");
		break;
	default:
		break;
	}
}

/* KVM destroys a VM when its last fd is closed, in the closing thread: this is that cost. */
static uint64_t last_teardown_ns;

/*
 * Runs one sequence in a fresh VM; ns[i] = cost of seq->s[i]. Returns
 * KVM_CREATE_VM's cost; last_teardown_ns gets the cost of the final close.
 */
static uint64_t run_seq(const struct seq *q, uint64_t *ns)
{
	struct vmctx c = {.vcpu = -1, .run = MAP_FAILED};
	uint64_t t0 = now_ns(), create;

	c.run_size = (size_t)ioctl(kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	c.vm = ioctl(kvm_fd, KVM_CREATE_VM, 0);
	if (c.vm < 0)
		die("KVM_CREATE_VM");
	create = now_ns() - t0;
	c.efd = eventfd(0, EFD_CLOEXEC);
	c.ifd = eventfd(0, EFD_CLOEXEC);
	if (c.efd < 0 || c.ifd < 0)
		die("eventfd");
	for (int i = 0; i < q->n; i++) {
		uint64_t t = now_ns();

		do_step(&c, q->s[i]);
		ns[i] = now_ns() - t;
	}
	if (c.run != MAP_FAILED)
		munmap(c.run, c.run_size);
	if (c.vcpu >= 0)
		close(c.vcpu);
	close(c.efd); /* an ioeventfd/irqfd keeps no VM reference once the VM goes */
	{
		uint64_t t = now_ns();

		close(c.vm); /* the last reference: kvm_destroy_vm runs here */
		last_teardown_ns = now_ns() - t;
	}
	close(c.ifd);
	usleep(SETTLE_US);
	return create;
}

/* ---- statistics ---------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double median_us(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	return n % 2 ? (double)v[n / 2] / 1e3 : (double)(v[n / 2 - 1] + v[n / 2]) / 2e3;
}

/* ---- pairs ------------------------------------------------------------------------------------ */

/* Does every step come after what it needs, and before what may not precede it? */
static int seq_legal(const struct seq *q)
{
	for (int i = 0; i < q->n; i++) {
		for (int j = 0; j < q->n; j++) {
			if (j > i && needs(q->s[i], q->s[j]))
				return 0; /* s[i] needs s[j], which comes later */
			if (j < i && forbidden_after(q->s[i], q->s[j]))
				return 0; /* s[i] may not come after s[j] */
		}
	}
	return 1;
}

/* The sequence prerequisites(A, B) + A + B, or n = 0 when that order is illegal. */
static struct seq pair_seq(enum step a, enum step b)
{
	struct seq q = {.n = 0};

	for (int s = 0; s < S__COUNT; s++)
		if ((needs(a, (enum step)s) || needs(b, (enum step)s)) && s != (int)a && s != (int)b)
			q.s[q.n++] = (enum step)s;
	q.s[q.n++] = a;
	q.s[q.n++] = b;
	if (!seq_legal(&q))
		q.n = 0;
	return q;
}

struct pair_result {
	enum step a, b;
	double ab_a, ab_b, ba_b, ba_a; /* medians, us */
};

static void measure_pair(enum step a, enum step b, int rounds, struct pair_result *r)
{
	struct seq ab = pair_seq(a, b), ba = pair_seq(b, a);
	static uint64_t xa[MAX_ROUNDS], xb[MAX_ROUNDS], ya[MAX_ROUNDS], yb[MAX_ROUNDS];
	uint64_t ns[MAX_SEQ];

	for (int i = 0; i < rounds; i++) {
		/* ABBA: each order runs first in half of the rounds. */
		for (int k = 0; k < 2; k++) {
			if ((i + k) % 2 == 0) {
				run_seq(&ab, ns);
				xa[i] = ns[ab.n - 2];
				xb[i] = ns[ab.n - 1];
			} else {
				run_seq(&ba, ns);
				yb[i] = ns[ba.n - 2];
				ya[i] = ns[ba.n - 1];
			}
		}
	}
	*r = (struct pair_result){
	    .a = a,
	    .b = b,
	    .ab_a = median_us(xa, rounds),
	    .ab_b = median_us(xb, rounds),
	    .ba_b = median_us(yb, rounds),
	    .ba_a = median_us(ya, rounds),
	};
}

/*
 * Both orders legal for this pair? (Prerequisite pairs such as irqchip/pit have one order only.) The split
 * irqchip is an alternative to the in-kernel one, measured in the recipes only.
 */
static int pair_legal(enum step a, enum step b)
{
	if (a == S_SPLIT || b == S_SPLIT)
		return 0;
	return pair_seq(a, b).n && pair_seq(b, a).n;
}

static const char *verdict(const struct pair_result *r, char *buf, size_t len)
{
	double ab = r->ab_a + r->ab_b, ba = r->ba_b + r->ba_a;
	double hi = ab > ba ? ab : ba, lo = ab > ba ? ba : ab;

	/* Under 20 us or 1.5x: noise on a shared host, call it a tie. */
	if (hi - lo < 20.0 || hi < 1.5 * lo)
		snprintf(buf, len, "either");
	else
		snprintf(buf, len, "%s first (%.1fx)", ab < ba ? steps[r->a].name : steps[r->b].name, hi / lo);
	return buf;
}

/* ---- whole recipes --------------------------------------------------------------------------- */

static const struct seq recipes[] = {
    {"brisk",
     "brisk's recipe (src/vmm/vm_build.c): memory slots, then the split irqchip (no PIC, IOAPIC, PIT in KVM)",
     7,
     {S_TSS, S_MEM, S_SPLIT, S_VCPU, S_CPUID, S_MSRS, S_REGS}},
    {"kernel-irqchip",
     "brisk --irqchip kernel: memory slots before KVM's irqchip and PIT",
     8,
     {S_TSS, S_MEM, S_IRQCHIP, S_PIT, S_VCPU, S_CPUID, S_MSRS, S_REGS}},
    {"irqchip-first",
     "brisk before 2026-11-30: irqchip and PIT, then the memory slot",
     8,
     {S_TSS, S_IRQCHIP, S_PIT, S_MEM, S_VCPU, S_CPUID, S_MSRS, S_REGS}},
    {"floor", "bench/floor.c: no TSS, irqchip, PIT or MSRs", 4, {S_MEM, S_VCPU, S_CPUID, S_REGS}},
};
#define NR_RECIPES (int)(sizeof(recipes) / sizeof(recipes[0]))

/* [..][MAX_SEQ]: create, [MAX_SEQ+1]: total, [MAX_SEQ+2]: teardown (the final close) */
static uint64_t rec_ns[NR_RECIPES][MAX_SEQ + 3][MAX_ROUNDS];

static void measure_recipes(int rounds)
{
	uint64_t ns[MAX_SEQ];

	for (int i = 0; i < rounds; i++) {
		for (int k = 0; k < NR_RECIPES; k++) {
			int r = (i + k) % NR_RECIPES; /* rotate which recipe runs first */
			uint64_t total = run_seq(&recipes[r], ns);

			rec_ns[r][MAX_SEQ][i] = total;
			for (int j = 0; j < recipes[r].n; j++) {
				rec_ns[r][j][i] = ns[j];
				total += ns[j];
			}
			rec_ns[r][MAX_SEQ + 1][i] = total;
			rec_ns[r][MAX_SEQ + 2][i] = last_teardown_ns;
		}
	}
}

/* ---- output ------------------------------------------------------------------------------------ */

static void print_pairs(FILE *f, const struct pair_result *p, int n, int rounds)
{
	char buf[64];

	fprintf(f, "pairs: each step's cost (us, median of %d) in both orders, fresh VM each time\n", rounds);
	fprintf(f, "%-22s %10s %10s   %10s %10s   %s\n", "A / B", "A then B:A", "B", "B then A:B", "A", "cheaper");
	for (int i = 0; i < n; i++) {
		char name[40];

		snprintf(name, sizeof(name), "%s / %s", steps[p[i].a].name, steps[p[i].b].name);
		fprintf(f, "%-22s %10.1f %10.1f   %10.1f %10.1f   %s\n", name, p[i].ab_a, p[i].ab_b, p[i].ba_b,
			p[i].ba_a, verdict(&p[i], buf, sizeof(buf)));
	}
}

static void print_recipes(FILE *f, int rounds, double med[NR_RECIPES][MAX_SEQ + 3])
{
	fprintf(f, "\nrecipes: each ioctl's cost (us, median of %d, interleaved)\n", rounds);
	for (int r = 0; r < NR_RECIPES; r++) {
		fprintf(f, "%s: %s\n", recipes[r].name, recipes[r].why);
		fprintf(f, "  %-10s %-48s %10.1f\n", "vm", "KVM_CREATE_VM", med[r][MAX_SEQ]);
		for (int j = 0; j < recipes[r].n; j++)
			fprintf(f, "  %-10s %-48s %10.1f\n", steps[recipes[r].s[j]].name, steps[recipes[r].s[j]].ioctls,
				med[r][j]);
		fprintf(f, "  %-10s %-48s %10.1f\n", "total", "(median of per-round sums)", med[r][MAX_SEQ + 1]);
		fprintf(f, "  %-10s %-48s %10.1f\n", "teardown", "close() of the VM fd: KVM destroys the VM",
			med[r][MAX_SEQ + 2]);
	}
}

static void json_pairs(FILE *f, const struct pair_result *p, int n)
{
	char buf[64];

	fprintf(f, "  \"pairs\": [\n");
	for (int i = 0; i < n; i++)
		fprintf(f,
			"    {\"a\": \"%s\", \"b\": \"%s\", \"a_then_b_us\": [%.1f, %.1f], \"b_then_a_us\": [%.1f, "
			"%.1f], \"cheaper\": \"%s\"}%s\n",
			steps[p[i].a].name, steps[p[i].b].name, p[i].ab_a, p[i].ab_b, p[i].ba_b, p[i].ba_a,
			verdict(&p[i], buf, sizeof(buf)), i + 1 < n ? "," : "");
	fprintf(f, "  ],\n");
}

static void json_recipes(FILE *f, double med[NR_RECIPES][MAX_SEQ + 3])
{
	fprintf(f, "  \"recipes\": [\n");
	for (int r = 0; r < NR_RECIPES; r++) {
		fprintf(f,
			"    {\"name\": \"%s\", \"create_vm_us\": %.1f, \"total_us\": %.1f, \"teardown_us\": %.1f, "
			"\"steps\": [",
			recipes[r].name, med[r][MAX_SEQ], med[r][MAX_SEQ + 1], med[r][MAX_SEQ + 2]);
		for (int j = 0; j < recipes[r].n; j++)
			fprintf(f, "%s{\"step\": \"%s\", \"us\": %.1f}", j ? ", " : "", steps[recipes[r].s[j]].name,
				med[r][j]);
		fprintf(f, "]}%s\n", r + 1 < NR_RECIPES ? "," : "");
	}
	fprintf(f, "  ]\n");
}

static void setup(void)
{
	kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm_fd < 0)
		die("/dev/kvm");
	mem = mmap(NULL, mem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap of guest memory");
	cpuid = calloc(1, sizeof(*cpuid) + MAX_CPUID_ENTRIES * sizeof(cpuid->entries[0]));
	if (!cpuid)
		die("calloc");
	cpuid->nent = MAX_CPUID_ENTRIES;
	if (ioctl(kvm_fd, KVM_GET_SUPPORTED_CPUID, cpuid) < 0)
		die("KVM_GET_SUPPORTED_CPUID");
}

static int usage(void)
{
	fprintf(stderr,
		"usage: setup_order [-n ROUNDS (1..%d, default 15)] [-m MEMORY_MIB (default 128)] "
		"[--json FILE] [-q]\n",
		MAX_ROUNDS);
	return 2;
}

int main(int argc, char **argv)
{
	static struct pair_result pairs[S__COUNT * S__COUNT];
	static double med[NR_RECIPES][MAX_SEQ + 3];
	const char *json = NULL;
	int rounds = 15, np = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-m") && i + 1 < argc)
			mem_size = strtoull(argv[++i], NULL, 10) << 20;
		else if (!strcmp(argv[i], "--json") && i + 1 < argc)
			json = argv[++i];
		else if (!strcmp(argv[i], "-q"))
			quiet = 1;
		else
			return usage();
	}
	if (rounds < 1 || rounds > MAX_ROUNDS || mem_size == 0 || mem_size > (64ull << 30))
		return usage();
	setup();
	for (int a = 0; a < S__COUNT; a++) {
		for (int b = a + 1; b < S__COUNT; b++) {
			if (!pair_legal((enum step)a, (enum step)b))
				continue;
			if (!quiet)
				fprintf(stderr, "setup_order: %s / %s\n", steps[a].name, steps[b].name);
			measure_pair((enum step)a, (enum step)b, rounds, &pairs[np++]);
		}
	}
	if (!quiet)
		fprintf(stderr, "setup_order: whole recipes\n");
	measure_recipes(rounds);
	for (int r = 0; r < NR_RECIPES; r++)
		for (int j = 0; j < MAX_SEQ + 3; j++)
			if (j < recipes[r].n || j >= MAX_SEQ)
				med[r][j] = median_us(rec_ns[r][j], rounds);
	print_pairs(stdout, pairs, np, rounds);
	print_recipes(stdout, rounds, med);
	if (json) {
		FILE *f = fopen(json, "w");

		if (!f)
			die(json);
		fprintf(f, "{\n  \"rounds\": %d,\n  \"memory_bytes\": %llu,\n", rounds, (unsigned long long)mem_size);
		json_pairs(f, pairs, np);
		json_recipes(f, med);
		fprintf(f, "}\n");
		if (fclose(f))
			die(json);
	}
	return 0;
}
