"""Hostile guests against brisk's virtio-mmio transport and virtqueues, through its entropy device
(docs/security.md cases 1-8, 13 and 15).

Each run boots one guest (guests/virtio-hostile-{ring,mmio,storm}.c) with `case=NAME`: the guest
attacks, checks the class the attack must end in (a malformed chain completed with used length 0
and its buffers untouched; DEVICE_NEEDS_RESET with a configuration interrupt; QueueReady staying
0; a register write ignored) and that the device then serves a normal request (after a reset where
it needed one), and ends PASS (exit 0) or FAIL (255). Here brisk's side is checked: no sanitizer
report (run_brisk), the warning of the class on stderr, and a log that stays short however often
the guest repeats itself. The notify storm also bounds brisk's CPU time (the I/O thread against
the vCPU thread that attacks), its peak RSS against a calm run, and how soon it exits after the
guest is done.

Run with the plain and the sanitizer build: BRISK=build/brisk and BRISK=build/asan/brisk.
"""
import os
import re
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import BRISK, EXIT_GUEST_OK, boot, check_sanitizers, guest

pytestmark = pytest.mark.usefixtures("kvm")
pytestmark = [pytestmark, pytest.mark.security]  # docs/security.md threat model

DROPPED = "malformed request"  # virtio_bad_request: a chain completed with an error
NEEDS_RESET = "device needs reset"  # virtio_needs_reset / a queue refused at QueueReady
IGNORED = "(ignored;"  # bad_access: a register access of a wrong width, offset or state

# case -> (docs/security.md case, brisk run options, what brisk must say (None: nothing at all)).
RING = {
    "next_range": (1, [], [DROPPED, "next out of range"]),
    "next_ffff": (1, [], [DROPPED, "next out of range"]),
    "ind_next_range": (1, [], [DROPPED, "next out of range"]),
    "bad_flood": (1, [], [DROPPED, "next out of range"]),
    "cycle": (2, [], [DROPPED, "chain longer than the queue size"]),
    "self_loop": (2, [], [DROPPED, "chain longer than the queue size"]),
    "cycle_empty": (2, [], [DROPPED, "chain longer than the queue size"]),
    "chain_max": (2, [], None),
    "ind_long": (2, [], [DROPPED, "chain longer than the queue size"]),
    "ind_cycle": (2, [], [DROPPED, "chain longer than the queue size"]),
    "ind_max": (2, [], None),
    "big_segs": (2, [], [DROPPED, "more segments than the device takes"]),
    "big_chain_max": (2, [], None),
    "big_cycle": (2, [], [DROPPED, "chain longer than the queue size"]),
    "ind_len0": (3, [], [DROPPED, "bad indirect table"]),
    "ind_len_odd": (3, [], [DROPPED, "bad indirect table"]),
    "ind_nested": (3, [], [DROPPED, "bad indirect table"]),
    "ind_too_large": (3, [], [DROPPED, "bad indirect table"]),
    "ind_with_next": (3, [], [DROPPED, "bad indirect table"]),
    "ind_not_negotiated": (3, [], [DROPPED, "bad indirect table"]),
    "ind_1024": (3, [], None),
    "addr_wrap": (4, [], [DROPPED, "buffer outside guest RAM"]),
    "addr_wrap_last": (4, [], [DROPPED, "buffer outside guest RAM"]),
    "addr_ram_end": (4, [], [DROPPED, "buffer outside guest RAM"]),
    "addr_past_ram": (4, [], [DROPPED, "buffer outside guest RAM"]),
    "addr_ram_last": (4, [], None),
    "addr_mmio": (4, [], [DROPPED, "buffer outside guest RAM"]),
    "addr_window": (4, [], [DROPPED, "buffer outside guest RAM"]),
    "addr_lapic": (4, [], [DROPPED, "buffer outside guest RAM"]),
    # RAM on both sides of the 3-4 GiB hole; MAP_NORESERVE keeps it cheap
    "addr_hole_start": (4, ["--memory", "4G"], [DROPPED, "buffer outside guest RAM"]),
    "addr_hole_end": (4, ["--memory", "4G"], [DROPPED, "buffer outside guest RAM"]),
    "addr_across_hole": (4, ["--memory", "4G"], [DROPPED, "buffer outside guest RAM"]),
    "addr_high": (4, ["--memory", "4G"], None),
    "ind_addr_mmio": (4, [], [DROPPED, "buffer outside guest RAM"]),
    "ind_addr_ram_end": (4, [], [DROPPED, "buffer outside guest RAM"]),
    "buf_on_rings": (4, [], [NEEDS_RESET]),  # the device's random bytes over its own rings
    "race": (4, [], []),  # a descriptor rewritten while the device walks it: served or refused
    "total_len": (5, ["--memory", "3G"], [DROPPED, "chain longer than 4 GiB"]),
    "total_max": (5, ["--memory", "3G"], None),
    "big_total": (5, [], [DROPPED, "chain longer than 4 GiB"]),
    "avail_idx": (6, [], [NEEDS_RESET, "avail.idx moved by more than the queue size"]),
    "avail_idx_back": (6, [], [NEEDS_RESET, "avail.idx moved by more than the queue size"]),
    "head_range": (6, [], [NEEDS_RESET, "avail ring entry out of range"]),
    "avail_full": (6, [], None),
    "qsize0": (7, [], [NEEDS_RESET, "virtqueue refused"]),
    "qsize_npot": (7, [], [NEEDS_RESET, "virtqueue refused"]),
    "qsize_big": (7, [], [NEEDS_RESET, "virtqueue refused"]),
    "qsize_huge": (7, [], [NEEDS_RESET, "virtqueue refused"]),
    "desc_misaligned": (7, [], [NEEDS_RESET, "misaligned ring"]),
    "avail_misaligned": (7, [], [NEEDS_RESET, "misaligned ring"]),
    "used_misaligned": (7, [], [NEEDS_RESET, "misaligned ring"]),
    "desc_mmio": (7, [], [NEEDS_RESET, "descriptor table outside guest RAM"]),
    "desc_ram_end": (7, [], [NEEDS_RESET, "descriptor table outside guest RAM"]),
    "avail_wrap": (7, [], [NEEDS_RESET, "driver area outside guest RAM"]),
    "used_past_ram": (7, [], [NEEDS_RESET, "device area outside guest RAM"]),
    "used_high_bits": (7, [], [NEEDS_RESET, "device area outside guest RAM"]),
    "rings_overlap": (7, [], [NEEDS_RESET]),
    "order": (8, [], [DROPPED, "readable descriptor after a writable one"]),
    "ind_order": (8, [], [DROPPED, "readable descriptor after a writable one"]),
    "readable_only": (8, [], [DROPPED]),
    "readable_first": (8, [], []),  # served or refused, never written: the guest checks
}

