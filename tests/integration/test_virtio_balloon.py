"""The memory balloon (virtio 1.2 section 5.5, Firecracker v1.7.0's): the conformance and hostile guest
(guests/virtio-balloon.c) against brisk through the API, brisk's RSS falling when the guest inflates, the
statistics queue, firecracker-containerd's calls (through the Go SDK: PUT /balloon with stats_polling_interval_s
omitted when 0, GET /balloon, PATCH /balloon, GET and PATCH /balloon/statistics), Firecracker's pre/post-boot
rules and messages, --balloon, --config-file, and snapshot/restore with the balloon inflated. Needs KVM."""
import json
import os
import re
import time

import pytest

from apiclient import BriskProcess
from conftest import BRISK, EXIT_USAGE, guest, run_brisk

pytestmark = pytest.mark.usefixtures("kvm")

NOT_AFTER = "The requested operation is not supported after starting the microVM."
NOT_BEFORE = "The requested operation is not supported before starting the microVM."
ERR = "Balloon config error: Error creating the balloon device: "
NAME = "virtio-balloon"
MIB = 1 << 20


class Brisk(BriskProcess):
    def __init__(self, args, sock=None):
        super().__init__(BRISK, args, sock)

    def wait_for(self, regex, timeout=60.0):
        r = re.compile(regex, re.M)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = r.search(self.out)
            if m:
                return m
            if self.proc.poll() is not None:
                time.sleep(0.1)
                break
            time.sleep(0.02)
        raise AssertionError(f"no /{regex}/ (exit {self.proc.poll()})\nstdout:\n{self.out[-3000:]}\n"
                             f"stderr:\n{self.err[-3000:]}")

    def rss(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024


def fault(r):
    assert r.status == 400, r
    return r.fault


def start(procs, sockdir, name="b", log="info"):
    sock = os.path.join(sockdir, f"{name}.sock")
    b = Brisk(["--api-sock", sock, "--log-level", log], sock=sock)
    procs.append(b)
    return b


def configure(b, balloon, words="wait_ms=30000", mem=128):
    b.api.boot_source(guest(NAME), words)
    b.api.machine_config(1, mem)
    r = b.api.put("/balloon", balloon)
    assert r.status == 204, r


def checks(out):
    return dict(re.findall(rf"^{NAME}: CHECK (\S+): (PASS|FAIL)", out, re.M))


@pytest.mark.security
def test_balloon_inflate_stats_deflate_hostile(procs, sockdir, tmp_path):
    """The whole cycle through the API, as firecracker-containerd drives it: PUT /balloon (16 MiB, statistics
    every second) before boot, the guest inflates 16 MiB of the 32 it touched and brisk's RSS falls by about
    that, GET /balloon and /balloon/statistics report target, actual and the guest's numbers, PATCH /balloon
    lowers the target and the guest deflates, PATCH /balloon/statistics changes the interval but cannot turn
    statistics off; then the guest's hostile PFNs and buffers (docs/security.md cases 58-60) are dropped and
    counted, the VM runs on and no page outside the balloon changed. The metrics' balloon group counts it."""
    b = start(procs, sockdir)
    metrics = tmp_path / "metrics.json"
    b.api.ok("PUT", "/metrics", {"metrics_path": str(metrics)})
    configure(b, {"amount_mib": 0, "deflate_on_oom": True, "stats_polling_interval_s": 1})
    assert b.api.get("/balloon").json == {"amount_mib": 0, "deflate_on_oom": True, "stats_polling_interval_s": 1}
    assert fault(b.api.patch("/balloon", {"amount_mib": 4})) == NOT_BEFORE
    assert fault(b.api.get("/balloon/statistics")) == NOT_BEFORE
    b.api.start()
    b.wait_for(rf"^{NAME}: touched 8192 pages$")
    b.wait_for(rf"^{NAME}: CHECK stats_post: PASS")
    before = b.rss()
    assert before >= 32 * MIB, before  # the 32 MiB the guest wrote are brisk's
    assert b.api.patch("/balloon", {"amount_mib": 16}).status == 204  # the guest inflates on the config change
    b.wait_for(rf"^{NAME}: inflated 4096 pages, actual 4096$")
    after = b.rss()
    # the guest touched 32 MiB and gave 16 MiB back: brisk holds at least 12 MiB less
    assert before - after >= 12 * MIB, (before, after)
    print(f"RSS {before / MIB:.1f} MiB before inflating 16 MiB, {after / MIB:.1f} MiB after")
    b.wait_for(rf"^{NAME}: CHECK stats_returned: PASS")
    assert b.api.get("/balloon").json == {"amount_mib": 16, "deflate_on_oom": True, "stats_polling_interval_s": 1}
    deadline = time.monotonic() + 10
    while True:
        s = b.api.get("/balloon/statistics")
        assert s.status == 200, s
        if s.json.get("free_memory") == 987654321 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert s.json == {"target_pages": 4096, "actual_pages": 4096, "target_mib": 16, "actual_mib": 16,
                      "swap_in": 7, "free_memory": 987654321, "total_memory": 128 * MIB}, s
    assert list(s.json)[:4] == ["target_pages", "actual_pages", "target_mib", "actual_mib"]
    # statistics cannot be switched off after boot; the interval can change
    assert fault(b.api.patch("/balloon/statistics", {"stats_polling_interval_s": 0})) == ERR + "StatisticsStateChange"
    assert b.api.patch("/balloon/statistics", {"stats_polling_interval_s": 2}).status == 204
    # the target cannot exceed the memory, nor (pages) 32 bits
    assert fault(b.api.patch("/balloon", {"amount_mib": 129})) == ERR + "TooManyPagesRequested"
    assert fault(b.api.patch("/balloon", {"amount_mib": 33554432})) == ERR + "TooManyPagesRequested"
    assert fault(b.api.put("/balloon", {"amount_mib": 1, "deflate_on_oom": False})) == NOT_AFTER
    assert b.api.patch("/balloon", {"amount_mib": 4}).status == 204
    b.wait_for(rf"^{NAME}: deflated to 1024 pages, actual 1024$")
    assert b.api.get("/balloon").json == {"amount_mib": 4, "deflate_on_oom": True, "stats_polling_interval_s": 2}
    s = b.api.get("/balloon/statistics").json
    assert (s["target_pages"], s["actual_pages"], s["target_mib"], s["actual_mib"]) == (1024, 1024, 4, 4), s
    cfg = b.api.get("/vm/config").json
    assert cfg["balloon"] == {"amount_mib": 4, "deflate_on_oom": True, "stats_polling_interval_s": 2}, cfg
    b.wait_for(rf"^{NAME}: hostile done$")
    b.proc.wait(timeout=60)
    b.join()
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    total = {k: sum(line["balloon"][k] for line in lines) for k in lines[0]["balloon"]}
    # notifications: 16 inflate buffers + 5 hostile ones; 12 deflate buffers + 1; the stats buffer twice at least
    assert total["inflate_count"] >= 2 and total["deflate_count"] >= 2, total
    assert total["stats_updates_count"] >= 2 and total["event_fails"] == 3, total
    c = checks(b.out)
    fails = [k for k, v in c.items() if v == "FAIL"]
    assert not fails, b.out
    for k in ("bringup", "inflate", "inflated_pages_zero", "other_pages_kept", "stats_returned", "target_lowered",
              "deflate", "deflated_page_usable", "pfn_past_ram", "pfn_mmio_hole", "pfn_max", "pfn_deflate_past_ram",
              "too_many_pfns", "odd_length", "writable_buffer", "refused_pages_kept"):
        assert c.get(k) == "PASS", (k, b.out)
    m = re.search(r"virtio-balloon: (\d+) pages inflated, (\d+) deflated, (\d+) PFNs outside RAM dropped", b.err)
    assert m and [int(x) for x in m.groups()] == [4096, 3072, 14], b.err
    assert b.err.count("malformed request") == 3, b.err


@pytest.mark.security
def test_balloon_api_rules(procs, sockdir):
    """Firecracker's test_api_balloon: PATCH before a balloon exists or before boot fails, PUT replaces, the
    target is bounded by the memory, GET works before boot; after boot PUT is refused and PATCH says the driver is
    not active while the guest has not set DRIVER_OK; a balloon without statistics has no /balloon/statistics."""
    b = start(procs, sockdir)
    assert fault(b.api.get("/balloon")) == "Balloon config error: No balloon device found."
    assert fault(b.api.patch("/balloon", {"amount_mib": 0})) == NOT_BEFORE
    assert b.api.put("/balloon", {"amount_mib": 1, "deflate_on_oom": True}).status == 204
    assert b.api.put("/balloon", {"amount_mib": 0, "deflate_on_oom": False, "stats_polling_interval_s": 5}).status \
        == 204
    assert b.api.get("/balloon").json == {"amount_mib": 0, "deflate_on_oom": False, "stats_polling_interval_s": 5}
    assert fault(b.api.put("/balloon", {"amount_mib": 1024, "deflate_on_oom": False})) == \
        "Balloon config error: Amount of pages requested is too large."
    # the shapes: required fields, types, unknown keys
    for body, word in [({"deflate_on_oom": True}, "amount_mib"), ({"amount_mib": 1}, "deflate_on_oom"),
                       ({"amount_mib": -1, "deflate_on_oom": True}, "amount_mib"),
                       ({"amount_mib": 1, "deflate_on_oom": "yes"}, "deflate_on_oom"),
                       ({"amount_mib": 1, "deflate_on_oom": True, "stats_polling_interval_s": 65536},
                        "stats_polling_interval_s"),
                       ({"amount_mib": 1, "deflate_on_oom": True, "foo": 1}, "foo")]:
        assert word in fault(b.api.put("/balloon", body)), body
    assert b.api.get("/balloon").json["stats_polling_interval_s"] == 5  # a refused PUT changed nothing
    # the memory cannot go below the target once a balloon is set
    assert b.api.put("/balloon", {"amount_mib": 64, "deflate_on_oom": False}).status == 204
    assert "smaller than the previously set balloon" in fault(b.api.patch("/machine-config", {"mem_size_mib": 32}))
    assert "incompatible with memory ballooning" in fault(b.api.patch("/machine-config", {"huge_pages": "2M"}))
    # a guest that never drives the balloon (the counter): its driver is never active
    b.api.boot_source(guest("counter"))
    b.api.put("/balloon", {"amount_mib": 8, "deflate_on_oom": False})
    b.api.start()
    assert fault(b.api.put("/balloon", {"amount_mib": 3, "deflate_on_oom": False})) == NOT_AFTER
    assert fault(b.api.patch("/balloon", {"amount_mib": 4})) == ERR + "DeviceNotActive"
    assert b.api.get("/balloon").json == {"amount_mib": 8, "deflate_on_oom": False, "stats_polling_interval_s": 0}


@pytest.mark.security
def test_balloon_statistics_disabled_and_absent(procs, sockdir):
    """GET /balloon/statistics without statistics is StatisticsDisabled; with no balloon, DeviceNotFound."""
    b = start(procs, sockdir)
    configure(b, {"amount_mib": 2, "deflate_on_oom": False}, words="wait_ms=20000 touch=4")
    b.api.start()
    b.wait_for(rf"^{NAME}: inflated 512 pages")
    assert fault(b.api.get("/balloon/statistics")) == ERR + "StatisticsDisabled"
    assert fault(b.api.patch("/balloon/statistics", {"stats_polling_interval_s": 3})) == ERR + "StatisticsStateChange"
    assert b.api.patch("/balloon/statistics", {"stats_polling_interval_s": 0}).status == 204
    assert b.api.get("/balloon").json == {"amount_mib": 2, "deflate_on_oom": False, "stats_polling_interval_s": 0}
    b.kill()
    c = start(procs, sockdir, "c")
    c.api.boot_source(guest("counter"))
    c.api.start()
    assert fault(c.api.get("/balloon")) == ERR + "DeviceNotFound"
    assert fault(c.api.patch("/balloon", {"amount_mib": 1})) == ERR + "DeviceNotFound"
    assert fault(c.api.get("/balloon/statistics")) == ERR + "DeviceNotFound"


def test_balloon_command_line_and_config_file(tmp_path):
    """--balloon SIZE,deflate_on_oom,stats=S offers the features (STATS_VQ bit 1, DEFLATE_ON_OOM bit 2) and the
    target; its errors are usage errors; --config-file's "balloon" section builds the same device."""
    p = run_brisk("run", "--kernel", guest(NAME), "--balloon", "2,deflate_on_oom,stats=1", "--cmdline",
                  "wait_ms=500 touch=4", timeout=120)
    assert "offered 0x130000006" in p.stdout, p.stdout
    assert re.search(rf"^{NAME}: inflated 512 pages, actual 512$", p.stdout, re.M), p.stdout
    p = run_brisk("run", "--kernel", guest(NAME), "--balloon", "2", "--cmdline", "wait_ms=500 touch=4",
                  timeout=120)
    assert "offered 0x130000000" in p.stdout, p.stdout
    for bad in ["3K", "x", "2,stats=70000", "2,bogus"]:
        p = run_brisk("run", "--balloon", bad)
        assert p.returncode == EXIT_USAGE and "--balloon" in p.stderr, (bad, p.stderr)
    p = run_brisk("run", "--memory", "64", "--balloon", "65")
    assert p.returncode == EXIT_USAGE and "more than the VM's memory" in p.stderr, p.stderr
    cfg = {"boot-source": {"kernel_image_path": guest(NAME), "boot_args": "wait_ms=500 touch=4"},
           "machine-config": {"vcpu_count": 1, "mem_size_mib": 128},
           "balloon": {"amount_mib": 2, "deflate_on_oom": True, "stats_polling_interval_s": 0}}
    path = tmp_path / "vm.json"
    path.write_text(json.dumps(cfg))
    p = run_brisk("--config-file", str(path), "--no-api", timeout=120)
    assert "offered 0x130000004" in p.stdout, p.stdout + p.stderr
    assert re.search(rf"^{NAME}: inflated 512 pages", p.stdout, re.M), p.stdout


def test_balloon_snapshot_restore(procs, sockdir, tmp_path):
    """A snapshot keeps the balloon: its statistics interval as PATCHed (not the boot configuration's), the
    statistics buffer the device held, the queues. The restored guest then inflates on PATCH: its RAM is a
    private mapping of the memory file, where MADV_DONTNEED alone would read the snapshot's page back; the
    guest's inflated_pages_zero check proves the pages were really replaced. Deflate and the hostile steps
    follow in the restored process."""
    b = start(procs, sockdir)
    configure(b, {"amount_mib": 0, "deflate_on_oom": False, "stats_polling_interval_s": 1})
    b.api.start()
    b.wait_for(rf"^{NAME}: CHECK stats_post: PASS")
    assert b.api.patch("/balloon/statistics", {"stats_polling_interval_s": 3}).status == 204
    b.api.pause()
    state, mem = tmp_path / "state", tmp_path / "mem"
    b.api.snapshot_create(state, mem)
    b.kill()
    r = start(procs, sockdir, "r", log=os.environ.get("BALLOON_LOG", "info"))
    r.api.snapshot_load(state, mem, resume_vm=True)
    assert r.api.get("/balloon").json == {"amount_mib": 0, "deflate_on_oom": False, "stats_polling_interval_s": 3}
    s = r.api.get("/balloon/statistics").json
    assert s["target_pages"] == 0 and s["free_memory"] == 123456789 and s["total_memory"] == 128 * MIB, s
    assert r.api.patch("/balloon", {"amount_mib": 16}).status == 204
    r.wait_for(rf"^{NAME}: inflated 4096 pages, actual 4096$")
    r.wait_for(rf"^{NAME}: CHECK stats_returned: PASS", timeout=20)
    assert r.api.patch("/balloon", {"amount_mib": 2}).status == 204
    r.wait_for(rf"^{NAME}: deflated to 512 pages, actual 512$")
    r.wait_for(rf"^{NAME}: hostile done$")
    r.proc.wait(timeout=60)
    r.join()
    out = b.out + r.out
    c = checks(out)
    assert not [k for k, v in c.items() if v == "FAIL"], out + "\n--- restored brisk's stderr ---\n" + r.err[-4000:]
    for k in ("inflated_pages_zero", "other_pages_kept", "stats_returned", "deflated_page_usable",
              "refused_pages_kept"):
        assert c.get(k) == "PASS", (k, out)
    assert re.search(r"virtio-balloon: 4096 pages inflated, 3584 deflated", r.err), r.err
