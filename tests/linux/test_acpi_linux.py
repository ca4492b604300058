"""ACPI on a real kernel: Debian's stock kernel described by brisk's ACPI tables (docs/acpi.md).

brisk's default command line has no acpi=off and says reboot=acpi: the kernel must find the RSDP brisk
handed over, take its CPUs from the MADT, power off through the FADT's sleep control register (S5) and
reboot through its reset register. --acpi off must still give the MP table path. Three boots; the virtio devices
the DSDT lists are checked by test_virtio_linux.py (one boot, bound from LNRO0005 devices).
brisk's own account of how the VM ended is its info log line "VM ended: REASON (exit status N)".
"""
import pytest

from .conftest import DEFAULT_CMDLINE, HELLO, boot_linux, kernel

pytestmark = pytest.mark.usefixtures("linux_kvm")

RSDP_LINE = "ACPI: RSDP 0x00000000000E0000"  # drivers/acpi/acpica/tbprint.c: the address brisk handed over
MADT_SMP = "ACPI: Using ACPI (MADT) for SMP configuration information"  # arch/x86/kernel/acpi/boot.c
S5 = "ACPI: PM: (supports S0 S5)"  # drivers/acpi/sleep.c: the DSDT's \_S5 (and S0, always)


def ended(b, reason):
    assert b.status == 0, b.describe()
    assert f"VM ended: {reason} (exit status 0)" in b.stderr, b.describe()
    assert HELLO in b.stdout, b.describe()


def test_default_cmdline_is_acpi():
    words = DEFAULT_CMDLINE.split()
    assert "acpi=off" not in words and "reboot=k" not in words and "reboot=acpi" in words


def test_acpi_four_cpus_power_off(initramfs):
    """--cpus 4 through the MADT; the init's reboot(RB_POWER_OFF) reaches brisk as ACPI S5."""
    b = boot_linux(kernel("vmlinuz"), initramfs, "--cpus", "4", "--log-level", "info", "--cmdline",
                   DEFAULT_CMDLINE + " brisk.poweroff=1", label="bzImage, ACPI, --cpus 4, power off")
    for line in (RSDP_LINE, MADT_SMP, "smp: Brought up 1 node, 4 CPUs", S5, "reboot: Power down",
                 "pnp: PnP ACPI: found 3 devices",  # the DSDT's COM1, PS2K and RTC (no virtio device here)
                 "i8042: PNP: PS/2 Controller [PNP0303:PS2K] at 0x60,0x64", "serio: i8042 KBD port at 0x60,0x64"):
        assert line in b.stdout, f"{line!r} missing\n{b.describe()}"
    assert "probe of i8042 failed" not in b.stdout, b.describe()  # i8042.nopnp with ACPI: request_irq(1) fails
    ended(b, "guest powered off (ACPI S5)")


def test_acpi_two_cpus_reboot(initramfs):
    """PVH (rsdp_paddr), --cpus 2, the default command line: reboot(RB_AUTOBOOT) goes through the ACPI
    reset register (reboot=acpi; without it Linux on a hardware-reduced machine tries EFI, then the BIOS
    reset vector, and hangs: found by this tier)."""
    path = kernel("vmlinux")
    b = boot_linux(path, initramfs, "--cpus", "2", "--log-level", "info", label="PVH, ACPI, --cpus 2, reboot")
    assert f"brisk-init: cmdline {DEFAULT_CMDLINE}" in b.stdout, b.describe()
    for line in (RSDP_LINE, MADT_SMP, "smp: Brought up 1 node, 2 CPUs", "reboot: Restarting system"):
        assert line in b.stdout, f"{line!r} missing\n{b.describe()}"
    ended(b, "guest requested reset (ACPI reset register)")


def test_mp_table_mode(initramfs):
    """--acpi off: no tables, acpi=off and reboot=k on the default command line, CPUs from the MP table,
    the reboot through the i8042."""
    b = boot_linux(kernel("vmlinuz"), initramfs, "--cpus", "2", "--acpi", "off", "--log-level", "info",
                   label="bzImage, --acpi off, --cpus 2, reboot")
    mp_cmdline = DEFAULT_CMDLINE.replace("reboot=acpi", "i8042.nopnp reboot=k acpi=off")
    assert f"brisk-init: cmdline {mp_cmdline}" in b.stdout, b.describe()
    assert RSDP_LINE not in b.stdout and MADT_SMP not in b.stdout, b.describe()
    for line in ("smp: Brought up 1 node, 2 CPUs", "reboot: Restarting system"):
        assert line in b.stdout, f"{line!r} missing\n{b.describe()}"
    ended(b, "guest requested reset (i8042)")
