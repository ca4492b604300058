"""Debian's kernel on a drive swapped after boot and on a rate-limited drive (docs/devices.md "Swapping a disk
after boot", "Rate limiting").

One boot through the API (`brisk --api-sock S`: PUT /boot-source, /machine-config, /drives, InstanceStart), as
Kata hot-plugs a container's disk: vda is an empty placeholder drive (0 sectors, Kata's createDiskPool), vdb
a scratch disk with a rate_limiter of 16 MiB/s (a bandwidth bucket of 4 MiB refilled in 250 ms: more than a
1 MiB request plus what 100 ms of refill timer brings, so that no refill is lost at the cap; a bucket of 2 MiB
measured 88% of the rate once). The initramfs's init (tests/linux/init.c, brisk.virtio=1) runs its block
benchmark on vdb (brisk.blkbench=/dev/vdb: 96 MiB written then read, 1 MiB at a time, O_DIRECT, queue depth 1;
the first 4 MiB of each row are the full bucket's, so a row reads about 4% above the rate) and then waits for vda to grow
(brisk.swapwait=vda). The test PATCHes drive_0 with an ext4 image holding /brisk-token (Kata's
fcUpdateBlockDrive body: {"drive_id", "path_on_host"}); the kernel re-reads the capacity on the configuration
interrupt, the init mounts vda and prints the token, then powers off. Checked: the new size, the token, and
both benchmark rows within 10% of 16 MiB/s."""
import http.client
import json
import os
import re
import secrets
import socket
import subprocess
import time

import pytest

from .conftest import (BRISK, LINUX, MEMORY, TIMEOUT, _report, brisk_default_cmdline, brisk_run_help, kernel,
                       kernel_config)

pytestmark = pytest.mark.usefixtures("linux_kvm")

INITRD = LINUX / "initramfs-virtio.cpio.gz"
MIB = 1 << 20
RATE = 16 * MIB


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=60)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def api(sock, method, path, body):
    c = UnixHTTP(sock)
    c.request(method, path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    assert r.status == 204, f"{method} {path}: {r.status} {data!r}"


def wait_for(path, proc, timeout=30):
    t0 = time.monotonic()
    while not os.path.exists(path):
        assert proc.poll() is None and time.monotonic() - t0 < timeout, "no API socket"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def swap_boot(tmp_path_factory):
    if not INITRD.exists():
        pytest.skip(f"{INITRD} missing: tests/linux/run.sh builds it")
    tmp = tmp_path_factory.mktemp("swap")
    cfg = kernel_config()
    words = brisk_default_cmdline(brisk_run_help()).split()
    if cfg.get("CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES") != "y":
        words = [w for w in words if w != "acpi=off"]  # the devices are in the DSDT
    token = secrets.token_hex(8)
    words = [w for w in words if not w.startswith("console=")] + [
        "console=ttyS0", "brisk.virtio=1", "brisk.poweroff=auto", "brisk.blkbench=/dev/vdb",
        "brisk.blkbench.mib=96", "brisk.blkbench.rand=0", "brisk.swapwait=vda"]
    placeholder, scratch, ctr = tmp / "drive_0", tmp / "scratch.img", tmp / "ctr.img"
    placeholder.write_bytes(b"")
    with open(scratch, "wb") as f:
        f.truncate(128 * MIB)
    content = tmp / "ctr"
    content.mkdir()
    (content / "brisk-token").write_text(token + "\n")
    p = subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(content), str(ctr), "16M"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    sock = str(tmp / "api.sock")
    out = open(tmp / "console", "w+b")
    proc = subprocess.Popen([str(BRISK), "--api-sock", sock], stdin=subprocess.DEVNULL, stdout=out,
                            stderr=subprocess.PIPE)
    try:
        wait_for(sock, proc)
        api(sock, "PUT", "/boot-source", {"kernel_image_path": str(kernel("vmlinuz")), "initrd_path": str(INITRD),
                                          "boot_args": " ".join(words)})
        api(sock, "PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": int(MEMORY.rstrip("M"))})
        api(sock, "PUT", "/drives/drive_0", {"drive_id": "drive_0", "is_read_only": False, "is_root_device": False,
                                             "path_on_host": str(placeholder)})
        api(sock, "PUT", "/drives/scratch", {"drive_id": "scratch", "is_read_only": False, "is_root_device": False,
                                             "path_on_host": str(scratch), "rate_limiter": {
                                                 "bandwidth": {"size": 4 * MIB, "refill_time": 250}}})
        api(sock, "PUT", "/actions", {"action_type": "InstanceStart"})
        t0 = time.monotonic()
        while b"brisk-init: swap: waiting for vda" not in (out.seek(0) or out.read()):
            assert proc.poll() is None, (out.seek(0) or out.read()).decode(errors="replace")[-4000:]
            assert time.monotonic() - t0 < TIMEOUT, "the init never waited for the swap"
            time.sleep(0.2)
        api(sock, "PATCH", "/drives/drive_0", {"drive_id": "drive_0", "path_on_host": str(ctr)})
        proc.wait(timeout=TIMEOUT)
        err = proc.stderr.read().decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out.seek(0)
    return proc.returncode, out.read().decode(errors="replace"), err, token


def test_placeholder_swapped_and_mounted(swap_boot):
    status, out, err, token = swap_boot
    assert status == 0, f"exit {status}\n{out[-4000:]}\n{err[-2000:]}"
    m = re.search(r"brisk-init: swap: vda has (\d+) sectors", out)
    assert m and int(m.group(1)) == 16 * MIB // 512, out[-4000:]
    assert f'brisk-init: swap: mounted /dev/vda, brisk-token "{token}"' in out, out[-4000:]


def test_rate_limited_disk_throughput(swap_boot):
    status, out, err, token = swap_boot
    rows = dict(re.findall(r"brisk-blkbench: (seqwrite|seqread) dev=/dev/vdb .*MiB/s=([0-9.]+)", out))
    assert set(rows) == {"seqwrite", "seqread"}, out[-4000:]
    _report.append("disk swap: rate-limited vdb " + ", ".join(f"{r} {v} MiB/s" for r, v in sorted(rows.items()))
                   + f" (limit {RATE // MIB} MiB/s)")
    for row, mibs in rows.items():
        assert 0.9 * RATE / MIB <= float(mibs) <= 1.1 * RATE / MIB, (row, mibs)
