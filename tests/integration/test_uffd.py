"""mem_backend Uffd: guest memory served by a page-fault handler written to Firecracker v1.7.0's handshake
(tests/uffd_handler.py, which checks the message as Firecracker's example handlers do), through the API and
`brisk restore --uffd`; and the hostile handlers of docs/security.md cases 80-82: one that is not there, that exits,
that never serves, that closes the connection, that serves zero pages, that talks back. Whatever the handler does,
brisk's API answers, a stop is bounded, and the outcome is a clear error or one the guest sees. One snapshot of the
counter guest (counting for ever) serves every test: the handlers only read its memory file. Needs KVM."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import EXIT_GUEST_OK, EXIT_STOPPED, KVM_REASON, check_sanitizers, short_tmpdir
from test_snapshot import Brisk, api_brisk, check_continues, counts, make_counter_snapshot
from test_snapshot_diff import huge_pool  # noqa: F401 (a fixture, for the "2M" case)
from test_snapshot_diff import boot_counter, load_and_check, next_lines, pause_and, rebase, same_bytes

pytestmark = pytest.mark.usefixtures("kvm")

HANDLER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "uffd_handler.py")
EXIT_UFFD_HANDLER = 20
MSG_RE = re.compile(r'^\[\{"base_host_virt_addr":(\d+),"size":(\d+),"offset":(\d+),"page_size_kib":4\}\]$')


class Handler:
    """tests/uffd_handler.py in its own process, listening on `sock` for one brisk."""

    def __init__(self, sock, mem, mode="valid", chunk=16, stats=None):
        self.stats_path = stats
        args = [sys.executable, HANDLER, sock, mem, "--mode", mode, "--chunk", str(chunk)]
        if stats:
            args += ["--stats", stats]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not os.path.exists(sock):
            assert self.proc.poll() is None, f"handler exited: {self.proc.communicate()}"
            assert time.monotonic() < deadline, "the handler never listened"
            time.sleep(0.02)

    def stats(self):
        with open(self.stats_path) as f:
            return json.load(f)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.communicate()


@pytest.fixture
def handlers():
    started = []
    yield started
    for h in started:
        h.stop()


def wait_err(b, text, timeout=10):
    """Waits until brisk's stderr (read by a pump thread) holds `text`."""
    deadline = time.monotonic() + timeout
    while text not in b.err and time.monotonic() < deadline:
        time.sleep(0.05)
    return text in b.err


def load_uffd(b, state, sock, resume_vm=True):
    return b.api.put("/snapshot/load", {"snapshot_path": state, "resume_vm": resume_vm,
                                        "mem_backend": {"backend_type": "Uffd", "backend_path": sock}})


@pytest.fixture(scope="module")
def snap(tmp_path_factory):
    """(state, mem, output before the snapshot) of the counter guest with 64 MiB, paused at count 5."""
    if KVM_REASON:
        pytest.skip(KVM_REASON)
    d, sockdir, procs = tmp_path_factory.mktemp("uffd"), short_tmpdir("bsk"), []
    try:
        yield make_counter_snapshot(procs, sockdir, str(d), "c", mem_mib=64)
    finally:
        for b in procs:
            b.kill()
            check_sanitizers(b.err)
        shutil.rmtree(sockdir, ignore_errors=True)


# ---- a valid handler ----------------------------------------------------------------------------------------


def test_uffd_load_over_api(snap, tmp_path, sockdir, procs, handlers):
    """PUT /snapshot/load with mem_backend Uffd: the handler receives Firecracker's message byte for byte (one
    region of 64 MiB at offset 0, page_size_kib 4, serde's key order, no spaces) with a userfaultfd, serves the
    guest's faults from the memory file, and the count goes on from exactly last + 1 with every checksum right."""
    state, mem, before = snap
    sock = os.path.join(sockdir, "uffd.sock")
    h = Handler(sock, mem, stats=str(tmp_path / "stats.json"))
    handlers.append(h)
    b = api_brisk(procs, sockdir, "ok-load", "--log-level", "info")
    r = load_uffd(b, state, sock)
    assert r.status == 204, r
    last = counts(before)[-1][0]
    b.wait_for(rf"^count {last + 5} ", timeout=60)
    check_continues(before, b.out, more=5)
    st = h.stats()
    m = MSG_RE.match(st["message"])
    assert m, f"not Firecracker's GuestRegionUffdMapping JSON: {st['message']!r}"
    assert int(m.group(2)) == 64 << 20 and int(m.group(3)) == 0
    assert int(m.group(1)) % (2 << 20) == 0, "guest RAM is 2 MiB-aligned in brisk's address space"
    assert st["faults"] > 0 and st["copied_pages"] > 0, st
    assert wait_err(b, "served by the page-fault handler"), b.err
    b.api.pause()
    b.api.resume()
    b.wait_for(rf"^count {last + 7} ", timeout=60)


