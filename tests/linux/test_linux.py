"""The real-kernel tier: Debian's stock kernel boots under brisk to tests/linux/init.c and ends the VM.

Run by `make check-linux` (tests/linux/run.sh), which fetches the kernel and builds the initramfs first.
Skips, with the reason found by probing, where this host's KVM cannot run Linux (conftest.probe_linux_kvm).
"""
import json

import pytest

from .conftest import (BRISK, DEFAULT_CMDLINE, HELLO, LINUX, MMIO_MARKER, PORT_MARKERS, boot_linux, kernel)

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


def test_pvh(initramfs, tmp_path):
    """The uncompressed vmlinux through its PVH entry (Debian: CONFIG_PVH=y), under `brisk profile` with no
    symbol file (Debian's vmlinux is stripped, its System.map a stub): the kernel's own kallsyms, read from
    guest memory, names the exits; the caller probes attribute the CPUIDs of the out-of-line paravirt
    native_cpuid to the functions that call it; the findings include KVM's page sizes (docs/profiler.md)."""
    out = tmp_path / "profile.json"
    init = LINUX / "init"  # the initramfs's /init (mkinitramfs.sh leaves it there): static, with symbols
    more = ("--user-symbols", str(init)) if init.exists() else ()
    b = boot_linux(kernel("vmlinux"), initramfs, *more, label="PVH (vmlinux) under brisk profile, --cpus 1",
                   profile=out)
    check_init_ran(b)
    assert f"brisk-init: cmdline {DEFAULT_CMDLINE}" in b.stdout
    rep = json.loads(out.read_text())
    if not rep["tracing"]["available"]:
        pytest.skip(f"no kvm tracepoints here: {rep['tracing']['reason']}")
    sym = rep["symbols"]
    assert (sym["source"] or "").startswith("kallsyms"), sym
    assert sym["kernel_exits"] > 1000 and sym["kernel_named_pct"] >= 95, sym
    sites = {s["symbol"].split("+")[0]: s for s in rep["probes"]["sites"] if s["symbol"]}
    assert "native_cpuid" in sites and sites["native_cpuid"]["hits"] > 0, rep["probes"]
    # CPUIDs at native_cpuid (by input, every RIP) and those a probe attributed to a caller
    at_helper = sum(r["count"] for row in rep["cpuid"] for r in row["rips"]
                    if (r["symbol"] or "").startswith("native_cpuid+"))
    with_caller = sum(c["count"] for row in rep["cpuid"] for c in row.get("callers", []))
    # the CPUIDs before the probe went in have no caller: 59 to 256 of 654 in quiet nested runs (CPU time)
    assert at_helper > 100 and with_caller >= at_helper // 4, (at_helper, with_caller)
    callers = [r for r in rep["redundant"] if (r["symbol"] or "").startswith("native_cpuid+") and r["caller"]]
    assert callers and all(r["caller_symbol"] and r["stack"] for r in callers), rep["redundant"][:5]
    ids = [f["id"] for f in rep["findings"]]
    assert "page_sizes" in ids, rep["findings"]
    # init's own CPUIDs (static glibc's cache queries) attributed to its address space and named from its ELF
    if more:
        user_sites = [x for sp in rep["user"]["address_spaces"] for x in sp["sites"]]
        assert any(x["reason"] == "cpuid" and x["symbol"] and "@phys" not in x["symbol"] for x in user_sites), \
            rep["user"]
    assert "Findings" in b.stdout and "called from" in b.stdout


def test_bzimage_smp(initramfs):
    """Two vCPUs: Linux finds both through the MP table and starts the AP with INIT-SIPI-SIPI."""
    b = boot_linux(kernel("vmlinuz"), initramfs, "--cpus", "2", label="bzImage (vmlinuz), --cpus 2")
    check_init_ran(b)
    assert "smp: Brought up 1 node, 2 CPUs" in b.stdout, b.describe()


def test_cmdline_reaches_init(initramfs, tmp_path):
    """--cmdline replaces the default; init sees exactly what was passed. The boot runs under
    `brisk trace -- brisk run ...` with no symbol file: trace reads the guest kernel's kallsyms from the traced
    process's memory (/proc/PID/mem) while it runs, and names the exits with it."""
    cmdline = DEFAULT_CMDLINE + " quiet brisk.test=42"
    path = kernel("vmlinux") if (LINUX / "vmlinux").exists() else kernel("vmlinuz")
    out = tmp_path / "trace.json"
    b = boot_linux(path, initramfs, "--cmdline", cmdline, label=f"{path.name}, --cmdline '... quiet', traced",
                   wrap=(str(BRISK), "trace", "--json", str(out), "--"))
    check_init_ran(b)  # "reboot: Restarting system" is pr_emerg: printed even with quiet
    assert f"brisk-init: cmdline {cmdline}" in b.stdout, b.describe()
    rep = json.loads(out.read_text())
    if not rep["tracing"]["available"]:
        pytest.skip(f"no kvm tracepoints here: {rep['tracing']['reason']}")
    assert (rep["symbols"]["source"] or "").startswith("kallsyms"), (rep["symbols"], rep["warnings"])
    assert rep["symbols"]["kernel_named_pct"] >= 95, rep["symbols"]
