/* virtio.c - the test guests' virtio-mmio driver (virtio 1.2 sections 2, 3.1, 4.2): see virtio.h. */
#include "virtio.h"

/* xAPIC registers (SDM Vol 3A 11.4.1, table 11-1) and the timer (11.5.4). */
#define LAPIC_EOI	 0x0b0
#define LAPIC_LVT_TIMER	 0x320
#define LAPIC_TIMER_INIT 0x380
#define LAPIC_TIMER_CUR	 0x390
#define LAPIC_TIMER_DIV	 0x3e0
#define LVT_MASKED	 (1u << 16)
#define TIMER_DIV_128	 0xa
/*
 * KVM's emulated APIC bus runs at 1 GHz (arch/x86/kvm/lapic.h,
 * APIC_BUS_CYCLE_NS_DEFAULT = 1), so with divide-by-128 one millisecond is
 * 7812.5 counts. The guests only run under KVM (brisk, QEMU -accel kvm);
 * elsewhere the deadlines are merely longer or shorter.
 */
#define TIMER_COUNTS_PER_MS 7813u
#define SPURIOUS_VECTOR	    0xff

/* I/O APIC (82093AA datasheet 3.2.2, 3.2.4): redirection entry low word fields. */
#define IOAPIC_REGSEL	   0x00
#define IOAPIC_WIN	   0x10
#define IOAPIC_VER	   0x01
#define IOAPIC_REDTBL(pin) (0x10 + 2 * (pin))
#define REDIR_MASKED	   (1u << 16) /* bits 15 (level) and 13 (active low) stay 0: edge, active high */

#define CONFIG_TRIES 8
#define RESET_MS     1000
#define WORD_MAX     128

/* ---- command line ------------------------------------------------------------------ */

static int digit(char c, unsigned int base)
{
	int v = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : 99;

	return v < (int)base ? v : -1;
}

/*
 * simple_strtoull(p, &endp, base) on [p, end): base 0 picks 16 for "0x",
 * 8 for a leading 0, else 10. Returns the first unparsed character, or NULL
 * when there is no digit or the value overflows.
 */
static const char *parse_num(const char *p, const char *end, unsigned int base, uint64_t *out)
{
	uint64_t v = 0;
	const char *start;
	int d;

	if (base == 0) {
		base = 10;
		if (p < end && *p == '0') {
			base = 8;
			if (end - p > 2 && (p[1] | 0x20) == 'x' && digit(p[2], 16) >= 0) {
				base = 16;
				p += 2;
			}
		}
	}
	for (start = p; p < end && (d = digit(*p, base)) >= 0; p++) {
		if (v > (UINT64_MAX - (uint64_t)d) / base)
			return NULL;
		v = v * base + (uint64_t)d;
	}
	*out = v;
	return p == start ? NULL : p;
}

/* memparse (lib/cmdline.c): a number and an optional K/M/G/T/P/E suffix. */
static const char *parse_size(const char *p, const char *end, uint64_t *out)
{
	static const char suffixes[] = "kmgtpe";
	unsigned int shift = 0;

	p = parse_num(p, end, 0, out);
	if (!p)
		return NULL;
	for (unsigned int i = 0; p < end && suffixes[i]; i++) {
		if ((*p | 0x20) == suffixes[i]) {
			shift = 10 * (i + 1);
			p++;
			break;
		}
	}
	if (shift && *out > (UINT64_MAX >> shift))
		return NULL;
	*out <<= shift;
	return p;
}

int virtio_parse_window(const char *p, const char *end, struct virtio_mmio_window *w, const char **why)
{
	uint64_t irq, id;

	w->id = -1;
	if (!(p = parse_size(p, end, &w->size)))
		return *why = "size", -1;
	if (p == end || *p++ != '@' || !(p = parse_num(p, end, 0, &w->base)))
		return *why = "@base", -1;
	if (p == end || *p++ != ':' || !(p = parse_num(p, end, 10, &irq)) || irq == 0 || irq > UINT32_MAX)
		return *why = ":irq (decimal, not 0)", -1;
	w->irq = (unsigned int)irq;
	if (p < end && *p == ':') {
		if (!(p = parse_num(p + 1, end, 10, &id)) || id > 0x7fffffff)
			return *why = ":id", -1;
		w->id = (int)id;
	}
	if (p != end)
		return *why = "the end (characters after the last field)", -1;
	return 0;
}

/* Print "virtio: WHAT: WORD" for the word [p, end), cut at WORD_MAX bytes. */
static void word_message(const char *what, const char *why, const char *p, const char *end)
{
	char word[WORD_MAX + 1];
	size_t n = (size_t)(end - p) < WORD_MAX ? (size_t)(end - p) : WORD_MAX;

	memcpy(word, p, n);
	word[n] = '\0';
	gprintf("virtio: %s%s: %s\n", what, why, word);
}

