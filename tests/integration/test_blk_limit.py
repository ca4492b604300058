"""Drive rate limiters and post-boot disk swaps (docs/devices.md "Rate limiting", "Swapping a disk after
boot"; docs/api.md PATCH /drives): the guest blk-limit.elf (guests/blk-limit.c) measures from inside what a
limited disk gives it and sees a swapped disk's new capacity (ConfigGeneration, the configuration-change
interrupt), with the exact post-boot sequences of Kata Containers (src/runtime/virtcontainers/fc.go:
createDiskPool's empty placeholders drive_0.., fcUpdateBlockDrive's PATCH) and firecracker-containerd
(runtime/drive_handler.go: a 512-byte stub drive, PatchStubDrive through the SDK's UpdateGuestDrive)."""
import base64
import json
import os
import re
import subprocess
import time

import pytest

from apiclient import BriskProcess
from conftest import BRISK, EXIT_GUEST_OK, guest

pytestmark = pytest.mark.usefixtures("kvm")

NOT_BEFORE = "The requested operation is not supported before starting the microVM."
MIB = 1 << 20


def image(path, size, head=b""):
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
    return str(path)


def run(args, cmdline, timeout=120):
    b = BriskProcess(BRISK, ["run", "--kernel", guest("blk-limit"), *args, "--cmdline", cmdline])
    code = b.wait(timeout)
    return code, b.out, b.err


def check(out, name):
    m = re.search(rf"CHECK {name}: (PASS|FAIL) \(([^)]*)\)", out)
    assert m, out
    return m.group(1) == "PASS", m.group(2)


def wait_line(b, pattern, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, b.out)
        if m:
            return m
        if b.proc.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"no {pattern!r} (exit {b.proc.poll()})\n{b.out[-3000:]}\n{b.err[-3000:]}")


def api_vm(procs, sockdir, name="bl"):
    sock = os.path.join(sockdir, f"{name}.sock")
    b = BriskProcess(BRISK, ["--api-sock", sock], sock=sock)
    procs.append(b)
    return b


def drive(drive_id, path, **extra):
    return {"drive_id": drive_id, "path_on_host": path, "is_root_device": False, "is_read_only": False, **extra}


@pytest.mark.security
def test_bandwidth_limit_measured_by_the_guest(tmp_path):
    """--disk bw=1M: a guest reading as fast as it can (the flood: 64 KiB requests back to back, each refused
    one back in the ring until the limiter's timer) measures 1 MiB/s within 10% (docs/security.md case 47);
    unlimited, the same guest reads several times faster, so the limit is what it measured."""
    d = image(tmp_path / "d.img", 16 * MIB)
    code, out, err = run(["--disk", f"{d},bw=1M"], f"rate={MIB}")
    assert code == EXIT_GUEST_OK, out + err
    ok, seen = check(out, "bandwidth")
    assert ok, seen
    code, out, err = run(["--disk", d], f"rate={MIB} secs=1 warm=0")
    ok, seen = check(out, "bandwidth")
    assert not ok and int(re.search(r"measured (\d+)", seen).group(1)) > 2 * MIB, seen


def test_ops_limit_measured_by_the_guest(tmp_path):
    d = image(tmp_path / "d.img", MIB)
    # 100/s: a guest slowed down by a loaded host (the nested harness) manages ~225 512-byte reads a second
    code, out, err = run(["--disk", f"{d},iops=100"], "iops=100")
    assert code == EXIT_GUEST_OK, out + err
    assert check(out, "ops")[0]


def test_disk_limit_option_errors(tmp_path):
    d = image(tmp_path / "d.img", MIB)
    for bad in ("bw=0", "bw=x", "iops=-1", "iops="):
        p = BriskProcess(BRISK, ["run", "--kernel", guest("blk-limit"), "--disk", f"{d},{bad}"])
        assert p.wait(30) != 0
        assert "rate per second" in p.err or "empty" in p.err, p.err


