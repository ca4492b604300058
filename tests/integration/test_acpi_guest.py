"""brisk's ACPI tables read from inside a guest (guests/acpi.c, docs/acpi.md "Conformance guest"; needs KVM).

The acpi guest finds the RSDP by the legacy scan and through start_info.rsdp_paddr, walks XSDT -> FADT, MADT and
DSDT checking every checksum and the documented values, starts every AP the MADT lists by its APIC ID, and matches
each virtio_mmio.device= word brisk put on the command line against an LNRO0005 device in the DSDT, byte for byte.
It prints "acpi: CHECK what: PASS|FAIL (values)" lines, then (action= on the command line) powers off through
SLEEP_CONTROL_REG, resets through RESET_REG, or writes values brisk must ignore. The host's side travels on the
command line: cpus=N, acpi_off=1 with --acpi off.
"""
import re

import pytest

from conftest import EXIT_GUEST_OK, boot, debug_exit_status

pytestmark = pytest.mark.usefixtures("kvm")

GUEST_FAIL = debug_exit_status(0x7F)  # guest_fail: 255
# The device manager's windows and lines, in allocation order (layout.h, devmgr.c; docs/acpi.md: pins 5-7, 9-23).
WINDOW_BASE = 0xD0001000
WINDOW_IRQS = [5, 6, 7] + list(range(9, 24))
# Checks every ACPI run must report as passed: dropping one from the guest fails the test.
TABLE_CHECKS = [
    "rsdp_handed", "rsdp_scan_equals_handed", "rsdp_revision", "rsdp_checksum", "rsdp_extended_checksum",
    "rsdp_xsdt_only", "xsdt_signature", "xsdt_checksum", "xsdt_entry_checksums", "xsdt_facp_once",
    "xsdt_apic_once", "fadt_length", "fadt_revision", "fadt_flags", "fadt_reset_reg", "fadt_reset_value",
    "fadt_sleep_control_reg", "fadt_sleep_status_reg", "fadt_x_dsdt", "dsdt_signature", "dsdt_checksum_revision",
    "dsdt_aml_walk", "dsdt_com1_pnp0501", "dsdt_virtio_count", "dsdt_s5", "bsp_cpuid_apic_id",
    "madt_signature_checksum", "madt_entries", "madt_lapic_addr", "madt_cpus", "madt_apic_ids_unique",
    "madt_uids_in_vcpu_order", "madt_bsp_first", "madt_ioapic", "madt_ioapic_id", "madt_irq0_override",
    "madt_lint1_nmi", "aps_online", "pm_ports_read_0",
]


@pytest.fixture
def disks(tmp_path):
    """Two 1 MiB raw images."""
    paths = []
    for i in range(2):
        path = tmp_path / f"disk{i}.img"
        path.write_bytes(b"\0" * (1 << 20))
        paths.append(str(path))
    return paths


def run_acpi(*opts, cpus=1, words=""):
    cmdline = f"cpus={cpus} {words}".strip()
    return boot("acpi", "--cpus", str(cpus), "--log-level", "info", "--cmdline", cmdline, *opts, timeout=120)


def passed(out):
    return re.findall(r"^acpi: CHECK (\S+): PASS", out, re.M)


def assert_pass(p, must=TABLE_CHECKS):
    """Exit 0, the guest's PASS, no FAIL anywhere, and every check in `must` reported as passed."""
    out = p.stdout
    failed = [line for line in out.splitlines() if "FAIL" in line]
    assert not failed, "\n".join(failed) + "\n---\n" + out + p.stderr
    assert p.returncode == EXIT_GUEST_OK, out + p.stderr
    assert re.search(r"^acpi: \d+ checks, 0 failed$", out, re.M), out
    assert "acpi: PASS" in out, out
    missing = set(must) - set(passed(out))
    assert not missing, f"not checked: {sorted(missing)}\n{out}"


def madt_ids(out):
    return [int(m) for m in re.findall(r"^acpi: madt lapic uid \d+ apic id (\d+)$", out, re.M)]


def arrived(out):
    return sorted(int(m) for m in re.findall(r"^acpi: CHECK ap_online: PASS \(madt uid \d+ apic id \d+: arrived as "
                                             r"(\d+),", out, re.M))