def test_uffd_restore_command_line(snap, tmp_path, sockdir, procs, handlers):
    """`brisk restore --snapshot S --uffd SOCK` with Firecracker's fault_all handler (every region copied at the
    first fault): the guest continues with every checksum right; SIGTERM ends brisk (16), and the handler ends
    when brisk does."""
    state, mem, before = snap
    sock = os.path.join(sockdir, "uffd.sock")
    h = Handler(sock, mem, mode="fault_all", stats=str(tmp_path / "stats.json"))
    handlers.append(h)
    b = Brisk(["restore", "--snapshot", state, "--uffd", sock])
    procs.append(b)
    b.wait_for(rf"^count {counts(before)[-1][0] + 5} ", timeout=60)
    b.proc.send_signal(signal.SIGTERM)
    rc = b.wait(timeout=30)
    assert rc == EXIT_STOPPED, f"exit {rc}\n{b.out[-2000:]}\n{b.err[-2000:]}"
    check_continues(before, b.out, more=5)
    assert h.stats()["copied_pages"] == (64 << 20) // 4096
    h.proc.wait(timeout=10)  # it watches brisk's pid (SO_PEERCRED): gone, it ends


def test_uffd_talkative_handler(snap, sockdir, procs, handlers):
    """A handler that writes junk back on the socket (brisk reads nothing, as Firecracker) still serves."""
    state, mem, before = snap
    sock = os.path.join(sockdir, "uffd.sock")
    handlers.append(Handler(sock, mem, mode="reply"))
    b = api_brisk(procs, sockdir, "talk-load")
    assert load_uffd(b, state, sock).status == 204
    last = counts(before)[-1][0]
    b.wait_for(rf"^count {last + 3} ", timeout=60)


# ---- no handler there ---------------------------------------------------------------------------------------


@pytest.mark.security
def test_uffd_socket_errors(snap, sockdir, procs):
    """Case 80: a socket path with nothing there, a regular file there, a path too long for a Unix socket: 400
    naming the path and the reason (Firecracker's tests: "No such file or directory", "Connection refused"),
    and the same process loads the snapshot afterwards."""
    state, mem, _ = snap
    b = api_brisk(procs, sockdir, "err-load")
    missing = os.path.join(sockdir, "nobody.sock")
    r = load_uffd(b, state, missing)
    assert r.status == 400 and "No such file or directory" in r.fault and missing in r.fault, r
    plain = os.path.join(sockdir, "plain")
    open(plain, "w").close()
    r = load_uffd(b, state, plain)
    assert r.status == 400 and "Connection refused" in r.fault, r
    r = load_uffd(b, state, "/tmp/" + "x" * 120)
    assert r.status == 400 and "longer than a Unix socket path" in r.fault, r
    r = b.api.put("/snapshot/load", {"snapshot_path": state, "mem_backend": {"backend_type": "Uffd"}})
    assert r.status == 400 and "backend_path" in r.fault, r
    b.api.snapshot_load(state, mem)
    b.wait_for(r"^count \d+ ", timeout=60)


# ---- hostile handlers -----------------------------------------------------------------------------------------


