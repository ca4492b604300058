"""virtio-net (docs/devices.md, "virtio-net"): the conformance guest (guests/virtio-net.c) on a tap in a private
network namespace the test creates, with an echo helper on the tap that sends every frame back; on user-mode
networking (the brisk-slirp helper), where the gateway answers an ARP request; hostile transmit frames dropped
and counted; the --net option's errors. Traffic stays inside the namespace or inside slirp."""
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import BRISK, EXIT_GUEST_OK, EXIT_HOST, EXIT_USAGE, boot, guest, run_brisk

pytestmark = pytest.mark.usefixtures("kvm")

WINDOW0 = 0xD0001000
NOTIFY0 = WINDOW0 + 0x50
ECHO_MAC = "02:ec:40:00:00:01"
COUNTERS = re.compile(r"virtio-net (\d+) \(([^)]*)\): (\d+) frames tx, (\d+) rx, (\d+) dropped \(tx: (\d+) "
                      r"malformed/empty/oversized, (\d+) backend; rx: (\d+) no room, (\d+) runt; (\d+) bad rx chains\); "
                      r"\d+ bytes tx, \d+ rx; backend full (\d+) times")

# The echo helper: on the tap inside the namespace, every frame the guest sent (not those we send) goes back
# with the destination set to its source and the source set to ECHO_MAC. Bounded in frames and time.
ECHO = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((sys.argv[1], 0))
s.settimeout(0.5)
echo = bytes.fromhex(sys.argv[2].replace(":", ""))
print("ready", flush=True)
end, n = time.monotonic() + 120, 0
while time.monotonic() < end and n < 10000:
    try:
        frame, addr = s.recvfrom(65536)
    except socket.timeout:
        continue
    if addr[2] == socket.PACKET_OUTGOING or len(frame) < 14:
        continue
    n += 1
    try:
        s.send(frame[6:12] + echo + frame[12:])
    except OSError as e:
        print("echo: send failed:", e, flush=True)
