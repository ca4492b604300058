/* acpi.c - conformance guest for brisk's ACPI tables, read from inside, and for the APs and registers they name. */
#include "virtio.h"

/*
 * What a hardware-reduced ACPI kernel relies on (docs/acpi.md; ACPI 6.3
 * sections 5.2.5-5.2.12, 20): the RSDP found by the legacy scan and handed
 * over in start_info.rsdp_paddr, every checksum, the FADT's registers, the
 * MADT's processors (each AP started by the APIC ID the MADT gives must
 * arrive with it), and a DSDT that names each virtio window on the command
 * line. One "acpi: CHECK what: PASS|FAIL (values)" line per check.
 * Command-line words, the host's side:
 *   cpus=N                          vCPUs: enabled Processor Local APICs in the MADT
 *   virtio_mmio.device=4K@BASE:IRQ  brisk's, one per device, in device-manager order
 *   acpi_off=1                      brisk runs with --acpi off: no RSDP, nothing on ports 0x600-0x602
 *   action=s5                       after the checks, power off as the DSDT and FADT say; brisk ends the VM
 *   action=reset                    after the checks, write RESET_VALUE to RESET_REG; brisk ends the VM
 *   action=bad                      write an S3 request and a wrong reset value: both must be ignored
 * Without action= the verdict is conf_end's (i8042 reset: status 0, or 255).
 */
#define NAME "acpi"

/* FADT offsets (ACPI 6.3 section 5.2.9, table 5-33). */
#define FADT_DSDT	   40
#define FADT_FLAGS	   112
#define FADT_RESET_REG	   116
#define FADT_RESET_VALUE   128
#define FADT_MINOR_VERSION 131
#define FADT_X_DSDT	   140
#define FADT_SLEEP_CONTROL 244
#define FADT_SLEEP_STATUS  256
#define FADT_LEN_6	   276
#define FADT_RESET_REG_SUP (1u << 10)
#define FADT_HW_REDUCED	   (1u << 20)

/* Generic Address Structure (5.2.3.2). */
#define GAS_SPACE_IO 1

/* MADT (5.2.12): header, local APIC address, flags, then entries. */
#define MADT_LAPIC_ADDR	 36
#define MADT_FLAGS	 40
#define MADT_ENTRIES	 44
#define MADT_LAPIC	 0 /* 5.2.12.2 */
#define MADT_IOAPIC	 1 /* 5.2.12.3 */
#define MADT_ISO	 2 /* 5.2.12.5 */
#define MADT_LAPIC_NMI	 4 /* 5.2.12.7 */
#define MADT_MAX_CPUS	 255
#define LAPIC_ENABLED	 1u
#define SLP_TYP_SHIFT	 2    /* SLEEP_CONTROL_REG bits 4:2 (4.8.3.7) */
#define SLP_EN		 0x20 /* SLEEP_CONTROL_REG bit 5 */
#define WAK_STS		 0x80 /* SLEEP_STATUS_REG bit 7 */
#define S3_SLP_TYP	 3    /* a sleep state brisk does not offer */
#define MAX_DEVICES	 32   /* DSDT devices looked at */
#define MAX_WINDOWS	 24   /* virtio_mmio.device= words looked at */
#define VIRTIO_CRS_LEN	 23   /* Memory32Fixed (12) + Extended Interrupt (9) + End Tag (2) */
#define COM1_CRS_LEN	 13   /* IO (8) + IRQNoFlags (3) + End Tag (2) */
#define UNHANDLED_PORT	 0xff /* what brisk's bus returns for a port no device serves */
#define BSP_CPUID_ID(eb) ((eb) >> 24)

/* What the FADT says about power off and reset: ports and values the actions use. */
struct pm_regs {
	uint16_t sleep_control, sleep_status, reset;
	uint8_t reset_value;
};

