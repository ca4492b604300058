"""The VM Generation ID and the VMClock page, from inside the guest (guests/vmgenid.c): it finds the VGEN device in
the DSDT as Linux does (_CID "VM_Gen_Counter", ADDR) and the VCLK device as Linux's ptp_vmclock does (_HID
"AMZNC10C", its page in _CRS; the structure as Firecracker fills it), routes the GED's interrupt, reads the ID, is
snapshotted, and after a restore sees a new ID, the notification and both VMClock counters one on; two restores of
one snapshot see two different IDs (and the same generation, 1), and clones restored at
once keep what each writes to itself (the memory file unchanged). Also: no device with
--acpi off, KVM's irqchip, a Uffd restore (the ID's page placed with UFFDIO_COPY), and a snapshot from before the
device (tests/fixtures/snapshot-v1, test_snapshot_fixture.py) still restoring without it. Two boots (one per irqchip)
and their snapshots serve every test. Needs KVM."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import EXIT_GUEST_OK, KVM_REASON, boot, check_sanitizers, guest, sha, short_tmpdir
from test_snapshot import Brisk

pytestmark = pytest.mark.usefixtures("kvm")

ID_RE = re.compile(r"^vmgenid: device at (0x[0-9a-f]+), GED GSI (\d+), id ([0-9a-f]{32})$", re.M)
CHANGED_RE = re.compile(r"^vmgenid: CHECK changed: PASS \(before ([0-9a-f]{32}), after ([0-9a-f]{32})\)$", re.M)
NOTIFIED_RE = re.compile(r"^vmgenid: CHECK notified: PASS \((\d+) interrupts on GSI 3\)$", re.M)
PRIVATE_RE = re.compile(r"^vmgenid: CHECK private: PASS \(256 of 256 pages hold this generation's ID\)$", re.M)
CLOCK_RE = re.compile(r"^vmgenid: vmclock at (0x[0-9a-f]+), (\d+) bytes, generation (\d+), disruption marker (\d+), "
                      r"seq (\d+)$", re.M)
CLOCK_PAGE = "vmgenid: CHECK vmclock page: PASS (magic 0x4b4c4356, version 1, counter 255, flags 0x300)"
# Every restore of a booted VM's snapshot: both counters 0 -> 1, the seqcount two on (an update done).
CLOCK_RESTORED = "vmgenid: CHECK vmclock restored: PASS (generation 0 -> 1, disruption marker 0 -> 1, seq 0 -> 2)"


def snapshot_vmgenid(procs, sockdir, d, *run_args):
    """Boots the guest with the API beside it, snapshots it while it waits; returns (state, mem, boot ID)."""
    sock = os.path.join(sockdir, "g.sock")
    b = Brisk(["run", "--kernel", guest("vmgenid"), "--memory", "64", *run_args, "--api-sock", sock], sock=sock)
    procs.append(b)
    b.wait_for(r"^vmgenid: waiting$", timeout=60)
    m = ID_RE.search(b.out)
    assert m and m.group(1) == "0xef000" and m.group(2) == "3", b.out
    clock = CLOCK_RE.search(b.out)
    assert clock and clock.groups() == ("0xee000", "4096", "0", "0", "0") and CLOCK_PAGE in b.out, b.out
    b.api.pause()
    state, mem = os.path.join(d, "v.state"), os.path.join(d, "v.mem")
    assert b.api.snapshot_create(state, mem).status == 204
    b.kill()
    return state, mem, m.group(3)


@pytest.fixture(scope="module")
def snaps(tmp_path_factory):
    """{irqchip: (state, mem, boot ID)}: the guest booted with brisk's I/O APIC and with KVM's, snapshotted."""
    if KVM_REASON:
        pytest.skip(KVM_REASON)
    procs, dirs, out = [], [], {}
    try:
        for irqchip in ("split", "kernel"):
            dirs.append(short_tmpdir("bsk"))
            d = str(tmp_path_factory.mktemp(irqchip))
            out[irqchip] = snapshot_vmgenid(procs, dirs[-1], d, "--irqchip", irqchip)
        yield out
    finally:
        for b in procs:
            b.kill()
            check_sanitizers(b.err)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def restore(procs, state, mem, *extra):
    b = Brisk(["restore", "--snapshot", state, *(["--mem", mem] if mem else []), *extra])
    procs.append(b)
    rc = b.wait(timeout=60)
    assert rc == EXIT_GUEST_OK, f"exit {rc}\n{b.out[-2000:]}\n{b.err[-2000:]}"
    assert "vmgenid: PASS" in b.out
    changed, notified = CHANGED_RE.search(b.out), NOTIFIED_RE.search(b.out)
    assert changed and notified and CLOCK_RESTORED in b.out, b.out
    return changed.group(1), changed.group(2)


def test_two_restores_two_generations(snaps, procs):
    """A boot's ID is random and non-zero (two boots, two IDs); each restore of one snapshot gives the guest a new
    ID (not the boot's, not the other restore's) and its GED interrupt arrives, with brisk's I/O APIC (two
    restores) or KVM's (one)."""
    state, mem, boot_id = snaps["split"]
    state_k, mem_k, boot_k = snaps["kernel"]
    assert "0" * 32 not in (boot_id, boot_k) and boot_id != boot_k
    before1, after1 = restore(procs, state, mem)
    before2, after2 = restore(procs, state, mem)
    before3, after3 = restore(procs, state_k, mem_k)
    assert before1 == before2 == boot_id and before3 == boot_k
    assert len({boot_id, boot_k, after1, after2, after3}) == 5 and "0" * 32 not in (after1, after2, after3)


