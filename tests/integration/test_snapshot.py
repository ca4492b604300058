"""Snapshot and restore, proved from inside the guest: Firecracker's getting-started sequence over the API socket
(configure, InstanceStart, pause, /snapshot/create, kill, /snapshot/load in a fresh `brisk --api-sock`), the same
through `brisk restore`, SMP, virtio-blk I/O in flight, resume_vm=false, pause/resume in one process, the state and
memory files brisk must refuse, and the API's pre/post-boot rules for snapshots.

The guests (guests/counter.c, guests/blk-counter.c) print a numbered line per LAPIC timer tick (or per verified
block round) and check their own memory, so the output after a restore must continue the sequence exactly:
the serial output of the first process joined to that of the restored one reads "count 1", "count 2", ... with
no gap, no repeat, and every line's checksum right. A line cut in half by the pause is completed by the
restored process. Needs KVM."""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from apiclient import BriskProcess
from conftest import BRISK, EXIT_GUEST_OK, EXIT_USAGE, boot, check_sanitizers, debug_exit_status, guest, short_tmpdir

pytestmark = pytest.mark.usefixtures("kvm")

COUNT_RE = re.compile(r"^count (\d+) sum (\d+)(?: cpus ([\d,]+))?(?: clock (\d+))?$")  # clock: kvmclock=1
BLK_RE = re.compile(r"^blk (\d+) ok$")
HIST_PAGES = 64  # guests/counter.c: the sum covers the last 64 lines
PAGE = 4096
SECTOR = 512
BLK_RING = 64  # guests/blk-counter.c
# What `brisk restore --timeline` reports (src/profile/timeline.c): reading the state file, mapping the memory file,
# setting vCPU/irqchip/device state, and the first run and output of the restored guest.
RESTORE_PHASES = ["process start", "snapshot read", "memory mapped", "vCPUs ready", "state restored",
                  "first KVM_RUN", "first serial byte", "guest ended"]


# ---- running brisk and reading its serial ------------------------------------------------------------------


class Brisk(BriskProcess):
    """One brisk process (apiclient.BriskProcess), with helpers to read the counter's serial."""

    def __init__(self, args, sock=None, stdin=subprocess.DEVNULL):
        super().__init__(BRISK, args, sock, stdin=stdin)

    def wait_for(self, regex, timeout=30.0, start=0):
        """Waits until a complete line of stdout (from character `start` on) matches regex; returns the match."""
        r = re.compile(regex, re.M)
        deadline = time.monotonic() + timeout
        while True:
            text = self.out[start:]
            text = text[: text.rfind("\n") + 1]
            m = r.search(text)
            if m:
                return m
            if self.proc.poll() is not None:
                time.sleep(0.1)  # the pumps finish reading
                raise AssertionError(f"brisk {self.args} exited {self.proc.returncode} before /{regex}/\n"
                                     f"stdout:\n{self.out[-3000:]}\nstderr:\n{self.err[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no /{regex}/ after {timeout} s\nstdout:\n{self.out[-3000:]}\n"
                                     f"stderr:\n{self.err[-3000:]}")
            time.sleep(0.02)

    def settle(self, quiet=0.3, timeout=5.0):
        """Waits until stdout has not grown for `quiet` seconds (the console ring drained); returns the text."""
        deadline = time.monotonic() + timeout
        last, since = len(self.out), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.05)
            n = len(self.out)
            if n != last:
                last, since = n, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
        return self.out

    def wait(self, timeout=60):
        code = super().wait(timeout)
        check_sanitizers(self.err)
        return code


def api_brisk(procs, sockdir, name, *extra):
    """`brisk --api-sock DIR/NAME.sock [extra]`: no VM until the API configures one."""
    sock = os.path.join(sockdir, f"{name}.sock")
    b = Brisk(["--api-sock", sock, *extra], sock=sock)
    procs.append(b)
    return b


# ---- what the guests print -------------------------------------------------------------------------------


def complete_lines(text):
    return text[: text.rfind("\n") + 1].splitlines()


def counts(text):
    """[(n, sum, [cpu counts] or None)] of every complete count line."""
    rows = []
    for line in complete_lines(text):
        m = COUNT_RE.match(line)
        if m:
            cpus = [int(c) for c in m.group(3).split(",")] if m.group(3) else None
            rows.append((int(m.group(1)), int(m.group(2)), cpus))
    return rows


