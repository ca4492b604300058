"""Debian's stock kernel on brisk's virtio-net and virtio-vsock.

One boot checks everything: vmlinuz with build/linux/initramfs-virtio.cpio.gz (its init loads virtio_net and
vmw_vsock_virtio_transport with the other virtio modules: fetch-kernel.sh, mkinitramfs.sh --modules), run
inside a network namespace this test creates (`ip netns add`, a tap with 192.0.2.1/24, a documentation range)
with
  --net tap=TAP,mac=02:b5:00:00:00:01         the guest's eth0, 192.0.2.2/24
  --net user,hostfwd=tcp:127.0.0.1:HP-:5003   the guest's eth1 on the user-mode network (libslirp)
  --vsock cid=7,uds=DIR/v.sock
and the init's words (tests/linux/init_net.c) for, each exchange BYTES one way and BYTES back, checked byte
for byte on both sides (tests/linux/netpeer.py):
  guest -> a TCP server in the namespace over the tap              brisk.tcp=192.0.2.1:5001:BYTES
  guest -> a TCP server on the host's loopback through slirp      brisk.tcp=SLIRP_HOST:5011:BYTES
  guest -> a host listener at DIR/v.sock_5002 (vsock CID 2)       brisk.vsock=5002:BYTES
  namespace -> the guest's TCP listener over the tap (192.0.2.2:5003), and the host's loopback -> the same
  listener through the hostfwd port                               brisk.tcplisten=5003:2
  host -> the guest's vsock listener: CONNECT 5004 on DIR/v.sock    brisk.vsocklisten=5004:1
brisk runs in the namespace, so "the host's loopback" is the namespace's: no traffic leaves it.
Skips with the reason when this machine cannot create a namespace or a tap (not root, no /dev/net/tun).
"""
import os
import re
import shutil
import socket
import subprocess

import pytest

from . import netpeer
from .conftest import LINUX, boot_linux, brisk_default_cmdline, brisk_run_help, kernel

pytestmark = pytest.mark.usefixtures("linux_kvm")

INITRD = LINUX / "initramfs-virtio.cpio.gz"
BYTES = 2 << 20
TAP_HOST, TAP_GUEST, TAP_MAC = "192.0.2.1", "192.0.2.2", "02:b5:00:00:00:01"
# brisk's user-mode network by default (docs/devices.md, "virtio-net"): the guest's address and the host's
SLIRP_GUEST, SLIRP_PREFIX, SLIRP_HOST = "192.168.76.15", 24, "192.168.76.2"
PORT_TAP, PORT_VSOCK_OUT, PORT_LISTEN, PORT_VSOCK_IN, PORT_SLIRP = 5001, 5002, 5003, 5004, 5011
CID = 7


class NetBoot:
    def __init__(self, boot, peers):
        self.boot, self.peers, self.out = boot, peers, boot.stdout

    def guest_line(self, kind, where):
        m = re.search(rf"^brisk-net: {kind} {re.escape(where)}: (.*)$", self.out, re.M)
        return m.group(1) if m else None

    def check(self, kind, where, peer, count=1):
        """The guest's line(s) for this exchange say ok and the host's side agrees."""
        lines = re.findall(rf"^brisk-net: {kind} {re.escape(where)}: (.*)$", self.out, re.M)
        assert len(lines) >= count, f"no 'brisk-net: {kind} {where}' line:\n{self.describe()}"
        for line in lines:
            assert line.startswith(f"sent {BYTES} received {BYTES} ok"), f"{kind} {where}: {line}\n{self.describe()}"
        for name in peer:
            r = self.peers[name]
            assert r.ok and r.bytes == BYTES, f"host side of {name}: {r}\n{self.describe()}"

    def describe(self):
        guest = "\n".join(re.findall(r"^brisk-net: .*$", self.out, re.M))
        return (self.boot.describe() + "\n--- the guest's brisk-net lines ---\n" + guest + "\n--- host side ---\n"
                + "\n".join(f"{k}: {v}" for k, v in self.peers.items()))


def _in_ns(ns, fn, *args):
    def run():
        ns.enter_this_thread()
        fn(*args)
    return netpeer.thread(run)


