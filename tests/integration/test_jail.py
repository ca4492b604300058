"""brisk jail: the chroot, namespaces, cgroup, rlimits and privilege drop, seen from outside (docs/security.md)."""
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from conftest import BRISK, EXIT_HOST, EXIT_STOPPED, EXIT_USAGE, KVM_REASON, check_sanitizers, guest

NOBODY = 65534
HELLO_LINE = "Hello from brisk test guest"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="brisk jail needs root (namespaces, mknod, cgroups)")


def jail_cmd(base, jid, *run_args, extra=()):
    return [str(BRISK), "jail", "--id", jid, "--uid", str(NOBODY), "--gid", str(NOBODY),
            "--chroot-base", str(base), *extra, "--", *run_args]


def skip_if_environment(p):
    """A jail refused by this environment (not by brisk) skips: unprivileged container, nodev /tmp, ASan build."""
    err = p.stderr if isinstance(p.stderr, str) else ""
    if p.returncode == EXIT_HOST and "Operation not permitted" in err:
        pytest.skip(f"this environment forbids a jail step: {err.strip().splitlines()[-1]}")
    if p.returncode == EXIT_USAGE and ("dynamically linked" in err or "is mounted" in err):
        pytest.skip(err.strip().splitlines()[-1])


def run_jail(base, jid, *run_args, extra=(), timeout=60):
    p = subprocess.run(jail_cmd(base, jid, *run_args, extra=extra), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=timeout)
    check_sanitizers(p.stderr)
    return p


@pytest.fixture
def base(tmp_path):
    b = tmp_path / "jails"
    b.mkdir(mode=0o755)
    return b


def test_help():
    p = subprocess.run([str(BRISK), "help", "jail"], capture_output=True, text=True)
    assert p.returncode == 0 and "--chroot-base" in p.stdout


def test_hello_boots_in_jail(kvm, base):
    kernel = guest("hello")
    p = run_jail(base, "t1", "run", "--kernel", kernel)
    skip_if_environment(p)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == HELLO_LINE
    root = base / "brisk" / "t1" / "root"
    names = sorted(os.listdir(root))
    assert "brisk" in names and "kernel" in names and "dev" in names
    assert set(names) <= {"brisk", "brisk-api", "brisk-slirp", "kernel", "dev", "run"}, names
    st = os.stat(root / "kernel")
    assert st.st_ino == os.stat(kernel).st_ino or st.st_size == os.stat(kernel).st_size
    kvm_node = os.lstat(root / "dev" / "kvm")
    assert stat.S_ISCHR(kvm_node.st_mode) and kvm_node.st_rdev == os.stat("/dev/kvm").st_rdev
    assert (kvm_node.st_uid, kvm_node.st_gid, stat.S_IMODE(kvm_node.st_mode)) == (NOBODY, NOBODY, 0o600)
    assert os.stat(root).st_uid == NOBODY
    # The jail's cgroup is removed when brisk ends (wherever cgroup v2 is mounted).
    assert not any(Path(m).joinpath("brisk", "t1").exists() for m in cgroup2_mounts())


def cgroup2_mounts():
    with open("/proc/self/mounts") as f:
        return [line.split()[1] for line in f if line.split()[2] == "cgroup2"]


def proc_status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


class Running:
    """A jail running the counter guest (it counts forever) until stopped."""

    def __init__(self, base, jid, extra=(), run_extra=()):
        self.root = base / "brisk" / jid / "root"
        self.pidfile = base / "brisk" / jid / "brisk.pid"
        r, self.leak_w = os.pipe()  # an fd the jail inherits: brisk must not
        os.close(r)
        os.set_inheritable(self.leak_w, True)
        self.leak_ino = os.fstat(self.leak_w).st_ino
        self.proc = subprocess.Popen(
            jail_cmd(base, jid, "run", "--kernel", guest("counter"), "--serial", "file:/run/serial.log",
                     *run_extra, extra=extra),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            pass_fds=(self.leak_w,))
        self.pid = self.wait_started()

    def wait_started(self):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                os.close(self.leak_w)
                p = subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)
                skip_if_environment(p)
                pytest.fail(f"the jail ended early ({p.returncode}): {err}")
            log = self.root / "run" / "serial.log"
            if self.pidfile.exists() and log.exists() and "count 2 " in log.read_text():
                return int(self.pidfile.read_text())
            time.sleep(0.05)
        pytest.fail("the counter guest did not start in the jail")

    def stop(self):
        os.close(self.leak_w)
        self.proc.send_signal(signal.SIGTERM)  # the jail forwards it to brisk
        out, err = self.proc.communicate(timeout=30)
        check_sanitizers(err)
        return self.proc.returncode, err