def expected_sum(n):
    lo = max(1, n - HIST_PAGES + 1)
    return (lo + n) * (n - lo + 1) // 2


def check_count_sequence(text, at_least):
    """The count lines of text number 1, 2, 3, ... with no gap or repeat, each sum right, no FAIL; at least
    `at_least` of them. Returns the rows."""
    assert "FAIL" not in text, text[-3000:]
    rows = counts(text)
    assert len(rows) >= at_least, f"{len(rows)} count lines, expected >= {at_least}:\n{text[-3000:]}"
    ns = [r[0] for r in rows]
    assert ns == list(range(ns[0], ns[0] + len(ns))) and ns[0] == 1, f"count sequence broken: {ns}"
    for n, s, _ in rows:
        assert s == expected_sum(n), f"count {n}: sum {s}, expected {expected_sum(n)} (guest memory lost?)"
    return rows


def check_continues(before, after, more=5):
    """The restored process's output `after` continues `before` (the first process's, killed after a pause):
    the first count line completed after the restore is exactly the last one before it + 1, and at least
    `more` follow it. Returns (last count before, rows of the joined output)."""
    rows_before = counts(before)
    assert rows_before, f"no count line before the snapshot:\n{before[-2000:]}"
    last = rows_before[-1][0]
    rows_after = counts(before + after)[len(rows_before):]
    assert rows_after, f"no count line after the restore (last before: {last}):\n{after[-2000:]}"
    assert rows_after[0][0] == last + 1, \
        f"first count after the restore is {rows_after[0][0]}, expected {last + 1}:\n{after[:2000]}"
    assert len(rows_after) >= more, f"only {len(rows_after)} count lines after the restore:\n{after[-2000:]}"
    return last, check_count_sequence(before + after, last + more)


def configure_counter(api, boot_args="", vcpus=1, mem_mib=64, drive=None):
    api.boot_source(guest("counter"), ("console=ttyS0 " + boot_args).strip())
    api.machine_config(vcpu_count=vcpus, mem_size_mib=mem_mib)
    if drive:
        api.drive("rootfs", drive, root=True, read_only=False)


def snapshot_running(b, state, mem, wait_re=r"^count 5 ", timeout=30):
    """Waits for wait_re, pauses, lets the console drain, snapshots, kills the process; returns its output."""
    b.wait_for(wait_re, timeout=timeout)
    b.api.pause()
    before = b.settle()
    r = b.api.snapshot_create(state, mem)
    assert r.status == 204
    after_snap = b.settle(quiet=0.2)
    assert after_snap == before, f"guest output while paused:\n{after_snap[len(before):]}"
    b.kill()
    assert os.path.getsize(state) > 0
    return before


def make_counter_snapshot(procs, sockdir, d, name, boot_args="", vcpus=1, mem_mib=64, drive=None,
                          wait_re=r"^count 5 "):
    b = api_brisk(procs, sockdir, name)
    configure_counter(b.api, boot_args, vcpus, mem_mib, drive)
    b.api.start()
    state, mem = os.path.join(d, f"{name}.state"), os.path.join(d, f"{name}.mem")
    before = snapshot_running(b, state, mem, wait_re)
    assert os.path.getsize(mem) == mem_mib << 20, "memory file size != guest RAM"
    return state, mem, before


def blank_image(path, size=1 << 20):
    with open(path, "wb") as f:
        f.truncate(size)
    return str(path)


# ---- the guests alone (plain `brisk run`, no snapshot): what the restore tests rely on -----------------------


@pytest.mark.parametrize("cpus", [1, 3])
def test_counter_guest_alone(cpus):
    """counter (stop=12) counts 1..12 with the right sums and passes; with 3 vCPUs every AP counts on its own
    timer too (its counter rises over the run)."""
    p = boot("counter", "--cpus", str(cpus), "--cmdline", "stop=12", timeout=60)
    assert p.returncode == EXIT_GUEST_OK, f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    assert "counter: PASS" in p.stdout and f"counter: {cpus} cpus" in p.stdout, p.stdout
    rows = check_count_sequence(p.stdout, 12)
    assert rows[-1][0] == 12
    if cpus > 1:
        for cpu in range(1, cpus):
            col = [r[2][cpu] for r in rows]
            assert col == sorted(col) and col[-1] >= col[0] + 8, f"AP {cpu} not counting: {col}"


