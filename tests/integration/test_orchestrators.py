"""The start sequences of the programs that drive Firecracker, replayed against brisk with their exact flags and
bodies (docs/api.md "Driving brisk from Firecracker's orchestrators"). Each sequence is written from that
project's source; the comments name the file. Bodies are the JSON Go's encoding/json writes for their models
(fields in struct order, `omitempty` fields left out when unset).

- firectl (main.go, options.go getFirecrackerConfig) through firecracker-go-sdk (machine.go, handlers.go
  defaultFcInitHandlerList): FIFOs made with mkfifo for the log (read by the SDK) and the metrics (read by
  nobody), PUT /logger, /metrics, /machine-config (then GET), /boot-source, /drives/{id}, /vsock (no
  vsock_id), /actions InstanceStart.
- firecracker-containerd (runtime/service.go buildVMConfiguration, runtime/noop_jailer.go,
  runtime/drive_handler.go): `--api-sock firecracker.sock --id VMID` in the shim directory, log and metrics
  FIFOs made with mkfifo and not opened by anyone before the PUTs, a root drive and a 512-byte stub drive with a
  base32 id, a vsock with guest_cid unset (0) and a relative uds_path.
- Kata Containers (src/runtime/virtcontainers/fc.go, types/fcConfig.go) without a jailer: `--api-sock S
  --config-file fcConfig.json`, the file holding its boot args (acpi=off ...), a read-only rootfs drive and 8
  empty placeholder drives drive_0..drive_7, the log and metrics FIFOs (which Kata opens O_RDONLY|O_NONBLOCK
  first, and whose metrics lines it parses as FirecrackerMetrics, fc_metrics.go), a vsock with CID 3, and a
  network interface with empty rate limiters.

The guest is counter.elf (counts, then resets: exit 0) or hello.elf."""
import base64
import json
import os
import subprocess

import pytest

from apiclient import ApiClient, BriskProcess, wait_for_socket
from fifolines import FifoReader
from conftest import BRISK, EXIT_GUEST_OK, ROOT, guest

pytestmark = pytest.mark.usefixtures("kvm")

# Kata's FirecrackerMetrics (fc_metrics.go): each group it unmarshals and its uint64 fields
KATA_METRICS = {k: v for k, v in json.loads((ROOT / "tests" / "fixtures" / "kata-fc-metrics.json").read_text()).items()
                if not k.startswith("_")}


def go_json(obj):
    """encoding/json's compact form (what the Go clients put on the wire)."""
    return json.dumps(obj, separators=(",", ":"))


def put(api, path, body):
    r = api.request("PUT", path, raw=go_json(body).encode())
    assert r.status == 204, f"PUT {path} {body}: {r}"


def check_kata_metrics(lines):
    """Every line unmarshals as Kata's FirecrackerMetrics: each group Kata reads is an object, and each field Kata
    reads is a uint64 (encoding/json fails the whole line on a value of another type). Firecracker v1.7.0 has
    no "rtc" group on x86 (only on aarch64): a group that is absent stays zero in Go, as under Firecracker."""
    assert lines, "no metrics line"
    for line in lines:
        m = json.loads(line)
        for g, fields in KATA_METRICS.items():
            if g == "rtc" and g not in m:
                continue
            assert isinstance(m.get(g), dict), (g, line[:300])
            for k in fields:
                v = m[g].get(k, 0)
                assert isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64, (g, k, v)


def disk(path, size=1 << 20):
    with open(path, "wb") as f:
        f.truncate(size)
    return str(path)


def test_firectl_through_the_go_sdk(tmp_path, sockdir, procs):
    sock = os.path.join(sockdir, "firecracker.sock")
    log_fifo, metrics_fifo = os.path.join(sockdir, "log.fifo"), os.path.join(sockdir, "metrics.fifo")
    os.mkfifo(log_fifo, 0o700)  # handlers.go CreateLogFilesHandler: createFifoOrFile
    os.mkfifo(metrics_fifo, 0o700)
    log = FifoReader(log_fifo)  # the SDK's captureFifoToFile reads the log; nobody reads the metrics
    log.start()
    b = BriskProcess(BRISK, ["--api-sock", sock], sock=sock)
    procs.append(b)
    api = b.api
    put(api, "/logger", {"level": "Debug", "log_path": log_fifo, "show_level": True, "show_log_origin": False})
    put(api, "/metrics", {"metrics_path": metrics_fifo})
    put(api, "/machine-config", {"mem_size_mib": 64, "smt": False, "vcpu_count": 1})
    assert api.get("/machine-config").json["vcpu_count"] == 1  # machine.go refreshMachineConfiguration
    put(api, "/boot-source", {"boot_args": "stop=3 ro console=ttyS0 noapic reboot=k panic=1 pci=off nomodules",
                              "kernel_image_path": guest("counter")})
    put(api, "/drives/root_drive", {"drive_id": "root_drive", "is_read_only": False, "is_root_device": True,
                                    "path_on_host": disk(tmp_path / "root.img")})
    put(api, "/vsock", {"guest_cid": 3, "uds_path": os.path.join(sockdir, "v.sock")})
    put(api, "/actions", {"action_type": "InstanceStart"})
    assert b.wait(120) == EXIT_GUEST_OK, b.err
    assert "counter: PASS" in b.out
    log.join(10)
    assert log.lines, "nothing reached the log FIFO"


