"""virtio-blk (src/virtio/blk/blk.c): the conformance guest (guests/virtio-blk.c) against brisk on a fresh raw image per
test, read-write and read-only, GET_ID, several disks, the images brisk must refuse (exit 2 with a message), a
flushed write surviving kill -9, and an image truncated under a running VM (IOERR to the guest, the VM lives).
Run it with BRISK=build/asan/brisk too: every run is checked for sanitizer reports."""
import fcntl
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import BRISK, EXIT_GUEST_OK, EXIT_USAGE, boot, check_sanitizers, debug_exit_status, guest

pytestmark = pytest.mark.usefixtures("kvm")

SECTOR = 512
WINDOW0 = 0xD0001000
GUEST_FAIL = debug_exit_status(0x7F)  # conf_end after a failed check


def make_image(path, pattern, sectors=64):
    """The image the guest expects for pattern=P: every byte of sector N is (P + N) & 0xff."""
    with open(path, "wb") as f:
        for n in range(sectors):
            f.write(bytes([(pattern + n) & 0xFF]) * SECTOR)
    return str(path)


def sector(path, n):
    with open(path, "rb") as f:
        f.seek(n * SECTOR)
        return f.read(SECTOR)


def written(n):
    """What the guest writes into sector n (guests/virtio-blk.c write_byte)."""
    return bytes((0xA5 + n + j) & 0xFF for j in range(SECTOR))


def run_guest(disks, words, timeout=120):
    args = []
    for d in disks:
        args += ["--disk", d]
    return boot("virtio-blk", *args, "--cmdline", words, timeout=timeout)


def assert_pass(p):
    fails = [line for line in p.stdout.splitlines() if "FAIL" in line]
    assert p.returncode == EXIT_GUEST_OK, f"{fails}\n{p.stdout}\n{p.stderr}"
    assert "virtio-blk: PASS" in p.stdout


def offered(p):
    m = re.search(r"features offered 0x([0-9a-f]+)", p.stdout)
    assert m, p.stdout
    return int(m.group(1), 16)


# ---- conformance ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("words", ["", "event_idx=0"])
def test_interrupt_stress(tmp_path, words):
    """400 interrupt-mode reads one after the other (a Linux guest's queue-depth-1 reads): none lost, each read
    right, one interrupt each (a lost notification or interrupt would be a timeout at some request)."""
    img = make_image(tmp_path / "d.img", 0x30, sectors=2048)
    p = run_guest([img], f"pattern=0x30 sectors=2048 stress=400 {words}".strip(), timeout=300)
    assert_pass(p)
    m = re.search(r"CHECK stress: PASS \((\d+) of (\d+) interrupt-mode reads completed \(last sector \d+\), (\d+) "
                  r"interrupts\)", p.stdout)
    assert m and m.group(1) == m.group(2) == "400" and int(m.group(3)) >= 400, p.stdout


@pytest.mark.parametrize("words", ["", "event_idx=0", "indirect=0", "event_idx=0 indirect=0"])
@pytest.mark.security
def test_conformance_rw(tmp_path, words):
    """Poll and interrupt mode, direct and indirect chains; the image afterwards holds exactly what the guest
    wrote (sectors 2-5, 2-4 without indirect) and the pattern everywhere else."""
    img = make_image(tmp_path / "d.img", 0x30)
    p = run_guest([img + ",id=brisk-disk-0"], f"pattern=0x30 sectors=64 id=brisk-disk-0 {words}".strip())
    assert_pass(p)
    assert f"4096@0x{WINDOW0:x}:5" in p.stdout
    last = 4 if "indirect=0" in words else 5  # sector 5 is written through an indirect table
    for n in range(64):
        want = written(n) if 2 <= n <= last else bytes([(0x30 + n) & 0xFF]) * SECTOR
        assert sector(img, n) == want, f"sector {n}"


@pytest.mark.security
def test_conformance_ro(tmp_path):
    """,ro: VIRTIO_BLK_F_RO offered, every write IOERR and nothing written; no discard offered."""
    img = make_image(tmp_path / "d.img", 0x44, sectors=16)
    before = open(img, "rb").read()
    p = run_guest([img + ",ro"], "pattern=0x44 sectors=16 ro=1")
    assert_pass(p)
    assert "write_ro_ioerr: PASS" in p.stdout
    assert open(img, "rb").read() == before
    f = offered(p)
    assert f & (1 << 5) and not f & ((1 << 13) | (1 << 14)), hex(f)


def test_readonly_file_with_ro(tmp_path):
    """A file without write permission is fine when the disk is ro."""
    img = make_image(tmp_path / "d.img", 0x10, sectors=8)
    os.chmod(img, 0o444)
    assert_pass(run_guest([img + ",ro"], "pattern=0x10 sectors=8 ro=1"))


def test_cache_none(tmp_path):
    """cache=none: O_DIRECT (the guest's data buffer is 512-byte aligned: straight to the file)."""
    img = make_image(tmp_path / "d.img", 0x7F)
    try:
        os.close(os.open(img, os.O_RDONLY | os.O_DIRECT))
    except OSError as e:  # tmpfs (the nested harness's /tmp): brisk refuses cache=none there, saying so
        pytest.skip(f"{tmp_path}'s file system has no O_DIRECT: {e.strerror}")
    p = run_guest([img + ",cache=none"], "pattern=0x7f sectors=64")
    assert_pass(p)
    assert sector(img, 3) == written(3)


