"""Working-set record and prefetch (include/brisk/wset.h, docs/performance.md "Working set"), proved on the
guests/wset.c guest: it fills pages scattered over 256 MiB, is snapshotted, and after a restore reads them all back
in a scattered order and checks each. `brisk restore --working-set record=MS` writes MEM.ws, which must cover every
page the guest touched (computed here from the guest's LCG); a later restore prefetches it; `off` does not; a
corrupt, truncated or foreign MEM.ws is refused with a warning and the restore is lazy (docs/security.md case 84);
a clone server's clones prefetch it too.
The timing comparison is bench/wset.py (nested harness). Needs KVM."""
import json
import os
import re
import shutil
import struct
import subprocess
import time

import pytest

from apiclient import BriskProcess
from conftest import BRISK, EXIT_GUEST_OK, KVM_REASON, check_sanitizers, guest, short_tmpdir
from test_snapshot import Brisk
from test_snapshot_fixture import crc64_jones

pytestmark = pytest.mark.usefixtures("kvm")

PAGES = 1024  # 4 MiB: the emulator is slow; bench/wset.py measures 64 MiB
REGION_START, REGION_PAGES, LCG_A, LCG_C = 16 << 20, 65536, 0x5BD5, 0x3039  # guests/wset.c
RECORDED_RE = re.compile(r"working set: (\d+) pages \([\d.]+ MiB\) in (\d+) ranges touched in the first (\d+) ms "
                         r"\(until the boot marker\) recorded in (\S+)")
PREFETCH_RE = re.compile(r"working set: (\d+) pages \([\d.]+ MiB\) in (\d+) ranges from (\S+): reads started in "
                         r"[\d.]+ ms, mapped in [\d.]+ ms (while|before) the vCPUs ran")


