"""The real-kernel tier (docs/boot.md "Booting a real Linux kernel"): paths, the KVM probe, boot helpers.

Environment:
  BRISK                 the brisk binary (default build/brisk)
  BUILD, BRISK_BUILD    the build directory (default build; run.sh passes BRISK_BUILD into the nested VM,
                        which passes on BRISK_* variables only)
  BRISK_LINUX_DIR       where fetch-kernel.sh / mkinitramfs.sh left their output (default build/linux)
  BRISK_LINUX_TIMEOUT   seconds one Linux boot may take (default 300: a boot under nested TCG takes 10-30 s
                        on an idle machine, more on a loaded one)
  BRISK_LINUX_SKIP      when set, every test skips with this reason (tests/linux/run.sh sets it when the
                        kernel could not be fetched or the tier must not run)
"""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import hangdiag  # noqa: E402  (tests/hangdiag.py: a timed-out boot is looked at before it is killed)

BUILD = ROOT / (os.environ.get("BUILD") or os.environ.get("BRISK_BUILD") or "build")
BRISK = Path(os.environ.get("BRISK", BUILD / "brisk")).resolve()
LINUX = Path(os.environ.get("BRISK_LINUX_DIR", BUILD / "linux")).resolve()
INT3PROBE = BUILD / "guests" / "int3probe.elf"
TIMEOUT = float(os.environ.get("BRISK_LINUX_TIMEOUT", "300"))

EXIT_INTERNAL_ERROR = 10  # include/brisk/exitcode.h: KVM_EXIT_INTERNAL_ERROR

# brisk's default Linux command line (KERNEL_LINUX_CMDLINE, include/brisk/kernel.h); --cmdline replaces it.
# As `brisk run --help` states it (below, once brisk_default_cmdline exists); this when it does not.
DEFAULT_CMDLINE = ("console=ttyS0 reboot=k panic=1 pci=off i8042.noaux i8042.nomux i8042.nopnp "
                   "i8042.dumbkbd acpi=off")
MEMORY = "256M"  # Debian's 6.1 kernel needs [16 MiB, 80 MiB) for its init_size window, then room to run

# The markers tests/linux/init.c writes: 8-bit ones through /dev/port, one 32-bit one through /dev/mem.
PORT_MARKERS = [0x1, 0x2, 0x3, 0x5]
MMIO_MARKER = 0xB15C0004
HELLO = "brisk-init: hello from init"

_report = []
_hung = []  # a boot that timed out: the later ones fail at once instead of each waiting TIMEOUT


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): pytest-timeout's per-test limit")


def pytest_collection_modifyitems(items):
    # pytest.ini's suite-wide pytest-timeout (600 s) must not cut a boot short: brisk's own timeout
    # below (BRISK_LINUX_TIMEOUT) fires first and fails the test with the console output so far.
    for item in items:
        if item.fspath and Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.timeout(TIMEOUT + 360))


def probe_linux_kvm():
    """None if this host's KVM can run Linux, else the one-line reason, found by probing (never by host name)."""
    if os.environ.get("BRISK_LINUX_SKIP"):
        return os.environ["BRISK_LINUX_SKIP"]
    if not os.path.exists("/dev/kvm"):
        return "no /dev/kvm"
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC))
    except OSError as e:
        return f"/dev/kvm unusable on this host: {e.strerror}"
    if not BRISK.exists():
        pytest.fail(f"{BRISK} missing: run make")
    if not INT3PROBE.exists():
        pytest.fail(f"{INT3PROBE} missing: run make guests")
    # A guest that executes int3 at CPL 0: Linux does too (alternatives self-test, kprobes, jump labels).
    p = subprocess.run([str(BRISK), "run", "--kernel", str(INT3PROBE)], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=300)
    if p.returncode == EXIT_INTERNAL_ERROR:
        return ("KVM on this host cannot run Linux: int3 at CPL 0 ends in KVM_EXIT_INTERNAL_ERROR "
                "(emulation failure)")
    if p.returncode != 0 or "int3probe: PASS" not in p.stdout:
        pytest.fail(f"int3 probe guest failed (exit {p.returncode}):\n{p.stdout}\n{p.stderr}")
    return None


@pytest.fixture(scope="session")
def linux_kvm():
    reason = probe_linux_kvm()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def initramfs():
    path = LINUX / "initramfs.cpio.gz"
    if not path.exists():
        pytest.skip(f"{path} missing: run make check-linux (tests/linux/mkinitramfs.sh)")
    return path