# The register file (13) and a queue refused over and over (7); count= accesses each.
MMIO = {
    "widths": (13, [], [IGNORED]),
    "fuzz": (13, [], [IGNORED]),
    "queue_sel": (13, [], [IGNORED]),
    "status_order": (13, [], [IGNORED]),
    "features": (13, [], [IGNORED, DROPPED]),
    "after_driver_ok": (13, [], [IGNORED]),
    "notify_bad": (13, [], [IGNORED]),
    "qready_flood": (7, [], [NEEDS_RESET]),
    "no_queue": (13, [], None),
    "reset_io": (13, [], None),
    "reset_loop": (13, [], None),
    "reset_burst": (13, [], None),
}

# A log line per malformed request, chain or access would be a flood: brisk logs the first few of a
# kind and then every power of two (log.h log_ratelimit). One attack of a kind may
# log ~2 lines; 4096 of them at most 2 x (8 + 13) lines per kind.
MAX_LINES_ONE = 12
MAX_LINES_REPEATED = 64
COUNT = 4096


def warn_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("brisk:")]


def check_guest(p, name):
    fails = [line for line in p.stdout.splitlines() if "FAIL" in line]
    assert p.returncode == EXIT_GUEST_OK, f"exit {p.returncode}; {fails}\n{p.stdout}\n{p.stderr}"
    assert f"{name}: PASS" in p.stdout, p.stdout
    assert not fails, fails


def check_log(p, expect, max_lines):
    lines = warn_lines(p.stderr)
    if expect is None:
        assert lines == [], p.stderr  # the legal boundary: nothing to complain about
        return
    for what in expect:
        assert what in p.stderr, f"{what!r} not logged:\n{p.stderr}"
    assert len(lines) <= max_lines, f"{len(lines)} log lines (at most {max_lines}):\n" + "\n".join(
        sorted(set(re.sub(r"\d+", "N", line) for line in lines)))