@pytest.mark.security
def test_uffd_handler_exits(snap, sockdir, procs, handlers):
    """Case 81: a handler that takes the userfaultfd and exits without serving a page: brisk notices (a pidfd of
    the handler's process) and ends the VM with status 20 and a line naming it, rather than leaving the vCPUs
    waiting for ever; the API answered the load first."""
    state, mem, _ = snap
    sock = os.path.join(sockdir, "uffd.sock")
    handlers.append(Handler(sock, mem, mode="exit"))
    b = api_brisk(procs, sockdir, "exit-load")
    assert load_uffd(b, state, sock).status == 204
    rc = b.wait(timeout=30)
    assert rc == EXIT_UFFD_HANDLER, f"exit {rc}\n{b.err[-2000:]}"
    assert "page-fault handler" in b.err and "exited with pages unserved" in b.err


@pytest.mark.security
@pytest.mark.parametrize("mode", ["silent", "close", "noaccept"])
def test_uffd_handler_never_serves(snap, sockdir, procs, handlers, mode):
    """Case 82: a handler that takes the userfaultfd and never serves it (silent), one that closes the connection
    unread (close), one that never accepts (noaccept: the message waits in its backlog). The guest waits for its
    pages, as with Firecracker, but brisk's API does not: the load is answered at once, GET / answers, a pause
    fails within its 2 s with a message naming the handler (tried with the silent one: the vCPU waits the same
    way in all three), and SIGTERM ends brisk (16) within seconds: the teardown unregisters guest RAM, which
    wakes the waiting vCPUs."""
    state, mem, _ = snap
    sock = os.path.join(sockdir, "uffd.sock")
    handlers.append(Handler(sock, mem, mode=mode))
    b = api_brisk(procs, sockdir, f"{mode}-load")
    t0 = time.monotonic()
    assert load_uffd(b, state, sock).status == 204
    assert time.monotonic() - t0 < 10
    time.sleep(0.5)  # the vCPU is in its first fault by now
    assert b.api.get("/").status == 200
    if mode == "silent":
        r = b.api.patch("/vm", {"state": "Paused"})
        assert r.status == 400 and "Failed to pause" in r.fault, r
        assert wait_err(b, "waiting for the page-fault handler"), b.err
    assert counts(b.out) == [], "the guest ran without its memory"
    t0 = time.monotonic()
    b.proc.send_signal(signal.SIGTERM)
    rc = b.wait(timeout=30)
    assert rc == EXIT_STOPPED, f"exit {rc}\n{b.err[-2000:]}"
    assert time.monotonic() - t0 < 15


@pytest.mark.security
def test_uffd_snapshot_of_a_stalled_handler(snap, tmp_path, sockdir, procs, handlers):
    """Case 82: a snapshot create of a Uffd-restored VM reads all of its memory, so the pages the handler has not
    served yet are fetched first (a thread of brisk's waits for them, the main thread watches). The handler serves
    the guest, the VM is paused, then the handler stops serving (alive): the create fails after 5 s in which no
    page came, 400 saying how many pages are missing, no file written, brisk answering after it. The handler
    serving again, the next create succeeds, and that snapshot restores from its memory file with the count
    going on."""
    state, mem, before = snap
    sock = os.path.join(sockdir, "uffd.sock")
    h = Handler(sock, mem, chunk=512)
    handlers.append(h)
    b = api_brisk(procs, sockdir, "stall-load")
    assert load_uffd(b, state, sock).status == 204
    last = counts(before)[-1][0]
    b.wait_for(rf"^count {last + 2} ", timeout=60)
    b.api.pause()
    h.proc.send_signal(signal.SIGUSR1)  # stops serving
    state2, mem2 = str(tmp_path / "s2.state"), str(tmp_path / "s2.mem")
    t0 = time.monotonic()
    r = b.api.put("/snapshot/create", {"snapshot_type": "Full", "snapshot_path": state2, "mem_file_path": mem2})
    took = time.monotonic() - t0
    assert r.status == 400 and "served no page of guest memory in 5000 ms" in r.fault, r
    assert re.search(r"\d+ pages \([\d.]+ MiB\) of 16384 are still missing", r.fault), r.fault
    assert 5 <= took < 20 and not os.path.exists(state2) and not os.path.exists(mem2), took
    assert b.api.get("/").status == 200
    h.proc.send_signal(signal.SIGUSR1)  # serves again
    b.api.snapshot_create(state2, mem2)  # 204
    b.kill()
    before2 = before + b.out  # counts 1..5 before the first snapshot, then the Uffd-restored VM's
    b2 = Brisk(["restore", "--snapshot", state2, "--mem", mem2])
    procs.append(b2)
    b2.wait_for(rf"^count {counts(before2)[-1][0] + 3} ", timeout=60)
    check_continues(before2, b2.out, more=3)


