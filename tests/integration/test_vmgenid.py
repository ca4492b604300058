"""The VM Generation ID, from inside the guest (guests/vmgenid.c): it finds the VGEN device in the DSDT as Linux
does (_CID "VM_Gen_Counter", ADDR), routes the GED's interrupt, reads the ID, is snapshotted, and after a restore
sees a new ID and the notification; two restores of one snapshot see two different IDs. Also: no device with
--acpi off, KVM's irqchip, a Uffd restore (the ID's page placed with UFFDIO_COPY), and a snapshot from before the
device (tests/fixtures/snapshot-v1, test_snapshot_fixture.py) still restoring without it. Needs KVM."""
import os
import re

import pytest

from conftest import EXIT_GUEST_OK, boot, guest
from test_snapshot import Brisk

pytestmark = pytest.mark.usefixtures("kvm")

ID_RE = re.compile(r"^vmgenid: device at (0x[0-9a-f]+), GED GSI (\d+), id ([0-9a-f]{32})$", re.M)
CHANGED_RE = re.compile(r"^vmgenid: CHECK changed: PASS \(before ([0-9a-f]{32}), after ([0-9a-f]{32})\)$", re.M)
NOTIFIED_RE = re.compile(r"^vmgenid: CHECK notified: PASS \((\d+) interrupts on GSI 3\)$", re.M)


def snapshot_vmgenid(procs, sockdir, d, *run_args):
    """Boots the guest with the API beside it, snapshots it while it waits; returns (state, mem, boot ID)."""
    sock = os.path.join(sockdir, "g.sock")
    b = Brisk(["run", "--kernel", guest("vmgenid"), "--memory", "64", *run_args, "--api-sock", sock], sock=sock)
    procs.append(b)
    b.wait_for(r"^vmgenid: waiting$", timeout=60)
    m = ID_RE.search(b.out)
    assert m and m.group(1) == "0xef000" and m.group(2) == "3", b.out
    b.api.pause()
    state, mem = os.path.join(d, "v.state"), os.path.join(d, "v.mem")
    assert b.api.snapshot_create(state, mem).status == 204
    b.kill()
    return state, mem, m.group(3)


def restore(procs, state, mem, *extra):
    b = Brisk(["restore", "--snapshot", state, *(["--mem", mem] if mem else []), *extra])
    procs.append(b)
    rc = b.wait(timeout=60)
    assert rc == EXIT_GUEST_OK, f"exit {rc}\n{b.out[-2000:]}\n{b.err[-2000:]}"
    assert "vmgenid: PASS" in b.out
    changed, notified = CHANGED_RE.search(b.out), NOTIFIED_RE.search(b.out)
    assert changed and notified, b.out
    return changed.group(1), changed.group(2)


@pytest.mark.parametrize("irqchip", ["split", "kernel"])
def test_two_restores_two_generations(tmp_path, sockdir, procs, irqchip):
    """The boot's ID is random and non-zero; each restore of the one snapshot gives the guest a new ID (not the
    boot's, not the other restore's) and its GED interrupt arrives, with brisk's I/O APIC or KVM's."""
    state, mem, boot_id = snapshot_vmgenid(procs, sockdir, str(tmp_path), "--irqchip", irqchip)
    assert boot_id != "0" * 32
    before1, after1 = restore(procs, state, mem)
    before2, after2 = restore(procs, state, mem)
    assert before1 == before2 == boot_id
    assert len({boot_id, after1, after2}) == 3 and "0" * 32 not in (after1, after2)


def test_two_boots_two_ids(tmp_path, sockdir, procs):
    """A boot's ID is random too: two boots, two IDs."""
    ids = []
    for i in range(2):
        d = tmp_path / str(i)
        d.mkdir()
        ids.append(snapshot_vmgenid(procs, sockdir, str(d))[2])
    assert ids[0] != ids[1]


def test_absent_without_acpi():
    """--acpi off: no tables, hence no VGEN and no GED (the guest checks there are none)."""
    p = boot("vmgenid", "--acpi", "off", "--cmdline", "absent=1", timeout=60)
    assert p.returncode == EXIT_GUEST_OK and "vmgenid: PASS" in p.stdout, p.stdout + p.stderr


def test_uffd_restore_gets_a_new_generation(tmp_path, sockdir, procs):
    """A Uffd restore: brisk places the ID's page itself (UFFDIO_COPY) before any vCPU runs, never waiting for the
    handler, and the guest sees the new ID and the interrupt as with a memory file."""
    from test_uffd import Handler

    state, mem, boot_id = snapshot_vmgenid(procs, sockdir, str(tmp_path))
    sock = os.path.join(sockdir, "uffd.sock")
    h = Handler(sock, mem, chunk=16, stats=str(tmp_path / "stats.json"))
    try:
        before, after = restore(procs, state, None, "--uffd", sock)
        assert before == boot_id and after != boot_id
        assert h.stats()["faults"] > 0
    finally:
        h.stop()
