"""Debian's stock kernel's virtio_balloon on brisk's balloon (docs/devices.md "Balloon"), one boot.

vmlinuz with build/linux/initramfs-virtio.cpio.gz (its modules include virtio_balloon: fetch-kernel.sh) and
  --balloon 0,stats=1 --api-sock S
and the command line brisk's default (less acpi=off: Debian's kernel finds virtio-mmio in the DSDT) plus
  brisk.virtio=1 brisk.poweroff=auto brisk.balloon=TOUCH
The init's balloon mode (tests/linux/init_balloon.c) writes TOUCH MiB and frees them (resident in brisk, free
in the guest), prints MemTotal, then follows it. The test
  1. waits for "brisk-balloon: touched", reads brisk's VmRSS, PATCHes /balloon to TARGET MiB;
  2. waits until GET /balloon/statistics says actual_mib == TARGET (the driver wrote `actual`) and the guest
     printed "inflated" (MemTotal fell by at least 16 MiB: virtio_balloon without DEFLATE_ON_OOM takes the pages
     out of MemTotal), reads VmRSS again: brisk holds at least TARGET/2 MiB less;
  3. checks the statistics the kernel reported (free_memory, total_memory, available_memory, ...: Linux's
     update_balloon_stats) and that PATCH /balloon/statistics changes the interval;
  4. PATCHes /balloon to 0: the guest prints "deflated", actual_mib is back to 0, and the guest powers off 5 s
     later (status 0).
"""
import os
import re
import sys
import tempfile
import time

import pytest

from .conftest import BRISK, LINUX, MEMORY, ROOT, TIMEOUT, _report, brisk_default_cmdline, brisk_run_help, kernel

sys.path.insert(0, str(ROOT / "tests" / "integration"))
from apiclient import ApiClient, BriskProcess, wait_for_socket  # noqa: E402

pytestmark = pytest.mark.usefixtures("linux_kvm")

INITRD = LINUX / "initramfs-virtio.cpio.gz"
TOUCH, TARGET = 96, 64  # MiB the guest writes and frees; the balloon's target
MIB = 1 << 20


class Proc(BriskProcess):
    def __init__(self, args):
        super().__init__(BRISK, args, out_files=True)

    @property
    def out(self):
        return super().out.replace("\r", "")

    def describe(self):
        return f"brisk {' '.join(self.args)}\nexit {self.proc.poll()}\n--- stdout ---\n{self.out[-4000:]}\n" \
               f"--- stderr ---\n{self.err[-3000:]}"

    def wait_for(self, regex, timeout):
        r = re.compile(regex, re.M)
        deadline = time.monotonic() + timeout
        while True:
            m = r.search(self.out)
            if m:
                return m
            if self.proc.poll() is not None or time.monotonic() > deadline:
                time.sleep(0.2)
                raise AssertionError(f"no /{regex}/ (exit {self.proc.poll()})\n{self.describe()}")
            time.sleep(0.1)

    def rss(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024


def wait_stats(api, p, pred, timeout):
    deadline = time.monotonic() + timeout
    while True:
        s = api.get("/balloon/statistics")
        assert s.status == 200, s
        if pred(s.json):
            return s.json
        if time.monotonic() > deadline or p.proc.poll() is not None:
            raise AssertionError(f"statistics never matched: {s.json}\n{p.describe()}")
        time.sleep(0.5)


def test_linux_inflates_and_deflates():
    if not INITRD.exists():
        pytest.skip(f"{INITRD} missing: tests/linux/run.sh builds it")
    if not (LINUX / "modules" / "virtio_balloon.ko").exists() and \
            "virtio_balloon" not in (LINUX / "modules" / "builtin").read_text(errors="replace"):
        pytest.skip("no virtio_balloon module in build/linux/modules (tests/linux/fetch-kernel.sh)")
    sockdir = tempfile.mkdtemp(prefix="blb", dir=os.environ.get("TMPDIR") or "/tmp")
    sock = os.path.join(sockdir, "api.sock")
    words = [w for w in brisk_default_cmdline(brisk_run_help()).split()
             if w != "acpi=off" and not w.startswith("console=")]
    words += ["console=ttyS0", "brisk.virtio=1", "brisk.poweroff=auto", f"brisk.balloon={TOUCH}"]
    p = Proc(["run", "--kernel", kernel("vmlinuz"), "--initrd", INITRD, "--memory", MEMORY, "--balloon",
              "0,stats=1", "--api-sock", sock, "--log-level", "info", "--cmdline", " ".join(words)])
    try:
        wait_for_socket(sock, p.proc, timeout=60)
        api = ApiClient(sock, timeout=120)
        t0 = time.monotonic()
        p.wait_for(r"^brisk-balloon: touched \d+ MiB", TIMEOUT)
        assert re.search(r"virtio\d+ type 5 ", p.out), f"the kernel bound no balloon\n{p.describe()}"
        before = p.rss()
        assert before >= TOUCH * MIB, before
        r = api.patch("/balloon", {"amount_mib": TARGET})
        assert r.status == 204, r
        t1 = time.monotonic()
        s = wait_stats(api, p, lambda j: j["actual_mib"] == TARGET, 120)
        inflate_s = time.monotonic() - t1
        p.wait_for(r"^brisk-balloon: inflated MemTotal", 60)
        after = p.rss()
        assert before - after >= TARGET // 2 * MIB, (before, after)
        assert s["target_mib"] == TARGET and s["target_pages"] == TARGET * 256, s
        s = wait_stats(api, p, lambda j: "free_memory" in j and "total_memory" in j, 30)
        for k in ("swap_in", "swap_out", "major_faults", "minor_faults", "free_memory", "total_memory",
                  "available_memory", "disk_caches"):
            assert k in s, (k, s)
        assert 0 < s["free_memory"] < s["total_memory"] <= 256 * MIB, s
        assert api.patch("/balloon/statistics", {"stats_polling_interval_s": 2}).status == 204
        assert api.get("/balloon").json == {"amount_mib": TARGET, "deflate_on_oom": False,
                                            "stats_polling_interval_s": 2}
        assert api.patch("/balloon", {"amount_mib": 0}).status == 204
        p.wait_for(r"^brisk-balloon: deflated MemTotal", 120)
        wait_stats(api, p, lambda j: j["actual_mib"] == 0, 4)  # the guest lingers 5 s before powering off
        p.proc.wait(timeout=TIMEOUT)
        p.join()
        assert p.proc.returncode == 0, p.describe()
        m = re.search(r"virtio-balloon: (\d+) pages inflated, (\d+) deflated, (\d+) PFNs outside RAM", p.err)
        assert m and int(m.group(1)) >= TARGET * 256 and int(m.group(2)) >= TARGET * 256 and m.group(3) == "0", \
            p.err
        _report.append(f"balloon: Linux inflated {TARGET} MiB in {inflate_s:.1f} s; brisk's RSS "
                       f"{before / MIB:.0f} -> {after / MIB:.0f} MiB; boot to touched {t1 - t0:.1f} s")
    finally:
        p.kill()
