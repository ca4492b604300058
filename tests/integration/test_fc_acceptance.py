"""What brisk's API accepts and refuses, case by case against Firecracker v1.7.0's code (docs/api.md
"Firecracker compatibility: what brisk accepts"). Each row: the request, whether Firecracker takes it (204) or
refuses it (400), and where its code decides. Where brisk deliberately differs the row says so and why.

Firecracker's sources: src/firecracker/src/api_server/parsed_request.rs (checked_id), request/*.rs (path id
against body id), src/vmm/src/vmm_config/*.rs (the bodies: serde deny_unknown_fields, required fields, the
builders' checks), src/utils/src/net/mac.rs (MacAddr). Kata's fc.go, flintlock and firecracker-go-sdk send the
"orchestrator" rows."""
import json
import os

import pytest

from test_api import fault, start_api

OK, BAD = 204, 400

DRIVE = {"drive_id": "d", "path_on_host": "/d.img", "is_root_device": False}
NET = {"iface_id": "n", "host_dev_name": "tapx"}
VSOCK = {"guest_cid": 3, "uds_path": "/tmp/v.sock"}
MACHINE = {"vcpu_count": 1, "mem_size_mib": 128}


def with_(base, **kw):
    return {**base, **kw}


CASES = [
    # ---- vsock (vmm_config/vsock.rs VsockDeviceConfig: guest_cid u32, uds_path String, vsock_id Option) ----
    ("vsock cid 0", "/vsock", with_(VSOCK, guest_cid=0), OK, None),  # u32, no check at PUT or boot
    ("vsock cid 1", "/vsock", with_(VSOCK, guest_cid=1), OK, None),
    ("vsock cid 2", "/vsock", with_(VSOCK, guest_cid=2), OK, None),
    ("vsock cid u32 max", "/vsock", with_(VSOCK, guest_cid=0xffffffff), OK, None),
    ("vsock cid past u32", "/vsock", with_(VSOCK, guest_cid=1 << 32), BAD, "guest_cid"),
    ("vsock cid absent", "/vsock", {"uds_path": "/tmp/v.sock"}, BAD, "guest_cid is required"),  # no serde default
    ("vsock cid string", "/vsock", with_(VSOCK, guest_cid="3"), BAD, "guest_cid"),
    ("vsock_id with '-' (flintlock)", "/vsock", with_(VSOCK, vsock_id="vm-01.x"), OK, None),  # never checked
    ("vsock_id 'root' (Kata)", "/vsock", with_(VSOCK, vsock_id="root"), OK, None),
    ("vsock uds absent", "/vsock", {"guest_cid": 3}, BAD, "uds_path is required"),
    ("vsock unknown field", "/vsock", with_(VSOCK, cid=3), BAD, "unknown key 'cid'"),  # deny_unknown_fields
    # ---- drives (parsed_request.rs checked_id; request/drive.rs; vmm_config/drive.rs BlockDeviceConfig) ------
    ("drive id with '-'", "/drives/a-b", with_(DRIVE, drive_id="a-b"), BAD,
     "API Resource IDs can only contain alphanumeric characters and underscores"),
    ("drive id '_'", "/drives/_a_1", with_(DRIVE, drive_id="_a_1"), OK, None),
    ("drive path/body id differ", "/drives/a", with_(DRIVE, drive_id="b"), BAD,
     "The id from the path [a] does not match the id from the body [b]!"),
    ("drive is_root_device absent", "/drives/d", {"drive_id": "d", "path_on_host": "/d.img"}, BAD,
     "is_root_device is required"),  # bool without serde default
    ("drive cache_type Writeback", "/drives/d", with_(DRIVE, cache_type="Writeback"), OK, None),
    ("drive cache_type lower case", "/drives/d", with_(DRIVE, cache_type="writeback"), BAD, "cache_type"),
    ("drive io_engine Async", "/drives/d", with_(DRIVE, io_engine="Async"), OK, None),
    ("drive io_engine other", "/drives/d", with_(DRIVE, io_engine="Uring"), BAD, "io_engine"),
    ("drive is_read_only null", "/drives/d", with_(DRIVE, is_read_only=None), OK, None),  # Option<bool>
    ("drive partuuid", "/drives/d", with_(DRIVE, is_root_device=True, partuuid="0eaa91a0-01"), OK, None),
    ("drive rate_limiter {} (Kata)", "/drives/d", with_(DRIVE, rate_limiter={}), OK, None),  # into_option: None
    ("drive rate_limiter empty buckets", "/drives/d",
     with_(DRIVE, rate_limiter={"bandwidth": None, "ops": {"size": 0, "refill_time": 0}}), OK, None),
    ("drive rate_limiter real", "/drives/d",
     with_(DRIVE, rate_limiter={"bandwidth": {"size": 1000, "refill_time": 100, "one_time_burst": 5},
                                "ops": {"size": 10, "refill_time": 1000}}), OK, None),
    ("drive rate_limiter unknown key", "/drives/d", with_(DRIVE, rate_limiter={"bw": {}}), BAD,
     "unknown key 'bw'"),  # RateLimiterConfig has deny_unknown_fields
    ("drive bucket unknown key", "/drives/d",
     with_(DRIVE, rate_limiter={"ops": {"size": 0, "refill_time": 0, "x": 1}}), OK, None),  # TokenBucketConfig has not
    ("drive unknown field", "/drives/d", with_(DRIVE, readonly=True), BAD, "unknown key 'readonly'"),
    # brisk differs: vhost-user drives are not implemented
    ("drive socket", "/drives/d", {"drive_id": "d", "is_root_device": False, "socket": "/s"}, BAD, "socket"),
    # ---- network-interfaces (vmm_config/net.rs NetworkInterfaceConfig; utils/net/mac.rs) -------------------
    ("net minimal", "/network-interfaces/n", NET, OK, None),
    ("net guest_mac", "/network-interfaces/n", with_(NET, guest_mac="06:00:AC:10:00:02"), OK, None),
    ("net multicast mac", "/network-interfaces/n", with_(NET, guest_mac="01:00:5e:00:00:01"), OK, None),
    ("net short mac", "/network-interfaces/n", with_(NET, guest_mac="06:00:ac:10:00"), BAD, "guest_mac"),
    ("net mac with '-'", "/network-interfaces/n", with_(NET, guest_mac="06-00-ac-10-00-02"), BAD, "guest_mac"),
    ("net rate limiters {} (Kata)", "/network-interfaces/n", with_(NET, rx_rate_limiter={}, tx_rate_limiter={}),
     OK, None),
    ("net rate limiter real (Kata with a rate)", "/network-interfaces/n",
     with_(NET, rx_rate_limiter={"bandwidth": {"size": 125000, "refill_time": 1000}}), OK, None),
    ("net mtu (not in v1.7.0)", "/network-interfaces/n", with_(NET, mtu=1500), BAD, "unknown key 'mtu'"),
    ("net host_dev_name absent", "/network-interfaces/n", {"iface_id": "n"}, BAD, "host_dev_name is required"),
    ("net id differs", "/network-interfaces/a", with_(NET, iface_id="b"), BAD,
     "The id from the path [a] does not match the id from the body [b]!"),
    # ---- machine-config (vmm_config/machine_config.rs MachineConfig, VmConfig::update) ---------------------
    ("machine minimal", "/machine-config", MACHINE, OK, None),
    ("machine track_dirty_pages", "/machine-config", with_(MACHINE, track_dirty_pages=True), OK, None),
    ("machine smt odd vcpus", "/machine-config", with_(MACHINE, vcpu_count=3, smt=True), BAD, "smt"),
    ("machine vcpu 0", "/machine-config", with_(MACHINE, vcpu_count=0), BAD, "vcpu_count"),
    ("machine mem 0", "/machine-config", with_(MACHINE, mem_size_mib=0), BAD, "mem_size_mib"),
    ("machine huge_pages 2M odd", "/machine-config", with_(MACHINE, mem_size_mib=127, huge_pages="2M"), BAD,
     "huge_pages"),
    ("machine cpu_template None", "/machine-config", with_(MACHINE, cpu_template="None"), OK, None),
    ("machine unknown field", "/machine-config", with_(MACHINE, ht_enabled=False), BAD, "unknown key"),
    # ---- boot-source (vmm_config/boot_source.rs; linux-loader's Cmdline) ----------------------------------
    ("boot_args 2047 bytes", "/boot-source", {"kernel_image_path": "/k", "boot_args": "x" * 2047}, OK, None),
    ("boot_args 2048 bytes", "/boot-source", {"kernel_image_path": "/k", "boot_args": "x" * 2048}, BAD,
     "boot_args: 2048 bytes, at most 2047"),
    ("boot_args not ASCII", "/boot-source", {"kernel_image_path": "/k", "boot_args": "x=\u00e9"}, BAD,
     "not printable ASCII"),
    ("boot-source unknown field", "/boot-source", {"kernel_image_path": "/k", "cmdline": "x"}, BAD,
     "unknown key 'cmdline'"),
]