def _listen_tcp(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    return s


@pytest.fixture(scope="module")
def net_boot(tmp_path_factory):
    if not INITRD.exists():
        pytest.skip(f"{INITRD} missing: tests/linux/run.sh builds it")
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun") or not shutil.which("ip"):
        pytest.skip("needs root, /dev/net/tun and ip(8) to create a network namespace with a tap")
    tmp = tmp_path_factory.mktemp("net")
    try:
        ns = netpeer.NetNS(f"brisk-lt{os.getpid()}", "brtap0", f"{TAP_HOST}/24")
    except RuntimeError as e:
        pytest.skip(f"cannot create a network namespace with a tap here: {e}")
    try:
        yield _boot(ns, tmp)
    finally:
        ns.close()


def _boot(ns, tmp):
    uds = tmp / "v.sock"
    hostfwd = 15003
    peers = {k: netpeer.Result() for k in ("tap out", "slirp out", "vsock out", "tap in", "hostfwd in", "vsock in")}
    threads = []
    deadline_s = 600

    # guest -> host: listeners first (in the namespace: brisk's host side lives there)
    def serve(name, addr, port):
        netpeer.serve_once(_listen_tcp(addr, port), peers[name], deadline_s)

    threads.append(_in_ns(ns, serve, "tap out", TAP_HOST, PORT_TAP))
    threads.append(_in_ns(ns, serve, "slirp out", "127.0.0.1", PORT_SLIRP))
    vl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    vl.bind(f"{uds}_{PORT_VSOCK_OUT}")
    vl.listen(1)
    threads.append(netpeer.thread(netpeer.serve_once, vl, peers["vsock out"], deadline_s))

    # host -> guest: connectors retrying until the guest listens
    import time
    deadline = time.monotonic() + deadline_s

    def conn_tcp(name, addr, port):
        netpeer.connect_retrying(lambda: socket.create_connection((addr, port), timeout=10), BYTES, peers[name],
                                 deadline)

    threads.append(_in_ns(ns, conn_tcp, "tap in", TAP_GUEST, PORT_LISTEN))
    threads.append(_in_ns(ns, conn_tcp, "hostfwd in", "127.0.0.1", hostfwd))
    threads.append(netpeer.thread(netpeer.connect_retrying, lambda: netpeer.vsock_hybrid_connect(uds, PORT_VSOCK_IN),
                                  BYTES, peers["vsock in"], deadline))

    words = [w for w in brisk_default_cmdline(brisk_run_help()).split() if w != "acpi=off"]
    words += ["brisk.virtio=1", "brisk.poweroff=auto",
              f"brisk.ip=eth0,{TAP_GUEST}/24", f"brisk.ip=eth1,{SLIRP_GUEST}/{SLIRP_PREFIX}",
              f"brisk.tcp={TAP_HOST}:{PORT_TAP}:{BYTES}", f"brisk.tcp={SLIRP_HOST}:{PORT_SLIRP}:{BYTES}",
              f"brisk.vsock={PORT_VSOCK_OUT}:{BYTES}", f"brisk.tcplisten={PORT_LISTEN}:2",
              f"brisk.vsocklisten={PORT_VSOCK_IN}:1"]
    args = ["--net", f"tap={ns.tap},mac={TAP_MAC}", "--net", f"user,hostfwd=tcp:127.0.0.1:{hostfwd}-:{PORT_LISTEN}",
            "--vsock", f"cid={CID},uds={uds}", "--log-level", "info", "--cmdline", " ".join(words)]
    b = boot_linux(kernel("vmlinuz"), INITRD, *args, label="net: vmlinuz --net tap --net user --vsock",
                   wrap=ns.wrap())
    for t in threads:
        t.join(timeout=30)
    return NetBoot(b, peers)


def test_boot_ends_cleanly(net_boot):
    b = net_boot.boot
    assert b.status == 0, net_boot.describe()
    assert re.search(r"^brisk-init: modules: \d+ loaded, \d+ already present, 0 failed", net_boot.out, re.M), \
        net_boot.describe()


def test_interfaces_up(net_boot):
    """Both virtio-net devices bound; eth0 has the MAC given with --net tap=...,mac=."""
    assert re.search(rf"^brisk-net: eth0 {TAP_MAC} up {TAP_GUEST}/24", net_boot.out, re.M), net_boot.describe()
    assert re.search(rf"^brisk-net: eth1 \S+ up {SLIRP_GUEST}/{SLIRP_PREFIX}", net_boot.out, re.M), \
        net_boot.describe()


def test_tcp_over_tap_both_directions(net_boot):
    net_boot.check("tcp connect", f"{TAP_HOST}:{PORT_TAP}", ["tap out"])
    net_boot.check("tcp accept", f"port {PORT_LISTEN}", ["tap in"], count=2)


def test_tcp_over_user_mode_both_directions(net_boot):
    """Guest -> a server on (brisk's) loopback through slirp's host address; loopback -> guest through hostfwd."""
    net_boot.check("tcp connect", f"{SLIRP_HOST}:{PORT_SLIRP}", ["slirp out"])
    net_boot.check("tcp accept", f"port {PORT_LISTEN}", ["hostfwd in"], count=2)


def test_vsock_both_directions(net_boot):
    net_boot.check("vsock connect", f"2:{PORT_VSOCK_OUT}", ["vsock out"])
    net_boot.check("vsock accept", f"port {PORT_VSOCK_IN}", ["vsock in"])


def test_no_dropped_or_malformed(net_boot):
    """Linux's drivers send nothing the devices had to drop or refuse (brisk's counters at --log-level info)."""
    err = net_boot.boot.stderr
    for line in re.findall(r"^brisk: info: virtio-(?:net|vsock).*$", err, re.M):
        for word in ("malformed", "bad", "oversized", "zero-length"):
            m = re.search(rf"(\d+) {word}", line)
            assert not m or m.group(1) == "0", line
    assert re.search(r"virtio-net", err) and re.search(r"virtio-vsock", err), err[-3000:]