struct madt_view {
	unsigned int ncpus; /* enabled Processor Local APIC entries */
	uint8_t apic_id[MADT_MAX_CPUS], uid[MADT_MAX_CPUS];
	unsigned int nioapic, niso, nnmi, bad_entries;
	uint8_t ioapic_id;
	uint32_t ioapic_addr, ioapic_gsi;
	int iso_ok, nmi_ok;
};

static struct madt_view madt; /* 0.5 KiB: kept off the boot stack */
static struct acpi_aml_device devs[MAX_DEVICES];

static uint16_t rd16(uint64_t p)
{
	return phys_read16((uintptr_t)p);
}

static uint32_t rd32(uint64_t p)
{
	return phys_read32((uintptr_t)p);
}

static uint64_t rd64(uint64_t p)
{
	return phys_read64((uintptr_t)p);
}

/* ---- RSDP, XSDT ----------------------------------------------------------------------- */

/* The RSDP handed over, checked byte by byte; returns the XSDT's address, or 0. */
static uint64_t check_rsdp(uint64_t rsdp)
{
	uint8_t rev = rsdp ? phys_read8((uintptr_t)rsdp + 15) : 0;

	if (!rsdp)
		return 0;
	conf_check(rev == 2, "rsdp_revision", "%u", rev);
	conf_check(phys_sum((uintptr_t)rsdp, 20) == 0, "rsdp_checksum", "bytes 0..19 sum to 0x%x",
		   phys_sum((uintptr_t)rsdp, 20));
	conf_check(rd32(rsdp + 20) == ACPI_RSDP_LEN && phys_sum((uintptr_t)rsdp, ACPI_RSDP_LEN) == 0,
		   "rsdp_extended_checksum", "length %u, bytes 0..35 sum to 0x%x", rd32(rsdp + 20),
		   phys_sum((uintptr_t)rsdp, ACPI_RSDP_LEN));
	conf_check(rd32(rsdp + 16) == 0 && rd64(rsdp + 24) != 0, "rsdp_xsdt_only", "rsdt 0x%x, xsdt 0x%llx",
		   rd32(rsdp + 16), (unsigned long long)rd64(rsdp + 24));
	return rd64(rsdp + 24);
}

static void print_table(const char *what, uint64_t t)
{
	gprintf("%s: %s at 0x%llx: %c%c%c%c length %u revision %u\n", NAME, what, (unsigned long long)t,
		phys_read8((uintptr_t)t), phys_read8((uintptr_t)t + 1), phys_read8((uintptr_t)t + 2),
		phys_read8((uintptr_t)t + 3), acpi_table_len(t), phys_read8((uintptr_t)t + 8));
}

/* The XSDT and every table it lists; the FADT and MADT addresses out. Returns 0, or -1 if either is missing. */
static int check_xsdt(uint64_t xsdt, uint64_t *facp, uint64_t *apic)
{
	uint32_t len = acpi_table_len(xsdt);
	unsigned int n = acpi_xsdt_count(xsdt), good = 0, nfacp = 0, napic = 0;

	conf_check(len && acpi_sig_is(xsdt, "XSDT"), "xsdt_signature", "at 0x%llx, length %u", (unsigned long long)xsdt,
		   len);
	conf_check(acpi_table_ok(xsdt, "XSDT") && (len - ACPI_HEADER_LEN) % 8 == 0, "xsdt_checksum", "%u entries", n);
	for (unsigned int i = 0; i < n; i++) {
		uint64_t t = acpi_xsdt_entry(xsdt, i);

		print_table("xsdt entry", t);
		good += acpi_table_ok(t, NULL) ? 1u : 0u;
	}
	conf_check(n > 0 && good == n, "xsdt_entry_checksums", "%u of %u tables sum to 0", good, n);
	*facp = acpi_xsdt_find(xsdt, "FACP", &nfacp);
	*apic = acpi_xsdt_find(xsdt, "APIC", &napic);
	conf_check(nfacp == 1, "xsdt_facp_once", "%u", nfacp);
	conf_check(napic == 1, "xsdt_apic_once", "%u", napic);
	return nfacp && napic ? 0 : -1;
}