@pytest.mark.parametrize("cpus", [1, 2, 4])
def test_tables_and_every_ap(cpus):
    p = run_acpi(cpus=cpus)
    assert_pass(p)
    out = p.stdout
    assert madt_ids(out) == list(range(cpus)), out
    assert arrived(out) == list(range(1, cpus)), out
    assert f"acpi: CHECK aps_online: PASS ({cpus - 1} of {cpus - 1})" in out, out
    assert f"acpi: CHECK madt_ioapic_id: PASS ({cpus}, highest CPU APIC ID {cpus - 1})" in out, out
    assert "VM ended: guest requested reset (i8042)" in p.stderr, p.stderr  # conf_end's verdict, no action


@pytest.mark.parametrize("topology,ids", [
    ("sockets=2,cores=3,threads=1", [0, 1, 2, 4, 5, 6]),
    ("sockets=3,cores=1,threads=1", [0, 1, 2]),
])
def test_topology_with_apic_id_gaps(topology, ids):
    """The MADT lists the APIC IDs CPUID gives, holes included; each AP started by one arrives with it."""
    p = run_acpi("--topology", topology, cpus=len(ids))
    assert_pass(p)
    out = p.stdout
    assert madt_ids(out) == ids, out
    assert arrived(out) == ids[1:], out
    assert f"acpi: CHECK madt_ioapic_id: PASS ({ids[-1] + 1}, highest CPU APIC ID {ids[-1]})" in out, out


DEVICE_SETS = {
    "none": lambda d: [],
    "rng": lambda d: ["--rng"],
    "disk": lambda d: ["--disk", d[0]],
    "disks_rng_console": lambda d: ["--disk", d[0], "--disk", d[1], "--rng", "--console", "virtio"],
}


@pytest.mark.parametrize("devices", list(DEVICE_SETS))
def test_dsdt_names_every_virtio_window(devices, disks):
    opts = DEVICE_SETS[devices](disks)
    n = sum(o in ("--disk", "--rng", "--console") for o in opts)
    p = run_acpi(*opts, cpus=2)
    assert_pass(p, TABLE_CHECKS + (["dsdt_virtio_window", "virtio_window_live"] if n else []))
    out = p.stdout
    want = [(WINDOW_BASE + 0x1000 * i, WINDOW_IRQS[i]) for i in range(n)]
    words = [(int(b, 16), int(irq)) for b, irq in re.findall(r"virtio_mmio\.device=4K@(0x[0-9a-f]+):(\d+)", out)]
    assert words == want, out
    seen = [(int(name), int(base, 16), int(irq)) for name, base, irq in re.findall(
        r"^acpi: CHECK dsdt_virtio_window: PASS \(VR(\d\d) _UID \d+ _CCA 1 Memory32Fixed\((0x[0-9a-f]+), 0x1000\) "
        r"Interrupt\((\d+)\)", out, re.M)]
    assert seen == [(i, b, irq) for i, (b, irq) in enumerate(want)], out
    assert f"acpi: CHECK dsdt_virtio_count: PASS ({n} LNRO0005 devices, {n} virtio_mmio.device= words)" in out, out
    assert len(re.findall(r"^acpi: CHECK virtio_window_live: PASS \(MagicValue at 0x[0-9a-f]+: 0x74726976\)$",
                          out, re.M)) == n, out


def assert_no_ignored_writes(stderr):
    assert "ignored" not in stderr and "unhandled" not in stderr, stderr


def test_s5_powers_off(disks):
    p = run_acpi("--rng", "--disk", disks[0], cpus=2, words="action=s5")
    assert_pass(p)
    assert "acpi: action s5: writing 0x34 to port 0x600" in p.stdout, p.stdout
    assert "still running" not in p.stdout, p.stdout
    assert "VM ended: guest powered off (ACPI S5) (exit status 0)" in p.stderr, p.stderr
    assert_no_ignored_writes(p.stderr)


