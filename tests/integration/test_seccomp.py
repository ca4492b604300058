"""Per-thread seccomp filters (docs/security.md "Seccomp"): every thread of a running brisk
and of its helpers is filtered (Seccomp: 2), pause and snapshot run under the main thread's filter, a denied
call ends the process with status 18 and a line naming the thread and the syscall (BRISK_SECCOMP_SELFTEST), and
--seccomp off turns it all off."""
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from apiclient import BriskProcess
from conftest import BRISK, EXIT_HOST, EXIT_STOPPED, EXIT_USAGE, boot, check_sanitizers, guest, run_brisk

EXIT_SECCOMP = 18  # include/brisk/exitcode.h
DENIED = re.compile(r"brisk: seccomp: thread (\S+) called denied syscall (\S+) \(nr (\d+)\)")


def seccomp_modes(pid):
    """{tid: (thread name, Seccomp: value)} for every thread of process pid."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        mode = re.search(r"^Seccomp:\s+(\d+)", status, re.M)
        name = re.search(r"^Name:\s+(.*)$", status, re.M)
        out[int(task.name)] = (name.group(1), int(mode.group(1)))
    return out


def children(pid):
    """Direct child processes of pid (brisk-api, brisk-slirp)."""
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids


def wait_for(pred, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def selftest(role, *args, **kw):
    env = dict(os.environ, BRISK_SECCOMP_SELFTEST=role)
    return run_brisk(*args, env=env, timeout=60, **kw)


@pytest.mark.parametrize("role", ["main", "vcpu", "console-out"])
def test_denied_call_is_fatal(kvm, role):
    """Each role's thread, once filtered, calls execve (BRISK_SECCOMP_SELFTEST): the SIGSYS report names the
    thread and the call, and brisk exits with 18."""
    p = selftest(role, "run", "--kernel", guest("counter"), "--cmdline", "console=ttyS0")
    assert p.returncode == EXIT_SECCOMP, p.stderr
    m = DENIED.search(p.stderr)
    assert m, p.stderr
    assert m.group(1) == role and m.group(2) == "execve" and m.group(3) == "59", p.stderr


def test_denied_call_is_fatal_io_and_input(kvm):
    """The I/O event loop (a virtio device) and the console input thread (stdin a pipe) are confined too."""
    for role in ("io", "console-in"):
        p = selftest(role, "run", "--kernel", guest("counter"), "--rng", "--cmdline", "console=ttyS0",
                     stdin=subprocess.PIPE)
        assert p.returncode == EXIT_SECCOMP, (role, p.stderr)
        assert f"thread {role} called denied syscall execve" in p.stderr


def test_denied_call_in_a_block_worker(kvm, tmp_path):
    """A block worker starts on the guest's first request and confines itself."""
    disk = tmp_path / "disk.img"
    disk.write_bytes(b"".join(bytes([(0x30 + n) & 0xFF]) * 512 for n in range(2048)))  # test_virtio_blk's image
    p = selftest("blk", "run", "--kernel", guest("virtio-blk"), "--disk", str(disk), "--cmdline", "pattern=0x30")
    assert p.returncode == EXIT_SECCOMP, p.stderr
    assert "thread blk called denied syscall execve" in p.stderr


def test_helper_denied_call(kvm, tmp_path):
    """brisk-api confines itself before it tells brisk it is ready: a denied call there ends the helper (18),
    which brisk reports as a helper that exited before it was ready."""
    sock = tmp_path / "api.sock"
    p = selftest("brisk-api", "--api-sock", str(sock))
    assert p.returncode in (EXIT_USAGE, EXIT_HOST), p.stderr
    assert "helper exited before it was ready" in p.stderr
    assert "thread brisk-api called denied syscall execve" in p.stderr


def test_seccomp_off(kvm):
    """--seccomp off: no filter anywhere, so the self-test's execve of "" is a harmless ENOENT and the guest runs."""
    p = selftest("vcpu", "run", "--seccomp", "off", "--kernel", guest("counter"), "--cmdline",
                 "console=ttyS0 stop=3")
    assert p.returncode == 0, p.stderr
    assert "seccomp" not in p.stderr


