"""`brisk acpi --dump`: the tables a VM would get, checked with the ACPI reference tools (iasl) and in Python.

No KVM needed. For every configuration: each checksum and pointer is verified here; iasl -d disassembles
each table with no error or warning; the disassembly compiles back (iasl) to the same bytes (only the
compiler ID and the checksum that covers it differ), and iasl's own RSDP built from the dumped fields is
byte for byte brisk's. The DSDT references no outside object, so `iasl -e` has nothing to resolve
(checked: no External() in the disassembly).
"""
import re
import shutil
import struct
import subprocess

import pytest

from conftest import EXIT_GUEST_OK, EXIT_USAGE, run_brisk

IASL = shutil.which("iasl")
pytestmark = pytest.mark.skipif(IASL is None, reason="iasl missing: scripts/deps.sh installs acpica-tools")

TABLES = ("rsdp", "xsdt", "facp", "apic", "dsdt")
REGION = (0xE0000, 0xF0000)  # LAYOUT_ACPI (include/brisk/layout.h)
VIRTIO_BASE, VIRTIO_SIZE = 0xD0001000, 0x1000  # LAYOUT_VIRTIO_MMIO
VIRTIO_IRQS = [5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23]  # LAYOUT_VIRTIO_IRQS
LAPIC_BASE, IOAPIC_BASE = 0xFEE00000, 0xFEC00000
PM_SLEEP_CTL, PM_SLEEP_STS, PM_RESET, RESET_VALUE = 0x600, 0x601, 0x602, 0x01
# iasl's diagnostics: "Warning  3141 -", "Error    6126 -", "Remark", or a summary with non-zero counts.
DIAG = re.compile(r"\b(warning|error|remark)s?\b", re.I)
CLEAN_SUMMARY = re.compile(r"\b0 (Errors|Warnings|Remarks)\b")


def sdt(b, sig):
    """Checks an ACPI table's header (ACPI 6.3 section 5.2.6): signature, length = file size, checksum."""
    assert b[:4] == sig.encode(), f"signature {b[:4]!r}, expected {sig}"
    assert struct.unpack_from("<I", b, 4)[0] == len(b), f"{sig}: header length != file size"
    assert sum(b) % 256 == 0, f"{sig}: checksum"
    assert b[10:16] == b"BRISK " and b[28:32] == b"BRSK"
    return b


