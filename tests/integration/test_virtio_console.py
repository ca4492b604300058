"""The virtio console (--console virtio): the conformance guest (guests/virtio-console.c)
against brisk, with its line on stdin and its console output on stdout; a host stdin flood keeps brisk's
memory bounded (docs/security.md case 14), a stalled stdout never freezes the VM, and Ctrl-A x / Ctrl-A Ctrl-A
through a terminal, which is restored afterwards.

The guest's CHECK lines go to the UART, here mostly to a file (--serial file:PATH), so that stdout holds
the virtio console's output alone. Run with the plain and the sanitizer build: BRISK=build/brisk and
BRISK=build/asan/brisk.
"""
import os
import pty
import re
import subprocess
import termios
import threading
import time

import pytest

from conftest import BRISK, EXIT_GUEST_OK, EXIT_STOPPED, check_sanitizers, guest, run_brisk

pytestmark = pytest.mark.usefixtures("kvm")

WINDOW0 = 0xD0001000
NOTIFY0 = WINDOW0 + 0x50
HELLO = "virtio-console: hello from the guest\n"
READY = "virtio-console: ready for a line\n"


def console_args(log, words=""):
    args = ["run", "--kernel", guest("virtio-console"), "--console", "virtio", "--serial", f"file:{log}"]
    return args + (["--cmdline", words] if words else [])


def verdict(log):
    text = log.read_text(errors="replace")
    fails = [line for line in text.splitlines() if "FAIL" in line]
    return text, fails


@pytest.mark.parametrize("words", ["", "event_idx=0", "indirect=0", "event_idx=0 indirect=0"])
def test_conformance(tmp_path, words):
    """A line on stdin reaches the guest (interrupt mode); its poll- and interrupt-mode writes reach stdout."""
    log = tmp_path / "serial.log"
    args = console_args(log, ("expect=hello_brisk " + words).strip())
    p = run_brisk(*args, "--timeline", input="hello_brisk\n", timeout=120)
    text, fails = verdict(log)
    assert p.returncode == EXIT_GUEST_OK, f"{fails}\n{text}\n{p.stderr}"
    assert "virtio-console: PASS" in text
    assert "4096@0xd0001000:5" in text  # the console's window, announced on the command line
    # stdout: the console's output alone, in order (the UART went to the file)
    assert p.stdout.startswith(HELLO + READY + "virtio-console: got [hello_brisk]\n"), p.stdout
    assert "virtio-console: CHECK" not in p.stdout
    # QueueNotify went through KVM_IOEVENTFD: no exit to userspace at the notify register
    assert re.findall(rf"^\d+\s+mmio\s+write\s+0x{NOTIFY0:x}\s+(\d+)", p.stdout, re.M) == []


def test_uart_keeps_stdout_but_not_stdin():
    """--serial stdio with --console virtio: both outputs on stdout, stdin only for the virtio console."""
    for _ in range(3):  # the UART's input thread used to race the console's for the line
        p = run_brisk("run", "--kernel", guest("virtio-console"), "--console", "virtio", "--cmdline",
                      "expect=abc", input="abc\n", timeout=120)
        assert p.returncode == EXIT_GUEST_OK, p.stdout + p.stderr
        assert "virtio-console: PASS" in p.stdout  # the UART's verdict
        assert "virtio-console: got [abc]" in p.stdout  # the console's echo


def test_stdin_eof_without_a_line(tmp_path):
    """EOF on stdin: the guest waits for input that never comes and says so; brisk neither spins nor hangs."""
    log = tmp_path / "serial.log"
    p = run_brisk(*console_args(log, "rx_ms=500"), timeout=60)
    text, _ = verdict(log)
    assert p.returncode != EXIT_GUEST_OK
    assert "CHECK rx_line: FAIL" in text
    assert "CHECK reset: PASS" in text  # the device still answers after the failed wait


@pytest.mark.security
def test_stdin_flood_is_bounded(tmp_path):
    """64 MiB offered on stdin while the guest reads one line: brisk reads only what its bounded ring
    holds (the rest stays with the writer: back-pressure), its memory does not grow, the VM ends normally."""
    log = tmp_path / "serial.log"
    flood = 64 << 20
    chunk = b"y" * 65536
    written = [0]

    def calm():
        p = subprocess.Popen([str(BRISK), *console_args(log, "expect=line")], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        p.stdin.write(b"line\n")
        p.stdin.close()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        check_sanitizers(p.stderr.read().decode(errors="replace"))
        return p.returncode, ru.ru_maxrss

    def feed(pipe):
        try:
            pipe.write(b"line\n")
            while written[0] < flood:
                pipe.write(chunk)
                written[0] += len(chunk)
        except (BrokenPipeError, ValueError, OSError):
            pass

    status, calm_rss = calm()
    assert status == EXIT_GUEST_OK
    p = subprocess.Popen([str(BRISK), *console_args(log, "expect=line")], stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, bufsize=0)
    t = threading.Thread(target=feed, args=(p.stdin,), daemon=True)
    t.start()
    err = []
    reader = threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True)
    reader.start()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    reader.join(10)
    p.stdin.close()
    t.join(10)
    check_sanitizers(err[0].decode(errors="replace") if err else "")
    text, fails = verdict(log)
    assert p.returncode == EXIT_GUEST_OK, f"{fails}\n{text}"
    assert "got [line]" not in text  # (the echo went to stdout, not the log)
    # what brisk took: the pipe's buffer, its 4 KiB input ring and the guest's buffers, not the flood
    assert written[0] < 4 << 20, written[0]
    assert ru.ru_maxrss - calm_rss < 16 << 10, (ru.ru_maxrss, calm_rss)  # KiB