unsigned int virtio_cmdline_windows(const char *cmdline, struct virtio_mmio_window *w, unsigned int max)
{
	static const char key[] = "virtio_mmio.device=";
	const char *p = cmdline, *end, *why = "";
	unsigned int n = 0;

	for (unsigned int words = 0; *p && words < 4096; words++) {
		while (*p == ' ')
			p++;
		for (end = p; *end && *end != ' '; end++)
			;
		if ((size_t)(end - p) >= sizeof(key) - 1 && !strncmp(p, key, sizeof(key) - 1)) {
			if (n == max)
				word_message("more devices than the driver handles, ignored", "", p, end);
			else if (virtio_parse_window(p + sizeof(key) - 1, end, &w[n], &why) == 0)
				n++;
			else
				word_message("malformed word ignored, at ", why, p, end);
		}
		p = end;
	}
	return n;
}

int cmdline_get_str(const char *cmdline, const char *key, char *buf, size_t size)
{
	size_t klen = strlen(key);
	const char *p = cmdline, *end;

	while (*p) {
		while (*p == ' ')
			p++;
		for (end = p; *end && *end != ' '; end++)
			;
		if ((size_t)(end - p) > klen && !strncmp(p, key, klen) && p[klen] == '=') {
			size_t n = (size_t)(end - p) - klen - 1;

			if (n >= size)
				return -1;
			memcpy(buf, p + klen + 1, n);
			buf[n] = '\0';
			return 0;
		}
		p = end;
	}
	return -1;
}

/* ---- LAPIC: end of interrupt, and the timer as a clock for deadlines ---------------- */

static uint32_t lapic_read(unsigned int reg)
{
	return mmio_read32(BRISK_LAPIC_BASE + reg);
}

static void lapic_write(unsigned int reg, uint32_t v)
{
	mmio_write32(BRISK_LAPIC_BASE + reg, v);
}

/*
 * A deadline: the LAPIC timer in one-shot mode, LVT masked (it interrupts
 * nobody), counting down from timeout_ms; it has passed when the current
 * count reads 0. Should the timer not count at all, a poll budget stands in.
 */
struct deadline {
	int timer;
	uint64_t polls, max_polls;
};

static void deadline_start(struct deadline *d, unsigned int ms)
{
	uint64_t count = (uint64_t)ms * TIMER_COUNTS_PER_MS;

	lapic_enable();
	lapic_write(LAPIC_LVT_TIMER, LVT_MASKED | SPURIOUS_VECTOR);
	lapic_write(LAPIC_TIMER_DIV, TIMER_DIV_128);
	lapic_write(LAPIC_TIMER_INIT, count > UINT32_MAX ? UINT32_MAX : (uint32_t)count);
	d->timer = lapic_read(LAPIC_TIMER_CUR) != 0;
	d->polls = 0;
	d->max_polls = (uint64_t)ms * 1000;
}

/* Checked once per poll; the (emulated) LAPIC read only every 16th time. */
static int deadline_passed(struct deadline *d)
{
	d->polls++;
	if (!d->timer)
		return d->polls > d->max_polls;
	return (d->polls & 15) == 0 && lapic_read(LAPIC_TIMER_CUR) == 0;
}

/* ---- I/O APIC routing and the interrupt handlers ------------------------------------------ */

static struct virtio_dev *slot_dev[VIRTIO_MAX_DEVICES];

static uint32_t ioapic_read(uint32_t reg)
{
	mmio_write32(BRISK_IOAPIC_BASE + IOAPIC_REGSEL, reg);
	return mmio_read32(BRISK_IOAPIC_BASE + IOAPIC_WIN);
}

static void ioapic_write(uint32_t reg, uint32_t v)
{
	mmio_write32(BRISK_IOAPIC_BASE + IOAPIC_REGSEL, reg);
	mmio_write32(BRISK_IOAPIC_BASE + IOAPIC_WIN, v);
}

static void pin_route(const struct virtio_dev *dev, int masked)
{
	ioapic_write(IOAPIC_REDTBL(dev->win.irq), (VIRTIO_IRQ_VECTOR0 + dev->slot) | (masked ? REDIR_MASKED : 0u));
}

/*
 * What Linux's vm_interrupt does: read InterruptStatus and acknowledge
 * exactly those bits (section 4.2.3.4), which also lowers the device's line.
 */
