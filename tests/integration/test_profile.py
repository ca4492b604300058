"""brisk profile / brisk trace on the storm guests: every CPUID/RDMSR counted, attributed to the probe, ranked first.

Tracing needs KVM, root and tracefs with the kvm events; each test skips with the probed reason otherwise.
The bad-input tests need none of them.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import BRISK, EXIT_GUEST_OK, EXIT_USAGE, KVM_REASON, guest, run_brisk

TRACEFS = "/sys/kernel/tracing"
STORM_CALLS = 20  # 20 x 256 CPUIDs: a few seconds even where every exit is slow (nested TCG)
MSR_CALLS = 100


def probe_tracing():
    """None if the kvm tracepoints can be used here, else why (found by trying)."""
    if KVM_REASON:
        return KVM_REASON
    if os.geteuid() != 0:
        return "tracing the kvm events needs root"
    if not os.path.isdir(os.path.join(TRACEFS, "events")):
        # An empty mount point (as in scripts/nested-kvm.sh): mount it, as ENVIRONMENT.md says.
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True)
    if not os.path.isdir(os.path.join(TRACEFS, "events", "kvm")):
        return f"no kvm events under {TRACEFS} (tracefs not mounted or kvm not loaded)"
    if not os.path.isdir(os.path.join(TRACEFS, "instances")):
        return f"{TRACEFS} has no instances directory"
    return None


TRACE_REASON = probe_tracing()


@pytest.fixture
def tracing():
    if TRACE_REASON:
        pytest.skip(TRACE_REASON)


def guest_count(serial_path, what):
    text = open(serial_path).read()
    m = re.search(rf"\b{what}=(\d+)", text)
    assert m, f"guest did not report its {what} count:\n{text}"
    return int(m.group(1))


def attributed(rows, symbol_prefix):
    """Executions in cpuid/msr rows whose RIP resolves into symbol_prefix."""
    return sum(r["count"] for row in rows for r in row["rips"] if (r["symbol"] or "").startswith(symbol_prefix))


def no_instances_left():
    inst = os.path.join(TRACEFS, "instances")
    return [d for d in os.listdir(inst) if d.startswith("brisk-")] if os.path.isdir(inst) else []


def check_cpuid_report(rep, executed):
    assert rep["schema"] == "brisk-profile/1"
    assert rep["tracing"]["available"], rep["tracing"]["reason"]
    assert rep["tracing"]["lost_events"] == 0
    assert attributed(rep["cpuid"], "probe_hypervisor+") == executed
    top = rep["redundant"][0]
    assert top["kind"] == "cpuid" and top["symbol"].startswith("probe_hypervisor+")
    assert top["count"] == executed
    assert top["distinct_inputs"] == 256 and top["deterministic"] and top["cacheable"] == executed - 256


@pytest.mark.usefixtures("tracing")
def test_profile_cpuid_storm(tmp_path):
    out, serial = tmp_path / "p.json", tmp_path / "serial"
    p = run_brisk("profile", "--json", str(out), "--kernel", guest("cpuid-storm"), "--cmdline",
                  f"calls={STORM_CALLS}", "--serial", f"file:{serial}", timeout=600)
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    executed = guest_count(serial, "cpuid")
    assert executed == STORM_CALLS * 256
    rep = json.loads(out.read_text())
    check_cpuid_report(rep, executed)
    assert "probe_hypervisor+" in p.stdout and "Redundant work" in p.stdout
    assert rep["phases"] and rep["exits"]["by_address"] and rep["ioctls"]["KVM_RUN"] >= 1
    assert rep["kvm_stats"]["available"], rep["kvm_stats"]["reason"]
    assert no_instances_left() == []


OBJCOPY = shutil.which("objcopy")


@pytest.mark.usefixtures("tracing")
@pytest.mark.skipif(OBJCOPY is None, reason="objcopy (binutils) not installed")
def test_profile_elf32_guest_symbolised(tmp_path):
    """A 32-bit PVH ELF (the storm guest converted to ELF32/EM_386) is symbolised from its own .symtab."""
    elf32, out, serial = tmp_path / "cpuid-storm32.elf", tmp_path / "p.json", tmp_path / "serial"
    subprocess.run([OBJCOPY, "-O", "elf32-i386", guest("cpuid-storm"), str(elf32)], check=True)
    assert elf32.read_bytes()[4] == 1  # EI_CLASS: ELFCLASS32
    p = run_brisk("profile", "--json", str(out), "--kernel", str(elf32), "--cmdline", "calls=2", "--serial",
                  f"file:{serial}", timeout=600)
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    rep = json.loads(out.read_text())
    assert not any("no symbols" in w for w in rep["warnings"]), rep["warnings"]
    check_cpuid_report(rep, guest_count(serial, "cpuid"))


@pytest.mark.usefixtures("tracing")
def test_profile_msr_storm(tmp_path):
    out, serial = tmp_path / "p.json", tmp_path / "serial"
    p = run_brisk("profile", "--json", str(out), "--kernel", guest("msr-storm"), "--cmdline",
                  f"calls={MSR_CALLS}", "--serial", f"file:{serial}", timeout=600)
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    executed = guest_count(serial, "rdmsr")
    rep = json.loads(out.read_text())
    assert rep["tracing"]["lost_events"] == 0
    assert attributed(rep["msr"], "probe_msrs+") == executed
    top = rep["redundant"][:2]
    assert [r["kind"] for r in top] == ["msr", "msr"]
    assert all(r["symbol"].startswith("probe_msrs+") and r["count"] == MSR_CALLS for r in top)


@pytest.mark.usefixtures("tracing")
def test_trace_command_counts_the_same(tmp_path):
    out, serial = tmp_path / "t.json", tmp_path / "serial"
    storm = guest("cpuid-storm")
    p = run_brisk("trace", "--json", str(out), "--symbols", storm, "--", str(BRISK), "run", "--kernel", storm,
                  "--cmdline", f"calls={STORM_CALLS}", "--serial", f"file:{serial}", timeout=600)
    assert p.returncode == 0, p.stderr
    rep = json.loads(out.read_text())
    assert rep["command"] == "trace" and rep["time_origin"] == "trace_start"
    check_cpuid_report(rep, guest_count(serial, "cpuid"))
    assert no_instances_left() == []


QEMU = shutil.which("qemu-system-x86_64")
QEMU_ARGS = ["-accel", "kvm", "-machine", "microvm,acpi=off,pit=off,pic=off,rtc=off", "-cpu",
             "host,-arch-capabilities", "-m", "128M", "-nodefaults", "-no-user-config", "-display", "none",
             "-device", "isa-debug-exit,iobase=0xf4,iosize=4"]


@pytest.mark.usefixtures("tracing")
@pytest.mark.skipif(QEMU is None, reason="qemu-system-x86_64 not installed")
def test_trace_qemu(tmp_path):
    out, serial = tmp_path / "q.json", tmp_path / "serial"
    storm = guest("cpuid-storm")
    cmd = [QEMU, *QEMU_ARGS, "-serial", f"file:{serial}", "-kernel", storm, "-append", f"calls={STORM_CALLS}"]
    p = run_brisk("trace", "--json", str(out), "--symbols", storm, "--", *cmd, timeout=600)
    if not serial.exists() or "cpuid=" not in serial.read_text():
        pytest.skip(f"QEMU did not run the guest with KVM here: {p.stderr[-500:]}")
    check_cpuid_report(json.loads(out.read_text()), guest_count(serial, "cpuid"))


@pytest.mark.usefixtures("kvm")
def test_profile_without_tracing_reports_the_rest(tmp_path):
    out = tmp_path / "p.json"
    p = run_brisk("profile", "--no-trace", "--json", str(out), "--kernel", guest("hello"), "--serial", "none")
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    rep = json.loads(out.read_text())
    assert rep["tracing"]["available"] is False and rep["tracing"]["reason"]
    assert any("not traced" in w for w in rep["warnings"])
    ports = {(r["addr"], r["dir"]) for r in rep["exits"]["by_address"]}
    assert (0x3F8, "write") in ports
    assert rep["ioctls"]["KVM_RUN"] >= 1 and rep["phases"][0]["id"] == "exec"
    assert "unavailable: --no-trace given" in p.stdout


# ---- bad input (no KVM needed) -------------------------------------------------------------------

def test_trace_pid_not_kvm():
    p = run_brisk("trace", "--pid", str(os.getpid()))
    assert p.returncode == EXIT_USAGE
    assert "not a KVM process" in p.stderr and "anon_inode:kvm-vm" in p.stderr


def test_trace_pid_missing():
    p = run_brisk("trace", "--pid", "999999999")
    assert p.returncode == EXIT_USAGE and "no such process" in p.stderr


def test_trace_usage():
    assert run_brisk("trace").returncode == EXIT_USAGE
    assert run_brisk("trace", "--pid", "1", "--", "true").returncode == EXIT_USAGE


def test_profile_garbage_symbols(tmp_path):
    junk = tmp_path / "System.map"
    junk.write_text("this is not a symbol file\n")
    p = run_brisk("profile", "--symbols", str(junk), "--kernel", guest("hello"))
    assert p.returncode == EXIT_USAGE
    assert str(junk) in p.stderr and "not a System.map or ELF" in p.stderr


def test_profile_bad_report_option():
    p = run_brisk("profile", "--bucket-us", "0")
    assert p.returncode == EXIT_USAGE and "--bucket-us" in p.stderr
