"""brisk restore --clone-server: one snapshot prepared once, one forked VM per request (docs/cli.md "Clone
server"). From inside the guest (guests/vmgenid.c hold=1): every clone sees a new VM Generation ID of its own,
writes it over 256 pages, and reads back only its own; the memory file is unchanged. Around it: the wire's
replies (pid, exit_code, error), the connection as the clone's handle (shut it: the clone stops, 16), malformed
requests refused with the server unharmed, the server's own refusals, its end (SIGTERM: clones stopped, socket
removed), and `brisk clone`. Needs KVM."""
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import BRISK, EXIT_GUEST_OK, EXIT_STOPPED, EXIT_USAGE, KVM_REASON, check_sanitizers, guest, sha, \
    short_tmpdir
from test_snapshot import Brisk
from test_vmgenid import CHANGED_RE, CLOCK_RESTORED, PRIVATE_RE

pytestmark = pytest.mark.usefixtures("kvm")

WRITTEN = "vmgenid: written: 256 pages"


def snapshot_waiting(d, sockdir, run_args, ready):
    """`brisk run RUN_ARGS` (64 MiB, its API at sockdir/g.sock) until its output matches `ready`, then paused,
    snapshotted to d/v.state and d/v.mem, and killed: (state, mem)."""
    sock = os.path.join(sockdir, "g.sock")
    b = Brisk(["run", "--memory", "64", *run_args, "--api-sock", sock], sock=sock)
    try:
        b.wait_for(ready, timeout=60)
        b.api.pause()
        state, mem = os.path.join(d, "v.state"), os.path.join(d, "v.mem")
        assert b.api.snapshot_create(state, mem).status == 204
    finally:
        b.kill()
        check_sanitizers(b.err)
    return state, mem


@pytest.fixture(scope="module")
def snap(tmp_path_factory):
    """(state, mem, sockdir): the vmgenid guest (hold=1, 64 MiB) snapshotted while it waits."""
    if KVM_REASON:
        pytest.skip(KVM_REASON)
    sockdir = short_tmpdir("bcs")
    state, mem = snapshot_waiting(str(tmp_path_factory.mktemp("clones")), sockdir,
                                  ["--kernel", guest("vmgenid"), "--cmdline", "hold=1"], r"^vmgenid: waiting$")
    yield state, mem, sockdir
    shutil.rmtree(sockdir, ignore_errors=True)


def start_server(procs, snap, name, *extra):
    state, mem, sockdir = snap
    sock = os.path.join(sockdir, f"{name}{len(os.listdir(sockdir))}.sock")  # a fresh path: not a killed one's
    b = Brisk(["restore", "--snapshot", state, "--mem", mem, "--clone-server", sock, "--log-level", "info", *extra])
    procs.append(b)
    deadline = time.monotonic() + 60
    while not os.path.exists(sock):  # published once it listens (unix_listen.h)
        assert b.proc.poll() is None and time.monotonic() < deadline, f"no clone server at {sock}:\n{b.err}"
        time.sleep(0.02)
    return b, sock