static void isr_body(unsigned int slot)
{
	struct virtio_dev *dev = slot_dev[slot];

	if (dev) {
		uint32_t s = virtio_read32(dev, VIRTIO_MMIO_INTERRUPT_STATUS);

		if (s)
			virtio_write32(dev, VIRTIO_MMIO_INTERRUPT_ACK, s);
		dev->irq_status |= s;
		dev->irq_count = dev->irq_count + 1;
		for (unsigned int q = 0; q < VIRTIO_MAX_QUEUES; q++)
			dev->vq[q].irq_used = *(volatile uint16_t *)&dev->vq[q].used.idx;
	}
	lapic_write(LAPIC_EOI, 0);
}

#define VIRTIO_ISR(n)                                                                                                  \
	static GUEST_ISR void isr##n(struct interrupt_frame *frame)                                                    \
	{                                                                                                              \
		(void)frame;                                                                                           \
		isr_body(n);                                                                                           \
	}
VIRTIO_ISR(0)
VIRTIO_ISR(1)
VIRTIO_ISR(2)
VIRTIO_ISR(3)
VIRTIO_ISR(4)
VIRTIO_ISR(5)
VIRTIO_ISR(6)
VIRTIO_ISR(7)
static const irq_handler_t isrs[VIRTIO_MAX_DEVICES] = {isr0, isr1, isr2, isr3, isr4, isr5, isr6, isr7};

/* A spurious interrupt needs no EOI (SDM Vol 3A 11.9). */
static GUEST_ISR void spurious_isr(struct interrupt_frame *frame)
{
	(void)frame;
}

int virtio_irq_setup(struct virtio_dev *dev)
{
	unsigned int max_pin = (ioapic_read(IOAPIC_VER) >> 16) & 0xff;

	if (dev->win.irq > max_pin) {
		gprintf("%s: irq %u beyond the I/O APIC's last pin %u\n", dev->name, dev->win.irq, max_pin);
		return -1;
	}
	slot_dev[dev->slot] = dev;
	idt_set_gate(VIRTIO_IRQ_VECTOR0 + dev->slot, isrs[dev->slot]);
	idt_set_gate(SPURIOUS_VECTOR, spurious_isr);
	idt_load();
	/* The legacy PICs stay masked so that only the I/O APIC delivers (brisk has them; microvm pic=off not). */
	outb(0x21, 0xff);
	outb(0xa1, 0xff);
	lapic_enable();
	/* Fixed delivery to this CPU, physical destination: high half first, masked until a wait. */
	ioapic_write(IOAPIC_REDTBL(dev->win.irq) + 1, lapic_id() << 24);
	pin_route(dev, 1);
	dev->irq_ready = 1;
	return 0;
}

/* ---- discovery and bring-up ---------------------------------------------------------------- */

void virtio_describe(const struct virtio_dev *dev)
{
	gprintf("%s: virtio-mmio %llu@0x%llx irq %u: version %u device %u vendor 0x%x, features offered 0x%llx "
		"negotiated 0x%llx, status 0x%x\n",
		dev->name, (unsigned long long)dev->win.size, (unsigned long long)dev->win.base, dev->win.irq,
		dev->version, dev->device_id, dev->vendor_id, (unsigned long long)dev->offered,
		(unsigned long long)dev->features, virtio_status(dev));
}

/* Register access needs the 0x100 bytes of registers, identity-mapped (below 4 GiB, entry.S). */
static int window_usable(const struct virtio_mmio_window *w)
{
	return w->size >= VIRTIO_MMIO_CONFIG && w->base < 0x100000000ULL && w->size <= 0x100000000ULL - w->base &&
	       (w->base & 3) == 0;
}

int virtio_find(struct virtio_dev *dev, const char *cmdline, uint32_t device_id)
{
	struct virtio_mmio_window w[VIRTIO_MAX_DEVICES];
	unsigned int n = virtio_cmdline_windows(cmdline, w, VIRTIO_MAX_DEVICES);

	for (unsigned int i = 0; i < n; i++) {
		uintptr_t base = (uintptr_t)w[i].base;
		uint32_t magic, version, id;

		if (!window_usable(&w[i])) {
			gprintf("%s: window %u: %llu@0x%llx unusable\n", dev->name, i, (unsigned long long)w[i].size,
				(unsigned long long)w[i].base);
			continue;
		}
		magic = mmio_read32(base + VIRTIO_MMIO_MAGIC_VALUE);
		version = mmio_read32(base + VIRTIO_MMIO_VERSION);
		id = mmio_read32(base + VIRTIO_MMIO_DEVICE_ID);
		gprintf("%s: window %u: %llu@0x%llx:%u magic 0x%x version %u device %u\n", dev->name, i,
			(unsigned long long)w[i].size, (unsigned long long)w[i].base, w[i].irq, magic, version, id);
		if (magic != VIRTIO_MMIO_MAGIC || id != device_id)
			continue;
		if (version != 2) {
			gprintf("%s: window %u: version %u, this driver needs 2 (modern virtio-mmio)\n", dev->name, i,
				version);
			return -1;
		}
		dev->slot = i;
		dev->win = w[i];
		dev->base = base;
		dev->version = version;
		dev->device_id = id;
		dev->vendor_id = mmio_read32(base + VIRTIO_MMIO_VENDOR_ID);
		return 0;
	}
	gprintf("%s: no device %u among %u virtio_mmio.device= words\n", dev->name, device_id, n);
	return -1;
}

