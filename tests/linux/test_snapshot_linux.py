"""Snapshot and restore of Debian's stock kernel in the real-kernel tier, from a Diff chain: the guest's uptime
continues, its disk and vsock work after restore, and the chain is byte for byte the Full snapshot of the moment.

One boot, one restore and a second (Uffd) restore check everything. vmlinuz with
build/linux/initramfs-virtio.cpio.gz, an ext4 disk from tests/linux/mkrootfs.sh (--disk), --vsock
cid=7,uds=DIR/v.sock and --api-sock, the command line brisk's default (less acpi=off: Debian's kernel finds
virtio-mmio in the DSDT) plus
  brisk.virtio=1 brisk.poweroff=auto brisk.snapshot=1 brisk.snapshot.hold=HOLD brisk.snapshot.listen=LISTEN
The init's snapshot mode (tests/linux/init_net.c) mounts the disk on /mnt, connects to the host's DIR/v.sock_HOLD
and keeps that connection open, listens on vsock LISTEN, and every 200 ms of guest time prints
  brisk-init: tick N uptime U mono M disk ok
after appending "tick N uptime U" to /mnt/brisk-ticks (fsync) and writing and reading back (O_DIRECT, so from
the device) the same line in /mnt/brisk-tick. The VM runs with --track-dirty-pages. The test
  1. at tick TICKS_BASE pauses, takes a Full snapshot (the base) and resumes; at tick TICKS_BEFORE pauses (PATCH
     /vm), takes a Diff snapshot (snapshot_type Diff: the pages written since the base) and, at the same pause,
     a Full one, SIGKILLs brisk, merges the Diff onto a copy of the base (`brisk snapshot-editor edit-memory
     rebase`, Firecracker's command), checks the merge is the Full snapshot's memory byte for byte, and waits
     until at least PAUSED_S have passed since the pause,
  2. runs `brisk restore --snapshot DIFF-STATE --mem MERGED --api-sock ...` in a new process and waits for
     TICKS_AFTER ticks,
  3. over vsock, after the restore: the host connects to the guest ("CONNECT LISTEN" on DIR/v.sock) and
     exchanges BYTES each way ("exchange", netpeer's protocol); it asks the guest to connect out ("dial") to
     DIR/v.sock_DIAL and exchanges BYTES each way there; asks for 32 bytes of the guest's /dev/urandom
     ("random"); then says "stop": the init unmounts /mnt and powers off (ACPI S5), which ends the restored
     brisk with status 0;
  4. restores the snapshot once more, its memory served by tests/uffd_handler.py (`brisk restore --uffd`), on a
     copy of the disk as the snapshot saw it, asks it for 32 bytes of /dev/urandom too, and kills it;
and checks: the tick sequence of both processes' output joined is 1, 2, 3, ... with no gap or repeat and the
restored process printed no line of a new boot; the guest's uptime and monotonic clock across the snapshot
advance by less than MAX_JUMP_S although the VM was paused for at least PAUSED_S; every tick's disk step said
ok; the held connection (open at snapshot time) ended with a reset (ECONNRESET) after the restore by itself,
before any new vsock traffic, not hung; both fresh vsock exchanges are right byte for byte on both sides; the
image is clean (e2fsck -fn) and /brisk-ticks on it holds every tick 1..last in order (debugfs), the first ones
written by the first process, the rest by the restored one; the restores' random bytes differ and each
restored kernel said it reseeded for a VM fork (VMGenID).
  5. then two clones of the snapshot from one `brisk restore --clone-server` (one after the other, each on a fresh
     copy of the disk), each with its vsock socket at a path of its own (the request's vsock_override), asked
     there for 32 bytes of /dev/urandom too and stopped through its connection.
A vsock step that fails is recorded and the run goes on; when the "stop" command cannot be sent over vsock the
guest is stopped with the API's SendCtrlAltDel instead (the init turns it into the same stop), so the disk checks
still run.
BRISK_SNAP_STOP=api stops the guest through SendCtrlAltDel even when vsock works (to try that path).
BRISK_SNAP_KEEP=DIR copies the state file and the disk image to DIR (to look at a failure).
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from . import netpeer
from .conftest import (BRISK, LINUX, MEMORY, ROOT, TIMEOUT, _report, brisk_default_cmdline, brisk_run_help,
                       kernel)

sys.path.insert(0, str(ROOT / "tests" / "integration"))
from apiclient import ApiClient, BriskProcess, wait_for_socket  # noqa: E402
import hangdiag  # noqa: E402  (tests/hangdiag.py, on the path through conftest)

pytestmark = pytest.mark.usefixtures("linux_kvm")

MKROOTFS = ROOT / "tests" / "linux" / "mkrootfs.sh"
INITRD = LINUX / "initramfs-virtio.cpio.gz"
CID, HOLD, LISTEN, DIAL = 7, 5101, 5102, 5103
BYTES = 256 << 10
TICKS_BASE = 4       # the Full base snapshot's tick
TICKS_BEFORE = 8     # ticks seen before the pause of the Diff snapshot
TICKS_AFTER = 10     # ticks the restored guest prints before the vsock checks
PAUSED_S = 10.0      # the VM stays paused (and then not running at all) at least this long
HELD_END_S = 20.0    # the restored guest must see its held connection reset within this (host) time
MAX_JUMP_S = 3.0     # what the guest's clocks may advance across the snapshot (its ticks are 0.2 s apart)
TICK_RE = re.compile(r"^brisk-init: tick (\d+) uptime ([0-9.]+) mono ([0-9.]+) disk (ok|FAIL.*)$", re.M)
# A kernel message, which the console prints between any two bytes of the init's line: the base snapshot's pause
# makes the clocksource watchdog say "clocksource: Long readout interval, skipping watchdog check: ..." right after
# the resume, and a tick line cut by it would not parse.
KMSG_RE = re.compile(r"\[ *\d+\.\d+\] [^\n]*\n")
STEPS = ["mkrootfs", "boot", "base snapshot", "pause and snapshot", "merge", "restore", "ticks after the vsock checks",
         "stop"]
RESEED = "crng reseeded due to virtual machine fork"  # drivers/char/random.c add_vmfork_randomness
# tests/linux/init_net.c snap_vmclock: the VCLK region Linux made from the DSDT, the page's fields through /dev/mem
VMCLOCK_RE = re.compile(r"brisk-snap: vmclock ([0-9a-f]+)-([0-9a-f]+) magic 0x([0-9a-f]+) generation (\d+) "
                        r"disruption marker (\d+) seq (\d+)")
NEW_BOOT_RE = re.compile(r"Linux version|Command line:|brisk-init: started as pid|brisk-init: kernel ")


class Proc(BriskProcess):
    """One brisk process, its stdout and stderr collected in files (apiclient.BriskProcess, out_files)."""

    def __init__(self, args):
        super().__init__(BRISK, args, out_files=True)

    @property
    def out(self):
        return super().out.replace("\r", "")  # the console's \r\n

    def describe(self, lines=60):
        """The last `lines` lines of stdout that are not ticks (the kernel's and the init's other lines), the
        first and last three ticks, stderr."""
        out = self.out.splitlines()
        is_tick = [bool(TICK_RE.match(x)) for x in out]
        tick_at = [i for i, t in enumerate(is_tick) if t]
        keep = set(tick_at[:3] + tick_at[-3:]) | {i for i, t in enumerate(is_tick) if not t}
        tail = "\n".join(out[i] for i in sorted(keep)[-lines:])
        return (f"brisk {' '.join(self.args)}\nexit status {self.proc.poll()}, {len(tick_at)} tick lines\n"
                f"--- stdout (tail, ticks elided) ---\n{tail}\n--- stderr (tail) ---\n{self.err[-3000:]}")

    def wait_for(self, regex, timeout, diag=True):
        """The first match of regex in the complete lines of stdout; fails (with kvm-diag's look) on a timeout."""
        r = re.compile(regex, re.M)
        deadline = time.monotonic() + timeout
        while True:
            text = self.out
            m = r.search(text[: text.rfind("\n") + 1])
            if m:
                return m
            if self.proc.poll() is not None:
                time.sleep(0.2)
                raise AssertionError(f"brisk exited before /{regex}/\n{self.describe()}")
            if time.monotonic() > deadline:
                look = hangdiag.diagnose(self.proc.pid) if diag else "(not asked for)"
                raise AssertionError(f"no /{regex}/ within {timeout:.0f} s\n{self.describe()}\n"
                                     f"--- scripts/kvm-diag.sh ---\n{look}")
            time.sleep(0.05)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=60)
        for t in self._threads:
            t.join(timeout=10)

    def wait(self, timeout):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            diag = hangdiag.diagnose(self.proc.pid)
            self.kill()
            raise AssertionError(f"brisk still running after {timeout:.0f} s\n{self.describe()}\n"
                                 f"--- scripts/kvm-diag.sh ---\n{diag}")
        for t in self._threads:
            t.join(timeout=10)
        return self.proc.returncode