def test_brisk_confined(kvm, base):
    j = Running(base, "t2", extra=("--resource-limit", "no-file=128", "--resource-limit", "fsize=1048576"))
    try:
        s = proc_status(j.pid)
        assert s["Uid"].split() == [str(NOBODY)] * 4 and s["Gid"].split() == [str(NOBODY)] * 4
        assert s["Groups"] == ""
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(s[cap], 16) == 0, f"{cap} = {s[cap]}"
        assert s["NoNewPrivs"] == "1"
        assert s["NSpid"].split()[-1] == "1", "brisk is PID 1 of its own PID namespace"
        for ns in ("mnt", "pid"):
            assert os.readlink(f"/proc/{j.pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}"), ns
        # Its root is the jail: the same directory, holding only what the jail put there.
        assert os.stat(f"/proc/{j.pid}/root").st_ino == os.stat(j.root).st_ino
        assert "brisk" in os.listdir(f"/proc/{j.pid}/root")
        assert not os.path.exists(f"/proc/{j.pid}/root/etc")
        # No inherited fd: 0-2 and what brisk opened itself.
        for fd in os.listdir(f"/proc/{j.pid}/fd"):
            if int(fd) <= 2:
                continue
            assert os.stat(f"/proc/{j.pid}/fd/{fd}").st_ino != j.leak_ino, f"fd {fd} is the jail's caller's pipe"
            target = os.readlink(f"/proc/{j.pid}/fd/{fd}")
            assert target.startswith(("anon_inode:", "/dev/kvm", "/run/serial.log")), f"fd {fd} -> {target}"
        limits = Path(f"/proc/{j.pid}/limits").read_text()
        assert any(line.startswith("Max open files") and line.split()[3:5] == ["128", "128"]
                   for line in limits.splitlines()), limits
        assert any(line.startswith("Max file size") and line.split()[3:5] == ["1048576", "1048576"]
                   for line in limits.splitlines()), limits
        mounts = cgroup2_mounts()
        if mounts:
            cg = [line for line in Path(f"/proc/{j.pid}/cgroup").read_text().splitlines() if line.startswith("0::")]
            assert cg and cg[0].endswith("/brisk/t2"), cg
    finally:
        rc, err = j.stop()
    assert rc == EXIT_STOPPED, err


def cgroup_controllers():
    """The cgroup v2 mount brisk jail uses and its available controllers, or None."""
    mounts = cgroup2_mounts()
    if not mounts:
        return None, set()
    mnt = "/sys/fs/cgroup" if "/sys/fs/cgroup" in mounts else mounts[0]
    try:
        return mnt, set(Path(mnt, "cgroup.controllers").read_text().split())
    except OSError:
        return mnt, set()


def test_cgroup_limits_written(kvm, base):
    mnt, ctl = cgroup_controllers()
    if not mnt or not {"pids", "memory"} <= ctl:
        pytest.skip(f"cgroup v2 with pids and memory controllers is not available here ({mnt}: {sorted(ctl)})")
    extra = ("--cgroup", "pids.max=32", "--cgroup", "memory.max=536870912")
    j = Running(base, "t3", extra=extra)
    try:
        d = Path(mnt, "brisk", "t3")
        assert (d / "pids.max").read_text().strip() == "32"
        assert (d / "memory.max").read_text().strip() == "536870912"
        assert str(j.pid) in (d / "cgroup.procs").read_text().split()
    finally:
        rc, err = j.stop()
    assert rc == EXIT_STOPPED, err
    assert not Path(mnt, "brisk", "t3").exists()


def test_cgroup_core_values_written(kvm, base):
    """cgroup.* files need no controller: written wherever cgroup v2 is writable (hybrid hosts included)."""
    mnt, _ = cgroup_controllers()
    if not mnt or not os.access(mnt, os.W_OK):
        pytest.skip("no writable cgroup v2 here")
    j = Running(base, "t5", extra=("--cgroup", "cgroup.max.descendants=7", "--cgroup", "cgroup.max.depth=3"))
    try:
        d = Path(mnt, "brisk", "t5")
        assert (d / "cgroup.max.descendants").read_text().strip() == "7"
        assert (d / "cgroup.max.depth").read_text().strip() == "3"
        assert str(j.pid) in (d / "cgroup.procs").read_text().split()
    finally:
        rc, err = j.stop()
    assert rc == EXIT_STOPPED, err
    assert not Path(mnt, "brisk", "t5").exists()


def test_cgroup_controller_missing_is_host_error(kvm, base):
    """A controller this host's cgroup v2 lacks: exit 4, naming it, and nothing left behind."""
    mnt, ctl = cgroup_controllers()
    if not mnt:
        pytest.skip("no cgroup v2 mounted here")
    missing = [c for c in ("pids", "memory", "cpu", "io", "misc", "rdma") if c not in ctl]
    if not missing:
        pytest.skip("this host's cgroup v2 has every controller the test could ask for")
    p = run_jail(base, "t4", "run", "--kernel", guest("hello"), extra=("--cgroup", f"{missing[0]}.max=1"))
    skip_if_environment(p)
    assert p.returncode == EXIT_HOST, p.stderr
    assert f"the {missing[0]} controller is not available" in p.stderr
    assert not (base / "brisk" / "t4").exists()
    assert not Path(mnt, "brisk", "t4").exists()


