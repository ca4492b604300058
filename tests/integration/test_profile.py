"""brisk profile / brisk trace on the storm guests: every CPUID/RDMSR counted, attributed to the probe, ranked first.

Tracing needs KVM, root and tracefs with the kvm events; each test skips with the probed reason otherwise.
The bad-input tests need none of them.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import hangdiag
import pytest

from conftest import (BRISK, EXIT_GUEST_OK, EXIT_HOST, EXIT_STOPPED, EXIT_USAGE, KVM_REASON, check_sanitizers,
                      debug_exit_status, guest, run_brisk)

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
    """brisk-PID instances whose brisk is gone (leaked); other brisk runs may be tracing right now."""
    inst = os.path.join(TRACEFS, "instances")
    names = os.listdir(inst) if os.path.isdir(inst) else []
    return [d for d in names if d.startswith("brisk-") and not os.path.exists(f"/proc/{d[6:]}")]


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


@pytest.mark.usefixtures("tracing")
def test_profile_callers_behind_a_shared_helper(tmp_path):
    """Seed 000's scan hidden behind one out-of-line helper (guests/cpuid-helper.c, as Linux's paravirt
    native_cpuid): by instruction every CPUID is at native_cpuid; the caller probes split them by call site, and
    the scan's caller, with the stack above it, comes first. cpu_features and tsc_khz ask once: not redundant."""
    out, serial = tmp_path / "p.json", tmp_path / "serial"
    p = run_brisk("profile", "--json", str(out), "--kernel", guest("cpuid-helper"), "--cmdline",
                  f"calls={STORM_CALLS}", "--serial", f"file:{serial}", timeout=600)
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    executed, scan = guest_count(serial, "cpuid"), guest_count(serial, "scan")
    assert scan == STORM_CALLS * 256 and executed == scan + 6
    rep = json.loads(out.read_text())
    assert rep["tracing"]["lost_events"] == 0
    assert attributed(rep["cpuid"], "native_cpuid+") == executed  # by instruction: all at the helper
    probes = rep["probes"]
    assert [s["symbol"].split("+")[0] for s in probes["sites"]] == ["native_cpuid"], probes
    top = rep["redundant"][0]
    assert top["symbol"].startswith("native_cpuid+") and top["caller_symbol"].startswith("hypervisor_base+"), top
    stack = [f["symbol"] for f in top["stack"]]
    assert stack[0] == top["caller_symbol"] and any(s.startswith("pci_conf_read+") for s in stack), stack
    assert top["distinct_inputs"] == 256 and top["deterministic"] and top["cacheable"] == top["count"] - 256
    # How many scan CPUIDs precede the probe depends on how fast the trace reader and the prober get CPU time:
    # ~30 with the plain build in the nested harness, 1,732 once under ASan there. A quarter at least.
    assert top["count"] >= scan // 4, f"the probe came late: {top['count']} of {scan} scan CPUIDs attributed"
    assert probes["matched"] >= top["count"] and probes["unmatched"] == 0 and probes["dropped"] == 0
    others = [r for r in rep["redundant"] if (r["caller_symbol"] or "").startswith(("cpu_features", "tsc_khz"))]
    assert others == [], others
    assert "hypervisor_base+" in p.stdout and "pci_conf_read+" in p.stdout


@pytest.mark.usefixtures("tracing")
def test_profile_no_callers_patches_nothing(tmp_path):
    """--no-callers: no probe, every CPUID of the helper in one group at the exiting instruction."""
    out, serial = tmp_path / "p.json", tmp_path / "serial"
    p = run_brisk("profile", "--no-callers", "--json", str(out), "--kernel", guest("cpuid-helper"), "--cmdline",
                  "calls=4", "--serial", f"file:{serial}", timeout=600)
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    rep = json.loads(out.read_text())
    assert rep["probes"]["enabled"] is False and rep["probes"]["sites"] == []
    top = rep["redundant"][0]
    assert top["symbol"].startswith("native_cpuid+") and top["caller"] is None
    assert top["count"] == guest_count(serial, "cpuid")


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
             "-no-reboot", "-device", "isa-debug-exit,iobase=0xf4,iosize=4"]


