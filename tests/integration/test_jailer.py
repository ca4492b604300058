"""brisk-jailer, Firecracker's jailer (docs/cli.md "brisk-jailer"): the exact argv the orchestrators send, replayed.

(a) firecracker-go-sdk jailer.go (JailerCommandBuilder.Args, NaiveChrootStrategy's LinkFilesHandler: hard links
of the kernel and drives into the chroot after the VMM started, relative paths in the PUTs); (b) Kata's fc.go
(a pre-created chroot with run/ and bind-mounted kernel and config file, `--uid 0 --gid 0 --daemonize --netns`
and `-- --config-file /fcConfig.json`, the API on the default /run/firecracker.socket, the pid from
firecracker.pid); firecracker-containerd runs no Firecracker jailer (runtime/jailer.go: runc only) and is not
replayed here. Then the refusals, each one line on stderr and Firecracker's status.

The VMM in the jail is always the static build/brisk (named firecracker, as the jailer requires); the jailer is
$BRISK's brisk-jailer, so an ASan run (BRISK=build/asan/brisk) sanitizes the jailer itself."""
import ctypes
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from apiclient import ApiClient, wait_for_socket
from conftest import BRISK, ROOT, check_sanitizers, guest, short_tmpdir

JAILER = BRISK.parent / "brisk-jailer"
VMM = ROOT / "build" / "brisk"  # static: the one a chroot can run
NOBODY = 65534
PR_SET_CHILD_SUBREAPER = 36
EXIT_STOPPED = 16
EXIT_ARGS, EXIT_JAILER = 1, 134  # include/brisk/fc_jailer.h: Firecracker's exit 1 and panic=abort

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the jailer needs root (namespaces, mknod, cgroups)")


