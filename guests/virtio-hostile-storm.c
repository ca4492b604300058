/* virtio-hostile-storm.c - hostile guest: a QueueNotify storm against virtio-rng (docs/security.md case 15). */
#include "virtio.h"

/*
 * Command-line words:
 *   case=NAME     empty: notifies with nothing posted; posted: a full ring of requests posted first;
 *                 badq: notifies for a queue that does not exist (each one an exit to brisk, not an
 *                 ioeventfd); reset: notifies while the device is being reset and brought up again
 *   notifies=N    QueueNotify writes (default 200000)
 *   virtio_mmio.device=...  the device windows (the VMM adds them; the first entropy device is used)
 *
 * The storm is a tight loop of 32-bit writes to QueueNotify. The guest
 * checks that every request it posted before the storm completes, and that
 * a normal request right after it completes within the usual deadline (the
 * device stays responsive); the host side (tests/integration/
 * test_virtio_hostile.py) bounds brisk's CPU time, memory, log lines and
 * exit time. Output: "virtio-hostile-storm: CHECK what: PASS|FAIL (values)".
 */
#define NAME	  "virtio-hostile-storm"
#define WAIT_MS	  5000
#define REQ_LEN	  16
#define BAD_QUEUE 5

static struct virtio_dev rng;
static const char *cmdline;
static uint64_t notifies = 200000;
static uint8_t buf[VIRTQ_MAX_SIZE + 1][REQ_LEN] __attribute__((aligned(64)));

static int start(void)
{
	return virtio_start(&rng, cmdline, VIRTIO_ID_RNG, VIRTIO_F_EVENT_IDX | VIRTIO_F_INDIRECT_DESC, 1);
}

static void storm(uint32_t value)
{
	volatile uint32_t *notify = (volatile uint32_t *)(rng.base + VIRTIO_MMIO_QUEUE_NOTIFY);

	for (uint64_t i = 0; i < notifies; i++)
		*notify = value;
}

/* A 16-byte request completes (at least one byte: a throttled device may answer short, section 5.4.6.1). */
static void responsive(const char *what, unsigned int flags)
{
	struct virtio_buf b = {buf[VIRTQ_MAX_SIZE], REQ_LEN};
	uint32_t len = 0;
	int ok = virtio_transfer(&rng, 0, &b, 0, 1, flags, &len) == 0;

	conf_check(ok && len >= 1 && len <= REQ_LEN, what, "%s %s, used length %u, status 0x%x",
		   flags & VIRTIO_XFER_IRQ ? "interrupt mode" : "poll mode", ok ? "completed" : "no completion", len,
		   virtio_status(&rng));
}

static void after(void)
{
	responsive("responsive_after_storm_poll", 0);
	responsive("responsive_after_storm_irq", VIRTIO_XFER_IRQ);
}

static void c_empty(void)
{
	storm(0);
	conf_check(virtio_status(&rng) == 0xf, "storm_empty", "%llu notifies with nothing posted, status 0x%x",
		   (unsigned long long)notifies, virtio_status(&rng));
	after();
}

/* A full ring posted (one notify each, as the driver decides), then the storm; all of them complete. */
static void c_posted(void)
{
	unsigned int n = rng.vq[0].size, done = 0;
	uint32_t id, len, bytes = 0;

	for (unsigned int i = 0; i < n; i++) {
		struct virtio_buf b = {buf[i], REQ_LEN};

		if (virtio_submit(&rng, 0, &b, 0, 1, 0, VIRTIO_POLL) < 0)
			break;
	}
	storm(0);
	while (done < n && virtio_wait(&rng, 0, VIRTIO_POLL, WAIT_MS, &id, &len) == 0) {
		done++;
		bytes += len;
	}
	conf_check(done == n, "storm_posted",
		   "%llu notifies, %u of %u posted requests completed (%u bytes), status 0x%x",
		   (unsigned long long)notifies, done, n, bytes, virtio_status(&rng));
	after();
}

static void c_badq(void)
{
	storm(BAD_QUEUE);
	conf_check(virtio_status(&rng) == 0xf, "storm_bad_queue", "%llu notifies of queue %u, status 0x%x",
		   (unsigned long long)notifies, BAD_QUEUE, virtio_status(&rng));
	after();
}

/* Notifies while the device is reset and brought up again, in rounds. */
static void c_reset(void)
{
	uint64_t total = notifies;
	unsigned int rounds = 0;

	notifies = total / 16;
	for (; rounds < 16; rounds++) {
		struct virtio_buf b = {buf[0], REQ_LEN};

		if (virtio_submit(&rng, 0, &b, 0, 1, 0, VIRTIO_POLL) < 0)
			break;
		virtio_write32(&rng, VIRTIO_MMIO_STATUS, 0);
		storm(0);
		if (start())
			break;
		storm(0);
	}
	conf_check(rounds == 16, "storm_across_resets", "%u of 16 rounds of reset, %llu notifies, bring-up", rounds,
		   (unsigned long long)notifies);
	after();
}

static const struct hcase {
	const char *name;
	void (*run)(void);
} cases[] = {
    {"empty", c_empty},
    {"posted", c_posted},
    {"badq", c_badq},
    {"reset", c_reset},
};

void guest_main(struct hvm_start_info *si)
{
	const struct hcase *c = NULL;
	char name[32];

	serial_init();
	conf_begin(NAME);
	rng.name = NAME;
	cmdline = guest_cmdline(si);
	cmdline_get_u64(cmdline, "notifies", &notifies);
	if (cmdline_get_str(cmdline, "case", name, sizeof(name)) == 0)
		for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			if (!strcmp(cases[i].name, name))
				c = &cases[i];
	if (!c)
		guest_fail(NAME, "case=empty|posted|badq|reset missing or unknown");
	if (start()) {
		conf_check(0, "bringup", "see above");
		conf_end();
	}
	gprintf("%s: case %s (docs/security.md case 15), %llu notifies\n", NAME, c->name, (unsigned long long)notifies);
	c->run();
	gprintf("%s: storm done\n", NAME);
	conf_end();
}
