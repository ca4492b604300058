"""No data lost (docs/security.md "Output paths and snapshot files"): a snapshot create that fails, runs out of
space or is killed at any moment leaves the previous snapshot loadable, or the new one; the state and memory
files never the same file; a restored VM snapshotted into the memory file it maps (and a clone mapping it too)
runs on; every output path brisk opens (logger, metrics, serial, reports, snapshot files) refuses the VM's own
disk, kernel, initrd or memory file and another VM's disk, and appends where it was told to append; guest RAM
sits 2 MiB-aligned in brisk's address space.

The snapshot tests use guests/counter.c, which numbers its lines and checks its own memory, so a restore that
paired a state with the wrong memory shows as a gap, a repeat, a bad checksum or a FAIL line. The crash test
runs in a small tmpfs mounted in a private mount namespace held by a `sleep` process: every brisk of the test
is started inside it (nsenter), the test reads the files through /proc/HOLDER/root."""
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from apiclient import ApiClient, BriskProcess, wait_for_socket
from conftest import BRISK, EXIT_GUEST_OK, EXIT_USAGE, boot, check_sanitizers, guest, run_brisk
from test_snapshot import Brisk, api_brisk, check_continues, counts, expected_sum, make_counter_snapshot

pytestmark = [pytest.mark.usefixtures("kvm"), pytest.mark.security]

MiB = 1 << 20


def temps(d):
    """Temporary files a replacement leaves (".NAME.XXXXXX")."""
    return sorted(n for n in os.listdir(d) if n.startswith("."))


# ---- snapshot files: failure keeps the old, same file refused, the memory file a VM maps ----------------------


def test_create_refused_keeps_previous_snapshot(tmp_path, sockdir, procs):
    """A create that fails (the memory file's directory is missing; the memory path is a directory) leaves the
    state file written by an earlier create byte for byte, and no temporary file behind; snapshot_path ==
    mem_file_path (also spelled differently, or through a hard link) is refused, 400, with both files as they
    were."""
    d = str(tmp_path)
    state, mem, before = make_counter_snapshot(procs, sockdir, d, "keep")
    good_state, good_mem = open(state, "rb").read(), open(mem, "rb").read()
    b = api_brisk(procs, sockdir, "keep2")
    b.api.snapshot_load(state, mem, resume_vm=False)
    for s, m, why in [(state, os.path.join(d, "nodir", "x.mem"), "no such file"),
                      (state, d, "directory"),
                      (state, state, "name the same file"),
                      (state, os.path.join(d, ".", "keep.state"), "name the same file")]:
        r = b.api.put("/snapshot/create", {"snapshot_path": s, "mem_file_path": m})
        assert r.status == 400 and why in (r.fault or ""), (s, m, r)
    os.link(state, os.path.join(d, "hard.state"))
    r = b.api.put("/snapshot/create", {"snapshot_path": os.path.join(d, "hard.state"), "mem_file_path": state})
    assert r.status == 400 and "name the same file" in r.fault, r
    assert open(state, "rb").read() == good_state and open(mem, "rb").read() == good_mem
    assert temps(d) == []
    # the same paths the other way round still work, and the VM goes on from the snapshot
    b.api.snapshot_create(state, mem)
    b.api.resume()
    b.wait_for(r"^count \d+ ", timeout=30)
    check_continues(before, b.out, more=1)


def test_restored_vm_snapshots_into_its_own_memory_file(tmp_path, sockdir, procs):
    """A VM restored from M, and a second clone restored from M too, both run on while the first snapshots
    into M (the file is replaced by rename, never written under their MAP_PRIVATE mappings); the new
    snapshot loads and continues the first clone's count; the old one was replaced whole."""
    d = str(tmp_path)
    state, mem, before = make_counter_snapshot(procs, sockdir, d, "own")
    a = api_brisk(procs, sockdir, "clone-a")
    a.api.snapshot_load(state, mem, resume_vm=True)
    c = api_brisk(procs, sockdir, "clone-b")
    c.api.snapshot_load(state, mem, resume_vm=True)
    last = counts(before)[-1][0]
    a.wait_for(rf"^count {last + 3} ", timeout=30)
    a.api.pause()
    a_before = a.settle()
    a.api.snapshot_create(state, mem)  # into the files both clones were restored from
    a.api.resume()
    a.wait_for(rf"^count {last + 10} ", timeout=30)
    c.wait_for(rf"^count {last + 10} ", timeout=30)
    for clone in (a, c):
        check_continues(before, clone.out, more=8)
    a.kill()
    n = api_brisk(procs, sockdir, "clone-new")
    n.api.snapshot_load(state, mem, resume_vm=True)
    n.wait_for(r"^count \d+ ", timeout=30)
    check_continues(before + a_before, n.out, more=1)


