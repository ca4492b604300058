"""The version-1 snapshot committed in tests/fixtures/snapshot-v1/ (written before sections had versions of their
own, README.md there) still loads: `brisk restore` continues the counter guest from "count 6" to its PASS. The
same file reframed with a version word in every frame (SNAP_FLAG_SECTION_VERSIONS, every section at version 1)
loads the same; a section at a version this brisk does not read is refused, naming the section and the version.

The vCPU section holds the CPUID and MSRs of the host that made the fixture: on a host whose CPUID differs the
restore is refused for that reason (exit 2, the leaf named) and these tests skip the guest's part; the decoding
of every section, byte for byte, is tests/unit/test_snap_fields.c's and needs no KVM."""
import gzip
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import BRISK, EXIT_GUEST_OK, EXIT_USAGE, check_sanitizers

pytestmark = pytest.mark.usefixtures("kvm")

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "snapshot-v1"
HEADER, FLAG_SECTION_VERSIONS = 24, 0x1
TAG_CONFIG, TAG_DEVICE = 1, 4
# What a refusal for this host's CPU looks like (src/arch/x86/kvm_state.c: check_cpuid, restore_msrs,
# match_tsc_khz, the XCRs of a host with XSAVE): the fixture's host is not this one; anything else is a failure.
HOST_DIFFERS = re.compile(r"restoring the vCPUs: .*(CPUID|MSR|TSC|XCRs)", re.S)


def crc64_jones(data):
    """snap_crc64 (include/brisk/snapshot.h): CRC-64/Jones, reflected, init 0, no final xor."""
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x95AC9329AC4BC9B5 if c & 1 else c >> 1
        table.append(c)
    crc = 0
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def sections(state):
    """[(tag, index, name, body)] of an unversioned state file."""
    magic, _, flags, plen = struct.unpack_from("<8sIIQ", state, 0)
    assert magic == b"BRISKSNP" and flags == 0
    out, pos = [], HEADER
    while pos < HEADER + plen:
        tag, index, nlen = struct.unpack_from("<III", state, pos)
        name = state[pos + 12:pos + 12 + nlen]
        (blen,) = struct.unpack_from("<Q", state, pos + 12 + nlen)
        body_at = pos + 20 + nlen
        out.append((tag, index, name, state[body_at:body_at + blen]))
        pos = body_at + blen
    return out


def versioned(state, version_of=lambda tag, index, name: 1):
    """The state file reframed with a version word after every section's index, and the flag that says so."""
    payload = b"".join(struct.pack("<IIII", tag, index, version_of(tag, index, name), len(name)) + name +
                       struct.pack("<Q", len(body)) + body for tag, index, name, body in sections(state))
    head = b"BRISKSNP" + struct.pack("<IIQ", 1, FLAG_SECTION_VERSIONS, len(payload))
    return head + payload + struct.pack("<Q", crc64_jones(head + payload))


@pytest.fixture
def snapshot(tmp_path):
    """(state path, memory path): the fixture's files copied out, the memory file gunzipped."""
    state, mem = tmp_path / "counter.state", tmp_path / "counter.mem"
    shutil.copy(FIXTURE / "counter.state", state)
    with gzip.open(FIXTURE / "counter.mem.gz", "rb") as g, open(mem, "wb") as f:
        shutil.copyfileobj(g, f)
    assert mem.stat().st_size == 16 << 20
    return state, mem


def restore(state, mem):
    p = subprocess.run([str(BRISK), "restore", "--snapshot", str(state), "--mem", str(mem)],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    check_sanitizers(p.stderr)
    return p


def check_guest_continues(p):
    """The restored counter goes on from the fixture's last line (count 5) to its PASS (stop=20), exit 0, or the
    host's CPU differs from the fixture's (then skips)."""
    if p.returncode == EXIT_USAGE and HOST_DIFFERS.search(p.stderr):
        pytest.skip(f"the fixture's vCPU state does not fit this host: {p.stderr.strip()[-300:]}")
    assert p.returncode == EXIT_GUEST_OK, f"exit {p.returncode}\nstdout:\n{p.stdout[-2000:]}\nstderr:\n{p.stderr}"
    before = (FIXTURE / "counter.serial").read_text()
    assert before.rstrip().endswith("count 5 sum 15"), before
    ns = [(int(n), int(s)) for n, s in re.findall(r"^count (\d+) sum (\d+)$", p.stdout, re.M)]
    assert ns == [(n, n * (n + 1) // 2) for n in range(6, 21)], p.stdout[-2000:]
    assert "counter: PASS" in p.stdout and "FAIL" not in p.stdout, p.stdout[-2000:]


def test_v1_fixture_restores(snapshot):
    """The version-1 files as committed: the guest counts 6..20 and passes."""
    check_guest_continues(restore(*snapshot))


def test_v1_fixture_reframed_with_versions_restores(snapshot):
    """The same sections, every one at version 1, in the versioned framing: the same restore."""
    state, mem = snapshot
    state.write_bytes(versioned(state.read_bytes()))
    check_guest_continues(restore(state, mem))


def test_unknown_config_version_refused(snapshot):
    """The configuration section at version 2, which this brisk does not read: refused before any VM is built
    (exit 2), naming the section and its version; the same on any host."""
    state, mem = snapshot
    state.write_bytes(versioned(state.read_bytes(), lambda tag, index, name: 2 if tag == TAG_CONFIG else 1))
    p = restore(state, mem)
    assert p.returncode == EXIT_USAGE, f"exit {p.returncode}\n{p.stderr}"
    assert "section config is version 2; this brisk reads versions 1 to 1" in p.stderr, p.stderr


@pytest.mark.parametrize("device", [b"serial8250", b"virtio-mmio", b"debug-exit"])
def test_unknown_device_version_refused(snapshot, device):
    """One device's section at version 7: refused (exit 2) with the device and the version named."""
    state, mem = snapshot
    state.write_bytes(versioned(state.read_bytes(), lambda tag, index, name: 7 if name == device else 1))
    p = restore(state, mem)
    if p.returncode == EXIT_USAGE and HOST_DIFFERS.search(p.stderr):
        pytest.skip("the vCPUs are refused on this host first")
    assert p.returncode == EXIT_USAGE, f"exit {p.returncode}\n{p.stderr}"
    assert re.search(rf"device \d+ \({device.decode()}\): its section is version 7", p.stderr), p.stderr