int virtio_reset(struct virtio_dev *dev)
{
	struct deadline d;
	uint32_t s;

	virtio_write32(dev, VIRTIO_MMIO_STATUS, 0);
	deadline_start(&d, RESET_MS);
	while ((s = virtio_status(dev)) != 0 && !deadline_passed(&d))
		cpu_relax();
	if (s) {
		gprintf("%s: reset: status still 0x%x after %u ms\n", dev->name, s, RESET_MS);
		return -1;
	}
	for (unsigned int q = 0; q < VIRTIO_MAX_QUEUES; q++)
		dev->vq[q].size = 0;
	return 0;
}

/* Add status bits and check that the device kept them all (section 2.1, 3.1.1). */
static int status_add(struct virtio_dev *dev, uint32_t bits, const char *step)
{
	uint32_t want = virtio_status(dev) | bits, got;

	virtio_write32(dev, VIRTIO_MMIO_STATUS, want);
	got = virtio_status(dev);
	if (got != want) {
		gprintf("%s: %s: status 0x%x, expected 0x%x\n", dev->name, step, got, want);
		return -1;
	}
	return 0;
}

static int negotiate_fail(struct virtio_dev *dev)
{
	virtio_write32(dev, VIRTIO_MMIO_STATUS, virtio_status(dev) | VIRTIO_STATUS_FAILED);
	return -1;
}

