"""`brisk run --acpi on|off`: what each mode hands a Linux kernel and any other kernel (docs/boot.md).

conf-bzimage is a bzImage, so brisk treats it as Linux: it gets the Linux default command line, which the
guest prints ("conf-bzimage: cmdline [...]"). With ACPI (the default) the DSDT describes the virtio devices
and the kernel powers off and reboots through the FADT's registers: reboot=acpi, no virtio_mmio.device=
word; with --acpi off, reboot=k acpi=off and the words. A non-Linux kernel (the PVH test
guests) gets the virtio_mmio.device= words in both modes.
"""
import re

import pytest

from conftest import EXIT_USAGE, GUESTS, boot, run_brisk

LINUX_DEFAULT = "console=ttyS0 panic=1 pci=off i8042.noaux i8042.nomux i8042.dumbkbd"
RNG_WORD = "virtio_mmio.device=4K@0xd0001000:5"  # the first window and line (LAYOUT_VIRTIO_MMIO, devmgr.c)


def bzimage_cmdline(*opts):
    p = run_brisk("run", "--kernel", str(GUESTS / "conf-bzimage.img"), *opts)
    m = re.search(r"^conf-bzimage: cmdline \[(.*)\] len \d+$", p.stdout, re.M)
    assert m, p.stdout + p.stderr
    return m.group(1)


@pytest.mark.usefixtures("kvm")
def test_linux_default_with_acpi():
    assert bzimage_cmdline("--rng") == f"{LINUX_DEFAULT} reboot=acpi"
    assert bzimage_cmdline("--acpi", "on") == f"{LINUX_DEFAULT} reboot=acpi"


@pytest.mark.usefixtures("kvm")
def test_linux_default_without_acpi():
    assert bzimage_cmdline("--rng", "--acpi", "off") == f"{LINUX_DEFAULT} i8042.nopnp reboot=k acpi=off {RNG_WORD}"
    assert bzimage_cmdline("--acpi", "off") == f"{LINUX_DEFAULT} i8042.nopnp reboot=k acpi=off"


@pytest.mark.usefixtures("kvm")
def test_linux_user_cmdline_gets_only_device_words():
    """--cmdline replaces the default: nothing of it is added back, in either mode."""
    assert bzimage_cmdline("--cmdline", "x=1", "--rng") == "x=1"
    assert bzimage_cmdline("--cmdline", "x=1", "--rng", "--acpi", "off") == f"x=1 {RNG_WORD}"


@pytest.mark.usefixtures("kvm")
@pytest.mark.parametrize(
    "cmdline, words",
    [
        # Kata's fc.go kernel parameters: acpi=off, so the kernel ignores the DSDT and needs the words
        ("pci=off reboot=k panic=1 iommu=off net.ifnames=0 random.trust_cpu=on acpi=off", True),
        ("acpi=off acpi=force", False),  # the last of off/force wins (arch/x86/kernel/acpi/boot.c)
        ("acpi=noirq", False),  # ACPI still enumerates the devices
        ("x=1 -- acpi=off", False),  # after "--": init's argument, not the kernel's
    ],
)
def test_linux_cmdline_acpi_off_gets_device_words(cmdline, words):
    """A Linux command line that turns ACPI off gets the virtio_mmio.device= words even with brisk's ACPI."""
    got = bzimage_cmdline("--cmdline", cmdline, "--rng")
    if not words:
        assert got == cmdline
    elif " -- " in cmdline:
        assert got == cmdline.replace(" -- ", f" {RNG_WORD} -- ")
    else:
        assert got == f"{cmdline} {RNG_WORD}"


@pytest.mark.usefixtures("kvm")
def test_device_words_go_before_init_arguments():
    """With --acpi off the words go before "--": what follows it is init's (Linux kernel/params.c)."""
    assert bzimage_cmdline("--cmdline", "x=1 -- init", "--rng", "--acpi", "off") == f"x=1 {RNG_WORD} -- init"


@pytest.mark.usefixtures("kvm")
@pytest.mark.parametrize("mode", [[], ["--acpi", "on"], ["--acpi", "off"]], ids=["default", "on", "off"])
def test_other_kernels_get_device_words(mode):
    """The virtio-rng guest finds its device through the command-line word in every mode."""
    p = boot("virtio-rng", "--rng", *mode)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "virtio-rng: PASS" in p.stdout


@pytest.mark.parametrize("value", ["maybe", "", "ON", "1"])
def test_bad_acpi_value(value):
    p = run_brisk("run", "--acpi", value)
    assert p.returncode == EXIT_USAGE
    assert f"invalid --acpi '{value}': expected on or off" in p.stderr
    assert p.stdout == ""


def test_dump_refuses_acpi_off(tmp_path):
    """brisk acpi --dump describes a VM's tables; one started with --acpi off has none: refused, nothing written."""
    out = tmp_path / "tables"
    p = run_brisk("acpi", "--dump", str(out), "--acpi", "off")
    assert p.returncode == EXIT_USAGE
    assert "--acpi off: a VM started with these options gets no ACPI tables" in p.stderr
    assert not out.exists()
    p = run_brisk("acpi", "--dump", str(out), "--acpi", "on")
    assert p.returncode == 0, p.stderr
    assert sorted(f.name for f in out.iterdir()) == ["apic.dat", "dsdt.dat", "facp.dat", "rsdp.dat", "xsdt.dat"]