def full_pipe():
    """A pipe whose buffer is full and which nobody reads: (read end, write end)."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    return r, w


@pytest.mark.security
def test_stalled_stdout_does_not_freeze_the_vm(tmp_path):
    """stdout is a full pipe nobody reads: the guest's transmits still complete, the VM ends on its own
    (at most the 1 s flush later) and the lost bytes are reported."""
    log = tmp_path / "serial.log"
    r, w = full_pipe()
    try:
        t0 = time.monotonic()
        p = subprocess.run([str(BRISK), *console_args(log, "expect=z")], input=b"z\n", stdout=w,
                           stderr=subprocess.PIPE, timeout=60)
        elapsed = time.monotonic() - t0
    finally:
        os.close(r)
        os.close(w)
    stderr = p.stderr.decode(errors="replace")
    check_sanitizers(stderr)
    text, fails = verdict(log)
    assert p.returncode == EXIT_GUEST_OK, f"{fails}\n{text}\n{stderr}"
    assert "CHECK tx_irq: PASS" in text and "CHECK tx_echo: PASS" in text
    assert re.search(r"virtio-console output: \d+ bytes dropped \(host output stalled\)", stderr), stderr
    assert elapsed < 30


def spawn_on_pty(log, words):
    """brisk with a terminal on stdin (stdout and stderr are pipes); returns (process, master, slave)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([str(BRISK), *console_args(log, words)], stdin=slave, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    return p, master, slave


def wait_raw(slave, timeout=30):
    """Waits until brisk has put the terminal in raw mode (no ICANON): typed bytes then reach it at once."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not termios.tcgetattr(slave)[3] & termios.ICANON:
            return True
        time.sleep(0.01)
    return False


def finish(p):
    out, err = p.communicate(timeout=60)
    check_sanitizers(err.decode(errors="replace"))
    return out.decode(errors="replace"), err.decode(errors="replace")


@pytest.mark.security
def test_ctrl_a_x_on_a_terminal(tmp_path):
    """Ctrl-A x on the virtio console's terminal stops the VM with status 16; the terminal is restored."""
    log = tmp_path / "serial.log"
    p, master, slave = spawn_on_pty(log, "rx_ms=30000")
    before = termios.tcgetattr(slave)
    try:
        assert wait_raw(slave), "the terminal never went raw"
        t0 = time.monotonic()
        os.write(master, b"\x01x")
        out, err = finish(p)
        assert p.returncode == EXIT_STOPPED, err
        assert time.monotonic() - t0 < 10
        assert termios.tcgetattr(slave) == before
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)
        os.close(slave)


def test_ctrl_a_ctrl_a_on_a_terminal(tmp_path):
    """Ctrl-A Ctrl-A sends one Ctrl-A to the guest; its line comes back; the terminal is restored."""
    log = tmp_path / "serial.log"
    p, master, slave = spawn_on_pty(log, "rx_ms=30000")
    before = termios.tcgetattr(slave)
    try:
        assert wait_raw(slave), "the terminal never went raw"
        os.write(master, b"a\x01\x01b\n")
        out, err = finish(p)
        text, fails = verdict(log)
        assert p.returncode == EXIT_GUEST_OK, f"{fails}\n{text}\n{err}"
        assert "virtio-console: got [a\x01b]\n" in out, repr(out)
        assert termios.tcgetattr(slave) == before
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)
        os.close(slave)


def test_ctrl_a_x_when_the_guest_never_reads():
    """A guest that never reads its console (here: no virtio driver at all) with a full input ring: the
    terminal is still read, what cannot be queued is dropped (said once), and Ctrl-A x still ends the VM."""
    master, slave = pty.openpty()
    p = subprocess.Popen([str(BRISK), "run", "--kernel", guest("flood"), "--console", "virtio", "--serial", "none",
                          "--cmdline", "bytes=100000000000"], stdin=slave, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    before = termios.tcgetattr(slave)
    try:
        assert wait_raw(slave), "the terminal never went raw"
        for _ in range(160):  # 10 KiB typed: more than the 4 KiB input ring
            os.write(master, b"k" * 64)
        os.write(master, b"\x01x")
        out, err = finish(p)
        assert p.returncode == EXIT_STOPPED, err
        assert "typed input dropped" in err
        assert termios.tcgetattr(slave) == before
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)
        os.close(slave)