class Clone:
    """One request: a pipe for the clone's stdin, files for its stdout and stderr, the connection."""

    def __init__(self, sock, tmp, name, body=None):
        self.out_path, self.err_path = os.path.join(tmp, f"{name}.out"), os.path.join(tmp, f"{name}.err")
        self.report = os.path.join(tmp, f"{name}.json")
        rd, self.stdin = os.pipe()
        out = os.open(self.out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(self.err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.connect(sock)
        body = json.dumps({"report_json": self.report}).encode() if body is None else body
        socket.send_fds(self.s, [body], [rd, out, err])
        for fd in (rd, out, err):
            os.close(fd)
        self.pid = self.reply()["pid"]

    def reply(self, timeout=60):
        self.s.settimeout(timeout)
        msg = self.s.recv(4096)
        assert msg, "the server closed the connection"
        return json.loads(msg)

    def out(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def err(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def wait_for(self, text, timeout=60):
        deadline = time.monotonic() + timeout
        while text not in self.out():
            assert time.monotonic() < deadline, f"no '{text}' after {timeout} s:\n{self.out()}\n{self.err()}"
            time.sleep(0.05)

    def release(self):
        os.write(self.stdin, b"x")
        os.close(self.stdin)
        self.stdin = -1

    def close(self):
        if self.stdin >= 0:
            os.close(self.stdin)
        self.s.close()


def serve_one(sock, tmp, name):
    """One clone run to its end: it writes its pages, is released, exits 0 (the server says so). Its pid."""
    c = Clone(sock, str(tmp), name)
    try:
        c.wait_for(WRITTEN)
        c.release()
        assert c.reply() == {"exit_code": EXIT_GUEST_OK}
    finally:
        c.close()
    return c.pid


def status_field(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return re.search(rf"^{field}:\s*(\S+)", f.read(), re.M).group(1)


def alive(pid):
    """Whether pid exists and is not a zombie (a killed server's clone is reaped by init, eventually)."""
    try:
        return status_field(pid, "State") != "Z"
    except OSError:
        return False


def child_of(pid, parent):
    """Whether pid is (still) parent's child, a zombie included; False once it is reaped."""
    try:
        return ppid(pid) == parent
    except (OSError, ValueError, IndexError):
        return False


def ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and ppid(int(d)) == pid:
                out.append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    return out


def wait_children(pid, n, timeout=60):
    deadline = time.monotonic() + timeout
    while len(children(pid)) != n:
        assert time.monotonic() < deadline, f"{len(children(pid))} children, not {n}"
        time.sleep(0.05)
    return sorted(children(pid))


def wait_ready(server, n, timeout=60):
    """The pids of the server's n warm clones once each said it is built (its log at info)."""
    deadline = time.monotonic() + timeout
    while len(re.findall(r"warm clone (\d+) ready", server.err)) < n:
        assert time.monotonic() < deadline, server.err
        time.sleep(0.05)
    return sorted(int(p) for p in re.findall(r"warm clone (\d+) ready", server.err))[:n] if n else []


@pytest.mark.parametrize("pool", [0, 2])
def test_clones_each_their_own(snap, procs, tmp_path, pool):
    """Three clones at once from one server, forked per request or two of them warm (built ahead): children of the
    server, confined (seccomp filter mode 2); each sees a new VM Generation ID (not the boot's, not a sibling's),
    writes it over 256 pages and reads back only its own; released, each exits 0 and the server says so; each
    --report-json has the phases from the request on; the memory file is unchanged. With the pool the first two
    requests go to the two warm clones (built: they said so), and the pool is refilled."""
    state, mem, _ = snap
    before = sha(mem)
    server, sock = start_server(procs, snap, "three", "--clone-pool", str(pool))
    warm = wait_ready(server, pool)
    clones = [Clone(sock, str(tmp_path), f"c{i}") for i in range(3)]
    if pool:
        assert sorted(c.pid for c in clones[:2]) == warm and clones[2].pid not in warm
    try:
        for c in clones:
            c.wait_for(WRITTEN)
            assert ppid(c.pid) == server.proc.pid
            assert status_field(c.pid, "Seccomp") == "2"
        ids = []
        for c in clones:
            c.release()
            assert c.reply() == {"exit_code": EXIT_GUEST_OK}, c.err()
            out = c.out()
            m = CHANGED_RE.search(out)
            assert m and PRIVATE_RE.search(out) and CLOCK_RESTORED in out, out
            ids.append(m.group(2))
            check_sanitizers(c.err())
            with open(c.report) as f:
                phases = {p["name"]: p["us"] for p in json.load(f)["phases"]}
            assert 0 < phases["vCPUs ready"] <= phases["first KVM_RUN"], phases
            assert "snapshot read" not in phases  # the server read it once, before any request
        assert len(set(ids)) == 3, ids
    finally:
        for c in clones:
            c.close()
    assert sha(mem) == before
    assert server.proc.poll() is None
    refilled = wait_children(server.proc.pid, pool)  # the pool is full again, with new clones
    assert not set(refilled) & {c.pid for c in clones}
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == EXIT_STOPPED
    assert not os.path.exists(sock)
    assert not [p for p in refilled if os.path.exists(f"/proc/{p}")]  # the warm clones ended with the server


def test_warm_clone_lost(snap, procs, tmp_path):
    """A warm clone that dies before any request (SIGKILL here): the server says so, switches the pool off and
    forks for the next request, which runs."""
    server, sock = start_server(procs, snap, "lost", "--clone-pool", "1")
    [warm] = wait_children(server.proc.pid, 1)
    os.kill(warm, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while "forked per request from now on" not in server.err:
        assert time.monotonic() < deadline, server.err
        time.sleep(0.05)
    assert serve_one(sock, tmp_path, "after") != warm
    assert children(server.proc.pid) == []


def wait_log(server, regex, timeout=60):
    """The first match of regex in the server's stderr (its log at info), waited for."""
    deadline = time.monotonic() + timeout
    while not (m := re.search(regex, server.err)):
        assert time.monotonic() < deadline, f"no /{regex}/ in the server's log:\n{server.err}"
        time.sleep(0.05)
    return m


def test_warm_clone_replaced_once_it_runs(snap, procs, tmp_path):
    """A warm clone that takes a request tells the server once its guest runs, and only then is its replacement
    forked (the fork and its build would compete with the clone's start for the CPUs): the log says so before
    the replacement's own "ready". A warm clone whose request fails before its guest runs (its --report-json in a
    directory that does not exist) is replaced all the same, and the next request goes to a warm clone again."""
    server, sock = start_server(procs, snap, "replace", "--clone-pool", "1")
    [first] = wait_ready(server, 1)
    c = Clone(sock, str(tmp_path), "runs")
    try:
        assert c.pid == first
        m = wait_log(server, rf"clone {first} runs its guest; its replacement is forked now")
        second = int(wait_log(server, rf"warm clone (?!{first}\b)(\d+) ready").group(1))
        assert server.err.index(f"warm clone {second} ready") > m.start(), server.err
        assert second in children(server.proc.pid)
        c.wait_for(WRITTEN)
        c.release()
        assert c.reply() == {"exit_code": EXIT_GUEST_OK}, c.err()
    finally:
        c.close()
    body = json.dumps({"report_json": str(tmp_path / "no-such-dir" / "r.json")}).encode()
    bad = Clone(sock, str(tmp_path), "bad", body=body)
    try:
        assert bad.pid == second
        assert bad.reply()["exit_code"] == EXIT_USAGE, bad.err()
    finally:
        bad.close()
    wait_log(server, rf"clone {second} ended before its guest ran; its replacement is forked now")
    third = int(wait_log(server, rf"warm clone (?!(?:{first}|{second})\b)(\d+) ready").group(1))
    assert serve_one(sock, tmp_path, "after") == third
    assert server.proc.poll() is None


@pytest.mark.security
def test_requester_gone_stops_its_clone(snap, procs, tmp_path):
    """Shutting the connection's sending side stops the clone (SIGTERM: exit 16, still reported on the
    connection); closing it outright stops another (its process ends); the server serves on."""
    server, sock = start_server(procs, snap, "gone")
    a = Clone(sock, str(tmp_path), "a")
    b = Clone(sock, str(tmp_path), "b")
    try:
        a.wait_for(WRITTEN)
        b.wait_for(WRITTEN)
        a.s.shutdown(socket.SHUT_WR)
        assert a.reply() == {"exit_code": EXIT_STOPPED}, a.err()
        b.s.close()
        deadline = time.monotonic() + 30
        while child_of(b.pid, server.proc.pid):
            assert time.monotonic() < deadline, "the clone of a closed connection still runs"
            time.sleep(0.05)
        serve_one(sock, tmp_path, "c")
    finally:
        a.close()
        b.close()
    assert server.proc.poll() is None


@pytest.mark.security
@pytest.mark.parametrize("body,nfds,why", [
    (b"not json", 3, "clone request"),
    (b'{"kernel": "x"}', 3, 'unknown member "kernel"'),
    (b'{"report_json": "relative.json"}', 3, "absolute path"),
    (b'{"report_json": 7}', 3, "must be a string"),
    (b'{"report_json": "/a\\u0000b"}', 3, "NUL"),
    (b"[]", 3, "clone request"),
    (b"{}", 2, "send none or 3"),
    (b"{}", 4, "4 descriptors came with it"),
    (b"{}", 9, "longer than 4095 bytes or more than 3 descriptors"),
    (b"{" + b" " * 5000 + b"}", 3, "longer than 4095 bytes"),
    (b'{"vsock_override": "/v.sock"}', 3, "vsock_override must be an object with only uds_path"),
    (b'{"vsock_override": {"uds_path": "v.sock"}}', 3, "vsock_override.uds_path must be an absolute path"),
], ids=["not-json", "unknown", "relative", "not-string", "nul", "array", "two-fds", "four-fds", "nine-fds", "oversize",
        "vsock-not-object", "vsock-relative"])
def test_bad_requests_refused(snap, procs, tmp_path, body, nfds, why):
    """A malformed request gets {"error": ..., "exit_code": 2} and its connection closed; no clone; the server
    then serves a good request."""
    server, sock = start_server(procs, snap, "bad")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(sock)
    fds = [os.open("/dev/null", os.O_RDWR) for _ in range(nfds)]
    try:
        socket.send_fds(s, [body], fds)
        s.settimeout(30)
        r = json.loads(s.recv(4096))
        assert r["exit_code"] == EXIT_USAGE and why in r["error"], r
        assert s.recv(4096) == b""  # closed
    finally:
        for fd in fds:
            os.close(fd)
        s.close()
    quiet = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # connects and goes without a word
    quiet.connect(sock)
    quiet.close()
    serve_one(sock, tmp_path, "good")
    assert server.proc.poll() is None


@pytest.mark.security
def test_connection_limit(snap, procs, tmp_path):
    """1,024 connections that say nothing take every slot: the next one is told so (exit_code 4) and closed; once
    they go, a request is served."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 1100:
        pytest.skip(f"RLIMIT_NOFILE's hard limit is {hard}: this test needs 1,100 descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    server, sock = start_server(procs, snap, "limit")
    quiet = []
    try:
        for _ in range(1024):
            quiet.append(socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET))
            quiet[-1].connect(sock)
        extra = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        extra.connect(sock)
        extra.settimeout(60)
        r = json.loads(extra.recv(4096))
        assert r["exit_code"] == 4 and "1024 connections (clones) at once" in r["error"], r
        extra.close()
    finally:
        for q in quiet:
            q.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    serve_one(sock, tmp_path, "after")
    assert server.proc.poll() is None


@pytest.mark.security
def test_server_refusals(snap, tmp_path):
    """What the server refuses before it listens, exit status 2 and a message: another VM-less option beside it,
    a path that is a regular file (left untouched), a Uffd backend."""
    state, mem, sockdir = snap
    regular = os.path.join(sockdir, "file")
    with open(regular, "w") as f:
        f.write("keep")
    cases = [
        (["--api-sock", os.path.join(sockdir, "api.sock")], "not with --api-sock"),
        (["--clone-pool", "65"], "invalid --clone-pool '65'"),
        (["--report-json", str(tmp_path / "r.json")], "not with --report-json"),
    ]
    for extra, why in cases:
        r = subprocess.run([str(BRISK), "restore", "--snapshot", state, "--mem", mem, "--clone-server",
                            os.path.join(sockdir, "x.sock"), *extra], capture_output=True, text=True, timeout=60)
        assert r.returncode == EXIT_USAGE and why in r.stderr, r.stderr
    r = subprocess.run([str(BRISK), "restore", "--snapshot", state, "--mem", mem, "--clone-pool", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == EXIT_USAGE and "--clone-pool belongs to --clone-server" in r.stderr, r.stderr
    r = subprocess.run([str(BRISK), "restore", "--snapshot", state, "--mem", mem, "--clone-server", regular],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == EXIT_USAGE and "exists and is not a socket" in r.stderr, r.stderr
    with open(regular) as f:
        assert f.read() == "keep"
    r = subprocess.run([str(BRISK), "restore", "--snapshot", state, "--uffd", os.path.join(sockdir, "u.sock"),
                        "--clone-server", os.path.join(sockdir, "y.sock")], capture_output=True, text=True, timeout=60)
    assert r.returncode == EXIT_USAGE and "--uffd" in r.stderr, r.stderr
    check_sanitizers(r.stderr)


def test_server_end_stops_its_clones(snap, procs, tmp_path):
    """SIGTERM to the server: its running clone stops (its requester is told 16), its warm clone ends, the server
    exits 16 and its socket is gone. SIGKILL to another server: its clone gets SIGTERM (the parent-death signal)
    and stops."""
    server, sock = start_server(procs, snap, "end", "--clone-pool", "1")
    c = Clone(sock, str(tmp_path), "c")
    try:
        c.wait_for(WRITTEN)
        server.proc.send_signal(signal.SIGTERM)
        assert c.reply() == {"exit_code": EXIT_STOPPED}
        assert server.wait(timeout=30) == EXIT_STOPPED
        assert not os.path.exists(f"/proc/{c.pid}")
        assert not os.path.exists(sock)
        assert children(server.proc.pid) == []
    finally:
        c.close()
    server, sock = start_server(procs, snap, "killed")
    c = Clone(sock, str(tmp_path), "orphan")
    try:
        c.wait_for(WRITTEN)
        server.proc.kill()
        deadline = time.monotonic() + 30
        while "stopping on Terminated" not in c.err():
            assert time.monotonic() < deadline, c.err()
            time.sleep(0.05)
        while alive(c.pid):
            assert time.monotonic() < deadline, "the clone of a killed server still runs"
            time.sleep(0.05)
    finally:
        c.close()


def test_brisk_clone_command(snap, procs, tmp_path):
    """`brisk clone --server SOCK`: the clone on this process's stdio, its exit status this command's; a server
    that is not there is a usage error."""
    server, sock = start_server(procs, snap, "cli")
    report = tmp_path / "r.json"
    r = subprocess.run([str(BRISK), "clone", "--server", sock, "--report-json", str(report)], input="x",
                       capture_output=True, text=True, timeout=120)
    check_sanitizers(r.stderr)
    assert r.returncode == EXIT_GUEST_OK, r.stderr
    assert WRITTEN in r.stdout and PRIVATE_RE.search(r.stdout), r.stdout
    assert "first KVM_RUN" in report.read_text()
    r = subprocess.run([str(BRISK), "clone", "--server", str(tmp_path / "none.sock")], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == EXIT_USAGE and "is brisk restore --clone-server running there?" in r.stderr, r.stderr
    assert server.proc.poll() is None


VSOCK_CID, VSOCK_PORT = 42, 1234


@pytest.fixture(scope="module")
def vsock_snap(tmp_path_factory):
    """(state, mem, sockdir): guests/virtio-vsock.c waiting for the host's connection to its port 1234 (64 MiB,
    --vsock on sockdir/v.sock), snapshotted; the socket its brisk (killed) left is removed."""
    if KVM_REASON:
        pytest.skip(KVM_REASON)
    sockdir = short_tmpdir("bcv")
    uds = os.path.join(sockdir, "v.sock")
    state, mem = snapshot_waiting(str(tmp_path_factory.mktemp("vclones")), sockdir,
                                  ["--kernel", guest("virtio-vsock"), "--vsock", f"cid={VSOCK_CID},uds={uds}",
                                   "--cmdline", f"expect_cid={VSOCK_CID} listen={VSOCK_PORT} listen_ms=240000"],
                                  r"CHECK event_buffer_posted: PASS")
    if os.path.exists(uds):
        os.unlink(uds)
    yield state, mem, sockdir
    shutil.rmtree(sockdir, ignore_errors=True)


def vsock_echo(uds, n):
    """CONNECT to the guest's port through `uds`, n bytes of the guest's pattern sent (it checks them), the echo
    read back to EOF: whether it is what was sent."""
    data = bytes(((i * 7) + (i >> 10)) & 0xFF for i in range(n))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    try:
        s.connect(uds)
        s.sendall(f"CONNECT {VSOCK_PORT}\n".encode())
        line = b""
        while not line.endswith(b"\n") and len(line) < 64 and (b := s.recv(1)):
            line += b
        assert re.fullmatch(rb"OK \d+\n", line), line
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = bytearray()
        while b := s.recv(65536):
            got += b
    finally:
        s.close()
    return bytes(got) == data


def vsock_body(clone, path):
    return json.dumps({"report_json": clone, "vsock_override": {"uds_path": path}}).encode()


@pytest.mark.parametrize("pool", [0, 2])
def test_vsock_clones_at_once(vsock_snap, procs, tmp_path, pool):
    """Many clones of a snapshot with vsock at once, each told its own socket path (the request's vsock_override,
    Firecracker's snapshot/load field): three clones, forked per request or two of them warm (built before the
    request said where), each listening on its path; the host connects through each, the guest answers on its
    port and echoes 64 KiB checked byte for byte, then ends its run (exit 0, "listen_echo: PASS"); the
    snapshot's own path is not made. A fourth request without an override listens on the snapshot's path; a
    fifth beside it is refused there (in use: exit 2, the message on its stderr) and the fourth still echoes.
    Each clone's socket is removed when it ends."""
    state, mem, sockdir = vsock_snap
    uds = os.path.join(sockdir, "v.sock")
    server, sock = start_server(procs, vsock_snap, f"vs{pool}", "--clone-pool", str(pool))
    wait_ready(server, pool)
    paths = [os.path.join(sockdir, f"p{pool}c{i}.sock") for i in range(3)]
    clones = [Clone(sock, str(tmp_path), f"c{i}", vsock_body(str(tmp_path / f"c{i}.json"), p))
              for i, p in enumerate(paths)]
    try:
        for c, p in zip(clones, paths):
            deadline = time.monotonic() + 60
            while not os.path.exists(p):
                assert time.monotonic() < deadline, f"{p} never appeared:\n{c.err()}"
                time.sleep(0.02)
        assert not os.path.exists(uds)
        for c, p in zip(clones, paths):
            assert vsock_echo(p, 64 << 10), c.out()
        for c, p in zip(clones, paths):
            assert c.reply() == {"exit_code": EXIT_GUEST_OK}, c.out() + c.err()
            assert "CHECK listen_echo: PASS" in c.out() and "virtio-vsock: PASS" in c.out(), c.out()
            check_sanitizers(c.err())
            assert not os.path.exists(p)
    finally:
        for c in clones:
            c.close()
    first = Clone(sock, str(tmp_path), "first")
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(uds):
            assert time.monotonic() < deadline, first.err()
            time.sleep(0.02)
        second = Clone(sock, str(tmp_path), "second")
        try:
            assert second.reply() == {"exit_code": EXIT_USAGE}, second.err()
            assert f"--vsock uds={uds}: {uds} is in use: another process listens on it" in second.err()
        finally:
            second.close()
        assert vsock_echo(uds, 4096)
        assert first.reply() == {"exit_code": EXIT_GUEST_OK}, first.err()
    finally:
        first.close()
    assert not os.path.exists(uds)
    assert server.proc.poll() is None


def test_vsock_override_refused(snap, vsock_snap, procs, tmp_path):
    """A vsock_override for a snapshot without vsock: that clone ends with exit 2 saying so, the server serves on;
    `brisk clone --vsock-uds` with a relative path sends it absolute (the server's working directory is not the
    client's) and the clone listens there."""
    server, sock = start_server(procs, snap, "novs")
    c = Clone(sock, str(tmp_path), "novs", vsock_body(str(tmp_path / "n.json"), "/tmp/x.sock"))
    try:
        assert c.reply() == {"exit_code": EXIT_USAGE}, c.err()
        assert "vsock_override /tmp/x.sock: the snapshot's VM has no vsock device" in c.err(), c.err()
    finally:
        c.close()
    assert server.proc.poll() is None
    _, _, sockdir = vsock_snap
    vserver, vsock = start_server(procs, vsock_snap, "vscli")
    path = os.path.join(sockdir, "cli.sock")
    p = subprocess.Popen([str(BRISK), "clone", "--server", vsock, "--vsock-uds", "cli.sock"], cwd=sockdir,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(path):
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.02)
        assert vsock_echo(path, 4096)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    check_sanitizers(err)
    assert p.returncode == EXIT_GUEST_OK and "CHECK listen_echo: PASS" in out, out + err
    assert vserver.proc.poll() is None