class Held:
    """The host's side of the guest's held connection (DIR/v.sock_HOLD): accepts it, echoes "hold\\n", then
    reads until it ends (when the first brisk dies)."""

    def __init__(self, path):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(1)
        self.echoed, self.ended, self.error = False, None, None
        self.thread = netpeer.thread(self._run)

    def _run(self):
        self.listener.settimeout(TIMEOUT)
        try:
            conn, _ = self.listener.accept()
            with conn:
                conn.settimeout(None)
                got = b""
                while len(got) < 5:
                    b = conn.recv(5 - len(got))
                    if not b:
                        raise EOFError(f"EOF after {got!r}")
                    got += b
                if got != b"hold\n":
                    raise AssertionError(f"got {got!r}")
                conn.sendall(got)
                self.echoed = True
                while conn.recv(4096):
                    pass
                self.ended = time.monotonic()
        except Exception as e:  # noqa: BLE001 (reported by the test)
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.listener.close()


def command(uds, line, timeout=60):
    """A command connection to the guest's LISTEN port: sends line, returns the socket (the caller reads)."""
    s = netpeer.vsock_hybrid_connect(uds, LISTEN)
    s.settimeout(timeout)
    s.sendall(line.encode())
    return s


def read_line(s):
    line = b""
    while not line.endswith(b"\n") and len(line) < 64:
        b = s.recv(1)
        if not b:
            break
        line += b
    return line.decode(errors="replace")


