"""MMDS through the API (docs/devices.md "MMDS", docs/api.md): the data store's PUT/PATCH/GET with Firecracker
v1.7.0's status codes and messages, --mmds-size-limit, --metadata, PUT /mmds/config's checks and pre-boot rule,
"mmds-config" in GET /vm/config and in a config file (flintlock's shape)."""
import json
import re
import os

import pytest

from apiclient import BriskProcess
from conftest import BRISK, guest, run_brisk

LIMIT_MSG = "MMDS limit exceeded error: The MMDS patch request doesn't fit."
NOT_INIT = "MMDS error: The MMDS data store is not initialized."
EMPTY_IFACES = ("MMMDS config error: The list of network interface IDs that allow forwarding MMDS requests is "
                "empty.")
BAD_IFACE = ("MMMDS config error: The list of network interface IDs provided contains at least one ID that does "
             "not correspond to any existing network interface.")
NOT_LINK_LOCAL = "MMMDS config error: The MMDS IPv4 address is not link local."


def start(procs, sockdir, *extra, name="mmds"):
    sock = os.path.join(sockdir, f"{name}.sock")
    b = BriskProcess(BRISK, ["--api-sock", sock, *extra], sock=sock)
    procs.append(b)
    return b


def fault(r, status=400):
    assert r.status == status, r
    return r.json["fault_message"]


@pytest.mark.security
def test_store_put_patch_get(procs, sockdir):
    b = start(procs, sockdir)
    r = b.api.get("/mmds")
    assert r.status == 200 and r.json == {}, r  # never PUT: Firecracker answers {}
    assert fault(b.api.patch("/mmds", {"a": 1})) == NOT_INIT
    doc = {"latest": {"meta-data": {"ami-id": "ami-1", "tags": ["a", "b"]}}, "zeta": 1, "alpha": "x/y"}
    b.api.ok("PUT", "/mmds", doc)
    r = b.api.get("/mmds")
    assert r.status == 200 and r.json == doc and list(r.json) == ["alpha", "latest", "zeta"], r  # sorted keys
    assert b"x/y" in r.body  # no "\/" escaping
    # RFC 7396: null deletes, objects merge, everything else replaces
    b.api.ok("PATCH", "/mmds", {"zeta": None, "latest": {"meta-data": {"ami-id": "ami-2", "new": {"k": "v"}}},
                                "alpha": [1]})
    assert b.api.get("/mmds").json == {"latest": {"meta-data": {"ami-id": "ami-2", "tags": ["a", "b"],
                                                                "new": {"k": "v"}}}, "alpha": [1]}
    b.api.ok("PUT", "/mmds", "just a string")  # any JSON value, as serde_json::Value
    assert b.api.get("/mmds").json == "just a string"
    assert fault(b.api.request("PUT", "/mmds", raw=b'{"a": ')).startswith("EOF while parsing")
    assert fault(b.api.request("PUT", "/mmds", raw=b'{"a": 1} x')) != ""
    assert fault(b.api.put("/mmds/other", {})) == "Unrecognized PUT request path `other`."
    assert b.api.get("/mmds").json == "just a string"  # refused bodies changed nothing


@pytest.mark.security
def test_size_limit(procs, sockdir):
    """docs/security.md case 51: --mmds-size-limit bounds the store on PUT and on a PATCH's result (413)."""
    b = start(procs, sockdir, "--mmds-size-limit", "64")
    assert fault(b.api.put("/mmds", {"k": "x" * 64}), 413) == LIMIT_MSG
    b.api.ok("PUT", "/mmds", {"k": "x" * 40})  # {"k":"xxx..."}: 48 bytes
    assert fault(b.api.patch("/mmds", {"j": "y" * 20}), 413) == LIMIT_MSG
    assert b.api.get("/mmds").json == {"k": "x" * 40}
    b.api.ok("PATCH", "/mmds", {"k": None, "j": "y" * 20})
    assert b.api.get("/mmds").json == {"j": "y" * 20}


def test_metadata_file_loads_the_store(procs, sockdir, tmp_path):
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"latest": {"user-data": "hello"}}))
    b = start(procs, sockdir, "--metadata", str(meta))
    assert b.api.get("/mmds").json == {"latest": {"user-data": "hello"}}
    b.api.ok("PATCH", "/mmds", {"latest": {"x": "1"}})  # initialised by the file