int virtio_negotiate(struct virtio_dev *dev, uint64_t want)
{
	uint64_t lo, hi;

	if (virtio_reset(dev) || status_add(dev, VIRTIO_STATUS_ACKNOWLEDGE, "ACKNOWLEDGE") ||
	    status_add(dev, VIRTIO_STATUS_DRIVER, "DRIVER"))
		return negotiate_fail(dev);
	virtio_write32(dev, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	lo = virtio_read32(dev, VIRTIO_MMIO_DEVICE_FEATURES);
	virtio_write32(dev, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	hi = virtio_read32(dev, VIRTIO_MMIO_DEVICE_FEATURES);
	dev->offered = hi << 32 | lo;
	if (!(dev->offered & VIRTIO_F_VERSION_1)) {
		gprintf("%s: features 0x%llx lack VERSION_1\n", dev->name, (unsigned long long)dev->offered);
		return negotiate_fail(dev);
	}
	dev->features = dev->offered & (want | VIRTIO_F_VERSION_1);
	virtio_write32(dev, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	virtio_write32(dev, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)dev->features);
	virtio_write32(dev, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	virtio_write32(dev, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(dev->features >> 32));
	/* FEATURES_OK must still read back set, or the device refused the subset (section 3.1.1 step 6). */
	if (status_add(dev, VIRTIO_STATUS_FEATURES_OK, "FEATURES_OK"))
		return negotiate_fail(dev);
	return 0;
}

static void write64(struct virtio_dev *dev, unsigned int reg_low, uint64_t v)
{
	virtio_write32(dev, reg_low, (uint32_t)v);
	virtio_write32(dev, reg_low + 4, (uint32_t)(v >> 32));
}

int virtio_queue_setup(struct virtio_dev *dev, unsigned int q, unsigned int max_size)
{
	struct virtq *vq = &dev->vq[q];
	uint32_t num_max, ready;
	unsigned int size = VIRTQ_MAX_SIZE;

	if (q >= VIRTIO_MAX_QUEUES)
		return -1;
	virtio_write32(dev, VIRTIO_MMIO_QUEUE_SEL, q);
	ready = virtio_read32(dev, VIRTIO_MMIO_QUEUE_READY);
	num_max = virtio_read32(dev, VIRTIO_MMIO_QUEUE_NUM_MAX);
	if (ready != 0 || num_max == 0) {
		gprintf("%s: queue %u: QueueReady %u (expected 0), QueueNumMax %u (0: no such queue)\n", dev->name, q,
			ready, num_max);
		return -1;
	}
	while (size > num_max || size > max_size)
		size >>= 1; /* a split queue's size is a power of two (section 2.7) */
	if (size == 0)
		return -1;
	memset(vq, 0, sizeof(*vq));
	vq->size = (uint16_t)size;
	vq->num_free = (uint16_t)size;
	virtio_write32(dev, VIRTIO_MMIO_QUEUE_NUM, size);
	write64(dev, VIRTIO_MMIO_QUEUE_DESC_LOW, (uintptr_t)vq->desc);
	write64(dev, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uintptr_t)&vq->avail);
	write64(dev, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uintptr_t)&vq->used);
	virtio_write32(dev, VIRTIO_MMIO_QUEUE_READY, 1);
	ready = virtio_read32(dev, VIRTIO_MMIO_QUEUE_READY);
	if (ready != 1) {
		gprintf("%s: queue %u: QueueReady reads %u after writing 1\n", dev->name, q, ready);
		return -1;
	}
	return 0;
}

int virtio_driver_ok(struct virtio_dev *dev)
{
	uint32_t s;

	if (status_add(dev, VIRTIO_STATUS_DRIVER_OK, "DRIVER_OK"))
		return -1;
	s = virtio_status(dev);
	return s & (VIRTIO_STATUS_DEVICE_NEEDS_RESET | VIRTIO_STATUS_FAILED) ? -1 : 0;
}

int virtio_start(struct virtio_dev *dev, const char *cmdline, uint32_t device_id, uint64_t want, unsigned int nqueues)
{
	const char *step = "negotiation";

	if (virtio_find(dev, cmdline, device_id))
		return -1;
	if (virtio_negotiate(dev, want) == 0) {
		step = "queue setup";
		for (unsigned int q = 0; q < nqueues; q++) {
			if (virtio_queue_setup(dev, q, VIRTQ_MAX_SIZE))
				goto fail;
		}
		step = "DRIVER_OK";
		if (virtio_driver_ok(dev))
			goto fail;
		step = "interrupt routing";
		if (virtio_irq_setup(dev) == 0)
			return 0;
	}
fail:
	gprintf("%s: bring-up failed at %s, status 0x%x\n", dev->name, step, virtio_status(dev));
	return -1;
}

/* ---- configuration space --------------------------------------------------------------------- */

static uint64_t config_field(const struct virtio_dev *dev, const struct virtio_cfg_field *f)
{
	uintptr_t a = dev->base + VIRTIO_MMIO_CONFIG + f->off;

	switch (f->width) {
	case 1:
		return mmio_read8(a);
	case 2:
		return mmio_read16(a);
	case 4:
		return mmio_read32(a);
	default:
		return mmio_read32(a) | (uint64_t)mmio_read32(a + 4) << 32;
	}
}

int virtio_config_read(const struct virtio_dev *dev, const struct virtio_cfg_field *f, unsigned int n)
{
	for (int tries = 0; tries < CONFIG_TRIES; tries++) {
		uint32_t gen = virtio_read32(dev, VIRTIO_MMIO_CONFIG_GENERATION);

		for (unsigned int i = 0; i < n; i++)
			*f[i].out = config_field(dev, &f[i]);
		if (virtio_read32(dev, VIRTIO_MMIO_CONFIG_GENERATION) == gen)
			return tries;
	}
	gprintf("%s: configuration generation never settled in %u tries\n", dev->name, CONFIG_TRIES);
	return -1;
}

/* ---- requests ------------------------------------------------------------------------------- */

/* A full barrier (Linux's x86-64 smp_mb): lock add needs nothing KVM's emulator cannot do. */
static inline void mb(void)
{
	__asm__ volatile("lock addl $0, (%%rsp)" ::: "memory", "cc");
}

static inline void barrier(void)
{
	__asm__ volatile("" ::: "memory");
}

/* Fill n descriptors t[first], t[first+1 mod m], ...: the chain's buffers, out ones first. */
static void fill_chain(struct virtq_desc *t, unsigned int first, unsigned int mask, const struct virtio_buf *bufs,
		       unsigned int n_out, unsigned int n)
{
	unsigned int i, idx = first;

	for (i = 0; i < n; i++) {
		volatile struct virtq_desc *d = &t[idx];
		unsigned int next = (idx + 1) & mask;

		d->addr = (uintptr_t)bufs[i].addr;
		d->len = bufs[i].len;
		d->flags = (uint16_t)((i >= n_out ? VIRTQ_DESC_F_WRITE : 0) | (i + 1 < n ? VIRTQ_DESC_F_NEXT : 0));
		d->next = (uint16_t)(i + 1 < n ? next : 0);
		idx = next;
	}
}

/* Ask for an interrupt for the next used element, or ask for none (sections 2.7.7, 2.7.10). */
static void want_interrupt(struct virtio_dev *dev, struct virtq *vq, enum virtio_mode mode)
{
	volatile struct virtq_avail *avail = &vq->avail;

	if (dev->features & VIRTIO_F_EVENT_IDX)
		avail->ring[vq->size] = (uint16_t)(mode == VIRTIO_IRQ ? vq->last_used : vq->last_used + 0x8000);
	else
		avail->flags = mode == VIRTIO_IRQ ? 0 : VIRTQ_AVAIL_F_NO_INTERRUPT;
}

static unsigned int irq_chains(const struct virtio_dev *dev)
{
	unsigned int n = 0;

	for (unsigned int q = 0; q < VIRTIO_MAX_QUEUES; q++)
		n += dev->vq[q].irq_chains;
	return n;
}

/* Acknowledge what is pending, so that the device's line is low and its next interrupt is an edge. */
static void ack_pending(struct virtio_dev *dev)
{
	uint32_t s = virtio_read32(dev, VIRTIO_MMIO_INTERRUPT_STATUS);

	if (s)
		virtio_write32(dev, VIRTIO_MMIO_INTERRUPT_ACK, s);
}

/*
 * Before the notify of an interrupt-mode chain: with the pin still masked
 * (no interrupt-mode chain in flight), clear what poll mode left pending,
 * then unmask the pin while interrupts are still off, so that the edge of
 * this chain's interrupt cannot be lost on a masked pin (KVM's I/O APIC
 * drops those). Poll mode leaves the pin masked: an interrupt the device
 * sends anyway must not be counted later for another chain.
 */
static void prepare_irq(struct virtio_dev *dev, struct virtq *vq, unsigned int head, enum virtio_mode mode)
{
	vq->chain_irq[head] = mode == VIRTIO_IRQ && dev->irq_ready;
	if (!vq->chain_irq[head])
		return;
	if (irq_chains(dev) == 0) {
		ack_pending(dev);
		pin_route(dev, 0);
	}
	vq->irq_chains++;
}

/* Notify unless the device said it need not be (section 2.7.13.4 and 2.7.10). */
static void notify(struct virtio_dev *dev, unsigned int q, uint16_t old, uint16_t new)
{
	struct virtq *vq = &dev->vq[q];
	volatile struct virtq_used *used = &vq->used;
	int need;

	mb(); /* avail.idx visible before avail_event / flags are read */
	if (dev->features & VIRTIO_F_EVENT_IDX) {
		/* avail_event follows the used ring's `size` elements (section 2.7.8). */
		uint16_t event = *(volatile uint16_t *)((uintptr_t)vq->used.ring + vq->size * sizeof(vq->used.ring[0]));

		need = (uint16_t)(new - event - 1) < (uint16_t)(new - old);
	} else {
		need = !(used->flags & VIRTQ_USED_F_NO_NOTIFY);
	}
	if (!need) {
		vq->suppressed++;
		return;
	}
	vq->notifies++;
	virtio_write32(dev, VIRTIO_MMIO_QUEUE_NOTIFY, q);
}

int virtio_submit(struct virtio_dev *dev, unsigned int q, const struct virtio_buf *bufs, unsigned int n_out,
		  unsigned int n_in, int indirect, enum virtio_mode mode)
{
	struct virtq *vq = &dev->vq[q];
	unsigned int n = n_out + n_in, need = indirect ? 1 : n, head;
	uint16_t old;

	if (q >= VIRTIO_MAX_QUEUES || !vq->size || n == 0 || n > (indirect ? VIRTQ_MAX_INDIRECT : vq->size) ||
	    need > vq->num_free) {
		gprintf("%s: queue %u: cannot submit %u+%u buffers (size %u, %u free)\n", dev->name, q, n_out, n_in,
			q < VIRTIO_MAX_QUEUES ? vq->size : 0, q < VIRTIO_MAX_QUEUES ? vq->num_free : 0);
		return -1;
	}
	head = vq->next_free;
	if (indirect) {
		volatile struct virtq_desc *d = &vq->desc[head];

		fill_chain(vq->indirect[head], 0, VIRTQ_MAX_INDIRECT - 1, bufs, n_out, n);
		d->addr = (uintptr_t)vq->indirect[head];
		d->len = n * (uint32_t)sizeof(struct virtq_desc);
		d->flags = VIRTQ_DESC_F_INDIRECT;
		d->next = 0;
	} else {
		fill_chain(vq->desc, head, vq->size - 1u, bufs, n_out, n);
	}
	vq->chain_len[head] = (uint8_t)need;
	vq->num_free = (uint16_t)(vq->num_free - need);
	vq->next_free = (uint16_t)((head + need) & (vq->size - 1u));
	want_interrupt(dev, vq, mode);
	prepare_irq(dev, vq, head, mode);
	*(volatile uint16_t *)&vq->avail.ring[vq->avail_idx & (vq->size - 1u)] = (uint16_t)head;
	barrier(); /* x86 keeps stores in order: the ring entry before the index (section 2.7.13.2) */
	old = vq->avail_idx++;
	*(volatile uint16_t *)&vq->avail.idx = vq->avail_idx;
	notify(dev, q, old, vq->avail_idx);
	return (int)head;
}

/* Take the next used element; check its id is a head in flight and give its descriptors back. */
static int take_used(struct virtio_dev *dev, unsigned int q, uint32_t *id, uint32_t *len)
{
	struct virtq *vq = &dev->vq[q];
	volatile struct virtq_used_elem *e = &vq->used.ring[vq->last_used & (vq->size - 1u)];

	barrier(); /* used.idx read before the element (x86 keeps loads in order) */
	*id = e->id;
	*len = e->len;
	vq->last_used++;
	/* An interrupt-free stretch must not leave irq_used half the index space behind (completed()). */
	if ((uint16_t)(vq->irq_used - vq->last_used) >= 0x8000)
		vq->irq_used = vq->last_used;
	if (*id >= vq->size || !vq->chain_len[*id]) {
		gprintf("%s: queue %u: used id %u is not a head in flight\n", dev->name, q, *id);
		return -1;
	}
	vq->num_free = (uint16_t)(vq->num_free + vq->chain_len[*id]);
	vq->chain_len[*id] = 0;
	if (vq->chain_irq[*id]) {
		vq->chain_irq[*id] = 0;
		vq->irq_chains--;
	}
	return 0;
}

/* The next element is published and, in interrupt mode, an interrupt came after it was. */
static int completed(const struct virtq *vq, enum virtio_mode mode)
{
	uint16_t idx = *(volatile uint16_t *)&vq->used.idx;

	if (idx == vq->last_used)
		return 0;
	return mode == VIRTIO_POLL || (uint16_t)(vq->irq_used - vq->last_used - 1) < 0x8000;
}

int virtio_wait(struct virtio_dev *dev, unsigned int q, enum virtio_mode mode, unsigned int timeout_ms, uint32_t *id,
		uint32_t *len)
{
	struct virtq *vq = &dev->vq[q];
	uint32_t irqs = dev->irq_count, s;
	struct deadline d;
	int done, ret;

	if (q >= VIRTIO_MAX_QUEUES || !vq->size || (mode == VIRTIO_IRQ && !dev->irq_ready)) {
		gprintf("%s: queue %u: cannot wait (queue size %u, interrupts %s)\n", dev->name, q,
			q < VIRTIO_MAX_QUEUES ? vq->size : 0, dev->irq_ready ? "routed" : "not routed");
		return -1;
	}
	deadline_start(&d, timeout_ms);
	if (mode == VIRTIO_IRQ)
		irq_enable();
	while (!(done = completed(vq, mode)) && !deadline_passed(&d))
		cpu_relax();
	irq_disable();
	if (!done) {
		s = virtio_read32(dev, VIRTIO_MMIO_INTERRUPT_STATUS);
		gprintf("%s: queue %u: no completion in %u ms (%s mode): used.idx %u (consumed %u, signalled %u), "
			"interrupts %u, ISR saw 0x%x, InterruptStatus 0x%x, status 0x%x\n",
			dev->name, q, timeout_ms, mode == VIRTIO_IRQ ? "interrupt" : "poll",
			*(volatile uint16_t *)&vq->used.idx, vq->last_used, vq->irq_used, dev->irq_count - irqs,
			dev->irq_status, s, virtio_status(dev));
		return -1;
	}
	ret = take_used(dev, q, id, len);
	if (dev->irq_ready && irq_chains(dev) == 0)
		pin_route(dev, 1);
	if (irq_chains(dev) == 0)
		ack_pending(dev);
	return ret;
}

int virtio_transfer(struct virtio_dev *dev, unsigned int q, const struct virtio_buf *bufs, unsigned int n_out,
		    unsigned int n_in, unsigned int flags, uint32_t *len)
{
	enum virtio_mode mode = flags & VIRTIO_XFER_IRQ ? VIRTIO_IRQ : VIRTIO_POLL;
	int head = virtio_submit(dev, q, bufs, n_out, n_in, !!(flags & VIRTIO_XFER_INDIRECT), mode);
	uint32_t id;

	if (head < 0 || virtio_wait(dev, q, mode, VIRTIO_WAIT_MS, &id, len))
		return -1;
	if (id != (uint32_t)head) {
		gprintf("%s: queue %u: used id %u, submitted head %d\n", dev->name, q, id, head);
		return -1;
	}
	return 0;
}

/* ---- raw rings (hostile guests) --------------------------------------------------------------- */

void virtio_raw_from_queue(struct virtio_raw *r, struct virtio_dev *dev, unsigned int q)
{
	struct virtq *vq = &dev->vq[q];

	*r = (struct virtio_raw){.dev = dev,
				 .q = q,
				 .size = vq->size,
				 .desc = vq->desc,
				 .avail = (volatile uint16_t *)&vq->avail,
				 .used = (volatile uint32_t *)&vq->used,
				 .avail_idx = &vq->avail_idx,
				 .last_used = &vq->last_used};
}

uint32_t virtio_raw_setup(struct virtio_raw *r, struct virtio_dev *dev, unsigned int q, uint16_t size, void *mem)
{
	uint8_t *p = mem;
	uintptr_t avail = (uintptr_t)p + 16u * size;
	uintptr_t used = (avail + 6u + 2u * size + 3u) & ~(uintptr_t)3;

	memset(mem, 0, VIRTIO_RAW_MEM(size));
	*r = (struct virtio_raw){.dev = dev,
				 .q = q,
				 .size = size,
				 .desc = (volatile struct virtq_desc *)p,
				 .avail = (volatile uint16_t *)avail,
				 .used = (volatile uint32_t *)used};
	r->avail_idx = &r->own_avail_idx;
	r->last_used = &r->own_last_used;
	virtio_write32(dev, VIRTIO_MMIO_QUEUE_SEL, q);
	virtio_write32(dev, VIRTIO_MMIO_QUEUE_NUM, size);
	write64(dev, VIRTIO_MMIO_QUEUE_DESC_LOW, (uintptr_t)p);
	write64(dev, VIRTIO_MMIO_QUEUE_DRIVER_LOW, avail);
	write64(dev, VIRTIO_MMIO_QUEUE_DEVICE_LOW, used);
	virtio_write32(dev, VIRTIO_MMIO_QUEUE_READY, 1);
	return virtio_read32(dev, VIRTIO_MMIO_QUEUE_READY);
}

void virtio_raw_ring(struct virtio_raw *r, uint16_t slot, uint16_t head)
{
	r->avail[2 + (slot & (r->size - 1u))] = head;
}

void virtio_raw_publish(struct virtio_raw *r, uint16_t idx)
{
	barrier(); /* descriptors and ring entries before the index (section 2.7.13.2; x86 keeps stores in order) */
	r->avail[1] = idx;
	*r->avail_idx = idx;
	mb();
	virtio_write32(r->dev, VIRTIO_MMIO_QUEUE_NOTIFY, r->q);
}

void virtio_raw_post(struct virtio_raw *r, uint16_t head)
{
	virtio_raw_ring(r, *r->avail_idx, head);
	virtio_raw_publish(r, (uint16_t)(*r->avail_idx + 1));
}

uint16_t virtio_raw_used_idx(const struct virtio_raw *r)
{
	return (uint16_t)(r->used[0] >> 16);
}

int virtio_raw_poll(struct virtio_raw *r, unsigned int timeout_ms, uint32_t *id, uint32_t *len)
{
	volatile uint32_t *e;
	struct deadline d;

	deadline_start(&d, timeout_ms);
	while (virtio_raw_used_idx(r) == *r->last_used) {
		if (deadline_passed(&d))
			return -1;
		cpu_relax();
	}
	barrier(); /* used.idx read before the element (x86 keeps loads in order) */
	e = &r->used[1 + 2u * (*r->last_used & (r->size - 1u))];
	*id = e[0];
	*len = e[1];
	(*r->last_used)++;
	return 0;
}

void virtio_sleep_ms(unsigned int ms)
{
	struct deadline d;

	deadline_start(&d, ms);
	while (!deadline_passed(&d))
		cpu_relax();
}

uint32_t virtio_poll_status(const struct virtio_dev *dev, uint32_t bits, unsigned int timeout_ms)
{
	struct deadline d;
	uint32_t s;

	deadline_start(&d, timeout_ms);
	while (((s = virtio_status(dev)) & bits) != bits && !deadline_passed(&d))
		cpu_relax();
	return s;
}

void virtio_irq_arm(struct virtio_dev *dev)
{
	ack_pending(dev);
	dev->irq_status = 0;
	if (dev->irq_ready)
		pin_route(dev, 0);
}

uint32_t virtio_irq_wait(struct virtio_dev *dev, uint32_t bits, unsigned int timeout_ms)
{
	struct deadline d;

	if (!dev->irq_ready)
		return 0;
	deadline_start(&d, timeout_ms);
	irq_enable();
	while (!(dev->irq_status & bits) && !deadline_passed(&d))
		cpu_relax();
	irq_disable();
	pin_route(dev, 1);
	return dev->irq_status;
}

int virtio_looks_random(const uint8_t *p, uint32_t n)
{
	int zero = 1, equal = 1;

	for (uint32_t i = 0; i < n; i++) {
		zero &= p[i] == 0;
		equal &= p[i] == p[0];
	}
	return !zero && !equal;
}