class Run:
    """Everything one boot + snapshot + restore produced. `failed`: the step that did not complete, or None."""

    def __init__(self):
        self.failed = self.failed_step = None
        self.p1 = self.p2 = None
        self.out1 = self.out2 = ""
        self.status2 = None
        self.held = None
        self.exchange = netpeer.Result()
        self.dial = netpeer.Result()
        self.dial_answer = self.stop_answer = None
        self.held_ended_first = False  # the held connection ended before the host's first new connection
        self.stopped_by = None  # "vsock" or "SendCtrlAltDel" (when the vsock command failed)
        self.errors = []  # vsock steps that failed; the run went on to stop the guest
        self.image = None
        self.chain = {}  # the Diff chain: file sizes (allocated bytes), where the merge differs from the Full
        self.t = {}  # host times (monotonic) of the steps
        self.randoms = []  # the restores' (File, Uffd, two clones): mode, /dev/urandom's answer or the error, output
        self.clone_server_status = self.clone_server_err = None

    def describe(self):
        parts = [f"step that failed: {self.failed}" if self.failed else "all steps completed"]
        for name, p in (("first process", self.p1), ("restored process", self.p2)):
            if p:
                parts.append(f"=== {name} ===\n{p.describe()}")
        parts.append(f"--- host side --- held: echoed={self.held and self.held.echoed} "
                     f"error={self.held and self.held.error}; exchange: {self.exchange}; dial: {self.dial} "
                     f"(answer {self.dial_answer!r}); stop answer {self.stop_answer!r}, stopped by {self.stopped_by}")
        parts += [f"vsock step failed: {e}" for e in self.errors]
        return "\n".join(parts)

    def need(self, step):
        """Fails the calling test when the run stopped at or before `step` (one of STEPS)."""
        if self.failed_step and STEPS.index(self.failed_step) <= STEPS.index(step):
            pytest.fail(f"the run stopped before this could be checked\n{self.describe()}")


@pytest.fixture(scope="module")
def snap_run(tmp_path_factory):
    if not INITRD.exists():
        pytest.skip(f"{INITRD} missing: tests/linux/run.sh builds it")
    tmp = tmp_path_factory.mktemp("snap")
    # sun_path holds 108 bytes: a short directory, $TMPDIR where it is set (the nested VM sets /run/tmp when
    # the checkout is under /tmp, which is 9p there and takes no socket), else /tmp
    sockdir = tempfile.mkdtemp(prefix="bls", dir=os.environ.get("TMPDIR") or "/tmp")
    r = Run()
    try:
        _run(r, tmp, sockdir)
        if not r.failed_step:
            _uffd_restore(r, tmp, sockdir)
            _clone_restores(r, tmp, sockdir)
    finally:
        for p in (r.p1, r.p2):
            if p:
                p.kill()
        shutil.rmtree(sockdir, ignore_errors=True)
        keep = os.environ.get("BRISK_SNAP_KEEP")  # a directory: the state file and the disk image go there
        if keep:
            os.makedirs(keep, exist_ok=True)
            for f in ("vm.state", "disk.img"):
                if (tmp / f).exists():
                    shutil.copy(tmp / f, keep)
    t = r.t
    if "restored" in t:
        _report.append(f"snapshot: boot to tick {TICKS_BEFORE} {t['ticked'] - t['start']:.1f} s, pause + snapshot "
                       f"{t['snapshotted'] - t['pause']:.1f} s, restore exec to its first tick "
                       f"{t.get('first_tick2', float('nan')) - t['restored']:.1f} s, restored process ran "
                       f"{t.get('ended', float('nan')) - t['restored']:.1f} s")
    return r


def allocated(path):
    return os.stat(path).st_blocks * 512


def first_difference(a, b, chunk=1 << 20):
    """The first offset where files a and b differ (holes read as zeros), or None."""
    with open(a, "rb") as fa, open(b, "rb") as fb:
        off = 0
        while True:
            x, y = fa.read(chunk), fb.read(chunk)
            if x != y:
                return off + next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            if not x:
                return None
            off += len(x)