@pytest.mark.parametrize("cpus", [16])
def test_snapshot_of_many_vcpus_with_filters(tmp_path, sockdir, procs, cpus):
    """16 vCPUs, filters on: the state file outgrows glibc's mmap threshold while it is built, and its realloc
    is an mremap the main thread's filter once denied (brisk died with status 18 and an empty reply). Now the
    create answers 204 and the snapshot continues every vCPU's count."""
    state, mem, before = make_counter_snapshot(procs, sockdir, str(tmp_path), "many", vcpus=cpus,
                                               wait_re=r"^count 3 ")
    rows = counts(before)
    assert rows[-1][2] is not None and len(rows[-1][2]) == cpus, rows[-1]
    b = api_brisk(procs, sockdir, "many-load")
    b.api.snapshot_load(state, mem, resume_vm=True)
    b.wait_for(rf"^count {rows[-1][0] + 3} ", timeout=60)
    check_continues(before, b.out, more=3)
    assert "seccomp" not in b.err, b.err


# ---- the crash test: killed at any moment, or out of space --------------------------------------------------


class Holder:
    """A private mount namespace with a tmpfs of `size` at `path`, held by a sleeping process."""

    def __init__(self, path, size):
        self.path = path
        self.proc = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c",
             f'mount -t tmpfs -o size={size} brisk-test "{path}" && echo ready && exec sleep 3600'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            err = self.proc.stderr.read()
            self.proc.kill()
            pytest.skip(f"no private tmpfs here: {err.strip()}")

    def view(self, name=""):
        """The file at `name` in the tmpfs, as the test sees it (through the holder's root)."""
        return os.path.join(f"/proc/{self.proc.pid}/root", self.path.lstrip("/"), name)

    def argv(self, *args):
        # -r -w: the holder's root and working directory too (entering a mount namespace alone resets both to
        # the namespace's root, which under a chroot, such as the nested harness's, is not the caller's)
        return ["nsenter", "-t", str(self.proc.pid), "-m", "-r", "-w", "--", *args]

    def close(self):
        self.proc.kill()
        self.proc.wait()


class NsBrisk(Brisk):
    """`brisk --api-sock SOCK` started inside the holder's mount namespace."""

    def __init__(self, holder, sock):
        BriskProcess.__init__(self, "nsenter", ["-t", str(holder.proc.pid), "-m", "-r", "-w", "--", str(BRISK),
                                                "--api-sock", sock], sock=sock)


def fill(holder, leave):
    """Fills the tmpfs up to `leave` bytes of free space (a filler file); returns its path."""
    st = os.statvfs(holder.view())
    free = st.f_bavail * st.f_frsize
    path = holder.view("filler")
    with open(path, "wb") as f:
        if free > leave:
            try:
                f.write(b"\xff" * (free - leave))
            except OSError:
                pass
    return path


def usage(holder, *names):
    """Bytes the named files take in the tmpfs."""
    return sum(os.stat(holder.view(n)).st_blocks * 512 for n in names)


def load_either(b, state, mem, histories, i):
    """Loads the snapshot at the paths into `b` and returns the history (one of `histories`: the old snapshot's
    output, or the new one's) that the restored guest's output continues: its first complete count line,
    joined to that history (a line the pause cut in half is completed by the restored guest), is the
    history's last + 1. Fails if it continues none of them."""
    r = b.api.put("/snapshot/load", {"snapshot_path": state,
                                     "mem_backend": {"backend_type": "File", "backend_path": mem},
                                     "resume_vm": True})
    assert r.status == 204, f"iteration {i}: the paths hold no loadable snapshot: {r}\n{b.err}"
    b.wait_for(r"^count \d+ .*\n(?:.*\n)*?count \d+ ", timeout=30)  # two lines: the first may be a completion
    out = b.out
    # "count 78 sum 29" (old cut line) + "04\n" (rest of line 80, restored from the new) reads right: every row
    # after the join must follow on with its own sum; only the right history makes row 2 (a whole line) fit.
    fits = []
    for h in histories:
        last = counts(h)[-1][0]
        after = counts(h + out)[len(counts(h)):]
        if len(after) >= 2 and all(n == last + 1 + k and s == expected_sum(n) for k, (n, s, _) in enumerate(after)):
            fits.append(h)
    if len(fits) == 1:
        return fits[0]
    lasts = [counts(h)[-1][0] for h in histories]
    raise AssertionError(f"iteration {i}: restored output continuing {len(fits)} of the snapshots, not one "
                         f"(last counts {lasts})\n{out[-2000:]}")


