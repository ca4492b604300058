"""Guest CPUID: the cpuid test guest at CPL 0 (needs KVM), and `brisk cpuid` on recorded dumps (no KVM needed)."""
import fcntl
import json
import os
import re
import shutil
import struct
import subprocess

import pytest

from conftest import BRISK, EXIT_GUEST_OK, EXIT_HOST, EXIT_USAGE, KVM_REASON, ROOT, boot, check_sanitizers, guest, \
    run_brisk

FIXTURES = ROOT / "tests" / "unit" / "fixtures"
INTEL = str(FIXTURES / "synthetic-intel-icx.txt")
AMD = str(FIXTURES / "synthetic-amd-zen.txt")
HOST = str(FIXTURES / "host-amd-epyc.txt")
NESTED = str(FIXTURES / "nested-kvm-amd-qemu64.txt")  # a real KVM dump
PVM = str(FIXTURES / "kvm-pvm-amd-epyc.txt")  # a real KVM dump (kvm_pvm)
HTT = 1 << 28
# What --cpu-template baseline requires (src/arch/x86/cpuid_template.c, docs/cpuid.md).
BASELINE_LEAF1_ECX = (1 << 0) | (1 << 9) | (1 << 13) | (1 << 19) | (1 << 20) | (1 << 23)


def topology_args(cpus, topo):
    s, c, t = topo if topo else (1, cpus, 1)
    opts = ["--cpus", str(cpus)] + (["--topology", f"sockets={s},cores={c},threads={t}"] if topo else [])
    return opts, f"cpus={cpus} sockets={s} cores={c} threads={t}"


