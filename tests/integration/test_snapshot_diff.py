"""Diff snapshots, dirty page tracking, hugetlbfs guest memory and network_overrides, proved from inside the guest.

The counter guest (guests/counter.c) checks its own memory every line: each line writes the line number into its
history pages and into `spread=N` pages spread over all of RAM, after checking that they hold the previous line's
value, and checks the `fill=N` pages it wrote once at boot (memory a Diff leaves to its base), so a restore that
lost or zeroed a page prints "counter: FAIL" (test_snapshot.py's helpers read its output). Here:
  - a Diff of a guest that dirtied ~1% of its RAM allocates ~1% of the RAM in its memory file (st_blocks), the
    Full snapshot of the same guest what it ever touched (6% more, written at boot);
  - a Full base plus two Diff layers, merged with `brisk snapshot-editor edit-memory rebase` (Firecracker's
    command), is byte for byte the Full snapshot taken at the same pause, and restores to a guest that counts on
    from exactly the next line;
  - a Diff written onto the existing memory file at its path merges into it (Firecracker's create), a restored
    VM with enable_diff_snapshots / track_dirty_pages takes Diffs;
  - what must be refused is, with Firecracker's messages where it has one: a Diff without dirty tracking, a layer
    loaded without its base, a layer of another size, an unknown network_overrides id;
  - huge_pages "2M": hugetlbfs pages reserved from /proc/sys/vm/nr_hugepages (raised for the test, restored
    after; skipped, saying why, where none can be reserved), booted, snapshotted (Full and Diff) and restored.
Needs KVM (the nested harness here: scripts/nested-kvm.sh)."""
import os
import re
import shutil
import stat
import subprocess
import time

import pytest

from apiclient import BriskProcess
from conftest import BRISK, EXIT_USAGE, guest
from test_snapshot import Brisk, api_brisk, check_continues, counts, snapshot_running

pytestmark = pytest.mark.usefixtures("kvm")

PAGE = 4096
DIFF_NOT_ALLOWED = ("The requested operation is not supported: Diff snapshots are not allowed on uVMs with dirty "
                    "page tracking disabled.")
UNKNOWN_NET = ("Load snapshot error: Failed to restore from snapshot: Failed to get snapshot state from file: "
               "Unknown Network Device.")
UNKNOWN_VSOCK = ("Load snapshot error: Failed to restore from snapshot: Failed to get snapshot state from file: "
                 "Unknown Vsock Device.")
NO_REALTIME = ("Load snapshot error: Failed to restore from snapshot: Failed to build microVM from snapshot: Failed "
               "to restore microVM state: clock_realtime requested but not present in the snapshot state")
CLOCK_RE = re.compile(r"^count (\d+) sum \d+ clock (\d+)$", re.M)


def fault(r):
    assert r.status == 400, r
    return r.json["fault_message"]


def boot_counter(procs, sockdir, name, mem_mib, spread=8, fill=0, track=True, huge=None, extra=""):
    """A counter guest over the API (1 vCPU), dirty tracking and huge pages as asked; returns the process."""
    b = api_brisk(procs, sockdir, name)
    b.api.boot_source(guest("counter"), f"console=ttyS0 spread={spread} fill={fill} {extra}".strip())
    mc = {"track_dirty_pages": track}
    if huge:
        mc["huge_pages"] = huge
    b.api.machine_config(vcpu_count=1, mem_size_mib=mem_mib, **mc)
    b.api.start()
    return b


def pause_and(b, *snaps):
    """Pauses b (the console drained), takes each (type, state, mem) snapshot in order; returns b's output."""
    b.api.pause()
    out = b.settle()
    for kind, state, mem in snaps:
        b.api.snapshot_create(state, mem, snapshot_type=kind)
    return out


def next_lines(b, n, timeout=60):
    """Resumes b and waits for n more count lines; returns the last count."""
    last = counts(b.out)[-1][0]
    b.api.resume()
    b.wait_for(rf"^count {last + n} ", timeout=timeout)
    return last + n


def allocated(path):
    return os.stat(path).st_blocks * 512


def rebase(base, layer):
    p = subprocess.run([str(BRISK), "snapshot-editor", "edit-memory", "rebase", "--memory-path", str(base),
                        "--diff-path", str(layer)], capture_output=True, text=True, timeout=120)
    return p