def test_blk_counter_guest_alone(tmp_path):
    """blk-counter (stop=80) on a zeroed 1 MiB image: 80 verified rounds (past the 64-sector ring, so the
    read-before-write check of an earlier round's data ran), PASS, and the image holds rounds 17..80."""
    img = blank_image(tmp_path / "d.img")
    p = boot("blk-counter", "--disk", img, "--cmdline", "stop=80", timeout=120)
    assert p.returncode == EXIT_GUEST_OK, f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    ns = [int(m) for m in re.findall(r"^blk (\d+) ok$", p.stdout, re.M)]
    assert ns == list(range(1, 81)) and "blk-counter: PASS" in p.stdout, p.stdout[-2000:]
    assert sorted(disk_rounds(img).values()) == list(range(17, 81))


# ---- the getting-started sequence ---------------------------------------------------------------------------


def test_getting_started_snapshot_load_over_api(tmp_path, sockdir, procs):
    """Firecracker's getting-started guide, end to end: boot source, machine config, a root drive, InstanceStart;
    at "count 5" pause, snapshot (Full), kill -9; a fresh `brisk --api-sock` loads it (mem_backend File,
    resume_vm true): the count goes on from exactly last + 1, at least 5 more lines, every checksum right."""
    drive = blank_image(tmp_path / "rootfs.img")
    state, mem, before = make_counter_snapshot(procs, sockdir, str(tmp_path), "gs", mem_mib=128, drive=drive)
    b = api_brisk(procs, sockdir, "gs-load")
    b.api.snapshot_load(state, mem, resume_vm=True)
    b.wait_for(r"^count \d+ ", timeout=30)
    last = counts(before)[-1][0]
    b.wait_for(rf"^count {last + 5} ", timeout=30)
    check_continues(before, b.out, more=5)
    # The restored VM is a running VM: it pauses and resumes like a booted one.
    b.api.pause()
    b.api.resume()
    b.wait_for(rf"^count {last + 8} ", timeout=30)
    check_count_sequence(before + b.out, last + 8)


def test_restore_command_line(tmp_path, sockdir, procs):
    """`brisk restore --snapshot STATE --mem MEM` (it resumes unless --paused), no API: the count continues from
    last + 1 and the guest (stop=N) ends with PASS and exit 0."""
    state, mem, before = make_counter_snapshot(procs, sockdir, str(tmp_path), "cli", boot_args="stop=25")
    b = Brisk(["restore", "--snapshot", state, "--mem", mem])
    procs.append(b)
    rc = b.wait(timeout=60)
    assert rc == EXIT_GUEST_OK, f"exit {rc}\nstdout:\n{b.out[-2000:]}\nstderr:\n{b.err[-2000:]}"
    assert "counter: PASS" in b.out
    last, rows = check_continues(before, b.out, more=5)
    assert rows[-1][0] == 25


def test_restore_command_line_serial_file(tmp_path, sockdir, procs):
    """`brisk restore ... --serial file:PATH`: the guest's output goes to the file, not to stdout."""
    state, mem, before = make_counter_snapshot(procs, sockdir, str(tmp_path), "ser", boot_args="stop=15")
    out = tmp_path / "serial.txt"
    b = Brisk(["restore", "--snapshot", state, "--mem", mem, "--serial", f"file:{out}"])
    procs.append(b)
    rc = b.wait(timeout=60)
    assert rc == EXIT_GUEST_OK, f"exit {rc}\n{b.err[-2000:]}"
    assert "count" not in b.out
    check_continues(before, out.read_text(errors="replace"), more=5)


