"""Firecracker's CPU templates on brisk (docs/cpuid.md "Firecracker's CPU templates"): machine-config's
cpu_template and PUT /cpu-config through the real API (status codes, Firecracker's messages, pre-boot only),
the vendor check at InstanceStart on this host, firecracker-containerd's T2 default, a --config-file's
cpu-config, a snapshot's template name, and the cpuid test guest reading at CPL 0 what T2A and a custom
template put in its CPUID (docs/security.md cases 64-67)."""

import functools
import json
import os
import time

import pytest

from apiclient import BriskProcess
from conftest import BRISK, EXIT_GUEST_OK, EXIT_USAGE, ROOT, guest, run_brisk

NOT_AFTER = "The requested operation is not supported after starting the microVM."
MISMATCH = "Start microvm error: Failed to get CPU template: CPU vendor mismatched between actual CPU and CPU template."
FC_TEMPLATES = ROOT / "tests" / "unit" / "fixtures"


def host_vendor():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    return ""


AMD = host_vendor() == "AuthenticAMD"
INTEL = host_vendor() == "GenuineIntel"
# The static templates this host's vendor refuses (custom_cpu_template.rs get_cpu_template).
MISMATCHED = ["C3", "T2", "T2S", "T2CL"] if AMD else ["T2A"] if INTEL else ["C3", "T2", "T2S", "T2CL", "T2A"]

# T2A's bits (Firecracker v1.7.0 t2a.rs) in leaves this host's KVM passes to CPL 0 as brisk sets them
# (kvm_pvm replaces leaf 1 ECX/EDX, 7 and 0xD: docs/cpuid.md "KVMs that change the table"):
# leaf 1 EAX family/model, 0x80000008 EBX, 0x80000001 ECX (MONITORX, PREFETCHW, MisAlignSse, SSE4A, SVM) and
# EDX (Page1GB, FFXSR, MmxExt).
T2A_WANT = "w0_leaf=1 w0_reg=0 w0_mask=0x0fff3fff w0_val=0x306f2 " \
           "w1_leaf=0x80000008 w1_reg=1 w1_mask=0x001c0205 w1_val=0x001c0004 " \
           "w2_leaf=0x80000001 w2_reg=2 w2_mask=0x200001c4 w2_val=0 " \
           "w3_leaf=0x80000001 w3_reg=3 w3_mask=0x06400000 w3_val=0"

# A custom template: another family/model, no SSE4A/PREFETCHW, a 0x80000008 EBX bit set, "bris" as the
# first four bytes of the brand string.
CUSTOM = {"cpuid_modifiers": [
    {"leaf": "0x1", "subleaf": "0x0", "flags": 0,
     "modifiers": [{"register": "eax", "bitmap": "0bxxxx0000_1010_xxxx_0000_1111_0001_0000"}]},
    {"leaf": "0x80000001", "subleaf": "0x0", "flags": 0,
     "modifiers": [{"register": "ecx", "bitmap": "0b" + "x" * 23 + "0x0" + "x" * 6}]},
    {"leaf": "0x80000002", "subleaf": "0x0", "flags": 0,
     "modifiers": [{"register": "eax", "bitmap": "0b" + format(int.from_bytes(b"bris", "little"), "032b")}]},
    {"leaf": "0x80000008", "subleaf": "0x0", "flags": 0,
     "modifiers": [{"register": "ebx", "bitmap": "0b" + "x" * 11 + "1" + "x" * 20}]},
]}
CUSTOM_WANT = "w0_leaf=1 w0_reg=0 w0_mask=0x0ff0fff0 w0_val=0x00a00f10 " \
              "w1_leaf=0x80000001 w1_reg=2 w1_mask=0x140 w1_val=0 " \
              f"w2_leaf=0x80000002 w2_reg=0 w2_mask=0xffffffff w2_val={int.from_bytes(b'bris', 'little'):#x} " \
              "w3_leaf=0x80000008 w3_reg=1 w3_mask=0x100000 w3_val=0x100000"


class Brisk(BriskProcess):
    def __init__(self, args, sock=None):
        super().__init__(BRISK, args, sock)


@pytest.fixture
def fresh(procs, sockdir):
    sock = os.path.join(sockdir, "api.sock")
    b = Brisk(["--api-sock", sock], sock=sock)
    procs.append(b)
    return b


def fault(r, status=400):
    assert r.status == status, r
    assert isinstance(r.json, dict) and list(r.json) == ["fault_message"], r
    return r.fault


