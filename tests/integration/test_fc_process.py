"""What Firecracker's orchestrators see of the brisk process besides the API: its threads' names and how it
answers signals (docs/architecture.md "Threads", docs/exit-codes.md "Signals").

Kata Containers' fc driver (src/runtime/virtcontainers/fc.go, getThreadIDs) walks /proc/PID/task/*/comm for
names starting "fc_vcpu", takes the number after it as the vCPU's index and moves that thread into the
sandbox's cgroup; Firecracker v1.7.0 names them "fc_vcpu {index}" (src/vmm/src/vstate/vcpu/mod.rs).
Firecracker's own signal handling is src/vmm/src/signal_handler.rs: SIGPIPE is survived; SIGTERM and SIGINT
have no handler there (brisk stops the VM cleanly, 16)."""
import os
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BRISK, EXIT_STOPPED, check_sanitizers, guest
from test_api import Brisk, boot_counter, start_api


def comms(pid):
    """{tid: comm} of every thread of pid."""
    out = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[int(t.name)] = (t / "comm").read_text().rstrip("\n")
        except FileNotFoundError:
            pass  # a thread that just ended
    return out


def kata_vcpu_threads(pid):
    """Kata's getThreadIDs: {vCPU index: tid} from the comm names, as fc.go parses them."""
    found = {}
    for tid, comm in comms(pid).items():
        if not comm.startswith("fc_vcpu"):
            continue
        rest = comm.split("fc_vcpu")
        assert len(rest) == 2, comm
        found[int(rest[1].strip())] = tid
    return found


@pytest.mark.usefixtures("kvm")
def test_vcpu_threads_are_named_as_firecracker(procs, sockdir):
    b = start_api(procs, sockdir)
    boot_counter(b, vcpus=2)
    names = comms(b.proc.pid)
    assert names[b.proc.pid] == "brisk"  # the main thread keeps the program's name ("firecracker" when so named)
    vcpus = kata_vcpu_threads(b.proc.pid)
    assert sorted(vcpus) == [0, 1], names
    assert names[vcpus[0]] == "fc_vcpu 0" and names[vcpus[1]] == "fc_vcpu 1"
    assert len(set(vcpus.values())) == 2
    b.assert_counting("after the threads were read")


@pytest.mark.usefixtures("kvm")
def test_device_threads_have_their_own_names(procs, tmp_path):
    """The I/O loop, a disk's workers and the serial output thread: names that no fc_vcpu match takes."""
    disk = tmp_path / "d.img"
    disk.write_bytes(b"\0" * (1 << 20))
    b = Brisk(["run", "--kernel", guest("counter"), "--cpus", "3", "--memory", "64M", "--disk", str(disk)])
    procs.append(b)
    b.wait_count()
    deadline = time.monotonic() + 10
    while True:
        names = sorted(comms(b.proc.pid).values())
        if "brisk_blk" in names or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert [n for n in names if n.startswith("fc_vcpu")] == ["fc_vcpu 0", "fc_vcpu 1", "fc_vcpu 2"], names
    for want in ("brisk", "brisk_io", "brisk_con_out"):
        assert want in names, names
    assert sorted(kata_vcpu_threads(b.proc.pid)) == [0, 1, 2]


@pytest.mark.usefixtures("kvm")
@pytest.mark.parametrize("console", ["serial", "virtio"])
@pytest.mark.parametrize("stdin", ["devnull", "pipe"])
def test_console_input_thread_only_for_a_readable_stdin(tmp_path, console, stdin):
    """stdin on /dev/null only ever reads EOF: no brisk_con_in thread is started for it (one thread less per VM);
    a pipe gets one (the UART's, or with --console virtio the virtio console's). The thread names itself first
    thing, so the trace of prctl calls shows whether it ever ran."""
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    trace = tmp_path / "strace.txt"
    args = ["run", "--kernel", guest("hello"), "--memory", "64M"] + (["--console", "virtio"] if console == "virtio" else [])
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")  # no LSan under ptrace
    p = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=prctl", "-o", str(trace), str(BRISK), *args],
                         stdin=subprocess.DEVNULL if stdin == "devnull" else subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    out, err = p.communicate(timeout=120)  # a pipe: closed at once, the thread reads its EOF
    check_sanitizers(err)
    assert p.returncode == 0, err
    assert "Hello from brisk test guest" in out, out
    names = trace.read_text()
    assert '"fc_vcpu 0"' in names, names  # the trace saw the threads name themselves ...
    assert ('"brisk_con_in"' in names) == (stdin == "pipe"), names  # ... and the input thread only for a pipe


@pytest.mark.usefixtures("kvm")
@pytest.mark.parametrize("sig", [signal.SIGPIPE, signal.SIGXFSZ], ids=lambda s: s.name)
def test_survived_signals(procs, sockdir, sig):
    """Firecracker survives SIGPIPE (its handler logs and counts it); brisk survives SIGPIPE and SIGXFSZ, and
    the API keeps answering."""
    b = start_api(procs, sockdir)
    boot_counter(b)
    for _ in range(3):
        os.kill(b.proc.pid, sig)
    b.assert_counting(f"after {sig.name}")
    assert b.api.get("/").status == 200
    b.proc.send_signal(signal.SIGTERM)
    assert b.wait() == EXIT_STOPPED


@pytest.mark.usefixtures("kvm")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU],
                         ids=lambda s: s.name)
def test_stop_signals(procs, sockdir, sig):
    """A stop signal ends a running VM cleanly: status 16, the API socket removed, the reason logged."""
    b = start_api(procs, sockdir)
    boot_counter(b)
    b.proc.send_signal(sig)
    assert b.wait() == EXIT_STOPPED, b.err
    assert f"stopping on {signal.strsignal(sig)}" in b.err
    assert not os.path.exists(b.sock)


def test_stop_signal_before_a_vm(procs, sockdir):
    """Before InstanceStart a stop signal ends brisk itself, also with 16."""
    b = start_api(procs, sockdir)
    b.proc.send_signal(signal.SIGXCPU)
    assert b.wait() == EXIT_STOPPED, b.err
    assert not os.path.exists(b.sock)


@pytest.mark.usefixtures("kvm")
def test_file_size_limit_does_not_kill(procs, tmp_path):
    """RLIMIT_FSIZE reached by the serial file (brisk jail --resource-limit fsize=): the kernel sends SIGXFSZ and
    the write fails with EFBIG. Firecracker exits 151 there; brisk keeps the VM and still stops cleanly."""
    out = tmp_path / "serial.txt"

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.RLIM_INFINITY))

    p = subprocess.Popen([str(BRISK), "run", "--kernel", guest("counter"), "--memory", "64M", "--serial",
                          f"file:{out}"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=limit)
    try:
        deadline = time.monotonic() + 20
        while (not out.exists() or out.stat().st_size < 1024) and time.monotonic() < deadline:
            assert p.poll() is None, p.stderr.read().decode()
            time.sleep(0.05)
        assert out.stat().st_size == 1024
        time.sleep(0.5)  # the counter prints every 30 ms: many writes past the limit
        assert p.poll() is None, p.stderr.read().decode()
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == EXIT_STOPPED
        check_sanitizers(p.stderr.read().decode())
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
