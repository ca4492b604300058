"""Firecracker's command line (docs/cli.md "Firecracker's command line"): brisk started exactly as the programs
that drive Firecracker start it, each argv taken from that project's source:

- firecracker-go-sdk command_builder.go / jailer.go: `--api-sock S --id ID --no-seccomp` (the SDK adds --id and
  --no-seccomp through its jailer and VMCommandBuilder.WithArgs);
- firecracker-containerd runtime/noop_jailer.go: `--api-sock <relative path> --id VMID`, run in the shim dir;
- flintlock infrastructure/microvm/firecracker/create.go: `--id UID --boot-timer --no-api --config-file F
  --metadata M`;
- Kata src/runtime/virtcontainers/fc.go fcInit (no jailer): `--api-sock S --config-file F`; and its version
  check (parseVersion: the second word of the first line, 'v' stripped, semver >= 0.21.1).

The guest is hello.elf (prints one line, then resets: exit 0)."""
import json
import os
import re
import shutil
import subprocess

import pytest

from apiclient import ApiClient, BriskProcess, wait_for_socket
from conftest import BRISK, EXIT_GUEST_OK, EXIT_USAGE, guest, run_brisk

HELLO_LINE = "Hello from brisk test guest"


def write_json(path, obj):
    path.write_text(json.dumps(obj))
    return str(path)


def hello_config(tmp_path, **extra):
    cfg = {"boot-source": {"kernel_image_path": guest("hello")},
           "machine-config": {"vcpu_count": 1, "mem_size_mib": 64}, "drives": []}
    cfg.update(extra)
    return write_json(tmp_path / "vm.json", cfg)


def boot_through_api(api):
    api.boot_source(guest("hello"))
    api.machine_config(vcpu_count=1, mem_size_mib=64)
    api.start()


@pytest.mark.usefixtures("kvm")
def test_go_sdk_argv(sockdir, procs):
    """The SDK's argv; GET / reports the --id; the VM boots and the process exits with the guest."""
    sock = os.path.join(sockdir, "fc.sock")
    b = BriskProcess(BRISK, ["--api-sock", sock, "--id", "sdk-vm-1", "--no-seccomp"], sock=sock)
    procs.append(b)
    info = b.api.get("/")
    assert info.status == 200 and info.json["id"] == "sdk-vm-1", info
    boot_through_api(b.api)
    assert b.wait(60) == EXIT_GUEST_OK, b.err
    assert HELLO_LINE in b.out
    assert not os.path.exists(sock), "the socket is removed at exit"


