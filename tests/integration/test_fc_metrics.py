"""Firecracker's metrics and logger as Firecracker v1.7.0 writes them (docs/api.md, "Metrics" and "Logger"):
FIFOs made with mkfifo before the PUT (as firecracker-containerd does) and read later, counters that move
for a guest's serial and disk I/O, the lines at boot, on FlushMetrics and at the end, the boot timer."""
import json
import os
import re
import select
import signal
import time

from conftest import EXIT_STOPPED, guest, run_brisk
from test_api import boot_counter, fresh  # noqa: F401 (the fixture)

FC_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9} \[anonymous-instance:[^\]:]+(:[A-Z]+)?(:[^\]]+:\d+)?\] ")
BOOT_TIME = re.compile(r"\] Guest-boot-time = +(\d+) us (\d+) ms, +(\d+) CPU us (\d+) CPU ms$")


def drain(fd, timeout=5.0):
    """What the FIFO holds now (waiting up to `timeout` for a first byte)."""
    data = b""
    deadline = time.monotonic() + timeout
    while True:
        r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()) if not data else 0.2)
        if not r:
            return data
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return data
        data += chunk


def whole_lines(data):
    assert data.endswith(b"\n"), data[-200:]
    return data.decode().splitlines()


def write_config(tmp_path, cfg):
    path = tmp_path / "vm.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_fifos_made_before_the_put_need_no_reader(kvm, fresh, sockdir):
    """firecracker-containerd makes both FIFOs with mkfifo and PUTs them before anyone reads: accepted (opened
    read-write, as Firecracker's O_RDWR|O_NONBLOCK); a reader attached later gets whole lines, the metrics
    line written when the VM was built among them."""
    log, metrics = os.path.join(sockdir, "log.fifo"), os.path.join(sockdir, "metrics.fifo")
    os.mkfifo(log)
    os.mkfifo(metrics)
    fresh.api.ok("PUT", "/logger", {"log_path": log, "level": "Debug", "show_level": True})
    fresh.api.ok("PUT", "/metrics", {"metrics_path": metrics})
    boot_counter(fresh)
    fresh.api.ok("PUT", "/actions", {"action_type": "FlushMetrics"})
    mfd = os.open(metrics, os.O_RDONLY | os.O_NONBLOCK)
    lfd = os.open(log, os.O_RDONLY | os.O_NONBLOCK)
    try:
        lines = [json.loads(line) for line in whole_lines(drain(mfd))]
        assert len(lines) >= 2, lines  # the line at boot, FlushMetrics's
        assert lines[0]["put_api_requests"]["logger_count"] == 1, lines[0]["put_api_requests"]
        assert lines[0]["put_api_requests"]["metrics_count"] == 1
        assert lines[-1]["put_api_requests"]["metrics_count"] == 0  # a delta: counted once, in the first line
        assert lines[-1]["put_api_requests"]["actions_count"] >= 1
        text = whole_lines(drain(lfd))
        assert text and all(FC_LINE.match(line) for line in text), text
        assert any(":DEBUG] API PUT /metrics" not in line for line in text)
        fresh.proc.send_signal(signal.SIGTERM)
        assert fresh.wait() == EXIT_STOPPED
        end = [json.loads(line) for line in whole_lines(drain(mfd))]
        assert end, "no metrics line when the VM ended"
        assert any("stopping on Terminated" in line for line in whole_lines(drain(lfd)))
    finally:
        os.close(mfd)
        os.close(lfd)


