"""The contract of brisk's Firecracker-compatible API (docs/api.md's endpoint table) against the real
`brisk --api-sock SOCK`: each endpoint's success shape and status, every pre-boot / post-boot violation with
Firecracker's message, malformed bodies (400 naming the key, a running VM unharmed), the unsupported and
unknown endpoints, the process's end (the guest's status, SIGTERM -> 16, the socket removed), and a client
stalled mid-request that must not block the guest or the other clients.

The guests: counter.elf prints "count N sum S" on every LAPIC timer tick (30 ms) on COM1 = brisk's stdout;
hello.elf prints one line and resets (exit 0); exitcode.elf exits through the debug-exit port with code=N.
The tests that need no VM (pre-boot configuration, pre-boot violations) run without KVM; the others use the
`kvm` fixture."""

import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from apiclient import BriskProcess
from conftest import BRISK, EXIT_HOST, EXIT_STOPPED, EXIT_USAGE, check_sanitizers, debug_exit_status, guest, short_tmpdir

NOT_AFTER = "The requested operation is not supported after starting the microVM."
NOT_BEFORE = "The requested operation is not supported before starting the microVM."
LOAD_AFTER_CONFIG = "Loading a microVM snapshot not allowed after configuring boot-specific resources."
COUNT_RE = re.compile(r"^count (\d+) sum \d+", re.M)


# ---- one brisk process, its serial collected ---------------------------------------------------------------


