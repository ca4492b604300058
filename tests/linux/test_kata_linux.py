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

One boot (start_vm: the one place that starts brisk, to be replaced by Kata's exact start, brisk-jailer
... --daemonize -- --config-file): vmlinuz, that initramfs, brisk's default ACPI (on), an ext4 root disk
from tests/linux/mkrootfs.sh, a vsock, and --cmdline = Kata's words + console=ttyS0 + the init's words
  brisk.virtio=1 brisk.root=/dev/vda brisk.id=<random> brisk.poweroff=auto
  brisk.vsock=PORT_OUT:BYTES (guest -> a host listener at UDS_PORT_OUT)
  brisk.vsocklisten=PORT_IN:1 (host CONNECT PORT_IN -> the guest, as Kata's agent is reached)
The tests read the guest's console: the kernel ran without ACPI, the devices were registered from the command
line and bound, both vsock exchanges passed, the root disk was mounted and its init ran (the disk stage).
Skips with the one-line reason when the module or the initramfs could not be built (BRISK_LINUX_KATA_SKIP,
set by tests/linux/run.sh) or is missing.
"""
import os
import re
import secrets
import socket
import subprocess
import time

import pytest

from . import netpeer
from .conftest import LINUX, ROOT, boot_linux, kernel

pytestmark = pytest.mark.usefixtures("linux_kvm")

INITRD = LINUX / "initramfs-kata.cpio.gz"
MKROOTFS = ROOT / "tests" / "linux" / "mkrootfs.sh"
# Kata Containers' fcKernelParams (src/runtime/virtcontainers/fc.go), in its order, and its debug console
KATA_WORDS = ["pci=off", "reboot=k", "panic=1", "iommu=off", "net.ifnames=0", "random.trust_cpu=on", "acpi=off",
              "console=ttyS0"]
CID, PORT_OUT, PORT_IN, BYTES = 3, 5002, 1024, 1 << 20
VIRTIO_BLK, VIRTIO_VSOCK = 2, 19  # virtio 1.2 section 5


def start_vm(kernel_path, initrd, image, uds, words):
    """Starts brisk on the guest and waits for it to end; returns a conftest.Boot. The one function that knows
    how brisk is started (today `brisk run`; Kata's start goes through brisk-jailer and --config-file)."""
    args = ["--disk", str(image), "--vsock", f"cid={CID},uds={uds}", "--cmdline", " ".join(words)]
    return boot_linux(kernel_path, initrd, *args, label="kata: vmlinuz acpi=off --disk --vsock")


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
    uds = tmp / "v.sock"
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
    b = start_vm(kernel("vmlinuz"), INITRD, image, uds, words)
    for t in threads:
        t.join(timeout=30)
    return KataBoot(b, peers, token, image)


def test_boot_ends_cleanly(kata_boot):
    """Exit status 0 through reboot=k (no ACPI, so no S5: the init reboots); every module loaded."""
    kb = kata_boot
    assert kb.boot.status == 0, kb.describe()
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
    assert len(dev_words) == 2, f"brisk's device words for acpi=off: {dev_words}\n{kb.describe()}"
    for w in dev_words:
        assert re.fullmatch(r"virtio_mmio\.device=4K@0x[0-9a-f]+:\d+", w), w
    params = " ".join(w.split(".", 1)[1] for w in dev_words)
    assert f"brisk-init: module virtio_mmio: parameters from the command line: {params}" in kb.out, kb.describe()
    regs = re.findall(r"virtio-mmio: Registering device virtio-mmio\.(\d+) at (0x[0-9a-f]+)-0x[0-9a-f]+, IRQ (\d+)",
                      kb.out)
    assert [(int(a, 16), int(i)) for _, a, i in regs] == \
        [(int(w.split("@")[1].split(":")[0], 16), int(w.split(":")[1])) for w in dev_words], kb.describe()
    m = re.search(r"^brisk-init: virtio: (\d+) devices? bound(?:: (.*))?$", kb.out, re.M)
    assert m and int(m.group(1)) == 2, kb.describe()
    bound = {int(t): at for _, t, at in re.findall(r"(virtio\d+) type (\d+) at (\S+?)(?:,|$)", m.group(2))}
    assert set(bound) == {VIRTIO_BLK, VIRTIO_VSOCK}, m.group(0)
    assert all(at.startswith("virtio-mmio.") for at in bound.values()), m.group(0)


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