def killed_create(b, state, mem, delay):
    """Sends the create and kills brisk `delay` s later, whatever state the request is in."""
    def send():
        try:
            ApiClient(b.sock, timeout=10).put("/snapshot/create", {"snapshot_path": state, "mem_file_path": mem})
        except OSError:
            pass  # the reply never comes: brisk was killed

    t = threading.Thread(target=send)
    t.start()
    time.sleep(delay)
    b.proc.send_signal(signal.SIGKILL)
    t.join(timeout=15)
    b.kill()


def test_crash_consistency(tmp_path, sockdir, procs):
    """100 snapshot creates into the same two paths of a 24 MiB tmpfs, each either killed with SIGKILL at a
    random moment (0 .. 1.5x the longest create seen) or run with the file system filled to a random number of
    free bytes (0 .. 3x what a snapshot takes: ENOSPC somewhere in the memory file, the state file, the
    fsyncs, or not at all). After each, a fresh brisk loads the paths: it always succeeds, and the restored
    guest's count continues exactly either the previous snapshot's or the new one's (no gap, no repeat, every
    checksum right). A failed create leaves no temporary file of its own."""
    if os.geteuid() != 0:
        pytest.skip("needs root (a tmpfs in a private mount namespace)")
    d = str(tmp_path / "fs")
    os.mkdir(d)
    holder = Holder(d, "24m")
    rng = random.Random(int(os.environ.get("BRISK_CRASH_SEED", "19")))
    state, mem = os.path.join(d, "vm.state"), os.path.join(d, "vm.mem")
    seen = {"killed": 0, "enospc": 0, "created": 0, "completed at load": 0}
    try:
        b = NsBrisk(holder, os.path.join(sockdir, "c0.sock"))
        procs.append(b)
        b.api.boot_source(guest("counter"), "console=ttyS0 period_ms=20")
        b.api.machine_config(vcpu_count=1, mem_size_mib=16)
        b.api.start()
        b.wait_for(r"^count 3 ", timeout=30)
        b.api.pause()
        histories = [b.settle()]  # the snapshots the paths may hold, by the guest output they continue
        t0 = time.monotonic()
        b.api.snapshot_create(state, mem)
        longest = time.monotonic() - t0
        need = usage(holder, "vm.state", "vm.mem")
        b.kill()
        for i in range(100):
            b = NsBrisk(holder, os.path.join(sockdir, f"c{i + 1}.sock"))
            procs.append(b)
            history = load_either(b, state, mem, histories, i)
            seen["completed at load"] += "completing it" in b.err
            last = counts(history)[-1][0]
            b.wait_for(rf"^count {last + 2} ", timeout=30)
            b.api.pause()
            out = b.settle(quiet=0.1)
            check_continues(history, out, more=2)
            new = history + out
            if rng.random() < 0.5:
                before = temps(holder.view())
                filler = fill(holder, rng.randrange(0, 3 * need))
                t0 = time.monotonic()
                try:
                    r = b.api.put("/snapshot/create", {"snapshot_path": state, "mem_file_path": mem})
                except OSError:
                    b.kill()
                    raise AssertionError(f"iteration {i}: brisk died in a create on a full file system "
                                         f"(exit {b.proc.returncode}):\n{b.err[-3000:]}")
                longest = max(longest, time.monotonic() - t0)
                os.unlink(filler)
                b.kill()
                if r.status == 204:
                    seen["created"] += 1
                    histories = [new]
                else:
                    assert r.status == 400 and "No space left on device" in r.fault, r
                    seen["enospc"] += 1
                    histories = [history]
                assert temps(holder.view()) == before, (before, temps(holder.view()))
            else:
                killed_create(b, state, mem, rng.uniform(0, 1.5 * longest))
                seen["killed"] += 1
                histories = [history, new]
        print(f"crash test: {seen}, a snapshot takes {need} bytes, longest create {longest * 1000:.1f} ms, "
              f"{len(temps(holder.view()))} temporary files left by killed creates")
        assert seen["killed"] >= 30 and seen["enospc"] >= 5 and seen["created"] >= 5, seen
    finally:
        holder.close()


