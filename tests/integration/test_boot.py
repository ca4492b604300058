"""Booting the test guests: output, exit statuses, devices, signals, stalled output (needs KVM)."""
import os
import re
import select
import signal
import subprocess
import time

import pytest

from conftest import (BRISK, EXIT_GUEST_OK, EXIT_STOPPED, EXIT_TRIPLE_FAULT, boot, check_sanitizers,
                      debug_exit_status, guest, run_brisk)

pytestmark = pytest.mark.usefixtures("kvm")


def test_hello():
    p = boot("hello")
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    assert p.stdout.splitlines()[0] == "Hello from brisk test guest"


def test_demo_is_the_default_guest():
    p = run_brisk("run", "--cmdline", "console=ttyS0 demo=1")
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    assert "brisk demo guest" in p.stdout
    assert "cmdline: console=ttyS0 demo=1" in p.stdout


def test_demo_memory_map_matches_memory():
    p = run_brisk("run", "--memory", "64M")
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    # the last RAM entry ends at 64 MiB
    assert re.search(r"0x0*3f00000|0x0*4000000", p.stdout), p.stdout


def test_serial_input_echo():
    proc = subprocess.Popen([str(BRISK), "run", "--kernel", guest("echo")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "echo: ready\n"
    proc.stdin.write("hello brisk\n")
    proc.stdin.flush()
    out, err = proc.communicate(timeout=60)
    check_sanitizers(err)
    assert proc.returncode == EXIT_GUEST_OK, err
    assert out.splitlines() == ["hello brisk", "echo: done"]


def test_serial_partial_line_reaches_stdout():
    """A line the guest has not ended (the echo of "ab" typed without Return, as a shell prompt is) reaches stdout
    while the guest waits: the vCPU writes only complete lines, so this one is written once its 1 ms linger is over,
    by the output thread that the main thread starts then (docs/devices.md, "Output thread")."""
    proc = subprocess.Popen([str(BRISK), "run", "--kernel", guest("echo")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"echo: ready\n"
        proc.stdin.write(b"ab")
        proc.stdin.flush()
        fd = proc.stdout.fileno()
        got = b""
        deadline = time.monotonic() + 30
        while got != b"ab" and time.monotonic() < deadline:
            if select.select([fd], [], [], 1)[0]:
                got += os.read(fd, 16)
        assert got == b"ab"
        proc.stdin.write(b"\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    check_sanitizers(err.decode(errors="replace"))
    assert proc.returncode == EXIT_GUEST_OK, err
    assert out == b"\necho: done\n"


def test_serial_input_before_the_guest_takes_it():
    """Input sent at once, while the guest still sets up its UART as Linux does before a program opens the tty
    (FIFO resets, loopback test, RBR reads "for luck"; echo.c linux=1), is kept in brisk's input ring until the
    guest raises DTR and RTS, then arrives whole: nothing is dropped (docs/devices.md, "Receive")."""
    line = "typed before the guest opened its tty: " + "x" * 60
    p = boot("echo", "--cmdline", "linux=1", input=line + "\n", timeout=60)
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    assert p.stdout.splitlines() == ["echo: ready", line, "echo: done"], p.stdout


def test_i8042_reset_exits_zero():
    p = boot("reset")
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    assert "reset: requesting i8042 reset" in p.stdout
    assert "FAIL" not in p.stdout


@pytest.mark.parametrize("code", [0, 1, 7, 42, 127])
def test_debug_exit_codes(code):
    p = boot("exitcode", "--cmdline", f"code={code}")
    assert p.returncode == debug_exit_status(code), p.stderr
    assert f"exitcode: {code}" in p.stdout


@pytest.mark.security
def test_triple_fault_dumps_registers():
    p = boot("triple")
    assert p.returncode == EXIT_TRIPLE_FAULT, p.stderr
    assert "triple: faulting" in p.stdout
    assert "triple-faulted" in p.stderr
    assert "rip=0x" in p.stderr and "cr0=0x" in p.stderr
    # KVM on AMD SVM resets a vCPU that shut down: the dump then holds the reset values and must say so
    reset = re.search(r"rip=0x000000000000fff0 ", p.stderr) and "cs  sel=0xf000 base=0x00000000ffff0000" in p.stderr
    assert bool(reset) == ("these are the reset values" in p.stderr), p.stderr


@pytest.mark.security
def test_unhandled_port_logged_once():
    p = boot("unhandled")
    assert p.returncode == EXIT_GUEST_OK, p.stdout + p.stderr
    assert "unhandled: PASS" in p.stdout
    assert len(re.findall(r"unhandled write to port 0x200\b", p.stderr)) == 1
    assert len(re.findall(r"unhandled read from port 0x200\b", p.stderr)) <= 1


def test_two_vcpus():
    p = boot("smp", "--cpus", "2", "--log-level", "debug")
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    assert "smp: bsp running" in p.stdout


def test_timeline_and_boot_markers():
    p = boot("markers", "--timeline")
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    for phase in ("process start", "/dev/kvm opened", "VM created", "memory mapped", "kernel loaded",
                  "vCPUs ready", "first KVM_RUN", "first serial byte", "exit"):
        assert re.search(rf"^{re.escape(phase)}\s+\d+\.\d", p.stdout, re.M), phase
    values = re.findall(r"^boot marker 0x([0-9a-f]+)", p.stdout, re.M)
    assert values == ["1", "2", "3", "4", "5", "6"]
    assert re.search(r"^KVM_RUN\s+\d+", p.stdout, re.M)


def test_serial_to_file_and_none(tmp_path):
    out = tmp_path / "console.log"
    p = boot("hello", "--serial", f"file:{out}")
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    assert p.stdout == ""
    assert out.read_text().startswith("Hello from brisk test guest")
    p = boot("hello", "--serial", "none")
    assert p.returncode == EXIT_GUEST_OK
    assert p.stdout == ""


@pytest.mark.parametrize("opts", [["--hugepages"], ["--prefault"], ["--memory", "16M"], ["--memory", "3200M"]])
def test_memory_options(opts):
    p = boot("hello", *opts)
    assert p.returncode == EXIT_GUEST_OK, (opts, p.stderr)


@pytest.mark.security
def test_sigterm_stops_cleanly():
    # echo waits for input forever: stop it from the host
    proc = subprocess.Popen([str(BRISK), "run", "--kernel", guest("echo")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    line = proc.stdout.readline()
    assert "echo: ready" in line or time.time() < deadline
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    check_sanitizers(err)
    assert proc.returncode == EXIT_STOPPED, err
    assert "stopping on" in err


def test_ctrl_a_x_stops():
    p = boot("echo", input="\x01x")
    assert p.returncode == EXIT_STOPPED, p.stderr


@pytest.mark.security
def test_flood_with_stalled_stdout():
    """The guest floods the UART while nobody reads stdout: the vCPU must not block."""
    r, w = os.pipe()
    try:
        proc = subprocess.Popen([str(BRISK), "run", "--kernel", guest("flood")],
                                stdin=subprocess.DEVNULL, stdout=w, stderr=subprocess.PIPE, text=True)
        os.close(w)
        w = -1
        # nobody reads r until brisk exits; the guest ends by itself (i8042 reset)
        _, err = proc.communicate(timeout=240)
    finally:
        if w >= 0:
            os.close(w)
    check_sanitizers(err)
    os.close(r)
    assert proc.returncode == EXIT_GUEST_OK, err
    assert re.search(r"serial output: \d+ bytes dropped", err), err