class Brisk(BriskProcess):
    """brisk with args (apiclient.BriskProcess), with the counter guest's helpers."""

    def __init__(self, args, sock=None, env=None, stdin=subprocess.DEVNULL):
        super().__init__(BRISK, args, sock, stdin=stdin, env=env)

    def counts(self):
        return [int(n) for n in COUNT_RE.findall(self.out)]

    def wait_count(self, above=0, timeout=20.0):
        """Waits for a count line numbered > above; returns the highest count seen."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            c = self.counts()
            if c and c[-1] > above:
                return c[-1]
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"no count line above {above} (exit {self.proc.poll()})\nstdout:\n{self.out[-2000:]}"
                             f"\nstderr:\n{self.err[-2000:]}")

    def assert_counting(self, what=""):
        """The guest is still running: a new count line appears."""
        c = self.counts()
        self.wait_count(c[-1] if c else 0)
        assert self.proc.poll() is None, f"brisk exited {self.proc.returncode} {what}\n{self.err[-2000:]}"

    def wait(self, timeout=30):
        code = super().wait(timeout)
        check_sanitizers(self.err)
        return code


@pytest.fixture
def fresh(procs, sockdir):
    """`brisk --api-sock SOCK`: no VM yet."""
    return start_api(procs, sockdir)


def start_api(procs, sockdir, *extra, name="api", env=None):
    sock = os.path.join(sockdir, f"{name}.sock")
    b = Brisk(["--api-sock", sock, *extra], sock=sock, env=env)
    procs.append(b)
    return b


def boot_counter(b, vcpus=1, mem=128, boot_args=None):
    """Configures counter.elf through the API and starts it; waits for its first count line."""
    b.api.boot_source(guest("counter"), boot_args)
    b.api.machine_config(vcpus, mem)
    b.api.start()
    b.wait_count()


@pytest.fixture
def running(kvm, procs, sockdir):
    """A counter guest started through the API, counting."""
    b = start_api(procs, sockdir)
    boot_counter(b)
    return b


def fault(r, status=400):
    assert r.status == status, r
    assert isinstance(r.json, dict) and list(r.json) == ["fault_message"], r
    return r.fault


def vm_config(b):
    r = b.api.get("/vm/config")
    assert r.status == 200, r
    return r.json


def raw_disk(path, size=1 << 20):
    with open(path, "wb") as f:
        f.truncate(size)
    return str(path)


# ---- GET /, GET /version, machine-config ------------------------------------------------------------------


def test_get_instance_info(fresh):
    r = fresh.api.get("/")
    assert r.status == 200, r
    assert r.json["state"] == "Not started"
    assert r.json["app_name"] == "brisk"
    assert r.json["id"] and r.json["vmm_version"]
    assert set(r.json) == {"id", "state", "vmm_version", "app_name"}


def test_get_version(fresh):
    r = fresh.api.get("/version")
    assert r.status == 200, r
    assert r.json["firecracker_version"] == "1.7.0"
    assert r.json["brisk_version"] == fresh.api.get("/").json["vmm_version"]


def test_machine_config_get_put_patch(fresh):
    r = fresh.api.get("/machine-config")
    assert r.status == 200, r
    assert r.json == {"vcpu_count": 1, "mem_size_mib": 128, "smt": False, "track_dirty_pages": False,
                      "huge_pages": "None"}
    fresh.api.ok("PUT", "/machine-config", {"vcpu_count": 2, "mem_size_mib": 256, "smt": True})
    assert fresh.api.get("/machine-config").json == {"vcpu_count": 2, "mem_size_mib": 256, "smt": True,
                                                     "track_dirty_pages": False, "huge_pages": "None"}
    fresh.api.ok("PATCH", "/machine-config", {"mem_size_mib": 64})
    got = fresh.api.get("/machine-config").json
    assert (got["vcpu_count"], got["mem_size_mib"], got["smt"]) == (2, 64, True)
    # PUT replaces: what it does not give goes back to the defaults
    fresh.api.ok("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 32})
    assert fresh.api.get("/machine-config").json["smt"] is False
    assert vm_config(fresh)["machine-config"]["mem_size_mib"] == 32


@pytest.mark.parametrize("method, body, key", [
    ("PUT", {"mem_size_mib": 128}, "vcpu_count is required"),
    ("PUT", {"vcpu_count": 1}, "mem_size_mib is required"),
    ("PUT", {"vcpu_count": 1, "mem_size_mib": 128, "track_dirty_pages": 1}, "track_dirty_pages"),
    ("PUT", {"vcpu_count": 1, "mem_size_mib": 128, "cpu_template": "T9"}, "cpu_template: unknown variant `T9`"),
    ("PUT", {"vcpu_count": 1, "mem_size_mib": 128, "huge_pages": "1G"}, "huge_pages"),
    ("PUT", {"vcpu_count": 255, "mem_size_mib": 128}, "vcpu_count: 255 is out of range"),
    ("PATCH", {}, "machine-config"),
    ("PATCH", {"smt": "yes"}, "smt: expected"),
])
def test_machine_config_refused(fresh, method, body, key):
    before = fresh.api.get("/machine-config").json
    assert key in fault(fresh.api.request(method, "/machine-config", body))
    assert fresh.api.get("/machine-config").json == before


# ---- boot-source, drives, network-interfaces, vsock, entropy ---------------------------------------------


def test_boot_source(fresh, sockdir):
    k, i, k2 = (os.path.join(sockdir, n) for n in ("k", "i", "k2"))
    for p in (k, i, k2):
        open(p, "wb").close()
    fresh.api.ok("PUT", "/boot-source", {"kernel_image_path": k, "boot_args": "console=ttyS0", "initrd_path": i})
    assert vm_config(fresh)["boot-source"] == {"kernel_image_path": k, "initrd_path": i,
                                               "boot_args": "console=ttyS0"}
    fresh.api.ok("PUT", "/boot-source", {"kernel_image_path": k2})  # replaces
    assert vm_config(fresh)["boot-source"] == {"kernel_image_path": k2, "initrd_path": None, "boot_args": None}
    assert "kernel_image_path is required" in fault(fresh.api.put("/boot-source", {"boot_args": "x"}))


@pytest.mark.security
def test_files_checked_at_the_put(fresh, sockdir):
    """As Firecracker, the PUT that names a file or a tap opens it: a missing kernel or initrd, a drive file that
    cannot be used, a tap that cannot be opened (here: a name the kernel would rewrite) are refused by that PUT
    with the reason, and the configuration is unchanged."""
    before = vm_config(fresh)
    missing = os.path.join(sockdir, "nosuch")
    assert f"kernel_image_path {missing}: no such file" in fault(
        fresh.api.put("/boot-source", {"kernel_image_path": missing}))
    assert f"initrd_path {missing}: no such file" in fault(
        fresh.api.put("/boot-source", {"kernel_image_path": K, "initrd_path": missing}))
    assert f"path_on_host {missing}: cannot open the image: no such file" in fault(fresh.api.put(
        "/drives/d", {"drive_id": "d", "path_on_host": missing, "is_root_device": False}))
    ro = os.path.join(sockdir, "ro.img")
    open(ro, "wb").close()
    os.chmod(ro, 0o444)
    assert "the image is read-only" in fault(fresh.api.put(
        "/drives/d", {"drive_id": "d", "path_on_host": ro, "is_root_device": False, "is_read_only": False}))
    assert "a directory" in fault(fresh.api.put(
        "/drives/d", {"drive_id": "d", "path_on_host": sockdir, "is_root_device": False}))
    assert "host_dev_name tap%d: " in fault(fresh.api.put(
        "/network-interfaces/e", {"iface_id": "e", "host_dev_name": "tap%d"}))
    assert vm_config(fresh) == before
    fresh.api.ok("PUT", "/drives/d", {"drive_id": "d", "path_on_host": ro, "is_root_device": False,
                                      "is_read_only": True})
    assert fault(fresh.api.patch(  # PATCH /drives is post-boot only, as Firecracker's
        "/drives/d", {"drive_id": "d", "path_on_host": missing})) == NOT_BEFORE
    assert vm_config(fresh)["drives"][0]["path_on_host"] == ro


@pytest.mark.security
def test_tap_in_use_refused_at_the_put(fresh):
    """A tap another process holds open (here: this test) is refused by PUT /network-interfaces (EBUSY)."""
    import fcntl
    import struct
    TUNSETIFF, IFF_TAP, IFF_NO_PI = 0x400454CA, 0x0002, 0x1000
    try:
        tun = os.open("/dev/net/tun", os.O_RDWR)
    except OSError as e:
        pytest.skip(f"/dev/net/tun: {e}")
    try:
        fcntl.ioctl(tun, TUNSETIFF, struct.pack("16sH", b"bsktapbusy", IFF_TAP | IFF_NO_PI))
        msg = fault(fresh.api.put("/network-interfaces/e", {"iface_id": "e", "host_dev_name": "bsktapbusy"}))
        assert "host_dev_name bsktapbusy: TUNSETIFF" in msg and "in use by another process" in msg, msg
    finally:
        os.close(tun)


def test_drives_put_and_patch(fresh, sockdir):
    d1, d2 = raw_disk(os.path.join(sockdir, "d1.img")), raw_disk(os.path.join(sockdir, "d2.img"))
    fresh.api.ok("PUT", "/drives/rootfs", {"drive_id": "rootfs", "path_on_host": d1, "is_root_device": True,
                                           "is_read_only": False})
    fresh.api.ok("PUT", "/drives/data", {"drive_id": "data", "path_on_host": d2, "is_root_device": False,
                                         "is_read_only": True, "cache_type": "Writeback", "io_engine": "Async"})
    drives = vm_config(fresh)["drives"]
    assert [d["drive_id"] for d in drives] == ["rootfs", "data"]
    assert drives[0]["is_root_device"] is True and drives[0]["path_on_host"] == d1
    assert drives[1]["is_read_only"] is True and drives[1]["cache_type"] == "Writeback"
    # PATCH before boot: Firecracker's OperationNotSupportedPreBoot, nothing changed
    assert fault(fresh.api.patch("/drives/data", {"drive_id": "data", "path_on_host": d1})) == NOT_BEFORE
    assert vm_config(fresh)["drives"][1]["path_on_host"] == d2
    # PUT on an existing id replaces it in place
    fresh.api.ok("PUT", "/drives/data", {"drive_id": "data", "path_on_host": d2, "is_root_device": False})
    assert [d["path_on_host"] for d in vm_config(fresh)["drives"]] == [d1, d2]


@pytest.mark.parametrize("method, path, body, key", [
    ("PUT", "/drives/a", {"drive_id": "b", "path_on_host": "/d", "is_root_device": False}, "does not match"),
    ("PUT", "/drives/a", {"drive_id": "a", "is_root_device": False}, "path_on_host is required"),
    ("PUT", "/drives/a", {"drive_id": "a", "path_on_host": "/d", "is_root_device": False,
                          "rate_limiter": {"bandwidth": {"size": 1}}}, "rate_limiter.bandwidth: refill_time"),
    ("PUT", "/drives/a", {"drive_id": "a", "is_root_device": False, "socket": "/s"}, "socket"),
    ("PUT", "/drives/a-b", {"drive_id": "a-b", "path_on_host": "/d", "is_root_device": False},
     "API Resource IDs can only contain alphanumeric characters and underscores"),
    ("PATCH", "/drives/nosuch", {"drive_id": "nosuch", "path_on_host": "/d"}, "not supported before starting"),
    ("PUT", "/drives/", {"drive_id": "a", "path_on_host": "/d", "is_root_device": False}, "Missing id"),
])
def test_drive_refused(fresh, method, path, body, key):
    assert key in fault(fresh.api.request(method, path, body))
    assert vm_config(fresh)["drives"] == []


def test_network_interface_vsock_entropy(fresh, sockdir):
    fresh.api.ok("PUT", "/network-interfaces/eth0", {"iface_id": "eth0", "host_dev_name": "brisktap9",
                                                     "guest_mac": "06:00:ac:10:00:02"})
    uds = os.path.join(sockdir, "v.sock")
    fresh.api.ok("PUT", "/vsock", {"guest_cid": 3, "uds_path": uds})
    fresh.api.ok("PUT", "/entropy", {"rate_limiter": {"bandwidth": {"size": 1000, "refill_time": 100}}})
    c = vm_config(fresh)
    assert [(n["iface_id"], n["host_dev_name"], n["guest_mac"]) for n in c["network-interfaces"]] == [
        ("eth0", "brisktap9", "06:00:ac:10:00:02")]
    assert c["vsock"]["guest_cid"] == 3 and c["vsock"]["uds_path"] == uds
    assert c["entropy"] is not None
    # PATCH of an interface updates its rate limiters after boot only (Firecracker's pre-boot 400)
    assert fault(fresh.api.patch("/network-interfaces/eth0", {"iface_id": "eth0"})) == NOT_BEFORE


@pytest.mark.parametrize("path, body, key", [
    ("/network-interfaces/e", {"iface_id": "e", "host_dev_name": "x" * 20}, "host_dev_name"),
    ("/network-interfaces/e", {"iface_id": "e", "host_dev_name": "t", "guest_mac": "zz"}, "guest_mac"),
    ("/network-interfaces/e", {"iface_id": "e", "host_dev_name": "t",
                               "rx_rate_limiter": {"bandwidth": {"size": 1, "refill_time": -1}}}, "rx_rate_limiter"),
    ("/vsock", {"guest_cid": 4294967296, "uds_path": "/v"}, "guest_cid: 4294967296 is out of range"),
    ("/vsock", {"guest_cid": 3}, "uds_path is required"),
    ("/entropy", {"rate_limiter": {"bandwidth": {"size": 1000}}}, "refill_time is required"),
    ("/entropy", {"rate": 1}, "unknown key 'rate'"),
])
def test_device_refused(fresh, path, body, key):
    assert key in fault(fresh.api.put(path, body))


@pytest.mark.security
def test_missing_tap_at_instance_start(kvm, fresh):
    """A tap that does not exist: PUT accepts the name (nothing is opened before InstanceStart, as
    Firecracker). At InstanceStart, brisk opens it with TUNSETIFF: with CAP_NET_ADMIN the kernel creates a
    transient tap of that name (as it would for Firecracker) and the VM runs; without it, a 400 naming the tap."""
    name = f"bt{os.getpid() % 100000}x"
    fresh.api.ok("PUT", "/network-interfaces/eth0", {"iface_id": "eth0", "host_dev_name": name})
    fresh.api.boot_source(guest("counter"))
    r = fresh.api.put("/actions", {"action_type": "InstanceStart"})
    if os.geteuid() == 0:
        assert r.status == 204, r
        fresh.wait_count()
        assert os.path.exists(f"/sys/class/net/{name}"), "the VM runs but no tap was created"
    else:
        assert name in fault(r) and "Start microvm error" in r.fault
        assert fresh.api.get("/").json["state"] == "Not started"


def test_missing_boot_source_at_instance_start(fresh):
    msg = fault(fresh.api.put("/actions", {"action_type": "InstanceStart"}))
    assert "boot source" in msg and "/boot-source" in msg
    assert fresh.api.get("/").json["state"] == "Not started"


def test_disk_image_removed_before_instance_start(kvm, fresh, sockdir):
    """A drive file removed between its PUT and InstanceStart: InstanceStart refuses, naming the file; the
    process stays up and can be configured again."""
    missing = raw_disk(os.path.join(sockdir, "gone.img"))
    fresh.api.boot_source(guest("counter"))
    fresh.api.drive("d", missing)
    os.unlink(missing)
    assert missing in fault(fresh.api.put("/actions", {"action_type": "InstanceStart"}))
    assert fresh.api.get("/").json["state"] == "Not started"
    fresh.api.drive("d", raw_disk(missing))
    fresh.api.start()
    fresh.wait_count()


def test_start_errors_name_the_api_fields(kvm, fresh, sockdir):
    """InstanceStart's errors come from brisk's VM code, which words them for the command line (--disk,
    --memory, --vsock): an API client sees the API's objects, ids and fields instead."""
    fresh.api.boot_source(guest("counter"))
    fresh.api.machine_config(1, 16777216)  # 16 TiB: more than this host's RAM + swap
    msg = fault(fresh.api.put("/actions", {"action_type": "InstanceStart"}))
    assert "machine-config: mem_size_mib 16777216 MiB exceeds" in msg and "--" not in msg, msg
    fresh.api.machine_config(1, 128)
    missing = raw_disk(os.path.join(sockdir, "gone.img"))
    fresh.api.drive("rootfs", missing, root=True)
    os.unlink(missing)
    msg = fault(fresh.api.put("/actions", {"action_type": "InstanceStart"}))
    assert f"drives[rootfs]: path_on_host {missing}: " in msg and "--" not in msg, msg
    fresh.api.drive("rootfs", raw_disk(missing), root=True)
    uds = os.path.join(sockdir, "nodir", "v.sock")
    fresh.api.ok("PUT", "/vsock", {"guest_cid": 3, "uds_path": uds})
    msg = fault(fresh.api.put("/actions", {"action_type": "InstanceStart"}))
    assert f"vsock: uds_path {uds}: " in msg and "--" not in msg, msg
    assert fresh.api.get("/").json["state"] == "Not started"