def kvm_htt_arg():
    """kvm_pvm ORs the host's HTT into leaf 1 EDX (docs/cpuid.md): tell the guest when this host does."""
    from test_cpuid import HTT, cpuid_json, kvm_holds, regs
    table = cpuid_json("--cpus", "1")["cpuid"]
    held = kvm_holds(table)[(1, 0)]["edx"] & HTT
    return f" kvm_htt={int(bool(held))}" if held != regs({"cpuid": table})[(1, 0)]["edx"] & HTT else ""


@functools.lru_cache(maxsize=None)
def t2a_refusal():
    p = run_brisk("run", "--kernel", guest("hello"), "--cpu-template", "T2A")
    return p.stderr.strip() if "not supported by KVM" in p.stderr else None


@pytest.fixture
def t2a(kvm):
    """Skips where this host's KVM cannot carry T2A: Firecracker's template sets CPUID bits KVM must support
    (leaf 0xd subleaf 1's XSAVE features among them; an emulated CPU without XSAVE, such as the nested
    harness's, has none), and brisk refuses it there as Firecracker does, with its message."""
    if t2a_refusal():
        pytest.skip(f"this host's KVM cannot carry T2A: {t2a_refusal()}")


def boot_cpuid_guest(b, want):
    b.api.boot_source(guest("cpuid"), "cpus=1 " + want + kvm_htt_arg())
    b.api.start()
    code = b.wait(60)
    fails = [line for line in b.out.splitlines() if "FAIL" in line]
    assert code == EXIT_GUEST_OK, f"{fails}\n{b.out}\n{b.err}"
    assert "cpuid: PASS\n" in b.out, b.out
    for i in range(4):
        if f"w{i}_leaf" in want:
            assert f"cpuid: PASS template-w{i} " in b.out, b.out
    return b.out


# ---- machine-config's cpu_template ----------------------------------------------------------------------------


