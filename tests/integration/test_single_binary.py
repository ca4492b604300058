"""One self-contained binary (docs/api.md "Why a helper process serves HTTP"): the API's HTTP helper is brisk
itself, forked, so brisk copied alone into an empty directory, or into a chroot holding nothing but it,
/dev/kvm and /dev/net/tun (no /proc), serves the whole API, as Firecracker's orchestrators expect when they
copy only the VMM binary (firecracker-containerd's runc jailer, Firecracker's jailer's --exec-file).
Needs KVM and root (mknod, chroot)."""
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from apiclient import ApiClient, wait_for_socket
from conftest import BRISK, SANITIZED, check_sanitizers, guest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mknod, chroot)")

HELLO_LINE = "Hello from brisk test guest"


def children(pid):
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def helper_of(pid, within=10.0):
    """The pid of brisk's one child once it calls itself brisk-api. The socket is there before the fork
    (brisk listens, then forks the helper, which names itself first thing: src/api/api_link.c), so a
    client that connects at once may find no child yet, or one that still has brisk's name."""
    deadline = time.monotonic() + within
    while True:
        kids = children(pid)
        comm = Path(f"/proc/{kids[0]}/comm").read_text().strip() if len(kids) == 1 else None
        if comm == "brisk-api" or time.monotonic() > deadline:
            assert len(kids) == 1, kids  # the HTTP helper, and nothing else
            assert comm == "brisk-api"
            return kids[0]
        time.sleep(0.01)


def serve_and_boot(proc, sock_outside, kernel_inside):
    """Configures the hello guest through the API on sock_outside and starts it; returns (status, out, err)."""
    try:
        wait_for_socket(sock_outside, proc)
        helper = helper_of(proc.pid)
        helper_exe = os.stat(f"/proc/{helper}/exe")
        brisk_exe = os.stat(f"/proc/{proc.pid}/exe")
        assert (helper_exe.st_dev, helper_exe.st_ino) == (brisk_exe.st_dev, brisk_exe.st_ino)  # brisk itself
        api = ApiClient(sock_outside)
        api.boot_source(kernel_inside)
        api.start()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    check_sanitizers(err.decode(errors="replace"))
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def test_copied_alone(kvm, tmp_path, sockdir):
    """brisk copied alone into an empty directory and started from there: no brisk-api to find (the old
    helper binary), and none needed."""
    d = tmp_path / "alone"
    d.mkdir()
    shutil.copy2(BRISK, d / "firecracker")
    assert sorted(os.listdir(d)) == ["firecracker"]
    sock = os.path.join(sockdir, "api.sock")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRISK_")}
    proc = subprocess.Popen(["./firecracker", "--api-sock", sock], cwd=d, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    status, out, err = serve_and_boot(proc, sock, guest("hello"))
    assert status == 0, err
    assert HELLO_LINE in out
    assert not os.path.exists(sock)
    assert sorted(os.listdir(d)) == ["firecracker"]


def make_root(root):
    """A chroot with brisk, /dev/kvm and /dev/net/tun (device nodes: the same major and minor as the host's),
    the guest's kernel and an empty /run for the socket: nothing else, no /proc."""
    (root / "dev" / "net").mkdir(parents=True)
    (root / "run").mkdir()
    shutil.copy2(BRISK, root / "firecracker")
    for name in ("kvm", "net/tun"):
        host = os.stat(f"/dev/{name}")
        os.mknod(root / "dev" / name, stat.S_IFCHR | 0o666, host.st_rdev)
    shutil.copy2(guest("hello"), root / "hello.elf")


def enter(root):
    def f():
        os.chroot(root)
        os.chdir("/")

    return f


@pytest.mark.skipif(SANITIZED, reason="the ASan runtime reads /proc/self/maps at start: no /proc in this chroot")
def test_chroot_without_proc(kvm, tmp_path):
    """brisk in a chroot holding only itself, /dev/kvm, /dev/net/tun and the kernel (no /proc, no /dev/null, no
    libraries: the plain build is static): the API serves and boots the guest."""
    root = tmp_path / "root"
    make_root(root)
    assert not (root / "proc").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRISK_")}
    proc = subprocess.Popen(["/firecracker", "--api-sock", "/run/api.sock"], preexec_fn=enter(root), env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    status, out, err = serve_and_boot(proc, str(root / "run" / "api.sock"), "/hello.elf")
    assert status == 0, err
    assert HELLO_LINE in out
    assert sorted(p.name for p in root.iterdir()) == ["dev", "firecracker", "hello.elf", "run"]
    assert os.listdir(root / "run") == []  # the socket removed at the end


@pytest.mark.skipif(SANITIZED, reason="the ASan runtime reads /proc/self/maps at start: no /proc in this chroot")
def test_chroot_seccomp_off(kvm, tmp_path):
    """The same chroot with --seccomp off: the helper then runs unfiltered too, and the API still serves."""
    root = tmp_path / "root"
    make_root(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRISK_")}
    proc = subprocess.Popen(["/firecracker", "--api-sock", "/run/api.sock", "--seccomp", "off"],
                            preexec_fn=enter(root), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    status, out, err = serve_and_boot(proc, str(root / "run" / "api.sock"), "/hello.elf")
    assert status == 0, err
    assert HELLO_LINE in out