@pytest.mark.parametrize("case", list(RING))
def test_ring(case):
    security, opts, expect = RING[case]
    p = boot("virtio-hostile-ring", "--rng", *opts, "--cmdline", f"case={case}", timeout=120)
    check_guest(p, "virtio-hostile-ring")
    assert f"(docs/security.md case {security})" in p.stdout
    check_log(p, expect, MAX_LINES_REPEATED if case in ("bad_flood", "race") else MAX_LINES_ONE)


@pytest.mark.parametrize("case", list(MMIO))
def test_mmio(case):
    security, opts, expect = MMIO[case]
    p = boot("virtio-hostile-mmio", "--rng", *opts, "--cmdline", f"case={case} count={COUNT}", timeout=120)
    check_guest(p, "virtio-hostile-mmio")
    assert f"(docs/security.md case {security})" in p.stdout
    check_log(p, expect, MAX_LINES_REPEATED)


@pytest.mark.parametrize("case", ["reset_io", "reset_loop"])
def test_reset_while_throttled(case):
    """Requests held back by the rate limit (64 bytes/s: the timer is armed) when the reset comes."""
    p = boot("virtio-hostile-mmio", "--rng=64", "--cmdline", f"case={case}", timeout=120)
    check_guest(p, "virtio-hostile-mmio")
    assert warn_lines(p.stderr) == [], p.stderr


def test_reset_is_no_way_around_the_rate_limit():
    """docs/security.md case 12 through 13: a guest that resets the entropy device after each request must not get
    a fresh one-second burst each time. At 64 bytes/s, 32 rounds of bring-up, a 4 KiB request and a
    reset may be served at most the burst plus the rate over the run's wall time."""
    t0 = time.monotonic()
    p = boot("virtio-hostile-mmio", "--rng=64", "--log-level", "info", "--cmdline", "case=reset_burst",
             timeout=120)
    elapsed = time.monotonic() - t0
    check_guest(p, "virtio-hostile-mmio")
    m = re.search(r"virtio-rng: (\d+) bytes served, throttled (\d+) times", p.stderr)
    assert m, p.stderr
    served = int(m.group(1))
    assert served <= 64 + 64 * elapsed + 1, f"{served} bytes served in {elapsed:.2f} s at 64 bytes/s"


@pytest.mark.parametrize("name,table", [("virtio-hostile-ring", RING), ("virtio-hostile-mmio", MMIO)])
def test_every_case_is_run(name, table):
    """The guest lists its cases when given none: this file runs every one of them."""
    p = boot(name, "--rng", "--cmdline", "case=none", timeout=60)
    m = re.search(r"cases: (.*)$", p.stdout, re.M)
    assert m, p.stdout
    assert sorted(m.group(1).split()) == sorted(table)
    assert p.returncode == 255  # guest_fail


# ---- docs/security.md case 15: the notify storm ------------------------------------------------------------------

NOTIFIES = 200000


def task_cpu(pid):
    """{tid: CPU seconds} of every thread of pid (utime + stime from /proc), {} once it is gone."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15)
    return out


def peak_rss_kib(pid):
    """VmHWM of pid in KiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(r"^VmHWM:\s+(\d+) kB", f.read(), re.M)
    except OSError:
        return 0
    return int(m.group(1)) if m else 0