def test_run_api_sock_snapshot(tmp_path, sockdir, procs):
    """A VM started from the command line (`brisk run --api-sock S`, 2 vCPUs, a disk) is paused and snapshotted
    through the API, and `brisk restore` carries it on to the guest's PASS."""
    sock = os.path.join(sockdir, "run.sock")
    img = blank_image(tmp_path / "run.img")
    b = Brisk(["run", "--kernel", guest("counter"), "--cpus", "2", "--memory", "48M", "--disk", img, "--cmdline",
               "console=ttyS0 stop=20", "--api-sock", sock], sock=sock)
    procs.append(b)
    state, mem = str(tmp_path / "run.state"), str(tmp_path / "run.mem")
    before = snapshot_running(b, state, mem)
    assert os.path.getsize(mem) == 48 << 20
    r = Brisk(["restore", "--snapshot", state, "--mem", mem])
    procs.append(r)
    rc = r.wait(timeout=60)
    assert rc == EXIT_GUEST_OK, f"exit {rc}\n{r.out[-2000:]}\n{r.err[-2000:]}"
    _, rows = check_continues(before, r.out, more=5)
    assert rows[-1][0] == 20 and len(rows[-1][2]) == 2 and rows[-1][2][1] > counts(before)[-1][2][1]


def test_restore_paused_then_resumed_over_api(tmp_path, sockdir, procs):
    """`brisk restore --paused --api-sock S`: nothing runs for 1 s; PATCH /vm Resumed, and the count continues
    from last + 1 to the guest's PASS (stop=N), exit 0."""
    state, mem, before = make_counter_snapshot(procs, sockdir, str(tmp_path), "rp", boot_args="stop=20")
    sock = os.path.join(sockdir, "rp-restore.sock")
    b = Brisk(["restore", "--snapshot", state, "--mem", mem, "--paused", "--api-sock", sock], sock=sock)
    procs.append(b)
    time.sleep(1.0)
    assert "count" not in b.out, f"guest ran while --paused:\n{b.out[-2000:]}"
    b.api.resume()
    rc = b.wait(timeout=60)
    assert rc == EXIT_GUEST_OK, f"exit {rc}\n{b.out[-2000:]}\n{b.err[-2000:]}"
    check_continues(before, b.out, more=5)


def test_snapshot_of_restored_vm(tmp_path, sockdir, procs):
    """A restored VM snapshotted again (pause, /snapshot/create, kill) restores again: the count runs on across
    both restores with no gap, so what a restore sets up is everything a snapshot saves."""
    state, mem, before = make_counter_snapshot(procs, sockdir, str(tmp_path), "gen1")
    b = api_brisk(procs, sockdir, "gen2")
    b.api.snapshot_load(state, mem, resume_vm=True)
    last = counts(before)[-1][0]
    state2, mem2 = str(tmp_path / "gen2.state"), str(tmp_path / "gen2.mem")
    middle = snapshot_running(b, state2, mem2, wait_re=rf"^count {last + 5} ")
    c = api_brisk(procs, sockdir, "gen3")
    c.api.snapshot_load(state2, mem2, resume_vm=True)
    last2 = counts(before + middle)[-1][0]
    c.wait_for(rf"^count {last2 + 5} ", timeout=30)
    check_continues(before + middle, c.out, more=5)


def test_lost_page_shows(tmp_path, good_snapshot):
    """The guest's own memory check is live: the same snapshot with one page of the memory file zeroed (the
    top RAM page counter.c checks every line; the memory file holds RAM at offset = guest-physical address below
    the MMIO hole) restores, and the guest reports the loss and exits 255."""
    state, mem, before = good_snapshot
    m = re.search(r"RAM pages up to 0x([0-9a-f]+)", before)
    assert m, before[:2000]
    bad = tmp_path / "zeroed.mem"
    shutil.copy(mem, bad)
    with open(bad, "r+b") as f:
        f.seek(int(m.group(1), 16))
        f.write(bytes(PAGE))
    p = subprocess.run([str(BRISK), "restore", "--snapshot", state, "--mem", str(bad)], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    check_sanitizers(p.stderr)
    assert p.returncode == debug_exit_status(0x7F), f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr}"
    assert re.search(r"counter: FAIL: RAM page: cpu 0 line \d+ holds 0", p.stdout), p.stdout[-2000:]


# ---- SMP ----------------------------------------------------------------------------------------------------