def ioctl_counts(stdout):
    """KVM ioctl name -> calls, from the --timeline report."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(KVM_\w+)\s+(\d+)\s", stdout, re.M)}


# ---- what this host's KVM does with a table (KVM ioctls from Python, independent of brisk) -------------

KVM_CREATE_VM = 0xAE01
KVM_CREATE_VCPU = 0xAE41
KVM_CREATE_IRQCHIP = 0xAE60
KVM_SET_CPUID2 = 0x4008AE90  # _IOW(KVMIO, 0x90, struct kvm_cpuid2)
KVM_GET_CPUID2 = 0xC008AE91  # _IOWR(KVMIO, 0x91, struct kvm_cpuid2)
ENTRY = struct.Struct("<7I12x")  # struct kvm_cpuid_entry2: function index flags eax ebx ecx edx, padding


def kvm_holds(entries):
    """The table KVM_GET_CPUID2 returns after KVM_SET_CPUID2 of `entries` (brisk cpuid --json rows) on a
    scratch VM shaped like brisk's (in-kernel irqchip, so KVM's runtime bits are those of a real boot).
    This is what CPUID at CPL 0 answers: some KVMs change more than their documented runtime bits."""
    rows = [(int(e["leaf"], 16), e["subleaf"], e["flags"], *(int(e[r], 16) for r in ("eax", "ebx", "ecx", "edx")))
            for e in entries]
    kvm = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    fds = [kvm]
    try:
        vm = fcntl.ioctl(kvm, KVM_CREATE_VM, 0)
        fds.append(vm)
        fcntl.ioctl(vm, KVM_CREATE_IRQCHIP, 0)
        vcpu = fcntl.ioctl(vm, KVM_CREATE_VCPU, 0)
        fds.append(vcpu)
        # Mutable buffers: fcntl.ioctl copies immutable arguments into a 1024-byte buffer.
        fcntl.ioctl(vcpu, KVM_SET_CPUID2,
                    bytearray(struct.pack("<II", len(rows), 0) + b"".join(ENTRY.pack(*r) for r in rows)))
        buf = bytearray(struct.pack("<II", len(rows) + 64, 0) + bytes(ENTRY.size * (len(rows) + 64)))
        fcntl.ioctl(vcpu, KVM_GET_CPUID2, buf)
    finally:
        for fd in reversed(fds):
            os.close(fd)
    nent = struct.unpack_from("<I", buf)[0]
    out = {}
    for i in range(nent):
        leaf, sub, flags, a, b, c, d = ENTRY.unpack_from(buf, 8 + i * ENTRY.size)
        out[(leaf, sub if flags & 1 else 0)] = {"eax": a, "ebx": b, "ecx": c, "edx": d}
    return out


def supported_regs():
    """KVM's raw KVM_GET_SUPPORTED_CPUID on this host, from brisk's dump (no template logic involved)."""
    p = run_brisk("cpuid", "--supported")
    assert p.returncode == 0, p.stderr
    return {(int(f[1], 16), int(f[2], 16)): [int(x, 16) for x in f[4:8]]
            for f in (line.split() for line in p.stdout.splitlines()) if f and f[0] == "cpuid"}


def baseline_refusal(sup):
    """The message --cpu-template baseline must be refused with on a KVM reporting `sup`, or None."""
    for leaf, names, bits in ((1, "SSE3/SSSE3/CX16/SSE4.1/SSE4.2/POPCNT", BASELINE_LEAF1_ECX),
                              (0x80000001, "LAHF/SAHF", 1)):
        missing = bits & ~sup.get((leaf, 0), [0] * 4)[2]
        if missing:
            return f"--cpu-template baseline needs {names}, but leaf 0x{leaf:x} ecx lacks bits 0x{missing:08x} " \
                   "on this host/KVM"
    return None


# ---- guests (KVM) ---------------------------------------------------------------------------------

@pytest.mark.usefixtures("kvm")
@pytest.mark.parametrize("template", ["host", "baseline"])
@pytest.mark.parametrize("cpus,topo", [(1, None), (2, None), (4, None), (4, (2, 1, 2)), (8, (2, 2, 2))])
def test_guest_cpuid(cpus, topo, template):
    opts, cmdline = topology_args(cpus, topo)
    s, c, t = topo if topo else (1, cpus, 1)
    if template == "baseline":
        cmdline += " baseline=1"
        want = baseline_refusal(supported_regs())
        if want:
            # This host's KVM lacks x86-64-v2 bits: brisk must refuse (exit 2) before the guest runs, naming them.
            p = boot("cpuid", *opts, "--cpu-template", template, "--cmdline", cmdline)
            assert p.returncode == EXIT_USAGE, f"{p.stdout}\n{p.stderr}"
            assert p.stderr == f"brisk: error: {want}\n", p.stderr
            assert "cpuid:" not in p.stdout  # no guest ran
            q = run_brisk("cpuid", *opts, "--cpu-template", template)
            assert q.returncode == EXIT_USAGE and q.stderr == f"brisk cpuid: {want}\n", q.stderr
            return
    # brisk's own table (what KVM_SET_CPUID2 is given): HTT from the topology, whatever KVM's table says.
    table = cpuid_json(*opts, "--cpu-template", template)["cpuid"]
    leaf1 = regs({"cpuid": table})[(1, 0)]
    assert bool(leaf1["edx"] & HTT) == (c * t > 1), hex(leaf1["edx"])
    # What the guest will see: a KVM that overrides HTT (kvm_pvm ORs in the host's) is told to the guest.
    held = kvm_holds(table)[(1, 0)]["edx"] & HTT
    if held != leaf1["edx"] & HTT:
        cmdline += f" kvm_htt={int(bool(held))}"
    p = boot("cpuid", *opts, "--cpu-template", template, "--cmdline", cmdline, "--timeline")
    fails = [line for line in p.stdout.splitlines() if "FAIL" in line]
    assert p.returncode == EXIT_GUEST_OK, f"{fails}\n{p.stdout}\n{p.stderr}"
    assert "cpuid: PASS\n" in p.stdout + "\n"
    counts = ioctl_counts(p.stdout)
    # Done once: one KVM_GET_SUPPORTED_CPUID per process, one KVM_SET_CPUID2 and KVM_SET_MSRS per vCPU.
    assert counts.get("KVM_GET_SUPPORTED_CPUID") == 1, counts
    assert counts.get("KVM_GET_MSR_INDEX_LIST") == 1, counts
    assert counts.get("KVM_SET_CPUID2") == cpus, counts
    assert counts.get("KVM_SET_MSRS") == cpus, counts


@pytest.mark.usefixtures("kvm")
def test_guest_rejects_bad_template(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text('{"cpuid": [{"leaf": "0x1234", "register": "eax", "mask": "0x1", "value": "0x1"}]}')
    p = boot("cpuid", "--cpu-template", str(bad))
    assert p.returncode == EXIT_USAGE, p.stderr
    assert "leaf 0x1234" in p.stderr


@pytest.mark.usefixtures("kvm")
@pytest.mark.parametrize("api", [False, True])
def test_refused_msr_named(tmp_path, sockdir, api):
    """A template MSR value KVM_SET_MSRS refuses (MSR_KVM_ASYNC_PF_EN with its reserved bits 4-5 set): exit 4,
    and the message (the vCPU's struct vm_error, handed over by vm_start) names the call, the vCPU, the MSR
    and the value, with the API beside the VM too. tests/unit/test_api_vcpu.c takes it to the API's reply."""
    t = tmp_path / "t.json"
    t.write_text('{"msrs": [{"index": "0x4b564d02", "value": "0x30"}]}')
    extra = ["--api-sock", os.path.join(sockdir, "msr.sock")] if api else []
    p = boot("cpuid", "--cpus", "2", "--cpu-template", str(t), *extra)
    if "not in KVM's MSR index list" in p.stderr:
        pytest.skip("this KVM does not list MSR_KVM_ASYNC_PF_EN")
    assert p.returncode == EXIT_HOST, p.stderr
    assert "brisk: error: KVM_SET_MSRS for vCPU 0: KVM refused MSR 0x4b564d02 = 0x30 (" in p.stderr, p.stderr


@pytest.mark.usefixtures("kvm")
def test_supported_dump_from_kvm():
    p = run_brisk("cpuid", "--supported")
    assert p.returncode == 0, p.stderr
    assert re.search(r"^cpuid 0x00000000 ", p.stdout, re.M)
    assert re.search(r"^cpuid 0x40000000 0x0 0x0 0x[0-9a-f]+ 0x4b4d564b", p.stdout, re.M)


# ---- brisk cpuid without KVM ------------------------------------------------------------------------

def cpuid_json(*args):
    p = run_brisk("cpuid", "--json", *args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def regs(doc):
    return {(int(e["leaf"], 16), e["subleaf"]): {r: int(e[r], 16) for r in ("eax", "ebx", "ecx", "edx")}
            for e in doc["cpuid"]}


@pytest.mark.parametrize("fixture", [INTEL, AMD, HOST, NESTED, PVM])
def test_cli_text_table(fixture):
    p = run_brisk("cpuid", "--supported-from", fixture, "--cpus", "2")
    assert p.returncode == 0, p.stderr
    rows = [line.split() for line in p.stdout.splitlines() if line.startswith("0x") and len(line.split()) == 6]
    leaves = {(int(r[0], 16), int(r[1])) for r in rows}
    assert (0, 0) in leaves and (1, 0) in leaves and (0x40000000, 0) in leaves
    leaf1 = next(r for r in rows if int(r[0], 16) == 1)
    assert int(leaf1[4], 16) >> 31 == 1  # hypervisor bit
    assert "0x000001a0 0x0000000000000001" in p.stdout  # IA32_MISC_ENABLE fast strings


@pytest.mark.parametrize("fixture", [INTEL, AMD, NESTED, PVM])
def test_cli_json_and_vcpu_patch(fixture):
    base = ["--supported-from", fixture, "--cpus", "4", "--topology", "sockets=2,cores=1,threads=2"]
    v0, v3 = cpuid_json(*base), cpuid_json(*base, "--vcpu", "3")
    assert v0["apic_id"] == 0 and v3["apic_id"] == 3
    assert v0["topology"] == {"sockets": 2, "cores": 1, "threads": 2}
    a, b = regs(v0), regs(v3)
    assert a.keys() == b.keys()
    diffs = {(leaf, sub, r) for (leaf, sub), rr in a.items() for r in rr if rr[r] != b[(leaf, sub)][r]}
    allowed = {(1, 0, "ebx")} | {(leaf, s, "edx") for leaf in (0xB, 0x1F) for s in range(3)} | \
        {(0x8000001E, 0, r) for r in ("eax", "ebx", "ecx")}
    assert diffs and diffs <= allowed, diffs
    assert b[(1, 0)]["ebx"] >> 24 == 3
    assert b[(1, 0)]["ebx"] & 0xFFFFFF == a[(1, 0)]["ebx"] & 0xFFFFFF


def test_cli_baseline():
    doc = regs(cpuid_json("--supported-from", INTEL, "--cpu-template", "baseline"))
    assert not doc[(1, 0)]["ecx"] & (1 << 28)  # AVX
    assert not doc[(7, 0)]["ebx"] & (1 << 5)  # AVX2
    assert doc[(0xD, 0)]["eax"] == 3 and doc[(0xD, 0)]["ecx"] == 576


@pytest.mark.parametrize("fixture,refused", [(INTEL, False), (AMD, False), (HOST, False), (NESTED, False),
                                             (PVM, True)])
def test_cli_baseline_per_fixture(fixture, refused):
    # The recorded KVM tables: kvm_pvm lacks SSE3..POPCNT in leaf 1 ECX, so baseline is refused there.
    dump = run_brisk("cpuid", "--supported-from", fixture, "--supported").stdout
    sup = {(int(f[1], 16), int(f[2], 16)): [int(x, 16) for x in f[4:8]]
           for f in (line.split() for line in dump.splitlines()) if f and f[0] == "cpuid"}
    want = baseline_refusal(sup)
    assert bool(want) == refused
    p = run_brisk("cpuid", "--supported-from", fixture, "--cpu-template", "baseline")
    if refused:
        assert p.returncode == EXIT_USAGE and p.stderr == f"brisk cpuid: {want}\n", p.stderr
    else:
        assert p.returncode == 0, p.stderr


def test_cli_diff_host():
    # vCPU 200 sees APIC ID 200 (0xc8) in leaf 1 EBX[31:24]. Which reason explains the differing
    # bits depends on the host's own APIC ID (arbitrary on virtual hosts), so only the value is exact.
    p = run_brisk("cpuid", "--supported-from", INTEL, "--cpus", "201", "--vcpu", "200", "--diff-host")
    assert p.returncode == 0, p.stderr
    assert re.search(r"^0x00000001 0\s+ebx\s+host 0x[0-9a-f]{8}\s+guest 0xc8[0-9a-f]{6} : ", p.stdout, re.M), p.stdout
    reasons = ("as KVM reports", "not supported by KVM", "set/hidden by brisk", "masked by template",
               "patched per vCPU", "several stages")
    for line in p.stdout.splitlines():
        assert line.startswith("#") or any(r in line for r in reasons), line


def test_cli_supported_roundtrip(tmp_path):
    p = run_brisk("cpuid", "--supported-from", INTEL, "--supported")
    assert p.returncode == 0, p.stderr
    dump = tmp_path / "dump.txt"
    dump.write_text(p.stdout)
    q = run_brisk("cpuid", "--supported-from", str(dump), "--supported")
    assert q.stdout == p.stdout


def test_cli_host_dump_loads(tmp_path):
    p = run_brisk("cpuid", "--host")
    assert p.returncode == 0, p.stderr
    dump = tmp_path / "host.txt"
    dump.write_text(p.stdout)
    q = run_brisk("cpuid", "--supported-from", str(dump))
    assert q.returncode == 0, q.stderr


@pytest.mark.parametrize("text,message", [
    ("{", "bad JSON: the text ends inside an unfinished value"),
    ('{"cpuid": 5 6}', "bad JSON at byte 12: "),
    ("", "the file is empty"),
    ('{"cpuid": [], "msrs": [{"index": 1}]}', 'msrs[0]: missing key "value"'),
    ('{"cpuid": [{"leaf": "0x7", "register": "ebx", "mask": "0x2", "value": "0x2"}]}',
     "leaf 0x7 subleaf 0 ebx bit 1 is not supported"),
    ('{"cpuid": [{"leaf": "0x99", "register": "eax", "mask": "0x1", "value": "0x0"}]}',
     "leaf 0x99 subleaf 0 is not in KVM's supported CPUID table"),
    ('{"cpuid": [], "extra": 1}', 'unknown key "extra"'),
    ('{"msrs": [{"index": "0x1234", "value": "0x1"}]}', "MSR 0x1234 is not in KVM's MSR index list"),
])
def test_cli_bad_template(tmp_path, text, message):
    t = tmp_path / "bad.json"
    t.write_text(text)
    p = run_brisk("cpuid", "--supported-from", INTEL, "--cpu-template", str(t))
    assert p.returncode == EXIT_USAGE
    assert message in p.stderr and str(t) in p.stderr, p.stderr


@pytest.mark.parametrize("text,message", [
    ("", "the file is empty; a template is a JSON object"),
    ("\n  \n", "the file is only white space"),
    ('{"cpuid": [', "bad JSON: the text ends inside an unfinished value"),
    ('{"cpuid": [], "msrs": [{"index": 1}]}', 'msrs[0]: missing key "value"'),
])
@pytest.mark.parametrize("command", ["run", "cpuid"])
def test_bad_template_refused_before_kvm(tmp_path, text, message, command):
    # Refused (exit 2, the file named, what is wrong said) by config_validate, before
    # /dev/kvm is opened: strace shows the template read and no open of /dev/kvm.
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    bad = tmp_path / "t.json"
    bad.write_text(text)
    trace = tmp_path / "strace.txt"
    args = ["--kernel", guest("cpuid")] if command == "run" else []
    # LeakSanitizer cannot run under ptrace; test_cli_bad_template runs such refusals leak-checked.
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(trace), str(BRISK), command,
                        *args, "--cpu-template", str(bad)], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL, env=env)
    check_sanitizers(p.stderr)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert f"--cpu-template {bad}: {message}" in p.stderr, p.stderr
    opened = trace.read_text()
    assert str(bad) in opened  # the trace saw the template being read ...
    assert "/dev/kvm" not in opened  # ... and no /dev/kvm


