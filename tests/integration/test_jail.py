"""brisk jail: the chroot, namespaces, cgroup, rlimits and privilege drop, seen from outside (docs/security.md)."""
import os
import re
import select
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import time
from pathlib import Path

import pytest
from apiclient import ApiClient, wait_for_socket
from conftest import BRISK, EXIT_HOST, EXIT_STOPPED, EXIT_USAGE, KVM_REASON, check_sanitizers, guest, short_tmpdir

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


def run_jail(base, jid, *run_args, extra=(), timeout=60, env=None):
    p = subprocess.run(jail_cmd(base, jid, *run_args, extra=extra), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=timeout, env=env)
    check_sanitizers(p.stderr)
    return p


def elf_interp(path):
    """The PT_INTERP of an ELF64 file, or None (static, or not ELF)."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return None
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        ph = phoff + i * phentsize
        if struct.unpack_from("<I", data, ph)[0] == 3:
            off, = struct.unpack_from("<Q", data, ph + 0x08)
            size, = struct.unpack_from("<Q", data, ph + 0x20)
            return data[off:off + size].rstrip(b"\0").decode()
    return None


def loader_list(helper):
    """The host paths of the shared objects `INTERP --list HELPER` prints (empty environment), interp included."""
    interp = elf_interp(helper)
    if interp is None:
        return []
    out = subprocess.run([interp, "--list", str(helper)], env={}, capture_output=True, text=True, check=True).stdout
    paths = {interp}
    for line in out.splitlines():
        m = re.match(r"\t(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)$", line)
        if m:
            paths.add(m.group(1))
    return sorted(paths)


def helpers():
    """The helpers brisk jail places: the ones built next to brisk."""
    return [h for h in (BRISK.parent / "brisk-slirp",) if h.exists()]  # the API's helper is brisk, forked


def check_library_tree(root, top):
    """A top-level directory the jail made for shared objects: real directories root:root 0755, files root's,
    writable by nobody but root, no symlink, nothing else."""
    for d, dirs, files in os.walk(root / top):
        st = os.lstat(d)
        assert stat.S_ISDIR(st.st_mode) and (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o755), d
        for f in files:
            st = os.lstat(os.path.join(d, f))
            assert stat.S_ISREG(st.st_mode) and st.st_uid == 0, f"{d}/{f}"
            assert not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH), f"{d}/{f}: {oct(st.st_mode)}"


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
    wanted = {p.split("/")[1] for h in helpers() for p in loader_list(h)}
    assert set(names) == {"brisk", "kernel", "dev", "run"} | {h.name for h in helpers()} | wanted, names
    for top in wanted:
        check_library_tree(root, top)
    st = os.stat(root / "kernel")
    if os.stat(root).st_dev == os.stat(kernel).st_dev:
        assert st.st_ino == os.stat(kernel).st_ino  # a hard link: the very inode, no copy
    else:  # across file systems: the empty placeholder the jail's child bind-mounted the kernel onto
        assert st.st_size == 0 and stat.S_IMODE(st.st_mode) == 0o600, st
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
            # (paths as the reader's root sees them: under the nested harness's chroot, with its prefix)
            assert target.startswith("anon_inode:") or target.endswith(("/dev/kvm", "/run/serial.log")), \
                f"fd {fd} -> {target}"
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


# ---- the cgroup outlives neither a killed jail nor a daemonized brisk (docs/security.md, case 29) ---------------


def writable_cgroup():
    """The cgroup v2 mount brisk jail uses, when this process can make cgroups there; else skips."""
    mnt, _ = cgroup_controllers()
    if not mnt or not os.access(mnt, os.W_OK):
        pytest.skip("no writable cgroup v2 here")
    return Path(mnt)


def remove_cgroup(cg, timeout=5.0):
    """rmdir of a test's own cgroup, retried while its last process is still leaving."""
    deadline = time.monotonic() + timeout
    while cg.exists():
        try:
            cg.rmdir()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def kill_quietly(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_gone(path, timeout=10.0):
    deadline = time.monotonic() + timeout
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not path.exists()


@pytest.mark.security
def test_cgroup_removed_after_the_jail_is_killed(kvm, base):
    """kill -9 of a waiting jail: brisk dies with it (PDEATHSIG), and the cgroup's reaper, outside the jail's PID
    namespace and cgroup, removes the cgroup; the ID can be used again at once."""
    mnt = writable_cgroup()
    jid = f"k9-{os.getpid()}"
    j = Running(base, jid)
    cg = mnt / "brisk" / jid
    assert str(j.pid) in (cg / "cgroup.procs").read_text().split()
    os.close(j.leak_w)
    os.kill(j.proc.pid, signal.SIGKILL)
    j.proc.communicate(timeout=30)
    if not wait_gone(cg):
        procs = (cg / "cgroup.procs").read_text()
        kill_quietly(j.pid)
        pytest.fail(f"{cg} is still there 10 s after kill -9 of the jail: {procs}")
    shutil.rmtree(base / "brisk" / jid)  # the jail directory stays by design (cli.md)
    p = run_jail(base, jid, "run", "--kernel", guest("hello"))
    assert p.returncode == 0, p.stderr
    assert "left behind" not in p.stderr


@pytest.mark.security
def test_cgroup_removed_when_a_daemonized_brisk_ends(kvm, base):
    """--daemonize: the jail returns 0 at once; when brisk later ends (SIGTERM here), the reaper removes the
    cgroup. The reaper holds none of the caller's fds: the jail's stdout and stderr reach EOF at once."""
    mnt = writable_cgroup()
    jid = f"dm-{os.getpid()}"
    p = run_jail(base, jid, "run", "--kernel", guest("counter"), "--serial", "file:/run/serial.log",
                 extra=("--daemonize",))
    skip_if_environment(p)
    assert p.returncode == 0, p.stderr
    cg = mnt / "brisk" / jid
    pid = int((base / "brisk" / jid / "brisk.pid").read_text())
    log = base / "brisk" / jid / "root" / "run" / "serial.log"
    try:
        assert cg.is_dir() and str(pid) in (cg / "cgroup.procs").read_text().split()
        # SIGTERM only once brisk runs the guest: before brisk blocks it, PID 1 of a namespace ignores it
        deadline = time.monotonic() + 20
        while not (log.exists() and "count 2 " in log.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.kill(pid, signal.SIGTERM)
    if not wait_gone(cg):
        kill_quietly(pid)  # no VM outlives the test
        pytest.fail(f"{cg} is still there 10 s after the daemonized brisk was sent SIGTERM")


@pytest.mark.security
def test_stale_empty_cgroup_is_reused(kvm, base):
    """A cgroup of the ID left empty (no process, no child: a jail and its reaper both killed) does not block the
    ID: it is removed and made again, with a note; the jail then runs and removes it as usual."""
    mnt = writable_cgroup()
    jid = f"st-{os.getpid()}"
    cg = mnt / "brisk" / jid
    cg.mkdir(parents=True)
    try:
        p = run_jail(base, jid, "run", "--kernel", guest("hello"))
        skip_if_environment(p)
        assert p.returncode == 0, p.stderr
        assert f"note: {cg} was left behind by an earlier jail with this ID (empty)" in p.stderr, p.stderr
        assert not cg.exists()
    finally:
        remove_cgroup(cg)


@pytest.mark.security
def test_cgroup_in_use_refused(base):
    """A cgroup of the ID that holds a process (a VM of that ID runs) is refused: exit 2 naming it, the new jail
    directory removed again, the cgroup and its process untouched."""
    mnt = writable_cgroup()
    jid = f"bz-{os.getpid()}"
    cg = mnt / "brisk" / jid
    cg.mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        (cg / "cgroup.procs").write_text(str(sleeper.pid))
        p = run_jail(base, jid, "run", "--kernel", guest("hello"))
        skip_if_environment(p)
        assert p.returncode == EXIT_USAGE, p.stderr
        assert f"the cgroup {cg} is in use" in p.stderr, p.stderr
        assert not (base / "brisk" / jid).exists()
        assert str(sleeper.pid) in (cg / "cgroup.procs").read_text().split()
    finally:
        sleeper.kill()
        sleeper.wait()
        remove_cgroup(cg)


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
    ("abbreviated-option", {}, ("--daemon",), "--daemon: an abbreviation of --daemonize"),
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


@pytest.mark.security
@pytest.mark.parametrize("word", ["--kern", "--dis=/x", "--cpu-temp", "--api"])
def test_abbreviated_run_args_refused(base, word):
    """An abbreviated RUN-ARG (which the jail would not rewrite, so a host path would reach the jail) is refused
    as brisk refuses it: exit 2 naming it, nothing created (docs/security.md, case 27)."""
    args = [word, guest("hello")] if "=" not in word else [word]
    p = run_jail(base, "r9", "run", "--kernel", guest("hello"), *args)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert f"RUN-ARGS {word.split('=')[0]}: an abbreviation of" in p.stderr, p.stderr
    assert not (base / "brisk").exists()


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


@pytest.mark.security
@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_symlinked_files_are_placed_as_their_targets(kvm, base, tmp_path, relative):
    """--kernel, --disk and a --cpu-template file given as symlinks on the jail's own file system (where a hard
    link of the symlink itself would succeed and leave /kernel pointing at a host path): the jail places the file
    each symlink leads to, so the VM boots and reads the disk; the links themselves are untouched."""
    files = tmp_path / "files"
    files.mkdir()
    kernel = files / "hello.elf"
    shutil.copyfile(guest("hello"), kernel)
    disk = files / "d.img"
    disk.write_bytes(b"\0" * 4096)
    tmpl = files / "t.json"
    tmpl.write_text('{"cpuid": []}')
    for f in (kernel, disk, tmpl):
        os.chmod(f, 0o666)
    links = tmp_path / "links"
    links.mkdir()
    for name, target in (("k", kernel), ("d", disk), ("t.json", tmpl)):
        os.symlink(os.path.relpath(target, links) if relative else target, links / name)
    assert os.stat(links).st_dev == os.stat(base).st_dev
    jid = f"s{int(relative)}-{os.getpid()}"
    p = run_jail(base, jid, "run", "--kernel", str(links / "k"), "--disk", str(links / "d"), "--cpu-template",
                 str(links / "t.json"))
    skip_if_environment(p)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == HELLO_LINE
    root = base / "brisk" / jid / "root"
    for name, target in (("kernel", kernel), ("disk0", disk), ("cpu-template.json", tmpl)):
        st = os.lstat(root / name)
        assert stat.S_ISREG(st.st_mode), f"/{name} is not a regular file in the jail"
        assert st.st_ino == os.stat(target).st_ino, f"/{name} is not {target}"
    assert all(os.path.islink(links / n) for n in ("k", "d", "t.json"))


# ---- dynamically linked helpers: their interpreter and shared objects placed in the jail ------------------


def dynamic_helper(name):
    """BUILD/name when it is built and dynamically linked (the default build), else skips; also skips when brisk
    itself is dynamically linked (the ASan build), which the jail refuses before it looks at any helper."""
    if elf_interp(BRISK) is not None:
        pytest.skip("this brisk is dynamically linked (the ASan build): brisk jail refuses it")
    h = BRISK.parent / name
    if not h.exists():
        pytest.skip(f"{name} not built")
    if elf_interp(h) is None:
        pytest.skip(f"{name} is statically linked: nothing to place")
    return h


def test_helper_libraries_placed(kvm, base):
    """Each shared object a helper's loader lists sits at the same path in the jail (a real directory where the
    host has a symlink, /lib -> usr/lib), with the host file's content (the very inode when it could be
    hard-linked), root's and writable by root only. (brisk-slirp is the one dynamic helper: the API's is brisk.)"""
    lists = {h.name: loader_list(h) for h in (dynamic_helper("brisk-slirp"),)}
    p = run_jail(base, "l1", "run", "--kernel", guest("hello"))
    skip_if_environment(p)
    assert p.returncode == 0, p.stderr
    root = base / "brisk" / "l1" / "root"
    for name, paths in lists.items():
        assert paths, name
        for path in paths:
            placed = root / path.lstrip("/")
            st, host = os.lstat(placed), os.stat(path)
            assert stat.S_ISREG(st.st_mode) and st.st_uid == 0, placed
            assert not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH), placed
            assert st.st_ino == host.st_ino or placed.read_bytes() == Path(path).read_bytes(), placed
            for parent in placed.relative_to(root).parents:
                if str(parent) != ".":
                    assert not (root / parent).is_symlink(), root / parent
    assert any(p.endswith("/libc.so.6") for p in lists["brisk-slirp"]), lists
    assert not (root / "brisk-api").exists(), "the API's helper is brisk itself: nothing placed for it"
    interp = elf_interp(BRISK.parent / "brisk-slirp")
    assert os.stat(root / interp.lstrip("/")).st_mode & 0o111, "the interpreter must be executable"


def test_api_sock_in_jail(kvm, base):
    """`brisk jail ... -- --api-sock /run/api.sock`: the HTTP helper (brisk, forked: "brisk-api") starts in the
    jail (its root, the jail's user, its seccomp filter on), the VM is configured and started through the API
    with a kernel placed in the jail, and the jailed brisk ends with the guest's status, its socket removed."""
    if elf_interp(BRISK) is not None:
        pytest.skip("this brisk is dynamically linked (the ASan build): brisk jail refuses it")
    proc = subprocess.Popen(jail_cmd(base, "a1", "--api-sock", "/run/api.sock"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root = base / "brisk" / "a1" / "root"
    sock = root / "run" / "api.sock"
    try:
        try:
            wait_for_socket(sock, proc, timeout=20)
        except AssertionError:
            out, err = proc.communicate(timeout=30)
            skip_if_environment(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
            raise
        api = ApiClient(sock)
        assert api.get("/").status == 200
        brisk_pid = int((base / "brisk" / "a1" / "brisk.pid").read_text())
        kids = Path(f"/proc/{brisk_pid}/task/{brisk_pid}/children").read_text().split()
        assert len(kids) == 1, kids
        helper = proc_status(kids[0])
        assert helper["Name"] == "brisk-api", helper["Name"]
        assert helper["Uid"].split() == [str(NOBODY)] * 4 and helper["NoNewPrivs"] == "1"
        assert helper["Seccomp"] == "2", "the helper's filter is on"
        assert os.stat(f"/proc/{kids[0]}/exe").st_ino == os.stat(root / "brisk").st_ino  # brisk itself
        assert not (root / "brisk-api").exists()
        assert os.stat(f"/proc/{kids[0]}/root").st_ino == os.stat(root).st_ino
        # The kernel, placed as a Firecracker user places it: into the jail's root, readable by the jail's user.
        shutil.copyfile(guest("hello"), root / "hello.elf")
        os.chmod(root / "hello.elf", 0o644)
        api.boot_source("/hello.elf")
        api.machine_config(1, 64)
        api.start()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    check_sanitizers(err)
    assert proc.returncode == 0, err
    assert HELLO_LINE in out, out
    assert not sock.exists(), "the API socket outlived brisk"


def test_net_user_in_jail(kvm, base):
    """`--net user` in the jail: brisk-slirp (libslirp, glib) starts there and answers the guest's ARP request
    for the gateway; the VM ends with the guest's status and the helper reports its frames."""
    dynamic_helper("brisk-slirp")
    p = run_jail(base, "n1", "run", "--kernel", guest("virtio-net"), "--net", "user", "--log-level", "info",
                 "--cmdline", "peer=slirp ip=0xc0a84c0f gw=0xc0a84c02", timeout=120)
    skip_if_environment(p)
    assert p.returncode == 0, f"{p.stdout}\n{p.stderr}"
    assert "virtio-net: PASS" in p.stdout, p.stdout
    assert "CHECK rx_arp_sender_gateway: PASS (sender 192.168.76.2" in p.stdout, p.stdout
    assert re.search(r"virtio-net 0 \(user\): 2 frames tx, 2 rx", p.stderr), p.stderr
    assert re.search(r"^brisk-slirp: 2 frames from the guest, 2 to it", p.stderr, re.M), p.stderr


def patched_copy(src, dst, old, new):
    """src copied to dst (mode 0755) with every occurrence of the bytes old replaced by new (the same length)."""
    assert len(old) == len(new)
    data = Path(src).read_bytes()
    assert old in data, f"{old!r} not in {src}"
    dst.write_bytes(data.replace(old, new))
    os.chmod(dst, 0o755)
    return dst


def test_helper_library_missing_refused(base, tmp_path):
    """A helper whose loader cannot find a library (DT_NEEDED renamed in a copy): exit 2 naming the library,
    before anything is created."""
    helper = patched_copy(dynamic_helper("brisk-slirp"), tmp_path / "brisk-slirp", b"libslirp.so.0",
                          b"libslirx.so.0")
    p = run_jail(base, "m1", "run", "--kernel", guest("hello"),
                 env={**os.environ, "BRISK_SLIRP_HELPER": str(helper)})
    assert p.returncode == EXIT_USAGE, p.stderr
    assert "brisk-slirp" in p.stderr and "libslirx.so.0" in p.stderr and "--list" in p.stderr, p.stderr
    assert not (base / "brisk").exists()


def test_helper_interpreter_not_roots_refused(base):
    """A program interpreter that is not root's is never run as root: exit 2, before anything is created."""
    real = elf_interp(dynamic_helper("brisk-slirp"))
    d = Path(short_tmpdir("bj"))
    try:
        fake = d / ("x" * (len(real) - len(str(d)) - 1))
        assert len(str(fake)) == len(real)
        shutil.copyfile(os.path.realpath(real), fake)
        os.chown(fake, NOBODY, NOBODY)
        os.chmod(fake, 0o755)
        helper = patched_copy(BRISK.parent / "brisk-slirp", d / "brisk-slirp", real.encode(), str(fake).encode())
        p = run_jail(base, "m2", "run", "--kernel", guest("hello"),
                     env={**os.environ, "BRISK_SLIRP_HELPER": str(helper)})
    finally:
        shutil.rmtree(d)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert f"program interpreter {fake} is not root's" in p.stderr, p.stderr
    assert not (base / "brisk").exists()


def test_helper_library_only_found_through_origin_refused(kvm, base, tmp_path):
    """A library the host finds through $ORIGIN (the helper's directory) is placed at the host's path, where
    the jail's loader does not look: the check in the jail catches it (exit 2, the library named) and the
    jail is removed."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build a helper with a $ORIGIN run path")
    (tmp_path / "lib").mkdir()
    (tmp_path / "zz.c").write_text("int zz(void) { return 0; }\n")
    (tmp_path / "main.c").write_text("int zz(void);\nint main(void) { return zz(); }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "lib" / "libzz.so"), str(tmp_path / "zz.c")],
                   check=True)
    helper = tmp_path / "brisk-slirp"
    subprocess.run([cc, "-o", str(helper), str(tmp_path / "main.c"), f"-L{tmp_path / 'lib'}", "-lzz",
                    "-Wl,-rpath,$ORIGIN/lib"], check=True)
    p = run_jail(base, "m3", "run", "--kernel", guest("hello"), env={**os.environ, "BRISK_SLIRP_HELPER": str(helper)})
    skip_if_environment(p)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert "brisk-slirp" in p.stderr and "in the jail" in p.stderr and "libzz.so" in p.stderr, p.stderr
    assert not (base / "brisk" / "m3").exists()


def test_helper_libraries_copied_across_file_systems(kvm, tmp_path):
    """A chroot base on another file system (a tmpfs, in a mount namespace of the test's own) gets copies, not
    links: root's, 0644 (the interpreter 0755) under a umask of 077, and the jail's loader finds them."""
    helper = dynamic_helper("brisk-slirp")
    if not shutil.which("unshare"):
        pytest.skip("no unshare(1) to mount a tmpfs privately")
    base = tmp_path / "tmpfs"
    base.mkdir(mode=0o755)
    root = base / "brisk" / "c1" / "root"
    script = (f"mount -t tmpfs -o mode=0755 brisk-jail-test {base} && umask 077 && "
              f"{shlex.join(jail_cmd(base, 'c1', 'run', '--kernel', guest('hello')))} && "
              f"find {root} -mindepth 1 -printf '%m %u %n %y %P\\n'")
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    check_sanitizers(p.stderr)
    if p.returncode and "unshare" in p.stderr:
        pytest.skip(f"no private mount namespace here: {p.stderr.strip()}")
    skip_if_environment(p)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == HELLO_LINE
    entries = {line.split(" ", 4)[4]: line.split(" ")[:4] for line in p.stdout.splitlines()[1:]}
    interp = elf_interp(helper).lstrip("/")
    for path in loader_list(helper):
        mode, owner, links, kind = entries[path.lstrip("/")]
        assert (owner, links, kind) == ("root", "1", "f"), (path, entries[path.lstrip("/")])
        assert mode == ("755" if path.lstrip("/") == interp else "644"), (path, mode)
    for rel, (mode, owner, _, kind) in entries.items():
        if rel.split("/")[0] not in {"brisk", "brisk-api", "brisk-slirp", "kernel", "dev", "run"} and kind == "d":
            assert (mode, owner) == ("755", "root"), rel


def test_clone_server_in_jail(kvm, base, tmp_path):
    """`brisk jail ... -- restore --snapshot S --mem M --clone-server /run/c.sock --clone-pool 1`: the snapshot's
    files placed as /snapshot.state and /snapshot.mem, the server in the jail (its user, root, PID namespace), and
    a clone it gives a request (taken by the warm clone) runs there too, confined (seccomp filter mode 2): the
    guest (guests/vmgenid.c hold=1) sees a new VM Generation ID and its own pages, exits 0 when released; SIGTERM
    to the jail ends the server (16) and its socket. The pid in the reply is the jail's PID namespace's."""
    if elf_interp(BRISK) is not None:
        pytest.skip("this brisk is dynamically linked (the ASan build): brisk jail refuses it")
    from test_clone_server import WRITTEN, Clone, snapshot_waiting
    from test_vmgenid import CHANGED_RE, PRIVATE_RE

    sockdir = short_tmpdir("bjc")
    try:
        state, mem = snapshot_waiting(str(tmp_path), sockdir, ["--kernel", guest("vmgenid"), "--cmdline", "hold=1"],
                                      r"^vmgenid: waiting$")
    finally:
        shutil.rmtree(sockdir, ignore_errors=True)
    os.chmod(state, 0o644)
    os.chmod(mem, 0o644)
    proc = subprocess.Popen(jail_cmd(base, "cs", "restore", "--snapshot", str(state), "--mem", str(mem),
                                     "--clone-server", "/run/c.sock", "--clone-pool", "1", "--log-level", "info"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root = base / "brisk" / "cs" / "root"
    sock = root / "run" / "c.sock"
    c = None
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():  # published once it listens (a SOCK_SEQPACKET socket: wait_for_socket's
            if proc.poll() is not None:  # stream connect would not do)
                out, err = proc.communicate(timeout=30)
                skip_if_environment(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
                raise AssertionError(f"the jail ended ({proc.returncode}): {err}")
            assert time.monotonic() < deadline, "no clone server socket in 30 s"
            time.sleep(0.05)
        assert {"snapshot.mem", "snapshot.state"} <= set(os.listdir(root)), os.listdir(root)
        assert os.stat(root / "snapshot.mem").st_ino == os.stat(mem).st_ino  # linked, not copied
        server = int((base / "brisk" / "cs" / "brisk.pid").read_text())
        deadline = time.monotonic() + 60
        while not Path(f"/proc/{server}/task/{server}/children").read_text().split():
            assert time.monotonic() < deadline, "no warm clone"
            time.sleep(0.05)
        c = Clone(str(sock), str(tmp_path), "jailed", b"{}")
        c.wait_for(WRITTEN)
        kids = [int(k) for k in Path(f"/proc/{server}/task/{server}/children").read_text().split()]
        [clone] = [k for k in kids if proc_status(k)["NSpid"].split()[-1] == str(c.pid)]
        s = proc_status(clone)
        assert s["Uid"].split() == [str(NOBODY)] * 4 and s["NoNewPrivs"] == "1"
        assert s["Seccomp"] == "2", "the clone's filter is on"
        assert os.stat(f"/proc/{clone}/root").st_ino == os.stat(root).st_ino
        c.release()
        assert c.reply() == {"exit_code": 0}, c.err()
        out = c.out()
        assert CHANGED_RE.search(out) and PRIVATE_RE.search(out), out
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if c:
            c.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    check_sanitizers(err)
    assert proc.returncode == EXIT_STOPPED, err
    assert "clone server: listening on /run/c.sock, 1 warm clones" in err, err
    assert not sock.exists(), "the clone server's socket outlived it"


def test_restore_args_in_jail(base):
    """A jailed restore's refusals: --uffd (its handler listens outside the jail), --snapshot and --mem outside
    `restore`, a missing snapshot file (exit 2 naming the option and the file, nothing created)."""
    p = run_jail(base, "rr", "restore", "--snapshot", "/s", "--uffd", "/u.sock")
    assert p.returncode == EXIT_USAGE and "--uffd: not supported inside a jail" in p.stderr, p.stderr
    p = run_jail(base, "rr", "run", "--snapshot", "/s")
    assert p.returncode == EXIT_USAGE and "belongs to 'restore'" in p.stderr, p.stderr
    p = run_jail(base, "rr", "restore", "--snapshot", str(base / "none.state"), "--mem", str(base / "none.mem"))
    assert p.returncode == EXIT_USAGE and "--snapshot" in p.stderr and "no such file" in p.stderr, p.stderr
    assert not (base / "brisk").exists()


def test_restore_in_jail_with_its_disk(kvm, base, tmp_path):
    """A VM snapshotted in one jail restores in another: blk-counter on --disk D boots in jail A (D as /disk0), is
    paused and snapshotted through its API to in-jail paths and killed; `-- restore --snapshot A/.../vm.state --mem
    A/.../vm.mem --disk D` places the files in jail B (/snapshot.state, /snapshot.mem, D as /disk0 again: where
    the state file names it, --disk not passed on) and the guest goes on from the next round, each round
    checking the sector it wrote 64 rounds before: the disk and the restored guest agree."""
    if elf_interp(BRISK) is not None:
        pytest.skip("this brisk is dynamically linked (the ASan build): brisk jail refuses it")
    disk = tmp_path / "d.img"
    disk.write_bytes(b"\0" * (1 << 20))
    os.chmod(disk, 0o666)  # the jail's user writes it; the jail never changes a file's owner or mode
    a = subprocess.Popen(jail_cmd(base, "ra", "run", "--kernel", guest("blk-counter"), "--disk", str(disk),
                                  "--api-sock", "/run/api.sock"),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root_a = base / "brisk" / "ra" / "root"
    try:
        try:
            wait_for_socket(root_a / "run" / "api.sock", a, timeout=30)
        except AssertionError:
            out, err = a.communicate(timeout=30)
            skip_if_environment(subprocess.CompletedProcess(a.args, a.returncode, out, err))
            raise
        api = ApiClient(root_a / "run" / "api.sock")
        deadline = time.monotonic() + 60
        while api.get("/vm/config").json.get("drives", [{}])[0].get("path_on_host") != "/disk0":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(1)  # some rounds
        assert api.pause().status == 204
        time.sleep(0.5)  # the console's last lines out of brisk before it is killed
        assert api.snapshot_create("/run/vm.state", "/run/vm.mem").status == 204
    finally:
        a.kill()
        out_a, err_a = a.communicate(timeout=30)
    rounds = [int(n) for n in re.findall(r"^blk (\d+) ok", out_a, re.M)]
    assert rounds and rounds == list(range(1, len(rounds) + 1)), out_a[-2000:] + err_a[-2000:]
    p = subprocess.Popen(jail_cmd(base, "rb", "restore", "--snapshot", str(root_a / "run" / "vm.state"), "--mem",
                                  str(root_a / "run" / "vm.mem"), "--disk", str(disk)),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = "", ""
        deadline = time.monotonic() + 60
        while len(re.findall(r"^blk \d+ ok", out, re.M)) < 70 and time.monotonic() < deadline and p.poll() is None:
            if select.select([p.stdout], [], [], 0.5)[0]:
                out += os.read(p.stdout.fileno(), 65536).decode(errors="replace")
    finally:
        p.kill()
        more, err = p.communicate(timeout=30)
        out += more
    check_sanitizers(err)
    root_b = base / "brisk" / "rb" / "root"
    assert os.stat(root_b / "disk0").st_ino == os.stat(disk).st_ino
    after = [int(n) for n in re.findall(r"^blk (\d+) ok", out, re.M)]
    assert "FAIL" not in out, out[-2000:]
    assert len(after) >= 70 and after[0] == rounds[-1] + 1 and after == list(range(after[0], after[0] + len(after))), \
        f"{rounds[-3:]} then {after[:3]}...\n{err[-2000:]}"
