"""Debian's kernel booted as Kata Containers boots its guests under Firecracker: `acpi=off` in the boot args.

Kata's fc driver (src/runtime/virtcontainers/fc.go, fcKernelParams) leaves the VMM's ACPI alone and puts
`pci=off reboot=k panic=1 iommu=off net.ifnames=0 random.trust_cpu=on acpi=off` (plus `console=ttyS0` when
debugging) in boot_args. Such a kernel ignores the DSDT, so it finds the virtio-mmio devices only through the
`virtio_mmio.device=4K@0xADDR:IRQ` words brisk adds for a command line with acpi=off (docs/boot.md), which
needs CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES. Debian's kernel lacks it (Firecracker's and Kata's guest kernels
have it), so this boot's initramfs is build/linux/initramfs-kata.cpio.gz: the virtio one with
virtio_mmio.ko replaced by Debian's own source rebuilt with that option (tests/linux/build-virtio-mmio.sh;
mkinitramfs.sh --override). The init passes each module the command line's MODNAME.PARAM= words, as
modprobe does (tests/linux/init_modparams.c), so the rebuilt module registers the devices.

One boot, started as Kata starts Firecracker with its jailer (fc.go fcInit; start_vm): build/brisk-jailer
--id --exec-file .../firecracker --uid 0 --gid 0 --chroot-base-dir --daemonize -- --config-file
/fcConfig.json, into a chroot made first with the kernel, the initramfs, an ext4 rootfs from
tests/linux/mkrootfs.sh, Kata's 8 empty placeholder drives, its log and metrics FIFOs (opened for reading
first) and /run; the configuration file as Kata writes it (kata_config: its drives, vsock /kata.hvsock CID 3,
logger, metrics), brisk's default ACPI (on), and boot_args = Kata's words + console=ttyS0 + the init's words
  brisk.virtio=1 brisk.root=/dev/vda brisk.id=<random> brisk.poweroff=auto
  brisk.vsock=PORT_OUT:BYTES (guest -> a host listener at UDS_PORT_OUT)
  brisk.vsocklisten=PORT_IN:1 (host CONNECT PORT_IN -> the guest, as Kata's agent is reached)
The tests read the guest's console: the kernel ran without ACPI, the devices were registered from the command
line and bound, both vsock exchanges passed, the root disk was mounted and its init ran (the disk stage).
Skips with the one-line reason when the module or the initramfs could not be built (BRISK_LINUX_KATA_SKIP,
set by tests/linux/run.sh) or is missing.
"""
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import time

import pytest

from fifolines import FifoReader

from . import netpeer
from .conftest import BRISK, LINUX, MEMORY, ROOT, TIMEOUT, kernel

pytestmark = pytest.mark.usefixtures("linux_kvm")

INITRD = LINUX / "initramfs-kata.cpio.gz"
JAILER = BRISK.parent / "brisk-jailer"
MKROOTFS = ROOT / "tests" / "linux" / "mkrootfs.sh"
# Kata Containers' fcKernelParams (src/runtime/virtcontainers/fc.go), in its order, and its debug console
KATA_WORDS = ["pci=off", "reboot=k", "panic=1", "iommu=off", "net.ifnames=0", "random.trust_cpu=on", "acpi=off",
              "console=ttyS0"]
CID, PORT_OUT, PORT_IN, BYTES = 3, 5002, 1024, 1 << 20
VIRTIO_BLK, VIRTIO_VSOCK = 2, 19  # virtio 1.2 section 5
DEVICES = 10  # the rootfs drive, Kata's 8 placeholders, the vsock


class JailedBoot:
    """What conftest.Boot holds, for a VMM the jailer daemonized: the console from --serial file:, no exit
    status (the VMM is not this process's child: its end is seen by its pid going away)."""

    def __init__(self, console, wall, jailer):
        self.status, self.stdout, self.stderr, self.wall = None, console, jailer.stderr, wall
        self.markers, self.uptime = [], None

    def describe(self):
        tail = "\n".join(self.stdout.splitlines()[-60:])
        return f"--- console (tail) ---\n{tail}\n--- jailer stderr ---\n{self.stderr[-3000:]}"


