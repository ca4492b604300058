"""docs/security.md cases no other test file covered end to end (docs/security.md "Threat model: every case
tested" lists which test covers which case): KVM_EXIT_INTERNAL_ERROR (16), malformed kernel images built
from a good one (18), a stdin flood into the UART of a guest that never reads (14), and SIGINT, SIGHUP,
SIGPIPE with the terminal restored (23). Each ends in its class (E: exit 6 and a message naming the file;
K: a documented status and a log line) with no sanitizer report, hang or growth.

Run with the plain and the sanitizer build: BRISK=build/brisk and BRISK=build/asan/brisk."""
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import threading
import time

import pytest

from conftest import (BRISK, EXIT_GUEST_OK, EXIT_IMAGE, EXIT_INTERNAL_ERROR, EXIT_STOPPED, boot,
                      check_sanitizers, guest, run_brisk)

pytestmark = pytest.mark.security

PT_LOAD = 1


# ---- 16: KVM_EXIT_INTERNAL_ERROR -> K (status 10, a register dump) ----------------------------------------

def test_internal_error_ends_the_vm(kvm):
    """The guest jumps into MMIO: KVM cannot fetch the instruction (emulation failure, suberror 1). brisk ends
    the VM with EXIT_INTERNAL_ERROR, names the exit and dumps the registers (rip at the MMIO address)."""
    t0 = time.monotonic()
    p = boot("internal-error", timeout=60)
    assert p.returncode == EXIT_INTERNAL_ERROR, p.stderr
    assert "internal-error: jumping to MMIO" in p.stdout
    assert "KVM_EXIT_INTERNAL_ERROR suberror 1" in p.stderr, p.stderr
    assert re.search(r"rip=0x0*d0100000\b", p.stderr), p.stderr
    assert "cr0=0x" in p.stderr
    assert time.monotonic() - t0 < 30  # ended, not retried


# ---- 18: kernel images a user hands in -> E (status 6, the file named) ------------------------------------

def elf_with(patch):
    """hello.elf with patch(data, phdr offsets of its PT_LOAD segments) applied."""
    data = bytearray(open(guest("hello"), "rb").read())
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads = [phoff + i * phentsize for i in range(phnum)
             if struct.unpack_from("<I", data, phoff + i * phentsize)[0] == PT_LOAD]
    assert loads, "hello.elf has no PT_LOAD segment"
    patch(data, loads)
    return bytes(data)


def phdr_table_past_eof(d, loads):
    struct.pack_into("<Q", d, 0x20, len(d) + 64)  # e_phoff


def segment_past_eof(d, loads):
    struct.pack_into("<Q", d, loads[0] + 8, len(d) - 16)  # p_offset
    struct.pack_into("<QQ", d, loads[0] + 32, 4096, 4096)  # p_filesz, p_memsz


def load_address_wraps(d, loads):
    struct.pack_into("<QQ", d, loads[0] + 16, 2**64 - 4096, 2**64 - 4096)  # p_vaddr, p_paddr
    struct.pack_into("<Q", d, loads[0] + 40, 0x10000)  # p_memsz


def segment_beyond_ram(d, loads):
    last = max(loads, key=lambda o: struct.unpack_from("<Q", d, o + 24)[0])  # the highest p_paddr
    struct.pack_into("<Q", d, last + 40, 1 << 30)  # p_memsz: 1 GiB, with --memory 128M


def bzimage_with(offset, fmt, value):
    data = bytearray(open(os.path.join(os.path.dirname(guest("hello")), "conf-bzimage.img"), "rb").read())
    struct.pack_into(fmt, data, offset, value(struct.unpack_from(fmt, data, offset)[0]))
    return bytes(data)


IMAGES = {
    "elf_phdr_table_past_eof": (lambda: elf_with(phdr_table_past_eof), "beyond file size"),
    "elf_segment_past_eof": (lambda: elf_with(segment_past_eof), "beyond file size"),
    "elf_load_address_wraps": (lambda: elf_with(load_address_wraps), "wraps"),
    "elf_segment_beyond_ram": (lambda: elf_with(segment_beyond_ram), "RAM"),
    # boot.rst: xloadflags bit 0 (XLF_KERNEL_64) says there is a 64-bit entry at 0x200
    "bzimage_without_64bit_entry": (lambda: bzimage_with(0x236, "<H", lambda v: v & ~1), "XLF_KERNEL_64"),
    "bzimage_absurd_setup_sects": (lambda: bzimage_with(0x1F1, "<B", lambda v: 255), "setup_sects 255"),
}