"""


def netns_reason():
    if os.geteuid() != 0:
        return "needs root (network namespaces, taps)"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun missing"
    if not shutil.which("ip"):
        return "iproute2 (ip) missing"
    return None


def sh(*args):
    return subprocess.run(args, capture_output=True, text=True, timeout=30)


@pytest.fixture
def netns():
    """A private network namespace with a tap (IPv6 off: no router solicitations on the wire); removed after."""
    reason = netns_reason()
    if reason:
        pytest.skip(reason)
    ns = f"brisk-test-{os.getpid()}"
    p = sh("ip", "netns", "add", ns)
    if p.returncode:
        pytest.skip(f"ip netns add failed: {p.stderr.strip()}")
    try:
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
           "net.ipv6.conf.default.disable_ipv6=1")
        for cmd in (["ip", "tuntap", "add", "dev", "btap0", "mode", "tap"], ["ip", "link", "set", "btap0", "up"],
                    ["ip", "link", "set", "lo", "up"]):
            p = sh("ip", "netns", "exec", ns, *cmd)
            if p.returncode:
                pytest.skip(f"{' '.join(cmd)} in a namespace failed: {p.stderr.strip()}")
        yield ns
    finally:
        sh("ip", "netns", "del", ns)


@pytest.fixture
def echo(netns):
    p = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-c", ECHO, "btap0", ECHO_MAC],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert p.stdout.readline().strip() == "ready", "echo helper did not start"
        yield p
    finally:
        p.kill()
        p.wait()


def boot_in(ns, *args, timeout=120):
    return run_brisk("run", "--kernel", guest("virtio-net"), *args, timeout=timeout) if ns is None else \
        subprocess.run(["ip", "netns", "exec", ns, str(BRISK), "run", "--kernel", guest("virtio-net"), *args],
                       capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def counters(stderr):
    m = COUNTERS.search(stderr)
    assert m, stderr
    keys = ["index", "backend", "tx", "rx", "dropped", "tx_bad", "tx_backend", "rx_no_room", "rx_runt", "rx_bad",
            "tx_full"]
    return {k: (v if k == "backend" else int(v)) for k, v in zip(keys, m.groups())}


def check_pass(p):
    fails = [line for line in p.stdout.splitlines() if "FAIL" in line]
    assert p.returncode == EXIT_GUEST_OK, f"{fails}\n{p.stdout}\n{p.stderr}"
    assert "virtio-net: PASS" in p.stdout, p.stdout
    assert "AddressSanitizer" not in p.stderr and "runtime error:" not in p.stderr, p.stderr


@pytest.mark.parametrize("mrg", [1, 0])
@pytest.mark.security
def test_tap_echo(netns, echo, mrg):
    """Frames go out through the tap and come back byte for byte; the answer to a frame sent before any
    receive buffer was posted waits in the device; a receive chain too small for it is returned empty (without
    mrg the frame is dropped, with mrg the chain is malformed and the frame waits on); the four hostile frames
    are dropped and counted; QueueNotify never exits to userspace (ioeventfd)."""
    p = boot_in(netns, "--net", "tap=btap0,mac=02:00:00:aa:bb:cc", "--log-level", "info", "--timeline",
                "--cmdline", f"peer=echo mrg={mrg} mac=0x020000aabbcc")
    check_pass(p)
    assert "CHECK rx_waited_for_buffers: PASS" in p.stdout
    assert "CHECK rx_full_size_echo: PASS" in p.stdout
    if mrg:
        assert "CHECK rx_num_buffers: PASS" in p.stdout
    c = counters(p.stderr)
    assert c["backend"] == "tap btap0"
    assert c["tx_bad"] == 4 and c["tx"] == 3 and c["tx_backend"] == 0, c
    if mrg:
        assert c["rx"] == 3 and c["rx_bad"] == 1 and c["rx_no_room"] == 0, c
    else:
        assert c["rx"] == 2 and c["rx_bad"] == 0 and c["rx_no_room"] == 1, c
    notify_exits = re.findall(rf"^\d+\s+mmio\s+write\s+0x{NOTIFY0:x}\s+(\d+)", p.stdout, re.M)
    assert notify_exits == [], f"QueueNotify exits: {notify_exits}"


def test_tap_offloads_offered(netns, echo):
    """A tap that accepts TUNSETOFFLOAD gets CSUM/GUEST_CSUM and TSO offered besides MAC, STATUS, MTU, MRG_RXBUF."""
    p = boot_in(netns, "--net", "tap=btap0", "--cmdline", "peer=echo")
    check_pass(p)
    m = re.search(r"features offered 0x([0-9a-f]+)", p.stdout)
    offered = int(m.group(1), 16)
    for bit in (0, 1, 3, 5, 7, 8, 11, 12, 15, 16, 32):
        assert offered & (1 << bit), f"feature bit {bit} not offered: {offered:#x}"


@pytest.mark.security
def test_tap_deleted_while_running(netns):
    """The tap disappears under a running VM: one error line, link down, frames dropped and counted, the guest's
    chains all come back, the VM ends normally."""
    proc = subprocess.Popen(["ip", "netns", "exec", netns, str(BRISK), "run", "--kernel", guest("virtio-net"),
                             "--net", "tap=btap0", "--log-level", "info", "--cmdline", "flood=200"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    time.sleep(0.7)
    sh("ip", "netns", "exec", netns, "ip", "link", "del", "btap0")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_GUEST_OK, out + err
    assert "CHECK tx_flood_completed: PASS" in out, out
    assert err.count("the backend is gone") == 1, err
    c = counters(err)
    assert c["tx_backend"] > 0 and c["tx"] > 0, c


HOLD = r"""
import fcntl, os, struct, sys, time
fd = os.open("/dev/net/tun", os.O_RDWR)
fcntl.ioctl(fd, 0x400454ca, struct.pack("16sH", sys.argv[1].encode(), 0x0002 | 0x1000))  # TUNSETIFF IFF_TAP|IFF_NO_PI
print("held", flush=True)
time.sleep(30)
"""


@pytest.mark.security
def test_tap_busy(netns):
    """A tap another process holds is an error at start (TUNSETIFF: EBUSY), naming the tap; exit status 2."""
    holder = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-c", HOLD, "btap0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        p = boot_in(netns, "--net", "tap=btap0")
    finally:
        holder.kill()
        holder.wait()
    assert p.returncode == EXIT_USAGE, p.stderr
    assert "--net tap=btap0" in p.stderr and "TUNSETIFF btap0" in p.stderr and "busy" in p.stderr, p.stderr


def test_user_arp_gateway():
    """User-mode networking: the gateway (slirp) answers the ARP request sent before any receive buffer was
    posted; the default network is 192.168.76.0/24; the MAC is the same on every boot."""
    if not (BRISK.parent / "brisk-slirp").exists() and not os.environ.get("BRISK_SLIRP_HELPER"):
        pytest.skip("brisk-slirp not built")
    macs = []
    for _ in range(2):
        p = boot_in(None, "--net", "user", "--log-level", "info", "--timeline",
                    "--cmdline", "peer=slirp ip=0xc0a84c0f gw=0xc0a84c02")
        check_pass(p)
        assert "CHECK rx_arp_sender_gateway: PASS (sender 192.168.76.2" in p.stdout
        c = counters(p.stderr)
        assert c["backend"] == "user" and c["tx"] == 2 and c["rx"] == 2 and c["tx_bad"] == 4, c
        macs.append(re.search(r"CHECK config_mac: PASS \(([0-9a-f:]+)\)", p.stdout).group(1))
        notify_exits = re.findall(rf"^\d+\s+mmio\s+write\s+0x{NOTIFY0:x}\s+(\d+)", p.stdout, re.M)
        assert notify_exits == [], f"QueueNotify exits: {notify_exits}"
    assert macs[0] == macs[1] and macs[0].startswith("02:"), macs


def test_user_custom_network_and_two_interfaces():
    """net= moves the gateway; a second interface gets its own window (two devices counted at stop)."""
    if not (BRISK.parent / "brisk-slirp").exists():
        pytest.skip("brisk-slirp not built")
    p = boot_in(None, "--net", "user,net=10.9.8.0/24", "--net", "user", "--log-level", "info",
                "--cmdline", "peer=slirp ip=0x0a09080f gw=0x0a090802")
    check_pass(p)
    assert "sender 10.9.8.2" in p.stdout
    assert len(COUNTERS.findall(p.stderr)) == 2, p.stderr


POLL_SYSCALLS = {7, 232, 271, 281}  # x86-64 poll, epoll_wait, ppoll, epoll_pwait


def waits_in_poll(pid):
    """Whether the process sleeps in poll or epoll (/proc/PID/syscall; where that is not available, whether it
    sleeps at all, a second after it was first seen asleep)."""
    asleep = False
    try:
        with open(f"/proc/{pid}/stat") as f:
            asleep = f.read().rsplit(")", 1)[1].split()[0] == "S"
        with open(f"/proc/{pid}/syscall") as f:
            return asleep and int(f.read().split()[0]) in POLL_SYSCALLS
    except (OSError, ValueError, IndexError):
        if not asleep:
            return False
        time.sleep(1)
        return True


def helper_pid(brisk_pid, timeout=30):
    """The brisk-slirp child of brisk (spawned by its main thread), once it runs brisk-slirp and waits in its
    event loop: stopped before that (a slow host: an emulated KVM), the helper never starts the network."""
    deadline, kid = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            kids = open(f"/proc/{brisk_pid}/task/{brisk_pid}/children").read().split()
            kid = int(kids[0]) if kids else None
            if kid and open(f"/proc/{kid}/comm").read().strip() == "brisk-slirp" and waits_in_poll(kid):
                return kid
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"no brisk-slirp child waiting in its loop (child {kid})")


def helper_recv_q(helper):
    """Bytes waiting in the stopped helper's end of its socket to brisk (ss -x: Recv-Q), or None."""
    p = subprocess.run(["ss", "-xpn"], capture_output=True, text=True, timeout=30)
    for line in p.stdout.splitlines():
        if f"pid={helper}," in line:
            return int(line.split()[2])
    return None