def apic_ids(cpus, topo):
    """APIC IDs as include/brisk/cpuid.h lays them out: thread, core, socket fields, each ceil(log2(n)) bits."""
    sockets, cores, threads = topo if topo else (1, cpus, 1)
    tbits, cbits = (threads - 1).bit_length(), (cores - 1).bit_length()
    ids = []
    for i in range(cpus):
        t, c, s = i % threads, (i // threads) % cores, i // (threads * cores)
        ids.append(s << (tbits + cbits) | c << tbits | t)
    return ids


def devices(n):
    """brisk run options for n virtio devices (0..18): disks first, then --rng, then --console virtio."""
    rng, console = n >= 1, n >= 2
    disks = n - rng - console
    opts = []
    for i in range(disks):
        opts += ["--disk", f"/nonexistent/disk{i}.img"]  # the dump opens no image
    return opts + (["--rng"] if rng else []) + (["--console", "virtio"] if console else [])


def dump(tmp_path, *opts):
    out = tmp_path / "tables"
    p = run_brisk("acpi", "--dump", str(out), *opts, timeout=30)
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    assert p.stderr == ""
    return {t: (out / f"{t}.dat").read_bytes() for t in TABLES}, out


def check_pointers(t):
    """RSDP (5.2.5.3) -> XSDT -> FACP, APIC; FACP.X_DSDT -> DSDT; every table inside the region, disjoint."""
    r = t["rsdp"]
    assert len(r) == 36 and r[:8] == b"RSD PTR "
    assert sum(r[:20]) % 256 == 0, "RSDP checksum (first 20 bytes)"
    assert sum(r) % 256 == 0, "RSDP extended checksum"
    assert r[15] == 2 and struct.unpack_from("<II", r, 16) == (0, 36)
    xsdt_at = struct.unpack_from("<Q", r, 24)[0]
    x = sdt(t["xsdt"], "XSDT")
    entries = struct.unpack_from("<QQ", x, 36)
    assert len(x) == 52
    f = sdt(t["facp"], "FACP")
    assert struct.unpack_from("<I", f, 40)[0] == 0  # 32-bit DSDT: unused
    dsdt_at = struct.unpack_from("<Q", f, 140)[0]
    sdt(t["apic"], "APIC")
    sdt(t["dsdt"], "DSDT")
    spans = sorted([(REGION[0], 36), (xsdt_at, len(x)), (entries[0], len(f)), (entries[1], len(t["apic"])),
                    (dsdt_at, len(t["dsdt"]))])
    assert spans[0][0] == REGION[0], "the RSDP starts the region (legacy scan)"
    for (a, n), (b, _) in zip(spans, spans[1:]):
        assert a + n <= b, "tables overlap"
    for a, n in spans:
        assert a % 16 == 0 and REGION[0] <= a and a + n <= REGION[1]


def check_fadt(f):
    flags = struct.unpack_from("<I", f, 112)[0]
    assert len(f) == 276 and f[8] == 6 and f[131] == 3
    assert flags & (1 << 20) and flags & (1 << 10), "HW_REDUCED_ACPI and RESET_REG_SUP"
    for off, port in ((116, PM_RESET), (244, PM_SLEEP_CTL), (256, PM_SLEEP_STS)):
        assert struct.unpack_from("<BBBBQ", f, off) == (1, 8, 0, 1, port)
    assert f[128] == RESET_VALUE


def check_madt(m, ids, pic=False):
    """PCAT_COMPAT (a dual 8259) only with --irqchip kernel: the default split irqchip has no PIC."""
    lapics, ioapics, isos, nmis = [], [], [], []
    assert struct.unpack_from("<II", m, 36) == (LAPIC_BASE, 1 if pic else 0)
    off = 44
    while off < len(m):
        kind, length = m[off], m[off + 1]
        assert length >= 2 and off + length <= len(m)
        if kind == 0:
            lapics.append(struct.unpack_from("<BBI", m, off + 2))
        elif kind == 1:
            ioapics.append(struct.unpack_from("<BxII", m, off + 2))
        elif kind == 2:
            isos.append(struct.unpack_from("<BBIH", m, off + 2))
        elif kind == 4:
            nmis.append(struct.unpack_from("<BHB", m, off + 2))
        else:
            pytest.fail(f"MADT entry type {kind}")
        off += length
    assert lapics == [(i, apic, 1) for i, apic in enumerate(ids)]
    assert ioapics == [(max(ids) + 1, IOAPIC_BASE, 0)]
    assert isos == [(0, 0, 0, 0x5)]  # IRQ 0 -> GSI 0, edge, active high
    assert nmis == [(0xFF, 0, 1)]


def check_dsdt(d, n):
    assert d.count(b"LNRO0005") == n
    for i in range(18):
        name = b"VR%02d" % i
        mem32 = struct.pack("<BHBII", 0x86, 9, 1, VIRTIO_BASE + i * VIRTIO_SIZE, VIRTIO_SIZE)
        irq = struct.pack("<BHBBI", 0x89, 6, 0x03, 1, VIRTIO_IRQS[i])
        assert (name in d) == (i < n)
        assert (mem32 + irq in d) == (i < n), f"window {i}"
    for hid in (b"COM1", b"PS2K", b"RTC_", b"_S5_"):
        assert hid in d


def iasl(*args, cwd):
    p = subprocess.run([IASL, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    text = p.stdout + p.stderr
    diags = [ln for ln in text.splitlines() if DIAG.search(ln) and not CLEAN_SUMMARY.search(ln)]
    assert p.returncode == 0 and not diags, f"iasl {' '.join(args)}:\n{text}"
    return text


def check_iasl(t, out):
    """iasl -d on every table, then the disassembly compiled back to the same bytes."""
    for name in TABLES[1:]:
        iasl("-d", f"{name}.dat", cwd=out)
        dsl = (out / f"{name}.dsl").read_text()
        for bad in ("Incorrect checksum", "**** ", "Unknown", "Invalid", "External ("):
            assert bad not in dsl, f"{name}.dsl: {bad}\n{dsl}"
        text = iasl("-p", f"rt_{name}", f"{name}.dsl", cwd=out)
        assert "Compilation successful" in text
        again, ours = (out / f"rt_{name}.aml").read_bytes(), t[name]
        assert len(again) == len(ours)
        # iasl puts its own compiler ID and revision (bytes 28..35) and the checksum that covers them.
        assert again[:9] == ours[:9] and again[10:28] == ours[10:28] and again[36:] == ours[36:], name
    # The RSDP: iasl -d does not load one (acfileio.c, "Loading an RSDP is not supported"), so iasl's
    # data-table compiler builds one from the dumped fields and computes both checksums itself.
    r = t["rsdp"]
    (out / "rsdp.asl").write_text(
        '[0008] Signature : "RSD PTR "\n[0001] Checksum : 00\n[0006] Oem ID : "BRISK "\n'
        f"[0001] Revision : 02\n[0004] RSDT Address : 00000000\n[0004] Length : 00000024\n"
        f"[0008] XSDT Address : {struct.unpack_from('<Q', r, 24)[0]:016X}\n[0001] Extended Checksum : 00\n"
        "[0003] Reserved : 000000\n")
    iasl("-p", "rt_rsdp", "rsdp.asl", cwd=out)
    assert (out / "rt_rsdp.aml").read_bytes() == r


CPUS = [1, 2, 4, 16]


@pytest.mark.parametrize("n", range(9))
@pytest.mark.parametrize("cpus", CPUS)
def test_dump_iasl_clean(tmp_path, cpus, n):
    kernel_irqchip = n % 2 == 1
    t, out = dump(tmp_path, "--cpus", str(cpus), *devices(n), *(["--irqchip", "kernel"] if kernel_irqchip else []))
    check_pointers(t)
    check_fadt(t["facp"])
    check_madt(t["apic"], apic_ids(cpus, None), kernel_irqchip)
    check_dsdt(t["dsdt"], n)
    check_iasl(t, out)


@pytest.mark.parametrize("cpus,topo", [(6, (2, 3, 1)), (12, (2, 3, 2)), (27, (3, 3, 3)), (254, None),
                                       (126, (2, 63, 1))])
def test_dump_topologies(tmp_path, cpus, topo):
    """Gapped APIC IDs (a socket's unused core numbers) and the largest machine: 254 vCPUs, every window."""
    opts = ["--cpus", str(cpus)]
    if topo:
        opts += ["--topology", "sockets=%d,cores=%d,threads=%d" % topo]
    t, out = dump(tmp_path, *opts, *devices(18))
    ids = apic_ids(cpus, topo)
    check_pointers(t)
    check_madt(t["apic"], ids)
    check_dsdt(t["dsdt"], 18)
    check_iasl(t, out)


def test_dump_usage(tmp_path):
    p = run_brisk("acpi", "--cpus", "2", timeout=30)
    assert p.returncode == EXIT_USAGE and "--dump" in p.stderr
    p = run_brisk("acpi", "--dump", timeout=30)
    assert p.returncode == EXIT_USAGE
    p = run_brisk("acpi", "--help", timeout=30)
    assert p.returncode == EXIT_GUEST_OK and "usage: brisk acpi" in p.stdout
    p = run_brisk("help", "acpi", timeout=30)
    assert p.returncode == EXIT_GUEST_OK and "usage: brisk acpi" in p.stdout
    # A run option brisk run refuses is refused here too, before anything is written.
    p = run_brisk("acpi", "--dump", str(tmp_path / "x"), "--cpus", "0", timeout=30)
    assert p.returncode == EXIT_USAGE and not (tmp_path / "x").exists()
    # A file where the directory should be.
    (tmp_path / "file").write_text("")
    p = run_brisk("acpi", "--dump", str(tmp_path / "file"), timeout=30)
    assert p.returncode == EXIT_USAGE
    # The highest APIC ID (254) leaves no xAPIC ID for the I/O APIC: the MADT cannot describe it.
    p = run_brisk("acpi", f"--dump={tmp_path / 'y'}", "--cpus", "254", "--topology",
                  "sockets=2,cores=127,threads=1", timeout=30)
    assert p.returncode == EXIT_USAGE and "254" in p.stderr, p.stderr
    # 19 virtio devices do not fit the 18 windows.
    p = run_brisk("acpi", "--dump", str(tmp_path / "z"), *devices(19), timeout=30)
    assert p.returncode == EXIT_USAGE