def test_absent_without_acpi():
    """--acpi off: no tables, hence no VGEN and no GED (the guest checks there are none)."""
    p = boot("vmgenid", "--acpi", "off", "--cmdline", "absent=1", timeout=60)
    assert p.returncode == EXIT_GUEST_OK and "vmgenid: PASS" in p.stdout, p.stdout + p.stderr


def test_uffd_restore_gets_a_new_generation(snaps, tmp_path, sockdir, procs):
    """A Uffd restore: brisk places the ID's page itself (UFFDIO_COPY) before any vCPU runs, never waiting for the
    handler, and the guest sees the new ID and the interrupt as with a memory file."""
    from test_uffd import Handler

    state, mem, boot_id = snaps["split"]
    sock = os.path.join(sockdir, "uffd.sock")
    h = Handler(sock, mem, chunk=16, stats=str(tmp_path / "stats.json"))
    try:
        before, after = restore(procs, state, None, "--uffd", sock)
        assert before == boot_id and after != boot_id
        assert h.stats()["faults"] > 0
    finally:
        h.stop()


@pytest.mark.parametrize("irqchip", ["split", "kernel"])
def test_clones_keep_their_writes_to_themselves(irqchip, tmp_path, sockdir, procs):
    """Three clones restored at once from one snapshot (booted with hold=1): each writes its new ID over the same 256
    pages of its RAM; only when all three have written does each get a byte on COM1 and read its pages back: each
    finds its own ID in all 256 (a clone's writes never reach a sibling), the three IDs differ, and the memory file's
    bytes are the snapshot's (never written back). The guest waits for the byte halted, woken by the UART's receive
    interrupt, which brisk's console input thread raises (with either irqchip: its seccomp filter allows it)."""
    state, mem, boot_id = snapshot_vmgenid(procs, sockdir, str(tmp_path), "--irqchip", irqchip, "--cmdline", "hold=1")
    digest = sha(mem)
    clones = []
    for _ in range(3):
        clones.append(Brisk(["restore", "--snapshot", state, "--mem", mem], stdin=subprocess.PIPE))
        procs.append(clones[-1])
    for c in clones:
        c.wait_for(r"^vmgenid: written: 256 pages from 0x800000$", timeout=60)
    for c in clones:
        c.proc.stdin.write(b"x")
        c.proc.stdin.flush()
    ids = []
    for c in clones:
        assert c.wait(timeout=60) == EXIT_GUEST_OK, c.out + c.err
        changed = CHANGED_RE.search(c.out)
        assert changed and PRIVATE_RE.search(c.out) and CLOCK_RESTORED in c.out and "vmgenid: PASS" in c.out, c.out
        ids.append(changed.group(2))
    assert len(set(ids)) == 3 and boot_id not in ids, ids
    assert sha(mem) == digest, "a clone wrote to the snapshot's memory file"