def test_get_id_derived(tmp_path):
    """Without id=, GET_ID answers the image's device and inode numbers in hex (docs/devices.md)."""
    img = make_image(tmp_path / "d.img", 0x01, sectors=8)
    st = os.stat(img)
    p = run_guest([img], "pattern=0x01 sectors=8")
    assert_pass(p)
    want = f"{st.st_dev:x}-{st.st_ino:x}"[:20]
    assert f'id "{want}"' in p.stdout, p.stdout


def test_discard_offered_where_holes_can_be_punched(tmp_path):
    """DISCARD and WRITE_ZEROES are offered exactly where the image's file system punches holes."""
    img = make_image(tmp_path / "d.img", 0x01, sectors=8)
    p = run_guest([img], "pattern=0x01 sectors=8")
    assert_pass(p)
    probe = tmp_path / "probe"
    probe.write_bytes(b"\1" * 8192)
    can_punch = subprocess.run(["fallocate", "-p", "-o", "0", "-l", "4096", str(probe)]).returncode == 0
    f = offered(p)
    assert bool(f & (1 << 13)) == can_punch and bool(f & (1 << 14)) == can_punch, hex(f)


def test_two_disks_each_in_its_window(tmp_path):
    """Disks take windows in the order given; window=N makes the guest use the Nth (it takes the first block
    device from that word on)."""
    a = make_image(tmp_path / "a.img", 0x11, sectors=16)
    b = make_image(tmp_path / "b.img", 0x22, sectors=32)
    p = run_guest([a + ",id=first", b + ",id=second"], "window=1 pattern=0x22 sectors=32 id=second")
    assert_pass(p)
    assert f"4096@0x{WINDOW0 + 0x1000:x}" in p.stdout
    assert sector(b, 2) == written(2) and sector(a, 2) == bytes([0x13]) * SECTOR
    p = run_guest([a + ",id=first", b + ",id=second"], "window=0 pattern=0x11 sectors=16 id=first")
    assert_pass(p)
    assert sector(a, 2) == written(2)


def test_notify_without_userspace_exits(tmp_path):
    """QueueNotify goes through KVM_IOEVENTFD: no MMIO exit at the notify register for any request."""
    img = make_image(tmp_path / "d.img", 0x30)
    p = boot("virtio-blk", "--disk", img, "--timeline", "--cmdline", "pattern=0x30", timeout=120)
    assert_pass(p)
    notify = WINDOW0 + 0x50
    exits = re.findall(rf"^\d+\s+mmio\s+write\s+0x{notify:x}\s+(\d+)", p.stdout, re.M)
    assert exits == [], exits


# ---- images brisk refuses (docs/security.md case 21): exit 2 and a message naming the disk -----------------------------


def refused(disk, why):
    p = boot("hello", "--disk", disk, timeout=60)
    assert p.returncode == EXIT_USAGE, p.stdout + p.stderr
    assert f"--disk {disk.split(',')[0]}: " in p.stderr and why in p.stderr, p.stderr


@pytest.mark.security
def test_missing_image(tmp_path):
    refused(str(tmp_path / "nope.img"), "no such file")


@pytest.mark.usefixtures("kvm")
def test_size_not_multiple_of_512(tmp_path):
    """As Firecracker (file_size in its block device): the whole sectors are the disk, the rest unreachable,
    a warning says so; the guest sees 64 sectors and its reads at and past the end fail."""
    img = make_image(tmp_path / "odd.img", 0, sectors=64)
    with open(img, "ab") as f:
        f.write(b"\xff" * 100)
    p = run_guest([img], "pattern=0x00 sectors=64")
    assert p.returncode == EXIT_GUEST_OK, p.stdout + p.stderr
    assert_pass(p)
    assert "config_capacity: PASS" in p.stdout, p.stdout
    with open(img, "rb") as f:
        f.seek(64 * SECTOR)
        assert f.read() == b"\xff" * 100, "the unreachable tail was touched"
    assert "32868 bytes, is not a multiple of 512; the last 100 bytes are not reachable" in p.stderr, p.stderr


@pytest.mark.security
def test_readonly_file_rw_requested(tmp_path):
    img = make_image(tmp_path / "d.img", 0, sectors=8)
    os.chmod(img, 0o444)
    refused(img, "the image is read-only")


@pytest.mark.security
def test_not_a_file(tmp_path):
    refused(str(tmp_path), "is a directory")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    refused(str(fifo), "a FIFO")  # never waited on
    assert time.monotonic() - t0 < 30


@pytest.mark.usefixtures("kvm")
def test_empty_image(tmp_path):
    """A 0-byte image is a disk of 0 sectors, as Firecracker (Kata's placeholder drives are empty files): the VM
    boots with it."""
    img = tmp_path / "empty.img"
    img.write_bytes(b"")
    p = boot("hello", "--disk", str(img))
    assert p.returncode == EXIT_GUEST_OK, p.stderr


