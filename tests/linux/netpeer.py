"""The host's side of the test init's exchange (tests/linux/init_net.c says the protocol): a TCP or unix
peer that sends and checks pattern bytes, the hybrid-vsock CONNECT handshake (docs/devices.md, "virtio-vsock"),
and a network namespace with a tap for brisk to attach to.

The exchange: the connector sends N (8 bytes, big-endian) and N bytes of pattern(0x11); the acceptor checks
them and sends N bytes of pattern(0x22), which the connector checks. pattern(seed)[i] = (i % 251 + seed) & 0xff.
"""
import ctypes
import os
import socket
import struct
import subprocess
import threading
import time

SEED_CONNECTOR, SEED_ACCEPTOR = 0x11, 0x22
CHUNK = 251 * 256  # a whole number of pattern periods


def pattern(n, seed):
    period = bytes((i + seed) & 0xFF for i in range(251))
    block = period * (CHUNK // 251)
    return (block * (n // len(block) + 1))[:n]


def _recv_exact(sock, n):
    parts, got = [], 0
    while got < n:
        b = sock.recv(min(1 << 20, n - got))
        if not b:
            raise EOFError(f"EOF after {got} of {n} bytes")
        parts.append(b)
        got += len(b)
    return b"".join(parts)


def _check(data, seed):
    want = pattern(len(data), seed)
    if data != want:
        i = next(i for i in range(len(data)) if data[i] != want[i])
        raise AssertionError(f"byte {i} is 0x{data[i]:02x}, not 0x{want[i]:02x}")


class Result:
    """What one exchange did: ok, bytes, the receive time (first byte to last, seconds), or the error."""

    def __init__(self):
        self.ok, self.bytes, self.recv_s, self.error, self.attempts = False, 0, None, "not run", 0
        self.errors = {}  # each distinct error of a retried connector: [first attempt, count, monotonic time]

    def mib_s(self):
        return self.bytes / 1048576 / self.recv_s if self.recv_s else 0.0

    def note(self, error):
        """A failed attempt: the last error, and each distinct one with when it first came (for a failure's report)."""
        self.error = error
        e = self.errors.setdefault(error, [self.attempts, 0, time.monotonic()])
        e[1] += 1

    def __repr__(self):
        seen = "; ".join(f"{err} (from attempt {a}, {n}x)" for err, (a, n, _) in self.errors.items())
        return (f"ok={self.ok} bytes={self.bytes} recv={self.recv_s} attempts={self.attempts} "
                f"error={self.error}" + (f" [errors: {seen}]" if len(self.errors) > 1 else ""))


def exchange_connector(sock, n, result):
    sock.sendall(struct.pack(">Q", n) + pattern(n, SEED_CONNECTOR))
    t0 = None
    got = bytearray()
    while len(got) < n:
        b = sock.recv(min(1 << 20, n - len(got)))
        if not b:
            raise EOFError(f"EOF after {len(got)} of {n} bytes")
        t0 = t0 or time.monotonic()
        got += b
    result.recv_s = time.monotonic() - t0 if n else 0.0
    _check(bytes(got), SEED_ACCEPTOR)
    result.ok, result.bytes, result.error = True, n, None


def exchange_acceptor(sock, result):
    (n,) = struct.unpack(">Q", _recv_exact(sock, 8))
    t0 = time.monotonic()
    data = _recv_exact(sock, n)
    result.recv_s = time.monotonic() - t0
    _check(data, SEED_CONNECTOR)
    sock.sendall(pattern(n, SEED_ACCEPTOR))
    result.ok, result.bytes, result.error = True, n, None


def serve_once(listener, result, timeout):
    """Accept one connection on `listener` within `timeout` s and be its acceptor (a thread's target)."""
    listener.settimeout(timeout)
    try:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(60)
            result.attempts = 1
            exchange_acceptor(conn, result)
    except Exception as e:  # reported by the test
        result.error = f"{type(e).__name__}: {e}"
    finally:
        listener.close()


def serve_echo(listener, result, timeout):
    """Accept one connection and echo what arrives until EOF (the init's ping: brisk.vsockping=, brisk.tcpping=)."""
    listener.settimeout(timeout)
    try:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(60)
            if conn.family == socket.AF_INET:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            result.attempts, n = 1, 0
            while True:
                b = conn.recv(65536)
                if not b:
                    break
                conn.sendall(b)
                n += len(b)
            result.ok, result.bytes, result.error = True, n, None
    except Exception as e:
        result.error = f"{type(e).__name__}: {e}"
    finally:
        listener.close()


def connect_retrying(open_conn, n, result, deadline):
    """Connector with retries until `deadline` (monotonic): `open_conn()` returns a connected socket or raises.
    A refused or reset attempt before any data came back is retried (the guest is not listening yet)."""
    while time.monotonic() < deadline:
        result.attempts += 1
        try:
            with open_conn() as s:
                s.settimeout(60)
                exchange_connector(s, n, result)
                return
        except (ConnectionError, EOFError, OSError) as e:
            result.note(f"{type(e).__name__}: {e}")
            time.sleep(0.5)
        except AssertionError as e:
            result.error = f"data: {e}"
            return


def vsock_hybrid_connect(uds, port):
    """Firecracker's hybrid vsock, host side: connect to the device's socket, 'CONNECT <port>\\n', 'OK <n>\\n'."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(30)
        s.connect(str(uds))
        s.sendall(f"CONNECT {port}\n".encode())
        line = b""
        while not line.endswith(b"\n"):
            b = s.recv(1)
            if not b:
                raise ConnectionResetError(f"closed after {line!r} (nobody listening on guest port {port}?)")
            line += b
            if len(line) > 64:
                raise ConnectionError(f"no OK line: {line!r}")
        if not line.startswith(b"OK "):
            raise ConnectionError(f"answer {line!r}")
        return s
    except BaseException:
        s.close()
        raise


def thread(target, *args):
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


# ---- a network namespace with a tap ----

CLONE_NEWNET = 0x40000000


class NetNS:
    """`ip netns add NAME` with tap TAP (ADDR/PREFIX, up) in it; removed by close(). brisk runs in it through
    `ip netns exec NAME`; sockets of this process join it per thread (setns(2) on the calling thread)."""

    def __init__(self, name, tap, cidr):
        self.name, self.tap = name, tap
        self._ip("netns", "add", name)
        try:
            self._ip("-n", name, "tuntap", "add", "dev", tap, "mode", "tap")
            self._ip("-n", name, "addr", "add", cidr, "dev", tap)
            self._ip("-n", name, "link", "set", tap, "up")
            self._ip("-n", name, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _ip(*args):
        p = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
        if p.returncode:
            raise RuntimeError(f"ip {' '.join(args)}: {p.stderr.strip()}")

    def wrap(self):
        return ["ip", "netns", "exec", self.name]

    def enter_this_thread(self):
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
        finally:
            os.close(fd)

    def close(self):
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30)