def place(src, dst):
    """Into the jail as Kata does (it bind-mounts; a hard link, or a copy across file systems, here)."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def kata_config(words, initrd):
    """fc.go fcInitConfiguration's file (types/fcConfig.go), with the jail's paths: the kernel at /vmlinux, the
    rootfs drive and Kata's 8 empty placeholder drives drive_0..drive_7 (createDiskPool), the log and metrics
    FIFOs, the hybrid vsock /kata.hvsock with CID 3 and vsock_id "root". Two differences: an initrd (Kata's
    initrd mode) and a read-write rootfs (Kata's is read-only; this init writes to it)."""
    drives = [{"drive_id": "rootfs", "is_read_only": False, "is_root_device": False, "path_on_host": "/rootfs"}]
    drives += [{"drive_id": f"drive_{i}", "is_read_only": False, "is_root_device": False,
                "path_on_host": f"/drive_{i}"} for i in range(8)]
    return {"boot-source": {"boot_args": " ".join(words), "initrd_path": f"/{initrd}",
                            "kernel_image_path": "/vmlinux"},
            "machine-config": {"mem_size_mib": int(MEMORY.rstrip("M")), "smt": False, "vcpu_count": 1},
            "vsock": {"guest_cid": CID, "uds_path": "/kata.hvsock", "vsock_id": "root"},
            "logger": {"level": "Debug", "log_path": "/logs.fifo"},
            "metrics": {"metrics_path": "/metrics.fifo"},
            "drives": drives}


def start_vm(kernel_path, initrd, image, root, vid, words, base):
    """Kata's start with a jailer (fc.go fcInit): `jailer --id ID --exec-file .../firecracker --uid 0 --gid 0
    --chroot-base-dir BASE --daemonize -- --config-file /fcConfig.json` into a chroot Kata made first, with
    the files placed in it; plus brisk's `--serial file:/console.log`, so that the test reads the console
    (--daemonize sends the VMM's stdout to /dev/null; Kata reads its guest through the agent's vsock).
    Waits for the VMM (the pid file's) to end; returns a JailedBoot."""
    exe = base.parent / "firecracker"  # Firecracker's jailer requires the name (env.rs)
    shutil.copyfile(BRISK, exe)
    os.chmod(exe, 0o755)
    place(kernel_path, root / "vmlinux")
    place(initrd, root / initrd.name)
    place(image, root / "rootfs")
    for i in range(8):
        (root / f"drive_{i}").write_bytes(b"")
    (root / "fcConfig.json").write_text(json.dumps(kata_config(words, initrd.name), indent="\t"))
    readers = [fifo_drain(root / name) for name in ("logs.fifo", "metrics.fifo")]
    t0 = time.monotonic()
    argv = [str(JAILER), "--id", vid, "--exec-file", str(exe), "--uid", "0", "--gid", "0", "--chroot-base-dir",
            str(base), "--daemonize", "--", "--config-file", "/fcConfig.json", "--serial", "file:/console.log"]
    jailer = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert jailer.returncode == 0, f"brisk-jailer: {jailer.returncode}\n{jailer.stderr}"
    pid = int((root / "firecracker.pid").read_text())
    deadline = time.monotonic() + TIMEOUT
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = os.path.exists(f"/proc/{pid}")
    if alive:
        os.kill(pid, 9)
    for r in readers:
        r.join(10)
    console = (root / "console.log").read_text(errors="replace") if (root / "console.log").exists() else ""
    b = JailedBoot(console, time.monotonic() - t0, jailer)
    b.log, b.metrics = readers[0].lines, readers[1].lines
    assert not alive, f"the VMM (pid {pid}) did not end within {TIMEOUT:.0f} s\n{b.describe()}"
    return b


def fifo_drain(path):
    """A FIFO made and opened O_RDONLY|O_NONBLOCK before the VMM starts, as Kata's fcListenToFifo; read."""
    os.mkfifo(path)
    r = FifoReader(path, deadline_s=TIMEOUT + 60, open_first=True)
    r.start()
    return r


class KataBoot:
    def __init__(self, boot, peers, token, image):
        self.boot, self.peers, self.token, self.image = boot, peers, token, image
        self.out = boot.stdout

    def describe(self):
        return (self.boot.describe() + "\n--- host side ---\n"
                + "\n".join(f"{k}: {v}" for k, v in self.peers.items()))


@pytest.fixture(scope="module")
def kata_boot(tmp_path_factory):
    if os.environ.get("BRISK_LINUX_KATA_SKIP"):
        pytest.skip(os.environ["BRISK_LINUX_KATA_SKIP"])
    if not INITRD.exists():
        pytest.skip(f"{INITRD} missing: tests/linux/run.sh builds it (build-virtio-mmio.sh, mkinitramfs.sh "
                    "--override)")
    tmp = tmp_path_factory.mktemp("kata")
    image = tmp / "root.img"
    p = subprocess.run([str(MKROOTFS), "--init", str(LINUX / "init"), str(image)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, f"tests/linux/mkrootfs.sh failed:\n{p.stderr}"
    base = tmp / "jailer"
    vid = "kata-" + secrets.token_hex(4)
    root = base / "firecracker" / vid / "root"
    (root / "run").mkdir(parents=True)  # fc.go fcInitConfiguration: the API socket's /run
    uds = root / "kata.hvsock"
    peers = {"vsock out": netpeer.Result(), "vsock in": netpeer.Result()}
    deadline_s = 600
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f"{uds}_{PORT_OUT}")
    listener.listen(1)
    threads = [netpeer.thread(netpeer.serve_once, listener, peers["vsock out"], deadline_s),
               netpeer.thread(netpeer.connect_retrying, lambda: netpeer.vsock_hybrid_connect(uds, PORT_IN), BYTES,
                              peers["vsock in"], time.monotonic() + deadline_s)]
    token = secrets.token_hex(8)
    words = KATA_WORDS + ["brisk.virtio=1", "brisk.root=/dev/vda", f"brisk.id={token}", "brisk.poweroff=auto",
                          f"brisk.vsock={PORT_OUT}:{BYTES}", f"brisk.vsocklisten={PORT_IN}:1"]
    b = start_vm(kernel("vmlinuz"), INITRD, image, root, vid, words, base)
    for t in threads:
        t.join(timeout=30)
    return KataBoot(b, peers, token, image)


def test_boot_ends_cleanly(kata_boot):
    """The VMM ended through reboot=k (no ACPI, so no S5: the init reboots); every module loaded; the logger
    wrote to Kata's FIFO."""
    kb = kata_boot
    assert kb.boot.log, f"nothing on the log FIFO\n{kb.describe()}"
    assert re.search(r"^brisk-init: modules: \d+ loaded, \d+ already present, 0 failed", kb.out, re.M), \
        kb.describe()
    assert "brisk-init: power-off through ACPI S5 not supported: rebooting" in kb.out, kb.describe()
    assert "reboot: Restarting system" in kb.out, kb.describe()


def test_kernel_without_acpi(kata_boot):
    """The kernel saw acpi=off and used no ACPI table, although brisk wrote them (ACPI on, its default)."""
    kb = kata_boot
    m = re.search(r"^brisk-init: cmdline (.*)$", kb.out, re.M)
    assert m, kb.describe()
    assert "acpi=off" in m.group(1).split(), m.group(0)
    assert "ACPI: RSDP" not in kb.out and "ACPI: DSDT" not in kb.out, kb.describe()
    assert "ACPI: Interpreter disabled." in kb.out, kb.describe()


def test_devices_from_the_command_line(kata_boot):
    """brisk added one virtio_mmio.device= word per device; the rebuilt module got them and registered each;
    the kernel bound the disk and the vsock on those platform devices (virtio-mmio.N, not LNRO0005)."""
    kb = kata_boot
    cmdline = re.search(r"^brisk-init: cmdline (.*)$", kb.out, re.M).group(1).split()
    dev_words = [w for w in cmdline if w.startswith("virtio_mmio.device=")]
    assert len(dev_words) == DEVICES, f"brisk's device words for acpi=off: {dev_words}\n{kb.describe()}"
    for w in dev_words:
        assert re.fullmatch(r"virtio_mmio\.device=4K@0x[0-9a-f]+:\d+", w), w
    params = " ".join(w.split(".", 1)[1] for w in dev_words)
    assert f"brisk-init: module virtio_mmio: parameters from the command line: {params}" in kb.out, kb.describe()
    regs = re.findall(r"virtio-mmio: Registering device virtio-mmio\.(\d+) at (0x[0-9a-f]+)-0x[0-9a-f]+, IRQ (\d+)",
                      kb.out)
    assert [(int(a, 16), int(i)) for _, a, i in regs] == \
        [(int(w.split("@")[1].split(":")[0], 16), int(w.split(":")[1])) for w in dev_words], kb.describe()
    m = re.search(r"^brisk-init: virtio: (\d+) devices? bound(?:: (.*))?$", kb.out, re.M)
    assert m and int(m.group(1)) == DEVICES, kb.describe()
    bound = [(int(t), at) for _, t, at in re.findall(r"(virtio\d+) type (\d+) at (\S+?)(?:,|$)", m.group(2))]
    assert sorted(t for t, _ in bound) == [VIRTIO_BLK] * 9 + [VIRTIO_VSOCK], m.group(0)  # rootfs, drive_0..7
    assert all(at.startswith("virtio-mmio.") for _, at in bound), m.group(0)


def test_vsock_both_directions(kata_boot):
    """Guest -> host (CID 2, UDS_PORT) and host -> guest (CONNECT PORT, as Kata reaches its agent)."""
    kb = kata_boot
    for kind, where, peer in (("vsock connect", f"2:{PORT_OUT}", "vsock out"),
                              ("vsock accept", f"port {PORT_IN}", "vsock in")):
        m = re.search(rf"^brisk-net: {kind} {re.escape(where)}: (.*)$", kb.out, re.M)
        assert m and m.group(1).startswith(f"sent {BYTES} received {BYTES} ok"), f"{kind}:\n{kb.describe()}"
        r = kb.peers[peer]
        assert r.ok and r.bytes == BYTES, f"host side of {peer}: {r}\n{kb.describe()}"


def test_root_disk_and_its_init(kata_boot):
    """/dev/vda (found through the command line) mounted as ext4, switch_root, its init ran and wrote."""
    kb = kata_boot
    assert re.search(r"^brisk-init: root: /dev/vda appeared after \d+ ms, mounted \(ext4\), /sbin/init found",
                     kb.out, re.M), kb.describe()
    assert "brisk-init: disk stage: pid 1, / is /dev/vda (ext4)" in kb.out, kb.describe()
    assert (f"brisk-init: wrote /brisk-wrote id={kb.token} (fsync, sync; read back the same; "
            "/ remounted read-only: yes)") in kb.out, kb.describe()
    env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/sbin:/usr/sbin")
    cat = subprocess.run(["debugfs", "-R", "cat /brisk-wrote", str(kb.image)], capture_output=True, text=True,
                         timeout=120, env=env)
    assert cat.stdout == f"brisk-wrote id={kb.token}\n", f"debugfs: {cat.stdout!r}\n{cat.stderr}"