def test_reset_register_resets():
    p = run_acpi(cpus=2, words="action=reset")
    assert_pass(p)
    assert "acpi: action reset: writing 0x1 to port 0x602" in p.stdout, p.stdout
    assert "still running" not in p.stdout, p.stdout
    assert "VM ended: guest requested reset (ACPI reset register) (exit status 0)" in p.stderr, p.stderr
    assert_no_ignored_writes(p.stderr)


def test_other_sleep_states_and_reset_values_are_ignored():
    """SLP_TYP without SLP_EN does nothing; S3 and a reset value other than 0x01 are ignored with a warning."""
    p = run_acpi(cpus=1, words="action=bad")
    assert_pass(p, TABLE_CHECKS + ["pm_bad_writes_ignored", "sleep_status_wak_sts_clear"])
    assert "(wrote 0x14 and 0x2c to port 0x600, 0x2 to port 0x602: still running)" in p.stdout, p.stdout
    assert "ACPI SLEEP_CONTROL_REG: a sleep state other than S5 write 0x2c ignored (1 so far)" in p.stderr, p.stderr
    assert "ACPI RESET_REG: not the reset value write 0x02 ignored (2 so far)" in p.stderr, p.stderr
    assert "write 0x14" not in p.stderr, p.stderr  # SLP_EN clear: not a request at all
    assert "powered off" not in p.stderr and "reset register" not in p.stderr, p.stderr
    assert "VM ended: guest requested reset (i8042) (exit status 0)" in p.stderr, p.stderr


def test_acpi_off_writes_no_tables_and_no_pm_device():
    """--acpi off: no RSDP handed over or found by the scan, and nothing on ports 0x600-0x602 (an S5 write and a
    reset write do not end the VM)."""
    p = run_acpi("--acpi", "off", "--rng", cpus=2, words="acpi_off=1 action=s5")
    assert_pass(p, ["rsdp_absent_without_acpi", "no_pm_device", "pm_writes_ignored_without_acpi"])
    out = p.stdout
    assert "acpi: CHECK rsdp_absent_without_acpi: PASS (handed 0x0, scan found 0x0)" in out, out
    assert "acpi: CHECK no_pm_device: PASS (port 0x600 reads 0xff)" in out, out
    # brisk logs each unhandled address once: 0x600 at its first access, the read
    assert "unhandled read from port 0x600" in p.stderr and "unhandled write to port 0x602" in p.stderr, p.stderr
    assert "VM ended: guest requested reset (i8042) (exit status 0)" in p.stderr, p.stderr


# ---- the guest's checks can fail: values the tables do not match ----

def assert_guest_fails(p, line):
    assert p.returncode == GUEST_FAIL, p.stdout + p.stderr
    assert "acpi: FAIL: see the CHECK lines above" in p.stdout, p.stdout
    assert line in p.stdout, p.stdout


def test_fails_when_the_madt_lists_other_cpus():
    p = boot("acpi", "--cpus", "2", "--cmdline", "cpus=3 action=s5", timeout=120)
    assert_guest_fails(p, "acpi: CHECK madt_cpus: FAIL (2 enabled local APICs, expected 3)")
    assert "powered off" not in p.stderr  # a failed run never takes its action


def test_fails_when_a_window_is_missing_from_the_dsdt():
    """A virtio_mmio.device= word with no LNRO0005 device behind it (the user's word comes first)."""
    p = boot("acpi", "--rng", "--cmdline", "cpus=1 virtio_mmio.device=4K@0xd0009000:12", timeout=120)
    assert_guest_fails(p, "acpi: CHECK dsdt_virtio_count: FAIL (1 LNRO0005 devices, 2 virtio_mmio.device= words)")
    assert re.search(r"^acpi: CHECK dsdt_virtio_window: FAIL \(VR00 .* word 4096@0xd0009000:12\)$", p.stdout,
                     re.M), p.stdout


def test_fails_when_tables_exist_but_acpi_off_is_claimed():
    p = boot("acpi", "--cmdline", "cpus=1 acpi_off=1", timeout=120)
    assert_guest_fails(p, "acpi: CHECK rsdp_absent_without_acpi: FAIL (handed 0xe0000, scan found 0xe0000)")
    assert "acpi: CHECK no_pm_device: FAIL (port 0x600 reads 0x0)" in p.stdout, p.stdout