def test_firecracker_containerd_noop_jailer(tmp_path, sockdir):
    shim = sockdir
    log_fifo, metrics_fifo = os.path.join(shim, "fc-logs.fifo"), os.path.join(shim, "fc-metrics.fifo")
    os.mkfifo(log_fifo, 0o700)  # service.go buildVMConfiguration: syscall.Mkfifo, nobody reads them yet
    os.mkfifo(metrics_fifo, 0o700)
    stub = os.path.join(shim, "ctrstub0")
    with open(stub, "wb") as f:  # drive_handler.go newStubDrive: stub content, truncated to whole sectors
        f.write(b"stub-content")
        f.truncate(512)
    stub_id = base64.b32encode(b"ctrstub0").decode().rstrip("=")
    proc = subprocess.Popen([str(BRISK), "--api-sock", "firecracker.sock", "--id", "ctr-vm-1"], cwd=shim,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        sock = os.path.join(shim, "firecracker.sock")
        wait_for_socket(sock, proc)
        api = ApiClient(sock)
        put(api, "/logger", {"level": "Info", "log_path": log_fifo, "show_level": True, "show_log_origin": False})
        put(api, "/metrics", {"metrics_path": metrics_fifo})
        put(api, "/machine-config", {"mem_size_mib": 64, "vcpu_count": 1})
        put(api, "/boot-source", {"boot_args": "stop=3 console=ttyS0 noapic reboot=k panic=1 pci=off",
                                  "kernel_image_path": guest("counter")})
        put(api, "/drives/root_drive", {"drive_id": "root_drive", "is_read_only": True, "is_root_device": True,
                                        "path_on_host": disk(tmp_path / "root.img")})
        put(api, f"/drives/{stub_id}", {"drive_id": stub_id, "is_read_only": False, "is_root_device": False,
                                        "path_on_host": stub})
        put(api, "/vsock", {"guest_cid": 0, "uds_path": "firecracker.vsock", "vsock_id": "agent_api"})
        put(api, "/actions", {"action_type": "InstanceStart"})
        metrics = FifoReader(metrics_fifo)  # a reader that comes late gets whole lines
        metrics.start()
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == EXIT_GUEST_OK, err
        assert b"counter: PASS" in out
        metrics.join(10)
        check_kata_metrics(metrics.lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def kata_config(tmp_path, vm_dir, log_fifo, metrics_fifo):
    """fc.go fcInitConfiguration, as json.MarshalIndent(fcConfig) writes it (types/fcConfig.go order)."""
    boot_args = ("stop=3 console=ttyS0 pci=off reboot=k panic=1 iommu=off net.ifnames=0 random.trust_cpu=on "
                 "acpi=off")
    drives = [{"drive_id": "rootfs", "is_read_only": True, "is_root_device": False,
               "path_on_host": disk(vm_dir / "rootfs")}]
    for i in range(8):  # createDiskPool: fcDiskPoolSize empty files
        path = vm_dir / f"drive_{i}"
        path.write_bytes(b"")
        drives.append({"drive_id": f"drive_{i}", "is_read_only": False, "is_root_device": False,
                       "path_on_host": str(path)})
    cfg = {"boot-source": {"boot_args": boot_args, "kernel_image_path": guest("counter")},
           "machine-config": {"mem_size_mib": 64, "smt": False, "vcpu_count": 1},
           "vsock": {"guest_cid": 3, "uds_path": str(vm_dir / "kata.hvsock"), "vsock_id": "root"},
           "logger": {"level": "Error", "log_path": log_fifo},
           "metrics": {"metrics_path": metrics_fifo},
           "drives": drives}
    path = vm_dir / "fcConfig.json"
    path.write_text(json.dumps(cfg, indent="\t"))
    return str(path)


def test_kata_without_jailer(tmp_path, sockdir, procs):
    vm_dir = tmp_path
    log_fifo, metrics_fifo = os.path.join(sockdir, "logs.fifo"), os.path.join(sockdir, "metrics.fifo")
    os.mkfifo(log_fifo)
    os.mkfifo(metrics_fifo)
    log, metrics = FifoReader(log_fifo, open_first=True), FifoReader(metrics_fifo, open_first=True)
    log.start()
    metrics.start()
    sock = os.path.join(sockdir, "kata.sock")
    cfg = kata_config(tmp_path, vm_dir, log_fifo, metrics_fifo)
    b = BriskProcess(BRISK, ["--api-sock", sock, "--config-file", cfg])
    procs.append(b)
    assert b.wait(120) == EXIT_GUEST_OK, b.err
    assert "counter: PASS" in b.out
    metrics.join(10)
    check_kata_metrics(metrics.lines)