@pytest.mark.usefixtures("tracing")
@pytest.mark.skipif(QEMU is None, reason="qemu-system-x86_64 not installed")
def test_trace_qemu(tmp_path):
    out, serial = tmp_path / "q.json", tmp_path / "serial"
    storm = guest("cpuid-storm")
    cmd = [QEMU, *QEMU_ARGS, "-serial", f"file:{serial}", "-kernel", storm, "-append", f"calls={STORM_CALLS}"]
    p = run_brisk("trace", "--json", str(out), "--symbols", storm, "--", *cmd, timeout=600)
    if not serial.exists() or not serial.read_text():
        pytest.skip(f"QEMU did not run the guest with KVM here: {p.stderr[-500:]}")
    # -no-reboot: a guest that resets ends QEMU (by default QEMU would run it again, doubling the CPUIDs)
    assert "cpuid=" in serial.read_text(), f"the guest did not finish under QEMU:\n{serial.read_text()}{p.stderr}"
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
    # the host's page faults: the process's, and the one vCPU thread's as it ended (KVM's faults for it count)
    pf = rep["page_faults"]
    assert pf["minor"] > 0 and [v["vcpu"] for v in pf["vcpus"]] == [0], pf
    assert pf["vcpus"][0]["minor"] <= pf["minor"] and "Page faults (host)" in p.stdout


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


@pytest.mark.security
def test_user_symbols_garbage_refused(tmp_path):
    """--user-symbols is host input read by the same loader as --symbols: garbage is refused before boot."""
    junk = tmp_path / "init"
    junk.write_bytes(b"\x7fELF" + b"\xff" * 60)  # an ELF magic, nothing valid after it
    for cmd in (["profile", "--user-symbols", str(junk), "--kernel", guest("hello")],
                ["trace", "--user-symbols", str(junk), "--pid", "1"]):
        p = run_brisk(*cmd)
        assert p.returncode == EXIT_USAGE, p.stderr
        assert "--user-symbols" in p.stderr and str(junk) in p.stderr, p.stderr


def test_profile_bad_report_option():
    p = run_brisk("profile", "--bucket-us", "0")
    assert p.returncode == EXIT_USAGE and "--bucket-us" in p.stderr


# ---- tracefs not mounted: brisk mounts it privately, or says exactly why not ---------

SETPRIV = shutil.which("setpriv")
UNSHARE = shutil.which("unshare")


@pytest.fixture
def mount_ns(tracing):
    """Root with unshare(1): tests rearrange /sys/kernel in a mount namespace of their own."""
    if UNSHARE is None:
        pytest.skip("unshare (util-linux) not installed")


def trace_mounts():
    """This process's tracefs/debugfs mounts and anything under /sys/kernel (the part brisk could touch)."""
    lines = open("/proc/self/mountinfo").read().splitlines()
    return sorted(line for line in lines if "tracefs" in line or "debugfs" in line or " /sys/kernel" in line)


def run_unmounted(tmp_path, setup, *argv, timeout=600):
    """Runs argv in a fresh mount namespace after shell commands `setup` (which unmount tracefs, ...).

    That namespace is brisk's "host": its whole mount table is saved before and after brisk ran, so a
    test can check brisk left it as it found it. Returns (CompletedProcess, before, after)."""
    before, after = tmp_path / "mountinfo.before", tmp_path / "mountinfo.after"
    script = (f'{setup}\ngrep -q " - tracefs " /proc/self/mountinfo && exit 97\n'
              f'cat /proc/self/mountinfo > "{before}"\n"$@"\nrc=$?\ncat /proc/self/mountinfo > "{after}"\nexit $rc')
    host = trace_mounts()
    p = hangdiag.run([UNSHARE, "-m", "--propagation", "private", "sh", "-c", script, "sh", *argv], timeout=timeout)
    check_sanitizers(p.stderr)
    if p.returncode == 97:
        pytest.skip(f"tracefs is still mounted somewhere after `{setup}`: this host mounts it elsewhere too")
    assert trace_mounts() == host, "the test process's mount table changed"
    return p, before.read_text(), after.read_text()