def wset_pages(n):
    """The guest-physical pages guests/wset.c touches, as memory-file page indexes."""
    p, out = 0, []
    for _ in range(n):
        out.append(REGION_START // 4096 + p)
        p = (p * LCG_A + LCG_C) & (REGION_PAGES - 1)
    return out


def read_ws(path):
    """The file as include/brisk/wset.h lays it out: (state CRC, RAM bytes, [(first, count)])."""
    b = open(path, "rb").read()
    magic, version, page, crc, mem, nr, zero = struct.unpack_from("<8sIIQQII", b)
    assert (magic, version, page, zero) == (b"BRSKWSET", 1, 4096, 0) and len(b) == 40 + 16 * nr + 8
    return crc, mem, [struct.unpack_from("<QQ", b, 40 + 16 * i) for i in range(nr)]


@pytest.fixture(scope="module")
def snap(tmp_path_factory):
    """One snapshot of the guest for the module's tests (each records its own MEM.ws first where it needs one)."""
    if KVM_REASON:
        pytest.skip(KVM_REASON)
    tmp, sockdir = tmp_path_factory.mktemp("wset"), short_tmpdir("bsk")
    sock = os.path.join(sockdir, "w.sock")
    b = Brisk(["run", "--kernel", guest("wset"), "--memory", "320", "--cmdline", f"pages={PAGES}",
               "--api-sock", sock], sock=sock)
    try:
        b.wait_for(r"^wset: ready", timeout=120)
        b.api.pause()
        state, mem = str(tmp / "w.state"), str(tmp / "w.mem")
        assert b.api.snapshot_create(state, mem).status == 204
    finally:
        b.kill()
        check_sanitizers(b.err)
        shutil.rmtree(sockdir, ignore_errors=True)
    return state, mem


def restore(state, mem, *extra, cmd=("restore",)):
    """`brisk restore` (or `cmd`, e.g. brisk profile) with "g" waiting on COM1: the guest touches its pages at once
    and passes."""
    b = BriskProcess(BRISK, [*cmd, "--snapshot", state, "--mem", mem, "--log-level", "info", *extra],
                     stdin=subprocess.PIPE)
    b.proc.stdin.write(b"g")
    b.proc.stdin.flush()
    rc = b.wait(timeout=120)
    check_sanitizers(b.err)
    assert rc == EXIT_GUEST_OK and "wset: PASS" in b.out, f"exit {rc}\n{b.out[-2000:]}\n{b.err[-2000:]}"
    assert f"touched {PAGES} pages" in b.out and "checksum OK" in b.out
    return b


def test_record_then_prefetch(snap, tmp_path):
    """Record (ended by the guest's boot marker): MEM.ws covers every page the guest touched, names this snapshot
    and its RAM; the next restore prefetches those pages (the log says how many, how fast) and the guest passes;
    --working-set off restores lazily. All under `brisk profile`, whose page_faults show the prefetch and what it
    saves: with `--working-set wait` (every page mapped before the vCPUs run) the vCPU thread, which takes KVM's
    faults on guest RAM, faults at least PAGES / 2 times fewer than lazily. The default maps them on a thread
    (brisk_prefetch, under its own seccomp filter) while the vCPUs run: the same pages, the guest's result the
    same; how many faults it saves depends on who reaches a page first, so only `wait` is counted."""
    state, mem = snap
    b = restore(state, mem, "--working-set", "record=30000")
    m = RECORDED_RE.search(b.err)
    assert m and m.group(4) == mem + ".ws", b.err
    crc, size, ranges = read_ws(mem + ".ws")
    assert size == 320 << 20 and int(m.group(1)) == sum(c for _, c in ranges) and int(m.group(2)) == len(ranges)
    covered = set()
    for first, count in ranges:
        covered.update(range(first, first + count))
    missing = [p for p in wset_pages(PAGES) if p not in covered]
    assert not missing, f"{len(missing)} touched pages not recorded, e.g. {missing[:5]}"
    assert len(covered) < (320 << 20) // 4096 // 4, "most of RAM recorded: the window saw more than the guest did"
    faults = {}
    for way, extra, when in (("prefetch", [], "while"), ("wait", ["--working-set", "wait"], "before"),
                             ("lazy", ["--working-set", "off"], None)):
        out = tmp_path / f"{way}.json"
        b = restore(state, mem, *extra, cmd=("profile", "--no-trace", "--json", str(out)))
        pf = json.loads(out.read_text())["page_faults"]
        assert [v["vcpu"] for v in pf["vcpus"]] == [0], pf
        faults[way] = pf["vcpus"][0]["minor"] + pf["vcpus"][0]["major"]
        m = PREFETCH_RE.search(b.err)
        if when:
            assert m and int(m.group(1)) == len(covered) and m.group(4) == when, b.err
            assert pf["working_set"]["pages"] == len(covered), pf
        else:
            assert not m and pf["working_set"] is None, (b.err, pf)
    assert faults["lazy"] >= faults["wait"] + PAGES // 2, faults


@pytest.mark.security
def test_prefetch_thread_is_confined(snap):
    """The brisk_prefetch thread installs its own filter (role "prefetch", docs/security.md) before its first
    madvise: under BRISK_SECCOMP_SELFTEST=prefetch it calls execve, and the SIGSYS report names it (status 18).
    With `--working-set wait` there is no such thread, and the same restore passes."""
    state, mem = snap
    restore(state, mem, "--working-set", "record=30000")
    env = dict(os.environ, BRISK_SECCOMP_SELFTEST="prefetch")
    p = subprocess.run([BRISK, "restore", "--snapshot", state, "--mem", mem], input=b"g", capture_output=True,
                       env=env, timeout=120)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 18 and "thread prefetch called denied syscall execve" in err, (p.returncode, err[-2000:])
    p = subprocess.run([BRISK, "restore", "--snapshot", state, "--mem", mem, "--working-set", "wait"], input=b"g",
                       capture_output=True, env=env, timeout=120)
    assert p.returncode == EXIT_GUEST_OK and b"wset: PASS" in p.stdout, p.stderr.decode(errors="replace")[-2000:]


@pytest.mark.parametrize("pool", [0, 1])
def test_clones_prefetch(snap, procs, pool):
    """A clone server's clones each prefetch the recorded pages on a thread of their own (the server only starts
    the reads, once, before it forks), a warm clone (--clone-pool 1, built and confined before its request) too:
    each passes and logs the mapping."""
    state, mem = snap
    restore(state, mem, "--working-set", "record=30000")
    sockdir = short_tmpdir("bws")
    sock = os.path.join(sockdir, "c.sock")
    try:
        server = BriskProcess(BRISK, ["restore", "--snapshot", state, "--mem", mem, "--clone-server", sock,
                                      "--clone-pool", str(pool), "--log-level", "info"])
        procs.append(server)
        deadline = time.monotonic() + 60
        while not os.path.exists(sock):
            assert server.proc.poll() is None and time.monotonic() < deadline, server.err
            time.sleep(0.02)
        for n in range(2):
            r = subprocess.run([str(BRISK), "clone", "--server", sock], input="g", capture_output=True, text=True,
                               timeout=120)
            check_sanitizers(r.stderr)
            assert r.returncode == EXIT_GUEST_OK and "wset: PASS" in r.stdout, (n, r.stdout[-1000:], r.stderr)
            m = PREFETCH_RE.search(r.stderr)
            assert m and m.group(4) == "while", (n, r.stderr)
    finally:
        shutil.rmtree(sockdir, ignore_errors=True)


@pytest.mark.security
def test_untrusted_working_set_file(snap):
    """Case 84: MEM.ws corrupt (a flipped byte), truncated, a directory, or another snapshot's: a warning naming
    the file and the reason, a lazy restore, the guest unharmed."""
    state, mem = snap
    restore(state, mem, "--working-set", "record=30000")
    ws = mem + ".ws"
    good = open(ws, "rb").read()
    cases = {
        "checksum mismatch": good[:45] + bytes([good[45] ^ 1]) + good[46:],
        "ranges in": good[:-9],
        "not a working-set file": b"",
    }
    for why, data in cases.items():
        with open(ws, "wb") as f:
            f.write(data)
        b = restore(state, mem)
        assert "working set:" in b.err and why in b.err and "restoring lazily" in b.err, b.err
        assert not PREFETCH_RE.search(b.err)
    # Another snapshot's list (same RAM size), well-formed and checksummed: -ESTALE.
    other = bytearray(good[:-8])
    other[16] ^= 0xFF
    open(ws, "wb").write(bytes(other) + struct.pack("<Q", crc64_jones(bytes(other))))
    b = restore(state, mem)
    assert "recorded for another snapshot" in b.err and not PREFETCH_RE.search(b.err)
    os.unlink(ws)
    os.mkdir(ws)
    b = restore(state, mem)
    assert "not a regular file" in b.err
    shutil.rmtree(ws)


def test_working_set_option_errors():
    """--working-set's values, and its place: 'brisk restore' only."""
    for bad in ["record=0", "record=60001", "record=", "record=1x", "on", "", "wait=1", "waiting"]:
        p = subprocess.run([BRISK, "restore", "--snapshot", "s", "--mem", "m", "--working-set", bad],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "--working-set" in p.stderr, (bad, p.stderr)
    p = subprocess.run([BRISK, "run", "--working-set", "off"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "belong to 'brisk restore'" in p.stderr, p.stderr