def test_smp_every_cpu_continues(tmp_path, sockdir, procs):
    """3 vCPUs, each with its own periodic LAPIC timer, halted between ticks: after the restore the BSP's line
    number continues exactly and every AP's own counter goes on from where it was (never back, and on)."""
    state, mem, before = make_counter_snapshot(procs, sockdir, str(tmp_path), "smp", boot_args="smp=1", vcpus=3,
                                               wait_re=r"^count 8 ")
    assert "counter: 3 cpus" in before, before[:2000]
    pre = counts(before)
    at_pause = pre[-1][2]
    assert len(at_pause) == 3 and all(c > 0 for c in at_pause[1:]), f"APs not counting before: {pre[-3:]}"
    b = api_brisk(procs, sockdir, "smp-load")
    b.api.snapshot_load(state, mem, resume_vm=True)
    last = pre[-1][0]
    b.wait_for(rf"^count {last + 10} ", timeout=30)
    _, rows = check_continues(before, b.out, more=10)
    for cpu in (1, 2):
        col = [r[2][cpu] for r in rows]
        assert col == sorted(col), f"AP {cpu}'s counter went back: {col}"
        first_after = rows[last][2][cpu]  # rows[i] is count i + 1
        assert first_after >= at_pause[cpu], f"AP {cpu}: {first_after} after the restore, {at_pause[cpu]} before"
        assert col[-1] >= at_pause[cpu] + 5, f"AP {cpu} stopped counting after the restore: {col}"


# ---- virtio-blk I/O in flight -------------------------------------------------------------------------------


def disk_rounds(path):
    """{sector: the round whose data it holds} for the blk-counter ring (0: untouched)."""
    with open(path, "rb") as f:
        data = f.read(BLK_RING * SECTOR)
    return {s: int.from_bytes(data[s * SECTOR:s * SECTOR + 8], "little") for s in range(BLK_RING)}


def test_blk_io_in_flight(tmp_path, sockdir, procs):
    """blk-counter writes, reads back and verifies one sector per round without pause; a snapshot catches it
    mid-I/O. After the restore (same image file) the rounds go on from last + 1 and at least 20 more verify,
    including the read-before-write check of data the first process wrote; the image then holds the rounds."""
    img = blank_image(tmp_path / "blk.img")
    b = api_brisk(procs, sockdir, "blk")
    b.api.boot_source(guest("blk-counter"), "console=ttyS0")
    b.api.machine_config(vcpu_count=1, mem_size_mib=64)
    b.api.drive("data", img, root=False, read_only=False)
    b.api.start()
    state, mem = str(tmp_path / "blk.state"), str(tmp_path / "blk.mem")
    before = snapshot_running(b, state, mem, wait_re=r"^blk 30 ok$", timeout=60)
    last = max(int(m) for m in re.findall(r"^blk (\d+) ok$", before, re.M))

    r = api_brisk(procs, sockdir, "blk-load")
    r.api.snapshot_load(state, mem, resume_vm=True)
    r.wait_for(rf"^blk {last + 20} ok$", timeout=60)
    r.kill()
    joined = before + r.out
    assert "FAIL" not in joined, joined[-3000:]
    ns = [int(m) for m in re.findall(r"^blk (\d+) ok$", joined, re.M)]
    assert ns == list(range(1, ns[-1] + 1)), f"blk rounds broken: {ns}"
    assert ns[-1] >= last + 20
    rounds = disk_rounds(img)
    top = ns[-1]
    held = rounds[top % BLK_RING]
    assert held >= top and held % BLK_RING == top % BLK_RING, f"sector {top % BLK_RING} holds round {held}"


# ---- resume_vm=false, pause/resume --------------------------------------------------------------------------


def test_load_without_resume_stays_paused(tmp_path, sockdir, procs):
    """resume_vm=false (and the older mem_file_path field): nothing runs until PATCH /vm Resumed, then the count
    continues from last + 1."""
    state, mem, before = make_counter_snapshot(procs, sockdir, str(tmp_path), "nores")
    b = api_brisk(procs, sockdir, "nores-load")
    b.api.snapshot_load(state, mem, resume_vm=False, legacy_mem_field=True)
    time.sleep(1.0)
    assert counts(before + b.out) == counts(before), f"guest ran before Resumed:\n{b.out[-2000:]}"
    b.api.resume()
    last = counts(before)[-1][0]
    b.wait_for(rf"^count {last + 5} ", timeout=30)
    check_continues(before, b.out, more=5)