def child_of(pid):
    """The first child of pid, None while it has none (or once it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
    except OSError:
        return None
    return int(kids[0]) if kids else None


GNU_TIME = "/usr/bin/time"


def run_measured(args, timeout=120):
    """Runs brisk with args under GNU time, sampling each of brisk's threads' CPU time and its peak RSS
    every 50 ms. Returns (CompletedProcess, rusage of time and brisk, {tid: CPU seconds at the last
    sample}, peak RSS in KiB, seconds from the guest's "storm done" line to brisk's exit).

    The peak RSS is the larger of the samples and GNU time's %M (wait4 of brisk, forked from time, a
    small process): a calm run on a fast KVM can end before the first sample, and ru_maxrss of a child
    exec'd from a vfork of this Python process would start with Python's high-water mark (fs/exec.c
    exec_mmap). wait4 of time reports its children's CPU time as well (RUSAGE_BOTH)."""
    if not os.access(GNU_TIME, os.X_OK):
        pytest.skip(f"{GNU_TIME} (GNU time, scripts/deps.sh) missing: it measures brisk's peak RSS")
    fd, rss_file = tempfile.mkstemp(prefix="brisk-rss-")
    os.close(fd)
    proc = subprocess.Popen([GNU_TIME, "-f", "%M", "-o", rss_file, str(BRISK), *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err, cpu = [], [], {}
    marks = {}
    gone = threading.Event()

    def read_stdout():
        for line in proc.stdout:
            out.append(line)
            if "storm done" in line:
                marks["done"] = time.monotonic()

    def read_stderr():
        err.append(proc.stderr.read())

    def sample():
        pid = None
        while not gone.wait(0.05):
            pid = pid or child_of(proc.pid)
            if pid is None:
                continue
            now = task_cpu(pid)
            if now:
                cpu.update(now)
            marks["rss"] = max(marks.get("rss", 0), peak_rss_kib(pid))

    def kill():
        marks["timeout"] = True
        pid = child_of(proc.pid)
        if pid:
            os.kill(pid, 9)
        proc.kill()

    threads = [threading.Thread(target=f, daemon=True) for f in (read_stdout, read_stderr, sample)]
    for t in threads:
        t.start()
    timer = threading.Timer(timeout, kill)
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)  # reaps it ourselves: Popen.wait would lose the rusage
    ended = time.monotonic()
    timer.cancel()
    gone.set()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in threads:
        t.join(10)
    with open(rss_file) as f:
        timed = f.read().split()
    os.unlink(rss_file)
    # time writes "Command exited with non-zero status N" before %M when brisk fails
    rss = max(marks.get("rss", 0), int(timed[-1]) if timed and timed[-1].isdigit() else 0)
    p = subprocess.CompletedProcess(proc.args[5:], proc.returncode, "".join(out), "".join(err))
    check_sanitizers(p.stderr)
    assert "timeout" not in marks, f"brisk ran over {timeout} s:\n{p.stdout}\n{p.stderr}"
    return p, usage, cpu, rss, ended - marks.get("done", ended)


@pytest.mark.parametrize("case,rng", [("empty", "--rng"), ("posted", "--rng"), ("posted", "--rng=64"),
                                      ("badq", "--rng"), ("reset", "--rng")])
def test_notify_storm(case, rng):
    """A notify storm: the guest keeps writing QueueNotify as fast as its (possibly emulated) CPU goes.
    brisk's I/O thread must not amplify it (its CPU time stays below the vCPU thread's that attacks),
    memory does not grow against a calm run, the log stays short, every request posted completes (also
    when the rate limit holds them back: --rng=64), the device answers right after, and brisk exits
    promptly once the guest is done."""
    kernel = guest("virtio-hostile-storm")
    calm, _, _, calm_rss, _ = run_measured(["run", "--kernel", kernel, rng, "--cmdline", f"case={case} notifies=1"])
    check_guest(calm, "virtio-hostile-storm")
    t0 = time.monotonic()
    p, usage, cpu, rss, exit_after = run_measured(["run", "--kernel", kernel, rng, "--cmdline",
                                                   f"case={case} notifies={NOTIFIES}"])
    wall = time.monotonic() - t0
    check_guest(p, "virtio-hostile-storm")
    assert f"{NOTIFIES} notifies" in p.stdout
    lines = warn_lines(p.stderr)
    assert len(lines) <= MAX_LINES_REPEATED, f"{len(lines)} log lines:\n{p.stderr[:4000]}"
    if case == "badq":
        assert IGNORED in p.stderr  # each notify of queue 5 exits to brisk and is counted
    total = usage.ru_utime + usage.ru_stime
    threads = sorted(cpu.values(), reverse=True)
    vcpu, others = (threads[0], sum(threads[1:])) if threads else (0.0, 0.0)
    report = (f"wall {wall:.2f} s, CPU {total:.2f} s (user {usage.ru_utime:.2f}), vCPU thread {vcpu:.2f} s, "
              f"other threads {others:.2f} s, peak RSS {rss} KiB (calm run {calm_rss} KiB), "
              f"exit {exit_after:.2f} s after the storm")
    print(report)
    assert threads and rss, "no /proc samples of brisk, or no peak RSS from GNU time"
    assert others <= max(0.5, 0.75 * vcpu), report
    assert total <= 2 * wall + 1, report
    assert rss <= calm_rss + 16 * 1024, report
    assert exit_after < 2.0, report