def test_seccomp_environment_default(kvm):
    """BRISK_SECCOMP=off in the environment is --seccomp off's default; an explicit
    --seccomp on wins over it: the self-test's denied call is then fatal again."""
    env = dict(os.environ, BRISK_SECCOMP="off", BRISK_SECCOMP_SELFTEST="vcpu")
    p = run_brisk("run", "--kernel", guest("counter"), "--cmdline", "console=ttyS0 stop=3", env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    p = run_brisk("run", "--seccomp", "on", "--kernel", guest("counter"), "--cmdline", "console=ttyS0", env=env,
                  timeout=60)
    assert p.returncode == EXIT_SECCOMP, p.stderr


def test_seccomp_option_value(kvm):
    p = run_brisk("run", "--seccomp", "maybe", "--kernel", guest("hello"))
    assert p.returncode == EXIT_USAGE
    assert "--seccomp" in p.stderr


def test_every_thread_filtered(kvm, tmp_path):
    """A VM with every kind of thread (vCPUs, the I/O loop with a disk, user-mode net, vsock, entropy and a
    virtio console, the console threads, brisk-api and brisk-slirp): Seccomp: 2 on every thread, before and
    after pause, snapshot create and resume, which the main thread does under its filter."""
    disk = tmp_path / "disk.img"
    disk.write_bytes(bytes(1 << 20))
    sock = tmp_path / "api.sock"
    args = ["run", "--kernel", guest("counter"), "--cpus", "2", "--memory", "64M", "--cmdline", "console=ttyS0",
            "--disk", str(disk), "--net", "user", "--vsock", f"cid=3,uds={tmp_path / 'v.sock'}", "--rng",
            "--console", "virtio", "--api-sock", str(sock)]
    b = BriskProcess(BRISK, args, sock=sock, stdin=subprocess.PIPE)  # stdin a pipe: the console input thread
    try:
        wait_for(lambda: "count 3 " in b.out, what="the counter guest's third line")

        def check_all():
            modes = seccomp_modes(b.proc.pid)
            assert len(modes) >= 5, modes  # main, 2 vCPUs, the I/O loop, the console threads
            assert all(m == 2 for _, m in modes.values()), modes
            kids = children(b.proc.pid)
            assert len(kids) == 2, kids  # brisk-api, brisk-slirp
            for k in kids:
                km = seccomp_modes(k)
                assert km and all(m == 2 for _, m in km.values()), (k, km)

        check_all()
        b.api.pause()
        b.api.snapshot_create(tmp_path / "s.state", tmp_path / "s.mem")
        b.api.resume()
        n = len(b.out)
        wait_for(lambda: len(b.out) > n + 40, what="the counter to go on after the snapshot")
        check_all()
        assert b.proc.poll() is None, b.err
        b.proc.send_signal(signal.SIGTERM)
        assert b.wait() == EXIT_STOPPED, b.err
    finally:
        b.kill()
    check_sanitizers(b.err)
    assert "seccomp" not in b.err, b.err
    assert (tmp_path / "s.state").stat().st_size > 0


def test_restore_under_filter(kvm, tmp_path):
    """A VM restored from a snapshot (brisk restore) is confined like a booted one."""
    sock = tmp_path / "api.sock"
    b = BriskProcess(BRISK, ["run", "--kernel", guest("counter"), "--memory", "64M", "--cmdline", "console=ttyS0",
                             "--api-sock", str(sock)], sock=sock)
    try:
        wait_for(lambda: "count 2 " in b.out, what="the counter guest's second line")
        b.api.pause()
        b.api.snapshot_create(tmp_path / "s.state", tmp_path / "s.mem")
    finally:
        b.kill()
    r = BriskProcess(BRISK, ["restore", "--snapshot", tmp_path / "s.state", "--mem", tmp_path / "s.mem"])
    try:
        wait_for(lambda: "count" in r.out, what="the restored counter to print")
        modes = seccomp_modes(r.proc.pid)
        assert all(m == 2 for _, m in modes.values()), modes
        r.proc.send_signal(signal.SIGTERM)
        assert r.wait() == EXIT_STOPPED, r.err
    finally:
        r.kill()
    assert "seccomp" not in r.err, r.err


def free_tcp_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_slirp_hostfwd_connection_under_filter(kvm):
    """A host connection to a user-mode network's hostfwd port is libslirp's accept(2) in brisk-slirp, under its
    filter (the real-kernel tier found accept missing from the list: the helper died with status 18 and the
    guest's link went down). The connection is taken, the helper lives on, nothing is denied."""
    import socket
    port = free_tcp_port()
    b = BriskProcess(BRISK, ["run", "--kernel", guest("counter"), "--memory", "64M", "--cmdline", "console=ttyS0",
                             "--net", f"user,hostfwd=tcp::{port}-:80"])
    try:
        wait_for(lambda: "count 2 " in b.out, what="the counter guest's second line")
        helpers = children(b.proc.pid)
        assert helpers, "no brisk-slirp helper"
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        time.sleep(0.5)  # libslirp accepts and tries the guest (which has no TCP stack)
        c.close()
        time.sleep(0.3)
        assert all(os.path.exists(f"/proc/{pid}") for pid in helpers), f"brisk-slirp died\n{b.err}"
        n = len(b.out)
        wait_for(lambda: len(b.out) > n, what="the counter to go on")
        b.proc.send_signal(signal.SIGTERM)
        assert b.wait() == EXIT_STOPPED, b.err
    finally:
        b.kill()
    assert "seccomp" not in b.err and "backend is gone" not in b.err, b.err