def test_pause_resume_one_process(sockdir, procs):
    """PATCH /vm Paused: no count line for 1 s; Resumed: the count goes on from last + 1 (and again)."""
    b = api_brisk(procs, sockdir, "pr")
    configure_counter(b.api)
    b.api.start()
    b.wait_for(r"^count 5 ")
    for _ in range(2):
        b.api.pause()
        paused = b.settle()
        last = counts(paused)[-1][0]
        time.sleep(1.0)
        assert b.out == paused, f"output while paused:\n{b.out[len(paused):]}"
        b.api.resume()
        b.wait_for(rf"^count {last + 3} ")
        check_count_sequence(b.out, last + 3)


# ---- files brisk restore must refuse ------------------------------------------------------------------------


def leaf7_ebx_bits():
    """Two feature bits of CPUID leaf 7.0 EBX that brisk's table for this host has set (a template may clear
    them), or skips."""
    p = subprocess.run([str(BRISK), "cpuid", "--json"], capture_output=True, text=True, timeout=60)
    if p.returncode:
        pytest.skip(f"brisk cpuid failed: {p.stderr.strip()}")
    ebx = next(int(e["ebx"], 16) for e in json.loads(p.stdout)["cpuid"] if int(e["leaf"], 16) == 7 and
               e["subleaf"] == 0)
    bits = [b for b in range(32) if ebx >> b & 1]
    if len(bits) < 2:
        pytest.skip(f"leaf 7 EBX 0x{ebx:x} has fewer than two bits to clear")
    return bits[-2:]


def clearing_template(bit, indent=None):
    return json.dumps({"cpuid": [{"leaf": "0x7", "subleaf": 0, "register": "ebx", "mask": hex(1 << bit),
                                  "value": "0x0"}]}, indent=indent)


@pytest.mark.security
def test_restore_refuses_a_changed_cpu_template(tmp_path, sockdir, procs):
    """The --cpu-template file a snapshot's VM booted with is read again at restore: when it now asks for other
    CPUID bits (here: clear leaf 7 EBX bit B instead of bit A), the restore is refused (exit 2, the template named)
    whatever KVM_GET_CPUID2 shows (on a kvm_pvm host it shows the same EBX for both). The same requests written
    differently (indented) restore and run on: what is compared is what the template asks for, not its bytes."""
    a, b = leaf7_ebx_bits()
    tmpl = tmp_path / "t.json"
    tmpl.write_text(clearing_template(a))
    sock = os.path.join(sockdir, "tmpl.sock")
    v = Brisk(["run", "--kernel", guest("counter"), "--cpu-template", str(tmpl), "--memory", "32M", "--cmdline",
               "console=ttyS0 stop=20", "--api-sock", sock], sock=sock)
    procs.append(v)
    state, mem = str(tmp_path / "t.state"), str(tmp_path / "t.mem")
    before = snapshot_running(v, state, mem)
    tmpl.write_text(clearing_template(b))
    p = subprocess.run([str(BRISK), "restore", "--snapshot", state, "--mem", mem], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    check_sanitizers(p.stderr)
    assert p.returncode == EXIT_USAGE, f"exit {p.returncode}: a restore with a changed template ran\n{p.stderr}"
    assert "count" not in p.stdout
    assert f"--cpu-template {tmpl}" in p.stderr and "changed since the snapshot" in p.stderr, p.stderr
    tmpl.write_text(clearing_template(a, indent=4))
    r = Brisk(["restore", "--snapshot", state, "--mem", mem])
    procs.append(r)
    rc = r.wait(timeout=60)
    assert rc == EXIT_GUEST_OK, f"exit {rc}\n{r.err[-2000:]}"
    check_continues(before, r.out, more=5)


@pytest.fixture(scope="module")
def good_snapshot(tmp_path_factory):
    """One counter snapshot (32 MiB, stop=20) for the tests that only read or corrupt copies of it."""
    d = tmp_path_factory.mktemp("snap")
    sockdir = short_tmpdir("bsnap")
    started = []
    try:
        state, mem, before = make_counter_snapshot(started, sockdir, str(d), "good", boot_args="stop=20",
                                                   mem_mib=32)
    finally:
        for b in started:
            b.kill()
        shutil.rmtree(sockdir, ignore_errors=True)
    return state, mem, before


def corrupt(kind, state, mem, d):
    """(the --snapshot, the --mem, the file the error must name, what the message must say)."""
    s, m = os.path.join(d, "s.state"), os.path.join(d, "m.mem")
    shutil.copy(state, s)
    shutil.copy(mem, m)
    if kind == "state_truncated":
        os.truncate(s, os.path.getsize(s) - 1)
        return s, m, s, r"trunc|short|length|size|end of file|eof|bytes"
    if kind == "state_flipped":
        with open(s, "r+b") as f:
            f.seek(os.path.getsize(s) // 2)
            b = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([b[0] ^ 0x40]))
        return s, m, s, r"checksum|crc|corrupt"
    if kind == "mem_page_short":
        os.truncate(m, os.path.getsize(m) - PAGE)
        return s, m, m, r"size|short|trunc|bytes|expected|mib"
    if kind == "state_missing":
        os.unlink(s)
        return s, m, s, r"no such file|not found|missing|does not exist|enoent"
    if kind == "mem_missing":
        os.unlink(m)
        return s, m, m, r"no such file|not found|missing|does not exist|enoent"
    if kind == "mem_as_state":
        return m, m, m, r"magic|not a .*snapshot|header|signature|format|version"
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["state_truncated", "state_flipped", "mem_page_short", "state_missing",
                                  "mem_missing", "mem_as_state"])