@pytest.mark.security
def test_mmds_config_checks(procs, sockdir):
    b = start(procs, sockdir)
    assert "network_interfaces" in fault(b.api.put("/mmds/config", {"version": "V2"}))
    assert fault(b.api.put("/mmds/config", {"network_interfaces": []})) == EMPTY_IFACES
    assert fault(b.api.put("/mmds/config", {"network_interfaces": ["eth0"]})) == BAD_IFACE
    b.api.ok("PUT", "/network-interfaces/eth0", {"iface_id": "eth0", "host_dev_name": "bskmmds0"})
    b.api.ok("PUT", "/network-interfaces/eth1", {"iface_id": "eth1", "host_dev_name": "bskmmds1"})
    for ip in ("10.0.0.1", "169.254.0.1", "169.254.255.1"):
        assert fault(b.api.put("/mmds/config", {"network_interfaces": ["eth0"], "ipv4_address": ip})) == \
            NOT_LINK_LOCAL, ip
    assert "ipv4_address" in fault(b.api.put("/mmds/config", {"network_interfaces": ["eth0"],
                                                              "ipv4_address": "nope"}))
    assert "version" in fault(b.api.put("/mmds/config", {"network_interfaces": ["eth0"], "version": "V3"}))
    assert "unknown key" in fault(b.api.put("/mmds/config", {"network_interfaces": ["eth0"], "x": 1}))
    assert b.api.get("/vm/config").json["mmds-config"] is None  # nothing refused was kept
    b.api.ok("PUT", "/mmds/config", {"network_interfaces": ["eth1"]})
    assert b.api.get("/vm/config").json["mmds-config"] == {
        "version": "V1", "network_interfaces": ["eth1"], "ipv4_address": "169.254.169.254"}
    b.api.ok("PUT", "/mmds/config", {"network_interfaces": ["eth1", "eth0"], "version": "V2",
                                     "ipv4_address": "169.254.170.2"})
    assert b.api.get("/vm/config").json["mmds-config"] == {
        "version": "V2", "network_interfaces": ["eth0", "eth1"], "ipv4_address": "169.254.170.2"}


@pytest.mark.security
def test_mmds_config_pre_boot_only_and_store_after(kvm, procs, sockdir):
    """firecracker-go-sdk's calls (machine.go setMmdsConfig: interface ids "1".., the version, ipv4_address;
    firecracker-containerd's SetMetadata/UpdateMetadata after InstanceStart: PUT and PATCH /mmds)."""
    b = start(procs, sockdir)
    b.api.boot_source(guest("counter"))
    b.api.machine_config(1, 64)
    b.api.ok("PUT", "/network-interfaces/1", {"iface_id": "1", "host_dev_name": "bskmmds2"})
    b.api.ok("PUT", "/mmds/config", {"version": "V2", "network_interfaces": ["1"],
                                     "ipv4_address": "169.254.169.254"})
    b.api.start()
    assert fault(b.api.put("/mmds/config", {"network_interfaces": ["1"]})) == \
        "The requested operation is not supported after starting the microVM."
    b.api.ok("PUT", "/mmds", {"a": {"b": "c"}})  # the store is open after boot, as Firecracker's
    b.api.ok("PATCH", "/mmds", {"a": {"d": "e"}})
    assert b.api.get("/mmds").json == {"a": {"b": "c", "d": "e"}}
    assert b.api.get("/vm/config").json["mmds-config"] == {"version": "V2", "network_interfaces": ["1"],
                                                           "ipv4_address": "169.254.169.254"}


# flintlock's firecracker config file, as infrastructure/microvm/firecracker/config.go (WithMicroVM) writes it:
# "mmds-config" with version V1 and the ids of the interfaces with allow_mmds (no ipv4_address: omitempty),
# and create.go's --metadata file {"latest": vm.Spec.Metadata}.
FLINTLOCK = {
    "boot-source": None,
    "drives": [],
    "machine-config": {"vcpu_count": 1, "mem_size_mib": 64, "smt": True},
    "network-interfaces": [{"iface_id": "eth0", "host_dev_name": "bskmmds3", "guest_mac": "AA:FF:00:00:00:01"}],
    "mmds-config": {"version": "V1", "network_interfaces": ["eth0"]},
}
FLINTLOCK_META = {"latest": {"meta-data": "aW5zdGFuY2VfaWQ6IG12bTE=", "user-data": "I2Nsb3VkLWNvbmZpZw=="}}


@pytest.mark.security
def test_config_file_mmds_config(kvm, tmp_path, procs, sockdir):
    cfg = dict(FLINTLOCK, **{"boot-source": {"kernel_image_path": guest("counter")}})
    path, meta = tmp_path / "vm.json", tmp_path / "metadata.json"
    path.write_text(json.dumps(cfg))
    meta.write_text(json.dumps(FLINTLOCK_META))
    b = start(procs, sockdir, "--config-file", str(path), "--metadata", str(meta), name="cf")
    got = b.api.get("/vm/config").json["mmds-config"]
    assert got == {"version": "V1", "network_interfaces": ["eth0"], "ipv4_address": "169.254.169.254"}, got
    assert b.api.get("/mmds").json == FLINTLOCK_META
    # flintlock with no allow_mmds interface writes {"version": "V1"}: Firecracker refuses it (a required field)
    path.write_text(json.dumps(dict(cfg, **{"mmds-config": {"version": "V1"}})))
    p = run_brisk("--no-api", "--config-file", str(path))
    assert p.returncode == 2 and "network_interfaces" in p.stderr, p.stderr
    bad = dict(cfg, **{"mmds-config": {"network_interfaces": ["nope"]}})
    path.write_text(json.dumps(bad))
    p = run_brisk("--no-api", "--config-file", str(path))
    assert p.returncode == 2 and "does not correspond to any existing network interface" in p.stderr, p.stderr