def brisk_run_help():
    """`brisk run --help` (its text names the options this brisk has and its default Linux command line)."""
    p = subprocess.run([str(BRISK), "run", "--help"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=60)
    return p.stdout + p.stderr


def brisk_default_cmdline(help_text):
    """brisk's default Linux command line as its help states it; DEFAULT_CMDLINE when the help does not say."""
    m = re.search(r'which is\s+"([^"]+)"\s+for a Linux kernel', help_text)
    return m.group(1) if m else DEFAULT_CMDLINE


if BRISK.exists():
    try:
        DEFAULT_CMDLINE = brisk_default_cmdline(brisk_run_help())
    except (OSError, subprocess.SubprocessError):
        pass


def kernel_config():
    """The kernel's build configuration (build/linux/config from the package) as {CONFIG_X: value}."""
    path = LINUX / "config"
    return dict(re.findall(r"^(CONFIG_\w+)=(.*)$", path.read_text(), re.M)) if path.exists() else {}


def kernel(name):
    """build/linux/vmlinuz or vmlinux; skips when fetch-kernel.sh did not produce it."""
    path = LINUX / name
    if not path.exists():
        if name == "vmlinux":
            pytest.skip("the kernel has no PVH note (or no vmlinux could be extracted): bzImage only")
        pytest.skip(f"{path} missing: run make check-linux (tests/linux/fetch-kernel.sh)")
    return path


class Boot:
    """One Linux boot: exit status, console output, timeline markers, wall time."""

    def __init__(self, proc, wall):
        self.status = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.wall = wall
        # "boot marker 0x1   24828525.2" (brisk run --timeline; microseconds since process start)
        self.markers = [(int(v, 16), float(t)) for v, t in
                        re.findall(r"^boot marker (0x[0-9a-fA-F]+)\s+([0-9.]+)", proc.stdout, re.M)]
        m = re.search(r"^brisk-init: uptime ([0-9.]+) s", proc.stdout, re.M)
        self.uptime = float(m.group(1)) if m else None
        m = re.search(r"^first serial byte\s+([0-9.]+)", proc.stdout, re.M)
        self.first_serial_us = float(m.group(1)) if m else None

    def describe(self):
        tail = "\n".join(self.stdout.splitlines()[-60:])
        return f"exit status {self.status}\n--- stdout (tail) ---\n{tail}\n--- stderr ---\n{self.stderr[-3000:]}"


def boot_linux(kernel_path, initrd, *args, label, timeout=TIMEOUT, wrap=(), profile=None):
    """Boots kernel_path with brisk, --timeline on; returns a Boot. Records a report line.
    `wrap`: a command brisk runs under (e.g. `ip netns exec NS`). `profile`: a path: the boot runs under
    `brisk profile --json PATH` instead (its report's timeline gives the markers)."""
    how = ["profile", "--json", str(profile)] if profile else ["run", "--timeline"]
    cmd = [*wrap, str(BRISK), how[0], "--kernel", str(kernel_path), "--initrd", str(initrd), "--memory", MEMORY,
           *how[1:], *args]
    if _hung:
        pytest.fail(f"not booted: an earlier boot ({_hung[0]}) did not end within {TIMEOUT:.0f} s")
    t0 = time.monotonic()
    try:
        p = hangdiag.run(cmd, stdin=subprocess.DEVNULL, timeout=timeout, out_files=True)
    except hangdiag.Timeout as e:
        _hung.append(label)
        _report.append(f"{label}: no exit within {timeout:.0f} s")
        out = e.stdout or ""
        pytest.fail(f"{label}: no exit within {timeout:.0f} s (BRISK_LINUX_TIMEOUT); console so far:\n"
                    + "\n".join(out.splitlines()[-40:]) + "\n--- scripts/kvm-diag.sh before the kill ---\n"
                    + e.diag)
    for marker in ("AddressSanitizer", "runtime error:", "UndefinedBehaviorSanitizer"):
        assert marker not in p.stderr, f"sanitizer report:\n{p.stderr}"
    b = Boot(p, time.monotonic() - t0)
    init_us = next((t for v, t in b.markers if v == 0x1), None)
    _report.append(f"{label}: exit {b.status}, wall {b.wall:.1f} s, "
                   + (f"init's first marker at {init_us / 1e6:.2f} s, " if init_us is not None else "")
                   + (f"guest uptime at init {b.uptime:.2f} s" if b.uptime is not None else "init did not run"))
    return b


def pytest_terminal_summary(terminalreporter):
    if _report:
        where = "nested KVM (scripts/nested-kvm.sh, QEMU TCG)" if os.environ.get("BRISK_IN_NESTED") else "this host"
        terminalreporter.write_sep("-", f"Linux boots on {where}")
        for line in _report:
            terminalreporter.write_line(line)