def merge_chain(r, tmp, mem):
    """The base's memory, copied to `mem`, with the Diff layer merged onto it; compared with the Full snapshot of
    the Diff's moment."""
    shutil.copy(tmp / "base.mem", mem)
    p = subprocess.run([str(BRISK), "snapshot-editor", "edit-memory", "rebase", "--memory-path", str(mem),
                        "--diff-path", str(tmp / "vm.diff")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"brisk snapshot-editor: exit {p.returncode}: {p.stderr}"
    r.chain = {"base": allocated(tmp / "base.mem"), "diff": allocated(tmp / "vm.diff"),
               "full": allocated(tmp / "full.mem"), "size": os.path.getsize(tmp / "full.mem"),
               "differs_at": first_difference(mem, tmp / "full.mem")}


def _run(r, tmp, sockdir):
    uds = os.path.join(sockdir, "v.sock")
    state, mem = tmp / "vm.state", tmp / "vm.mem"
    r.image = tmp / "disk.img"
    step = "mkrootfs"
    p = subprocess.run([str(MKROOTFS), "--init", str(LINUX / "init"), str(r.image)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, f"tests/linux/mkrootfs.sh failed:\n{p.stderr}"
    words = [w for w in brisk_default_cmdline(brisk_run_help()).split()
             if w != "acpi=off" and not w.startswith("console=")]
    words += ["console=ttyS0", "brisk.virtio=1", "brisk.poweroff=auto", "brisk.snapshot=1",
              f"brisk.snapshot.hold={HOLD}", f"brisk.snapshot.listen={LISTEN}", "brisk.snapshot.max=900"]
    r.held = Held(f"{uds}_{HOLD}")
    try:
        step = "boot"
        api1 = os.path.join(sockdir, "api1.sock")
        r.t["start"] = time.monotonic()
        r.p1 = Proc(["run", "--kernel", kernel("vmlinuz"), "--initrd", INITRD, "--memory", MEMORY,
                     "--track-dirty-pages",
                     "--disk", r.image, "--vsock", f"cid={CID},uds={uds}", "--api-sock", api1,
                     "--log-level", "info", "--cmdline", " ".join(words)])
        wait_for_socket(api1, r.p1.proc, timeout=60)
        r.p1.wait_for(rf"^brisk-init: tick {TICKS_BASE} ", TIMEOUT)

        step = "base snapshot"
        api = ApiClient(api1, timeout=120)
        api.pause()
        api.snapshot_create(tmp / "base.state", tmp / "base.mem")
        api.resume()
        r.p1.wait_for(rf"^brisk-init: tick {TICKS_BEFORE} ", TIMEOUT)
        r.t["ticked"] = time.monotonic()
        assert r.held.echoed, f"the guest's held connection was not made: {r.held.error}"

        step = "pause and snapshot"
        r.t["pause"] = time.monotonic()
        api.pause()
        api.snapshot_create(state, tmp / "vm.diff", snapshot_type="Diff")
        r.t["snapshotted"] = time.monotonic()
        api.snapshot_create(tmp / "full.state", tmp / "full.mem")
        r.p1.kill()
        shutil.copy(r.image, tmp / "disk-snap.img")  # the disk as the snapshot saw it, for the restores below
        r.out1 = r.p1.out

        step = "merge"
        merge_chain(r, tmp, mem)
        left = r.t["pause"] + PAUSED_S - time.monotonic()
        if left > 0:
            time.sleep(left)

        step = "restore"
        api2 = os.path.join(sockdir, "api2.sock")
        r.t["restored"] = time.monotonic()
        r.p2 = Proc(["restore", "--snapshot", state, "--mem", mem, "--api-sock", api2, "--log-level", "info"])
        last1 = max((int(m.group(1)) for m in TICK_RE.finditer(r.out1)), default=0)
        r.p2.wait_for(r"^brisk-init: tick \d+ ", 120)  # (possibly the rest of a line cut by the pause)
        r.t["first_tick2"] = time.monotonic()
        r.p2.wait_for(rf"^brisk-init: tick {last1 + TICKS_AFTER} ", 180)
        # the held connection must end by itself (the transport reset), before any new vsock traffic
        try:
            r.p2.wait_for(rf"^brisk-snap: held connection 2:{HOLD} ended ", HELD_END_S, diag=False)
            r.held_ended_first = True
        except AssertionError:
            pass

        # the vsock steps: a failure is recorded (test_vsock_after_restore reports it) and the run goes on
        step = "vsock exchange"  # host -> guest, a connection made after the restore
        try:
            with command(uds, "exchange\n") as s:
                r.exchange.attempts = 1
                netpeer.exchange_connector(s, BYTES, r.exchange)
            r.p2.wait_for(rf"^brisk-net: vsock accept port {LISTEN}: ", 60)
        except Exception as e:  # noqa: BLE001
            r.exchange.error = r.exchange.error or f"{type(e).__name__}: {e}"
            r.errors.append(f"{step}: {type(e).__name__}: {str(e)[:300]}")

        step = "vsock dial"  # guest -> host
        try:
            lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            lst.bind(f"{uds}_{DIAL}")
            lst.listen(1)
            th = netpeer.thread(netpeer.serve_once, lst, r.dial, 90)
            with command(uds, f"dial {DIAL} {BYTES}\n") as s:
                r.dial_answer = read_line(s)
            th.join(timeout=120)
            r.p2.wait_for(rf"^brisk-net: vsock connect 2:{DIAL}: ", 60)
        except Exception as e:  # noqa: BLE001
            r.errors.append(f"{step}: {type(e).__name__}: {str(e)[:300]}")

        # not a step: 32 bytes of the restored guest's /dev/urandom, for test_vmgenid_... (a failure is its)
        got = {"mode": "File", "random": None, "error": None}
        try:
            with command(uds, "random\n") as c:
                got["random"] = read_line(c).strip()
        except Exception as e:  # noqa: BLE001
            got["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        r.randoms.append(got)

        step = "ticks after the vsock checks"
        last = max(int(m.group(1)) for m in TICK_RE.finditer(r.p2.out))
        r.p2.wait_for(rf"^brisk-init: tick {last + 3} ", 60)

        step = "stop"
        try:
            if os.environ.get("BRISK_SNAP_STOP") == "api":  # to try the fallback below
                raise ConnectionError("BRISK_SNAP_STOP=api: not sending stop over vsock")
            with command(uds, "stop\n") as s:
                r.stop_answer = read_line(s)
            r.stopped_by = "vsock"
        except Exception as e:  # noqa: BLE001 (vsock broken: Ctrl-Alt-Del makes the init stop the same way)
            r.errors.append(f"{step}: {type(e).__name__}: {str(e)[:300]}")
            ApiClient(api2, timeout=60).ok("PUT", "/actions", {"action_type": "SendCtrlAltDel"})
            r.stopped_by = "SendCtrlAltDel"
        r.status2 = r.p2.wait(120)
        r.t["ended"] = time.monotonic()
        r.out2 = r.p2.out
        step = None
    except Exception as e:  # noqa: BLE001 (each test says what it could not check)
        r.failed, r.failed_step = f"{step}: {type(e).__name__}: {e}", step
    finally:
        r.held.thread.join(timeout=5)
        if r.p1:
            r.p1.kill()
            r.out1 = r.p1.out
        if r.p2:
            if r.p2.proc.poll() is None:
                r.p2.kill()
            r.out2 = r.p2.out


def _uffd_restore(r, tmp, sockdir):
    """One more restore of the snapshot, a Uffd one: its memory served by tests/uffd_handler.py (Firecracker's
    handshake), on a copy of the disk as the snapshot saw it (the main run's final image is kept for its checks).
    The guest is asked over vsock for 32 bytes of /dev/urandom, as the main restore was, then killed. The guest's
    RNG state is in the snapshot: the new VM Generation ID of each restore, mixed in by Linux's vmgenid driver on
    the GED's notification, is what makes the two answers differ."""
    uds = os.path.join(sockdir, "v.sock")
    state, mem = tmp / "vm.state", tmp / "vm.mem"
    final = tmp / "disk-final.img"
    shutil.move(r.image, final)
    r.image = final
    shutil.copy(tmp / "disk-snap.img", tmp / "disk.img")
    hsock = os.path.join(sockdir, "uffd.sock")
    handler = subprocess.Popen([sys.executable, str(ROOT / "tests" / "uffd_handler.py"), hsock, str(mem),
                                "--chunk", "64"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got = {"mode": "Uffd", "random": None, "error": None}
    p = None
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(hsock) and handler.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        p = Proc(["restore", "--snapshot", state, "--uffd", hsock, "--api-sock", os.path.join(sockdir, "api3.sock"),
                  "--log-level", "info"])
        p.wait_for(r"^brisk-init: tick \d+ ", 240)
        with command(uds, "random\n", timeout=120) as c:
            got["random"] = read_line(c).strip()
    except Exception as e:  # noqa: BLE001 (reported by the test)
        got["error"] = f"{type(e).__name__}: {str(e)[:1500]}"
    finally:
        if p:
            p.kill()
            got["out"], got["err"] = p.out, p.err[-3000:]
        handler.kill()
        got["handler"] = handler.communicate()[1][-2000:]
    r.randoms.append(got)


def _clone_restores(r, tmp, sockdir):
    """Two clones of the snapshot from one clone server (`brisk restore --clone-server`), one after the other (each
    opens the snapshot's disk read-write: two at once would be refused), each on a fresh copy of the disk as the
    snapshot saw it and with its vsock socket at a path of its own (the request's vsock_override). Each is asked
    over vsock, at that path, for 32 bytes of /dev/urandom, then stopped by shutting its connection (the server's
    SIGTERM: status 16)."""
    state, mem = tmp / "vm.state", tmp / "vm.mem"
    sock = os.path.join(sockdir, "clones.sock")
    server = Proc(["restore", "--snapshot", state, "--mem", mem, "--clone-server", sock, "--log-level", "info"])
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(sock):
            assert server.proc.poll() is None and time.monotonic() < deadline, server.describe()
            time.sleep(0.05)
        for i in range(2):
            got = {"mode": f"clone {i + 1}", "random": None, "error": None}
            out, err = tmp / f"clone{i}.out", tmp / f"clone{i}.err"
            shutil.copy(tmp / "disk-snap.img", tmp / "disk.img")
            fds = [os.open(os.devnull, os.O_RDONLY), os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                   os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)]
            c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                uds = os.path.join(sockdir, f"clone{i}.sock")
                c.connect(sock)
                socket.send_fds(c, [json.dumps({"vsock_override": {"uds_path": uds}}).encode()], fds)
                for fd in fds:
                    os.close(fd)
                c.settimeout(240)
                got["pid"] = json.loads(c.recv(4096))["pid"]
                deadline = time.monotonic() + 240
                while not re.search(r"^brisk-init: tick \d+ ", out.read_text(errors="replace"), re.M):
                    assert time.monotonic() < deadline, f"no tick from clone {i + 1} in 240 s"
                    time.sleep(0.1)
                with command(uds, "random\n", timeout=120) as v:
                    got["random"] = read_line(v).strip()
                c.shutdown(socket.SHUT_WR)  # the clone's handle: the server stops it
                got["exit"] = json.loads(c.recv(4096))["exit_code"]
            except Exception as e:  # noqa: BLE001 (reported by the test)
                got["error"] = f"{type(e).__name__}: {str(e)[:1500]}"
            finally:
                c.close()
                got["out"] = out.read_text(errors="replace").replace("\r", "")
                got["err"] = err.read_text(errors="replace")[-3000:]
            r.randoms.append(got)
    except Exception as e:  # noqa: BLE001 (reported by the test)
        r.randoms.append({"mode": "clone server", "random": None, "error": f"{type(e).__name__}: {e}"})
    finally:
        server.proc.send_signal(signal.SIGTERM)
        try:
            r.clone_server_status = server.wait(60)
        except AssertionError:
            r.clone_server_status = None
        r.clone_server_err = server.err[-3000:]


def ticks(text):
    """[(n, uptime, monotonic, disk result, uptime as printed)] of every tick line (kernel messages taken out)."""
    return [(int(n), float(u), float(m), d, u) for n, u, m, d in TICK_RE.findall(KMSG_RE.sub("", text))]


def complete(text):
    return text[: text.rfind("\n") + 1]


def run_tool(*cmd):
    env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/sbin:/usr/sbin")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def test_diff_chain_is_the_full_snapshot(snap_run):
    """The base plus the Diff layer, merged with brisk snapshot-editor, is the Full snapshot taken at the Diff's
    pause byte for byte; the layer holds less than the Full snapshot's data (reported with the sizes)."""
    r = snap_run
    r.need("merge")
    c = r.chain
    _report.append(f"snapshot: Diff chain of a {c['size'] >> 20} MiB Debian guest: base {c['base'] >> 10} KiB, Diff "
                   f"{c['diff'] >> 10} KiB ({100 * c['diff'] / c['size']:.1f}% of RAM) written "
                   f"{TICKS_BEFORE - TICKS_BASE} ticks later, Full at that moment {c['full'] >> 10} KiB (allocated)")
    assert c["differs_at"] is None, f"base + Diff differs from the Full snapshot at 0x{c['differs_at']:x}"
    assert 0 < c["diff"] < c["full"], c


def test_restore_continues_the_same_boot(snap_run):
    """The ticks of both processes joined are 1, 2, 3, ...: the restored guest continues at the next tick, and
    the restored process printed nothing of a new boot."""
    r = snap_run
    r.need("restore")
    before = ticks(complete(r.out1))
    assert len(before) >= TICKS_BEFORE, r.describe()
    joined = ticks(r.out1 + r.out2)
    ns = [t[0] for t in joined]
    assert ns == list(range(1, len(ns) + 1)), f"tick sequence broken: {ns}\n{r.describe()}"
    after = [n for n in ns if n > before[-1][0]]
    assert len(after) >= TICKS_AFTER, f"only {len(after)} ticks after the restore\n{r.describe()}"
    new_boot = NEW_BOOT_RE.search(r.out2)
    assert not new_boot, f"the restored process shows a new boot: {new_boot.group(0)!r}\n{r.describe()}"
    assert "brisk-init: tick" in r.out2 and "brisk-init: tick 1 " not in r.out2, r.describe()


def test_uptime_continues(snap_run):
    """The guest's CLOCK_BOOTTIME and CLOCK_MONOTONIC advance across the snapshot by about one tick's spacing,
    not by the time the VM spent paused, killed and restored."""
    r = snap_run
    r.need("restore")
    last1 = ticks(complete(r.out1))[-1][0]
    joined = {t[0]: t for t in ticks(r.out1 + r.out2)}
    assert last1 + 1 in joined, r.describe()
    # the snapshot fell between the last complete tick line before it and the next one (or, when that next
    # line was cut by the pause, the one after): the largest step around there is the jump
    around = [n for n in range(last1 - 1, last1 + 3) if n in joined and n - 1 in joined]
    jump_up = max(joined[n][1] - joined[n - 1][1] for n in around)
    jump_mono = max(joined[n][2] - joined[n - 1][2] for n in around)
    steps = [joined[n][1] - joined[n - 1][1] for n in sorted(joined) if n - 1 in joined]
    host_gap = r.t["restored"] - r.t["pause"]
    _report.append(f"snapshot: VM paused {host_gap:.1f} s (host clock); guest uptime step across the snapshot "
                   f"{jump_up:.3f} s (monotonic {jump_mono:.3f} s); tick steps otherwise "
                   f"{min(steps):.3f}..{max(steps):.3f} s")
    assert host_gap >= PAUSED_S
    assert 0 < jump_up < MAX_JUMP_S and 0 < jump_mono < MAX_JUMP_S, (
        f"the guest's clock jumped {jump_up:.3f} s (monotonic {jump_mono:.3f} s) across a pause of "
        f"{host_gap:.1f} s\n{r.describe()}")
    for n in sorted(joined):
        if n - 1 in joined:
            assert joined[n][1] > joined[n - 1][1], f"uptime went back at tick {n}\n{r.describe()}"


def test_disk_works_after_restore(snap_run):
    """Every tick's write, fsync and O_DIRECT read-back on virtio-blk succeeded, before and after the restore;
    the guest unmounted the disk and powered off; the image is clean and holds every tick in order."""
    r = snap_run
    r.need("stop")
    joined = ticks(r.out1 + r.out2)
    bad = [t for t in joined if t[3] != "ok"]
    assert not bad, f"disk step failed: {bad[:5]}\n{r.describe()}"
    m = re.search(r"^brisk-snap: stopped after tick (\d+); files closed: yes; /mnt unmounted: yes$", r.out2, re.M)
    assert m, f"the guest did not close and unmount its disk\n{r.describe()}"
    last = int(m.group(1))
    assert last == joined[-1][0], r.describe()
    fsck = run_tool("e2fsck", "-fn", str(r.image))
    assert fsck.returncode == 0, f"e2fsck -fn: exit {fsck.returncode}\n{fsck.stdout}{fsck.stderr}"
    cat = run_tool("debugfs", "-R", "cat /brisk-ticks", str(r.image))
    want = "".join(f"tick {t[0]} uptime {t[4]}\n" for t in joined)
    assert cat.stdout == want, (f"/brisk-ticks on the image is not the ticks printed:\n{cat.stdout[-2000:]!r}\n"
                                f"{cat.stderr}\nwanted (tail): {want[-500:]!r}")
    blk = run_tool("debugfs", "-R", "cat /brisk-tick", str(r.image))
    assert blk.stdout.rstrip("\0") == f"tick {last} uptime {joined[-1][4]}\n", repr(blk.stdout[:100])


def test_vsock_old_connection_reset(snap_run):
    """The connection open at snapshot time ends in the restored guest with ECONNRESET, the transport reset
    (virtio 1.2 5.10.6.6), by itself: within HELD_END_S of the restore, before the host makes any new vsock
    connection (it does not hang until some other traffic comes)."""
    r = snap_run
    r.need("restore")
    last1 = ticks(complete(r.out1))[-1][0]
    m = re.search(rf"^brisk-snap: held connection 2:{HOLD} ended at tick (\d+): SO_ERROR ([^,]*), (.*)$", r.out2,
                  re.M)
    assert m, f"the guest's held connection did not end after the restore\n{r.describe()}"
    _report.append(f"snapshot: the connection open at snapshot time ended at tick {m.group(1)} (restored after "
                   f"tick {last1}; {'before' if r.held_ended_first else 'only after'} the host's first new vsock "
                   f"connection): SO_ERROR {m.group(2)}, {m.group(3)}")
    # ECONNRESET is what the driver's transport-reset handling sets (virtio_vsock_reset_sock); an RST packet
    # for the connection would end it with SO_ERROR 0 and EOF instead
    assert int(m.group(1)) >= last1 and m.group(2) == "Connection reset by peer", m.group(0)
    assert r.held_ended_first, (f"the held connection did not end within {HELD_END_S:.0f} s of the restore, only "
                                f"when new vsock traffic came: {m.group(0)}\n{r.describe()}")


def test_vsock_fresh_connections_after_restore(snap_run):
    """Connections made after the restore, host -> guest first, then guest -> host, each carry BYTES each way,
    checked on both sides."""
    r = snap_run
    r.need("restore")
    ok = f"sent {BYTES} received {BYTES} ok"
    line = re.search(rf"^brisk-net: vsock accept port {LISTEN}: (.*)$", r.out2, re.M)
    assert line and line.group(1).startswith(ok), f"host -> guest: {line and line.group(0)}\n{r.describe()}"
    assert r.exchange.ok and r.exchange.bytes == BYTES, f"host side of host -> guest: {r.exchange}"
    assert r.dial_answer == "ok\n", r.describe()
    line = re.search(rf"^brisk-net: vsock connect 2:{DIAL}: (.*)$", r.out2, re.M)
    assert line and line.group(1).startswith(ok), f"guest -> host: {line and line.group(0)}\n{r.describe()}"
    assert r.dial.ok and r.dial.bytes == BYTES, f"host side of guest -> host: {r.dial}"


def test_restored_vm_ends_cleanly(snap_run):
    """The restored guest powers off (ACPI S5): the restored brisk exits 0, and no sanitizer spoke."""
    r = snap_run
    r.need("stop")
    assert r.stop_answer == "ok\n" or r.stopped_by == "SendCtrlAltDel", r.describe()
    if r.stopped_by == "SendCtrlAltDel":
        assert "brisk-snap: SIGINT (Ctrl-Alt-Del): stopping" in r.out2, r.describe()
    assert r.status2 == 0, r.describe()
    assert "reboot: Power down" in r.out2 or "reboot: Restarting system" in r.out2, r.describe()
    for p in (r.p1, r.p2):
        for marker in ("AddressSanitizer", "runtime error:", "UndefinedBehaviorSanitizer"):
            assert marker not in p.err, p.err[-3000:]


def test_vmgenid_four_restores_draw_different_random_bytes(snap_run):
    """Four restores of one snapshot, asked from inside the guest for 32 bytes of /dev/urandom, answer differently:
    brisk gave each a new VM Generation ID and notified it through the GED, and Linux's vmgenid driver reseeded
    the RNG (docs/acpi.md "VMGenID"; random.c says so on the console). The second restore is a Uffd one: Debian's
    kernel runs on memory served by a Firecracker-format page-fault handler; the third and fourth are clones from
    one clone server (docs/cli.md "Clone server"), each stopped through its connection (16), the server ending
    with 16 on SIGTERM."""
    r = snap_run
    r.need("stop")
    assert len(r.randoms) == 4, r.randoms
    for got in r.randoms:
        assert got["random"] and re.fullmatch(r"[0-9a-f]{64}", got["random"]), got
    drawn = [got["random"] for got in r.randoms]
    outs = [r.out2] + [got.get("out", "") for got in r.randoms[1:]]
    reseeded = [RESEED in out for out in outs]
    _report.append("vmgenid: /dev/urandom after four restores of one snapshot: " +
                   ", ".join(f"{d[:16]}... ({got['mode']})" for d, got in zip(drawn, r.randoms)) +
                   f"; the kernel said '{RESEED}': {reseeded}")
    assert len(set(drawn)) == 4, f"restores drew the same bytes: {drawn}"
    assert RESEED not in r.out1, "a reseed for a VM fork before any restore"
    assert all(reseeded), f"restores whose kernel did not reseed for the new generation: {reseeded}"
    assert [got.get("exit") for got in r.randoms[2:]] == [16, 16], r.randoms[2:]
    assert r.clone_server_status == 16, r.clone_server_err
    for got in r.randoms[2:]:
        for marker in ("AddressSanitizer", "runtime error:", "UndefinedBehaviorSanitizer"):
            assert marker not in got["err"] and marker not in (r.clone_server_err or ""), got["err"]


def test_vmclock_counts_the_loads_from_a_snapshot(snap_run):
    """Debian's kernel enumerates the DSDT's VCLK device (_HID AMZNC10C) and claims its page as brisk's _CRS names
    it (/proc/iomem: 0xee000-0xeefff); read there from inside (/dev/mem), the page holds the VMClock structure
    (magic "VCLK") with generation, disruption marker and seq 0 at the boot, and 1, 1 and 2 after each of the four
    restores of that boot's snapshot (File, Uffd, two clones): a counter of loads, the same for siblings (6.1 has
    no ptp_vmclock driver to map it; 7.0's reads these fields)."""
    r = snap_run
    r.need("stop")
    boot = VMCLOCK_RE.findall(r.out1)
    assert boot and boot[0] == ("ee000", "eefff", "4b4c4356", "0", "0", "0"), boot or r.out1[-3000:]
    outs = [r.out2] + [got.get("out", "") for got in r.randoms[1:]]
    seen = [VMCLOCK_RE.findall(out) for out in outs]
    _report.append("vmclock: boot " + " ".join(boot[0][3:]) + "; restores " +
                   ", ".join(f"{got['mode']}: {' '.join(s[-1][3:]) if s else 'none'}"
                             for got, s in zip(r.randoms, seen)))
    assert len(seen) == 4 and all(seen), seen
    for found in seen:
        assert found[-1] == ("ee000", "eefff", "4b4c4356", "1", "1", "2"), found