@pytest.fixture
def exec_file(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    shutil.copy2(VMM, d / "firecracker")
    return d / "firecracker"


@pytest.fixture
def base():
    """A short chroot base: the host's path to <root>/run/firecracker.socket must fit sun_path (108 bytes)."""
    b = Path(short_tmpdir("fcj"))
    os.chmod(b, 0o755)
    yield b
    for m in reversed(mounts_under(b)):
        subprocess.run(["umount", "-l", m], check=False)
    shutil.rmtree(b, ignore_errors=True)


def mounts_under(path):
    with open("/proc/self/mounts") as f:
        return [line.split()[1] for line in f if line.split()[1].startswith(str(path))]


def jailer(*args, timeout=30, log=None):
    """The jailer's run; with log (a path), its stdout and stderr go there: a VMM that keeps them (--new-pid-ns
    without --daemonize) would hold a pipe open after the jailer exited."""
    if log is None:
        p = subprocess.run([str(JAILER), *map(str, args)], stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=timeout)
    else:
        with open(log, "w+") as f:
            p = subprocess.run([str(JAILER), *map(str, args)], stdin=subprocess.DEVNULL, stdout=f, stderr=f,
                               text=True, timeout=timeout)
            f.seek(0)
            p.stderr = f.read()
    check_sanitizers(p.stderr)
    return p


def proc_status(pid):
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def cgroup_lines(pid):
    return Path(f"/proc/{pid}/cgroup").read_text().splitlines()


@pytest.fixture(autouse=True)
def subreaper():
    """The VMM a daemonizing or --new-pid-ns jailer leaves is reparented to this test (PR_SET_CHILD_SUBREAPER),
    which reaps it: a zombie would keep its cgroup busy."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    yield
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def wait_ready(pid, timeout=20):
    """Until the VMM blocks SIGTERM (brisk reads it from a signalfd): before that, a PID 1 of a PID namespace
    drops a SIGTERM from outside (SIG_DFL, pid_namespaces(7))."""
    deadline = time.monotonic() + timeout
    while int(proc_status(pid)["SigBlk"], 16) & (1 << (signal.SIGTERM - 1)) == 0:
        assert time.monotonic() < deadline, f"pid {pid} never blocked SIGTERM"
        time.sleep(0.02)


def stop_and_reap(pid, timeout=20):
    """SIGTERM, then the exit status of the VMM (reparented to this test: see subreaper)."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        assert time.monotonic() < deadline, f"pid {pid} still runs"
        time.sleep(0.05)


def boot_counter(api):
    """PUTs with paths relative to the jail's cwd, as the Go SDK's LinkFilesHandler leaves them."""
    assert api.put("/machine-config", {"vcpu_count": 1, "mem_size_mib": 64}).status == 204
    assert api.put("/boot-source", {"kernel_image_path": "vmlinux", "boot_args": ""}).status == 204
    assert api.put("/actions", {"action_type": "InstanceStart"}).status == 204
    assert api.get("/").json["state"] == "Running"


def rmdir_cgroup(path):
    """Firecracker leaves the cgroups to the caller: with the VMM gone, each is empty and goes with rmdir."""
    deadline = time.monotonic() + 5
    while True:
        try:
            os.rmdir(path)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# ---- (a) firecracker-go-sdk ------------------------------------------------------------------------------------


def go_sdk_argv(jid, exec_file, base, extra=()):
    """JailerCommandBuilder.Args with NumaNode 0 (cpuset.mems/cpus from node0's cpulist), Daemonize false, then
    jail()'s firecracker args: seccompArgs (Seccomp.Enabled false: --no-seccomp) and --api-sock."""
    cpus = Path("/sys/devices/system/node/node0/cpulist").read_text().strip()
    return ["--id", jid, "--uid", NOBODY, "--gid", NOBODY, "--exec-file", exec_file,
            "--cgroup", "cpuset.mems=0", "--cgroup", f"cpuset.cpus={cpus}", *extra,
            "--chroot-base-dir", base, "--", "--no-seccomp", "--api-sock", "/run/firecracker.socket"]


@pytest.mark.skipif(not os.path.exists("/sys/fs/cgroup/cpuset/cpuset.cpus"), reason="no cgroup v1 cpuset")
def test_go_sdk_naive_chroot(kvm, base, exec_file):
    jid = "go-sdk-1"
    root = base / "firecracker" / jid / "root"
    root.mkdir(parents=True)
    # the SDK hard-links the kernel: its user keeps it on the chroot base's file system
    kernel = base / "counter.elf"
    shutil.copy(guest("counter"), kernel)
    proc = subprocess.Popen([str(JAILER), *map(str, go_sdk_argv(jid, exec_file, base))],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        sock = root / "run" / "firecracker.socket"
        wait_for_socket(sock, proc, timeout=20)
        os.link(kernel, root / "vmlinux")  # LinkFilesHandler, after the VMM started
        boot_counter(ApiClient(sock))
        pid = int((root / "firecracker.pid").read_text())
        assert pid == proc.pid  # no --daemonize, no --new-pid-ns: the jailer became the VMM
        st = proc_status(pid)
        assert st["Uid"].split() == [str(NOBODY)] * 4 and st["Gid"].split() == [str(NOBODY)] * 4
        assert st["CapEff"] == st["CapBnd"] == "0000000000000000"
        assert st["NoNewPrivs"] == "1"
        assert os.stat(f"/proc/{pid}/root").st_ino == os.stat(root).st_ino
        assert f"cpuset:/firecracker/{jid}" in "\n".join(cgroup_lines(pid))
        cg = Path("/sys/fs/cgroup/cpuset/firecracker") / jid
        assert (cg / "cpuset.mems").read_text().strip() == "0"
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
        assert cmd[:3] == [b"/firecracker", b"--id", jid.encode()] and cmd[3] == b"--start-time-us"
        assert cmd[-3:] == [b"--no-seccomp", b"--api-sock", b"/run/firecracker.socket"]
        assert Path(f"/proc/{pid}/environ").read_bytes() == b""  # the jailer empties the environment
        assert "Max open files            2048                 2048" in Path(f"/proc/{pid}/limits").read_text()
        assert (root / "firecracker").stat().st_ino != exec_file.stat().st_ino  # a copy, never a link
        assert oct((root / "run").stat().st_mode & 0o777) == "0o700" and (root / "run").stat().st_uid == NOBODY
        proc.send_signal(signal.SIGTERM)  # the SDK's StopVMM
        proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    check_sanitizers(proc.stderr.read() if proc.stderr and not proc.stderr.closed else "")
    rmdir_cgroup(cg)


# ---- (b) Kata Containers ---------------------------------------------------------------------------------------


@pytest.fixture
def netns():
    name = f"brisk-jailer-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode:
        pytest.skip("ip netns add failed")
    yield Path("/var/run/netns") / name
    subprocess.run(["ip", "netns", "delete", name], check=False)


def kata_root(base, jid, kernel):
    """fc.go: jailerRoot/run made, the kernel and config file bind-mounted in (fcJailResource), before the
    jailer runs."""
    root = base / "firecracker" / jid / "root"
    (root / "run").mkdir(parents=True)
    cfg = base / "fcConfig.json"
    cfg.write_text(json.dumps({"boot-source": {"kernel_image_path": "/vmlinux", "boot_args": ""},
                               "machine-config": {"vcpu_count": 1, "mem_size_mib": 64}}))
    for src, name in ((kernel, "vmlinux"), (cfg, "fcConfig.json")):
        (root / name).touch()
        subprocess.run(["mount", "--bind", str(src), str(root / name)], check=True)
    return root


def test_kata_daemonized_config_file(kvm, base, exec_file, netns):
    jid = "0123456789abcdef0123456789abcdef"  # fc.go truncateID: 32 characters
    root = kata_root(base, jid, guest("counter"))
    p = jailer("--id", jid, "--exec-file", exec_file, "--uid", 0, "--gid", 0, "--chroot-base-dir", base,
               "--daemonize", "--netns", netns, "--", "--config-file", "/fcConfig.json")
    assert p.returncode == 0 and p.stdout == "" and p.stderr == "", p
    sock = root / "run" / "firecracker.socket"  # Firecracker's default API socket: no --api-sock given
    deadline = time.monotonic() + 20
    while not (root / "firecracker.pid").exists() or not sock.exists():
        assert time.monotonic() < deadline, "no pid file or API socket"
        time.sleep(0.05)
    pid = int((root / "firecracker.pid").read_text())
    try:
        api = ApiClient(sock)
        deadline = time.monotonic() + 20
        while api.get("/").json.get("state") != "Running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        st = proc_status(pid)
        assert st["Uid"].split()[0] == "0"
        assert st["PPid"] == str(os.getpid())  # the jailer and the session leader exited: reparented here
        assert os.getsid(pid) not in (os.getsid(0), pid)  # double fork: a new session, not its leader
        assert os.readlink(f"/proc/{pid}/fd/0") == os.readlink(f"/proc/{pid}/fd/2") == "/dev/null"
        assert os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(netns).st_ino
        assert os.stat(f"/proc/{pid}/root").st_ino == os.stat(root).st_ino
    finally:
        assert stop_and_reap(pid) == EXIT_STOPPED  # fcEnd: SIGTERM to the pid of firecracker.pid


# ---- --new-pid-ns and cgroup v2 --------------------------------------------------------------------------------


def test_new_pid_ns_and_cgroup_v2_parent(kvm, base, exec_file):
    """--new-pid-ns: the jailer exits 0 at once and firecracker.pid holds the VMM's pid in the jailer's
    namespace; --cgroup-version 2 with --parent-cgroup and no --cgroup moves it into that (existing) cgroup."""
    v2 = next((line.split()[1] for line in open("/proc/self/mounts") if line.split()[2] == "cgroup2"), None)
    if not v2:
        pytest.skip("no cgroup v2 mounted")
    parent = Path(v2) / f"brisk-jailer-test-{os.getpid()}"
    parent.mkdir()
    jid = "pidns-1"
    root = base / "firecracker" / jid / "root"
    root.mkdir(parents=True)
    shutil.copy(guest("counter"), root / "vmlinux")
    os.chmod(root / "vmlinux", 0o644)
    cfg = root / "vm.json"
    cfg.write_text(json.dumps({"boot-source": {"kernel_image_path": "/vmlinux"},
                               "machine-config": {"vcpu_count": 1, "mem_size_mib": 64}}))
    try:
        p = jailer("--id", jid, "--exec-file", exec_file, "--uid", NOBODY, "--gid", NOBODY, "--chroot-base-dir",
                   base, "--new-pid-ns", "--cgroup-version", 2, "--parent-cgroup", parent.name,
                   "--resource-limit", "no-file=512", "--", "--config-file", "/vm.json", "--no-api",
                   log=base / "jailer.log")
        assert p.returncode == 0, p
        pid = int((root / "firecracker.pid").read_text())
        st = proc_status(pid)
        assert st["NSpid"].split()[-1] == "1", st["NSpid"]  # PID 1 of its own namespace
        assert f"0::/{parent.name}" in cgroup_lines(pid)
        assert "Max open files            512                  512" in Path(f"/proc/{pid}/limits").read_text()
        wait_ready(pid)
        assert stop_and_reap(pid) == EXIT_STOPPED
    finally:
        rmdir_cgroup(parent)


# ---- refusals --------------------------------------------------------------------------------------------------

REFUSALS = [
    # (name, argv after the program, status, the one stderr line)
    ("bad-id", ["--id", "a_b"], EXIT_JAILER, "Jailer error: Invalid instance ID: Invalid char (_) at position 1"),
    ("long-id", ["--id", "a" * 65], EXIT_JAILER,
     "Jailer error: Invalid instance ID: Invalid len (65);  the length must be between 1 and 64"),
    ("missing-exec", ["--exec-file", "/nonexistent/firecracker"], EXIT_JAILER,
     "Jailer error: Failed to canonicalize path /nonexistent/firecracker: No such file or directory (os error 2)"),
    ("exec-not-firecracker", ["--exec-file", "/bin/true"], EXIT_JAILER,
     'Jailer error: Invalid filename. The filename of `--exec-file` option must contain "firecracker": true'),
    ("bad-cgroup-key", ["--cgroup", "../cpu.shares=1"], EXIT_JAILER, "Jailer error: Cgroup invalid file: ../cpu.shares=1"),
    ("cgroup-no-value", ["--cgroup", "cpu.shares="], EXIT_JAILER, "Jailer error: Invalid format for cgroups: cpu.shares="),
    ("cgroup-no-controller", ["--cgroup", "nosuch.file=1"], EXIT_JAILER, "Jailer error: Controller nosuch is unavailable"),
    ("cgroup-version-3", ["--cgroup-version", "3", "--cgroup", "cpu.shares=10"], EXIT_JAILER,
     "Jailer error: 3 is an invalid cgroup version specifier"),
    ("parent-cgroup-dotdot", ["--parent-cgroup", "../x"], EXIT_JAILER,
     "Jailer error: Parent cgroup path is invalid. Path should not be absolute or contain '..' or '.'"),
    ("bad-uid", ["--uid", "-1"], EXIT_JAILER, "Jailer error: Invalid uid: -1"),
    ("bad-rlimit", ["--resource-limit", "no-file=x"], EXIT_JAILER,
     "Jailer error: Invalid limit value for resource: x: invalid digit found in string"),
    ("unknown-rlimit", ["--resource-limit", "stack=1"], EXIT_JAILER, "Jailer error: Invalid resource argument: stack"),
    ("unknown-option", ["--foo"], EXIT_ARGS,
     "Failed to parse arguments: Found argument 'foo' which wasn't expected, or isn't valid in this context."),
    ("equals-form", ["--daemonize=1"], EXIT_ARGS,
     "Failed to parse arguments: Found argument 'daemonize=1' which wasn't expected, or isn't valid in this context."),
    ("duplicate", ["--gid", "2"], EXIT_ARGS, "Failed to parse arguments: The argument 'gid' was provided more than once."),
    ("value-is-option", ["--netns", "--daemonize"], EXIT_ARGS,
     "Failed to parse arguments: The argument 'netns' requires a value, but none was supplied."),
]


@pytest.mark.parametrize("name,over,status,line", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refused(base, exec_file, name, over, status, line):
    args = {"--id": "r1", "--exec-file": str(exec_file), "--uid": str(NOBODY), "--gid": str(NOBODY)}
    extra = []
    for i in range(0, len(over), 2):
        if over[i] in args and name != "duplicate":
            args[over[i]] = over[i + 1]
        else:
            extra += over[i:i + 2]
    argv = [w for kv in args.items() for w in kv] + ["--chroot-base-dir", str(base)] + extra
    p = jailer(*argv)
    assert p.returncode == status, p
    assert p.stderr.splitlines() == [line], p.stderr
    assert not (base / "firecracker").exists()  # refused before anything was made


def test_required_and_help(base):
    p = jailer("--id", "x")
    assert p.returncode == EXIT_ARGS
    assert p.stderr.splitlines() == ["Failed to parse arguments: Argument 'exec-file' required, but not found."]
    p = jailer("--version", "--bogus")  # --version wins over every other word, as arg_parser's
    assert p.returncode == 0 and p.stdout.startswith("Jailer v1.7.0"), p
    p = jailer("--help")
    assert p.returncode == 0 and "--exec-file <exec-file>" in p.stdout and "--new-pid-ns" in p.stdout
    p = subprocess.run([str(BRISK), "jailer", "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("Jailer v1.7.0")


def test_existing_device_node_refused_after_copy(base, exec_file):
    """As Firecracker: a reused chroot whose dev/kvm exists fails at mknod, after the copy (status 134)."""
    root = base / "firecracker" / "reuse" / "root"
    (root / "dev").mkdir(parents=True)
    os.mknod(root / "dev" / "kvm", 0o20600, os.makedev(10, 232))
    p = jailer("--id", "reuse", "--exec-file", exec_file, "--uid", NOBODY, "--gid", NOBODY, "--chroot-base-dir", base)
    assert p.returncode == EXIT_JAILER
    assert p.stderr.splitlines() == [
        "Jailer error: Failed to create /dev/kvm via mknod inside the jail: File exists (os error 17)"]
    assert (root / "firecracker").exists()