def test_a_lagging_reader_loses_lines_not_the_vm(kvm, fresh, sockdir):
    """Nobody reads the metrics FIFO: once it is full each line is dropped whole (FlushMetrics: 400, as
    Firecracker's failed write) and counted in logger.missed_metrics_count; the VMM answers all the while; what a
    reader finds is whole lines, and the next line written carries the dropped lines' counts."""
    metrics = os.path.join(sockdir, "metrics.fifo")
    os.mkfifo(metrics)
    fresh.api.ok("PUT", "/metrics", {"metrics_path": metrics})
    boot_counter(fresh)
    t0 = time.monotonic()
    dropped = 0
    for _ in range(40):  # a line is ~5 KB; the FIFO holds 16 pages
        r = fresh.api.put("/actions", {"action_type": "FlushMetrics"})
        assert r.status == 204 or (r.status == 400 and "Cannot flush metrics" in r.fault), r
        dropped += r.status == 400
    assert time.monotonic() - t0 < 20 and dropped >= 20, dropped
    fd = os.open(metrics, os.O_RDONLY | os.O_NONBLOCK)
    try:
        lines = [json.loads(line) for line in whole_lines(drain(fd))]
        assert 2 <= len(lines) <= 41 - dropped, (len(lines), dropped)
        fresh.api.ok("PUT", "/actions", {"action_type": "FlushMetrics"})
        new = [json.loads(line) for line in whole_lines(drain(fd))]
        missed = sum(m["logger"]["missed_metrics_count"] for m in lines + new)
        assert missed == dropped, (missed, dropped)
        actions = sum(m["put_api_requests"]["actions_count"] for m in lines + new)
        assert actions == 42, actions  # InstanceStart and 41 FlushMetrics: none lost with the dropped lines
    finally:
        os.close(fd)


def test_counters_move_for_serial_and_disk_io(kvm, tmp_path):
    """blk-counter on a drive "rootfs" from a config file: block_rootfs and the aggregate count its reads and
    writes (bytes too), the UART its output bytes, the vCPUs their exits; the line at the end has them."""
    img = tmp_path / "disk.img"
    img.write_bytes(bytes(1 << 20))
    metrics = tmp_path / "metrics.json"
    cfg = {"boot-source": {"kernel_image_path": guest("blk-counter"), "boot_args": "stop=10"},
           "drives": [{"drive_id": "rootfs", "path_on_host": str(img), "is_root_device": True,
                       "is_read_only": False}],
           "metrics": {"metrics_path": str(metrics)}}
    p = run_brisk("run", "--config-file", write_config(tmp_path, cfg), timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert len(lines) >= 2, "a line at boot and one at the end"
    total = {k: sum(m["block_rootfs"][k] for m in lines) for k in ("read_count", "write_count", "read_bytes",
                                                                     "write_bytes", "queue_event_count")}
    assert total["write_count"] >= 10 and total["read_count"] >= 20, total
    assert total["write_bytes"] >= 10 * 512 and total["read_bytes"] >= 20 * 512, total
    assert total["queue_event_count"] > 0, total
    assert sum(m["block"]["write_count"] for m in lines) == total["write_count"]
    assert sum(m["uart"]["write_count"] for m in lines) >= len("blk 1 ok\n") * 10
    assert sum(m["vcpu"]["exit_mmio_write"] for m in lines) > 0
    assert sum(m["i8042"]["reset_count"] for m in lines) == 1  # the guest's reset at the end
    assert list(lines[-1])[-1] == "brisk" and list(lines[-1])[0] == "utc_timestamp_ms"


def test_boot_timer_line(kvm, tmp_path):
    """--boot-timer: the guest's byte 123 at 0xd0000000 logs Firecracker's Guest-boot-time line once (its
    wider, other-valued and offset writes do not); without it, no line."""
    log = tmp_path / "fc.log"
    cfg = {"boot-source": {"kernel_image_path": guest("boot-timer")},
           "logger": {"log_path": str(log), "level": "Info"}}
    path = write_config(tmp_path, cfg)
    p = run_brisk("run", "--boot-timer", "--config-file", path, timeout=60)
    assert p.returncode == 0, p.stderr
    hits = [BOOT_TIME.search(line) for line in log.read_text().splitlines()]
    hits = [m for m in hits if m]
    assert len(hits) == 1, log.read_text()
    us, ms, cpu_us, cpu_ms = (int(x) for x in hits[0].groups())
    assert us // 1000 == ms and cpu_us // 1000 == cpu_ms and 0 < us < 60_000_000, hits[0].group(0)
    log.unlink()
    p = run_brisk("run", "--config-file", path, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "Guest-boot-time" not in log.read_text()
