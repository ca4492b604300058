"""The real-kernel tier: Debian's stock kernel boots under brisk to tests/linux/init.c and ends the VM.

Run by `make check-linux` (tests/linux/run.sh), which fetches the kernel and builds the initramfs first.
Skips, with the reason found by probing, where this host's KVM cannot run Linux (conftest.probe_linux_kvm).
"""
import pytest

from .conftest import (DEFAULT_CMDLINE, HELLO, LINUX, MMIO_MARKER, PORT_MARKERS, boot_linux, kernel)

pytestmark = pytest.mark.usefixtures("linux_kvm")


def check_init_ran(b):
    assert b.status == 0, f"brisk did not end cleanly:\n{b.describe()}"
    assert HELLO in b.stdout, f"init did not run:\n{b.describe()}"
    assert "brisk-init: cmdline " in b.stdout and b.uptime is not None, b.describe()
    seen = [v for v, _ in b.markers]
    # the 8-bit /dev/port markers arrive, in order
    assert [v for v in seen if v in PORT_MARKERS] == PORT_MARKERS, f"markers {[hex(v) for v in seen]}\n{b.describe()}"
    times = [t for v, t in b.markers]
    assert times == sorted(times)
    # the 32-bit marker through /dev/mem (Debian: CONFIG_DEVMEM=y) arrives whole when init says it wrote it
    if "32-bit MMIO marker 0xb15c0004 written" in b.stdout:
        assert MMIO_MARKER in seen, f"MMIO marker missing: {[hex(v) for v in seen]}"
    # reboot(RB_AUTOBOOT): reboot=acpi (ACPI reset register) or reboot=k (i8042) ends the VM (exit 0 above)
    assert "reboot: Restarting system" in b.stdout, b.describe()


def test_bzimage(initramfs):
    """vmlinuz as Debian ships it, through the 64-bit boot protocol, with brisk's default command line.
    No --rng: the boot-loader RNG seed (setup_data SETUP_RNG_SEED, docs/boot.md) makes the CRNG ready
    before init runs."""
    b = boot_linux(kernel("vmlinuz"), initramfs, label="bzImage (vmlinuz), --cpus 1")
    check_init_ran(b)
    assert f"brisk-init: cmdline {DEFAULT_CMDLINE}" in b.stdout
    crng = b.stdout.find("crng init done")
    assert 0 <= crng < b.stdout.find(HELLO), f"the CRNG was not ready before init:\n{b.describe()}"


def test_pvh(initramfs):
    """The uncompressed vmlinux through its PVH entry (Debian: CONFIG_PVH=y)."""
    b = boot_linux(kernel("vmlinux"), initramfs, label="PVH (vmlinux), --cpus 1")
    check_init_ran(b)
    assert f"brisk-init: cmdline {DEFAULT_CMDLINE}" in b.stdout


def test_bzimage_smp(initramfs):
    """Two vCPUs: Linux finds both through the MP table and starts the AP with INIT-SIPI-SIPI."""
    b = boot_linux(kernel("vmlinuz"), initramfs, "--cpus", "2", label="bzImage (vmlinuz), --cpus 2")
    check_init_ran(b)
    assert "smp: Brought up 1 node, 2 CPUs" in b.stdout, b.describe()


def test_cmdline_reaches_init(initramfs):
    """--cmdline replaces the default; init sees exactly what was passed."""
    cmdline = DEFAULT_CMDLINE + " quiet brisk.test=42"
    path = kernel("vmlinux") if (LINUX / "vmlinux").exists() else kernel("vmlinuz")
    b = boot_linux(path, initramfs, "--cmdline", cmdline, label=f"{path.name}, --cmdline '... quiet'")
    check_init_ran(b)  # "reboot: Restarting system" is pr_emerg: printed even with quiet
    assert f"brisk-init: cmdline {cmdline}" in b.stdout, b.describe()
