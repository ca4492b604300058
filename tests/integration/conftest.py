"""Shared fixtures for brisk's integration tests: the binary, the test guests, and a probed KVM."""
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import donelog  # noqa: E402  (tests/donelog.py: verdicts kept as they come, for scripts/check.sh)
import hangdiag  # noqa: E402  (tests/hangdiag.py: a timed-out run is looked at before it is killed)

BUILD = ROOT / os.environ.get("BUILD", "build")
BRISK = Path(os.environ.get("BRISK", BUILD / "brisk")).resolve()
GUESTS = BUILD / "guests"


def _sanitized(path):
    """Whether the brisk under test is the ASan+UBSan build (its RSS says nothing about leaks: ASan keeps
    freed memory in quarantine)."""
    try:
        return b"__asan_init" in path.read_bytes()
    except OSError:
        return False


SANITIZED = _sanitized(BRISK)

# Exit statuses (include/brisk/exitcode.h, docs/exit-codes.md).
EXIT_GUEST_OK = 0
EXIT_USAGE = 2
EXIT_HOST = 4
EXIT_IMAGE = 6
EXIT_TRIPLE_FAULT = 8
EXIT_INTERNAL_ERROR = 10
EXIT_STOPPED = 16
KVM_GET_API_VERSION = 0xAE00


def debug_exit_status(value):
    """Status brisk (and QEMU's isa-debug-exit) exits with for a debug-exit write of value."""
    return ((value & 0x7F) << 1) | 1


def probe_kvm():
    """None if /dev/kvm can be used, else the reason (found by trying, not by host name)."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        return f"/dev/kvm unusable on this host: {e.strerror}"
    try:
        version = fcntl.ioctl(fd, KVM_GET_API_VERSION)
    finally:
        os.close(fd)
    if version != 12:
        return f"/dev/kvm speaks KVM API {version}, not 12"
    return None


KVM_REASON = probe_kvm()


@pytest.fixture
def kvm():
    if KVM_REASON:
        pytest.skip(KVM_REASON)


def guest(name):
    path = GUESTS / f"{name}.elf"
    assert path.exists(), f"{path} missing: run make guests"
    return str(path)


def check_sanitizers(stderr):
    """An ASan/UBSan report fails the test whatever the exit status was."""
    for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error:", "UndefinedBehaviorSanitizer"):
        assert marker not in stderr, f"sanitizer report:\n{stderr}"


def run_brisk(*args, input=None, timeout=120, stdin=subprocess.DEVNULL, **kw):
    """Runs brisk with args; returns the CompletedProcess (text). Fails on sanitizer reports."""
    if input is not None:
        stdin = None
    p = hangdiag.run([str(BRISK), *args], input=input, stdin=stdin, timeout=timeout, **kw)
    check_sanitizers(p.stderr)
    return p


def boot(name, *args, **kw):
    """Boots test guest `name` with extra brisk run options."""
    return run_brisk("run", "--kernel", guest(name), *args, **kw)


def pytest_collection_modifyitems(config, items):
    """Test groups (pytest.ini): a test marked neither `security` nor `endurance` is `functional`, so
    `-m functional`, `-m security` and `-m endurance` split the suite as Firecracker's groups do. Then
    tests/donelog.py's selection (BRISK_SELECT, BRISK_DESELECT) and its record of what was collected."""
    for item in items:
        if item.get_closest_marker("security") is None and item.get_closest_marker("endurance") is None:
            item.add_marker(pytest.mark.functional)
    donelog.collection_modifyitems(config, items)


def pytest_runtest_logreport(report):
    donelog.runtest_logreport(report)


def sha(path):
    """The SHA-256 of a file, read 1 MiB at a time (a guest's memory file can be large): to show it unchanged."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def short_tmpdir(prefix="bsk"):
    """A new directory with a short path, for Unix sockets (sun_path holds 108 bytes with "_<port>" added; pytest's
    tmp_path can be longer): in $TMPDIR where it is set, else /tmp. The nested harness, run from a clone under /tmp,
    shares the host's /tmp over 9p, where Unix sockets do not work, and points TMPDIR at a tmpfs
    (scripts/nested-kvm.md)."""
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TMPDIR") or "/tmp")


@pytest.fixture
def sockdir():
    """A short_tmpdir for Unix sockets, removed at the end."""
    d = short_tmpdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def procs():
    """Every brisk process (apiclient.BriskProcess) a test appends, killed at its end whatever happened; a
    sanitizer report in its stderr fails the test."""
    started = []
    yield started
    for b in started:
        b.kill()
        check_sanitizers(b.err)