def same_bytes(a, b, chunk=1 << 20):
    """Whether files a and b hold the same bytes (holes read as zeros); the first differing offset otherwise."""
    with open(a, "rb") as fa, open(b, "rb") as fb:
        off = 0
        while True:
            x, y = fa.read(chunk), fb.read(chunk)
            if x != y:
                for i, (p, q) in enumerate(zip(x, y)):
                    if p != q:
                        return off + i
                return off + min(len(x), len(y))
            if not x:
                return None
            off += len(x)


def load_and_check(procs, sockdir, name, state, mem, before, more=4, **load):
    """A fresh brisk loads (state, mem) and resumes: the count goes on from exactly the last line + 1."""
    c = api_brisk(procs, sockdir, name)
    body = {"snapshot_path": str(state), "mem_backend": {"backend_type": "File", "backend_path": str(mem)},
            "resume_vm": True, **load}
    r = c.api.put("/snapshot/load", body)
    assert r.status == 204, f"{r}\n{c.err[-2000:]}"
    last = counts(before)[-1][0]
    c.wait_for(rf"^count {last + more} ", timeout=60)
    check_continues(before, c.out, more=more)
    return c


# ---- a Diff holds what was dirtied -------------------------------------------------------------------------


def test_diff_writes_only_dirtied_pages(tmp_path, sockdir, procs):
    """A 256 MiB guest writing 1% of its pages (spread=655 of 65,536) every line, and 6.25% (fill=4096) once at
    boot: the Diff taken a few lines after a Full snapshot allocates about 1% (the pages, the guest's history,
    stack and page tables: well under 2% of RAM), the Full one all the guest ever touched (over 7%); both files
    are the guest's size."""
    mem_mib, spread, fill = 256, 655, 4096
    b = boot_counter(procs, sockdir, "d1pct", mem_mib, spread=spread, fill=fill)
    b.wait_for(r"^count 5 ")
    full_state, full_mem = tmp_path / "full.state", tmp_path / "full.mem"
    diff_state, diff_mem = tmp_path / "diff.state", tmp_path / "diff.mem"
    pause_and(b, ("Full", full_state, full_mem))
    next_lines(b, 3)
    t0 = time.monotonic()
    pause_and(b, ("Diff", diff_state, diff_mem))
    took = time.monotonic() - t0
    b.kill()
    size = mem_mib << 20
    assert os.path.getsize(diff_mem) == size and os.path.getsize(full_mem) == size
    dirty, full = allocated(diff_mem), allocated(full_mem)
    print(f"diff: {dirty} bytes allocated ({100 * dirty / size:.2f}% of {mem_mib} MiB; the guest wrote "
          f"{spread} spread pages = {100 * spread / (size // PAGE):.2f}%), full: {full} bytes, pause+diff {took:.2f} s")
    assert dirty >= spread * PAGE, f"the Diff lacks the pages the guest wrote: {dirty} bytes"
    assert dirty <= size * 0.02, f"the Diff holds {dirty} bytes, {100 * dirty / size:.2f}% of RAM"
    assert full >= fill * PAGE, f"the Full snapshot lacks the pages the guest wrote at boot: {full} bytes"
    assert dirty < full / 3, (dirty, full)


# ---- a chain restores to exactly the memory of a Full snapshot -----------------------------------------------