# ---- logger and metrics -----------------------------------------------------------------------------------


FC_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9} \[anonymous-instance:[^\]:]+(:[A-Z]+)?\] ")


def test_logger_gets_brisk_lines(kvm, fresh, sockdir):
    """Once PUT /logger configured it, the log is the file's, in Firecracker's line format."""
    log = os.path.join(sockdir, "brisk.log")
    fresh.api.ok("PUT", "/logger", {"log_path": log, "level": "Debug"})
    fault(fresh.api.get("/nothing"))  # logged at debug
    boot_counter(fresh)
    fresh.proc.send_signal(signal.SIGTERM)
    assert fresh.wait() == EXIT_STOPPED
    text = open(log).read()
    assert "API GET /nothing -> 400" in text, text
    assert "counter.elf" in text and "stopping on Terminated" in text, text
    assert "stopping on Terminated" not in fresh.err  # the log went to the file, not to stderr
    assert all(FC_LINE.match(line) for line in text.splitlines() if line), text


@pytest.mark.parametrize("body, key", [
    ({"level": "Loud"}, "level"),
    ({"log_path": ""}, "log_path"),
    ({"log_path": "/nonexistent-dir/x.log"}, "log_path"),
    ({"show_level": 1}, "show_level"),
    ({"colour": True}, "unknown key 'colour'"),
])
def test_logger_refused(fresh, body, key):
    assert key in fault(fresh.api.put("/logger", body))