def real_files(sockdir, body):
    """The body with its placeholder paths (/k, /d.img) made real files: PUTs open what they name (the
    checks at the PUT are test_api.py's)."""
    kernel, image = os.path.join(sockdir, "k"), os.path.join(sockdir, "d.img")
    for p in (kernel, image):
        open(p, "wb").close()
    text = json.dumps(body).replace('"/k"', json.dumps(kernel)).replace('"/d.img"', json.dumps(image))
    return json.loads(text)


@pytest.mark.parametrize("what, path, body, status, msg", CASES, ids=[c[0] for c in CASES])
def test_acceptance(procs, sockdir, what, path, body, status, msg):
    b = start_api(procs, sockdir)
    r = b.api.put(path, real_files(sockdir, body))
    if status == OK:
        assert r.status == OK, f"{what}: {r}"
    else:
        assert msg in fault(r), f"{what}: {r}"


def test_vsock_cid_0_boots(kvm, procs, sockdir):
    """firecracker-go-sdk sends guest_cid 0 when the CID is left unset: the VM is described and starts."""
    from conftest import guest

    b = start_api(procs, sockdir)
    b.api.ok("PUT", "/vsock", {"guest_cid": 0, "uds_path": f"{sockdir}/v.sock", "vsock_id": "vsock-0"})
    c = b.api.get("/vm/config").json["vsock"]
    assert c["guest_cid"] == 0 and c["vsock_id"] == "vsock-0"
    b.api.boot_source(guest("counter"))
    b.api.start()
    b.wait_count()