# Every refused input: exit 2, one line naming the input, nothing created.
REFUSALS = [
    ("bad-id-chars", {"id": "a_b"}, (), "--id a_b"),
    ("bad-id-slash", {"id": "../x"}, (), "--id ../x"),
    ("id-too-long", {"id": "a" * 65}, (), "--id"),
    ("unknown-option", {}, ("--frobnicate",), "--frobnicate"),
    ("cgroup-key-slash", {}, ("--cgroup", "../cpu.max=1"), "--cgroup ../cpu.max"),
    ("cgroup-key-dotdot", {}, ("--cgroup", "cpu..max=1"), "--cgroup cpu..max"),
    ("cgroup-procs", {}, ("--cgroup", "cgroup.procs=1"), "cgroup.procs"),
    ("cgroup-no-value", {}, ("--cgroup", "pids.max="), "--cgroup pids.max="),
    ("rlimit-unknown", {}, ("--resource-limit", "nproc=10"), "--resource-limit nproc=10"),
    ("rlimit-not-number", {}, ("--resource-limit", "no-file=many"), "--resource-limit no-file=many"),
    ("rlimit-no-value", {}, ("--resource-limit", "fsize"), "--resource-limit fsize"),
    ("uid-not-number", {"uid": "nobody"}, (), "--uid nobody"),
]


@pytest.mark.parametrize("name,over,extra,needle", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refused_options(base, name, over, extra, needle):
    args = [str(BRISK), "jail", "--id", over.get("id", "r1"), "--uid", over.get("uid", str(NOBODY)),
            "--gid", str(NOBODY), "--chroot-base", str(base), *extra, "--", "run", "--kernel", guest("hello")]
    p = subprocess.run(args, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    check_sanitizers(p.stderr)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert needle in p.stderr, p.stderr
    assert not (base / "brisk").exists()


def test_missing_kernel_refused(base):
    p = run_jail(base, "r2", "run", "--kernel", str(base / "no-such-vmlinux"))
    assert p.returncode == EXIT_USAGE, p.stderr
    assert "--kernel" in p.stderr and "no-such-vmlinux" in p.stderr and "no such file" in p.stderr
    assert not (base / "brisk").exists()


def test_missing_required_options(base):
    p = subprocess.run([str(BRISK), "jail", "--id", "r3", "--", "run"], capture_output=True, text=True)
    assert p.returncode == EXIT_USAGE and "--uid is required" in p.stderr


def test_run_args_refused(base):
    p = run_jail(base, "r4", "--config-file", "/vm.json", "--no-api")
    assert p.returncode == EXIT_USAGE and "--config-file" in p.stderr
    p = run_jail(base, "r4", "bench", "-n", "1")
    assert p.returncode == EXIT_USAGE and "RUN-ARGS must start with" in p.stderr
    p = run_jail(base, "r4", "run", "--api-sock", "/run/../../x.sock")
    assert p.returncode == EXIT_USAGE and "'..'" in p.stderr


def test_existing_id_refused(base):
    (base / "brisk" / "taken").mkdir(parents=True)
    p = run_jail(base, "taken", "run", "--kernel", guest("hello"))
    skip_if_environment(p)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert "--id taken" in p.stderr and "already exists" in p.stderr
    assert os.listdir(base / "brisk" / "taken") == []


def test_world_writable_base_refused(base):
    os.chmod(base, 0o777)
    p = run_jail(base, "r5", "run", "--kernel", guest("hello"))
    assert p.returncode == EXIT_USAGE, p.stderr
    assert "world-writable without the sticky bit" in p.stderr and str(base) in p.stderr
    assert not (base / "brisk").exists()
    os.chmod(base, 0o1777)  # sticky, as /tmp: accepted past the base check
    p = run_jail(base, "r5", "run", "--kernel", str(base / "missing"))
    assert p.returncode == EXIT_USAGE and "world-writable" not in p.stderr and "--kernel" in p.stderr


def test_base_not_owned_by_root_refused(base):
    os.chown(base, NOBODY, NOBODY)
    p = run_jail(base, "r6", "run", "--kernel", guest("hello"))
    assert p.returncode == EXIT_USAGE, p.stderr
    assert f"owned by uid {NOBODY}, not root" in p.stderr
    assert not (base / "brisk").exists()


def test_missing_base_refused(base):
    p = run_jail(base / "nope", "r7", "run", "--kernel", guest("hello"))
    assert p.returncode == EXIT_USAGE and "--chroot-base" in p.stderr and "nope" in p.stderr


def test_kernel_from_another_file_system_is_bind_mounted(kvm, base):
    """link() cannot cross file systems: the kernel is bound read-only onto a placeholder, in the jail only."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(base).st_dev:
        pytest.skip("no second file system (/dev/shm) to take the kernel from")
    kernel = shm / f"brisk-jail-test-{os.getpid()}.elf"
    kernel.write_bytes(Path(guest("hello")).read_bytes())
    try:
        p = run_jail(base, "t6", "run", "--kernel", str(kernel))
        skip_if_environment(p)
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines()[0] == HELLO_LINE
        # On the host the placeholder stays empty: the bind mount lived in the jail's mount namespace.
        assert os.stat(base / "brisk" / "t6" / "root" / "kernel").st_size == 0
    finally:
        kernel.unlink()