@pytest.mark.parametrize("case", list(IMAGES))
def test_malformed_kernel_image(tmp_path, case):
    make, words = IMAGES[case]
    path = tmp_path / case
    path.write_bytes(make())
    p = run_brisk("run", "--kernel", str(path), "--memory", "128M", timeout=60)
    assert p.returncode == EXIT_IMAGE, p.stderr
    assert f"brisk: error: {path}:" in p.stderr, p.stderr  # the message names the file
    assert words in p.stderr, p.stderr
    assert len(p.stderr.splitlines()) <= 3, p.stderr


# ---- 14: a stdin flood into the UART of a guest that never reads -> bounded -------------------------------

def vm_rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))
    except (OSError, AttributeError):
        return 0


def test_uart_stdin_flood_is_bounded(kvm):
    """counter.elf never reads COM1; 64 MiB offered on stdin: brisk takes what its 4 KiB input ring and the
    16-byte RX FIFO hold, the rest stays in the pipe (back-pressure), RSS does not move, the guest counts on,
    SIGTERM still stops it (16)."""
    p = subprocess.Popen([str(BRISK), "run", "--kernel", guest("counter")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    written = [0]
    out = bytearray()

    def feed():
        chunk = b"y" * 65536
        try:
            while written[0] < 64 << 20:
                p.stdin.write(chunk)
                written[0] += len(chunk)
        except OSError:
            pass

    def read_out():
        for block in iter(lambda: p.stdout.read(4096), b""):
            out.extend(block)

    threads = [threading.Thread(target=f, daemon=True) for f in (feed, read_out)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        rss_early = vm_rss_kib(p.pid)
        lines_early = out.count(b"\n")
        time.sleep(3.0)
        rss_late = vm_rss_kib(p.pid)
        lines_late = out.count(b"\n")
        taken = written[0]
        p.send_signal(signal.SIGTERM)
        status = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = p.stderr.read().decode(errors="replace")
    p.stdin.close()
    check_sanitizers(err)
    assert status == EXIT_STOPPED, err
    assert lines_late > lines_early, "the guest stopped counting under the flood"
    # the pipe (64 KiB by default; at most 1 MiB) + 4 KiB ring + 16-byte FIFO, never the flood
    assert taken <= 2 << 20, taken
    assert rss_early and rss_late - rss_early < 1024, (rss_early, rss_late)  # KiB


# ---- 23: SIGINT, SIGHUP, SIGPIPE; the terminal restored --------------------------------------------------

def wait_counting(p):
    """Reads counter.elf's output up to its first count line: the VM runs."""
    for line in p.stdout:
        if line.startswith("count "):
            return
    raise AssertionError(f"counter.elf never counted (exit {p.wait()})")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_signal_stops_with_status_16(kvm, sig):
    """SIGINT and SIGHUP stop a running VM as SIGTERM does (test_boot.py): status 16, a log line."""
    p = subprocess.Popen([str(BRISK), "run", "--kernel", guest("counter")], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_counting(p)
        p.send_signal(sig)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check_sanitizers(err)
    assert p.returncode == EXIT_STOPPED, err
    assert "stopping on" in err, err


def test_sigpipe_output_reader_gone(kvm):
    """stdout is a pipe whose reader is gone before the guest writes: brisk ignores SIGPIPE, its output
    thread takes EPIPE, drops and counts; the VM runs to its own end (status 0)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.Popen([str(BRISK), "run", "--kernel", guest("flood"), "--cmdline", "bytes=262144"],
                             stdin=subprocess.DEVNULL, stdout=w, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(w)
    _, err = p.communicate(timeout=120)
    check_sanitizers(err)
    assert p.returncode == EXIT_GUEST_OK, err
    assert re.search(r"serial output: \d+ bytes dropped", err), err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_terminal_restored_after_signal(kvm, sig):
    """stdin a terminal: brisk makes it raw for the UART's input and restores it when a signal stops it."""
    master, slave = pty.openpty()
    try:
        before = termios.tcgetattr(slave)
        p = subprocess.Popen([str(BRISK), "run", "--kernel", guest("counter")], stdin=slave,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_counting(p)
        except AssertionError:
            p.kill()
            p.wait()
            raise
        deadline = time.monotonic() + 10
        while termios.tcgetattr(slave)[3] & termios.ICANON and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not termios.tcgetattr(slave)[3] & termios.ICANON, "brisk did not make the terminal raw"
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
        check_sanitizers(err)
        assert p.returncode == EXIT_STOPPED, err
        assert termios.tcgetattr(slave) == before
    finally:
        os.close(master)
        os.close(slave)