def wait_socket_full(helper, timeout=60):
    """Until the helper's receive queue has stopped growing for a second (brisk got EAGAIN and paused); a
    fixed sleep is not enough where the guest is slow to get going (nested KVM). The guest's own deadline for a
    transmission is 5 s, so the helper must run again soon after."""
    last, since, t_end = None, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < t_end:
        q = helper_recv_q(helper)
        if q != last:
            last, since = q, time.monotonic()
        elif q and time.monotonic() - since >= 1.0:
            return
        time.sleep(0.1)
    raise AssertionError(f"the helper's socket never filled (Recv-Q {last})")


@pytest.mark.security
def test_user_backpressure_helper_stopped():
    """The helper stops reading (SIGSTOP) while the guest transmits as fast as it can: the socket fills, brisk
    pauses the transmit queue (EAGAIN, counted) instead of dropping or blocking, and once the helper runs again
    every frame goes through; nothing is lost on the transmit side."""
    import signal
    if not (BRISK.parent / "brisk-slirp").exists():
        pytest.skip("brisk-slirp not built")
    # The flood waits for a byte on COM1 (flood_wait=1): the helper is stopped first, however fast the flood
    # would end (it once ended before the test's SIGSTOP, under the ASan build in a make check).
    proc = subprocess.Popen([str(BRISK), "run", "--kernel", guest("virtio-net"), "--net", "user", "--log-level", "info",
                             "--cmdline", "flood=4000 flood_gap_ms=0 flood_wait=1 ip=0xc0a84c0f gw=0xc0a84c02"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.PIPE)
    try:
        helper = helper_pid(proc.pid)
        os.kill(helper, signal.SIGSTOP)
        proc.stdin.write("g")
        proc.stdin.flush()
        wait_socket_full(helper)
        os.kill(helper, signal.SIGCONT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == EXIT_GUEST_OK, out + err
    assert "CHECK tx_flood_completed: PASS (4000 of 4000" in out, out
    c = counters(err)
    assert c["tx"] == 4000 and c["tx_backend"] == 0 and c["tx_full"] >= 1, c


def test_user_hostfwd_port_in_use():
    """A hostfwd port that cannot be bound is an error at start naming it (exit status 2)."""
    import socket
    if not (BRISK.parent / "brisk-slirp").exists():
        pytest.skip("brisk-slirp not built")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        p = run_brisk("run", "--kernel", guest("hello"), "--net", f"user,hostfwd=tcp:127.0.0.1:{port}-:22")
    finally:
        s.close()
    assert p.returncode == EXIT_USAGE, p.stderr
    assert f"port {port}" in p.stderr and "--net user" in p.stderr, p.stderr


@pytest.mark.parametrize("helper", ["missing", "not-executable", "exits"])
def test_user_helper_that_cannot_start_is_a_host_failure(tmp_path, helper):
    """docs/exit-codes.md: a brisk-slirp that is missing, not executable or exits before it is ready is the host's
    failure, 4 (it was 2, a usage error, although nothing in the command line was wrong); the message names it.
    A hostfwd port in use stays the user's (2: test_user_hostfwd_port_in_use)."""
    path = {"missing": str(tmp_path / "no-such-helper"), "exits": "/bin/false"}.get(helper)
    if helper == "not-executable":
        path = str(tmp_path / "brisk-slirp")
        open(path, "w").write("#!/bin/sh\n")
    p = run_brisk("run", "--kernel", guest("hello"), "--net", "user", env={**os.environ, "BRISK_SLIRP_HELPER": path})
    assert p.returncode == EXIT_HOST, (p.returncode, p.stderr)
    assert "brisk-slirp" in p.stderr or path in p.stderr, p.stderr


@pytest.mark.parametrize("value,why", [
    ("", "an empty item"),
    ("bogus", "expected tap=NAME or user first"),
    ("tap=", "an interface name of 1..15 bytes"),
    ("tap=" + "x" * 16, "an interface name of 1..15 bytes"),
    ("tap=t0,mac=02:00:00:00:00", "six hex bytes"),
    ("tap=t0,mac=03:00:00:00:00:01", "multicast"),
    ("tap=t0,net=10.0.0.0/24", "unknown key 'net=10.0.0.0/24'"),
    ("user,color=blue", "unknown key 'color=blue'"),
    ("user,net=10.0.0.1/24", "host bits set"),
    ("user,net=10.0.0.0/30", "N from 8 to 27"),
    ("user,hostfwd=tcp:127.0.0.1:80", "hostfwd=tcp:127.0.0.1:80: expected"),
    ("user,hostfwd=sctp::80-:80", "expected [tcp|udp]"),
    ("user,hostfwd=tcp::70000-:80", "expected [tcp|udp]"),
])
def test_net_option_errors(value, why):
    p = run_brisk("run", "--kernel", guest("hello"), "--net", value)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert "invalid --net" in p.stderr and why in p.stderr, p.stderr


@pytest.mark.security
@pytest.mark.parametrize("net,why", [
    ("127.0.0.0/8", "inside 127.0.0.0/8, the loopback network"),
    ("127.1.2.0/24", "inside 127.0.0.0/8, the loopback network"),
    ("0.0.0.0/8", "inside 0.0.0.0/8, \"this network\""),
    ("224.0.0.0/8", "inside 224.0.0.0/4, multicast"),
    ("239.255.0.0/16", "inside 224.0.0.0/4, multicast"),
    ("255.255.255.0/24", "inside 240.0.0.0/4, reserved (with the broadcast address 255.255.255.255)"),
    ("240.0.0.0/8", "inside 240.0.0.0/4, reserved"),
])
def test_user_net_not_unicast_refused(net, why):
    """A user-mode network must be unicast: loopback, "this network", multicast and the reserved/broadcast
    block are refused at parse time (exit 2, the value and the block named), before any helper starts."""
    p = run_brisk("run", "--kernel", guest("hello"), "--net", f"user,net={net}")
    assert p.returncode == EXIT_USAGE, p.stderr
    assert f"net={net} is {why}" in p.stderr and "unicast" in p.stderr, p.stderr


@pytest.mark.security
@pytest.mark.parametrize("name,why", [
    ("tap%d", "'%' makes the kernel pick the name"),
    ("br%dx", "'%' makes the kernel pick the name"),
    ("a:b", "without '/', ':' or blanks"),
    ("a b", "without '/', ':' or blanks"),
    ("..", "not . or .."),
])
def test_tap_name_refused(name, why):
    """A tap name the kernel would not take as given (a '%d' pattern names another device; ':', blanks, . and ..
    are not interface names) is refused at parse time: exit 2, the name quoted."""
    p = run_brisk("run", "--kernel", guest("hello"), "--net", f"tap={name}")
    assert p.returncode == EXIT_USAGE, p.stderr
    assert f"invalid --net 'tap={name}'" in p.stderr and why in p.stderr, p.stderr


def test_too_many_nets():
    p = run_brisk("run", "--kernel", guest("hello"), *(["--net", "user"] * 9))
    assert p.returncode == EXIT_USAGE
    assert "at most 8 interfaces" in p.stderr, p.stderr