@pytest.mark.security
def test_api_rate_limiter_and_patch(procs, sockdir, tmp_path):
    """PUT /drives with Firecracker's RateLimiterConfig: limits for real (the guest measures 512 KiB/s), GET
    /vm/config reads it back as Firecracker serialises it; PATCH before boot is Firecracker's 400."""
    b = api_vm(procs, sockdir)
    d = image(tmp_path / "d.img", 16 * MIB)
    rl = {"bandwidth": {"size": 512 << 10, "one_time_burst": 0, "refill_time": 1000},
          "ops": {"size": 100000, "refill_time": 1000, "one_time_burst": 7}}
    b.api.ok("PUT", "/boot-source", {"kernel_image_path": guest("blk-limit"), "boot_args": f"rate={512 << 10}"})
    b.api.ok("PUT", "/drives/data", drive("data", d, rate_limiter=rl))
    got = b.api.get("/vm/config").json["drives"][0]["rate_limiter"]
    assert got == {"bandwidth": {"size": 512 << 10, "one_time_burst": None, "refill_time": 1000},
                   "ops": {"size": 100000, "one_time_burst": 7, "refill_time": 1000}}, got
    r = b.api.patch("/drives/data", {"drive_id": "data", "rate_limiter": {}})
    assert r.status == 400 and r.fault == NOT_BEFORE, r
    b.api.ok("PUT", "/actions", {"action_type": "InstanceStart"})
    assert b.wait(120) == EXIT_GUEST_OK, b.out + b.err
    assert check(b.out, "bandwidth")[0]


def placeholder_config(tmp_path, cmdline, n=8):
    """Kata's fcConfig.json (fc.go fcInitConfiguration, createDiskPool): a read-only rootfs and n empty
    placeholder drives drive_0.. ; the guest's disk=1 is drive_0."""
    drives = [{"drive_id": "rootfs", "is_read_only": True, "is_root_device": False,
               "path_on_host": image(tmp_path / "rootfs", MIB)}]
    for i in range(n):
        path = tmp_path / f"drive_{i}"
        path.write_bytes(b"")
        drives.append({"drive_id": f"drive_{i}", "is_read_only": False, "is_root_device": False,
                       "path_on_host": str(path)})
    cfg = {"boot-source": {"boot_args": cmdline, "kernel_image_path": guest("blk-limit")},
           "machine-config": {"mem_size_mib": 64, "smt": False, "vcpu_count": 1},
           "drives": drives}
    path = tmp_path / "fcConfig.json"
    path.write_text(json.dumps(cfg, indent="\t"))
    return str(path)


def test_kata_placeholder_patched_after_boot(procs, sockdir, tmp_path):
    """Kata's hot-plug: the empty placeholder drive_0 (0 sectors) PATCHed with a container's block device
    ({"drive_id", "path_on_host"}, fcUpdateBlockDrive): the guest sees the configuration-change interrupt,
    ConfigGeneration move and the new capacity, reads the new disk; then a PATCH of its rate_limiter limits it
    (measured in the guest); GET /vm/config and the fc metrics say so."""
    cfg = placeholder_config(tmp_path, f"disk=1 swap=1 rate={MIB}")
    sock = os.path.join(sockdir, "kata.sock")
    b = BriskProcess(BRISK, ["--api-sock", sock, "--config-file", cfg], sock=sock)
    procs.append(b)
    wait_line(b, r"READY capacity 0 generation (\d+)")
    ctr = image(tmp_path / "ctr.img", 8 * MIB, b"SWAPPED!")
    b.api.ok("PATCH", "/drives/drive_0", {"drive_id": "drive_0",
                                          "rate_limiter": {"bandwidth": {"size": MIB, "refill_time": 1000}}})
    b.api.ok("PATCH", "/drives/drive_0", {"drive_id": "drive_0", "path_on_host": ctr})
    assert b.wait(120) == EXIT_GUEST_OK, b.out + b.err
    assert re.search(r"generation (\d+) -> (\d+), capacity 0 -> 16384", b.out), b.out
    assert check(b.out, "swap")[0]
    assert check(b.out, "bandwidth")[0]


