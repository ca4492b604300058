/* virtio-balloon.c - conformance and hostile guest for the memory balloon (virtio 1.2 section 5.5) on virtio-mmio. */
#include "virtio.h"

/*
 * Command-line words:
 *   virtio_mmio.device=SIZE@BASE:IRQ[:ID]  the device windows (the VMM adds them)
 *   touch=MIB     MiB of RAM from 64 MiB on the guest writes first (default 32): the host's RSS grows
 *   wait_ms=N     how long to wait for the host to move the target (default 20000)
 * Steps, each printed "virtio-balloon: CHECK what: PASS|FAIL (values)":
 *   1. bring-up: VERSION_1, STATS_VQ and DEFLATE_ON_OOM accepted when offered; 2 queues, 3 with STATS_VQ.
 *   2. touch the region (one write per page); with STATS_VQ post a statistics buffer (5.5.6.3).
 *   3. wait for num_pages > 0, inflate that many pages of the region (buffers of 256 PFNs), write actual;
 *      the inflated pages read back zero (the host discarded them), a page left out keeps its value.
 *   4. with STATS_VQ: the buffer comes back within the interval; a refilled one is posted.
 *   5. wait for num_pages to drop, deflate the difference, write actual; the deflated pages are usable.
 *   6. hostile buffers: PFNs past RAM, in the MMIO hole, 0xffffffff; 257 PFNs; 3 bytes; a device-writable
 *      buffer: each is completed, the device does not ask for a reset, no page outside the balloon changed.
 */
#define NAME	     "virtio-balloon"
#define REGION	     (64ull << 20)
#define PAGE	     4096u
#define PFNS	     256u /* per buffer: Firecracker's MAX_PAGES_IN_DESC */
#define F_STATS	     (1ull << 1)
#define F_OOM	     (1ull << 2)
#define Q_INFLATE    0
#define Q_DEFLATE    1
#define Q_STATS	     2
#define STAT_MEMTOT  5
#define STAT_MEMFREE 4

struct stat_entry {
	uint16_t tag;
	uint64_t val;
} __attribute__((packed));

static struct virtio_dev bal;
static uint32_t pfn_buf[PFNS + 1] __attribute__((aligned(64)));
static struct stat_entry stats[3] __attribute__((aligned(64)));
static uint64_t ram_end;

static uint32_t num_pages(void)
{
	return virtio_read32(&bal, VIRTIO_MMIO_CONFIG);
}

static void set_actual(uint32_t v)
{
	virtio_write32(&bal, VIRTIO_MMIO_CONFIG + 4, v);
}

/* Sends `n` PFNs from pfn_buf on queue q; 0 when the buffer came back. */
static int send_pfns(unsigned int q, unsigned int n)
{
	struct virtio_buf b = {pfn_buf, n * 4};
	uint32_t len = 0;

	return virtio_transfer(&bal, q, &b, 1, 0, 0, &len);
}

/* Pages [first, first + n) of the region, on queue q, in buffers of PFNS. */
static int move_pages(unsigned int q, uint32_t first, uint32_t n)
{
	for (uint32_t done = 0; done < n;) {
		uint32_t k = n - done < PFNS ? n - done : PFNS;

		for (uint32_t i = 0; i < k; i++)
			pfn_buf[i] = (uint32_t)(REGION / PAGE) + first + done + i;
		if (send_pfns(q, k))
			return -1;
		done += k;
	}
	return 0;
}

static volatile uint64_t *page(uint32_t i)
{
	return (volatile uint64_t *)(uintptr_t)(REGION + (uint64_t)i * PAGE);
}

static void post_stats(uint64_t free)
{
	struct virtio_buf b = {stats, sizeof(stats)};

	stats[0] = (struct stat_entry){STAT_MEMTOT, ram_end};
	stats[1] = (struct stat_entry){STAT_MEMFREE, free};
	stats[2] = (struct stat_entry){0, 7}; /* swap_in */
	conf_check(virtio_submit(&bal, Q_STATS, &b, 1, 0, 0, VIRTIO_POLL) >= 0, "stats_post", "free_memory %llu",
		   (unsigned long long)free);
}

/* Waits up to ms for num_pages to satisfy want(num_pages); returns the last value read. */
static uint32_t wait_target(int (*want)(uint32_t, uint32_t), uint32_t ref, unsigned int ms)
{
	uint32_t v = num_pages();

	for (unsigned int t = 0; !want(v, ref) && t < ms; t += 50) {
		virtio_sleep_ms(50);
		v = num_pages();
	}
	return v;
}

static int above(uint32_t v, uint32_t ref)
{
	return v > ref;
}

static int below(uint32_t v, uint32_t ref)
{
	return v < ref;
}

static int bringup(const char *cmdline)
{
	unsigned int nq;

	if (virtio_find(&bal, cmdline, 5) || virtio_negotiate(&bal, F_STATS | F_OOM))
		return -1;
	nq = bal.features & F_STATS ? 3 : 2;
	for (unsigned int q = 0; q < nq; q++)
		if (virtio_queue_setup(&bal, q, VIRTQ_MAX_SIZE))
			return -1;
	if (virtio_driver_ok(&bal) || virtio_irq_setup(&bal))
		return -1;
	return 0;
}

static void find_ram_end(struct hvm_start_info *si)
{
	const struct hvm_memmap_table_entry *e = (const void *)(uintptr_t)si->memmap_paddr;

	for (uint32_t i = 0; si->memmap_paddr && i < si->memmap_entries && i < 64; i++)
		if (e[i].type == 1 && e[i].addr + e[i].size > ram_end)
			ram_end = e[i].addr + e[i].size;
}