# ---- output paths ------------------------------------------------------------------------------------------


def test_logger_and_metrics_refuse_the_vms_disk_and_append(tmp_path, sockdir, procs):
    """PUT /logger and PUT /metrics naming the running VM's own disk image: 400 naming it, the disk byte for byte
    as it was (it was truncated under the guest). An existing log file is appended to, never truncated. A refused
    PUT /logger changes nothing: a later one with only a level still works."""
    disk = tmp_path / "disk.img"
    disk.write_bytes(b"D" * MiB)
    log = tmp_path / "fc.log"
    log.write_text("earlier line\n")
    b = api_brisk(procs, sockdir, "sinks")
    b.api.boot_source(guest("counter"), "console=ttyS0")
    b.api.machine_config(vcpu_count=1, mem_size_mib=32)
    b.api.drive("rootfs", disk, root=True)
    for path, body in (("/logger", {"log_path": str(disk), "level": "Info"}),
                       ("/metrics", {"metrics_path": str(disk)})):
        r = b.api.put(path, body)
        assert r.status == 400 and "a disk image" in r.fault, (path, r)
    b.api.start()
    b.wait_for(r"^count 2 ", timeout=30)
    r = b.api.put("/logger", {"log_path": str(disk), "level": "Info"})
    assert r.status == 400 and "a disk image" in r.fault, r
    assert disk.read_bytes() == b"D" * MiB
    b.api.ok("PUT", "/logger", {"log_path": str(log), "level": "Debug"})
    b.proc.send_signal(signal.SIGTERM)  # logged: "stopping on Terminated"
    b.wait()
    text = log.read_text()
    assert text.startswith("earlier line\n") and "stopping on" in text, text


def locked_disk_vm(procs, sockdir, disk, name):
    """A running VM (`brisk run --api-sock`) whose disk is `disk`: it holds the disk's lock."""
    sock = os.path.join(sockdir, f"{name}.sock")
    b = Brisk(["run", "--kernel", guest("counter"), "--disk", str(disk), "--api-sock", sock], sock=sock)
    procs.append(b)
    b.wait_for(r"^count 1 ", timeout=30)
    return b


@pytest.mark.parametrize("opt", ["--serial", "--report-json"])
def test_outputs_refuse_another_vms_disk(tmp_path, sockdir, procs, opt):
    """`brisk run --serial file:X` or `--report-json X` where X is another running VM's disk (locked): exit 2
    naming it, X untouched and that VM running on; `--serial file:X --disk X` in one VM: exit 2."""
    disk = tmp_path / "other.img"
    disk.write_bytes(b"O" * MiB)
    other = locked_disk_vm(procs, sockdir, disk, "other")
    arg = f"file:{disk}" if opt == "--serial" else str(disk)
    p = boot("hello", opt, arg, timeout=60)
    assert p.returncode == EXIT_USAGE and "in use by another VM" in p.stderr, (p.returncode, p.stderr)
    assert disk.read_bytes() == b"O" * MiB
    mine = tmp_path / "mine.img"
    mine.write_bytes(b"M" * MiB)
    p = boot("hello", "--disk", str(mine), opt, f"file:{mine}" if opt == "--serial" else str(mine), timeout=60)
    assert p.returncode == EXIT_USAGE and "disk image" in p.stderr, (p.returncode, p.stderr)
    assert mine.read_bytes() == b"M" * MiB
    n = len(counts(other.out))
    other.wait_for(rf"^count {n + 2} ", timeout=30)