def test_patch_then_get_vm_config(procs, sockdir, tmp_path):
    """After a swap GET /vm/config names the new file; the limiter reads back as patched (a bucket given
    replaces, an absent one stays: update_buckets)."""
    b = api_vm(procs, sockdir)
    old, new = image(tmp_path / "old.img", MIB), image(tmp_path / "new.img", 2 * MIB, b"SWAPPED!")
    b.api.ok("PUT", "/boot-source", {"kernel_image_path": guest("blk-limit"), "boot_args": "swap=1"})
    b.api.ok("PUT", "/drives/data", drive("data", old, rate_limiter={"ops": {"size": 1000, "refill_time": 100}}))
    b.api.ok("PUT", "/actions", {"action_type": "InstanceStart"})
    wait_line(b, r"READY capacity 2048")
    b.api.ok("PATCH", "/drives/data", {"drive_id": "data", "rate_limiter": {"bandwidth": {
        "size": 64 * MIB, "refill_time": 1000}}})
    d = b.api.get("/vm/config").json["drives"][0]
    assert d["rate_limiter"] == {"bandwidth": {"size": 64 * MIB, "one_time_burst": None, "refill_time": 1000},
                                 "ops": {"size": 1000, "one_time_burst": None, "refill_time": 100}}, d
    b.api.ok("PATCH", "/drives/data", {"drive_id": "data", "path_on_host": new})
    assert b.wait(120) == EXIT_GUEST_OK, b.out + b.err
    assert "capacity 2048 -> 4096" in b.out
    # a post-boot GET of the config needs a live API: the VM ended; the next test checks it while running


def test_firecracker_containerd_stub_drive_patch(procs, sockdir, tmp_path):
    """firecracker-containerd's stub drive (drive_handler.go newStubDrive: 512 bytes, a base32 id) PATCHed
    with the container's image through the SDK's UpdateGuestDrive ({"drive_id", "path_on_host"})."""
    stub = image(tmp_path / "ctrstub0", 512, b"stub-content")
    stub_id = base64.b32encode(b"ctrstub0").decode().rstrip("=")
    b = api_vm(procs, sockdir)
    b.api.ok("PUT", "/machine-config", {"mem_size_mib": 64, "vcpu_count": 1})
    b.api.ok("PUT", "/boot-source", {"kernel_image_path": guest("blk-limit"), "boot_args": "disk=1 swap=1"})
    b.api.ok("PUT", "/drives/root_drive", {"drive_id": "root_drive", "is_read_only": True, "is_root_device": True,
                                           "path_on_host": image(tmp_path / "root.img", MIB)})
    b.api.ok("PUT", f"/drives/{stub_id}", {"drive_id": stub_id, "is_read_only": False, "is_root_device": False,
                                           "path_on_host": stub})
    b.api.ok("PUT", "/actions", {"action_type": "InstanceStart"})
    wait_line(b, r"READY capacity 1 ")
    ctr = image(tmp_path / "ctr.img", 4 * MIB, b"SWAPPED!")
    b.api.ok("PATCH", f"/drives/{stub_id}", {"drive_id": stub_id, "path_on_host": ctr})
    drives = b.api.get("/vm/config").json["drives"]
    assert [d["path_on_host"] for d in drives if d["drive_id"] == stub_id] == [ctr]
    assert b.wait(120) == EXIT_GUEST_OK, b.out + b.err
    assert "capacity 1 -> 8192" in b.out