def test_logger_reconfigured_keeps_one_fd(fresh, sockdir):
    """Each PUT /logger with a log_path opens it; the previous log file must be closed, not leaked."""
    fd_dir = f"/proc/{fresh.proc.pid}/fd"
    fresh.api.ok("PUT", "/logger", {"log_path": os.path.join(sockdir, "l0.log")})
    n0 = len(os.listdir(fd_dir))
    for i in range(1, 6):
        fresh.api.ok("PUT", "/logger", {"log_path": os.path.join(sockdir, f"l{i}.log")})
    opened = [os.readlink(os.path.join(fd_dir, f)) for f in os.listdir(fd_dir)]
    logs = [p for p in opened if p.endswith(".log")]
    assert len(os.listdir(fd_dir)) == n0 and len(logs) == 1, f"log files held open: {logs}"


def test_refused_logger_changes_nothing(fresh, sockdir):
    """A PUT /logger whose log_path cannot be opened is refused whole: the stored path, the level and the
    log's file stay as they were, and a later request that names no path does not retry the refused one."""
    bad = "/nonexistent-dir/x.log"
    assert "log_path" in fault(fresh.api.put("/logger", {"log_path": bad, "level": "Error"}))
    assert vm_config(fresh)["logger"] is None
    fresh.api.ok("PUT", "/logger", {"level": "Info"})  # was: refused with the earlier path's error
    assert vm_config(fresh)["logger"]["log_path"] is None
    good = os.path.join(sockdir, "good.log")
    fresh.api.ok("PUT", "/logger", {"log_path": good, "level": "Warning"})
    assert "log_path" in fault(fresh.api.put("/logger", {"log_path": bad, "level": "Debug"}))
    logger = vm_config(fresh)["logger"]
    assert (logger["log_path"], logger["level"]) == (good, "Warning"), logger
    fault(fresh.api.get("/not-logged"))  # at debug: the refused level did not take effect
    fresh.api.ok("PUT", "/logger", {"level": "Debug"})
    fault(fresh.api.get("/logged"))
    text = open(good).read()
    assert "GET /logged" in text and "GET /not-logged" not in text, text


def test_refused_metrics_changes_nothing(fresh, sockdir):
    assert "metrics_path" in fault(fresh.api.put("/metrics", {"metrics_path": "/nonexistent-dir/m.json"}))
    assert vm_config(fresh)["metrics"] is None
    assert "PUT /metrics" in fault(fresh.api.put("/actions", {"action_type": "FlushMetrics"}))
    path = os.path.join(sockdir, "metrics.json")
    fresh.api.ok("PUT", "/metrics", {"metrics_path": path, "emit_id": True})
    assert vm_config(fresh)["metrics"] == {"metrics_path": path, "emit_id": True}
    assert "Reinitialization" in fault(fresh.api.put("/metrics", {"metrics_path": "/nonexistent-dir/m.json"}))
    assert vm_config(fresh)["metrics"]["metrics_path"] == path


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f.read().splitlines()]


def test_metrics_flush_before_boot(fresh, sockdir):
    path = os.path.join(sockdir, "metrics.json")
    assert "PUT /metrics" in fault(fresh.api.put("/actions", {"action_type": "FlushMetrics"}))
    fresh.api.ok("PUT", "/metrics", {"metrics_path": path})
    fresh.api.ok("PUT", "/actions", {"action_type": "FlushMetrics"})
    lines = read_metrics(path)
    assert len(lines) == 1
    m = lines[0]
    assert {"utc_timestamp_ms", "api_server", "vcpu", "brisk"} <= set(m)
    assert abs(m["utc_timestamp_ms"] - time.time() * 1000) < 60000
    assert m["brisk"]["api"]["requests"] >= 3 and m["brisk"]["api"]["errors"] >= 1
    assert m["put_api_requests"]["metrics_count"] == 1 and m["put_api_requests"]["actions_fails"] == 1, m
    assert {"timeline_us", "kvm_ioctls"} <= set(m["brisk"])
    assert "Reinitialization" in fault(fresh.api.put("/metrics", {"metrics_path": path}))
    assert "Reinitialization" in fault(fresh.api.put("/metrics", {"emit_id": True}))


def flush_metrics(b, path):
    b.api.ok("PUT", "/actions", {"action_type": "FlushMetrics"})
    return read_metrics(path)[-1]["brisk"]


def test_prewarm_is_what_the_vm_uses(kvm, fresh, sockdir):
    """While it waits for its first request, the API process opens /dev/kvm, fetches KVM's CPUID and makes an
    empty VM (src/vmm/vm_prewarm.c); the boot then takes them: still one KVM_CREATE_VM and one CPUID fetch."""
    path = os.path.join(sockdir, "metrics.json")
    fresh.api.ok("PUT", "/metrics", {"metrics_path": path})
    deadline = time.monotonic() + 20
    while "KVM prewarmed" not in (m := flush_metrics(fresh, path))["timeline_us"]:
        assert time.monotonic() < deadline, f"no prewarm while idle: {m}"
        time.sleep(0.05)
    assert m["kvm_ioctls"].get("KVM_CREATE_VM") == 1, m["kvm_ioctls"]
    assert m["kvm_ioctls"].get("KVM_GET_SUPPORTED_CPUID") == 1, m["kvm_ioctls"]
    assert "/dev/kvm opened" not in m["timeline_us"], m  # marked when a VM takes it
    boot_counter(fresh)
    m = flush_metrics(fresh, path)
    io, tl = m["kvm_ioctls"], m["timeline_us"]
    assert io.get("KVM_CREATE_VM") == 1 and io.get("KVM_GET_SUPPORTED_CPUID") == 1, io
    assert io.get("KVM_SET_TSS_ADDR") == 1, io
    assert tl["KVM prewarmed"] <= tl["API start request"] <= tl["/dev/kvm opened"] <= tl["first KVM_RUN"], tl
    fresh.assert_counting("after a prewarmed boot")


