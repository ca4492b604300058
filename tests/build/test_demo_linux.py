"""`make demo-linux` where this host's KVM cannot run Linux (scripts/linux-probe.sh answers 1): the demo script says
why and what it does instead, never a bare `make: *** ... Error 1`. With the nested KVM switched off
(BRISK_NO_NESTED) it says there is nothing to boot it in, exits 0 and fetches nothing; with it, it boots the demo
in scripts/nested-kvm.sh (tried by hand: `make demo-linux`, the scripted shell session in full). Runs on the host
with the built tree (build/brisk, build/guests), as scripts/check.sh runs tests/build."""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_demo_linux_without_a_vm_to_boot_in_says_why():
    if not (ROOT / "build" / "brisk").exists() or not (ROOT / "build" / "guests" / "int3probe.elf").exists():
        pytest.skip("build/brisk and the guests are not built (make all guests)")
    probe = subprocess.run(["scripts/linux-probe.sh"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    if probe.returncode != 1:
        pytest.skip(f"scripts/linux-probe.sh answered {probe.returncode}: the demo boots Linux on this host itself")
    env = {k: v for k, v in os.environ.items() if k not in ("BRISK", "BUILD")}
    p = subprocess.run(["tests/linux/demo.sh"], cwd=ROOT, env={**env, "BRISK_NO_NESTED": "1"},
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"demo-linux: {probe.stdout.strip()}; nothing to boot it in" in p.stdout, p.stdout + p.stderr
    assert "fetch-kernel" not in p.stdout + p.stderr, "the kernel was fetched for a demo that cannot run"