@pytest.mark.security
def test_failed_swap_keeps_the_old_disk(procs, sockdir, tmp_path):
    """A PATCH naming a file that cannot back the drive (missing, a directory, read-only for a read-write
    drive, locked by another VM) is a 400 naming why, and the old file stays in use: the guest still sees
    no configuration change and reads its old disk; GET /vm/config keeps the old path (docs/security.md
    case 48). A malformed body or an unknown drive is a 400 too (case 49)."""
    import fcntl
    b = api_vm(procs, sockdir)
    old = image(tmp_path / "old.img", MIB)
    b.api.ok("PUT", "/boot-source", {"kernel_image_path": guest("blk-limit"), "boot_args": "swap=1"})
    b.api.ok("PUT", "/drives/data", drive("data", old))
    b.api.ok("PUT", "/actions", {"action_type": "InstanceStart"})
    wait_line(b, r"READY capacity 2048")
    ro = image(tmp_path / "ro.img", MIB)
    os.chmod(ro, 0o444)
    locked = image(tmp_path / "locked.img", MIB)
    holder = open(locked, "r+b")
    fcntl.lockf(holder, fcntl.LOCK_EX)
    for path, why in ((str(tmp_path / "nope.img"), "cannot open the image"), (str(tmp_path), "a directory"),
                      (ro, "read-only"), (locked, "locked by another process")):
        r = b.api.patch("/drives/data", {"drive_id": "data", "path_on_host": path})
        assert r.status == 400 and why in r.fault and r.fault.startswith("Unable to patch the block device"), r
        assert b.api.get("/vm/config").json["drives"][0]["path_on_host"] == old
    for body, why in (({"drive_id": "data", "path_on_host": old, "is_read_only": True}, "unknown key"),
                      ({"drive_id": "data"}, "give path_on_host or rate_limiter"),
                      ({"drive_id": "data", "rate_limiter": {"bandwidth": {"size": 1}}}, "refill_time is required"),
                      ({"drive_id": "data", "rate_limiter": {"bw": {}}}, "unknown key 'bw'")):
        r = b.api.patch("/drives/data", body)
        assert r.status == 400 and why in r.fault, (body, r)
    r = b.api.patch("/drives/nosuch", {"drive_id": "nosuch", "path_on_host": old})
    assert r.status == 400 and "no drive 'nosuch'" in r.fault, r
    assert b.proc.poll() is None and "config change" not in b.out
    holder.close()
    b.api.ok("PATCH", "/drives/data", {"drive_id": "data", "path_on_host": image(tmp_path / "n.img", 2 * MIB,
                                                                                  b"SWAPPED!")})
    assert b.wait(120) == EXIT_GUEST_OK, b.out + b.err