/* Step 6: each hostile buffer completes and the device stays usable. */
static void hostile(const char *what, unsigned int q, uint32_t first_pfn, unsigned int n, uint32_t bytes, int writable)
{
	struct virtio_buf b = {pfn_buf, bytes};
	uint32_t len = 0;
	int ok;

	for (unsigned int i = 0; i < n && i <= PFNS; i++)
		pfn_buf[i] = first_pfn + (first_pfn == 0xffffffffu ? 0 : i);
	ok = virtio_transfer(&bal, q, &b, writable ? 0 : 1, writable ? 1 : 0, 0, &len) == 0;
	conf_check(ok && !(virtio_status(&bal) & VIRTIO_STATUS_DEVICE_NEEDS_RESET), what,
		   "%s, PFN 0x%x x%u in %u bytes, used length %u, status 0x%x", ok ? "completed" : "no completion",
		   first_pfn, n, bytes, len, virtio_status(&bal));
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	uint64_t touch = 32, wait_ms = 20000;
	uint32_t pages, target, low, id, len;
	int zero = 1;

	serial_init();
	conf_begin(NAME);
	bal.name = NAME;
	cmdline_get_u64(cmdline, "touch", &touch);
	cmdline_get_u64(cmdline, "wait_ms", &wait_ms);
	find_ram_end(si);
	if (bringup(cmdline)) {
		conf_check(0, "bringup", "status 0x%x", virtio_status(&bal));
		conf_end();
	}
	virtio_describe(&bal);
	conf_check(1, "bringup", "offered 0x%llx, negotiated 0x%llx, RAM end 0x%llx", (unsigned long long)bal.offered,
		   (unsigned long long)bal.features, (unsigned long long)ram_end);

	pages = (uint32_t)(touch << 20) / PAGE;
	for (uint32_t i = 0; i < pages; i++)
		*page(i) = 0x5a5a000000000000ull | i;
	gprintf("%s: touched %u pages\n", NAME, pages);
	if (bal.features & F_STATS)
		post_stats(123456789);

	target = wait_target(above, 0, (unsigned int)wait_ms);
	conf_check(target > 0 && target < pages, "target", "num_pages %u (region %u pages)", target, pages);
	if (target == 0 || target >= pages)
		conf_end();
	conf_check(move_pages(Q_INFLATE, 0, target) == 0, "inflate", "%u pages", target);
	set_actual(target);
	for (uint32_t i = 0; i < target; i += 97)
		zero &= *page(i) == 0;
	conf_check(zero, "inflated_pages_zero", "page 0 reads 0x%llx", (unsigned long long)*page(0));
	conf_check(*page(target) == (0x5a5a000000000000ull | target), "other_pages_kept", "page %u reads 0x%llx",
		   target, (unsigned long long)*page(target));
	gprintf("%s: inflated %u pages, actual %u\n", NAME, target, virtio_read32(&bal, VIRTIO_MMIO_CONFIG + 4));

	if (bal.features & F_STATS) {
		int back = virtio_wait(&bal, Q_STATS, VIRTIO_POLL, (unsigned int)wait_ms, &id, &len) == 0;

		conf_check(back, "stats_returned", "used id %u length %u", back ? id : 0, back ? len : 0);
		if (back)
			post_stats(987654321);
	}

	low = wait_target(below, target, (unsigned int)wait_ms);
	conf_check(low < target, "target_lowered", "num_pages %u after %u", low, target);
	if (low < target) {
		conf_check(move_pages(Q_DEFLATE, low, target - low) == 0, "deflate", "%u pages", target - low);
		set_actual(low);
		*page(target - 1) = 42;
		conf_check(*page(target - 1) == 42, "deflated_page_usable", "reads %llu",
			   (unsigned long long)*page(target - 1));
		gprintf("%s: deflated to %u pages, actual %u\n", NAME, low,
			virtio_read32(&bal, VIRTIO_MMIO_CONFIG + 4));
	}

	hostile("pfn_past_ram", Q_INFLATE, (uint32_t)(ram_end / PAGE), 4, 16, 0);
	hostile("pfn_mmio_hole", Q_INFLATE, 0xd0000000u / PAGE, 4, 16, 0);
	hostile("pfn_max", Q_INFLATE, 0xffffffffu, 4, 16, 0);
	hostile("pfn_deflate_past_ram", Q_DEFLATE, (uint32_t)(ram_end / PAGE) + 100, 2, 8, 0);
	hostile("too_many_pfns", Q_INFLATE, (uint32_t)(REGION / PAGE) + pages - 300, PFNS + 1, (PFNS + 1) * 4, 0);
	hostile("odd_length", Q_INFLATE, (uint32_t)(REGION / PAGE) + pages - 2, 1, 3, 0);
	hostile("writable_buffer", Q_INFLATE, (uint32_t)(REGION / PAGE) + pages - 2, 1, 4, 1);
	conf_check(*page(pages - 2) == (0x5a5a000000000000ull | (pages - 2)) &&
		       *page(pages - 300) == (0x5a5a000000000000ull | (pages - 300)),
		   "refused_pages_kept", "page %u reads 0x%llx", pages - 2, (unsigned long long)*page(pages - 2));
	gprintf("%s: hostile done\n", NAME);
	conf_end();
}
