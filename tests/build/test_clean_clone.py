"""The build from a clean clone, as a new user or CI runs it (issue 8: plain `make` built only the test guests).

Copies what a commit would hold (tracked files plus untracked ones git does not ignore) into a fresh
directory and runs the README's commands there: `make` alone must produce build/brisk; `make -n demo` and
`make -n check` must parse. Runs on the host (scripts/check.sh), never inside the nested KVM.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def tree_files():
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: nothing to clone")
    return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    dst = tmp_path_factory.mktemp("clone")
    for f in tree_files():
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dst / f)
    return dst


def make(clone, *args, timeout=900):
    env = {k: v for k, v in os.environ.items() if k not in ("BUILD", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "BRISK")}
    return subprocess.run(["make", "-C", str(clone), *args], env=env, capture_output=True, text=True, timeout=timeout)


def test_plain_make_builds_brisk(clone):
    p = make(clone)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    brisk = clone / "build" / "brisk"
    assert brisk.exists(), f"plain `make` did not produce build/brisk:\n{p.stdout[-2000:]}"
    v = subprocess.run([str(brisk), "--version"], capture_output=True, text=True, timeout=30)
    assert v.returncode == 0 and v.stdout.startswith("brisk "), v.stdout + v.stderr


@pytest.mark.parametrize("target", ["demo", "check", "bench", "bench-order", "check-linux", "demo-linux", "fuzz"])
def test_readme_targets_parse(clone, target):
    p = make(clone, "-n", target)
    assert p.returncode == 0, p.stderr[-2000:]
