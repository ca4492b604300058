"""Endurance (docs/security.md case 17): 1,000 VM start/stop cycles, 1,000 API requests to one
long-lived brisk, a serial flood with stdout stalled. Nothing may grow: open fds, threads, RSS.

brisk exits when its VM ends and the API starts one VM per process (InstanceStart once), so a start/stop
cycle is a process: 1,000 `brisk run` of hello.elf, each ended by the guest's own reset (i8042), which makes
them 1,000 guest-initiated reboots as well. Each run's peak RSS comes from GNU time's %M (wait4 of a child
forked by time, a 1 MiB process). Not ru_maxrss of a child of this Python process: a child exec'd from a
vfork of Python starts with Python's high-water mark (fs/exec.c exec_mmap), which would hide brisk's.

BRISK_ENDURANCE_RUNS overrides the 1,000 (the sanitizer build is slower)."""
import ctypes
import os
import re
import signal
import statistics
import subprocess
import threading
import time

import pytest

from apiclient import BriskProcess
from conftest import BRISK, EXIT_GUEST_OK, EXIT_STOPPED, SANITIZED, check_sanitizers, guest

pytestmark = [pytest.mark.endurance, pytest.mark.security, pytest.mark.usefixtures("kvm")]

RUNS = int(os.environ.get("BRISK_ENDURANCE_RUNS", "1000"))
GNU_TIME = "/usr/bin/time"


def proc_status(pid, key):
    """A kB value of /proc/PID/status (VmRSS, VmHWM), 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.M)
    except OSError:
        return 0
    return int(m.group(1)) if m else 0


PR_SET_THP_DISABLE = 41  # <linux/prctl.h>


def no_thp():
    """preexec_fn: transparent huge pages off for brisk (PR_SET_THP_DISABLE survives execve). Otherwise khugepaged
    (a 10 s scan) collapses brisk's anonymous memory into 2 MiB pages at a moment of its own, ASan's 5.6 MiB .bss
    among it, and RSS rises by up to 2 MiB a region with nothing allocated (measured: +6 MiB, AnonHugePages 0 to
    8 MiB, no malloc, mmap or stack-depot call in between)."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_THP_DISABLE)")


def footprint(pid):
    """(open fds, threads, VmRSS in KiB) of pid."""
    return (len(os.listdir(f"/proc/{pid}/fd")), len(os.listdir(f"/proc/{pid}/task")),
            proc_status(pid, "VmRSS"))


def children(pid):
    """Pids of pid's child processes (brisk's helpers: brisk-api, brisk-slirp)."""
    kids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(k) for k in f.read().split()]
        except OSError:
            pass
    return kids


# ---- 1,000 VM start/stop cycles (1,000 processes) ----------------------------------------------------------