/* ---- FADT ------------------------------------------------------------------------------ */

/* A GAS naming an 8-bit I/O port: checks it, returns the port (0 if it is not one). */
static uint16_t check_gas_io8(const char *what, uint64_t g, uint16_t want)
{
	uint8_t space = phys_read8((uintptr_t)g), width = phys_read8((uintptr_t)g + 1);
	uint8_t offset = phys_read8((uintptr_t)g + 2), access = phys_read8((uintptr_t)g + 3);
	uint64_t addr = rd64(g + 4);
	int ok = space == GAS_SPACE_IO && width == 8 && offset == 0 && access == 1 && addr == want;

	conf_check(ok, what, "space %u width %u offset %u access %u address 0x%llx, expected I/O 8-bit 0x%x", space,
		   width, offset, access, (unsigned long long)addr, want);
	return space == GAS_SPACE_IO && addr <= 0xffff ? (uint16_t)addr : 0;
}

/* Returns the DSDT's address (X_DSDT); the registers in *pm. */
static uint64_t check_fadt(uint64_t f, struct pm_regs *pm)
{
	uint32_t len = acpi_table_len(f), flags = rd32(f + FADT_FLAGS);
	uint8_t rev = phys_read8((uintptr_t)f + 8), minor = phys_read8((uintptr_t)f + FADT_MINOR_VERSION);

	conf_check(len >= FADT_LEN_6, "fadt_length", "%u", len);
	if (len < FADT_LEN_6)
		return 0;
	conf_check(rev == 6 && minor == 3, "fadt_revision", "%u.%u", rev, minor);
	conf_check((flags & FADT_HW_REDUCED) && (flags & FADT_RESET_REG_SUP), "fadt_flags",
		   "0x%x: HW_REDUCED_ACPI %u RESET_REG_SUP %u", flags, !!(flags & FADT_HW_REDUCED),
		   !!(flags & FADT_RESET_REG_SUP));
	pm->reset = check_gas_io8("fadt_reset_reg", f + FADT_RESET_REG, 0x602);
	pm->reset_value = phys_read8((uintptr_t)f + FADT_RESET_VALUE);
	conf_check(pm->reset_value == 1, "fadt_reset_value", "0x%x", pm->reset_value);
	pm->sleep_control = check_gas_io8("fadt_sleep_control_reg", f + FADT_SLEEP_CONTROL, 0x600);
	pm->sleep_status = check_gas_io8("fadt_sleep_status_reg", f + FADT_SLEEP_STATUS, 0x601);
	conf_check(rd64(f + FADT_X_DSDT) != 0 && rd32(f + FADT_DSDT) == 0, "fadt_x_dsdt", "X_DSDT 0x%llx, DSDT 0x%x",
		   (unsigned long long)rd64(f + FADT_X_DSDT), rd32(f + FADT_DSDT));
	return rd64(f + FADT_X_DSDT);
}

/* ---- DSDT ------------------------------------------------------------------------------ */

/* The bytes of a device's Name(_CRS, Buffer) with their count, or NULL when it has no such buffer. */
static const uint8_t *crs_bytes(const struct acpi_aml_device *d, size_t *n)
{
	size_t olen, k, v, m;
	uint64_t size;
	const uint8_t *o = acpi_aml_find_name(d->body, d->len, "_CRS", &olen);

	if (!o || o[0] != 0x11 /* BufferOp */ || !(k = acpi_aml_pkglen(o + 1, olen - 1, &v)) || v < k)
		return NULL;
	m = acpi_aml_int(o + 1 + k, v - k, &size);
	if (!m || size != v - k - m)
		return NULL;
	*n = v - k - m;
	return o + 1 + k + m;
}