@pytest.mark.parametrize("opt", ["--serial", "--report-json"])
def test_restore_outputs_refuse_the_memory_file(tmp_path, sockdir, procs, opt):
    """`brisk restore --snapshot S --mem M --serial file:M` (or --report-json M, or the state file S): exit 2,
    both files as they were (M was truncated after it was mapped: the guest triple-faulted and the snapshot's
    memory was gone). The same restore with a good serial file then runs."""
    state, mem, before = make_counter_snapshot(procs, sockdir, str(tmp_path), "rsv", boot_args="stop=12")
    good = (open(state, "rb").read(), open(mem, "rb").read())
    for target in (mem, state):
        arg = f"file:{target}" if opt == "--serial" else target
        p = run_brisk("restore", "--snapshot", state, "--mem", mem, opt, arg, timeout=60)
        assert p.returncode == EXIT_USAGE and "restored from" in p.stderr, (p.returncode, p.stderr)
        assert (open(state, "rb").read(), open(mem, "rb").read()) == good
    p = run_brisk("restore", "--snapshot", state, "--mem", mem, timeout=60)
    assert p.returncode == EXIT_GUEST_OK and "counter: PASS" in p.stdout, (p.returncode, p.stderr)


def test_snapshot_refuses_the_vms_disk(tmp_path, sockdir, procs):
    """snapshot_path or mem_file_path naming the VM's disk image: 400, the disk as it was."""
    disk = tmp_path / "d.img"
    disk.write_bytes(b"X" * MiB)
    b = api_brisk(procs, sockdir, "snapdisk")
    b.api.boot_source(guest("counter"), "console=ttyS0")
    b.api.machine_config(vcpu_count=1, mem_size_mib=32)
    b.api.drive("rootfs", disk, root=True)
    b.api.start()
    b.wait_for(r"^count 2 ", timeout=30)
    b.api.pause()
    for s, m in ((str(disk), str(tmp_path / "m")), (str(tmp_path / "s"), str(disk))):
        r = b.api.put("/snapshot/create", {"snapshot_path": s, "mem_file_path": m})
        assert r.status == 400 and "disk image" in r.fault, r
    assert disk.read_bytes() == b"X" * MiB
    assert temps(str(tmp_path)) == []


# ---- what a restore keeps -----------------------------------------------------------------------------------


def test_restored_vm_config_keeps_ids(tmp_path, sockdir, procs):
    """After PUT /snapshot/load, GET /vm/config names the drives by the ids the client gave them, the root device
    as root, with its cache type, and the boot source the VM was booted from (it said drive0, drive1,
    is_root_device false and boot-source null)."""
    root, data = tmp_path / "root.img", tmp_path / "data.img"
    for f in (root, data):
        f.write_bytes(b"\0" * MiB)
    b = api_brisk(procs, sockdir, "ids")
    b.api.boot_source(guest("counter"), "console=ttyS0 period_ms=20")
    b.api.machine_config(vcpu_count=1, mem_size_mib=32)
    b.api.drive("rootfs", root, root=True)
    b.api.ok("PUT", "/drives/scratch_1", {"drive_id": "scratch_1", "path_on_host": str(data),
                                          "is_root_device": False, "is_read_only": True, "cache_type": "Writeback"})
    b.api.start()
    want = b.api.get("/vm/config").json
    b.wait_for(r"^count 2 ", timeout=30)
    b.api.pause()
    state, mem = tmp_path / "ids.state", tmp_path / "ids.mem"
    b.api.snapshot_create(state, mem)
    b.kill()
    n = api_brisk(procs, sockdir, "ids-load")
    n.api.snapshot_load(state, mem, resume_vm=True)
    got = n.api.get("/vm/config").json
    assert got["drives"] == want["drives"], (got["drives"], want["drives"])
    assert got["boot-source"] == want["boot-source"] and got["boot-source"]["kernel_image_path"] == guest("counter")
    assert got["machine-config"] == want["machine-config"]
    assert [d["drive_id"] for d in got["drives"]] == ["rootfs", "scratch_1"]
    assert got["drives"][0]["is_root_device"] is True


# ---- guest RAM alignment ------------------------------------------------------------------------------------


def ram_mappings(pid, size):
    """(start, end, path) of guest RAM's mapping of `size` bytes in process pid: one mapping, or two adjacent
    ones of the same file (or both anonymous) of 2 MiB and size - 2 MiB, as madvise(MADV_HUGEPAGE) on all of
    RAM but its first 2 MiB splits it (src/vmm/mem.c)."""
    maps = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            maps.append((lo, hi, parts[5] if len(parts) > 5 else ""))
    out = [m for m in maps if m[1] - m[0] == size]
    for (lo, hi, path), (lo2, hi2, path2) in zip(maps, maps[1:]):
        if hi - lo == 2 * MiB and lo2 == hi and path2 == path and hi2 - lo2 == size - 2 * MiB:
            out.append((lo, hi2, path))
    return out