def test_start_stop_cycles(tmp_path):
    """RUNS x `brisk run` of hello.elf in one shell loop: every run exits 0, no sanitizer report, and the peak
    RSS of the last 100 runs is the first 100's (their lowest within 3 % + 128 KiB). No brisk is left behind."""
    if not os.access(GNU_TIME, os.X_OK):
        pytest.skip(f"{GNU_TIME} (GNU time) missing: it measures each run's peak RSS")
    log, err = tmp_path / "runs.log", tmp_path / "stderr.log"
    loop = ('i=0; while [ "$i" -lt "$1" ]; do '
            '"$2" -a -o "$3" -f "%x %M %e" "$4" run --kernel "$5" >/dev/null 2>>"$6"; i=$((i + 1)); done')
    t0 = time.monotonic()
    subprocess.run(["sh", "-c", loop, "sh", str(RUNS), GNU_TIME, str(log), str(BRISK), guest("hello"), str(err)],
                   stdin=subprocess.DEVNULL, check=True, timeout=max(600, RUNS))
    wall = time.monotonic() - t0
    check_sanitizers(err.read_text())
    runs = [line.split() for line in log.read_text().splitlines() if re.fullmatch(r"\d+ \d+ [\d.]+", line)]
    assert len(runs) == RUNS, log.read_text()[-2000:]
    bad = [i for i, r in enumerate(runs) if r[0] != str(EXIT_GUEST_OK)]
    assert not bad, f"runs {bad[:10]} exited {[runs[i][0] for i in bad[:10]]}\n{err.read_text()[-2000:]}"
    rss = [int(r[1]) for r in runs]
    n = min(100, RUNS // 2)
    first, last = min(rss[:n]), min(rss[-n:])
    report = (f"{RUNS} runs in {wall:.1f} s ({1000 * wall / RUNS:.1f} ms each); peak RSS KiB: lowest of the "
              f"first {n} {first}, of the last {n} {last}; medians {statistics.median(rss[:n]):.0f} and "
              f"{statistics.median(rss[-n:]):.0f}; max {max(rss)}")
    print(report)
    # Each run is a fresh process: what could grow from run to run is outside it (a file it reads, state left on
    # the host), and that would raise every run, the lowest included. Medians cannot be compared: runs are
    # bimodal by timing, by 128 KiB for the plain build (1856 or 1984 KiB: a stack page range touched or not) and
    # by ~1.9 MiB for the ASan build (~15.1 or ~17.0 MiB, about half each: both medians of 300 runs landed in
    # either mode, first 15,420 then 17,108 KiB in one run). The lowest of 100 runs is in the lower mode; the
    # tolerance is 3 % plus the plain build's step.
    assert last <= 1.03 * first + 128, report
    left = subprocess.run(["pgrep", "-f", f"^{BRISK} run --kernel {guest('hello')}"], capture_output=True, text=True)
    assert left.stdout.strip() == "", f"brisk processes left behind: {left.stdout}"


# ---- 1,000 API requests to one brisk ------------------------------------------------------------------------

def test_api_requests_do_not_leak(sockdir):
    """`brisk --api-sock` running counter.elf serves 1,000 requests (GET /, GET /machine-config, PATCH /vm
    Paused then Resumed, in turn): brisk's and its API helper's open fds and threads after 1,000 are those after
    100, their RSS within 256 KiB; the guest counts on afterwards; the log stays short."""
    sock = os.path.join(sockdir, "api.sock")
    b = BriskProcess(BRISK, ["--api-sock", sock], sock=sock)
    try:
        api = b.api
        api.boot_source(guest("counter"))
        api.machine_config(1, 128)
        api.start()
        wait_count(b, 70)  # every page the guest touches is touched (64 history + 8 RAM pages)
        cycle = [lambda: api.get("/"), lambda: api.get("/machine-config"),
                 lambda: api.patch("/vm", {"state": "Paused"}), lambda: api.patch("/vm", {"state": "Resumed"})]
        expect = [200, 200, 204, 204]
        samples = {}
        t0 = time.monotonic()
        for i in range(1, 1001):
            try:
                r = cycle[i % 4]()
            except OSError as e:
                raise AssertionError(f"request {i}: {e!r}\n{b.err[-2000:]}") from e
            assert r.status == expect[i % 4], f"request {i}: {r}"
            if i in (100, 1000):
                time.sleep(0.3)  # the helper has closed the last connection
                helpers = children(b.proc.pid)
                assert helpers, "no brisk-api helper"
                samples[i] = [footprint(pid) for pid in [b.proc.pid, *helpers]]
        wall = time.monotonic() - t0
        report = f"1000 requests in {wall:.1f} s; (fds, threads, RSS KiB) of brisk and its helpers after 100: " \
                 f"{samples[100]}, after 1000: {samples[1000]}"
        print(report)
        assert len(samples[100]) == len(samples[1000]), report
        for (fd0, th0, rss0), (fd1, th1, rss1) in zip(samples[100], samples[1000]):
            assert (fd1, th1) == (fd0, th0), report
            # ASan's quarantine holds freed memory, so RSS grows without a leak: fds and threads still count.
            assert SANITIZED or rss1 - rss0 <= 256, report
        api.patch("/vm", {"state": "Resumed"})
        last = wait_count(b, 0)
        wait_count(b, last)  # still counting
        lines = [line for line in b.err.splitlines() if line.startswith("brisk")]
        assert len(lines) <= 20, "\n".join(lines[:40])
    finally:
        b.proc.send_signal(signal.SIGTERM)
        status = b.wait(30)
        check_sanitizers(b.err)
    assert status == EXIT_STOPPED, b.err[-2000:]


def wait_count(b, above, timeout=30.0):
    """Waits for counter.elf's count line numbered > above; returns the highest count."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        counts = [int(n) for n in re.findall(r"^count (\d+) ", b.out, re.M)]
        if counts and counts[-1] > above:
            return counts[-1]
        assert b.proc.poll() is None, f"brisk exited {b.proc.returncode}\n{b.err[-2000:]}"
        time.sleep(0.02)
    raise AssertionError(f"no count above {above}\n{b.out[-1000:]}\n{b.err[-1000:]}")


# ---- a serial flood with stdout stalled ---------------------------------------------------------------------

def thread_cpu(pid):
    """{tid: CPU seconds} of pid's threads."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def thread_states(pid):
    """{tid: "name state wchan"} of pid's threads: where each waits (a report's evidence)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f, open(f"/proc/{pid}/task/{tid}/wchan") as w:
                name, rest = f.read().split(" (", 1)[1].rsplit(")", 1)
                out[int(tid)] = f"{name} {rest.split()[0]} {w.read() or '-'}"
        except OSError:
            continue
    return out


def written(pid):
    """Bytes the process has written (/proc/PID/io wchar)."""
    with open(f"/proc/{pid}/io") as f:
        lines = f.read().splitlines()
    for line in lines:
        if line.startswith("wchar:"):
            return int(line.split()[1])
    return 0


def test_serial_flood_with_stdout_stalled():
    """flood.elf writes to the UART without end while nobody reads brisk's stdout (a pipe) for 4 s (longer where the
    UART is slow, until the ring behind the pipe has filled): the vCPU keeps running (its CPU time grows: it never
    blocks on the output), RSS stays flat (the 64 KiB output ring is the only buffer; huge pages off, see no_thp),
    the bytes the ring cannot take are dropped and counted, SIGTERM stops it (16)."""
    r, w = os.pipe()
    p = subprocess.Popen([str(BRISK), "run", "--kernel", guest("flood"), "--cmdline", "bytes=100000000000"],
                         stdin=subprocess.DEVNULL, stdout=w, stderr=subprocess.PIPE, text=True, preexec_fn=no_thp)
    started = time.monotonic()
    os.close(w)
    err = []
    reader = threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True)
    reader.start()
    try:
        time.sleep(1.0)
        rss0, cpu0 = proc_status(p.pid, "VmRSS"), thread_cpu(p.pid)
        rss_max = rss0
        # The stall lasts 4 s, or, where the guest's UART writes are slow (an emulated KVM), until the pipe has
        # been full for as long as it took to fill it, so that the 64 KiB ring behind it fills as well.
        t0, t_full, end = started, None, time.monotonic() + 4
        while time.monotonic() < end:
            time.sleep(0.1)
            rss_max = max(rss_max, proc_status(p.pid, "VmRSS"))
            if t_full is None and written(p.pid) >= 65536:  # a pipe holds 64 KiB
                t_full = time.monotonic()
                end = max(end, t_full + 1.5 * (t_full - t0))
            elif t_full is None and time.monotonic() >= end:
                rate = written(p.pid) / (time.monotonic() - t0)
                if 131072 / max(rate, 1) > 60:  # pipe + ring: more than a minute at this rate
                    pytest.skip(f"the guest's UART moves {rate:.0f} bytes/s here (an emulated KVM): filling the "
                                f"pipe and the 64 KiB ring behind it would take {131072 / max(rate, 1):.0f} s")
                end += 1
        cpu1, states, t_end = thread_cpu(p.pid), thread_states(p.pid), time.monotonic()
        p.send_signal(signal.SIGTERM)
        status = p.wait(timeout=30)  # at most 1 s of draining into the stalled pipe (devices.md)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(r)
    reader.join(10)
    stderr = err[0] if err else ""
    check_sanitizers(stderr)
    grown = max((cpu1[t] - cpu0.get(t, 0.0) for t in cpu1), default=0.0)  # the busiest thread: the vCPU
    m = re.search(r"serial output: (\d+) bytes dropped", stderr)
    report = f"RSS {rss0} KiB, at most {rss_max} KiB over the 4 s stall; vCPU CPU +{grown:.2f} s; " \
             f"dropped {m.group(1) if m else None}; pipe full at {t_full and t_full - started:.1f} s, stall ended " \
             f"at {t_end - started:.1f} s; threads (CPU s, state, wchan): " \
             f"{[(states.get(t), round(cpu1[t] - cpu0.get(t, 0.0), 2)) for t in cpu1]}"
    print(report)
    assert status == EXIT_STOPPED, stderr
    assert m and int(m.group(1)) > 0, stderr
    assert grown >= 0.5, report  # the vCPU ran during the stall (emulated I/O exits: ~1 s of CPU a second)
    assert rss_max - rss0 <= 512, report
