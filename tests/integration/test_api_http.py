"""The HTTP/1.1 side of the API socket: the helper process (src/api/api_http.c, llhttp) that api_link forks,
driven by the api_echo test program (tests/unit/api_echo.c), which answers every request with what it received.

No KVM needed. Found next to the brisk binary under test: $BRISK's directory/tests/api_echo (plain or ASan
build); it links the same library as brisk, so its helper is brisk's.
"""
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import BRISK, check_sanitizers

ECHO = BRISK.parent / "tests" / "api_echo"
BODY_MAX = 51200  # API_BODY_MAX, Firecracker's default payload limit
CONN_LIMIT = 1024  # api_http.c's CONN_LIMIT
REQUEST_DEADLINE = 10  # api_http.c's REQUEST_DEADLINE_S
EXIT_START_FAILED = 1  # api_echo's exit statuses
EXIT_HELPER_GONE = 3

pytestmark = pytest.mark.skipif(not ECHO.exists(), reason=f"{ECHO} missing: make {ECHO}")


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over an AF_UNIX stream socket."""

    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


class Echo:
    """A running api_echo on a socket in a short private directory (sun_path holds 107 bytes)."""

    def __init__(self, sock, env=None, args=()):
        self.sock = sock
        self.proc = subprocess.Popen([str(ECHO), sock, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})})
        line = self.proc.stdout.readline()
        assert line == "ready\n", f"api_echo did not start: {self.proc.stderr.read()}"

    def request(self, method, path, body=None, headers=None):
        c = UnixHTTPConnection(self.sock)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, r.getheader("Content-Type"), r.read()
        finally:
            c.close()

    def raw(self, data, wait=2.0):
        """Sends data on a fresh connection; returns what came back until EOF or `wait` seconds of silence."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.sock)
        s.sendall(data)
        return read_all(s, wait)

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        err = self.proc.stderr.read()
        check_sanitizers(err)
        return rc, err

    def helper_pid(self):
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        assert len(children) == 1, children
        return int(children[0])