def boot_mmds_guest(procs, sockdir, tap, version="V1", bench=0, brisk=BRISK, metrics=None, mmds=True):
    sock = os.path.join(sockdir, f"g{tap}.sock")
    b = BriskProcess(brisk, ["--api-sock", sock], sock=sock)
    procs.append(b)
    if metrics:
        b.api.ok("PUT", "/metrics", {"metrics_path": str(metrics)})
    b.api.boot_source(guest("mmds"), f"bench={bench}" if bench else None)
    b.api.machine_config(1, 64)
    b.api.ok("PUT", "/network-interfaces/eth0", {"iface_id": "eth0", "host_dev_name": tap})
    if mmds:
        b.api.ok("PUT", "/mmds/config", {"network_interfaces": ["eth0"], "version": version})
    b.api.ok("PUT", "/mmds", {"latest": {"meta-data": {"ami-id": "ami-brisk", "hostname": "vm1"}}})
    b.api.start()
    b.wait(timeout=120)
    return b


@pytest.mark.security
def test_guest_arp_and_get(kvm, procs, sockdir, tmp_path):
    """The freestanding guest: ARP for 169.254.169.254, a TCP GET, a bad checksum ignored (docs/security.md case
    52), FIN; the frames never reach the tap (its tx counters stay 0), the mmds group counts them."""
    metrics = tmp_path / "metrics.json"
    b = boot_mmds_guest(procs, sockdir, "bskmmdsg0", metrics=metrics)
    for check in ("arp_reply", "tcp_syn_ack", "http_status", "http_body", "bad_checksum_ignored", "tcp_fin"):
        assert f"mmds: CHECK {check}: PASS" in b.out, b.out + b.err
    assert "FAIL" not in b.out, b.out
    lines = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
    tx = sum(x["net_eth0"]["tx_packets_count"] for x in lines)
    mmds = {k: sum(x["mmds"][k] for x in lines) for k in lines[-1]["mmds"]}
    assert tx == 0, lines[-1]["net_eth0"]  # nothing went to the tap
    assert mmds["rx_accepted"] >= 7 and mmds["tx_frames"] >= 4 and mmds["rx_accepted_err"] >= 1, mmds
    assert mmds["connections_created"] == 1 and mmds["connections_destroyed"] == 1, mmds


def test_guest_bench(kvm, procs, sockdir):
    """MMDS request latency from the guest (docs/performance.md): N GETs on one connection, rdtsc-timed."""
    b = boot_mmds_guest(procs, sockdir, "bskmmdsg1", bench=200)
    assert "mmds: CHECK bench_gets: PASS" in b.out, b.out + b.err
    lines = re.findall(r"mmds: bench .*", b.out)
    assert len(lines) == 2, b.out
    print("\n".join(lines))


@pytest.mark.security
def test_interface_without_mmds_forwards(kvm, procs, sockdir, tmp_path):
    """docs/security.md case 57: an interface not in network_interfaces has no MMDS: no ARP reply, the frames go
    to the tap (the store's contents never reach a guest that was not given the service)."""
    metrics = tmp_path / "metrics.json"
    b = boot_mmds_guest(procs, sockdir, "bskmmdsg2", metrics=metrics, mmds=False)
    assert "mmds: CHECK arp_reply: FAIL" in b.out and "ami-brisk" not in b.out.split("CHECK http_body")[-1][:40], \
        b.out
    lines = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
    # to the tap: sent, or refused by it while it is down (tap_write_fails), never consumed
    assert sum(x["net_eth0"]["tx_packets_count"] + x["net_eth0"]["tap_write_fails"] for x in lines) >= 2, lines
    assert sum(x["mmds"]["rx_accepted"] for x in lines) == 0, lines[-1]["mmds"]


def test_snapshot_keeps_the_config_not_the_store(kvm, procs, sockdir, tmp_path):
    """As Firecracker: the MMDS network stack configuration and version are in the snapshot (brisk: its
    GET /vm/config description), the data store is not: the restored process starts with an empty one."""
    b = start(procs, sockdir, name="snap")
    b.api.boot_source(guest("counter"))
    b.api.machine_config(1, 64)
    b.api.ok("PUT", "/network-interfaces/eth0", {"iface_id": "eth0", "host_dev_name": "bskmmds4"})
    want = {"version": "V2", "network_interfaces": ["eth0"], "ipv4_address": "169.254.170.2"}
    b.api.ok("PUT", "/mmds/config", want)
    b.api.ok("PUT", "/mmds", {"k": "v"})
    b.api.start()
    b.api.pause()
    state, mem = tmp_path / "s.state", tmp_path / "s.mem"
    b.api.snapshot_create(state, mem)
    b.kill()
    r = start(procs, sockdir, name="snap2")
    r.api.snapshot_load(state, mem, resume_vm=False)
    assert r.api.get("/vm/config").json["mmds-config"] == want
    assert r.api.get("/mmds").json == {}
