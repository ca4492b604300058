"""brisk-slirp at the VM's end: what the guest sent over a hostfwd connection and slirp acknowledged reaches the
host, although brisk closes its end at once (a guest that sends and powers off). The test plays the guest: it
answers slirp's ARP, completes the TCP handshake slirp starts for the host's connection, sends data within slirp's
window until slirp holds some of it unwritten (the host socket's receive buffer is tiny and unread), sends FIN and
closes brisk's end of the socket. Then the host reads: every byte slirp acknowledged must arrive, then EOF. Before
brisk-slirp drained its buffers at end-of-file it exited at once and the host lost what slirp held."""
import socket
import struct
import subprocess
import time

import pytest

from conftest import BRISK

pytestmark = pytest.mark.functional

GUEST_MAC = bytes.fromhex("02b500000015")
GUEST_IP = socket.inet_aton("192.168.76.15")
GUEST_PORT = 5003
SEGMENT = 1400
PATTERN = bytes(range(256)) * 8  # the byte at sequence number k is k % 256


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def tcp_frame(dst_mac, src_ip, dst_ip, sport, dport, seq, ack, flags, payload=b"", win=65535):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, win, 0, 0) + payload
    pseudo = src_ip + dst_ip + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, src_ip, dst_ip)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return dst_mac + GUEST_MAC + b"\x08\x00" + ip + tcp


class FakeGuest:
    """The guest's end of brisk-slirp's socket: ARP and one TCP connection, by hand."""

    def __init__(self, sock):
        self.sock, self.gw_mac, self.gw_ip = sock, None, None
        self.peer = None  # (slirp's port, its next seq)
        self.seq, self.acked, self.win = 1000, 1000, 0

    def frames(self, timeout):
        self.sock.settimeout(timeout)
        try:
            while True:
                yield self.sock.recv(65536)
        except socket.timeout:
            return

    def handle(self, f):
        etype = f[12:14]
        if etype == b"\x08\x06" and f[20:22] == b"\x00\x01" and f[38:42] == GUEST_IP:  # ARP request for us
            self.gw_mac, self.gw_ip = f[22:28], f[28:32]
            reply = (f[6:12] + GUEST_MAC + b"\x08\x06" + f[14:20] + b"\x00\x02" + GUEST_MAC + GUEST_IP + f[22:32])
            self.sock.send(reply)
        elif etype == b"\x08\x00" and f[23] == 6 and f[30:34] == GUEST_IP:
            ihl = (f[14] & 15) * 4
            tcp = f[14 + ihl:]
            sport, dport, seq, ack, _, flags, win = struct.unpack("!HHIIBBH", tcp[:16])
            self.gw_mac, self.gw_ip = f[6:12], f[26:30]
            if dport != GUEST_PORT:
                return
            if flags & 0x02:  # SYN: answer SYN+ACK
                self.peer = [sport, seq + 1]
                self.send(0x12, seq=self.seq)
                self.seq += 1
                self.acked = self.seq
            elif flags & 0x10:
                self.acked, self.win = max(self.acked, ack), win

    def send(self, flags, payload=b"", seq=None):
        self.sock.send(tcp_frame(self.gw_mac, GUEST_IP, self.gw_ip, GUEST_PORT, self.peer[0],
                                 self.seq if seq is None else seq, self.peer[1], flags, payload))


def test_data_acknowledged_by_slirp_reaches_the_host_after_brisk_closes():
    helper = BRISK.parent / "brisk-slirp"
    if not helper.exists():
        pytest.skip("brisk-slirp not built")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # brisk hands the helper its socket as fd 3 (it closes every fd above): bash moves it there
    proc = subprocess.Popen(["bash", "-c", f'exec 3<&{theirs.fileno()}; exec "$0" "$@"', str(helper), "--fd", "3",
                             "--net", "192.168.76.0/24", "--mtu", "1500", "--hostfwd",
                             f"tcp:127.0.0.1:{port}-192.168.76.15:{GUEST_PORT}"],
                            pass_fds=[theirs.fileno()], stderr=subprocess.PIPE, text=True)
    theirs.close()
    g = FakeGuest(ours)
    try:
        first = ours.recv(256)
        assert first == b"OK", f"brisk-slirp answered {first!r}: {proc.stderr.read() if proc.poll() is not None else ''}"
        host = socket.socket()
        host.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # tiny and unread: slirp has to hold data
        host.connect(("127.0.0.1", port))
        deadline = time.monotonic() + 10
        while g.peer is None or g.acked != g.seq:  # the handshake, through slirp's ARP
            assert time.monotonic() < deadline, "slirp never completed the handshake with the fake guest"
            for f in g.frames(0.2):
                g.handle(f)
        # Data within slirp's window until it stops taking more: what it acknowledged is all it holds or wrote.
        idle = 0
        while idle < 10 and g.seq - 1001 < 4 << 20:  # stopped: no ACK for 10 x 50 ms
            while g.win and g.seq - g.acked < g.win:
                n = min(SEGMENT, g.win - (g.seq - g.acked))
                g.send(0x18, PATTERN[g.seq % 256:g.seq % 256 + n])
                g.seq += n
            before = g.acked
            for f in g.frames(0.05):
                g.handle(f)
            idle = idle + 1 if g.acked == before else 0
        sent = g.acked - 1001  # bytes slirp acknowledged (the SYN took one sequence number)
        assert sent > 16 << 10, f"slirp acknowledged only {sent} bytes: the test did not make it hold any"
        g.send(0x11)  # FIN
        time.sleep(0.1)
        ours.close()  # what brisk does when the VM ends
        host.settimeout(10)
        got = bytearray()
        while chunk := host.recv(65536):
            got.extend(chunk)
        host.close()
        assert proc.wait(timeout=10) == 0, proc.stderr.read()
    finally:
        proc.kill()
    assert len(got) == sent, f"the host got {len(got)} of the {sent} bytes slirp acknowledged"
    want = (PATTERN * (sent // len(PATTERN) + 2))[1001 % 256:1001 % 256 + sent]
    assert got == want, "the bytes differ from what the guest sent"