@pytest.mark.security
def test_uffd_handler_serves_zeros(snap, sockdir, procs, handlers):
    """Case 82: a handler that answers every fault with a zero page: the guest finds its code and data gone and
    ends (a triple fault, or its own FAIL): a guest-visible outcome, brisk neither hangs nor crashes."""
    state, mem, _ = snap
    sock = os.path.join(sockdir, "uffd.sock")
    handlers.append(Handler(sock, mem, mode="zero"))
    b = api_brisk(procs, sockdir, "zero-load")
    assert load_uffd(b, state, sock).status == 204
    try:
        b.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        # A guest spinning on zeroed memory without faulting is possible too: it must still stop on request.
        assert b.api.get("/").status == 200
        b.proc.send_signal(signal.SIGTERM)
    rc = b.wait(timeout=30)
    assert rc != EXIT_GUEST_OK, f"exit {rc}\n{b.out[-1000:]}\n{b.err[-2000:]}"
    assert counts(b.out) == [] or "FAIL" in b.out
    check_sanitizers(b.err)


# ---- with main's Diff snapshots and hugetlbfs --------------------------------------------------------------


@pytest.mark.parametrize("huge", [None, "2M"])
def test_uffd_restore_tracks_dirty_pages(tmp_path, sockdir, procs, handlers, request, huge):
    """As Firecracker v1.7.0 (persist.rs guest_memory_from_uffd takes track_dirty_pages and huge_pages): a Uffd
    load with track_dirty_pages gives a VM that takes Diffs, and a "2M" snapshot restores onto hugetlbfs RAM that
    the handler serves 2 MiB at a time (page_size_kib 2048). The Diff of the Uffd-restored VM, merged onto its
    base, is byte for byte the Full snapshot taken at the same pause, and a File load of it counts on."""
    if huge:
        request.getfixturevalue("huge_pool")
    b = boot_counter(procs, sockdir, "boot", 64, spread=16, huge=huge)
    b.wait_for(r"^count 5 ")
    base_state, base_mem = tmp_path / "b.state", tmp_path / "b.mem"
    before = pause_and(b, ("Full", base_state, base_mem))
    b.kill()
    sock = os.path.join(sockdir, "uffd.sock")
    h = Handler(sock, str(base_mem), stats=str(tmp_path / "stats.json"))
    handlers.append(h)
    c = api_brisk(procs, sockdir, "uffd-track", "--log-level", "info")
    r = c.api.put("/snapshot/load", {"snapshot_path": str(base_state), "resume_vm": True, "track_dirty_pages": True,
                                     "mem_backend": {"backend_type": "Uffd", "backend_path": sock}})
    assert r.status == 204, f"{r}\n{c.err[-2000:]}"
    last = counts(before)[-1][0]
    c.wait_for(rf"^count {last + 3} ", timeout=60)
    check_continues(before, c.out, more=3)
    assert f'"page_size_kib":{2048 if huge else 4}' in h.stats()["message"], h.stats()["message"]
    cfg = c.api.get("/vm/config").json["machine-config"]
    assert cfg["track_dirty_pages"] is True and cfg.get("huge_pages", "None") == (huge or "None"), cfg
    next_lines(c, 2)
    diff_state, diff_mem, full_mem = tmp_path / "d.state", tmp_path / "d.mem", tmp_path / "f.mem"
    before2 = pause_and(c, ("Diff", diff_state, diff_mem), ("Full", tmp_path / "f.state", full_mem))
    c.kill()
    merged = tmp_path / "m.mem"
    shutil.copy(base_mem, merged)
    p = rebase(merged, diff_mem)
    assert p.returncode == 0, p.stderr
    assert same_bytes(merged, full_mem) is None, f"the merge differs from the Full at {same_bytes(merged, full_mem)}"
    load_and_check(procs, sockdir, "merged", diff_state, merged, before + before2)  # counts 1.. across both