@pytest.mark.security
def test_machine_config_cpu_template(fresh):
    api = fresh.api
    assert "cpu_template" not in api.get("/machine-config").json
    for name in ["C3", "T2", "T2S", "T2CL", "T2A"]:  # accepted at PUT: the host is checked at InstanceStart
        api.ok("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 128, "cpu_template": name})
        assert api.get("/machine-config").json["cpu_template"] == name
        assert api.get("/vm/config").json["machine-config"]["cpu_template"] == name
    # PUT without it keeps it; PATCH changes it; "None" removes it (Firecracker's VmConfig::update)
    api.ok("PUT", "/machine-config", {"vcpu_count": 2, "mem_size_mib": 128})
    assert api.get("/machine-config").json["cpu_template"] == "T2A"
    api.ok("PATCH", "/machine-config", {"cpu_template": "T2"})
    assert api.get("/machine-config").json["cpu_template"] == "T2"
    api.ok("PATCH", "/machine-config", {"cpu_template": "None"})
    assert "cpu_template" not in api.get("/machine-config").json
    for bad in ["t2", "T3", "", "Host"]:
        msg = fault(api.patch("/machine-config", {"cpu_template": bad}))
        assert msg == f"machine-config: cpu_template: unknown variant `{bad}`, expected one of `C3`, `T2`, " \
                      "`T2S`, `None`, `T2CL`, `T2A`", msg
    assert "cpu_template: expected a string" in fault(api.patch("/machine-config", {"cpu_template": 2}))
    assert "cpu_template" not in api.get("/machine-config").json


@pytest.mark.security
@pytest.mark.parametrize("name", MISMATCHED)
def test_vendor_mismatch_at_instance_start(kvm, fresh, name):
    # docs/security.md case 65: Firecracker's GetCpuTemplateError::CpuVendorMismatched, 400, nothing started
    fresh.api.boot_source(guest("hello"))
    fresh.api.ok("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 128, "cpu_template": name})
    assert fault(fresh.api.put("/actions", {"action_type": "InstanceStart"})) == MISMATCH
    assert fresh.api.get("/").json["state"] == "Not started"


@pytest.mark.skipif(not AMD, reason="T2A is for AMD hosts")
def test_t2a_guest_sees_the_template(kvm, t2a, fresh):
    fresh.api.ok("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 64, "cpu_template": "T2A"})
    boot_cpuid_guest(fresh, T2A_WANT)


@pytest.mark.skipif(not AMD, reason="the checks are T2A's")
def test_t2a_checks_fail_without_the_template(kvm, fresh):
    """The guest's T2A checks can fail: on this host without a template, some of them do."""
    fresh.api.ok("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 64})
    fresh.api.boot_source(guest("cpuid"), "cpus=1 " + T2A_WANT + kvm_htt_arg())
    fresh.api.start()
    fresh.wait(60)
    assert "cpuid: FAIL template-w0 " in fresh.out, fresh.out  # the host's family/model, not T2A's


@pytest.mark.security
@pytest.mark.skipif(not AMD, reason="T2A is for AMD hosts")
def test_cli_static_template(kvm, t2a):
    p = run_brisk("run", "--kernel", guest("cpuid"), "--cpu-template", "T2A", "--cmdline",
                  "cpus=1 " + T2A_WANT + kvm_htt_arg())
    assert p.returncode == EXIT_GUEST_OK, p.stdout + p.stderr
    assert "cpuid: PASS template-w1 " in p.stdout
    q = run_brisk("run", "--kernel", guest("hello"), "--cpu-template", MISMATCHED[0])
    assert q.returncode == EXIT_USAGE
    assert q.stderr == "brisk: error: Failed to get CPU template: CPU vendor mismatched between actual CPU and " \
                       "CPU template.\n", q.stderr


# ---- PUT /cpu-config ------------------------------------------------------------------------------------------


@pytest.mark.security
@pytest.mark.parametrize("body, message", [
    ({"cpuid_modifiers": [{"leaf": "0x1", "subleaf": "0x0", "flags": 0,
                           "modifiers": [{"register": "ekx", "bitmap": "0b1"}]}]},
     "cpu-config: cpuid_modifiers[0].modifiers[0]: Invalid CPUID register. Must be one of [eax, ebx, ecx, edx]"),
    ({"msr_modifiers": [{"addr": "0jj0", "bitmap": "0b1"}]},
     "cpu-config: msr_modifiers[0]: No supported number system prefix found in value [0jj0]. Make sure to prefix "
     "the number with '0x' for hexadecimal numbers or '0b' for binary numbers."),
    ({"cpuid_modifiers": [{"leaf": 1, "subleaf": "0x0", "flags": 0, "modifiers": []}]},
     "cpu-config: cpuid_modifiers[0]: invalid type: integer `1`, expected a string"),
    ({"msr_modifiers": [{"addr": "0x200", "bitmap": "0bx00100x0x1xxxx05xxx1xxxxxxxxxxx1"}]},
     "cpu-config: msr_modifiers[0]: Failed to parse string [0bx00100x0x1xxxx05xxx1xxxxxxxxxxx1] as a bitmap - "
     "unknown character: 53"),
    ({"cpuid_modifiers": [{"leaf": "0x1", "subleaf": "0x0", "flags": 0,
                           "modifiers": [{"register": "eax", "bitmap": "0b" + "1" * 33}]}]},
     "cpu-config: cpuid_modifiers[0].modifiers[0]: Failed to parse string [0b" + "1" * 33 + "] as a bitmap - "
     "string is too long"),
    ({"cpuid_modifiers": [{"leaf": "0x1", "flags": 0, "modifiers": []}]},
     "cpu-config: cpuid_modifiers[0]: missing field `subleaf`"),
    ({"reg_modifiers": []},
     "cpu-config: unknown field `reg_modifiers`, expected one of `kvm_capabilities`, `cpuid_modifiers`, "
     "`msr_modifiers`"),
    ({"kvm_capabilities": ["x"]},
     "cpu-config: kvm_capabilities[0]: Failed to parse string [x] as a kvm capability - can not convert to "
     "numeric: invalid digit found in string"),
])
def test_cpu_config_refused(fresh, body, message):
    # docs/security.md case 64: 400 with Firecracker's words; the VM's template unchanged
    fresh.api.ok("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 128, "cpu_template": "T2A"})
    assert fault(fresh.api.put("/cpu-config", body)) == message
    assert fresh.api.get("/machine-config").json["cpu_template"] == "T2A"


@pytest.mark.security
def test_cpu_config_last_wins(fresh):
    # docs/security.md case 67: one template per VM, the last one set, as Firecracker's VmConfig
    api = fresh.api
    api.ok("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 128, "cpu_template": "T2A"})
    api.ok("PUT", "/cpu-config", CUSTOM)
    assert api.get("/machine-config").json["cpu_template"] == "None"  # Firecracker shows a custom one so
    cfg = api.get("/vm/config").json
    assert cfg["cpu-config"] is None and cfg["machine-config"]["cpu_template"] == "None"
    api.ok("PATCH", "/machine-config", {"cpu_template": "T2"})
    assert api.get("/machine-config").json["cpu_template"] == "T2"
    api.ok("PUT", "/cpu-config", {})
    api.ok("PATCH", "/machine-config", {"cpu_template": "None"})
    assert "cpu_template" not in api.get("/machine-config").json
    assert fault(api.get("/cpu-config")) == "Invalid request method and/or path: GET /cpu-config."


def test_custom_template_guest(kvm, fresh):
    fresh.api.ok("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 64})
    fresh.api.ok("PUT", "/cpu-config", CUSTOM)
    boot_cpuid_guest(fresh, CUSTOM_WANT)


@pytest.mark.security
def test_custom_template_msr_guest(kvm, fresh):
    """An msr_modifiers item starts from brisk's boot value (IA32_PAT 0x0007040600070406, docs/cpuid.md) and the
    guest reads the result with rdmsr: PAT entry 1 becomes WC (0x01), the other entries stay."""
    fresh.api.ok("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 64})
    fresh.api.ok("PUT", "/cpu-config", {"msr_modifiers": [{"addr": "0x277", "bitmap": "0b00000001xxxxxxxx"}]})
    out = boot_cpuid_guest(fresh, "m0_idx=0x277 m0_mask=0xffffffffffffffff m0_val=0x0007040600070106")
    assert "cpuid: PASS template-m0-low value=0x70106 " in out, out


def test_pre_boot_only(kvm, fresh):
    fresh.api.ok("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 64})
    fresh.api.ok("PUT", "/cpu-config", CUSTOM)
    fresh.api.boot_source(guest("counter"))
    fresh.api.start()
    assert fault(fresh.api.put("/cpu-config", {})) == NOT_AFTER
    assert fault(fresh.api.patch("/machine-config", {"cpu_template": "None"})) == NOT_AFTER
    assert fresh.api.get("/machine-config").json["cpu_template"] == "None"


@pytest.mark.security
def test_custom_template_kvm_refusals(kvm, fresh):
    # docs/security.md case 66: a leaf KVM does not report / an MSR it does not list: InstanceStart's 400
    fresh.api.boot_source(guest("hello"))
    fresh.api.ok("PUT", "/cpu-config", {"cpuid_modifiers": [
        {"leaf": "0x4fffffff", "subleaf": "0x0", "flags": 0, "modifiers": []}]})
    assert fault(fresh.api.put("/actions", {"action_type": "InstanceStart"})) == \
        "Start microvm error: Failed to create guest config: Template changes a CPUID entry not supported by KVM: " \
        "Leaf: 4fffffff, Subleaf: 0"
    fresh.api.ok("PUT", "/cpu-config", {"msr_modifiers": [{"addr": "0x4fffffff", "bitmap": "0b1"}]})
    assert fault(fresh.api.put("/actions", {"action_type": "InstanceStart"})) == \
        "Start microvm error: Failed to create guest config: Template changes an MSR entry not supported by KVM: " \
        "Register Address: 4fffffff"
    fresh.api.ok("PUT", "/cpu-config", {"kvm_capabilities": ["4000000"]})
    assert fault(fresh.api.put("/actions", {"action_type": "InstanceStart"})) == \
        "Start microvm error: Missing KVM capabilities: 3d0900"
    assert fresh.api.get("/").json["state"] == "Not started"


# ---- firecracker-containerd, --config-file, snapshots ------------------------------------------------------------


def test_firecracker_containerd_t2_default(kvm, fresh):
    """firecracker-containerd (config/config.go defaultCPUTemplate T2, runtime/service.go) sends T2 only where
    internal.SupportCPUTemplate says so: an Intel host's /proc/cpuinfo. Its request as that host would make it."""
    machine = {"vcpu_count": 1, "mem_size_mib": 64, "smt": False}
    if INTEL:
        machine["cpu_template"] = "T2"
    fresh.api.ok("PUT", "/machine-config", machine)
    fresh.api.boot_source(guest("hello"), "console=ttyS0 reboot=k panic=1 pci=off")
    fresh.api.start()
    assert fresh.wait(60) == EXIT_GUEST_OK, fresh.err


@pytest.mark.security
@pytest.mark.skipif(not AMD, reason="replays an Intel host's request on an AMD host")
def test_firecracker_containerd_t2_on_amd(kvm, fresh):
    """The same request from an Intel host's configuration replayed here: InstanceStart is refused as Firecracker
    refuses it, and the VM can still be configured and started without the template."""
    fresh.api.ok("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 64, "smt": False, "cpu_template": "T2"})
    fresh.api.boot_source(guest("hello"), "console=ttyS0 reboot=k panic=1 pci=off")
    assert fault(fresh.api.put("/actions", {"action_type": "InstanceStart"})) == MISMATCH
    fresh.api.ok("PATCH", "/machine-config", {"cpu_template": "None"})
    fresh.api.start()
    assert fresh.wait(60) == EXIT_GUEST_OK, fresh.err


@pytest.mark.security
def test_config_file_cpu_config(kvm, tmp_path, sockdir, procs):
    tmpl = tmp_path / "custom.json"
    tmpl.write_text(json.dumps(CUSTOM))
    cfg = {"boot-source": {"kernel_image_path": guest("cpuid"), "boot_args": "cpus=1 " + CUSTOM_WANT + kvm_htt_arg()},
           "machine-config": {"vcpu_count": 1, "mem_size_mib": 64, "cpu_template": "T2A"},
           "cpu-config": str(tmpl)}
    path = tmp_path / "vm.json"
    path.write_text(json.dumps(cfg))
    # cpu-config is applied after machine-config (Firecracker's VmResources::from_json): the custom one wins
    p = run_brisk("--config-file", str(path))
    assert p.returncode == EXIT_GUEST_OK, p.stdout + p.stderr
    assert "cpuid: PASS template-w2 " in p.stdout
    tmpl.write_text('{"cpuid_modifiers": [{"leaf": "0x1"}]}')
    q = run_brisk("--config-file", str(path))
    assert q.returncode == EXIT_USAGE
    assert f"cpu-config {tmpl}: cpuid_modifiers[0]: missing field `subleaf`" in q.stderr, q.stderr
    cfg["cpu-config"] = str(tmp_path / "missing.json")
    path.write_text(json.dumps(cfg))
    assert run_brisk("--config-file", str(path)).returncode == EXIT_USAGE


def snapshot_with(tmp_path, procs, sockdir, configure):
    """A counter VM configured by `configure(api)`, snapshotted, and loaded into a new process (returned)."""
    sock = os.path.join(sockdir, "a.sock")
    a = Brisk(["--api-sock", sock], sock=sock)
    procs.append(a)
    configure(a.api)
    a.api.boot_source(guest("counter"))
    a.api.start()
    a.api.pause()
    state, mem = str(tmp_path / "vm.state"), str(tmp_path / "vm.mem")
    a.api.snapshot_create(state, mem)
    a.kill()
    sock2 = os.path.join(sockdir, "b.sock")
    b = Brisk(["--api-sock", sock2], sock=sock2)
    procs.append(b)
    b.api.snapshot_load(state, mem, resume_vm=False)  # 204: the rebuilt CPUID matched the saved one
    return b


@pytest.mark.skipif(not AMD, reason="T2A is for AMD hosts")
def test_snapshot_keeps_the_template_name(kvm, t2a, tmp_path, procs, sockdir):
    b = snapshot_with(tmp_path, procs, sockdir, lambda api: api.ok(
        "PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 64, "cpu_template": "T2A"}))
    assert b.api.get("/machine-config").json["cpu_template"] == "T2A"
    assert b.api.get("/vm/config").json["machine-config"]["cpu_template"] == "T2A"


def test_snapshot_keeps_a_custom_template(kvm, tmp_path, procs, sockdir):
    def configure(api):
        api.ok("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 64})
        api.ok("PUT", "/cpu-config", CUSTOM)
    b = snapshot_with(tmp_path, procs, sockdir, configure)
    assert b.api.get("/machine-config").json["cpu_template"] == "None"
    b.api.resume()
    time.sleep(0.2)
    assert b.proc.poll() is None, b.err


def test_snapshot_load_after_cpu_config(kvm, tmp_path, procs, sockdir):
    """PUT /cpu-config is not boot-specific in Firecracker (set_custom_cpu_template leaves boot_path alone):
    a snapshot may still be loaded after it, and the snapshot's own CPUID and template win."""
    sock = os.path.join(sockdir, "a.sock")
    a = Brisk(["--api-sock", sock], sock=sock)
    procs.append(a)
    a.api.ok("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 64})
    a.api.boot_source(guest("counter"))
    a.api.start()
    a.api.pause()
    state, mem = str(tmp_path / "vm.state"), str(tmp_path / "vm.mem")
    a.api.snapshot_create(state, mem)
    a.kill()
    sock2 = os.path.join(sockdir, "b.sock")
    b = Brisk(["--api-sock", sock2], sock=sock2)
    procs.append(b)
    b.api.ok("PUT", "/cpu-config", CUSTOM)
    b.api.snapshot_load(state, mem, resume_vm=True)
    assert "cpu_template" not in b.api.get("/machine-config").json