@pytest.mark.parametrize("kind", ["fifo", "directory"])
@pytest.mark.parametrize("option", ["--cpu-template", "--supported-from"])
def test_non_regular_file_refused(tmp_path, kind, option):
    # A FIFO would block open() for a writer (unkillably, with the signals brisk blocks): refused at once.
    path = tmp_path / "x"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    command = ["run", "--kernel", guest("cpuid")] if option == "--cpu-template" else ["cpuid"]
    p = run_brisk(*command, option, str(path), timeout=20)
    assert p.returncode == EXIT_USAGE, p.stderr
    what = "a FIFO" if kind == "fifo" else "a directory"
    assert f"{option} {path}: {what}, not a regular file" in p.stderr, p.stderr


def test_cli_dump_limits(tmp_path):
    # More entries than brisk takes from KVM is said as such, not as "not a dump line".
    big = tmp_path / "big.txt"
    big.write_text("".join(f"cpuid 0x{i:x} 0x0 0x0 0 0 0 0\n" for i in range(4097)))
    p = run_brisk("cpuid", "--supported-from", str(big))
    assert p.returncode == EXIT_USAGE
    assert f"--supported-from {big}:4097: more than 4096 CPUID entries" in p.stderr, p.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    p = run_brisk("cpuid", "--supported-from", str(empty))
    assert p.returncode == EXIT_USAGE
    assert f"--supported-from {empty}: no 'cpuid' lines (the file is empty)" in p.stderr, p.stderr


@pytest.mark.parametrize("args,message", [
    (["--cpus", "2", "--vcpu", "2"], "--vcpu 2 is out of range"),
    (["--cpus", "4", "--topology", "sockets=1,cores=3,threads=1"], "makes 3 vCPUs but --cpus is 4"),
    (["--bogus"], "Try 'brisk help cpuid'"),
])
def test_cli_usage_errors(args, message):
    p = run_brisk("cpuid", "--supported-from", INTEL, *args)
    assert p.returncode == EXIT_USAGE
    assert message in p.stderr, p.stderr


def test_cli_bad_dump(tmp_path):
    d = tmp_path / "dump.txt"
    d.write_text("cpuid 0x0 0 0 1 2 3\n")
    p = run_brisk("cpuid", "--supported-from", str(d))
    assert p.returncode == EXIT_USAGE
    assert f"{d}:1: not a dump line" in p.stderr


@pytest.mark.skipif(KVM_REASON is None or os.path.exists("/dev/kvm"), reason="needs a host without /dev/kvm")
def test_cli_without_kvm_exits_4():
    p = run_brisk("cpuid")
    assert p.returncode == EXIT_HOST
    assert "--supported-from" in p.stderr