UNMOUNT_ALL = "umount /sys/kernel/tracing 2>/dev/null; umount -R /sys/kernel/debug 2>/dev/null; true"
UNMOUNT_TRACEFS = "umount -R /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug/tracing 2>/dev/null; true"
# No tracefs mount point at all, only an empty debugfs one: brisk falls back to debugfs's tracing directory.
DEBUGFS_ONLY = f"{UNMOUNT_ALL}; mount -t tmpfs none /sys/kernel && mkdir /sys/kernel/debug"
NO_SYS_KERNEL = f"{UNMOUNT_ALL}; mount -t tmpfs none /sys/kernel"


@pytest.mark.usefixtures("mount_ns")
@pytest.mark.parametrize("setup", [UNMOUNT_ALL, UNMOUNT_TRACEFS], ids=["no-tracefs-no-debugfs", "debugfs-left"])
def test_profile_mounts_tracefs_privately(tmp_path, setup):
    out, serial = tmp_path / "p.json", tmp_path / "serial"
    p, before, after = run_unmounted(
        tmp_path, setup, str(BRISK), "profile", "--json", str(out), "--kernel", guest("cpuid-storm"), "--cmdline",
        f"calls={STORM_CALLS}", "--serial", f"file:{serial}")
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    rep = json.loads(out.read_text())
    assert rep["tracing"]["tracefs_mounted_by_brisk"] and rep["tracing"]["tracefs"] == TRACEFS
    check_cpuid_report(rep, guest_count(serial, "cpuid"))
    assert "brisk mounted it at /sys/kernel/tracing in a private mount namespace" in p.stdout
    assert before == after, "brisk changed its host's mount table (e.g. an automount of debugfs/tracing)"
    assert no_instances_left() == []


@pytest.mark.usefixtures("mount_ns")
def test_trace_mounts_tracefs_privately_command_stays_outside(tmp_path):
    out, serial, ns = tmp_path / "t.json", tmp_path / "serial", tmp_path / "ns"
    storm = guest("cpuid-storm")
    # The traced command records its mount namespace: it must be brisk's host's, not brisk's private one.
    cmd = (f'readlink /proc/self/ns/mnt > "{ns}.cmd"; exec "$0" run --kernel {storm} --cmdline calls={STORM_CALLS} '
           f'--serial file:{serial}')
    p, before, after = run_unmounted(
        tmp_path, f'{UNMOUNT_ALL}; readlink /proc/self/ns/mnt > "{ns}.host"', str(BRISK), "trace", "--json", str(out),
        "--symbols", storm, "--", "sh", "-c", cmd, str(BRISK))
    assert p.returncode == 0, p.stderr
    rep = json.loads(out.read_text())
    assert rep["tracing"]["tracefs_mounted_by_brisk"]
    check_cpuid_report(rep, guest_count(serial, "cpuid"))
    assert (tmp_path / "ns.cmd").read_text() == (tmp_path / "ns.host").read_text()
    assert before == after


@pytest.mark.usefixtures("mount_ns")
def test_trace_debugfs_fallback(tmp_path):
    out, serial = tmp_path / "t.json", tmp_path / "serial"
    storm = guest("cpuid-storm")
    p, before, after = run_unmounted(
        tmp_path, DEBUGFS_ONLY, str(BRISK), "trace", "--json", str(out), "--symbols", storm, "--", str(BRISK), "run",
        "--kernel", storm, "--cmdline", f"calls={STORM_CALLS}", "--serial", f"file:{serial}")
    assert p.returncode == 0, p.stderr
    rep = json.loads(out.read_text())
    assert rep["tracing"]["tracefs"] == "/sys/kernel/debug/tracing" and rep["tracing"]["tracefs_mounted_by_brisk"]
    check_cpuid_report(rep, guest_count(serial, "cpuid"))
    assert before == after