def test_restore_refuses_bad_files(tmp_path, good_snapshot, kind):
    """A state file one byte short, one with a flipped byte, a memory file a page short, a missing file, the
    memory file given as the state file: `brisk restore` exits 2 with one error line naming the file and the
    problem, and the guest never runs (no count line)."""
    state, mem, _ = good_snapshot
    s, m, named, problem = corrupt(kind, state, mem, str(tmp_path))
    p = subprocess.run([str(BRISK), "restore", "--snapshot", s, "--mem", m], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    check_sanitizers(p.stderr)
    assert p.returncode == EXIT_USAGE, f"exit {p.returncode}\nstdout:\n{p.stdout[-2000:]}\nstderr:\n{p.stderr}"
    assert "count" not in p.stdout, f"the guest ran:\n{p.stdout[-2000:]}"
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one error line:\n{p.stderr}"
    assert named in lines[0] or os.path.basename(named) in lines[0], f"error does not name {named}: {lines[0]}"
    assert re.search(problem, lines[0], re.I), f"error does not say /{problem}/: {lines[0]}"
    print(f"{kind}: {lines[0]}")


def test_restore_good_snapshot_still_runs(good_snapshot):
    """The control for the refusals: the unmodified files restore and run to the guest's PASS."""
    state, mem, before = good_snapshot
    p = subprocess.run([str(BRISK), "restore", "--snapshot", state, "--mem", mem],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    check_sanitizers(p.stderr)
    assert p.returncode == EXIT_GUEST_OK, f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    check_continues(before, p.stdout, more=5)


def test_restore_timeline_phases(good_snapshot):
    """`brisk restore --timeline` prints the restore's phase table after the VM ends (only presence is checked:
    timings are for bench/ and docs/performance.md). Recorded in the test's output for the log."""
    state, mem, before = good_snapshot
    p = subprocess.run([str(BRISK), "restore", "--snapshot", state, "--mem", mem, "--timeline"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    check_sanitizers(p.stderr)
    assert p.returncode == EXIT_GUEST_OK, f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    m = re.search(r"^phase +us", p.stdout, re.M)
    assert m, f"no timeline in the output:\n{p.stdout[-3000:]}"
    table = p.stdout[m.start():]
    print(table)
    phases = [line.rsplit(None, 2)[0] for line in table.splitlines()[1:] if re.search(r"\d+\.\d+\s+\d+\.\d+$", line)]
    assert phases, f"no phase table:\n{p.stdout[-3000:]}"
    missing = [ph for ph in RESTORE_PHASES if ph not in phases]
    assert not missing, f"restore phases missing from the timeline: {missing}\n{table}"


def test_profile_and_compare_restores(good_snapshot, tmp_path):
    """The instrument covers restores: `brisk profile --snapshot --mem` reports the restore's phases (JSON ids
    snapshot_read and state_restored), and `brisk compare` runs a boot against a restore side by side (the phases
    only one side has are listed as such)."""
    state, mem, _ = good_snapshot
    out = tmp_path / "profile.json"
    p = subprocess.run([str(BRISK), "profile", "--no-trace", "--json", str(out), "--snapshot", state, "--mem", mem],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    check_sanitizers(p.stderr)
    assert p.returncode == EXIT_GUEST_OK, f"exit {p.returncode}\n{p.stderr[-2000:]}"
    report = json.loads(out.read_text())
    ids = [ph["id"] for ph in report["phases"]]
    assert "snapshot_read" in ids and "state_restored" in ids and "kernel_loaded" not in ids, ids
    p = subprocess.run([str(BRISK), "compare", "-n", "2", "--warmup", "0", "--a",
                        f"--kernel {guest('counter')} --cmdline 'period_ms=2 stop=3'",
                        "--b", f"--snapshot {state} --mem {mem}"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    check_sanitizers(p.stderr)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    assert re.search(r"^kernel loaded .* only in A$", p.stdout, re.M), p.stdout
    assert re.search(r"^state restored .* only in B$", p.stdout, re.M), p.stdout


# ---- API rules for snapshots ---------------------------------------------------------------------------------


def test_snapshot_create_while_running_is_400(tmp_path, sockdir, procs):
    """PUT /snapshot/create on a running (not paused) VM: 400 with a fault_message, no file written, and the
    guest runs on; and before InstanceStart it is a 400 as well."""
    b = api_brisk(procs, sockdir, "run400")
    configure_counter(b.api)
    state, mem = str(tmp_path / "x.state"), str(tmp_path / "x.mem")
    body = {"snapshot_type": "Full", "snapshot_path": state, "mem_file_path": mem}
    r = b.api.put("/snapshot/create", body)
    assert r.status == 400 and r.fault, r
    b.api.start()
    b.wait_for(r"^count 3 ")
    r = b.api.put("/snapshot/create", body)
    assert r.status == 400 and r.fault, r
    assert not os.path.exists(state) and not os.path.exists(mem)
    last = counts(b.out)[-1][0]
    b.wait_for(rf"^count {last + 3} ")


def test_snapshot_load_after_start_is_400(tmp_path, sockdir, procs, good_snapshot):
    """PUT /snapshot/load once InstanceStart ran: 400 with a fault_message, and the running guest is untouched."""
    state, mem, _ = good_snapshot
    b = api_brisk(procs, sockdir, "load400")
    configure_counter(b.api)
    b.api.start()
    b.wait_for(r"^count 3 ")
    r = b.api.put("/snapshot/load", {"snapshot_path": state, "mem_backend": {"backend_type": "File",
                                                                              "backend_path": mem},
                                     "resume_vm": True})
    assert r.status == 400 and r.fault, r
    last = counts(b.out)[-1][0]
    b.wait_for(rf"^count {last + 3} ")
    check_count_sequence(b.out, last + 3)


def test_snapshot_load_after_config_is_400(sockdir, procs, good_snapshot):
    """Firecracker loads a snapshot only into a fresh process: after a boot-source PUT it is a 400."""
    state, mem, _ = good_snapshot
    b = api_brisk(procs, sockdir, "cfg400")
    b.api.boot_source(guest("counter"), "console=ttyS0")
    r = b.api.put("/snapshot/load", {"snapshot_path": state, "mem_backend": {"backend_type": "File",
                                                                              "backend_path": mem}})
    assert r.status == 400 and r.fault, r


def test_snapshot_load_bad_file_is_400(tmp_path, sockdir, procs, good_snapshot):
    """PUT /snapshot/load of a missing or corrupt state file: 400 naming the file; nothing runs."""
    state, mem, _ = good_snapshot
    bad = tmp_path / "bad.state"
    data = bytearray(open(state, "rb").read())
    data[len(data) // 2] ^= 0x40
    bad.write_bytes(bytes(data))
    for path in (str(tmp_path / "missing.state"), str(bad)):
        b = api_brisk(procs, sockdir, f"bad{len(procs)}")
        r = b.api.put("/snapshot/load", {"snapshot_path": path, "mem_backend": {"backend_type": "File",
                                                                                 "backend_path": mem},
                                         "resume_vm": True})
        assert r.status == 400 and r.fault and os.path.basename(path) in r.fault, r
        time.sleep(0.3)
        assert "count" not in b.out