def test_prewarm_keeps_kvm_errors_for_the_request(procs, sockdir):
    """A /dev/kvm that is not KVM, found by the idle prewarm, is still InstanceStart's error (with the same message
    a `brisk run` gives), after the configuration was accepted; the process stays up to be asked again."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not os.path.exists("/dev/kvm"):
        pytest.skip("needs root, unshare(1) and a /dev/kvm to hide in a private mount namespace")
    sock = os.path.join(sockdir, "nokvm.sock")
    b = BriskProcess("unshare", ["-m", "sh", "-c", 'mount --bind /dev/null /dev/kvm && exec "$@"', "sh", BRISK,
                                 "--api-sock", sock], sock=sock)
    procs.append(b)
    time.sleep(0.3)  # idle: the prewarm has run
    b.api.boot_source(guest("hello"))
    b.api.machine_config(1, 64)
    for _ in range(2):
        msg = fault(b.api.put("/actions", {"action_type": "InstanceStart"}))
        assert "/dev/kvm is not a KVM device: KVM_GET_API_VERSION failed" in msg, msg
    assert b.proc.poll() is None
    b.kill()
    check_sanitizers(b.err)


def test_metrics_of_a_running_vm(running, sockdir):
    path = os.path.join(sockdir, "metrics.json")
    running.api.ok("PUT", "/metrics", {"metrics_path": path})
    running.wait_count(running.counts()[-1] + 3)
    running.api.ok("PUT", "/actions", {"action_type": "FlushMetrics"})
    m = read_metrics(path)[-1]
    assert m["vcpu"]["exit_io_out"] > 0, m["vcpu"]  # the counter guest's serial lines
    assert m["uart"]["write_count"] > 0, m["uart"]
    assert "first KVM_RUN" in m["brisk"]["timeline_us"], m["brisk"]["timeline_us"]
    assert m["brisk"]["kvm_ioctls"].get("KVM_RUN", 0) > 0, m["brisk"]["kvm_ioctls"]
    assert m["brisk"]["kvm_ioctls"].get("KVM_CREATE_VM") == 1
    running.proc.send_signal(signal.SIGTERM)
    assert running.wait() == EXIT_STOPPED
    lines = read_metrics(path)
    assert len(lines) >= 2, "no metrics line when the VM ended"
    assert lines[-1]["brisk"]["kvm_ioctls"]["KVM_RUN"] >= m["brisk"]["kvm_ioctls"]["KVM_RUN"]


# ---- InstanceStart, pause/resume, GET /vm/config ---------------------------------------------------------


def test_instance_start_and_state(running):
    assert running.api.get("/").json["state"] == "Running"
    running.assert_counting()
    assert running.api.get("/machine-config").status == 200


def test_pause_resume_idempotent(running):
    running.api.pause()
    running.api.pause()  # idempotent
    assert running.api.get("/").json["state"] == "Paused"
    time.sleep(0.3)  # a line in flight completes
    frozen = running.counts()[-1]
    time.sleep(0.5)  # 30 ms ticks: ~16 lines if it still ran
    assert running.counts()[-1] == frozen, "count lines continue while paused"
    running.api.resume()
    running.api.resume()
    assert running.api.get("/").json["state"] == "Running"
    running.wait_count(frozen)


def test_instance_start_twice(running):
    assert fault(running.api.put("/actions", {"action_type": "InstanceStart"})) == NOT_AFTER
    running.assert_counting()


def test_vm_config_round_trip(kvm, procs, sockdir):
    """GET /vm/config of an API-configured VM is a config file that boots the same VM: 2 vCPUs, 64 MiB."""
    disk = raw_disk(os.path.join(sockdir, "d.img"))
    a = start_api(procs, sockdir, name="a")
    a.api.boot_source(guest("counter"), "stop=3")
    a.api.machine_config(2, 64)
    a.api.drive("data", disk)
    cfg = vm_config(a)
    assert cfg["machine-config"]["vcpu_count"] == 2 and cfg["drives"][0]["path_on_host"] == disk
    path = os.path.join(sockdir, "vm.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    p = Brisk(["--config-file", path, "--no-api"])
    procs.append(p)
    assert p.wait() == 0, p.err
    assert "counter: 2 cpus" in p.out and "counter: PASS" in p.out, p.out
    assert "up to 0x3fff000" in p.out, p.out  # 64 MiB of RAM


def test_largest_configuration_is_described(fresh, sockdir):
    """Any configuration brisk accepts can be read back (it used to exceed the 128 KiB reply limit: GET
    /vm/config waited 60 s, then 503): the longest boot_args (2,047 bytes), 16 drives and logger and
    metrics paths of 4,095 bytes (the drives' of quotes, which JSON doubles), 8 network interfaces; GET
    /vm/config answers at once and says it all."""
    def long_path(name):  # 4,095 bytes that name a real place: repeated slashes are one
        return sockdir + "/" * (4095 - len(sockdir) - len(name) - 1) + "/" + name

    boot_args = "console=ttyS0 " + "x" * (2047 - 14)  # Firecracker's longest (CMDLINE_MAX_SIZE 2048 with the NUL)
    open(long_path("vmlinux"), "wb").close()
    boot = {"kernel_image_path": long_path("vmlinux"), "boot_args": boot_args}
    r = fresh.api.put("/boot-source", boot)
    assert r.status == 204, r.status
    quotes = os.path.join(sockdir, *(['"' * 254] * 15))  # directories named by quotes, each '"' two in the reply
    os.makedirs(quotes, exist_ok=True)

    def quoted_path(i):  # 4,095 bytes, a real file (the PUT opens it)
        name = f"d{i:02}" + '"' * (4095 - len(quotes) - 1 - 3)
        return os.path.join(quotes, name)

    for i in range(16):
        open(quoted_path(i), "wb").close()

    for i in range(16):
        fresh.api.drive(f"d{i}", quoted_path(i), root=i == 0)
    for i in range(8):
        fresh.api.ok("PUT", f"/network-interfaces/n{i}", {"iface_id": f"n{i}", "host_dev_name": f"tap{i}"})
    fresh.api.ok("PUT", "/logger", {"log_path": long_path("brisk.log")})
    fresh.api.ok("PUT", "/metrics", {"metrics_path": long_path("metrics.json")})
    t0 = time.monotonic()
    cfg = vm_config(fresh)
    assert time.monotonic() - t0 < 10
    assert cfg["boot-source"]["boot_args"] == boot_args
    assert [d["path_on_host"] for d in cfg["drives"]] == [quoted_path(i) for i in range(16)]
    assert len(cfg["network-interfaces"]) == 8
    assert cfg["logger"]["log_path"] == long_path("brisk.log")
    assert cfg["metrics"]["metrics_path"] == long_path("metrics.json")


def test_config_file_vm_config_describes_the_file(kvm, procs, sockdir):
    """`brisk --config-file vm.json --api-sock S`: GET /vm/config answers the file's configuration."""
    disk = raw_disk(os.path.join(sockdir, "d.img"))
    a = start_api(procs, sockdir, name="a")
    a.api.boot_source(guest("counter"))
    a.api.machine_config(2, 64)
    a.api.drive("data", disk)
    cfg = vm_config(a)
    path = os.path.join(sockdir, "vm.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    sock = os.path.join(sockdir, "b.sock")
    b = Brisk(["--config-file", path, "--api-sock", sock], sock=sock)
    procs.append(b)
    b.wait_count()
    assert vm_config(b) == cfg


def test_run_api_sock_describes_command_line_vm(kvm, procs, sockdir):
    disk = raw_disk(os.path.join(sockdir, "d.img"))
    sock = os.path.join(sockdir, "r.sock")
    b = Brisk(["run", "--kernel", guest("counter"), "--cpus", "2", "--memory", "64M", "--disk", disk,
               "--api-sock", sock], sock=sock)
    procs.append(b)
    b.wait_count()
    assert b.api.get("/").json["state"] == "Running"
    cfg = vm_config(b)
    assert cfg["machine-config"]["vcpu_count"] == 2 and cfg["machine-config"]["mem_size_mib"] == 64
    assert [d["drive_id"] for d in cfg["drives"]] == ["drive0"]
    assert fault(b.api.put("/machine-config", {"vcpu_count": 1, "mem_size_mib": 64})) == NOT_AFTER


# ---- unsupported and unknown endpoints --------------------------------------------------------------------


@pytest.mark.parametrize("method, path", [
    ("PUT", "/hotplug/memory"), ("PUT", "/serial"), ("PUT", "/pmem/p0"),
    ("PUT", "/snapshot/memory"),
])
def test_unsupported_endpoint(fresh, method, path):
    body = {} if method != "GET" else None
    msg = fault(fresh.api.request(method, path, body))
    assert f"{method} {path}" in msg and "does not implement" in msg


@pytest.mark.parametrize("method, path", [
    ("GET", "/nothing"), ("DELETE", "/machine-config"), ("GET", "/boot-source"), ("GET", "/drives/a"),
    ("PUT", "/drives/a/b"), ("PUT", "/"), ("GET", "/actions"), ("PUT", "/vm"), ("GET", "/vm/config/x"),
    ("PUT", "/mmdsx"), ("GET", "/versions"),
])
def test_unknown_path(fresh, method, path):
    body = {} if method != "GET" else None
    assert fault(fresh.api.request(method, path, body)) == f"Invalid request method and/or path: {method} {path}."


# ---- pre-boot / post-boot rules ---------------------------------------------------------------------------

# a kernel and a drive file the PUTs can open (they open what they name, as Firecracker's)
_FILES = short_tmpdir("bskapi")
atexit.register(shutil.rmtree, _FILES, True)
K, D = os.path.join(_FILES, "k"), os.path.join(_FILES, "d")
for _p in (K, D):
    open(_p, "wb").close()

CONFIG_REQUESTS = [
    ("PUT", "/boot-source", {"kernel_image_path": K}),
    ("PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 128}),
    ("PATCH", "/machine-config", {"mem_size_mib": 64}),
    ("PUT", "/drives/d", {"drive_id": "d", "path_on_host": D, "is_root_device": False}),
    ("PUT", "/network-interfaces/e", {"iface_id": "e", "host_dev_name": "tap0"}),
    ("PUT", "/vsock", {"guest_cid": 3, "uds_path": "/tmp/v.sock"}),
    ("PUT", "/entropy", {}),
]


def test_configuration_after_start(running):
    """Every configuration request after InstanceStart: Firecracker's 400, the VM unchanged and running."""
    before = vm_config(running)
    for method, path, body in CONFIG_REQUESTS + [
            ("PUT", "/snapshot/load", {"snapshot_path": "/s", "mem_file_path": "/m"}),
            ("PUT", "/actions", {"action_type": "InstanceStart"})]:
        assert fault(running.api.request(method, path, body)) == NOT_AFTER, (method, path)
    assert vm_config(running) == before
    running.assert_counting()


@pytest.mark.parametrize("method, path, body", [
    ("PATCH", "/vm", {"state": "Paused"}),
    ("PATCH", "/vm", {"state": "Resumed"}),
    ("PUT", "/snapshot/create", {"snapshot_type": "Full", "snapshot_path": "/tmp/s", "mem_file_path": "/tmp/m"}),
    ("PUT", "/snapshot/create", {"snapshot_path": "/tmp/s", "mem_file_path": "/tmp/m"}),
    ("PUT", "/actions", {"action_type": "SendCtrlAltDel"}),
])
def test_vm_request_before_start(fresh, method, path, body):
    assert fault(fresh.api.request(method, path, body)) == NOT_BEFORE


@pytest.mark.parametrize("method, path, body", CONFIG_REQUESTS)
def test_snapshot_load_after_configuration(fresh, method, path, body):
    fresh.api.ok(method, path, body)
    load = {"snapshot_path": "/nonexistent/s", "mem_backend": {"backend_type": "File",
                                                                "backend_path": "/nonexistent/m"}}
    assert fault(fresh.api.put("/snapshot/load", load)) == LOAD_AFTER_CONFIG


def test_snapshot_load_after_logger_and_metrics(fresh, sockdir):
    """The logger and the metrics are not boot-specific resources (as Firecracker): a load after them is
    attempted (and here fails on the missing file, naming it)."""
    fresh.api.ok("PUT", "/logger", {"level": "Info"})
    fresh.api.ok("PUT", "/metrics", {"metrics_path": os.path.join(sockdir, "m.json")})
    missing = os.path.join(sockdir, "nosuch.state")
    msg = fault(fresh.api.put("/snapshot/load", {"snapshot_path": missing, "mem_file_path": missing + ".mem"}))
    assert msg.startswith("Load snapshot error") and "nosuch.state" in msg
    assert fresh.api.get("/").json["state"] == "Not started"


def test_snapshot_create_while_running(running, sockdir):
    st, mem = os.path.join(sockdir, "s"), os.path.join(sockdir, "m")
    msg = fault(running.api.put("/snapshot/create", {"snapshot_type": "Full", "snapshot_path": st,
                                                     "mem_file_path": mem}))
    assert "paused" in msg
    assert not os.path.exists(st) and not os.path.exists(mem)
    assert "Diff" in fault(running.api.put("/snapshot/create", {"snapshot_type": "Diff", "snapshot_path": st,
                                                                "mem_file_path": mem}))
    running.assert_counting()


def test_ctrl_alt_del_after_start(running):
    """SendCtrlAltDel after start: docs/api.md says "not yet" (400); the i8042 work in progress answers 204 (the
    keys pressed, as Firecracker). Either way a guest that does not read the keyboard (counter) runs on."""
    r = running.api.put("/actions", {"action_type": "SendCtrlAltDel"})
    assert r.status == 204 or fault(r), r
    running.assert_counting()
    assert running.api.get("/").json["state"] == "Running"


# ---- malformed bodies -------------------------------------------------------------------------------------

MALFORMED = [
    # (path, method, raw body, what the fault_message must name)
    ("/machine-config", "PUT", b"", "empty body"),
    ("/machine-config", "PUT", b"{", "bad JSON"),
    ("/machine-config", "PUT", b'{"vcpu_count": 1,, "mem_size_mib": 128}', "bad JSON at byte 17"),
    ("/machine-config", "PUT", b'{"vcpu_count": 1, "mem_size_mib": 128} x', "trailing data"),
    ("/machine-config", "PUT", b'{"vcpu_count": 1, "mem_size_mib": 128}{}', "trailing data"),
    ("/machine-config", "PUT", b'[1, 2]', "expected a JSON object"),
    ("/machine-config", "PUT", b'{"vcpu_count": "2", "mem_size_mib": 128}', "vcpu_count: expected"),
    ("/machine-config", "PUT", b'{"vcpu_count": 1.5, "mem_size_mib": 128}', "vcpu_count"),
    ("/machine-config", "PUT", b'{"vcpu_count": -1, "mem_size_mib": 128}', "vcpu_count"),
    ("/machine-config", "PUT", b'{"vcpu_count": 0, "mem_size_mib": 128}', "vcpu_count: 0 is out of range"),
    ("/machine-config", "PUT", b'{"vcpu_count": 1, "mem_size_mib": 0}', "mem_size_mib: 0 is out of range"),
    ("/machine-config", "PUT", b'{"vcpu_count": 1, "mem_size_mib": 99999999999999999999}', "mem_size_mib"),
    ("/machine-config", "PUT", b'{"vcpu_count": 1, "mem_size_mib": 128, "foo": 1}', "unknown key 'foo'"),
    ("/machine-config", "PUT", b'{"vcpu_count": 1, "vcpu_count": 2, "mem_size_mib": 128}', "duplicate key"),
    ("/boot-source", "PUT", b'{"kernel_image_path": 7}', "kernel_image_path: expected"),
    ("/boot-source", "PUT", b'{"kernel_image_path": ""}', "kernel_image_path"),
    ("/boot-source", "PUT", b'{"kernel_image_path": "/k", "boot_args": "a\\u0001b"}', "boot_args"),
    ("/drives/d", "PUT", b'{"drive_id": "d", "path_on_host": "/d", "is_root_device": "yes"}', "is_root_device"),
    ("/drives/d", "PUT", b'{"drive_id": "d", "path_on_host": "/d", "is_root_device": false, "x": 1}',
     "unknown key 'x'"),
    ("/actions", "PUT", b'{"action_type": "Reboot"}', "action_type"),
    ("/actions", "PUT", b'{}', "action_type is required"),
    ("/actions", "PUT", b'{"action_type": 1}', "action_type"),
    ("/actions", "PUT", b'', "empty body"),
    ("/vm", "PATCH", b'{"state": "Stopped"}', "state"),
    ("/vm", "PATCH", b'{"state": "Paused", "when": 1}', "unknown key 'when'"),
    ("/vm", "PATCH", b'not json', "bad JSON"),
    ("/snapshot/create", "PUT", b'{"snapshot_path": "/s"}', "mem_file_path is required"),
    ("/snapshot/load", "PUT", b'{"snapshot_path": "/s"}', "mem_backend or mem_file_path is required"),
    ("/snapshot/load", "PUT", b'{"snapshot_path": "/s", "mem_backend": {"backend_type": "Uffd"}}', "backend_path"),
    ("/snapshot/load", "PUT", b'{"snapshot_path": "/s", "mem_backend": {"backend_type": "Mmap", '
     b'"backend_path": "/u"}}', "backend_type File or Uffd"),
    ("/snapshot/load", "PUT", b'{"snapshot_path": "/s", "mem_file_path": "/m", "enable_diff_snapshots": 1}',
     "enable_diff_snapshots"),
    ("/snapshot/load", "PUT", b'{"snapshot_path": "/s", "mem_file_path": "/m", "network_overrides": [{}]}',
     "network_overrides[0]: iface_id is required"),
    ("/logger", "PUT", b'{"level": 3}', "level"),
    ("/metrics", "PUT", b'{"metrics_path": []}', "metrics_path"),
]


@pytest.mark.parametrize("path, method, raw, key", MALFORMED, ids=[f"{m[1]}{m[0]}-{i}" for i, m in
                                                                    enumerate(MALFORMED)])
def test_malformed_body_before_start(fresh, path, method, raw, key):
    before = vm_config(fresh)
    assert key in fault(fresh.api.request(method, path, raw=raw))
    assert vm_config(fresh) == before
    assert fresh.api.get("/").json["state"] == "Not started"


POST_BOOT_MALFORMED = [m for m in MALFORMED if m[0] in ("/actions", "/vm", "/logger", "/metrics")
                       or (m[0] == "/snapshot/create")]


@pytest.mark.security
def test_malformed_body_while_running(running):
    """The endpoints a running VM answers, each with every malformed body: a 400 naming the key, and the VM
    keeps counting (and the configuration endpoints answer NOT_AFTER whatever their body)."""
    for path, method, raw, key in POST_BOOT_MALFORMED:
        assert key in fault(running.api.request(method, path, raw=raw)), (path, raw)
    for path, method, raw, _ in MALFORMED:
        if path in ("/machine-config", "/boot-source", "/drives/d"):
            assert fault(running.api.request(method, path, raw=raw)) == NOT_AFTER, (path, raw)
    assert running.api.get("/").json["state"] == "Running"
    running.assert_counting("after malformed requests")


# ---- the end of the VM ends the process -------------------------------------------------------------------


@pytest.mark.parametrize("code", [0, 3])
def test_guest_exit_ends_process(kvm, procs, sockdir, code):
    b = start_api(procs, sockdir)
    b.api.boot_source(guest("exitcode"), f"code={code}")
    b.api.start()
    assert b.wait() == debug_exit_status(code), b.err
    assert f"exitcode: {code}" in b.out
    assert not os.path.exists(b.sock), "the API socket outlived brisk"


def test_guest_reset_ends_process(kvm, procs, sockdir):
    b = start_api(procs, sockdir)
    b.api.boot_source(guest("hello"))
    b.api.start()
    assert b.wait() == 0, b.err
    assert "Hello from brisk test guest" in b.out
    assert not os.path.exists(b.sock)


def test_sigterm_running(running):
    running.proc.send_signal(signal.SIGTERM)
    assert running.wait() == EXIT_STOPPED
    assert not os.path.exists(running.sock)


def test_sigterm_before_start(fresh):
    fresh.proc.send_signal(signal.SIGTERM)
    assert fresh.wait() == EXIT_STOPPED
    assert not os.path.exists(fresh.sock)


def test_socket_path_rules(procs, sockdir):
    """A live socket at PATH is refused and left serving; a regular file is refused and left alone; a stale
    socket file is replaced."""
    a = start_api(procs, sockdir, name="live")
    p = Brisk(["--api-sock", a.sock])
    assert p.wait() == EXIT_USAGE
    assert a.api.get("/").status == 200
    regular = os.path.join(sockdir, "file.sock")
    with open(regular, "w") as f:
        f.write("keep")
    p = Brisk(["--api-sock", regular])
    assert p.wait() == EXIT_USAGE
    assert open(regular).read() == "keep"
    stale = os.path.join(sockdir, "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(stale)
    s.close()
    b = start_api(procs, sockdir, name="stale")
    assert b.api.get("/").status == 200


@pytest.mark.security
def test_request_answered_503_never_takes_effect(kvm, procs, sockdir):
    """docs/security.md case 25: brisk stopped (SIGSTOP) past the reply timeout (3 s here, through
    $BRISK_API_REPLY_TIMEOUT_S): PATCH /vm Paused and a second request queued behind it are each answered 503
    at their own deadline, and after SIGCONT the VM is still running: brisk drops the expired requests
    unread (the pause used to happen after its 503, and the queued request waited for the first's timeout)."""
    timeout = 3
    b = start_api(procs, sockdir, env={"BRISK_API_REPLY_TIMEOUT_S": str(timeout)})
    boot_counter(b)
    results = {}

    def ask(key, body):
        t0 = time.monotonic()
        r = b.api.patch("/vm", body)
        results[key] = (r, time.monotonic() - t0)

    os.kill(b.proc.pid, signal.SIGSTOP)
    try:
        threads = [threading.Thread(target=ask, args=("pause", {"state": "Paused"}))]
        threads[0].start()
        time.sleep(0.5)
        threads.append(threading.Thread(target=ask, args=("queued", {"state": "Paused"})))
        threads[1].start()
        for t in threads:
            t.join(timeout=30)
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)
    for key, (r, took) in results.items():
        assert "not carried out" in fault(r, 503), (key, r)
        assert took < timeout + 2, f"{key}: answered after {took:.1f} s (its deadline: {timeout} s)"
    assert len(results) == 2
    assert b.api.get("/").json["state"] == "Running"
    b.assert_counting("after the expired pause")
    b.api.pause()  # a request that brisk takes is carried out as ever
    assert b.api.get("/").json["state"] == "Paused"


def helper_pid(b):
    """The brisk-api child of brisk process b."""
    children = Path(f"/proc/{b.proc.pid}/task/{b.proc.pid}/children").read_text().split()
    pids = [int(c) for c in children if Path(f"/proc/{c}/comm").read_text().strip() == "brisk-api"]
    assert len(pids) == 1, children
    return pids[0]


def reaped(pid, timeout=10.0):
    """True once pid no longer exists at all (exited and reaped: not even a zombie)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.security
def test_killed_helper_is_reaped_while_the_vm_runs(running):
    """brisk-api killed under a running VM: brisk reaps it and removes the socket file at once (no zombie, no
    path that refuses connections), logs how it ended, and the VM runs on; SIGTERM still ends it with 16."""
    pid = helper_pid(running)
    os.kill(pid, signal.SIGKILL)
    assert reaped(pid), f"brisk-api {pid} left unreaped: {Path(f'/proc/{pid}/stat').read_text()}"
    deadline = time.monotonic() + 10
    while os.path.exists(running.sock) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not os.path.exists(running.sock), "the dead helper's socket file stayed"
    running.assert_counting("after the helper was killed")
    assert "brisk-api helper was killed by signal 9" in running.err, running.err
    running.proc.send_signal(signal.SIGTERM)
    assert running.wait() == EXIT_STOPPED


@pytest.mark.security
def test_killed_helper_before_start_ends_brisk(fresh):
    """A brisk-api killed while no VM exists ends brisk with 4, its socket file removed. (A request is answered
    first: the socket accepts connections before the helper has said it is ready, and a helper killed in
    between is reported as "exited before it was ready", also 4.)"""
    assert fresh.api.get("/").status == 200
    os.kill(helper_pid(fresh), signal.SIGKILL)
    assert fresh.wait() == EXIT_HOST
    assert not os.path.exists(fresh.sock)
    assert "brisk-api helper was killed by signal 9" in fresh.err, fresh.err


def test_no_helper_file_needed(sockdir):
    """The HTTP helper is brisk itself, forked (api_link.h): no brisk-api binary is looked for, so the variable
    that used to name one changes nothing."""
    sock = os.path.join(sockdir, "api.sock")
    b = Brisk(["--api-sock", sock], sock=sock, env={"BRISK_API_HELPER": os.path.join(sockdir, "no-such-helper")})
    try:
        assert b.api.get("/").status == 200
    finally:
        b.kill()


def test_helper_that_cannot_start_is_a_host_failure(sockdir):
    """docs/exit-codes.md: a helper that ends before it is ready (here its own seccomp filter's self-test kills
    it) is the host's failure, 4 (the socket path's own faults are 2: test_socket_path_rules); nothing is left
    at the path."""
    sock = os.path.join(sockdir, "api.sock")
    p = subprocess.run([str(BRISK), "--api-sock", sock], env={**os.environ, "BRISK_SECCOMP_SELFTEST": "brisk-api"},
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    check_sanitizers(p.stderr)
    assert p.returncode == EXIT_HOST, p.stderr
    assert "helper exited before it was ready" in p.stderr, p.stderr
    assert not os.path.exists(sock)


# ---- the API never blocks the guest -----------------------------------------------------------------------


@pytest.mark.security
def test_stalled_client_does_not_block(running):
    """A client that sends half a request (headers promising a body it never sends), and one that connects
    and says nothing: the guest keeps counting and other clients are answered promptly."""
    half = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    half.connect(running.sock)
    half.sendall(b"PATCH /vm HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{\"state\": ")
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.connect(running.sock)
    try:
        start = running.counts()[-1]
        for _ in range(5):
            t0 = time.monotonic()
            assert running.api.get("/").json["state"] == "Running"
            assert time.monotonic() - t0 < 1.0
        running.wait_count(start + 10, timeout=5)
        running.api.pause()  # the half-sent PATCH /vm does not hold the VM either
        running.api.resume()
        running.assert_counting()
    finally:
        half.close()
        mute.close()
    running.assert_counting()