@pytest.mark.usefixtures("mount_ns")
def test_no_mount_point_says_why(tmp_path):
    p, _, _ = run_unmounted(tmp_path, NO_SYS_KERNEL, str(BRISK), "trace", "--", "true")
    assert p.returncode == EXIT_HOST
    assert ("tracefs is not mounted at /sys/kernel/tracing and mounting it failed: mount -t tracefs nodev "
            "/sys/kernel/tracing: No such file or directory") in p.stderr, p.stderr
    out = tmp_path / "p.json"
    p, _, _ = run_unmounted(tmp_path, NO_SYS_KERNEL, str(BRISK), "profile", "--json", str(out), "--kernel",
                            guest("hello"), "--serial", "none")
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    rep = json.loads(out.read_text())
    assert rep["tracing"]["available"] is False and "mounting it failed" in rep["tracing"]["reason"]
    assert rep["tracing"]["tracefs_mounted_by_brisk"] is False


def as_nobody(*argv):
    return [SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups", *argv]


@pytest.fixture
def nobody(mount_ns):
    """Root that can run brisk as uid 65534 (setpriv), with a tracefs that uid cannot read."""
    if SETPRIV is None:
        pytest.skip("setpriv (util-linux) not installed")
    probe = subprocess.run(as_nobody(str(BRISK), "--version"), capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"uid 65534 cannot run {BRISK}: {probe.stderr.strip()}")
    if os.stat(TRACEFS).st_mode & 0o005:
        pytest.skip(f"{TRACEFS} is readable by every user here: no permission error to report")


@pytest.mark.usefixtures("nobody")
def test_non_root_permission_denied_is_reported_as_such(tmp_path):
    p = hangdiag.run(as_nobody(str(BRISK), "trace", "--", "true"), timeout=60)
    check_sanitizers(p.stderr)
    assert p.returncode == EXIT_HOST
    assert f"cannot read {TRACEFS}/events/kvm: Permission denied (needs root)" in p.stderr, p.stderr
    assert "missing" not in p.stderr


@pytest.mark.usefixtures("nobody")
def test_non_root_cannot_mount_says_why(tmp_path):
    p, before, after = run_unmounted(tmp_path, UNMOUNT_ALL, *as_nobody(str(BRISK), "trace", "--", "true"))
    assert p.returncode == EXIT_HOST
    assert ("tracefs is not mounted at /sys/kernel/tracing and mounting it failed: unshare(CLONE_NEWNS): "
            "Operation not permitted (needs root)") in p.stderr, p.stderr
    assert before == after


# ---- brisk trace -- COMMAND: the command's status, signals passed on ----------------------

@pytest.mark.usefixtures("tracing")
@pytest.mark.parametrize("cmd,status,stderr", [
    (["/bin/false"], 1, ""),
    (["sh", "-c", "exit 3"], 3, ""),
    (["sh", "-c", "kill -TERM $$"], 128 + signal.SIGTERM, ""),
    (["/nonexistent/command"], 127, "cannot execute /nonexistent/command: No such file or directory"),
    (["/etc/passwd"], 126, "cannot execute /etc/passwd: Permission denied"),
], ids=["false", "exit-3", "killed-by-SIGTERM", "not-found", "not-executable"])
def test_trace_returns_command_status(tmp_path, cmd, status, stderr):
    out = tmp_path / "t.json"
    p = run_brisk("trace", "--json", str(out), "--", *cmd)
    assert p.returncode == status, p.stderr
    assert stderr in p.stderr
    rep = json.loads(out.read_text())  # the report is written whatever the command did
    assert rep["command"] == "trace"
    if status in (126, 127):
        assert any("could not be executed" in w for w in rep["warnings"]), rep["warnings"]


@pytest.mark.usefixtures("tracing")
def test_trace_returns_brisk_run_status():
    p = run_brisk("trace", "--", str(BRISK), "run", "--kernel", guest("exitcode"), "--cmdline", "code=5", "--serial",
                  "none")
    assert p.returncode == debug_exit_status(5) == 11, p.stderr


def default_signals():
    """A shell runs background jobs with SIGINT/SIGQUIT ignored, and brisk hands the command the signal
    state it was started with: reset them, so the test does not depend on how the suite was started."""
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def start_trace(*cmd):
    p = subprocess.Popen([str(BRISK), "trace", "--", *cmd], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=default_signals)
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(TRACEFS, "instances", f"brisk-{p.pid}")) and time.monotonic() < deadline:
        assert p.poll() is None, p.communicate()
        time.sleep(0.05)
    time.sleep(0.5)  # the command is running
    return p