/* Name(seg, integer) of a device, or ~0 when absent or not an integer. */
static uint64_t dev_int(const struct acpi_aml_device *d, const char *seg)
{
	size_t olen;
	uint64_t v;
	const uint8_t *o = acpi_aml_find_name(d->body, d->len, seg, &olen);

	return o && acpi_aml_int(o, olen, &v) ? v : ~0ULL;
}

/* The device's _HID object equals the n bytes `hid` (an encoded EISA ID or string). */
static int hid_is(const struct acpi_aml_device *d, const void *hid, size_t n)
{
	size_t olen;
	const uint8_t *o = acpi_aml_find_name(d->body, d->len, "_HID", &olen);

	return o && olen == n && !memcmp(o, hid, n);
}

static void put_le(uint8_t *p, uint32_t v, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* \_S5: Name(_S5, Package(n) {SLP_TYPa, ...}) at the top level. Returns SLP_TYPa, or ~0. */
static uint64_t check_s5(const uint8_t *aml, size_t len)
{
	size_t olen, k, v;
	uint64_t typ = ~0ULL;
	const uint8_t *o = acpi_aml_find_name(aml, len, "_S5_", &olen);

	/* PackageOp PkgLength NumElements, then the elements: the first is SLP_TYPa (7.4.2). */
	if (o && o[0] == 0x12 && (k = acpi_aml_pkglen(o + 1, olen - 1, &v)) && v > k + 1 && o[1 + k] >= 1) {
		if (!acpi_aml_int(o + 2 + k, v - k - 1, &typ))
			typ = ~0ULL;
	}
	conf_check(typ == 5, "dsdt_s5", "%s, SLP_TYPa %lld", o ? "\\_S5 found" : "no \\_S5", (long long)typ);
	return typ;
}

/* COM1: _HID EisaId("PNP0501") = DWordPrefix 0x0105D041, _CRS IO(Decode16, 0x3F8, 0x3F8, 0, 8) IRQNoFlags(){4}. */
static void check_com1(unsigned int ndev)
{
	uint8_t hid[5] = {0x0c, 0x41, 0xd0, 0x05, 0x01};
	uint8_t crs[COM1_CRS_LEN] = {0x47, 0x01, 0xf8, 0x03, 0xf8, 0x03, 0x00, 0x08, 0x22, 0x10, 0x00, 0x79, 0x00};
	unsigned int found = 0, crs_ok = 0;
	const uint8_t *b;
	size_t n = 0;

	for (unsigned int i = 0; i < ndev && i < MAX_DEVICES; i++) {
		if (!hid_is(&devs[i], hid, sizeof(hid)))
			continue;
		found++;
		b = crs_bytes(&devs[i], &n);
		crs_ok += b && n == sizeof(crs) && !memcmp(b, crs, n) ? 1u : 0u;
		gprintf("%s: dsdt device %s: PNP0501, _CRS %u bytes\n", NAME, devs[i].name, (unsigned int)n);
	}
	conf_check(found == 1 && crs_ok == 1, "dsdt_com1_pnp0501", "%u devices, %u with IO 0x3f8 len 8 IRQ 4", found,
		   crs_ok);
}

/* The k-th LNRO0005 device against the k-th virtio_mmio.device= word: name, _UID, _CCA, exact _CRS bytes. */
static void check_virtio_dev(const struct acpi_aml_device *d, unsigned int k, const struct virtio_mmio_window *w)
{
	uint8_t want[VIRTIO_CRS_LEN] = {0x86, 0x09, 0x00, 0x01, 0,    0, 0, 0, 0x00, 0x10, 0x00, 0x00,
					0x89, 0x06, 0x00, 0x03, 0x01, 0, 0, 0, 0,    0x79, 0x00};
	uint64_t uid = dev_int(d, "_UID"), cca = dev_int(d, "_CCA");
	size_t n = 0;
	const uint8_t *b = crs_bytes(d, &n);
	uint32_t base = b && n >= 8 ? (uint32_t)(b[4] | b[5] << 8 | b[6] << 16 | (uint32_t)b[7] << 24) : 0;
	uint32_t irq = b && n >= 21 ? (uint32_t)(b[17] | b[18] << 8 | b[19] << 16 | (uint32_t)b[20] << 24) : 0;
	int named = d->name[0] == 'V' && d->name[1] == 'R' && d->name[2] == (char)('0' + k / 10) &&
		    d->name[3] == (char)('0' + k % 10);

	put_le(want + 4, (uint32_t)w->base, 4);
	put_le(want + 17, w->irq, 4);
	conf_check(named && uid == k && cca == 1 && w->size == 0x1000 && b && n == sizeof(want) && !memcmp(b, want, n),
		   "dsdt_virtio_window",
		   "%s _UID %lld _CCA %lld Memory32Fixed(0x%x, 0x1000) Interrupt(%u), word %llu@0x%llx:%u", d->name,
		   (long long)uid, (long long)cca, base, irq, (unsigned long long)w->size, (unsigned long long)w->base,
		   w->irq);
	if (base)
		conf_check(mmio_read32(base + VIRTIO_MMIO_MAGIC_VALUE) == VIRTIO_MMIO_MAGIC, "virtio_window_live",
			   "MagicValue at 0x%x: 0x%x", base, mmio_read32(base + VIRTIO_MMIO_MAGIC_VALUE));
}

static void check_virtio(const char *cmdline, unsigned int ndev)
{
	static struct virtio_mmio_window w[MAX_WINDOWS];
	char lnro[10] = {0x0d, 'L', 'N', 'R', 'O', '0', '0', '0', '5', 0};
	unsigned int nwin = virtio_cmdline_windows(cmdline, w, MAX_WINDOWS), k = 0;

	for (unsigned int i = 0; i < ndev && i < MAX_DEVICES; i++) {
		if (!hid_is(&devs[i], lnro, sizeof(lnro)))
			continue;
		if (k < nwin)
			check_virtio_dev(&devs[i], k, &w[k]);
		k++;
	}
	conf_check(k == nwin, "dsdt_virtio_count", "%u LNRO0005 devices, %u virtio_mmio.device= words", k, nwin);
}

/* Returns \_S5's SLP_TYPa (~0 when the DSDT is unusable). */
static uint64_t check_dsdt(uint64_t dsdt, const char *cmdline)
{
	uint32_t len = acpi_table_len(dsdt);
	const uint8_t *aml = (const uint8_t *)phys_launder((uintptr_t)dsdt + ACPI_HEADER_LEN);
	const char *why = "";
	int ndev;

	print_table("DSDT", dsdt);
	conf_check(len && acpi_sig_is(dsdt, "DSDT"), "dsdt_signature", "at 0x%llx, length %u", (unsigned long long)dsdt,
		   len);
	conf_check(acpi_table_ok(dsdt, "DSDT") && phys_read8((uintptr_t)dsdt + 8) >= 2, "dsdt_checksum_revision",
		   "revision %u", phys_read8((uintptr_t)dsdt + 8));
	if (!len)
		return ~0ULL;
	ndev = acpi_aml_devices(aml, len - ACPI_HEADER_LEN, devs, MAX_DEVICES, &why);
	conf_check(ndev >= 0 && ndev <= MAX_DEVICES, "dsdt_aml_walk", "%d devices%s%s", ndev, ndev < 0 ? ": " : "",
		   ndev < 0 ? why : "");
	if (ndev < 0)
		return ~0ULL;
	check_com1((unsigned int)ndev);
	check_virtio(cmdline, (unsigned int)ndev);
	return check_s5(aml, len - ACPI_HEADER_LEN);
}

/* ---- MADT ------------------------------------------------------------------------------ */

static void madt_entry(uint64_t e, uint8_t type, uint8_t len)
{
	if (type == MADT_LAPIC && len == 8) {
		if ((rd32(e + 4) & LAPIC_ENABLED) && madt.ncpus < MADT_MAX_CPUS) {
			madt.uid[madt.ncpus] = phys_read8((uintptr_t)e + 2);
			madt.apic_id[madt.ncpus++] = phys_read8((uintptr_t)e + 3);
		}
	} else if (type == MADT_IOAPIC && len == 12) {
		madt.nioapic++;
		madt.ioapic_id = phys_read8((uintptr_t)e + 2);
		madt.ioapic_addr = rd32(e + 4);
		madt.ioapic_gsi = rd32(e + 8);
	} else if (type == MADT_ISO && len == 10) {
		/* ISA IRQ 0 -> GSI 0, edge (bits 3:2 = 01), active high (bits 1:0 = 01) */
		madt.niso++;
		madt.iso_ok = phys_read8((uintptr_t)e + 2) == 0 && phys_read8((uintptr_t)e + 3) == 0 &&
			      rd32(e + 4) == 0 && rd16(e + 8) == 0x5;
	} else if (type == MADT_LAPIC_NMI && len == 6) {
		madt.nnmi++;
		madt.nmi_ok = phys_read8((uintptr_t)e + 2) == 0xff && phys_read8((uintptr_t)e + 5) == 1;
	} else {
		madt.bad_entries++;
	}
}

/* Walk the entries, bounded by the table's length; returns 0, or -1 on an entry that overruns it. */
static int madt_walk(uint64_t m, uint32_t len)
{
	uint32_t at = MADT_ENTRIES;

	memset(&madt, 0, sizeof(madt));
	while (at + 2 <= len) {
		uint8_t type = phys_read8((uintptr_t)(m + at)), elen = phys_read8((uintptr_t)(m + at + 1));

		if (elen < 2 || at + elen > len)
			return -1;
		madt_entry(m + at, type, elen);
		at += elen;
	}
	return at == len ? 0 : -1;
}

static void check_madt_cpus(unsigned int cpus, unsigned int bsp)
{
	unsigned int unique = 1, uids = 1, max = 0, has_bsp = 0, ioapic_id_used = 0;

	for (unsigned int i = 0; i < madt.ncpus; i++) {
		gprintf("%s: madt lapic uid %u apic id %u\n", NAME, madt.uid[i], madt.apic_id[i]);
		for (unsigned int j = 0; j < i; j++)
			unique &= madt.apic_id[j] != madt.apic_id[i];
		uids &= madt.uid[i] == i;
		has_bsp |= madt.apic_id[i] == bsp;
		if (madt.apic_id[i] > max)
			max = madt.apic_id[i];
		ioapic_id_used |= madt.apic_id[i] == madt.ioapic_id;
	}
	conf_check(madt.ncpus == cpus, "madt_cpus", "%u enabled local APICs, expected %u", madt.ncpus, cpus);
	conf_check(unique, "madt_apic_ids_unique", "%s", unique ? "yes" : "no");
	conf_check(uids, "madt_uids_in_vcpu_order", "%s", uids ? "0..n-1" : "not 0..n-1");
	conf_check(has_bsp && madt.ncpus && madt.apic_id[0] == bsp, "madt_bsp_first", "this CPU's APIC ID %u, first %u",
		   bsp, madt.ncpus ? madt.apic_id[0] : 0xffu);
	conf_check(madt.nioapic == 1 && madt.ioapic_addr == BRISK_IOAPIC_BASE && madt.ioapic_gsi == 0, "madt_ioapic",
		   "%u, at 0x%x GSI base %u", madt.nioapic, madt.ioapic_addr, madt.ioapic_gsi);
	/* Not a CPU's ID; brisk takes the one above the highest CPU's, as its MP table. */
	conf_check(!ioapic_id_used && madt.ioapic_id == max + 1, "madt_ioapic_id", "%u, highest CPU APIC ID %u%s",
		   madt.ioapic_id, max, ioapic_id_used ? ", used by a CPU" : "");
}

static void check_madt(uint64_t m, unsigned int cpus, unsigned int bsp)
{
	uint32_t len = acpi_table_len(m);
	int walked;

	conf_check(acpi_table_ok(m, "APIC"), "madt_signature_checksum", "at 0x%llx, length %u", (unsigned long long)m,
		   len);
	if (!len)
		return;
	walked = madt_walk(m, len) == 0;
	conf_check(walked && !madt.bad_entries, "madt_entries", "%s, %u of an unexpected type or length",
		   walked ? "walked to the end" : "an entry overruns the table", madt.bad_entries);
	conf_check(rd32(m + MADT_LAPIC_ADDR) == BRISK_LAPIC_BASE, "madt_lapic_addr", "0x%x, flags 0x%x",
		   rd32(m + MADT_LAPIC_ADDR), rd32(m + MADT_FLAGS));
	check_madt_cpus(cpus, bsp);
	conf_check(madt.niso == 1 && madt.iso_ok, "madt_irq0_override", "%u overrides, IRQ0 -> GSI 0 edge high %s",
		   madt.niso, madt.iso_ok ? "yes" : "no");
	conf_check(madt.nnmi == 1 && madt.nmi_ok, "madt_lint1_nmi", "%u, every processor LINT1 %s", madt.nnmi,
		   madt.nmi_ok ? "yes" : "no");
}

/* Start every AP the MADT lists (INIT-SIPI-SIPI by its APIC ID); each must arrive in long mode with that ID. */
static void check_aps(unsigned int bsp)
{
	unsigned int slot = 0, good = 0;
	struct ap_arrival a;

	lapic_enable();
	for (unsigned int i = 0; i < madt.ncpus && slot < GUEST_AP_MAX; i++) {
		int ok;

		if (madt.apic_id[i] == bsp)
			continue;
		memset(&a, 0, sizeof(a));
		ok = smp_bring_up_ap(madt.apic_id[i], slot++, &a) == 0;
		conf_check(ok && a.apic_id == madt.apic_id[i] && a.long_mode, "ap_online",
			   "madt uid %u apic id %u: %s as %u, efer 0x%llx cr0 0x%llx", madt.uid[i], madt.apic_id[i],
			   ok ? "arrived" : "did not arrive", a.apic_id, (unsigned long long)a.efer,
			   (unsigned long long)a.cr0);
		good += ok && a.apic_id == madt.apic_id[i] && a.long_mode ? 1u : 0u;
	}
	conf_check(madt.ncpus && good == madt.ncpus - 1, "aps_online", "%u of %u", good,
		   madt.ncpus ? madt.ncpus - 1 : 0);
}

/* ---- the power-management registers ------------------------------------------------------ */

/* Without ACPI nothing serves ports 0x600-0x602: reads float, writes (an S5 request, a reset) do nothing. */
static __attribute__((noreturn)) void without_acpi(void)
{
	uint8_t v = inb(0x600);

	conf_check(v == UNHANDLED_PORT, "no_pm_device", "port 0x600 reads 0x%x", v);
	if (v != UNHANDLED_PORT)
		conf_end(); /* a device is there: the writes below would end the VM before the verdict */
	outb(0x600, (5 << SLP_TYP_SHIFT) | SLP_EN);
	outb(0x602, 0x01);
	conf_check(1, "pm_writes_ignored_without_acpi",
		   "wrote 0x34 to port 0x600 and 0x01 to port 0x602: still running");
	conf_end();
}

/* An action that must end the VM: the verdict is brisk's exit; still being here is the failure. */
static __attribute__((noreturn)) void end_by(const char *what, uint16_t port, uint8_t v)
{
	if (conf_summary())
		guest_fail(NAME, "see the CHECK lines above");
	gprintf("%s: action %s: writing 0x%x to port 0x%x\n", NAME, what, v, port);
	gprintf("%s: PASS\n", NAME);
	outb(port, v);
	guest_settle();
	gprintf("%s: FAIL: still running after writing 0x%x to port 0x%x (%s)\n", NAME, v, port, what);
	guest_exit(0x7f);
}

static __attribute__((noreturn)) void act(const char *cmdline, const struct pm_regs *pm, uint64_t slp_typ)
{
	char action[8];
	uint8_t s3 = (S3_SLP_TYP << SLP_TYP_SHIFT) | SLP_EN, sts;

	if (cmdline_get_str(cmdline, "action", action, sizeof(action)))
		conf_end();
	if (!strcmp(action, "s5")) {
		outb(pm->sleep_status, WAK_STS); /* clear WAK_STS first, as Linux's acpi_hw_extended_sleep */
		end_by("s5", pm->sleep_control, (uint8_t)(((slp_typ & 7) << SLP_TYP_SHIFT) | SLP_EN));
	}
	if (!strcmp(action, "reset"))
		end_by("reset", pm->reset, pm->reset_value);
	if (strcmp(action, "bad")) {
		conf_check(0, "action", "unknown action=%s", action);
		conf_end();
	}
	/* Setting SLP_TYP without SLP_EN, an S3 request, a reset value that is not RESET_VALUE: all ignored. */
	outb(pm->sleep_control, 5 << SLP_TYP_SHIFT);
	outb(pm->sleep_control, s3);
	outb(pm->reset, (uint8_t)(pm->reset_value + 1));
	guest_settle();
	conf_check(1, "pm_bad_writes_ignored", "wrote 0x%x and 0x%x to port 0x%x, 0x%x to port 0x%x: still running",
		   5 << SLP_TYP_SHIFT, s3, pm->sleep_control, pm->reset_value + 1, pm->reset);
	sts = inb(pm->sleep_status);
	conf_check(sts == 0, "sleep_status_wak_sts_clear", "port 0x%x reads 0x%x", pm->sleep_status, sts);
	conf_end();
}

void guest_main(struct hvm_start_info *si)
{
	const char *cmdline = guest_cmdline(si);
	struct pm_regs pm = {0};
	uint64_t cpus = 0, off = 0, xsdt, facp = 0, apic = 0, dsdt = 0, slp_typ = ~0ULL;
	uint32_t a, b, c, d;
	unsigned int bsp;

	serial_init();
	conf_begin(NAME);
	gprintf("%s: cmdline [%s]\n", NAME, cmdline);
	conf_check_rsdp(cmdline, si ? si->rsdp_paddr : 0);
	if (cmdline_get_u64(cmdline, "acpi_off", &off) == 0 && off)
		without_acpi();
	if (cmdline_get_u64(cmdline, "cpus", &cpus))
		conf_check(0, "cpus", "cpus= missing from the command line");
	xsdt = check_rsdp(si ? si->rsdp_paddr : 0);
	if (!xsdt || check_xsdt(xsdt, &facp, &apic))
		conf_end();
	dsdt = check_fadt(facp, &pm);
	if (dsdt)
		slp_typ = check_dsdt(dsdt, cmdline);
	bsp = lapic_id();
	cpuid(1, 0, &a, &b, &c, &d);
	conf_check(BSP_CPUID_ID(b) == bsp, "bsp_cpuid_apic_id", "CPUID.1 %u, LAPIC ID register %u", BSP_CPUID_ID(b),
		   bsp);
	check_madt(apic, (unsigned int)cpus, bsp);
	check_aps(bsp);
	conf_check(inb(0x600) == 0 && inb(0x601) == 0 && inb(0x602) == 0, "pm_ports_read_0", "0x%x 0x%x 0x%x",
		   inb(0x600), inb(0x601), inb(0x602));
	act(cmdline, &pm, slp_typ);
}