def test_guest_ram_is_2mib_aligned(tmp_path, sockdir, procs):
    """Guest RAM starts on a 2 MiB boundary in brisk's address space, booted (anonymous memory, with and
    without --hugepages) and restored (the memory file's mapping), so KVM can map it with 2 MiB pages (Debian's
    6.1 gave offsets of 1,932 KiB and 1,116 KiB, and a Linux boot took 26,407 nested page faults against
    QEMU's 425)."""
    for extra in ([], ["--hugepages"]):
        sock = os.path.join(sockdir, f"al{len(extra)}.sock")
        b = Brisk(["run", "--kernel", guest("counter"), "--memory", "129M", *extra, "--api-sock", sock], sock=sock)
        procs.append(b)
        b.wait_for(r"^count 1 ", timeout=30)
        maps = ram_mappings(b.proc.pid, 129 * MiB)
        assert maps and all(lo % (2 * MiB) == 0 for lo, _, _ in maps), [hex(m[0]) for m in maps]
        b.kill()
    state, mem, _ = make_counter_snapshot(procs, sockdir, str(tmp_path), "al", mem_mib=67)
    b = api_brisk(procs, sockdir, "al-load")
    b.api.snapshot_load(state, mem, resume_vm=True)
    maps = [m for m in ram_mappings(b.proc.pid, 67 * MiB) if m[2] == mem]
    assert maps and maps[0][0] % (2 * MiB) == 0, [hex(m[0]) for m in maps]


# ---- the filters under the largest configurations brisk accepts ---------------------------------------------


LARGEST = {
    # 254 vCPUs (CONFIG_MAX_CPUS), RAM across the 32-bit hole, every virtio window: 16 disks, vsock, entropy
    "disks": lambda d, s: ["--cpus", "254", "--memory", "4G", "--rng", "--vsock", f"cid=3,uds={s}/v.sock",
                           *[a for i in range(16) for a in ("--disk", blank(d, f"d{i}.img"))]],
    # 8 user-mode interfaces (8 brisk-slirp helpers), 8 disks, entropy, vsock
    "nets": lambda d, s: ["--cpus", "64", "--memory", "1G", "--rng", "--vsock", f"cid=3,uds={s}/v.sock",
                          *[a for i in range(8) for a in ("--net", "user", "--disk", blank(d, f"d{i}.img"))]],
}


def blank(d, name):
    path = os.path.join(d, name)
    with open(path, "wb") as f:
        f.truncate(MiB)
    return path


@pytest.mark.parametrize("shape", sorted(LARGEST))
def test_largest_configuration_with_filters(tmp_path, sockdir, procs, shape):
    """Every thread's allow-list holds with the largest configurations brisk accepts, not only the default one:
    booted with the filters on, paused, snapshotted, restored in a fresh process (filters on), resumed: the
    count continues and no thread called a denied syscall (brisk would end with status 18, naming it)."""
    sock = os.path.join(sockdir, f"{shape}.sock")
    b = Brisk(["run", "--kernel", guest("counter"), "--cmdline", "console=ttyS0 smp=0 period_ms=20",
               *LARGEST[shape](str(tmp_path), sockdir), "--api-sock", sock], sock=sock)
    procs.append(b)
    b.wait_for(r"^count 3 ", timeout=120)
    b.api.pause()
    before = b.settle()
    state, mem = tmp_path / "big.state", tmp_path / "big.mem"
    b.api.snapshot_create(state, mem)
    b.api.resume()
    b.wait_for(rf"^count {counts(before)[-1][0] + 2} ", timeout=60)
    b.kill()
    assert "seccomp" not in b.err, b.err
    os.unlink(os.path.join(sockdir, "v.sock")) if os.path.exists(os.path.join(sockdir, "v.sock")) else None
    r = api_brisk(procs, sockdir, f"{shape}-load")
    r.api.snapshot_load(state, mem, resume_vm=True)
    r.wait_for(rf"^count {counts(before)[-1][0] + 3} ", timeout=120)
    check_continues(before, r.out, more=3)
    r.api.pause()
    r.api.snapshot_create(tmp_path / "again.state", tmp_path / "again.mem")
    r.api.resume()
    r.proc.send_signal(signal.SIGTERM)
    assert r.wait(timeout=60) == 16, r.err
    assert "seccomp" not in r.err, r.err