def children(pid):
    """Process ids whose parent is pid (scans /proc: needs no CONFIG_PROC_CHILDREN)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(d))
    return out


def wait_disposition(p, sig, field):
    """Waits until the traced command (p's child, past its exec) has sig in /proc's field.

    field: SigBlk (blocked, taken by a signalfd) or SigIgn (ignored). brisk trace holds its child, with brisk's own
    mask, until tracing starts; a signal sent before the command set its disposition would test start-up, not the
    tracer's forwarding.
    """
    def read(path):
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError:
            return None

    tracer = read(f"/proc/{p.pid}/cmdline")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert p.poll() is None, p.communicate()
        for c in children(p.pid):
            status = read(f"/proc/{c}/status")
            if status is None or read(f"/proc/{c}/cmdline") in (None, tracer):
                continue  # gone, or still brisk trace's held fork
            mask = int(re.search(rb"^" + field.encode() + rb":\s*([0-9a-f]+)", status, re.M).group(1), 16)
            if mask & (1 << (sig - 1)):
                return
        time.sleep(0.05)
    raise AssertionError(f"the traced command never set {field} for {signal.Signals(sig).name}")


@pytest.mark.usefixtures("tracing")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_trace_passes_signals_on(sig):
    p = start_trace("sleep", "60")
    try:
        t0 = time.monotonic()
        os.kill(p.pid, sig)
        out, err = p.communicate(timeout=30)
        check_sanitizers(err)
        assert p.returncode == 128 + sig, err
        assert time.monotonic() - t0 < 10, "the tracer did not stop promptly"
        assert "In-kernel exits" in out  # the report is still printed
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert no_instances_left() == []


@pytest.mark.usefixtures("tracing")
def test_trace_stops_brisk_run_on_sigterm():
    p = start_trace(str(BRISK), "run", "--kernel", guest("flood"), "--cmdline", "bytes=100000000000", "--serial",
                    "none")
    try:
        wait_disposition(p, signal.SIGTERM, "SigBlk")
        os.kill(p.pid, signal.SIGTERM)
        out, err = p.communicate(timeout=30)
        check_sanitizers(err)
        assert p.returncode == EXIT_STOPPED, err
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)


@pytest.mark.usefixtures("tracing")
def test_trace_kills_command_that_ignores_sigterm():
    p = start_trace("sh", "-c", "trap '' TERM; exec sleep 60")
    try:
        wait_disposition(p, signal.SIGTERM, "SigIgn")
        t0 = time.monotonic()
        os.kill(p.pid, signal.SIGTERM)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 128 + signal.SIGKILL, err
        assert 2.5 < time.monotonic() - t0 < 10
        assert "still running 3 s after SIGTERM; killing it" in err
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