def test_base_plus_diff_chain_is_the_full_snapshot(tmp_path, sockdir, procs):
    """Full base at line 5, Diff d1 four lines on, Diff d2 and a Full f2 four lines later at the same pause.
    Merging d1 then d2 onto a copy of the base (brisk snapshot-editor, Firecracker's command) gives f2's bytes
    exactly; d2's state with the merged memory restores to a guest whose count goes on from the next line, with
    every memory check passing (the 1,024 fill pages among them: written before the base, in no layer); d2's
    layer alone is refused, naming its base."""
    b = boot_counter(procs, sockdir, "chain", 128, spread=64, fill=1024)
    b.wait_for(r"^count 5 ")
    d = tmp_path
    pause_and(b, ("Full", d / "base.state", d / "base.mem"))
    next_lines(b, 4)
    pause_and(b, ("Diff", d / "d1.state", d / "d1.mem"))
    next_lines(b, 4)
    before = pause_and(b, ("Diff", d / "d2.state", d / "d2.mem"), ("Full", d / "f2.state", d / "f2.mem"))
    b.kill()
    merged = d / "merged.mem"
    shutil.copy(d / "base.mem", merged)
    for layer in ("d1.mem", "d2.mem"):
        p = rebase(merged, d / layer)
        assert p.returncode == 0, p.stderr
    diff_at = same_bytes(merged, d / "f2.mem")
    assert diff_at is None, f"base + d1 + d2 differs from the Full snapshot at byte 0x{diff_at:x}"
    # the layer alone: refused before anything runs
    p = subprocess.run([str(BRISK), "restore", "--snapshot", str(d / "d2.state"), "--mem", str(d / "d2.mem")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == EXIT_USAGE, p
    assert "without its base" in p.stderr and "snapshot-editor edit-memory rebase" in p.stderr, p.stderr
    # the merged chain: the guest goes on, and so does the Full snapshot of the same moment
    load_and_check(procs, sockdir, "chain-load", d / "d2.state", merged, before)
    load_and_check(procs, sockdir, "full-load", d / "f2.state", d / "f2.mem", before)


def test_diff_onto_existing_memory_file_merges(tmp_path, sockdir, procs):
    """Firecracker's create: a Diff whose mem_file_path holds a memory file of the guest's size merges onto it.
    The VM is snapshotted Full into M, runs, then Diff into M again: M is then a complete memory file, whose state
    restores; its allocated size did not shrink to the layer's."""
    b = boot_counter(procs, sockdir, "onto", 64, spread=16)
    b.wait_for(r"^count 5 ")
    mem = tmp_path / "vm.mem"
    pause_and(b, ("Full", tmp_path / "f.state", mem))
    full = allocated(mem)
    next_lines(b, 4)
    before = pause_and(b, ("Diff", tmp_path / "d.state", mem))
    b.kill()
    assert allocated(mem) >= full
    load_and_check(procs, sockdir, "onto-load", tmp_path / "d.state", mem, before)


def test_restored_vm_takes_diffs(tmp_path, sockdir, procs):
    """A VM loaded with enable_diff_snapshots (v1.7.0) takes a Diff of what it wrote since the load; merged onto
    the file it was loaded from, the Diff's state restores (loaded this time with track_dirty_pages, the name
    from Firecracker 1.13, which GET /machine-config then shows). Loaded without either, a Diff is refused."""
    b = boot_counter(procs, sockdir, "r0", 64, spread=16, track=False)
    b.wait_for(r"^count 5 ")
    out0 = pause_and(b, ("Full", tmp_path / "b.state", tmp_path / "b.mem"))
    b.kill()
    c = load_and_check(procs, sockdir, "r1", tmp_path / "b.state", tmp_path / "b.mem", out0,
                       enable_diff_snapshots=True)
    assert c.api.get("/machine-config").json["track_dirty_pages"] is True
    c.wait_for(rf"^count {counts(out0 + c.out)[-1][0] + 2} ", timeout=60)
    c.api.pause()
    out1 = c.settle()
    c.api.snapshot_create(tmp_path / "d.state", tmp_path / "d.mem", snapshot_type="Diff")
    c.kill()
    merged = tmp_path / "m.mem"
    shutil.copy(tmp_path / "b.mem", merged)
    assert rebase(merged, tmp_path / "d.mem").returncode == 0
    e = load_and_check(procs, sockdir, "r2", tmp_path / "d.state", merged, out0 + out1, track_dirty_pages=True)
    assert e.api.get("/machine-config").json["track_dirty_pages"] is True
    e.kill()
    f = api_brisk(procs, sockdir, "r3")
    f.api.snapshot_load(tmp_path / "b.state", tmp_path / "b.mem", resume_vm=False)
    assert f.api.get("/machine-config").json["track_dirty_pages"] is False
    assert fault(f.api.put("/snapshot/create", {"snapshot_type": "Diff", "snapshot_path": str(tmp_path / "x"),
                                                "mem_file_path": str(tmp_path / "y")})) == DIFF_NOT_ALLOWED


# ---- what is refused ----------------------------------------------------------------------------------------


@pytest.mark.security
def test_diff_refusals(tmp_path, sockdir, procs):
    """Each refused with its message, nothing written: a Diff of a VM without dirty tracking (Firecracker's exact
    message), before InstanceStart; a Diff onto an existing file of the guest's size that is not its base;
    a layer merged onto a base of another size (brisk snapshot-editor: exit 2), a memory file of the wrong size
    at load; load options of the wrong type."""
    a = api_brisk(procs, sockdir, "nt")
    st, mem = str(tmp_path / "x.state"), str(tmp_path / "x.mem")
    msg = fault(a.api.put("/snapshot/create", {"snapshot_type": "Diff", "snapshot_path": st, "mem_file_path": mem}))
    assert msg == "The requested operation is not supported before starting the microVM."
    a.api.boot_source(guest("counter"), "console=ttyS0")
    a.api.machine_config(vcpu_count=1, mem_size_mib=64)
    a.api.start()
    a.wait_for(r"^count 2 ")
    a.api.pause()
    assert fault(a.api.put("/snapshot/create", {"snapshot_type": "Diff", "snapshot_path": st,
                                                "mem_file_path": mem})) == DIFF_NOT_ALLOWED
    assert not os.path.exists(st) and not os.path.exists(mem)
    a.kill()
    # a file of the guest's size at the Diff's path that is not b's base (b's Diff has one, its Full snapshot):
    # not merged into. (Another counter VM's memory would not do: the guest is deterministic, and the pages a
    # Diff leaves out, sampled, are the same bytes in both.)
    b = boot_counter(procs, sockdir, "t", 64, spread=8)
    b.wait_for(r"^count 3 ")
    pause_and(b, ("Full", tmp_path / "t0.state", tmp_path / "t0.mem"))
    with open(tmp_path / "other.mem", "wb") as f:
        f.write(b"\x5a" * (64 << 20))
    old = (tmp_path / "other.mem").read_bytes()
    msg = fault(b.api.put("/snapshot/create", {"snapshot_type": "Diff", "snapshot_path": str(tmp_path / "t.state"),
                                               "mem_file_path": str(tmp_path / "other.mem")}))
    assert "is not this VM's previous snapshot's memory" in msg, msg
    assert (tmp_path / "other.mem").read_bytes() == old and not (tmp_path / "t.state").exists()
    # a layer of another size: the merge refuses, the base untouched
    b.api.snapshot_create(tmp_path / "t.state", tmp_path / "t.mem", snapshot_type="Diff")
    b.kill()
    small = tmp_path / "small.mem"
    with open(small, "wb") as f:
        f.truncate(32 << 20)
    p = rebase(small, tmp_path / "t.mem")
    assert p.returncode == EXIT_USAGE and "a layer merges only onto the memory file of the same guest" in p.stderr
    assert os.path.getsize(small) == 32 << 20
    # a chain of the wrong size at load
    c = api_brisk(procs, sockdir, "wrong")
    msg = fault(c.api.put("/snapshot/load", {"snapshot_path": str(tmp_path / "t.state"),
                                             "mem_backend": {"backend_type": "File", "backend_path": str(small)}}))
    assert "bytes, but the snapshot's guest has 67108864" in msg, msg
    for body, key in (({"enable_diff_snapshots": "yes"}, "enable_diff_snapshots"),
                      ({"track_dirty_pages": 1}, "track_dirty_pages"),
                      ({"network_overrides": {}}, "network_overrides: expected an array"),
                      ({"network_overrides": [{"iface_id": "eth0"}]}, "host_dev_name is required"),
                      ({"network_overrides": [{"iface_id": "eth0", "host_dev_name": "a/b"}]},
                       "is not an interface name")):
        load = {"snapshot_path": str(tmp_path / "t.state"), "mem_file_path": str(tmp_path / "t.mem"), **body}
        assert key in fault(c.api.put("/snapshot/load", load))
    assert c.api.get("/").json["state"] == "Not started"


# ---- network_overrides ----------------------------------------------------------------------------------------


def netns_or_skip():
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun") or not shutil.which("ip"):
        pytest.skip("needs root, /dev/net/tun and iproute2 (taps in a network namespace)")
    ns = f"brisk-diff-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode:
        pytest.skip("ip netns add failed")
    for tap in ("btapa", "btapb"):
        subprocess.run(["ip", "netns", "exec", ns, "ip", "tuntap", "add", "dev", tap, "mode", "tap"],
                       capture_output=True, check=True)
    return ns


class NsBrisk(Brisk):
    """brisk --api-sock in network namespace `ns` (ip netns exec execs it: the same pid)."""

    def __init__(self, ns, sock):
        BriskProcess.__init__(self, "ip", ["netns", "exec", ns, str(BRISK), "--api-sock", sock], sock)


def tun_names(pid):
    """The tap names brisk's tun fds are attached to (/proc/PID/fdinfo's iff: lines)."""
    names = []
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            text = open(f"/proc/{pid}/fdinfo/{fd}").read()
        except OSError:
            continue
        names += re.findall(r"^iff:\s*(\S+)", text, re.M)
    return names


def test_network_overrides(tmp_path, sockdir, procs):
    """Firecracker 1.12's network_overrides: a snapshot of a VM on tap btapa loads onto tap btapb (the restored
    brisk's tun fd is attached to btapb, GET /vm/config says so under the same iface_id, the guest counts on); an
    iface_id the snapshot has not is Firecracker's "Unknown Network Device.", nothing built."""
    ns = netns_or_skip()
    try:
        a = NsBrisk(ns, os.path.join(sockdir, "na.sock"))
        procs.append(a)
        a.api.boot_source(guest("counter"), "console=ttyS0")
        a.api.machine_config(vcpu_count=1, mem_size_mib=64)
        a.api.ok("PUT", "/network-interfaces/wan", {"iface_id": "wan", "host_dev_name": "btapa"})
        a.api.start()
        before = snapshot_running(a, tmp_path / "n.state", tmp_path / "n.mem")
        b = NsBrisk(ns, os.path.join(sockdir, "nb.sock"))
        procs.append(b)
        load = {"snapshot_path": str(tmp_path / "n.state"), "mem_file_path": str(tmp_path / "n.mem"),
                "resume_vm": True}
        assert fault(b.api.put("/snapshot/load", {**load, "network_overrides": [
            {"iface_id": "eth0", "host_dev_name": "btapb"}]})) == UNKNOWN_NET
        assert b.api.get("/").json["state"] == "Not started"
        b.api.ok("PUT", "/snapshot/load", {**load, "network_overrides": [
            {"iface_id": "wan", "host_dev_name": "btapb"}]})
        last = counts(before)[-1][0]
        b.wait_for(rf"^count {last + 3} ", timeout=60)
        check_continues(before, b.out, more=3)
        assert tun_names(b.proc.pid) == ["btapb"]
        nets = b.api.get("/vm/config").json["network-interfaces"]
        assert [(n["iface_id"], n["host_dev_name"]) for n in nets] == [("wan", "btapb")]
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def clock_jump(before, after):
    """The guest's kvmclock step (ms) from the last count line before the snapshot to the first after the restore."""
    last = {int(n): int(c) for n, c in CLOCK_RE.findall(before)}
    rows = [(int(n), int(c)) for n, c in CLOCK_RE.findall(after)]
    n0 = max(last)
    first = [c for n, c in rows if n == n0 + 1]
    assert first, f"no count line {n0 + 1} with a clock after the restore:\n{after[-1500:]}"
    return first[0] - last[n0]


def test_clock_realtime(tmp_path, sockdir, procs):
    """Firecracker 1.15's clock_realtime, seen from inside (guests/counter.c kvmclock=1 reads kvmclock as Linux
    does): a plain load resumes the guest's clock where the snapshot stopped it (a step of well under the time the
    snapshot lay on disk), one with clock_realtime advances it by that wall-clock time (KVM_CLOCK_REALTIME with the
    reading KVM_GET_CLOCK gave at the create); where this KVM gives no reading (Linux < 5.16, a host clocksource
    other than the TSC) the load is refused with Firecracker's words, nothing built, and the test says so."""
    b = boot_counter(procs, sockdir, "clk", 64, track=False, extra="kvmclock=1 period_ms=20")
    b.wait_for(r"^count 10 .* clock \d+$")
    state, mem = tmp_path / "c.state", tmp_path / "c.mem"
    before = pause_and(b, ("Full", state, mem))
    t_snap = time.monotonic()
    b.kill()
    time.sleep(2.5)
    plain = load_and_check(procs, sockdir, "clk-plain", state, mem, before)
    jump_plain = clock_jump(before, plain.out)
    c = api_brisk(procs, sockdir, "clk-rt")
    body = {"snapshot_path": str(state), "mem_backend": {"backend_type": "File", "backend_path": str(mem)},
            "resume_vm": True, "clock_realtime": True}
    t_load = time.monotonic()
    r = c.api.put("/snapshot/load", body)
    if r.status == 400:
        assert r.json["fault_message"] == NO_REALTIME, r.json
        assert c.api.get("/").json["state"] == "Not started"
        pytest.skip("this KVM gave the snapshot no KVM_CLOCK_REALTIME reading (Linux < 5.16 or a host "
                    "clocksource other than the TSC): the refusal is checked, the clock step is not")
    assert r.status == 204, f"{r}\n{c.err[-2000:]}"
    last = counts(before)[-1][0]
    c.wait_for(rf"^count {last + 4} ", timeout=60)
    check_continues(before, c.out, more=4)
    jump_rt = clock_jump(before, c.out)
    gap_ms = (t_load - t_snap) * 1000
    print(f"clock_realtime: snapshot -> load {gap_ms:.0f} ms; the guest's clock stepped {jump_plain} ms (plain "
          f"load), {jump_rt} ms (clock_realtime)")
    assert jump_plain < gap_ms - 1500, (jump_plain, gap_ms)
    assert jump_rt >= gap_ms - 300, (jump_rt, jump_plain, gap_ms)


def test_vsock_override(tmp_path, sockdir, procs):
    """Firecracker 1.15's vsock_override: a snapshot of a VM whose vsock listened on v1.sock loads with its socket
    at v2.sock (brisk listens there, GET /vm/config says so, v1.sock is not made again) and the guest counts on;
    a snapshot without a vsock device refuses it with Firecracker's "Unknown Vsock Device.", nothing built; a
    malformed override is a 400 naming it. `brisk restore --vsock-uds` does the same from the command line: a
    third copy beside the loaded one listens on v3.sock and counts on; a snapshot without vsock or `brisk run`
    refuse it (exit 2)."""
    v1, v2 = os.path.join(sockdir, "v1.sock"), os.path.join(sockdir, "v2.sock")
    b = api_brisk(procs, sockdir, "vs")
    b.api.boot_source(guest("counter"), "console=ttyS0")
    b.api.machine_config(vcpu_count=1, mem_size_mib=64)
    b.api.ok("PUT", "/vsock", {"guest_cid": 3, "uds_path": v1})
    b.api.start()
    b.wait_for(r"^count 3 ")
    before = pause_and(b, ("Full", tmp_path / "v.state", tmp_path / "v.mem"))
    b.kill()  # SIGKILL: v1.sock stays behind, as after a crash
    os.unlink(v1)
    c = load_and_check(procs, sockdir, "vs-load", tmp_path / "v.state", tmp_path / "v.mem", before,
                       vsock_override={"uds_path": v2, "ignored": 1})
    assert stat.S_ISSOCK(os.stat(v2).st_mode) and not os.path.exists(v1)
    assert c.api.get("/vm/config").json["vsock"]["uds_path"] == v2
    v3 = os.path.join(sockdir, "v3.sock")
    r = Brisk(["restore", "--snapshot", str(tmp_path / "v.state"), "--mem", str(tmp_path / "v.mem"), "--vsock-uds",
               v3])
    procs.append(r)
    r.wait_for(rf"^count {counts(before)[-1][0] + 4} ", timeout=60)
    assert stat.S_ISSOCK(os.stat(v3).st_mode) and stat.S_ISSOCK(os.stat(v2).st_mode)
    # a snapshot without vsock
    d = boot_counter(procs, sockdir, "novs", 64, track=False)
    d.wait_for(r"^count 3 ")
    pause_and(d, ("Full", tmp_path / "n.state", tmp_path / "n.mem"))
    d.kill()
    e = api_brisk(procs, sockdir, "novs-load")
    load = {"snapshot_path": str(tmp_path / "n.state"), "mem_file_path": str(tmp_path / "n.mem")}
    assert fault(e.api.put("/snapshot/load", {**load, "vsock_override": {"uds_path": v2}})) == UNKNOWN_VSOCK
    for bad, why in (({"path": v2}, "uds_path is required"), ("v2", "expected an object"),
                     ({"uds_path": ""}, "uds_path: empty")):
        assert why in fault(e.api.put("/snapshot/load", {**load, "vsock_override": bad}))
    assert e.api.get("/").json["state"] == "Not started"
    p = subprocess.run([str(BRISK), "restore", "--snapshot", str(tmp_path / "n.state"), "--mem",
                        str(tmp_path / "n.mem"), "--vsock-uds", v3 + "x"], capture_output=True, text=True, timeout=60)
    assert p.returncode == EXIT_USAGE and "the snapshot's VM has no vsock device" in p.stderr, p.stderr
    p = subprocess.run([str(BRISK), "run", "--kernel", guest("counter"), "--vsock-uds", v3 + "x"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == EXIT_USAGE and "belong to 'brisk restore'" in p.stderr, p.stderr
    assert not os.path.exists(v3 + "x")


def ram_vmflags(pid, mem):
    """The VmFlags of the mapping of the memory file `mem` in process pid's smaps (the restored guest's RAM)."""
    cur = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                cur = line.rstrip().endswith(str(mem))
            elif cur and line.startswith("VmFlags:"):
                return line.split()[1:]
    raise AssertionError(f"no mapping of {mem} in /proc/{pid}/smaps")


def test_load_huge_pages(tmp_path, sockdir, procs):
    """Firecracker 1.15's huge_pages on a load: "Transparent" asks transparent huge pages for the restored RAM
    (madvise MADV_HUGEPAGE: "hg" in the mapping's VmFlags), "None" and the default "Snapshot" (a 4 KiB snapshot)
    do not; GET /machine-config says which; the guest counts on each time; a value Firecracker's enum has not is
    a 400 listing the four."""
    b = boot_counter(procs, sockdir, "hp", 64, track=False)
    b.wait_for(r"^count 3 ")
    state, mem = tmp_path / "h.state", tmp_path / "h.mem"
    before = pause_and(b, ("Full", state, mem))
    b.kill()
    for name, value, hg in (("hp-thp", "Transparent", True), ("hp-none", "None", False),
                            ("hp-snap", None, False)):
        extra = {"huge_pages": value} if value else {}
        c = load_and_check(procs, sockdir, name, state, mem, before, **extra)
        assert ("hg" in ram_vmflags(c.proc.pid, mem)) == hg, (value, ram_vmflags(c.proc.pid, mem))
        assert c.api.get("/machine-config").json["huge_pages"] == ("Transparent" if hg else "None")
        c.kill()
    e = api_brisk(procs, sockdir, "hp-bad")
    msg = fault(e.api.put("/snapshot/load", {"snapshot_path": str(state), "mem_file_path": str(mem),
                                             "huge_pages": "2m"}))
    assert msg.endswith('huge_pages: "2m" is not one of "Snapshot", "None", "Transparent", "2M"'), msg


# ---- hugetlbfs ------------------------------------------------------------------------------------------------


def hugepages():
    """/proc/meminfo's HugePages_* counters."""
    out = {}
    for line in open("/proc/meminfo"):
        m = re.match(r"HugePages_(\w+):\s+(\d+)", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


@pytest.fixture
def huge_pool():
    """Raises /proc/sys/vm/nr_hugepages by 96 2 MiB pages (two 64 MiB guests and some room), restoring the old
    value after; skips, saying why, where they cannot be had (not root, no hugetlbfs, memory too fragmented)."""
    knob = "/proc/sys/vm/nr_hugepages"
    if os.geteuid() != 0 or not os.path.exists(knob):
        pytest.skip("hugetlbfs pages: needs root and /proc/sys/vm/nr_hugepages")
    old = int(open(knob).read())
    want = 96
    try:
        with open(knob, "w") as f:
            f.write(str(old + want))
        got = hugepages().get("Free", 0)
        if got < want:
            pytest.skip(f"only {got} 2 MiB hugetlbfs pages could be reserved (wanted {want})")
        yield got
    finally:
        with open(knob, "w") as f:
            f.write(str(old))


def test_hugetlbfs_boot_snapshot_restore(tmp_path, sockdir, procs, huge_pool):
    """huge_pages "2M": the guest's 64 MiB are 32 hugetlbfs pages reserved at the start (HugePages_Rsvd + used);
    a Full snapshot and a Diff after it (dirty tracking on hugetlbfs RAM: 4 KiB pages, as Firecracker's) restore
    (the memory file is copied into hugetlbfs pages again: the load cannot map a file onto them) and the guest
    counts on; GET /machine-config says "2M"."""
    free0 = hugepages()["Free"]
    b = boot_counter(procs, sockdir, "huge", 64, spread=16, huge="2M")
    b.wait_for(r"^count 5 ")
    hp = hugepages()
    assert free0 - hp["Free"] + hp["Rsvd"] >= 32, (free0, hp)
    assert b.api.get("/machine-config").json["huge_pages"] == "2M"
    pause_and(b, ("Full", tmp_path / "h.state", tmp_path / "h.mem"))
    next_lines(b, 3)
    before = pause_and(b, ("Diff", tmp_path / "hd.state", tmp_path / "hd.mem"))
    b.kill()
    assert allocated(tmp_path / "hd.mem") < allocated(tmp_path / "h.mem")
    merged = tmp_path / "hm.mem"
    shutil.copy(tmp_path / "h.mem", merged)
    assert rebase(merged, tmp_path / "hd.mem").returncode == 0
    c = load_and_check(procs, sockdir, "huge-load", tmp_path / "hd.state", merged, before)
    assert c.api.get("/machine-config").json["huge_pages"] == "2M"
    hp = hugepages()
    assert free0 - hp["Free"] + hp["Rsvd"] >= 32, (free0, hp)


def test_load_huge_pages_2m(tmp_path, sockdir, procs, huge_pool):
    """huge_pages on a load across kinds: a 4 KiB snapshot loaded with "2M" gets hugetlbfs RAM (its 32 pages taken
    from the pool, the memory file copied in), a "2M" one loaded with "None" gets 4 KiB RAM mapped from its file
    (the pool untouched); the guest counts on both times and GET /machine-config says which."""
    free0 = hugepages()["Free"]
    b = boot_counter(procs, sockdir, "h4k", 64, track=False)
    b.wait_for(r"^count 3 ")
    before = pause_and(b, ("Full", tmp_path / "a.state", tmp_path / "a.mem"))
    b.kill()
    c = load_and_check(procs, sockdir, "h4k-2m", tmp_path / "a.state", tmp_path / "a.mem", before, huge_pages="2M")
    hp = hugepages()
    assert free0 - hp["Free"] + hp["Rsvd"] >= 32, (free0, hp)
    assert c.api.get("/machine-config").json["huge_pages"] == "2M"
    before += pause_and(c, ("Full", tmp_path / "b.state", tmp_path / "b.mem"))  # the lines since line 1
    c.kill()
    c.wait(timeout=30)
    d = load_and_check(procs, sockdir, "h2m-none", tmp_path / "b.state", tmp_path / "b.mem", before,
                       huge_pages="None")
    hp = hugepages()
    assert hp["Free"] - hp["Rsvd"] == free0, (free0, hp)
    assert d.api.get("/machine-config").json["huge_pages"] == "None"


def test_hugetlbfs_pool_too_small(sockdir, procs, huge_pool):
    """A guest larger than the free pool is refused at InstanceStart (the pages are reserved at the map, so
    never a SIGBUS later), naming the pool; the process stays up."""
    free = hugepages()["Free"]
    a = api_brisk(procs, sockdir, "toosmall")
    a.api.boot_source(guest("counter"), "console=ttyS0")
    a.api.machine_config(vcpu_count=1, mem_size_mib=2 * (free + 8), huge_pages="2M")
    msg = fault(a.api.put("/actions", {"action_type": "InstanceStart"}))
    assert "too few free pages" in msg and "nr_hugepages" in msg, msg
    assert a.api.get("/").json["state"] == "Not started"