@pytest.mark.security
def test_hostile_bucket_values(procs, sockdir, tmp_path):
    """Buckets at the edges (docs/security.md case 45): u64 max everywhere, size or refill_time 0, a
    refill_time whose nanoseconds overflow u64 (no bucket, as Firecracker's checked_mul): accepted, no
    overflow, the guest's reads complete. A tiny bucket with a refill time of 31 years (case 46) blocks the
    guest's second read: the device waits on its timer (a handful of limiter events a second, never a
    spin) until a PATCH lifts the limit, and the guest's reads then complete."""
    b = api_vm(procs, sockdir)
    d = image(tmp_path / "d.img", MIB)
    u64 = (1 << 64) - 1
    b.api.ok("PUT", "/boot-source", {"kernel_image_path": guest("blk-limit"), "boot_args": "disk=1 reads=20"})
    b.api.ok("PUT", "/drives/edge", drive("edge", d, rate_limiter={
        "bandwidth": {"size": u64, "one_time_burst": u64, "refill_time": u64 // 1000000},
        "ops": {"size": u64, "refill_time": u64}}))
    b.api.ok("PUT", "/drives/slow", drive("slow", image(tmp_path / "s.img", MIB), rate_limiter={
        "bandwidth": {"size": 4096, "refill_time": 10 ** 12}, "ops": {"size": 0, "refill_time": 0}}))
    cfg = b.api.get("/vm/config").json["drives"]
    assert cfg[0]["rate_limiter"] == {"bandwidth": {"size": u64, "one_time_burst": u64,
                                                    "refill_time": u64 // 1000000}, "ops": None}, cfg[0]
    assert cfg[1]["rate_limiter"]["ops"] is None
    metrics = tmp_path / "m.json"
    b.api.ok("PUT", "/metrics", {"metrics_path": str(metrics)})
    b.api.ok("PUT", "/actions", {"action_type": "InstanceStart"})
    wait_line(b, r"blk-limit: reading")
    time.sleep(2)
    assert "CHECK reads" not in b.out  # blocked: one 4 KiB read went, the next waits for 31 years of refill
    b.api.ok("PUT", "/actions", {"action_type": "FlushMetrics"})
    lines = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
    events = sum(x.get("block_slow", {}).get("rate_limiter_event_count", 0) for x in lines)
    assert 5 <= events <= 40, events  # about 10 a second (the 100 ms refill timer), not a spin
    assert sum(x.get("block_slow", {}).get("rate_limiter_throttled_events", 0) for x in lines) >= 5
    b.api.ok("PATCH", "/drives/slow", {"drive_id": "slow", "rate_limiter": {"bandwidth": {"size": 0,
                                                                                          "refill_time": 0}}})
    assert b.wait(60) == EXIT_GUEST_OK, b.out + b.err
    assert check(b.out, "reads")[0]


def test_snapshot_keeps_the_limiter_and_the_swapped_path(procs, sockdir, tmp_path):
    """A snapshot taken while a limited disk is being read, after the disk was swapped: the restored VM's
    disk is the new file (the snapshot recorded it), still limited (the buckets are in the device's
    section): the guest, resumed mid-way, measures 1 MiB/s within 10% (unlimited it reads ~6 MiB/s), and
    GET /vm/config reads the limiter back."""
    b = api_vm(procs, sockdir)
    old, new = image(tmp_path / "old.img", MIB), image(tmp_path / "new.img", 16 * MIB, b"SWAPPED!")
    rl = {"bandwidth": {"size": MIB, "refill_time": 1000}}
    b.api.ok("PUT", "/boot-source", {"kernel_image_path": guest("blk-limit"),
                                     "boot_args": f"swap=1 rate={MIB} warm=6000"})
    b.api.ok("PUT", "/drives/data", drive("data", old, rate_limiter=rl))
    b.api.ok("PUT", "/actions", {"action_type": "InstanceStart"})
    wait_line(b, r"READY capacity 2048")
    b.api.ok("PATCH", "/drives/data", {"drive_id": "data", "path_on_host": new})
    wait_line(b, r"CHECK swap: PASS")
    time.sleep(1.0)  # in the warm-up (6 s, so a slow host still snapshots inside it): the queue throttled
    assert "CHECK bandwidth" not in b.out and b.proc.poll() is None, b.out + b.err
    state, mem = tmp_path / "vm.state", tmp_path / "vm.mem"
    b.api.pause()
    try:
        b.api.snapshot_create(state, mem)
    except OSError as e:  # the VMM gone (seen once in a clean clone): say how it ended
        try:
            status = b.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            status = "still running"
        b.kill()
        raise AssertionError(f"snapshot/create: {e!r}; brisk: {status}; its stderr:\n{b.err[-4000:]}") from e
    b.kill()
    r = api_vm(procs, sockdir, "bl2")
    r.api.snapshot_load(state, mem, resume_vm=True)
    d = r.api.get("/vm/config").json["drives"][0]
    assert d["path_on_host"] == new, d
    assert d["rate_limiter"]["bandwidth"]["size"] == MIB, d
    assert r.wait(120) == EXIT_GUEST_OK, r.out + r.err
    ok, seen = check(r.out, "bandwidth")
    assert ok, seen