def gone(pid, wait=5):
    """True once pid has exited (a zombie of an absent reaper counts)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def read_all(s, wait):
    s.settimeout(wait)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (socket.timeout, ConnectionResetError):  # reset: the server closed with our bytes unread
        pass
    finally:
        s.close()
    return out


@pytest.fixture
def echo(sockdir):
    e = Echo(os.path.join(sockdir, "api.sock"))
    yield e
    rc, err = e.stop()
    assert rc == 0, err
    assert err == "", err  # the helper writes only on errors
    assert not os.path.exists(e.sock), "socket left behind"


def fault(body):
    return json.loads(body)["fault_message"]


# ---- requests ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
def test_echo_methods(echo, method):
    body = b'{"vcpu_count": 2}' if method in ("PUT", "PATCH") else None
    status, ctype, out = echo.request(method, "/machine-config", body=body)
    assert status == 200
    assert ctype == "application/json"
    assert json.loads(out) == {"method": method, "path": "/machine-config", "body_len": len(body or b"")}


def test_error_and_empty_replies(echo):
    status, ctype, out = echo.request("GET", "/fail")
    assert (status, ctype, fault(out)) == (400, "application/json", "asked to fail")
    status, ctype, out = echo.request("GET", "/empty")
    assert (status, ctype, out) == (204, None, b"")


def test_path_passed_as_sent(echo):
    # no percent-decoding; absolute-form targets reduced to their path, as Firecracker does
    assert json.loads(echo.request("GET", "/a%00b")[2])["path"] == "/a%00b"
    assert json.loads(echo.request("GET", "http://localhost/home")[2])["path"] == "/home"


def test_unsupported_method(echo):
    status, ctype, out = echo.request("POST", "/actions", body=b"{}")
    assert status == 400 and ctype == "application/json"
    assert "Unsupported HTTP method" in fault(out)


def test_body_at_the_limit(echo):
    status, _, out = echo.request("PUT", "/mmds", body=b"x" * BODY_MAX)
    assert status == 200
    assert json.loads(out)["body_len"] == BODY_MAX


@pytest.mark.security
def test_body_one_byte_over(echo):
    # answered as soon as the headers are in, the body unread, the connection closed (as micro_http)
    s = socket.socket(socket.AF_UNIX)
    s.connect(echo.sock)
    s.sendall(b"PUT /mmds HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (BODY_MAX + 1))
    try:
        s.sendall(b"x" * (BODY_MAX + 1))
    except (BrokenPipeError, ConnectionResetError):
        pass
    out = b""
    try:
        s.settimeout(5)
        while chunk := s.recv(65536):
            out += chunk
    except ConnectionResetError:  # AF_UNIX: the server closed with the body unread; its answer came first
        pass
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and b"Content-Type: application/json" in head
    assert fault(body) == f"Request payload with size {BODY_MAX + 1} is larger than the limit of {BODY_MAX} allowed by server."


def test_refused_on_headers_client_still_sends(echo):
    """A client that sends its body after the server answered the headers 400 (a body over the limit) is not
    cut off: its write succeeds (what it sends is read and dropped), then it reads the answer and the end of
    file. Closed at once, the write failed with EPIPE before the client had read anything (seen with Python's
    http.client under load, which sends the body after the headers)."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(echo.sock)
    s.sendall(b"PUT /mmds HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (BODY_MAX + 1))
    s.settimeout(5)
    head = s.recv(65536)  # the answer, before a byte of the body was sent
    assert head.startswith(b"HTTP/1.1 400 "), head
    s.sendall(b"x" * (BODY_MAX + 1))  # BrokenPipeError here before the server drained
    rest = b""
    while chunk := s.recv(65536):
        rest += chunk
    s.close()
    body = (head + rest).partition(b"\r\n\r\n")[2]
    assert fault(body) == f"Request payload with size {BODY_MAX + 1} is larger than the limit of {BODY_MAX} allowed by server."


@pytest.mark.security
def test_chunked_body_over_the_limit(echo):
    chunk = b"x" * 4096
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(BODY_MAX // len(chunk) + 1)) + b"0\r\n\r\n"
    out = echo.raw(b"PUT /mmds HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body, wait=1)
    assert out.startswith(b"HTTP/1.1 400 "), out[:200]
    assert b"larger than the limit" in out


@pytest.mark.security
@pytest.mark.parametrize("limit", [1000, 200000])
def test_configured_payload_limit(sockdir, limit):
    """api_link_start's max_payload (Firecracker's --http-api-max-payload-size): a body at the limit is served,
    one byte over is refused at once with Firecracker's message naming the configured limit."""
    e = Echo(os.path.join(sockdir, "api.sock"), args=[str(limit)])
    try:
        status, _, out = e.request("PUT", "/mmds", body=b"x" * limit)
        assert status == 200 and json.loads(out)["body_len"] == limit
        head = b"PUT /mmds HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (limit + 1)
        out = e.raw(head, wait=2)
        assert out.startswith(b"HTTP/1.1 400 "), out[:200]
        assert fault(out.partition(b"\r\n\r\n")[2]) == (
            f"Request payload with size {limit + 1} is larger than the limit of {limit} allowed by server.")
    finally:
        rc, err = e.stop()
    assert rc == 0 and err == "", err


def test_payload_limit_over_the_largest_refused(sockdir):
    """A limit the link cannot carry in one message (API_BODY_LIMIT_MAX, 255 KiB) is refused before anything
    is created."""
    path = os.path.join(sockdir, "api.sock")
    p = subprocess.run([str(ECHO), path, str(255 * 1024 + 1)], capture_output=True, text=True, timeout=10)
    check_sanitizers(p.stderr)
    assert p.returncode == EXIT_START_FAILED and "largest" in p.stderr, p.stderr
    assert not os.path.exists(path)


def test_pipelined_requests(echo):
    """Requests sent back to back on one connection are answered one after the other, in order."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(echo.sock)
    s.sendall(b"".join(b"PUT /p%d HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" % i for i in range(3)) +
              b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    out = read_all(s, 5)
    paths = [json.loads(part.partition(b"\r\n\r\n")[2])["path"]
             for part in out.split(b"HTTP/1.1 200 OK")[1:]]
    assert paths == ["/p0", "/p1", "/p2", "/last"], out


def test_expect_continue(echo):
    """curl sends "Expect: 100-continue" before a larger body and waits for "100 Continue" (up to 1 s)."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(echo.sock)
    s.settimeout(5)
    s.sendall(b"PUT /mmds HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
    assert s.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
    s.sendall(b"abcd")
    out = s.recv(65536)
    s.close()
    assert out.startswith(b"HTTP/1.1 200 ") and b'"body_len":4' in out, out


def test_chunked_body_within_the_limit(echo):
    out = echo.raw(b"PUT /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", wait=1)
    assert out.startswith(b"HTTP/1.1 200 ")
    assert b'"body_len":5' in out


@pytest.mark.security
@pytest.mark.parametrize("headers", [
    b"Content-Length: 2\r\nContent-Length: 40\r\n",
    b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
], ids=["two-lengths", "length-and-chunked", "two-encodings"])
def test_ambiguous_length_refused(echo, headers):
    """docs/security.md case 26: a request whose length two headers give (the first used to win) is request
    smuggling's shape: 400 at once, the connection closed, nothing after it served."""
    out = echo.raw(b"PUT /x HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n{}GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 400 "), out[:200]
    assert b"Content-Length" in out and out.count(b"HTTP/1.1 ") == 1, out
    assert b"smuggled" not in out
    assert echo.request("GET", "/still-up")[0] == 200


@pytest.mark.security
@pytest.mark.parametrize("line", [b"GET /\x00abc HTTP/1.1", b"GET /a\x00/../b?x=1 HTTP/1.1", b"GET\x00X /abc HTTP/1.1"],
                         ids=["path", "path-with-query", "method"])
def test_nul_in_request_line_refused(echo, line):
    """docs/security.md case 26: a NUL byte in the request line used to cut it ("GET /\\0abc" served as "/"):
    400, never a request with a shortened path."""
    out = echo.raw(line + b"\r\nHost: x\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 400 "), out[:200]
    assert b'"path"' not in out


def test_query_string_still_served(echo):
    # the query string is not part of the path
    assert json.loads(echo.request("GET", "/a?b=c")[2])["path"] == "/a"


@pytest.mark.security
def test_malformed_request_line(echo):
    out = echo.raw(b"GET /x FOO/1.1\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 400 "), out
    # a line that is no request at all: 400, then closed
    out = echo.raw(b"GARBAGE\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 400 "), out
    assert echo.request("GET", "/still-up")[0] == 200


def test_body_without_content_length(echo):
    # as micro_http: no Content-Length means no body; the bytes after the headers are the next request
    out = echo.raw(b"PUT /x HTTP/1.1\r\nHost: x\r\n\r\n{}\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 200 ")
    assert b'"body_len":0' in out
    assert out.count(b"HTTP/1.1 2") == 1


def test_http10_closes(echo):
    out = echo.raw(b"GET /a HTTP/1.0\r\n\r\n", wait=5)  # EOF well before the 5 s: the server closed it
    assert out.startswith(b"HTTP/1.") and b" 200 " in out.split(b"\r\n")[0]
    assert b'"path":"/a"' in out


def test_http10_keep_alive(echo):
    s = socket.socket(socket.AF_UNIX)
    s.connect(echo.sock)
    s.settimeout(5)
    for i in range(2):
        s.sendall(b"GET /k%d HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" % i)
        out = s.recv(65536)
        assert b" 200 " in out and b'"path":"/k%d"' % i in out
    s.close()


def test_http11_keep_alive(echo):
    c = UnixHTTPConnection(echo.sock)
    for i in range(5):
        c.request("PUT", f"/drives/d{i}", body=b"{}")
        r = c.getresponse()
        assert r.status == 200 and json.loads(r.read())["path"] == f"/drives/d{i}"
    c.close()


def test_one_request_at_a_time(echo):
    # api_echo answers /slow after 2 s; a request that arrives meanwhile waits its turn, nothing is lost
    slow = socket.socket(socket.AF_UNIX)
    slow.connect(echo.sock)
    slow.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.2)
    t0 = time.monotonic()
    assert echo.request("GET", "/after")[0] == 200
    assert time.monotonic() - t0 > 1.0
    assert b'"path":"/slow"' in read_all(slow, 1)


def test_reply_in_fragments(echo):
    """A reply larger than one link message arrives whole (api_link.h: fragments); one over API_REPLY_MAX is
    refused by api_link_reply and answered with an error at once."""
    status, ctype, out = echo.request("GET", "/big")
    assert (status, ctype, len(out)) == (200, "application/json", 400002)
    assert json.loads(out) == "0123456789" * 40000
    t0 = time.monotonic()
    assert echo.request("GET", "/huge")[0] == 500
    assert time.monotonic() - t0 < 5  # at once, not after the reply timeout
    assert echo.request("GET", "/still-up")[0] == 200


def timed(fn, out, key):
    t0 = time.monotonic()
    try:
        out[key] = (fn(), time.monotonic() - t0)
    except Exception as e:  # noqa: BLE001  (reported by the assertion on out)
        out[key] = (e, time.monotonic() - t0)


@pytest.mark.security
def test_expired_request_is_never_carried_out(sockdir):
    """docs/security.md case 25: the API's server stopped (SIGSTOP) past the reply timeout (4 s here, through
    $BRISK_API_REPLY_TIMEOUT_S): each request waiting is answered 503 at its own deadline (the one queued
    behind the first does not wait for the first's), and after SIGCONT neither is carried out: the helper
    expired them on the claim word, and the server drops them unread."""
    timeout = 4
    e = Echo(os.path.join(sockdir, "api.sock"), env={"BRISK_API_REPLY_TIMEOUT_S": str(timeout)})
    results = {}
    os.kill(e.proc.pid, signal.SIGSTOP)
    try:
        threads = [threading.Thread(target=timed, args=(lambda: e.request("GET", "/first"), results, "first"))]
        threads[0].start()
        time.sleep(0.5)
        threads.append(threading.Thread(target=timed, args=(lambda: e.request("GET", "/second"), results,
                                                           "second")))
        threads[1].start()
        for t in threads:
            t.join(timeout=30)
    finally:
        os.kill(e.proc.pid, signal.SIGCONT)
    for key in ("first", "second"):
        (status, _, body), took = results[key]
        assert status == 503 and "not carried out" in fault(body), (key, status, body)
        assert took < timeout + 2, f"{key}: answered after {took:.1f} s (its deadline: {timeout} s)"
    assert json.loads(e.request("GET", "/count")[2]) == {"handled": 1}  # only /count itself
    rc, err = e.stop()
    assert rc == 0, err


# ---- hostile and broken clients ---------------------------------------------------------------------------


def test_stalled_client_does_not_block_others(echo):
    stalled = socket.socket(socket.AF_UNIX)
    stalled.connect(echo.sock)
    stalled.sendall(b"PUT /boot-source HTTP/1.1\r\nHost: x\r\nContent-")  # half a header, then nothing
    t0 = time.monotonic()
    status, _, out = echo.request("GET", "/prompt")
    assert status == 200 and json.loads(out)["path"] == "/prompt"
    assert time.monotonic() - t0 < 1.0
    # the stalled client loses its slot at the request deadline, with no request reaching brisk
    t0 = time.monotonic()
    assert read_all(stalled, REQUEST_DEADLINE + 5) == b""
    assert REQUEST_DEADLINE - 2 < time.monotonic() - t0 < REQUEST_DEADLINE + 5


def test_stalled_body_does_not_block_others(echo):
    stalled = socket.socket(socket.AF_UNIX)
    stalled.connect(echo.sock)
    stalled.sendall(b"PUT /mmds HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\":")
    t0 = time.monotonic()
    assert echo.request("GET", "/prompt")[0] == 200
    assert time.monotonic() - t0 < 1.0
    stalled.close()


def raise_fd_limit(need):
    """Raises this process's RLIMIT_NOFILE for `need` sockets, or skips the test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {need}")
    if soft != resource.RLIM_INFINITY and soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def timed_get(echo, path, timeout=5):
    """GET path on a fresh connection: (status, seconds it took)."""
    t0 = time.monotonic()
    c = UnixHTTPConnection(echo.sock, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        return r.status, time.monotonic() - t0
    finally:
        c.close()


def eof_within(s, seconds):
    """True when the server closes s (EOF or reset) within `seconds`."""
    s.settimeout(seconds)
    try:
        while s.recv(65536):
            pass
        return True
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


@pytest.mark.security
def test_tricklers_do_not_delay_others(echo):
    """docs/security.md case 24: 40 connections each sending one header byte a second (the slot limit was 32,
    and every byte reset the idle timeout: a legitimate request waited 51 s behind them). Each GET made while
    they trickle is answered at once; 2 s is a bound generous enough for a loaded 2-core machine."""
    head = b"GET /slowloris HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 64
    tricklers = []
    for _ in range(40):
        s = socket.socket(socket.AF_UNIX)
        s.connect(echo.sock)
        tricklers.append(s)
    try:
        for i in range(5):
            for s in tricklers:
                try:
                    s.send(head[i:i + 1])
                except OSError:
                    pass
            status, took = timed_get(echo, f"/legit{i}")
            assert status == 200 and took < 2.0, f"GET {i} took {took:.2f} s behind 40 tricklers"
            time.sleep(1)
    finally:
        for s in tricklers:
            s.close()


@pytest.mark.security
def test_trickler_closed_at_the_total_deadline(echo):
    """docs/security.md case 24: a request must arrive whole within REQUEST_DEADLINE s of the connection;
    bytes trickling in (here one every 0.5 s) do not extend it, as they extended the old idle timeout."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(echo.sock)
    t0 = time.monotonic()
    head = b"GET / HTTP/1.1\r\nX-Pad: " + b"a" * 200
    closed = False
    for b in head:
        try:
            s.send(bytes([b]))
        except OSError:
            closed = True
            break
        if eof_within(s, 0.5):
            closed = True
            break
        if time.monotonic() - t0 > REQUEST_DEADLINE + 10:
            break
    took = time.monotonic() - t0
    s.close()
    assert closed, f"a trickler was still connected after {took:.1f} s"
    assert took > REQUEST_DEADLINE - 2, f"closed after {took:.1f} s, before its deadline"
    assert echo.request("GET", "/still-up")[0] == 200


@pytest.mark.security
def test_full_house_evicts_the_oldest_incomplete(echo):
    """docs/security.md case 24: every one of the CONN_LIMIT slots taken by a client that sent half a header:
    a new client is still served at once (it evicts the incomplete connection whose deadline is nearest, the
    oldest), and connections whose complete request is being served are never the ones evicted."""
    raise_fd_limit(CONN_LIMIT + 200)
    busy = socket.socket(socket.AF_UNIX)  # a complete request, with brisk (api_echo answers /slow after 2 s)
    busy.connect(echo.sock)
    busy.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    idle = []
    try:
        for _ in range(CONN_LIMIT):
            s = socket.socket(socket.AF_UNIX)
            s.connect(echo.sock)
            s.sendall(b"GET /x HTTP/1.1\r\nHo")
            idle.append(s)
        time.sleep(0.5)  # the helper has accepted them all
        status, took = timed_get(echo, "/legit")
        assert status == 200 and took < 2.0, f"the new client waited {took:.2f} s"
        assert b'"path":"/slow"' in read_all(busy, 5), "the request being served was evicted"
        assert eof_within(idle[0], 2), "the oldest incomplete connection was not the one evicted"
    finally:
        for s in idle:
            s.close()
        busy.close()
    assert echo.request("GET", "/still-up")[0] == 200


def test_disconnect_mid_body(echo):
    for _ in range(3):
        s = socket.socket(socket.AF_UNIX)
        s.connect(echo.sock)
        s.sendall(b"PUT /mmds HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + b"y" * 10)
        s.close()
    status, _, out = echo.request("PUT", "/after", body=b"{}")
    assert status == 200 and json.loads(out)["path"] == "/after"


def test_disconnect_while_brisk_works(echo):
    s = socket.socket(socket.AF_UNIX)
    s.connect(echo.sock)
    s.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.2)
    s.close()  # the reply comes back to a closed connection
    assert echo.request("GET", "/after")[0] == 200


@pytest.mark.security
def test_oversized_headers(echo):
    out = echo.raw(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 431 "), out[:100]
    assert "larger than the limit" in fault(out.partition(b"\r\n\r\n")[2])
    assert echo.request("GET", "/still-up")[0] == 200


# ---- the socket path and the helper's life ----------------------------------------------------------------


def start_failure(path):
    p = subprocess.run([str(ECHO), path], capture_output=True, text=True, timeout=10)
    check_sanitizers(p.stderr)
    assert p.returncode == EXIT_START_FAILED, (p.returncode, p.stdout, p.stderr)
    return p.stderr


def test_existing_regular_file_untouched(sockdir):
    path = os.path.join(sockdir, "api.sock")
    Path(path).write_text("precious")
    assert "not a socket" in start_failure(path)
    assert Path(path).read_text() == "precious"


def test_live_socket_refused(sockdir):
    path = os.path.join(sockdir, "api.sock")
    live = socket.socket(socket.AF_UNIX)
    live.bind(path)
    live.listen(1)
    try:
        assert "in use" in start_failure(path)
        assert os.path.exists(path)
    finally:
        live.close()


def test_stale_socket_replaced(sockdir):
    path = os.path.join(sockdir, "api.sock")
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)
    stale.close()  # the file stays, nobody listens
    e = Echo(path)
    assert e.request("GET", "/")[0] == 200
    assert e.stop()[0] == 0
    assert not os.path.exists(path)


def connect_when_it_appears(path, proc, timeout=20.0):
    """Connects the moment `path` exists (polled every millisecond); returns None or the connect error."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert proc.poll() is None and time.monotonic() < deadline, "no socket appeared"
        time.sleep(0.001)
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        return None
    except OSError as e:
        return e
    finally:
        s.close()


@pytest.mark.skipif(not shutil.which("strace"), reason="strace missing: it widens the bind-to-listen window")
@pytest.mark.parametrize("stale", [False, True], ids=["absent", "stale"])
def test_path_appears_only_once_listening(sockdir, stale):
    """A client that connects as soon as the path exists (Firecracker's test framework does) must not be
    refused: the socket is bound and listening under a temporary name and only then renamed into place.
    strace delays listen(2) by 1 s to make the old window (bind, then listen) wide and certain."""
    path = os.path.join(sockdir, "api.sock")
    if stale:
        old = socket.socket(socket.AF_UNIX)
        old.bind(path)
        old.close()
        os.rename(path, path + ".old")  # absent while brisk starts, then stale-replaced below
    p = subprocess.Popen(["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=listen",
                          "-e", "inject=listen:delay_enter=1000000", str(ECHO), path],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ,  # LeakSanitizer cannot run under ptrace: the rest of ASan can
                              "ASAN_OPTIONS": ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                                     "detect_leaks=0"]))})
    try:
        if stale:
            os.rename(path + ".old", path)
            assert p.stdout.readline() == "ready\n", p.stderr.read()
            assert connect_when_it_appears(path, p) is None
        else:
            err = connect_when_it_appears(path, p)
            assert err is None, f"connected as soon as {path} appeared: {err!r}"
            assert p.stdout.readline() == "ready\n", p.stderr.read()
        assert sorted(os.listdir(sockdir)) == ["api.sock"]  # no temporary name left
    finally:
        children = Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
        for pid in children[:1]:  # api_echo (strace's child): SIGTERM is its clean exit
            os.kill(int(pid), signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            raise
    check_sanitizers(p.stderr.read())
    assert not os.path.exists(path)


def test_path_too_long(sockdir):
    path = os.path.join(sockdir, "x" * 120)
    assert "limit" in start_failure(path)
    assert not os.path.exists(path)


def test_directory_missing(sockdir):
    assert "does not exist" in start_failure(os.path.join(sockdir, "nodir", "api.sock"))


def test_socket_unlinked_on_exit_request(sockdir):
    e = Echo(os.path.join(sockdir, "api.sock"))
    pid = e.helper_pid()
    assert e.request("GET", "/exit")[0] == 200
    assert e.proc.wait(timeout=10) == 0
    check_sanitizers(e.proc.stderr.read())
    assert not os.path.exists(e.sock)
    assert gone(pid, wait=0.1)


def test_helper_killed(sockdir):
    e = Echo(os.path.join(sockdir, "api.sock"))
    os.kill(e.helper_pid(), signal.SIGKILL)
    assert e.proc.wait(timeout=10) == EXIT_HELPER_GONE
    check_sanitizers(e.proc.stderr.read())
    assert not os.path.exists(e.sock)


def test_helper_exits_with_brisk(sockdir):
    e = Echo(os.path.join(sockdir, "api.sock"))
    pid = e.helper_pid()
    e.proc.kill()  # no clean-up in api_echo: PR_SET_PDEATHSIG takes the helper down
    e.proc.wait(timeout=10)
    assert gone(pid)