@pytest.mark.usefixtures("kvm")
def test_containerd_relative_socket(sockdir, procs):
    """firecracker-containerd's noop jailer: a socket path relative to the shim directory (the cwd)."""
    proc = subprocess.Popen([str(BRISK), "--api-sock", "firecracker.sock", "--id", "ctr-vm"], cwd=sockdir,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        sock = os.path.join(sockdir, "firecracker.sock")
        wait_for_socket(sock, proc)
        api = ApiClient(sock)
        assert api.get("/").json["id"] == "ctr-vm"
        boot_through_api(api)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == EXIT_GUEST_OK, err
        assert HELLO_LINE.encode() in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.usefixtures("kvm")
def test_flintlock_argv(tmp_path):
    """flintlock's argv: --boot-timer --no-api --config-file --metadata (its metadata file: {"latest": ...})."""
    meta = write_json(tmp_path / "metadata.json", {"latest": {"meta-data": "instance-id: x\n"}})
    p = run_brisk("--id", "flintlock-uid-1", "--boot-timer", "--no-api", "--config-file", hello_config(tmp_path),
                  "--metadata", meta, timeout=60)
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    assert HELLO_LINE in p.stdout


@pytest.mark.usefixtures("kvm")
def test_kata_unjailed_argv(tmp_path, sockdir, procs):
    """Kata without a jailer: --api-sock and --config-file together; the VM boots from the file and the API
    answers beside it (Kata's waitVMMRunning polls GET /)."""
    sock = os.path.join(sockdir, "kata.sock")
    b = BriskProcess(BRISK, ["--api-sock", sock, "--config-file", hello_config(tmp_path)], sock=None)
    procs.append(b)
    assert b.wait(60) == EXIT_GUEST_OK, b.err
    assert HELLO_LINE in b.out


def test_kata_version_check():
    """fc.go parseVersion + checkVersion: second word, 'v' stripped, >= 0.21.1; and it says it is brisk."""
    for argv in (["--version"], ["--api-sock", "/nonexistent/s", "--version"], ["--bogus", "--version"]):
        p = run_brisk(*argv)
        assert p.returncode == 0, (argv, p.stderr)
        first = p.stdout.split("\n")[0]
        version = first.split(" ")[1].strip().lstrip("v")
        assert tuple(int(x) for x in version.split(".")) >= (0, 21, 1), first
        assert "brisk" in first


def test_help_wins():
    """--help anywhere: the usage on stdout, exit 0, even next to a mistake or a VM option."""
    for argv in (["--api-sock", "S", "--help"], ["--kernel", "K", "--help"], ["--bogus", "--help"]):
        p = run_brisk(*argv)
        assert p.returncode == 0 and "--api-sock PATH" in p.stdout and "--describe-snapshot" in p.stdout, p


def test_started_as_firecracker(tmp_path):
    """A link named `firecracker` takes Firecracker's command line whatever it is, even none."""
    link = tmp_path / "firecracker"
    os.symlink(BRISK, link)
    p = subprocess.run([str(link), "--version"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stdout.split(" ")[1] == "v1.7.0", p
    p = subprocess.run([str(link), "run"], capture_output=True, text=True, timeout=30)
    assert p.returncode == EXIT_USAGE
    assert "Found argument 'run' which wasn't expected" in p.stderr


@pytest.mark.usefixtures("kvm")
def test_default_socket_is_firecrackers(tmp_path):
    """Neither --api-sock nor --no-api: /run/firecracker.socket, as Firecracker (a private /run here)."""
    cfg = write_json(tmp_path / "vm.json", {"boot-source": {"kernel_image_path": guest("counter"),
                                                            "boot_args": "stop=100000000"},
                                            "machine-config": {"vcpu_count": 1, "mem_size_mib": 64}})
    # the configuration is copied into the new /run: tmp_path may be under /run (TMPDIR=/run/tmp, nested-kvm.md)
    script = (f"c=$(cat {cfg}) || exit 8; mount -t tmpfs none /run || exit 9; printf '%s' \"$c\" >/run/vm.json; "
              f"{BRISK} --config-file /run/vm.json --serial none & pid=$!; "
              "for i in $(seq 200); do [ -S /run/firecracker.socket ] && echo SOCKET && break; sleep 0.05; done; "
              "kill $pid; wait $pid; [ ! -e /run/firecracker.socket ] && echo REMOVED")
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=60)
    if "unshare failed" in p.stderr or "Operation not permitted" in p.stderr:
        pytest.skip(f"no mount namespace here: {p.stderr.strip()}")
    assert "SOCKET" in p.stdout and "REMOVED" in p.stdout, (p.stdout, p.stderr)


def test_http_api_max_payload_size(sockdir, procs):
    """The flag reaches the HTTP side: a body over it is refused with Firecracker's message; under it, parsed."""
    sock = os.path.join(sockdir, "p.sock")
    b = BriskProcess(BRISK, ["--api-sock", sock, "--http-api-max-payload-size", "100"], sock=sock)
    procs.append(b)
    r = b.api.request("PUT", "/machine-config", raw=b'{"vcpu_count": 1, "mem_size_mib": 64, "smt": false' +
                      b' ' * 100 + b'}')
    assert r.status == 400 and "larger than the limit of 100 allowed by server" in (r.fault or ""), r
    r = b.api.request("PUT", "/machine-config", raw=b'{"vcpu_count": 1, "mem_size_mib": 64}')
    assert r.status == 204, r


REFUSALS = [
    (["--api-sock", "S", "--id", "bad_id"], "Invalid char (_) at position 3"),
    (["--api-sock", "S", "--id", "x" * 65], "Invalid len (65)"),
    (["--id", "a", "--id", "b"], "provided more than once"),
    (["--api-sock", "--id", "x"], "'api-sock' requires a value"),
    (["--api-sock=S"], "Found argument 'api-sock=S'"),
    (["--no-api"], "Argument 'config-file' required"),
    (["--seccomp-filter", "F", "--no-seccomp"], "cannot be used together"),
    (["--api-sock", "S", "--seccomp-filter", "F"], "does not load Firecracker's compiled filters"),
    (["--api-sock", "S", "--start-time-us", "soon"], "'start-time-us' parameter expected to be of 'u64' type"),
    (["--api-sock", "S", "--http-api-max-payload-size", "0"], "--http-api-max-payload-size 0"),
    (["--api-sock", "S", "--http-api-max-payload-size", str(255 * 1024 + 1)], "expected 1..261120 bytes"),
    (["--api-sock", "S", "--kernel", "K"], "--kernel: a VM option"),
]


@pytest.mark.security
@pytest.mark.parametrize("argv,needle", REFUSALS, ids=[" ".join(a)[:40] for a, _ in REFUSALS])
def test_refused_before_anything_is_created(tmp_path, argv, needle):
    """Each mistake: exit 2, one line in Firecracker's words where it has them, nothing created."""
    p = run_brisk(*argv, cwd=tmp_path)
    assert p.returncode == EXIT_USAGE, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], p.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.security
@pytest.mark.parametrize("content,needle", [("{not json", "not a JSON object"), ("[1, 2]", "not a JSON object"),
                                            ('{"k": "' + "x" * 60000 + '"}', "above the data store's limit")])
def test_metadata_refused(tmp_path, content, needle):
    """--metadata: a JSON object within --mmds-size-limit (default: the payload limit, 51,200 bytes)."""
    meta = tmp_path / "m.json"
    meta.write_text(content)
    p = run_brisk("--no-api", "--config-file", hello_config(tmp_path), "--metadata", str(meta))
    assert p.returncode == EXIT_USAGE and needle in p.stderr, p.stderr
    p = run_brisk("--no-api", "--config-file", hello_config(tmp_path), "--metadata", str(tmp_path / "none.json"))
    assert p.returncode == EXIT_USAGE and "--metadata" in p.stderr, p.stderr


def test_snapshot_version_and_describe(tmp_path):
    p = run_brisk("--snapshot-version")
    assert p.returncode == 0 and re.fullmatch(r"v\d+\.\d+\.\d+\n", p.stdout), p
    bad = tmp_path / "not-a-snapshot"
    bad.write_bytes(b"\0" * 64)
    p = run_brisk("--describe-snapshot", str(bad))
    assert p.returncode == EXIT_USAGE and "--describe-snapshot" in p.stderr, p


@pytest.mark.usefixtures("kvm")
def test_describe_snapshot_of_a_real_snapshot(sockdir, procs):
    sock = os.path.join(sockdir, "s.sock")
    b = BriskProcess(BRISK, ["--api-sock", sock], sock=sock)
    procs.append(b)
    api = b.api
    api.boot_source(guest("counter"), boot_args="stop=1000000")
    api.machine_config(vcpu_count=1, mem_size_mib=64)
    api.start()
    api.pause()
    state, mem = os.path.join(sockdir, "vm.state"), os.path.join(sockdir, "vm.mem")
    api.snapshot_create(state, mem)
    p = run_brisk("--describe-snapshot", state)
    snapshot_version = run_brisk("--snapshot-version").stdout
    assert p.returncode == 0 and p.stdout == snapshot_version, p
    shutil.rmtree(sockdir, ignore_errors=True)
