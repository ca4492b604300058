"""The machine the real-kernel tier runs on is a usable one: this host where its KVM runs Linux, else the nested VM
of scripts/nested-kvm.sh. Its loopback interface is up (the harness's init brings it up: a fresh kernel starts
with lo down), and `brisk profile --net user` finds its brisk-slirp helper after it mounted tracefs in a mount
namespace of its own (inside the nested VM's chroot, /proc/self/exe then names the binary by a path that only
exists outside the chroot: src/util/helper.c). Test guests only, no Linux boot: a few seconds even nested."""
import os
import socket
import subprocess

import pytest

from .conftest import BRISK, BUILD

pytestmark = pytest.mark.usefixtures("linux_kvm")
IFF_UP = 0x1


def test_loopback_is_up():
    flags = int(open("/sys/class/net/lo/flags").read(), 16)
    assert flags & IFF_UP, f"lo is down (flags 0x{flags:x})"
    with socket.socket() as srv, socket.socket() as cli:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        cli.settimeout(10)
        cli.connect(srv.getsockname())  # ENETUNREACH while lo is down
        conn, _ = srv.accept()
        conn.sendall(b"ping")
        assert cli.recv(4) == b"ping"
        conn.close()


def test_profile_finds_its_helper_after_mounting_tracefs():
    if not (BRISK.parent / "brisk-slirp").exists():
        pytest.skip("brisk-slirp not built")
    env = {k: v for k, v in os.environ.items() if k != "BRISK_SLIRP_HELPER"}
    p = subprocess.run([str(BRISK), "profile", "--kernel", str(BUILD / "guests" / "hello.elf"), "--net", "user",
                        "--serial", "none"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
                       env=env)
    assert "helper was not found" not in p.stderr, p.stderr
    assert p.returncode == 0, p.stderr
    if os.environ.get("BRISK_IN_NESTED"):  # the harness mounts no tracefs: brisk mounts its own, privately
        assert "brisk mounted it at /sys/kernel/tracing in a private mount namespace" in p.stdout, p.stdout[-2000:]