@pytest.mark.security
@pytest.mark.parametrize("path,fs", [("/proc/self/mem", "procfs"), ("/sys/kernel/mm/transparent_hugepage/enabled",
                                                                     "sysfs")])
def test_kernel_interface_refused(path, fs):
    """A kernel interface that shows up as a regular file (/proc/self/mem: 0 bytes; a sysfs attribute: 4096) is
    never a disk image, read-only or not."""
    if not os.path.exists(path):
        pytest.skip(f"no {path} here")
    refused(path + ",ro", f"the file is on {fs}, a kernel interface, not a disk image")
    refused(path, f"the file is on {fs}")


@pytest.mark.security
@pytest.mark.parametrize("second", ["same", "symlink,ro", "hardlink"])
def test_same_image_twice(tmp_path, second):
    """One image attached twice with a read-write one among them (the same path, a symlink, another hard link) is
    said to be given twice, before either is opened; it is not reported as locked by another process."""
    img = make_image(tmp_path / "d.img", 0, sectors=8)
    other = {"same": img, "symlink,ro": str(tmp_path / "l.img") + ",ro", "hardlink": str(tmp_path / "h.img")}[second]
    if second.startswith("symlink"):
        os.symlink(img, tmp_path / "l.img")
    if second == "hardlink":
        os.link(img, tmp_path / "h.img")
    p = boot("hello", "--disk", img, "--disk", other, timeout=60)
    assert p.returncode == EXIT_USAGE, p.stdout + p.stderr
    want = f"--disk {other.split(',')[0]}: the same image as --disk {img} (disk 0) is given twice"
    assert want in p.stderr and "locked" not in p.stderr, p.stderr


def test_same_image_twice_read_only_is_allowed(tmp_path):
    """Two read-only views of one image cannot corrupt it: allowed (shared locks)."""
    img = make_image(tmp_path / "d.img", 0, sectors=8)
    p = boot("hello", "--disk", img + ",ro", "--disk", img + ",ro", timeout=60)
    assert p.returncode == EXIT_GUEST_OK, p.stderr


@pytest.mark.security
def test_locked_image(tmp_path):
    """Another process's lock (lockf: a POSIX lock, which OFD locks conflict with) keeps brisk out, read-write
    and read-only alike; a read-only user does not keep another read-only user out."""
    img = make_image(tmp_path / "d.img", 0, sectors=8)
    with open(img, "r+b") as f:
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        refused(img, "is locked by another process")
        refused(img + ",ro", "is locked by another process")
    with open(img, "rb") as f:
        fcntl.lockf(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        refused(img, "is locked by another process")
        p = boot("hello", "--disk", img + ",ro", timeout=60)
        assert p.returncode == EXIT_GUEST_OK, p.stderr


# ---- while the VM runs: hold=1 stops the guest after its flushed writes until it reads a byte -------------------


def start_held(disk, words):
    p = subprocess.Popen([str(BRISK), "run", "--kernel", guest("virtio-blk"), "--disk", disk, "--cmdline",
                          f"{words} hold=1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    lines = []
    deadline = time.monotonic() + 60
    for line in p.stdout:
        lines.append(line)
        if line.startswith("virtio-blk: HOLD") or time.monotonic() > deadline:
            break
    assert lines and lines[-1].startswith("virtio-blk: HOLD"), "".join(lines)
    return p, lines


def test_flushed_write_survives_kill9(tmp_path):
    img = make_image(tmp_path / "d.img", 0x30)
    p, lines = start_held(img, "pattern=0x30")
    assert any("poll_flush: PASS" in line for line in lines), "".join(lines)
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=30)
    assert p.returncode == -signal.SIGKILL
    assert sector(img, 2) == written(2) and sector(img, 3) == written(3)


def test_second_vm_on_a_disk_in_use(tmp_path):
    img = make_image(tmp_path / "d.img", 0x30)
    p, _ = start_held(img, "pattern=0x30")
    try:
        refused(img, "is locked by another process")
    finally:
        out, err = p.communicate("x", timeout=60)
    check_sanitizers(err)
    assert p.returncode == EXIT_GUEST_OK, out + err


@pytest.mark.security
def test_image_truncated_while_running(tmp_path):
    """The image shrinks to nothing under the running guest: reads and writes get IOERR (a write does not grow
    the file back), the VM runs on to the guest's own end, brisk says what happened."""
    img = make_image(tmp_path / "d.img", 0x30)
    p, _ = start_held(img, "pattern=0x30")
    os.truncate(img, 0)
    out, err = p.communicate("x", timeout=60)
    check_sanitizers(err)
    assert p.returncode == GUEST_FAIL, out + err
    assert re.search(r"irq_read_sector0: FAIL \(.*status 1,", out), out
    assert re.search(r"irq_write: FAIL \(.*status 1,", out), out
    assert "irq_flush: PASS" in out and "CHECK reset: PASS" in out
    assert "read past the end of the image" in err and "write past the end of the image" in err
    assert os.path.getsize(img) == 0
